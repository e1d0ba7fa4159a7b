/* SPDX-License-Identifier: GPL-3.0-or-later
 * force.c: see force.h. */
#include "config.h"

#include "force_internal.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>

#include "alloc.h"
#include "decomp.h"
#include "hy_shared.h"
#include "let.h"
#include "trace.h"
#include "worker.h"

/* Tree ids are unique across all force objects of the process: the engine
 * skips the upload of a tree whose id is already resident. */
static atomic_uint_fast64_t tree_serial = 1;

uint64_t hy_force_next_tree_id(void) { return atomic_fetch_add(&tree_serial, 1); }

struct hy_force *hy_force_create(struct hy_cl *cl, struct hy_pool *pool, const struct hy_force_cfg *cfg) {
  struct hy_force *f = hy_calloc("force engine", 1, sizeof *f);
  f->cl = cl;
  f->pool = pool;
  f->cfg = *cfg;
  /* auto: a CPU device shares the host's cores, and its ~40 kernel launches
   * per build cost more than the host build */
  if (f->cfg.tree_build == HY_TREE_BUILD_AUTO)
    f->cfg.tree_build = hy_cl_is_cpu(cl) ? HY_TREE_BUILD_HOST : HY_TREE_BUILD_DEVICE;
  /* the hard steps' remote tree where the local one is built: on GPUs the
   * host's build takes far longer than the local walk it should hide behind */
  if (f->cfg.hard_remote == HY_TREE_BUILD_AUTO) f->cfg.hard_remote = f->cfg.tree_build;
  hy_tree_init(&f->tree);
  hy_tree_init(&f->rtree);
  hy_part_init(&f->remote);
  hy_part_init(&f->comb);
  f->nranks = 1;
  f->first_bad = UINT64_MAX;
  f->worker = hy_worker_create(0);
  return f;
}

void hy_force_set_comm(struct hy_force *f, MPI_Comm comm, int threaded, int let_walk) {
  f->merged = let_walk;
  int n = 1;
  if (MPI_Comm_size(comm, &n) != MPI_SUCCESS) hy_die("force: MPI_Comm_size failed");
  f->comm = comm;
  f->nranks = n;
  hy_let_free(f->let);
  f->let = n > 1 ? hy_let_create(comm, f->pool) : NULL;
  hy_worker_free(f->worker);
  f->worker = hy_worker_create(threaded);
}

int hy_force_nranks(const struct hy_force *f) { return f->nranks; }
int hy_force_let_node_ranks(const struct hy_force *f) { return f->let ? hy_let_node_ranks(f->let) : 0; }
uint64_t hy_force_last_hard_items(const struct hy_force *f) { return f->last_hard; }
uint64_t hy_force_first_bad_id(const struct hy_force *f) { return f->first_bad; }

void hy_force_set_last_hard_items(struct hy_force *f, uint64_t n) { f->last_hard = n; }

double hy_force_acc_scale(const struct hy_force *f, int mode) {
  if (!(f->cfg.mac_alpha > 0)) return 0.0;
  return mode == HY_WALK_FULL ? 1.0 : mode == HY_WALK_SOFTSTEP ? 1.0 / (double)f->cfg.n_ratio : 0.0;
}

void hy_force_free(struct hy_force *f) {
  if (!f) return;
  hy_worker_free(f->worker);
  hy_let_free(f->let);
  hy_tree_free(&f->tree);
  hy_tree_free(&f->rtree);
  hy_part_free(&f->remote);
  hy_part_free(&f->comb);
  hy_free(f->self_node);
  hy_free(f->node);
  hy_free(f->rnode);
  hy_free(f->sink);
  hy_free(f->out0);
  hy_free(f->out1);
  hy_free(f->rout0);
  hy_free(f->rout1);
  hy_free(f->red);
  hy_free(f->sc);
  hy_free(f->red_bad);
  hy_free(f->u32);
  hy_free(f->hkeys);
  hy_free(f->dd_leave);
  hy_free(f->dd_beyond);
  hy_free(f->dd_rank);
  hy_free(f);
}

const struct hy_force_cfg *hy_force_config(const struct hy_force *f) { return &f->cfg; }
struct hy_cl *hy_force_cl(const struct hy_force *f) {
  return f->cl;
}
const struct hy_tree *hy_force_tree(const struct hy_force *f) { return &f->tree; }
int hy_force_device_built(const struct hy_force *f) { return f->dev_build; }

static void ensure_sinks(struct hy_force *f, size_t n) {
  if (n <= f->sink_cap) return;
  size_t cap = n + n / 8 + 16;
  size_t nf = hy_size_mul_or_die(cap, 4, "sink buffers");
  hy_free(f->sink);
  hy_free(f->out0);
  hy_free(f->out1);
  hy_free(f->rout0);
  hy_free(f->rout1);
  f->sink = hy_malloc("sink positions", nf, sizeof(float));
  f->out0 = hy_malloc("walk results", nf, sizeof(float));
  f->out1 = hy_malloc("soft walk results", nf, sizeof(float));
  f->rout0 = hy_malloc("remote walk results", nf, sizeof(float));
  f->rout1 = hy_malloc("remote soft walk results", nf, sizeof(float));
  f->sink_cap = cap;
}

struct sink_job {
  const double *pos;
  const double *centre;
  float *sink;
  const double *acc; /* relative criterion: the scales from p->acc in .w (NULL: 0) */
  double alpha_g, aerr_g;
  int capped;
};

static void sink_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct sink_job *j = arg;
  for (size_t i = b; i < e; i++) {
    for (int d = 0; d < 3; d++) j->sink[4 * i + d] = (float)(j->pos[3 * i + d] - j->centre[d]);
    j->sink[4 * i + 3] = j->acc ? hy_tree_sink_scale(j->acc + 3 * i, j->alpha_g, j->aerr_g, j->capped) : 0.0f;
  }
}



/* ------------------------------------------------------ device build */

struct scale_job {
  const double *acc;
  float *sc;    /* NULL: only their largest */
  double *tmax; /* per thread: the largest scale */
  double alpha_g, aerr_g;
  int capped;
};

static void scale_body(void *arg, size_t b, size_t e, int tid) {
  const struct scale_job *j = arg;
  double m = j->tmax[tid];
  for (size_t i = b; i < e; i++) {
    const float c = hy_tree_sink_scale(j->acc + 3 * i, j->alpha_g, j->aerr_g, j->capped);
    if (j->sc) j->sc[i] = c;
    m = c > m ? c : m;
  }
  j->tmax[tid] = m;
}

/* The relative criterion's sink scales of p's particles into f->sc (store
 * 0: only their largest), and their largest into f->c_mine (the LET
 * selection for this rank's box). */
static void sink_scales(struct hy_force *f, const struct hy_part *p, int store) {
  if (store && p->n > f->sc_cap) {
    hy_free(f->sc);
    f->sc = hy_malloc("sink scales", p->n, sizeof(float));
    f->sc_cap = p->n;
  }
  const int nt = hy_pool_size(f->pool);
  double *tmax = hy_calloc("sink scale maxima", (size_t)nt, sizeof(double));
  struct scale_job j = {.acc = p->acc, .sc = store ? f->sc : NULL, .tmax = tmax,
                        .alpha_g = f->cfg.mac_alpha / f->cfg.G, .aerr_g = f->cfg.a_err / f->cfg.G,
                        .capped = f->cfg.mac_both};
  hy_pool_for(f->pool, p->n, 16384, scale_body, &j);
  double m = 0.0;
  for (int t = 0; t < nt; t++) m = tmax[t] > m ? tmax[t] : m;
  hy_free(tmax);
  f->c_mine = m;
}

#define PACK_RED 10 /* doubles per thread of the pack reductions */

struct pack_job {
  const struct hy_part *p;
  const double *origin;
  float *out;
  float *grp;        /* NULL, or B2 and b_max per particle (p->grp in float) */
  double *red;       /* per thread: lo[3], hi[3], sum m, sum m x[3] of the finite positions */
  uint64_t *red_bad; /* per thread: lowest ID with a non-finite position */
};

static void pack_body(void *arg, size_t b, size_t e, int tid) {
  const struct pack_job *j = arg;
  const double *pos = j->p->pos, *mass = j->p->mass, *o = j->origin;
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  double m = 0.0, mx[3] = {0.0, 0.0, 0.0};
  uint64_t bad = UINT64_MAX;
  for (size_t i = b; i < e; i++) {
    const double *r = pos + 3 * i;
    float *q = j->out + 4 * i;
    const double x[3] = {r[0] - o[0], r[1] - o[1], r[2] - o[2]}, mi = mass[i];
    q[0] = (float)x[0];
    q[1] = (float)x[1];
    q[2] = (float)x[2];
    q[3] = (float)mi;
    if (j->grp) {
      j->grp[2 * i] = (float)j->p->grp[2 * i];
      j->grp[2 * i + 1] = (float)j->p->grp[2 * i + 1];
    }
    if (isfinite(x[0]) & isfinite(x[1]) & isfinite(x[2])) { /* plain compares: fmin/fmax are calls */
      for (int d = 0; d < 3; d++) {
        lo[d] = x[d] < lo[d] ? x[d] : lo[d];
        hi[d] = x[d] > hi[d] ? x[d] : hi[d];
        mx[d] += mi * x[d];
      }
      m += mi;
    } else if (j->p->id[i] < bad) {
      bad = j->p->id[i];
    }
  }
  double *red = j->red + PACK_RED * (size_t)tid; /* lo, hi and m x relative to the origin o */
  for (int d = 0; d < 3; d++) {
    red[d] = fmin(red[d], lo[d]);
    red[3 + d] = fmax(red[3 + d], hi[d]);
    red[7 + d] += mx[d];
  }
  red[6] += m;
  if (bad < j->red_bad[tid]) j->red_bad[tid] = bad;
}

/* Pack p's n particles relative to origin into out (and their B2, b_max
 * into grp when not NULL) on the pool's threads; red receives lo[3], hi[3]
 * (relative to the origin), sum m and sum m x[3] of the finite positions,
 * *bad the lowest ID with a non-finite one (if lower than before). */
void hy_force_pack_run(struct hy_force *f, const struct hy_part *p, const double origin[3], float *out, float *grp,
                       double red[10], uint64_t *bad) {
  const int nt = hy_pool_size(f->pool);
  if (f->red_n < nt) {
    hy_free(f->red);
    hy_free(f->red_bad);
    f->red = hy_malloc("pack reductions", (size_t)nt * PACK_RED, sizeof(double));
    f->red_bad = hy_malloc("pack reductions", (size_t)nt, sizeof(uint64_t));
    f->red_n = nt;
  }
  for (int t = 0; t < nt; t++) {
    double *q = f->red + PACK_RED * t;
    for (int d = 0; d < 3; d++) {
      q[d] = INFINITY;
      q[3 + d] = -INFINITY;
      q[7 + d] = 0.0;
    }
    q[6] = 0.0;
    f->red_bad[t] = UINT64_MAX;
  }
  struct pack_job pj = {.p = p, .origin = origin, .out = out, .grp = grp, .red = f->red, .red_bad = f->red_bad};
  hy_pool_for(f->pool, p->n, 16384, pack_body, &pj);
  for (int d = 0; d < 3; d++) {
    red[d] = INFINITY;
    red[3 + d] = -INFINITY;
    red[7 + d] = 0.0;
  }
  red[6] = 0.0;
  for (int t = 0; t < nt; t++) {
    const double *q = f->red + PACK_RED * t;
    for (int d = 0; d < 3; d++) {
      red[d] = fmin(red[d], q[d]);
      red[3 + d] = fmax(red[3 + d], q[3 + d]);
      red[7 + d] += q[7 + d];
    }
    red[6] += q[6];
    if (f->red_bad[t] < *bad) *bad = f->red_bad[t];
  }
}

/* The local tree on the device: pack the positions in p's order relative to
 * their centre of mass (and find the cube and any non-finite position on
 * the way), then keys, sort, cells and moments on the device. A frame at the
 * centre of mass, not at the cube's centre, keeps the single-precision
 * positions of the bulk exact to float rounding even when an escaper makes
 * the cube huge; computed from the positions alone, it makes a resumed run
 * build the same trees as the straight one. */
/* The key cube from the reductions of a pack relative to `origin` (red =
 * lo[3], hi[3], ...) and a sample of the positions (hy_tree_sample): the
 * bounding cube, shrunk to the bulk when escapers make it far wider
 * (hy_tree_robust_cube). Returns 1 if it was shrunk. */
int hy_force_key_cube(size_t n, const double red[6], const double origin[3], const double *sample, size_t s,
                      double centre[3], double *half) {
  double lo[3], hi[3];
  size_t n_finite = red[0] <= red[3] ? n : 0; /* no finite position: a cube at the origin */
  for (int d = 0; d < 3; d++) { /* the ranges were taken relative to the origin */
    lo[d] = red[d] + origin[d];
    hi[d] = red[3 + d] + origin[d];
  }
  hy_tree_cube(n_finite, lo, hi, centre, half);
  return hy_tree_robust_cube_sampled(sample, s, n_finite, centre, half);
}

/* The common cube's result (shrunk, or -1) kept for the merged tree. */
static int keep_cube(struct hy_force *f, int shrunk, const double centre[3], const double *half) {
  if (shrunk < 0) return -1;
  memcpy(f->cube_c, centre, sizeof f->cube_c);
  f->cube_h = *half;
  f->cube_shrunk = shrunk;
  return shrunk;
}

/* The key cube of a local build. One rank: hy_force_key_cube. Several: one
 * cube for every rank's trees, the one that one rank would take for the
 * whole set (the union of the ranks' ranges, shrunk to the union of their
 * bulk boxes when escapers make it far wider), kept in f->cube_* for the
 * soft step's merged tree, whose LET items lie in that union too. The
 * local trees are then the one-rank tree's cells restricted to each rank's
 * particles and the merged tree its cells restricted to the local particles
 * and items, so which cells a walk accepts does not depend on where the
 * domain boundaries fall: each rank's own cube made the errors of 2, 3 and
 * 4 ranks differ from one rank's by up to 1.24x (median of the total force)
 * and 4.5x (99th percentile of the hard force after the drift) depending on
 * the realisation, as one rank's do when the same sphere is rotated
 * (doc/performance.md).
 * Collective: every rank calls it once per local build, also
 * without particles (n = 0). red: the ranges relative to origin. Returns 1
 * if the cube was shrunk, 0 if not, -1 on an MPI error. */
int hy_force_cube_for(struct hy_force *f, size_t n, const double red[6], const double origin[3], const double *sample,
                      size_t s, double centre[3], double *half, struct hy_err *err) {
  if (!f->let) return hy_force_key_cube(n, red, origin, sample, s, centre, half);
  double lo[3], hi[3];
  for (int d = 0; d < 3; d++) {
    lo[d] = red[d] + origin[d];
    hi[d] = red[3 + d] + origin[d];
  }
  const int shrunk = hy_let_key_cube(f->let, n, lo, hi, sample, s, centre, half, err);
  return keep_cube(f, shrunk, centre, half);
}

/* hy_force_cube_for of p's positions on the host (host builds, ranks without a build) */
int hy_force_host_cube(struct hy_force *f, const struct hy_part *p, double centre[3], double *half,
                       struct hy_err *err) {
  const int shrunk = hy_let_key_cube_of(f->let, &f->tree, p, f->pool, centre, half, err);
  return keep_cube(f, shrunk, centre, half);
}

int hy_force_join_cube(struct hy_force *f, const struct hy_part *p, struct hy_err *err) {
  double centre[3], half;
  return f->let && hy_force_host_cube(f, p, centre, &half, err) < 0 ? -1 : 0;
}

/* Distributed runs: the tight box of the local particles from a pack's
 * reductions (red = lo[3], hi[3] relative to f->origin), which spares the
 * host a pass over the positions; widened by a few rounding units of x - o + o
 * so that it holds every particle. */
void hy_force_box_from_pack(struct hy_force *f, const double red[6]) {
  for (int d = 0; d < 3; d++) {
    const double o = f->origin[d], lo = red[d] + o, hi = red[3 + d] + o;
    f->box.lo[d] = lo - 4.0 * DBL_EPSILON * (fabs(lo) + fabs(o));
    f->box.hi[d] = hi + 4.0 * DBL_EPSILON * (fabs(hi) + fabs(o));
  }
  f->box_ok = 1;
}

/* A device build of n positions (pos4, grp as hy_cl_build_args) packed
 * relative to `frame`, in the key cube (centre, half). */
struct hy_cl_build_args hy_force_build_args(const struct hy_force *f, const double frame[3], const float *pos4,
                                            const float *grp, size_t n, const double centre[3], double half,
                                            uint64_t id, int slot) {
  return (struct hy_cl_build_args){.pos = pos4,
                                   .grp = grp,
                                   .n = n,
                                   .lo = {centre[0] - half - frame[0], centre[1] - half - frame[1],
                                          centre[2] - half - frame[2]},
                                   .side = 2.0 * half,
                                   .n_crit = f->cfg.n_crit,
                                   /* the MAC radii are for G = 1 sums; 0: the relative criterion's records */
                                   .a_err = f->cfg.mac_alpha > 0 ? 0.0 : f->cfg.a_err / f->cfg.G,
                                   .tree_id = id,
                                   .slot = slot};
}

/* Tracing: the device's parts of a job (durations from the OpenCL profiling
 * events), laid end to end before t_end: names[k] takes d[k] seconds. */
static void trace_parts(int lane, const char *const *names, const double *d, int n, double t_end) {
  double t = t_end;
  for (int k = 0; k < n; k++) t -= d[k];
  for (int k = 0; k < n; k++) {
    hy_trace_span(lane, names[k], t, t + d[k]);
    t += d[k];
  }
}

/* A device build's own times (res) into the costs, and its four parts
 * (names: upload, sort, cells, moments) into the trace on `lane`, ending
 * at t_end. */
void hy_force_take_build(struct hy_force *f, const struct hy_cl_build_result *res, int lane, const char *const names[4],
                         double t_end) {
  f->st.upload += res->upload;
  f->st.dev_sort += res->sort;
  f->st.dev_cells += res->cells;
  f->st.dev_moments += res->moments;
  if (hy_trace_on()) {
    const double d[] = {res->upload, res->sort, res->cells, res->moments};
    trace_parts(lane, names, d, 4, t_end);
    /* the keys sorted ahead, in the decomposition: placed before the rest */
    static const char *const pre[] = {"b_presort"}; /* local builds only */
    if (res->presort > 0.0) trace_parts(lane, pre, &res->presort, 1, t_end - d[0] - d[1] - d[2] - d[3]);
  }
}

/* Distributed runs: the key cube as hy_tree_key takes it, for the keys made
 * from double positions (hy_cl_build_args.key_lo, key_scale). */
void hy_force_key_cube_args(const double centre[3], double half, double lo[3], double *scale) {
  for (int d = 0; d < 3; d++) lo[d] = centre[d] - half;
  *scale = (double)(1u << HY_KEY_BITS) / (2.0 * half);
}

/* The device build from positions packed relative to f->origin (pos4, or
 * the device state's when NULL) in the key cube (centre, half); t_host is
 * the host time spent so far. slot 0: the local tree (f->tree's counts and
 * frame); slot 1: the merged tree of local particles and LET items (f->m_*),
 * which leaves the local tree on the device beside it; its
 * first n_local positions are the local build's, whose key order it reuses
 * (hy_cl_build_args.merge_local: the local build keeps its keys on several
 * ranks, all of whose trees share one key cube, hy_force_cube_for). */
int hy_force_build_packed(struct hy_force *f, int slot, size_t n, size_t n_local, const float *pos4, const float *grp,
                          const double centre[3], double half, double t_host, const uint64_t *keys, size_t presorted,
                          struct hy_err *err) {
  double t1 = hy_wtime();
  const uint64_t id = hy_force_next_tree_id();
  if (slot == 0)
    f->tree_id = id;
  else
    f->m_tree_id = id;
  struct hy_cl_build_args a = hy_force_build_args(f, f->origin, pos4, grp, n, centre, half, id, slot);
  a.keep_keys = slot == 0 && f->let != NULL;
  /* distributed: the local tree's keys from the double positions, in the
   * whole set's cube, whatever the frame (the state's, or the host's keys) */
  if (slot == 0 && f->let) {
    if (pos4 && !keys) return hy_err_set(err, "internal error: a distributed local build without its keys");
    hy_force_key_cube_args(centre, half, a.key_lo, &a.key_scale);
    a.state_keys = pos4 == NULL;
    a.keys = keys;
    a.presorted = presorted;
  }
  if (f->cfg.mac_alpha > 0 && (slot == 0 || n_local > 0)) { /* the local sinks' scales for their records */
    a.sc = pos4 ? f->sc : NULL;
    a.sc_n = slot == 0 ? n : n_local;
    a.state_sc = pos4 == NULL;
  }
  if (slot == 1) {
    a.merge_local = n_local;
    a.merge_id = f->tree_id;
    a.graft = !pos4; /* from the device state: grafted onto the local tree */
  }
  struct hy_cl_build_result res;
  if (hy_cl_tree_build(f->cl, &a, &res, err) != 0) return -1;
  double t2 = hy_wtime();
  hy_trace(HY_TRACE_MAIN, slot ? "build_merged" : "build", t1);
  /* its parts on the device lane (the main thread waited for them) */
  static const char *const b0[] = {"b_upload", "b_sort", "b_cells", "b_moments"};
  static const char *const b1[] = {"bm_upload", "bm_sort", "bm_cells", "bm_moments"};
  hy_force_take_build(f, &res, HY_TRACE_DEVICE, slot ? b1 : b0, t2);
  f->st.sort += t_host; /* packing, bounds */
  f->st.build += t2 - t1 - res.upload; /* device: keys, sort, cells, moments (wall) */
  if (slot == 1) {
    f->m_n = n;
    f->m_n_local = n_local;
    f->m_n_cell = res.n_cell;
    f->m_root = res.root;
    f->m_whole = res.whole;
    f->m_local_sinks = res.local_sinks;
    f->st.merged_builds++;
    f->st.merged_whole += res.whole ? 1 : 0;
    return 0;
  }
  struct hy_tree *t = &f->tree;
  t->n_part = n;
  t->n_cell = res.n_cell;
  t->root = res.root;
  t->depth = res.generations - 1;
  t->half = half;
  t->a_err = a.a_err;
  memcpy(t->centre, centre, sizeof t->centre);
  memcpy(f->frame, f->origin, sizeof f->frame); /* the node records' frame */
  f->sinks_packed = 0;
  f->dev_build = 1;
  f->have_tree = 1;
  return 0;
}

/* Distributed runs: the device-built local tree to the host (f->tree, with
 * the particle map) for the LET selection walks. */
static int tree_to_host(struct hy_force *f, size_t n, struct hy_err *err) {
  double t0 = hy_wtime(), tx = 0.0;
  const size_t nc = f->tree.n_cell;
  const size_t o_next = hy_size_mul_or_die(nc, 32, "tree download"), o_b2 = o_next + 4 * n, o_idx = o_b2 + 4 * nc;
  char *buf = hy_cl_host_buffer(f->cl, HY_CL_HOST_TREE, o_idx + 4 * n, err);
  if (!buf) return -1;
  float *cells = (float *)buf, *b2 = (float *)(buf + o_b2);
  int32_t *next = (int32_t *)(buf + o_next);
  uint32_t *idx = (uint32_t *)(buf + o_idx);
  if (hy_cl_tree_download(f->cl, 0, n, nc, cells, next, b2, idx, &tx, err) != 0) return -1;
  hy_trace(HY_TRACE_MAIN, "tree_download", t0);
  const double t1 = hy_trace_t();
  hy_tree_from_records(&f->tree, n, nc, f->frame, cells, next, b2, idx, f->pool);
  hy_trace(HY_TRACE_MAIN, "tree_records", t1);
  f->st.download += tx;
  f->st.export_ += hy_wtime() - t0 - tx;
  return 0;
}

/* Make the staging buffer of packed positions hold n + room particles
 * (it keeps its size when it is large enough). */
static int pos4_fits(struct hy_force *f, size_t n, size_t room, struct hy_err *err) {
  if (room == 0) return 1;
  const size_t bytes = hy_size_mul_or_die(n + room, 16, "packed positions");
  if (hy_cl_host_buffer_size(f->cl, HY_CL_HOST_POS) >= bytes) return 1;
  return hy_cl_host_buffer(f->cl, HY_CL_HOST_POS, bytes, err) != NULL;
}

struct hkey_job {
  const double *pos, *centre;
  double half;
  uint64_t *key;
  uint32_t *idx;
};

static void hkey_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct hkey_job *j = arg;
  for (size_t i = b; i < e; i++) {
    j->key[i] = hy_tree_key(j->pos + 3 * i, j->centre, j->half);
    j->idx[i] = (uint32_t)i;
  }
}

/* Distributed device builds from the host's positions: their keys as the
 * device state's make them (hy_cl_build_args.keys), n keys then n indices
 * in f's scratch. */
static const uint64_t *host_keys(struct hy_force *f, const struct hy_part *p, const double centre[3], double half) {
  const size_t n = p->n, words = n + n / 2 + 1; /* n 8-byte keys, n 4-byte indices */
  if (words > f->hkeys_cap) {
    hy_free(f->hkeys);
    f->hkeys_cap = words + words / 4;
    f->hkeys = hy_malloc("keys", f->hkeys_cap, sizeof(uint64_t));
  }
  struct hkey_job j = {
      .pos = p->pos, .centre = centre, .half = half, .key = f->hkeys, .idx = (uint32_t *)(f->hkeys + n)};
  hy_pool_for(f->pool, n, 65536, hkey_body, &j);
  return f->hkeys;
}

/* The local tree on the device. */
static int device_build(struct hy_force *f, const struct hy_part *p, struct hy_err *err) {
  double t0 = hy_wtime();
  const size_t n = p->n;
  /* distributed: room for the soft step's LET items after the local
   * particles (merged_build): 5/4 of the last soft step's count, and at
   * least a quarter of the local particles */
  const size_t last = f->remote.n + f->remote.n / 4;
  const size_t room = f->let ? (last > n / 4 ? last : n / 4) + 1024 : 0;
  if (!pos4_fits(f, n, room, err)) return -1;
  float *pos4 = hy_cl_host_buffer(f->cl, HY_CL_HOST_POS, hy_size_mul_or_die(n, 16, "packed positions"), err);
  if (!pos4) return -1;
  /* the frame: this build's centre of mass (as the device-resident state's) */
  hy_part_com_pool(p, f->pool, f->origin);
  double sample[3 * HY_TREE_SAMPLE], centre[3], half;
  const size_t s = hy_tree_sample(p->pos, n, sample);
  uint64_t bad = UINT64_MAX;
  double red[10];
  for (int pass = 0; pass < 2; pass++) {
    hy_force_pack_run(f, p, f->origin, pos4, NULL, red, &bad);
    if (pass == 1) break;
    /* escapers shrank the key cube: pack again relative to the bulk's centre */
    const int shrunk = hy_force_cube_for(f, n, red, f->origin, sample, s, centre, &half, err);
    if (shrunk < 0) return -1;
    if (!shrunk) break;
    memcpy(f->origin, centre, sizeof f->origin);
  }
  f->packed_n = n;
  memcpy(f->packed_red, red, sizeof f->packed_red);
  if (f->first_bad == UINT64_MAX) f->first_bad = bad;
  hy_force_box_from_pack(f, red);
  const uint64_t *keys = f->let ? host_keys(f, p, centre, half) : NULL;
  if (f->cfg.mac_alpha > 0) sink_scales(f, p, 1); /* uploaded for the particle records */
  if (hy_force_build_packed(f, 0, n, 0, pos4, NULL, centre, half, hy_wtime() - t0, keys, 0, err) != 0) return -1;
  return f->let ? tree_to_host(f, n, err) : 0;
}

/* Distributed walks that take the merged tree of local particles and LET
 * items (all but the hard walks; hy_force_set_comm). */
int hy_force_walk_merged(const struct hy_force *f, int mode) {
  return f->let && (f->merged == HY_LET_MERGED || (f->merged == HY_LET_AUTO && mode != HY_WALK_HARD));
}

/* The walk parameters of the force's configuration. */
struct hy_walk_cfg hy_force_walk_cfg(const struct hy_force *f, int mode, int want_pot) {
  return (struct hy_walk_cfg){.mode = mode,
                              .want_pot = want_pot,
                              .nvec = f->cfg.nvec,
                              .eps = f->cfg.eps,
                              .r1 = f->cfg.r1,
                              .r2 = f->cfg.r2,
                              .n_ratio = (double)f->cfg.n_ratio};
}

/* Walk job for the tree a device build left on the device (slot 0: the
 * local tree; slot 1: the merged one) with its particles as sinks, the
 * results unsorted into the order of the set it was built from and left on
 * the device (a.out0 NULL). */
void hy_force_resident_walk_job(struct hy_force *f, struct walk_job *j, const struct hy_walk_cfg *wc, int slot) {
  j->cl = f->cl;
  j->wc = *wc;
  j->fetch = 0;
  j->what = slot ? "walk_merged" : "walk_local";
  if (slot && f->m_local_sinks) /* the local particles as sinks, in the local build's key order */
    j->a = (struct hy_cl_walk_args){.n_nodes = f->m_whole ? (size_t)f->m_root + f->m_n_cell : f->m_n + f->m_n_cell,
                                    .n_part = f->m_whole ? f->m_n_local : f->m_n,
                                    .root = f->m_root,
                                    .tree_id = f->m_tree_id,
                                    .slot = 1,
                                    /* grafted: the local tree's particles, the items (r_b^2 < 0), the
                                     * merged cells */
                                    .graft = f->m_whole,
                                    .n_sink = f->m_n_local,
                                    .sink_id = f->m_tree_id,
                                    .self_base = HY_SELF_IN_SINK,
                                    .unsort = 1,
                                    .local_sinks = 1};
  else if (slot)
    j->a = (struct hy_cl_walk_args){.n_nodes = f->m_n + f->m_n_cell,
                                    .n_part = f->m_n,
                                    .root = f->m_root,
                                    .tree_id = f->m_tree_id,
                                    .slot = 1,
                                    .n_sink = f->m_n,
                                    .self_base = 0,
                                    .unsort = 1,
                                    /* the items' results are dropped: blocks of items only are not walked */
                                    .skip_items = f->m_n_local > 0 && f->m_n_local < f->m_n ? f->m_n_local : 0};
  else
    j->a = (struct hy_cl_walk_args){.n_nodes = hy_tree_n_nodes(&f->tree),
                                    .n_part = f->tree.n_part,
                                    .root = f->tree.root,
                                    .tree_id = f->tree_id,
                                    .slot = 0,
                                    .n_sink = f->tree.n_part,
                                    .self_base = 0,
                                    .unsort = 1};
}

/* After a merged walk: the local tree's frame again (a merged build that
 * escapers made repack moved it). */
void hy_force_restore_frame(struct hy_force *f, const double frame[3]) {
  memcpy(f->frame, frame, 3 * sizeof(double));
  memcpy(f->origin, frame, 3 * sizeof(double));
}

void hy_force_set_let_open(struct hy_force *f, double factor) {
  if (f->let) hy_let_set_full_open(f->let, factor);
}

void hy_force_records_room(float **rec, size_t *cap, size_t nn, const char *what) {
  if (nn <= *cap) return;
  const size_t c = nn + nn / 8 + 16; /* slack: a tree a little larger next time needs no new buffer */
  hy_free(*rec);
  *rec = hy_malloc(what, hy_size_mul_or_die(c, 8, what), sizeof(float));
  *cap = c;
}

int hy_force_build(struct hy_force *f, struct hy_part *p, struct hy_err *err) {
  f->dev_build = 0;
  f->box_ok = 0;
  if (f->cfg.tree_build != HY_TREE_BUILD_HOST && p->n >= 2) return device_build(f, p, err);
  double centre[3], half = 0.0;
  int shrunk = 0;
  if (p->n == 0) { /* a rank without particles (distributed runs): nothing to build */
    if (hy_force_join_cube(f, p, err) != 0) return -1; /* the other ranks' builds' collective */
    f->tree.n_part = f->tree.n_cell = 0;
    f->tree_id = hy_force_next_tree_id();
    f->have_tree = 1;
    return 0;
  }
  double t0 = hy_wtime();
  if (f->let && (shrunk = hy_force_host_cube(f, p, centre, &half, err)) < 0)
    return -1; /* the whole set's (hy_force_cube_for) */
  hy_tree_sort_in(&f->tree, p, f->pool, f->let ? centre : NULL, half, shrunk);
  if (f->first_bad == UINT64_MAX) f->first_bad = f->tree.nonfinite_id; /* the key pass checks positions */
  double t1 = hy_wtime();
  /* the tree's MAC radii are computed for G = 1 sums: a_err / G */
  if (hy_tree_build(&f->tree, p, f->cfg.n_crit, f->cfg.a_err / f->cfg.G, f->pool, err) != 0) return -1;
  f->tree.rel_alpha = f->cfg.mac_alpha / f->cfg.G;
  f->tree.rel_capped = f->cfg.mac_both;
  /* the export writes each particle's scale; the LET needs their largest */
  if (f->cfg.mac_alpha > 0 && f->let) sink_scales(f, p, 0);
  double t2 = hy_wtime();
  hy_force_records_room(&f->node, &f->node_cap, hy_tree_n_nodes(&f->tree), "tree node records");
  /* the records' frame: the centre of mass, or the bulk's centre when
   * escapers shrank the key cube (see device_build) */
  const struct hy_tree *t = &f->tree;
  const double *cm = t->n_cell ? t->cm + 3 * (size_t)(t->root - (int32_t)t->n_part) : p->pos;
  for (int d = 0; d < 3; d++) f->frame[d] = isfinite(cm[d]) && !t->shrunk ? cm[d] : t->centre[d];
  hy_tree_export_at(&f->tree, p, f->frame, f->node, f->pool);
  ensure_sinks(f, p->n);
  f->sinks_packed = 0; /* packed on demand: the local walk reads them from the node records */
  double t3 = hy_wtime();
  f->tree_id = hy_force_next_tree_id();
  f->have_tree = 1;
  f->st.sort += t1 - t0;
  f->st.build += t2 - t1;
  f->st.export_ += t3 - t2;
  return 0;
}

struct unpack_job {
  const float *o0, *o1;   /* local walk */
  const float *r0, *r1;   /* remote walk, or NULL */
  double *acc0, *acc1, *pot;
  double G;
};

static void unpack_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct unpack_job *j = arg;
  for (size_t i = b; i < e; i++) {
    for (int d = 0; d < 3; d++) {
      size_t k = 4 * i + (size_t)d;
      j->acc0[3 * i + d] = j->G * ((double)j->o0[k] + (j->r0 ? (double)j->r0[k] : 0.0));
      if (j->acc1) j->acc1[3 * i + d] = j->G * ((double)j->o1[k] + (j->r1 ? (double)j->r1[k] : 0.0));
    }
    if (j->pot) j->pot[i] = j->G * ((double)j->o0[4 * i + 3] + (j->r0 ? (double)j->r0[4 * i + 3] : 0.0));
  }
}

/* Walk results (float, G = 1) of n sinks into acc0 (acc1 when split) and
 * pot, with the remote walk's r0 / r1 added when not NULL. */
void hy_force_unpack_results(struct hy_force *f, size_t n, int split, const float *o0, const float *o1, const float *r0,
                             const float *r1, double *acc0, double *acc1, double *pot) {
  struct unpack_job uj = {.o0 = o0,
                          .o1 = split ? o1 : NULL,
                          .r0 = r0,
                          .r1 = split ? r1 : NULL,
                          .acc0 = acc0,
                          .acc1 = split ? acc1 : NULL,
                          .pot = pot,
                          .G = f->cfg.G};
  hy_pool_for(f->pool, n, 4096, unpack_body, &uj);
}

static void add_times(struct hy_force *f, const struct hy_cl_times *tm) {
  f->st.upload += tm->upload;
  f->st.kernel += tm->kernel;
  f->st.download += tm->download;
}

/* The sink positions (relative to the local records' frame) for walks of
 * other trees; the local walk reads them from the node records. */
void hy_force_pack_sinks(struct hy_force *f, const struct hy_part *p) {
  if (f->sinks_packed) return;
  struct sink_job sj = {.pos = p->pos,
                        .centre = f->frame,
                        .sink = f->sink,
                        .acc = f->cfg.mac_alpha > 0 ? p->acc : NULL,
                        .alpha_g = f->cfg.mac_alpha / f->cfg.G,
                        .aerr_g = f->cfg.a_err / f->cfg.G,
                        .capped = f->cfg.mac_both};
  hy_pool_for(f->pool, p->n, 4096, sink_body, &sj);
  f->sinks_packed = 1;
}

int hy_force_walk_job_run(void *arg) {
  struct walk_job *j = arg;
  double t0 = hy_trace_t();
  int rc;
  if (j->fetch) {
    j->counts[0] = j->counts[1] = 0;
    rc = hy_cl_unsorted_read(j->cl, j->a.n_sink, j->wc.mode == HY_WALK_SPLIT, j->a.out0, j->a.out1, &j->tm, &j->err);
  } else {
    rc = hy_cl_walk(j->cl, &j->a, &j->wc, j->counts, &j->tm, &j->err);
  }
  hy_trace(HY_TRACE_DEVICE, j->fetch ? "fetch" : j->what ? j->what : "walk", t0);
  if (rc == 0 && !j->fetch && hy_trace_on()) { /* the walk's parts: remote (rw_) or other (w_) */
    static const char *const rw[] = {"rw_upload", "rw_mark", "rw_kernel", "rw_unsort", "rw_read"};
    static const char *const lw[] = {"w_upload", "w_mark", "w_kernel", "w_unsort", "w_read"};
    const int remote = j->what && strcmp(j->what, "walk_remote") == 0;
    const struct hy_cl_times *m = &j->tm;
    const double d[] = {m->upload, m->mark, m->kernel - m->mark - m->unsort, m->unsort, m->download};
    const double t_end = hy_wtime();
    trace_parts(HY_TRACE_DEVICE, remote ? rw : lw, d, 5, t_end);
    /* the device's time within the walk's span that none of its own
     * commands took (another queue's ran between them: at hard steps the
     * remote tree's build after the local walk kernel), placed before them */
    const double own = d[0] + d[1] + d[2] + d[3] + d[4];
    if (m->span > own)
      hy_trace_span(HY_TRACE_DEVICE, remote ? "rw_between" : "w_between", t_end - m->span, t_end - own);
    /* the host's part: from the job's start to the kernel's enqueue, and the
     * rest of the wall time beyond the device's span (submission, wake-up) */
    hy_trace_span(HY_TRACE_DEVICE, remote ? "rw_enqueue" : "w_enqueue", t0, t0 + m->enqueue);
    const double extra = (t_end - t0) - m->enqueue - m->span;
    hy_trace_span(HY_TRACE_DEVICE, remote ? "rw_unseen" : "w_unseen", t_end - (extra > 0 ? extra : 0), t_end);
    /* the kernel's waits before it ran (profiling: queued, submitted, started) */
    const double t_k = t0 + m->enqueue;
    hy_trace_span(HY_TRACE_DEVICE, remote ? "rw_submit" : "w_submit", t_k, t_k + m->submit);
    hy_trace_span(HY_TRACE_DEVICE, remote ? "rw_start" : "w_start", t_k + m->submit, t_k + m->submit + m->start);
  }
  return rc;
}

/* Wait for the device thread; on failure copy its message. */
int hy_force_wait_job(struct hy_force *f, struct walk_job *j, struct hy_err *err) {
  double t0 = hy_wtime();
  int rc = hy_worker_wait(f->worker);
  f->st.wait_device += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "wait_device", t0);
  if (rc != 0) {
    *err = j->err;
    return -1;
  }
  add_times(f, &j->tm);
  f->walk_total[j->wc.mode == HY_WALK_HARD ? 0 : 1] += j->tm.kernel;
  f->st.n_pp += j->counts[HY_COUNT_PP];
  f->st.n_pc += j->counts[HY_COUNT_PC];
  return 0;
}

int hy_force_walk(struct hy_force *f, const struct hy_part *p, int mode, double *acc0, double *acc1, double *pot,
                  struct hy_err *err) {
  if (!f->have_tree || f->tree.n_part != p->n)
    return hy_err_set(err, "internal error: tree walk without a tree of the current particles");
  if (pot && mode == HY_WALK_HARD) return hy_err_set(err, "internal error: potential requested from a hard walk");
  if (mode == HY_WALK_SPLIT && !acc1) return hy_err_set(err, "internal error: split walk without a soft output");
  double t0 = hy_wtime();
  const struct hy_walk_cfg wc = hy_force_walk_cfg(f, mode, pot != NULL);
  if (hy_force_walk_merged(f, mode)) {
    if (hy_force_merged_walk(f, p, &wc, acc0, acc1, pot, err) != 0) return -1;
    f->st.n_walks++;
    f->st.walk_wall += hy_wtime() - t0;
    return 0;
  }
  /* 1. the device thread walks the local tree */
  struct walk_job *lj = &f->job[0], *rj = &f->job[1];
  float *out0 = f->out0, *out1 = f->out1;
  if (f->dev_build) { /* results in p's order */
    if (hy_force_device_tree_job(f, lj, &wc, 0, p->n, &out0, &out1, err) != 0) return -1;
    /* distributed: they stay on the device, where the remote walk's are added */
    if (f->let) lj->a.out0 = lj->a.out1 = NULL;
  } else {
    lj->cl = f->cl;
    lj->wc = wc;
    lj->fetch = 0;
    lj->what = "walk_local";
    lj->a = (struct hy_cl_walk_args){.node = f->node,
                                     .n_nodes = hy_tree_n_nodes(&f->tree),
                                     .n_part = f->tree.n_part,
                                     .root = f->tree.root,
                                     .tree_id = f->tree_id,
                                     .slot = 0,
                                     .sink = f->sink,
                                     .n_sink = p->n,
                                     .sink_id = f->tree_id,
                                     .self_base = 0,
                                     .out0 = out0,
                                     .out1 = out1};
  }
  if (p->n) hy_worker_submit(f->worker, hy_force_walk_job_run, lj);
  /* 2. meanwhile this thread exchanges the LET and builds the remote tree */
  int rc = f->let ? hy_force_remote_tree(f, p, mode, 0, err) : 0;
  if (rc == 0) rc = hy_force_remote_build_side(f, err);
  /* 3. join, then the device walks the remote tree with the same sinks */
  if (p->n && hy_force_wait_job(f, lj, rc == 0 ? err : &lj->err) != 0) rc = -1;
  if (rc != 0) return -1;
  int have_remote = f->let && f->n_items > 0 && p->n > 0;
  if (have_remote && f->dev_build) {
    /* the sinks are the device build's particles, already there; the sums
     * of both walks come back in one transfer */
    hy_force_second_tree_job(f, rj, &wc, p->n, 0, -1, out0, out1);
    rj->a.sinks_resident = 1;
    rj->a.add_unsorted = 1;
    hy_worker_submit(f->worker, hy_force_walk_job_run, rj);
    if (hy_force_wait_job(f, rj, err) != 0) return -1;
    have_remote = 0; /* nothing left to add on the host */
  } else if (have_remote) {
    hy_force_pack_sinks(f, p);
    hy_force_second_tree_job(f, rj, &wc, p->n, f->tree_id, -1, f->rout0, f->rout1);
    hy_worker_submit(f->worker, hy_force_walk_job_run, rj);
    if (hy_force_wait_job(f, rj, err) != 0) return -1;
  } else if (f->dev_build && f->let && p->n) {
    *rj = *lj;
    rj->fetch = 1;
    rj->a.out0 = out0;
    rj->a.out1 = out1;
    hy_worker_submit(f->worker, hy_force_walk_job_run, rj);
    if (hy_force_wait_job(f, rj, err) != 0) return -1;
  }
  f->st.device_busy += hy_worker_take_busy(f->worker);
  hy_force_unpack_results(f, p->n, mode == HY_WALK_SPLIT, out0, out1, have_remote ? f->rout0 : NULL,
                          have_remote ? f->rout1 : NULL, acc0, acc1, pot);
  f->st.n_walks++;
  f->st.walk_wall += hy_wtime() - t0;
  return 0;
}

struct direct_job {
  struct hy_cl *cl;
  const float *src, *sink;
  size_t n_src, n_sink;
  long self_base;
  double eps;
  float *out;
  struct hy_cl_times tm;
  struct hy_err err;
};

static int direct_job_run(void *arg) {
  struct direct_job *j = arg;
  return hy_cl_direct(j->cl, j->src, j->n_src, j->sink, j->n_sink, j->self_base, j->eps, j->out, &j->tm, &j->err);
}

/* Distributed direct sum: every rank's (x, y, z, m) in the common frame c,
 * gathered into *all (malloc'd). Sets *n_all and *self_base. */
static int gather_sources(struct hy_force *f, const float *mine, size_t n, float **all, size_t *n_all,
                          long *self_base, struct hy_err *err) {
  const int P = f->nranks;
  int *cnt = hy_malloc("direct-sum counts", (size_t)P, sizeof(int));
  int *disp = hy_malloc("direct-sum counts", (size_t)P, sizeof(int));
  int rc = -1;
  *all = NULL;
  if (n > (size_t)(INT_MAX / 4)) {
    hy_err_set(err, "direct sum: %zu particles on one rank exceed one MPI message", n);
    goto out;
  }
  int my = (int)(4 * n);
  if (hy_mpi_check(MPI_Allgather(&my, 1, MPI_INT, cnt, 1, MPI_INT, f->comm), "direct sum: MPI_Allgather", err))
    goto out;
  long long tot = 0;
  int rank = 0;
  if (hy_mpi_check(MPI_Comm_rank(f->comm, &rank), "direct sum: MPI_Comm_rank", err)) goto out;
  for (int r = 0; r < P; r++) {
    if (r == rank) *self_base = (long)(tot / 4);
    disp[r] = (int)tot;
    tot += cnt[r];
    if (tot > INT_MAX) {
      hy_err_set(err, "direct sum: %lld particles in all exceed one MPI message; use the tree scheme", tot / 4);
      goto out;
    }
  }
  *n_all = (size_t)(tot / 4);
  *all = hy_malloc("direct-sum sources", *n_all ? *n_all : 1, 4 * sizeof(float));
  rc = hy_mpi_check(MPI_Allgatherv(mine, my, MPI_FLOAT, *all, cnt, disp, MPI_FLOAT, f->comm),
                    "direct sum: MPI_Allgatherv of the sources", err);
out:
  hy_free(cnt);
  hy_free(disp);
  return rc;
}

int hy_force_direct(struct hy_force *f, const struct hy_part *p, double *acc, double *pot, struct hy_err *err) {
  double t0 = hy_wtime();
  size_t n = p->n;
  ensure_sinks(f, n);
  /* sources and sinks relative to the centre of the (global) bounding box, in float, or of its bulk */
  double lo[3], hi[3];
  for (int d = 0; d < 3; d++) {
    lo[d] = INFINITY;
    hi[d] = -INFINITY;
  }
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < 3; d++) {
      double x = p->pos[3 * i + d];
      if (x < lo[d]) lo[d] = x;
      if (x > hi[d]) hi[d] = x;
    }
  if (f->nranks > 1) {
    double b[6] = {lo[0], lo[1], lo[2], -hi[0], -hi[1], -hi[2]}, g[6];
    if (hy_mpi_check(MPI_Allreduce(b, g, 6, MPI_DOUBLE, MPI_MIN, f->comm), "direct sum: MPI_Allreduce", err))
      return -1;
    for (int d = 0; d < 3; d++) {
      lo[d] = g[d];
      hi[d] = -g[3 + d];
    }
  }
  double c[3], h = 0.0;
  for (int d = 0; d < 3; d++) {
    c[d] = lo[d] <= hi[d] ? 0.5 * (lo[d] + hi[d]) : 0.0;
    if (lo[d] <= hi[d] && 0.5 * (hi[d] - lo[d]) > h) h = 0.5 * (hi[d] - lo[d]);
  }
  /* escapers: the float frame is centred on the bulk, not on the box (tree.h);
   * on several ranks the rank with the most particles decides for all */
  if (f->nranks > 1) {
    struct {
      double n;
      int rank;
    } mine = {(double)n, 0}, top;
    if (hy_mpi_check(MPI_Comm_rank(f->comm, &mine.rank), "direct sum: MPI_Comm_rank", err) ||
        hy_mpi_check(MPI_Allreduce(&mine, &top, 1, MPI_DOUBLE_INT, MPI_MAXLOC, f->comm),
                     "direct sum: MPI_Allreduce (largest rank)", err))
      return -1;
    if (mine.rank == top.rank) hy_tree_robust_cube(p->pos, n, c, &h);
    if (hy_mpi_check(MPI_Bcast(c, 3, MPI_DOUBLE, top.rank, f->comm), "direct sum: MPI_Bcast (frame)", err))
      return -1;
  } else {
    hy_tree_robust_cube(p->pos, n, c, &h);
  }
  float *src = f->out1; /* the soft output buffer is free during a direct sum */
  for (size_t i = 0; i < n; i++) {
    for (int d = 0; d < 3; d++) f->sink[4 * i + d] = src[4 * i + d] = (float)(p->pos[3 * i + d] - c[d]);
    f->sink[4 * i + 3] = 0.0f;
    src[4 * i + 3] = (float)p->mass[i];
  }
  f->have_tree = 0; /* the sink buffer no longer matches a tree */
  f->sinks_packed = 0;
  struct direct_job dj = {.cl = f->cl, .src = src, .n_src = n, .sink = f->sink, .n_sink = n, .self_base = 0,
                          .eps = f->cfg.eps, .out = f->out0};
  float *all = NULL;
  if (f->nranks > 1) {
    double tc = hy_wtime();
    int rc = gather_sources(f, src, n, &all, &dj.n_src, &dj.self_base, err);
    f->st.direct_comm += hy_wtime() - tc;
    if (rc != 0) {
      hy_free(all);
      return -1;
    }
    dj.src = all;
  }
  hy_worker_submit(f->worker, direct_job_run, &dj);
  double tw = hy_wtime();
  int rc = hy_worker_wait(f->worker);
  f->st.wait_device += hy_wtime() - tw;
  f->st.device_busy += hy_worker_take_busy(f->worker);
  hy_free(all);
  if (rc != 0) {
    *err = dj.err;
    return -1;
  }
  hy_force_unpack_results(f, n, 0, f->out0, NULL, NULL, NULL, acc, NULL, pot);
  add_times(f, &dj.tm);
  f->walk_total[1] += dj.tm.kernel;
  f->st.n_pp += (uint64_t)n * (dj.n_src ? dj.n_src - 1 : 0);
  f->st.walk_wall += hy_wtime() - t0;
  return 0;
}

void hy_force_stats_get(const struct hy_force *f, struct hy_force_stats *s) { *s = f->st; }
void hy_force_walk_seconds(const struct hy_force *f, double seconds[2]) {
  seconds[0] = f->walk_total[0];
  seconds[1] = f->walk_total[1];
}
void hy_force_stats_reset(struct hy_force *f) { memset(&f->st, 0, sizeof f->st); }
