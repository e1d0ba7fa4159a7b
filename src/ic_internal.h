/* SPDX-License-Identifier: GPL-3.0-or-later
 * ic_internal.h: helpers shared by the initial-condition generators
 * (ic_common.c): seeding, isotropic directions, the speed sampler for
 * isotropic distribution functions and the final centre-of-mass shift.
 * Not part of the public interface (ic.h). */
#ifndef HY_IC_INTERNAL_H
#define HY_IC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <gsl/gsl_rng.h>

#include "part.h"

/** pi (M_PI is not part of C11 or of POSIX without XSI). */
#define HY_IC_PI 3.14159265358979323846

/** MT19937 seeded with seed (folded to 32 bits on 32-bit longs); NULL if
 *  GSL cannot allocate it. Free with gsl_rng_free. */
gsl_rng *hy_ic_rng(uint64_t seed);

/** Isotropic vector of length len. */
void hy_ic_iso_vec(gsl_rng *rng, double len, double out[3]);

/** Distribution function of the binding energy e (> 0), increasing in e. */
typedef double (*hy_ic_df_fn)(double e, const void *ctx);

/** Speed v in [0, sqrt(2 psi)] at a radius where the relative potential is
 *  psi > 0, drawn from p(v) ~ v^2 f(psi - v^2 / 2) by rejection under a
 *  piecewise-constant envelope: since f increases with e, on the bin
 *  [v_k, v_k+1] p(v) <= v_k+1^2 f(psi - v_k^2 / 2), a strict bound that stays
 *  tight where p is sharply peaked (near the centre of a cusp). */
double hy_ic_draw_speed(gsl_rng *rng, double psi, hy_ic_df_fn f, const void *ctx);

/** Masses 1/n, IDs 1..n, type 1, positions and velocities scaled by
 *  rscale and vscale and shifted to the centre-of-mass frame. */
void hy_ic_finish(struct hy_part *p, double rscale, double vscale);

#endif
