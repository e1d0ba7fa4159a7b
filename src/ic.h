/* SPDX-License-Identifier: GPL-3.0-or-later
 * ic.h: built-in initial-condition generators (GSL random numbers).
 * Knows nothing of files, trees or devices; `hytree ic` wraps these. */
#ifndef HY_IC_H
#define HY_IC_H

#include <stdint.h>

#include "log.h"
#include "part.h"

/** Plummer sphere in Hénon units (G = M = 1, E = -1/4 for the untruncated
 *  model, scale a = 3 pi / 16) by the Aarseth-Henon-Wielen (1974) method,
 *  mass fraction truncated at 0.999, isotropic velocities from
 *  g(q) = q^2 (1 - q^2)^{7/2}, shifted to the centre-of-mass frame.
 *  Equal masses 1/n, IDs 1..n, type 1. Reproducible for a given (n, seed).
 *  Returns 0 or -1 with err set (n == 0). */
int hy_ic_plummer(size_t n, uint64_t seed, struct hy_part *p, struct hy_err *err);

/** Parse "plummer:N[:seed]" (seed defaults to 1). Returns 1 if spec is such a
 *  generator string (and fills n, seed), 0 if it is not, -1 with err if it is
 *  malformed (e.g. "plummer:abc"). */
int hy_ic_parse_spec(const char *spec, size_t *n, uint64_t *seed, struct hy_err *err);

/** `hytree ic` subcommand: argv[0] == "ic". Returns the process exit status. */
int hy_cmd_ic(int argc, char **argv);

#endif
