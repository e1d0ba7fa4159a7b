/* SPDX-License-Identifier: GPL-3.0-or-later
 * io_expect.h: the check that an initial-conditions file is refused, shared
 * by the reader tests of each format. */
#ifndef HY_IO_EXPECT_H
#define HY_IO_EXPECT_H

#include <stdio.h>
#include <string.h>

#include "hy_test.h"
#include "io.h"

/* Reading path as format f must fail with a one-line message naming the
 * file and containing needle, and leave the particle set empty. */
static inline int hy_read_expect_fail(const char *path, enum hy_ic_format f, const char *needle) {
  struct hy_part q;
  struct hy_err err;
  hy_part_init(&q);
  hy_part_resize(&q, 5);
  double t;
  int rc = hy_io_read_ic(path, f, &q, &t, &err);
  HY_CHECK_INT(rc, -1);
  HY_CHECK_INT(q.n, 0);
  if (rc != 0) {
    HY_CHECK_CONTAINS(err.msg, needle);
    HY_CHECK_CONTAINS(err.msg, path);
    HY_CHECK(strchr(err.msg, '\n') == NULL);
    printf("expected error: %s\n", err.msg);
  }
  hy_part_free(&q);
  return rc;
}

#endif
