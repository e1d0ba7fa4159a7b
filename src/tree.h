/* SPDX-License-Identifier: GPL-3.0-or-later
 * tree.h: the Barnes-Hut octree on the host. Owns Morton keys and the key
 * sort (which reorders the particle set), the threaded more/next build with
 * n_crit leaf buckets, the cell moments (mass, centre of mass, B2, b_max and
 * the absolute-MAC radius r_b) and the export of the 32-byte device node
 * records (include/hy_shared.h), and the trees of points that hard walks
 * open entirely, written as such records directly. Uses no MPI and no
 * OpenCL. Implemented in tree.c (build, moments, export), tree_sort.c
 * (keys, key cube, sort) and tree_points.c (trees of points), which share
 * tree_internal.h.
 *
 * Node indices: particles 0 .. n_part-1 (in key order), cells n_part .. .
 * more[x] = first child (HY_NONE for particles); next[x] = next sibling, or
 * the parent's next for a last child, HY_NONE at the end of the walk. The
 * children of a cell c are exactly the chain more[c], next[...], ... up to
 * (excluding) next[c]. Leaf buckets (fewer than n_crit particles, or all
 * keys equal) have their particles as children; single-particle octants are
 * attached as particles; chains of single-child cells are collapsed. */
#ifndef HY_TREE_H
#define HY_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "hy_shared.h"
#include "log.h"
#include "part.h"
#include "threads.h"

/** Accumulated wall time of the host build phases [s] (hy_wtime). */
struct hy_tree_times {
  double keys;    /**< bounding cube and Morton keys */
  double sort;    /**< key sort */
  double permute; /**< reordering of the particle set */
  double links;   /**< more/next links and cell ranges */
  double moments; /**< mass, COM, B2, b_max, r_b */
  double export_; /**< device node records */
};

struct hy_tree {
  size_t n_part;       /**< particles (the first nodes) */
  size_t n_cell;       /**< cells */
  size_t n_part_alloc; /**< capacity of per-particle arrays */
  size_t n_cell_alloc; /**< capacity of per-cell arrays */
  size_t n_node_alloc; /**< capacity of per-node arrays (next, more) */
  int32_t root;        /**< root node (n_part if there are cells, else 0) */
  double centre[3];    /**< centre of the key cube [length]; also the origin of the device's float frame */
  double half;         /**< half side of the key cube [length] (hy_tree_robust_cube: far particles may lie outside) */
  double a_err;        /**< absolute MAC accuracy parameter used for r_b [acceleration / G] */
  double rel_alpha;    /**< > 0: the exported records are the relative criterion's (HY_MAC_WORD with
                            a_err 0), the particles' carrying their sink scales from p->acc with
                            alpha / G = rel_alpha (HY_MAC_REL_SCALE); set by the caller, kept by builds */
  int rel_capped;      /**< with rel_alpha: the scales of both criteria (HY_MAC_REL_SCALE's capped) */
  int depth;           /**< deepest cell level below the root */
  uint64_t *key;       /**< Morton key per particle, ascending */
  int shrunk;            /**< last sort: the key cube follows the bulk, not escapers (hy_tree_robust_cube) */
  uint64_t nonfinite_id; /**< last sort: lowest ID with a non-finite position (its key is clamped), else UINT64_MAX */
  int32_t *next;       /**< per node */
  int32_t *more;       /**< per node */
  double *cm;          /**< per cell: centre of mass, 3 values */
  double *mass;        /**< per cell: mass */
  double *b2;          /**< per cell: B2 = sum m |r_cm - r_i|^2 */
  double *bmax;        /**< per cell: b_max >= max |r_cm - r_i| (exact up to HY_BMAX_EXACT particles) */
  double *rb;          /**< per cell: MAC radius r_b (Watanabe & Nakasato eq 5) */
  size_t *first;       /**< per cell: first particle */
  size_t *count;       /**< per cell: number of particles */
  const uint32_t *pidx; /**< NULL, or (device-built trees, hy_tree_from_records) particle node x is
                            particle pidx[x] of the unsorted set; borrowed from the caller */
  struct hy_tree_times times; /**< accumulated phase times (never reset by the tree) */
  struct hy_tree_work *work;  /**< scratch kept between builds (tree_internal.h) */
};

/** Cells with at most this many particles get the exact b_max; larger cells
 *  (only the top levels, which every sink opens) the bound
 *  max_child(b_child + |r_child - r_cm|). */
#define HY_BMAX_EXACT 65536

void hy_tree_init(struct hy_tree *t);
void hy_tree_free(struct hy_tree *t);

/** Morton key of a position inside the cube (centre, half); positions outside
 *  (or NaN) are clamped to the cube's faces. */
uint64_t hy_tree_key(const double x[3], const double centre[3], double half);

/** The key cube of n particles whose coordinates span [lo, hi] per axis:
 *  centre and half side, enlarged slightly so that every key is valid (lo
 *  and hi are set to 0 when n is 0). */
void hy_tree_cube(size_t n, double lo[3], double hi[3], double centre[3], double *half);

/** Particles sampled (every (n/HY_TREE_SAMPLE)-th) to find the bulk's extent. */
#define HY_TREE_SAMPLE 1024
/** The key cube is shrunk to this many times the bulk's half-extent when the
 *  bounding cube is wider still (see hy_tree_robust_cube). */
#define HY_TREE_OUTLIER_FACTOR 256.0

/** Escapers: keys resolve 2^21 cells per axis of the cube, and the device
 *  works in float relative to a point in the key cube (src/force.c), so a few particles very far from
 *  the rest (one at 1e12 from a Plummer sphere of radius 1) would put the
 *  whole bulk into one key and round its positions away. Given the bounding
 *  cube (centre, half) of the n positions, this takes the 1st and 99th
 *  percentiles (below 400 particles: the 2nd smallest and 2nd largest
 *  values) of a strided sample per axis; when half exceeds
 *  HY_TREE_OUTLIER_FACTOR times the largest of their half-ranges r, the cube
 *  becomes the one of half-side HY_TREE_OUTLIER_FACTOR r centred on their
 *  midpoints. Particles outside it get keys clamped to its faces, which is
 *  harmless: cell moments, b_max and the MAC use the true positions. A cube
 *  that is not that much wider is left exactly as it is. Returns 1 if the cube
 *  was shrunk, else 0. */
int hy_tree_robust_cube(const double *pos, size_t n, double centre[3], double *half);

/** The strided sample of hy_tree_robust_cube: s = min(n, HY_TREE_SAMPLE)
 *  positions (xyz), the j-th being particle hy_tree_sample_index(j, n, s)
 *  = floor(j n / s). Returns s. */
size_t hy_tree_sample(const double *pos, size_t n, double *sample);
/** The particle of sample j of s among n (hy_tree_sample), ascending in j. */
static inline size_t hy_tree_sample_index(size_t j, size_t n, size_t s) {
  return (size_t)(((uint64_t)j * n) / s);
}

/** hy_tree_robust_cube from a sample taken elsewhere (the device state):
 *  returns 1 if the cube was shrunk, else 0. */
int hy_tree_robust_cube_sampled(const double *sample, size_t s, size_t n, double centre[3], double *half);

/** The two halves of hy_tree_robust_cube_sampled, for a cube shared by
 *  several ranks: the bulk's box [qlo, qhi] from a sample of s positions
 *  (returns 0 when the sample has no bulk: s < 2, or fewer than two finite
 *  values on an axis), and the shrink of the cube (centre, half) to a bulk
 *  box, the union of the ranks' boxes (returns 1 if shrunk; an empty box,
 *  qlo > qhi on an axis, shrinks nothing). */
int hy_tree_bulk_box(const double *sample, size_t s, double qlo[3], double qhi[3]);
int hy_tree_shrink_cube(const double qlo[3], const double qhi[3], double centre[3], double *half);

/** Bounding cube of the particles, enlarged slightly so every key is valid,
 *  then made robust against escapers (hy_tree_robust_cube). */
void hy_tree_bounds(const struct hy_part *p, double centre[3], double *half);

/** Compute the bounding cube and the keys, sort the keys and reorder the
 *  particle set into key order (hy_part_permute_pool). Scratch buffers stay
 *  in t->work, so repeated builds of a settled size allocate nothing. */
void hy_tree_sort(struct hy_tree *t, struct hy_part *p, struct hy_pool *pool);
/** hy_tree_sort in the key cube (centre, half) given by the caller, with
 *  t->shrunk = shrunk (centre NULL: the particles' own cube, hy_tree_sort). */
void hy_tree_sort_in(struct hy_tree *t, struct hy_part *p, struct hy_pool *pool, const double centre[3], double half,
                     int shrunk);
/** The coordinate ranges [lo, hi] of p's positions, on the pool's threads
 *  (t's scratch); lo = +inf, hi = -inf for no particles. */
void hy_tree_ranges(struct hy_tree *t, const struct hy_part *p, struct hy_pool *pool, double lo[3], double hi[3]);

/** Build the tree and its moments from a key-sorted particle set.
 *  Returns 0, or -1 with err set (too many particles for 32-bit node indices). */
int hy_tree_build(struct hy_tree *t, const struct hy_part *p, int n_crit, double a_err,
                  struct hy_pool *pool, struct hy_err *err);

/** Make t the host view of a tree built on the device (hy_cl_tree_download)
 *  for LET selection: n_part particle nodes and n_cell cells, root n_part;
 *  cells holds their node records (8 floats each, centres relative to
 *  frame), next the particle nodes' next links, b2 the cells' B2, pidx the
 *  particle each particle node stands for (kept by reference). Sets next,
 *  more, cm (absolute), mass, b2, b_max and r_b (from the records' r_b^2);
 *  not first, count, key or depth. */
void hy_tree_from_records(struct hy_tree *t, size_t n_part, size_t n_cell, const double frame[3],
                          const float *cells, const int32_t *next, const float *b2, const uint32_t *pidx,
                          struct hy_pool *pool);

/** The relative criterion's sink scale (HY_MAC_REL_SCALE) of a particle
 *  whose last total acceleration is a (G included), alpha_g = alpha / G,
 *  aerr_g = a_err / G, capped: both criteria; the same operations as
 *  opencl/state.cl's. */
float hy_tree_sink_scale(const double a[3], double alpha_g, double aerr_g, int capped);

/** Absolute-MAC radius r_b = b/2 + sqrt(b^2/4 + sqrt(3 B2 / a_err)). */
double hy_tree_mac_radius(double bmax, double b2, double a_err);

/** Number of nodes (particles + cells). */
static inline size_t hy_tree_n_nodes(const struct hy_tree *t) { return t->n_part + t->n_cell; }

/** Write the device node records (8 floats per node; layout in hy_shared.h),
 *  positions relative to t->centre. node must hold 8 * hy_tree_n_nodes floats. */
void hy_tree_export(struct hy_tree *t, const struct hy_part *p, float *node, struct hy_pool *pool);
/** As hy_tree_export, with positions relative to `origin` (a remote tree
 *  exported in the frame of the local tree, so both walks share the sinks). */
void hy_tree_export_at(struct hy_tree *t, const struct hy_part *p, const double origin[3], float *node,
                       struct hy_pool *pool);

/** The tree of m points (pos4: x, y, z, m as floats, in any order and
 *  frame) for hard walks that open every cell: node records (hy_shared.h)
 *  with the points in Morton order of the cube at box's lower corner (box:
 *  lo[3], hi[3], holding every point) as nodes 0 .. m-1, then the cells,
 *  root (node m) first and generation by generation. The cells are those of
 *  hy_tree_build (buckets below n_crit points or of equal keys, single-point
 *  octants attached as points, single-child chains collapsed); each has its
 *  centre of mass and mass, r_b^2 = FLT_MAX and a b_max that bounds the
 *  distance of every point below from that centre in float arithmetic
 *  (exact up to rounding for cells of up to 512 points, above that the
 *  bound max_child(b_child + |r_child - r_cm|)). node
 *  must hold 16 m floats (2 m nodes). t provides the scratch (its own tree is
 *  left undefined). Returns the number of cells (0 if m is 0). */
size_t hy_tree_point_records(struct hy_tree *t, const float *pos4, size_t m, const float box[6], int n_crit,
                             float *node, struct hy_pool *pool);

#endif
