/* SPDX-License-Identifier: GPL-3.0-or-later
 * restart.h: restart sets. Owns their layout on disk and their atomic
 * publication. A set lives in OutputDir/restart/A or OutputDir/restart/B,
 * one file per rank (rank_NNNNN.bin: a header with magic, format version,
 * code version, rank count, step and an FNV-1a checksum of the payload,
 * then the payload: the run state, the parameters, a blob of the caller's
 * (the decomposition) and this rank's particles in their current order).
 * OutputDir/restart/current names the slot of the last complete set and is
 * replaced atomically only after every rank's file is written and synced,
 * so a crash or SIGKILL while writing leaves the previous set loadable.
 * Collective over the communicator; knows nothing of trees or devices. */
#ifndef HY_RESTART_H
#define HY_RESTART_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "part.h"

#define HY_RESTART_FORMAT 2

/** The run state at a soft-step boundary (the same on every rank). */
struct hy_restart_state {
  int64_t step;        /**< steps done since t0 */
  double t0;           /**< time of the ICs */
  double dt_h;         /**< hard step actually used */
  double G, eps, r1, r2, a_err; /**< resolved force parameters */
  int32_t n_ratio;     /**< hard steps per step (1 for tree and direct) */
  int32_t snap_count;  /**< next snapshot number */
  int64_t next_snap;   /**< index of the next snapshot time */
  int64_t next_energy; /**< index of the next energy time */
  double e0;           /**< energy at t0 (for |dE/E|) */
  uint64_t n_total;    /**< particles on all ranks */
  uint64_t last_hard;  /**< this rank's N_hard for the next decomposition */
};

/** Write a restart set for this rank's particles p (positions, velocities,
 *  masses, IDs, types and the kick acceleration acc_w) with the parameters
 *  `params` (text of params-used.txt) and an opaque blob. Collective.
 *  `kill_before_publish` (tests only): SIGKILL this process after its file is
 *  written, before the set is published. Returns 0, or -1 on every rank. */
int hy_restart_write(MPI_Comm comm, const char *outdir, const struct hy_restart_state *st, const char *params,
                     const void *blob, size_t blob_bytes, const struct hy_part *p, int kill_before_publish,
                     struct hy_err *err);

/** Read the current restart set of outdir into st, *params (malloc'd text),
 *  *blob (malloc'd) and p (resized). Every rank reads its own file; the set
 *  must have been written by as many ranks as comm has. Collective. Returns
 *  0, or -1 on every rank with a message naming the file. */
int hy_restart_read(MPI_Comm comm, const char *outdir, struct hy_restart_state *st, char **params, void **blob,
                    size_t *blob_bytes, struct hy_part *p, struct hy_err *err);

#endif
