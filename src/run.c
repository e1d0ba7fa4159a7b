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
#include <signal.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

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
#include "restart.h"
#include "shm.h"
#include "sim.h"
#include "threads.h"
#include "trace.h"

/* Particles used to estimate the potential energy W of the ICs for r_v. */
#define HY_RV_SAMPLE 8192

void hy_run_usage(FILE *out, int full) {
  fputs("usage: hytree run PARAMFILE [-P Key=Value ...] [--quiet]\n"
        "       hytree run --restart OUTPUTDIR [PARAMFILE] [-P Key=Value ...] [--quiet]\n"
        "  Run a simulation described by PARAMFILE (Gadget-style `Key  Value` lines,\n"
        "  `%` or `#` comments). -P overrides a key (repeatable; later ones win).\n"
        "  Outputs go to OutputDir: params-used.txt, energy.csv, timings.csv,\n"
        "  snapshot_NNN.hdf5 (see doc/output.md).\n"
        "  --restart DIR  resume the run whose OutputDir is DIR from its last restart set\n"
        "                 (RestartInterval, RestartEverySoftSteps, SIGUSR1; SIGTERM writes one and stops)\n"
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
  double dd_wait; /* seconds spent in the barrier before each decomposition */
  double dd_sent, dd_recv, dd_before; /* sums over the decompositions: particles sent, received, held before */
  long dd_count;                      /* decompositions made */
  int dd_cost_walk;                   /* DomainCost walktime */
  double walk_mark[2];                /* hy_force_walk_seconds at the last decomposition */
  struct hy_force *force;
  /* restarts */
  const char *restart_dir;          /* --restart DIR, or NULL */
  struct hy_restart_state rs;       /* the state read from it */
  double restart_minutes;           /* RestartInterval */
  long restart_every;               /* RestartEverySoftSteps */
  long test_signal_step;            /* HYTREE_TEST_SIGNAL_AT_STEP (tests) */
  long test_nan_step;               /* HYTREE_TEST_NAN_AT_STEP (tests) */
  int test_kill_write;              /* HYTREE_TEST_KILL_IN_RESTART (tests) */
  int restarts_written;
};

/* Signals: SIGUSR1 asks for a restart set, SIGTERM for a set and a stop, at
 * the next step boundary (the ranks agree on it there). */
static volatile sig_atomic_t got_usr1 = 0, got_term = 0;
static void on_signal(int sig) {
  if (sig == SIGTERM) got_term = 1;
  else got_usr1 = 1;
}

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

/* err := "WHERE: KEY: " + err (a value that passed the parameter checks but
 * not a later one); returns -1. */
static int err_at_key(const struct run *r, const char *key, struct hy_err *err) {
  char msg[sizeof err->msg];
  snprintf(msg, sizeof msg, "%s", err->msg);
  return hy_err_set(err, "%s: %s: %s", hy_params_where(r->par, key), key, msg);
}

static int load_ics(struct run *r, struct hy_err *err) {
  const char *spec = hy_params_get_str(r->par, "InitCondFile");
  struct hy_ic_spec gen;
  int g = hy_ic_parse_spec(spec, &gen, err);
  if (g < 0) return err_at_key(r, "InitCondFile", err);
  r->t0 = 0.0;
  if (g == 1) return hy_ic_generate(&gen, &r->p, NULL, err) != 0 ? err_at_key(r, "InitCondFile", err) : 0;
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

/* Restarts: keep the header and the rows of a CSV record whose first column
 * is at most `upto` (rows a stopped or killed run wrote after the restart
 * set), rewriting the file atomically. A missing file is not an error. */
static int trim_csv(const char *dir, const char *name, double upto, struct hy_err *err) {
  char *path = join(dir, name);
  FILE *f = fopen(path, "r");
  if (!f) {
    hy_free(path);
    return 0;
  }
  size_t cap = 1 << 16, len = 0;
  char *out = hy_malloc("CSV text", cap, 1), line[8192];
  int first = 1;
  while (fgets(line, sizeof line, f)) {
    if (!first && strtod(line, NULL) > upto) continue;
    first = 0;
    size_t l = strlen(line);
    if (len + l + 1 > cap) {
      cap = 2 * (len + l + 1);
      out = hy_realloc("CSV text", out, cap, 1);
    }
    memcpy(out + len, line, l + 1);
    len += l;
  }
  int bad = ferror(f);
  fclose(f);
  int rc = bad ? hy_err_set(err, "%s: read failed", path) : hy_io_write_text_atomic(path, out, err);
  hy_free(out);
  hy_free(path);
  return rc;
}

static FILE *open_csv(const char *dir, const char *name, const char *mode, struct hy_err *err) {
  char *path = join(dir, name);
  FILE *f = fopen(path, mode);
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
/* the summary's split of rank 0's costs */
enum sum_part { SP_SORT, SP_BUILD, SP_EXPORT, SP_REMOTE, SP_UPLOAD, SP_DOWNLOAD, SP_LET, SP_BOXES, SP_DD, SP_WALK, SP_N };
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
static int decompose_cb(void *ctx, struct hy_part *p, const struct hy_decomp_dev *dev, struct hy_moved *moved,
                        struct hy_err *err) {
  struct run *r = ctx;
  /* the ranks arrive at different times (unequal walks); the barrier makes
   * that wait visible apart from the decomposition's own work */
  double t0 = hy_wtime();
  const double extra = (double)hy_force_last_hard_items(r->force);
  if (r->size > 1 && r->dd_cost_walk) {
    /* DomainCost walktime: the walks' time since the last decomposition, for
     * the work this domain held, weights the next samples (and the
     * exchange of these figures is the barrier) */
    double walk[2], since[2];
    hy_force_walk_seconds(r->force, walk);
    for (int k = 0; k < 2; k++) since[k] = walk[k] - r->walk_mark[k];
    if (hy_decomp_cost_update(r->dd, since, (double)p->n + extra, err) != 0) return -1;
    memcpy(r->walk_mark, walk, sizeof walk);
  } else if (r->size > 1 && MPI_Barrier(r->comm) != MPI_SUCCESS) {
    return hy_err_set(err, "domain decomposition: MPI_Barrier failed");
  }
  r->dd_wait += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "dd_barrier", t0);
  int rc = dev ? hy_decomp_exchange_dev(r->dd, p, extra, dev, &r->dd_st, err)
               : hy_decomp_exchange(r->dd, p, extra, &r->dd_st, err);
  if (rc == 0) {
    r->dd_sent += (double)r->dd_st.n_sent;
    r->dd_recv += (double)r->dd_st.n_recv;
    r->dd_before += (double)r->dd_st.n_before;
    r->dd_count++;
  }
  moved->known = hy_decomp_moved(r->dd, &moved->holes, &moved->srcs, &moved->n_holes, &moved->n_keep) == 0;
  /* a non-finite position has no domain: every rank keeps its particles, so
   * that the step ends and the check after it stops the run with an
   * emergency snapshot */
  return rc == HY_DECOMP_NONFINITE ? 0 : rc;
}

/* The next soft step's decomposition made ahead (hy_dd_pre_fn): N_hard of
 * eq 13 from this hard step's LET, as the decomposition would take it. */
static int dd_pre_cb(void *ctx, struct hy_part *p, const struct hy_decomp_dev *dev, int step, struct hy_err *err) {
  struct run *r = ctx;
  if (step == 0) {
    hy_decomp_pre_draw(r->dd, p->n, (double)hy_force_last_hard_items(r->force));
    return 0;
  }
  /* the cut on a thread of rank 0's: the exchange at the soft step waits for it */
  return step == 1 ? hy_decomp_pre_sample(r->dd, p, dev, err) : hy_decomp_pre_cut_begin(r->dd, err);
}

/* ----------------------------------------------------- non-finite state */

struct finite_job {
  const struct hy_part *p;
  uint64_t *bad;  /* per thread: count */
  uint64_t *low;  /* per thread: lowest bad ID */
};

static void finite_body(void *arg, size_t b, size_t e, int tid) {
  struct finite_job *j = arg;
  const struct hy_part *p = j->p;
  uint64_t bad = 0, low = UINT64_MAX;
  for (size_t i = b; i < e; i++) {
    int ok = 1;
    for (int d = 0; d < 3; d++)
      ok &= isfinite(p->pos[3 * i + d]) && isfinite(p->vel[3 * i + d]) && isfinite(p->acc_w[3 * i + d]);
    if (!ok) {
      bad++;
      if (p->id[i] < low) low = p->id[i];
    }
  }
  j->bad[tid] += bad;
  if (low < j->low[tid]) j->low[tid] = low;
}

/* After step s: a non-finite position, velocity or kick acceleration on any
 * rank stops the run. An emergency snapshot of the state goes to
 * OutputDir/emergency/ (the regular snapshots stay as they are) and err names
 * the step, the time, the count and the lowest particle ID. Collective.
 * Returns 0 when every value is finite. */
static int check_finite(struct run *r, struct hy_sim *sim, struct hy_pool *pool, long s, double t,
                        struct hy_err *err) {
  /* the state on the device: count there, bring it over only if some rank found one */
  if (hy_sim_state_on_device(sim)) {
    size_t n_bad = 0;
    if (hy_sim_count_nonfinite(sim, &n_bad, err) != 0) return -1;
    uint64_t all = n_bad;
    if (r->size > 1 && MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_UINT64_T, MPI_SUM, r->comm) != MPI_SUCCESS)
      return hy_err_set(err, "step %ld: MPI_Allreduce of the finite check failed", s);
    if (all == 0) return 0;
    if (hy_sim_sync(sim, err) != 0) return -1;
  }
  int nt = hy_pool_size(pool);
  uint64_t *bad = hy_calloc("finite check", (size_t)nt, sizeof(uint64_t));
  uint64_t *low = hy_malloc("finite check", (size_t)nt, sizeof(uint64_t));
  for (int k = 0; k < nt; k++) low[k] = UINT64_MAX;
  struct finite_job j = {.p = &r->p, .bad = bad, .low = low};
  hy_pool_for(pool, r->p.n, 65536, finite_body, &j);
  uint64_t v[2] = {0, UINT64_MAX};
  for (int k = 0; k < nt; k++) {
    v[0] += bad[k];
    if (low[k] < v[1]) v[1] = low[k];
  }
  hy_free(bad);
  hy_free(low);
  if (r->size > 1 && (MPI_Allreduce(MPI_IN_PLACE, &v[0], 1, MPI_UINT64_T, MPI_SUM, r->comm) != MPI_SUCCESS ||
                      MPI_Allreduce(MPI_IN_PLACE, &v[1], 1, MPI_UINT64_T, MPI_MIN, r->comm) != MPI_SUCCESS))
    return hy_err_set(err, "step %ld: MPI_Allreduce of the finite check failed", s);
  if (v[0] == 0) return 0;
  /* the particle whose position went bad first, as seen by the force evaluations */
  uint64_t first = hy_force_first_bad_id(r->force);
  if (r->size > 1 && MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_UINT64_T, MPI_MIN, r->comm) != MPI_SUCCESS)
    return hy_err_set(err, "step %ld: MPI_Allreduce of the finite check failed", s);
  char firsttxt[96] = "";
  if (first != UINT64_MAX)
    snprintf(firsttxt, sizeof firsttxt, ", first non-finite position: particle ID %llu", (unsigned long long)first);
  char *dir = join(r->outdir, "emergency");
  struct hy_err e2;
  int rc = r->rank == 0 ? make_dirs(dir, &e2) : 0;
  if (bcast_status(r, rc, &e2) == 0) {
    struct hy_snap_info info = {.time = t, .fields = 0, .units = r->units, .gravity_constant = r->G,
                                .softening = r->eps, .params_text = r->params_text};
    rc = hy_io_write_snapshot_mpi(r->comm, dir, (int)(s % 1000), &r->p, &info, r->snap_files, &e2);
  }
  if (rc == 0)
    hy_err_set(err,
               "step %ld, t = %.9g: %llu particle(s) with a non-finite position, velocity or acceleration (lowest "
               "ID %llu%s); emergency snapshot %.1000s/snapshot_%03ld%s.hdf5",
               s, t, (unsigned long long)v[0], (unsigned long long)v[1], firsttxt, dir, s % 1000,
               r->snap_files > 1 ? ".*" : "");
  else
    hy_err_set(err,
               "step %ld, t = %.9g: %llu particle(s) with a non-finite position, velocity or acceleration (lowest "
               "ID %llu%s); the emergency snapshot failed too: %.1000s",
               s, t, (unsigned long long)v[0], (unsigned long long)v[1], firsttxt, e2.msg);
  hy_free(dir);
  return -1;
}

/* Write a restart set after step s (collective). */
static int write_restart(struct run *r, struct hy_force *f, long s, long next_snap, long next_energy, double e0,
                         struct hy_err *err) {
  struct hy_restart_state st;
  memset(&st, 0, sizeof st);
  st.step = s;
  st.t0 = r->t0;
  st.dt_h = r->dt_h;
  st.G = r->G;
  st.eps = r->eps;
  st.r1 = r->r1;
  st.r2 = r->r2;
  st.a_err = r->a_err;
  st.n_ratio = r->n_ratio;
  st.snap_count = r->snap_count;
  st.next_snap = next_snap;
  st.next_energy = next_energy;
  st.e0 = e0;
  st.last_hard = hy_force_last_hard_items(f);
  uint64_t n = r->p.n, nt = n;
  if (r->size > 1 && MPI_Allreduce(&n, &nt, 1, MPI_UINT64_T, MPI_SUM, r->comm) != MPI_SUCCESS)
    return hy_err_set(err, "restart: MPI_Allreduce of the particle count failed");
  st.n_total = nt;
  size_t bytes = r->dd ? hy_decomp_state_size(r->dd) : 0;
  void *blob = hy_malloc("restart blob", bytes + 1, 1);
  if (r->dd) hy_decomp_state_save(r->dd, blob);
  double t0 = hy_wtime();
  r->restarts_written++;
  int rc = hy_restart_write(r->comm, r->outdir, &st, r->params_text, blob, bytes, &r->p,
                            r->test_kill_write == r->restarts_written, err);
  hy_free(blob);
  if (rc == 0) hy_msg("restart set written at step %ld (%.2f s)", s, hy_wtime() - t0);
  return rc;
}

static int device_choice_of(const struct run *r, const char *key) {
  const char *v = hy_params_get_str(r->par, key);
  return strcmp(v, "host") == 0 ? 1 : strcmp(v, "device") == 0 ? 2 : 0;
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
                            .n_ratio = r->n_ratio,
                            /* ParticleState device needs the tree built there */
                            .tree_build = device_choice_of(r, "ParticleState") == 2 ? HY_TREE_BUILD_DEVICE
                                                                                    : device_choice_of(r, "TreeBuild")};
  struct hy_force *f = hy_force_create(cl, pool, &fc);
  r->force = f;
  hy_force_set_comm(f, r->comm, r->size > 1, HY_LET_AUTO);
  hy_force_set_let_open(f, hy_params_get_number(r->par, "LETOpenFactor"));
  struct hy_sim_cfg sc = {.scheme = r->scheme,
                          .dt_h = r->dt_h,
                          .n_ratio = r->n_ratio,
                          .decompose = r->size > 1 ? decompose_cb : NULL,
                          .decompose_ctx = r,
                          .dd_pre = r->size > 1 ? dd_pre_cb : NULL,
                          .dd_every = 4,
                          .state = device_choice_of(r, "ParticleState")};
  struct hy_sim *sim = hy_sim_create(&r->p, f, pool, &sc, r->t0);

  hy_sim_set_lazy_sync(sim, 1); /* p is read only after steps with a `want`, and synced before other reads */
  const MPI_Comm *dcomm = r->size > 1 ? &r->comm : NULL;
  int rc = -1;
  if (sc.state == HY_STATE_DEVICE && !hy_sim_state_on_device(sim)) {
    hy_err_set(err, "%s: ParticleState device: %s has no double precision (cl_khr_fp64); use auto or host",
               hy_params_where(r->par, "ParticleState"), hy_cl_device_name(cl));
    goto out;
  }
  if (r->rank == 0 && r->scheme != HY_SCHEME_DIRECT)
    hy_msg("tree built on the %s, particle state kept on the %s",
           hy_force_config(f)->tree_build == HY_TREE_BUILD_DEVICE ? "device" : "host",
           !hy_sim_state_on_device(sim) ? "host"
           : r->size > 1                 ? "device (decomposed there)"
                                         : "device");
  if (r->rank == 0 && r->size > 1) {
    const int ns = hy_force_let_node_ranks(f);
    if (ns > 1)
      hy_msg("LET items between the %d ranks of rank 0's node through a shared-memory window, MPI messages otherwise",
             ns);
    else
      hy_msg("LET items through MPI messages");
  }
  unsigned snap_want = HY_WANT_POT | ((r->snap_fields & HY_FIELD_ACC) ? HY_WANT_ACC : 0u);
  struct hy_diag d0, d;
  memset(&d, 0, sizeof d);
  long first_step = 1, next_snap = 1, next_energy = 1;
  if (r->restart_dir) {
    /* resume: the kick acceleration, the decomposition and N_hard come from the set */
    hy_sim_resume(sim, (long)r->rs.step);
    hy_force_set_last_hard_items(f, r->rs.last_hard);
    memset(&d0, 0, sizeof d0);
    d0.etot = r->rs.e0;
    first_step = (long)r->rs.step + 1;
    next_snap = (long)r->rs.next_snap;
    next_energy = (long)r->rs.next_energy;
    r->snap_count = r->rs.snap_count;
    hy_msg("resumed from %s/restart at t = %.9g (step %lld)", r->restart_dir, hy_sim_time(sim),
           (long long)r->rs.step);
  } else {
    double tw = hy_wtime();
    if (hy_sim_start(sim, snap_want, err) != 0) goto out;
    hy_msg("initial forces: %.3f s", hy_wtime() - tw);
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
  }

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
  double wall0 = hy_wtime(), last_log = 0.0, last_restart = wall0;
  const int tty = isatty(STDOUT_FILENO);
  int have_energy = 0;
  struct {
    long steps, n_hard;
    double wall, soft, hard, kernel, inter, max_de, merged, whole;
    double part[SP_N]; /* rank 0's costs, enum sum_part */
  } sum;
  memset(&sum, 0, sizeof sum);
  const double dd_wait0 = r->dd_wait, dd_sent0 = r->dd_sent, dd_recv0 = r->dd_recv, dd_before0 = r->dd_before;
  const long dd_count0 = r->dd_count;
  struct hy_step_times tm;
  int stopped = 0;
  if (first_step > n_steps) hy_msg("the restart set is already at or past TimeEnd: nothing to integrate");
  for (long s = first_step; s <= n_steps; s++) {
    double t_next = r->t0 + (double)s * len;
    int final = s == n_steps;
    int snap = final || (r->snap_dt > 0.0 && t_next >= r->t0 + (double)next_snap * r->snap_dt - 1e-9 * len);
    int energy = final || r->energy_dt == 0.0 || t_next >= r->t0 + (double)next_energy * r->energy_dt - 1e-9 * len;
    unsigned want = (snap ? snap_want : 0u) | (energy ? HY_WANT_POT : 0u);
    if (r->test_nan_step == s && r->rank == 0 && r->p.n > 0) { /* tests */
      if (hy_sim_sync(sim, err) != 0) goto out;
      r->p.vel[0] = NAN;
      hy_sim_host_changed(sim);
    }
    const double t_step = hy_trace_t();
    if (hy_sim_step(sim, want, &tm, err) != 0) goto out;
    hy_trace(HY_TRACE_MAIN, "step", t_step);
    const double t_check = hy_trace_t();
    if (check_finite(r, sim, pool, s, hy_sim_time(sim), err) != 0) goto out;
    hy_trace(HY_TRACE_MAIN, "check_finite", t_check);
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
      if (d.de_rel > sum.max_de) sum.max_de = d.de_rel;
      have_energy = 1;
    }
    /* totals for the summary */
    sum.steps++;
    sum.wall += tm.total;
    sum.soft += tm.soft;
    for (int k = 0; k < tm.n_hard; k++) sum.hard += tm.hard[k];
    sum.n_hard += tm.n_hard;
    sum.kernel += tm.kernel;
    sum.inter += (double)(tm.pp_hard + tm.pc_hard + tm.pp_soft + tm.pc_soft);
    for (int k = 0; k < 2; k++) {
      const struct hy_force_stats *q = k ? &tm.st_soft : &tm.st_hard;
      sum.part[SP_SORT] += q->sort;
      sum.part[SP_BUILD] += q->build;
      sum.part[SP_EXPORT] += q->export_;
      sum.part[SP_REMOTE] += q->remote_build;
      sum.part[SP_UPLOAD] += q->upload;
      sum.part[SP_DOWNLOAD] += q->download;
      sum.part[SP_LET] += q->let_boxes + q->let_select + q->let_comm;
      sum.part[SP_BOXES] += q->let_boxes;
      sum.part[SP_WALK] += q->walk_wall;
      sum.merged += (double)q->merged_builds;
      sum.whole += (double)q->merged_whole;
    }
    sum.part[SP_DD] += tm.dd;
    /* progress: every step when stdout is not a terminal (a log file), at
     * most once a second on a terminal */
    double el = hy_wtime() - wall0;
    if (final || s == first_step || !tty || el - last_log >= 1.0) {
      last_log = el;
      double per = el / (double)(s - first_step + 1);
      if (have_energy)
        hy_msg("step %ld/%ld  t = %.6g  dE/E = %.3e  2K/|W| = %.4f  %.3f s/step  elapsed %.1f s  ETA %.1f s", s,
               n_steps, t, d.de_rel, d.virial, per, el, per * (double)(n_steps - s));
      else
        hy_msg("step %ld/%ld  t = %.6g  %.3f s/step  elapsed %.1f s  ETA %.1f s", s, n_steps, t, per, el,
               per * (double)(n_steps - s));
    }
    if (snap) {
      while (r->snap_dt > 0.0 && r->t0 + (double)next_snap * r->snap_dt <= t + 1e-9 * len) next_snap++;
      if (write_snapshot(r, t, r->snap_fields, err) != 0) goto out;
    }
    /* restart set: by step count, wall clock (rank 0's), or signal; all ranks agree */
    if (r->test_signal_step == s) raise(SIGTERM);
    int want_rs = 0;
    if (!final) {
      if (r->restart_every > 0 && s % r->restart_every == 0) want_rs |= 1;
      if (r->restart_minutes > 0 && r->rank == 0 && hy_wtime() - last_restart >= 60.0 * r->restart_minutes)
        want_rs |= 1;
      if (got_usr1) want_rs |= 1;
      if (got_term) want_rs |= 3;
      got_usr1 = 0;
    }
    if (r->size > 1 && MPI_Allreduce(MPI_IN_PLACE, &want_rs, 1, MPI_INT, MPI_BOR, r->comm) != MPI_SUCCESS) {
      hy_err_set(err, "MPI_Allreduce of the restart request failed");
      goto out;
    }
    if (want_rs) {
      if (hy_sim_sync(sim, err) != 0 || write_restart(r, f, s, next_snap, next_energy, d0.etot, err) != 0) goto out;
      last_restart = hy_wtime();
      if (want_rs & 2) {
        hy_msg("stopped by SIGTERM at t = %.9g after writing the restart set; resume with: hytree run --restart %s",
               t, r->outdir);
        stopped = 1;
        break;
      }
    }
  }
  double wall = hy_wtime() - wall0;
  if (!stopped && n_steps >= first_step)
    hy_msg("done: %ld steps in %.2f s (%.4f s per %sstep), final |dE/E| = %.3e", n_steps - first_step + 1, wall,
           wall / (double)(n_steps - first_step + 1), r->scheme == HY_SCHEME_HYBRID ? "soft " : "", d.de_rel);
  if (sum.steps > 0) {
    hy_msg("summary: %ld steps to t = %.6g, %.2f s in steps (%.4f s per step)%s", sum.steps, hy_sim_time(sim),
           sum.wall, sum.wall / (double)sum.steps, stopped ? ", stopped early" : "");
    if (sum.n_hard > 0)
      hy_msg("summary: T_soft %.4f s, T_hard %.4f s (means per soft and per hard sub-step), T_hard/T_soft = %.3f", sum.soft / (double)sum.steps,
             sum.hard / (double)sum.n_hard, (sum.hard / (double)sum.n_hard) / (sum.soft / (double)sum.steps));
    const double *q = sum.part, ns = (double)sum.steps;
    hy_msg("summary: per %sstep on rank 0: sort %.4f s, tree links and moments %.4f s, node records and tree "
           "copies %.4f s, remote tree %.4f s, upload %.4f s, download %.4f s, LET %.4f s "
           "(tight boxes and their exchange %.4f s), decomposition %.4f s (%.4f s of it waiting for the other ranks), "
           "walk calls %.4f s",
           r->scheme == HY_SCHEME_HYBRID ? "soft " : "", q[SP_SORT] / ns, q[SP_BUILD] / ns, q[SP_EXPORT] / ns,
           q[SP_REMOTE] / ns, q[SP_UPLOAD] / ns, q[SP_DOWNLOAD] / ns, q[SP_LET] / ns, q[SP_BOXES] / ns,
           q[SP_DD] / ns, (r->dd_wait - dd_wait0) / ns, q[SP_WALK] / ns);
    if (r->dd_count > dd_count0 && r->dd_before > dd_before0) {
      const double k = (double)(r->dd_count - dd_count0);
      hy_msg("summary: %ld decompositions; rank 0 sent %.0f and received %.0f particles per decomposition (%.3f %% "
             "and %.3f %% of those it held)",
             r->dd_count - dd_count0, (r->dd_sent - dd_sent0) / k, (r->dd_recv - dd_recv0) / k,
             100.0 * (r->dd_sent - dd_sent0) / (r->dd_before - dd_before0),
             100.0 * (r->dd_recv - dd_recv0) / (r->dd_before - dd_before0));
    }
    if (r->dd_cost_walk && r->dd_count > dd_count0) {
      double lo, hi;
      const double mine = hy_decomp_cost(r->dd, &lo, &hi);
      hy_msg("summary: DomainCost walktime: the ranks' sample weights at the last decomposition %.4f to %.4f (rank 0: "
             "%.4f)",
             lo, hi, mine);
    }
    if (sum.merged > 0)
      hy_msg("summary: rank 0 grafted %.0f of its %.0f merged trees onto its local tree", sum.whole, sum.merged);
    hy_msg("summary: %.3e interactions, %.3e per second of kernel time; max |dE/E| %.3e; %d snapshots, %d "
           "restart sets written",
           sum.inter, sum.kernel > 0 ? sum.inter / sum.kernel : 0.0, sum.max_de, r->snap_count,
           r->restarts_written);
  }
  rc = 0;
out:
  /* a rank-local failure cannot be reported collectively: end every rank */
  if (rc != 0 && r->size > 1) hy_die("%s", err->msg); /* hy_die names the rank */
  hy_sim_free(sim);
  hy_force_free(f);
  r->force = NULL;
  return rc;
}

/* Keys a restart may change; every other key must keep its value. */
static int restart_may_change(const char *key) {
  static const char *ok[] = {"InitCondFile",       "InitCondFormat",   "TimeEnd",          "SnapshotInterval",
                             "SnapshotFields",     "NumFilesPerSnapshot", "EnergyInterval", "OpenCLDevice",
                             "RestartInterval",    "RestartEverySoftSteps"};
  for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++)
    if (strcmp(key, ok[k]) == 0) return 1;
  return 0;
}

/* The parameters of a restart against those stored in the set: one line per
 * key that changed but may not (rank 0 reports); OutputDir must name the
 * directory being resumed. Returns 0 or -1. */
static int check_restart_params(struct run *r, const char *stored, const char *name) {
  char *errors = NULL;
  struct hy_params *old = hy_params_parse_text(name, stored, NULL, 0, &errors);
  if (!old) {
    if (r->rank == 0) fprintf(stderr, "hytree: error: %s: unreadable: %s\n", name, errors ? errors : "");
    free(errors);
    return -1;
  }
  size_t n;
  const struct hy_param_def *s = hy_params_schema(&n);
  int bad = 0;
  for (size_t k = 0; k < n; k++) {
    const char *key = s[k].key;
    if (restart_may_change(key)) continue;
    const char *a = hy_params_get_str(old, key), *b = hy_params_get_str(r->par, key);
    if (strcmp(key, "OutputDir") == 0) continue; /* checked below as a directory */
    if (strcmp(a, b) != 0) {
      if (r->rank == 0)
        fprintf(stderr, "hytree: error: %s: %s may not change on a restart (the set has '%s', now '%s')\n",
                r->pfile, key, a, b);
      bad = 1;
    }
  }
  struct stat s1, s2;
  const char *od = hy_params_get_str(r->par, "OutputDir");
  if (r->pfile != name && /* a parameter file was given: its OutputDir must be the resumed one */
      (stat(od, &s1) != 0 || stat(r->restart_dir, &s2) != 0 || s1.st_dev != s2.st_dev || s1.st_ino != s2.st_ino)) {
    if (r->rank == 0)
      fprintf(stderr, "hytree: error: %s: OutputDir '%s' is not the directory being resumed (%s)\n", r->pfile, od,
              r->restart_dir);
    bad = 1;
  }
  hy_params_free(old);
  return bad ? -1 : 0;
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
  const char *e = getenv("HYTREE_NUM_THREADS");
  if (e && *e) return n; /* set (an empty value counts as unset, as in hy_pool_default_threads) */
  n /= r->local_size > 0 ? r->local_size : 1;
  return n < 1 ? 1 : n;
}

/* Record the force parameters in use as the resolved values of `auto` keys
 * (ranks other than 0, and restarts, get them from elsewhere). */
static void record_resolved(struct run *r) {
  static const char *keys[] = {"Softening", "R1", "R2", "AccErr"};
  const double vals[] = {r->eps, r->r1, r->r2, r->a_err};
  for (int k = 0; k < 4; k++)
    if (hy_params_is_auto(r->par, keys[k])) hy_params_set_resolved(r->par, keys[k], vals[k]);
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
  record_resolved(r);
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

/* Tests: HYTREE_TEST_FILE_SIZE_LIMIT=BYTES limits every file written from
 * here on to BYTES (RLIMIT_FSIZE), so that writing a snapshot or restart set
 * fails as on a full disk (EFBIG; main ignores SIGXFSZ). Set only now, after
 * MPI and the OpenCL compiler have written their own files. */
static int test_file_size_limit(struct hy_err *err) {
  const char *e = getenv("HYTREE_TEST_FILE_SIZE_LIMIT");
  if (!e || !*e) return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(e, &end, 10);
  if (errno != 0 || *end != '\0' || v == 0)
    return hy_err_set(err, "HYTREE_TEST_FILE_SIZE_LIMIT='%s': must be a positive number of bytes", e);
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0)
    return hy_err_set(err, "HYTREE_TEST_FILE_SIZE_LIMIT: getrlimit failed: %s", strerror(errno));
  rl.rlim_cur = (rlim_t)v;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max) rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
    return hy_err_set(err, "HYTREE_TEST_FILE_SIZE_LIMIT: setrlimit failed: %s", strerror(errno));
  return 0;
}

/* ---------------------------------------------------------------- main */

int hy_cmd_run(int argc, char **argv) {
  const char *pfile = NULL, *restart_dir = NULL;
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
    } else if (strcmp(a, "--restart") == 0 || strncmp(a, "--restart=", 10) == 0) {
      if (a[9] == '=') {
        restart_dir = a + 10;
      } else if (i + 1 < argc) {
        restart_dir = argv[++i];
      } else {
        fputs("hytree: error: run: --restart needs the output directory of the run to resume\n", stderr);
        hy_free(ov);
        return 2;
      }
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
  if (!pfile && !restart_dir) {
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
  char *errors = NULL, *stored = NULL;
  void *blob = NULL;
  size_t blob_bytes = 0;
  r.restart_dir = restart_dir;
  if (restart_dir) {
    struct hy_err rerr;
    if (hy_restart_read(r.comm, restart_dir, &r.rs, &stored, &blob, &blob_bytes, &r.p, &rerr) != 0) {
      if (r.rank == 0) fprintf(stderr, "hytree: error: %s\n", rerr.msg);
      hy_free(ov);
      hy_part_free(&r.p);
      MPI_Comm_free(&r.comm);
      return 1;
    }
  }
  char stored_name[256];
  if (restart_dir) snprintf(stored_name, sizeof stored_name, "%.200s/restart (stored parameters)", restart_dir);
  if (pfile)
    r.par = hy_params_parse_file(pfile, ov, n_ov, &errors);
  else
    r.par = hy_params_parse_text(stored_name, stored, ov, n_ov, &errors);
  r.pfile = pfile ? pfile : stored_name;
  hy_free(ov);
  if (r.par && restart_dir && check_restart_params(&r, stored, stored_name) != 0) {
    hy_params_free(r.par);
    r.par = NULL;
  }
  if (!pfile) pfile = stored_name;
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
    hy_free(stored);
    hy_free(blob);
    hy_part_free(&r.p);
    MPI_Comm_free(&r.comm);
    return 1;
  }
  struct hy_err err;
  int status = 1;
  struct hy_pool *pool = hy_pool_create(pool_threads(&r));
  struct hy_cl *cl = NULL;
  char *path = NULL;

  r.outdir = restart_dir ? restart_dir : hy_params_get_str(r.par, "OutputDir");
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
    hy_err_set(&err, "%s: NumFilesPerSnapshot %d is larger than the number of MPI ranks (%d)",
               hy_params_where(r.par, "NumFilesPerSnapshot"), r.snap_files, r.size);
    report(&r, &err);
    goto out;
  }
  if (strcmp(hy_params_get_str(r.par, "ParticleState"), "device") == 0) {
    const char *why = r.size > 1 && r.scheme != HY_SCHEME_HYBRID ? "Scheme hybrid on several MPI ranks"
                      : strcmp(hy_params_get_str(r.par, "TreeBuild"), "host") == 0 ? "TreeBuild device or auto"
                      : r.scheme == HY_SCHEME_DIRECT                                 ? "Scheme hybrid or tree"
                                                                                     : NULL;
    if (why) {
      hy_err_set(&err, "%s: ParticleState device needs %s; use auto or host",
                 hy_params_where(r.par, "ParticleState"), why);
      report(&r, &err);
      goto out;
    }
  }
  hy_shm_set_use(strcmp(hy_params_get_str(r.par, "NodeSharedMemory"), "yes") == 0);
  int grid[3];
  if (hy_decomp_parse_grid(hy_params_get_str(r.par, "DomainGrid"), r.size, grid, &err) != 0) {
    char msg[sizeof err.msg];
    snprintf(msg, sizeof msg, "%s", err.msg);
    hy_err_set(&err, "%s: %s", hy_params_where(r.par, "DomainGrid"), msg);
    report(&r, &err);
    goto out;
  }
  hy_msg("%s: %s run on %d MPI rank%s, parameters from %s", PACKAGE_STRING, hy_scheme_name(r.scheme), r.size,
         r.size > 1 ? "s" : "", pfile);

  r.restart_minutes = hy_params_get_number(r.par, "RestartInterval");
  r.restart_every = hy_params_get_int(r.par, "RestartEverySoftSteps");
  {
    const char *e = getenv("HYTREE_TEST_SIGNAL_AT_STEP"); /* tests: raise SIGTERM after this step */
    r.test_signal_step = e ? atol(e) : 0;
    e = getenv("HYTREE_TEST_NAN_AT_STEP"); /* tests: a NaN velocity on rank 0 before this step */
    r.test_nan_step = e ? atol(e) : 0;
    e = getenv("HYTREE_TEST_KILL_IN_RESTART"); /* tests: SIGKILL while writing the K-th restart set */
    r.test_kill_write = e ? atoi(e) : 0;
  }
  {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    if (sigemptyset(&sa.sa_mask) != 0 || sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0) {
      hy_err_set(&err, "run: cannot install the SIGTERM/SIGUSR1 handlers: %s", strerror(errno));
      report(&r, &err);
      goto out;
    }
  }

  /* 1. initial conditions (rank 0) and 2. auto parameters from the whole set,
   * or, on a restart, the state of the restart set */
  double t0 = hy_wtime();
  int rc = 0;
  if (restart_dir) {
    r.t0 = r.rs.t0;
    r.G = r.rs.G;
    r.eps = r.rs.eps;
    r.r1 = r.rs.r1;
    r.r2 = r.rs.r2;
    r.a_err = r.rs.a_err;
    r.dt_h = r.rs.dt_h;
    record_resolved(&r);
    if (hy_params_is_auto(r.par, "TimeStepHard")) hy_params_set_resolved(r.par, "TimeStepHard", r.dt_h);
  } else if (r.rank == 0) {
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
  if (!restart_dir && share_resolved(&r) != 0) goto out;
  if (r.scheme == HY_SCHEME_HYBRID)
    hy_msg("G = %.9g  eps = %.6g  R1 = %.6g  R2 = %.6g  a_err = %.6g  dt_h = %.6g  n = %d  dt_s = %.6g", r.G,
           r.eps, r.r1, r.r2, r.a_err, r.dt_h, r.n_ratio, r.dt_h * r.n_ratio);
  else
    hy_msg("G = %.9g  eps = %.6g  a_err = %.6g  dt = %.6g", r.G, r.eps, r.a_err, r.dt_h);
  if (r.size > 1) {
    if (!restart_dir) {
      struct hy_part full = r.p; /* rank 0: every particle; others: none */
      hy_part_init(&r.p);
      rc = hy_io_scatter_mpi(r.comm, &full, &r.p, &err);
      hy_part_free(&full);
      if (rc != 0) {
        report(&r, &err);
        goto out;
      }
    }
    r.dd = hy_decomp_create(r.comm, grid, hy_params_get_number(r.par, "SampleRate"),
                            hy_params_get_number(r.par, "DomainSmoothing"), 12345, &err);
    if (!r.dd) {
      report(&r, &err);
      goto out;
    }
    hy_decomp_set_pool(r.dd, pool);
    if (restart_dir && any_failed(&r, hy_decomp_state_load(r.dd, blob, blob_bytes, &err), &err)) goto out;
    r.dd_cost_walk = strcmp(hy_params_get_str(r.par, "DomainCost"), "walktime") == 0;
    hy_msg("domain grid %dx%dx%d, sample rate %g, boundary smoothing %g, samples weighted by %s", grid[0], grid[1],
           grid[2], hy_params_get_number(r.par, "SampleRate"), hy_params_get_number(r.par, "DomainSmoothing"),
           r.dd_cost_walk ? "the walks' measured time per particle (DomainCost walktime)"
                          : "particle count (DomainCost particles)");
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
    o.origin = hy_params_where(r.par, "OpenCLDevice");
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
  rc = test_file_size_limit(&err);
  if (any_failed(&r, rc, &err)) goto out;
  rc = hy_trace_open(r.comm, &err); /* HYTREE_TRACE */
  if (any_failed(&r, rc, &err)) goto out;
  r.params_text = hy_params_dump(r.par);
  if (r.rank == 0) {
    rc = make_dirs(r.outdir, &err);
    if (rc == 0) {
      path = join(r.outdir, "params-used.txt");
      rc = hy_io_write_text_atomic(path, r.params_text, &err);
    }
    const char *mode = restart_dir ? "a" : "w"; /* a restart continues the records */
    if (rc == 0 && restart_dir) {
      double t_rs = r.t0 + (double)r.rs.step * (double)r.n_ratio * r.dt_h;
      rc = trim_csv(r.outdir, "energy.csv", t_rs * (1.0 + 1e-12) + 1e-300, &err);
      if (rc == 0) rc = trim_csv(r.outdir, "timings.csv", (double)r.rs.step, &err);
      if (rc == 0) rc = trim_csv(r.outdir, "let.csv", (double)r.rs.step, &err);
    }
    if (rc == 0 && (!(r.energy = open_csv(r.outdir, "energy.csv", mode, &err)) ||
                    !(r.timings = open_csv(r.outdir, "timings.csv", mode, &err)) ||
                    (r.size > 1 && !(r.let = open_csv(r.outdir, "let.csv", mode, &err)))))
      rc = -1;
    if (rc == 0 && !restart_dir) {
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
  if (hy_trace_close(&err) != 0) { /* HYTREE_TRACE: the timeline, also of a failed run */
    fprintf(stderr, "hytree: error: [rank %d] %s\n", r.rank, err.msg);
    status = 1;
  }
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
  hy_free(stored);
  hy_free(blob);
  MPI_Comm_free(&r.comm);
  hy_free(path);
  free(r.params_text);
  hy_cl_free(cl);
  hy_pool_free(pool);
  hy_part_free(&r.p);
  hy_params_free(r.par);
  return status;
}
