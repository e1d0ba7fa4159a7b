/* SPDX-License-Identifier: GPL-3.0-or-later
 * diag.h: conserved quantities and virial ratio of the particle set, and the
 * one-line records of energy.csv. Sums over MPI ranks on request. Knows nothing of trees or devices. */
#ifndef HY_DIAG_H
#define HY_DIAG_H

#include <mpi.h>
#include <stdio.h>

#include "hy_shared.h"
#include "part.h"
#include "threads.h"

struct hy_diag {
  double time;
  double kin;     /**< K = sum m v^2 / 2 */
  double pot;     /**< W = sum m phi / 2 (phi from p->pot, G included) */
  double etot;    /**< K + W */
  double de_rel;  /**< |E - E0| / |E0| */
  double mom[3];  /**< total momentum */
  double ang[3];  /**< total angular momentum about the origin */
  double virial;  /**< 2K / |W| */
};

/** Compute the quantities of p at time t (p->pot must hold the potential);
 *  e0 is the reference energy for de_rel (pass 0 for the first call: then
 *  de_rel = 0). Sums are threaded with per-thread partial sums in double. */
void hy_diag_compute(const struct hy_part *p, double t, double e0, struct hy_pool *pool, struct hy_diag *d);
/** As hy_diag_compute, summed over the ranks of *comm (MPI_Allreduce) when
 *  comm is non-NULL; every rank gets the totals. Returns 0, or -1 when the
 *  reduction fails. */
int hy_diag_compute_comm(const struct hy_part *p, double t, double e0, struct hy_pool *pool, const MPI_Comm *comm,
                         struct hy_diag *d);

/** The sums behind a row (K, W, momentum[3], angular momentum[3]) of p's
 *  particles, threaded with per-thread partial sums in double. */
void hy_diag_sums(const struct hy_part *p, struct hy_pool *pool, double sums[HY_ENERGY_SUMS]);
/** The row of time t from this rank's sums (of hy_diag_sums, or of the
 *  device state's), summed over the ranks of *comm when comm is non-NULL.
 *  Returns 0, or -1 when the reduction fails. */
int hy_diag_from_sums(const double sums[HY_ENERGY_SUMS], double t, double e0, const MPI_Comm *comm,
                      struct hy_diag *d);

/** Header line and one row of energy.csv. */
void hy_diag_csv_header(FILE *f);
void hy_diag_csv_row(FILE *f, const struct hy_diag *d);

#endif
