/* SPDX-License-Identifier: GPL-3.0-or-later
 * hy_test.h: minimal assertion helpers for hytree's test programs.
 * Exit codes follow automake's harness: 0 pass, 77 skip, 99 hard error,
 * anything else (1) a failed assertion. Every check prints both operands. */
#ifndef HY_TEST_H
#define HY_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hy_test_failures = 0;

#define HY_CHECK(cond)                                                          \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond);          \
      hy_test_failures++;                                                       \
    }                                                                           \
  } while (0)

#define HY_CHECK_MSG(cond, ...)                                                 \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, #cond);          \
      fprintf(stderr, __VA_ARGS__);                                             \
      fputc('\n', stderr);                                                      \
      hy_test_failures++;                                                       \
    }                                                                           \
  } while (0)

#define HY_CHECK_INT(a, b)                                                      \
  do {                                                                          \
    long long a_ = (long long)(a), b_ = (long long)(b);                         \
    if (a_ != b_) {                                                             \
      fprintf(stderr, "%s:%d: FAIL: %s == %s: %lld != %lld\n", __FILE__,        \
              __LINE__, #a, #b, a_, b_);                                        \
      hy_test_failures++;                                                       \
    }                                                                           \
  } while (0)

/* |a - b| <= tol */
#define HY_CHECK_ABS(a, b, tol)                                                 \
  do {                                                                          \
    double a_ = (double)(a), b_ = (double)(b), t_ = (double)(tol);              \
    if (!(fabs(a_ - b_) <= t_)) {                                               \
      fprintf(stderr, "%s:%d: FAIL: |%s - %s| <= %s: |%.17g - %.17g| = %.3g\n", \
              __FILE__, __LINE__, #a, #b, #tol, a_, b_, fabs(a_ - b_));         \
      hy_test_failures++;                                                       \
    }                                                                           \
  } while (0)

/* |a - b| <= tol * |b| */
#define HY_CHECK_REL(a, b, tol)                                                 \
  do {                                                                          \
    double a_ = (double)(a), b_ = (double)(b), t_ = (double)(tol);              \
    if (!(fabs(a_ - b_) <= t_ * fabs(b_))) {                                    \
      fprintf(stderr, "%s:%d: FAIL: %s ~ %s (rel %s): %.17g vs %.17g, rel %.3g\n", \
              __FILE__, __LINE__, #a, #b, #tol, a_, b_,                         \
              b_ != 0 ? fabs(a_ - b_) / fabs(b_) : fabs(a_ - b_));              \
      hy_test_failures++;                                                       \
    }                                                                           \
  } while (0)

/* a <= b */
#define HY_CHECK_LE(a, b)                                                       \
  do {                                                                          \
    double a_ = (double)(a), b_ = (double)(b);                                  \
    if (!(a_ <= b_)) {                                                          \
      fprintf(stderr, "%s:%d: FAIL: %s <= %s: %.6g > %.6g\n", __FILE__,         \
              __LINE__, #a, #b, a_, b_);                                        \
      hy_test_failures++;                                                       \
    }                                                                           \
  } while (0)

/* substring check on an error message */
#define HY_CHECK_CONTAINS(haystack, needle)                                     \
  do {                                                                          \
    const char *h_ = (haystack), *n_ = (needle);                                \
    if (!h_ || !strstr(h_, n_)) {                                               \
      fprintf(stderr, "%s:%d: FAIL: message does not contain \"%s\": \"%s\"\n", \
              __FILE__, __LINE__, n_, h_ ? h_ : "(null)");                      \
      hy_test_failures++;                                                       \
    }                                                                           \
  } while (0)

#define HY_TEST_SKIP(...)                                                       \
  do {                                                                          \
    fprintf(stderr, "SKIP: ");                                                  \
    fprintf(stderr, __VA_ARGS__);                                               \
    fputc('\n', stderr);                                                        \
    exit(77);                                                                   \
  } while (0)

static inline int hy_test_result(void) {
  if (hy_test_failures) fprintf(stderr, "%d check(s) failed\n", hy_test_failures);
  return hy_test_failures ? 1 : 0;
}

#endif
