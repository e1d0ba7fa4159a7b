/* SPDX-License-Identifier: GPL-3.0-or-later
 * tree_internal.h: what the files of the host tree module share: tree.c
 * (the octree build, moments, export), tree_sort.c (Morton keys, the key
 * cube and the key sort) and tree_points.c (the trees of points of hard
 * walks). Not part of the public interface (tree.h). */
#ifndef HY_TREE_INTERNAL_H
#define HY_TREE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hy_shared.h"
#include "threads.h"
#include "tree.h"

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
  uint32_t *pt_cut;         /* point trees: per cell of a generation, its children (hy_tree_split_range) */
  size_t pt_cut_cap;        /* in cells */
};

/** t's scratch, made on first use, with reductions for nt threads. */
struct hy_tree_work *hy_tree_work_of(struct hy_tree *t, int nt);

/** Room for n particles in t->key and the sort buffers of w, which always
 *  share one capacity (hy_tree_sort_keys swaps them). */
void hy_tree_reserve_particles(struct hy_tree *t, struct hy_tree_work *w, size_t n);

/** Sort (key, idx) by key, stable in idx (so the result does not depend on
 *  the thread count). varying: the bits in which not all keys agree. The
 *  result is in *key / *idx; when it ends in the scratch buffers w->tkey /
 *  w->tidx (an odd number of passes), the pointers are swapped instead of
 *  copying back, so all four buffers must have the same capacity. */
void hy_tree_sort_keys(struct hy_tree_work *w, uint64_t **key, uint32_t **idx, size_t n, uint64_t varying,
                       struct hy_pool *pool);

/** Split a non-leaf range of sorted keys at the highest octal digit in
 *  which its keys differ: the non-empty octants [clo, chi) in key order;
 *  returns their number. */
int hy_tree_split_range(const uint64_t *key, size_t lo, size_t hi, size_t clo[8], size_t chi[8]);

/** Leaf bucket: fewer than n_crit particles, or all keys equal. */
static inline int hy_tree_is_leaf(const uint64_t *key, size_t lo, size_t hi, int n_crit) {
  return hi - lo < (size_t)n_crit || key[lo] == key[hi - 1];
}

/** Spread the low 21 bits of v so that bit i moves to bit 3i. */
static inline uint64_t hy_tree_spread3(uint64_t v) {
  HY_KEY_SPREAD3(v);
  return v;
}

/** The grid cell of x along an axis from lo, scale cells per unit length,
 *  clamped to the 2^HY_KEY_BITS cells (NaN to the first). */
static inline uint64_t hy_tree_grid_coord(double x, double lo, double scale) {
  uint64_t g;
  HY_KEY_GRID(g, double, x, lo, scale);
  return g;
}

/** The Morton key of (x, y, z) on the grid from lo[3] with scale cells per
 *  unit length. */
static inline uint64_t hy_tree_grid_key(double x, double y, double z, const double lo[3], double scale) {
  return (hy_tree_spread3(hy_tree_grid_coord(x, lo[0], scale)) << 2) |
         (hy_tree_spread3(hy_tree_grid_coord(y, lo[1], scale)) << 1) |
         hy_tree_spread3(hy_tree_grid_coord(z, lo[2], scale));
}

/** The float whose bits are v (the links of a node record). */
static inline float hy_tree_float_bits(int32_t v) {
  float f;
  memcpy(&f, &v, sizeof f);
  return f;
}

/** The int32 whose bits are f. */
static inline int32_t hy_tree_int_bits(float f) {
  int32_t v;
  memcpy(&v, &f, sizeof v);
  return v;
}

#endif
