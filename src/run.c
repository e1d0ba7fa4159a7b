/* SPDX-License-Identifier: GPL-3.0-or-later
 * run.c: the `hytree run` subcommand. Owns the order of a run: parse the
 * parameters, load and check the initial conditions, resolve the `auto`
 * parameters from the ICs (virial radius, mean speed), choose the OpenCL
 * device and build its kernels -- all before anything is written, so bad
 * input leaves no output behind -- then write params-used.txt, the initial
 * snapshot and diagnostics, and step to TimeEnd writing energy.csv,
 * timings.csv, the progress log and snapshots at soft-step boundaries. */
#include "config.h"

#include "run.h"

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "alloc.h"
#include "cl_engine.h"
#include "diag.h"
#include "force.h"
#include "force_cpu.h"
#include "ic.h"
#include "io.h"
#include "log.h"
#include "params.h"
#include "part.h"
#include "sim.h"
#include "threads.h"

/* Particles used to estimate the potential energy W of the ICs for r_v. */
#define HY_RV_SAMPLE 8192

void hy_run_usage(FILE *out, int full) {
  fputs("usage: hytree run PARAMFILE [-P Key=Value ...] [--quiet]\n"
        "  Run a simulation described by PARAMFILE (Gadget-style `Key  Value` lines,\n"
        "  `%` or `#` comments). -P overrides a key (repeatable; later ones win).\n"
        "  Outputs go to OutputDir: params-used.txt, energy.csv, timings.csv,\n"
        "  snapshot_NNN.hdf5 (see doc/output.md).\n"
        "  --quiet   only warnings and errors\n"
        "  -h, --help  this help with the table of parameters\n",
        out);
  if (full) {
    fputs("\nparameters:\n", out);
    hy_params_print_help(out);
  }
}

/* ------------------------------------------------------------ helpers */

static int make_dirs(const char *path, struct hy_err *err) {
  char *buf = hy_strdup("output directory", path);
  size_t len = strlen(buf);
  for (size_t i = 1; i <= len; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char c = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
      int e = errno;
      hy_err_set(err, "OutputDir %s: cannot create %s: %s", path, buf, strerror(e));
      hy_free(buf);
      return -1;
    }
    buf[i] = c;
  }
  hy_free(buf);
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
    return hy_err_set(err, "OutputDir %s: not a directory", path);
  return 0;
}

static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *s = hy_malloc("file name", n, 1);
  snprintf(s, n, "%s/%s", dir, name);
  return s;
}

/* Virial radius r_v = G M^2 / (2 |W|) from the unsoftened potential energy,
 * exact for N <= HY_RV_SAMPLE, else estimated from a random subset: each pair
 * is in the subset with probability s(s-1)/(N(N-1)), so scaling the subset's
 * pair sum by the inverse is unbiased for any mass spectrum. Independent of G. */
static double virial_radius(const struct hy_part *p, struct hy_pool *pool) {
  size_t n = p->n, s = n <= HY_RV_SAMPLE ? n : HY_RV_SAMPLE;
  double *pos = hy_malloc("r_v sample", 3 * s, sizeof(double)), *m = hy_malloc("r_v sample", s, sizeof(double));
  double *pot = hy_malloc("r_v sample", s, sizeof(double)), *acc = hy_malloc("r_v sample", 3 * s, sizeof(double));
  if (s == n) {
    memcpy(pos, p->pos, 3 * n * sizeof(double));
    memcpy(m, p->mass, n * sizeof(double));
  } else {
    /* partial Fisher-Yates with a fixed 64-bit LCG: reproducible, no state */
    size_t *idx = hy_malloc("r_v sample", n, sizeof(size_t));
    for (size_t i = 0; i < n; i++) idx[i] = i;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < s; i++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      size_t j = i + (size_t)((r >> 11) % (uint64_t)(n - i));
      size_t tmp = idx[i];
      idx[i] = idx[j];
      idx[j] = tmp;
      memcpy(pos + 3 * i, p->pos + 3 * idx[i], 3 * sizeof(double));
      m[i] = p->mass[idx[i]];
    }
    hy_free(idx);
  }
  hy_cpu_direct(pos, m, s, pos, s, 0, 0.0, 0.0, 0.0, acc, NULL, pot, pool);
  double w = 0.0;
  for (size_t i = 0; i < s; i++) w += 0.5 * m[i] * pot[i];
  if (s < n) w *= ((double)n * (double)(n - 1)) / ((double)s * (double)(s - 1));
  double mt = hy_part_total_mass(p);
  hy_free(pos);
  hy_free(m);
  hy_free(pot);
  hy_free(acc);
  return w < 0.0 ? mt * mt / (2.0 * fabs(w)) : 0.0;
}

/* Mass-weighted mean speed of the ICs. */
static double mean_speed(const struct hy_part *p) {
  double s = 0.0, m = 0.0;
  for (size_t i = 0; i < p->n; i++) {
    const double *v = p->vel + 3 * i;
    s += p->mass[i] * sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    m += p->mass[i];
  }
  return s / m;
}

struct run {
  struct hy_params *par;
  const char *pfile;
  const char *outdir;
  enum hy_scheme scheme;
  int n_ratio;
  double G, eps, r1, r2, a_err, dt_h, t_end, snap_dt, energy_dt;
  unsigned snap_fields;
  struct hy_units units;
  struct hy_part p;
  double t0;
  char *params_text;
  int snap_count;
  FILE *energy, *timings;
};

static int load_ics(struct run *r, struct hy_err *err) {
  const char *spec = hy_params_get_str(r->par, "InitCondFile");
  size_t n = 0;
  uint64_t seed = 1;
  int g = hy_ic_parse_spec(spec, &n, &seed, err);
  if (g < 0) return -1;
  r->t0 = 0.0;
  if (g == 1) return hy_ic_plummer(n, seed, &r->p, err);
  enum hy_ic_format fmt;
  if (hy_io_format_parse(hy_params_get_str(r->par, "InitCondFormat"), &fmt) != 0)
    return hy_err_set(err, "%s: bad InitCondFormat", r->pfile);
  return hy_io_read_ic(spec, fmt, &r->p, &r->t0, err);
}

/* Resolve the `auto` parameters from the ICs and check the results. */
static int resolve(struct run *r, struct hy_pool *pool, struct hy_err *err) {
  struct hy_params *par = r->par;
  const size_t n = r->p.n;
  const double nn = (double)n, mt = hy_part_total_mass(&r->p);
  r->G = hy_params_get_number(par, "GravityConstant");
  double rv = 0.0, sv = 0.0;
  int need_rv = hy_params_is_auto(par, "R1") || hy_params_is_auto(par, "Softening") ||
                hy_params_is_auto(par, "AccErr") || hy_params_is_auto(par, "TimeStepHard");
  if (need_rv) {
    rv = virial_radius(&r->p, pool);
    if (!(rv > 0.0) || !isfinite(rv))
      return hy_err_set(err, "cannot compute the virial radius of the ICs (all particles coincide?); set R1, R2, "
                             "Softening, AccErr and TimeStepHard explicitly");
    hy_msg("ICs: N = %zu, total mass %.9g, virial radius r_v = G M^2/(2|W|) = %.6g%s", n, mt, rv,
           n > HY_RV_SAMPLE ? " (W from a random sample of 8192)" : "");
  }
  if (hy_params_is_auto(par, "R1")) hy_params_set_resolved(par, "R1", 1.03 * pow(nn, -1.0 / 3.0) * rv);
  r->r1 = hy_params_get_number(par, "R1");
  if (hy_params_is_auto(par, "R2")) hy_params_set_resolved(par, "R2", 2.0 * r->r1);
  r->r2 = hy_params_get_number(par, "R2");
  if (!(r->r2 > r->r1))
    return hy_err_set(err, "%s: R2 = %g must be larger than R1 = %g (after resolving auto)", r->pfile, r->r2, r->r1);
  if (hy_params_is_auto(par, "Softening")) hy_params_set_resolved(par, "Softening", 0.1 * pow(nn, -0.26) * rv);
  r->eps = hy_params_get_number(par, "Softening");
  if (hy_params_is_auto(par, "AccErr")) hy_params_set_resolved(par, "AccErr", ldexp(1.0, -8) * r->G * mt / (rv * rv));
  r->a_err = hy_params_get_number(par, "AccErr");
  if (hy_params_is_auto(par, "TimeStepHard")) {
    sv = mean_speed(&r->p);
    if (!(sv > 0.0) || !(r->eps > 0.0))
      return hy_err_set(err, "TimeStepHard auto = Softening / sigma_v needs Softening > 0 and moving particles "
                             "(Softening %g, sigma_v %g); set TimeStepHard explicitly", r->eps, sv);
    hy_params_set_resolved(par, "TimeStepHard", r->eps / sv);
  }
  r->dt_h = hy_params_get_number(par, "TimeStepHard");
  /* shorten the step slightly so that TimeEnd falls on a step boundary */
  double span = r->t_end - r->t0, len = r->dt_h * (double)r->n_ratio;
  if (span > 0.0) {
    double steps = ceil(span / len - 1e-9);
    if (steps > 1e15) return hy_err_set(err, "TimeEnd / TimeStepHard = %.3g steps is too many", steps);
    double dt = span / (steps * (double)r->n_ratio);
    if (fabs(dt - r->dt_h) > 1e-12 * r->dt_h)
      hy_msg("time step shortened from %.9g to %.9g so that TimeEnd = %.9g is reached in %.0f steps", r->dt_h, dt,
             r->t_end, steps);
    r->dt_h = dt;
  }
  return 0;
}

static int write_snapshot(struct run *r, double t, unsigned fields, struct hy_err *err) {
  char name[64];
  snprintf(name, sizeof name, "snapshot_%03d.hdf5", r->snap_count);
  char *path = join(r->outdir, name);
  struct hy_snap_info info = {.time = t,
                              .fields = fields,
                              .units = r->units,
                              .gravity_constant = r->G,
                              .softening = r->eps,
                              .params_text = r->params_text};
  double t0 = hy_wtime();
  int rc = hy_io_write_hdf5(path, &r->p, &info, err);
  if (rc == 0) {
    hy_msg("snapshot %s at t = %.6g (%.2f s)", path, t, hy_wtime() - t0);
    r->snap_count++;
  }
  hy_free(path);
  return rc;
}

static FILE *open_csv(const char *dir, const char *name, struct hy_err *err) {
  char *path = join(dir, name);
  FILE *f = fopen(path, "w");
  if (!f) hy_err_set(err, "%s: cannot create: %s", path, strerror(errno));
  hy_free(path);
  return f;
}

static int csv_flush(FILE *f, const char *name, struct hy_err *err) {
  if (fflush(f) != 0 || ferror(f)) return hy_err_set(err, "%s: write failed: %s", name, strerror(errno));
  return 0;
}

static void timings_header(FILE *f, int n_hard) {
  fputs("step,time,t_step", f);
  for (int k = 1; k <= n_hard; k++) fprintf(f, ",t_hard_%d", k);
  fputs(",t_soft,t_tree,t_kernel,t_transfer,t_walk_wall,n_pp_hard,n_pc_hard,n_pp_soft,n_pc_soft\n", f);
}

static void timings_row(FILE *f, long step, double t, const struct hy_step_times *tm) {
  fprintf(f, "%ld,%.9g,%.6e", step, t, tm->total);
  for (int k = 0; k < tm->n_hard; k++) fprintf(f, ",%.6e", tm->hard[k]);
  fprintf(f, ",%.6e,%.6e,%.6e,%.6e,%.6e,%llu,%llu,%llu,%llu\n", tm->soft, tm->tree, tm->kernel, tm->transfer,
          tm->walk_wall, (unsigned long long)tm->pp_hard, (unsigned long long)tm->pc_hard,
          (unsigned long long)tm->pp_soft, (unsigned long long)tm->pc_soft);
}

/* The main loop; returns 0 or -1 with err set. */
static int simulate(struct run *r, struct hy_cl *cl, struct hy_pool *pool, struct hy_err *err) {
  struct hy_force_cfg fc = {.G = r->G,
                            .eps = r->eps,
                            .r1 = r->r1,
                            .r2 = r->r2,
                            .a_err = r->a_err,
                            .n_crit = (int)hy_params_get_int(r->par, "NCrit"),
                            .nvec = (int)hy_params_get_int(r->par, "NVec"),
                            .n_ratio = r->n_ratio};
  struct hy_force *f = hy_force_create(cl, pool, &fc);
  struct hy_sim_cfg sc = {.scheme = r->scheme, .dt_h = r->dt_h, .n_ratio = r->n_ratio};
  struct hy_sim *sim = hy_sim_create(&r->p, f, pool, &sc, r->t0);
  int rc = -1;
  unsigned snap_want = HY_WANT_POT | ((r->snap_fields & HY_FIELD_ACC) ? HY_WANT_ACC : 0u);
  double tw = hy_wtime();
  if (hy_sim_start(sim, snap_want, err) != 0) goto out;
  hy_msg("initial forces: %.3f s", hy_wtime() - tw);
  struct hy_diag d0, d;
  hy_diag_compute(&r->p, r->t0, 0.0, pool, &d0);
  hy_diag_csv_row(r->energy, &d0);
  if (csv_flush(r->energy, "energy.csv", err) != 0) goto out;
  hy_msg("t = %.6g  E = %.9g  K = %.6g  W = %.6g  2K/|W| = %.4f", r->t0, d0.etot, d0.kin, d0.pot, d0.virial);
  if (write_snapshot(r, r->t0, r->snap_fields, err) != 0) goto out;

  double span = r->t_end - r->t0;
  if (span <= 0.0) {
    if (span < 0.0) hy_warn("TimeEnd %g is before the ICs' time %g: nothing to integrate", r->t_end, r->t0);
    rc = 0;
    goto out;
  }
  const double len = hy_sim_step_length(sim);
  const long n_steps = (long)ceil(span / len - 1e-9);
  hy_msg("integrating to t = %.6g: %ld %s steps of %.6g%s", r->t_end, n_steps,
         r->scheme == HY_SCHEME_HYBRID ? "soft" : "", len,
         r->scheme == HY_SCHEME_HYBRID ? " (each with SoftStepRatio hard steps)" : "");
  long next_snap = 1, next_energy = 1;
  double wall0 = hy_wtime(), last_log = 0.0;
  struct hy_step_times tm;
  for (long s = 1; s <= n_steps; s++) {
    double t_next = r->t0 + (double)s * len;
    int final = s == n_steps;
    int snap = final || (r->snap_dt > 0.0 && t_next >= r->t0 + (double)next_snap * r->snap_dt - 1e-9 * len);
    int energy = final || r->energy_dt == 0.0 || t_next >= r->t0 + (double)next_energy * r->energy_dt - 1e-9 * len;
    unsigned want = (snap ? snap_want : 0u) | (energy ? HY_WANT_POT : 0u);
    if (hy_sim_step(sim, want, &tm, err) != 0) goto out;
    double t = hy_sim_time(sim);
    timings_row(r->timings, s, t, &tm);
    if (csv_flush(r->timings, "timings.csv", err) != 0) goto out;
    if (energy) {
      while (r->energy_dt > 0.0 && r->t0 + (double)next_energy * r->energy_dt <= t + 1e-9 * len) next_energy++;
      hy_diag_compute(&r->p, t, d0.etot, pool, &d);
      hy_diag_csv_row(r->energy, &d);
      if (csv_flush(r->energy, "energy.csv", err) != 0) goto out;
      double el = hy_wtime() - wall0;
      if (final || el - last_log >= 1.0 || s == 1) {
        last_log = el;
        hy_msg("step %ld/%ld  t = %.6g  dE/E = %.3e  2K/|W| = %.4f  %.3f s/step  elapsed %.1f s  ETA %.1f s", s,
               n_steps, t, d.de_rel, d.virial, el / (double)s, el, el / (double)s * (double)(n_steps - s));
      }
    }
    if (snap) {
      while (r->snap_dt > 0.0 && r->t0 + (double)next_snap * r->snap_dt <= t + 1e-9 * len) next_snap++;
      if (write_snapshot(r, t, r->snap_fields, err) != 0) goto out;
    }
  }
  double wall = hy_wtime() - wall0;
  hy_msg("done: %ld steps in %.2f s (%.4f s per %s step), final |dE/E| = %.3e", n_steps, wall,
         wall / (double)n_steps, r->scheme == HY_SCHEME_HYBRID ? "soft" : "", d.de_rel);
  rc = 0;
out:
  hy_sim_free(sim);
  hy_force_free(f);
  return rc;
}

/* ---------------------------------------------------------------- main */

int hy_cmd_run(int argc, char **argv) {
  const char *pfile = NULL;
  char **ov = hy_malloc("overrides", (size_t)argc + 1, sizeof(char *));
  int n_ov = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      hy_run_usage(stdout, 1);
      hy_free(ov);
      return 0;
    } else if (strcmp(a, "--quiet") == 0) {
      hy_log_set_quiet(1);
    } else if (strcmp(a, "-P") == 0) {
      if (i + 1 >= argc) {
        fputs("hytree: error: run: -P needs an argument Key=Value\n", stderr);
        hy_free(ov);
        return 2;
      }
      ov[n_ov++] = argv[++i];
    } else if (strncmp(a, "-P", 2) == 0) {
      ov[n_ov++] = argv[i] + 2;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "hytree: error: run: unknown option '%s' (see hytree run --help)\n", a);
      hy_free(ov);
      return 2;
    } else if (!pfile) {
      pfile = a;
    } else {
      fprintf(stderr, "hytree: error: run: more than one parameter file ('%s' and '%s')\n", pfile, a);
      hy_free(ov);
      return 2;
    }
  }
  if (!pfile) {
    fputs("hytree: error: run: no parameter file given\n", stderr);
    hy_run_usage(stderr, 0);
    hy_free(ov);
    return 2;
  }
  if (hy_log_size() > 1) {
    fprintf(stderr, "hytree: error: run: %d MPI ranks requested, but this version runs on one rank only\n",
            hy_log_size());
    hy_free(ov);
    return 1;
  }

  struct run r;
  memset(&r, 0, sizeof r);
  hy_part_init(&r.p);
  r.pfile = pfile;
  char *errors = NULL;
  r.par = hy_params_parse_file(pfile, ov, n_ov, &errors);
  hy_free(ov);
  if (!r.par) {
    /* every problem, one per line */
    char *line = errors;
    while (line && *line) {
      char *nl = strchr(line, '\n');
      if (nl) *nl = '\0';
      fprintf(stderr, "hytree: error: %s\n", line);
      line = nl ? nl + 1 : NULL;
    }
    free(errors);
    return 1;
  }
  struct hy_err err;
  int status = 1;
  struct hy_pool *pool = hy_pool_create(hy_pool_default_threads());
  struct hy_cl *cl = NULL;
  char *path = NULL;

  r.outdir = hy_params_get_str(r.par, "OutputDir");
  if (hy_scheme_parse(hy_params_get_str(r.par, "Scheme"), &r.scheme) != 0) {
    fprintf(stderr, "hytree: error: %s: bad Scheme\n", pfile);
    goto out;
  }
  r.n_ratio = r.scheme == HY_SCHEME_HYBRID ? (int)hy_params_get_int(r.par, "SoftStepRatio") : 1;
  r.t_end = hy_params_get_number(r.par, "TimeEnd");
  r.snap_dt = hy_params_get_number(r.par, "SnapshotInterval");
  r.energy_dt = hy_params_get_number(r.par, "EnergyInterval");
  r.snap_fields = (hy_params_list_has(r.par, "SnapshotFields", "Acceleration") ? HY_FIELD_ACC : 0u) |
                  (hy_params_list_has(r.par, "SnapshotFields", "Potential") ? HY_FIELD_POT : 0u);
  r.units.length_cm = hy_params_get_number(r.par, "UnitLength_in_cm");
  r.units.mass_g = hy_params_get_number(r.par, "UnitMass_in_g");
  r.units.velocity_cm_per_s = hy_params_get_number(r.par, "UnitVelocity_in_cm_per_s");
  hy_msg("%s: %s run, parameters from %s", PACKAGE_STRING, hy_scheme_name(r.scheme), pfile);

  /* 1. initial conditions */
  double t0 = hy_wtime();
  if (load_ics(&r, &err) != 0) {
    fprintf(stderr, "hytree: error: %s\n", err.msg);
    goto out;
  }
  hy_msg("loaded %zu particles from %s in %.2f s (t = %g)", r.p.n, hy_params_get_str(r.par, "InitCondFile"),
         hy_wtime() - t0, r.t0);
  /* 2. auto parameters */
  if (resolve(&r, pool, &err) != 0) {
    fprintf(stderr, "hytree: error: %s\n", err.msg);
    goto out;
  }
  if (r.scheme == HY_SCHEME_HYBRID)
    hy_msg("G = %.9g  eps = %.6g  R1 = %.6g  R2 = %.6g  a_err = %.6g  dt_h = %.6g  n = %d  dt_s = %.6g", r.G,
           r.eps, r.r1, r.r2, r.a_err, r.dt_h, r.n_ratio, r.dt_h * r.n_ratio);
  else
    hy_msg("G = %.9g  eps = %.6g  a_err = %.6g  dt = %.6g", r.G, r.eps, r.a_err, r.dt_h);
  /* 3. device and kernels */
  {
    struct hy_cl_opts o = {.kind = HY_CL_ANY, .platform = -1, .device = -1, .local_rank = 0,
                           .nvec = (int)hy_params_get_int(r.par, "NVec")};
    int kind, pl, dv;
    hy_params_get_device(r.par, &kind, &pl, &dv);
    o.kind = kind == 1 ? HY_CL_GPU : kind == 2 ? HY_CL_CPU : kind == 3 ? HY_CL_EXPLICIT : HY_CL_ANY;
    o.platform = pl;
    o.device = dv;
    if (hy_cl_create(&cl, &o, &err) != 0) {
      fprintf(stderr, "hytree: error: %s\n", err.msg);
      goto out;
    }
    if (!hy_log_quiet()) hy_cl_print_devices(stdout, cl);
    hy_msg("device: %s", hy_cl_description(cl));
    t0 = hy_wtime();
    if (hy_cl_build_all(cl, &err) != 0) {
      fprintf(stderr, "hytree: error: %s\n", err.msg);
      goto out;
    }
    hy_msg("kernels built in %.2f s", hy_wtime() - t0);
  }
  /* 4. outputs (nothing was written before this point) */
  if (make_dirs(r.outdir, &err) != 0) {
    fprintf(stderr, "hytree: error: %s\n", err.msg);
    goto out;
  }
  r.params_text = hy_params_dump(r.par);
  path = join(r.outdir, "params-used.txt");
  if (hy_io_write_text_atomic(path, r.params_text, &err) != 0) {
    fprintf(stderr, "hytree: error: %s\n", err.msg);
    goto out;
  }
  if (!(r.energy = open_csv(r.outdir, "energy.csv", &err)) || !(r.timings = open_csv(r.outdir, "timings.csv", &err))) {
    fprintf(stderr, "hytree: error: %s\n", err.msg);
    goto out;
  }
  hy_diag_csv_header(r.energy);
  timings_header(r.timings, r.n_ratio - 1);
  if (simulate(&r, cl, pool, &err) != 0) {
    fprintf(stderr, "hytree: error: %s\n", err.msg);
    goto out;
  }
  status = 0;
out:
  if (r.energy && fclose(r.energy) != 0 && status == 0) {
    fprintf(stderr, "hytree: error: energy.csv: close failed: %s\n", strerror(errno));
    status = 1;
  }
  if (r.timings && fclose(r.timings) != 0 && status == 0) {
    fprintf(stderr, "hytree: error: timings.csv: close failed: %s\n", strerror(errno));
    status = 1;
  }
  hy_free(path);
  free(r.params_text);
  hy_cl_free(cl);
  hy_pool_free(pool);
  hy_part_free(&r.p);
  hy_params_free(r.par);
  return status;
}
