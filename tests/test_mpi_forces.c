/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_mpi_forces.c: accelerations of the distributed force (local tree +
 * LET + remote tree) against a double-precision direct sum, on however many
 * ranks it is started with. Every rank loads the same ICs; the particles
 * are distributed by the domain decomposition; the split walk gives hard
 * and soft parts, the total is their sum. Then every particle drifts for
 * n - 1 hard steps without a new decomposition (a tree build after the
 * first and after the last, as in the integrator) and the hard walk
 * (with the hard LET against the drifted boxes) is checked again: a
 * neighbour that drifted into R2 of another domain must not be missed.
 *
 * Rank 0 gathers the results of a fixed subset of at most S sinks (every ID
 * with id % stride == 0, the same for any rank count), computes the reference by
 * direct summation over all particles, and writes one line of error
 * statistics (median and 99th percentile of |a - a_ref| / |a_ref,total| for
 * total, hard, soft and drifted hard) to the file given with -o. The driver
 * (tests/mpi_forces.sh) compares the lines of different rank counts.
 *
 * usage: test_mpi_forces -i ICS -G G -e EPS -1 R1 -2 R2 -a AERR -d DRIFT -s S
 *                        [-w auto|separate|merged] [-b auto|host|device] [-f F] [-S] [-H]
 *                        [-r REF] -o OUT
 * (-r: a file that keeps the direct sums between runs of the same ICs: read
 * when it exists and was made from the same particles, sinks, eps, R1, R2
 * and drift, else an error; written when it does not exist. The two direct
 * sums over all particles are most of a run's time on a CPU.)
 * (-f: the full LET's opening factor, LETOpenFactor, default HY_LET_FULL_OPEN)
 * (-b: where the local trees are built, hy_force_cfg.tree_build; -S: the
 * particle state on the device, as ParticleState device runs keep it: the
 * forces from hy_force_state_force, the drifts by hy_force_state_move; the
 * hard and soft parts from the kick and total accelerations of the split
 * walk, a_w = a_h + n a_s and a = a_h + a_s; -H: the hard walks' remote
 * trees built on the device, hy_force_cfg.hard_remote device, instead of the host's
 * trees of points) */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "cl_engine.h"
#include "decomp.h"
#include "force.h"
#include "force_cpu.h"
#include "hy_shared.h"
#include "hy_test.h"
#include "ic.h"
#include "io.h"
#include "let.h"
#include "log.h"
#include "lsan.h"
#include "threads.h"


static void die(const char *what, const struct hy_err *err) {
  fprintf(stderr, "test_mpi_forces: %s: %s\n", what, err ? err->msg : "");
  MPI_Abort(MPI_COMM_WORLD, 99);
  exit(99);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void stats(double *e, size_t n, double *med, double *p99) {
  qsort(e, n, sizeof(double), cmp_double);
  *med = e[n / 2];
  *p99 = e[(size_t)(0.99 * (double)n)];
}

/* Gather (id, 3 values a, 3 values b) of the sinks with id % stride == 0 on
 * rank 0, ordered by ID. Returns the count on rank 0 (0 elsewhere). */
static size_t gather_sinks(const struct hy_part *p, const double *a, const double *b, uint64_t stride, double **out) {
  int P, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  size_t m = 0;
  for (size_t i = 0; i < p->n; i++) m += p->id[i] % stride == 0;
  double *buf = hy_malloc("sinks", m ? m : 1, 7 * sizeof(double));
  size_t k = 0;
  for (size_t i = 0; i < p->n; i++) {
    if (p->id[i] % stride) continue;
    buf[7 * k] = (double)p->id[i];
    for (int d = 0; d < 3; d++) {
      buf[7 * k + 1 + d] = a[3 * i + d];
      buf[7 * k + 4 + d] = b ? b[3 * i + d] : 0.0;
    }
    k++;
  }
  int cnt = (int)(7 * m), *cnts = NULL, *disp = NULL;
  if (rank == 0) {
    cnts = hy_malloc("counts", (size_t)P, sizeof(int));
    disp = hy_malloc("counts", (size_t)P, sizeof(int));
  }
  if (MPI_Gather(&cnt, 1, MPI_INT, cnts, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) die("MPI_Gather", NULL);
  size_t tot = 0;
  if (rank == 0)
    for (int r = 0; r < P; r++) {
      disp[r] = (int)tot;
      tot += (size_t)cnts[r];
    }
  double *all = rank == 0 ? hy_malloc("sinks", tot ? tot : 1, sizeof(double)) : NULL;
  if (MPI_Gatherv(buf, cnt, MPI_DOUBLE, all, cnts, disp, MPI_DOUBLE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
    die("MPI_Gatherv", NULL);
  hy_free(buf);
  hy_free(cnts);
  hy_free(disp);
  *out = all;
  if (rank != 0) return 0;
  size_t n = tot / 7;
  /* order by ID (insertion into an array indexed by rank of ID is not needed:
   * sort rows by their first value) */
  qsort(all, n, 7 * sizeof(double), cmp_double);
  return n;
}

/* FNV-1a over the bytes of an array */
static uint64_t fnv(uint64_t h, const void *data, size_t bytes) {
  const unsigned char *c = data;
  for (size_t i = 0; i < bytes; i++) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

/* the kept direct sums (-r): a header that names what they were made from,
 * then ra, rh, ra2, rh2 (3 m doubles each, sinks by ascending ID) */
struct ref_head {
  char magic[8];
  uint64_t n, m, key;
  double eps, r1, r2, drift;
};

static void ref_bad(const char *path, const char *why) {
  fprintf(stderr, "test_mpi_forces: %s: %s\n", path, why);
  MPI_Abort(MPI_COMM_WORLD, 99);
  exit(99);
}

static int ref_load(const char *path, const struct ref_head *want, double *const v[4]) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    if (errno == ENOENT) return 0;
    ref_bad(path, strerror(errno));
  }
  struct ref_head h;
  if (fread(&h, sizeof h, 1, fp) != 1) ref_bad(path, "no header of direct sums (a short file or a read error)");
  if (memcmp(&h, want, sizeof h) != 0) ref_bad(path, "direct sums of other particles, sinks or parameters");
  for (int k = 0; k < 4; k++)
    if (fread(v[k], sizeof(double), 3 * (size_t)h.m, fp) != 3 * (size_t)h.m)
      ref_bad(path, "fewer direct sums than its header says (a short file or a read error)");
  if (fclose(fp) != 0) ref_bad(path, strerror(errno));
  return 1;
}

static void ref_save(const char *path, const struct ref_head *h, double *const v[4]) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) ref_bad(path, "name too long");
  FILE *fp = fopen(tmp, "wb");
  if (!fp || fwrite(h, sizeof *h, 1, fp) != 1) ref_bad(tmp, strerror(errno));
  for (int k = 0; k < 4; k++)
    if (fwrite(v[k], sizeof(double), 3 * (size_t)h->m, fp) != 3 * (size_t)h->m) ref_bad(tmp, strerror(errno));
  if (fclose(fp) != 0 || rename(tmp, path) != 0) ref_bad(path, strerror(errno));
}

/* -S: the next decomposition made ahead in the last hard walk's waits
 * (hy_force_state_force_begin, _exchange, _end), as the integrator's last
 * hard step makes it (its draw, here too): the device's gather of the
 * samples queued before the local walk, the cut begun while it runs (rank
 * 0 cuts on a thread, joined when the decomposition is freed). Returns the
 * number of waits the walk had (0 or 2), or -1. */
static int hard_force_ahead(struct hy_force *f, struct hy_part *p, struct hy_decomp *dd, struct hy_err *err) {
  const int waits = hy_force_state_force_begin(f, p, HY_WALK_HARD, 0, err);
  if (waits <= 0) return waits;
  hy_decomp_pre_draw(dd, p->n, 0.0);
  int rc = hy_decomp_pre_sample(dd, p, hy_force_decomp_source(f), err);
  if (rc == 0) rc = hy_force_state_force_exchange(f, p, err);
  if (rc == 0) rc = hy_decomp_pre_cut_begin(dd, err);
  return hy_force_state_force_end(f, p, rc, err) == 0 ? 2 : -1;
}

int main(int argc, char **argv) {
  int provided;
  HY_LSAN_DISABLE();
  int mpi_rc = MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  HY_LSAN_ENABLE();
  if (mpi_rc != MPI_SUCCESS) return 99;
  int P, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  hy_log_init(rank, P);
  const char *ics = NULL, *out = NULL, *ref = NULL;
  double G = 1, eps = 0, r1 = 0, r2 = 0, a_err = 0, drift = 0;
  long max_sinks = 4096;
  int opt, let_walk = HY_LET_AUTO, tree_build = HY_TREE_BUILD_AUTO, state = 0, hard_dev = 0;
  double let_open = HY_LET_FULL_OPEN;
  while ((opt = getopt(argc, argv, "i:G:e:1:2:a:d:s:w:b:f:SHr:o:")) != -1) {
    switch (opt) {
      case 'S': state = 1; break;
      case 'H': hard_dev = 1; break;
      case 'i': ics = optarg; break;
      case 'G': G = atof(optarg); break;
      case 'e': eps = atof(optarg); break;
      case '1': r1 = atof(optarg); break;
      case '2': r2 = atof(optarg); break;
      case 'a': a_err = atof(optarg); break;
      case 'd': drift = atof(optarg); break;
      case 's': max_sinks = atol(optarg); break;
      case 'w':
        let_walk = strcmp(optarg, "merged") == 0 ? HY_LET_MERGED : strcmp(optarg, "separate") == 0 ? HY_LET_SEPARATE
                                                                                                     : HY_LET_AUTO;
        break;
      case 'b':
        tree_build = strcmp(optarg, "device") == 0 ? HY_TREE_BUILD_DEVICE
                     : strcmp(optarg, "host") == 0 ? HY_TREE_BUILD_HOST
                                                   : HY_TREE_BUILD_AUTO;
        break;
      case 'f': let_open = atof(optarg); break;
      case 'r': ref = optarg; break;
      case 'o': out = optarg; break;
      default: die("bad option", NULL);
    }
  }
  if (!ics || !out || !(r2 > r1) || !(a_err > 0)) die("usage: -i ICS -G -e -1 -2 -a -d -o", NULL);
  struct hy_err err;
  struct hy_part all, p;
  hy_part_init(&all);
  hy_part_init(&p);
  struct hy_ic_spec gen;
  int g = hy_ic_parse_spec(ics, &gen, &err);
  if (g < 0) die(ics, &err);
  double t_ic;
  if ((g == 1 ? hy_ic_generate(&gen, &all, NULL, &err) : hy_io_read_ic(ics, HY_FMT_AUTO, &all, &t_ic, &err)) != 0)
    die(ics, &err);
  const size_t N = all.n;
  uint64_t max_id = 0;
  for (size_t i = 0; i < N; i++)
    if (all.id[i] > max_id) max_id = all.id[i];
  uint64_t stride = max_sinks > 0 ? max_id / (uint64_t)max_sinks + 1 : 1;

  /* every rank starts with a contiguous share, then the decomposition moves them */
  size_t b = N * (size_t)rank / (size_t)P, e = N * (size_t)(rank + 1) / (size_t)P;
  hy_part_resize(&p, e - b);
  memcpy(p.pos, all.pos + 3 * b, 3 * (e - b) * sizeof(double));
  memcpy(p.vel, all.vel + 3 * b, 3 * (e - b) * sizeof(double));
  memcpy(p.mass, all.mass + b, (e - b) * sizeof(double));
  memcpy(p.id, all.id + b, (e - b) * sizeof(uint64_t));
  memcpy(p.type, all.type + b, (e - b));

  MPI_Comm comm;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &comm) != MPI_SUCCESS) die("MPI_Comm_dup", NULL);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  struct hy_pool *pool = hy_pool_create(1);
  struct hy_decomp *dd = NULL;
  int grid[3];
  hy_decomp_factor(P, grid);
  if (!(dd = hy_decomp_create(comm, grid, 1.0 / 16, 1.0, 12345, &err))) die("decomposition", &err);
  struct hy_decomp_stats dst;
  if (hy_decomp_exchange(dd, &p, 0.0, &dst, &err) != 0) die("decomposition", &err);

  struct hy_cl_opts o = {.kind = HY_CL_ANY, .platform = -1, .device = -1, .local_rank = 0, .nvec = 4};
  struct hy_cl *cl;
  if (hy_cl_create(&cl, &o, &err) != 0) die("OpenCL", &err);
  struct hy_force_cfg fc = {.G = G, .eps = eps, .r1 = r1, .r2 = r2, .a_err = a_err, .n_crit = 16, .nvec = 4,
                            .n_ratio = 4, .tree_build = tree_build, .hard_remote = hard_dev ? HY_TREE_BUILD_DEVICE : HY_TREE_BUILD_HOST};
  struct hy_force *f = hy_force_create(cl, pool, &fc);
  hy_force_set_comm(f, comm, 1, let_walk);
  hy_force_set_let_open(f, let_open);

  size_t n = p.n;
  double *hard = hy_malloc("hard", 3 * (n ? n : 1), sizeof(double));
  double *soft = hy_malloc("soft", 3 * (n ? n : 1), sizeof(double));
  const double n_ratio = (double)fc.n_ratio;
  if (state) {
    if (!hy_force_state_possible(f, &p) || n < 2) die("-S: the particle state cannot live on this device", NULL);
    if (hy_force_state_put(f, &p, 1, &err) != 0 || hy_force_state_force(f, &p, HY_WALK_SPLIT, 0, &err) != 0 ||
        hy_force_state_get(f, &p, 1, 0, &err) != 0)
      die("split walk of the device state", &err);
    for (size_t i = 0; i < 3 * n; i++) {
      soft[i] = (p.acc_w[i] - p.acc[i]) / (n_ratio - 1.0);
      hard[i] = p.acc[i] - soft[i];
    }
  } else if (hy_force_build(f, &p, &err) != 0 || hy_force_walk(f, &p, HY_WALK_SPLIT, hard, soft, NULL, &err) != 0) {
    die("split walk", &err);
  }
  struct hy_force_stats st;
  hy_force_stats_get(f, &st);
  printf("rank %d/%d: %zu particles, received %llu LET items (a hard LET would be %llu), sent %llu\n", rank, P, n,
         (unsigned long long)st.let_recv, (unsigned long long)st.let_recv_hard, (unsigned long long)st.let_sent);
  double *rows1 = NULL, *rows2 = NULL;
  size_t m1 = gather_sinks(&p, hard, soft, stride, &rows1);

  /* the hard-LET size counted by the full LET selection (let.csv, the
   * decomposition weights) is the size of the hard LET that a hard walk of
   * the same tree and boxes receives, also when the full LET opens cells
   * that the hard walk sends whole (LETOpenFactor > 1) */
  if (P > 1) {
    const uint64_t counted = st.let_recv_hard, before = st.let_recv;
    const int rc = state ? hy_force_state_force(f, &p, HY_WALK_HARD, 0, &err)
                         : hy_force_walk(f, &p, HY_WALK_HARD, hard, NULL, NULL, &err);
    if (rc != 0) die("hard walk at the soft step's positions", &err);
    hy_force_stats_get(f, &st);
    HY_CHECK_INT(st.let_recv - before, counted);
  }

  /* drift n - 1 = 3 hard steps (no new decomposition), hard walk with the
   * hard LET, as the integrator does them: a build after the first third
   * (the soft step's merged tree is gone), and one after the rest */
  if (state) { /* the same drifts on the device (x += dt v in the same double arithmetic) */
    if (hy_force_state_move(f, 0, drift / 3.0, &err) != 0 ||
        hy_force_state_force(f, &p, HY_WALK_HARD, 0, &err) != 0 ||
        hy_force_state_move(f, 0, 2.0 * drift / 3.0, &err) != 0)
      die("hard walks of the device state after the drift", &err);
    /* the last one with the next decomposition sampled and cut in its
     * waits, as the integrator does it (under TSan in make check-tsan) */
    const int waits = hard_force_ahead(f, &p, dd, &err);
    if (waits < 0 || hy_force_state_get(f, &p, 0, 0, &err) != 0)
      die("hard walks of the device state after the drift", &err);
    HY_CHECK_INT(waits, P > 1 ? 2 : 0); /* the waits, in the distributed walk only */
    memcpy(hard, p.acc_w, 3 * n * sizeof(double));
  } else {
    for (size_t i = 0; i < 3 * n; i++) p.pos[i] += drift / 3.0 * p.vel[i];
    if (hy_force_build(f, &p, &err) != 0 || hy_force_walk(f, &p, HY_WALK_HARD, hard, NULL, NULL, &err) != 0)
      die("hard walk after the first hard step's drift", &err);
    for (size_t i = 0; i < 3 * n; i++) p.pos[i] += 2.0 * drift / 3.0 * p.vel[i];
    if (hy_force_build(f, &p, &err) != 0 || hy_force_walk(f, &p, HY_WALK_HARD, hard, NULL, NULL, &err) != 0)
      die("hard walk after the drift", &err);
  }
  size_t m2 = gather_sinks(&p, hard, NULL, stride, &rows2);

  if (rank == 0) {
    size_t expect = 0;
    for (size_t i = 0; i < N; i++) expect += all.id[i] % stride == 0;
    HY_CHECK_INT(m1, expect);
    HY_CHECK_INT(m2, expect);
    /* references: sinks by ID in the full set */
    double *spos = hy_malloc("ref", 3 * m1, sizeof(double)), *spos2 = hy_malloc("ref", 3 * m1, sizeof(double));
    double *ra = hy_malloc("ref", 3 * m1, sizeof(double)), *rh = hy_malloc("ref", 3 * m1, sizeof(double));
    double *ra2 = hy_malloc("ref", 3 * m1, sizeof(double)), *rh2 = hy_malloc("ref", 3 * m1, sizeof(double));
    double *drifted = hy_malloc("ref", 3 * N, sizeof(double));
    for (size_t i = 0; i < 3 * N; i++) drifted[i] = all.pos[i] + drift * all.vel[i];
    /* map ID -> index of the full set */
    size_t *at = hy_malloc("ref", (size_t)max_id + 1, sizeof(size_t));
    for (size_t i = 0; i < N; i++) at[all.id[i]] = i;
    for (size_t k = 0; k < m1; k++) {
      size_t i = at[(uint64_t)rows1[7 * k]];
      for (int d = 0; d < 3; d++) {
        spos[3 * k + d] = all.pos[3 * i + d];
        spos2[3 * k + d] = drifted[3 * i + d];
      }
    }
    struct ref_head head = {.magic = "HYREF01", .n = N, .m = m1, .eps = eps, .r1 = r1, .r2 = r2, .drift = drift};
    uint64_t key = 14695981039346656037ull;
    key = fnv(key, all.pos, 3 * N * sizeof(double));
    key = fnv(key, all.vel, 3 * N * sizeof(double));
    key = fnv(key, all.mass, N * sizeof(double));
    for (size_t k = 0; k < m1; k++) key = fnv(key, &rows1[7 * k], sizeof(double));
    head.key = key;
    double *const refs[4] = {ra, rh, ra2, rh2};
    if (!ref || !ref_load(ref, &head, refs)) {
      struct hy_pool *big = hy_pool_create(hy_pool_default_threads());
      /* the sinks are sources too: their self pair is skipped by zero distance
       * (softened, so the self term contributes exactly zero force) */
      hy_cpu_direct(all.pos, all.mass, N, spos, m1, -1, eps, r1, r2, ra, rh, NULL, big);
      hy_cpu_direct(drifted, all.mass, N, spos2, m1, -1, eps, r1, r2, ra2, rh2, NULL, big);
      hy_pool_free(big);
      if (ref) ref_save(ref, &head, refs);
    }
    double *et = hy_malloc("e", m1, sizeof(double)), *eh = hy_malloc("e", m1, sizeof(double));
    double *es = hy_malloc("e", m1, sizeof(double)), *ed = hy_malloc("e", m1, sizeof(double));
    for (size_t k = 0; k < m1; k++) {
      double nt = 0, dt = 0, dh = 0, ds = 0, nt2 = 0, dd2 = 0;
      for (int d = 0; d < 3; d++) {
        double ref_t = G * ra[3 * k + d], ref_h = G * rh[3 * k + d], ref_s = ref_t - ref_h;
        double h = rows1[7 * k + 1 + d], s = rows1[7 * k + 4 + d];
        nt += ref_t * ref_t;
        dt += (h + s - ref_t) * (h + s - ref_t);
        dh += (h - ref_h) * (h - ref_h);
        ds += (s - ref_s) * (s - ref_s);
        double ref_t2 = G * ra2[3 * k + d], ref_h2 = G * rh2[3 * k + d];
        nt2 += ref_t2 * ref_t2;
        dd2 += (rows2[7 * k + 1 + d] - ref_h2) * (rows2[7 * k + 1 + d] - ref_h2);
      }
      et[k] = sqrt(dt / nt);
      eh[k] = sqrt(dh / nt);
      es[k] = sqrt(ds / nt);
      ed[k] = sqrt(dd2 / nt2);
    }
    double v[8];
    stats(et, m1, &v[0], &v[1]);
    stats(eh, m1, &v[2], &v[3]);
    stats(es, m1, &v[4], &v[5]);
    stats(ed, m1, &v[6], &v[7]);
    printf("%d ranks, %zu sinks: total %.3e %.3e  hard %.3e %.3e  soft %.3e %.3e  drifted hard %.3e %.3e\n", P, m1,
           v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
    FILE *fo = fopen(out, "w");
    if (!fo) die(out, NULL);
    fprintf(fo, "%d %.6e %.6e %.6e %.6e %.6e %.6e %.6e %.6e\n", P, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
    if (fclose(fo) != 0) die(out, NULL);
    hy_free(spos);
    hy_free(spos2);
    hy_free(ra);
    hy_free(rh);
    hy_free(ra2);
    hy_free(rh2);
    hy_free(drifted);
    hy_free(at);
    hy_free(et);
    hy_free(eh);
    hy_free(es);
    hy_free(ed);
  }
  hy_free(rows1);
  hy_free(rows2);
  hy_free(hard);
  hy_free(soft);
  hy_force_free(f);
  hy_decomp_free(dd);
  hy_cl_free(cl);
  hy_pool_free(pool);
  hy_part_free(&p);
  hy_part_free(&all);
  MPI_Comm_free(&comm);
  int fails = hy_test_failures, total = 0;
  MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  HY_LSAN_CHECK();
  MPI_Finalize();
  return total ? 1 : 0;
}
