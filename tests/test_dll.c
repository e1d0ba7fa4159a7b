/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_dll.c: the DLL switching kernel K(r) (Watanabe & Nakasato eq 10):
 * K(R1) = 1, K(R2) = 0, K is continuous with continuous first and second
 * derivatives everywhere (in particular across R1 and R2, where the outer
 * pieces are constant), monotonically non-increasing, and its derivative
 * matches the analytic dK/dr = -60 Y^5 (1 - Y^2)^2 / (R2 - R1).
 * Near R1 (Y = 1 - d): 1 - K = 80 d^3 + O(d^4), |K'| = 240 d^2 / w + ...,
 * |K''| = 480 d / w^2 + ...; near R2 (Y = d): K = 10 d^6, |K'| = 60 d^5 / w,
 * |K''| = 300 d^4 / w^2: all vanish as d -> 0, so K, K' and K'' are
 * continuous with the constant pieces (w = R2 - R1). */
#include "config.h"

#include "hy_test.h"
#include "split.h"

static double dk_analytic(double r, double r1, double r2) {
  if (r <= r1 || r >= r2) return 0.0;
  double y = (r2 - r) / (r2 - r1);
  return -60.0 * pow(y, 5) * (1 - y * y) * (1 - y * y) / (r2 - r1);
}

int main(void) {
  const double cases[][2] = {{1.0, 2.0}, {0.0101, 0.0203}, {3.0, 3.5}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    double r1 = cases[c][0], r2 = cases[c][1], w = r2 - r1;
    HY_CHECK_ABS(hy_dll_k(r1, r1, r2), 1.0, 0.0);
    HY_CHECK_ABS(hy_dll_k(r2, r1, r2), 0.0, 0.0);
    HY_CHECK_ABS(hy_dll_k(0.0, r1, r2), 1.0, 0.0);
    HY_CHECK_ABS(hy_dll_k(10 * r2, r1, r2), 0.0, 0.0);
    /* continuity of K, K', K'' at both ends, from the expansions above */
    for (double d = 1e-2; d >= 1e-4; d /= 10) {
      double h = d * w, e = 1e-7 * w;
      HY_CHECK_LE(fabs(1.0 - hy_dll_k(r1 + h, r1, r2)), 80.0 * d * d * d * 1.001);
      HY_CHECK_LE(hy_dll_k(r2 - h, r1, r2), 10.0 * pow(d, 6) * 1.001);
      HY_CHECK_LE(fabs(dk_analytic(r1 + h, r1, r2)), 240.0 * d * d / w * 1.001);
      HY_CHECK_LE(fabs(dk_analytic(r2 - h, r1, r2)), 60.0 * pow(d, 5) / w * 1.001);
      double k2_r1 = (dk_analytic(r1 + h + e, r1, r2) - dk_analytic(r1 + h - e, r1, r2)) / (2 * e);
      double k2_r2 = (dk_analytic(r2 - h + e, r1, r2) - dk_analytic(r2 - h - e, r1, r2)) / (2 * e);
      HY_CHECK_LE(fabs(k2_r1), 480.0 * d / (w * w) * 1.01);
      HY_CHECK_LE(fabs(k2_r2), 300.0 * pow(d, 4) / (w * w) * 1.01 + 1e-6 / (w * w));
    }
    /* monotone, and numerical derivatives match the analytic ones */
    double prev = 1.0;
    int nonmono = 0, bad_d1 = 0, bad_d2 = 0;
    for (int i = -100; i <= 1100; i++) {
      double r = r1 + w * i / 1000.0;
      double k = hy_dll_k(r, r1, r2);
      if (k > prev) nonmono++;
      prev = k;
      double h = 1e-5 * w;
      double d1 = (hy_dll_k(r + h, r1, r2) - hy_dll_k(r - h, r1, r2)) / (2 * h);
      if (fabs(d1 - dk_analytic(r, r1, r2)) > 1e-6 * 1.875 / w * 60) bad_d1++;
      double d2 = (hy_dll_k(r + h, r1, r2) - 2 * k + hy_dll_k(r - h, r1, r2)) / (h * h);
      double d2a = (dk_analytic(r + h, r1, r2) - dk_analytic(r - h, r1, r2)) / (2 * h);
      if (fabs(d2 - d2a) > 1e-2 * 60.0 / (w * w)) bad_d2++;
    }
    HY_CHECK_INT(nonmono, 0);
    HY_CHECK_INT(bad_d1, 0);
    HY_CHECK_INT(bad_d2, 0);
  }
  return hy_test_result();
}
