/* SPDX-License-Identifier: GPL-3.0-or-later
 * let_counts.c: sizes of the hard and full locally essential trees against
 * the rank count (Watanabe & Nakasato Fig. 4), without any force walk.
 * Every rank generates its own Plummer sphere of N/P particles (seed + rank;
 * the union is a Plummer sphere of N particles), the domain decomposition
 * distributes them (a second decomposition uses the hard-LET sizes of the
 * first as the extra weight of eq 13), every rank builds its local tree (in
 * the key cube of the whole set, hy_let_key_cube, as hytree does) with
 * Watanabe & Nakasato's defaults in Henon units (a_err = 2^-8, R2 = 2.06 N^-1/3, n_crit 16),
 * selects the full LET for every other rank and counts the hard LET, and
 * the items are exchanged. Rank 0 prints one line:
 *   P N mean(N_local) mean(N_hard) mean(N_soft) N_hard/N_soft
 *   (N_local+N_hard)/(N_local+N_soft) max/mean(N_local+N_hard) t_select t_exchange
 * with the ratios of the rank means, as Watanabe & Nakasato report them.
 *
 * usage: mpiexec -n P let_counts [-N N] [-s SEED] [-t THREADS] */
#include "config.h"

#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decomp.h"
#include "ic.h"
#include "let.h"
#include "log.h"
#include "part.h"
#include "threads.h"
#include "tree.h"

static void fail(const char *what, const struct hy_err *err) {
  fprintf(stderr, "let_counts: %s: %s\n", what, err ? err->msg : "failed");
  MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv) {
  int provided, P, rank;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return 1;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  hy_log_init(rank, P);
  long long n_total = 1 << 23;
  unsigned long seed = 1;
  int threads = 1, opt;
  while ((opt = getopt(argc, argv, "N:s:t:")) != -1) {
    if (opt == 'N') n_total = atoll(optarg);
    else if (opt == 's') seed = strtoul(optarg, NULL, 10);
    else if (opt == 't') threads = atoi(optarg);
    else fail("usage: let_counts [-N N] [-s SEED] [-t THREADS]", NULL);
  }
  if (n_total < P) fail("N must be at least the number of ranks", NULL);
  MPI_Comm comm;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &comm) != MPI_SUCCESS ||
      MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN) != MPI_SUCCESS)
    fail("MPI_Comm_dup", NULL);
  struct hy_err err;
  struct hy_part p;
  hy_part_init(&p);
  size_t n_mine = (size_t)(n_total / P + (rank < n_total % P));
  if (hy_ic_plummer(n_mine, seed + (unsigned long)rank, &p, &err) != 0) fail("Plummer", &err);
  for (size_t i = 0; i < p.n; i++) {
    p.mass[i] = 1.0 / (double)n_total;
    p.id[i] += (uint64_t)rank * (uint64_t)(n_total / P + 1);
  }
  const double r2 = 2.0 * 1.03 * pow((double)n_total, -1.0 / 3.0), a_err = ldexp(1.0, -8);
  struct hy_pool *pool = hy_pool_create(threads);
  struct hy_decomp *dd = hy_decomp_create(comm, NULL, ldexp(1.0, -8), 1.0, 12345, &err);
  if (!dd) fail("decomposition", &err);
  struct hy_let *L = hy_let_create(comm, pool);
  hy_let_set_full_open(L, 1.0); /* N_soft as Watanabe & Nakasato's eq 14 defines it */
  struct hy_tree t;
  hy_tree_init(&t);
  struct hy_part remote;
  hy_part_init(&remote);
  double extra = 0.0, v[5] = {0};
  struct hy_let_stats st;
  for (int round = 0; round < 2; round++) {
    if (hy_decomp_exchange(dd, &p, extra, NULL, &err) != 0) fail("decomposition", &err);
    memset(&st, 0, sizeof st);
    /* the local trees in the key cube of the whole set, as hytree builds them on several ranks */
    double centre[3], half;
    const int shrunk = hy_let_key_cube_of(L, &t, &p, pool, centre, &half, &err);
    if (shrunk < 0) fail("key cube", &err);
    if (p.n) {
      hy_tree_sort_in(&t, &p, pool, centre, half, shrunk);
      if (hy_tree_build(&t, &p, 16, a_err, pool, &err) != 0) fail("tree", &err);
    }
    if (hy_let_boxes(L, &p, NULL, NULL, 0.0, &st, &err) != 0) fail("boxes", &err);
    hy_let_select(L, p.n ? &t : NULL, &p, 0, r2, 1, &st);
    if (hy_let_exchange(L, &remote, &st, &err) != 0) fail("exchange", &err);
    extra = (double)st.n_recv_hard;
  }
  double mine[6] = {(double)p.n, (double)st.n_recv_hard, (double)st.n_recv, (double)p.n + (double)st.n_recv_hard,
                    st.t_select, st.t_comm};
  double sum[6], mx[6];
  if (MPI_Reduce(mine, sum, 6, MPI_DOUBLE, MPI_SUM, 0, comm) != MPI_SUCCESS ||
      MPI_Reduce(mine, mx, 6, MPI_DOUBLE, MPI_MAX, 0, comm) != MPI_SUCCESS)
    fail("MPI_Reduce", NULL);
  if (rank == 0) {
    for (int k = 0; k < 3; k++) v[k] = sum[k] / P;
    printf("%d %lld %.1f %.1f %.1f %.4f %.4f %.4f %.3f %.3f\n", P, n_total, v[0], v[1], v[2], v[1] / v[2],
           (v[0] + v[1]) / (v[0] + v[2]), mx[3] / (sum[3] / P), mx[4], mx[5]);
  }
  hy_part_free(&remote);
  hy_tree_free(&t);
  hy_let_free(L);
  hy_decomp_free(dd);
  hy_pool_free(pool);
  hy_part_free(&p);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}
