/* SPDX-License-Identifier: GPL-3.0-or-later
 * tree_sort.c: see tree.h; Morton keys, the key cube (made robust against
 * escapers) and the key sort that reorders the particle set. Algorithms:
 * keys by bit interleaving, LSD radix sort with 11-bit digits (per-thread
 * histograms, constant digits skipped). Every phase runs over the pool and
 * gives bitwise the same keys and particle order for every thread count. */
#include "config.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "tree.h"
#include "tree_internal.h"

/* ---------------------------------------------------------------- keys */

uint64_t hy_tree_key(const double x[3], const double centre[3], double half) {
  const double scale = (double)(1u << HY_KEY_BITS) / (2.0 * half);
  const double lo[3] = {centre[0] - half, centre[1] - half, centre[2] - half};
  return hy_tree_grid_key(x[0], x[1], x[2], lo, scale);
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
 * every tree build, where a full sort of the sample would cost more. */
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

void hy_tree_sort_keys(struct hy_tree_work *w, uint64_t **key, uint32_t **idx, size_t n, uint64_t varying,
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

void hy_tree_reserve_particles(struct hy_tree *t, struct hy_tree_work *w, size_t n) {
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
  struct hy_tree_work *w = hy_tree_work_of(t, nt);
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
  struct hy_tree_work *w = hy_tree_work_of(t, nt);
  hy_tree_reserve_particles(t, w, n);
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
  hy_tree_sort_keys(w, &t->key, &w->idx, n, and_ ^ or_, pool);
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
