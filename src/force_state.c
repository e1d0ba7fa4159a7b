/* SPDX-License-Identifier: GPL-3.0-or-later
 * force_state.c: the device-resident particle state (force.h): its upload
 * and download, kicks and drifts, the domain decomposition's view of it
 * (hy_force_decomp_source), and its forces (hy_force_state_force), the
 * distributed ones with the LET selected on the device. */
#include "config.h"

#include "force_internal.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hy_shared.h"
#include "trace.h"
#include "worker.h"

/* ------------------------------------------------- device-resident state */

int hy_force_state_possible(struct hy_force *f, const struct hy_part *p) {
  /* distributed: decided for every rank alike; a rank holding fewer than
   * two particles at a step takes the host path for it (hy_sim) */
  return f->cfg.tree_build != HY_TREE_BUILD_HOST && (f->let || p->n >= 2) && hy_cl_has_fp64(f->cl);
}

/* Copies between the particle arrays and the engine's page-locked staging
 * memory, on the pool's threads (transfers from and to pageable memory are
 * several times slower). */
struct stage_job {
  int n;
  struct {
    double *dst;
    const double *src;
    size_t w; /* doubles per particle */
  } a[5];
};

static void stage_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct stage_job *j = arg;
  for (int k = 0; k < j->n; k++) {
    const size_t w = j->a[k].w;
    memcpy(j->a[k].dst + w * b, j->a[k].src + w * b, w * (e - b) * sizeof(double));
  }
}

/* One more array to copy: src to dst, w doubles per particle. */
static void stage_add(struct stage_job *j, double *dst, const double *src, size_t w) {
  j->a[j->n].dst = dst;
  j->a[j->n].src = src;
  j->a[j->n].w = w;
  j->n++;
}

int hy_force_state_put(struct hy_force *f, const struct hy_part *p, int with_accw, struct hy_err *err) {
  double t0 = hy_wtime();
  const size_t n = p->n;
  double *st = hy_cl_host_buffer(f->cl, HY_CL_HOST_XYZ, hy_size_mul_or_die(n, 13 * sizeof(double), "particle state"),
                                 err);
  if (!st) return -1;
  double *pos = st, *vel = st + 3 * n, *mass = st + 6 * n, *accw = st + 7 * n, *acc = st + 10 * n;
  const int rel = f->cfg.mac_alpha > 0; /* the sinks' scales come from the total accelerations */
  struct stage_job j = {0};
  stage_add(&j, pos, p->pos, 3);
  stage_add(&j, vel, p->vel, 3);
  stage_add(&j, mass, p->mass, 1);
  if (with_accw) stage_add(&j, accw, p->acc_w, 3);
  if (rel) stage_add(&j, acc, p->acc, 3);
  hy_pool_for(f->pool, n, 65536, stage_body, &j);
  int rc = hy_cl_state_upload(f->cl, pos, vel, mass, with_accw ? accw : NULL, rel ? acc : NULL, n, err);
  f->st.upload += hy_wtime() - t0;
  return rc;
}

/* Room for n 32-bit indices (the device's index type). */
static uint32_t *u32_scratch(struct hy_force *f, size_t n) {
  if (n > f->u32_cap) {
    hy_free(f->u32);
    f->u32_cap = n + n / 4 + 64;
    f->u32 = hy_malloc("device indices", f->u32_cap, sizeof(uint32_t));
  }
  return f->u32;
}

int hy_force_state_patch(struct hy_force *f, const struct hy_part *p, const size_t *holes, const size_t *srcs,
                         size_t n_holes, size_t n_keep, struct hy_err *err) {
  double t0 = hy_wtime();
  const size_t n = p->n, nt = n - n_keep;
  double *st =
      hy_cl_host_buffer(f->cl, HY_CL_HOST_XYZ, hy_size_mul_or_die(nt + 1, 7 * sizeof(double), "particle state"), err);
  if (!st) return -1;
  double *pos = st, *vel = st + 3 * nt, *mass = st + 6 * nt;
  struct stage_job j = {0};
  stage_add(&j, pos, p->pos + 3 * n_keep, 3);
  stage_add(&j, vel, p->vel + 3 * n_keep, 3);
  stage_add(&j, mass, p->mass + n_keep, 1);
  hy_pool_for(f->pool, nt, 65536, stage_body, &j);
  uint32_t *u = u32_scratch(f, hy_size_mul_or_die(n_holes, 2, "moved particles"));
  for (size_t h = 0; h < n_holes; h++) {
    u[h] = (uint32_t)holes[h];
    u[n_holes + h] = (uint32_t)srcs[h];
  }
  /* the patch follows the soft step's presort on the device: the host's
   * wait for it, apart (the critical path when the decomposition is short) */
  const double tw = hy_trace_t();
  if (hy_cl_presort_wait(f->cl)) hy_trace(HY_TRACE_MAIN, "presort_wait", tw);
  int rc = hy_cl_state_patch(f->cl, n, n_keep, pos, vel, mass, u, u + n_holes, n_holes, err);
  f->st.upload += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "state_patch", t0);
  return rc;
}

/* The state's arrays that are not NULL into p's (through staging memory). */
static int state_get(struct hy_force *f, size_t n, double *pos, double *vel, double *acc_w, double *acc, double *pot,
                     struct hy_err *err) {
  double t0 = hy_wtime();
  double *st = hy_cl_host_buffer(f->cl, HY_CL_HOST_XYZ, hy_size_mul_or_die(n, 13 * sizeof(double), "particle state"),
                                 err);
  if (!st) return -1;
  struct stage_job j = {0};
  double *dev[5] = {NULL, NULL, NULL, NULL, NULL}, *host[5] = {pos, vel, acc_w, acc, pot}, *at = st;
  for (int k = 0; k < 5; k++)
    if (host[k]) {
      const size_t w = k == 4 ? 1 : 3;
      dev[k] = at;
      stage_add(&j, host[k], at, w);
      at += w * n;
    }
  double tx = 0.0;
  if (hy_cl_state_download(f->cl, dev[0], dev[1], dev[2], dev[3], dev[4], n, &tx, err) != 0) return -1;
  hy_pool_for(f->pool, n, 65536, stage_body, &j);
  f->st.download += hy_wtime() - t0;
  return 0;
}

int hy_force_state_get(struct hy_force *f, struct hy_part *p, int with_acc, int with_pot, struct hy_err *err) {
  /* the relative criterion's estimate of the total acceleration is state too */
  const int acc = with_acc || f->cfg.mac_alpha > 0;
  return state_get(f, p->n, p->pos, p->vel, p->acc_w, acc ? p->acc : NULL, with_pot ? p->pot : NULL, err);
}

/* ------------------------------------- decomposition with the device state */

static int dd_check(void *ctx, struct hy_part *p, size_t *n_bad, struct hy_err *err) {
  struct hy_force *f = ctx;
  long first;
  if (hy_cl_state_finite(f->cl, 1, n_bad, &first, err) != 0) return -1;
  if (*n_bad == 0) return 0;
  /* some position is not finite: every one to the host, to find the lowest ID */
  double tx = 0.0;
  return hy_cl_state_download(f->cl, p->pos, NULL, NULL, NULL, NULL, p->n, &tx, err);
}

/* The m indices as the device takes them (32 bits; the state holds fewer
 * than 2^32 particles). */
static const uint32_t *dev_indices(struct hy_force *f, const size_t *idx, size_t m) {
  uint32_t *u = u32_scratch(f, m);
  for (size_t j = 0; j < m; j++) u[j] = (uint32_t)idx[j];
  return u;
}

static int dd_gather(void *ctx, const size_t *idx, size_t m, double *pos, double *vel, struct hy_err *err) {
  struct hy_force *f = ctx;
  /* beside a presort (dd_kept), on the second queue: it reads positions
   * that nothing on the first writes before the patch */
  return hy_cl_state_gather_on(f->cl, f->pre_n > 0, dev_indices(f, idx, m), m, pos, vel, err);
}

static int dd_gather_begin(void *ctx, const size_t *idx, size_t m, struct hy_err *err) {
  struct hy_force *f = ctx;
  return hy_cl_state_gather_begin(f->cl, 0, dev_indices(f, idx, m), m, 0, err);
}

static int dd_gather_end(void *ctx, size_t m, double *pos, struct hy_err *err) {
  struct hy_force *f = ctx;
  const double *data;
  if (hy_cl_state_gather_end(f->cl, m, &data, err) != 0) return -1;
  if (m) memcpy(pos, data, m * 3 * sizeof(double));
  return 0;
}

/* The leavers' positions and velocities, read while the host packs their
 * other fields: beside a presort (dd_kept) on the second queue, as
 * dd_gather. */
static int dd_leave_begin(void *ctx, const size_t *idx, size_t m, struct hy_err *err) {
  struct hy_force *f = ctx;
  return hy_cl_state_gather_begin(f->cl, f->pre_n > 0, dev_indices(f, idx, m), m, 1, err);
}

static int dd_leave_end(void *ctx, size_t m, const double **pv, struct hy_err *err) {
  struct hy_force *f = ctx;
  return hy_cl_state_gather_end(f->cl, m, pv, err);
}

static int dd_owners(void *ctx, const struct hy_decomp *d, uint64_t *count, struct hy_err *err) {
  struct hy_force *f = ctx;
  size_t nb = 0;
  const double *b = hy_decomp_bounds(d, &nb);
  int grid[3];
  hy_decomp_grid(d, grid);
  if (!b) return hy_err_set(err, "internal error: device owners without decomposition boundaries");
  const double t0 = hy_trace_t();
  const int rc = hy_cl_state_owners(f->cl, b, nb, grid, count, err);
  hy_trace(HY_TRACE_MAIN, "dd_own_kernel", t0);
  return rc;
}

static int dd_lists(void *ctx, int me, size_t n_keep, const size_t **leave, const int **leave_rank, size_t *n_out,
                    const size_t **beyond, size_t *n_beyond, struct hy_err *err) {
  struct hy_force *f = ctx;
  uint32_t *idx, *rank;
  size_t m;
  for (int mode = 0; mode < 2; mode++) {
    const double t0 = hy_trace_t();
    if (hy_cl_state_list(f->cl, mode, (unsigned)me, n_keep, &idx, &rank, &m, err) != 0) return -1;
    hy_trace(HY_TRACE_MAIN, mode == 0 ? "dd_list_leave" : "dd_list_beyond", t0);
    if (m + 1 > f->dd_list_cap[mode]) {
      const size_t cap = m + m / 4 + 64;
      if (mode == 0) {
        hy_free(f->dd_leave);
        hy_free(f->dd_rank);
        f->dd_leave = hy_malloc("decomposition leavers", cap, sizeof(size_t));
        f->dd_rank = hy_malloc("decomposition leavers", cap, sizeof(int));
      } else {
        hy_free(f->dd_beyond);
        f->dd_beyond = hy_malloc("decomposition stayers", cap, sizeof(size_t));
      }
      f->dd_list_cap[mode] = cap;
    }
    for (size_t k = 0; k < m; k++) {
      if (mode == 0) {
        f->dd_leave[k] = idx[k];
        f->dd_rank[k] = (int)rank[k];
      } else {
        f->dd_beyond[k] = idx[k];
      }
    }
    if (mode == 0)
      *n_out = m;
    else
      *n_beyond = m;
  }
  *leave = f->dd_leave;
  *leave_rank = f->dd_rank;
  *beyond = f->dd_beyond;
  return 0;
}

/* The soft step's local build begun inside the decomposition, as soon as
 * the device's lists say which particles stay (hy_decomp_dev.kept): the
 * kept particles' keys as they will be after the stayers' moves into the
 * holes, in the cube of hy_force_cube_ahead, queued with their sort, which
 * runs while the host gathers (on the second queue), packs, exchanges and
 * unpacks the leavers; the patch then moves them, and the build merges the
 * received particles' keys in. */
static int dd_kept(void *ctx, const size_t *holes, const size_t *srcs, size_t m, size_t n_keep, struct hy_err *err) {
  struct hy_force *f = ctx;
  f->pre_n = 0;
  if (!f->pre_cube || n_keep < 2) return 0;
  f->pre_cube = 0;
  const double t0 = hy_trace_t();
  uint32_t *u = u32_scratch(f, hy_size_mul_or_die(m, 2, "moved particles"));
  for (size_t h = 0; h < m; h++) {
    u[h] = (uint32_t)holes[h];
    u[m + h] = (uint32_t)srcs[h];
  }
  double lo[3], scale;
  hy_force_key_cube_args(f->pre_c, f->pre_h, lo, &scale);
  if (hy_cl_state_presort(f->cl, n_keep, u, u + m, m, lo, scale, err) != 0) return -1;
  f->pre_n = n_keep;
  hy_trace(HY_TRACE_MAIN, "dd_presort", t0);
  return 0;
}

int hy_force_cube_ahead(struct hy_force *f, const struct hy_part *p, int dev, struct hy_err *err) {
  f->pre_cube = 0;
  f->pre_n = 0;
  if (!f->let) return 0;
  const double t0 = hy_trace_t();
  double centre[3], half;
  int shrunk;
  if (dev) {
    const double zero[3] = {0.0, 0.0, 0.0};
    double red[11], sample[3 * HY_TREE_SAMPLE], tk = 0.0;
    const size_t s = p->n < HY_TREE_SAMPLE ? p->n : HY_TREE_SAMPLE;
    if (hy_cl_state_ranges(f->cl, red, s, sample, &tk, err) != 0) return -1;
    f->st.kernel += tk;
    shrunk = hy_force_cube_for(f, p->n, red, zero, sample, s, centre, &half, err);
  } else {
    shrunk = hy_force_host_cube(f, p, centre, &half, err);
  }
  if (shrunk < 0) return -1;
  memcpy(f->pre_c, centre, sizeof f->pre_c);
  f->pre_h = half;
  f->pre_cube = dev;
  hy_trace(HY_TRACE_MAIN, "dd_cube", t0);
  return 0;
}

const struct hy_decomp_dev *hy_force_decomp_source(struct hy_force *f) {
  f->dd_src = (struct hy_decomp_dev){.ctx = f,
                                     .check = dd_check,
                                     .gather = dd_gather,
                                     .gather_begin = dd_gather_begin,
                                     .gather_end = dd_gather_end,
                                     .leave_begin = dd_leave_begin,
                                     .leave_end = dd_leave_end,
                                     .owners = dd_owners,
                                     .lists = dd_lists,
                                     .kept = dd_kept};
  return &f->dd_src;
}

int hy_force_state_move(struct hy_force *f, int kick, double dt, struct hy_err *err) {
  const double t0 = hy_trace_t();
  int rc = hy_cl_state_step(f->cl, kick, dt, err);
  hy_trace(HY_TRACE_MAIN, kick ? "kick" : "drift", t0);
  return rc;
}

int hy_force_state_energy(struct hy_force *f, double sums[HY_ENERGY_SUMS], struct hy_err *err) {
  return hy_cl_state_energy(f->cl, sums, err);
}

int hy_force_state_finite(struct hy_force *f, size_t *n_bad, struct hy_err *err) {
  long first;
  return hy_cl_state_finite(f->cl, 0, n_bad, &first, err);
}

/* Distributed runs, the device state's tree just built: this
 * walk's tight boxes exchanged (the pack's reductions give this rank's) and
 * its LET items selected on the device (hy_cl_let_select: the items, in the
 * order, of the host's selection walks), for hy_force_exchange_let. */
static int state_select(struct hy_force *f, int mode, int async, struct hy_err *err) {
  struct hy_let_stats ls = {0};
  int rc = hy_let_boxes(f->let, NULL, &f->box, f->frame, f->c_mine, &ls, err);
  f->st.let_boxes += ls.t_boxes;
  if (rc != 0) return -1;
  const double t0 = hy_wtime();
  const int P = f->nranks, hard = mode == HY_WALK_HARD;
  int me = 0;
  if (hy_mpi_check(MPI_Comm_rank(f->comm, &me), "MPI_Comm_rank", err)) return -1;
  double *boxes = hy_malloc("LET boxes", (size_t)P, 7 * sizeof(double));
  double *frames = hy_malloc("LET frames", (size_t)P, 3 * sizeof(double));
  int *rank = hy_malloc("LET destinations", (size_t)P, sizeof(int));
  size_t *count = hy_malloc("LET counts", (size_t)P, sizeof(size_t));
  uint64_t *hcount = hy_malloc("LET counts", (size_t)P, sizeof(uint64_t));
  size_t nb = 0;
  for (int r = 0; r < P; r++) {
    const struct hy_box *B = hy_let_box(f->let, r);
    if (r == me || !(B->lo[0] <= B->hi[0])) continue; /* nothing to send to an empty rank */
    memcpy(boxes + 7 * nb, B->lo, 3 * sizeof(double));
    memcpy(boxes + 7 * nb + 3, B->hi, 3 * sizeof(double));
    boxes[7 * nb + 6] = hy_let_scale(f->let, r);
    memcpy(frames + 3 * nb, hy_let_frame(f->let, r), 3 * sizeof(double));
    rank[nb++] = r;
  }
  float *items = NULL;
  rc = hy_cl_let_select(f->cl, boxes, frames, nb, f->frame, f->cfg.r2, hy_let_full_open(f->let), hard, !hard, async,
                        &items, count, hcount, NULL, err);
  if (rc == 0) hy_let_set_selected(f->let, rank, nb, items, count, hcount);
  hy_free(boxes);
  hy_free(frames);
  hy_free(rank);
  hy_free(count);
  hy_free(hcount);
  f->st.let_select += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, hard ? "let_select_hard" : "let_select_full", t0);
  return rc;
}


/* The merged tree's frame and key cube, alike for both particle-state
 * paths (their merged trees must be the same): the m LET items packed
 * relative to f->origin, the local build's frame, into items (and their
 * B2, b_max into grp), in the key cube of the whole set that the local
 * build took (hy_force_cube_for; when escapers shrank it, the frame is its centre
 * already). */
void hy_force_merged_cube(struct hy_force *f, float *items, float *grp, double centre[3], double *half) {
  double mred[10];
  uint64_t bad = UINT64_MAX; /* the items were checked where they came from */
  if (f->remote.n) hy_force_pack_run(f, &f->remote, f->origin, items, grp, mred, &bad);
  memcpy(centre, f->cube_c, sizeof f->cube_c);
  *half = f->cube_h;
}

/* Room for the m LET items of a merged walk of the device state, in the
 * host buffers the device takes them from (hy_let_floats.alloc). */
static float *items_room(void *ctx, size_t m, float **grp, struct hy_err *err) {
  struct hy_force *f = ctx;
  const size_t k = m ? m : 1;
  float *items = hy_cl_host_buffer(f->cl, HY_CL_HOST_POS, hy_size_mul_or_die(k, 16, "LET items"), err);
  *grp = items ? hy_cl_host_buffer(f->cl, HY_CL_HOST_GRP, hy_size_mul_or_die(k, 8, "LET items"), err) : NULL;
  return *grp && hy_cl_state_append_begin(f->cl, m, err) == 0 ? items : NULL;
}

/* A source rank's items in items_room's buffers: their upload queued
 * (hy_cl_state_append_part) while the exchange converts the next. */
static int items_ready(const struct hy_let_floats *fl, size_t first, size_t count, struct hy_err *err) {
  const struct hy_force *f = fl->ctx;
  return hy_cl_state_append_part(f->cl, fl->pos4, fl->grp, first, count, err);
}

/* The merged walk of the device state (soft steps on several ranks, hard
 * ones with HY_LET_MERGED; p's positions are the device's): the LET
 * exchanged after the local build,
 * the items packed in its frame (with their B2, b_max) behind the state's
 * packed positions on the device, the merged tree built and walked there,
 * each particle and item a sink skipping its own node, and the particles'
 * results turned into the state's accelerations on the device; as
 * merged_walk_device with the host's copy. */
static int state_merged_walk(struct hy_force *f, const struct hy_part *p, int mode, int want_pot, struct hy_err *err) {
  /* the items received straight into floats relative to the local build's
   * frame, as hy_force_merged_cube packs them on the host's path */
  struct hy_let_floats fl = {.origin = f->origin, .alloc = items_room, .ready = items_ready, .ctx = f};
  if (hy_force_exchange_let(f, p, mode, 1, &fl, err) != 0) return -1;
  double t0 = hy_wtime();
  const size_t n = p->n, m = fl.n, nm = n + m;
  double frame[3];
  memcpy(frame, f->frame, sizeof frame);
  const double *centre = f->cube_c, half = f->cube_h; /* hy_force_merged_cube's */
  double tu = 0.0;
  const double ta = hy_trace_t();
  if (hy_cl_state_append_end(f->cl, m, &tu, err) != 0) return -1; /* uploads queued run by run (items_ready) */
  hy_trace(HY_TRACE_MAIN, "append_items", ta);
  f->st.upload += tu;
  int rc = hy_force_build_packed(f, 1, nm, n, NULL, NULL, centre, half, hy_wtime() - t0 - tu, NULL, 0, err);
  struct walk_job *j = &f->job[0];
  if (rc == 0) {
    const struct hy_walk_cfg wc = hy_force_walk_cfg(f, mode, want_pot);
    hy_force_resident_walk_job(f, j, &wc, 1);
    hy_worker_submit(f->worker, hy_force_walk_job_run, j);
    rc = hy_force_wait_job(f, j, err);
    f->st.device_busy += hy_worker_take_busy(f->worker);
  }
  hy_force_restore_frame(f, frame);
  if (rc != 0) return -1;
  double tk2 = 0.0;
  if (hy_cl_state_unpack(f->cl, f->cfg.G, (double)f->cfg.n_ratio, mode == HY_WALK_SPLIT, want_pot,
                         hy_force_acc_scale(f, mode), &tk2, err) != 0)
    return -1;
  f->st.kernel += tk2;
  return 0;
}

/* The tree of the device positions (the first part of every state force):
 * the frame and key cube, the pack, and the build. */
static int state_build(struct hy_force *f, const struct hy_part *p, struct hy_err *err) {
  double t0 = hy_wtime(), red[11], tk = 0.0;
  /* the frame: this build's centre of mass, from a first pass in the
   * absolute frame (so it depends on the positions only), or the bulk's
   * centre when escapers shrink the key cube (a sample of the positions) */
  const double zero[3] = {0.0, 0.0, 0.0};
  double sample[3 * HY_TREE_SAMPLE], centre[3], half;
  const size_t s = p->n < HY_TREE_SAMPLE ? p->n : HY_TREE_SAMPLE;
  const double tp = hy_trace_t();
  if (hy_cl_state_ranges(f->cl, red, s, sample, &tk, err) != 0) return -1;
  for (int d = 0; d < 3; d++) f->origin[d] = red[6] > 0.0 ? red[7 + d] / red[6] : 0.0;
  const int shrunk = hy_force_cube_for(f, p->n, red, zero, sample, s, centre, &half, err);
  if (shrunk < 0) return -1;
  if (shrunk) memcpy(f->origin, centre, sizeof f->origin);
  if (hy_cl_state_pack(f->cl, f->origin, red, 0, NULL, &tk, err) != 0) return -1;
  hy_trace(HY_TRACE_MAIN, "pack", tp);
  if (red[10] >= 0.0 && f->first_bad == UINT64_MAX) f->first_bad = p->id[(size_t)red[10]];
  hy_force_box_from_pack(f, red);
  /* the kept particles' keys sorted in the decomposition (dd_kept), when
   * they were made in this cube: the set's range is the same before and
   * after it, but the bulk's box that may shrink the cube is not */
  size_t pre = 0;
  if (f->pre_n > 0 && f->pre_n <= p->n && f->pre_h == half && memcmp(f->pre_c, centre, sizeof centre) == 0)
    pre = f->pre_n;
  f->pre_n = 0;
  if (f->cfg.mac_alpha > 0 &&
      hy_cl_state_scales(f->cl, f->cfg.mac_alpha / f->cfg.G, f->cfg.a_err / f->cfg.G, f->cfg.mac_both, &f->c_mine,
                         err))
    return -1;
  if (hy_force_build_packed(f, 0, p->n, 0, NULL, NULL, centre, half, hy_wtime() - t0, NULL, pre, err) != 0) return -1;
  f->packed_n = 0; /* nothing of this build is in the host's staging buffer */
  return 0;
}

int hy_force_state_force_begin(struct hy_force *f, const struct hy_part *p, int mode, int want_pot,
                               struct hy_err *err) {
  if (hy_force_pot_invalid(mode, want_pot))
    return hy_err_set(err, "internal error: potential requested from a hard walk");
  f->sf.queued = 0;
  if (state_build(f, p, err) != 0) return -1;
  if (mode < 0) return 0; /* the tree only */
  const double t1 = hy_wtime();
  if (hy_force_walk_merged(f, mode)) {
    if (state_select(f, mode, 0, err) != 0 || state_merged_walk(f, p, mode, want_pot, err) != 0) return -1;
    f->st.n_walks++;
    f->st.walk_wall += hy_wtime() - t1;
    return 0;
  }
  f->sf.mode = mode;
  f->sf.want_pot = want_pot;
  f->sf.t1 = t1;
  if (!f->let) /* one rank: no waits to give the caller */
    return hy_force_state_force_end(f, p, hy_force_state_force_exchange(f, p, err), err);
  /* the items' read beside the local walk (hy_cl_let_wait in hy_force_exchange_let) */
  if (state_select(f, mode, 1, err) != 0) return -1;
  return 1;
}

int hy_force_state_force_exchange(struct hy_force *f, const struct hy_part *p, struct hy_err *err) {
  struct walk_job *lj = &f->job[0];
  const struct hy_walk_cfg wc = hy_force_walk_cfg(f, f->sf.mode, f->sf.want_pot);
  hy_force_resident_walk_job(f, lj, &wc, 0);
  hy_worker_submit(f->worker, hy_force_walk_job_run, lj);
  f->sf.queued = 1;
  /* the LET exchange and the remote items packed while the device walks */
  return f->let ? hy_force_remote_tree(f, p, f->sf.mode, 1, err) : 0;
}

int hy_force_state_force_end(struct hy_force *f, const struct hy_part *p, int rc, struct hy_err *err) {
  if (!f->sf.queued)
    return rc != 0 ? -1 : hy_err_set(err, "internal error: a device force ended that was not under way");
  f->sf.queued = 0;
  struct walk_job *lj = &f->job[0];
  /* after the caller's host work: the build holds this thread until its
   * last kernel, which may wait for the local walk's end */
  if (rc == 0) rc = hy_force_remote_build_side(f, err);
  if (hy_force_wait_job(f, lj, rc == 0 ? err : &lj->err) != 0) rc = -1;
  if (rc == 0 && f->let && f->n_items > 0) { /* its results added to the local walk's, on the device */
    struct walk_job *rj = &f->job[1];
    hy_force_second_tree_job(f, rj, &lj->wc, p->n, 0, -1, NULL, NULL);
    rj->a.sinks_resident = 1;
    rj->a.add_unsorted = 1;
    hy_worker_submit(f->worker, hy_force_walk_job_run, rj);
    if (hy_force_wait_job(f, rj, err) != 0) rc = -1;
  }
  f->st.device_busy += hy_worker_take_busy(f->worker);
  if (rc != 0) return -1;
  const int mode = f->sf.mode;
  double tu = 0.0;
  const double tq = hy_trace_t();
  if (hy_cl_state_unpack(f->cl, f->cfg.G, (double)f->cfg.n_ratio, mode == HY_WALK_SPLIT, f->sf.want_pot,
                         hy_force_acc_scale(f, mode), &tu, err) != 0)
    return -1;
  hy_trace(HY_TRACE_MAIN, "unpack", tq);
  f->st.kernel += tu;
  f->st.n_walks++;
  f->st.walk_wall += hy_wtime() - f->sf.t1;
  return 0;
}

int hy_force_state_force(struct hy_force *f, const struct hy_part *p, int mode, int want_pot, struct hy_err *err) {
  const int waits = hy_force_state_force_begin(f, p, mode, want_pot, err);
  if (waits <= 0) return waits;
  return hy_force_state_force_end(f, p, hy_force_state_force_exchange(f, p, err), err);
}
