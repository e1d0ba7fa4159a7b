/* SPDX-License-Identifier: GPL-3.0-or-later
 * ic_king.c: the King (1966) model (lowered isothermal sphere) with
 * dimensionless central potential W0 in Henon units. Knows nothing of files
 * or devices.
 *
 * Model units G = sigma = r_0 = 1 with r_0^2 = 9 sigma^2 / (4 pi G rho_0),
 * so 4 pi rho_0 = 9. With W = Psi / sigma^2 and the lowered isothermal
 * distribution f(e) ~ exp(e) - 1 of the relative energy e = W - v^2 / 2 > 0,
 *   rho(W) / rho_0 = g(W) / g(W0),
 *   g(W) = exp(W) erf(sqrt W) - sqrt(4 W / pi) (1 + 2 W / 3)
 *        = (2 / sqrt pi) sum_{k >= 2} 2^k W^{k + 1/2} / (2k + 1)!!,
 * and Poisson's equation with the enclosed mass M and the potential energy U
 * of the mass inside r is the system, integrated outward from r = 0 with
 * GSL's rk8pd (relative error 1e-12, absolute 1e-12 min(1, W0)^{1, 3/2, 5/2}, series start
 * W = W0 - 3 r^2 / 2, M = 3 r^3):
 *   W' = -M / r^2,   M' = 9 r^2 rho/rho_0,   U' = -9 r M rho/rho_0.
 * The density is 0 for W <= 0, so past the tidal radius r_t the solution is
 * exactly Keplerian and one point (r, W < 0, M) beyond it gives
 * 1 / r_t = 1 / r - W / M, M_t = M, U_t = U.
 * A second pass tabulates W and M at 4096 radii uniform in asinh(r) on
 * [0, r_t]; radii are drawn by inverting a Steffen (monotone) interpolant of
 * M(r), speeds by rejection (hy_ic_draw_speed) with W from the same table.
 * Scaling: the finite model is in equilibrium, 2K + W = 0, so its energy is
 * E = U_t / 2; masses become 1/n (factor 1/M_t), lengths are multiplied by
 * lambda = -2 U_t / M_t^2 and velocities by 1 / sqrt(M_t lambda), giving
 * G = M = 1 and E = -1/4 for the continuous model. */
#include "config.h"

#include <math.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_interp.h>
#include <gsl/gsl_odeiv2.h>

#include "alloc.h"
#include "ic.h"
#include "ic_internal.h"

/* Table size of the second pass. */
#define KING_NTAB 4096

/* g(W) of the file comment; series below W = 1 (no cancellation). */
static double king_g(double w) {
  if (!(w > 0.0)) return 0.0;
  if (w >= 1.0) return exp(w) * erf(sqrt(w)) - sqrt(4.0 * w / HY_IC_PI) * (1.0 + 2.0 * w / 3.0);
  double term = 4.0 * w * w * sqrt(w) / 15.0, sum = 0.0; /* k = 2: 2^2 W^{5/2} / (5!! = 15) */
  for (int k = 2; k < 60 && term > 1e-18 * sum; k++) {
    sum += term;
    term *= 2.0 * w / (2.0 * k + 3.0);
  }
  return 2.0 / sqrt(HY_IC_PI) * sum;
}

struct king_ode {
  double inv_g0; /* 1 / g(W0) */
};

static int king_rhs(double r, const double y[], double dydt[], void *params) {
  const struct king_ode *k = params;
  double rho = king_g(y[0]) * k->inv_g0; /* rho / rho_0 */
  dydt[0] = -y[1] / (r * r);
  dydt[1] = 9.0 * r * r * rho;
  dydt[2] = -9.0 * r * y[1] * rho;
  return GSL_SUCCESS;
}

static double king_df(double e, const void *ctx) {
  (void)ctx;
  return e > 0.0 ? expm1(e) : 0.0;
}

/* Radius in [tr[k], tr[k+1]] where the interpolant of M equals m, by Newton
 * steps kept inside a shrinking bracket (bisection when a step leaves it). */
static int invert_mass(const gsl_interp *im, const double *tr, const double *tm, gsl_interp_accel *acc, double m,
                       double *out) {
  size_t lo = 0, hi = KING_NTAB;
  while (hi - lo > 1) { /* tm[lo] < m <= tm[hi] */
    size_t mid = (lo + hi) / 2;
    if (tm[mid] < m)
      lo = mid;
    else
      hi = mid;
  }
  double a = tr[lo], b = tr[hi];
  double x = a + (b - a) * (m - tm[lo]) / (tm[hi] - tm[lo]);
  for (int it = 0; it < 100; it++) {
    double f, df;
    int st = gsl_interp_eval_e(im, tr, tm, x, acc, &f);
    if (st == GSL_SUCCESS) st = gsl_interp_eval_deriv_e(im, tr, tm, x, acc, &df);
    if (st != GSL_SUCCESS) return st;
    f -= m;
    if (f < 0.0)
      a = x;
    else
      b = x;
    double xn = df > 0.0 ? x - f / df : 0.5 * (a + b);
    if (!(xn > a && xn < b)) xn = 0.5 * (a + b);
    if (fabs(xn - x) <= 1e-15 * b || b - a <= 1e-15 * b) {
      x = xn;
      break;
    }
    x = xn;
  }
  *out = x;
  return GSL_SUCCESS;
}

/* Both passes and the sampling; GSL's error handler is off around this. */
static int king_build(size_t n, uint64_t seed, double w0, struct hy_part *p, struct hy_ic_info *info,
                      struct hy_err *err) {
  struct king_ode par = {1.0 / king_g(w0)};
  gsl_odeiv2_system sys = {king_rhs, NULL, 3, &par};
  const double rs = 1e-6 * fmin(1.0, sqrt(w0)); /* series start */
  const double y_s[3] = {w0 - 1.5 * rs * rs, 3.0 * rs * rs * rs, -5.4 * rs * rs * rs * rs * rs};
  /* absolute errors scaled to the sizes of W, M and U, which for small W0
   * go as W0, W0^{3/2} and W0^{5/2} (r_t ~ sqrt(W0)) */
  const double ws = fmin(1.0, w0), scale_abs[3] = {ws, ws * sqrt(ws), ws * ws * sqrt(ws)};
  gsl_odeiv2_driver *d =
      gsl_odeiv2_driver_alloc_scaled_new(&sys, gsl_odeiv2_step_rk8pd, rs, 1e-12, 1e-12, 1.0, 0.0, scale_abs);
  if (!d) return hy_err_set(err, "king: cannot allocate the GSL ODE driver");
  int st = gsl_odeiv2_driver_set_nmax(d, 1000000);

  /* pass 1: step outward by 5 % until W < 0 */
  double r = rs, y[3] = {y_s[0], y_s[1], y_s[2]}, r1 = 2.0 * rs;
  while (st == GSL_SUCCESS && y[0] >= 0.0) {
    if (r1 > 1e8) {
      gsl_odeiv2_driver_free(d);
      return hy_err_set(err, "king: W0 = %g: no tidal radius below r = 1e8 r_0", w0);
    }
    st = gsl_odeiv2_driver_apply(d, &r, r1, y);
    r1 = r1 * 1.05 + 1e-3 * sqrt(w0);
  }
  if (st != GSL_SUCCESS) {
    gsl_odeiv2_driver_free(d);
    return hy_err_set(err, "king: W0 = %g: ODE solver failed at r = %g (%s)", w0, r, gsl_strerror(st));
  }
  const double rt = 1.0 / (1.0 / r - y[0] / y[1]), mt = y[1], ut = y[2];

  /* pass 2: the table */
  double *tr = hy_malloc("king table", 3 * (KING_NTAB + 1), sizeof(double));
  double *tw = tr + KING_NTAB + 1, *tm = tw + KING_NTAB + 1;
  const double smax = asinh(rt);
  tr[0] = 0.0;
  tw[0] = w0;
  tm[0] = 0.0;
  st = gsl_odeiv2_driver_reset(d);
  r = rs;
  for (int c = 0; c < 3; c++) y[c] = y_s[c];
  for (int i = 1; i <= KING_NTAB && st == GSL_SUCCESS; i++) {
    double ri = i == KING_NTAB ? rt : sinh(smax * i / KING_NTAB);
    tr[i] = ri;
    if (ri <= rs) { /* centre series */
      tw[i] = w0 - 1.5 * ri * ri;
      tm[i] = 3.0 * ri * ri * ri;
      continue;
    }
    st = gsl_odeiv2_driver_apply(d, &r, ri, y);
    tw[i] = y[0] > 0.0 ? y[0] : 0.0;
    tm[i] = y[1];
  }
  gsl_odeiv2_driver_free(d);
  if (st != GSL_SUCCESS) {
    hy_free(tr);
    return hy_err_set(err, "king: W0 = %g: ODE solver failed at r = %g (%s)", w0, r, gsl_strerror(st));
  }
  /* the table must end at the tidal radius with the mass of pass 1 */
  if (!(fabs(tm[KING_NTAB] - mt) <= 1e-8 * mt && fabs(y[0]) <= 1e-8 * w0)) {
    hy_free(tr);
    return hy_err_set(err, "king: W0 = %g: inconsistent ODE solutions (M %.17g vs %.17g, W(r_t) = %g)", w0,
                      tm[KING_NTAB], mt, y[0]);
  }
  tw[KING_NTAB] = 0.0;
  tm[KING_NTAB] = mt;
  for (int i = 1; i <= KING_NTAB; i++)
    if (!(tm[i] > tm[i - 1])) {
      hy_free(tr);
      return hy_err_set(err, "king: W0 = %g: cumulative mass not increasing at r = %g", w0, tr[i]);
    }

  gsl_interp *im = gsl_interp_alloc(gsl_interp_steffen, KING_NTAB + 1);
  gsl_interp *iw = gsl_interp_alloc(gsl_interp_steffen, KING_NTAB + 1);
  gsl_interp_accel *acc = gsl_interp_accel_alloc();
  gsl_rng *rng = hy_ic_rng(seed);
  int rc = 0;
  if (!im || !iw || !acc || !rng) {
    rc = hy_err_set(err, "king: cannot allocate the GSL interpolation or random number generator");
    goto out;
  }
  st = gsl_interp_init(im, tr, tm, KING_NTAB + 1);
  if (st == GSL_SUCCESS) st = gsl_interp_init(iw, tr, tw, KING_NTAB + 1);
  double rh = 0.0;
  if (st == GSL_SUCCESS) st = invert_mass(im, tr, tm, acc, 0.5 * mt, &rh);
  hy_part_resize(p, n);
  for (size_t i = 0; i < n && st == GSL_SUCCESS; i++) {
    double m = mt * (1.0 - gsl_rng_uniform(rng)), ri = 0.0, wi = 0.0; /* m in (0, M_t] */
    st = invert_mass(im, tr, tm, acc, m, &ri);
    if (st == GSL_SUCCESS) st = gsl_interp_eval_e(iw, tr, tw, ri, acc, &wi);
    if (st != GSL_SUCCESS) break;
    hy_ic_iso_vec(rng, ri, p->pos + 3 * i);
    hy_ic_iso_vec(rng, hy_ic_draw_speed(rng, wi > 0.0 ? wi : 0.0, king_df, NULL), p->vel + 3 * i);
  }
  if (st != GSL_SUCCESS) {
    rc = hy_err_set(err, "king: W0 = %g: interpolation of the model failed (%s)", w0, gsl_strerror(st));
    goto out;
  }
  const double lambda = -2.0 * ut / (mt * mt), vscale = 1.0 / sqrt(mt * lambda);
  hy_ic_finish(p, lambda, vscale);
  if (info) {
    info->scale = lambda;
    info->r_half = lambda * rh;
    info->r_max = lambda * rt;
    info->w_pot = ut / (mt * mt * lambda);
  }
out:
  if (rng) gsl_rng_free(rng);
  if (acc) gsl_interp_accel_free(acc);
  if (iw) gsl_interp_free(iw);
  if (im) gsl_interp_free(im);
  hy_free(tr);
  return rc;
}

int hy_ic_king(size_t n, uint64_t seed, double w0, struct hy_part *p, struct hy_ic_info *info,
               struct hy_err *err) {
  if (n == 0) return hy_err_set(err, "king: the number of particles must be positive");
  if (hy_ic_check_param(HY_IC_KING, w0, err) != 0) return -1;
  gsl_error_handler_t *old = gsl_set_error_handler_off();
  int rc = king_build(n, seed, w0, p, info, err);
  gsl_set_error_handler(old);
  return rc;
}
