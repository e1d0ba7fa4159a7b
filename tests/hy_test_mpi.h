/* SPDX-License-Identifier: GPL-3.0-or-later
 * hy_test_mpi.h: the start and end of an MPI unit test (tests/test_decomp,
 * tests/test_let): MPI_Init with LeakSanitizer paused (the MPI library's
 * own allocations are not ours), the rank, the size and the log's rank; at
 * the end the failures of every rank summed, rank 0's verdict, the leak
 * check and MPI_Finalize. Include after hy_test.h. */
#ifndef HY_TEST_MPI_H
#define HY_TEST_MPI_H

#include <mpi.h>
#include <stdio.h>

#include "log.h"
#include "lsan.h"

static void hy_test_mpi_begin(int *argc, char ***argv, const char *name, int *rank, int *size) {
  HY_LSAN_DISABLE();
  MPI_Init(argc, argv);
  HY_LSAN_ENABLE();
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  hy_log_init(*rank, *size);
  if (*rank == 0) printf("%s: %d rank(s)\n", name, *size);
}

/* Returns the test's exit status: 0 when no rank failed a check. */
static int hy_test_mpi_end(const char *name, int rank, int size) {
  int failures = hy_test_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("%s: %d rank(s): %s\n", name, size, total ? "FAILED" : "all passed");
  HY_LSAN_CHECK();
  MPI_Finalize();
  return total ? 1 : 0;
}

#endif
