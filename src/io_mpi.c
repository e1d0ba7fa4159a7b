/* SPDX-License-Identifier: GPL-3.0-or-later
 * io_mpi.c: parallel I/O over MPI (see io_mpi.h). Owns the scatter of
 * initial conditions read on rank 0, the gather of each snapshot file's
 * particles to the rank that writes it, and the agreement of all ranks on
 * one status and one message. It reads and writes files only through io.h
 * (hy_io_read_ic, hy_io_write_hdf5) and must never exit or abort: every
 * MPI call runs on a duplicate communicator with MPI_ERRORS_RETURN and every
 * failure is a -1 with a one-line message.
 *
 * Counts and displacements of MPI_Scatterv/MPI_Gatherv are ints; particles
 * therefore travel in rounds of at most `chunk` particles per rank, with
 * chunk * gsize * 24 bytes <= INT_MAX, through a staging buffer on the root.
 * The environment variable HYTREE_TEST_IO_MPI_CHUNK lowers chunk (tests use it to
 * exercise several rounds). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "io_mpi.h"

/* ------------------------------------------------------------------ helpers */

static int mpi_fail(struct hy_err *err, int code, const char *ctx, const char *what) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "error code %d", code);
  return hy_err_set(err, "%s: MPI error in %s: %s", ctx, what, s);
}

#define MPI_TRY(call, ctx, what)                   \
  do {                                             \
    int code_ = (call);                            \
    if (code_ != MPI_SUCCESS) {                    \
      mpi_fail(err, code_, ctx, what);             \
      goto mpi_error;                              \
    }                                              \
  } while (0)

/* Duplicate comm with errors returned. */
static int comm_open(MPI_Comm comm, MPI_Comm *c, int *rank, int *size, const char *ctx,
                     struct hy_err *err) {
  *c = MPI_COMM_NULL;
  MPI_TRY(MPI_Comm_dup(comm, c), ctx, "MPI_Comm_dup");
  MPI_TRY(MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN), ctx, "MPI_Comm_set_errhandler");
  MPI_TRY(MPI_Comm_rank(*c, rank), ctx, "MPI_Comm_rank");
  MPI_TRY(MPI_Comm_size(*c, size), ctx, "MPI_Comm_size");
  return 0;
mpi_error:
  if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  return -1;
}

/* Release a communicator of ours; a failure here changes no result. */
static void comm_close(MPI_Comm *c) {
  if (*c != MPI_COMM_NULL) {
    int rc = MPI_Comm_free(c);
    (void)rc;
  }
}

/* All ranks of c agree: 0 if rc == 0 everywhere, else -1 everywhere with
 * err holding the message of the lowest failing rank. */
static int agree(MPI_Comm c, int rank, int size, int rc, const char *ctx, struct hy_err *err) {
  int mine = rc != 0 ? rank : size, first = size;
  MPI_TRY(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, c), ctx, "MPI_Allreduce (status)");
  if (first == size) return 0;
  if (rank == first) err->msg[sizeof err->msg - 1] = '\0';
  MPI_TRY(MPI_Bcast(err->msg, (int)sizeof err->msg, MPI_CHAR, first, c), ctx,
          "MPI_Bcast (message)");
  return -1;
mpi_error:
  return -1;
}

static size_t chunk_size(int gsize) {
  size_t chunk = (size_t)INT_MAX / (3 * sizeof(double)) / (size_t)gsize;
  const char *env = getenv("HYTREE_TEST_IO_MPI_CHUNK");
  if (env && *env) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(env, &end, 10);
    if (errno == 0 && *end == '\0' && v > 0 && v < chunk) chunk = (size_t)v;
  }
  return chunk > 0 ? chunk : 1;
}

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* One field moved between the root (rank 0 of c) and every rank of c, in
 * rounds. Rank j owns n_of[j] elements that sit at off_of[j] in the root's
 * global array (n_of, off_of significant on the root; my_n everywhere).
 * scatter: global -> local; else local -> global. tmp is the root's staging
 * buffer (sum_j min(chunk, n_of[j]) elements of elem bytes), cnt/dsp int
 * arrays of size csize. */
struct xfer {
  MPI_Comm c;
  int rank, csize;
  const size_t *n_of, *off_of;
  size_t my_n, chunk, rounds;
  char *tmp;
  int *cnt, *dsp;
  const char *ctx;
};

static int xfer_field(const struct xfer *x, int scatter, void *local, void *global, size_t elem,
                      MPI_Datatype dt, const char *what, struct hy_err *err) {
  for (size_t k = 0; k < x->rounds; k++) {
    size_t lo = k * x->chunk;
    if (x->rank == 0) {
      size_t d = 0;
      for (int j = 0; j < x->csize; j++) {
        size_t n = x->n_of[j] > lo ? min_sz(x->chunk, x->n_of[j] - lo) : 0;
        x->cnt[j] = (int)n;
        x->dsp[j] = (int)d;
        if (scatter && n > 0)
          memcpy(x->tmp + d * elem, (char *)global + (x->off_of[j] + lo) * elem, n * elem);
        d += n;
      }
    }
    size_t mine = x->my_n > lo ? min_sz(x->chunk, x->my_n - lo) : 0;
    char *lp = mine > 0 ? (char *)local + lo * elem : (char *)local;
    if (scatter) {
      MPI_TRY(MPI_Scatterv(x->tmp, x->cnt, x->dsp, dt, lp, (int)mine, dt, 0, x->c), x->ctx, what);
    } else {
      MPI_TRY(MPI_Gatherv(lp, (int)mine, dt, x->tmp, x->cnt, x->dsp, dt, 0, x->c), x->ctx, what);
      if (x->rank == 0)
        for (int j = 0; j < x->csize; j++)
          if (x->cnt[j] > 0)
            memcpy((char *)global + (x->off_of[j] + lo) * elem, x->tmp + (size_t)x->dsp[j] * elem,
                   (size_t)x->cnt[j] * elem);
    }
  }
  return 0;
mpi_error:
  return -1;
}

/* Staging buffers of the root for a transfer (sizes from n_of and chunk). */
static void xfer_alloc(struct xfer *x) {
  size_t stage = 0;
  if (x->rank == 0)
    for (int j = 0; j < x->csize; j++) stage += min_sz(x->chunk, x->n_of[j]);
  x->tmp = hy_malloc("MPI staging buffer", stage > 0 ? stage : 1, 3 * sizeof(double));
  x->cnt = hy_malloc("MPI counts", (size_t)x->csize, sizeof(int));
  x->dsp = hy_malloc("MPI displacements", (size_t)x->csize, sizeof(int));
}

static void xfer_free(struct xfer *x) {
  hy_free(x->tmp);
  hy_free(x->cnt);
  hy_free(x->dsp);
  x->tmp = NULL;
  x->cnt = x->dsp = NULL;
}

/* Release a datatype of ours; a failure here changes no result. */
static void type_free(MPI_Datatype *t) {
  if (*t != MPI_DATATYPE_NULL) {
    int rc = MPI_Type_free(t);
    (void)rc;
  }
}

/* -------------------------------------------------------------------- read */

/* Scatter the set `all` (significant on rank 0 only; rc is rank 0's read
 * status) in contiguous near-equal chunks into p. ctx names the source in
 * messages. */
static int scatter_set(MPI_Comm comm, int rc, struct hy_part *all, double *time, struct hy_part *p, const char *ctx,
                       struct hy_err *err) {
  MPI_Comm c;
  MPI_Datatype vec3 = MPI_DATATYPE_NULL;
  int rank, size;
  hy_part_resize(p, 0);
  if (comm_open(comm, &c, &rank, &size, ctx, err) != 0) return -1;
  struct xfer x = {.c = c, .rank = rank, .csize = size, .ctx = ctx};
  size_t *n_of = NULL, *off_of = NULL;
  double t = time ? *time : 0.0;
  if (agree(c, rank, size, rc, ctx, err) != 0) goto fail;

  uint64_t n64 = rank == 0 ? all->n : 0;
  MPI_TRY(MPI_Bcast(&n64, 1, MPI_UINT64_T, 0, c), ctx, "MPI_Bcast (particle count)");
  MPI_TRY(MPI_Bcast(&t, 1, MPI_DOUBLE, 0, c), ctx, "MPI_Bcast (time)");
  n_of = hy_malloc("IC counts per rank", (size_t)size, sizeof(size_t));
  off_of = hy_malloc("IC offsets per rank", (size_t)size, sizeof(size_t));
  size_t n = (size_t)n64, q = n / (size_t)size, rem = n % (size_t)size, off = 0;
  for (int j = 0; j < size; j++) {
    n_of[j] = q + ((size_t)j < rem ? 1 : 0);
    off_of[j] = off;
    off += n_of[j];
  }
  x.n_of = n_of;
  x.off_of = off_of;
  x.my_n = n_of[rank];
  x.chunk = chunk_size(size);
  x.rounds = (q + (rem ? 1 : 0) + x.chunk - 1) / x.chunk;
  hy_part_resize(p, x.my_n);
  xfer_alloc(&x);
  MPI_TRY(MPI_Type_contiguous(3, MPI_DOUBLE, &vec3), ctx, "MPI_Type_contiguous");
  MPI_TRY(MPI_Type_commit(&vec3), ctx, "MPI_Type_commit");
  rc = xfer_field(&x, 1, p->pos, all->pos, 3 * sizeof(double), vec3, "MPI_Scatterv (positions)", err);
  if (rc == 0)
    rc = xfer_field(&x, 1, p->vel, all->vel, 3 * sizeof(double), vec3, "MPI_Scatterv (velocities)", err);
  if (rc == 0)
    rc = xfer_field(&x, 1, p->mass, all->mass, sizeof(double), MPI_DOUBLE, "MPI_Scatterv (masses)", err);
  if (rc == 0)
    rc = xfer_field(&x, 1, p->id, all->id, sizeof(uint64_t), MPI_UINT64_T, "MPI_Scatterv (IDs)", err);
  if (rc == 0)
    rc = xfer_field(&x, 1, p->type, all->type, sizeof(uint8_t), MPI_UINT8_T, "MPI_Scatterv (types)", err);
  xfer_free(&x);
  if (rc != 0) goto fail;
  type_free(&vec3);
  hy_free(n_of);
  hy_free(off_of);
  comm_close(&c);
  if (time) *time = t;
  return 0;
mpi_error:
fail:
  type_free(&vec3);
  if (x.tmp) xfer_free(&x);
  hy_free(n_of);
  hy_free(off_of);
  hy_part_resize(p, 0);
  comm_close(&c);
  return -1;
}

int hy_io_read_ic_mpi(MPI_Comm comm, const char *path, enum hy_ic_format fmt, struct hy_part *p,
                      double *time, struct hy_err *err) {
  struct hy_part all;
  hy_part_init(&all);
  double t = 0.0;
  int rank = 0, rc = 0;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS) return hy_err_set(err, "%s: MPI_Comm_rank failed", path);
  if (rank == 0) rc = hy_io_read_ic(path, fmt, &all, &t, err);
  rc = scatter_set(comm, rc, &all, &t, p, path, err);
  hy_part_free(&all);
  if (rc == 0 && time) *time = t;
  return rc;
}

int hy_io_scatter_mpi(MPI_Comm comm, struct hy_part *all, struct hy_part *p, struct hy_err *err) {
  return scatter_set(comm, 0, all, NULL, p, "initial conditions", err);
}

int hy_io_snapshot_name(char *buf, size_t size, const char *dir, int snapnum, int nfiles,
                        int file) {
  int n = nfiles > 1 ? snprintf(buf, size, "%s/snapshot_%03d.%d.hdf5", dir, snapnum, file)
                     : snprintf(buf, size, "%s/snapshot_%03d.hdf5", dir, snapnum);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

int hy_io_write_snapshot_mpi(MPI_Comm comm, const char *dir, int snapnum, const struct hy_part *p,
                             const struct hy_snap_info *info, int nfiles, struct hy_err *err) {
  MPI_Comm c, g = MPI_COMM_NULL;
  MPI_Datatype vec3 = MPI_DATATYPE_NULL;
  int rank, size, grank = 0, gsize = 1, rc = 0, written = 0;
  size_t plen = strlen(dir) + 64;
  char *path = hy_malloc("snapshot name", plen, 1);
  size_t *n_of = NULL, *off_of = NULL;
  uint64_t *n_all = NULL;
  struct hy_part all;
  hy_part_init(&all);
  struct xfer x = {.ctx = dir};
  if (comm_open(comm, &c, &rank, &size, dir, err) != 0) {
    hy_free(path);
    return -1;
  }

  /* Arguments: the same everywhere and in range. */
  int nf[2] = {nfiles, -nfiles}, nf_min[2] = {0, 0};
  MPI_TRY(MPI_Allreduce(nf, nf_min, 2, MPI_INT, MPI_MIN, c), dir, "MPI_Allreduce (file count)");
  if (nf_min[0] != -nf_min[1])
    rc = hy_err_set(err, "%s: snapshot %d: NumFilesPerSnapshot differs between ranks (%d to %d)",
                    dir, snapnum, nf_min[0], -nf_min[1]);
  else if (nfiles < 1 || nfiles > size)
    rc = hy_err_set(err,
                    "%s: snapshot %d: NumFilesPerSnapshot = %d: must be between 1 and the number "
                    "of MPI ranks (%d)",
                    dir, snapnum, nfiles, size);
  else if (snapnum < 0)
    rc = hy_err_set(err, "%s: snapshot number %d is negative", dir, snapnum);
  const int group = rc == 0 ? (int)((long long)rank * nfiles / size) : 0;
  if (rc == 0 && hy_io_snapshot_name(path, plen, dir, snapnum, nfiles, group) != 0)
    rc = hy_err_set(err, "%s: snapshot file name too long", dir); /* cannot happen: plen */

  /* Per-type counts of this rank, of the whole snapshot. */
  uint64_t mine[HY_NTYPES] = {0}, total[HY_NTYPES] = {0};
  for (size_t i = 0; i < p->n && rc == 0; i++) {
    if (p->type[i] >= HY_NTYPES)
      rc = hy_err_set(err, "%s: rank %d: particle %zu (ID %llu) has type %u; Gadget types are 0..5",
                      path, rank, i, (unsigned long long)p->id[i], (unsigned)p->type[i]);
    else
      mine[p->type[i]]++;
  }
  if (agree(c, rank, size, rc, dir, err) != 0) goto fail;
  MPI_TRY(MPI_Allreduce(mine, total, HY_NTYPES, MPI_UINT64_T, MPI_SUM, c), path,
          "MPI_Allreduce (particle counts)");
  /* every file's header carries the extent of the whole snapshot */
  double ext[6], ext_all[6];
  hy_io_extent(p, ext);
  for (int d = 3; d < 6; d++) ext[d] = -ext[d];
  MPI_TRY(MPI_Allreduce(ext, ext_all, 6, MPI_DOUBLE, MPI_MIN, c), path, "MPI_Allreduce (extent)");
  for (int d = 3; d < 6; d++) ext_all[d] = -ext_all[d];

  /* The group of this rank, its counts and the leader's layout. */
  MPI_TRY(MPI_Comm_split(c, group, rank, &g), path, "MPI_Comm_split");
  MPI_TRY(MPI_Comm_rank(g, &grank), path, "MPI_Comm_rank (group)");
  MPI_TRY(MPI_Comm_size(g, &gsize), path, "MPI_Comm_size (group)");
  uint64_t my_n = p->n, max_n = 0;
  n_all = hy_malloc("group counts", (size_t)gsize, sizeof(uint64_t));
  MPI_TRY(MPI_Gather(&my_n, 1, MPI_UINT64_T, n_all, 1, MPI_UINT64_T, 0, g), path,
          "MPI_Gather (counts)");
  MPI_TRY(MPI_Allreduce(&my_n, &max_n, 1, MPI_UINT64_T, MPI_MAX, g), path,
          "MPI_Allreduce (largest count)");
  n_of = hy_malloc("group counts", (size_t)gsize, sizeof(size_t));
  off_of = hy_malloc("group offsets", (size_t)gsize, sizeof(size_t));
  size_t n_file = 0;
  for (int j = 0; j < gsize; j++) {
    n_of[j] = grank == 0 ? (size_t)n_all[j] : 0;
    off_of[j] = n_file;
    n_file += n_of[j];
  }
  if (grank == 0) hy_part_resize(&all, n_file);
  x = (struct xfer){.c = g, .rank = grank, .csize = gsize, .n_of = n_of, .off_of = off_of,
                    .my_n = p->n, .chunk = chunk_size(gsize), .ctx = path};
  x.rounds = ((size_t)max_n + x.chunk - 1) / x.chunk;
  xfer_alloc(&x);
  MPI_TRY(MPI_Type_contiguous(3, MPI_DOUBLE, &vec3), path, "MPI_Type_contiguous");
  MPI_TRY(MPI_Type_commit(&vec3), path, "MPI_Type_commit");
  rc = xfer_field(&x, 0, p->pos, all.pos, 3 * sizeof(double), vec3, "MPI_Gatherv (positions)", err);
  if (rc == 0)
    rc = xfer_field(&x, 0, p->vel, all.vel, 3 * sizeof(double), vec3, "MPI_Gatherv (velocities)",
                    err);
  if (rc == 0)
    rc = xfer_field(&x, 0, p->mass, all.mass, sizeof(double), MPI_DOUBLE, "MPI_Gatherv (masses)",
                    err);
  if (rc == 0)
    rc = xfer_field(&x, 0, p->id, all.id, sizeof(uint64_t), MPI_UINT64_T, "MPI_Gatherv (IDs)", err);
  if (rc == 0)
    rc = xfer_field(&x, 0, p->type, all.type, sizeof(uint8_t), MPI_UINT8_T, "MPI_Gatherv (types)",
                    err);
  if (rc == 0 && (info->fields & HY_FIELD_ACC))
    rc = xfer_field(&x, 0, p->acc, all.acc, 3 * sizeof(double), vec3,
                    "MPI_Gatherv (accelerations)", err);
  if (rc == 0 && (info->fields & HY_FIELD_POT))
    rc = xfer_field(&x, 0, p->pot, all.pot, sizeof(double), MPI_DOUBLE, "MPI_Gatherv (potentials)",
                    err);
  if (rc != 0) goto fail;

  /* The leaders write, then everybody learns whether every file made it. */
  if (grank == 0) {
    struct hy_snap_info fi = *info;
    fi.num_files = nfiles > 1 ? nfiles : 0;
    fi.has_extent = 1;
    memcpy(fi.extent, ext_all, sizeof fi.extent);
    for (int t = 0; t < HY_NTYPES; t++) fi.npart_total[t] = nfiles > 1 ? total[t] : 0;
    rc = hy_io_write_hdf5(path, &all, &fi, err);
    written = rc == 0;
  }
  if (agree(c, rank, size, rc, dir, err) != 0) {
    /* Some file failed: take back ours so that no partial set remains. */
    if (written && unlink(path) != 0 && errno != ENOENT)
      hy_warn("%s: cannot remove the file of a failed snapshot: %s", path, strerror(errno));
    written = 0;
    int code = MPI_Barrier(c);
    (void)code; /* the failure is already being reported */
    goto fail;
  }
  type_free(&vec3);
  xfer_free(&x);
  hy_free(n_of);
  hy_free(off_of);
  hy_free(n_all);
  hy_free(path);
  hy_part_free(&all);
  comm_close(&g);
  comm_close(&c);
  return 0;
mpi_error:
fail:
  type_free(&vec3);
  if (x.tmp) xfer_free(&x);
  hy_free(n_of);
  hy_free(off_of);
  hy_free(n_all);
  hy_free(path);
  hy_part_free(&all);
  comm_close(&g);
  comm_close(&c);
  return -1;
}
