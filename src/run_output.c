/* SPDX-License-Identifier: GPL-3.0-or-later
 * run_output.c: what `hytree run` writes (run.c decides when): OutputDir and
 * params-used.txt, the records energy.csv, timings.csv and let.csv (trimmed
 * to the restart set on a restart), snapshots, emergency snapshots, restart
 * sets and the summary at the end of the loop. Rank 0 writes the text
 * outputs; snapshots and restart sets are collective. */
#include "config.h"

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
#include "io_mpi.h"
#include "run_internal.h"

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

/* The snapshot header of this run at time t. */
static struct hy_snap_info snap_info(const struct hy_run *r, double t, unsigned fields) {
  struct hy_snap_info info = {.time = t,
                              .fields = fields,
                              .units = r->units,
                              .gravity_constant = r->G,
                              .softening = r->eps,
                              .params_text = r->params_used,
                              .params_given = r->params_text};
  return info;
}

/* ------------------------------------------------------ the CSV records */

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

/* let.csv quantities: min, mean, max over ranks */
enum { LV_NLOCAL, LV_NHARD, LV_NSOFT, LV_NHARD_AT_SOFT, LV_SENT, LV_RECV, LV_N };

static void let_header(FILE *f) {
  static const char *q[LV_N] = {"n_local", "n_hard", "n_soft", "n_hard_at_soft", "bytes_sent", "bytes_recv"};
  fputs("step,time", f);
  for (int k = 0; k < LV_N; k++) fprintf(f, ",%s_min,%s_mean,%s_max", q[k], q[k], q[k]);
  fputc('\n', f);
}

/* OutputDir and params-used.txt. */
static int write_params_used(struct hy_run *r, struct hy_err *err) {
  int rc = make_dirs(r->outdir, err);
  if (rc != 0 && !r->restart_dir) { /* name where OutputDir was set */
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    hy_err_set(err, "%s: %s", hy_params_where(r->par, "OutputDir"), msg);
  }
  if (rc == 0) {
    char *path = join(r->outdir, "params-used.txt");
    rc = hy_io_write_text_atomic(path, r->params_text, err);
    hy_free(path);
  }
  return rc;
}

/* A restart continues the records from the restart set: drop the rows
 * written after it. */
static int trim_records(struct hy_run *r, struct hy_err *err) {
  double t_rs = r->t0 + (double)r->rs.step * (double)r->n_ratio * r->dt_h;
  int rc = trim_csv(r->outdir, "energy.csv", t_rs * (1.0 + 1e-12) + 1e-300, err);
  if (rc == 0) rc = trim_csv(r->outdir, "timings.csv", (double)r->rs.step, err);
  if (rc == 0) rc = trim_csv(r->outdir, "let.csv", (double)r->rs.step, err);
  return rc;
}

/* Open the records: new ones with their headers, or a restart's to append to. */
static int open_records(struct hy_run *r, struct hy_err *err) {
  const char *mode = r->restart_dir ? "a" : "w"; /* a restart continues the records */
  if (!(r->energy = open_csv(r->outdir, "energy.csv", mode, err)) ||
      !(r->timings = open_csv(r->outdir, "timings.csv", mode, err)) ||
      (r->size > 1 && !(r->let = open_csv(r->outdir, "let.csv", mode, err))))
    return -1;
  if (!r->restart_dir) {
    hy_diag_csv_header(r->energy);
    timings_header(r->timings, r->n_ratio - 1);
    if (r->let) let_header(r->let);
  }
  return 0;
}

int hy_run_open_files(struct hy_run *r, struct hy_err *err) {
  int rc = write_params_used(r, err);
  if (rc == 0 && r->restart_dir) rc = trim_records(r, err);
  if (rc == 0) rc = open_records(r, err);
  return rc;
}

int hy_run_close_files(struct hy_run *r, int status) {
  if (r->energy && fclose(r->energy) != 0 && status == 0) {
    fprintf(stderr, "hytree: error: energy.csv: close failed: %s\n", strerror(errno));
    status = 1;
  }
  if (r->timings && fclose(r->timings) != 0 && status == 0) {
    fprintf(stderr, "hytree: error: timings.csv: close failed: %s\n", strerror(errno));
    status = 1;
  }
  if (r->let && fclose(r->let) != 0 && status == 0) {
    fprintf(stderr, "hytree: error: let.csv: close failed: %s\n", strerror(errno));
    status = 1;
  }
  return status;
}

int hy_run_energy_row(struct hy_run *r, struct hy_sim *sim, double t, double e0, struct hy_diag *d,
                      struct hy_err *err) {
  const MPI_Comm *dcomm = r->size > 1 ? &r->comm : NULL;
  double sums[HY_ENERGY_SUMS];
  const int rc = hy_sim_energy_sums(sim, sums, err);
  if (rc != 0) /* still in the reduction, which the other ranks have entered */
    for (int k = 0; k < HY_ENERGY_SUMS; k++) sums[k] = NAN;
  if (hy_diag_from_sums(sums, t, e0, dcomm, d) != 0)
    return hy_err_set(err, "energy diagnostics: MPI_Allreduce failed");
  if (rc != 0) return -1;
  if (r->rank == 0) {
    hy_diag_csv_row(r->energy, d);
    if (csv_flush(r->energy, "energy.csv", err) != 0) return -1;
  }
  return 0;
}

/* Per-step values reduced over the ranks: times are the maximum over ranks
 * (the slowest rank sets the pace), counts the sum, load balance
 * max/mean of N_local + N_hard. */
enum { TV_TOTAL, TV_SOFT, TV_TREE, TV_KERNEL, TV_TRANSFER, TV_WALL, TV_DD, TV_SELECT, TV_COMM, TV_REMOTE, TV_WAIT,
       TV_DEVBUSY, TV_MAINBUSY, TV_HARD0 };
enum { CV_PPH, CV_PCH, CV_PPS, CV_PCS, CV_N };

static int reduce_max(struct hy_run *r, double *v, int n) {
  if (r->size == 1) return 0;
  return MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, r->comm) == MPI_SUCCESS ? 0 : -1;
}

static void step_rows(struct hy_run *r, long step, double t, const struct hy_step_times *tm) {
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

int hy_run_step_records(struct hy_run *r, long step, double t, const struct hy_step_times *tm, struct hy_err *err) {
  step_rows(r, step, t, tm);
  if (r->rank == 0 &&
      (csv_flush(r->timings, "timings.csv", err) != 0 || (r->let && csv_flush(r->let, "let.csv", err) != 0)))
    return -1;
  return 0;
}

/* ------------------------------------------------- snapshots and restarts */

/* The next snapshot of the particles p at time t; `from` says where they
 * come from in the message. */
static int write_snapshot_of(struct hy_run *r, const struct hy_part *p, double t, const char *from,
                             struct hy_err *err) {
  if (r->embed) return 0; /* hytree bench measures steps, not snapshots */
  struct hy_snap_info info = snap_info(r, t, r->snap_fields);
  double t0 = hy_wtime();
  int rc = hy_io_write_snapshot_mpi(r->comm, r->outdir, r->snap_count, p, &info, r->snap_files, err);
  if (rc == 0) {
    if (r->snap_files > 1)
      hy_msg("snapshot %s/snapshot_%03d.{0..%d}.hdf5 at t = %.6g%s (%.2f s)", r->outdir, r->snap_count,
             r->snap_files - 1, t, from, hy_wtime() - t0);
    else
      hy_msg("snapshot %s/snapshot_%03d.hdf5 at t = %.6g%s (%.2f s)", r->outdir, r->snap_count, t, from,
             hy_wtime() - t0);
    r->snap_count++;
  }
  return rc;
}

int hy_run_write_snapshot(struct hy_run *r, double t, struct hy_err *err) {
  return write_snapshot_of(r, &r->p, t, "", err);
}

/* The snapshot at t_out from the state at the step end t, each rank's
 * particles predicted by d = t_out - t: x + v d + a d^2/2, v + a d, with a
 * the total acceleration p->acc of that step end (acc_w is the kick's
 * weighted one in hybrid runs): the position is off by O(|d|^3 da/dt), the
 * velocity by O(d^2 da/dt). */
static int write_predicted(struct hy_run *r, double t, double t_out, struct hy_err *err) {
  const double d = t_out - t;
  const struct hy_part *p = &r->p;
  struct hy_part q = *p; /* masses, IDs, types, Acceleration and Potential are the step end's */
  const size_t n3 = hy_size_mul_or_die(p->n, 3, "predicted snapshot");
  q.pos = hy_malloc("predicted snapshot", n3 + 1, sizeof(double));
  q.vel = hy_malloc("predicted snapshot", n3 + 1, sizeof(double));
  for (size_t i = 0; i < n3; i++) {
    q.pos[i] = p->pos[i] + d * (p->vel[i] + 0.5 * d * p->acc[i]);
    q.vel[i] = p->vel[i] + d * p->acc[i];
  }
  char from[96];
  snprintf(from, sizeof from, " (predicted from the step end at t = %.9g)", t);
  int rc = write_snapshot_of(r, &q, t_out, from, err);
  hy_free(q.pos);
  hy_free(q.vel);
  return rc;
}

/* The requested snapshot time k, from the count (no accumulated rounding). */
static double snap_time(const struct hy_run *r, long k) { return r->t0 + (double)k * r->snap_dt; }

/* Whether a step ending at t_next reaches requested time k (within rounding
 * of the step length len), as the other outputs' schedule in run.c. */
static int snap_reached(const struct hy_run *r, long k, double len, double t_next) {
  return r->snap_dt > 0.0 && t_next >= snap_time(r, k) - 1e-9 * len;
}

static int snap_on_end(const struct hy_run *r, long k, double len, double t_next) {
  return fabs(snap_time(r, k) - t_next) <= 1e-9 * len;
}

int hy_run_snaps_due(const struct hy_run *r, long next_snap, double len, double t_next, int *off) {
  int due = 0;
  *off = 0;
  for (long k = next_snap; snap_reached(r, k, len, t_next); k++) {
    due = 1;
    *off |= !snap_on_end(r, k, len, t_next);
  }
  return due;
}

long hy_run_snap_next(const struct hy_run *r, double len, double t) {
  if (!(r->snap_dt > 0.0)) return 1;
  /* from below the answer (rounding of the quotient) up, without a long count from 1 */
  const double q = floor((t - r->t0) / r->snap_dt) - 1.0;
  long k = q > 1.0 && q < 1e15 ? (long)q : 1;
  while (snap_reached(r, k, len, t)) k++;
  return k;
}

int hy_run_snapshots(struct hy_run *r, long *next_snap, double len, double t_next, double t, int final,
                     struct hy_err *err) {
  int at_end = 0;
  for (; snap_reached(r, *next_snap, len, t_next); ++*next_snap) {
    const double t_out = snap_time(r, *next_snap);
    const int end = snap_on_end(r, *next_snap, len, t_next);
    at_end |= end;
    if ((end ? hy_run_write_snapshot(r, t_out, err) : write_predicted(r, t, t_out, err)) != 0) return -1;
  }
  return final && !at_end ? hy_run_write_snapshot(r, t, err) : 0;
}

int hy_run_emergency_snapshot(struct hy_run *r, long s, double t, uint64_t n_bad, uint64_t low, uint64_t first,
                              struct hy_err *err) {
  char firsttxt[96] = "";
  if (first != UINT64_MAX)
    snprintf(firsttxt, sizeof firsttxt, ", first non-finite position: particle ID %llu", (unsigned long long)first);
  char *dir = join(r->outdir, "emergency");
  struct hy_err e2;
  int rc = r->rank == 0 ? make_dirs(dir, &e2) : 0;
  if (hy_run_bcast_status(r, rc, &e2) == 0) {
    struct hy_snap_info info = snap_info(r, t, 0);
    rc = hy_io_write_snapshot_mpi(r->comm, dir, (int)(s % 1000), &r->p, &info, r->snap_files, &e2);
  }
  if (rc == 0)
    hy_err_set(err,
               "step %ld, t = %.9g: %llu particle(s) with a non-finite position, velocity or acceleration (lowest "
               "ID %llu%s); emergency snapshot %.1000s/snapshot_%03ld%s.hdf5",
               s, t, (unsigned long long)n_bad, (unsigned long long)low, firsttxt, dir, s % 1000,
               r->snap_files > 1 ? ".*" : "");
  else
    hy_err_set(err,
               "step %ld, t = %.9g: %llu particle(s) with a non-finite position, velocity or acceleration (lowest "
               "ID %llu%s); the emergency snapshot failed too: %.1000s",
               s, t, (unsigned long long)n_bad, (unsigned long long)low, firsttxt, e2.msg);
  hy_free(dir);
  return -1;
}

int hy_run_write_restart(struct hy_run *r, long s, long next_snap, long next_energy, double e0, struct hy_err *err) {
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
  st.last_hard = hy_force_last_hard_items(r->force);
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

/* ------------------------------------------------------------- summary */

void hy_run_totals_begin(const struct hy_run *r, struct hy_run_totals *sum) {
  memset(sum, 0, sizeof *sum);
  sum->dd_wait0 = r->dd_wait;
  sum->dd_sent0 = r->dd_sent;
  sum->dd_recv0 = r->dd_recv;
  sum->dd_before0 = r->dd_before;
  sum->dd_count0 = r->dd_count;
}

void hy_run_totals_add(struct hy_run_totals *sum, const struct hy_step_times *tm) {
  sum->steps++;
  sum->wall += tm->total;
  sum->soft += tm->soft;
  for (int k = 0; k < tm->n_hard; k++) sum->hard += tm->hard[k];
  sum->n_hard += tm->n_hard;
  sum->kernel += tm->kernel;
  sum->inter += (double)(tm->pp_hard + tm->pc_hard + tm->pp_soft + tm->pc_soft);
  for (int k = 0; k < 2; k++) {
    const struct hy_force_stats *q = k ? &tm->st_soft : &tm->st_hard;
    sum->part[SP_SORT] += q->sort;
    sum->part[SP_BUILD] += q->build;
    sum->part[SP_EXPORT] += q->export_;
    sum->part[SP_REMOTE] += q->remote_build;
    sum->part[SP_UPLOAD] += q->upload;
    sum->part[SP_DOWNLOAD] += q->download;
    sum->part[SP_LET] += q->let_boxes + q->let_select + q->let_comm;
    sum->part[SP_BOXES] += q->let_boxes;
    sum->part[SP_WALK] += q->walk_wall;
    sum->merged += (double)q->merged_builds;
    sum->whole += (double)q->merged_whole;
  }
  sum->part[SP_DD] += tm->dd;
}

/* The decompositions made since the loop began. */
static void summary_decomposition(const struct hy_run *r, const struct hy_run_totals *sum) {
  if (r->dd_count > sum->dd_count0 && r->dd_before > sum->dd_before0) {
    const double k = (double)(r->dd_count - sum->dd_count0);
    hy_msg("summary: %ld decompositions; rank 0 sent %.0f and received %.0f particles per decomposition (%.3f %% "
           "and %.3f %% of those it held)",
           r->dd_count - sum->dd_count0, (r->dd_sent - sum->dd_sent0) / k, (r->dd_recv - sum->dd_recv0) / k,
           100.0 * (r->dd_sent - sum->dd_sent0) / (r->dd_before - sum->dd_before0),
           100.0 * (r->dd_recv - sum->dd_recv0) / (r->dd_before - sum->dd_before0));
  }
  if (r->dd_cost_walk && r->dd_count > sum->dd_count0) {
    double lo, hi;
    const double mine = hy_decomp_cost(r->dd, &lo, &hi);
    hy_msg("summary: DomainCost walktime: the ranks' sample weights at the last decomposition %.4f to %.4f (rank 0: "
           "%.4f)",
           lo, hi, mine);
  }
}

void hy_run_summary(const struct hy_run *r, const struct hy_run_totals *sum, double t, int stopped) {
  if (sum->steps == 0) return;
  hy_msg("summary: %ld steps to t = %.6g, %.2f s in steps (%.4f s per step)%s", sum->steps, t, sum->wall,
         sum->wall / (double)sum->steps, stopped ? ", stopped early" : "");
  if (sum->n_hard > 0)
    hy_msg("summary: T_soft %.4f s, T_hard %.4f s (means per soft and per hard sub-step), T_hard/T_soft = %.3f",
           sum->soft / (double)sum->steps, sum->hard / (double)sum->n_hard,
           (sum->hard / (double)sum->n_hard) / (sum->soft / (double)sum->steps));
  const double *q = sum->part, ns = (double)sum->steps;
  hy_msg("summary: per %sstep on rank 0: sort %.4f s, tree links and moments %.4f s, node records and tree "
         "copies %.4f s, remote tree %.4f s, upload %.4f s, download %.4f s, LET %.4f s "
         "(tight boxes and their exchange %.4f s), decomposition %.4f s (%.4f s of it waiting for the other ranks), "
         "walk calls %.4f s",
         r->scheme == HY_SCHEME_HYBRID ? "soft " : "", q[SP_SORT] / ns, q[SP_BUILD] / ns, q[SP_EXPORT] / ns,
         q[SP_REMOTE] / ns, q[SP_UPLOAD] / ns, q[SP_DOWNLOAD] / ns, q[SP_LET] / ns, q[SP_BOXES] / ns,
         q[SP_DD] / ns, (r->dd_wait - sum->dd_wait0) / ns, q[SP_WALK] / ns);
  summary_decomposition(r, sum);
  if (sum->merged > 0)
    hy_msg("summary: rank 0 grafted %.0f of its %.0f merged trees onto its local tree", sum->whole, sum->merged);
  hy_msg("summary: %.3e interactions, %.3e per second of kernel time; max |dE/E| %.3e; %d snapshots, %d "
         "restart sets written",
         sum->inter, sum->kernel > 0 ? sum->inter / sum->kernel : 0.0, sum->max_de, r->snap_count,
         r->restarts_written);
}
