/* SPDX-License-Identifier: GPL-3.0-or-later
 * bench.h: the `hytree bench` subcommand. */
#ifndef HY_BENCH_H
#define HY_BENCH_H

/** argv[0] == "bench". Returns the process exit status (0, 1 runtime
 *  error, 2 usage error). */
int hy_cmd_bench(int argc, char **argv);

#endif
