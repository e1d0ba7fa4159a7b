/* SPDX-License-Identifier: GPL-3.0-or-later
 * let.h: locally essential trees between MPI ranks (Watanabe & Nakasato
 * eq 14 and 15, spec.md section 3). Owns the per-step exchange of every
 * rank's tight bounding box (MPI_Allgather), the selection of the items of
 * the local tree that each other rank needs (full LET: open a cell while the
 * distance from its centre of mass to the destination box is below r_b;
 * hard LET: in addition nothing farther than R2 from the box), and their
 * exchange (MPI_Alltoall of counts, then non-blocking point-to-point
 * messages) into one set of point masses from which the caller builds the
 * remote tree. Items are (x, y, z, m, B2, b_max) in double precision. All MPI calls are
 * made by the calling (main) thread. Knows nothing of OpenCL or files. */
#ifndef HY_LET_H
#define HY_LET_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "part.h"
#include "threads.h"
#include "tree.h"

/** Axis-aligned box; empty when lo > hi. */
struct hy_box {
  double lo[3], hi[3];
};

/** Per-call costs and sizes of this rank (reset by the caller). */
struct hy_let_stats {
  double t_boxes;      /**< tight box and MPI_Allgather [s] */
  double t_select;     /**< selection walks [s] */
  double t_comm;       /**< count exchange, message posting and waiting [s] */
  uint64_t n_sent;     /**< items sent to all ranks */
  uint64_t n_recv;     /**< items received from all ranks */
  uint64_t n_recv_hard; /**< full-LET calls: items a hard LET would have delivered (counted, not sent) */
  uint64_t bytes_sent;
  uint64_t bytes_recv;
};

struct hy_let;

/** Default of hy_let_set_full_open (and of the LETOpenFactor parameter,
 *  src/param_schema.c). */
#define HY_LET_FULL_OPEN 1.0

/** comm is borrowed (its error handler should be MPI_ERRORS_RETURN). */
struct hy_let *hy_let_create(MPI_Comm comm, struct hy_pool *pool);
void hy_let_free(struct hy_let *L);
/** The ranks of this rank's node whose LET items travel through a
 *  shared-memory window (MPI_Win_allocate_shared) instead of MPI messages,
 *  itself included; 0 when none do (no other rank on the node, or the
 *  process's hy_shm_set_use(0), NodeSharedMemory no, at the start). */
int hy_let_node_ranks(const struct hy_let *L);
/** Tests: HYTREE_TEST_LET_SMALL=1 (on every rank) makes the device's LET
 *  selection take one destination per pass from a room of one item
 *  (cl_let.c) and the node's shared-memory window no larger than the items
 *  at hand, so that a run of a few ranks takes the paths of many
 *  destinations and of regrowth. */
int hy_let_test_small(void);

/** Full (soft-step) LETs open a cell of the local tree when its distance
 *  to the destination box is below f r_b (f >= 1; Watanabe & Nakasato's eq
 *  14 is f = 1); hard LETs always use f = 1. */
void hy_let_set_full_open(struct hy_let *L, double f);
double hy_let_full_open(const struct hy_let *L);

/** The key cube of every rank's trees: the one that one rank would take for
 *  the whole set (hy_tree_cube of the union of the ranks' coordinate ranges
 *  [lo, hi], shrunk by hy_tree_shrink_cube to the union of their bulk boxes
 *  from hy_tree_bulk_box of their samples), so that the local trees are the
 *  one-rank tree's cells restricted to each rank's particles. Collective:
 *  one MPI_Allreduce of 12 doubles. n: this rank's particles (0: lo, hi
 *  and the sample are not read). Returns 1 if the cube was shrunk, 0 if
 *  not, -1 with err set on an MPI error. */
int hy_let_key_cube(const struct hy_let *L, size_t n, const double lo[3], const double hi[3], const double *sample,
                    size_t s, double centre[3], double *half, struct hy_err *err);

/** hy_let_key_cube of p's positions: their ranges (hy_tree_ranges, with t's
 *  scratch) and strided sample (hy_tree_sample). Collective. */
int hy_let_key_cube_of(const struct hy_let *L, struct hy_tree *t, const struct hy_part *p, struct hy_pool *pool,
                       double centre[3], double *half, struct hy_err *err);

/** Tight box of the particles (empty box for none). */
void hy_let_tight_box(const struct hy_part *p, struct hy_box *b);
/** Distance from x to the box (0 inside; infinite for an empty box). */
double hy_let_box_distance(const struct hy_box *b, const double x[3]);

/** Allgather every rank's tight box (mine, or when NULL the tight box of p)
 *  and frame: the origin of the single-precision positions of the trees
 *  that its received items go into (NULL: the origin), which senders make
 *  the items' positions relative to; and scale, the largest relative-
 *  criterion sink scale of its particles (HY_MAC_REL_SCALE; 0: the
 *  absolute criterion), which the selection for it opens cells with. */
int hy_let_boxes(struct hy_let *L, const struct hy_part *p, const struct hy_box *mine, const double frame[3],
                 double scale, struct hy_let_stats *st, struct hy_err *err);
/** Rank r's scale from the last hy_let_boxes. */
double hy_let_scale(const struct hy_let *L, int r);
/** The box of rank r from the last hy_let_boxes. */
const struct hy_box *hy_let_box(const struct hy_let *L, int r);
/** The frame of rank r from the last hy_let_boxes (3 doubles). */
const double *hy_let_frame(const struct hy_let *L, int r);

/** Select the items of the local tree t (over the key-ordered particles p)
 *  for every other rank against the boxes of the last hy_let_boxes: the full
 *  LET when hard = 0, the hard LET (cut at r2) when hard = 1. With hard = 0
 *  and count_hard = 1 the hard-LET sizes are also counted (and exchanged
 *  with the counts), for the records. t may be NULL when p is empty. */
void hy_let_select(struct hy_let *L, const struct hy_tree *t, const struct hy_part *p, int hard, double r2,
                   int count_hard, struct hy_let_stats *st);

/** Instead of hy_let_select: items selected elsewhere (on the device,
 *  hy_cl_let_select) for ranks rank[0 .. nb-1], destination-major in that
 *  order (HY_LET_ITEM floats each, hy_shared.h; positions relative to the
 *  destination's frame from hy_let_frame; borrowed until the next
 *  hy_let_exchange or hy_let_select), count[k] items and hcount[k] counted
 *  hard-LET items for rank[k]; every other rank gets none. */
void hy_let_set_selected(struct hy_let *L, const int *rank, size_t nb, const float *items, const size_t *count,
                         const uint64_t *hcount);

/** Exchange the selected items: remote is resized to the items received and
 *  gets their positions (this rank's frame of the last hy_let_boxes plus the
 *  items' float offsets), masses and group moments (remote->grp). */
int hy_let_exchange(struct hy_let *L, struct hy_part *remote, struct hy_let_stats *st, struct hy_err *err);

/** Where hy_let_exchange_floats puts the items: alloc returns room for m of
 *  them (4 floats each: position relative to origin, mass) and sets *grp to
 *  room for their B2 and b_max (2 floats each), or NULL with err set. */
struct hy_let_floats {
  const double *origin;
  float *(*alloc)(void *ctx, size_t m, float **grp, struct hy_err *err);
  void *ctx;
  double *range;  /**< optional (else NULL): lo[3], hi[3] of the finite positions relative to origin, in double
                       before rounding to float (as a pack of the remote particles finds them) */
  double *sample; /**< optional: room for HY_TREE_SAMPLE positions, hy_tree_sample of the remote particles' */
  /** optional: called as soon as items first .. first + count - 1 are in
   *  place (one source rank's run at a time, in order), so that the caller
   *  can move them on while the next are converted; returns 0, or -1 with
   *  err set (the exchange then fails) */
  int (*ready)(const struct hy_let_floats *fl, size_t first, size_t count, struct hy_err *err);
  size_t n;       /**< out: the items received */
  size_t n_sample; /**< out: the positions in sample */
  float *pos4;    /**< out: where alloc put them */
  float *grp;
};

/** hy_let_exchange straight into floats (out->alloc) relative to
 *  out->origin, the same floats as hy_let_exchange followed by packing the
 *  remote particles relative to that origin: (float)((frame + (double)x) -
 *  origin) for each coordinate x; remote is not touched. */
int hy_let_exchange_floats(struct hy_let *L, struct hy_let_floats *out, struct hy_let_stats *st, struct hy_err *err);



#endif
