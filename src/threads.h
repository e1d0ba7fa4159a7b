/* SPDX-License-Identifier: GPL-3.0-or-later
 * threads.h: a small persistent pthread pool with one primitive, a parallel
 * for over [0, n) in contiguous chunks. Owns its worker threads; knows nothing
 * of MPI or OpenCL. Calls into the pool must come from one thread at a time. */
#ifndef HY_THREADS_H
#define HY_THREADS_H

#include <stddef.h>

struct hy_pool;

/** Body of a parallel loop: process [begin, end) as worker `tid`. */
typedef void (*hy_pool_fn)(void *arg, size_t begin, size_t end, int tid);

/** Create a pool of n_threads workers (n_threads >= 1; 1 = run inline). */
struct hy_pool *hy_pool_create(int n_threads);
void hy_pool_free(struct hy_pool *pool);
int hy_pool_size(const struct hy_pool *pool);
/** Run fn over [0, n) split into at most pool-size contiguous chunks of at
 *  least min_chunk items; returns when all chunks are done. Callable from
 *  any thread: the jobs of several threads run one after the other (a job
 *  that fits one chunk runs on the calling thread at once), and a call
 *  from inside a job runs inline on its thread. */
void hy_pool_for(struct hy_pool *pool, size_t n, size_t min_chunk, hy_pool_fn fn, void *arg);
/** Default thread count: HYTREE_NUM_THREADS if set, else the online CPUs. */
int hy_pool_default_threads(void);

#endif
