/* SPDX-License-Identifier: GPL-3.0-or-later
 * bench.c: `hytree bench`, and its fixed protocol; with --time the command
 * line goes to bench_time.c (accuracy per time over a grid of run
 * parameters). The protocol: Plummer ICs in Hénon
 * units with Watanabe & Nakasato's defaults (eps = 0.1 N^-0.26,
 * R1 = 1.03 N^-1/3, R2 = 2 R1, a_err = 2^-8, n = 4, dt_h = eps / sigma_v
 * with sigma_v the mass-weighted mean speed of the ICs; r_v = 1 by
 * construction), one warm-up dt_s, then K timed dt_s per scheme (hybrid: K
 * steps of 1 soft + 3 hard; tree: 4K steps), the force error of the final
 * configuration on sampled sinks against a double-precision direct sum over
 * all particles (bench_ref.c), and one table (and CSV) row per (N, scheme).
 * One rank. */
#include "config.h"

#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_internal.h"
#include "cl_engine.h"
#include "force.h"
#include "hy_shared.h"
#include "ic.h"
#include "io.h"
#include "log.h"
#include "sim.h"
#include "threads.h"

#define MAX_LIST 16

struct row {
  size_t n;
  const char *scheme;
  double per, soft, hard, dd, tree, transfer, kernel, pp_rate, pc_rate, med, p99, ratio, r_hybrid;
  /* breakdown per dt_s: host packing or host build, device build phases, copies */
  double host_tree, dev_sort, dev_cells, dev_moments, upload, download;
  double soft_rate; /* interactions per second of the soft-step (tree: full) walk kernels */
  int device_built;
};

void hy_bench_usage(FILE *out) {
  fputs("usage: hytree bench [--N N[,N...]] [--schemes hybrid,tree] [--device gpu|cpu|any|P:D]\n"
        "                    [--soft-steps K] [--sinks S] [--seed S] [--tree-build auto|host|device]\n"
        "                    [--csv FILE] [--quiet]\n"
        "  Time the hybrid and tree schemes on Plummer spheres with Watanabe & Nakasato's\n"
        "  defaults (all `auto` values of hytree run), one warm-up dt_s and K measured dt_s\n"
        "  (default 3) per scheme, and measure the force error of the final configuration on\n"
        "  S sampled sinks (default 10000) against a double-precision direct sum. A second table\n"
        "  splits the tree build (host part; device keys+sort, cells, moments) and the copies.\n"
        "  --tree-build as TreeBuild of hytree run; device also keeps the particle state on\n"
        "  the device (ParticleState device).\n"
        "  Defaults: --N 1048576 --schemes hybrid,tree --device any.\n",
        out);
  hy_bench_time_usage(out);
}

static void free_list(char **list, int *n) {
  for (int i = 0; i < *n; i++) hy_free(list[i]);
  *n = 0;
}

/* Replaces the n items of out by the comma list s; returns their number, or
 * -1 (out then empty) when s has more than max items. */
static int parse_list(const char *s, char **out, int *n, int max) {
  free_list(out, n);
  char *copy = hy_strdup("bench list", s), *save = NULL;
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (*n == max) {
      hy_free(copy);
      free_list(out, n);
      return -1;
    }
    out[(*n)++] = hy_strdup("bench list", tok);
  }
  hy_free(copy);
  return *n;
}

static int run_one(struct hy_cl *cl, struct hy_pool *pool, const struct hy_part *ics, const char *scheme_name,
                   int soft_steps, size_t n_sinks, int tree_build, struct row *row, struct hy_err *err) {
  const size_t n = ics->n;
  const double nn = (double)n, eps = 0.1 * pow(nn, -0.26), r1 = 1.03 * pow(nn, -1.0 / 3.0);
  double sv = 0.0, mt = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double *v = ics->vel + 3 * i;
    sv += ics->mass[i] * sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    mt += ics->mass[i];
  }
  sv /= mt;
  enum hy_scheme scheme;
  if (hy_scheme_parse(scheme_name, &scheme) != 0 || scheme == HY_SCHEME_DIRECT)
    return hy_err_set(err, "bench: unknown scheme '%s' (hybrid or tree)", scheme_name);
  const int hybrid = scheme == HY_SCHEME_HYBRID;
  struct hy_force_cfg fc = {.G = 1.0, .eps = eps, .r1 = r1, .r2 = 2.0 * r1, .a_err = ldexp(1.0, -8), .n_crit = 16,
                            .nvec = 4, .n_ratio = 4, .tree_build = tree_build};
  struct hy_part p;
  hy_part_copy(&p, ics);
  struct hy_force *f = hy_force_create(cl, pool, &fc);
  /* --tree-build device: the whole device path (state too), as on a GPU */
  struct hy_sim_cfg sc = {.scheme = scheme, .dt_h = eps / sv, .n_ratio = 4,
                          .state = tree_build == HY_TREE_BUILD_DEVICE ? HY_STATE_DEVICE : HY_STATE_AUTO};
  struct hy_sim *sim = hy_sim_create(&p, f, pool, &sc, 0.0);
  hy_sim_set_lazy_sync(sim, 1); /* p is read once, after hy_sim_sync below */
  const int per_dts = hybrid ? 1 : 4; /* steps per dt_s */
  struct hy_step_times tm;
  memset(row, 0, sizeof *row);
  row->n = n;
  row->scheme = scheme_name;
  double pp = 0, pc = 0, soft_inter = 0, soft_kernel = 0;
  long n_hard = 0;
  int rc = hy_sim_start(sim, 0, err);
  for (int s = 0; rc == 0 && s < (1 + soft_steps) * per_dts; s++) {
    rc = hy_sim_step(sim, 0, &tm, err);
    if (rc != 0 || s < per_dts) continue; /* the first dt_s warms up */
    row->per += tm.total;
    row->soft += tm.soft;
    for (int k = 0; k < tm.n_hard; k++) row->hard += tm.hard[k];
    n_hard += tm.n_hard;
    row->dd += tm.dd;
    row->tree += tm.tree;
    row->transfer += tm.transfer;
    row->kernel += tm.kernel;
    const struct hy_force_stats *sts[2] = {&tm.st_hard, &tm.st_soft};
    for (int k = 0; k < 2; k++) {
      row->host_tree += sts[k]->sort + sts[k]->export_ + (hy_force_device_built(f) ? 0.0 : sts[k]->build);
      row->dev_sort += sts[k]->dev_sort;
      row->dev_cells += sts[k]->dev_cells;
      row->dev_moments += sts[k]->dev_moments;
      row->upload += sts[k]->upload;
      row->download += sts[k]->download;
    }
    soft_inter += (double)(tm.pp_soft + tm.pc_soft);
    soft_kernel += tm.st_soft.kernel;
    pp += (double)(tm.pp_hard + tm.pp_soft);
    pc += (double)(tm.pc_hard + tm.pc_soft);
  }
  if (rc == 0) {
    const double k = (double)soft_steps;
    row->pp_rate = row->kernel > 0 ? pp / row->kernel : 0;
    row->pc_rate = row->kernel > 0 ? pc / row->kernel : 0;
    row->per /= k;
    row->dd /= k;
    row->tree /= k;
    row->transfer /= k;
    row->kernel /= k;
    row->host_tree /= k;
    row->dev_sort /= k;
    row->dev_cells /= k;
    row->dev_moments /= k;
    row->upload /= k;
    row->download /= k;
    row->device_built = hy_force_device_built(f);
    row->soft_rate = soft_kernel > 0 ? soft_inter / soft_kernel : 0.0;
    row->soft /= k * per_dts;
    row->hard = n_hard ? row->hard / (double)n_hard : 0.0;
    row->ratio = hybrid && row->soft > 0 ? row->hard / row->soft : 0.0;
    /* the physical force of the final configuration: hard + soft (hybrid), full (tree) */
    double *a = hy_malloc("bench accelerations", 3 * n, sizeof(double));
    double *b = hy_malloc("bench accelerations", 3 * n, sizeof(double));
    rc = hy_sim_sync(sim, err);
    if (rc == 0) rc = hy_force_build(f, &p, err);
    if (rc == 0) rc = hy_force_walk(f, &p, hybrid ? HY_WALK_SPLIT : HY_WALK_FULL, a, hybrid ? b : NULL, NULL, err);
    if (rc == 0 && hybrid)
      for (size_t i = 0; i < 3 * n; i++) a[i] += b[i];
    struct hy_bench_err fe = {0};
    if (rc == 0) rc = hy_bench_force_error(cl, pool, &p, a, 1.0, eps, n_sinks, &fe, err);
    row->med = fe.med;
    row->p99 = fe.p99;
    hy_free(a);
    hy_free(b);
  }
  hy_sim_free(sim);
  hy_force_free(f);
  hy_part_free(&p);
  return rc;
}

/* The options of `hytree bench`. */
struct opts {
  char *ns[MAX_LIST], *schemes[MAX_LIST];
  int n_ns, n_sch, soft_steps;
  long sinks;
  unsigned long seed;
  const char *csv, *device;
  int tree_build;
};

/* An option with its value v (NULL: none left). Returns -1 to go on, else
 * the exit status. */
static int parse_option(const char *a, const char *v, struct opts *o) {
  if (!v) {
    fprintf(stderr, "hytree: error: bench: %s needs a value (see hytree bench --help)\n", a);
    return 2;
  } else if (strcmp(a, "--N") == 0) {
    if (parse_list(v, o->ns, &o->n_ns, MAX_LIST) <= 0) {
      fprintf(stderr, "hytree: error: bench: --N '%s': a comma list of up to %d particle counts\n", v, MAX_LIST);
      return 2;
    }
  } else if (strcmp(a, "--schemes") == 0) {
    if (parse_list(v, o->schemes, &o->n_sch, MAX_LIST) <= 0) {
      fprintf(stderr, "hytree: error: bench: --schemes '%s': a comma list of hybrid, tree\n", v);
      return 2;
    }
  } else if (strcmp(a, "--device") == 0) {
    o->device = v;
  } else if (strcmp(a, "--soft-steps") == 0) {
    o->soft_steps = atoi(v);
  } else if (strcmp(a, "--sinks") == 0) {
    o->sinks = atol(v);
  } else if (strcmp(a, "--seed") == 0) {
    o->seed = strtoul(v, NULL, 10);
  } else if (strcmp(a, "--tree-build") == 0) {
    if (strcmp(v, "auto") == 0)
      o->tree_build = HY_TREE_BUILD_AUTO;
    else if (strcmp(v, "host") == 0)
      o->tree_build = HY_TREE_BUILD_HOST;
    else if (strcmp(v, "device") == 0)
      o->tree_build = HY_TREE_BUILD_DEVICE;
    else {
      fprintf(stderr, "hytree: error: bench: --tree-build '%s': auto, host or device\n", v);
      return 2;
    }
  } else if (strcmp(a, "--csv") == 0) {
    o->csv = v;
  } else if (strcmp(a, "--ic") == 0 || strcmp(a, "--grid") == 0 || strcmp(a, "--keep") == 0) {
    fprintf(stderr, "hytree: error: bench: %s needs --time (see hytree bench --help)\n", a);
    return 2;
  } else {
    fprintf(stderr, "hytree: error: bench: unknown option '%s' (see hytree bench --help)\n", a);
    return 2;
  }
  return -1;
}

/* The command line, with the defaults for what it leaves out. Returns -1 to
 * go on, else the exit status (0 after --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, struct opts *o) {
  memset(o, 0, sizeof *o);
  o->soft_steps = 3;
  o->sinks = 10000;
  o->seed = 1;
  o->device = "any";
  o->tree_build = HY_TREE_BUILD_AUTO;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      hy_bench_usage(stdout);
      return 0;
    } else if (strcmp(a, "--quiet") == 0) {
      hy_log_set_quiet(1);
      continue;
    } else if (strncmp(a, "-P", 2) == 0 || strcmp(a, "--verbose") == 0) {
      fprintf(stderr, "hytree: error: bench: %s needs --time (see hytree bench --help)\n", a);
      return 2;
    }
    const int status = parse_option(a, i + 1 < argc ? argv[i + 1] : NULL, o);
    if (status >= 0) return status;
    i++;
  }
  if (o->soft_steps < 1 || o->sinks < 1) {
    fputs("hytree: error: bench: --soft-steps and --sinks must be positive\n", stderr);
    return 2;
  }
  if (o->n_ns == 0) o->ns[o->n_ns++] = hy_strdup("bench list", "1048576");
  if (o->n_sch == 0) {
    o->schemes[o->n_sch++] = hy_strdup("bench list", "hybrid");
    o->schemes[o->n_sch++] = hy_strdup("bench list", "tree");
  }
  return -1;
}

/* --device: gpu, cpu, any or P:D. */
static int device_opts(const char *device, struct hy_cl_opts *o) {
  *o = (struct hy_cl_opts){.kind = HY_CL_ANY, .platform = -1, .device = -1, .local_rank = 0, .nvec = 4};
  if (strcmp(device, "gpu") == 0) o->kind = HY_CL_GPU;
  else if (strcmp(device, "cpu") == 0) o->kind = HY_CL_CPU;
  else if (strcmp(device, "any") != 0) {
    o->kind = HY_CL_EXPLICIT;
    if (sscanf(device, "%d:%d", &o->platform, &o->device) != 2) {
      fprintf(stderr, "hytree: error: bench: --device '%s': gpu, cpu, any or P:D\n", device);
      return -1;
    }
  }
  return 0;
}

/* Every scheme on the Plummer sphere of N particles (the a-th --N value),
 * one row each appended to rows; R_hybrid in the hybrid row when the tree
 * ran too. */
static int bench_n(struct hy_cl *cl, struct hy_pool *pool, const struct opts *o, int a, struct row *rows,
                   int *n_rows) {
  struct hy_err err;
  char *end;
  unsigned long long nv = strtoull(o->ns[a], &end, 10);
  if (*end != '\0' || nv < 2) {
    fprintf(stderr, "hytree: error: bench: --N value '%s' is not a particle count >= 2\n", o->ns[a]);
    return -1;
  }
  struct hy_part ics;
  hy_part_init(&ics);
  if (hy_ic_plummer((size_t)nv, o->seed, &ics, &err) != 0) {
    fprintf(stderr, "hytree: error: %s\n", err.msg);
    return -1;
  }
  int first_row = *n_rows;
  for (int b = 0; b < o->n_sch; b++) {
    hy_msg("bench: N = %llu, %s, %d measured dt_s", nv, o->schemes[b], o->soft_steps);
    if (run_one(cl, pool, &ics, o->schemes[b], o->soft_steps, (size_t)o->sinks, o->tree_build, &rows[*n_rows],
                &err) != 0) {
      fprintf(stderr, "hytree: error: %s\n", err.msg);
      hy_part_free(&ics);
      return -1;
    }
    (*n_rows)++;
  }
  hy_part_free(&ics);
  for (int i = first_row; i < *n_rows; i++)
    for (int j = first_row; j < *n_rows; j++)
      if (strcmp(rows[i].scheme, "hybrid") == 0 && strcmp(rows[j].scheme, "tree") == 0 && rows[j].per > 0)
        rows[i].r_hybrid = rows[i].per / rows[j].per;
  return 0;
}

/* The ratios of a row as text: T_hard/T_soft and R_hybrid, "-" when not measured. */
static void ratio_text(const struct row *w, char ra[32], char rh[32]) {
  snprintf(ra, 32, "-");
  snprintf(rh, 32, "-");
  if (w->r_hybrid > 0) snprintf(rh, 32, "%.3f", w->r_hybrid);
  if (w->ratio > 0) snprintf(ra, 32, "%.3f", w->ratio);
}

static void print_main_table(const struct row *rows, int n_rows, const char *device) {
  printf("| N | scheme | device | T per dt_s [s] | T_soft [s] | T_hard [s] | T_DD [s] | tree build [s] | transfers [s] "
         "| walks [s] | pp/s | pc/s | median err | p99 err | T_hard/T_soft | R_hybrid |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n_rows; i++) {
    const struct row *w = &rows[i];
    char rh[32], ra[32];
    ratio_text(w, ra, rh);
    printf("| %zu | %s | %s | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.3e | %.3e | %.2e | %.2e | %s | %s |\n",
           w->n, w->scheme, device, w->per, w->soft, w->hard, w->dd, w->tree, w->transfer, w->kernel, w->pp_rate,
           w->pc_rate, w->med, w->p99, ra, rh);
  }
}

static void print_build_table(const struct row *rows, int n_rows) {
  printf("\nPer dt_s [s]: the tree build (host: packing and bounds, or the whole host build; device kernels) "
         "and the copies\n\n| N | scheme | tree built on | host part | keys + sort | cells | moments | upload | "
         "walk kernels | download | soft-step walk interactions/s |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int i = 0; i < n_rows; i++) {
    const struct row *w = &rows[i];
    printf("| %zu | %s | %s | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.3e |\n", w->n, w->scheme,
           w->device_built ? "device" : "host", w->host_tree, w->dev_sort, w->dev_cells, w->dev_moments, w->upload,
           w->kernel, w->download, w->soft_rate);
  }
}

/* The --csv text of the rows (allocated). */
static char *csv_text(const struct row *rows, int n_rows, const char *device) {
  size_t text_cap = 4096, text_len = 0;
  char *text = hy_malloc("bench CSV", text_cap, 1);
  text_len = (size_t)snprintf(text, text_cap,
                              "N,scheme,ranks,device,t_per_dts,t_soft,t_hard,t_dd,t_tree,t_transfer,t_kernel,"
                              "pp_per_s,pc_per_s,err_median,err_p99,t_hard_over_t_soft,r_hybrid,n_hard_over_n_soft,"
                              "soft_walk_per_s\n");
  for (int i = 0; i < n_rows; i++) {
    const struct row *w = &rows[i];
    char rh[32], ra[32];
    ratio_text(w, ra, rh);
    char line[1024];
    int len = snprintf(line, sizeof line, "%zu,%s,1,\"%s\",%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%s,%s,,%.6e\n",
                       w->n, w->scheme, device, w->per, w->soft, w->hard, w->dd, w->tree,
                       w->transfer, w->kernel, w->pp_rate, w->pc_rate, w->med, w->p99,
                       w->ratio > 0 ? ra : "", w->r_hybrid > 0 ? rh : "", w->soft_rate);
    if (len < 0 || (size_t)len >= sizeof line) continue;
    if (text_len + (size_t)len + 1 > text_cap) {
      text_cap = 2 * (text_len + (size_t)len + 1);
      text = hy_realloc("bench CSV", text, text_cap, 1);
    }
    memcpy(text + text_len, line, (size_t)len + 1);
    text_len += (size_t)len;
  }
  return text;
}

/* The tables on stdout and, with --csv, the CSV file. */
static int report_rows(const struct row *rows, int n_rows, const char *device, const char *csv) {
  print_main_table(rows, n_rows, device);
  print_build_table(rows, n_rows);
  fflush(stdout);
  char *text = csv_text(rows, n_rows, device);
  struct hy_err err;
  int rc = 0;
  if (csv && hy_io_write_text_atomic(csv, text, &err) != 0) {
    fprintf(stderr, "hytree: error: %s\n", err.msg);
    rc = -1;
  }
  hy_free(text);
  return rc;
}

/* Every (N, scheme) on the device, then the report. Returns the exit status. */
static int bench(const struct opts *o, const struct hy_cl_opts *co) {
  struct hy_err err;
  struct hy_cl *cl = NULL;
  struct hy_pool *pool = hy_pool_create(hy_pool_default_threads());
  struct row *rows = hy_calloc("bench rows", (size_t)(o->n_ns * o->n_sch), sizeof(struct row));
  int n_rows = 0, rc = 0;
  if (hy_cl_create(&cl, co, &err) != 0 || hy_cl_build_all(cl, &err) != 0) {
    fprintf(stderr, "hytree: error: %s\n", err.msg);
    rc = -1;
  }
  if (rc == 0) hy_msg("bench: device %s", hy_cl_description(cl));
  for (int a = 0; rc == 0 && a < o->n_ns; a++) rc = bench_n(cl, pool, o, a, rows, &n_rows);
  if (rc == 0) rc = report_rows(rows, n_rows, hy_cl_device_name(cl), o->csv);
  hy_free(rows);
  hy_cl_free(cl);
  hy_pool_free(pool);
  return rc == 0 ? 0 : 1;
}

/* With --time anywhere: the accuracy-per-time mode. */
static int time_mode(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--time") == 0) return 1;
  return 0;
}

int hy_cmd_bench(int argc, char **argv) {
  if (time_mode(argc, argv)) return hy_bench_time(argc, argv);
  struct opts o;
  struct hy_cl_opts co;
  int status = parse_args(argc, argv, &o);
  if (status < 0) status = device_opts(o.device, &co) != 0 ? 1 : bench(&o, &co);
  free_list(o.ns, &o.n_ns);
  free_list(o.schemes, &o.n_sch);
  return status;
}
