/* SPDX-License-Identifier: GPL-3.0-or-later
 * decomp_internal.h: the domain decomposition's state and helpers shared by
 * its source files, decomp.c (set-up, grid, owner lookup, restarts),
 * decomp_cut.c (sampling, multisection, boundaries made ahead),
 * decomp_cost.c (sample weights by cost) and decomp_exchange.c (the particle
 * exchange). Private to them. */
#ifndef HY_DECOMP_INTERNAL_H
#define HY_DECOMP_INTERNAL_H

#include <mpi.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "decomp.h"
#include "log.h"
#include "shm.h"
#include "threads.h"

/* A buffer kept from one exchange to the next: grown when too small, never
 * shrunk. A freshly allocated buffer of several MB costs a page fault per
 * page at its first use, at every decomposition: with the samples, the
 * gathered samples and the records sent and received allocated anew, the
 * exchange spends most of its time in those faults. */
struct scratch {
  void *p;
  size_t bytes;
};

/* s's buffer with room for n + 1 items of `size` bytes. */
void *hy_decomp_scratch(struct scratch *s, size_t n, size_t size, const char *label);

struct hy_decomp {
  MPI_Comm comm;        /**< duplicate of the caller's communicator, MPI_ERRORS_RETURN */
  int rank, size;       /**< this rank and the number of ranks in comm */
  int grid[3];          /**< Px, Py, Pz */
  double sample_rate;   /**< R_samp */
  double cost;          /**< this rank's sample weight (hy_decomp_cost_update), 1 = off */
  double cost_lo, cost_hi; /**< the smallest and largest of every rank's cost */
  /** per rank: its measured factor averaged, and the factor held
   *  (hy_decomp_cost_update; in use over the mean) */
  double *cost_avg, *cost_all;
  double coef;          /**< boundary smoothing, 1 = off */
  int have_bounds;      /**< nonzero after the first exchange */
  size_t n_bounds;      /**< (Px+1) + Px (Py+1) + Px Py (Pz+1) */
  double *bounds;       /**< x bounds, then y bounds per slab, then z bounds per column */
  double *new_bounds;   /**< scratch for rank 0 (n_bounds) */
  gsl_rng *rng;         /**< sampling RNG, seeded with seed + rank */
  size_t max_msg_bytes; /**< cap on one MPI_Alltoallv, INT_MAX by default */
  struct hy_pool *pool; /**< threads for the per-particle passes (NULL: the calling thread) */
  int moved_ok;         /**< the last exchange finished: holes, n_holes and n_keep describe it */
  size_t *holes;        /**< indices below n_keep that a particle from beyond took */
  size_t *srcs;         /**< the index from n_keep on that each hole's particle came from */
  size_t n_holes, holes_cap, n_keep;
  /* buffers of every exchange, kept (see scratch; `leave` for the host path) */
  struct scratch samp, sidx, all, order, leave, sbuf, rbuf, lpv, bands;
  /* the next exchange's boundaries made ahead (hy_decomp_pre_*): the step
   * done last (PRE_NONE, PRE_DRAWN, PRE_SAMPLING: the device's gather
   * begun by pre_dev, PRE_SAMPLED, PRE_CUT: new_bounds hold them on every
   * rank), for pre_n particles with pre_ns samples of pre_total; only a
   * record of the caller's calls, whose order the integrator's schedule
   * sets (sim.c), and the exchange checks */
  int pre;
  const struct hy_decomp_dev *pre_dev;
  pthread_t cut_thread; /* rank 0, PRE_CUTTING: the thread that cuts (cut_main) */
  int cutting;          /* cut_thread runs and has to be joined */
  size_t pre_n, pre_ns;
  int par_split; /* the x cuts may use split_axis_par (0 only inside hy_decomp_cut_samples) */
  uint64_t pre_total;
  struct hy_shm *shm; /* the node's ranks: the leavers' records through a shared-memory window (shm.h) */
};

enum { PRE_NONE, PRE_DRAWN, PRE_SAMPLING, PRE_SAMPLED, PRE_CUTTING, PRE_CUT };

/* ------------------------------------------------------------ decomp.c */

/* The threads of d's pool (1 without one). */
int hy_decomp_n_threads(const struct hy_decomp *d);

/* body over [0, n) in chunks of at least `grain` on the pool's threads, or on this one */
void hy_decomp_for_all(const struct hy_decomp *d, size_t n, size_t grain, void (*body)(void *, size_t, size_t, int),
                       void *arg);

/* err set for a failed MPI call `what` (rc); returns -1. */
int hy_decomp_mpi_fail(struct hy_err *err, int rc, const char *what);

/* An MPI call whose failure sets ret (-1, err) and jumps to `done`. */
#define MPI_TRY(call, what)                      \
  do {                                           \
    int rc_ = (call);                            \
    if (rc_ != MPI_SUCCESS) {                    \
      ret = hy_decomp_mpi_fail(err, rc_, what);  \
      goto done;                                 \
    }                                            \
  } while (0)

/* Start of block k of nb over n items: the blocks' sizes differ by at most 1. */
static inline size_t hy_decomp_block_start(size_t n, size_t nb, size_t k) {
  const size_t q = n / nb, rem = n % nb;
  return k * q + (k < rem ? k : rem);
}

/* Bounds of slab ix: y bounds start at yb(ix), Py + 1 values. */
static inline size_t hy_decomp_yb_off(const struct hy_decomp *d, int ix) {
  return (size_t)d->grid[0] + 1 + (size_t)ix * ((size_t)d->grid[1] + 1);
}
/* Bounds of column (ix, iy): Pz + 1 values. */
static inline size_t hy_decomp_zb_off(const struct hy_decomp *d, int ix, int iy) {
  size_t base = (size_t)d->grid[0] + 1 + (size_t)d->grid[0] * ((size_t)d->grid[1] + 1);
  return base + ((size_t)ix * (size_t)d->grid[1] + (size_t)iy) * ((size_t)d->grid[2] + 1);
}

/* -------------------------------------------------------- decomp_cut.c */

/* The number of samples of an exchange of n particles, their indices into
 * d->sidx (and room for their positions in d->samp). */
size_t hy_decomp_draw_samples(struct hy_decomp *d, size_t n, double weight_extra);
/* The positions of the ns drawn samples into d->samp: from p, or from the
 * device (dev). Returns 0 or -1. */
int hy_decomp_gather_samples(struct hy_decomp *d, const struct hy_part *p, size_t ns,
                             const struct hy_decomp_dev *dev, struct hy_err *err);
/* Collective: every rank's ns samples cut on rank 0 into d->new_bounds on
 * every rank; *total_out: the samples of all ranks. Returns 0,
 * HY_DECOMP_NONFINITE (check only) or -1. */
int hy_decomp_cut_bounds(struct hy_decomp *d, size_t ns, int check, uint64_t *total_out, struct hy_err *err);
/* A device gather of samples begun ahead (PRE_SAMPLING), ended. */
int hy_decomp_end_pre_gather(struct hy_decomp *d, struct hy_err *err);
/* Collective: the end of hy_decomp_pre_cut_begin (PRE_CUT, or PRE_NONE). */
int hy_decomp_pre_cut_end(struct hy_decomp *d, struct hy_err *err);
/* Wait for rank 0's cut thread, if one runs. */
void hy_decomp_join_cut(struct hy_decomp *d);

#endif
