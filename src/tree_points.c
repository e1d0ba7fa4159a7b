/* SPDX-License-Identifier: GPL-3.0-or-later
 * tree_points.c: see tree.h; the trees of points that hard walks open
 * entirely (hy_tree_point_records), written as node records directly.
 * Built breadth-first from the points' sorted Morton keys with the cells
 * of hy_tree_build (tree_internal.h), one generation per parallel pass, so
 * that the records do not depend on the thread count. */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "alloc.h"
#include "hy_shared.h"
#include "trace.h"
#include "tree.h"
#include "tree_internal.h"

/* A cell of a point tree: its points [b, e) in key order, its node and the
 * node after its subtree. */
struct pt_cell {
  uint32_t b, e;
  int32_t node, next;
};

/* Per cell of a generation in pt_job.cut: the number of children (0: a
 * leaf bucket), then the first point of each (hy_tree_split_range's
 * octants, which are contiguous), then the index in the next generation of
 * its first child cell. */
#define PT_CUT 10

struct pt_job {
  const float *pos4;    /* the points, 4 floats each (x, y, z, m), in the caller's order */
  float *node;          /* the records */
  uint64_t *key;        /* keys: in the caller's order, then sorted */
  uint32_t *idx;        /* the sort's permutation */
  uint64_t *red;        /* per thread: AND and OR of the keys */
  double lo[3], scale;  /* key cube */
  size_t m;
  int n_crit;
  const struct pt_cell *gen; /* this generation */
  uint32_t *cut;             /* PT_CUT per cell of gen */
  struct pt_cell *next_gen;  /* the next generation (its cells' next set by link_body) */
  int32_t base;              /* node of the next generation's first cell */
};

static void pt_key_body(void *arg, size_t b, size_t e, int tid) {
  struct pt_job *j = arg;
  uint64_t and_ = ~(uint64_t)0, or_ = 0;
  for (size_t i = b; i < e; i++) {
    const float *x = j->pos4 + 4 * i;
    const uint64_t k = hy_tree_grid_key(x[0], x[1], x[2], j->lo, j->scale);
    j->key[i] = k;
    j->idx[i] = (uint32_t)i;
    and_ &= k;
    or_ |= k;
  }
  j->red[2 * tid] &= and_;
  j->red[2 * tid + 1] |= or_;
}

/* The points' records in key order; their next is set by pt_link_body. */
static void pt_gather_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct pt_job *j = arg;
  for (size_t i = b; i < e; i++) {
    const float *x = j->pos4 + 4 * (size_t)j->idx[i];
    float *o = j->node + 8 * i;
    o[0] = x[0];
    o[1] = x[1];
    o[2] = x[2];
    o[3] = x[3];
    o[4] = 0.0f;
    o[5] = 0.0f;
    o[6] = hy_tree_float_bits(HY_NONE);
    o[7] = hy_tree_float_bits(HY_NONE);
  }
}

static void pt_split_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct pt_job *j = arg;
  for (size_t c = b; c < e; c++) {
    const struct pt_cell *pc = j->gen + c;
    uint32_t *cu = j->cut + PT_CUT * c;
    cu[0] = 0;
    if (hy_tree_is_leaf(j->key, pc->b, pc->e, j->n_crit)) continue;
    size_t clo[8], chi[8];
    const int nc = hy_tree_split_range(j->key, pc->b, pc->e, clo, chi);
    cu[0] = (uint32_t)nc;
    for (int k = 0; k < nc; k++) cu[1 + k] = (uint32_t)clo[k];
  }
}

/* The links of a generation's cells: more, next, and the next of their
 * children; children of two points or more become the next generation. */
static void pt_link_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct pt_job *j = arg;
  for (size_t c = b; c < e; c++) {
    const struct pt_cell *pc = j->gen + c;
    const uint32_t *cu = j->cut + PT_CUT * c;
    float *o = j->node + 8 * (size_t)pc->node;
    int32_t more;
    if (cu[0] == 0) { /* a bucket: its points in a chain */
      more = (int32_t)pc->b;
      for (uint32_t i = pc->b; i + 1 < pc->e; i++) j->node[8 * (size_t)i + 6] = hy_tree_float_bits((int32_t)i + 1);
      j->node[8 * (size_t)(pc->e - 1) + 6] = hy_tree_float_bits(pc->next);
    } else {
      const int nc = (int)cu[0];
      int32_t child[8];
      uint32_t slot[8], k_new = cu[9];
      for (int k = 0; k < nc; k++) {
        const uint32_t lo = cu[1 + k], hi = k + 1 < nc ? cu[2 + k] : pc->e;
        slot[k] = UINT32_MAX;
        if (hi - lo == 1) {
          child[k] = (int32_t)lo;
        } else {
          slot[k] = k_new++;
          child[k] = j->base + (int32_t)slot[k];
          j->next_gen[slot[k]].b = lo;
          j->next_gen[slot[k]].e = hi;
          j->next_gen[slot[k]].node = child[k];
        }
      }
      for (int k = 0; k < nc; k++) {
        const int32_t after = k + 1 < nc ? child[k + 1] : pc->next;
        if (slot[k] == UINT32_MAX)
          j->node[8 * (size_t)child[k] + 6] = hy_tree_float_bits(after);
        else
          j->next_gen[slot[k]].next = after;
      }
      more = child[0];
    }
    o[6] = hy_tree_float_bits(pc->next);
    o[7] = hy_tree_float_bits(more);
  }
}

/* Cells of at most this many points get the exact b_max (their points are
 * contiguous in the records), larger ones the bound over their children. */
#define PT_BMAX_EXACT 512

/* A generation's cells from their children (deeper generations first): the
 * centre of mass, the mass, r_b^2 = FLT_MAX (every walk opens every cell),
 * and b_max >= |point - centre| for every point below, rounded up so that
 * the walk's single-precision distances cannot put a point inside R2 of a
 * sink whose cell it skips. */
static void pt_moments_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct pt_job *j = arg;
  const float *node = j->node;
  for (size_t c = b; c < e; c++) {
    const struct pt_cell *pc = j->gen + c;
    float *o = j->node + 8 * (size_t)pc->node;
    const int32_t first = hy_tree_int_bits(o[7]);
    double mass = 0.0, mx[3] = {0.0, 0.0, 0.0}, gx[3] = {0.0, 0.0, 0.0};
    size_t n = 0;
    for (int32_t x = first; x != pc->next; x = hy_tree_int_bits(node[8 * (size_t)x + 6])) {
      const float *q = node + 8 * (size_t)x;
      mass += q[3];
      for (int d = 0; d < 3; d++) {
        mx[d] += (double)q[3] * q[d];
        gx[d] += q[d];
      }
      n++;
    }
    float cm[3];
    for (int d = 0; d < 3; d++) cm[d] = (float)(mass > 0.0 ? mx[d] / mass : gx[d] / (double)n);
    double bmax = 0.0;
    if (pc->e - pc->b <= PT_BMAX_EXACT) {
      for (uint32_t i = pc->b; i < pc->e; i++) {
        const float *q = node + 8 * (size_t)i;
        const double dx = (double)q[0] - cm[0], dy = (double)q[1] - cm[1], dz = (double)q[2] - cm[2];
        const double r2 = dx * dx + dy * dy + dz * dz;
        bmax = r2 > bmax ? r2 : bmax;
      }
      bmax = sqrt(bmax);
    } else {
      for (int32_t x = first; x != pc->next; x = hy_tree_int_bits(node[8 * (size_t)x + 6])) {
        const float *q = node + 8 * (size_t)x;
        const double dx = (double)q[0] - cm[0], dy = (double)q[1] - cm[1], dz = (double)q[2] - cm[2];
        const double r = sqrt(dx * dx + dy * dy + dz * dz) + ((size_t)x >= j->m ? (double)q[5] : 0.0);
        bmax = r > bmax ? r : bmax;
      }
    }
    bmax *= 1.0 + 8.0 * FLT_EPSILON;
    float bf = (float)bmax;
    if ((double)bf < bmax) bf = nextafterf(bf, INFINITY);
    o[0] = cm[0];
    o[1] = cm[1];
    o[2] = cm[2];
    o[3] = (float)mass;
    o[4] = FLT_MAX;
    o[5] = bf;
  }
}

/* A generation's cells hold two points or more each. */
static size_t pt_gen_max(size_t m) { return m / 2 + 1; }

/* Room for m points: t's keys and sort buffers, the cells and a
 * generation's splits. */
static void pt_reserve(struct hy_tree *t, struct hy_tree_work *w, size_t m) {
  hy_tree_reserve_particles(t, w, m);
  if (w->pt_cap < m) {
    hy_free(w->pt);
    w->pt_cap = m + m / 8 + 16;
    w->pt = hy_malloc("point tree cells", w->pt_cap, sizeof *w->pt);
  }
  const size_t gen_max = pt_gen_max(m);
  if (w->pt_cut_cap < gen_max) {
    hy_free(w->pt_cut);
    w->pt_cut_cap = gen_max + gen_max / 8 + 16;
    w->pt_cut = hy_malloc("point tree splits", hy_size_mul_or_die(w->pt_cut_cap, PT_CUT, "point tree splits"),
                          sizeof(uint32_t));
  }
}

/* The key cube: the box's lower corner and its longest side (all keys 0
 * if the box is empty, a point or not finite). */
static void pt_cube(struct pt_job *j, const float box[6]) {
  double side = 0.0;
  for (int d = 0; d < 3; d++) side = fmax(side, (double)box[3 + d] - (double)box[d]);
  for (int d = 0; d < 3; d++) j->lo[d] = isfinite(box[d]) ? box[d] : 0.0;
  j->scale = side > 0.0 && isfinite(side) ? (double)(1u << HY_KEY_BITS) / side : 0.0;
}

/* The points' keys and their sort, then the points' records in key order. */
static void pt_sort(struct hy_tree *t, struct hy_tree_work *w, struct pt_job *j, struct hy_pool *pool) {
  const int nt = hy_pool_size(pool);
  const size_t m = j->m;
  for (int c = 0; c < nt; c++) {
    w->red_key[2 * c] = ~(uint64_t)0;
    w->red_key[2 * c + 1] = 0;
  }
  hy_pool_for(pool, m, 16384, pt_key_body, j);
  uint64_t and_ = ~(uint64_t)0, or_ = 0;
  for (int c = 0; c < nt; c++) {
    and_ &= w->red_key[2 * c];
    or_ |= w->red_key[2 * c + 1];
  }
  hy_tree_sort_keys(w, &t->key, &w->idx, m, and_ ^ or_, pool);
  j->key = t->key;
  j->idx = w->idx;
  hy_pool_for(pool, m, 16384, pt_gather_body, j);
}

/* Number the children of two points or more of the n_c cells of j->gen in
 * order (each cell's first one in its cut's last entry); returns how many. */
static size_t pt_number_children(const struct pt_job *j, size_t n_c) {
  size_t n_new = 0;
  for (size_t c = 0; c < n_c; c++) {
    uint32_t *cu = j->cut + PT_CUT * c;
    const struct pt_cell *pc = j->gen + c;
    cu[9] = (uint32_t)n_new;
    for (uint32_t k = 0; k < cu[0]; k++) n_new += (k + 1 < cu[0] ? cu[2 + k] : pc->e) - cu[1 + k] > 1;
  }
  return n_new;
}

/* Entries of a point tree's generation table (pt_cells): more than its
 * generations, which descend at least one octal key digit each. */
#define PT_GENS (3 * HY_KEY_BITS + 3)

/* The cells and their links, one generation at a time from the root (node
 * m): generation g is cells gs[g] .. gs[g + 1] - 1 of w->pt. Returns the
 * number of generations. */
static int pt_cells(struct hy_tree_work *w, struct pt_job *j, size_t gs[PT_GENS], struct hy_pool *pool) {
  const size_t m = j->m, gen_max = pt_gen_max(m);
  struct pt_cell *cell = w->pt;
  cell[0] = (struct pt_cell){.b = 0, .e = (uint32_t)m, .node = (int32_t)m, .next = HY_NONE};
  int n_gen = 0;
  gs[0] = 0;
  gs[1] = 1;
  while (gs[n_gen + 1] > gs[n_gen]) {
    const size_t n_c = gs[n_gen + 1] - gs[n_gen];
    if (n_gen + 2 >= PT_GENS || n_c > gen_max)
      hy_die("internal error: point tree generation %d of %zu cells for %zu points", n_gen, n_c, m);
    j->gen = cell + gs[n_gen];
    j->cut = w->pt_cut;
    hy_pool_for(pool, n_c, 1024, pt_split_body, j);
    const size_t n_new = pt_number_children(j, n_c);
    if (gs[n_gen + 1] + n_new > w->pt_cap)
      hy_die("internal error: point tree of %zu points with more than %zu cells", m, w->pt_cap);
    j->next_gen = cell + gs[n_gen + 1];
    j->base = (int32_t)(m + gs[n_gen + 1]);
    hy_pool_for(pool, n_c, 1024, pt_link_body, j);
    gs[n_gen + 2] = gs[n_gen + 1] + n_new;
    n_gen++;
  }
  return n_gen;
}

/* The cells' moments, the deepest generation first. */
static void pt_moments(struct hy_tree_work *w, struct pt_job *j, const size_t gs[PT_GENS], int n_gen,
                       struct hy_pool *pool) {
  for (int g = n_gen - 1; g >= 0; g--) {
    j->gen = w->pt + gs[g];
    hy_pool_for(pool, gs[g + 1] - gs[g], 1024, pt_moments_body, j);
  }
}

size_t hy_tree_point_records(struct hy_tree *t, const float *pos4, size_t m, const float box[6], int n_crit,
                             float *node, struct hy_pool *pool) {
  if (m == 0) return 0;
  if (m > (size_t)INT32_MAX / 2) hy_die("tree: %zu points exceed the 32-bit node index range", m);
  struct hy_tree_work *w = hy_tree_work_of(t, hy_pool_size(pool));
  pt_reserve(t, w, m);
  struct pt_job j = {.pos4 = pos4, .node = node, .key = t->key, .idx = w->idx, .red = w->red_key,
                     .m = m, .n_crit = n_crit < 1 ? 1 : n_crit};
  pt_cube(&j, box);
  double tt = hy_trace_t();
  pt_sort(t, w, &j, pool);
  hy_trace(HY_TRACE_MAIN, "pt_sort", tt);
  tt = hy_trace_t();
  size_t gs[PT_GENS];
  const int n_gen = pt_cells(w, &j, gs, pool);
  hy_trace(HY_TRACE_MAIN, "pt_cells", tt);
  tt = hy_trace_t();
  pt_moments(w, &j, gs, n_gen, pool);
  hy_trace(HY_TRACE_MAIN, "pt_moments", tt);
  return gs[n_gen];
}
