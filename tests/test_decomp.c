/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_decomp.c: the domain decomposition (src/decomp.c) under MPI at any rank
 * count (tests/decomp_mpi.sh runs it at 1 to 4 ranks). Checks the grid
 * factorisation and DomainGrid parsing, then moves clustered particle sets
 * that start badly distributed (all on rank 0; skewed blocks; 3 particles;
 * none) and asserts after every exchange: the global count, the set of IDs
 * and every particle's full record (bitwise), the total mass (bitwise, summed
 * in ID order), the momentum (relative 1e-12), that every particle lies in
 * its owner's cuboid and the cuboids tile space, the order within a rank, and
 * the load balance within a tolerance derived from the sampling noise.
 * The exchange with the positions and velocities on an (emulated) device
 * must give the host exchange's result bit for bit, and the moves both
 * report must be the ones made. */
#include "config.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "decomp.h"
#include "hy_test.h"
#include "hy_test_mpi.h"
#include "log.h"
#include "lsan.h"
#include "part.h"
#include "shm.h"

static int rank, nranks;

#define ID_BASE 1000003ULL
#define ID_STRIDE 7ULL
#define NREC 16 /* doubles per particle record in the checks */

/* ------------------------------------------------------------- factor/parse */

static void test_factor(void) {
  static const int table[][4] = {{1, 1, 1, 1},  {2, 2, 1, 1},   {3, 3, 1, 1},   {4, 2, 2, 1},  {6, 3, 2, 1},
                                 {7, 7, 1, 1},  {8, 2, 2, 2},   {12, 3, 2, 2},  {16, 4, 2, 2}, {32, 4, 4, 2},
                                 {64, 4, 4, 4}, {128, 8, 4, 4}, {27, 3, 3, 3}, {18, 3, 3, 2}, {24, 4, 3, 2},
                                 {9, 3, 3, 1},  {256, 8, 8, 4}, {11, 11, 1, 1}};
  for (size_t k = 0; k < sizeof table / sizeof table[0]; k++) {
    int g[3];
    hy_decomp_factor(table[k][0], g);
    HY_CHECK_MSG(g[0] == table[k][1] && g[1] == table[k][2] && g[2] == table[k][3], "P = %d: %dx%dx%d, want %dx%dx%d",
                 table[k][0], g[0], g[1], g[2], table[k][1], table[k][2], table[k][3]);
  }
  for (int P = 1; P <= 1000; P++) {
    int g[3];
    hy_decomp_factor(P, g);
    HY_CHECK_MSG(g[0] * g[1] * g[2] == P && g[0] >= g[1] && g[1] >= g[2] && g[2] >= 1, "P = %d: %dx%dx%d", P, g[0],
                 g[1], g[2]);
  }
}

static void test_parse(void) {
  struct hy_err err;
  int g[3];
  HY_CHECK(hy_decomp_parse_grid("auto", 6, g, &err) == 0 && g[0] == 3 && g[1] == 2 && g[2] == 1);
  HY_CHECK(hy_decomp_parse_grid("4x2x2", 16, g, &err) == 0 && g[0] == 4 && g[1] == 2 && g[2] == 2);
  HY_CHECK(hy_decomp_parse_grid("1x1x4", 4, g, &err) == 0 && g[0] == 1 && g[1] == 1 && g[2] == 4);
  err.msg[0] = '\0';
  HY_CHECK(hy_decomp_parse_grid("4x2x2", 6, g, &err) == -1);
  HY_CHECK(strcmp(err.msg, "DomainGrid 4x2x2 needs 16 MPI ranks, the run has 6") == 0);
  HY_CHECK_CONTAINS(err.msg, "DomainGrid 4x2x2 needs 16 MPI ranks, the run has 6");
  static const char *bad[] = {"", "4x2", "4x2x", "0x1x1", "-1x1x1", "4x2x2x1", "abc", "4x2x2 ", "2.0x1x1",
                              "auto2", "4X2X2", "x2x2", "99999999999x1x1"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    err.msg[0] = '\0';
    HY_CHECK_MSG(hy_decomp_parse_grid(bad[k], 16, g, &err) == -1, "'%s' accepted", bad[k]);
    HY_CHECK_CONTAINS(err.msg, "is not auto or AxBxC");
    HY_CHECK_CONTAINS(err.msg, bad[k]);
  }
  /* create refuses a grid that does not fit the communicator (collective) */
  int wrong[3] = {nranks + 1, 1, 1};
  err.msg[0] = '\0';
  struct hy_decomp *d = hy_decomp_create(MPI_COMM_WORLD, wrong, 0.5, 1, 1, &err);
  HY_CHECK(d == NULL);
  char want[128];
  snprintf(want, sizeof want, "DomainGrid %dx1x1 needs %d MPI ranks, the run has %d", nranks + 1, nranks + 1,
           nranks);
  HY_CHECK_CONTAINS(err.msg, want);
  HY_CHECK(hy_decomp_create(MPI_COMM_WORLD, NULL, 0, 1, 1, &err) == NULL);
  HY_CHECK_CONTAINS(err.msg, "SampleRate 0 is not in (0, 1]");
}

/* -------------------------------------------------------- particle sets */

/* The global reference set, identical on every rank: particle i has ID
 * ID_BASE + ID_STRIDE i. 70% in a Plummer sphere (a = 1) at the origin, 30%
 * in a compact cluster (a = 0.2) at (3, -1, 0.5); every field is set. */
static void make_global(struct hy_part *g, size_t n, unsigned long seed) {
  hy_part_init(g);
  hy_part_resize(g, n);
  gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
  gsl_rng_set(r, seed);
  for (size_t i = 0; i < n; i++) {
    int cl = gsl_rng_uniform(r) < 0.3;
    double a = cl ? 0.2 : 1.0, u = 0.001 + 0.99 * gsl_rng_uniform(r);
    double rad = a / sqrt(pow(u, -2.0 / 3.0) - 1.0), dir[3];
    gsl_ran_dir_3d(r, &dir[0], &dir[1], &dir[2]);
    static const double c[3] = {3.0, -1.0, 0.5};
    for (int k = 0; k < 3; k++) {
      g->pos[3 * i + k] = (cl ? c[k] : 0.0) + rad * dir[k];
      g->vel[3 * i + k] = gsl_ran_gaussian(r, 0.5) + (cl ? 0.3 : 0.0);
      g->acc[3 * i + k] = gsl_ran_gaussian(r, 1.0);
      g->acc_w[3 * i + k] = gsl_ran_gaussian(r, 1.0);
    }
    g->mass[i] = (0.5 + gsl_rng_uniform(r)) / (double)n;
    g->pot[i] = -gsl_rng_uniform(r);
    g->id[i] = ID_BASE + ID_STRIDE * i;
    g->type[i] = (uint8_t)(i % HY_NTYPES);
  }
  gsl_rng_free(r);
}

/* Copy global particles [i0, i1) into p (in order). */
static void take_block(struct hy_part *p, const struct hy_part *g, size_t i0, size_t i1) {
  hy_part_init(p);
  hy_part_resize(p, i1 - i0);
  for (size_t i = i0; i < i1; i++) {
    size_t j = i - i0;
    memcpy(p->pos + 3 * j, g->pos + 3 * i, 3 * sizeof(double));
    memcpy(p->vel + 3 * j, g->vel + 3 * i, 3 * sizeof(double));
    memcpy(p->acc + 3 * j, g->acc + 3 * i, 3 * sizeof(double));
    memcpy(p->acc_w + 3 * j, g->acc_w + 3 * i, 3 * sizeof(double));
    p->mass[j] = g->mass[i];
    p->pot[j] = g->pot[i];
    p->id[j] = g->id[i];
    p->type[j] = g->type[i];
  }
}

/* check_all compares only the fields that an exchange with the state on a
 * device moves (hy_decomp_exchange_dev: not the accelerations and potentials). */
static int check_moved_only;

static void record(const struct hy_part *p, size_t i, double *rec) {
  memcpy(rec, p->pos + 3 * i, 3 * sizeof(double));
  memcpy(rec + 3, p->vel + 3 * i, 3 * sizeof(double));
  memcpy(rec + 6, p->acc + 3 * i, 3 * sizeof(double));
  memcpy(rec + 9, p->acc_w + 3 * i, 3 * sizeof(double));
  rec[12] = p->mass[i];
  rec[13] = p->pot[i];
  memcpy(rec + 14, p->id + i, sizeof(uint64_t));
  rec[15] = (double)p->type[i];
}

/* Drift every particle by dt v, on the ranks and in the reference alike
 * (the same operation, so bitwise the same result). */
static void drift(struct hy_part *p, double dt) {
  for (size_t i = 0; i < 3 * p->n; i++) p->pos[i] += dt * p->vel[i];
}

/* --------------------------------------------------------------- checks */

/* Relative load-balance tolerance for R_samp `rs`, N particles, P ranks.
 * Derivation: the multisection cuts at sample quantiles. Cutting n_s samples
 * into m equal groups, a group's share of the particles is a Beta-distributed
 * fraction with relative variance (m - 1) / n_s, reduced by the finite-
 * population factor (1 - R_samp) for samples drawn without replacement.
 * hytree's draw is stratified over the storage order (one sample from each
 * of n_s equal stretches), which scatters no more than that when the order
 * is unrelated to position, as here, and less when it follows position.
 * A cuboid inherits the errors of its slab (m = Px, n_s = N_s),
 * its column (m = Py, n_s = N_s / Px) and its own cut (m = Pz, n_s =
 * N_s / (Px Py)); the variances add to (Px - 1 + Px (Py - 1) + Px Py (Pz - 1))
 * / N_s = (P - 1) / N_s. So sigma = sqrt((P - 1)(1 - R_samp) / N_s) with
 * N_s = R_samp N, and we allow 6 sigma for the largest of the P domains plus
 * 2 P / N_s for the +-1-sample granularity of the groups. With N = 40000,
 * R_samp = 0.5, P = 4: sigma = 0.0087, c = 0.052 + 0.0004. */
static double balance_tol(double rs, size_t n_total, int P) {
  double ns = rs * (double)n_total;
  return 6.0 * sqrt((P - 1) * (1.0 - rs) / ns) + 2.0 * P / ns;
}

/* Every check after an exchange. `g` is the reference (global) set;
 * st non-NULL: the received particles, which follow the kept ones, must
 * have ascending IDs (order by source, then source order, when every source
 * rank held an ascending block of lower IDs than the next). */
static void check_all(const char *what, struct hy_decomp *d, const struct hy_part *p, const struct hy_part *g,
                      const struct hy_decomp_stats *st) {
  int f0 = hy_test_failures;
  size_t n = p->n;
  /* ownership: inside the owner's cuboid, which is this rank */
  double lo[3], hi[3];
  HY_CHECK(hy_decomp_box(d, rank, lo, hi) == 0);
  size_t outside = 0, wrong_owner = 0;
  for (size_t i = 0; i < n; i++) {
    const double *x = p->pos + 3 * i;
    if (hy_decomp_owner(d, x) != rank) wrong_owner++;
    for (int k = 0; k < 3; k++)
      if (!(lo[k] <= x[k] && x[k] < hi[k])) {
        outside++;
        break;
      }
  }
  HY_CHECK_MSG(wrong_owner == 0 && outside == 0, "%s: rank %d: %zu particles owned elsewhere, %zu outside its box",
               what, rank, wrong_owner, outside);
  HY_CHECK(!st || st->n_recv <= n);
  if (st && st->n_recv <= n)
    for (size_t i = n - st->n_recv + 1; i < n; i++)
      if (!(p->id[i - 1] < p->id[i])) {
        HY_CHECK_MSG(0, "%s: rank %d: IDs not ascending at %zu (%llu, %llu)", what, rank, i,
                     (unsigned long long)p->id[i - 1], (unsigned long long)p->id[i]);
        break;
      }
  /* momentum: to rounding */
  double mom[3] = {0, 0, 0}, mom_all[3], mom_ref[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 3; k++) mom[k] += p->mass[i] * p->vel[3 * i + k];
  MPI_Allreduce(mom, mom_all, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  for (size_t i = 0; i < g->n; i++)
    for (int k = 0; k < 3; k++) mom_ref[k] += g->mass[i] * g->vel[3 * i + k];
  double mref = sqrt(mom_ref[0] * mom_ref[0] + mom_ref[1] * mom_ref[1] + mom_ref[2] * mom_ref[2]);
  for (int k = 0; k < 3; k++) HY_CHECK_ABS(mom_all[k], mom_ref[k], 1e-12 * mref + 1e-300);
  /* global count */
  unsigned long long nl = n, ntot = 0;
  MPI_Allreduce(&nl, &ntot, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  HY_CHECK_MSG(ntot == g->n, "%s: %llu particles in total, want %zu", what, ntot, g->n);
  /* gather every record on rank 0, compare with the reference by ID */
  int cnt = (int)(NREC * n), *cnts = NULL, *displs = NULL;
  double *mine = hy_malloc("test records", NREC * n + 1, sizeof(double)), *all = NULL;
  for (size_t i = 0; i < n; i++) record(p, i, mine + NREC * i);
  if (rank == 0) {
    cnts = hy_malloc("test", (size_t)nranks, sizeof(int));
    displs = hy_malloc("test", (size_t)nranks, sizeof(int));
  }
  MPI_Gather(&cnt, 1, MPI_INT, cnts, 1, MPI_INT, 0, MPI_COMM_WORLD);
  size_t tot = 0;
  if (rank == 0) {
    for (int r = 0; r < nranks; r++) {
      displs[r] = (int)tot;
      tot += (size_t)cnts[r];
    }
    all = hy_malloc("test records", tot + 1, sizeof(double));
  }
  MPI_Gatherv(mine, cnt, MPI_DOUBLE, all, cnts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    size_t m = tot / NREC, bad_id = 0, dup = 0, differ = 0, missing = 0;
    char *seen = hy_calloc("test", g->n + 1, 1);
    double *mass_by_id = hy_calloc("test", g->n + 1, sizeof(double));
    for (size_t j = 0; j < m; j++) {
      const double *rec = all + NREC * j;
      uint64_t id;
      memcpy(&id, rec + 14, sizeof id);
      if (id < ID_BASE || (id - ID_BASE) % ID_STRIDE || (id - ID_BASE) / ID_STRIDE >= g->n) {
        bad_id++;
        continue;
      }
      size_t gi = (size_t)((id - ID_BASE) / ID_STRIDE);
      if (seen[gi]++) {
        dup++;
        continue;
      }
      double want[NREC], got[NREC];
      record(g, gi, want);
      memcpy(got, rec, sizeof got);
      if (check_moved_only) { /* the state on a device: its accelerations and potentials are not moved */
        memset(want + 6, 0, 6 * sizeof(double));
        memset(got + 6, 0, 6 * sizeof(double));
        want[13] = got[13] = 0.0;
      }
      if (memcmp(want, got, sizeof want) != 0) differ++;
      mass_by_id[gi] = rec[12];
    }
    for (size_t i = 0; i < g->n; i++) missing += !seen[i];
    HY_CHECK_MSG(bad_id == 0 && dup == 0 && differ == 0 && missing == 0,
                 "%s: %zu unknown IDs, %zu duplicates, %zu changed records, %zu missing", what, bad_id, dup, differ,
                 missing);
    double msum = 0, msum_ref = 0;
    for (size_t i = 0; i < g->n; i++) {
      msum += mass_by_id[i];
      msum_ref += g->mass[i];
    }
    HY_CHECK_MSG(msum == msum_ref, "%s: total mass %.17g, want %.17g", what, msum, msum_ref);
    /* The cuboids tile space: probe points (the particles, and points on
     * and around the boundaries) lie in exactly one box, the owner's. */
    double *blo = hy_malloc("test", 3 * (size_t)nranks, sizeof(double));
    double *bhi = hy_malloc("test", 3 * (size_t)nranks, sizeof(double));
    for (int r = 0; r < nranks; r++) {
      HY_CHECK(hy_decomp_box(d, r, blo + 3 * r, bhi + 3 * r) == 0);
      for (int k = 0; k < 3; k++)
        HY_CHECK_MSG(blo[3 * r + k] <= bhi[3 * r + k] && !isnan(blo[3 * r + k]) && !isnan(bhi[3 * r + k]),
                     "%s: box %d axis %d: [%g, %g)", what, r, k, blo[3 * r + k], bhi[3 * r + k]);
    }
    size_t bad_tile = 0;
    for (size_t i = 0; i < g->n + 6 * (size_t)nranks; i++) {
      double x[3];
      if (i < g->n) {
        memcpy(x, g->pos + 3 * i, sizeof x);
      } else { /* a box corner, nudged down or up */
        size_t j = i - g->n;
        int r = (int)(j / 6);
        for (int k = 0; k < 3; k++) {
          double b = (j % 2) ? blo[3 * r + k] : bhi[3 * r + k];
          x[k] = isfinite(b) ? b : 0.0;
        }
        if (j % 3 == 1)
          for (int k = 0; k < 3; k++) x[k] = nextafter(x[k], -INFINITY);
      }
      int inside = 0, which = -1;
      for (int r = 0; r < nranks; r++) {
        int in = 1;
        for (int k = 0; k < 3; k++) in &= blo[3 * r + k] <= x[k] && x[k] < bhi[3 * r + k];
        if (in) {
          inside++;
          which = r;
        }
      }
      if (inside != 1 || which != hy_decomp_owner(d, x)) bad_tile++;
    }
    HY_CHECK_MSG(bad_tile == 0, "%s: %zu probe points not in exactly one box, the owner's", what, bad_tile);
    hy_free(blo);
    hy_free(bhi);
    hy_free(seen);
    hy_free(mass_by_id);
  }
  hy_free(mine);
  hy_free(all);
  hy_free(cnts);
  hy_free(displs);
  int failed = hy_test_failures > f0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) printf("%-46s n_total %zu: %s\n", what, g->n, any ? "FAILED" : "ok");
}

static void exchange(struct hy_decomp *d, struct hy_part *p, double w, struct hy_decomp_stats *st) {
  struct hy_err err;
  err.msg[0] = '\0';
  int rc = hy_decomp_exchange(d, p, w, st, &err);
  HY_CHECK_MSG(rc == 0, "rank %d: hy_decomp_exchange: %s", rank, err.msg);
  if (rc != 0) MPI_Abort(MPI_COMM_WORLD, 1);
}

static void check_balance(const char *what, const struct hy_decomp_stats *st, double rs, size_t n_total) {
  double tol = balance_tol(rs, n_total, nranks), ratio = st->n_after_max / st->n_after_mean;
  if (rank == 0)
    printf("%-46s N_s %llu, max/mean N_local %.4f (tolerance 1 + %.4f)\n", what,
           (unsigned long long)st->n_samples_total, ratio, tol);
  HY_CHECK_MSG(ratio <= 1 + tol, "%s: max/mean N_local = %.4f > 1 + %.4f", what, ratio, tol);
}

/* Stats that every rank can check against its own sums. */
static void check_stats(const struct hy_decomp_stats *st, const struct hy_part *p, double w, double rs) {
  HY_CHECK_INT(st->n_after, p->n);
  /* N_samp = min(N_local, max(1, round(R_samp (N_local + w)))), 0 without particles */
  double want = round(rs * ((double)st->n_before + w));
  size_t want_ns = st->n_before == 0 ? 0 : want < 1 ? 1 : want > (double)st->n_before ? st->n_before : (size_t)want;
  HY_CHECK_INT(st->n_samples_local, want_ns);
  unsigned long long loc[4] = {st->n_samples_local, st->n_sent, st->n_recv, st->bytes_sent}, sum[4];
  MPI_Allreduce(loc, sum, 4, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  HY_CHECK_INT(sum[0], st->n_samples_total);
  HY_CHECK_INT(sum[1], sum[2]);
  HY_CHECK_INT(st->bytes_sent, 121 * (unsigned long long)st->n_sent);
  HY_CHECK_INT(st->bytes_recv, 121 * (unsigned long long)st->n_recv);
  HY_CHECK(st->n_samples_local <= st->n_before);
  HY_CHECK(st->n_before == 0 || st->n_samples_local >= 1);
  double load = (double)st->n_before + w, mx, sm;
  MPI_Allreduce(&load, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&load, &sm, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  HY_CHECK(st->load_max == mx);
  HY_CHECK_REL(st->load_mean, sm / nranks, 1e-14);
  HY_CHECK(st->time >= 0);
}

/* ------------------------------------------------------------ scenarios */

#define N_MAIN 40000

/* All particles start on rank 0; exchange, drift, exchange again, then give
 * rank 0 a large weight_extra. */
static void scenario_all_on_root(void) {
  const double rs = 0.5;
  struct hy_part g, p;
  struct hy_err err;
  struct hy_decomp_stats st;
  make_global(&g, N_MAIN, 42);
  take_block(&p, &g, 0, rank == 0 ? g.n : 0);
  struct hy_decomp *d = hy_decomp_create(MPI_COMM_WORLD, NULL, rs, 1, 1234, &err);
  HY_CHECK_MSG(d != NULL, "%s", err.msg);
  if (!d) MPI_Abort(MPI_COMM_WORLD, 1);
  double x0[3] = {0, 0, 0};
  HY_CHECK(hy_decomp_owner(d, x0) == -1);
  /* the test's ranks run on one machine: they share a window, unless
   * there is one rank */
  const int nw = hy_decomp_node_ranks(d);
  if (rank == 0) printf("%-46s %d\n", "ranks sharing a window", nw);
  HY_CHECK_INT(nw, nranks > 1 && hy_shm_env() ? nranks : 0);
  exchange(d, &p, 0, &st);
  check_stats(&st, &p, 0, rs);
  HY_CHECK_INT(st.n_samples_total, (unsigned long long)llround(rs * N_MAIN));
  check_all("all on rank 0 -> exchange 1", d, &p, &g, &st);
  check_balance("all on rank 0 -> exchange 1", &st, rs, g.n);
  for (int step = 2; step <= 3; step++) {
    drift(&p, 0.05);
    drift(&g, 0.05);
    exchange(d, &p, 0, &st);
    check_stats(&st, &p, 0, rs);
    char what[64];
    snprintf(what, sizeof what, "drift + exchange %d", step);
    check_all(what, d, &p, &g, NULL);
    check_balance(what, &st, rs, g.n);
  }
  /* weight_extra: rank 0 reports 3 N_local of extra work, so it asks for
   * R_samp 4 N_local = 2 N_local samples, capped at N_local: twice the
   * sampling rate of the others, and its domain must shrink. Expected share
   * of the mean: P = 2: 1.5/2 = 0.75 (N_s = 1.5 N_local, half of them in
   * domain 0 at 1 sample per particle); P = 3: 2/3. Require < 0.85. */
  if (nranks > 1) {
    size_t n_before = p.n;
    double w = rank == 0 ? 3.0 * (double)p.n : 0.0;
    exchange(d, &p, w, &st);
    check_stats(&st, &p, w, rs);
    check_all("weight_extra 3 N_local on rank 0", d, &p, &g, NULL);
    double mean = st.n_after_mean;
    if (rank == 0) {
      printf("%-46s rank 0: N_local %zu -> %zu, mean %.1f, ratio %.3f\n", "weight_extra 3 N_local on rank 0",
             n_before, p.n, mean, (double)p.n / mean);
      HY_CHECK_MSG((double)p.n < 0.85 * mean, "rank 0 kept %zu particles, mean %.1f", p.n, mean);
      HY_CHECK(st.load_max == 4.0 * (double)n_before);
    }
    /* Equal weights again: back to balance. */
    exchange(d, &p, 0, &st);
    check_all("weight_extra 0 again", d, &p, &g, NULL);
    check_balance("weight_extra 0 again", &st, rs, g.n);
  }
  hy_decomp_free(d);

  /* Boundary smoothing (coef 0.3, DomainSmoothing) still conserves and
   * assigns correctly, and its boundaries are 0.3 of the ones that the
   * same draw cuts without it (a twin of the same seed and particles) plus
   * 0.7 of the previous ones, exactly as computed here. */
  d = hy_decomp_create(MPI_COMM_WORLD, NULL, rs, 0.3, 99, &err);
  struct hy_decomp *d1 = hy_decomp_create(MPI_COMM_WORLD, NULL, rs, 1, 99, &err);
  HY_CHECK(d != NULL && d1 != NULL);
  struct hy_part p1;
  hy_part_init(&p1);
  for (int k = 0; k < 3; k++) {
    drift(&p, 0.05);
    drift(&g, 0.05);
    size_t nb = 0, nb1 = 0;
    const double *bp = hy_decomp_bounds(d, &nb);
    double *prev = k ? hy_malloc("test", nb, sizeof(double)) : NULL;
    if (k) memcpy(prev, bp, nb * sizeof(double));
    hy_part_free(&p1);
    hy_part_init(&p1);
    hy_part_copy(&p1, &p);
    { /* the twin starts from the same boundaries and sampling state, so it draws the same samples */
      const size_t bytes = hy_decomp_state_size(d);
      void *blob = hy_malloc("test", bytes, 1);
      hy_decomp_state_save(d, blob);
      HY_CHECK_INT(hy_decomp_state_load(d1, blob, bytes, &err), 0);
      hy_free(blob);
    }
    exchange(d, &p, 0, &st);
    exchange(d1, &p1, 0, NULL);
    check_all(k == 0 ? "smoothing 0.3, exchange 1" : k == 1 ? "smoothing 0.3, exchange 2" : "smoothing 0.3, exchange 3",
              d, &p, &g, NULL);
    bp = hy_decomp_bounds(d, &nb);
    const double *b1 = hy_decomp_bounds(d1, &nb1);
    HY_CHECK_INT(nb, nb1);
    size_t off = 0;
    for (size_t i = 0; i < nb && i < nb1; i++) {
      const double want = k == 0 || !isfinite(b1[i]) ? b1[i] : 0.3 * b1[i] + (1 - 0.3) * prev[i];
      if (!(bp[i] == want)) off++;
    }
    HY_CHECK_MSG(off == 0, "smoothing 0.3, exchange %d: %zu of %zu boundaries are not 0.3 new + 0.7 old", k + 1, off,
                 nb);
    hy_free(prev);
  }
  hy_part_free(&p1);
  hy_decomp_free(d1);
  hy_decomp_free(d);
  hy_part_free(&p);
  hy_part_free(&g);
}

/* Skewed blocks: rank r starts with a block of IDs whose size grows like
 * (r + 1)^2 (rank 0 nearly empty for P > 2), an explicit grid (so that the
 * y and z cuts of the multisection run at a few ranks too), messages cut
 * into many MPI_Alltoallv rounds. */
static void scenario_skewed(const int grid[3]) {
  const double rs = 0.5;
  struct hy_part g, p;
  struct hy_err err;
  struct hy_decomp_stats st;
  make_global(&g, N_MAIN, 7);
  double wsum = 0;
  for (int r = 0; r < nranks; r++) wsum += (r + 1.0) * (r + 1.0);
  size_t i0 = 0, i1 = 0;
  double acc = 0;
  for (int r = 0; r <= rank; r++) {
    i0 = (size_t)(g.n * (acc / wsum));
    acc += (r + 1.0) * (r + 1.0);
    i1 = r == nranks - 1 ? g.n : (size_t)(g.n * (acc / wsum));
  }
  take_block(&p, &g, i0, i1);
  char what[80];
  snprintf(what, sizeof what, "skewed blocks, grid %dx%dx%d, chunked", grid[0], grid[1], grid[2]);
  struct hy_decomp *d = hy_decomp_create(MPI_COMM_WORLD, grid, rs, 1, 5, &err);
  HY_CHECK(d != NULL);
  if (!d) MPI_Abort(MPI_COMM_WORLD, 1);
  hy_decomp_use_messages(d); /* the node's ranks too: every record in the chunked messages */
  HY_CHECK(hy_decomp_node_ranks(d) == 0);
  hy_decomp_set_max_msg_bytes(d, (size_t)nranks * 121 * 500); /* 500 particles per pair and round */
  struct hy_pool *pool = hy_pool_create(3); /* the per-particle passes on threads */
  hy_decomp_set_pool(d, pool);
  exchange(d, &p, 0, &st);
  check_stats(&st, &p, 0, rs);
  if (rank == 0) printf("%-46s %d MPI_Alltoallv rounds\n", what, st.rounds);
  HY_CHECK(nranks == 1 ? st.rounds == 0 : st.rounds > 1); /* one rank: nothing leaves, nothing is sent */
  check_all(what, d, &p, &g, &st);
  check_balance(what, &st, rs, g.n);
  drift(&p, 0.05);
  drift(&g, 0.05);
  exchange(d, &p, 0, &st);
  check_all("  drift + exchange 2", d, &p, &g, NULL);
  check_balance("  drift + exchange 2", &st, rs, g.n);
  hy_decomp_free(d);
  hy_pool_free(pool);
  hy_part_free(&p);
  hy_part_free(&g);
}

/* Samples that share coordinates: the positions on a lattice of spacing
 * 0.25 (many equal values along every axis), then every x the same. The
 * multisection's selection must end (a partition that only splits off the
 * values below the pivot would loop forever on equal values) and cut the
 * equal values to one side: each particle still lies inside its owner's
 * box, nothing is lost or doubled. */
static void scenario_ties(void) {
  struct hy_part g, p;
  struct hy_err err;
  struct hy_decomp_stats st;
  make_global(&g, N_MAIN, 11);
  for (size_t i = 0; i < 3 * g.n; i++) g.pos[i] = 0.25 * round(4.0 * g.pos[i]);
  take_block(&p, &g, g.n * (size_t)rank / (size_t)nranks, g.n * (size_t)(rank + 1) / (size_t)nranks);
  struct hy_decomp *d = hy_decomp_create(MPI_COMM_WORLD, NULL, 0.5, 1, 9, &err);
  HY_CHECK(d != NULL);
  if (!d) MPI_Abort(MPI_COMM_WORLD, 1);
  exchange(d, &p, 0, &st);
  check_stats(&st, &p, 0, 0.5);
  check_all("positions on a lattice", d, &p, &g, &st);
  for (size_t i = 0; i < p.n; i++) p.pos[3 * i] = 1.0;
  for (size_t i = 0; i < g.n; i++) g.pos[3 * i] = 1.0;
  exchange(d, &p, 0, &st);
  check_all("  every x equal + exchange 2", d, &p, &g, NULL);
  hy_decomp_free(d);
  hy_part_free(&p);
  hy_part_free(&g);
}

static int cmp_dbl(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Rank 0's multisection of many samples with its x cuts on the pool
 * (split_axis_par: the samples moved into bands around each cut, then a
 * selection per band) against the same on one thread and against a sort:
 * the boundaries must be the same bit for bit (the same order statistics),
 * the x boundaries the midpoints of the sorted x values around each cut.
 * Heavy-tailed, lattice (many equal values) and ascending samples must take
 * the parallel path; all-equal x values (the bands of two cuts meet) must
 * fall back to one thread and still give the same x boundaries. Each rank on its own, with
 * the grid of its rank count and, on 4 ranks, 4x1x1. */
static void test_cut_samples(void) {
  const size_t n = 200000;
  int grids[2][3] = {{0, 0, 0}, {4, 1, 1}};
  hy_decomp_factor(nranks, grids[0]);
  struct hy_pool *pool = hy_pool_create(4);
  gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
  gsl_rng_set(r, 17 + (unsigned long)rank);
  double *s = hy_malloc("test samples", 3 * n, sizeof(double)), *s1 = hy_malloc("test samples", 3 * n, sizeof(double));
  double *xs = hy_malloc("test samples", n, sizeof(double));
  for (int g = 0; g < (nranks == 4 ? 2 : 1); g++) {
    struct hy_err err;
    struct hy_decomp *d = hy_decomp_create(MPI_COMM_WORLD, grids[g], 0.5, 1, 3, &err);
    HY_CHECK(d != NULL);
    if (!d) MPI_Abort(MPI_COMM_WORLD, 1);
    hy_decomp_set_pool(d, pool);
    size_t nb = 0;
    (void)hy_decomp_bounds(d, &nb);
    double *b0 = hy_malloc("test bounds", nb, sizeof(double)), *b1 = hy_malloc("test bounds", nb, sizeof(double));
    const int px = grids[g][0];
    static const char *const kind[4] = {"heavy-tailed", "lattice", "ascending", "all x equal"};
    for (int t = 0; t < 4; t++) {
      for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
          double v = t == 0 ? 0.3 * tan(acos(-1.0) * (gsl_rng_uniform(r) - 0.5)) : gsl_ran_gaussian(r, 1.0);
          if (t == 1) v = 0.25 * round(4.0 * v);
          if (t == 2 && k == 0) v = (double)i / (double)n;
          if (t == 3 && k == 0) v = 1.0;
          s[3 * i + (size_t)k] = v;
        }
      memcpy(s1, s, 3 * n * sizeof(double));
      for (size_t i = 0; i < n; i++) xs[i] = s[3 * i];
      qsort(xs, n, sizeof xs[0], cmp_dbl);
      const int ran0 = hy_decomp_cut_samples(d, s, n, 0, b0);
      const int ran1 = hy_decomp_cut_samples(d, s1, n, 1, b1);
      HY_CHECK(ran0 == 0);
      /* all x equal: the bands of two cuts meet (one cut alone still runs) */
      HY_CHECK_MSG(ran1 == (t < 3 ? px > 1 : px == 2), "grid %dx%dx%d, %s samples: x cuts %s on the pool",
                   grids[g][0], grids[g][1], grids[g][2], kind[t], ran1 ? "ran" : "did not run");
      /* with equal x values at a cut, which of them fall below it is either
       * path's choice, and so are the slabs' samples and their cuts: there
       * only the x boundaries must agree */
      const size_t n_cmp = t == 1 || t == 3 ? (size_t)px + 1 : nb;
      size_t differ = 0;
      for (size_t i = 0; i < n_cmp; i++) /* as numbers: a cut between -0 and +0 may be either zero */
        differ += b0[i] != b1[i];
      HY_CHECK_MSG(differ == 0, "grid %dx%dx%d, %s samples: %zu of %zu boundaries differ between one thread "
                   "and the pool", grids[g][0], grids[g][1], grids[g][2], kind[t], differ, n_cmp);
      for (int k = 1; k < px; k++) {
        const size_t j = (size_t)k * n / (size_t)px;
        const double want = 0.5 * xs[j - 1] + 0.5 * xs[j];
        HY_CHECK_MSG(b1[k] == want && b0[k] == want,
                     "grid %dx%dx%d, %s samples: x boundary %d is %.17g (one thread: %.17g), the sort gives %.17g",
                     grids[g][0], grids[g][1], grids[g][2], kind[t], k, b1[k], b0[k], want);
      }
    }
    hy_free(b0);
    hy_free(b1);
    hy_decomp_free(d);
  }
  if (rank == 0) printf("multisection on the pool against one thread and a sort: done\n");
  hy_free(s);
  hy_free(s1);
  hy_free(xs);
  gsl_rng_free(r);
  hy_pool_free(pool);
}

/* Fewer particles (and samples) than ranks, with the default R_samp: 3
 * particles on the last rank, then none at all. */
static void scenario_tiny(void) {
  struct hy_part g, p;
  struct hy_err err;
  struct hy_decomp_stats st;
  static const size_t sizes[2] = {3, 0};
  for (int t = 0; t < 2; t++) {
    size_t n = sizes[t];
    make_global(&g, n, 3);
    take_block(&p, &g, 0, rank == nranks - 1 ? n : 0);
    struct hy_decomp *d = hy_decomp_create(MPI_COMM_WORLD, NULL, 0.00390625, 1, 1, &err);
    HY_CHECK(d != NULL);
    if (!d) MPI_Abort(MPI_COMM_WORLD, 1);
    for (int k = 0; k < 2; k++) {
      exchange(d, &p, 0, &st);
      check_stats(&st, &p, 0, 0.00390625);
      check_all(n ? "3 particles (fewer samples than ranks)" : "no particles", d, &p, &g, k == 0 ? &st : NULL);
    }
    hy_decomp_free(d);
    hy_part_free(&p);
    hy_part_free(&g);
  }
}

/* ------------------------------------------------ a device as the source */

/* An emulated device for hy_decomp_exchange_dev: it holds the positions and
 * velocities (the host's copies are poisoned, so that reading them shows),
 * finds the owners and lists the leavers and the stayers beyond the kept
 * count as an OpenCL device does (hy_force_decomp_source). */
struct fake_dev {
  double *pos, *vel;
  size_t n;
  int *dest;
  size_t *leave, *beyond;
  int *lrank;
  int gathers, checks;
  /* leave_begin/leave_end: the indices of the read under way, then its data */
  size_t *pend;
  size_t pend_m;
  int pending, begins, ends;
  double *pv;
};

static int fake_check(void *ctx, struct hy_part *p, size_t *n_bad, struct hy_err *err) {
  (void)err;
  struct fake_dev *f = ctx;
  f->checks++;
  *n_bad = 0;
  for (size_t i = 0; i < 3 * f->n; i++) *n_bad += !isfinite(f->pos[i]);
  if (*n_bad) memcpy(p->pos, f->pos, 3 * f->n * sizeof(double));
  return 0;
}

static int fake_gather(void *ctx, const size_t *idx, size_t m, double *pos, double *vel, struct hy_err *err) {
  struct fake_dev *f = ctx;
  f->gathers++;
  for (size_t j = 0; j < m; j++) {
    if (idx[j] >= f->n) return hy_err_set(err, "fake device: gather of %zu of %zu", idx[j], f->n);
    memcpy(pos + 3 * j, f->pos + 3 * idx[j], 3 * sizeof(double));
    if (vel) memcpy(vel + 3 * j, f->vel + 3 * idx[j], 3 * sizeof(double));
  }
  return 0;
}

/* The leavers' read in two halves: begin keeps the indices (the caller may
 * reuse its list), end reads the positions and velocities as they are then
 * (nothing may move them in between) into memory of its own. */
static int fake_leave_begin(void *ctx, const size_t *idx, size_t m, struct hy_err *err) {
  struct fake_dev *f = ctx;
  if (f->pending) return hy_err_set(err, "fake device: a leavers' read while another is under way");
  hy_free(f->pend);
  f->pend = hy_malloc("fake device", m + 1, sizeof(size_t));
  if (m) memcpy(f->pend, idx, m * sizeof(size_t));
  f->pend_m = m;
  f->pending = 1;
  f->begins++;
  return 0;
}

static int fake_leave_end(void *ctx, size_t m, const double **pv, struct hy_err *err) {
  struct fake_dev *f = ctx;
  if (!f->pending || m != f->pend_m) return hy_err_set(err, "fake device: the end of a leavers' read not begun");
  f->pending = 0;
  f->ends++;
  hy_free(f->pv);
  f->pv = hy_malloc("fake device", 6 * m + 1, sizeof(double));
  const int g = f->gathers;
  const int rc = fake_gather(ctx, f->pend, m, f->pv, f->pv + 3 * m, err);
  f->gathers = g;
  *pv = f->pv;
  return rc;
}

static int fake_owners(void *ctx, const struct hy_decomp *d, uint64_t *count, struct hy_err *err) {
  (void)err;
  struct fake_dev *f = ctx;
  for (int r = 0; r < nranks; r++) count[r] = 0;
  for (size_t i = 0; i < f->n; i++) count[f->dest[i] = hy_decomp_owner(d, f->pos + 3 * i)]++;
  return 0;
}

static int fake_lists(void *ctx, int me, size_t n_keep, const size_t **leave, const int **leave_rank, size_t *n_out,
                      const size_t **beyond, size_t *n_beyond, struct hy_err *err) {
  (void)err;
  struct fake_dev *f = ctx;
  *n_out = *n_beyond = 0;
  for (size_t i = 0; i < f->n; i++) {
    if (f->dest[i] != me) {
      f->leave[*n_out] = i;
      f->lrank[(*n_out)++] = f->dest[i];
    } else if (i >= n_keep) {
      f->beyond[(*n_beyond)++] = i;
    }
  }
  *leave = f->leave;
  *leave_rank = f->lrank;
  *beyond = f->beyond;
  return 0;
}

/* Two decompositions of the same settings and seed (they draw the same samples). */
static void make_twins(unsigned long seed, struct hy_decomp **a, struct hy_decomp **b) {
  struct hy_err err;
  *a = hy_decomp_create(MPI_COMM_WORLD, NULL, 0.25, 1, seed, &err);
  *b = hy_decomp_create(MPI_COMM_WORLD, NULL, 0.25, 1, seed, &err);
  HY_CHECK(*a && *b);
  if (!*a || !*b) MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Particles of a and b (in order, up to the shorter) whose records differ;
 * moved_only: in the fields that an exchange with the state on a device
 * moves (not the accelerations and potentials). */
static size_t fields_differ(const struct hy_part *a, const struct hy_part *b, int moved_only) {
  size_t bad = 0;
  for (size_t i = 0; i < a->n && i < b->n; i++) {
    double ra[NREC], rb[NREC];
    record(a, i, ra);
    record(b, i, rb);
    if (moved_only) {
      memset(ra + 6, 0, 6 * sizeof(double));
      memset(rb + 6, 0, 6 * sizeof(double));
      ra[13] = rb[13] = 0.0;
    }
    bad += memcmp(ra, rb, sizeof ra) != 0;
  }
  return bad;
}

static size_t records_differ(const struct hy_part *a, const struct hy_part *b) { return fields_differ(a, b, 0); }

/* The same exchanges with the positions and velocities on an emulated
 * device (hy_decomp_exchange_dev) and on the host: the same particles in the
 * same places, bit for bit, once the device has made the moves that
 * hy_decomp_moved reports; on the host, the moves that hy_decomp_moved
 * reports are the ones made. Also with ranks left with one particle or none
 * (p must then be complete on the host). */
static void scenario_device_source(size_t n_total, const char *what, int two_halves) {
  struct hy_part g, ph, pd;
  struct hy_err err;
  struct hy_decomp_stats sh, sd;
  make_global(&g, n_total, 11);
  /* unequal blocks: the last rank holds more */
  size_t i0 = n_total * (size_t)rank / (size_t)(nranks + 1), i1 = n_total * (size_t)(rank + 1) / (size_t)(nranks + 1);
  if (rank == nranks - 1) i1 = n_total;
  take_block(&ph, &g, i0, i1);
  take_block(&pd, &g, i0, i1);
  struct hy_decomp *dh, *dd;
  make_twins(77, &dh, &dd);
  struct fake_dev f = {0};
  struct hy_decomp_dev src = {.ctx = &f, .check = fake_check, .gather = fake_gather, .owners = fake_owners,
                              .lists = fake_lists};
  if (two_halves) { /* the leavers read while the host packs the rest and fills the holes */
    src.leave_begin = fake_leave_begin;
    src.leave_end = fake_leave_end;
  }
  for (int step = 1; step <= 2; step++) {
    /* the device gets the current positions and velocities, the host's are poisoned */
    f.n = pd.n;
    f.pos = hy_malloc("fake device", 3 * pd.n + 1, sizeof(double));
    f.vel = hy_malloc("fake device", 3 * pd.n + 1, sizeof(double));
    f.dest = hy_malloc("fake device", pd.n + 1, sizeof(int));
    f.leave = hy_malloc("fake device", pd.n + 1, sizeof(size_t));
    f.beyond = hy_malloc("fake device", pd.n + 1, sizeof(size_t));
    f.lrank = hy_malloc("fake device", pd.n + 1, sizeof(int));
    memcpy(f.pos, pd.pos, 3 * pd.n * sizeof(double));
    memcpy(f.vel, pd.vel, 3 * pd.n * sizeof(double));
    for (size_t i = 0; i < 3 * pd.n; i++) pd.pos[i] = pd.vel[i] = 1e300;
    uint64_t *id_before = hy_malloc("ids", ph.n + 1, sizeof(uint64_t));
    memcpy(id_before, ph.id, ph.n * sizeof(uint64_t));
    const size_t n_before = ph.n;
    int rch = hy_decomp_exchange(dh, &ph, 0, &sh, &err);
    HY_CHECK_MSG(rch == 0, "host exchange: %s", err.msg);
    int rcd = hy_decomp_exchange_dev(dd, &pd, 0, &src, &sd, &err);
    HY_CHECK_MSG(rcd == 0, "device-source exchange: %s", err.msg);
    const size_t *holes, *srcs, *dholes, *dsrcs;
    size_t nh, nk, dnh, dnk;
    HY_CHECK(hy_decomp_moved(dh, &holes, &srcs, &nh, &nk) == 0);
    HY_CHECK(hy_decomp_moved(dd, &dholes, &dsrcs, &dnh, &dnk) == 0);
    HY_CHECK_INT(ph.n, pd.n);
    HY_CHECK_INT(nh, dnh);
    HY_CHECK_INT(nk, dnk);
    HY_CHECK_INT(sh.n_sent, sd.n_sent);
    HY_CHECK_INT(sh.n_recv, sd.n_recv);
    HY_CHECK_INT(sh.n_samples_local, sd.n_samples_local);
    HY_CHECK(f.checks == step && (two_halves ? f.begins == step && f.ends == step && !f.pending : f.gathers >= 1));
    /* the host made the moves it reports */
    for (size_t h = 0; h < nh && h < dnh; h++) {
      HY_CHECK(holes[h] == dholes[h] && srcs[h] == dsrcs[h]);
      HY_CHECK(holes[h] < nk && srcs[h] >= nk && srcs[h] < n_before);
      HY_CHECK(ph.id[holes[h]] == id_before[srcs[h]]);
    }
    /* the device makes them; the received particles are complete on the host */
    if (pd.n >= 2) {
      for (size_t h = 0; h < dnh; h++) {
        memcpy(f.pos + 3 * dholes[h], f.pos + 3 * dsrcs[h], 3 * sizeof(double));
        memcpy(f.vel + 3 * dholes[h], f.vel + 3 * dsrcs[h], 3 * sizeof(double));
      }
      memcpy(pd.pos, f.pos, 3 * dnk * sizeof(double));
      memcpy(pd.vel, f.vel, 3 * dnk * sizeof(double));
    }
    /* the accelerations and potentials are the device's: not moved, the
     * received ones zero */
    const size_t bad = fields_differ(&ph, &pd, 1);
    HY_CHECK_MSG(bad == 0, "%s, exchange %d: %zu particles differ from the host exchange's", what, step, bad);
    size_t nz = 0;
    for (size_t i = dnk; i < pd.n; i++)
      nz += pd.acc[3 * i] != 0.0 || pd.acc_w[3 * i + 2] != 0.0 || pd.pot[i] != 0.0;
    HY_CHECK_MSG(nz == 0, "%s, exchange %d: %zu received particles carry accelerations", what, step, nz);
    check_moved_only = 1;
    check_all(what, dd, &pd, &g, NULL);
    check_moved_only = 0;
    int failed = bad != 0, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("%-46s exchange %d: %s\n", what, step, any ? "FAILED" : "same as the host's");
    hy_free(id_before);
    hy_free(f.pos);
    hy_free(f.vel);
    hy_free(f.dest);
    hy_free(f.leave);
    hy_free(f.beyond);
    hy_free(f.lrank);
    drift(&ph, 0.05);
    drift(&pd, 0.05);
    drift(&g, 0.05);
  }
  hy_free(f.pend);
  hy_free(f.pv);
  hy_decomp_free(dh);
  hy_decomp_free(dd);
  hy_part_free(&ph);
  hy_part_free(&pd);
  hy_part_free(&g);
}

/* A device whose gather of the samples ahead comes in two halves
 * (gather_begin, gather_end): begin keeps a copy of the indices (the
 * caller may reuse its own), end reads the positions of p. */
struct async_dev {
  const struct hy_part *p;
  size_t *idx, m;
  int begun, ended;
};

static int async_begin(void *ctx, const size_t *idx, size_t m, struct hy_err *err) {
  struct async_dev *a = ctx;
  if (a->idx) return hy_err_set(err, "async device: a second gather begun");
  a->idx = hy_malloc("async device", m, sizeof(size_t));
  memcpy(a->idx, idx, m * sizeof(size_t));
  a->m = m;
  a->begun++;
  return 0;
}

static int async_end(void *ctx, size_t m, double *pos, struct hy_err *err) {
  struct async_dev *a = ctx;
  if (!a->idx || m != a->m) return hy_err_set(err, "async device: end of a gather not begun");
  for (size_t j = 0; j < m; j++) memcpy(pos + 3 * j, a->p->pos + 3 * a->idx[j], 3 * sizeof(double));
  hy_free(a->idx);
  a->idx = NULL;
  a->ended++;
  return 0;
}

/* The decomposition made ahead (hy_decomp_pre_draw, _sample, _cut, then
 * the exchange): with the positions unchanged in between it must give
 * exactly the plain exchange's boundaries and particles (same seed, same
 * weight); after a drift between the sampling and the exchange every
 * particle still goes to the domain that holds it now, by the boundaries
 * of the earlier positions (check_all); a non-finite sample leaves nothing
 * pending, and the exchange then stops on the bad position as it does. */
static void scenario_ahead(void) {
  const size_t n_total = 20000;
  struct hy_part g, pa, pb;
  struct hy_err err;
  struct hy_decomp_stats sa, sb;
  make_global(&g, n_total, 23);
  size_t i0 = n_total * (size_t)rank / (size_t)nranks, i1 = n_total * (size_t)(rank + 1) / (size_t)nranks;
  take_block(&pa, &g, i0, i1);
  take_block(&pb, &g, i0, i1);
  struct hy_decomp *da, *db;
  make_twins(31, &da, &db);
  const double w = 0.1 * (double)pb.n; /* N_hard: more samples from a rank with more work */
  for (int step = 1; step <= 2; step++) {
    hy_decomp_pre_draw(da, pa.n, w);
    HY_CHECK_INT(hy_decomp_pre_sample(da, &pa, NULL, &err), 0);
    HY_CHECK_INT(hy_decomp_pre_cut(da, &err), 0);
    HY_CHECK_INT(hy_decomp_exchange(da, &pa, w, &sa, &err), 0);
    HY_CHECK_INT(hy_decomp_exchange(db, &pb, w, &sb, &err), 0);
    size_t nb = 0, nb2 = 0;
    const double *ba = hy_decomp_bounds(da, &nb), *bb = hy_decomp_bounds(db, &nb2);
    HY_CHECK(ba && bb && nb == nb2 && memcmp(ba, bb, nb * sizeof(double)) == 0);
    HY_CHECK_INT(pa.n, pb.n);
    HY_CHECK_INT(sa.n_samples_local, sb.n_samples_local);
    HY_CHECK_INT(sa.n_samples_total, sb.n_samples_total);
    const size_t bad = records_differ(&pa, &pb);
    HY_CHECK_MSG(bad == 0, "made ahead, exchange %d: %zu particles differ from the plain exchange's", step, bad);
    check_all("decomposition made ahead", da, &pa, &g, NULL);
    drift(&pa, 0.05);
    drift(&pb, 0.05);
    drift(&g, 0.05);
  }
  /* the samples' gather begun on a device and ended by the cut: the plain
   * exchange's boundaries again */
  struct async_dev a = {.p = &pa};
  const struct hy_decomp_dev adev = {.ctx = &a, .gather_begin = async_begin, .gather_end = async_end};
  hy_decomp_pre_draw(da, pa.n, w);
  HY_CHECK_INT(hy_decomp_pre_sample(da, &pa, &adev, &err), 0);
  HY_CHECK(a.begun == 1 && a.ended == 0);
  HY_CHECK_INT(hy_decomp_pre_cut(da, &err), 0);
  HY_CHECK_INT(a.ended, 1);
  HY_CHECK_INT(hy_decomp_exchange(da, &pa, w, &sa, &err), 0);
  HY_CHECK_INT(hy_decomp_exchange(db, &pb, w, &sb, &err), 0);
  {
    size_t nb = 0, nb2 = 0;
    const double *ba = hy_decomp_bounds(da, &nb), *bb = hy_decomp_bounds(db, &nb2);
    HY_CHECK_MSG(ba && bb && nb == nb2 && memcmp(ba, bb, nb * sizeof(double)) == 0,
                 "samples gathered in two halves: boundaries differ from the plain exchange's");
    const size_t bad = records_differ(&pa, &pb);
    HY_CHECK_MSG(bad == 0, "samples gathered in two halves: %zu particles differ from the plain exchange's", bad);
  }
  check_all("samples gathered in two halves", da, &pa, &g, NULL);
  /* begun and never cut: the exchange ends the gather and samples anew */
  hy_decomp_pre_draw(da, pa.n, w);
  HY_CHECK_INT(hy_decomp_pre_sample(da, &pa, &adev, &err), 0);
  HY_CHECK_INT(hy_decomp_exchange(da, &pa, w, &sa, &err), 0);
  HY_CHECK(a.begun == 2 && a.ended == 2 && a.idx == NULL);
  check_all("a gather begun ahead, not cut", da, &pa, &g, NULL);
  /* sampled, then drifted before the exchange */
  hy_decomp_pre_draw(da, pa.n, w);
  HY_CHECK_INT(hy_decomp_pre_sample(da, &pa, NULL, &err), 0);
  HY_CHECK_INT(hy_decomp_pre_cut(da, &err), 0);
  drift(&pa, 0.2);
  drift(&g, 0.2);
  HY_CHECK_INT(hy_decomp_exchange(da, &pa, w, &sa, &err), 0);
  check_all("made ahead, drifted before the exchange", da, &pa, &g, NULL);
  /* non-finite positions among the samples: every x of rank 0 */
  if (rank == 0)
    for (size_t i = 0; i < pa.n; i++) pa.pos[3 * i] = NAN;
  hy_decomp_pre_draw(da, pa.n, w);
  HY_CHECK_INT(hy_decomp_pre_sample(da, &pa, NULL, &err), 0);
  HY_CHECK_INT(hy_decomp_pre_cut(da, &err), 0);
  int rc = hy_decomp_exchange(da, &pa, w, &sa, &err);
  HY_CHECK_MSG(rc == HY_DECOMP_NONFINITE, "exchange after a non-finite sample ahead: %d (%s)", rc, rc ? err.msg : "");
  /* the steps out of order */
  HY_CHECK_INT(hy_decomp_pre_cut(da, &err), -1);
  HY_CHECK_INT(hy_decomp_pre_sample(da, &pa, NULL, &err), -1);
  int failed = hy_test_failures != 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) printf("%-46s %s\n", "decomposition made ahead", any ? "FAILED" : "same as the plain exchange");
  hy_decomp_free(da);
  hy_decomp_free(db);
  hy_part_free(&pa);
  hy_part_free(&pb);
  hy_part_free(&g);
}

/* Bad input: weight_extra is refused before any collective; a non-finite
 * position is agreed on collectively (every rank calls this). */
static void test_local_errors(void) {
  struct hy_err err;
  struct hy_part p;
  struct hy_decomp *d = hy_decomp_create(MPI_COMM_WORLD, NULL, 0.5, 1, 1, &err);
  HY_CHECK(d != NULL);
  if (!d) return;
  hy_part_init(&p);
  hy_part_resize(&p, 2);
  p.id[1] = 77;
  p.pos[3] = NAN;
  /* every rank holds a NaN here: all agree, nothing moves */
  HY_CHECK(hy_decomp_exchange(d, &p, 0, NULL, &err) == HY_DECOMP_NONFINITE);
  HY_CHECK_CONTAINS(err.msg, "particle ID 77 has a non-finite position; no particle was moved");
  HY_CHECK_INT(p.n, 2);
  p.pos[3] = 0;
  HY_CHECK(hy_decomp_exchange(d, &p, -1, NULL, &err) == -1);
  HY_CHECK_CONTAINS(err.msg, "weight_extra -1 is not a finite number >= 0");
  HY_CHECK_INT(p.n, 2);
  hy_part_free(&p);
  hy_decomp_free(d);
}

/* The decomposition's sample draw: ns ascending indices below n, and every
 * particle drawn ns / n times on average. Per draw a particle's count has
 * mean q = ns / n and a variance of at most q (it is 0 or 1, or, for one
 * that straddles two stretches of w = n / ns when w is not whole, the sum
 * of two independent 0/1 draws whose means add up to q), so over R
 * independent draws its deviation from R q exceeds 6 sqrt(R q) with a
 * chance of about 2e-9 (normal tail; R q >= 4000 here), for any of the
 * n <= 1000 particles below 2e-6. A draw of one whole-number index per
 * stretch of floor(w) or ceil(w) particles gives particles in short
 * stretches 1/3 and in long ones 1/4 at w = 3.33 instead of 0.3: 8.6 and
 * 12.9 such sigmas off at R = 20000. When w is whole the indices of one
 * draw are distinct. */
static void test_sample_draw(void) {
  struct hy_err err;
  struct hy_decomp *d = hy_decomp_create(MPI_COMM_SELF, NULL, 0.5, 1, 7, &err);
  HY_CHECK(d != NULL);
  if (!d) return;
  const size_t cases[][2] = {{1000, 300}, {997, 997}, {1000, 250}, {5, 1}, {1, 1}};
  const int R = 20000;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const size_t n = cases[c][0], ns = cases[c][1];
    size_t *idx = hy_malloc("test samples", ns, sizeof(size_t));
    unsigned *count = hy_calloc("test counts", n, sizeof(unsigned));
    int ordered = 1, whole_ok = 1;
    const int whole = n % ns == 0;
    for (int r = 0; r < R; r++) {
      hy_decomp_sample_indices(d, n, ns, idx);
      for (size_t k = 0; k < ns; k++) {
        if (idx[k] >= n || (k > 0 && idx[k] < idx[k - 1])) ordered = 0;
        if (idx[k] < n) count[idx[k]]++;
        if (whole && k > 0 && idx[k] == idx[k - 1]) whole_ok = 0;
      }
    }
    const double q = (double)ns / (double)n, tol = 6.0 * sqrt(R * q) + 1e-9;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(count[i] - R * q));
    if (!(ordered && whole_ok && worst <= tol))
      fprintf(stderr, "sample draw n = %zu, ns = %zu: ordered %d, distinct %d, worst count deviation %.1f (tol %.1f)\n",
              n, ns, ordered, whole_ok, worst, tol);
    HY_CHECK(ordered);
    HY_CHECK(whole_ok);
    HY_CHECK(worst <= tol);
    hy_free(idx);
    hy_free(count);
  }
  hy_decomp_free(d);
}

/* hy_decomp_cost_update with one kind of walk time (the other 0) */
static int cost_update1(struct hy_decomp *d, double seconds, double work, struct hy_err *err) {
  const double sec[2] = {seconds, 0.0};
  return hy_decomp_cost_update(d, sec, work, err);
}

/* The slowest rank's hard time plus the slowest rank's soft time when the
 * P ranks' works are proportional to u (a, b: seconds per unit of work,
 * total work tot). */
static double slowest_sum(const double *a, const double *b, const double *u, int P, double tot) {
  double su = 0.0, jh = 0.0, js = 0.0;
  for (int r = 0; r < P; r++) su += u[r];
  for (int r = 0; r < P; r++) {
    jh = fmax(jh, a[r] * u[r] * tot / su);
    js = fmax(js, b[r] * u[r] * tot / su);
  }
  return jh + js;
}

/* Both kinds of walk time (hard steps', others'), on a first measurement:
 * the hard (three steps) and soft walk times of four H100 ranks at 2^26
 * (ms per Δt_s), equal work. The factors must give the works that minimise
 * the slowest rank's hard time plus the slowest rank's soft time: the
 * reference scans the ratio rho of the two on a fine logarithmic grid,
 * gives each rank the work min(1 / a, rho / b) for its seconds per unit of
 * work a (hard) and b (soft), and takes the inverse over its mean (a first
 * measurement: no band); the factors agree to the grid's resolution, and
 * the works they give do no worse than equal counts or equal total time. */
static void cost_two_kinds(struct hy_decomp *d) {
  static const double hard[4] = {3 * 14.95, 3 * 15.38, 3 * 13.98, 3 * 14.50}, soft[4] = {48.28, 47.90, 47.21, 47.01};
  const int P = nranks;
  if (P < 2 || P > 4) return;
  struct hy_err err;
  const double w = 1000.0, sec[2] = {1e-3 * hard[rank], 1e-3 * soft[rank]};
  HY_CHECK_INT(hy_decomp_cost_update(d, sec, w, &err), 0);
  double lo, hi;
  const double mine = hy_decomp_cost(d, &lo, &hi);
  double a[4], b[4], u[4], best = INFINITY, rho_best = 0.0;
  for (int r = 0; r < P; r++) {
    a[r] = hard[r] / w;
    b[r] = soft[r] / w;
  }
  const int n_grid = 200000;
  for (int g = 0; g <= n_grid; g++) {
    const double rho = 0.25 * pow(16.0, (double)g / n_grid); /* 0.25 .. 4: these rows' ratios b / a are 1.01-1.09 */
    for (int r = 0; r < P; r++) u[r] = fmin(1.0 / a[r], rho / b[r]);
    const double J = slowest_sum(a, b, u, P, P * w);
    if (J < best) {
      best = J;
      rho_best = rho;
    }
  }
  double c[4], cm = 0.0, c_lo = INFINITY, c_hi = -INFINITY;
  for (int r = 0; r < P; r++) {
    u[r] = fmin(1.0 / a[r], rho_best / b[r]);
    cm += (c[r] = 1.0 / u[r]) / P;
  }
  for (int r = 0; r < P; r++) {
    c[r] /= cm;
    c_lo = fmin(c_lo, c[r]);
    c_hi = fmax(c_hi, c[r]);
  }
  HY_CHECK_MSG(fabs(mine / c[rank] - 1.0) <= 1e-4, "rank %d: two-kind cost weight %.8f, reference %.8f", rank, mine,
               c[rank]);
  HY_CHECK_MSG(fabs(lo / c_lo - 1.0) <= 1e-4 && fabs(hi / c_hi - 1.0) <= 1e-4,
               "two-kind cost weights %.8f to %.8f, reference %.8f to %.8f", lo, hi, c_lo, c_hi);
  /* the works the weights give (in proportion to 1 / factor) against equal
   * counts and equal total time */
  double all[4], uw[4], ueq[4], usum[4];
  MPI_Allgather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, MPI_COMM_WORLD);
  for (int r = 0; r < P; r++) {
    uw[r] = 1.0 / all[r];
    ueq[r] = 1.0;
    usum[r] = 1.0 / (a[r] + b[r]);
  }
  const double J_w = slowest_sum(a, b, uw, P, P * w), J_eq = slowest_sum(a, b, ueq, P, P * w),
               J_sum = slowest_sum(a, b, usum, P, P * w);
  if (rank == 0)
    printf("%-46s rho %.4f, slowest hard + soft %.3f ms (scan %.3f, equal total time %.3f, equal counts %.3f)\n",
           "two-kind cost weights", rho_best, J_w, best, J_sum, J_eq);
  HY_CHECK_MSG(J_w <= J_sum + 1e-9 && J_w <= J_eq + 1e-9, "two kinds: %.4f, equal time %.4f, equal counts %.4f", J_w,
               J_sum, J_eq);
  HY_CHECK_INT(cost_update1(d, 0.0, 0.0, &err), 0);
}

/* DomainCost walktime (hy_decomp_cost_update): particles uniform in the
 * unit cube, x slabs. After a first exchange (equal counts), rank ix
 * reports 1 + ix / 2 seconds per particle; its weight must be that over
 * the ranks' mean seconds per particle, and the next cuts must fall where
 * the particles' weights, (ix + 1) on slab ix's old extent, reach k / P of
 * their sum (the reference: the global set sorted by x), within six
 * standard deviations of a sample quantile, sqrt(q (1 - q) / N_s), turned
 * into a length by the weight density at the cut. Without the weights the
 * cuts stay near k / P, more than three tolerances away. Then the clamp to [1/2,
 * 2], the averaging of the factors over the decompositions and the band of
 * 1 % within which a factor stays, and the weight 1 of a rank without time. */
static void scenario_cost(void) {
  const double rs = 0.5;
  const size_t n = N_MAIN;
  const int P = nranks, grid[3] = {nranks, 1, 1};
  struct hy_part g, p;
  struct hy_err err;
  struct hy_decomp_stats st;
  hy_part_init(&g);
  hy_part_resize(&g, n);
  gsl_rng *rg = gsl_rng_alloc(gsl_rng_mt19937);
  gsl_rng_set(rg, 99);
  for (size_t i = 0; i < n; i++) {
    for (int k = 0; k < 3; k++) {
      g.pos[3 * i + k] = gsl_rng_uniform(rg);
      g.vel[3 * i + k] = g.acc[3 * i + k] = g.acc_w[3 * i + k] = 0.0;
    }
    g.mass[i] = 1.0 / (double)n;
    g.pot[i] = 0.0;
    g.id[i] = ID_BASE + ID_STRIDE * i;
    g.type[i] = 1;
  }
  gsl_rng_free(rg);
  take_block(&p, &g, n * (size_t)rank / (size_t)P, n * ((size_t)rank + 1) / (size_t)P);
  struct hy_decomp *d = hy_decomp_create(MPI_COMM_WORLD, grid, rs, 1, 11, &err);
  HY_CHECK(d != NULL);
  if (!d) MPI_Abort(MPI_COMM_WORLD, 1);
  HY_CHECK(hy_decomp_cost(d, NULL, NULL) == 1.0);
  exchange(d, &p, 0, &st);
  double *b = hy_malloc("test", (size_t)P + 1, sizeof(double)), lo[3], hi[3];
  for (int r = 0; r < P; r++) {
    HY_CHECK_INT(hy_decomp_box(d, hy_decomp_rank_of(d, r, 0, 0), lo, hi), 0);
    b[r] = lo[0];
    b[r + 1] = hi[0];
  }
  b[0] = 0.0;
  b[P] = 1.0;
  /* the weights as every rank must find them */
  int ix = -1;
  for (int r = 0; r < P; r++)
    if (hy_decomp_rank_of(d, r, 0, 0) == rank) ix = r;
  double *cnt = hy_calloc("test", (size_t)P, sizeof(double)), *lam = hy_malloc("test", (size_t)P, sizeof(double));
  for (size_t i = 0; i < n; i++) {
    int r = 0;
    while (r + 1 < P && g.pos[3 * i] >= b[r + 1]) r++;
    cnt[r] += 1.0;
  }
  double s_sum = 0.0;
  for (int r = 0; r < P; r++) s_sum += (1.0 + 0.5 * r) * cnt[r];
  for (int r = 0; r < P; r++) lam[r] = (1.0 + 0.5 * r) / (s_sum / (double)n); /* within [1/2, 2] up to P = 4 */
  HY_CHECK_INT((long long)p.n, (long long)cnt[ix]);
  HY_CHECK_INT(cost_update1(d, (1.0 + 0.5 * ix) * (double)p.n, (double)p.n, &err), 0);
  double w_lo, w_hi;
  const double mine = hy_decomp_cost(d, &w_lo, &w_hi);
  HY_CHECK_MSG(fabs(mine - lam[ix]) <= 1e-12 * lam[ix], "rank %d: cost weight %.15g, expected %.15g", rank, mine,
               lam[ix]);
  HY_CHECK_MSG(fabs(w_lo - lam[0]) <= 1e-12 && fabs(w_hi - lam[P - 1]) <= 1e-12, "cost weights %g to %g, not %g to %g",
               w_lo, w_hi, lam[0], lam[P - 1]);
  exchange(d, &p, 0, &st);
  {
    unsigned long long n_all = 0, n_mine = p.n;
    MPI_Allreduce(&n_mine, &n_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    HY_CHECK_INT(n_all, (unsigned long long)n);
  }
  /* the reference cuts: the weighted x quantiles of the whole set */
  double *xs = hy_malloc("test", n, sizeof(double));
  for (size_t i = 0; i < n; i++) xs[i] = g.pos[3 * i];
  qsort(xs, n, sizeof(double), cmp_dbl);
  double w_tot = 0.0, w_len = 0.0;
  for (int r = 0; r < P; r++) {
    w_tot += lam[r] * cnt[r];
    w_len += lam[r] * (b[r + 1] - b[r]);
  }
  double cum = 0.0;
  size_t i = 0;
  int slab = 0;
  for (int k = 1; k < P; k++) {
    const double target = w_tot * k / P;
    double x = 0.0;
    for (; i < n; i++) {
      while (slab + 1 < P && xs[i] >= b[slab + 1]) slab++;
      if (cum + lam[slab] >= target) {
        x = xs[i];
        break;
      }
      cum += lam[slab];
    }
    HY_CHECK_INT(hy_decomp_box(d, hy_decomp_rank_of(d, k, 0, 0), lo, hi), 0);
    const double q = (double)k / P;
    const double tol = 6.0 * sqrt(q * (1.0 - q) / (double)st.n_samples_total) * w_len / lam[slab];
    if (rank == 0)
      printf("%-46s cut %d at x = %.4f, reference %.4f (equal counts: %.4f), tolerance %.4f\n",
             "cost-weighted exchange", k, lo[0], x, b[k], tol);
    HY_CHECK_MSG(fabs(lo[0] - x) <= tol, "cost-weighted cut %d at %.5f, reference %.5f, tolerance %.5f", k, lo[0], x,
                 tol);
    HY_CHECK_MSG(fabs(b[k] - x) > 3 * tol, "cut %d: the weights move it too little to test (%.5f to %.5f)", k, b[k],
                 x);
  }
  /* no time and no work anywhere: every factor 1, and the averages start
   * again; then the clamp, on a first measurement (taken as it is): rank 0's
   * factor 2, the others' 1/2, then over their mean (1 at 3 ranks), clamped
   * again */
  HY_CHECK_INT(cost_update1(d, 0.0, 0.0, &err), 0);
  HY_CHECK(hy_decomp_cost(d, &w_lo, &w_hi) == 1.0 && w_lo == 1.0 && w_hi == 1.0);
  HY_CHECK_INT(cost_update1(d, rank == 0 ? 100.0 : 1.0, 1.0, &err), 0);
  if (P >= 3) {
    const double m0 = (2.0 + 0.5 * (P - 1)) / P, f = hy_decomp_cost(d, NULL, NULL);
    const double want = rank == 0 ? fmin(2.0, 2.0 / m0) : 0.5 / m0;
    HY_CHECK_MSG(fabs(f - want) <= 1e-15, "rank %d: clamped cost weight %.15g, expected %.15g", rank, f, want);
  }
  if (P >= 3) {
    /* equal times from now on (measured factor 1): the average takes 0.3
     * of each new factor, geometrically, so the factor held becomes
     * f^0.7, f^0.49, ..., and the one in use that over the mean of the
     * ranks' (equal works); once the average is within 1 % of the factor
     * held, that factor stays, so the last one in use lies within 2 % of
     * 1 (either held factor within 1 %), on the side it came from, not at
     * 1, and the mean of those in use is 1 */
    const double f0 = rank == 0 ? 2.0 : 0.5, m1 = (pow(2.0, 0.7) + (P - 1) * pow(0.5, 0.7)) / P;
    HY_CHECK_INT(cost_update1(d, 1.0, 1.0, &err), 0);
    const double f1 = hy_decomp_cost(d, NULL, NULL);
    HY_CHECK_MSG(fabs(f1 / (pow(f0, 0.7) / m1) - 1.0) <= 1e-12,
                 "rank %d: cost weight %.15g after equal times, expected %.15g", rank, f1, pow(f0, 0.7) / m1);
    double f = f1, prev = f1;
    for (int k = 0; k < 80; k++) {
      prev = f;
      HY_CHECK_INT(cost_update1(d, 1.0, 1.0, &err), 0);
      f = hy_decomp_cost(d, NULL, NULL);
    }
    double f_sum = 0.0;
    MPI_Allreduce(&f, &f_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    HY_CHECK_MSG(f == prev && f != 1.0 && fabs(f - 1.0) <= 0.0201 && (f > 1.0) == (f0 > 1.0) &&
                     fabs(f_sum / P - 1.0) <= 1e-12,
                 "rank %d: cost weight %.15g (before %.15g, the ranks' mean %.15g) after 80 equal times: not held "
                 "within 2 %% of 1 with a mean of 1",
                 rank, f, prev, f_sum / P);
  }
  /* a rank without time: its plain count (factor 1), and the mean of the
   * others' factors in use (equal works) 1 without it */
  HY_CHECK_INT(cost_update1(d, rank == 0 ? 0.0 : 1.0, 1.0, &err), 0);
  if (rank == 0 || P == 1) HY_CHECK(hy_decomp_cost(d, NULL, NULL) == 1.0);
  if (P >= 2) {
    const double f = rank == 0 ? 0.0 : hy_decomp_cost(d, NULL, NULL);
    double f_sum = 0.0;
    MPI_Allreduce(&f, &f_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    HY_CHECK_MSG(fabs(f_sum / (P - 1) - 1.0) <= 1e-12,
                 "rank %d: the factors in use beside a rank without time: mean %.15g, not 1", rank, f_sum / (P - 1));
  }
  HY_CHECK_INT(cost_update1(d, 0.0, 0.0, &err), 0);
  HY_CHECK(hy_decomp_cost(d, &w_lo, &w_hi) == 1.0 && w_lo == 1.0 && w_hi == 1.0);
  cost_two_kinds(d);
  hy_free(xs);
  hy_free(b);
  hy_free(cnt);
  hy_free(lam);
  hy_decomp_free(d);
  hy_part_free(&p);
  hy_part_free(&g);
}

int main(int argc, char **argv) {
  hy_test_mpi_begin(&argc, &argv, "test_decomp", &rank, &nranks);
  test_factor();
  test_parse();
  test_local_errors();
  test_sample_draw();
  test_cut_samples();
  scenario_all_on_root();
  {
    int grids[4][3] = {{0, 0, 0}, {1, 1, nranks}, {1, nranks, 1}, {2, 1, 2}};
    hy_decomp_factor(nranks, grids[0]);
    for (int k = 0; k < (nranks == 4 ? 4 : nranks > 1 ? 3 : 1); k++) scenario_skewed(grids[k]);
  }
  scenario_tiny();
  scenario_ties();
  scenario_device_source(N_MAIN, "positions on a device", 0);
  scenario_device_source(5, "5 particles on a device", 0);
  scenario_device_source(N_MAIN, "leavers read in two halves", 1);
  scenario_device_source(5, "5 particles, two halves", 1);
  scenario_ahead();
  scenario_cost();
  return hy_test_mpi_end("test_decomp", rank, nranks);
}
