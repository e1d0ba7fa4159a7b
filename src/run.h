/* SPDX-License-Identifier: GPL-3.0-or-later
 * run.h: the `hytree run` subcommand. */
#ifndef HY_RUN_H
#define HY_RUN_H

#include <stddef.h>
#include <stdio.h>

/** argv[0] == "run". Returns the process exit status (0, 1 runtime or input
 *  error, 2 usage error). */
int hy_cmd_run(int argc, char **argv);

/** Print the usage of `hytree run` (and the parameter table when full). */
void hy_run_usage(FILE *out, int full);

/** Print the problems a parameter parse reported (hy_params_parse_*: one
 *  per line) as `hytree run` does, each as an error line on stderr. */
void hy_run_print_errors(const char *errors);

struct hy_cl;
struct hy_err;
struct hy_params;
struct hy_part;
struct hy_pool;

/** A run inside another command (`hytree bench --time`): what the caller
 *  looks at after the last step, and what the run reports. */
struct hy_run_embed {
  /** After the last step, with the device still open: p holds the final
   *  particles, p->acc the total acceleration of the last step's force (the
   *  hybrid scheme's hard + soft), G and eps are the run's. NULL: none.
   *  Returns 0 or -1 with err set. */
  int (*at_end)(void *ctx, struct hy_cl *cl, struct hy_pool *pool, const struct hy_part *p, double G, double eps,
                struct hy_err *err);
  void *ctx;
  /* set by hy_run_embedded when it returns 0 */
  size_t n;      /**< particles */
  double t0;     /**< the ICs' time */
  long steps;    /**< steps (soft steps of the hybrid scheme): the rows of timings.csv */
  double wall;   /**< the steps' wall time, the sum of t_step of timings.csv [s] */
  double max_de; /**< the largest rel_energy_error of energy.csv */
  double inter;  /**< interactions of the force evaluations in the steps */
  double kernel; /**< their device kernel time, the sum of t_kernel of timings.csv [s] */
};

/** Run the validated parameters par (borrowed; its `auto` values are
 *  resolved in it) as `hytree run` does, on this rank alone
 *  (MPI_COMM_SELF), with these differences: no snapshot is written, no
 *  signal handler is installed, and the last step also computes the total
 *  acceleration and brings the particles to the host for e->at_end.
 *  OutputDir receives params-used.txt, energy.csv and timings.csv. name
 *  stands for the parameter file in messages. Errors are printed as
 *  `hytree run` prints them. Returns the exit status (0 or 1). */
int hy_run_embedded(struct hy_params *par, const char *name, struct hy_run_embed *e);

#endif
