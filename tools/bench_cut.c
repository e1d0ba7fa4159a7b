/* SPDX-License-Identifier: GPL-3.0-or-later
 * bench_cut.c: times rank 0's multisection of the decomposition samples
 * (the cut that hybrid runs make in the last hard step before a soft step,
 * `dd_bounds` in HYTREE_TRACE) on the positions of a Plummer sphere, with
 * the x cuts on one thread and on the pool (hy_decomp_cut_samples). The grid
 * is that of the rank count, so start it with as many ranks as the run it
 * stands for; only rank 0 works, the others wait without spinning.
 *
 * usage: mpirun -n P tools/bench_cut [-n SAMPLES] [-t THREADS] [-r REPS] [-s SEED]
 *   -n SAMPLES  samples (default 262144: 2^26 particles at SampleRate 2^-8)
 *   -t THREADS  pool threads (default: HYTREE_NUM_THREADS or the online CPUs)
 *   -r REPS     measured cuts per variant (default 20; the best and the mean are printed)
 *   -s SEED     Plummer seed (default 1)
 * Prints, per variant, the best and mean wall time, whether the pool ran
 * the x cuts, and whether both variants gave the same x boundaries. */
#include "config.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "decomp.h"
#include "ic.h"
#include "log.h"
#include "part.h"
#include "threads.h"

#include "tool_args.h"

static const char usage_line[] = "usage: mpirun -n P bench_cut [-n SAMPLES] [-t THREADS] [-r REPS] [-s SEED]";

static long parse_long(const char *s, long min) { return tool_count(s, min, usage_line); }

static void usage(void) {
  fprintf(stderr, "%s\n", usage_line);
  exit(2);
}

int main(int argc, char **argv) {
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) hy_die("bench_cut: MPI_Init failed");
  int rank = 0, size = 1;
  if (MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS)
    hy_die("bench_cut: MPI_Comm_rank or MPI_Comm_size failed");
  hy_log_init(rank, size);
  size_t ns = 262144;
  int threads = 0, reps = 20;
  uint64_t seed = 1;
  int o;
  while ((o = getopt(argc, argv, "n:t:r:s:h")) != -1) {
    switch (o) {
    case 'n': ns = (size_t)parse_long(optarg, 1); break;
    case 't': threads = (int)parse_long(optarg, 1); break;
    case 'r': reps = (int)parse_long(optarg, 1); break;
    case 's': seed = (uint64_t)parse_long(optarg, 0); break;
    default: usage();
    }
  }
  if (threads < 1) threads = hy_pool_default_threads();
  struct hy_err err;
  struct hy_decomp *d = hy_decomp_create(MPI_COMM_WORLD, NULL, 1.0 / 256, 1, 1, &err);
  if (!d) hy_die("bench_cut: %s", err.msg);
  if (rank == 0) {
    struct hy_pool *pool = hy_pool_create(threads);
    hy_decomp_set_pool(d, pool);
    struct hy_part p;
    hy_part_init(&p);
    if (hy_ic_plummer(ns, seed, &p, &err) != 0) hy_die("bench_cut: %s", err.msg);
    const size_t bytes = hy_size_mul_or_die(ns, 3 * sizeof(double), "samples");
    double *work = hy_malloc("samples", ns, 3 * sizeof(double));
    size_t nb = 0;
    (void)hy_decomp_bounds(d, &nb);
    double *b[2] = {hy_malloc("boundaries", nb, sizeof(double)), hy_malloc("boundaries", nb, sizeof(double))};
    int grid[3];
    hy_decomp_grid(d, grid);
    printf("bench_cut: %zu samples, grid %dx%dx%d, %d threads\n", ns, grid[0], grid[1], grid[2], threads);
    for (int par = 0; par < 2; par++) {
      double best = 0.0, sum = 0.0;
      int ran = 0;
      for (int r = 0; r <= reps; r++) {
        memcpy(work, p.pos, bytes);
        const double t0 = hy_wtime();
        ran = hy_decomp_cut_samples(d, work, ns, par, b[par]);
        const double t = hy_wtime() - t0;
        if (r == 0) continue; /* warm-up */
        sum += t;
        if (r == 1 || t < best) best = t;
      }
      printf("  x cuts %-12s best %.3f ms, mean %.3f ms%s\n", par ? "on the pool:" : "one thread:", 1e3 * best,
             1e3 * sum / reps,
             par && !ran ? " (one thread after all: fewer than 4 threads or 65 536 samples, or a cut missed its band)"
                         : "");
    }
    int same = 1;
    for (int k = 0; k <= grid[0]; k++) same = same && b[0][k] == b[1][k];
    printf("  x boundaries %s\n", same ? "the same" : "DIFFER");
    hy_free(b[0]);
    hy_free(b[1]);
    hy_free(work);
    hy_part_free(&p);
    hy_decomp_set_pool(d, NULL);
    hy_pool_free(pool);
  }
  /* the others wait without spinning (a blocking barrier polls a core) */
  MPI_Request req;
  int done = 0;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS) hy_die("bench_cut: MPI_Ibarrier failed");
  while (!done) {
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) hy_die("bench_cut: MPI_Test failed");
    if (!done) {
      const struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
  hy_decomp_free(d);
  MPI_Finalize();
  return 0;
}
