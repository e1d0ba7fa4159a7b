/* SPDX-License-Identifier: GPL-3.0-or-later
 * bench_ref.h: the force error that `hytree bench` reports, against a direct
 * sum in double precision (bench_ref.c). Knows nothing of runs or files. */
#ifndef HY_BENCH_REF_H
#define HY_BENCH_REF_H

#include <stddef.h>

#include "cl_engine.h"
#include "log.h"
#include "part.h"
#include "threads.h"

/** Relative force errors |a - a_ref| / |a_ref| over the sampled particles. */
struct hy_bench_err {
  size_t n_sampled; /**< particles sampled */
  double med;       /**< median */
  double p99;       /**< 99th percentile */
  double max;       /**< maximum */
  int on_host;      /**< the reference was summed on the host (device without double precision) */
};

/** The errors of the accelerations acc (3 per particle of p, G included)
 *  on min(n_sinks, p->n) particles spread evenly over p's order (particle
 *  floor(k n / m) for k < m), against a direct sum in double precision over
 *  all of p's particles (positions relative to their centre of mass,
 *  Plummer softening eps, constant G): on the device (hy_cl_direct_ref), or
 *  with a warning on the host when it has no double precision. Returns 0
 *  or -1 with err set. */
int hy_bench_force_error(struct hy_cl *cl, struct hy_pool *pool, const struct hy_part *p, const double *acc,
                         double G, double eps, size_t n_sinks, struct hy_bench_err *e, struct hy_err *err);

#endif
