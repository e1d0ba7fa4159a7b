/* SPDX-License-Identifier: GPL-3.0-or-later
 * ic_uniform.c: a uniform-density sphere with isotropic Gaussian velocities
 * at a chosen virial ratio Q = 2K / |W| (Q = 0: cold collapse), in Henon
 * units where they exist. Knows nothing of files or devices.
 *
 * The model's potential energy is W = -3 G M^2 / (5 R). The velocities are
 * rescaled (after the centre-of-mass shift) so that the sample's kinetic
 * energy is exactly K = Q |W| / 2, hence E = K + W = W (1 - Q / 2). For
 * Q < 2 the radius R = 3 (4 - 2 Q) / 5 gives E = -1/4 (R = 2.4 for Q = 0,
 * 1.8 for Q = 0.5, 1.2 for virial equilibrium Q = 1); a system with Q >= 2 is
 * unbound and takes R = 6/5, so that W = -1/2 (virial radius 1).
 * All positions are drawn before any velocity, so the positions depend on
 * (n, seed) only, not on Q. */
#include "config.h"

#include <math.h>

#include <gsl/gsl_randist.h>

#include "ic.h"
#include "ic_internal.h"

int hy_ic_uniform(size_t n, uint64_t seed, double q, struct hy_part *p, struct hy_ic_info *info,
                  struct hy_err *err) {
  if (n == 0) return hy_err_set(err, "uniform: the number of particles must be positive");
  if (hy_ic_check_param(HY_IC_UNIFORM, q, err) != 0) return -1;
  gsl_rng *rng = hy_ic_rng(seed);
  if (!rng) return hy_err_set(err, "uniform: cannot allocate the GSL random number generator");
  const double rad = q < 2.0 ? 0.6 * (4.0 - 2.0 * q) : 1.2, w = -0.6 / rad;

  hy_part_resize(p, n);
  for (size_t i = 0; i < n; i++) {
    double x = 1.0 - gsl_rng_uniform(rng); /* (0, 1] */
    hy_ic_iso_vec(rng, rad * cbrt(x), p->pos + 3 * i);
  }
  for (size_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) p->vel[3 * i + c] = q > 0.0 ? gsl_ran_gaussian(rng, 1.0) : 0.0;
  gsl_rng_free(rng);
  hy_ic_finish(p, 1.0, 1.0);

  double k = 0.0;
  for (size_t i = 0; i < 3 * n; i++) k += p->vel[i] * p->vel[i];
  k *= 0.5 / (double)n;
  if (k > 0.0) {
    double s = sqrt(0.5 * q * fabs(w) / k);
    for (size_t i = 0; i < 3 * n; i++) p->vel[i] *= s;
  }
  if (info) {
    info->scale = rad;
    info->r_half = rad / cbrt(2.0);
    info->r_max = rad;
    info->w_pot = w;
  }
  return 0;
}
