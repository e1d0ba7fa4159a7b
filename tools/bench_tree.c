/* SPDX-License-Identifier: GPL-3.0-or-later
 * bench_tree.c: times the host tree build phases (bounds+keys, key sort,
 * particle permutation, links, moments, node export) on a Plummer sphere.
 *
 * usage: tools/bench_tree [-N N] [-t THREADS] [-r REPS] [-c NCRIT] [-d DT] [-s SEED]
 *   -N N        particles (default 2^21)
 *   -t THREADS  pool threads (default: HYTREE_NUM_THREADS or the online CPUs)
 *   -r REPS     measured builds (default 3; one more runs first as warm-up)
 *   -c NCRIT    leaf size (default 16, as the NCrit parameter)
 *   -d DT       0 (default): every build starts from the generator's random
 *               order; > 0: particles drift pos += vel * DT between builds
 *               and stay in the previous build's order, as in a run
 *   -s SEED     Plummer seed (default 1)
 * Prints one row per phase (mean, min and total over the measured builds)
 * and a fingerprint of the last build, which must not depend on -t. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "ic.h"
#include "log.h"
#include "part.h"
#include "threads.h"
#include "tool_args.h"
#include "tree.h"

#define N_PHASES 6

static const char usage_line[] = "usage: bench_tree [-N N] [-t THREADS] [-r REPS] [-c NCRIT] [-d DT] [-s SEED]";

static void usage(void) {
  fprintf(stderr, "%s\n", usage_line);
  exit(2);
}

static double phase(const struct hy_tree_times *t, int k) {
  switch (k) {
  case 0: return t->keys;
  case 1: return t->sort;
  case 2: return t->permute;
  case 3: return t->links;
  case 4: return t->moments;
  default: return t->export_;
  }
}

static long parse_long(const char *s, long min) { return tool_count(s, min, usage_line); }

/* FNV-1a over bytes: a fingerprint of the build, to compare thread counts */
static uint64_t fnv(uint64_t h, const void *data, size_t len) {
  const unsigned char *b = data;
  for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

int main(int argc, char **argv) {
  size_t n = (size_t)1 << 21;
  int threads = 0, reps = 3, n_crit = 16;
  double dt = 0.0;
  uint64_t seed = 1;
  int o;
  while ((o = getopt(argc, argv, "N:t:r:c:d:s:h")) != -1) {
    switch (o) {
    case 'N': n = (size_t)parse_long(optarg, 1); break;
    case 't': threads = (int)parse_long(optarg, 1); break;
    case 'r': reps = (int)parse_long(optarg, 1); break;
    case 'c': n_crit = (int)parse_long(optarg, 1); break;
    case 'd': dt = strtod(optarg, NULL); break;
    case 's': seed = (uint64_t)parse_long(optarg, 0); break;
    default: usage();
    }
  }
  if (threads < 1) threads = hy_pool_default_threads();
  struct hy_err err;
  struct hy_part orig, p;
  hy_part_init(&orig);
  if (hy_ic_plummer(n, seed, &orig, &err) != 0) hy_die("%s", err.msg);
  hy_part_copy(&p, &orig);
  struct hy_pool *pool = hy_pool_create(threads);
  struct hy_tree t;
  hy_tree_init(&t);
  float *node = NULL;
  size_t node_cap = 0;
  double sum[N_PHASES] = {0}, min[N_PHASES], wall_sum = 0.0, wall_min = 0.0;
  for (int r = -1; r < reps; r++) {
    if (dt > 0.0) {
      for (size_t i = 0; i < 3 * p.n; i++) p.pos[i] += dt * p.vel[i];
    } else if (r >= 0) {
      hy_part_free(&p);
      hy_part_copy(&p, &orig);
    }
    struct hy_tree_times before = t.times;
    double w0 = hy_wtime();
    hy_tree_sort(&t, &p, pool);
    if (hy_tree_build(&t, &p, n_crit, 1.0 / 256.0, pool, &err) != 0) hy_die("%s", err.msg);
    size_t nn = hy_tree_n_nodes(&t);
    if (nn > node_cap) {
      hy_free(node);
      node_cap = nn + nn / 8;
      node = hy_malloc("node records", hy_size_mul_or_die(node_cap, 8, "node records"), sizeof(float));
    }
    hy_tree_export(&t, &p, node, pool);
    double w = hy_wtime() - w0;
    if (r < 0) continue; /* warm-up */
    for (int k = 0; k < N_PHASES; k++) {
      double d = phase(&t.times, k) - phase(&before, k);
      sum[k] += d;
      if (r == 0 || d < min[k]) min[k] = d;
    }
    wall_sum += w;
    if (r == 0 || w < wall_min) wall_min = w;
  }
  static const char *names[N_PHASES] = {"bounds+keys", "sort", "permute", "links", "moments", "export"};
  printf("bench_tree: N = %zu, threads = %d, reps = %d, n_crit = %d, %s, cells = %zu, depth = %d\n", n, threads,
         reps, n_crit, dt > 0.0 ? "drifting set" : "random order", t.n_cell, t.depth);
  printf("%-12s %10s %10s %10s\n", "phase", "mean [s]", "min [s]", "total [s]");
  double tot_mean = 0.0, tot_min = 0.0;
  for (int k = 0; k < N_PHASES; k++) {
    printf("%-12s %10.4f %10.4f %10.4f\n", names[k], sum[k] / reps, min[k], sum[k]);
    tot_mean += sum[k] / reps;
    tot_min += min[k];
  }
  printf("%-12s %10.4f %10.4f %10.4f\n", "sum", tot_mean, tot_min, tot_mean * reps);
  printf("%-12s %10.4f %10.4f %10.4f\n", "wall", wall_sum / reps, wall_min, wall_sum);
  uint64_t h = fnv(14695981039346656037ULL, node, hy_tree_n_nodes(&t) * 8 * sizeof(float));
  h = fnv(h, p.id, p.n * sizeof(uint64_t));
  printf("fingerprint of the last build (node records, particle order): %016llx\n", (unsigned long long)h);
  hy_free(node);
  hy_tree_free(&t);
  hy_pool_free(pool);
  hy_part_free(&p);
  hy_part_free(&orig);
  return 0;
}
