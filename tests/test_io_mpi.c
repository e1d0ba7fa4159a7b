/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_io_mpi.c: parallel I/O (io_mpi.h) at any number of ranks P (run by
 * tests/io_mpi.sh at 1..4). Scatter of HDF5 and Gadget-1 ICs read on rank 0
 * (each rank's chunk equals its slice of a serial read); snapshots written
 * as one gathered file, as 2 files and as P files, read back serially and
 * compared bitwise, sorted by ID, with the original set, with their header
 * counts; a multi-file set scattered equals the single file scattered;
 * failures (missing directory, one file of a set failing, missing IC file,
 * wrong file count) return -1 on every rank with the same message and leave
 * no temporary and no partial set. */
#include "config.h"

#include <hdf5.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hy_test.h"
#include "io.h"
#include "io_mpi.h"
#include "io_test_util.h"
#include "lsan.h"
#include "part.h"

static int rank, size;
#define N_ORIG 1001

/* Deterministic set: types 0, 1, 2, 4, 5 (3 stays empty), scattered IDs. */
static void make_set(struct hy_part *p) {
  unsigned long long s = 12345;
  hy_part_resize(p, N_ORIG);
  for (size_t i = 0; i < N_ORIG; i++) {
    for (int c = 0; c < 3; c++) {
      p->pos[3 * i + c] = hy_urand(&s) - 0.5;
      p->vel[3 * i + c] = 0.1 * (hy_urand(&s) - 0.5);
    }
    p->mass[i] = 0.5 + hy_urand(&s);
    static const uint8_t types[5] = {0, 1, 2, 4, 5};
    p->type[i] = types[(i * 7 + i / 13) % 5];
    p->id[i] = 1000000000000ULL + (uint64_t)((i * 389) % N_ORIG) * 3;
    p->acc[3 * i] = p->acc[3 * i + 1] = p->acc[3 * i + 2] = (double)i;
    p->pot[i] = -(double)i;
  }
}

static const uint64_t *sort_ids;
static int by_id(const void *a, const void *b) {
  uint64_t x = sort_ids[*(const size_t *)a], y = sort_ids[*(const size_t *)b];
  return (x > y) - (x < y);
}

static void sort_by_id(struct hy_part *p) {
  size_t *perm = malloc(p->n * sizeof *perm + 1);
  for (size_t i = 0; i < p->n; i++) perm[i] = i;
  sort_ids = p->id;
  qsort(perm, p->n, sizeof *perm, by_id);
  hy_part_permute(p, perm);
  free(perm);
}

/* a and b hold the same particles (pos, vel, mass, id, type bitwise). */
static int same_set(const struct hy_part *a0, const struct hy_part *b0, const char *what) {
  struct hy_part a, b;
  hy_part_init(&a);
  hy_part_init(&b);
  hy_part_copy(&a, a0);
  hy_part_copy(&b, b0);
  sort_by_id(&a);
  sort_by_id(&b);
  int ok = a.n == b.n;
  if (ok)
    ok = !memcmp(a.pos, b.pos, 3 * a.n * sizeof(double)) &&
         !memcmp(a.vel, b.vel, 3 * a.n * sizeof(double)) &&
         !memcmp(a.mass, b.mass, a.n * sizeof(double)) &&
         !memcmp(a.id, b.id, a.n * sizeof(uint64_t)) && !memcmp(a.type, b.type, a.n);
  HY_CHECK_MSG(ok, "%s: particle sets differ (n %zu vs %zu)", what, a.n, b.n);
  hy_part_free(&a);
  hy_part_free(&b);
  return ok;
}

/* p is this rank's slice of ref (contiguous near-equal chunks), acc/pot 0. */
static void check_chunk(const struct hy_part *p, const struct hy_part *ref, const char *what) {
  size_t q = ref->n / (size_t)size, rem = ref->n % (size_t)size;
  size_t n = q + ((size_t)rank < rem), off = (size_t)rank * q + ((size_t)rank < rem ? (size_t)rank : rem);
  HY_CHECK_MSG(p->n == n, "%s: rank %d holds %zu particles, expected %zu", what, rank, p->n, n);
  if (p->n != n) return;
  int ok = !memcmp(p->pos, ref->pos + 3 * off, 3 * n * sizeof(double)) &&
           !memcmp(p->vel, ref->vel + 3 * off, 3 * n * sizeof(double)) &&
           !memcmp(p->mass, ref->mass + off, n * sizeof(double)) &&
           !memcmp(p->id, ref->id + off, n * sizeof(uint64_t)) &&
           !memcmp(p->type, ref->type + off, n);
  for (size_t i = 0; i < n; i++) ok = ok && p->acc[3 * i] == 0.0 && p->pot[i] == 0.0;
  HY_CHECK_MSG(ok, "%s: rank %d: chunk differs from its slice of the serial read", what, rank);
}

/* Entries of the scratch directory whose name contains needle. */
static int count_names(const char *needle) {
  DIR *d = opendir(hy_tmpdir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (strstr(e->d_name, needle)) n++;
  closedir(d);
  return n;
}

/* Every rank got -1 and the same message, containing needle. */
static void check_failed_everywhere(int rc, const struct hy_err *err, const char *needle,
                                    const char *what) {
  HY_CHECK_MSG(rc == -1, "%s: rank %d returned %d", what, rank, rc);
  char msg0[sizeof err->msg];
  memcpy(msg0, err->msg, sizeof msg0);
  msg0[sizeof msg0 - 1] = '\0';
  MPI_Bcast(msg0, (int)sizeof msg0, MPI_CHAR, 0, MPI_COMM_WORLD);
  HY_CHECK_MSG(strcmp(msg0, err->msg) == 0, "%s: rank %d message \"%s\" differs from rank 0's \"%s\"",
               what, rank, err->msg, msg0);
  HY_CHECK_CONTAINS(err->msg, needle);
  HY_CHECK_MSG(strchr(err->msg, '\n') == NULL, "%s: message is not one line", what);
  if (rank == 0) printf("expected error (%s): %s\n", what, err->msg);
}

static uint64_t header_u64(hid_t f, const char *name, int k) {
  uint64_t v[6] = {0};
  hid_t a = H5Aopen_by_name(f, "/Header", name, H5P_DEFAULT, H5P_DEFAULT);
  HY_CHECK_MSG(a >= 0 && H5Aread(a, H5T_NATIVE_UINT64, v) >= 0, "cannot read /Header/%s", name);
  if (a >= 0) H5Aclose(a);
  return v[k];
}

static int header_int(hid_t f, const char *name) {
  int v = -1;
  hid_t a = H5Aopen_by_name(f, "/Header", name, H5P_DEFAULT, H5P_DEFAULT);
  HY_CHECK_MSG(a >= 0 && H5Aread(a, H5T_NATIVE_INT, &v) >= 0, "cannot read /Header/%s", name);
  if (a >= 0) H5Aclose(a);
  return v;
}

/* Rank 0: the headers of snapshot snapnum written as nfiles files. */
static void check_headers(int snapnum, int nfiles, const struct hy_part *orig) {
  uint64_t want[6] = {0}, sum[6] = {0};
  for (size_t i = 0; i < orig->n; i++) want[orig->type[i]]++;
  char path[4300];
  for (int k = 0; k <= nfiles; k++) {
    hy_io_snapshot_name(path, sizeof path, hy_tmpdir, snapnum, nfiles, k);
    if (k == nfiles) {
      if (nfiles > 1) HY_CHECK_MSG(access(path, F_OK) != 0, "%s exists beyond the set", path);
      break;
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    HY_CHECK_MSG(f >= 0, "cannot open %s", path);
    if (f < 0) return;
    HY_CHECK_INT(header_int(f, "NumFilesPerSnapshot"), nfiles);
    for (int t = 0; t < 6; t++) {
      HY_CHECK_INT(header_u64(f, "NumPart_Total", t), want[t]);
      HY_CHECK_INT(header_u64(f, "NumPart_Total_HighWord", t), 0);
      sum[t] += header_u64(f, "NumPart_ThisFile", t);
    }
    H5Fclose(f);
  }
  for (int t = 0; t < 6; t++) HY_CHECK_INT(sum[t], want[t]);
}

/* Rank 0: serial re-read of snapshot snapnum equals orig. */
static void check_reread(int snapnum, int nfiles, const struct hy_part *orig) {
  char path[4300];
  struct hy_part q;
  struct hy_err err;
  double t = -1;
  hy_part_init(&q);
  hy_io_snapshot_name(path, sizeof path, hy_tmpdir, snapnum, nfiles, 0);
  int rc = hy_io_read_ic(path, HY_FMT_AUTO, &q, &t, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  HY_CHECK(t == 1.25);
  same_set(orig, &q, path);
  if (nfiles > 1) { /* the base name reads the same set */
    snprintf(path, sizeof path, "%s/snapshot_%03d", hy_tmpdir, snapnum);
    rc = hy_io_read_ic(path, HY_FMT_AUTO, &q, &t, &err);
    HY_CHECK_MSG(rc == 0, "%s", err.msg);
    same_set(orig, &q, path);
  }
  hy_part_free(&q);
  check_headers(snapnum, nfiles, orig);
  HY_CHECK_INT(count_names(".tmp."), 0);
}

int main(int argc, char **argv) {
  HY_LSAN_DISABLE();
  int mpi_rc = MPI_Init(&argc, &argv);
  HY_LSAN_ENABLE();
  if (mpi_rc != MPI_SUCCESS) return 99;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  hy_log_init(rank, size);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  if (rank == 0) hy_tmp_setup("io-mpi");
  MPI_Bcast(hy_tmpdir, (int)sizeof hy_tmpdir, MPI_CHAR, 0, MPI_COMM_WORLD);

  struct hy_part orig, p, q, ref;
  struct hy_err err;
  hy_part_init(&orig);
  hy_part_init(&p);
  hy_part_init(&q);
  hy_part_init(&ref);
  make_set(&orig);
  struct hy_snap_info info = {.time = 1.25,
                              .units = {1.0, 1.0, 1.0},
                              .gravity_constant = 1.0,
                              .softening = 0.01};
  const char *ic_h5 = hy_tmp_path(0, "ic.hdf5"), *ic_g1 = hy_tmp_path(1, "ic.gadget");
  if (rank == 0) {
    int rc = hy_io_write_hdf5(ic_h5, &orig, &info, &err);
    HY_CHECK_MSG(rc == 0, "%s", err.msg);
    struct hy_gadget_opts o = {1, 1, 0, 1, 0};
    rc = hy_io_write_gadget(ic_g1, &orig, 1.25, &o, &err);
    HY_CHECK_MSG(rc == 0, "%s", err.msg);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* 1. HDF5 ICs scattered (default rounds), Gadget-1 ICs (rounds of 7). */
  double t = -1;
  int rc = hy_io_read_ic(ic_h5, HY_FMT_AUTO, &ref, &t, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  if (rank == 0) same_set(&orig, &ref, "serial HDF5 IC");
  t = -1;
  rc = hy_io_read_ic_mpi(MPI_COMM_WORLD, ic_h5, HY_FMT_AUTO, &p, &t, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  HY_CHECK(t == 1.25);
  check_chunk(&p, &ref, "HDF5 IC");
  /* Snapshots are written from a round-robin distribution (rank r holds the
   * particles i = r mod P of the original set), so every file of a set holds
   * every type and the files concatenated are not in global type order. */
  struct hy_part mix;
  hy_part_init(&mix);
  hy_part_resize(&mix, (N_ORIG - (size_t)rank + (size_t)size - 1) / (size_t)size);
  for (size_t i = (size_t)rank, k = 0; i < N_ORIG; i += (size_t)size, k++) {
    memcpy(mix.pos + 3 * k, orig.pos + 3 * i, 3 * sizeof(double));
    memcpy(mix.vel + 3 * k, orig.vel + 3 * i, 3 * sizeof(double));
    mix.mass[k] = orig.mass[i];
    mix.id[k] = orig.id[i];
    mix.type[k] = orig.type[i];
  }
  setenv("HYTREE_TEST_IO_MPI_CHUNK", "7", 1);
  rc = hy_io_read_ic(ic_g1, HY_FMT_AUTO, &ref, &t, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  if (rank == 0) same_set(&orig, &ref, "serial Gadget-1 IC");
  t = -1;
  rc = hy_io_read_ic_mpi(MPI_COMM_WORLD, ic_g1, HY_FMT_GADGET1, &q, &t, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  HY_CHECK(t == 1.25);
  check_chunk(&q, &ref, "Gadget-1 IC");

  /* 2. One file gathered on rank 0 (default rounds), then 2 and P files
   * (rounds of 7). */
  unsetenv("HYTREE_TEST_IO_MPI_CHUNK");
  rc = hy_io_write_snapshot_mpi(MPI_COMM_WORLD, hy_tmpdir, 0, &mix, &info, 1, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  if (rank == 0) check_reread(0, 1, &orig);
  setenv("HYTREE_TEST_IO_MPI_CHUNK", "7", 1);
  int nf_list[2] = {2, size};
  for (int k = 0; k < 2; k++) {
    int nf = nf_list[k];
    if (nf < 2 || nf > size || (k == 1 && nf == 2)) continue;
    rc = hy_io_write_snapshot_mpi(MPI_COMM_WORLD, hy_tmpdir, 1 + k, &mix, &info, nf, &err);
    HY_CHECK_MSG(rc == 0, "%s", err.msg);
    if (rank == 0) check_reread(1 + k, nf, &orig);
    /* 3. The multi-file set scattered equals the single file scattered. */
    char path[4300];
    hy_io_snapshot_name(path, sizeof path, hy_tmpdir, 1 + k, nf, 0);
    rc = hy_io_read_ic_mpi(MPI_COMM_WORLD, path, HY_FMT_AUTO, &q, &t, &err);
    HY_CHECK_MSG(rc == 0, "%s", err.msg);
    hy_io_snapshot_name(path, sizeof path, hy_tmpdir, 0, 1, 0);
    rc = hy_io_read_ic(path, HY_FMT_AUTO, &ref, &t, &err);
    HY_CHECK_MSG(rc == 0, "%s", err.msg);
    check_chunk(&q, &ref, "multi-file set scattered");
  }

  /* 4. Failures. */
  char dir[4300];
  snprintf(dir, sizeof dir, "%s/missing", hy_tmpdir);
  int before = rank == 0 ? count_names("") : 0;
  rc = hy_io_write_snapshot_mpi(MPI_COMM_WORLD, dir, 3, &p, &info, size > 1 ? 2 : 1, &err);
  check_failed_everywhere(rc, &err, "/missing/snapshot_003", "missing directory");
  if (rank == 0) HY_CHECK_INT(count_names(""), before);

  if (size > 1) {
    /* File 1 cannot be published (a directory holds its name): file 0,
     * already renamed into place, must be taken back. */
    char blocker[4300];
    hy_io_snapshot_name(blocker, sizeof blocker, hy_tmpdir, 4, 2, 1);
    if (rank == 0) HY_CHECK(mkdir(blocker, 0777) == 0);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = hy_io_write_snapshot_mpi(MPI_COMM_WORLD, hy_tmpdir, 4, &p, &info, 2, &err);
    check_failed_everywhere(rc, &err, "snapshot_004.1.hdf5", "one file of the set fails");
    if (rank == 0) {
      HY_CHECK_INT(count_names("snapshot_004"), 1); /* the blocking directory only */
      HY_CHECK_INT(count_names(".tmp."), 0);
      HY_CHECK(rmdir(blocker) == 0);
      /* A set with a file missing is refused, naming that file. */
      char path[4300];
      hy_io_snapshot_name(path, sizeof path, hy_tmpdir, 1, 2, 1);
      HY_CHECK(unlink(path) == 0);
      snprintf(path, sizeof path, "%s/snapshot_001", hy_tmpdir);
      rc = hy_io_read_ic(path, HY_FMT_AUTO, &ref, &t, &err);
      HY_CHECK_INT(rc, -1);
      HY_CHECK_CONTAINS(err.msg, "snapshot_001.1.hdf5: cannot open");
      printf("expected error (missing file of a set): %s\n", err.msg);
    }
  } else {
    rc = hy_io_write_snapshot_mpi(MPI_COMM_WORLD, hy_tmpdir, 4, &p, &info, 2, &err);
    check_failed_everywhere(rc, &err, "must be between 1 and the number of MPI ranks (1)",
                            "more files than ranks");
  }
  rc = hy_io_read_ic_mpi(MPI_COMM_WORLD, hy_tmp_path(2, "nothing.hdf5"), HY_FMT_AUTO, &q, &t, &err);
  check_failed_everywhere(rc, &err, "nothing.hdf5: cannot open", "missing IC file");
  HY_CHECK_INT(q.n, 0);
  if (rank == 0) HY_CHECK_INT(count_names(".tmp."), 0);

  hy_part_free(&orig);
  hy_part_free(&mix);
  hy_part_free(&p);
  hy_part_free(&q);
  hy_part_free(&ref);
  int fails = 0;
  MPI_Allreduce(&hy_test_failures, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (fails == 0) hy_tmp_cleanup();
    printf("%d rank(s): %s\n", size, fails ? "FAIL" : "ok");
  }
  HY_LSAN_CHECK();
  MPI_Finalize();
  return fails ? 1 : 0;
}
