/* SPDX-License-Identifier: GPL-3.0-or-later
 * force.c: see force.h. */
#include "config.h"

#include "force.h"

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

/* One device walk, run on the device thread. */
struct walk_job {
  struct hy_cl *cl;
  struct hy_cl_walk_args a;
  struct hy_walk_cfg wc;
  uint64_t counts[2];
  struct hy_cl_times tm;
  struct hy_err err;
  int fetch; /* no walk: read the results an unsort walk left on the device into a.out0 / a.out1 */
  const char *what; /* its name in the trace (trace.h) */
};

struct hy_force {
  hy_force_overlap_fn ov; /* hy_force_set_overlap */
  void *ov_ctx;
  struct hy_cl *cl;
  struct hy_pool *pool;
  struct hy_force_cfg cfg;
  struct hy_tree tree;
  uint64_t tree_id;   /* increases with every build: lets the engine skip re-uploads */
  int have_tree;
  float *node;        /* 8 floats per node */
  size_t node_cap;    /* in nodes */
  float *sink;        /* 4 floats per particle */
  float *out0, *out1; /* 4 floats per particle: local walk */
  float *rout0, *rout1; /* 4 floats per particle: remote walk */
  size_t sink_cap;    /* in particles */
  struct hy_worker *worker; /* the device thread */
  struct walk_job job[2];   /* local and remote walk */
  /* distributed */
  MPI_Comm comm;
  int nranks;
  struct hy_let *let;
  struct hy_part remote;    /* LET items received (positions, masses), but not a hard walk's (n_items) */
  size_t n_items;           /* the items of the last exchange (hard ones only in floats: hard_items_room) */
  struct hy_tree rtree;     /* remote tree */
  float *rnode;             /* its node records, in the local tree's frame */
  size_t rnode_cap;
  int rdev;                 /* the remote tree of the last exchange on the device: 0 no, 1 packed (rbuild), 2 built
                               there (rbres) */
  float *pnode;             /* or its records as a tree of points (hard walks), in pinned memory */
  size_t p_cells;           /* its cells */
  struct hy_cl_build_args rbuild; /* its build: the items packed in the local tree's frame, slot 1 */
  struct hy_cl_build_result rbres; /* and its result */
  float rbox[6];                  /* the box of its items' packed positions (lo, hi), if rbox_ok */
  int rbox_ok;
  int merged;               /* HY_LET_*: when to walk one tree of local particles + LET items */
  int sinks_packed;         /* f->sink holds the positions of the last build */
  uint64_t first_bad;       /* lowest ID with a non-finite position at the first build that saw one */
  struct hy_part comb;      /* merged: local particles and LET items */
  int32_t *self_node;       /* merged: node of local particle i in the merged tree */
  size_t self_cap;
  uint64_t last_hard;
  struct hy_force_stats st;
  double walk_total[2]; /* kernel seconds of every walk job, hard walks and the others (hy_force_walk_seconds) */
  /* device build (one rank): positions packed in p's order, results back in it */
  int dev_build;            /* the last build ran on the device */
  uint64_t m_tree_id;       /* distributed: the merged tree of the last soft walk (device slot 1) */
  size_t m_n, m_n_cell;
  size_t m_n_local; /* the merged tree's local particles (the first m_n_local of its m_n) */
  int32_t m_root;
  int m_whole;      /* it was grafted onto the local tree (hy_cl_build_args.graft): m_root is a node of the
                       local tree's buffer, which holds m_root + m_n_cell nodes */
  int m_local_sinks; /* its walks take only its local particles as sinks (hy_cl_build_result.local_sinks) */
  double origin[3];         /* device build: this build's centre of mass (its records' frame) */
  size_t packed_n;          /* distributed: the staging buffer holds the last local build's n particles,
                               packed relative to origin (0: not known to) */
  double packed_red[6];     /* their lo[3], hi[3] relative to origin */
  struct hy_box box;        /* distributed: the tight box of the last local device build's particles */
  int box_ok;               /* box is set (from that build's pack reductions) */
  double frame[3];          /* positions in the device records are relative to this point */
  double cube_c[3], cube_h; /* distributed: the key cube of the whole set at the last local build */
  int cube_shrunk;          /* (keep_cube), and whether escapers shrank it */
  float *dout0, *dout1;     /* walk results (engine's host staging memory) */
  uint32_t *u32;            /* 32-bit indices for the device (u32_scratch) */
  size_t u32_cap;
  size_t *dd_leave, *dd_beyond; /* decomposition: the device's lists, as size_t */
  int *dd_rank;
  size_t dd_list_cap[2];
  struct hy_decomp_dev dd_src; /* hy_force_decomp_source */
  /* distributed, state on the device: the soft step's local build begun in
   * the decomposition (hy_force_cube_ahead, dd_kept): the key cube of the
   * whole set before it, and the kept particles whose keys are sorted */
  double pre_c[3], pre_h;
  int pre_cube;             /* pre_c, pre_h hold this decomposition's cube */
  size_t pre_n;             /* the kept particles whose keys are sorted (0: none) */
  uint64_t *hkeys;          /* distributed, state on the host: keys and indices (hy_cl_build_args.keys) */
  size_t hkeys_cap;
  double *red;              /* pack: per-thread reductions (PACK_RED doubles) */
  uint64_t *red_bad;        /* pack: per-thread lowest ID with a non-finite position */
  int red_n;
};

/* Tree ids are unique across all force objects of the process: the engine
 * skips the upload of a tree whose id is already resident. */
static atomic_uint_fast64_t tree_serial = 1;

struct hy_force *hy_force_create(struct hy_cl *cl, struct hy_pool *pool, const struct hy_force_cfg *cfg) {
  struct hy_force *f = hy_calloc("force engine", 1, sizeof *f);
  f->cl = cl;
  f->pool = pool;
  f->cfg = *cfg;
  /* auto: a CPU device shares the host's cores, and its ~40 kernel launches
   * per build cost more than the host build (pocl, 2 cores: 0.13 s against
   * 0.006 s per dt_s at N = 16k, 0.16 s against 0.03 s at 128k) */
  if (f->cfg.tree_build == HY_TREE_BUILD_AUTO)
    f->cfg.tree_build = hy_cl_is_cpu(cl) ? HY_TREE_BUILD_HOST : HY_TREE_BUILD_DEVICE;
  /* the hard steps' remote tree where the local one is built: on four
   * GPUs the host's build (16 threads a rank) took 19.5 ms per hard step at
   * 2^26, far past the local walk it should hide behind, the device's 2.4 ms */
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
  hy_free(f->red_bad);
  hy_free(f->u32);
  hy_free(f->hkeys);
  hy_free(f->dd_leave);
  hy_free(f->dd_beyond);
  hy_free(f->dd_rank);
  hy_free(f);
}

const struct hy_force_cfg *hy_force_config(const struct hy_force *f) { return &f->cfg; }
struct hy_cl *hy_force_cl(const struct hy_force *f) { return f->cl; }
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
};

static void sink_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct sink_job *j = arg;
  for (size_t i = b; i < e; i++) {
    for (int d = 0; d < 3; d++) j->sink[4 * i + d] = (float)(j->pos[3 * i + d] - j->centre[d]);
    j->sink[4 * i + 3] = 0.0f;
  }
}

static int walk_job_run(void *arg);
static int wait_job(struct hy_force *f, struct walk_job *j, struct hy_err *err);
static int remote_tree(struct hy_force *f, const struct hy_part *p, int mode, int selected, struct hy_err *err);
static int remote_build_side(struct hy_force *f, struct hy_err *err);
static void second_tree_job(struct hy_force *f, struct walk_job *j, const struct hy_walk_cfg *wc, size_t n_sink,
                            uint64_t sink_id, long self_base, float *out0, float *out1);
static int tree_to_host(struct hy_force *f, size_t n, struct hy_err *err);

static int pot_invalid(int mode, int want_pot) { return want_pot && mode == HY_WALK_HARD; }

/* ------------------------------------------------------ device build */

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
static void pack_run(struct hy_force *f, const struct hy_part *p, const double origin[3], float *out, float *grp,
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
static int key_cube(size_t n, const double red[6], const double origin[3], const double *sample, size_t s,
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

/* The key cube of a local build. One rank: key_cube. Several: one
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
static int cube_for(struct hy_force *f, size_t n, const double red[6], const double origin[3], const double *sample,
                    size_t s, double centre[3], double *half, struct hy_err *err) {
  if (!f->let) return key_cube(n, red, origin, sample, s, centre, half);
  double lo[3], hi[3];
  for (int d = 0; d < 3; d++) {
    lo[d] = red[d] + origin[d];
    hi[d] = red[3 + d] + origin[d];
  }
  const int shrunk = hy_let_key_cube(f->let, n, lo, hi, sample, s, centre, half, err);
  return keep_cube(f, shrunk, centre, half);
}

/* cube_for of p's positions on the host (host builds, ranks without a build) */
static int host_cube(struct hy_force *f, const struct hy_part *p, double centre[3], double *half,
                     struct hy_err *err) {
  const int shrunk = hy_let_key_cube_of(f->let, &f->tree, p, f->pool, centre, half, err);
  return keep_cube(f, shrunk, centre, half);
}

int hy_force_join_cube(struct hy_force *f, const struct hy_part *p, struct hy_err *err) {
  double centre[3], half;
  return f->let && host_cube(f, p, centre, &half, err) < 0 ? -1 : 0;
}

/* Distributed runs: the tight box of the local particles from a pack's
 * reductions (red = lo[3], hi[3] relative to f->origin), which spares the
 * host a pass over the positions; widened by a few rounding units of x - o + o
 * so that it holds every particle. */
static void box_from_pack(struct hy_force *f, const double red[6]) {
  for (int d = 0; d < 3; d++) {
    const double o = f->origin[d], lo = red[d] + o, hi = red[3 + d] + o;
    f->box.lo[d] = lo - 4.0 * DBL_EPSILON * (fabs(lo) + fabs(o));
    f->box.hi[d] = hi + 4.0 * DBL_EPSILON * (fabs(hi) + fabs(o));
  }
  f->box_ok = 1;
}

/* A device build of n positions (pos4, grp as hy_cl_build_args) packed
 * relative to `frame`, in the key cube (centre, half). */
static struct hy_cl_build_args build_args(const struct hy_force *f, const double frame[3], const float *pos4,
                                          const float *grp, size_t n, const double centre[3], double half,
                                          uint64_t id, int slot) {
  return (struct hy_cl_build_args){.pos = pos4,
                                   .grp = grp,
                                   .n = n,
                                   .lo = {centre[0] - half - frame[0], centre[1] - half - frame[1],
                                          centre[2] - half - frame[2]},
                                   .side = 2.0 * half,
                                   .n_crit = f->cfg.n_crit,
                                   .a_err = f->cfg.a_err / f->cfg.G, /* the MAC radii are for G = 1 sums */
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
static void take_build(struct hy_force *f, const struct hy_cl_build_result *res, int lane,
                       const char *const names[4], double t_end) {
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
static void key_cube_args(const double centre[3], double half, double lo[3], double *scale) {
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
 * ranks, all of whose trees share one key cube, cube_for). */
static int build_packed(struct hy_force *f, int slot, size_t n, size_t n_local, const float *pos4, const float *grp,
                        const double centre[3], double half, double t_host, const uint64_t *keys,
                        size_t presorted, struct hy_err *err) {
  double t1 = hy_wtime();
  const uint64_t id = atomic_fetch_add(&tree_serial, 1);
  if (slot == 0)
    f->tree_id = id;
  else
    f->m_tree_id = id;
  struct hy_cl_build_args a = build_args(f, f->origin, pos4, grp, n, centre, half, id, slot);
  a.keep_keys = slot == 0 && f->let != NULL;
  /* distributed: the local tree's keys from the double positions, in the
   * whole set's cube, whatever the frame (the state's, or the host's keys) */
  if (slot == 0 && f->let) {
    if (pos4 && !keys) return hy_err_set(err, "internal error: a distributed local build without its keys");
    key_cube_args(centre, half, a.key_lo, &a.key_scale);
    a.state_keys = pos4 == NULL;
    a.keys = keys;
    a.presorted = presorted;
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
  take_build(f, &res, HY_TRACE_DEVICE, slot ? b1 : b0, t2);
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
  struct hkey_job j = {.pos = p->pos, .centre = centre, .half = half, .key = f->hkeys, .idx = (uint32_t *)(f->hkeys + n)};
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
    pack_run(f, p, f->origin, pos4, NULL, red, &bad);
    if (pass == 1) break;
    /* escapers shrank the key cube: pack again relative to the bulk's centre */
    const int shrunk = cube_for(f, n, red, f->origin, sample, s, centre, &half, err);
    if (shrunk < 0) return -1;
    if (!shrunk) break;
    memcpy(f->origin, centre, sizeof f->origin);
  }
  f->packed_n = n;
  memcpy(f->packed_red, red, sizeof f->packed_red);
  if (f->first_bad == UINT64_MAX) f->first_bad = bad;
  box_from_pack(f, red);
  const uint64_t *keys = f->let ? host_keys(f, p, centre, half) : NULL;
  if (build_packed(f, 0, n, 0, pos4, NULL, centre, half, hy_wtime() - t0, keys, 0, err) != 0) return -1;
  return f->let ? tree_to_host(f, n, err) : 0;
}

/* Distributed walks that take the merged tree of local particles and LET
 * items (all but the hard walks; hy_force_set_comm). */
static int walk_merged(const struct hy_force *f, int mode) {
  return f->let && (f->merged == HY_LET_MERGED || (f->merged == HY_LET_AUTO && mode != HY_WALK_HARD));
}

/* The walk parameters of the force's configuration. */
static struct hy_walk_cfg walk_cfg(const struct hy_force *f, int mode, int want_pot) {
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
static void resident_walk_job(struct hy_force *f, struct walk_job *j, const struct hy_walk_cfg *wc, int slot) {
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
static void restore_frame(struct hy_force *f, const double frame[3]) {
  memcpy(f->frame, frame, 3 * sizeof(double));
  memcpy(f->origin, frame, 3 * sizeof(double));
}

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
  double *st = hy_cl_host_buffer(f->cl, HY_CL_HOST_XYZ, hy_size_mul_or_die(n, 10 * sizeof(double), "particle state"),
                                 err);
  if (!st) return -1;
  double *pos = st, *vel = st + 3 * n, *mass = st + 6 * n, *accw = st + 7 * n;
  struct stage_job j = {0};
  stage_add(&j, pos, p->pos, 3);
  stage_add(&j, vel, p->vel, 3);
  stage_add(&j, mass, p->mass, 1);
  if (with_accw) stage_add(&j, accw, p->acc_w, 3);
  hy_pool_for(f->pool, n, 65536, stage_body, &j);
  int rc = hy_cl_state_upload(f->cl, pos, vel, mass, with_accw ? accw : NULL, n, err);
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
  double *st = hy_cl_host_buffer(f->cl, HY_CL_HOST_XYZ, hy_size_mul_or_die(nt + 1, 7 * sizeof(double), "particle state"),
                                 err);
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
  return state_get(f, p->n, p->pos, p->vel, p->acc_w, with_acc ? p->acc : NULL, with_pot ? p->pot : NULL, err);
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

void hy_force_set_overlap(struct hy_force *f, hy_force_overlap_fn fn, void *ctx) {
  f->ov = fn;
  f->ov_ctx = ctx;
}

void hy_force_set_let_open(struct hy_force *f, double factor) {
  if (f->let) hy_let_set_full_open(f->let, factor);
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
  key_cube_args(f->pre_c, f->pre_h, lo, &scale);
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
    shrunk = cube_for(f, p->n, red, zero, sample, s, centre, &half, err);
  } else {
    shrunk = host_cube(f, p, centre, &half, err);
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

int hy_force_state_finite(struct hy_force *f, size_t *n_bad, struct hy_err *err) {
  long first;
  return hy_cl_state_finite(f->cl, 0, n_bad, &first, err);
}

/* Distributed runs, the device state's tree just built: this
 * walk's tight boxes exchanged (the pack's reductions give this rank's) and
 * its LET items selected on the device (hy_cl_let_select: the items, in the
 * order, of the host's selection walks), for exchange_let. */
static int state_select(struct hy_force *f, int mode, int async, struct hy_err *err) {
  struct hy_let_stats ls = {0};
  int rc = hy_let_boxes(f->let, NULL, &f->box, f->frame, &ls, err);
  f->st.let_boxes += ls.t_boxes;
  if (rc != 0) return -1;
  const double t0 = hy_wtime();
  const int P = f->nranks, hard = mode == HY_WALK_HARD;
  int me = 0;
  if (hy_mpi_check(MPI_Comm_rank(f->comm, &me), "MPI_Comm_rank", err)) return -1;
  double *boxes = hy_malloc("LET boxes", (size_t)P, 6 * sizeof(double));
  double *frames = hy_malloc("LET frames", (size_t)P, 3 * sizeof(double));
  int *rank = hy_malloc("LET destinations", (size_t)P, sizeof(int));
  size_t *count = hy_malloc("LET counts", (size_t)P, sizeof(size_t));
  uint64_t *hcount = hy_malloc("LET counts", (size_t)P, sizeof(uint64_t));
  size_t nb = 0;
  for (int r = 0; r < P; r++) {
    const struct hy_box *B = hy_let_box(f->let, r);
    if (r == me || !(B->lo[0] <= B->hi[0])) continue; /* nothing to send to an empty rank */
    memcpy(boxes + 6 * nb, B->lo, 3 * sizeof(double));
    memcpy(boxes + 6 * nb + 3, B->hi, 3 * sizeof(double));
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

static int exchange_let(struct hy_force *f, const struct hy_part *p, int mode, int selected, struct hy_let_floats *fl,
                        struct hy_err *err);

/* The merged tree's frame and key cube, alike for both particle-state
 * paths (their merged trees must be the same): the m LET items packed
 * relative to f->origin, the local build's frame, into items (and their
 * B2, b_max into grp), in the key cube of the whole set that the local
 * build took (cube_for; when escapers shrank it, the frame is its centre
 * already). */
static void merged_cube(struct hy_force *f, float *items, float *grp, double centre[3], double *half) {
  double mred[10];
  uint64_t bad = UINT64_MAX; /* the items were checked where they came from */
  if (f->remote.n) pack_run(f, &f->remote, f->origin, items, grp, mred, &bad);
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
   * frame, as merged_cube packs them on the host's path */
  struct hy_let_floats fl = {.origin = f->origin, .alloc = items_room, .ready = items_ready, .ctx = f};
  if (exchange_let(f, p, mode, 1, &fl, err) != 0) return -1;
  double t0 = hy_wtime();
  const size_t n = p->n, m = fl.n, nm = n + m;
  double frame[3];
  memcpy(frame, f->frame, sizeof frame);
  const double *centre = f->cube_c, half = f->cube_h; /* merged_cube's */
  double tu = 0.0;
  const double ta = hy_trace_t();
  if (hy_cl_state_append_end(f->cl, m, &tu, err) != 0) return -1; /* uploads queued run by run (items_ready) */
  hy_trace(HY_TRACE_MAIN, "append_items", ta);
  f->st.upload += tu;
  int rc = build_packed(f, 1, nm, n, NULL, NULL, centre, half, hy_wtime() - t0 - tu, NULL, 0, err);
  struct walk_job *j = &f->job[0];
  if (rc == 0) {
    const struct hy_walk_cfg wc = walk_cfg(f, mode, want_pot);
    resident_walk_job(f, j, &wc, 1);
    hy_worker_submit(f->worker, walk_job_run, j);
    rc = wait_job(f, j, err);
    f->st.device_busy += hy_worker_take_busy(f->worker);
  }
  restore_frame(f, frame);
  if (rc != 0) return -1;
  double tk2 = 0.0;
  if (hy_cl_state_unpack(f->cl, f->cfg.G, (double)f->cfg.n_ratio, mode == HY_WALK_SPLIT, want_pot, &tk2, err) != 0)
    return -1;
  f->st.kernel += tk2;
  return 0;
}

int hy_force_state_force(struct hy_force *f, const struct hy_part *p, int mode, int want_pot, struct hy_err *err) {
  if (pot_invalid(mode, want_pot)) return hy_err_set(err, "internal error: potential requested from a hard walk");
  const int merged = walk_merged(f, mode);
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
  const int shrunk = cube_for(f, p->n, red, zero, sample, s, centre, &half, err);
  if (shrunk < 0) return -1;
  if (shrunk) memcpy(f->origin, centre, sizeof f->origin);
  if (hy_cl_state_pack(f->cl, f->origin, red, 0, NULL, &tk, err) != 0) return -1;
  hy_trace(HY_TRACE_MAIN, "pack", tp);
  if (red[10] >= 0.0 && f->first_bad == UINT64_MAX) f->first_bad = p->id[(size_t)red[10]];
  box_from_pack(f, red);
  /* the kept particles' keys sorted in the decomposition (dd_kept), when
   * they were made in this cube: the set's range is the same before and
   * after it, but the bulk's box that may shrink the cube is not */
  size_t pre = 0;
  if (f->pre_n > 0 && f->pre_n <= p->n && f->pre_h == half && memcmp(f->pre_c, centre, sizeof centre) == 0)
    pre = f->pre_n;
  f->pre_n = 0;
  if (build_packed(f, 0, p->n, 0, NULL, NULL, centre, half, hy_wtime() - t0, NULL, pre, err) != 0) return -1;
  f->packed_n = 0; /* nothing of this build is in the host's staging buffer */
  if (mode < 0) return 0; /* the tree only */
  double t1 = hy_wtime();
  if (merged) {
    if (state_select(f, mode, 0, err) != 0 || state_merged_walk(f, p, mode, want_pot, err) != 0) return -1;
    f->st.n_walks++;
    f->st.walk_wall += hy_wtime() - t1;
    return 0;
  }
  /* the items' read beside the local walk (hy_cl_let_wait in exchange_let) */
  if (f->let && state_select(f, mode, 1, err) != 0) return -1;
  /* distributed: the caller's work in the waits (hy_force_set_overlap),
   * first what the device must do ahead of the walk */
  const hy_force_overlap_fn ov = f->let ? f->ov : NULL;
  if (ov && ov(f->ov_ctx, 0, err) != 0) return -1;
  struct walk_job *lj = &f->job[0];
  const struct hy_walk_cfg wc = walk_cfg(f, mode, want_pot);
  resident_walk_job(f, lj, &wc, 0);
  hy_worker_submit(f->worker, walk_job_run, lj);
  /* the LET exchange and the remote items packed while the device walks */
  int rc = f->let ? remote_tree(f, p, mode, 1, err) : 0;
  if (rc == 0 && ov) rc = ov(f->ov_ctx, 1, err);
  /* after the caller's host work: the build holds this thread until its
   * last kernel, which may wait for the local walk's end */
  if (rc == 0) rc = remote_build_side(f, err);
  if (wait_job(f, lj, rc == 0 ? err : &lj->err) != 0) rc = -1;
  if (rc == 0 && ov) rc = ov(f->ov_ctx, 2, err);
  if (rc == 0 && f->let && f->n_items > 0) { /* its results added to the local walk's, on the device */
    struct walk_job *rj = &f->job[1];
    second_tree_job(f, rj, &lj->wc, p->n, 0, -1, NULL, NULL);
    rj->a.sinks_resident = 1;
    rj->a.add_unsorted = 1;
    hy_worker_submit(f->worker, walk_job_run, rj);
    if (ov) rc = ov(f->ov_ctx, 3, err);
    if (wait_job(f, rj, rc == 0 ? err : &rj->err) != 0) rc = -1;
  } else if (rc == 0 && ov) {
    rc = ov(f->ov_ctx, 3, err);
  }
  f->st.device_busy += hy_worker_take_busy(f->worker);
  if (rc != 0) return -1;
  double tu = 0.0;
  const double tq = hy_trace_t();
  if (hy_cl_state_unpack(f->cl, f->cfg.G, (double)f->cfg.n_ratio, mode == HY_WALK_SPLIT, want_pot, &tu, err) != 0)
    return -1;
  hy_trace(HY_TRACE_MAIN, "unpack", tq);
  f->st.kernel += tu;
  f->st.n_walks++;
  f->st.walk_wall += hy_wtime() - t1;
  return 0;
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
    f->tree_id = atomic_fetch_add(&tree_serial, 1);
    f->have_tree = 1;
    return 0;
  }
  double t0 = hy_wtime();
  if (f->let && (shrunk = host_cube(f, p, centre, &half, err)) < 0) return -1; /* the whole set's (cube_for) */
  hy_tree_sort_in(&f->tree, p, f->pool, f->let ? centre : NULL, half, shrunk);
  if (f->first_bad == UINT64_MAX) f->first_bad = f->tree.nonfinite_id; /* the key pass checks positions */
  double t1 = hy_wtime();
  /* the tree's MAC radii are computed for G = 1 sums: a_err / G */
  if (hy_tree_build(&f->tree, p, f->cfg.n_crit, f->cfg.a_err / f->cfg.G, f->pool, err) != 0) return -1;
  double t2 = hy_wtime();
  size_t nn = hy_tree_n_nodes(&f->tree);
  if (nn > f->node_cap) {
    size_t cap = nn + nn / 8 + 16;
    hy_free(f->node);
    f->node = hy_malloc("tree node records", hy_size_mul_or_die(cap, 8, "tree node records"), sizeof(float));
    f->node_cap = cap;
  }
  /* the records' frame: the centre of mass, or the bulk's centre when
   * escapers shrank the key cube (see device_build) */
  const struct hy_tree *t = &f->tree;
  const double *cm = t->n_cell ? t->cm + 3 * (size_t)(t->root - (int32_t)t->n_part) : p->pos;
  for (int d = 0; d < 3; d++) f->frame[d] = isfinite(cm[d]) && !t->shrunk ? cm[d] : t->centre[d];
  hy_tree_export_at(&f->tree, p, f->frame, f->node, f->pool);
  ensure_sinks(f, p->n);
  f->sinks_packed = 0; /* packed on demand: the local walk reads them from the node records */
  double t3 = hy_wtime();
  f->tree_id = atomic_fetch_add(&tree_serial, 1);
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
static void unpack_results(struct hy_force *f, size_t n, int split, const float *o0, const float *o1, const float *r0,
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
static void pack_sinks(struct hy_force *f, const struct hy_part *p) {
  if (f->sinks_packed) return;
  struct sink_job sj = {.pos = p->pos, .centre = f->frame, .sink = f->sink};
  hy_pool_for(f->pool, p->n, 4096, sink_body, &sj);
  f->sinks_packed = 1;
}

static int walk_job_run(void *arg) {
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
static int wait_job(struct hy_force *f, struct walk_job *j, struct hy_err *err) {
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

/* Exchange the LET for this walk into f->remote; selected: the items were
 * selected already (state_select), else the tight boxes are exchanged and
 * the host walks the local tree for them. Returns 0 or -1. */
static int exchange_let(struct hy_force *f, const struct hy_part *p, int mode, int selected, struct hy_let_floats *fl,
                        struct hy_err *err) {
  struct hy_let_stats ls = {0};
  f->rdev = 0; /* until remote_tree has the remote tree built on the device */
  f->pnode = NULL;
  f->n_items = 0;
  const int hard = mode == HY_WALK_HARD;
  if (selected && hy_cl_let_wait(f->cl, err) != 0) return -1; /* the device selection's items are read */
  int rc = selected ? 0 : hy_let_boxes(f->let, p, f->box_ok ? &f->box : NULL, f->frame, &ls, err);
  if (rc == 0) {
    if (!selected) hy_let_select(f->let, p->n ? &f->tree : NULL, p, hard, f->cfg.r2, !hard, &ls);
    if (fl) {
      rc = hy_let_exchange_floats(f->let, fl, &ls, err);
      hy_part_resize(&f->remote, 0); /* the items are in fl's floats only */
    } else {
      rc = hy_let_exchange(f->let, &f->remote, &ls, err);
    }
  }
  f->st.let_boxes += ls.t_boxes;
  f->st.let_select += ls.t_select;
  f->st.let_comm += ls.t_comm;
  f->st.let_recv += ls.n_recv;
  f->st.let_recv_hard += ls.n_recv_hard;
  f->st.let_sent += ls.n_sent;
  f->st.let_bytes_sent += ls.bytes_sent;
  f->st.let_bytes_recv += ls.bytes_recv;
  if (rc != 0) return -1;
  f->n_items = fl ? fl->n : f->remote.n;
  f->last_hard = hard ? ls.n_recv : ls.n_recv_hard;
  return 0;
}

/* Build the tree of set q (the LET items, or local particles + items) as
 * f->rtree with its records in the local tree's frame; whole: in the key
 * cube of the whole set (cube_for), as the merged tree is built. */
static int build_second_tree(struct hy_force *f, struct hy_part *q, int whole, struct hy_err *err) {
  double t0 = hy_wtime();
  hy_tree_sort_in(&f->rtree, q, f->pool, whole ? f->cube_c : NULL, f->cube_h, f->cube_shrunk);
  if (hy_tree_build(&f->rtree, q, f->cfg.n_crit, f->cfg.a_err / f->cfg.G, f->pool, err) != 0) return -1;
  size_t nn = hy_tree_n_nodes(&f->rtree);
  if (nn > f->rnode_cap) {
    size_t cap = nn + nn / 8 + 16;
    hy_free(f->rnode);
    f->rnode = hy_malloc("remote tree records", hy_size_mul_or_die(cap, 8, "remote tree records"), sizeof(float));
    f->rnode_cap = cap;
  }
  hy_tree_export_at(&f->rtree, q, f->frame, f->rnode, f->pool);
  f->st.remote_build += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "remote_build", t0);
  return 0;
}

/* The box of the received items' packed positions (red: lo[3], hi[3] of a
 * pack_run): rounding to float is monotonic, so (float)lo is at most every
 * item's packed coordinate and (float)hi at least. */
static void set_rbox(struct hy_force *f, const double red[6]) {
  f->rbox_ok = red[0] <= red[3] && red[1] <= red[4] && red[2] <= red[5];
  for (int k = 0; k < 6; k++) f->rbox[k] = (float)red[k];
}

/* With a device-built local tree the remote tree is built on the device as
 * well: here the key cube of its m items (packed in the local records' frame
 * with their B2 and b_max: pos4, grp in the pinned HY_CL_HOST_ITEMS buffer;
 * red: lo[3], hi[3] of their positions relative to that frame; sample:
 * hy_tree_sample of the items' positions) is chosen as for a local build;
 * then remote_build_side builds it on the engine's second queue while the
 * device thread's local walk runs on the first (hy_cl_tree_build_side: slot
 * 1 and the build's buffers, none of the walk's), so that the remote walk
 * can start right after the local one (before, the device thread built it
 * then: 2.2-2.7 ms per hard step at 2^26 on two or four GPUs, in the
 * critical path). */
static void remote_device_args(struct hy_force *f, int mode, const float *pos4, const float *grp, size_t m,
                               const double red[6], const double *sample, size_t s) {
  double centre[3], half;
  key_cube(m, red, f->frame, sample, s, centre, &half);
  /* a hard walk takes every item as a point (its cut-off is R2 from the
   * item's position) and opens every cell: the cells' b_max need bound only
   * the items' positions, as remote_points' do, not the extents of the
   * cells among the items, which made them wider (and cost an upload) */
  const int hard = mode == HY_WALK_HARD;
  f->rbuild = build_args(f, f->frame, pos4, hard ? NULL : grp, m, centre, half, atomic_fetch_add(&tree_serial, 1), 1);
  f->rbuild.open_all = hard; /* every cell opened, as in remote_points */
  set_rbox(f, red);
  f->rdev = 1; /* to be built by remote_build_side */
}

/* remote_device_args of the items in f->remote (soft walks with HY_LET_SEPARATE),
 * packed here. */
static int remote_device_pack(struct hy_force *f, int mode, struct hy_err *err) {
  double t0 = hy_wtime();
  const size_t m = f->remote.n;
  float *buf = hy_cl_host_buffer(f->cl, HY_CL_HOST_ITEMS, hy_size_mul_or_die(m, 24, "LET items"), err);
  if (!buf) return -1;
  float *pos4 = buf, *grp = buf + 4 * m;
  double red[10], sample[3 * HY_TREE_SAMPLE];
  uint64_t bad = UINT64_MAX; /* items are checked where they are sent from */
  pack_run(f, &f->remote, f->frame, pos4, grp, red, &bad);
  const size_t s = hy_tree_sample(f->remote.pos, m, sample);
  remote_device_args(f, mode, pos4, grp, m, red, sample, s);
  f->st.remote_build += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "remote_pack", t0);
  return 0;
}

/* The remote tree that remote_device_args packed (if any, and not built
 * yet), built on the engine's second queue (hy_cl_tree_build_side) beside
 * the device thread's local walk. */
static int remote_build_side(struct hy_force *f, struct hy_err *err) {
  if (f->rdev != 1) return 0;
  const double tb = hy_wtime();
  if (hy_cl_tree_build_side(f->cl, &f->rbuild, &f->rbres, err) != 0) return -1;
  f->rdev = 2;
  const double te = hy_wtime();
  f->st.remote_build += te - tb;
  hy_trace(HY_TRACE_MAIN, "remote_build_side", tb);
  /* its parts on the main lane: the device lane holds the local walk */
  static const char *const nm[] = {"rb_upload", "rb_sort", "rb_cells", "rb_moments"};
  take_build(f, &f->rbres, HY_TRACE_MAIN, nm, te);
  return 0;
}

/* A hard walk's remote tree: every cell of it is opened, since its leaves,
 * the hard-LET items, were accepted by the sender's MAC against this rank's
 * whole box, so each is already as coarse as any of its sinks may take it,
 * and accepting groups of them as well would approximate a second time (the
 * 99th percentile of the galaxy's hard force on 4 ranks rose above 1.2
 * times that of one rank). The cut-off at R2 + b_max still skips every cell
 * out of reach, so a sink meets only the items within R2 of it. Such a tree
 * needs no moments beyond centres, masses and b_max: the host's threads
 * build it (hy_tree_point_records) while the device walks the local tree,
 * in the pinned buffer that the remote walk uploads, where a device build
 * of its ~100 small kernels would follow the local walk. */
static int remote_points(struct hy_force *f, const float *pos4, size_t m, const double red[6], struct hy_err *err) {
  double t0 = hy_wtime();
  float *node = hy_cl_host_buffer(f->cl, HY_CL_HOST_RTREE, hy_size_mul_or_die(m, 64, "remote tree records"), err);
  if (!node) return -1;
  set_rbox(f, red);
  f->p_cells = hy_tree_point_records(&f->rtree, pos4, m, f->rbox, f->cfg.n_crit, node, f->pool);
  f->pnode = node;
  f->st.remote_build += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "remote_build", t0);
  return 0;
}

/* Room for the m items of a hard walk's exchange (hy_let_floats.alloc): in
 * the pinned buffer that the remote build or walk uploads, positions and
 * masses (4 floats each), then their B2 and b_max (2 each). */
static float *hard_items_room(void *ctx, size_t m, float **grp, struct hy_err *err) {
  struct hy_force *f = ctx;
  const size_t k = m ? m : 1;
  float *buf = hy_cl_host_buffer(f->cl, HY_CL_HOST_ITEMS, hy_size_mul_or_die(k, 24, "LET items"), err);
  *grp = buf ? buf + 4 * k : NULL;
  return buf;
}

static float int_bits(int32_t v) {
  float x;
  memcpy(&x, &v, sizeof x);
  return x;
}

/* A hard walk's exchange, its items straight into the floats of the remote
 * tree (relative to the local records' frame, as packing the received
 * particles would make them, with their range and sample from the same
 * pass), and its remote tree: of points (remote_points), or on the device
 * (remote_device_args). */
static int remote_hard(struct hy_force *f, const struct hy_part *p, int selected, struct hy_err *err) {
  double range[6], sample[3 * HY_TREE_SAMPLE];
  struct hy_let_floats fl = {.origin = f->frame, .alloc = hard_items_room, .ctx = f, .range = range, .sample = sample};
  if (exchange_let(f, p, HY_WALK_HARD, selected, &fl, err) != 0) return -1;
  const size_t m = fl.n;
  if (m == 0 || p->n == 0) return 0;
  if (f->dev_build && m >= 2 && f->cfg.hard_remote == HY_TREE_BUILD_DEVICE) {
    remote_device_args(f, HY_WALK_HARD, fl.pos4, fl.grp, m, range, sample, fl.n_sample);
    return 0;
  }
  return remote_points(f, fl.pos4, m, range, err);
}

/* Exchange the LET and build the remote tree of the received items: for a
 * hard walk a tree of points (remote_points), else an octree with the
 * moments of the MAC; with a device-built local tree, on the device (a
 * hard walk's too where the local tree is built on the device: every
 * cell opened). */
static int remote_tree(struct hy_force *f, const struct hy_part *p, int mode, int selected, struct hy_err *err) {
  if (mode == HY_WALK_HARD) return remote_hard(f, p, selected, err);
  if (exchange_let(f, p, mode, selected, NULL, err) != 0) return -1;
  if (f->remote.n == 0 || p->n == 0) return 0;
  if (f->dev_build && f->remote.n >= 2) return remote_device_pack(f, mode, err);
  return build_second_tree(f, &f->remote, 0, err);
}

/* Walk job for the tree in f->rnode (remote items, or local particles and
 * items when merged) with the local sinks. */
static void second_tree_job(struct hy_force *f, struct walk_job *j, const struct hy_walk_cfg *wc, size_t n_sink,
                            uint64_t sink_id, long self_base, float *out0, float *out1) {
  j->cl = f->cl;
  j->wc = *wc;
  j->fetch = 0;
  j->what = "walk_remote";
  j->a = (struct hy_cl_walk_args){.slot = 1,
                                  .sink = f->sink,
                                  .n_sink = n_sink,
                                  .sink_id = sink_id,
                                  .self_base = self_base,
                                  .out0 = out0,
                                  .out1 = out1,
                                  /* hard walks: the remote tree's cells are all opened (remote_points) */
                                  .skip_far = wc->mode == HY_WALK_HARD && self_base == HY_NONE};
  if (f->rdev || f->pnode) {
    j->a.has_box = f->rbox_ok;
    memcpy(j->a.box, f->rbox, sizeof j->a.box);
  }
  if (f->rdev == 2) { /* built on the device (remote_build_side), resident in slot 1 */
    j->a.tree_id = f->rbuild.tree_id;
    j->a.n_part = f->rbuild.n;
    j->a.n_nodes = f->rbuild.n + f->rbres.n_cell;
    j->a.root = f->rbres.root;
  } else if (f->pnode) { /* a tree of points, uploaded with the walk */
    j->a.node = f->pnode;
    j->a.n_nodes = f->n_items + f->p_cells;
    j->a.n_part = f->n_items;
    j->a.root = (int32_t)f->n_items;
  } else {
    j->a.node = f->rnode;
    j->a.n_nodes = hy_tree_n_nodes(&f->rtree);
    j->a.n_part = f->rtree.n_part;
    j->a.root = f->rtree.root;
  }
}

/* Merged walk: exchange the LET, build one tree of the local particles and
 * the received items (as Watanabe & Nakasato describe: "concatenates the
 * arrays of own particles and the cells received"), walk it with the local
 * sinks, each skipping its own node. Far regions are then summarised by
 * cells that hold both local and remote mass, as on one rank; the price is
 * that the walk cannot start before the exchange is done. */
/* The local particles followed by the received LET items, with the items'
 * group moments, IDs = indices (merged walks). */
struct merged_job {
  const struct hy_part *p;     /* local particles: nodes [0, n) */
  const struct hy_part *items; /* LET items: nodes [n, n + m) */
  struct hy_part *q;
};

static void merged_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct merged_job *j = arg;
  struct hy_part *q = j->q;
  const size_t n = j->p->n;
  for (size_t i = b; i < e; i++) {
    const struct hy_part *src = i < n ? j->p : j->items;
    const size_t k = i < n ? i : i - n;
    memcpy(q->pos + 3 * i, src->pos + 3 * k, 3 * sizeof(double));
    q->mass[i] = src->mass[k];
    q->grp[2 * i] = i < n ? 0.0 : src->grp[2 * k];
    q->grp[2 * i + 1] = i < n ? 0.0 : src->grp[2 * k + 1];
    q->id[i] = i;
  }
}

/* The soft step's merged set: the local particles, then the LET items (with
 * their B2 and b_max), copied on the pool's threads; room for 1/16 more, so
 * that the item count's changes do not reallocate at every soft step. */
static struct hy_part *merged_set(struct hy_force *f, const struct hy_part *p) {
  const size_t n = p->n, m = f->remote.n, nm = n + m;
  struct hy_part *q = &f->comb;
  hy_part_use_groups(q);
  if (nm > q->n_alloc) hy_part_reserve(q, nm + nm / 16);
  q->n = nm;
  struct merged_job j = {.p = p, .items = &f->remote, .q = q};
  hy_pool_for(f->pool, nm, 16384, merged_body, &j);
  return q;
}

static void zero_floats_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  float *x = arg;
  memset(x + b, 0, (e - b) * sizeof(float));
}

/* The soft step's merged tree (local particles, then the LET items) on the
 * device, in the second tree slot, packed in the local build's frame as
 * the device state's merged walk packs it (state_merged_walk): the same
 * floats and the same key cube, so the same tree. The local build of this
 * step left the local particles packed in the staging buffer, which is
 * reused where it has room for the items too; else they are packed again
 * (the same values). The key cube is the whole set's, that of the local
 * build (cube_for). */
static int merged_build(struct hy_force *f, const struct hy_part *p, struct hy_err *err) {
  const size_t n = p->n, m = f->remote.n, nm = n + m;
  double t0 = hy_wtime();
  const size_t need = hy_size_mul_or_die(nm, 16, "packed positions");
  const int have_local = f->packed_n == n && hy_cl_host_buffer_size(f->cl, HY_CL_HOST_POS) >= need;
  float *pos4 = hy_cl_host_buffer(f->cl, HY_CL_HOST_POS, need, err);
  float *grp = pos4 ? hy_cl_host_buffer(f->cl, HY_CL_HOST_GRP, hy_size_mul_or_die(nm, 8, "item moments"), err) : NULL;
  if (!grp) return -1;
  f->packed_n = 0; /* the staging buffer holds the merged set from here on */
  hy_pool_for(f->pool, 2 * n, 65536, zero_floats_body, grp); /* local particles: no B2, no b_max */
  if (!have_local) { /* the local particles packed again (the same values) */
    double lred[11];
    uint64_t bad = UINT64_MAX; /* checked at the local build */
    pack_run(f, p, f->origin, pos4, NULL, lred, &bad);
  }
  double centre[3], half;
  merged_cube(f, pos4 + 4 * n, grp + 2 * n, centre, &half);
  return build_packed(f, 1, nm, n, pos4, grp, centre, half, hy_wtime() - t0, NULL, 0, err);
}

/* Walk job for the tree a device build left in `slot`, its n particles as
 * sinks, the results back in the order of the particle set it was built
 * from (in the engine's staging memory: *out0, *out1). */
static int device_tree_job(struct hy_force *f, struct walk_job *j, const struct hy_walk_cfg *wc, int slot, size_t n,
                           float **out0, float **out1, struct hy_err *err) {
  size_t bytes = hy_size_mul_or_die(n, 16, "walk results");
  *out0 = f->dout0 = hy_cl_host_buffer(f->cl, HY_CL_HOST_OUT0, bytes, err);
  if (!*out0) return -1;
  if (wc->mode == HY_WALK_SPLIT) {
    *out1 = f->dout1 = hy_cl_host_buffer(f->cl, HY_CL_HOST_OUT1, bytes, err);
    if (!*out1) return -1;
  }
  resident_walk_job(f, j, wc, slot);
  j->a.out0 = *out0;
  j->a.out1 = *out1;
  return 0;
}

/* Merged walk with the local tree built on the device: the tree of local
 * particles and LET items is built on the device as well, in the second
 * tree slot (the items' B2 and b_max enter the cell moments), its local
 * particles are the sinks (hy_cl_build_result.local_sinks; else all its
 * particles, the items' results dropped), each skipping its own node. The
 * local tree stays on the device for the hard steps. */
static int merged_walk_device(struct hy_force *f, const struct hy_part *p, const struct hy_walk_cfg *wc,
                              double *acc0, double *acc1, double *pot, struct hy_err *err) {
  const size_t n = p->n;
  double frame[3];
  memcpy(frame, f->frame, sizeof frame);
  int rc = merged_build(f, p, err);
  float *out0 = NULL, *out1 = NULL;
  struct walk_job *j = &f->job[0];
  if (rc == 0) rc = device_tree_job(f, j, wc, 1, f->m_local_sinks ? n : n + f->remote.n, &out0, &out1, err);
  if (rc == 0) {
    hy_worker_submit(f->worker, walk_job_run, j);
    rc = wait_job(f, j, err);
    f->st.device_busy += hy_worker_take_busy(f->worker);
  }
  restore_frame(f, frame);
  if (rc != 0) return -1;
  unpack_results(f, n, wc->mode == HY_WALK_SPLIT, out0, out1, NULL, NULL, acc0, acc1, pot);
  return 0;
}

static int merged_walk(struct hy_force *f, const struct hy_part *p, const struct hy_walk_cfg *wc, double *acc0,
                       double *acc1, double *pot, struct hy_err *err) {
  if (exchange_let(f, p, wc->mode, 0, NULL, err) != 0) return -1;
  const size_t n = p->n, m = f->remote.n;
  if (n == 0) return 0;
  if (f->dev_build) return merged_walk_device(f, p, wc, acc0, acc1, pot, err);
  struct hy_part *q = merged_set(f, p);
  if (build_second_tree(f, q, 1, err) != 0) return -1;
  if (f->self_cap < n) {
    hy_free(f->self_node);
    f->self_node = hy_malloc("merged-tree self nodes", n, sizeof(int32_t));
    f->self_cap = n;
  }
  for (size_t j = 0; j < n + m; j++)
    if (q->id[j] < n) f->self_node[q->id[j]] = (int32_t)j;
  pack_sinks(f, p);
  f->sinks_packed = 0; /* the 4th words are self nodes now; repacked before other use */
  for (size_t i = 0; i < n; i++) f->sink[4 * i + 3] = int_bits(f->self_node[i]);
  struct walk_job *j = &f->job[1];
  second_tree_job(f, j, wc, n, 0, HY_SELF_IN_SINK, f->out0, f->out1);
  hy_worker_submit(f->worker, walk_job_run, j);
  if (wait_job(f, j, err) != 0) return -1;
  f->st.device_busy += hy_worker_take_busy(f->worker);
  unpack_results(f, n, wc->mode == HY_WALK_SPLIT, f->out0, f->out1, NULL, NULL, acc0, acc1, pot);
  return 0;
}

int hy_force_walk(struct hy_force *f, const struct hy_part *p, int mode, double *acc0, double *acc1, double *pot,
                  struct hy_err *err) {
  if (!f->have_tree || f->tree.n_part != p->n)
    return hy_err_set(err, "internal error: tree walk without a tree of the current particles");
  if (pot && mode == HY_WALK_HARD) return hy_err_set(err, "internal error: potential requested from a hard walk");
  if (mode == HY_WALK_SPLIT && !acc1) return hy_err_set(err, "internal error: split walk without a soft output");
  double t0 = hy_wtime();
  const struct hy_walk_cfg wc = walk_cfg(f, mode, pot != NULL);
  if (walk_merged(f, mode)) {
    if (merged_walk(f, p, &wc, acc0, acc1, pot, err) != 0) return -1;
    f->st.n_walks++;
    f->st.walk_wall += hy_wtime() - t0;
    return 0;
  }
  /* 1. the device thread walks the local tree */
  struct walk_job *lj = &f->job[0], *rj = &f->job[1];
  float *out0 = f->out0, *out1 = f->out1;
  if (f->dev_build) { /* results in p's order */
    if (device_tree_job(f, lj, &wc, 0, p->n, &out0, &out1, err) != 0) return -1;
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
  if (p->n) hy_worker_submit(f->worker, walk_job_run, lj);
  /* 2. meanwhile this thread exchanges the LET and builds the remote tree */
  int rc = f->let ? remote_tree(f, p, mode, 0, err) : 0;
  if (rc == 0) rc = remote_build_side(f, err);
  /* 3. join, then the device walks the remote tree with the same sinks */
  if (p->n && wait_job(f, lj, rc == 0 ? err : &lj->err) != 0) rc = -1;
  if (rc != 0) return -1;
  int have_remote = f->let && f->n_items > 0 && p->n > 0;
  if (have_remote && f->dev_build) {
    /* the sinks are the device build's particles, already there; the sums
     * of both walks come back in one transfer */
    second_tree_job(f, rj, &wc, p->n, 0, -1, out0, out1);
    rj->a.sinks_resident = 1;
    rj->a.add_unsorted = 1;
    hy_worker_submit(f->worker, walk_job_run, rj);
    if (wait_job(f, rj, err) != 0) return -1;
    have_remote = 0; /* nothing left to add on the host */
  } else if (have_remote) {
    pack_sinks(f, p);
    second_tree_job(f, rj, &wc, p->n, f->tree_id, -1, f->rout0, f->rout1);
    hy_worker_submit(f->worker, walk_job_run, rj);
    if (wait_job(f, rj, err) != 0) return -1;
  } else if (f->dev_build && f->let && p->n) {
    *rj = *lj;
    rj->fetch = 1;
    rj->a.out0 = out0;
    rj->a.out1 = out1;
    hy_worker_submit(f->worker, walk_job_run, rj);
    if (wait_job(f, rj, err) != 0) return -1;
  }
  f->st.device_busy += hy_worker_take_busy(f->worker);
  unpack_results(f, p->n, mode == HY_WALK_SPLIT, out0, out1, have_remote ? f->rout0 : NULL,
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
  unpack_results(f, n, 0, f->out0, NULL, NULL, NULL, acc, NULL, pot);
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
