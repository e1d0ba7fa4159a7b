/* SPDX-License-Identifier: GPL-3.0-or-later
 * tree.c: see tree.h; the octree build, its moments, the export of the
 * node records and the host view of device-built trees (the key sort is in
 * tree_sort.c, the trees of points in tree_points.c). Algorithms: top-down
 * build over sorted key ranges (Nakasato 2012; Nakasato et al., OTOO) with
 * the subtrees below a serial top built in parallel, bottom-up moments
 * with the exact parallel-axis rule for B2, r_b from Warren & Salmon (1993)
 * as in Watanabe & Nakasato eq 5-6. Every phase runs over the pool and
 * gives bitwise the same tree and node numbering for every thread count
 * (tests/test_tree checks 1 against 3 threads). */
#include "config.h"

#include "tree.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hy_shared.h"
#include "tree_internal.h"

static void work_free(struct hy_tree_work *w);

void hy_tree_init(struct hy_tree *t) { memset(t, 0, sizeof *t); }

void hy_tree_free(struct hy_tree *t) {
  hy_free(t->key);
  hy_free(t->next);
  hy_free(t->more);
  hy_free(t->cm);
  hy_free(t->mass);
  hy_free(t->b2);
  hy_free(t->bmax);
  hy_free(t->rb);
  hy_free(t->first);
  hy_free(t->count);
  work_free(t->work);
  hy_tree_init(t);
}

struct hy_tree_work *hy_tree_work_of(struct hy_tree *t, int nt) {
  if (!t->work) t->work = hy_calloc("tree scratch", 1, sizeof *t->work);
  struct hy_tree_work *w = t->work;
  if (nt > w->red_cap) {
    hy_free(w->red);
    hy_free(w->red_key);
    w->red = hy_malloc("tree reductions", (size_t)nt * 6, sizeof(double));
    w->red_key = hy_malloc("tree reductions", (size_t)nt * 3, sizeof(uint64_t));
    w->red_cap = nt;
  }
  return w;
}

/* --------------------------------------------------------------- build */

static void reserve_cells(struct hy_tree *t, size_t n_cell) {
  size_t nodes_needed = t->n_part + n_cell;
  if (n_cell > t->n_cell_alloc) {
    size_t cap = n_cell + n_cell / 2 + 64;
    t->cm = hy_realloc("tree cell centres", t->cm, hy_size_mul_or_die(cap, 3, "tree"), sizeof(double));
    t->mass = hy_realloc("tree cell masses", t->mass, cap, sizeof(double));
    t->b2 = hy_realloc("tree cell B2", t->b2, cap, sizeof(double));
    t->bmax = hy_realloc("tree cell b_max", t->bmax, cap, sizeof(double));
    t->rb = hy_realloc("tree cell r_b", t->rb, cap, sizeof(double));
    t->first = hy_realloc("tree cell ranges", t->first, cap, sizeof(size_t));
    t->count = hy_realloc("tree cell ranges", t->count, cap, sizeof(size_t));
    t->n_cell_alloc = cap;
  }
  if (nodes_needed > t->n_node_alloc || !t->next) {
    size_t cap = nodes_needed + nodes_needed / 2 + 64;
    t->next = hy_realloc("tree next", t->next, cap, sizeof(int32_t));
    t->more = hy_realloc("tree more", t->more, cap, sizeof(int32_t));
    t->n_node_alloc = cap;
  }
}

/* first index in [lo, hi) whose key satisfies (key >> shift) > v; keys sorted */
static size_t upper_digit(const uint64_t *key, size_t lo, size_t hi, int shift, uint64_t v) {
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((key[mid] >> shift) <= v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int hy_tree_split_range(const uint64_t *key, size_t lo, size_t hi, size_t clo[8], size_t chi[8]) {
  uint64_t diff = key[lo] ^ key[hi - 1];
  int bit = 63 - __builtin_clzll(diff);
  int shift = (bit / 3) * 3;
  uint64_t prefix = key[lo] >> (shift + 3);
  int nc = 0;
  size_t b = lo;
  for (uint64_t d = 0; d < 8 && b < hi; d++) {
    size_t e = upper_digit(key, b, hi, shift, (prefix << 3) | d);
    if (e > b) {
      clo[nc] = b;
      chi[nc] = e;
      nc++;
    }
    b = e;
  }
  return nc;
}

/* The link build reproduces one serial depth-first build exactly: a cell's
 * children are numbered when the cell is split, and cells are split in
 * depth-first order (first child first). Then the descendants of any cell
 * occupy one contiguous index range, in the order a serial build of that cell
 * alone would give them. So:
 *  1. serially, the cells above a grain size are split ("top cells"); the
 *     others become tasks;
 *  2. in parallel, each task builds its subtree with local cell numbers
 *     (links to local cells and to the outside encoded as negative values);
 *  3. serially, a depth-first pass over the top cells assigns the numbers of
 *     the top cells and the base index of every task, as the serial build
 *     would, and links the top cells;
 *  4. in parallel, each task copies its cells to their final place and
 *     decodes its links.
 * The result is bitwise the same for every thread count. */

#define ENC_OUT (-1) /* in a task: the task root's next (outside the subtree) */

static inline int32_t enc_local(size_t l) { return (int32_t)(-2 - (int64_t)l); }

struct build_item {
  size_t lo, hi;
  int64_t cell; /* local cell, or -1 for the task root */
  int level;
};

struct build_task {
  size_t lo, hi;         /* the root's particle range */
  int level;             /* the root's level */
  size_t top;            /* the root among the top cells */
  size_t n_cell, cap;    /* local cells: the root's descendants */
  size_t *first, *count; /* per local cell */
  int32_t *more, *next;  /* per local cell, encoded */
  int32_t root_more;     /* encoded */
  size_t *fix;           /* particles whose next is encoded (negative) */
  size_t n_fix, fix_cap;
  struct build_item *stack;
  size_t stack_cap;
  int depth;   /* deepest level in the subtree */
  size_t base; /* cell index of local cell 0 */
};

struct top_cell {
  size_t lo, hi;
  int level;
  int nc;
  int32_t child[8]; /* particle index, or -2 - (top cell index) */
  int64_t task;     /* its task, or -1 if split here */
  int32_t node;     /* node index */
};

struct task_order {
  size_t size, task;
};

static size_t task_new_cell(struct build_task *k, size_t lo, size_t hi) {
  if (k->n_cell == k->cap) {
    size_t cap = 2 * k->cap + 64;
    k->first = hy_realloc("tree build cells", k->first, cap, sizeof(size_t));
    k->count = hy_realloc("tree build cells", k->count, cap, sizeof(size_t));
    k->more = hy_realloc("tree build cells", k->more, cap, sizeof(int32_t));
    k->next = hy_realloc("tree build cells", k->next, cap, sizeof(int32_t));
    k->cap = cap;
  }
  size_t l = k->n_cell++;
  k->first[l] = lo;
  k->count[l] = hi - lo;
  return l;
}

/* next of the encoded child x (a particle or a local cell) := v */
static void task_set_next(struct build_task *k, int32_t *next, int32_t x, int32_t v) {
  if (x >= 0) {
    next[x] = v;
    if (v < 0) {
      if (k->n_fix == k->fix_cap) {
        k->fix_cap = 2 * k->fix_cap + 64;
        k->fix = hy_realloc("tree build fix-ups", k->fix, k->fix_cap, sizeof(size_t));
      }
      k->fix[k->n_fix++] = (size_t)x;
    }
  } else {
    k->next[-2 - (int64_t)x] = v;
  }
}

static void task_build(struct build_task *k, const uint64_t *key, int32_t *next, int n_crit) {
  k->n_cell = 0;
  k->n_fix = 0;
  k->depth = k->level;
  size_t sp = 0;
  if (k->stack_cap == 0) {
    k->stack_cap = 256;
    k->stack = hy_malloc("tree build stack", k->stack_cap, sizeof *k->stack);
  }
  k->stack[sp++] = (struct build_item){k->lo, k->hi, -1, k->level};
  while (sp > 0) {
    struct build_item it = k->stack[--sp];
    const size_t lo = it.lo, hi = it.hi;
    if (it.level > k->depth) k->depth = it.level;
    int32_t after = it.cell < 0 ? ENC_OUT : k->next[it.cell];
    int32_t *more = it.cell < 0 ? &k->root_more : &k->more[it.cell];
    if (hy_tree_is_leaf(key, lo, hi, n_crit)) {
      /* leaf bucket: particles lo..hi-1 are the children */
      *more = (int32_t)lo;
      for (size_t i = lo; i + 1 < hi; i++) next[i] = (int32_t)(i + 1);
      task_set_next(k, next, (int32_t)(hi - 1), after);
      continue;
    }
    size_t clo[8], chi[8];
    int32_t child[8] = {HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE};
    int nc = hy_tree_split_range(key, lo, hi, clo, chi);
    for (int j = 0; j < nc; j++)
      child[j] = (chi[j] - clo[j] == 1) ? (int32_t)clo[j] : enc_local(task_new_cell(k, clo[j], chi[j]));
    /* task_new_cell may have moved k->more */
    if (it.cell < 0)
      k->root_more = child[0];
    else
      k->more[it.cell] = child[0];
    for (int j = 0; j < nc; j++) task_set_next(k, next, child[j], j + 1 < nc ? child[j + 1] : after);
    /* push cells in reverse so the first child is processed first */
    for (int j = nc - 1; j >= 0; j--) {
      if (child[j] >= 0) continue;
      if (sp == k->stack_cap) {
        k->stack_cap *= 2;
        k->stack = hy_realloc("tree build stack", k->stack, k->stack_cap, sizeof *k->stack);
      }
      k->stack[sp++] = (struct build_item){clo[j], chi[j], -2 - (int64_t)child[j], it.level + 1};
    }
  }
}

struct links_job {
  struct hy_tree *t;
  const struct hy_part *p;
  struct hy_tree_work *w;
  int n_crit;
  double a_err;
  atomic_size_t next_task;
};

static void more_none_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct links_job *j = arg;
  for (size_t i = b; i < e; i++) j->t->more[i] = HY_NONE;
}

static void task_build_body(void *arg, size_t b, size_t e, int tid) {
  (void)b;
  (void)e;
  (void)tid;
  struct links_job *j = arg;
  struct hy_tree_work *w = j->w;
  for (;;) {
    size_t i = atomic_fetch_add(&j->next_task, 1);
    if (i >= w->n_task) break;
    task_build(&w->task[w->order[i].task], j->t->key, j->t->next, j->n_crit);
  }
}

static inline int32_t task_decode(const struct build_task *k, size_t n, int32_t root_next, int32_t v) {
  if (v >= 0) return v;
  if (v == ENC_OUT) return root_next;
  return (int32_t)(n + k->base + (size_t)(-2 - (int64_t)v));
}

static void task_place_body(void *arg, size_t b, size_t e, int tid) {
  (void)b;
  (void)e;
  (void)tid;
  struct links_job *j = arg;
  struct hy_tree_work *w = j->w;
  struct hy_tree *t = j->t;
  const size_t n = t->n_part;
  for (;;) {
    size_t i = atomic_fetch_add(&j->next_task, 1);
    if (i >= w->n_task) break;
    const struct build_task *k = &w->task[w->order[i].task];
    const int32_t root = w->top[k->top].node;
    const int32_t root_next = t->next[root];
    t->more[root] = task_decode(k, n, root_next, k->root_more);
    for (size_t l = 0; l < k->n_cell; l++) {
      size_t c = k->base + l;
      t->first[c] = k->first[l];
      t->count[c] = k->count[l];
      t->more[n + c] = task_decode(k, n, root_next, k->more[l]);
      t->next[n + c] = task_decode(k, n, root_next, k->next[l]);
    }
    for (size_t f = 0; f < k->n_fix; f++) t->next[k->fix[f]] = task_decode(k, n, root_next, t->next[k->fix[f]]);
  }
}

static size_t add_top(struct hy_tree_work *w, size_t lo, size_t hi, int level) {
  if (w->n_top == w->top_cap) {
    w->top_cap = 2 * w->top_cap + 64;
    w->top = hy_realloc("tree top cells", w->top, w->top_cap, sizeof *w->top);
  }
  size_t i = w->n_top++;
  w->top[i] = (struct top_cell){.lo = lo, .hi = hi, .level = level, .task = -1, .node = HY_NONE};
  return i;
}

static size_t add_task(struct hy_tree_work *w, size_t top) {
  if (w->n_task == w->task_cap) {
    size_t cap = 2 * w->task_cap + 64;
    w->task = hy_realloc("tree build tasks", w->task, cap, sizeof *w->task);
    memset(w->task + w->task_cap, 0, (cap - w->task_cap) * sizeof *w->task);
    w->order = hy_realloc("tree build tasks", w->order, cap, sizeof *w->order);
    w->task_cap = cap;
  }
  size_t i = w->n_task++;
  struct build_task *k = &w->task[i];
  k->lo = w->top[top].lo;
  k->hi = w->top[top].hi;
  k->level = w->top[top].level;
  k->top = top;
  w->top[top].task = (int64_t)i;
  w->order[i] = (struct task_order){k->hi - k->lo, i};
  return i;
}

static int cmp_task_order(const void *a, const void *b) {
  const struct task_order *x = a, *y = b; /* largest first, then by index */
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  return (x->task > y->task) - (x->task < y->task);
}

static inline int32_t top_node(const struct hy_tree_work *w, int32_t x) {
  return x >= 0 ? x : w->top[-2 - (int64_t)x].node;
}

static void build_links(struct hy_tree *t, struct hy_tree_work *w, struct links_job *job, struct hy_pool *pool) {
  const size_t n = t->n_part;
  const uint64_t *key = t->key;
  const int nt = hy_pool_size(pool);
  t->n_cell = 0;
  t->depth = 0;
  w->n_top = 0;
  w->n_task = 0;
  reserve_cells(t, 0);
  hy_pool_for(pool, n, 65536, more_none_body, job);
  if (n == 1) {
    t->root = 0;
    t->next[0] = HY_NONE;
    return;
  }
  /* 1. top cells, breadth first (a parent's index is below its children's) */
  size_t grain = nt > 1 ? n / (8 * (size_t)nt) : n;
  if (grain < 1024) grain = 1024;
  add_top(w, 0, n, 0);
  for (size_t i = 0; i < w->n_top; i++) {
    size_t lo = w->top[i].lo, hi = w->top[i].hi;
    int level = w->top[i].level;
    if (hi - lo <= grain || hy_tree_is_leaf(key, lo, hi, job->n_crit)) {
      add_task(w, i);
      continue;
    }
    if (level > t->depth) t->depth = level;
    size_t clo[8], chi[8];
    int nc = hy_tree_split_range(key, lo, hi, clo, chi);
    int32_t child[8] = {HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE};
    for (int j = 0; j < nc; j++)
      child[j] = (chi[j] - clo[j] == 1) ? (int32_t)clo[j] : (int32_t)(-2 - (int64_t)add_top(w, clo[j], chi[j], level + 1));
    w->top[i].nc = nc;
    memcpy(w->top[i].child, child, sizeof child);
  }
  /* 2. the subtrees, largest first */
  qsort(w->order, w->n_task, sizeof *w->order, cmp_task_order);
  atomic_store(&job->next_task, 0);
  hy_pool_for(pool, (size_t)nt, 1, task_build_body, job);
  /* 3. numbering in the serial build's order: a depth-first pass in which a
   * split cell numbers its child cells and a task takes the next block */
  size_t count = 0;
  w->top[0].node = (int32_t)(n + count++);
  size_t sp = 0;
  if (w->n_top > w->stack_cap) {
    w->stack_cap = w->n_top + w->n_top / 2;
    hy_free(w->stack);
    w->stack = hy_malloc("tree top stack", w->stack_cap, sizeof *w->stack);
  }
  w->stack[sp++] = 0;
  while (sp > 0) {
    struct top_cell *c = &w->top[w->stack[--sp]];
    if (c->task >= 0) {
      struct build_task *k = &w->task[c->task];
      k->base = count;
      count += k->n_cell;
      if (k->depth > t->depth) t->depth = k->depth;
      continue;
    }
    for (int j = 0; j < c->nc; j++)
      if (c->child[j] < 0) w->top[-2 - (int64_t)c->child[j]].node = (int32_t)(n + count++);
    for (int j = c->nc - 1; j >= 0; j--)
      if (c->child[j] < 0) w->stack[sp++] = (size_t)(-2 - (int64_t)c->child[j]);
  }
  if (count > (size_t)INT32_MAX - n) hy_die("tree: %zu cells exceed the 32-bit node index range", count);
  reserve_cells(t, count);
  t->n_cell = count;
  t->root = w->top[0].node;
  /* links of the top cells, parents first */
  t->next[t->root] = HY_NONE;
  for (size_t i = 0; i < w->n_top; i++) {
    const struct top_cell *c = &w->top[i];
    size_t ci = (size_t)c->node - n;
    t->first[ci] = c->lo;
    t->count[ci] = c->hi - c->lo;
    if (c->task >= 0) continue; /* linked by its task */
    int32_t after = t->next[c->node];
    t->more[c->node] = top_node(w, c->child[0]);
    for (int j = 0; j < c->nc; j++)
      t->next[top_node(w, c->child[j])] = j + 1 < c->nc ? top_node(w, c->child[j + 1]) : after;
  }
  /* 4. the subtrees in place */
  atomic_store(&job->next_task, 0);
  hy_pool_for(pool, (size_t)nt, 1, task_place_body, job);
}

float hy_tree_sink_scale(const double a[3], double alpha_g, double aerr_g, int capped) {
  const double amag = sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
  return (float)HY_MAC_REL_SCALE(amag, alpha_g, aerr_g, capped);
}

double hy_tree_mac_radius(double bmax, double b2, double a_err) {
  return HY_MAC_RADIUS(bmax, b2, a_err);
}

/* Moments of child node x of a cell: mass, position (particle or COM),
 * b_max and B2 (zero for a particle, the group's own for a pseudo-particle). */
static inline void child_moments(const struct hy_tree *t, const struct hy_part *p, int32_t x, double *m,
                                 const double **r, double *b, double *b2) {
  const size_t n = t->n_part;
  if (x < (int32_t)n) {
    *m = p->mass[x];
    *r = p->pos + 3 * (size_t)x;
    *b = p->grp ? p->grp[2 * (size_t)x + 1] : 0.0;
    *b2 = p->grp ? p->grp[2 * (size_t)x] : 0.0;
  } else {
    size_t c = (size_t)x - n;
    *m = t->mass[c];
    *r = t->cm + 3 * c;
    *b = t->bmax[c];
    *b2 = t->b2[c];
  }
}

/* Mass, COM and B2 (parallel-axis rule) of cell c from its children. */
static void cell_mass_b2(struct hy_tree *t, const struct hy_part *p, size_t c) {
  const int32_t node = (int32_t)(t->n_part + c);
  double m = 0.0, s[3] = {0.0, 0.0, 0.0}, mx, bx, b2x;
  const double *rx;
  for (int32_t x = t->more[node]; x != t->next[node]; x = t->next[x]) {
    child_moments(t, p, x, &mx, &rx, &bx, &b2x);
    m += mx;
    for (int d = 0; d < 3; d++) s[d] += mx * rx[d];
  }
  double *cm = t->cm + 3 * c;
  for (int d = 0; d < 3; d++) cm[d] = m > 0.0 ? s[d] / m : 0.0;
  double b2 = 0.0;
  for (int32_t x = t->more[node]; x != t->next[node]; x = t->next[x]) {
    child_moments(t, p, x, &mx, &rx, &bx, &b2x);
    double dx = rx[0] - cm[0], dy = rx[1] - cm[1], dz = rx[2] - cm[2];
    b2 += b2x + mx * (dx * dx + dy * dy + dz * dz);
  }
  t->mass[c] = m;
  t->b2[c] = b2;
}

/* Exact b_max of cell c over its particles (needs its COM); for
 * pseudo-particles (p->grp) the distance plus their own extent. */
static void cell_bmax_exact(struct hy_tree *t, const struct hy_part *p, size_t c) {
  const double *cm = t->cm + 3 * c, *pos = p->pos, *grp = p->grp;
  double m2 = 0.0;
  if (grp) {
    for (size_t i = t->first[c]; i < t->first[c] + t->count[c]; i++) {
      double dx = pos[3 * i] - cm[0], dy = pos[3 * i + 1] - cm[1], dz = pos[3 * i + 2] - cm[2];
      double r = sqrt(dx * dx + dy * dy + dz * dz) + grp[2 * i + 1];
      if (r > m2) m2 = r;
    }
    t->bmax[c] = m2;
    return;
  }
  for (size_t i = t->first[c]; i < t->first[c] + t->count[c]; i++) {
    double dx = pos[3 * i] - cm[0], dy = pos[3 * i + 1] - cm[1], dz = pos[3 * i + 2] - cm[2];
    double r2 = dx * dx + dy * dy + dz * dz;
    if (r2 > m2) m2 = r2;
  }
  t->bmax[c] = sqrt(m2);
}

/* The b_max bound max_child(b_child + |r_child - r_cm|) (children final). */
static void cell_bmax_bound(struct hy_tree *t, const struct hy_part *p, size_t c) {
  const int32_t node = (int32_t)(t->n_part + c);
  const double *cm = t->cm + 3 * c;
  double bound = 0.0, mx, bx, b2x;
  const double *rx;
  for (int32_t x = t->more[node]; x != t->next[node]; x = t->next[x]) {
    child_moments(t, p, x, &mx, &rx, &bx, &b2x);
    double dx = rx[0] - cm[0], dy = rx[1] - cm[1], dz = rx[2] - cm[2];
    double bb = bx + sqrt(dx * dx + dy * dy + dz * dz);
    if (bb > bound) bound = bb;
  }
  t->bmax[c] = bound;
}

/* Every moment of every cell of a task's subtree, bottom-up (children have
 * larger indices than their parent): mass, COM, B2, then b_max (exact up to
 * HY_BMAX_EXACT particles, else the bound from the children), then r_b. */
static void task_moments_body(void *arg, size_t b, size_t e, int tid) {
  (void)b;
  (void)e;
  (void)tid;
  struct links_job *j = arg;
  struct hy_tree_work *w = j->w;
  struct hy_tree *t = j->t;
  for (;;) {
    size_t i = atomic_fetch_add(&j->next_task, 1);
    if (i >= w->n_task) break;
    const struct build_task *k = &w->task[w->order[i].task];
    for (size_t c = k->base + k->n_cell; c-- > k->base;) {
      cell_mass_b2(t, j->p, c);
      if (t->count[c] <= HY_BMAX_EXACT)
        cell_bmax_exact(t, j->p, c);
      else
        cell_bmax_bound(t, j->p, c);
      t->rb[c] = hy_tree_mac_radius(t->bmax[c], t->b2[c], j->a_err);
    }
  }
}

/* exact b_max of the small top cells (their COM is final) */
static void top_bmax_body(void *arg, size_t b, size_t e, int tid) {
  (void)b;
  (void)e;
  (void)tid;
  struct links_job *j = arg;
  struct hy_tree_work *w = j->w;
  for (;;) {
    size_t i = atomic_fetch_add(&j->next_task, 1);
    if (i >= w->n_top) break;
    size_t c = (size_t)w->top[i].node - j->t->n_part;
    if (j->t->count[c] <= HY_BMAX_EXACT) cell_bmax_exact(j->t, j->p, c);
  }
}

/* Moments: the task subtrees in parallel, then the top cells bottom-up
 * (reverse breadth-first order). Every cell's values depend only on its
 * children's, so they do not depend on the order or the thread count. */
static void compute_moments(struct hy_tree *t, struct hy_tree_work *w, struct links_job *job, struct hy_pool *pool) {
  const int nt = hy_pool_size(pool);
  if (t->n_cell == 0) return;
  atomic_store(&job->next_task, 0);
  hy_pool_for(pool, (size_t)nt, 1, task_moments_body, job);
  const size_t n = t->n_part;
  for (size_t i = w->n_top; i-- > 0;) cell_mass_b2(t, job->p, (size_t)w->top[i].node - n);
  atomic_store(&job->next_task, 0);
  hy_pool_for(pool, (size_t)nt, 1, top_bmax_body, job);
  for (size_t i = w->n_top; i-- > 0;) {
    size_t c = (size_t)w->top[i].node - n;
    if (t->count[c] > HY_BMAX_EXACT) cell_bmax_bound(t, job->p, c);
    t->rb[c] = hy_tree_mac_radius(t->bmax[c], t->b2[c], job->a_err);
  }
}

int hy_tree_build(struct hy_tree *t, const struct hy_part *p, int n_crit, double a_err, struct hy_pool *pool,
                  struct hy_err *err) {
  if (p->n == 0) return hy_err_set(err, "tree: no particles");
  if (p->n != t->n_part) return hy_err_set(err, "tree: particle set changed since the key sort");
  if (n_crit < 1) n_crit = 1;
  t->a_err = a_err;
  t->pidx = NULL;
  struct hy_tree_work *w = hy_tree_work_of(t, hy_pool_size(pool));
  struct links_job job = {.t = t, .p = p, .w = w, .n_crit = n_crit, .a_err = a_err};
  atomic_init(&job.next_task, 0);
  double t0 = hy_wtime();
  build_links(t, w, &job, pool);
  double t1 = hy_wtime();
  compute_moments(t, w, &job, pool);
  t->times.links += t1 - t0;
  t->times.moments += hy_wtime() - t1;
  return 0;
}

static void work_free(struct hy_tree_work *w) {
  if (!w) return;
  hy_free(w->idx);
  hy_free(w->tidx);
  hy_free(w->tkey);
  hy_free(w->hist);
  hy_free(w->red);
  hy_free(w->red_key);
  hy_free(w->pscratch);
  for (size_t i = 0; i < w->task_cap; i++) {
    struct build_task *k = &w->task[i];
    hy_free(k->first);
    hy_free(k->count);
    hy_free(k->more);
    hy_free(k->next);
    hy_free(k->fix);
    hy_free(k->stack);
  }
  hy_free(w->task);
  hy_free(w->stack);
  hy_free(w->top);
  hy_free(w->order);
  hy_free(w->pt);
  hy_free(w->pt_cut);
  hy_free(w);
}

/* -------------------------------------------------------------- export */

struct export_job {
  const struct hy_tree *t;
  const struct hy_part *p;
  const double *origin;
  float *node;
};

static void export_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct export_job *j = arg;
  const struct hy_tree *t = j->t;
  const double *c0 = j->origin;
  const size_t n = t->n_part;
  for (size_t x = b; x < e; x++) {
    float *o = j->node + 8 * x;
    if (x < n) {
      const double *r = j->p->pos + 3 * x;
      o[0] = (float)(r[0] - c0[0]);
      o[1] = (float)(r[1] - c0[1]);
      o[2] = (float)(r[2] - c0[2]);
      o[3] = (float)j->p->mass[x];
      o[4] = 0.0f;
      o[5] = t->rel_alpha > 0 ? hy_tree_sink_scale(j->p->acc + 3 * x, t->rel_alpha, t->a_err, t->rel_capped) : 0.0f;
    } else {
      size_t c = x - n;
      const double *r = t->cm + 3 * c;
      o[0] = (float)(r[0] - c0[0]);
      o[1] = (float)(r[1] - c0[1]);
      o[2] = (float)(r[2] - c0[2]);
      o[3] = (float)t->mass[c];
      o[4] = t->rel_alpha > 0 ? (float)HY_MAC_WORD(t->bmax[c], t->b2[c], 0.0) : (float)(t->rb[c] * t->rb[c]);
      o[5] = (float)t->bmax[c];
    }
    o[6] = hy_tree_float_bits(t->next[x]);
    o[7] = hy_tree_float_bits(t->more[x]);
  }
}

void hy_tree_export_at(struct hy_tree *t, const struct hy_part *p, const double origin[3], float *node,
                       struct hy_pool *pool) {
  double t0 = hy_wtime();
  struct export_job j = {.t = t, .p = p, .origin = origin, .node = node};
  hy_pool_for(pool, hy_tree_n_nodes(t), 65536, export_body, &j);
  t->times.export_ += hy_wtime() - t0;
}

void hy_tree_export(struct hy_tree *t, const struct hy_part *p, float *node, struct hy_pool *pool) {
  hy_tree_export_at(t, p, t->centre, node, pool);
}

/* ------------------------------------------------ device-built trees */

struct records_job {
  struct hy_tree *t;
  const double *frame;
  const float *cells;
  const int32_t *next;
  const float *b2;
};

static void records_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct records_job *j = arg;
  struct hy_tree *t = j->t;
  const size_t n = t->n_part;
  for (size_t x = b; x < e; x++) {
    if (x < n) {
      t->next[x] = j->next[x];
      t->more[x] = HY_NONE;
      continue;
    }
    const size_t c = x - n;
    const float *o = j->cells + 8 * c;
    for (int d = 0; d < 3; d++) t->cm[3 * c + d] = (double)o[d] + j->frame[d];
    t->mass[c] = o[3];
    t->rb[c] = sqrt((double)o[4]);
    t->bmax[c] = o[5];
    t->b2[c] = j->b2[c];
    t->next[x] = hy_tree_int_bits(o[6]);
    t->more[x] = hy_tree_int_bits(o[7]);
  }
}

void hy_tree_from_records(struct hy_tree *t, size_t n_part, size_t n_cell, const double frame[3],
                          const float *cells, const int32_t *next, const float *b2, const uint32_t *pidx,
                          struct hy_pool *pool) {
  t->n_part = n_part;
  t->n_cell = 0;
  reserve_cells(t, n_cell);
  t->n_cell = n_cell;
  t->root = n_cell ? (int32_t)n_part : 0;
  t->pidx = pidx;
  struct records_job j = {.t = t, .frame = frame, .cells = cells, .next = next, .b2 = b2};
  hy_pool_for(pool, n_part + n_cell, 65536, records_body, &j);
}
