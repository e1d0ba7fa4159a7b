/* SPDX-License-Identifier: GPL-3.0-or-later
 * worker.h: one persistent helper thread that runs one job at a time for its
 * owner (the device thread of the overlap scheme: it alone talks to the
 * OpenCL queue while the main thread does MPI, LET selection and tree
 * builds). A job is a function returning 0 or -1; submit returns at once,
 * wait returns the job's result. Records the thread's busy time. Knows
 * nothing of MPI or OpenCL. */
#ifndef HY_WORKER_H
#define HY_WORKER_H

struct hy_worker;

typedef int (*hy_worker_fn)(void *arg);

/** Start the thread. threaded = 0 runs every job inline in hy_worker_submit
 *  (same results, no overlap). Ends the run if the thread cannot start. */
struct hy_worker *hy_worker_create(int threaded);
/** Join the thread (waits for a running job first). NULL is allowed. */
void hy_worker_free(struct hy_worker *w);
/** Start fn(arg) on the thread. At most one job may be outstanding. */
void hy_worker_submit(struct hy_worker *w, hy_worker_fn fn, void *arg);
/** Wait for the outstanding job; returns its result (0 if none). */
int hy_worker_wait(struct hy_worker *w);
/** Seconds the thread spent running jobs since the last call; resets it. */
double hy_worker_take_busy(struct hy_worker *w);

#endif
