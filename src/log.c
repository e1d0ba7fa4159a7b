/* SPDX-License-Identifier: GPL-3.0-or-later
 * log.c: see log.h. */
#include "config.h"

#include "log.h"
#include "lsan.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int log_rank = 0;
static int log_size = 1;
static int log_quiet = 0;
static double log_t0 = 0.0;

double hy_wtime(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0.0;
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void hy_log_init(int rank, int size) {
  log_rank = rank;
  log_size = size;
  log_t0 = hy_wtime();
}

int hy_log_rank(void) { return log_rank; }
int hy_log_size(void) { return log_size; }
double hy_log_elapsed(void) { return hy_wtime() - log_t0; }
void hy_log_set_quiet(int quiet) { log_quiet = quiet; }
int hy_log_quiet(void) { return log_quiet; }

void hy_msg(const char *fmt, ...) {
  if (log_rank != 0 || log_quiet) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stdout, fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
  fflush(stdout);
}

void hy_msg_all(const char *fmt, ...) {
  if (log_quiet) return;
  va_list ap;
  va_start(ap, fmt);
  if (log_size > 1) fprintf(stdout, "[%d] ", log_rank);
  vfprintf(stdout, fmt, ap);
  va_end(ap);
  fputc('\n', stdout);
  fflush(stdout);
}

/* One line "hytree: KIND: [rank R] message" written with a single call, so
 * that output forwarded by the MPI launcher is not interleaved mid-line. */
static void emit(const char *kind, const char *fmt, va_list ap) {
  char line[4096];
  int n = log_size > 1 ? snprintf(line, sizeof line, "hytree: %s: [rank %d] ", kind, log_rank)
                       : snprintf(line, sizeof line, "hytree: %s: ", kind);
  if (n < 0) n = 0;
  if ((size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  size_t len = strlen(line);
  if (len + 1 < sizeof line) {
    line[len] = '\n';
    line[len + 1] = '\0';
  } else {
    line[sizeof line - 2] = '\n';
  }
  fflush(stdout);
  fputs(line, stderr);
  fflush(stderr);
}

void hy_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit("warning", fmt, ap);
  va_end(ap);
}

static void (*on_die)(void) = NULL;

void hy_log_on_die(void (*fn)(void)) { on_die = fn; }

void hy_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit("error", fmt, ap);
  va_end(ap);
  void (*fn)(void) = on_die;
  on_die = NULL; /* once, also if fn dies */
  if (fn) fn();
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized && log_size > 1) MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
  if (inited && !finalized) {
    HY_LSAN_CHECK(); /* before MPI unloads its plugins (lsan.h) */
    MPI_Finalize();
  }
  exit(EXIT_FAILURE);
}

int hy_mpi_check(int rc, const char *what, struct hy_err *err) {
  if (rc == MPI_SUCCESS) return 0;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error code %d", rc);
  return hy_err_set(err, "%s failed: %s", what, msg);
}

int hy_err_set(struct hy_err *err, const char *fmt, ...) {
  if (!err) return -1;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  return -1;
}
