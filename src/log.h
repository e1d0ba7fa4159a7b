/* SPDX-License-Identifier: GPL-3.0-or-later
 * log.h: messages, warnings, fatal errors and error buffers.
 * Owns the process-wide log state (rank, start time, verbosity). Fatal errors
 * end every rank (MPI_Abort when more than one rank runs). */
#ifndef HY_LOG_H
#define HY_LOG_H

#include <stdarg.h>
#include <stddef.h>

/** Error buffer filled by library functions that return -1 on failure. */
struct hy_err {
  char msg[2048]; /**< one-line, human-readable description of the failure */
};

void hy_log_init(int rank, int size);
int hy_log_rank(void);
int hy_log_size(void);
/** Seconds since hy_log_init (monotonic clock). */
double hy_log_elapsed(void);
/** Set quiet mode (messages suppressed, warnings and errors still shown). */
void hy_log_set_quiet(int quiet);
/** Nonzero in quiet mode. */
int hy_log_quiet(void);

/** Informational message from rank 0, to stdout. */
void hy_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/** Informational message from any rank, tagged with the rank. */
void hy_msg_all(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/** Warning to stderr (every rank that calls it). */
void hy_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/** Fatal error: print "hytree: error: ..." to stderr and end all ranks. */
void hy_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/** A function hy_die calls (once) after its message and before it ends the
 *  ranks, e.g. to write this rank's diagnostics; NULL: none. */
void hy_log_on_die(void (*fn)(void));

/** Fill an error buffer (printf-style). Always returns -1. */
int hy_err_set(struct hy_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Convert an MPI return code into err ("what: MPI message"); 0 when rc is
 *  MPI_SUCCESS, else -1. */
int hy_mpi_check(int rc, const char *what, struct hy_err *err);

/** Monotonic wall clock in seconds. */
double hy_wtime(void);

#endif
