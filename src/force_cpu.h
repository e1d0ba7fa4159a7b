/* SPDX-License-Identifier: GPL-3.0-or-later
 * force_cpu.h: reference force computations on the host in double precision:
 * the same stackless tree walk as opencl/walk.cl (same MAC on the same
 * n_vec sink groups, same weights, same interaction counts), and an O(N^2)
 * direct sum with optional hard/soft split. Used by tests and force checks.
 * All results are for G = 1; callers scale by G. */
#ifndef HY_FORCE_CPU_H
#define HY_FORCE_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "part.h"
#include "threads.h"
#include "tree.h"

/** Walk configuration shared by the CPU and device walks. */
struct hy_walk_cfg {
  int mode;       /**< HY_WALK_FULL, _HARD, _SPLIT or _SOFTSTEP (hy_shared.h) */
  int want_pot;   /**< accumulate the potential (weight 1) */
  int nvec;       /**< sinks per group */
  double eps;     /**< Plummer softening */
  double r1, r2;  /**< split radii (unused for HY_WALK_FULL) */
  double n_ratio; /**< n, for HY_WALK_SOFTSTEP weights n - (n - 1) K */
  const double *sink_scale; /**< hy_cpu_walk only: NULL for the absolute criterion (the tree's r_b), else
                                 the relative criterion (hy_shared.h) with these sink scales c, one per sink */
  double *bound;  /**< hy_cpu_walk only, may be NULL: per sink, the sum over its accepted cells of the
                       monopole's error bound 3 B2 / (d^2 (d - b_max)^2) (G = 1, unsoftened; Warren &
                       Salmon 1993) */
};

/** Walk tree t (built over particles src) for n_sink sinks at sink_pos
 *  (absolute positions, 3 per sink). Sink j is tree particle self_base + j
 *  when self_base >= 0 (that pair is skipped), else no self pairs.
 *  acc0: weighted acceleration (HY_WALK_SPLIT: hard part), 3 per sink;
 *  acc1: soft part (HY_WALK_SPLIT only, else may be NULL);
 *  pot: potential per sink (want_pot; else may be NULL);
 *  counts[HY_COUNT_PP], counts[HY_COUNT_PC]: interactions (may be NULL). */
void hy_cpu_walk(const struct hy_tree *t, const struct hy_part *src, const double *sink_pos, size_t n_sink,
                 long self_base, const struct hy_walk_cfg *cfg, double *acc0, double *acc1, double *pot,
                 uint64_t counts[2], struct hy_pool *pool);

/** Direct sum over n_src sources for n_sink sinks (self pairs skipped as
 *  above). acc: total; acc_hard (optional): K-weighted part (needs r1 < r2);
 *  pot (optional): softened potential. */
void hy_cpu_direct(const double *src_pos, const double *src_mass, size_t n_src, const double *sink_pos,
                   size_t n_sink, long self_base, double eps, double r1, double r2, double *acc,
                   double *acc_hard, double *pot, struct hy_pool *pool);

#endif
