/* SPDX-License-Identifier: GPL-3.0-or-later
 * decomp_cost.c: the sample weights by measured cost
 * (hy_decomp_cost_update, decomp.h). */
#include "config.h"

#include "decomp.h"
#include "decomp_internal.h"

#include <math.h>

#include "alloc.h"

/* The factors are clamped to [1/2, 2]: a rank whose walks
 * were unusually slow once (a device shared for a moment) cannot give up
 * most of its domain in one decomposition. */
#define COST_CLAMP 2.0
static double cost_clamp(double f) { return f > COST_CLAMP ? COST_CLAMP : f < 1.0 / COST_CLAMP ? 1.0 / COST_CLAMP : f; }
/* Each rank's measured factor is averaged over the decompositions (weight
 * COST_AVG for the newest), and the factor in use is the first measured one,
 * then follows the average only when they differ by more than COST_BAND: the
 * walks' times scatter by a per cent or two from one Δt_s to the next, and a
 * factor that followed them would move the boundaries back and forth at
 * every decomposition, sending more particles each time. */
#define COST_AVG 0.3
#define COST_BAND 0.01

/* The measured factors of hy_decomp_cost_update before the clamp, the
 * average and the band: c[r] for the P ranks (0: no factor, the rank had no
 * time or no work) from each rank's hard-step seconds t[3 r], other seconds
 * t[3 r + 1] and work t[3 r + 2]; ab: room for 2 P doubles. */
static void cost_factors(const double *t, int P, double *c, double *ab) {
  /* a[r], b[r]: seconds per unit of work of either kind (a + b = 0: no
   * factor); W'_r the work a rank should get: for a ratio rho of the
   * slowest other time S to the slowest hard time H, W'_r = H u_r(rho),
   * u_r = min(1 / a_r, rho / b_r), with H from sum W'_r = sum W_r, so the
   * objective H + S is sum W (1 + rho) / sum u_r(rho): monotone between
   * consecutive ranks' breakpoints rho = b_r / a_r, falling below the first
   * and rising above the last, so its least value is at one of them (P^2
   * operations: 10^6 at 1000 ranks, once per decomposition) */
  double *a = ab, *b = ab + P, w_sum = 0.0;
  int both = 0, any = 0;
  for (int r = 0; r < P; r++) {
    const double w = t[3 * r + 2];
    c[r] = a[r] = b[r] = 0.0;
    if (!(w > 0) || !(t[3 * r] + t[3 * r + 1] > 0)) continue;
    a[r] = t[3 * r] / w;
    b[r] = t[3 * r + 1] / w;
    any = 1;
    both |= a[r] > 0 && b[r] > 0;
    w_sum += w;
  }
  if (!any) return;
#define U(r, q) fmin(a[r] > 0 ? 1.0 / a[r] : INFINITY, b[r] > 0 ? (q) / b[r] : INFINITY)
  double rho = -1.0; /* one kind only: equal time */
  if (both) {
    double best = INFINITY;
    for (int k = 0; k < P; k++) {
      if (!(a[k] > 0) || !(b[k] > 0)) continue;
      const double q = b[k] / a[k];
      double g = 0.0;
      for (int r = 0; r < P; r++)
        if (a[r] + b[r] > 0) g += U(r, q);
      if ((1.0 + q) / g < best) {
        best = (1.0 + q) / g;
        rho = q;
      }
    }
  }
  double cw = 0.0;
  for (int r = 0; r < P; r++) {
    if (!(a[r] + b[r] > 0)) continue;
    c[r] = rho < 0 ? a[r] + b[r] : 1.0 / U(r, rho);
    cw += c[r] * t[3 * r + 2];
  }
#undef U
  for (int r = 0; r < P; r++) c[r] /= cw / w_sum; /* over the mean: 1 where the work stays */
}

int hy_decomp_cost_update(struct hy_decomp *d, const double seconds[2], double work, struct hy_err *err) {
  int ret = 0;
  const int P = d->size;
  double mine[3];
  for (int k = 0; k < 2; k++) mine[k] = seconds[k] > 0 && isfinite(seconds[k]) ? seconds[k] : 0.0;
  mine[2] = work > 0 && isfinite(work) ? work : 0.0;
  double *all = hy_malloc("decomposition costs", 6 * (size_t)P, sizeof(double));
  double *c = all + 3 * (size_t)P;
  MPI_TRY(MPI_Allgather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, d->comm), "MPI_Allgather of the walk times");
  cost_factors(all, P, c, c + P);
  if (!d->cost_avg) {
    d->cost_avg = hy_malloc("decomposition costs", (size_t)P, sizeof(double));
    d->cost_all = hy_malloc("decomposition costs", (size_t)P, sizeof(double));
    for (int r = 0; r < P; r++) {
      d->cost_avg[r] = 0.0; /* none yet */
      d->cost_all[r] = 1.0;
    }
  }
  double m_w = 0.0, m_sum = 0.0;
  for (int r = 0; r < P; r++) {
    if (c[r] > 0 && isfinite(c[r])) {
      double f = cost_clamp(c[r]);
      /* averaged (geometric: a factor and its inverse weigh alike); the
       * first is taken as it is, the later ones within the band */
      const int first = !(d->cost_avg[r] > 0);
      if (!first) f = exp((1.0 - COST_AVG) * log(d->cost_avg[r]) + COST_AVG * log(f));
      d->cost_avg[r] = f;
      if (first || fabs(f / d->cost_all[r] - 1.0) > COST_BAND) d->cost_all[r] = f;
      m_sum += d->cost_all[r] * all[3 * r + 2];
      m_w += all[3 * r + 2];
    } else { /* no time or no work: the plain count, and the average starts again */
      d->cost_avg[r] = 0.0;
      d->cost_all[r] = 1.0;
    }
  }
  /* The factors in use over their mean weighted by the ranks' work, so that
   * the samples drawn stay SampleRate's in all: the ranks' factors are
   * averaged and held apart, so those in use need not keep the measured
   * factors' mean of 1 (2 pocl ranks ended at 0.87 and 0.88). Only their
   * ratios move the boundaries, so the band still holds them; a rank
   * without a factor keeps 1, the mean; clamped again. */
  const double m = m_w > 0 && m_sum > 0 ? m_sum / m_w : 1.0;
  d->cost_lo = INFINITY;
  d->cost_hi = -INFINITY;
  for (int r = 0; r < P; r++) {
    double f = d->cost_avg[r] > 0 ? d->cost_all[r] / m : 1.0;
    f = cost_clamp(f);
    if (r == d->rank) d->cost = f;
    d->cost_lo = fmin(d->cost_lo, f);
    d->cost_hi = fmax(d->cost_hi, f);
  }
done:
  hy_free(all);
  return ret;
}

double hy_decomp_cost(const struct hy_decomp *d, double *lo, double *hi) {
  if (lo) *lo = d->cost_lo;
  if (hi) *hi = d->cost_hi;
  return d->cost;
}
