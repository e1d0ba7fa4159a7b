/* SPDX-License-Identifier: GPL-3.0-or-later
 * force.c: see force.h. */
#include "config.h"

#include "force.h"

#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "alloc.h"
#include "hy_shared.h"
#include "let.h"
#include "worker.h"

/* One device walk, run on the device thread. */
struct walk_job {
  struct hy_cl *cl;
  struct hy_cl_walk_args a;
  struct hy_walk_cfg wc;
  uint64_t counts[2];
  struct hy_cl_times tm;
  struct hy_err err;
};

struct hy_force {
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
  struct hy_part remote;    /* LET items received (positions, masses) */
  struct hy_tree rtree;     /* remote tree */
  float *rnode;             /* its node records, in the local tree's frame */
  size_t rnode_cap;
  int merged;               /* HY_LET_*: when to walk one tree of local particles + LET items */
  int sinks_packed;         /* f->sink holds the positions of the last build */
  uint64_t first_bad;       /* lowest ID with a non-finite position at the first build that saw one */
  struct hy_part comb;      /* merged: local particles and LET items */
  int32_t *self_node;       /* merged: node of local particle i in the merged tree */
  size_t self_cap;
  uint64_t last_hard;
  struct hy_force_stats st;
};

/* Tree ids are unique across all force objects of the process: the engine
 * skips the upload of a tree whose id is already resident. */
static atomic_uint_fast64_t tree_serial = 1;

struct hy_force *hy_force_create(struct hy_cl *cl, struct hy_pool *pool, const struct hy_force_cfg *cfg) {
  struct hy_force *f = hy_calloc("force engine", 1, sizeof *f);
  f->cl = cl;
  f->pool = pool;
  f->cfg = *cfg;
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
  hy_free(f);
}

const struct hy_force_cfg *hy_force_config(const struct hy_force *f) { return &f->cfg; }
const struct hy_tree *hy_force_tree(const struct hy_force *f) { return &f->tree; }

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

int hy_force_build(struct hy_force *f, struct hy_part *p, struct hy_err *err) {
  if (p->n == 0) { /* a rank without particles (distributed runs): nothing to build */
    f->tree.n_part = f->tree.n_cell = 0;
    f->tree_id = atomic_fetch_add(&tree_serial, 1);
    f->have_tree = 1;
    return 0;
  }
  double t0 = hy_wtime();
  hy_tree_sort(&f->tree, p, f->pool);
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
  hy_tree_export(&f->tree, p, f->node, f->pool);
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

static void add_times(struct hy_force *f, const struct hy_cl_times *tm) {
  f->st.upload += tm->upload;
  f->st.kernel += tm->kernel;
  f->st.download += tm->download;
}

/* The sink positions (relative to the local tree's centre) for walks of
 * other trees; the local walk reads them from the node records. */
static void pack_sinks(struct hy_force *f, const struct hy_part *p) {
  if (f->sinks_packed) return;
  struct sink_job sj = {.pos = p->pos, .centre = f->tree.centre, .sink = f->sink};
  hy_pool_for(f->pool, p->n, 4096, sink_body, &sj);
  f->sinks_packed = 1;
}

static int walk_job_run(void *arg) {
  struct walk_job *j = arg;
  return hy_cl_walk(j->cl, &j->a, &j->wc, j->counts, &j->tm, &j->err);
}

/* Wait for the device thread; on failure copy its message. */
static int wait_job(struct hy_force *f, struct walk_job *j, struct hy_err *err) {
  double t0 = hy_wtime();
  int rc = hy_worker_wait(f->worker);
  f->st.wait_device += hy_wtime() - t0;
  if (rc != 0) {
    *err = j->err;
    return -1;
  }
  add_times(f, &j->tm);
  f->st.n_pp += j->counts[HY_COUNT_PP];
  f->st.n_pc += j->counts[HY_COUNT_PC];
  return 0;
}

/* Exchange the LET for this walk into f->remote. Returns 0 or -1. */
static int exchange_let(struct hy_force *f, const struct hy_part *p, int mode, struct hy_err *err) {
  struct hy_let_stats ls = {0};
  const int hard = mode == HY_WALK_HARD;
  int rc = hy_let_boxes(f->let, p, &ls, err);
  if (rc == 0) {
    hy_let_select(f->let, p->n ? &f->tree : NULL, p, hard, f->cfg.r2, !hard, &ls);
    rc = hy_let_exchange(f->let, &f->remote, &ls, err);
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
  f->last_hard = hard ? ls.n_recv : ls.n_recv_hard;
  return 0;
}

/* Build the tree of set q (the LET items, or local particles + items) as
 * f->rtree with its records in the local tree's frame. */
static int build_second_tree(struct hy_force *f, struct hy_part *q, struct hy_err *err) {
  double t0 = hy_wtime();
  hy_tree_sort(&f->rtree, q, f->pool);
  if (hy_tree_build(&f->rtree, q, f->cfg.n_crit, f->cfg.a_err / f->cfg.G, f->pool, err) != 0) return -1;
  size_t nn = hy_tree_n_nodes(&f->rtree);
  if (nn > f->rnode_cap) {
    size_t cap = nn + nn / 8 + 16;
    hy_free(f->rnode);
    f->rnode = hy_malloc("remote tree records", hy_size_mul_or_die(cap, 8, "remote tree records"), sizeof(float));
    f->rnode_cap = cap;
  }
  hy_tree_export_at(&f->rtree, q, f->tree.centre, f->rnode, f->pool);
  f->st.remote_build += hy_wtime() - t0;
  return 0;
}

/* Exchange the LET and build the remote tree of the received items. */
static int remote_tree(struct hy_force *f, const struct hy_part *p, int mode, struct hy_err *err) {
  if (exchange_let(f, p, mode, err) != 0) return -1;
  if (f->remote.n == 0 || p->n == 0) return 0;
  return build_second_tree(f, &f->remote, err);
}

static float int_bits(int32_t v) {
  float x;
  memcpy(&x, &v, sizeof x);
  return x;
}

/* Walk job for the tree in f->rnode (remote items, or local particles and
 * items when merged) with the local sinks. */
static void second_tree_job(struct hy_force *f, struct walk_job *j, const struct hy_walk_cfg *wc, size_t n_sink,
                            uint64_t sink_id, long self_base, float *out0, float *out1) {
  j->cl = f->cl;
  j->wc = *wc;
  j->a = (struct hy_cl_walk_args){.node = f->rnode,
                                  .n_nodes = hy_tree_n_nodes(&f->rtree),
                                  .n_part = f->rtree.n_part,
                                  .root = f->rtree.root,
                                  .tree_id = 0,
                                  .slot = 1,
                                  .sink = f->sink,
                                  .n_sink = n_sink,
                                  .sink_id = sink_id,
                                  .self_base = self_base,
                                  .out0 = out0,
                                  .out1 = out1};
}

/* Merged walk: exchange the LET, build one tree of the local particles and
 * the received items (as Watanabe & Nakasato describe: "concatenates the
 * arrays of own particles and the cells received"), walk it with the local
 * sinks, each skipping its own node. Far regions are then summarised by
 * cells that hold both local and remote mass, as on one rank; the price is
 * that the walk cannot start before the exchange is done. */
static int merged_walk(struct hy_force *f, const struct hy_part *p, const struct hy_walk_cfg *wc, double *acc0,
                       double *acc1, double *pot, struct hy_err *err) {
  if (exchange_let(f, p, wc->mode, err) != 0) return -1;
  const size_t n = p->n, m = f->remote.n;
  if (n == 0) return 0;
  struct hy_part *q = &f->comb;
  hy_part_use_groups(q);
  hy_part_resize(q, n + m);
  memcpy(q->pos, p->pos, 3 * n * sizeof(double));
  memcpy(q->mass, p->mass, n * sizeof(double));
  memset(q->grp, 0, 2 * n * sizeof(double));
  if (m) {
    memcpy(q->pos + 3 * n, f->remote.pos, 3 * m * sizeof(double));
    memcpy(q->mass + n, f->remote.mass, m * sizeof(double));
    memcpy(q->grp + 2 * n, f->remote.grp, 2 * m * sizeof(double));
  }
  for (size_t i = 0; i < n + m; i++) q->id[i] = i;
  if (build_second_tree(f, q, err) != 0) return -1;
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
  const int split = wc->mode == HY_WALK_SPLIT;
  struct unpack_job uj = {.o0 = f->out0,
                          .o1 = split ? f->out1 : NULL,
                          .acc0 = acc0,
                          .acc1 = split ? acc1 : NULL,
                          .pot = pot,
                          .G = f->cfg.G};
  hy_pool_for(f->pool, n, 4096, unpack_body, &uj);
  return 0;
}

int hy_force_walk(struct hy_force *f, const struct hy_part *p, int mode, double *acc0, double *acc1, double *pot,
                  struct hy_err *err) {
  if (!f->have_tree || f->tree.n_part != p->n)
    return hy_err_set(err, "internal error: tree walk without a tree of the current particles");
  if (pot && mode == HY_WALK_HARD) return hy_err_set(err, "internal error: potential requested from a hard walk");
  if (mode == HY_WALK_SPLIT && !acc1) return hy_err_set(err, "internal error: split walk without a soft output");
  double t0 = hy_wtime();
  const struct hy_walk_cfg wc = {.mode = mode,
                                 .want_pot = pot != NULL,
                                 .nvec = f->cfg.nvec,
                                 .eps = f->cfg.eps,
                                 .r1 = f->cfg.r1,
                                 .r2 = f->cfg.r2,
                                 .n_ratio = (double)f->cfg.n_ratio};
  if (f->let && (f->merged == HY_LET_MERGED || (f->merged == HY_LET_AUTO && mode != HY_WALK_HARD))) {
    if (merged_walk(f, p, &wc, acc0, acc1, pot, err) != 0) return -1;
    f->st.n_walks++;
    f->st.walk_wall += hy_wtime() - t0;
    return 0;
  }
  /* 1. the device thread walks the local tree */
  struct walk_job *lj = &f->job[0], *rj = &f->job[1];
  lj->cl = f->cl;
  lj->wc = wc;
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
                                   .out0 = f->out0,
                                   .out1 = f->out1};
  if (p->n) hy_worker_submit(f->worker, walk_job_run, lj);
  /* 2. meanwhile this thread exchanges the LET and builds the remote tree */
  int rc = f->let ? remote_tree(f, p, mode, err) : 0;
  /* 3. join, then the device walks the remote tree with the same sinks */
  if (p->n && wait_job(f, lj, rc == 0 ? err : &lj->err) != 0) rc = -1;
  if (rc != 0) return -1;
  int have_remote = f->let && f->remote.n > 0 && p->n > 0;
  if (have_remote) {
    pack_sinks(f, p);
    second_tree_job(f, rj, &wc, p->n, f->tree_id, -1, f->rout0, f->rout1);
    hy_worker_submit(f->worker, walk_job_run, rj);
    if (wait_job(f, rj, err) != 0) return -1;
  }
  f->st.device_busy += hy_worker_take_busy(f->worker);
  const int split = mode == HY_WALK_SPLIT;
  struct unpack_job uj = {.o0 = f->out0,
                          .o1 = split ? f->out1 : NULL,
                          .r0 = have_remote ? f->rout0 : NULL,
                          .r1 = have_remote && split ? f->rout1 : NULL,
                          .acc0 = acc0,
                          .acc1 = split ? acc1 : NULL,
                          .pot = pot,
                          .G = f->cfg.G};
  hy_pool_for(f->pool, p->n, 4096, unpack_body, &uj);
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
  struct unpack_job uj = {.o0 = f->out0, .acc0 = acc, .pot = pot, .G = f->cfg.G};
  hy_pool_for(f->pool, n, 4096, unpack_body, &uj);
  add_times(f, &dj.tm);
  f->st.n_pp += (uint64_t)n * (dj.n_src ? dj.n_src - 1 : 0);
  f->st.walk_wall += hy_wtime() - t0;
  return 0;
}

void hy_force_stats_get(const struct hy_force *f, struct hy_force_stats *s) { *s = f->st; }
void hy_force_stats_reset(struct hy_force *f) { memset(&f->st, 0, sizeof f->st); }
