/* SPDX-License-Identifier: GPL-3.0-or-later
 * shm.h: a node's ranks exchanging data through an MPI shared-memory
 * window (MPI_Comm_split_type, MPI_Win_allocate_shared) instead of MPI
 * messages: each rank writes what the others of its node need into its own
 * segment, a barrier, and each reads its part from theirs. A segment has two
 * halves that alternate from one exchange to the next, so that the writes
 * of an exchange never meet the reads of the one before. The LET items
 * (let.c) and the decomposition's particles (decomp.c) travel this way. */
#ifndef HY_SHM_H
#define HY_SHM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

struct hy_shm;

/** Whether this process uses the windows (NodeSharedMemory; default yes),
 *  for the LET and the decomposition alike: set before they are created. */
void hy_shm_set_use(int use);
int hy_shm_env(void);

/** Collective on comm: the ranks of this node (none when alone on it, or
 *  when any rank passes want = 0: then every rank uses messages). `what`
 *  names the user in messages ("LET"), `phase` the trace phase of a window
 *  made or grown ("let_window"); both are kept, not copied. Dies on a
 *  failed MPI call. */
struct hy_shm *hy_shm_create(MPI_Comm comm, int want, const char *what, const char *phase);
void hy_shm_free(struct hy_shm *S);

/** The number of ranks sharing this rank's window (0: none). */
int hy_shm_node_ranks(const struct hy_shm *S);

/** Whether rank r of comm (not this one) is reached through the window. */
int hy_shm_peer(const struct hy_shm *S, int r);

/** Whether every rank of comm shares the window with every other (one node):
 *  then nothing travels in messages. The same on every rank. */
int hy_shm_all(const struct hy_shm *S);

/** Collective on the node (every rank of it, with the window or without):
 *  make each half at least the node's largest `need` bytes; when it grows,
 *  the node's largest `want` (>= need). Then hy_shm_mine and hy_shm_theirs
 *  address the current exchange's half. Returns 0 or -1. */
int hy_shm_reserve(struct hy_shm *S, uint64_t need, uint64_t want, struct hy_err *err);

/** This rank's half for the current exchange (after hy_shm_reserve),
 *  aligned to 64 bytes (as the window's segments are, to a page). */
unsigned char *hy_shm_mine(const struct hy_shm *S);

/** Peer r's half for the current exchange: read it after hy_shm_sync. */
const unsigned char *hy_shm_theirs(const struct hy_shm *S, int r);

/** Collective on the node: the writes of every rank visible to all (a
 *  memory sync, a barrier, a memory sync). The halves of this exchange stay
 *  readable until the next hy_shm_reserve. Returns 0 or -1. */
int hy_shm_sync(struct hy_shm *S, struct hy_err *err);

#endif
