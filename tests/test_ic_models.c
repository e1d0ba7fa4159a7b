/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_ic_models.c: the Hernquist, King and uniform-sphere generators
 * against their models in Henon units (G = M = 1, E = -1/4): exact equal
 * masses, centre-of-mass frame, reproducibility, the half-mass radius, the
 * virial ratio 2K/|W| and the energy E = K + W with W summed directly over
 * all pairs (hy_cpu_direct, double precision); the King ODE solution against
 * an independent fixed-step RK4 integration here and King's (1966)
 * concentrations; the generator-string parser for the new models.
 *
 * Tolerances come from the sampling noise of the N = 20000 realisations,
 * estimated from the sample itself (see energies()): K = sum k_i has standard
 * deviation sqrt(N) std(k_i); W, a U-statistic, has to leading order
 * sqrt(N) std(m_i phi_i) with phi_i the potential at particle i; the fraction
 * of particles inside the model's half-mass radius is binomial,
 * 0.5 / sqrt(N). Checks allow 5 of those standard deviations plus the
 * O(1/N) discreteness bias of the pair sum. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "force_cpu.h"
#include "hy_test.h"
#include "ic.h"
#include "threads.h"

#define NBIG 20000
#define NSIG 5.0

static struct hy_pool *pool;

/* Equal masses 1/n summing to 1, IDs 1..n, type 1, finite, COM frame. */
static void check_basic(const char *what, const struct hy_part *p, size_t n) {
  HY_CHECK_INT(p->n, n);
  double m = 0, cm[3] = {0}, cv[3] = {0}, rmax = 0;
  int bad = 0;
  for (size_t i = 0; i < p->n; i++) {
    m += p->mass[i];
    bad += p->mass[i] != 1.0 / (double)n || p->id[i] != i + 1 || p->type[i] != 1;
    for (int c = 0; c < 3; c++) {
      cm[c] += p->mass[i] * p->pos[3 * i + c];
      cv[c] += p->mass[i] * p->vel[3 * i + c];
      bad += !isfinite(p->pos[3 * i + c]) || !isfinite(p->vel[3 * i + c]);
      if (fabs(p->pos[3 * i + c]) > rmax) rmax = fabs(p->pos[3 * i + c]);
    }
  }
  HY_CHECK_MSG(bad == 0, "%s: %d bad masses, IDs, types or coordinates", what, bad);
  /* n additions of 1/n: rounding only. */
  HY_CHECK_ABS(m, 1.0, 1e-12);
  /* the shift subtracts the COM; what is left is rounding of sums of |x| <= rmax */
  double tol = 1e-13 * (1.0 + rmax);
  HY_CHECK_MSG(fabs(cm[0]) < tol && fabs(cm[1]) < tol && fabs(cm[2]) < tol, "%s: COM (%g, %g, %g)", what, cm[0],
               cm[1], cm[2]);
  HY_CHECK_MSG(fabs(cv[0]) < 1e-13 && fabs(cv[1]) < 1e-13 && fabs(cv[2]) < 1e-13, "%s: COM velocity (%g %g %g)",
               what, cv[0], cv[1], cv[2]);
}

/* Same seed: bitwise the same; another seed: different. */
static void check_repro(const char *what, const struct hy_ic_spec *s, const struct hy_part *p) {
  struct hy_part q;
  struct hy_err err;
  hy_part_init(&q);
  HY_CHECK_MSG(hy_ic_generate(s, &q, NULL, &err) == 0, "%s: %s", what, err.msg);
  HY_CHECK_MSG(q.n == p->n && memcmp(q.pos, p->pos, 3 * p->n * sizeof(double)) == 0 &&
                   memcmp(q.vel, p->vel, 3 * p->n * sizeof(double)) == 0,
               "%s: not reproducible", what);
  struct hy_ic_spec s2 = *s;
  s2.seed++;
  HY_CHECK_MSG(hy_ic_generate(&s2, &q, NULL, &err) == 0, "%s: %s", what, err.msg);
  HY_CHECK_MSG(memcmp(q.pos, p->pos, 3 * p->n * sizeof(double)) != 0 &&
                   memcmp(q.vel, p->vel, 3 * p->n * sizeof(double)) != 0,
               "%s: seed %llu and %llu give the same particles", what, (unsigned long long)s->seed,
               (unsigned long long)s2.seed);
  hy_part_free(&q);
}

struct energies {
  double k, w, sk, sw; /* K, W and their sampling standard deviations */
};

static struct energies energies(const struct hy_part *p) {
  size_t n = p->n;
  double *acc = malloc(3 * n * sizeof *acc), *pot = malloc(n * sizeof *pot);
  if (!acc || !pot) exit(99);
  hy_cpu_direct(p->pos, p->mass, n, p->pos, n, 0, 0.0, 0.0, 0.0, acc, NULL, pot, pool);
  struct energies e = {0, 0, 0, 0};
  double sk2 = 0, sw2 = 0;
  for (size_t i = 0; i < n; i++) {
    const double *v = p->vel + 3 * i;
    double ki = 0.5 * p->mass[i] * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]), wi = p->mass[i] * pot[i];
    e.k += ki;
    e.w += 0.5 * wi;
    sk2 += ki * ki;
    sw2 += wi * wi;
  }
  /* sqrt(N) std(x_i) = sqrt(N (<x^2> - <x>^2)) = sqrt(sum x^2 - (sum x)^2 / N) */
  e.sk = sqrt(fmax(0.0, sk2 - e.k * e.k / (double)n));
  e.sw = sqrt(fmax(0.0, sw2 - 4.0 * e.w * e.w / (double)n));
  free(acc);
  free(pot);
  return e;
}

/* Fraction of the particles within radius r of the origin. */
static double frac_within(const struct hy_part *p, double r) {
  size_t in = 0;
  for (size_t i = 0; i < p->n; i++) {
    const double *x = p->pos + 3 * i;
    in += x[0] * x[0] + x[1] * x[1] + x[2] * x[2] < r * r;
  }
  return (double)in / (double)p->n;
}

/* The checks common to all models; q_model: expected 2K/|W|; k_exact: the
 * generator sets K exactly (uniform sphere), so K has no sampling noise. */
static void check_physics(const char *what, const struct hy_part *p, const struct hy_ic_info *in, double q_model,
                          int k_exact) {
  const double n = (double)p->n;
  double f = frac_within(p, in->r_half);
  double tf = NSIG * 0.5 / sqrt(n);
  printf("%s: fraction inside r_half = %.5f: %.5f (tol %.4f)\n", what, in->r_half, f, tf);
  HY_CHECK_ABS(f, 0.5, tf);

  struct energies e = energies(p);
  if (k_exact) {
    HY_CHECK_ABS(e.k, -0.5 * q_model * in->w_pot, 1e-12);
    e.sk = 0.0;
  }
  /* |d(2K/|W|)| <= 2/|W| dK + 2K/W^2 dW; the pair sum over N(N-1) pairs is
   * (1 - 1/N) times the continuous W on average. */
  double vr = 2.0 * e.k / fabs(e.w);
  double tv = NSIG * (2.0 * e.sk / fabs(e.w) + vr * e.sw / fabs(e.w)) + 2.0 * q_model / n;
  double te = NSIG * (e.sk + e.sw) + 1.0 / n;
  printf("%s: K = %.5f (sd %.5f), W = %.5f (sd %.5f), 2K/|W| = %.5f (model %.5f, tol %.4f), E = %.5f (tol %.4f)\n",
         what, e.k, e.sk, e.w, e.sw, vr, q_model, tv, e.k + e.w, te);
  HY_CHECK_ABS(vr, q_model, tv);
  HY_CHECK_ABS(e.k + e.w, -0.25, te);
  HY_CHECK_ABS(e.w, in->w_pot, NSIG * e.sw + 1.0 / n);
}

static void hernquist(void) {
  struct hy_ic_spec s = {HY_IC_HERNQUIST, NBIG, 5, 0.0};
  struct hy_part p;
  struct hy_ic_info in;
  struct hy_err err;
  hy_part_init(&p);
  HY_CHECK_MSG(hy_ic_hernquist(NBIG, 5, &p, &in, &err) == 0, "%s", err.msg);
  check_basic("hernquist", &p, NBIG);
  check_repro("hernquist", &s, &p);
  /* Untruncated: a = 1/3 (E = -G M^2 / (12 a)), r_half = a (1 + sqrt 2).
   * Truncated at mass fraction mu and renormalised to M = 1: the energy of
   * the truncated model is within ~1e-3 of the untruncated one (the outer
   * 1 % is barely bound) but M^2 drops by mu^2, so a = -4 E_t / mu^2 ~
   * 1 / (3 mu^2); half the sampled mass is at M(r) = mu / 2, i.e.
   * r_half = a s / (1 - s) with s = sqrt(mu / 2) (2.394 a, not 2.414 a). */
  const double mu = HY_IC_HERNQUIST_MFRAC, sh = sqrt(0.5 * mu);
  printf("hernquist: a = %.6f, r_half = %.6f (untruncated %.6f), r_max = %.4f, W = %.6f\n", in.scale, in.r_half,
         in.scale * (1.0 + sqrt(2.0)), in.r_max, in.w_pot);
  HY_CHECK_REL(in.scale, 1.0 / (3.0 * mu * mu), 1e-3);
  HY_CHECK_REL(in.r_half, in.scale * sh / (1.0 - sh), 1e-12);
  HY_CHECK_REL(in.r_max, in.scale * sqrt(mu) / (1.0 - sqrt(mu)), 1e-12);
  /* W_t: -1/2 up to the surface term 4 pi r_t^3 P(r_t) ~ 1e-4 */
  HY_CHECK_ABS(in.w_pot, -0.5, 1e-3);
  double rmax = 0;
  for (size_t i = 0; i < p.n; i++) {
    const double *x = p.pos + 3 * i;
    rmax = fmax(rmax, sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]));
  }
  /* the COM shift is ~ sqrt(<r^2> / N) < 0.1 */
  HY_CHECK_LE(rmax, in.r_max + 0.1);
  /* E = -1/4 for the truncated model, so 2K/|W| = 2 (-1/4 - W) / |W|. */
  check_physics("hernquist", &p, &in, 2.0 * (-0.25 - in.w_pot) / fabs(in.w_pot), 0);
  hy_part_free(&p);
}

/* Independent King solution: fixed-step RK4 in r (step h r_0 inside r_0,
 * h r outside), same equations as ic_king.c. Returns r_t, r_half, M_t and
 * U_t in model units (G = sigma = r_0 = 1). */
static double king_g(double w) {
  return w > 0 ? exp(w) * erf(sqrt(w)) - sqrt(4.0 * w / 3.14159265358979323846) * (1.0 + 2.0 * w / 3.0) : 0.0;
}
static void king_rhs(double r, const double y[3], double g0, double d[3]) {
  double rho = king_g(y[0]) / g0;
  d[0] = -y[1] / (r * r);
  d[1] = 9.0 * r * r * rho;
  d[2] = -9.0 * r * y[1] * rho;
}
static void king_ref(double w0, double out[4]) {
  const double g0 = king_g(w0), h = 2e-4;
  double r = 1e-4, y[3] = {w0 - 1.5e-8, 3e-12, -5.4e-20};
  size_t cap = 1 << 16, n = 0;
  double *tr = malloc(cap * sizeof *tr), *tm = malloc(cap * sizeof *tm);
  if (!tr || !tm) exit(99);
  while (y[0] > 0) {
    double hh = r < 1 ? h : h * r, k1[3], k2[3], k3[3], k4[3], t[3];
    king_rhs(r, y, g0, k1);
    for (int c = 0; c < 3; c++) t[c] = y[c] + 0.5 * hh * k1[c];
    king_rhs(r + 0.5 * hh, t, g0, k2);
    for (int c = 0; c < 3; c++) t[c] = y[c] + 0.5 * hh * k2[c];
    king_rhs(r + 0.5 * hh, t, g0, k3);
    for (int c = 0; c < 3; c++) t[c] = y[c] + hh * k3[c];
    king_rhs(r + hh, t, g0, k4);
    for (int c = 0; c < 3; c++) y[c] += hh / 6.0 * (k1[c] + 2 * k2[c] + 2 * k3[c] + k4[c]);
    r += hh;
    if (n == cap) {
      cap *= 2;
      tr = realloc(tr, cap * sizeof *tr);
      tm = realloc(tm, cap * sizeof *tm);
      if (!tr || !tm) exit(99);
    }
    tr[n] = r;
    tm[n++] = y[1];
  }
  out[0] = 1.0 / (1.0 / r - y[0] / y[1]);
  size_t k = 0;
  while (tm[k] < 0.5 * y[1]) k++;
  out[1] = k ? tr[k - 1] + (tr[k] - tr[k - 1]) * (0.5 * y[1] - tm[k - 1]) / (tm[k] - tm[k - 1]) : tr[0];
  out[2] = y[1];
  out[3] = y[2];
  free(tr);
  free(tm);
}

static void king_models(void) {
  /* log10(r_t / r_0) from King (1966) as quoted to two decimals (Binney &
   * Tremaine 2008 fig. 4.9 and tables since): 0.67, 1.26, 2.12, 2.74. */
  static const double w0s[] = {3, 6, 9, 12}, c_lit[] = {0.67, 1.26, 2.12, 2.74};
  struct hy_part p;
  struct hy_err err;
  hy_part_init(&p);
  for (int k = 0; k < 4; k++) {
    struct hy_ic_info in;
    HY_CHECK_MSG(hy_ic_king(100, 1, w0s[k], &p, &in, &err) == 0, "%s", err.msg);
    double ref[4];
    king_ref(w0s[k], ref);
    double lambda = -2.0 * ref[3] / (ref[2] * ref[2]);
    double c = log10(in.r_max / in.scale);
    printf("king W0 = %g: r_t/r_0 = %.8g (RK4 %.8g), r_h/r_0 = %.6g (RK4 %.6g), r_0 = %.8g (RK4 %.8g), c = %.4f\n",
           w0s[k], in.r_max / in.scale, ref[0], in.r_half / in.scale, ref[1], in.scale, lambda, c);
    /* RK4 with these steps is good to ~1e-6; the half-mass radius is read
     * off its steps by linear interpolation (step 2e-4 r, so <= 1e-4). */
    HY_CHECK_REL(in.r_max / in.scale, ref[0], 1e-5);
    HY_CHECK_REL(in.scale, lambda, 1e-5);
    HY_CHECK_REL(in.r_half / in.scale, ref[1], 1e-4);
    HY_CHECK_ABS(c, c_lit[k], 0.01);
    HY_CHECK_ABS(in.w_pot, -0.5, 1e-12);
  }
  /* the whole range works; the tidal radius grows with W0 */
  static const double w0r[] = {1e-3, 0.5, 1, 14, 16};
  double last = 0;
  for (int k = 0; k < 5; k++) {
    struct hy_ic_info in;
    HY_CHECK_MSG(hy_ic_king(100, 1, w0r[k], &p, &in, &err) == 0, "W0 = %g: %s", w0r[k], err.msg);
    check_basic("king", &p, 100);
    printf("king W0 = %g: r_t/r_0 = %.6g, r_t = %.6g, r_half = %.6g\n", w0r[k], in.r_max / in.scale, in.r_max,
           in.r_half);
    HY_CHECK(in.r_max / in.scale > last);
    last = in.r_max / in.scale;
  }
  static const double badw0[] = {0.0, -1.0, 16.5, NAN, INFINITY};
  for (int k = 0; k < 5; k++) {
    strcpy(err.msg, "");
    HY_CHECK(hy_ic_king(100, 1, badw0[k], &p, NULL, &err) == -1);
    HY_CHECK_CONTAINS(err.msg, "W0");
  }
  HY_CHECK(hy_ic_king(0, 1, 6.0, &p, NULL, &err) == -1);
  HY_CHECK_CONTAINS(err.msg, "positive");

  struct hy_ic_spec s = {HY_IC_KING, NBIG, 5, 6.0};
  struct hy_ic_info in;
  HY_CHECK_MSG(hy_ic_generate(&s, &p, &in, &err) == 0, "%s", err.msg);
  check_basic("king", &p, NBIG);
  check_repro("king", &s, &p);
  check_physics("king W0=6", &p, &in, 1.0, 0);
  hy_part_free(&p);
}

static void uniform(void) {
  static const double qs[] = {0.0, 0.5, 1.0, 3.0};
  struct hy_part p, q0;
  struct hy_err err;
  hy_part_init(&p);
  hy_part_init(&q0);
  for (int k = 0; k < 4; k++) {
    struct hy_ic_spec s = {HY_IC_UNIFORM, NBIG, 5, qs[k]};
    struct hy_ic_info in;
    char what[32];
    snprintf(what, sizeof what, "uniform Q=%g", qs[k]);
    HY_CHECK_MSG(hy_ic_generate(&s, &p, &in, &err) == 0, "%s", err.msg);
    check_basic(what, &p, NBIG);
    double rad = qs[k] < 2 ? 0.6 * (4.0 - 2.0 * qs[k]) : 1.2;
    HY_CHECK_REL(in.scale, rad, 1e-15);
    HY_CHECK_REL(in.r_half, rad / cbrt(2.0), 1e-15);
    HY_CHECK_REL(in.w_pot, -0.6 / rad, 1e-15);
    if (k == 0) {
      /* cold: no velocities at all; same positions for any Q */
      int moving = 0;
      for (size_t i = 0; i < 3 * p.n; i++) moving += p.vel[i] != 0.0;
      HY_CHECK_INT(moving, 0);
      hy_part_resize(&q0, p.n);
      memcpy(q0.pos, p.pos, 3 * p.n * sizeof(double));
    } else {
      check_repro(what, &s, &p);
      /* positions = those of Q = 0 times R(Q) / R(0) (then COM-shifted) */
      double d = 0;
      for (size_t i = 0; i < 3 * p.n; i++) d = fmax(d, fabs(p.pos[i] - q0.pos[i] * rad / 2.4));
      HY_CHECK_LE(d, 1e-12);
    }
    double rmax = 0;
    for (size_t i = 0; i < p.n; i++) {
      const double *x = p.pos + 3 * i;
      rmax = fmax(rmax, sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]));
    }
    /* within R up to the COM shift ~ sqrt(3/5 R^2 / N) */
    HY_CHECK_LE(rmax, rad * (1.0 + 0.05));
    if (qs[k] < 2.0) {
      check_physics(what, &p, &in, qs[k], 1);
    } else {
      /* unbound: W = -1/2 (R = 6/5), E = W (1 - Q/2) */
      struct energies e = energies(&p);
      printf("%s: K = %.5f, W = %.5f, 2K/|W| = %.5f, E = %.5f (model %.5f)\n", what, e.k, e.w, 2 * e.k / fabs(e.w),
             e.k + e.w, -0.5 * (1 - qs[k] / 2));
      HY_CHECK_ABS(e.k, 0.25 * qs[k], 1e-12);
      HY_CHECK_ABS(e.w, -0.5, NSIG * e.sw + 1.0 / NBIG);
    }
  }
  HY_CHECK(hy_ic_uniform(10, 1, -0.1, &p, NULL, &err) == -1);
  HY_CHECK_CONTAINS(err.msg, "-0.1");
  HY_CHECK(hy_ic_uniform(10, 1, NAN, &p, NULL, &err) == -1);
  HY_CHECK(hy_ic_uniform(0, 1, 0.5, &p, NULL, &err) == -1);
  HY_CHECK(hy_ic_hernquist(0, 1, &p, NULL, &err) == -1);
  hy_part_free(&p);
  hy_part_free(&q0);
}

static void parse_spec(void) {
  static const struct {
    const char *spec;
    enum hy_ic_model m;
    size_t n;
    uint64_t seed;
    double param;
  } good[] = {
      {"plummer:100", HY_IC_PLUMMER, 100, 1, 0.0},
      {"hernquist:100", HY_IC_HERNQUIST, 100, 1, 0.0},
      {"hernquist:100:9", HY_IC_HERNQUIST, 100, 9, 0.0},
      {"king:16384", HY_IC_KING, 16384, 1, 6.0},
      {"king:16384:3", HY_IC_KING, 16384, 3, 6.0},
      {"king:16384:3:7", HY_IC_KING, 16384, 3, 7.0},
      {"king:10:0:16", HY_IC_KING, 10, 0, 16.0},
      {"king:10:0:0.25", HY_IC_KING, 10, 0, 0.25},
      {"uniform:50", HY_IC_UNIFORM, 50, 1, 0.5},
      {"uniform:50:2:0", HY_IC_UNIFORM, 50, 2, 0.0},
      {"uniform:50:2:1e0", HY_IC_UNIFORM, 50, 2, 1.0},
  };
  struct hy_err err;
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    struct hy_ic_spec s;
    HY_CHECK_MSG(hy_ic_parse_spec(good[i].spec, &s, &err) == 1, "%s: %s", good[i].spec, err.msg);
    HY_CHECK_MSG(s.model == good[i].m && s.n == good[i].n && s.seed == good[i].seed && s.param == good[i].param,
                 "%s: model %d n %zu seed %llu param %g", good[i].spec, (int)s.model, s.n,
                 (unsigned long long)s.seed, s.param);
  }
  static const char *const files[] = {"ics.hdf5", "king", "kings:10", "Uniform:10", "./king:10", ""};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    struct hy_ic_spec s;
    HY_CHECK_MSG(hy_ic_parse_spec(files[i], &s, &err) == 0, "%s", files[i]);
  }
  /* every message names the whole string and the bad token */
  static const struct {
    const char *spec, *needle;
  } bad[] = {
      {"king:", "\"\""},
      {"king:0", "\"0\""},
      {"king:abc", "\"abc\""},
      {"king:10:x", "seed \"x\""},
      {"king:10:1:20", "W0 \"20\""},
      {"king:10:1:0", "W0 \"0\""},
      {"king:10:1:-3", "W0 \"-3\""},
      {"king:10:1:nan", "W0 \"nan\""},
      {"king:10:1:inf", "W0 \"inf\""},
      {"king:10:1:6x", "W0 \"6x\""},
      {"king:10:1: 6", "W0 \" 6\""},
      {"king:10:1:", "W0 \"\""},
      {"king:10:1:6:2", "\"2\" after the W0"},
      {"uniform:10:1:-0.5", "Q \"-0.5\""},
      {"uniform:10:1:q", "Q \"q\""},
      {"uniform:10:1:1e999", "Q \"1e999\""},
      {"uniform:10:1:0.5:1", "\"1\" after the Q"},
      {"hernquist:10:1:2", "\"2\" after the seed"},
      {"hernquist:-4", "\"-4\""},
      {"hernquist:99999999999999999999", "too large"},
      {"uniform:5:99999999999999999999", "does not fit"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    struct hy_ic_spec s;
    strcpy(err.msg, "");
    const char *needle = bad[i].needle;
    HY_CHECK_MSG(hy_ic_parse_spec(bad[i].spec, &s, &err) == -1, "%s accepted", bad[i].spec);
    HY_CHECK_CONTAINS(err.msg, needle);
    HY_CHECK_CONTAINS(err.msg, bad[i].spec);
    HY_CHECK(strchr(err.msg, '\n') == NULL);
  }
  static const char *const names[] = {"plummer", "hernquist", "king", "uniform"};
  for (int k = 0; k < 4; k++) {
    enum hy_ic_model m;
    HY_CHECK(hy_ic_model_parse(names[k], &m) == 0 && strcmp(hy_ic_model_name(m), names[k]) == 0);
  }
  enum hy_ic_model m;
  HY_CHECK(hy_ic_model_parse("isochrone", &m) == -1);
}

int main(void) {
  pool = hy_pool_create(1);
  parse_spec();
  king_models();
  hernquist();
  uniform();
  hy_pool_free(pool);
  return hy_test_result();
}
