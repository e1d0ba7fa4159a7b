/* SPDX-License-Identifier: GPL-3.0-or-later
 * ic_hernquist.c: the Hernquist (1990) sphere rho ~ 1 / (r (r + a)^3) in
 * Henon units, truncated at mass fraction HY_IC_HERNQUIST_MFRAC, with
 * isotropic velocities from its distribution function. Knows nothing of
 * files or devices.
 *
 * Sampling is done in model units G = a = 1 with total (untruncated) mass 1:
 * M(r) = r^2 / (1 + r)^2, relative potential psi(r) = 1 / (1 + r).
 *  - radii: X uniform in (0, mu], mu = HY_IC_HERNQUIST_MFRAC, and
 *    r = sqrt(X) / (1 - sqrt(X)), so r <= r_t = sqrt(mu) / (1 - sqrt(mu));
 *  - speeds: p(v) ~ v^2 f(psi - v^2 / 2) with the untruncated model's f
 *    (Hernquist 1990 eq. 17), by rejection (hy_ic_draw_speed). Particles keep
 *    the velocities of the full model; orbits may leave r_t.
 * Scaling to Henon units uses the analytic energies of the truncated sample
 * (particle mass mu / n): its potential energy
 *   W_t = -int_0^r_t M dM / r = -[1/6 - 1/U^2 + 4/(3 U^3) - 1/(2 U^4)],
 *   U = 1 + r_t,
 * and, from the Jeans equation (virial theorem with the surface term),
 *   2 K_t = -W_t + 4 pi r_t^3 P(r_t),  P(r) = rho sigma_r^2 = int_r^inf rho M / r'^2 dr'
 *         = [log1p(1/r) - sum_{k=2..5} (1 + r)^{1-k} / (k - 1)] / (2 pi).
 * Masses become 1/n (a factor 1/mu), lengths are multiplied by
 * lambda = -4 E_t / mu^2 and velocities by 1 / sqrt(mu lambda), which keeps
 * G = 1 and equilibrium and gives E = -1/4 for the continuous truncated model.
 * W_t is within 1e-3 of the untruncated -1/6, so lambda ~ 1 / (3 mu^2)
 * (a = 0.3400 for mu = 0.99 instead of 1/3 untruncated). */
#include "config.h"

#include <math.h>

#include "ic.h"
#include "ic_internal.h"

/* Hernquist (1990) eq. 17 without its constant factor, e = binding energy
 * in units of G M / a (0 < e < 1): increasing in e. */
static double hernquist_df(double e, const void *ctx) {
  (void)ctx;
  if (!(e > 0.0)) return 0.0;
  if (e >= 1.0) e = 1.0 - 1e-15;
  double q = sqrt(e), q2 = e, s = sqrt(1.0 - q2);
  double f = (3.0 * asin(q) + q * s * (1.0 - 2.0 * q2) * (8.0 * q2 * q2 - 8.0 * q2 - 3.0)) / pow(1.0 - q2, 2.5);
  return f > 0.0 ? f : 0.0; /* rounding for e -> 0, where f ~ e^{5/2} */
}

int hy_ic_hernquist(size_t n, uint64_t seed, struct hy_part *p, struct hy_ic_info *info, struct hy_err *err) {
  if (n == 0) return hy_err_set(err, "hernquist: the number of particles must be positive");
  gsl_rng *rng = hy_ic_rng(seed);
  if (!rng) return hy_err_set(err, "hernquist: cannot allocate the GSL random number generator");
  const double mu = HY_IC_HERNQUIST_MFRAC, st = sqrt(mu), rt = st / (1.0 - st);

  hy_part_resize(p, n);
  for (size_t i = 0; i < n; i++) {
    double x = mu * (1.0 - gsl_rng_uniform(rng)); /* (0, mu] */
    double s = sqrt(x), r = s / (1.0 - s);
    hy_ic_iso_vec(rng, r, p->pos + 3 * i);
    double v = hy_ic_draw_speed(rng, 1.0 / (1.0 + r), hernquist_df, NULL);
    hy_ic_iso_vec(rng, v, p->vel + 3 * i);
  }
  gsl_rng_free(rng);

  const double u = 1.0 + rt;
  const double w_t = -(1.0 / 6.0 - 1.0 / (u * u) + 4.0 / (3.0 * u * u * u) - 1.0 / (2.0 * u * u * u * u));
  double pt = log1p(1.0 / rt);
  for (int k = 2; k <= 5; k++) pt -= pow(u, 1.0 - k) / (k - 1.0);
  pt /= 2.0 * HY_IC_PI;
  const double e_t = 0.5 * w_t + 2.0 * HY_IC_PI * rt * rt * rt * pt; /* K_t + W_t */
  const double lambda = -4.0 * e_t / (mu * mu), vscale = 1.0 / sqrt(mu * lambda);
  hy_ic_finish(p, lambda, vscale);
  if (info) {
    double sh = sqrt(0.5 * mu);
    info->scale = lambda;
    info->r_half = lambda * sh / (1.0 - sh);
    info->r_max = lambda * rt;
    info->w_pot = w_t / (mu * mu * lambda);
  }
  return 0;
}
