/* SPDX-License-Identifier: GPL-3.0-or-later
 * fuzz_ic_check.h: what the IC harnesses require of hy_io_read_ic's result:
 * a failure leaves an empty set and a message naming the file; a success
 * holds N > 0 particles, type by type, with finite positions and velocities
 * and finite positive masses. A broken property calls abort(). */
#ifndef HY_FUZZ_IC_CHECK_H
#define HY_FUZZ_IC_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"

static void fuzz_ic_fail(const char *path, const char *what, size_t i) {
  fprintf(stderr, "fuzz: %s: %s (particle %zu)\n", path, what, i);
  abort();
}

static void fuzz_ic_check(const char *path, int rc, const struct hy_part *p,
                          const struct hy_err *err) {
  static int verbose = -1;
  if (verbose < 0) verbose = getenv("HY_FUZZ_VERBOSE") != NULL;
  if (verbose && rc == 0) printf("  accepted: %zu particles\n", p->n);
  if (verbose && rc != 0) printf("  rejected: %s\n", err->msg);
  if (rc != 0) {
    if (rc != -1) fuzz_ic_fail(path, "return code neither 0 nor -1", 0);
    if (p->n != 0) fuzz_ic_fail(path, "particles left after a failed read", p->n);
    if (!strstr(err->msg, path)) {
      fprintf(stderr, "fuzz: message: %s\n", err->msg);
      fuzz_ic_fail(path, "error message does not name the file", 0);
    }
    return;
  }
  if (p->n == 0) fuzz_ic_fail(path, "success with no particles", 0);
  for (size_t i = 0; i < p->n; i++) {
    if (p->type[i] >= HY_NTYPES) fuzz_ic_fail(path, "type out of range", i);
    if (i > 0 && p->type[i] < p->type[i - 1]) fuzz_ic_fail(path, "not ordered by type", i);
    for (int c = 0; c < 3; c++) {
      if (!isfinite(p->pos[3 * i + c]) || !isfinite(p->vel[3 * i + c]))
        fuzz_ic_fail(path, "non-finite position or velocity", i);
      if (p->acc[3 * i + c] != 0.0) fuzz_ic_fail(path, "acceleration not zeroed", i);
    }
    if (!isfinite(p->mass[i]) || !(p->mass[i] > 0.0)) fuzz_ic_fail(path, "bad mass", i);
  }
}

#endif
