/* SPDX-License-Identifier: GPL-3.0-or-later
 * ic.h: built-in initial-condition generators (GSL random numbers) and the
 * parser of their generator strings ("plummer:N[:seed]", "king:N[:seed[:W0]]",
 * ...). Knows nothing of files, trees or devices; `hytree ic` wraps these.
 * Every generator works in Henon units (G = M = 1, E = -1/4), gives equal
 * masses 1/n, IDs 1..n and type 1, shifts to the centre-of-mass frame
 * (positions and velocities) and is reproducible for a given (n, seed[, ...]).
 * The models and their truncation and scaling are described in doc/ic.md. */
#ifndef HY_IC_H
#define HY_IC_H

#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "part.h"

/** The built-in models. */
enum hy_ic_model {
  HY_IC_PLUMMER = 1, /**< Plummer sphere */
  HY_IC_HERNQUIST,   /**< Hernquist (1990) sphere, truncated at mass fraction HY_IC_HERNQUIST_MFRAC */
  HY_IC_KING,        /**< King (1966) model with central potential W0 */
  HY_IC_UNIFORM      /**< uniform-density sphere with virial ratio Q */
};

/** Mass fraction of the Hernquist model that is sampled (r <= r_max). */
#define HY_IC_HERNQUIST_MFRAC 0.99
/** King: default and largest W0 (the range is 0 < W0 <= HY_IC_KING_W0_MAX). */
#define HY_IC_KING_W0_DEFAULT 6.0
#define HY_IC_KING_W0_MAX 16.0
/** Uniform sphere: default virial ratio Q = 2K/|W| (0 <= Q; 0: cold collapse). */
#define HY_IC_UNIFORM_Q_DEFAULT 0.5

/** Properties of the sampled model (before the centre-of-mass shift), in
 *  Henon units; filled by the generators when the pointer is not NULL. */
struct hy_ic_info {
  double r_half; /**< half-mass radius of the sampled (truncated) model [length] */
  double r_max;  /**< radius beyond which no particle is placed [length] */
  double scale;  /**< model scale radius: Plummer/Hernquist a, King r_0, uniform R [length] */
  double w_pot;  /**< potential energy W of the continuous model (Plummer: untruncated) [energy] */
};

/** A parsed generator string. */
struct hy_ic_spec {
  enum hy_ic_model model; /**< which generator */
  size_t n;               /**< number of particles (> 0) */
  uint64_t seed;          /**< random seed (default 1) */
  double param;           /**< King: W0; uniform: Q; unused (0) otherwise */
};

/** Plummer sphere in Hénon units (G = M = 1, E = -1/4 for the untruncated
 *  model, scale a = 3 pi / 16) by the Aarseth-Henon-Wielen (1974) method,
 *  mass fraction truncated at 0.999, isotropic velocities from
 *  g(q) = q^2 (1 - q^2)^{7/2}, shifted to the centre-of-mass frame.
 *  Equal masses 1/n, IDs 1..n, type 1. Reproducible for a given (n, seed).
 *  Returns 0 or -1 with err set (n == 0). */
int hy_ic_plummer(size_t n, uint64_t seed, struct hy_part *p, struct hy_err *err);

/** Hernquist (1990) sphere rho ~ 1 / (r (r + a)^3): radii from the inverse of
 *  M(r) = r^2 / (r + a)^2 truncated at mass fraction HY_IC_HERNQUIST_MFRAC,
 *  isotropic velocities from the model's f(E) (Hernquist 1990 eq. 17) by
 *  rejection in speed. Scaled so the truncated model has M = 1 and, from its
 *  analytic kinetic and potential energies, E = -1/4 (a = 0.3400).
 *  info may be NULL. Returns 0 or -1 with err set (n == 0). */
int hy_ic_hernquist(size_t n, uint64_t seed, struct hy_part *p, struct hy_ic_info *info,
                    struct hy_err *err);

/** King (1966) model with dimensionless central potential w0 in
 *  (0, HY_IC_KING_W0_MAX]: Poisson's equation solved with GSL's rk8pd
 *  (relative error 1e-12) out to the tidal radius, radii from the cumulative
 *  mass, isotropic velocities from the lowered isothermal distribution
 *  f ~ exp(e / sigma^2) - 1 of the relative energy e = Psi - v^2 / 2 > 0 by
 *  rejection in speed. Scaled to M = 1 and E = W / 2 = -1/4, W being the
 *  model's potential energy (integrated with the ODE).
 *  info may be NULL. Returns 0 or -1 with err set (n == 0, w0 out of range,
 *  ODE solver failure). */
int hy_ic_king(size_t n, uint64_t seed, double w0, struct hy_part *p, struct hy_ic_info *info,
               struct hy_err *err);

/** Uniform-density sphere of radius R with isotropic Gaussian velocities
 *  rescaled so that K = q |W| / 2 exactly, W = -3 / (5 R) being the model's
 *  potential energy; R = (12 - 6 q) / 5 gives E = -1/4 for q < 2
 *  (R = 2.4 for a cold collapse, q = 0), R = 6/5 (W = -1/2) for q >= 2.
 *  Positions depend on (n, seed) only, not on q. info may be NULL.
 *  Returns 0 or -1 with err set (n == 0, q < 0 or not finite). */
int hy_ic_uniform(size_t n, uint64_t seed, double q, struct hy_part *p, struct hy_ic_info *info,
                  struct hy_err *err);

/** Name of a model ("plummer", ...), or "?" for an unknown value. */
const char *hy_ic_model_name(enum hy_ic_model m);

/** Model from its name; 0 if known, -1 if not. */
int hy_ic_model_parse(const char *name, enum hy_ic_model *m);

/** Check the extra parameter of a model (King W0, uniform Q). Returns 0, or
 *  -1 with err (may be NULL) set to "king: W0 = <value> is out of range ...". */
int hy_ic_check_param(enum hy_ic_model m, double param, struct hy_err *err);

/** Parse a generator string: "plummer:N[:seed]", "hernquist:N[:seed]",
 *  "king:N[:seed[:W0]]" or "uniform:N[:seed[:Q]]" (seed 1, W0 6, Q 0.5 by
 *  default). Returns 1 if spec is such a string (and fills out), 0 if it does
 *  not start with a model name and ':' (a file name), -1 with err naming the
 *  bad token if it is malformed (e.g. "king:100:3:20", "plummer:abc"). */
int hy_ic_parse_spec(const char *spec, struct hy_ic_spec *out, struct hy_err *err);

/** Run the generator of a parsed spec; info (may be NULL) is filled for
 *  every model (Plummer: w_pot of the untruncated model). Returns 0 or -1
 *  with err set. */
int hy_ic_generate(const struct hy_ic_spec *s, struct hy_part *p, struct hy_ic_info *info,
                   struct hy_err *err);

/** `hytree ic` subcommand: argv[0] == "ic". Returns the process exit status. */
int hy_cmd_ic(int argc, char **argv);

#endif
