/* SPDX-License-Identifier: GPL-3.0-or-later
 * restart.c: see restart.h. Files are native-endian (a marker in the header
 * refuses a file from a machine of the other byte order). */
#include "config.h"

#include "restart.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "alloc.h"
#include "io.h"
#include "io_internal.h"

#define MAGIC "HYRESTRT"
#define ENDIAN_MARK 0x01020304u

struct file_hdr {
  char magic[8];
  uint32_t format;
  uint32_t endian;
  char version[32];
  uint32_t rank, nranks;
  int64_t step;
  uint64_t payload_bytes;
  uint64_t checksum; /* FNV-1a 64 of the payload */
};

/* ------------------------------------------------------------ checksum */

struct sink {
  FILE *f;
  uint64_t h, bytes;
  int ok;
};

static void fnv(uint64_t *h, const void *buf, size_t n) {
  const unsigned char *b = buf;
  uint64_t x = *h;
  for (size_t i = 0; i < n; i++) {
    x ^= b[i];
    x *= 0x100000001b3ull;
  }
  *h = x;
}

static void put(struct sink *s, const void *buf, size_t n) {
  if (!s->ok || n == 0) return;
  if (fwrite(buf, 1, n, s->f) != n) s->ok = 0;
  fnv(&s->h, buf, n);
  s->bytes += n;
}

static int get(FILE *f, void *buf, size_t n, uint64_t *h) {
  if (n == 0) return 0;
  if (fread(buf, 1, n, f) != n) return -1;
  fnv(h, buf, n);
  return 0;
}

/* ------------------------------------------------------- collectives */

/* Every rank learns whether any failed; the lowest failing rank's message
 * reaches all. Returns 0 when none failed. */
static int agree(MPI_Comm comm, int rc, struct hy_err *err) {
  int rank, size;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS)
    return hy_err_set(err, "restart: MPI_Comm_rank/size failed");
  int mine = rc != 0 ? rank : INT_MAX, first = INT_MAX;
  if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
    return hy_err_set(err, "restart: MPI_Allreduce of the status failed");
  if (first == INT_MAX) return 0;
  if (MPI_Bcast(err->msg, (int)sizeof err->msg, MPI_CHAR, first, comm) != MPI_SUCCESS)
    return hy_err_set(err, "restart: MPI_Bcast of an error message failed");
  return -1;
}

static char *path_of(const char *outdir, const char *rest) {
  size_t n = strlen(outdir) + strlen(rest) + 2;
  char *s = hy_malloc("restart path", n, 1);
  snprintf(s, n, "%s/%s", outdir, rest);
  return s;
}

static int make_dir(const char *path, struct hy_err *err) {
  if (mkdir(path, 0777) != 0 && errno != EEXIST)
    return hy_err_set(err, "restart: cannot create %s: %s", path, strerror(errno));
  return 0;
}

/* The pointer file: "SLOT NRANKS STEP". */
static int read_current(const char *outdir, char *slot, int *nranks, long long *step, struct hy_err *err) {
  char *path = path_of(outdir, "restart/current");
  FILE *f = fopen(path, "r");
  int rc = 0;
  if (!f) {
    rc = hy_err_set(err, "restart: no restart set in %s (%s: %s)", outdir, path, strerror(errno));
  } else {
    if (fscanf(f, " %c %d %lld", slot, nranks, step) != 3 || (*slot != 'A' && *slot != 'B') || *nranks < 1)
      rc = hy_err_set(err, "restart: %s is not a restart pointer (expected 'A|B NRANKS STEP')", path);
    fclose(f);
  }
  hy_free(path);
  return rc;
}

/* --------------------------------------------------------------- write */

static int write_rank_file(const char *path, const struct hy_restart_state *st, int rank, int nranks,
                           const char *params, const void *blob, size_t blob_bytes, const struct hy_part *p,
                           struct hy_err *err) {
  char *tmp = hy_io_tmpname_alloc(path);
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    int e = errno;
    hy_free(tmp);
    return hy_err_set(err, "restart: cannot create %s: %s", path, strerror(e));
  }
  struct file_hdr h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, MAGIC, 8);
  h.format = HY_RESTART_FORMAT;
  h.endian = ENDIAN_MARK;
  snprintf(h.version, sizeof h.version, "%s", PACKAGE_VERSION);
  h.rank = (uint32_t)rank;
  h.nranks = (uint32_t)nranks;
  h.step = st->step;
  struct sink s = {.f = f, .h = 0xcbf29ce484222325ull, .ok = 1};
  if (fwrite(&h, sizeof h, 1, f) != 1) s.ok = 0;
  uint64_t len = strlen(params), bl = blob_bytes, n = p->n;
  put(&s, st, sizeof *st);
  put(&s, &len, sizeof len);
  put(&s, params, len);
  put(&s, &bl, sizeof bl);
  put(&s, blob, blob_bytes);
  put(&s, &n, sizeof n);
  put(&s, p->pos, 3 * n * sizeof(double));
  put(&s, p->vel, 3 * n * sizeof(double));
  put(&s, p->acc_w, 3 * n * sizeof(double));
  put(&s, p->acc, 3 * n * sizeof(double)); /* the relative criterion's sink scales come from it */
  put(&s, p->mass, n * sizeof(double));
  put(&s, p->id, n * sizeof(uint64_t));
  put(&s, p->type, n);
  h.payload_bytes = s.bytes;
  h.checksum = s.h;
  if (s.ok && (fseek(f, 0, SEEK_SET) != 0 || fwrite(&h, sizeof h, 1, f) != 1 || fflush(f) != 0)) s.ok = 0;
  int e = errno;
  if (fclose(f) != 0 && s.ok) {
    s.ok = 0;
    e = errno;
  }
  if (!s.ok) {
    hy_io_discard_tmp(tmp);
    hy_free(tmp);
    return hy_err_set(err, "restart: writing %s failed: %s", path, strerror(e));
  }
  int rc = hy_io_publish(tmp, path, err);
  hy_free(tmp);
  return rc;
}

int hy_restart_write(MPI_Comm comm, const char *outdir, const struct hy_restart_state *st, const char *params,
                     const void *blob, size_t blob_bytes, const struct hy_part *p, int kill_before_publish,
                     struct hy_err *err) {
  int rank, size;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS)
    return hy_err_set(err, "restart: MPI_Comm_rank/size failed");
  /* the slot the current set does not use */
  char slot = 'A';
  int rc = 0;
  if (rank == 0) {
    char cur;
    int nr;
    long long step;
    struct hy_err ignore;
    if (read_current(outdir, &cur, &nr, &step, &ignore) == 0 && cur == 'A') slot = 'B';
    char *dir = path_of(outdir, "restart");
    rc = make_dir(dir, err);
    hy_free(dir);
    char sub[16];
    snprintf(sub, sizeof sub, "restart/%c", slot);
    dir = path_of(outdir, sub);
    if (rc == 0) rc = make_dir(dir, err);
    hy_free(dir);
  }
  if (MPI_Bcast(&slot, 1, MPI_CHAR, 0, comm) != MPI_SUCCESS) return hy_err_set(err, "restart: MPI_Bcast failed");
  if (agree(comm, rc, err) != 0) return -1;
  char name[64];
  snprintf(name, sizeof name, "restart/%c/rank_%05d.bin", slot, rank);
  char *path = path_of(outdir, name);
  rc = write_rank_file(path, st, rank, size, params, blob, blob_bytes, p, err);
  hy_free(path);
  if (kill_before_publish) raise(SIGKILL); /* tests: die with the set half written */
  if (agree(comm, rc, err) != 0) return -1;
  /* every file is durable: publish the set */
  if (rank == 0) {
    char text[96];
    snprintf(text, sizeof text, "%c %d %lld\n", slot, size, (long long)st->step);
    char *cur = path_of(outdir, "restart/current");
    rc = hy_io_write_text_atomic(cur, text, err);
    hy_free(cur);
  }
  return agree(comm, rc, err);
}

/* ---------------------------------------------------------------- read */

static int read_rank_file(const char *path, int rank, int nranks, long long step, struct hy_restart_state *st,
                          char **params, void **blob, size_t *blob_bytes, struct hy_part *p, struct hy_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return hy_err_set(err, "restart: cannot open %s: %s", path, strerror(errno));
  struct file_hdr h;
  int rc = 0;
  uint64_t sum = 0xcbf29ce484222325ull, len = 0, bl = 0, n = 0;
  if (fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, MAGIC, 8) != 0) {
    rc = hy_err_set(err, "restart: %s is not a hytree restart file", path);
  } else if (h.endian != ENDIAN_MARK) {
    rc = hy_err_set(err, "restart: %s was written on a machine of the other byte order", path);
  } else if (h.format != HY_RESTART_FORMAT) {
    rc = hy_err_set(err, "restart: %s has format %u, this hytree reads format %d (written by hytree %.32s)", path,
                    h.format, HY_RESTART_FORMAT, h.version);
  } else if ((int)h.rank != rank || (int)h.nranks != nranks || h.step != step) {
    rc = hy_err_set(err, "restart: %s belongs to rank %u of %u at step %lld, expected rank %d of %d at step %lld",
                    path, h.rank, h.nranks, (long long)h.step, rank, nranks, step);
  }
  if (rc == 0 && (get(f, st, sizeof *st, &sum) || get(f, &len, sizeof len, &sum) || len > h.payload_bytes))
    rc = hy_err_set(err, "restart: %s is truncated", path);
  if (rc == 0) {
    *params = hy_malloc("restart parameters", (size_t)len + 1, 1);
    if (get(f, *params, (size_t)len, &sum) || get(f, &bl, sizeof bl, &sum) || bl > h.payload_bytes)
      rc = hy_err_set(err, "restart: %s is truncated", path);
    else
      (*params)[len] = '\0';
  }
  if (rc == 0) {
    *blob = hy_malloc("restart blob", (size_t)bl + 1, 1);
    *blob_bytes = (size_t)bl;
    if (get(f, *blob, (size_t)bl, &sum) || get(f, &n, sizeof n, &sum) || n > h.payload_bytes / 8)
      rc = hy_err_set(err, "restart: %s is truncated", path);
  }
  if (rc == 0) {
    hy_part_resize(p, (size_t)n);
    if (get(f, p->pos, 3 * n * sizeof(double), &sum) || get(f, p->vel, 3 * n * sizeof(double), &sum) ||
        get(f, p->acc_w, 3 * n * sizeof(double), &sum) || get(f, p->acc, 3 * n * sizeof(double), &sum) ||
        get(f, p->mass, n * sizeof(double), &sum) ||
        get(f, p->id, n * sizeof(uint64_t), &sum) || get(f, p->type, n, &sum))
      rc = hy_err_set(err, "restart: %s is truncated", path);
    else if (sum != h.checksum)
      rc = hy_err_set(err, "restart: %s is corrupt (checksum mismatch)", path);
  }
  fclose(f);
  return rc;
}

int hy_restart_read(MPI_Comm comm, const char *outdir, struct hy_restart_state *st, char **params, void **blob,
                    size_t *blob_bytes, struct hy_part *p, struct hy_err *err) {
  int rank, size;
  *params = NULL;
  *blob = NULL;
  *blob_bytes = 0;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS)
    return hy_err_set(err, "restart: MPI_Comm_rank/size failed");
  char slot = 'A';
  int nranks = 0, rc = 0;
  long long step = 0;
  if (rank == 0) {
    rc = read_current(outdir, &slot, &nranks, &step, err);
    if (rc == 0 && nranks != size)
      rc = hy_err_set(err, "restart: the set in %s/restart was written by %d MPI ranks; resume it on %d ranks",
                      outdir, nranks, nranks);
  }
  if (agree(comm, rc, err) != 0) return -1;
  if (MPI_Bcast(&slot, 1, MPI_CHAR, 0, comm) != MPI_SUCCESS || MPI_Bcast(&step, 1, MPI_LONG_LONG, 0, comm) != MPI_SUCCESS)
    return hy_err_set(err, "restart: MPI_Bcast failed");
  char name[64];
  snprintf(name, sizeof name, "restart/%c/rank_%05d.bin", slot, rank);
  char *path = path_of(outdir, name);
  rc = read_rank_file(path, rank, size, step, st, params, blob, blob_bytes, p, err);
  hy_free(path);
  rc = agree(comm, rc, err);
  if (rc == 0) { /* every file read: together they hold the count the state names */
    uint64_t n = p->n, tot = 0;
    if (MPI_Allreduce(&n, &tot, 1, MPI_UINT64_T, MPI_SUM, comm) != MPI_SUCCESS)
      rc = hy_err_set(err, "restart: MPI_Allreduce of the particle count failed");
    else if (tot != st->n_total)
      rc = hy_err_set(err, "restart: the files in %s/restart/%c hold %llu particles, the set was written with %llu",
                      outdir, slot, (unsigned long long)tot, (unsigned long long)st->n_total);
  }
  if (rc != 0) {
    hy_free(*params);
    hy_free(*blob);
    *params = NULL;
    *blob = NULL;
    hy_part_resize(p, 0);
    return -1;
  }
  return 0;
}
