/* SPDX-License-Identifier: GPL-3.0-or-later
 * bench_internal.h: what the parts of `hytree bench` share: the force error
 * (bench_ref.h) and the --time mode (bench_time.c), which bench.c's command
 * line hands over to. Not part of any other module's interface. */
#ifndef HY_BENCH_INTERNAL_H
#define HY_BENCH_INTERNAL_H

#include <stdio.h>

#include "bench_ref.h"

/** `hytree bench --time T ...` (argv[0] == "bench"). Returns the exit
 *  status (0, 1 runtime or input error, 2 usage error). */
int hy_bench_time(int argc, char **argv);

/** The usage text of the --time mode (part of `hytree bench --help`). */
void hy_bench_time_usage(FILE *out);

/** The whole usage text of `hytree bench` (bench.c). */
void hy_bench_usage(FILE *out);

#endif
