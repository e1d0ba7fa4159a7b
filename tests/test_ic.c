/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_ic.c: the Plummer generator against the analytic model in Henon units
 * (G = M = 1, a = 3 pi / 16): total mass, centre-of-mass frame,
 * reproducibility, kinetic energy 1/4, virial ratio, half-mass radius and the
 * escape-speed bound; plus the "plummer:N[:seed]" parser. Tolerances are
 * several standard deviations of the sampling noise, noted at each check. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hy_test.h"
#include "ic.h"
#include "io.h"
#include "io_test_util.h"

static const double pi = 3.14159265358979323846;

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double kinetic(const struct hy_part *p) {
  double k = 0;
  for (size_t i = 0; i < p->n; i++) {
    const double *v = p->vel + 3 * i;
    k += 0.5 * p->mass[i] * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  }
  return k;
}

static void plummer_big(void) {
  const size_t n = 20000;
  const double a = 3.0 * pi / 16.0;
  struct hy_part p, q;
  struct hy_err err;
  hy_part_init(&p);
  hy_part_init(&q);
  HY_CHECK(hy_ic_plummer(n, 42, &p, &err) == 0);
  HY_CHECK_INT(p.n, n);
  if (p.n != n) return;

  double m = 0, cm[3] = {0}, cv[3] = {0}, r2sum = 0;
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    m += p.mass[i];
    bad += p.mass[i] != 1.0 / (double)n || p.id[i] != i + 1 || p.type[i] != 1;
    for (int c = 0; c < 3; c++) {
      cm[c] += p.mass[i] * p.pos[3 * i + c];
      cv[c] += p.mass[i] * p.vel[3 * i + c];
      bad += !isfinite(p.pos[3 * i + c]) || !isfinite(p.vel[3 * i + c]);
    }
  }
  HY_CHECK_INT(bad, 0);
  /* n additions of 1/n: rounding only. */
  HY_CHECK_ABS(m, 1.0, 1e-12);
  HY_CHECK(fabs(cm[0]) < 1e-12 && fabs(cm[1]) < 1e-12 && fabs(cm[2]) < 1e-12);
  HY_CHECK(fabs(cv[0]) < 1e-12 && fabs(cv[1]) < 1e-12 && fabs(cv[2]) < 1e-12);

  /* K = 1/4 for the untruncated model; the 0.1% truncation changes it by
   * well under 1e-3, sampling noise is ~0.25 sqrt(1/N) ~ 2e-3. */
  double k = kinetic(&p);
  HY_CHECK_ABS(k, 0.25, 0.02);

  /* Half-mass radius a / sqrt(2^{2/3} - 1) ~ 0.769; noise ~0.6% at N = 2e4. */
  double *r = malloc(n * sizeof *r);
  if (!r) exit(99);
  for (size_t i = 0; i < n; i++) {
    const double *x = p.pos + 3 * i;
    r[i] = sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
    r2sum += r[i] * r[i];
  }
  /* Escape speed of the untruncated model, sqrt(2 G M / a) (1 + r^2/a^2)^{-1/4}.
   * The centre-of-mass shift moves r and v by about sqrt(<r^2>/N) and
   * sqrt(<v^2>/N); |d v_esc / d r| <= 0.674, so allow 6 sigma of both. */
  double tol = 6.0 * (sqrt(2.0 * k / (double)n) + 0.674 * sqrt(r2sum) / (double)n);
  int fast = 0;
  for (size_t i = 0; i < n; i++) {
    const double *v = p.vel + 3 * i;
    double speed = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    double vesc = sqrt(2.0 / a) * pow(1.0 + r[i] * r[i] / (a * a), -0.25);
    fast += speed > vesc + tol;
  }
  HY_CHECK_INT(fast, 0);
  qsort(r, n, sizeof *r, cmp_d);
  double rh = 0.5 * (r[n / 2 - 1] + r[n / 2]);
  double rh_model = a / sqrt(pow(2.0, 2.0 / 3.0) - 1.0);
  HY_CHECK_REL(rh, rh_model, 0.05);
  /* Outermost particle: X <= 0.999 bounds r (plus the centre shift). */
  HY_CHECK_LE(r[n - 1], a / sqrt(pow(0.999, -2.0 / 3.0) - 1.0) + 1.0);
  printf("plummer N=%zu: K = %.5f, r_h = %.4f (model %.4f), tol(v) = %.3g\n", n, k, rh, rh_model,
         tol);
  free(r);

  /* Reproducible for the same seed, different for another. */
  HY_CHECK(hy_ic_plummer(n, 42, &q, &err) == 0);
  HY_CHECK(q.n == n && memcmp(q.pos, p.pos, 3 * n * sizeof(double)) == 0 &&
           memcmp(q.vel, p.vel, 3 * n * sizeof(double)) == 0);
  HY_CHECK(hy_ic_plummer(n, 43, &q, &err) == 0);
  HY_CHECK(memcmp(q.pos, p.pos, 3 * n * sizeof(double)) != 0);

  HY_CHECK(hy_ic_plummer(0, 1, &q, &err) == -1);
  HY_CHECK_CONTAINS(err.msg, "positive");
  hy_part_free(&p);
  hy_part_free(&q);
}

/* Virial ratio with the exact O(N^2) potential energy of a 4000-body sample:
 * 2K/|W| = 1 up to sampling noise of a few percent and O(1/N) discreteness. */
static void plummer_virial(void) {
  const size_t n = 4000;
  struct hy_part p;
  struct hy_err err;
  hy_part_init(&p);
  HY_CHECK(hy_ic_plummer(n, 7, &p, &err) == 0);
  double w = 0;
  for (size_t i = 0; i < n; i++) {
    double wi = 0;
    for (size_t j = i + 1; j < n; j++) {
      double dx = p.pos[3 * i] - p.pos[3 * j], dy = p.pos[3 * i + 1] - p.pos[3 * j + 1],
             dz = p.pos[3 * i + 2] - p.pos[3 * j + 2];
      wi -= p.mass[j] / sqrt(dx * dx + dy * dy + dz * dz);
    }
    w += p.mass[i] * wi;
  }
  double k = kinetic(&p);
  printf("plummer N=%zu: K = %.5f, W = %.5f, 2K/|W| = %.4f\n", n, k, w, 2 * k / fabs(w));
  HY_CHECK_ABS(2.0 * k / fabs(w), 1.0, 0.08);
  /* E = -1/4 in Henon units (noise a few percent). */
  HY_CHECK_ABS(k + w, -0.25, 0.03);
  hy_part_free(&p);
}

static void parse_spec(void) {
  struct hy_ic_spec s;
  struct hy_err err;
  HY_CHECK_INT(hy_ic_parse_spec("plummer:1000", &s, &err), 1);
  HY_CHECK_INT(s.model, HY_IC_PLUMMER);
  HY_CHECK_INT(s.n, 1000);
  HY_CHECK_INT(s.seed, 1);
  HY_CHECK_INT(hy_ic_parse_spec("plummer:5:18446744073709551615", &s, &err), 1);
  HY_CHECK_INT(s.n, 5);
  HY_CHECK(s.seed == UINT64_MAX);
  HY_CHECK_INT(hy_ic_parse_spec("plummer:7:0", &s, &err), 1);
  HY_CHECK_INT(s.seed, 0);
  HY_CHECK_INT(hy_ic_parse_spec("ics.hdf5", &s, &err), 0);
  HY_CHECK_INT(hy_ic_parse_spec("plum:10", &s, &err), 0);
  static const struct {
    const char *spec, *needle;
  } bad[] = {
      {"plummer:", "positive integer"},
      {"plummer:abc", "positive integer"},
      {"plummer:0", "must be positive"},
      {"plummer:-5", "positive integer"},
      {"plummer:10:x", "seed"},
      {"plummer:10:", "seed"},
      {"plummer:10x", "positive integer"},
      {"plummer:10:3:4", "seed"},
      {"plummer: 10", "positive integer"},
      {"plummer:99999999999999999999", "too large"},
      {"plummer:10:99999999999999999999", "does not fit"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    strcpy(err.msg, "");
    HY_CHECK_INT(hy_ic_parse_spec(bad[i].spec, &s, &err), -1);
    HY_CHECK_CONTAINS(err.msg, bad[i].needle);
    HY_CHECK_CONTAINS(err.msg, bad[i].spec);
  }
}

/* hy_cmd_ic called directly (the driver may not dispatch "ic" yet). */
static int run_ic(int argc, const char **args) {
  char *argv[16];
  for (int i = 0; i < argc; i++) argv[i] = (char *)args[i];
  fflush(stdout);
  return hy_cmd_ic(argc, argv);
}

static void cmd_ic(void) {
  hy_tmp_setup("ic");
  struct hy_part p, q;
  struct hy_err err;
  hy_part_init(&p);
  hy_part_init(&q);
  HY_CHECK(hy_ic_plummer(500, 3, &p, &err) == 0);
  static const char *const files[] = {"p.hdf5", "p.dat", "p.gadget", "p2.x"};
  static const enum hy_ic_format fmts[] = {HY_FMT_HDF5, HY_FMT_GADGET1, HY_FMT_GADGET1,
                                           HY_FMT_GADGET2};
  for (int k = 0; k < 4; k++) {
    const char *out = hy_tmp_path(0, files[k]);
    const char *args[] = {"ic", "plummer", "-N", "500", "--seed", "3", "-o", out,
                          "--format", "gadget2"};
    HY_CHECK_INT(run_ic(k == 3 ? 10 : 8, args), 0);
    enum hy_ic_format f;
    HY_CHECK(hy_io_detect_format(out, &f, &err) == 0);
    HY_CHECK_INT(f, fmts[k]);
    double t = -1;
    HY_CHECK_MSG(hy_io_read_ic(out, HY_FMT_AUTO, &q, &t, &err) == 0, "%s", err.msg);
    /* double precision in every format: bitwise equal */
    HY_CHECK(q.n == 500 && memcmp(q.pos, p.pos, 1500 * sizeof(double)) == 0 &&
             memcmp(q.vel, p.vel, 1500 * sizeof(double)) == 0 &&
             memcmp(q.mass, p.mass, 500 * sizeof(double)) == 0 &&
             memcmp(q.id, p.id, 500 * sizeof(uint64_t)) == 0);
    HY_CHECK(t == 0.0);
  }
  const char *out = hy_tmp_path(0, "bad.hdf5");
  const char *nodir = hy_tmp_path(1, "nodir/bad.hdf5");
  const char *help[] = {"ic", "--help"};
  HY_CHECK_INT(run_ic(2, help), 0);
  const char *a1[] = {"ic", "isochrone", "-N", "10", "-o", out};
  HY_CHECK_INT(run_ic(6, a1), 2);
  const char *a2[] = {"ic", "plummer", "-o", out};
  HY_CHECK_INT(run_ic(4, a2), 2);
  const char *a3[] = {"ic", "plummer", "-N", "1e3", "-o", out};
  HY_CHECK_INT(run_ic(6, a3), 2);
  const char *a4[] = {"ic", "plummer", "-N", "10", "--seed", "-1", "-o", out};
  HY_CHECK_INT(run_ic(8, a4), 2);
  const char *a5[] = {"ic", "plummer", "-N", "10", "-o", out, "--format", "auto"};
  HY_CHECK_INT(run_ic(8, a5), 2);
  const char *a6[] = {"ic", "plummer", "-N", "10", "-o", nodir};
  HY_CHECK_INT(run_ic(6, a6), 1);
  const char *a7[] = {"ic", "plummer", "-N"};
  HY_CHECK_INT(run_ic(3, a7), 2);
  HY_CHECK_INT(hy_tmp_count(), 4);
  for (int k = 0; k < 4; k++) HY_CHECK(unlink(hy_tmp_path(0, files[k])) == 0);
  hy_tmp_cleanup();
  hy_part_free(&p);
  hy_part_free(&q);
}

int main(void) {
  cmd_ic();
  plummer_big();
  plummer_virial();
  parse_spec();
  return hy_test_result();
}
