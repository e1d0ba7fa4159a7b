/* SPDX-License-Identifier: GPL-3.0-or-later
 * tree.c: see tree.h. Algorithms: Morton keys by bit interleaving, LSD radix
 * sort with 11-bit digits (per-thread histograms, constant digits skipped),
 * top-down build over sorted key ranges (Nakasato 2012; Nakasato et al.,
 * OTOO) with the subtrees below a serial top built in parallel, bottom-up
 * moments with the exact parallel-axis rule for B2, r_b from Warren & Salmon
 * (1993) as in Watanabe & Nakasato eq 5-6; trees of points for hard walks
 * (hy_tree_point_records) built breadth-first from the same sorted keys,
 * one generation per parallel pass. Every phase runs over the pool and
 * gives bitwise the same tree, node numbering and particle order for every
 * thread count (tests/test_tree checks 1 against 3 threads). */
#include "config.h"

#include "tree.h"
#include "trace.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hy_shared.h"

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

/* ---------------------------------------------------------------- keys */

/* Spread the low 21 bits of v so that bit i moves to bit 3i. */
static uint64_t spread3(uint64_t v) {
  HY_KEY_SPREAD3(v);
  return v;
}

static uint64_t grid_coord(double x, double lo, double scale) {
  const double max = (double)((1u << HY_KEY_BITS) - 1);
  double u = (x - lo) * scale;
  if (!(u >= 0.0)) return 0; /* also catches NaN */
  if (u >= max) return (uint64_t)max;
  return (uint64_t)u;
}

uint64_t hy_tree_key(const double x[3], const double centre[3], double half) {
  const double scale = (double)(1u << HY_KEY_BITS) / (2.0 * half);
  uint64_t ix = grid_coord(x[0], centre[0] - half, scale);
  uint64_t iy = grid_coord(x[1], centre[1] - half, scale);
  uint64_t iz = grid_coord(x[2], centre[2] - half, scale);
  return (spread3(ix) << 2) | (spread3(iy) << 1) | spread3(iz);
}

void hy_tree_cube(size_t n, double lo[3], double hi[3], double centre[3], double *half) {
  double h = 0.0;
  for (int d = 0; d < 3; d++) {
    if (n == 0) lo[d] = hi[d] = 0.0;
    centre[d] = 0.5 * (lo[d] + hi[d]);
    if (hi[d] - lo[d] > h) h = hi[d] - lo[d];
  }
  h *= 0.5;
  /* enlarge so that the extreme particles fall strictly inside */
  double mag = fmax(fmax(fabs(centre[0]), fabs(centre[1])), fabs(centre[2]));
  h = h * (1.0 + 1e-6) + 1e-12 * (mag + h) + 1e-300;
  *half = h;
}

static void range_of(const double *pos, size_t b, size_t e, double lo[3], double hi[3]) {
  for (int d = 0; d < 3; d++) {
    lo[d] = INFINITY;
    hi[d] = -INFINITY;
  }
  for (size_t i = b; i < e; i++)
    for (int d = 0; d < 3; d++) {
      double x = pos[3 * i + d];
      if (x < lo[d]) lo[d] = x;
      if (x > hi[d]) hi[d] = x;
    }
}

/* The k-th smallest of q[0..m) (k < m), partly reordering q: Hoare's
 * selection with the middle element as pivot, O(m) on average; it runs at
 * every tree build, where a full sort of the sample cost 0.15 ms. */
static double select_kth(double *q, size_t m, size_t k) {
  size_t lo = 0, hi = m - 1;
  while (lo < hi) {
    const double pivot = q[lo + (hi - lo) / 2];
    size_t i = lo, j = hi;
    for (;;) {
      while (q[i] < pivot) i++;
      while (q[j] > pivot) j--;
      if (i >= j) break;
      double t = q[i];
      q[i] = q[j];
      q[j] = t;
      i++;
      j--;
    }
    /* q[lo..j] <= pivot <= q[j+1..hi] */
    if (k <= j) hi = j;
    else lo = j + 1;
  }
  return q[k];
}

size_t hy_tree_sample(const double *pos, size_t n, double *sample) {
  const size_t s = n < HY_TREE_SAMPLE ? n : HY_TREE_SAMPLE;
  for (size_t j = 0; j < s; j++) { /* every (n/s)-th particle: independent of threads and chunks */
    const double *x = pos + 3 * hy_tree_sample_index(j, n, s);
    for (int d = 0; d < 3; d++) sample[3 * j + d] = x[d];
  }
  return s;
}

int hy_tree_bulk_box(const double *sample, size_t s, double qlo[3], double qhi[3]) {
  if (s < 2 || s > HY_TREE_SAMPLE) return 0;
  /* k values cut from each end: 1% of the sample, and at least the extreme
   * one of a small set (a few particles and one escaper) */
  const size_t k = s >= 400 ? s / 100 : s >= 4 ? 1 : 0;
  double q[HY_TREE_SAMPLE];
  for (int d = 0; d < 3; d++) {
    size_t m = 0;
    for (size_t j = 0; j < s; j++) {
      double x = sample[3 * j + d];
      if (isfinite(x)) q[m++] = x;
    }
    if (m < 2) return 0;
    size_t kk = k < m / 2 ? k : 0;
    qlo[d] = select_kth(q, m, kk);
    qhi[d] = select_kth(q, m, m - 1 - kk);
  }
  return 1;
}

int hy_tree_shrink_cube(const double qlo[3], const double qhi[3], double centre[3], double *half) {
  if (!(*half > 0.0) || !isfinite(*half)) return 0;
  double mid[3], r = 0.0;
  for (int d = 0; d < 3; d++) {
    if (!(qlo[d] <= qhi[d])) return 0; /* no bulk (an empty union) */
    mid[d] = 0.5 * (qlo[d] + qhi[d]);
    if (0.5 * (qhi[d] - qlo[d]) > r) r = 0.5 * (qhi[d] - qlo[d]);
  }
  /* the bulk is spread (r > 0) and the cube is much wider than it: shrink */
  if (!(r > 0.0) || *half <= HY_TREE_OUTLIER_FACTOR * r) return 0;
  double mag = fmax(fmax(fabs(mid[0]), fabs(mid[1])), fabs(mid[2]));
  double h = HY_TREE_OUTLIER_FACTOR * r;
  h = h * (1.0 + 1e-6) + 1e-12 * (mag + h) + 1e-300;
  if (h >= *half) return 0;
  for (int d = 0; d < 3; d++) centre[d] = mid[d];
  *half = h;
  return 1;
}

int hy_tree_robust_cube_sampled(const double *sample, size_t s, size_t n, double centre[3], double *half) {
  double qlo[3], qhi[3];
  if (n < 2 || !(*half > 0.0) || !isfinite(*half) || !hy_tree_bulk_box(sample, s, qlo, qhi)) return 0;
  return hy_tree_shrink_cube(qlo, qhi, centre, half);
}

int hy_tree_robust_cube(const double *pos, size_t n, double centre[3], double *half) {
  if (n < 2 || !(*half > 0.0) || !isfinite(*half)) return 0;
  double sample[3 * HY_TREE_SAMPLE];
  size_t s = hy_tree_sample(pos, n, sample);
  return hy_tree_robust_cube_sampled(sample, s, n, centre, half);
}

void hy_tree_bounds(const struct hy_part *p, double centre[3], double *half) {
  double lo[3], hi[3];
  range_of(p->pos, 0, p->n, lo, hi);
  hy_tree_cube(p->n, lo, hi, centre, half);
  hy_tree_robust_cube(p->pos, p->n, centre, half);
}

/* Scratch kept between builds, so that a build allocates nothing once the
 * sizes have settled. */
struct hy_tree_work {
  size_t cap;             /* particles the arrays below hold */
  uint32_t *idx, *tidx;   /* sort index (the permutation) and its radix buffer */
  uint64_t *tkey;         /* radix buffer for the keys */
  size_t *hist;           /* per-chunk radix histograms */
  size_t hist_cap;        /* entries in hist */
  double *red;            /* per-thread reductions: 6 doubles each */
  uint64_t *red_key;      /* per-thread key AND / OR / lowest ID with a non-finite position */
  int red_cap;            /* threads the reductions hold */
  void *pscratch;         /* hy_part_permute_pool buffer */
  size_t pscratch_bytes;
  struct build_task *task;  /* link build: subtrees built in parallel */
  size_t task_cap;
  struct top_cell *top;     /* link build: cells above the subtrees */
  size_t top_cap;
  size_t n_task, n_top;
  struct task_order *order; /* tasks, largest first */
  size_t *stack;            /* top cell stack */
  size_t stack_cap;
  struct pt_cell *pt;       /* point trees: the cells, generation by generation */
  size_t pt_cap;
  uint32_t *pt_cut;         /* point trees: per cell of a generation, its children (split_range) */
  size_t pt_cut_cap;        /* in cells */
};


static struct hy_tree_work *work_of(struct hy_tree *t, int nt) {
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

/* ---------------------------------------------------------- radix sort */

struct key_job {
  const struct hy_part *p;
  uint64_t *key;
  uint32_t *idx;
  const double *centre;
  double half;
  double *red;       /* bounds pass: lo[3], hi[3] per chunk */
  uint64_t *red_key; /* key pass: AND, OR, lowest non-finite ID per chunk */
};

static void bounds_body(void *arg, size_t b, size_t e, int tid) {
  struct key_job *j = arg;
  range_of(j->p->pos, b, e, j->red + 6 * tid, j->red + 6 * tid + 3);
}

static void key_body(void *arg, size_t b, size_t e, int tid) {
  struct key_job *j = arg;
  uint64_t and_ = ~(uint64_t)0, or_ = 0, bad = UINT64_MAX;
  for (size_t i = b; i < e; i++) {
    const double *x = j->p->pos + 3 * i;
    uint64_t k = hy_tree_key(x, j->centre, j->half);
    j->key[i] = k;
    j->idx[i] = (uint32_t)i;
    and_ &= k;
    or_ |= k;
    if (!(isfinite(x[0]) && isfinite(x[1]) && isfinite(x[2])) && j->p->id[i] < bad) bad = j->p->id[i];
  }
  j->red_key[3 * tid] = and_;
  j->red_key[3 * tid + 1] = or_;
  if (bad < j->red_key[3 * tid + 2]) j->red_key[3 * tid + 2] = bad;
}

/* 11-bit digits: 6 passes over 63-bit keys with histograms that stay in L1/L2;
 * digits in which all keys agree are skipped */
#define RADIX_BITS 11
#define RADIX_SIZE (1u << RADIX_BITS)

struct radix_job {
  const uint64_t *src_key;
  const uint32_t *src_idx;
  uint64_t *dst_key;
  uint32_t *dst_idx;
  size_t *hist; /* n_chunks x RADIX_SIZE */
  size_t chunk;
  size_t n;
  int shift;
};

static void radix_hist_body(void *arg, size_t b, size_t e, int tid) {
  (void)b;
  (void)e;
  struct radix_job *j = arg;
  size_t *h = j->hist + (size_t)tid * RADIX_SIZE;
  memset(h, 0, RADIX_SIZE * sizeof *h);
  size_t lo = (size_t)tid * j->chunk, hi = lo + j->chunk;
  if (hi > j->n) hi = j->n;
  const uint64_t *k = j->src_key;
  const int shift = j->shift;
  for (size_t i = lo; i < hi; i++) h[(k[i] >> shift) & (RADIX_SIZE - 1)]++;
}

static void radix_scatter_body(void *arg, size_t b, size_t e, int tid) {
  (void)b;
  (void)e;
  struct radix_job *j = arg;
  size_t *off = j->hist + (size_t)tid * RADIX_SIZE;
  size_t lo = (size_t)tid * j->chunk, hi = lo + j->chunk;
  if (hi > j->n) hi = j->n;
  const uint64_t *sk = j->src_key;
  const uint32_t *si = j->src_idx;
  uint64_t *dk = j->dst_key;
  uint32_t *di = j->dst_idx;
  const int shift = j->shift;
  for (size_t i = lo; i < hi; i++) {
    uint64_t k = sk[i];
    size_t o = off[(k >> shift) & (RADIX_SIZE - 1)]++;
    dk[o] = k;
    di[o] = si[i];
  }
}

static int cmp_key_idx(const void *a, const void *b) {
  const uint64_t *x = a, *y = b; /* pairs (key, idx) */
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  return (x[1] > y[1]) - (x[1] < y[1]);
}

/* Sort (key, idx) by key, stable in idx (so the result does not depend on the
 * thread count). varying: the bits in which not all keys agree. The result is
 * in *key / *idx; when it ends in the scratch buffers w->tkey / w->tidx (an odd
 * number of passes), the pointers are swapped instead of copying back, so all
 * four buffers must have the same capacity. */
static void sort_keys(struct hy_tree_work *w, uint64_t **key, uint32_t **idx, size_t n, uint64_t varying,
                      struct hy_pool *pool) {
  if (n < 4096) {
    uint64_t *pairs = hy_malloc("key sort", n, 2 * sizeof(uint64_t));
    for (size_t i = 0; i < n; i++) {
      pairs[2 * i] = (*key)[i];
      pairs[2 * i + 1] = (*idx)[i];
    }
    qsort(pairs, n, 2 * sizeof(uint64_t), cmp_key_idx);
    for (size_t i = 0; i < n; i++) {
      (*key)[i] = pairs[2 * i];
      (*idx)[i] = (uint32_t)pairs[2 * i + 1];
    }
    hy_free(pairs);
    return;
  }
  int nt = hy_pool_size(pool);
  size_t chunk = (n + (size_t)nt - 1) / (size_t)nt;
  if (chunk < 16384) chunk = 16384;
  int n_chunks = (int)((n + chunk - 1) / chunk);
  size_t hist_need = (size_t)n_chunks * RADIX_SIZE;
  if (hist_need > w->hist_cap) {
    hy_free(w->hist);
    w->hist = hy_malloc("key sort histogram", hist_need, sizeof(size_t));
    w->hist_cap = hist_need;
  }
  size_t *hist = w->hist;
  struct radix_job j = {.hist = hist, .chunk = chunk, .n = n};
  uint64_t *ck = *key, *ok = w->tkey;
  uint32_t *ci = *idx, *oi = w->tidx;
  for (int shift = 0; shift < 64; shift += RADIX_BITS) {
    if (((varying >> shift) & (RADIX_SIZE - 1)) == 0) continue; /* all keys agree in this digit */
    j.src_key = ck;
    j.src_idx = ci;
    j.dst_key = ok;
    j.dst_idx = oi;
    j.shift = shift;
    hy_pool_for(pool, (size_t)n_chunks, 1, radix_hist_body, &j);
    size_t run = 0;
    for (size_t d = 0; d < RADIX_SIZE; d++)
      for (int c = 0; c < n_chunks; c++) {
        size_t *h = hist + (size_t)c * RADIX_SIZE + d;
        size_t cnt = *h;
        *h = run;
        run += cnt;
      }
    hy_pool_for(pool, (size_t)n_chunks, 1, radix_scatter_body, &j);
    uint64_t *tk = ck;
    ck = ok;
    ok = tk;
    uint32_t *ti = ci;
    ci = oi;
    oi = ti;
  }
  *key = ck;
  *idx = ci;
  w->tkey = ok;
  w->tidx = oi;
}

/* t->key and the three sort buffers always share one capacity (sort_keys
 * swaps them). */
static void reserve_particles(struct hy_tree *t, struct hy_tree_work *w, size_t n) {
  if (n <= t->n_part_alloc && t->key && w->idx) return;
  size_t cap = n + n / 8 + 16;
  hy_free(t->key);
  hy_free(w->idx);
  hy_free(w->tidx);
  hy_free(w->tkey);
  t->key = hy_malloc("tree keys", cap, sizeof(uint64_t));
  w->tkey = hy_malloc("tree sort keys", cap, sizeof(uint64_t));
  w->idx = hy_malloc("tree sort index", cap, sizeof(uint32_t));
  w->tidx = hy_malloc("tree sort index", cap, sizeof(uint32_t));
  t->n_part_alloc = w->cap = cap;
}

struct ident_job {
  const uint32_t *idx;
  atomic_int moved;
};

static void ident_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct ident_job *j = arg;
  for (size_t i = b; i < e; i++)
    if (j->idx[i] != i) {
      atomic_store(&j->moved, 1);
      return;
    }
}

void hy_tree_ranges(struct hy_tree *t, const struct hy_part *p, struct hy_pool *pool, double lo[3], double hi[3]) {
  const int nt = hy_pool_size(pool);
  struct hy_tree_work *w = work_of(t, nt);
  struct key_job kj = {.p = p, .red = w->red};
  /* per-chunk ranges (min/max are exact, so they do not depend on the chunking) */
  for (int c = 0; c < nt; c++) range_of(NULL, 0, 0, w->red + 6 * c, w->red + 6 * c + 3);
  hy_pool_for(pool, p->n, 16384, bounds_body, &kj);
  range_of(NULL, 0, 0, lo, hi);
  for (int c = 0; c < nt; c++)
    for (int d = 0; d < 3; d++) {
      if (w->red[6 * c + d] < lo[d]) lo[d] = w->red[6 * c + d];
      if (w->red[6 * c + 3 + d] > hi[d]) hi[d] = w->red[6 * c + 3 + d];
    }
}

void hy_tree_sort(struct hy_tree *t, struct hy_part *p, struct hy_pool *pool) { hy_tree_sort_in(t, p, pool, NULL, 0.0, 0); }

void hy_tree_sort_in(struct hy_tree *t, struct hy_part *p, struct hy_pool *pool, const double centre[3], double half,
                     int shrunk) {
  size_t n = p->n;
  if (n > (size_t)INT32_MAX / 2) hy_die("tree: %zu particles exceed the 32-bit node index range", n);
  double t0 = hy_wtime();
  int nt = hy_pool_size(pool);
  struct hy_tree_work *w = work_of(t, nt);
  reserve_particles(t, w, n);
  t->n_part = n;
  struct key_job kj = {.p = p, .key = t->key, .idx = w->idx, .red = w->red, .red_key = w->red_key};
  if (centre) { /* a cube given by the caller (several ranks: one cube for all) */
    memcpy(t->centre, centre, sizeof t->centre);
    t->half = half;
    t->shrunk = shrunk;
  } else {
    double lo[3], hi[3];
    hy_tree_ranges(t, p, pool, lo, hi);
    hy_tree_cube(n, lo, hi, t->centre, &t->half);
    t->shrunk = hy_tree_robust_cube(p->pos, n, t->centre, &t->half);
  }
  kj.centre = t->centre;
  kj.half = t->half;
  for (int c = 0; c < nt; c++) {
    w->red_key[3 * c] = ~(uint64_t)0;
    w->red_key[3 * c + 1] = 0;
    w->red_key[3 * c + 2] = UINT64_MAX;
  }
  hy_pool_for(pool, n, 16384, key_body, &kj);
  uint64_t and_ = ~(uint64_t)0, or_ = 0;
  t->nonfinite_id = UINT64_MAX;
  for (int c = 0; c < nt; c++) {
    and_ &= w->red_key[3 * c];
    or_ |= w->red_key[3 * c + 1];
    if (w->red_key[3 * c + 2] < t->nonfinite_id) t->nonfinite_id = w->red_key[3 * c + 2];
  }
  double t1 = hy_wtime();
  sort_keys(w, &t->key, &w->idx, n, and_ ^ or_, pool);
  double t2 = hy_wtime();
  struct ident_job ij = {.idx = w->idx};
  atomic_init(&ij.moved, 0);
  hy_pool_for(pool, n, 65536, ident_body, &ij);
  if (atomic_load(&ij.moved)) hy_part_permute_pool(p, w->idx, pool, &w->pscratch, &w->pscratch_bytes);
  double t3 = hy_wtime();
  t->times.keys += t1 - t0;
  t->times.sort += t2 - t1;
  t->times.permute += t3 - t2;
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

/* Leaf bucket: fewer than n_crit particles, or all keys equal. */
static int is_leaf(const uint64_t *key, size_t lo, size_t hi, int n_crit) {
  return hi - lo < (size_t)n_crit || key[lo] == key[hi - 1];
}

/* Split a non-leaf range at the highest octal digit in which its keys differ:
 * the non-empty octants [clo, chi) in key order; returns their number. */
static int split_range(const uint64_t *key, size_t lo, size_t hi, size_t clo[8], size_t chi[8]) {
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
    if (is_leaf(key, lo, hi, n_crit)) {
      /* leaf bucket: particles lo..hi-1 are the children */
      *more = (int32_t)lo;
      for (size_t i = lo; i + 1 < hi; i++) next[i] = (int32_t)(i + 1);
      task_set_next(k, next, (int32_t)(hi - 1), after);
      continue;
    }
    size_t clo[8], chi[8];
    int32_t child[8] = {HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE, HY_NONE};
    int nc = split_range(key, lo, hi, clo, chi);
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
    if (hi - lo <= grain || is_leaf(key, lo, hi, job->n_crit)) {
      add_task(w, i);
      continue;
    }
    if (level > t->depth) t->depth = level;
    size_t clo[8], chi[8];
    int nc = split_range(key, lo, hi, clo, chi);
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

double hy_tree_mac_radius(double bmax, double b2, double a_err) {
  return 0.5 * bmax + sqrt(0.25 * bmax * bmax + sqrt(3.0 * b2 / a_err));
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
  struct hy_tree_work *w = work_of(t, hy_pool_size(pool));
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

static float as_float_bits(int32_t v) {
  float f;
  memcpy(&f, &v, sizeof f);
  return f;
}

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
      o[5] = 0.0f;
    } else {
      size_t c = x - n;
      const double *r = t->cm + 3 * c;
      o[0] = (float)(r[0] - c0[0]);
      o[1] = (float)(r[1] - c0[1]);
      o[2] = (float)(r[2] - c0[2]);
      o[3] = (float)t->mass[c];
      o[4] = (float)(t->rb[c] * t->rb[c]);
      o[5] = (float)t->bmax[c];
    }
    o[6] = as_float_bits(t->next[x]);
    o[7] = as_float_bits(t->more[x]);
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

static int32_t int_of_bits(float f) {
  int32_t v;
  memcpy(&v, &f, sizeof v);
  return v;
}

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
    t->next[x] = int_of_bits(o[6]);
    t->more[x] = int_of_bits(o[7]);
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

/* ------------------------------------------- trees of points, hard walks */

/* A cell of a point tree: its points [b, e) in key order, its node and the
 * node after its subtree. */
struct pt_cell {
  uint32_t b, e;
  int32_t node, next;
};

/* Per cell of a generation in pt_job.cut: the number of children (0: a
 * leaf bucket), then the first point of each (split_range's octants, which
 * are contiguous), then the index in the next generation of its first
 * child cell. */
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
    const uint64_t k = (spread3(grid_coord(x[0], j->lo[0], j->scale)) << 2) |
                       (spread3(grid_coord(x[1], j->lo[1], j->scale)) << 1) |
                       spread3(grid_coord(x[2], j->lo[2], j->scale));
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
    o[6] = as_float_bits(HY_NONE);
    o[7] = as_float_bits(HY_NONE);
  }
}

static void pt_split_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct pt_job *j = arg;
  for (size_t c = b; c < e; c++) {
    const struct pt_cell *pc = j->gen + c;
    uint32_t *cu = j->cut + PT_CUT * c;
    cu[0] = 0;
    if (is_leaf(j->key, pc->b, pc->e, j->n_crit)) continue;
    size_t clo[8], chi[8];
    const int nc = split_range(j->key, pc->b, pc->e, clo, chi);
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
      for (uint32_t i = pc->b; i + 1 < pc->e; i++) j->node[8 * (size_t)i + 6] = as_float_bits((int32_t)i + 1);
      j->node[8 * (size_t)(pc->e - 1) + 6] = as_float_bits(pc->next);
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
          j->node[8 * (size_t)child[k] + 6] = as_float_bits(after);
        else
          j->next_gen[slot[k]].next = after;
      }
      more = child[0];
    }
    o[6] = as_float_bits(pc->next);
    o[7] = as_float_bits(more);
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
    const int32_t first = int_of_bits(o[7]);
    double mass = 0.0, mx[3] = {0.0, 0.0, 0.0}, gx[3] = {0.0, 0.0, 0.0};
    size_t n = 0;
    for (int32_t x = first; x != pc->next; x = int_of_bits(node[8 * (size_t)x + 6])) {
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
      for (int32_t x = first; x != pc->next; x = int_of_bits(node[8 * (size_t)x + 6])) {
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

size_t hy_tree_point_records(struct hy_tree *t, const float *pos4, size_t m, const float box[6], int n_crit,
                             float *node, struct hy_pool *pool) {
  if (m == 0) return 0;
  if (m > (size_t)INT32_MAX / 2) hy_die("tree: %zu points exceed the 32-bit node index range", m);
  const int nt = hy_pool_size(pool);
  struct hy_tree_work *w = work_of(t, nt);
  reserve_particles(t, w, m);
  if (w->pt_cap < m) {
    hy_free(w->pt);
    w->pt_cap = m + m / 8 + 16;
    w->pt = hy_malloc("point tree cells", w->pt_cap, sizeof *w->pt);
  }
  const size_t gen_max = m / 2 + 1; /* a generation's cells hold two points or more each */
  if (w->pt_cut_cap < gen_max) {
    hy_free(w->pt_cut);
    w->pt_cut_cap = gen_max + gen_max / 8 + 16;
    w->pt_cut = hy_malloc("point tree splits", hy_size_mul_or_die(w->pt_cut_cap, PT_CUT, "point tree splits"),
                          sizeof(uint32_t));
  }
  /* the key cube: the box's lower corner and its longest side (all keys 0
   * if the box is empty, a point or not finite) */
  double side = 0.0;
  for (int d = 0; d < 3; d++) side = fmax(side, (double)box[3 + d] - (double)box[d]);
  struct pt_job j = {.pos4 = pos4, .node = node, .key = t->key, .idx = w->idx, .red = w->red_key,
                     .m = m, .n_crit = n_crit < 1 ? 1 : n_crit};
  for (int d = 0; d < 3; d++) j.lo[d] = isfinite(box[d]) ? box[d] : 0.0;
  j.scale = side > 0.0 && isfinite(side) ? (double)(1u << HY_KEY_BITS) / side : 0.0;
  double tt = hy_trace_t();
  for (int c = 0; c < nt; c++) {
    w->red_key[2 * c] = ~(uint64_t)0;
    w->red_key[2 * c + 1] = 0;
  }
  hy_pool_for(pool, m, 16384, pt_key_body, &j);
  uint64_t and_ = ~(uint64_t)0, or_ = 0;
  for (int c = 0; c < nt; c++) {
    and_ &= w->red_key[2 * c];
    or_ |= w->red_key[2 * c + 1];
  }
  sort_keys(w, &t->key, &w->idx, m, and_ ^ or_, pool);
  j.key = t->key;
  j.idx = w->idx;
  hy_pool_for(pool, m, 16384, pt_gather_body, &j);
  hy_trace(HY_TRACE_MAIN, "pt_sort", tt);
  tt = hy_trace_t();
  /* the cells, one generation at a time from the root (node m) */
  struct pt_cell *cell = w->pt;
  cell[0] = (struct pt_cell){.b = 0, .e = (uint32_t)m, .node = (int32_t)m, .next = HY_NONE};
  size_t gs[3 * HY_KEY_BITS + 3]; /* generation g: cells gs[g] .. gs[g + 1] - 1 */
  int n_gen = 0;
  gs[0] = 0;
  gs[1] = 1;
  while (gs[n_gen + 1] > gs[n_gen]) {
    const size_t n_c = gs[n_gen + 1] - gs[n_gen];
    if (n_gen + 2 >= (int)(sizeof gs / sizeof gs[0]) || n_c > gen_max)
      hy_die("internal error: point tree generation %d of %zu cells for %zu points", n_gen, n_c, m);
    j.gen = cell + gs[n_gen];
    j.cut = w->pt_cut;
    hy_pool_for(pool, n_c, 1024, pt_split_body, &j);
    size_t n_new = 0; /* the children of two points or more, numbered in order */
    for (size_t c = 0; c < n_c; c++) {
      uint32_t *cu = j.cut + PT_CUT * c;
      const struct pt_cell *pc = j.gen + c;
      cu[9] = (uint32_t)n_new;
      for (uint32_t k = 0; k < cu[0]; k++) n_new += (k + 1 < cu[0] ? cu[2 + k] : pc->e) - cu[1 + k] > 1;
    }
    if (gs[n_gen + 1] + n_new > w->pt_cap)
      hy_die("internal error: point tree of %zu points with more than %zu cells", m, w->pt_cap);
    j.next_gen = cell + gs[n_gen + 1];
    j.base = (int32_t)(m + gs[n_gen + 1]);
    hy_pool_for(pool, n_c, 1024, pt_link_body, &j);
    gs[n_gen + 2] = gs[n_gen + 1] + n_new;
    n_gen++;
  }
  hy_trace(HY_TRACE_MAIN, "pt_cells", tt);
  tt = hy_trace_t();
  for (int g = n_gen - 1; g >= 0; g--) {
    j.gen = cell + gs[g];
    hy_pool_for(pool, gs[g + 1] - gs[g], 1024, pt_moments_body, &j);
  }
  hy_trace(HY_TRACE_MAIN, "pt_moments", tt);
  return gs[n_gen];
}
