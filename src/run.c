/* SPDX-License-Identifier: GPL-3.0-or-later
 * run.c: the `hytree run` subcommand. Owns the order of a run: parse the
 * parameters, load and check the initial conditions, resolve the `auto`
 * parameters from the ICs (virial radius, mean speed), choose the OpenCL
 * device and build its kernels -- all before anything is written, so bad
 * input leaves no output behind -- then write params-used.txt, the initial
 * snapshot and diagnostics, and step to TimeEnd writing energy.csv,
 * timings.csv, the progress log and snapshots at soft-step boundaries.
 *
 * On several MPI ranks: rank 0 reads (or generates) the ICs and resolves
 * the `auto` values from the whole set, so they do not depend on the rank
 * count; the particles are then scattered and the domain decomposition
 * (decomp.h) runs before the first force and at every soft step. Decisions
 * that one rank makes are broadcast; a failure on one rank during the run
 * ends all ranks (hy_die, MPI_Abort) with its message. Rank 0 writes the
 * text outputs; snapshots are gathered or written per group (io_mpi.h). */
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
#include "decomp.h"
#include "diag.h"
#include "force.h"
#include "force_cpu.h"
#include "ic.h"
#include "io.h"
#include "io_mpi.h"
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
  int snap_files;   /* NumFilesPerSnapshot */
  struct hy_units units;
  struct hy_part p; /* this rank's particles */
  double t0;
  char *params_text;
  int snap_count;
  FILE *energy, *timings, *let;
  /* MPI */
  MPI_Comm comm; /* MPI_COMM_WORLD's duplicate with MPI_ERRORS_RETURN */
  int rank, size, local_rank, local_size;
  struct hy_decomp *dd;
  struct hy_decomp_stats dd_st;
  struct hy_force *force;
};

/* A failure that every rank sees the same way (or that rank 0 saw and
 * broadcast): print once, return. */
static void report(const struct run *r, const struct hy_err *err) {
  if (r->rank == 0) fprintf(stderr, "hytree: error: %s\n", err->msg);
}

/* Broadcast rank 0's status and message; returns the status. */
static int bcast_status(struct run *r, int rc, struct hy_err *err) {
  int v = rc;
  if (MPI_Bcast(&v, 1, MPI_INT, 0, r->comm) != MPI_SUCCESS) hy_die("MPI_Bcast of a status failed");
  if (v != 0 && MPI_Bcast(err->msg, (int)sizeof err->msg, MPI_CHAR, 0, r->comm) != MPI_SUCCESS)
    hy_die("MPI_Bcast of an error message failed");
  return v;
}

/* Any rank failed? A failing rank prints its own message. */
static int any_failed(struct run *r, int rc, const struct hy_err *err) {
  if (rc != 0 && r->size > 1) fprintf(stderr, "hytree: error: [rank %d] %s\n", r->rank, err->msg);
  if (rc != 0 && r->size == 1) fprintf(stderr, "hytree: error: %s\n", err->msg);
  int v = rc != 0, g = 0;
  if (MPI_Allreduce(&v, &g, 1, MPI_INT, MPI_MAX, r->comm) != MPI_SUCCESS) hy_die("MPI_Allreduce of a status failed");
  return g;
}

static int load_ics(struct run *r, struct hy_err *err) {
  const char *spec = hy_params_get_str(r->par, "InitCondFile");
  struct hy_ic_spec gen;
  int g = hy_ic_parse_spec(spec, &gen, err);
  if (g < 0) return -1;
  r->t0 = 0.0;
  if (g == 1) return hy_ic_generate(&gen, &r->p, NULL, err);
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
  struct hy_snap_info info = {.time = t,
                              .fields = fields,
                              .units = r->units,
                              .gravity_constant = r->G,
                              .softening = r->eps,
                              .params_text = r->params_text};
  double t0 = hy_wtime();
  int rc = hy_io_write_snapshot_mpi(r->comm, r->outdir, r->snap_count, &r->p, &info, r->snap_files, err);
  if (rc == 0) {
    if (r->snap_files > 1)
      hy_msg("snapshot %s/snapshot_%03d.{0..%d}.hdf5 at t = %.6g (%.2f s)", r->outdir, r->snap_count,
             r->snap_files - 1, t, hy_wtime() - t0);
    else
      hy_msg("snapshot %s/snapshot_%03d.hdf5 at t = %.6g (%.2f s)", r->outdir, r->snap_count, t, hy_wtime() - t0);
    r->snap_count++;
  }
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
  fputs(",t_soft,t_tree,t_kernel,t_transfer,t_walk_wall,n_pp_hard,n_pc_hard,n_pp_soft,n_pc_soft,"
        "t_dd,t_let_select,t_let_comm,t_remote_tree,t_wait_device,t_device_busy,t_main_busy,load_balance\n",
        f);
}

/* Per-step values reduced over the ranks: times are the maximum over ranks
 * (the slowest rank sets the pace), counts the sum, load balance
 * max/mean of N_local + N_hard. */
enum { TV_TOTAL, TV_SOFT, TV_TREE, TV_KERNEL, TV_TRANSFER, TV_WALL, TV_DD, TV_SELECT, TV_COMM, TV_REMOTE, TV_WAIT,
       TV_DEVBUSY, TV_MAINBUSY, TV_HARD0 };
enum { CV_PPH, CV_PCH, CV_PPS, CV_PCS, CV_N };
/* let.csv quantities: min, mean, max over ranks */
enum { LV_NLOCAL, LV_NHARD, LV_NSOFT, LV_NHARD_AT_SOFT, LV_SENT, LV_RECV, LV_N };

static int reduce_max(struct run *r, double *v, int n) {
  if (r->size == 1) return 0;
  return MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, r->comm) == MPI_SUCCESS ? 0 : -1;
}

static void step_records(struct run *r, long step, double t, const struct hy_step_times *tm) {
  const int nh = tm->n_hard;
  double tv[TV_HARD0 + HY_MAX_RATIO];
  const struct hy_force_stats *h = &tm->st_hard, *s = &tm->st_soft;
  tv[TV_TOTAL] = tm->total;
  tv[TV_SOFT] = tm->soft;
  tv[TV_TREE] = tm->tree;
  tv[TV_KERNEL] = tm->kernel;
  tv[TV_TRANSFER] = tm->transfer;
  tv[TV_WALL] = tm->walk_wall;
  tv[TV_DD] = tm->dd;
  tv[TV_SELECT] = h->let_select + s->let_select + h->let_boxes + s->let_boxes;
  tv[TV_COMM] = h->let_comm + s->let_comm + h->direct_comm + s->direct_comm;
  tv[TV_REMOTE] = h->remote_build + s->remote_build;
  tv[TV_WAIT] = h->wait_device + s->wait_device;
  tv[TV_DEVBUSY] = h->device_busy + s->device_busy;
  tv[TV_MAINBUSY] = tm->total - tv[TV_WAIT];
  for (int k = 0; k < nh; k++) tv[TV_HARD0 + k] = tm->hard[k];
  uint64_t cv[CV_N] = {tm->pp_hard, tm->pc_hard, tm->pp_soft, tm->pc_soft};
  /* N_local, N_hard (mean over the hard steps of this step), N_soft, counted N_hard at the soft step, bytes */
  double lv[LV_N];
  lv[LV_NLOCAL] = (double)r->p.n;
  lv[LV_NHARD] = nh > 0 ? (double)h->let_recv / nh : 0.0;
  lv[LV_NSOFT] = (double)s->let_recv;
  lv[LV_NHARD_AT_SOFT] = (double)s->let_recv_hard;
  lv[LV_SENT] = (double)(h->let_bytes_sent + s->let_bytes_sent);
  lv[LV_RECV] = (double)(h->let_bytes_recv + s->let_bytes_recv);
  double lmin[LV_N], lmax[LV_N], lsum[LV_N], work = lv[LV_NLOCAL] + (nh > 0 ? lv[LV_NHARD] : lv[LV_NHARD_AT_SOFT]);
  double wmax = work, wsum = work;
  memcpy(lmin, lv, sizeof lv);
  memcpy(lmax, lv, sizeof lv);
  memcpy(lsum, lv, sizeof lv);
  if (r->size > 1) {
    if (reduce_max(r, tv, TV_HARD0 + nh) != 0 ||
        MPI_Allreduce(MPI_IN_PLACE, cv, CV_N, MPI_UINT64_T, MPI_SUM, r->comm) != MPI_SUCCESS ||
        MPI_Allreduce(lv, lmin, LV_N, MPI_DOUBLE, MPI_MIN, r->comm) != MPI_SUCCESS ||
        MPI_Allreduce(lv, lmax, LV_N, MPI_DOUBLE, MPI_MAX, r->comm) != MPI_SUCCESS ||
        MPI_Allreduce(lv, lsum, LV_N, MPI_DOUBLE, MPI_SUM, r->comm) != MPI_SUCCESS ||
        MPI_Allreduce(&work, &wmax, 1, MPI_DOUBLE, MPI_MAX, r->comm) != MPI_SUCCESS ||
        MPI_Allreduce(&work, &wsum, 1, MPI_DOUBLE, MPI_SUM, r->comm) != MPI_SUCCESS)
      hy_die("step %ld: reducing the timings over the ranks failed", step);
  }
  if (r->rank != 0) return;
  FILE *f = r->timings;
  fprintf(f, "%ld,%.9g,%.6e", step, t, tv[TV_TOTAL]);
  for (int k = 0; k < nh; k++) fprintf(f, ",%.6e", tv[TV_HARD0 + k]);
  fprintf(f, ",%.6e,%.6e,%.6e,%.6e,%.6e,%llu,%llu,%llu,%llu", tv[TV_SOFT], tv[TV_TREE], tv[TV_KERNEL],
          tv[TV_TRANSFER], tv[TV_WALL], (unsigned long long)cv[CV_PPH], (unsigned long long)cv[CV_PCH],
          (unsigned long long)cv[CV_PPS], (unsigned long long)cv[CV_PCS]);
  fprintf(f, ",%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.6e,%.6f\n", tv[TV_DD], tv[TV_SELECT], tv[TV_COMM], tv[TV_REMOTE],
          tv[TV_WAIT], tv[TV_DEVBUSY], tv[TV_MAINBUSY], wsum > 0 ? wmax / (wsum / r->size) : 1.0);
  if (r->let) {
    fprintf(r->let, "%ld,%.9g", step, t);
    for (int q = 0; q < LV_N; q++) fprintf(r->let, ",%.0f,%.1f,%.0f", lmin[q], lsum[q] / r->size, lmax[q]);
    fputc('\n', r->let);
  }
}

static void let_header(FILE *f) {
  static const char *q[LV_N] = {"n_local", "n_hard", "n_soft", "n_hard_at_soft", "bytes_sent", "bytes_recv"};
  fputs("step,time", f);
  for (int k = 0; k < LV_N; k++) fprintf(f, ",%s_min,%s_mean,%s_max", q[k], q[k], q[k]);
  fputc('\n', f);
}

/* Domain decomposition hook of the integrator: N_hard of eq 13 from the
 * force's last hard LET. */
static int decompose_cb(void *ctx, struct hy_part *p, struct hy_err *err) {
  struct run *r = ctx;
  return hy_decomp_exchange(r->dd, p, (double)hy_force_last_hard_items(r->force), &r->dd_st, err);
}

/* The main loop; returns 0 or -1 with err set. On several ranks a failure
 * of any rank ends the run on all ranks (hy_die). */
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
  r->force = f;
  const char *lw = hy_params_get_str(r->par, "LETWalk");
  hy_force_set_comm(f, r->comm, r->size > 1,
                    strcmp(lw, "separate") == 0 ? HY_LET_SEPARATE : strcmp(lw, "merged") == 0 ? HY_LET_MERGED
                                                                                             : HY_LET_AUTO);
  struct hy_sim_cfg sc = {.scheme = r->scheme,
                          .dt_h = r->dt_h,
                          .n_ratio = r->n_ratio,
                          .decompose = r->size > 1 ? decompose_cb : NULL,
                          .decompose_ctx = r,
                          .dd_every = 4};
  struct hy_sim *sim = hy_sim_create(&r->p, f, pool, &sc, r->t0);
  const MPI_Comm *dcomm = r->size > 1 ? &r->comm : NULL;
  int rc = -1;
  unsigned snap_want = HY_WANT_POT | ((r->snap_fields & HY_FIELD_ACC) ? HY_WANT_ACC : 0u);
  double tw = hy_wtime();
  if (hy_sim_start(sim, snap_want, err) != 0) goto out;
  hy_msg("initial forces: %.3f s", hy_wtime() - tw);
  struct hy_diag d0, d;
  if (hy_diag_compute_comm(&r->p, r->t0, 0.0, pool, dcomm, &d0) != 0) {
    hy_err_set(err, "energy diagnostics: MPI_Allreduce failed");
    goto out;
  }
  if (r->rank == 0) {
    hy_diag_csv_row(r->energy, &d0);
    if (csv_flush(r->energy, "energy.csv", err) != 0) goto out;
  }
  hy_msg("t = %.6g  E = %.9g  K = %.6g  W = %.6g  2K/|W| = %.4f", r->t0, d0.etot, d0.kin, d0.pot, d0.virial);
  if (write_snapshot(r, r->t0, r->snap_fields, err) != 0) goto out;

  double span = r->t_end - r->t0;
  if (span <= 0.0) {
    if (span < 0.0 && r->rank == 0) hy_warn("TimeEnd %g is before the ICs' time %g: nothing to integrate", r->t_end, r->t0);
    rc = 0;
    goto out;
  }
  const double len = hy_sim_step_length(sim);
  const long n_steps = (long)ceil(span / len - 1e-9);
  hy_msg("integrating to t = %.6g: %ld %ssteps of %.6g%s", r->t_end, n_steps,
         r->scheme == HY_SCHEME_HYBRID ? "soft " : "", len,
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
    step_records(r, s, t, &tm);
    if (r->rank == 0 && (csv_flush(r->timings, "timings.csv", err) != 0 ||
                         (r->let && csv_flush(r->let, "let.csv", err) != 0)))
      goto out;
    if (energy) {
      while (r->energy_dt > 0.0 && r->t0 + (double)next_energy * r->energy_dt <= t + 1e-9 * len) next_energy++;
      if (hy_diag_compute_comm(&r->p, t, d0.etot, pool, dcomm, &d) != 0) {
        hy_err_set(err, "energy diagnostics: MPI_Allreduce failed");
        goto out;
      }
      if (r->rank == 0) {
        hy_diag_csv_row(r->energy, &d);
        if (csv_flush(r->energy, "energy.csv", err) != 0) goto out;
      }
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
  hy_msg("done: %ld steps in %.2f s (%.4f s per %sstep), final |dE/E| = %.3e", n_steps, wall,
         wall / (double)n_steps, r->scheme == HY_SCHEME_HYBRID ? "soft " : "", d.de_rel);
  rc = 0;
out:
  /* a rank-local failure cannot be reported collectively: end every rank */
  if (rc != 0 && r->size > 1) hy_die("%s", err->msg); /* hy_die names the rank */
  hy_sim_free(sim);
  hy_force_free(f);
  r->force = NULL;
  return rc;
}

/* ------------------------------------------------------------- MPI setup */

/* Duplicate MPI_COMM_WORLD with MPI_ERRORS_RETURN (so MPI failures come
 * back as codes with messages) and find the node-local rank. */
static int setup_mpi(struct run *r) {
  MPI_Comm node;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &r->comm) != MPI_SUCCESS ||
      MPI_Comm_set_errhandler(r->comm, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
      MPI_Comm_rank(r->comm, &r->rank) != MPI_SUCCESS || MPI_Comm_size(r->comm, &r->size) != MPI_SUCCESS ||
      MPI_Comm_split_type(r->comm, MPI_COMM_TYPE_SHARED, r->rank, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    fputs("hytree: error: run: setting up the MPI communicators failed\n", stderr);
    return -1;
  }
  int ok = MPI_Comm_rank(node, &r->local_rank) == MPI_SUCCESS && MPI_Comm_size(node, &r->local_size) == MPI_SUCCESS;
  MPI_Comm_free(&node);
  if (!ok) {
    fputs("hytree: error: run: MPI_Comm_rank/size of the node communicator failed\n", stderr);
    return -1;
  }
  return 0;
}

/* Host threads per rank: HYTREE_NUM_THREADS, else the node's cores shared
 * by the ranks on the node. */
static int pool_threads(const struct run *r) {
  int n = hy_pool_default_threads();
  if (getenv("HYTREE_NUM_THREADS")) return n;
  n /= r->local_size > 0 ? r->local_size : 1;
  return n < 1 ? 1 : n;
}

/* Rank 0 resolved the `auto` values and the step from the whole IC set:
 * broadcast them so every rank runs with the same numbers. */
static int share_resolved(struct run *r) {
  double v[8] = {r->G, r->eps, r->r1, r->r2, r->a_err, r->dt_h, r->t0, 0};
  if (r->size == 1) return 0;
  if (MPI_Bcast(v, 8, MPI_DOUBLE, 0, r->comm) != MPI_SUCCESS) hy_die("MPI_Bcast of the run parameters failed");
  r->G = v[0];
  r->eps = v[1];
  r->r1 = v[2];
  r->r2 = v[3];
  r->a_err = v[4];
  r->dt_h = v[5];
  r->t0 = v[6];
  static const char *keys[] = {"Softening", "R1", "R2", "AccErr"};
  const double vals[] = {r->eps, r->r1, r->r2, r->a_err};
  for (int k = 0; k < 4; k++)
    if (hy_params_is_auto(r->par, keys[k])) hy_params_set_resolved(r->par, keys[k], vals[k]);
  double dt0 = 0.0;
  if (r->rank == 0 && hy_params_is_auto(r->par, "TimeStepHard")) dt0 = hy_params_get_number(r->par, "TimeStepHard");
  if (MPI_Bcast(&dt0, 1, MPI_DOUBLE, 0, r->comm) != MPI_SUCCESS) hy_die("MPI_Bcast of the run parameters failed");
  if (hy_params_is_auto(r->par, "TimeStepHard")) hy_params_set_resolved(r->par, "TimeStepHard", dt0);
  return 0;
}

/* Which rank took which device on which host (rank 0 prints the table). */
static int device_table(struct run *r, const struct hy_cl *cl) {
  enum { W = 256 };
  char line[W];
  char host[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  if (MPI_Get_processor_name(host, &len) != MPI_SUCCESS) snprintf(host, sizeof host, "?");
  snprintf(line, sizeof line, "%.64s (local rank %d): %.160s", host, r->local_rank, hy_cl_description(cl));
  if (r->size == 1) {
    hy_msg("device: %s", hy_cl_description(cl));
    return 0;
  }
  char *all = r->rank == 0 ? hy_malloc("device table", (size_t)r->size, W) : NULL;
  if (MPI_Gather(line, W, MPI_CHAR, all, W, MPI_CHAR, 0, r->comm) != MPI_SUCCESS)
    hy_die("MPI_Gather of the device table failed");
  if (r->rank == 0) {
    hy_msg("devices of the %d ranks:", r->size);
    for (int k = 0; k < r->size; k++) hy_msg("  rank %d: %.*s", k, W, all + (size_t)k * W);
  }
  hy_free(all);
  return 0;
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
  struct run r;
  memset(&r, 0, sizeof r);
  hy_part_init(&r.p);
  r.pfile = pfile;
  if (setup_mpi(&r) != 0) {
    hy_free(ov);
    return 1;
  }
  char *errors = NULL;
  r.par = hy_params_parse_file(pfile, ov, n_ov, &errors);
  hy_free(ov);
  if (!r.par) {
    /* every problem, one per line (every rank parsed the same file: rank 0 reports) */
    char *line = errors;
    while (r.rank == 0 && line && *line) {
      char *nl = strchr(line, '\n');
      if (nl) *nl = '\0';
      fprintf(stderr, "hytree: error: %s\n", line);
      line = nl ? nl + 1 : NULL;
    }
    free(errors);
    MPI_Comm_free(&r.comm);
    return 1;
  }
  struct hy_err err;
  int status = 1;
  struct hy_pool *pool = hy_pool_create(pool_threads(&r));
  struct hy_cl *cl = NULL;
  char *path = NULL;

  r.outdir = hy_params_get_str(r.par, "OutputDir");
  if (hy_scheme_parse(hy_params_get_str(r.par, "Scheme"), &r.scheme) != 0) {
    hy_err_set(&err, "%s: bad Scheme", pfile);
    report(&r, &err);
    goto out;
  }
  r.n_ratio = r.scheme == HY_SCHEME_HYBRID ? (int)hy_params_get_int(r.par, "SoftStepRatio") : 1;
  r.t_end = hy_params_get_number(r.par, "TimeEnd");
  r.snap_dt = hy_params_get_number(r.par, "SnapshotInterval");
  r.energy_dt = hy_params_get_number(r.par, "EnergyInterval");
  r.snap_fields = (hy_params_list_has(r.par, "SnapshotFields", "Acceleration") ? HY_FIELD_ACC : 0u) |
                  (hy_params_list_has(r.par, "SnapshotFields", "Potential") ? HY_FIELD_POT : 0u);
  r.snap_files = (int)hy_params_get_int(r.par, "NumFilesPerSnapshot");
  r.units.length_cm = hy_params_get_number(r.par, "UnitLength_in_cm");
  r.units.mass_g = hy_params_get_number(r.par, "UnitMass_in_g");
  r.units.velocity_cm_per_s = hy_params_get_number(r.par, "UnitVelocity_in_cm_per_s");
  if (r.snap_files > r.size) {
    hy_err_set(&err, "%s: NumFilesPerSnapshot %d is larger than the number of MPI ranks (%d)", pfile, r.snap_files,
               r.size);
    report(&r, &err);
    goto out;
  }
  int grid[3];
  if (hy_decomp_parse_grid(hy_params_get_str(r.par, "DomainGrid"), r.size, grid, &err) != 0) {
    report(&r, &err);
    goto out;
  }
  hy_msg("%s: %s run on %d MPI rank%s, parameters from %s", PACKAGE_STRING, hy_scheme_name(r.scheme), r.size,
         r.size > 1 ? "s" : "", pfile);

  /* 1. initial conditions (rank 0) and 2. auto parameters from the whole set */
  double t0 = hy_wtime();
  int rc = 0;
  if (r.rank == 0) {
    rc = load_ics(&r, &err);
    if (rc == 0)
      hy_msg("loaded %zu particles from %s in %.2f s (t = %g)", r.p.n, hy_params_get_str(r.par, "InitCondFile"),
             hy_wtime() - t0, r.t0);
    if (rc == 0) rc = resolve(&r, pool, &err);
  }
  if (bcast_status(&r, rc, &err) != 0) {
    report(&r, &err);
    goto out;
  }
  if (share_resolved(&r) != 0) goto out;
  if (r.scheme == HY_SCHEME_HYBRID)
    hy_msg("G = %.9g  eps = %.6g  R1 = %.6g  R2 = %.6g  a_err = %.6g  dt_h = %.6g  n = %d  dt_s = %.6g", r.G,
           r.eps, r.r1, r.r2, r.a_err, r.dt_h, r.n_ratio, r.dt_h * r.n_ratio);
  else
    hy_msg("G = %.9g  eps = %.6g  a_err = %.6g  dt = %.6g", r.G, r.eps, r.a_err, r.dt_h);
  if (r.size > 1) {
    struct hy_part full = r.p; /* rank 0: every particle; others: none */
    hy_part_init(&r.p);
    rc = hy_io_scatter_mpi(r.comm, &full, &r.p, &err);
    hy_part_free(&full);
    if (rc != 0) {
      report(&r, &err);
      goto out;
    }
    r.dd = hy_decomp_create(r.comm, grid, hy_params_get_number(r.par, "SampleRate"), 1.0, 12345, &err);
    if (!r.dd) {
      report(&r, &err);
      goto out;
    }
    hy_msg("domain grid %dx%dx%d, sample rate %g", grid[0], grid[1], grid[2],
           hy_params_get_number(r.par, "SampleRate"));
  }
  /* 3. device and kernels (every rank; one GPU per rank by node-local rank) */
  {
    struct hy_cl_opts o = {.kind = HY_CL_ANY, .platform = -1, .device = -1, .local_rank = r.local_rank,
                           .nvec = (int)hy_params_get_int(r.par, "NVec")};
    int kind, pl, dv;
    hy_params_get_device(r.par, &kind, &pl, &dv);
    o.kind = kind == 1 ? HY_CL_GPU : kind == 2 ? HY_CL_CPU : kind == 3 ? HY_CL_EXPLICIT : HY_CL_ANY;
    o.platform = pl;
    o.device = dv;
    rc = hy_cl_create(&cl, &o, &err);
    if (any_failed(&r, rc, &err)) goto out;
    if (!hy_log_quiet() && r.rank == 0) hy_cl_print_devices(stdout, cl);
    if (device_table(&r, cl) != 0) goto out;
    t0 = hy_wtime();
    rc = hy_cl_build_all(cl, &err);
    if (any_failed(&r, rc, &err)) goto out;
    hy_msg("kernels built in %.2f s", hy_wtime() - t0);
  }
  /* 4. outputs (nothing was written before this point) */
  rc = 0;
  r.params_text = hy_params_dump(r.par);
  if (r.rank == 0) {
    rc = make_dirs(r.outdir, &err);
    if (rc == 0) {
      path = join(r.outdir, "params-used.txt");
      rc = hy_io_write_text_atomic(path, r.params_text, &err);
    }
    if (rc == 0 && (!(r.energy = open_csv(r.outdir, "energy.csv", &err)) ||
                    !(r.timings = open_csv(r.outdir, "timings.csv", &err)) ||
                    (r.size > 1 && !(r.let = open_csv(r.outdir, "let.csv", &err)))))
      rc = -1;
    if (rc == 0) {
      hy_diag_csv_header(r.energy);
      timings_header(r.timings, r.n_ratio - 1);
      if (r.let) let_header(r.let);
    }
  }
  if (bcast_status(&r, rc, &err) != 0) {
    report(&r, &err);
    goto out;
  }
  if (simulate(&r, cl, pool, &err) != 0) {
    report(&r, &err);
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
  if (r.let && fclose(r.let) != 0 && status == 0) {
    fprintf(stderr, "hytree: error: let.csv: close failed: %s\n", strerror(errno));
    status = 1;
  }
  hy_decomp_free(r.dd);
  MPI_Comm_free(&r.comm);
  hy_free(path);
  free(r.params_text);
  hy_cl_free(cl);
  hy_pool_free(pool);
  hy_part_free(&r.p);
  hy_params_free(r.par);
  return status;
}
