/* SPDX-License-Identifier: GPL-3.0-or-later
 * ic_plummer.c: the Plummer sphere sampler (Aarseth, Henon & Wielen 1974) in
 * Henon units. Random numbers come from GSL's MT19937 (ic_common.c) so that
 * a given (n, seed) always gives the same particles. Knows nothing of files
 * or devices. */
#include "config.h"

#include <math.h>

#include "ic.h"
#include "ic_internal.h"

int hy_ic_plummer(size_t n, uint64_t seed, struct hy_part *p, struct hy_err *err) {
  if (n == 0) return hy_err_set(err, "plummer: the number of particles must be positive");
  gsl_rng *rng = hy_ic_rng(seed);
  if (!rng) return hy_err_set(err, "plummer: cannot allocate the GSL random number generator");

  /* Henon units: G = M = 1, E = -1/4 gives Plummer scale a = 3 pi / 16.
   * Sampling is done in Plummer units (a = 1, v_esc = sqrt(2) (1+r^2)^-1/4)
   * and scaled: r *= a, v /= sqrt(a). */
  const double a = 3.0 * HY_IC_PI / 16.0, vscale = 1.0 / sqrt(a);
  hy_part_resize(p, n);
  const double m = 1.0 / (double)n;
  double cm[3] = {0, 0, 0}, cv[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    /* X in (0, 0.999]: gsl_rng_uniform is in [0, 1). */
    double x = 0.999 * (1.0 - gsl_rng_uniform(rng));
    double r = 1.0 / sqrt(pow(x, -2.0 / 3.0) - 1.0);
    hy_ic_iso_vec(rng, r * a, p->pos + 3 * i);
    /* von Neumann rejection for g(q) = q^2 (1 - q^2)^{7/2} <= 0.1 on [0, 1]. */
    double q, y;
    do {
      q = gsl_rng_uniform(rng);
      y = 0.1 * gsl_rng_uniform(rng);
    } while (y > q * q * pow(1.0 - q * q, 3.5));
    double v = q * sqrt(2.0) * pow(1.0 + r * r, -0.25);
    hy_ic_iso_vec(rng, v * vscale, p->vel + 3 * i);
    p->mass[i] = m;
    p->id[i] = (uint64_t)i + 1;
    p->type[i] = 1;
    for (int c = 0; c < 3; c++) {
      cm[c] += m * p->pos[3 * i + c];
      cv[c] += m * p->vel[3 * i + c];
    }
  }
  gsl_rng_free(rng);
  for (size_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) {
      p->pos[3 * i + c] -= cm[c];
      p->vel[3 * i + c] -= cv[c];
    }
  return 0;
}
