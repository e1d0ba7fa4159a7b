/* SPDX-License-Identifier: GPL-3.0-or-later
 * bench_time.c: `hytree bench --time T`, accuracy per time. Owns its
 * command line, the grid of configurations (the Cartesian product of the
 * --grid values), the parameters of each (the schema's defaults, then -P,
 * then --grid, then the bench's own keys), the table and the CSV. Each
 * configuration is a real run (hy_run_embedded: run.c's set-up, `auto`
 * values and step loop) into its own OutputDir; what it reports is read from
 * that run, and the force error of its final configuration from
 * bench_ref.c. One rank. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "bench_internal.h"
#include "io.h"
#include "params.h"
#include "run.h"

#define MAX_GRID 8        /* --grid keys */
#define MAX_CONFIGS 10000 /* configurations of a grid */
#define NAME "hytree bench" /* stands for the parameter file in the run's messages */

/* Keys the bench sets itself: -P and --grid may not. */
static const char *const owned[] = {"InitCondFile", "TimeEnd", "OutputDir", "SnapshotInterval", "RestartInterval",
                                    "RestartEverySoftSteps"};

void hy_bench_time_usage(FILE *out) {
  fputs("       hytree bench --time T [--ic plummer|hernquist|king|uniform|FILE] [--N N] [--seed S]\n"
        "                    [-P Key=Value ...] [--grid Key=v1,v2,... ...] [--sinks S] [--device D]\n"
        "                    [--csv FILE] [--keep DIR] [--verbose] [--quiet]\n"
        "  Accuracy per time: for each configuration of the grid (the product of the --grid\n"
        "  values; none: one configuration) integrate [t_IC, T] as `hytree run` with the\n"
        "  schema's defaults, then -P, then --grid, then InitCondFile (--ic; a generator gives\n"
        "  MODEL:N:SEED, default plummer, N 1048576, seed 1), TimeEnd T and no snapshots or\n"
        "  restart sets. One row per configuration: the wall time of the steps (the sum of\n"
        "  t_step in timings.csv: each step's kicks, drifts, trees, walks and transfers, and on\n"
        "  steps with an energy row its potentials; not counted: reading or generating the ICs,\n"
        "  the `auto` values, opening the device, building the kernels, the forces at the start,\n"
        "  the energy sums and the records written between steps), the steps, the largest\n"
        "  |dE/E| of energy.csv (a row every EnergyInterval, default every step), the force\n"
        "  error |a - a_ref|/|a_ref| (median, 99th percentile, maximum) of the last step's total\n"
        "  acceleration on S sampled particles (default 10000) against a double-precision direct\n"
        "  sum over all particles, and the walks' interactions per second of kernel time.\n"
        "  --device D    OpenCLDevice (as -P OpenCLDevice=D)\n"
        "  --csv FILE    the rows as CSV (hytree-plot-bench, with the plot scripts, draws them)\n"
        "  --keep DIR    keep each configuration's outputs in DIR/run-NNN (default: removed)\n"
        "  --verbose     the runs' own messages too\n",
        out);
}

/* ------------------------------------------------------------ options */

struct grid_key {
  char *key;
  char **vals;
  int n_vals;
};

struct topts {
  double t_end;
  const char *t_end_text; /* as given: TimeEnd in params-used.txt */
  const char *ic, *csv, *keep;
  unsigned long long n;
  unsigned long long seed;
  int n_given, seed_given, verbose;
  long sinks;
  char **ov; /* -P and --device overrides, in order */
  unsigned char *ov_mine; /* ov[k] was allocated here (--device) */
  int n_ov;
  struct grid_key grid[MAX_GRID];
  int n_grid;
};

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("hytree: error: bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs(" (see hytree bench --help)\n", stderr);
  va_end(ap);
  return 2;
}

static int is_owned(const char *key, size_t len) {
  for (size_t k = 0; k < sizeof owned / sizeof owned[0]; k++)
    if (strlen(owned[k]) == len && strncmp(owned[k], key, len) == 0) return 1;
  return 0;
}

static int is_param(const char *key) {
  size_t n;
  const struct hy_param_def *s = hy_params_schema(&n);
  for (size_t k = 0; k < n; k++)
    if (strcmp(s[k].key, key) == 0) return 1;
  return 0;
}

/* What sets a key the bench owns (key: its first len characters), for the message. */
static const char *owner_of(const char *key, size_t len) {
  if (len == 12 && strncmp(key, "InitCondFile", len) == 0) return "--ic, --N and --seed";
  if (len == 7 && strncmp(key, "TimeEnd", len) == 0) return "--time";
  if (len == 9 && strncmp(key, "OutputDir", len) == 0) return "the bench; --keep DIR keeps its outputs";
  return "the bench, which writes no snapshots or restart sets";
}

/* A number: the whole text, finite. */
static int parse_double(const char *v, double *out) {
  char *end;
  errno = 0;
  *out = strtod(v, &end);
  return errno == 0 && end != v && *end == '\0' && isfinite(*out) ? 0 : -1;
}

static int parse_ull(const char *v, unsigned long long *out) {
  char *end;
  errno = 0;
  *out = strtoull(v, &end, 10);
  return errno == 0 && end != v && *end == '\0' && v[0] != '-' ? 0 : -1;
}

/* -P Key=Value: any run parameter but the bench's own. */
static int add_override(struct topts *o, char *kv) {
  const char *eq = strchr(kv, '=');
  const size_t len = eq ? (size_t)(eq - kv) : strlen(kv);
  if (is_owned(kv, len))
    return usage_error("-P %s: %.*s is set by %s", kv, (int)len, kv, owner_of(kv, len));
  o->ov[o->n_ov++] = kv;
  return -1;
}

/* --grid Key=v1,v2,...: a run parameter, once, with distinct non-empty values. */
static int add_grid(struct topts *o, const char *arg) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg || eq[1] == '\0') return usage_error("--grid '%s': Key=v1,v2,... expected", arg);
  if (o->n_grid == MAX_GRID) return usage_error("--grid '%s': at most %d grid keys", arg, MAX_GRID);
  struct grid_key *g = &o->grid[o->n_grid];
  const size_t len = (size_t)(eq - arg);
  g->key = hy_malloc("bench grid", len + 1, 1);
  memcpy(g->key, arg, len);
  g->key[len] = '\0';
  o->n_grid++; /* freed with the others from here on */
  if (is_owned(g->key, len)) return usage_error("--grid %s: %s is set by %s", arg, g->key, owner_of(g->key, len));
  if (!is_param(g->key)) return usage_error("--grid %s: unknown parameter '%s'", arg, g->key);
  for (int k = 0; k + 1 < o->n_grid; k++)
    if (strcmp(o->grid[k].key, g->key) == 0) return usage_error("--grid %s: %s has a --grid already", arg, g->key);
  size_t n_max = 1;
  for (const char *c = eq + 1; *c; c++) n_max += *c == ',';
  g->vals = hy_calloc("bench grid", n_max, sizeof(char *));
  for (const char *v = eq + 1;;) {
    const char *c = strchr(v, ',');
    const size_t l = c ? (size_t)(c - v) : strlen(v);
    if (l == 0) return usage_error("--grid %s: an empty value", arg);
    g->vals[g->n_vals] = hy_malloc("bench grid", l + 1, 1);
    memcpy(g->vals[g->n_vals], v, l);
    g->vals[g->n_vals][l] = '\0';
    for (int k = 0; k < g->n_vals; k++)
      if (strcmp(g->vals[k], g->vals[g->n_vals]) == 0)
        return usage_error("--grid %s: the value '%s' twice", arg, g->vals[k]);
    g->n_vals++;
    if (!c) break;
    v = c + 1;
  }
  return -1;
}

/* An option with its value v (NULL: none left). Returns -1 to go on, else
 * the exit status. */
static int parse_time_option(const char *a, char *v, struct topts *o) {
  static const char *const known[] = {"--time", "--ic",     "--N",    "--seed",    "--sinks",      "-P",
                                      "--grid", "--device", "--csv",  "--keep",    "--schemes",    "--soft-steps",
                                      "--tree-build"};
  size_t k = 0;
  while (k < sizeof known / sizeof known[0] && strcmp(a, known[k]) != 0) k++;
  if (k == sizeof known / sizeof known[0]) return usage_error("unknown option '%s'", a);
  if (!v) return usage_error("%s needs a value", a);
  if (strcmp(a, "--time") == 0) {
    if (parse_double(v, &o->t_end) != 0 || !(o->t_end > 0.0)) return usage_error("--time '%s': a time > 0", v);
    o->t_end_text = v;
  } else if (strcmp(a, "--ic") == 0) {
    o->ic = v;
  } else if (strcmp(a, "--N") == 0) {
    if (parse_ull(v, &o->n) != 0 || o->n < 2)
      return usage_error("--N '%s': one particle count >= 2 with --time (a grid over N: one bench per N)", v);
    o->n_given = 1;
  } else if (strcmp(a, "--seed") == 0) {
    if (parse_ull(v, &o->seed) != 0) return usage_error("--seed '%s': a non-negative integer", v);
    o->seed_given = 1;
  } else if (strcmp(a, "--sinks") == 0) {
    char *end;
    o->sinks = strtol(v, &end, 10);
    if (*end != '\0' || end == v || o->sinks < 1) return usage_error("--sinks '%s': a particle count >= 1", v);
  } else if (strcmp(a, "-P") == 0) {
    return add_override(o, v);
  } else if (strcmp(a, "--grid") == 0) {
    return add_grid(o, v);
  } else if (strcmp(a, "--device") == 0) {
    const size_t l = strlen(v) + sizeof "OpenCLDevice=";
    char *kv = hy_malloc("bench device", l, 1);
    snprintf(kv, l, "OpenCLDevice=%s", v);
    o->ov_mine[o->n_ov] = 1;
    o->ov[o->n_ov++] = kv;
  } else if (strcmp(a, "--csv") == 0) {
    o->csv = v;
  } else if (strcmp(a, "--keep") == 0) {
    o->keep = v;
  } else { /* --schemes, --soft-steps, --tree-build */
    return usage_error("%s does not apply with --time (use --grid Scheme=..., -P TreeBuild=...)", a);
  }
  return -1;
}

static void free_topts(struct topts *o) {
  for (int k = 0; k < o->n_grid; k++) {
    for (int v = 0; v < o->grid[k].n_vals; v++) hy_free(o->grid[k].vals[v]);
    hy_free(o->grid[k].vals);
    hy_free(o->grid[k].key);
  }
  for (int k = 0; k < o->n_ov; k++)
    if (o->ov_mine[k]) hy_free(o->ov[k]);
  hy_free(o->ov);
  hy_free(o->ov_mine);
  memset(o, 0, sizeof *o);
}

static int is_generator(const char *ic) {
  static const char *const names[] = {"plummer", "hernquist", "king", "uniform"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
    if (strcmp(ic, names[k]) == 0) return 1;
  return 0;
}

/* The number of configurations, or -1 when above MAX_CONFIGS. */
static long n_configs(const struct topts *o) {
  long n = 1;
  for (int k = 0; k < o->n_grid; k++) {
    n *= o->grid[k].n_vals; /* n <= MAX_CONFIGS before, n_vals an int: no overflow */
    if (n > MAX_CONFIGS) return -1;
  }
  return n;
}

/* The checks across options, after all of them are read. */
static int check_topts(const struct topts *o) {
  if (!(o->t_end > 0.0)) return usage_error("--time T is needed in this mode");
  if (!is_generator(o->ic) && (o->n_given || o->seed_given))
    return usage_error("--N and --seed apply to a generator --ic, not to the file '%s'", o->ic);
  if (n_configs(o) < 0) return usage_error("--grid: more than %d configurations", MAX_CONFIGS);
  for (int k = 0; k < o->n_grid; k++) {
    const size_t len = strlen(o->grid[k].key);
    for (int j = 0; j < o->n_ov; j++)
      if (strncmp(o->ov[j], o->grid[k].key, len) == 0 && o->ov[j][len] == '=')
        return usage_error("--grid %s and -P %s: give %s once", o->grid[k].key, o->ov[j], o->grid[k].key);
  }
  return -1;
}

/* The command line of the --time mode. Returns -1 to go on, else the exit
 * status (0 after --help, 2 on a usage error). */
static int parse_time_args(int argc, char **argv, struct topts *o) {
  memset(o, 0, sizeof *o);
  o->ic = "plummer";
  o->n = 1048576;
  o->seed = 1;
  o->sinks = 10000;
  o->ov = hy_calloc("bench overrides", (size_t)argc + 1, sizeof(char *));
  o->ov_mine = hy_calloc("bench overrides", (size_t)argc + 1, 1);
  for (int i = 1; i < argc; i++) {
    char *a = argv[i];
    int status = -1;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      hy_bench_usage(stdout);
      return 0;
    } else if (strcmp(a, "--quiet") == 0) {
      hy_log_set_quiet(1);
    } else if (strcmp(a, "--verbose") == 0) {
      o->verbose = 1;
    } else if (strncmp(a, "-P", 2) == 0 && a[2] != '\0') {
      status = add_override(o, a + 2);
    } else {
      status = parse_time_option(a, i + 1 < argc ? argv[i + 1] : NULL, o);
      i++;
    }
    if (status >= 0) return status;
  }
  return check_topts(o);
}

/* -------------------------------------------------------- parameters */

/* A growing text. */
struct sbuf {
  char *s;
  size_t len, cap;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const int l = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (l < 0) hy_die("bench: formatting text failed");
  const size_t need = b->len + (size_t)l + 1;
  if (need < b->len) hy_die("bench: text too long");
  if (need > b->cap) {
    b->cap = need > 2 * b->cap ? need : 2 * b->cap;
    b->s = hy_realloc("bench text", b->s, b->cap, 1);
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)l;
}

/* The bench's own keys (--ic, --time, the output directory, no snapshots
 * or restart sets) as a parameter text, parsed under the name NAME. */
static char *base_text(const struct topts *o, const char *outdir) {
  struct sbuf b = {0};
  if (is_generator(o->ic))
    sb_printf(&b, "InitCondFile %s:%llu:%llu\n", o->ic, o->n, o->seed);
  else
    sb_printf(&b, "InitCondFile %s\n", o->ic);
  sb_printf(&b, "TimeEnd %s\nOutputDir %s\nSnapshotInterval 0\nRestartInterval 0\nRestartEverySoftSteps 0\n",
            o->t_end_text, outdir);
  return b.s;
}

/* The grid value indices of configuration c, the first --grid slowest. */
static void config_values(const struct topts *o, long c, int vi[MAX_GRID]) {
  for (int k = o->n_grid - 1; k >= 0; k--) {
    vi[k] = (int)(c % o->grid[k].n_vals);
    c /= o->grid[k].n_vals;
  }
}

/* The parameters of configuration c (c < 0: the -P overrides only), or NULL
 * with *errors set (free()). */
static struct hy_params *config_params(const struct topts *o, long c, const char *outdir, char **errors) {
  char *text = base_text(o, outdir);
  char **ov = hy_calloc("bench overrides", (size_t)o->n_ov + MAX_GRID + 1, sizeof(char *));
  int n = 0;
  for (int k = 0; k < o->n_ov; k++) ov[n++] = o->ov[k];
  int vi[MAX_GRID];
  if (c >= 0) config_values(o, c, vi);
  struct sbuf kv[MAX_GRID];
  memset(kv, 0, sizeof kv);
  for (int k = 0; c >= 0 && k < o->n_grid; k++) {
    sb_printf(&kv[k], "%s=%s", o->grid[k].key, o->grid[k].vals[vi[k]]);
    ov[n++] = kv[k].s;
  }
  struct hy_params *par = hy_params_parse_text(NAME, text, ov, n, errors);
  for (int k = 0; k < MAX_GRID; k++) hy_free(kv[k].s);
  hy_free(ov);
  hy_free(text);
  return par;
}

/* One value of a grid key against the -P overrides: its problems named by
 * --grid. Returns 0 when it parses. */
static int check_grid_value(const struct topts *o, int k, int v, const char *outdir) {
  struct sbuf kv = {0};
  sb_printf(&kv, "%s=%s", o->grid[k].key, o->grid[k].vals[v]);
  char *ov[1] = {kv.s}, *text = base_text(o, outdir), *errors = NULL;
  char **all = hy_calloc("bench overrides", (size_t)o->n_ov + 2, sizeof(char *));
  memcpy(all, o->ov, (size_t)o->n_ov * sizeof(char *));
  all[o->n_ov] = ov[0];
  struct hy_params *par = hy_params_parse_text(NAME, text, all, o->n_ov + 1, &errors);
  struct sbuf pre = {0};
  sb_printf(&pre, "-P %s: ", kv.s);
  for (const char *line = errors; line && *line;) {
    const char *nl = strchr(line, '\n');
    const int len = nl ? (int)(nl - line) : (int)strlen(line);
    if (strncmp(line, pre.s, pre.len) == 0)
      fprintf(stderr, "hytree: error: bench: --grid %s: %.*s\n", kv.s, len - (int)pre.len, line + pre.len);
    else
      fprintf(stderr, "hytree: error: %.*s\n", len, line);
    line = nl ? nl + 1 : NULL;
  }
  const int ok = par != NULL;
  hy_params_free(par);
  free(errors);
  hy_free(pre.s);
  hy_free(all);
  hy_free(text);
  hy_free(kv.s);
  return ok ? 0 : -1;
}

/* Every parameter before any run: the -P overrides as `hytree run` checks
 * them, then each grid value. Returns -1 when all are good, else 1. */
static int check_params(const struct topts *o) {
  char *errors = NULL;
  struct hy_params *par = config_params(o, -1, "bench-check", &errors);
  if (!par) {
    hy_run_print_errors(errors);
    free(errors);
    return 1;
  }
  hy_params_free(par);
  int bad = 0;
  for (int k = 0; k < o->n_grid; k++)
    for (int v = 0; v < o->grid[k].n_vals; v++) bad |= check_grid_value(o, k, v, "bench-check") != 0;
  return bad ? 1 : -1;
}

/* ---------------------------------------------------------------- runs */

/* What one configuration gave. */
struct trow {
  size_t n;
  long steps;
  double wall, max_de, rate;
  struct hy_bench_err fe;
};

/* hy_run_embed's look at the final particles: the force error. */
struct end_ctx {
  const struct topts *o;
  const struct hy_run_embed *e;
  struct hy_bench_err fe;
};

static int at_end(void *ctx, struct hy_cl *cl, struct hy_pool *pool, const struct hy_part *p, double G, double eps,
                  struct hy_err *err) {
  struct end_ctx *x = ctx;
  if (x->e->steps == 0)
    return hy_err_set(err, "bench: --time %g: no step to integrate from the ICs' time %g", x->o->t_end, x->e->t0);
  return hy_bench_force_error(cl, pool, p, p->acc, G, eps, (size_t)x->o->sinks, &x->fe, err);
}

/* The grid values of configuration c as "K=v K=v" (allocated; "" without a grid). */
static char *config_label(const struct topts *o, long c) {
  int vi[MAX_GRID];
  config_values(o, c, vi);
  struct sbuf b = {0};
  sb_printf(&b, "%s", "");
  for (int k = 0; k < o->n_grid; k++) sb_printf(&b, "%s%s=%s", k ? " " : "", o->grid[k].key, o->grid[k].vals[vi[k]]);
  return b.s;
}

/* A finished configuration's outputs removed (files of a one-rank run). */
static void remove_outputs(const char *dir) {
  static const char *const files[] = {"params-used.txt", "energy.csv", "timings.csv", "let.csv"};
  struct sbuf path = {0};
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    path.len = 0;
    sb_printf(&path, "%s/%s", dir, files[k]);
    if (unlink(path.s) != 0 && errno != ENOENT) hy_warn("bench: cannot remove %s: %s", path.s, strerror(errno));
  }
  if (rmdir(dir) != 0) hy_warn("bench: cannot remove %s: %s", dir, strerror(errno));
  hy_free(path.s);
}

/* Configuration c (of n) in base/run-NNN into row. Returns 0 or the exit status. */
static int run_config(const struct topts *o, long c, long n, const char *base, struct trow *row) {
  struct sbuf dir = {0};
  sb_printf(&dir, "%s/run-%03ld", base, c + 1);
  char *errors = NULL, *label = config_label(o, c);
  struct hy_params *par = config_params(o, c, dir.s, &errors);
  int status = 1;
  if (!par) {
    hy_run_print_errors(errors);
  } else {
    struct hy_run_embed e = {.at_end = at_end};
    struct end_ctx x = {.o = o, .e = &e};
    e.ctx = &x;
    hy_msg("bench: configuration %ld of %ld%s%s: integrating to t = %g", c + 1, n, *label ? ": " : "", label,
           o->t_end);
    const int quiet = hy_log_quiet();
    if (!o->verbose) hy_log_set_quiet(1);
    status = hy_run_embedded(par, NAME, &e);
    hy_log_set_quiet(quiet);
    if (status == 0) {
      *row = (struct trow){.n = e.n, .steps = e.steps, .wall = e.wall, .max_de = e.max_de,
                           .rate = e.kernel > 0.0 ? e.inter / e.kernel : 0.0, .fe = x.fe};
      hy_msg("bench: %ld steps in %.4g s, max |dE/E| %.3e, force error median %.3e p99 %.3e max %.3e", e.steps,
             e.wall, e.max_de, x.fe.med, x.fe.p99, x.fe.max);
      if (!o->keep) remove_outputs(dir.s);
    } else {
      struct stat st; /* a run that failed before its outputs left none */
      const int has = stat(dir.s, &st) == 0;
      fprintf(stderr, "hytree: error: bench: configuration %ld of %ld%s%s failed%s%s\n", c + 1, n, *label ? " " : "",
              label, has ? "; its outputs are in " : "", has ? dir.s : "");
    }
  }
  hy_params_free(par);
  free(errors);
  hy_free(label);
  hy_free(dir.s);
  return status;
}

/* The directory of the configurations' outputs: --keep DIR, else a new
 * temporary one (into base, allocated). */
static int output_base(const struct topts *o, char **base) {
  struct sbuf b = {0};
  if (o->keep) {
    sb_printf(&b, "%s", o->keep);
    *base = b.s;
    return 0;
  }
  const char *tmp = getenv("TMPDIR");
  sb_printf(&b, "%s/hytree-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(b.s)) {
    fprintf(stderr, "hytree: error: bench: cannot create a directory %s: %s\n", b.s, strerror(errno));
    hy_free(b.s);
    return 1;
  }
  *base = b.s;
  return 0;
}

/* ------------------------------------------------------------- report */

/* A CSV field, quoted when it holds a comma, a quote or a line break. */
static void csv_field(struct sbuf *b, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    sb_printf(b, "%s,", s);
    return;
  }
  sb_printf(b, "\"");
  for (const char *c = s; *c; c++) {
    if (*c == '"')
      sb_printf(b, "\"\"");
    else
      sb_printf(b, "%c", *c);
  }
  sb_printf(b, "\",");
}

static char *time_csv(const struct topts *o, const struct trow *rows, long n) {
  struct sbuf b = {0};
  sb_printf(&b, "ic,N,");
  for (int k = 0; k < o->n_grid; k++) csv_field(&b, o->grid[k].key);
  sb_printf(&b, "wall_time_s,steps,max_rel_energy_error,force_err_median,force_err_p99,force_err_max,"
                "interactions_per_s\n");
  for (long c = 0; c < n; c++) {
    int vi[MAX_GRID];
    config_values(o, c, vi);
    const struct trow *w = &rows[c];
    csv_field(&b, o->ic);
    sb_printf(&b, "%zu,", w->n);
    for (int k = 0; k < o->n_grid; k++) csv_field(&b, o->grid[k].vals[vi[k]]);
    sb_printf(&b, "%.6e,%ld,%.6e,%.6e,%.6e,%.6e,%.6e\n", w->wall, w->steps, w->max_de, w->fe.med, w->fe.p99,
              w->fe.max, w->rate);
  }
  return b.s;
}

static void print_time_table(const struct topts *o, const struct trow *rows, long n) {
  printf("| ic | N |");
  for (int k = 0; k < o->n_grid; k++) printf(" %s |", o->grid[k].key);
  printf(" wall time [s] | steps | max \\|dE/E\\| | force err median | force err p99 | force err max | "
         "interactions/s |\n|---|---|");
  for (int k = 0; k < o->n_grid; k++) printf("---|");
  printf("---|---|---|---|---|---|---|\n");
  for (long c = 0; c < n; c++) {
    int vi[MAX_GRID];
    config_values(o, c, vi);
    const struct trow *w = &rows[c];
    printf("| %s | %zu |", o->ic, w->n);
    for (int k = 0; k < o->n_grid; k++) printf(" %s |", o->grid[k].vals[vi[k]]);
    printf(" %.4f | %ld | %.3e | %.3e | %.3e | %.3e | %.3e |\n", w->wall, w->steps, w->max_de, w->fe.med, w->fe.p99,
           w->fe.max, w->rate);
  }
  fflush(stdout);
}

static int report_time(const struct topts *o, const struct trow *rows, long n) {
  print_time_table(o, rows, n);
  if (!o->csv) return 0;
  char *text = time_csv(o, rows, n);
  struct hy_err err;
  const int rc = hy_io_write_text_atomic(o->csv, text, &err);
  if (rc != 0) fprintf(stderr, "hytree: error: bench: --csv: %s\n", err.msg);
  hy_free(text);
  return rc == 0 ? 0 : 1;
}

/* Every configuration, then the report. Returns the exit status. */
static int run_grid(const struct topts *o) {
  const long n = n_configs(o);
  char *base = NULL;
  if (output_base(o, &base) != 0) return 1;
  if (o->keep) hy_msg("bench: the configurations' outputs go to %s/run-NNN", base);
  struct trow *rows = hy_calloc("bench rows", (size_t)n, sizeof(struct trow));
  int status = 0;
  for (long c = 0; status == 0 && c < n; c++) status = run_config(o, c, n, base, &rows[c]);
  if (status == 0) status = report_time(o, rows, n);
  if (status == 0 && !o->keep && rmdir(base) != 0) hy_warn("bench: cannot remove %s: %s", base, strerror(errno));
  /* kept when a failed run left its outputs there */
  if (status != 0 && !o->keep && rmdir(base) != 0 && errno != ENOTEMPTY && errno != EEXIST)
    hy_warn("bench: cannot remove %s: %s", base, strerror(errno));
  hy_free(rows);
  hy_free(base);
  return status;
}

int hy_bench_time(int argc, char **argv) {
  struct topts o;
  int status = parse_time_args(argc, argv, &o);
  if (status < 0) status = check_params(&o);
  if (status < 0) status = run_grid(&o);
  free_topts(&o);
  return status;
}
