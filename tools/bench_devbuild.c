/* SPDX-License-Identifier: GPL-3.0-or-later
 * bench_devbuild.c: times device tree builds (opencl/build.cl) of sets
 * shaped like the remote trees of LET items: points spread uniformly over
 * a shell between two cubes (half sides 0.5 and 0.6), as LET items lie
 * around the receiving domain, built in the second tree slot with every cell
 * opened (the remote tree of hard-LET items built on the device);
 * and, for the same sets, the host's tree of points that hard steps build
 * by default (hy_tree_point_records on the pool's threads).
 *
 * usage: tools/bench_devbuild [-d gpu|cpu|any] [-r REPS] [-s auto|radix|merge] [-t THREADS] M [M ...]
 *   -d     OpenCL device type (default any)
 *   -r     measured builds per size (default 30; two more run first)
 *   -s     the key sort: auto (the device's default: merging on GPUs, radix
 *          on CPUs), radix or merge
 *   -t     the host's threads (default: HYTREE_NUM_THREADS or the online CPUs)
 *   M      set sizes (at least 2)
 * Prints per size the mean wall time of a device build (host clock, upload
 * from pageable memory included), the device's phase times, and the mean
 * wall time of the host's tree of points. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "cl_engine.h"
#include "log.h"
#include "threads.h"
#include "tree.h"

static void usage(void) {
  fprintf(stderr, "usage: bench_devbuild [-d gpu|cpu|any] [-r REPS] [-s auto|radix|merge] [-t THREADS] M [M ...]\n");
  exit(2);
}

static double uniform(uint64_t *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*s >> 11) / 9007199254740992.0;
}

int main(int argc, char **argv) {
  hy_log_init(0, 1);
  enum hy_cl_kind kind = HY_CL_ANY;
  long reps = 30;
  const char *sort = "auto";
  int threads = hy_pool_default_threads();
  int o;
  while ((o = getopt(argc, argv, "d:r:s:t:h")) != -1) {
    switch (o) {
    case 'd':
      if (strcmp(optarg, "gpu") == 0)
        kind = HY_CL_GPU;
      else if (strcmp(optarg, "cpu") == 0)
        kind = HY_CL_CPU;
      else if (strcmp(optarg, "any") == 0)
        kind = HY_CL_ANY;
      else
        usage();
      break;
    case 'r': {
      char *end;
      errno = 0;
      reps = strtol(optarg, &end, 10);
      if (errno || *end || reps < 1) usage();
      break;
    }
    case 's':
      if (strcmp(optarg, "auto") && strcmp(optarg, "radix") && strcmp(optarg, "merge")) usage();
      sort = optarg;
      break;
    case 't': {
      char *end;
      errno = 0;
      long t = strtol(optarg, &end, 10);
      if (errno || *end || t < 1 || t > 4096) usage();
      threads = (int)t;
      break;
    }
    default: usage();
    }
  }
  if (optind >= argc) usage();
  struct hy_cl *cl;
  struct hy_err err;
  struct hy_cl_opts opts = {.kind = kind, .platform = -1, .device = -1, .local_rank = 0, .nvec = 4};
  if (hy_cl_create(&cl, &opts, &err) != 0) {
    fprintf(stderr, "bench_devbuild: %s\n", err.msg);
    return 1;
  }
  if (strcmp(sort, "radix") == 0) hy_cl_set_merge_sort_max(cl, 0);
  if (strcmp(sort, "merge") == 0) hy_cl_set_merge_sort_max(cl, SIZE_MAX);
  struct hy_pool *pool = hy_pool_create(threads);
  struct hy_tree pt;
  hy_tree_init(&pt);
  printf("device: %s; sort: %s; host threads: %d\n", hy_cl_description(cl), sort, threads);
  printf("| M | wall [ms] | upload [ms] | keys + sort [ms] | cells [ms] | moments [ms] | generations | cells "
         "| point tree, host [ms] | its cells |\n");
  printf("|---|---|---|---|---|---|---|---|---|---|\n");
  int rc = 0;
  for (int a = optind; a < argc && rc == 0; a++) {
    char *end;
    errno = 0;
    long long mm = strtoll(argv[a], &end, 10);
    if (errno || *end || mm < 2) usage();
    const size_t m = (size_t)mm;
    float *pos = hy_malloc("positions", hy_size_mul_or_die(m, 4, "positions"), sizeof(float));
    float *grp = hy_calloc("item moments", hy_size_mul_or_die(m, 2, "item moments"), sizeof(float));
    uint64_t s = 99;
    for (size_t i = 0; i < m;) {
      double x[3];
      for (int d = 0; d < 3; d++) x[d] = 1.2 * uniform(&s) - 0.6;
      if (x[0] > -0.5 && x[0] < 0.5 && x[1] > -0.5 && x[1] < 0.5 && x[2] > -0.5 && x[2] < 0.5) continue;
      for (int d = 0; d < 3; d++) pos[4 * i + (size_t)d] = (float)x[d];
      pos[4 * i + 3] = (float)(1.0 / (double)m);
      i++;
    }
    struct hy_cl_build_args b = {.pos = pos, .grp = grp, .n = m, .lo = {-0.6, -0.6, -0.6}, .side = 1.2,
                                 .n_crit = 16, .a_err = 1e-3, .slot = 1, .open_all = 1};
    struct hy_cl_build_result r;
    double tw = 0, tu = 0, ts = 0, tc = 0, tm = 0;
    for (long k = 0; k < reps + 2; k++) {
      b.tree_id = 1000 + (uint64_t)k;
      const double t0 = hy_wtime();
      if (hy_cl_tree_build(cl, &b, &r, &err) != 0) {
        fprintf(stderr, "bench_devbuild: %s\n", err.msg);
        rc = 1;
        break;
      }
      const double t1 = hy_wtime();
      if (k >= 2) {
        tw += t1 - t0;
        tu += r.upload;
        ts += r.sort;
        tc += r.cells;
        tm += r.moments;
      }
    }
    const float box[6] = {-0.6f, -0.6f, -0.6f, 0.6f, 0.6f, 0.6f};
    float *node = hy_malloc("point tree records", hy_size_mul_or_die(m, 16, "point tree records"), sizeof(float));
    double th = 0;
    size_t n_pc = 0;
    for (long k = 0; k < reps + 2 && rc == 0; k++) {
      const double t0 = hy_wtime();
      n_pc = hy_tree_point_records(&pt, pos, m, box, 16, node, pool);
      if (k >= 2) th += hy_wtime() - t0;
    }
    if (rc == 0)
      printf("| %zu | %.3f | %.3f | %.3f | %.3f | %.3f | %d | %zu | %.3f | %zu |\n", m, 1e3 * tw / (double)reps,
             1e3 * tu / (double)reps, 1e3 * ts / (double)reps, 1e3 * tc / (double)reps, 1e3 * tm / (double)reps,
             r.generations, r.n_cell, 1e3 * th / (double)reps, n_pc);
    hy_free(node);
    hy_free(pos);
    hy_free(grp);
  }
  hy_tree_free(&pt);
  hy_pool_free(pool);
  hy_cl_free(cl);
  return rc;
}
