/* SPDX-License-Identifier: GPL-3.0-or-later
 * split.h: the hard/soft force split of Watanabe & Nakasato (eq 7-10), the
 * DLL switching kernel K(r) of PPPT (Oshino, Funato & Makino 2011), on the
 * host in double precision; the polynomial is hy_shared.h's, which
 * opencl/walk.cl evaluates in float. */
#ifndef HY_SPLIT_H
#define HY_SPLIT_H

#include "hy_shared.h"

/** K(r): 1 for r <= R1, 0 for r >= R2, 10Y^6 - 15Y^8 + 6Y^10 in between with
 *  Y = (R2 - r) / (R2 - R1); r is the unsoftened separation. */
static inline double hy_dll_k(double r, double r1, double r2) {
  if (r <= r1) return 1.0;
  if (r >= r2) return 0.0;
  double y = (r2 - r) / (r2 - r1);
  y *= y;
  return HY_DLL_POLY(y);
}

#endif
