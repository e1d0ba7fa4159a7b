/* SPDX-License-Identifier: GPL-3.0-or-later
 * force.c: see force.h. */
#include "config.h"

#include "force.h"

#include <stdatomic.h>
#include <string.h>

#include "alloc.h"
#include "hy_shared.h"

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
  float *out0, *out1; /* 4 floats per particle */
  size_t sink_cap;    /* in particles */
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
  return f;
}

void hy_force_free(struct hy_force *f) {
  if (!f) return;
  hy_tree_free(&f->tree);
  hy_free(f->node);
  hy_free(f->sink);
  hy_free(f->out0);
  hy_free(f->out1);
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
  f->sink = hy_malloc("sink positions", nf, sizeof(float));
  f->out0 = hy_malloc("walk results", nf, sizeof(float));
  f->out1 = hy_malloc("soft walk results", nf, sizeof(float));
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
  double t0 = hy_wtime();
  hy_tree_sort(&f->tree, p, f->pool);
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
  struct sink_job sj = {.pos = p->pos, .centre = f->tree.centre, .sink = f->sink};
  hy_pool_for(f->pool, p->n, 4096, sink_body, &sj);
  double t3 = hy_wtime();
  f->tree_id = atomic_fetch_add(&tree_serial, 1);
  f->have_tree = 1;
  f->st.sort += t1 - t0;
  f->st.build += t2 - t1;
  f->st.export_ += t3 - t2;
  return 0;
}

struct unpack_job {
  const float *o0, *o1;
  double *acc0, *acc1, *pot;
  double G;
};

static void unpack_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct unpack_job *j = arg;
  for (size_t i = b; i < e; i++) {
    for (int d = 0; d < 3; d++) {
      j->acc0[3 * i + d] = j->G * (double)j->o0[4 * i + d];
      if (j->acc1) j->acc1[3 * i + d] = j->G * (double)j->o1[4 * i + d];
    }
    if (j->pot) j->pot[i] = j->G * (double)j->o0[4 * i + 3];
  }
}

static void add_times(struct hy_force *f, const struct hy_cl_times *tm) {
  f->st.upload += tm->upload;
  f->st.kernel += tm->kernel;
  f->st.download += tm->download;
}

int hy_force_walk(struct hy_force *f, const struct hy_part *p, int mode, double *acc0, double *acc1, double *pot,
                  struct hy_err *err) {
  if (!f->have_tree || f->tree.n_part != p->n)
    return hy_err_set(err, "internal error: tree walk without a tree of the current particles");
  if (pot && mode == HY_WALK_HARD) return hy_err_set(err, "internal error: potential requested from a hard walk");
  if (mode == HY_WALK_SPLIT && !acc1) return hy_err_set(err, "internal error: split walk without a soft output");
  double t0 = hy_wtime();
  struct hy_walk_cfg wc = {.mode = mode,
                           .want_pot = pot != NULL,
                           .nvec = f->cfg.nvec,
                           .eps = f->cfg.eps,
                           .r1 = f->cfg.r1,
                           .r2 = f->cfg.r2,
                           .n_ratio = (double)f->cfg.n_ratio};
  struct hy_cl_walk_args a = {.node = f->node,
                              .n_nodes = hy_tree_n_nodes(&f->tree),
                              .n_part = f->tree.n_part,
                              .root = f->tree.root,
                              .tree_id = f->tree_id,
                              .slot = 0,
                              .sink = f->sink,
                              .n_sink = p->n,
                              .self_base = 0,
                              .out0 = f->out0,
                              .out1 = f->out1};
  uint64_t counts[2];
  struct hy_cl_times tm;
  if (hy_cl_walk(f->cl, &a, &wc, counts, &tm, err) != 0) return -1;
  struct unpack_job uj = {.o0 = f->out0,
                          .o1 = mode == HY_WALK_SPLIT ? f->out1 : NULL,
                          .acc0 = acc0,
                          .acc1 = mode == HY_WALK_SPLIT ? acc1 : NULL,
                          .pot = pot,
                          .G = f->cfg.G};
  hy_pool_for(f->pool, p->n, 4096, unpack_body, &uj);
  add_times(f, &tm);
  f->st.n_pp += counts[HY_COUNT_PP];
  f->st.n_pc += counts[HY_COUNT_PC];
  f->st.walk_wall += hy_wtime() - t0;
  return 0;
}

int hy_force_direct(struct hy_force *f, const struct hy_part *p, double *acc, double *pot, struct hy_err *err) {
  double t0 = hy_wtime();
  size_t n = p->n;
  ensure_sinks(f, n);
  /* sources and sinks relative to the centre of the bounding box, in float */
  double lo[3], hi[3];
  for (int d = 0; d < 3; d++) lo[d] = hi[d] = n ? p->pos[d] : 0.0;
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < 3; d++) {
      double x = p->pos[3 * i + d];
      if (x < lo[d]) lo[d] = x;
      if (x > hi[d]) hi[d] = x;
    }
  double c[3];
  for (int d = 0; d < 3; d++) c[d] = 0.5 * (lo[d] + hi[d]);
  float *src = f->out1; /* the soft output buffer is free during a direct sum */
  for (size_t i = 0; i < n; i++) {
    for (int d = 0; d < 3; d++) f->sink[4 * i + d] = src[4 * i + d] = (float)(p->pos[3 * i + d] - c[d]);
    f->sink[4 * i + 3] = 0.0f;
    src[4 * i + 3] = (float)p->mass[i];
  }
  f->have_tree = 0; /* the sink buffer no longer matches a tree */
  struct hy_cl_times tm;
  if (hy_cl_direct(f->cl, src, n, f->sink, n, 0, f->cfg.eps, f->out0, &tm, err) != 0) return -1;
  struct unpack_job uj = {.o0 = f->out0, .o1 = NULL, .acc0 = acc, .acc1 = NULL, .pot = pot, .G = f->cfg.G};
  hy_pool_for(f->pool, n, 4096, unpack_body, &uj);
  add_times(f, &tm);
  f->st.n_pp += (uint64_t)n * (n ? n - 1 : 0);
  f->st.walk_wall += hy_wtime() - t0;
  return 0;
}

void hy_force_stats_get(const struct hy_force *f, struct hy_force_stats *s) { *s = f->st; }
void hy_force_stats_reset(struct hy_force *f) { memset(&f->st, 0, sizeof f->st); }
