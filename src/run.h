/* SPDX-License-Identifier: GPL-3.0-or-later
 * run.h: the `hytree run` subcommand. */
#ifndef HY_RUN_H
#define HY_RUN_H

#include <stdio.h>

/** argv[0] == "run". Returns the process exit status (0, 1 runtime or input
 *  error, 2 usage error). */
int hy_cmd_run(int argc, char **argv);

/** Print the usage of `hytree run` (and the parameter table when full). */
void hy_run_usage(FILE *out, int full);

#endif
