/* SPDX-License-Identifier: GPL-3.0-or-later
 * decomp.h: the MPI domain decomposition (spec.md section 3; seeds-digest
 * 4.6-4.7). Owns the grid Px x Py x Pz of cuboid domains, the sampling of
 * particle positions, the multisection of the samples on rank 0 into
 * boundaries, their broadcast, and the particle exchange (MPI_Alltoall of
 * counts, MPI_Alltoallv of every particle field). It is the only module that
 * moves particles between ranks. It knows nothing of trees, LETs or devices.
 *
 * Errors: every function that communicates returns -1 with a message in
 * `err` on failure. Some failures are local to one rank (a bad argument, an
 * MPI error), so after a failed collective call the caller must end the run
 * (hy_die / MPI_Abort) rather than carry on. */
#ifndef HY_DECOMP_H
#define HY_DECOMP_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "part.h"
#include "threads.h"

struct hy_decomp;
struct hy_decomp_dev;

/** What one hy_decomp_exchange did, on this rank (and, where noted, across
 * all ranks). */
struct hy_decomp_stats {
  size_t n_before;            /**< local particles before the exchange */
  size_t n_after;             /**< local particles after the exchange */
  size_t n_samples_local;     /**< samples this rank sent to rank 0 */
  uint64_t n_samples_total;   /**< samples of all ranks (every rank knows it) */
  size_t n_sent;              /**< particles sent to other ranks */
  size_t n_recv;              /**< particles received from other ranks */
  uint64_t bytes_sent;        /**< particle bytes sent to other ranks [bytes] */
  uint64_t bytes_recv;        /**< particle bytes received from other ranks [bytes] */
  int rounds;                 /**< MPI_Alltoallv rounds used (> 1 when messages were chunked) */
  double load_max;            /**< max over ranks of n_before + weight_extra */
  double load_mean;           /**< mean over ranks of n_before + weight_extra */
  double n_after_max;         /**< max over ranks of n_after */
  double n_after_mean;        /**< mean over ranks of n_after */
  double time;                /**< wall time of the whole call on this rank [s] */
};

/** Near-cubic factorisation of P >= 1 into grid[0] >= grid[1] >= grid[2]
 * with product P: the one with the smallest ratio of largest to smallest
 * factor; ties go to the larger grid[0] (then the larger grid[1]).
 * E.g. 4 -> 2x2x1, 12 -> 3x2x2, 128 -> 8x4x4, 7 -> 7x1x1. */
void hy_decomp_factor(int P, int grid[3]);

/** Parse a DomainGrid value: "auto" (hy_decomp_factor) or "AxBxC" with
 * positive integers whose product is P. Returns 0, or -1 with a message such
 * as "DomainGrid 4x2x2 needs 16 MPI ranks, the run has 6". */
int hy_decomp_parse_grid(const char *s, int P, int grid[3], struct hy_err *err);

/** Collective over `comm`. Make a decomposition for the ranks of `comm`
 * (which is duplicated; the duplicate returns MPI errors instead of
 * aborting). grid: the Px x Py x Pz grid, whose product must be the size of
 * comm, or NULL for hy_decomp_factor. sample_rate: R_samp in (0, 1].
 * coef: boundary smoothing in (0, 1]: new boundaries = coef * computed +
 * (1 - coef) * previous (1 = off). seed: the sampling RNG of rank r is
 * seeded with seed + r. Returns NULL with a message on failure. No
 * boundaries exist until the first hy_decomp_exchange. */
struct hy_decomp *hy_decomp_create(MPI_Comm comm, const int grid[3], double sample_rate, double coef,
                                   unsigned long seed, struct hy_err *err);
/** Collective. Release the decomposition (NULL is allowed). */
void hy_decomp_free(struct hy_decomp *d);

/** Returned by hy_decomp_exchange on every rank when some rank holds a
 *  non-finite position: nothing was moved, err names the lowest such ID. */
#define HY_DECOMP_NONFINITE 1

/** Run the per-particle passes of hy_decomp_exchange (finite check,
 *  owners) on pool's threads (borrowed; NULL: the calling thread only). */
void hy_decomp_set_pool(struct hy_decomp *d, struct hy_pool *pool);

/** The ns sample indices that an exchange of n particles draws (ascending,
 * each < n; ns <= n): one from each of ns equal stretches of [0, n), so that
 * every index is drawn ns / n times on average. Uses and advances d's RNG. */
void hy_decomp_sample_indices(struct hy_decomp *d, size_t n, size_t ns, size_t *idx);

/** Collective. Decompose and exchange: draw
 * N_samp = min(N_local, max(1 if N_local > 0, round(c R_samp (N_local + weight_extra))))
 * (c: the cost factor of hy_decomp_cost_update, 1 without it)
 * samples (one from each of N_samp equal stretches of p's order: every
 * particle is drawn N_samp / N_local times on average), gather them on
 * rank 0, cut the domains at equal sample counts (x slabs, then y columns,
 * then z cuboids), broadcast
 * the boundaries and move every particle (all fields of struct hy_part) to
 * the rank whose cuboid holds it. Afterwards p holds this rank's particles:
 * first the n_after - n_recv that stayed (in their order, except that the
 * ones from beyond that count fill the places of leavers, so that only they
 * move), then the received ones, ordered by source rank, then by their order
 * on the source rank.
 * weight_extra >= 0: extra work of this rank, in particles (the hard-LET
 * items received at the last hard step; 0 the first time); a rank with more
 * work sends more samples and so gets a smaller domain.
 * st may be NULL. Returns 0, HY_DECOMP_NONFINITE (collective, see above), or
 * -1 (see above). */
int hy_decomp_exchange(struct hy_decomp *d, struct hy_part *p, double weight_extra, struct hy_decomp_stats *st,
                       struct hy_err *err);

/** Collective. Weights the next draws by cost (`DomainCost walktime`, after
 *  GreeM and Bonsai, which sample in proportion to measured time): every rank
 *  gives the seconds its walks took since the last call, in two kinds
 *  (seconds[0]: the hard steps' walks, seconds[1]: the others), and the
 *  work they did, N_local + N_hard as the draw counts it. With only one
 *  kind anywhere, each rank's sample count is then multiplied by its
 *  seconds per unit of work over all ranks' (sum of seconds / sum of work),
 *  so that the cuts at equal sample counts give domains of equal expected
 *  time where the cost per particle follows the region. With both kinds,
 *  the domains' expected work is chosen to minimise the slowest rank's
 *  hard time plus the slowest rank's other time (each sub-step waits for
 *  its slowest rank), and the factors are the inverse of that work per unit
 *  of the present work, over their mean. Clamped to [1/2, 2], averaged over
 *  the calls and held within 1 % (COST_AVG, COST_BAND in decomp.c). A rank
 *  with no time or no work, or ranks without any time, get the factor 1.
 *  Returns 0, or -1 with err set. */
int hy_decomp_cost_update(struct hy_decomp *d, const double seconds[2], double work, struct hy_err *err);
/** This rank's cost factor (1 until hy_decomp_cost_update); *lo and *hi
 *  (either may be NULL): the smallest and largest over the ranks. */
double hy_decomp_cost(const struct hy_decomp *d, double *lo, double *hi);

/** The sampling and cutting of the next exchange made ahead, in three
 *  steps that a caller can spread over work of its own (the integrator's
 *  hard steps, sim.c: the draw while the device walks the first hard step,
 *  the positions' gather queued ahead of the last one's walk, the cut while
 *  that walk runs): hy_decomp_pre_draw draws the sample
 *  indices for n particles with the exchange's count (no communication),
 *  hy_decomp_pre_sample takes their positions from p or from dev (p->n must
 *  still be n; with dev's gather_begin it only starts the device's gather,
 *  which pre_cut completes: the positions are those of pre_sample's time,
 *  and the source must stay valid until pre_cut), and hy_decomp_pre_cut (collective on the decomposition's
 *  own communicator: every rank calls it once) gathers them on rank 0,
 *  which cuts, and broadcasts the boundaries. The next hy_decomp_exchange(_dev)
 *  of n particles then moves the particles by those boundaries and skips
 *  its own sampling, so the domains follow the positions of pre_sample's
 *  time. If some sample is not finite, nothing is left pending and the
 *  exchange samples anew (and finds the bad position as it does). The
 *  steps must come in this order; pre_sample and pre_cut return 0 or -1
 *  with err set. */
void hy_decomp_pre_draw(struct hy_decomp *d, size_t n, double weight_extra);
int hy_decomp_pre_sample(struct hy_decomp *d, const struct hy_part *p, const struct hy_decomp_dev *dev,
                         struct hy_err *err);
int hy_decomp_pre_cut(struct hy_decomp *d, struct hy_err *err);
/** hy_decomp_pre_cut with rank 0's cut on a thread of its own: returns after
 *  the samples' gather (collective), while rank 0 cuts; the next
 *  hy_decomp_exchange(_dev) (on every rank) waits for that cut and
 *  broadcasts the boundaries first. The cut uses the pool of
 *  hy_decomp_set_pool, whose jobs from other threads wait their turn. */
int hy_decomp_pre_cut_begin(struct hy_decomp *d, struct hy_err *err);

/** Where hy_decomp_exchange_dev finds the positions and velocities: on a
 *  device that holds them (an OpenCL device with the particle state; the
 *  host's arrays hold current masses, IDs and types, but stale positions
 *  and velocities, which it does not read). Indices are those of p before
 *  the exchange; arrays returned are the source's, valid until its next
 *  call. Every function returns 0 or -1 with err set (a rank-local failure:
 *  the caller ends the run). */
struct hy_decomp_dev {
  void *ctx;
  /** The number of particles with a non-finite position; when there are
   *  some, also every position into p->pos (for the error's particle ID). */
  int (*check)(void *ctx, struct hy_part *p, size_t *n_bad, struct hy_err *err);
  /** The positions (and velocities, vel not NULL) of the m particles
   *  idx[0 .. m-1] into pos (vel), 3 doubles each. */
  int (*gather)(void *ctx, const size_t *idx, size_t m, double *pos, double *vel, struct hy_err *err);
  /** Optional (both or neither): `gather` of the positions in two halves,
   *  for hy_decomp_pre_sample: begin queues it behind the device's earlier
   *  work and returns (idx may be reused), end waits and writes pos. */
  int (*gather_begin)(void *ctx, const size_t *idx, size_t m, struct hy_err *err);
  int (*gather_end)(void *ctx, size_t m, double *pos, struct hy_err *err);
  /** Optional (both or neither): `gather` of the positions and velocities
   *  in two halves, for the leavers: leave_begin starts it beside the
   *  device's other work and returns (idx may be reused), leave_end waits
   *  and points *pv at the m positions (3 doubles each) followed by the m
   *  velocities, in the source's memory, valid until its next call. In
   *  between the exchange packs the leavers' other fields and fills the
   *  holes on the host. */
  int (*leave_begin)(void *ctx, const size_t *idx, size_t m, struct hy_err *err);
  int (*leave_end)(void *ctx, size_t m, const double **pv, struct hy_err *err);
  /** Every particle's rank (hy_decomp_owner with the boundaries of
   *  hy_decomp_bounds), kept for `lists`; count[r] of them for rank r
   *  (P entries). */
  int (*owners)(void *ctx, const struct hy_decomp *d, uint64_t *count, struct hy_err *err);
  /** After owners: the *n_out particles whose rank is not me, ascending,
   *  with their ranks; and the *n_beyond from n_keep on whose rank is me,
   *  ascending. */
  int (*lists)(void *ctx, int me, size_t n_keep, const size_t **leave, const int **leave_rank, size_t *n_out,
               const size_t **beyond, size_t *n_beyond, struct hy_err *err);
  /** Optional: once `lists` has said which particles stay, before the
   *  leavers are gathered, packed and exchanged: the device may begin work
   *  on the n_keep kept particles as they will be after the moves of
   *  hy_decomp_moved (holes[h] < n_keep, the leavers below n_keep in
   *  ascending order, filled from srcs[h] >= n_keep; m of them), provided
   *  it changes no particle that `gather` reads. */
  int (*kept)(void *ctx, const size_t *holes, const size_t *srcs, size_t m, size_t n_keep,
              struct hy_err *err);
};

/** Collective: hy_decomp_exchange with the positions and velocities on a
 *  device (dev): the same samples, boundaries, owners and moves, so the same
 *  result on every rank, whether the ranks use this or hy_decomp_exchange.
 *  Afterwards p's masses, IDs and types are in their new order, the
 *  received particles (from n_keep on) have their positions, velocities,
 *  masses, IDs and types (accelerations and potentials: those of the
 *  device's state are made anew by the next force; a device rank sends
 *  zeros and leaves its holes' stale copies), and below n_keep the
 *  positions and velocities are still stale: the device has to move its
 *  copies as hy_decomp_moved says. When fewer than two particles are left,
 *  the kept ones' positions and velocities are fetched from the device, so
 *  that p is complete. */
int hy_decomp_exchange_dev(struct hy_decomp *d, struct hy_part *p, double weight_extra,
                           const struct hy_decomp_dev *dev, struct hy_decomp_stats *st, struct hy_err *err);

/** The boundaries of the last exchange: (Px + 1) x boundaries, then Py + 1
 *  y boundaries per slab (slab by slab), then Pz + 1 z boundaries per
 *  column ((ix Py + iy) order); *n of them. NULL before the first exchange. */
const double *hy_decomp_bounds(const struct hy_decomp *d, size_t *n);

/** Where the last hy_decomp_exchange put particles: below *n_keep every
 *  particle is where it was, except at the *n_holes indices of *holes
 *  (ascending; borrowed until the next exchange), which the particle from
 *  index (*srcs)[h] >= *n_keep took; from *n_keep on every particle is a
 *  received one. Returns 0, or -1 when the last exchange did not finish
 *  (nothing is known). */
int hy_decomp_moved(const struct hy_decomp *d, const size_t **holes, const size_t **srcs, size_t *n_holes,
                    size_t *n_keep);

/** Rank whose cuboid holds the position x (a cuboid is closed below and open
 * above in each coordinate); -1 before the first exchange. */
int hy_decomp_owner(const struct hy_decomp *d, const double x[3]);
/** The cuboid of `rank`: lo <= x < hi per coordinate (outermost faces are
 * -inf / +inf). Returns -1 before the first exchange or for a bad rank. */
int hy_decomp_box(const struct hy_decomp *d, int rank, double lo[3], double hi[3]);
/** The grid Px, Py, Pz. */
void hy_decomp_grid(const struct hy_decomp *d, int grid[3]);
/** Rank r <-> grid cell (ix, iy, iz), r = (ix Py + iy) Pz + iz. */
int hy_decomp_rank_of(const struct hy_decomp *d, int ix, int iy, int iz);
void hy_decomp_cell_of(const struct hy_decomp *d, int rank, int *ix, int *iy, int *iz);
/** Cap on the bytes of one MPI_Alltoallv (default INT_MAX); larger exchanges
 * are sent in several rounds. For tests of the chunked path. */
void hy_decomp_set_max_msg_bytes(struct hy_decomp *d, size_t bytes);

/** Collective: from now on every particle travels in MPI messages, also
 *  between the ranks of one node (whose records otherwise go through a
 *  shared-memory window, unless NodeSharedMemory is no; see shm.h). For tests of
 *  the message path. */
void hy_decomp_use_messages(struct hy_decomp *d);

/** The ranks that share this rank's window (0: none, all in messages). */
int hy_decomp_node_ranks(const struct hy_decomp *d);

/** Tests: the multisection that rank 0 makes of the
 *  gathered samples, on this rank alone: cut the ns samples s (x, y, z
 *  each; s may be reordered, or copied into d's buffers in group order)
 *  into the grid's boundaries, written to bounds (hy_decomp_bounds' layout
 *  and count). par 0 keeps the x cuts on one thread; par 1 lets them run on
 *  the pool when there are at least 65 536 samples and 4 threads (the
 *  default). Returns 1 if they ran there, else 0. Not collective. */
int hy_decomp_cut_samples(struct hy_decomp *d, double *s, size_t ns, int par, double *bounds);

/** Restarts: the state that makes the next decompositions repeat exactly
 *  (boundaries and the sampling RNG of this rank). */
size_t hy_decomp_state_size(const struct hy_decomp *d);
void hy_decomp_state_save(const struct hy_decomp *d, void *buf);
/** Returns 0, or -1 when the blob does not fit this decomposition. */
int hy_decomp_state_load(struct hy_decomp *d, const void *buf, size_t bytes, struct hy_err *err);

#endif
