/* SPDX-License-Identifier: GPL-3.0-or-later
 * trace.h: an optional timeline of a run's phases, per rank and thread, for
 * seeing where a distributed step waits (which parts overlap, which wait
 * for another rank or for the device). Off unless HYTREE_TRACE=PREFIX is
 * set: every rank then writes PREFIX.RANK.csv at the end of the run (rows
 * "lane,phase,t0,t1": lane 0 the main thread, 1 the device thread, 2 a helper
 * of the main thread (the decomposition's cut made ahead); times in
 * seconds since the start of rank 0's trace, from the node's monotonic
 * clock, so the ranks of one node share a time axis). tools/trace_report.py
 * summarises the files. Recording costs a clock read and a short critical
 * section per phase; nothing is recorded while tracing is off. Rank 0's
 * HYTREE_TRACE decides for every rank. A rank that ends the run with
 * hy_die writes its file first; the others, ended by it, write none.
 * Knows nothing of MPI beyond the broadcasts at the start. */
#ifndef HY_TRACE_H
#define HY_TRACE_H

#include <mpi.h>

#include "log.h"

enum { HY_TRACE_MAIN = 0, HY_TRACE_DEVICE = 1, HY_TRACE_AUX = 2 /* a helper thread of the main thread's */ };

/** Start tracing if rank 0's HYTREE_TRACE is set (collective over comm).
 *  Returns 0, or -1 with err set. */
int hy_trace_open(MPI_Comm comm, struct hy_err *err);
/** Nonzero while tracing. */
int hy_trace_on(void);
/** The clock for a phase's start (0 when tracing is off). */
double hy_trace_t(void);
/** Record phase `name` (a string literal: it is kept by pointer) from t0
 *  (hy_trace_t) to now on `lane`. Thread-safe. No-op when off. */
void hy_trace(int lane, const char *name, double t0);
/** Record phase `name` from t0 to t1 (hy_wtime clock), e.g. a device
 *  kernel's duration from its profiling event placed before a known end. */
void hy_trace_span(int lane, const char *name, double t0, double t1);
/** Write this rank's file (PREFIX.RANK.csv, through a temporary name) and
 *  stop tracing. Returns 0 or -1 with err set. */
int hy_trace_close(struct hy_err *err);

#endif
