/* SPDX-License-Identifier: GPL-3.0-or-later
 * io_tipsy.c: tipsy files, the format of Bonsai, ChaNGa, Gasoline and
 * pkdgrav3 (a 32-byte header, then gas, dark and star records of float32).
 * Owns the reader (standard big-endian "XDR" files and native little-endian
 * ones, told apart by ndim, which must be 3), the header check that format
 * detection shares, and the atomic big-endian writer. The file size must be
 * exactly what the header's counts need, so a truncated or padded file is
 * refused before anything is allocated. Softenings, potentials and the gas
 * and star fields are not read: hytree has one global softening and no gas.
 * Physical checks (finite values, positive masses) are hy_io_read_ic's. */
#include "config.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "io.h"
#include "io_internal.h"

#define HEADER_BYTES 32
#define GAS_BYTES 48  /* mass, pos[3], vel[3], rho, temp, hsmooth, metals, phi */
#define DARK_BYTES 36 /* mass, pos[3], vel[3], eps, phi */
#define STAR_BYTES 44 /* mass, pos[3], vel[3], metals, tform, eps, phi */
#define CHUNK 4096    /* records per read or write */

/* -------------------------------------------------------------- byte order */

/* Decoded byte by byte, so the host's own byte order never matters. */
static uint32_t get_u32(const unsigned char *b, int big) {
  if (big) return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
  return (uint32_t)b[3] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[1] << 8 | (uint32_t)b[0];
}

static double get_f32(const unsigned char *b, int big) {
  uint32_t x = get_u32(b, big);
  float f;
  memcpy(&f, &x, 4);
  return (double)f;
}

static double get_f64(const unsigned char *b, int big) {
  /* the high word comes first in big-endian files, last in little-endian ones */
  uint64_t x = big ? (uint64_t)get_u32(b, 1) << 32 | get_u32(b + 4, 1)
                   : (uint64_t)get_u32(b + 4, 0) << 32 | get_u32(b, 0);
  double d;
  memcpy(&d, &x, 8);
  return d;
}

static void put_u32_be(unsigned char *b, uint32_t x) {
  b[0] = (unsigned char)(x >> 24);
  b[1] = (unsigned char)(x >> 16);
  b[2] = (unsigned char)(x >> 8);
  b[3] = (unsigned char)x;
}

static void put_f64_be(unsigned char *b, double d) {
  uint64_t x;
  memcpy(&x, &d, 8);
  put_u32_be(b, (uint32_t)(x >> 32));
  put_u32_be(b + 4, (uint32_t)x);
}

/* The writer's words in its byte order: big-endian (standard tipsy) or
 * little-endian (the native files of Bonsai on x86 and ARM hosts). */
static void put_u32(unsigned char *b, uint32_t x, int big) {
  if (big) {
    put_u32_be(b, x);
    return;
  }
  for (int k = 0; k < 4; k++) b[k] = (unsigned char)(x >> (8 * k));
}

static void put_f32(unsigned char *b, float f, int big) {
  uint32_t x;
  memcpy(&x, &f, 4);
  put_u32(b, x, big);
}

static void put_f64(unsigned char *b, double d, int big) {
  if (big) {
    put_f64_be(b, d);
    return;
  }
  uint64_t x;
  memcpy(&x, &d, 8);
  put_u32(b, (uint32_t)x, 0);
  put_u32(b + 4, (uint32_t)(x >> 32), 0);
}

/* ------------------------------------------------------------------ header */

struct theader {
  double time;
  int32_t nbodies, ndim, nsph, ndark, nstar;
  int big;
};

/* ndim decides the byte order: 3 read big-endian is standard tipsy, 3 read
 * little-endian a native file of a little-endian machine (Bonsai's). */
static int decode_header(const unsigned char *b, struct theader *h) {
  if (get_u32(b + 12, 1) == 3)
    h->big = 1;
  else if (get_u32(b + 12, 0) == 3)
    h->big = 0;
  else
    return -1;
  h->time = get_f64(b, h->big);
  h->nbodies = (int32_t)get_u32(b + 8, h->big);
  h->ndim = 3;
  h->nsph = (int32_t)get_u32(b + 16, h->big);
  h->ndark = (int32_t)get_u32(b + 20, h->big);
  h->nstar = (int32_t)get_u32(b + 24, h->big);
  /* bytes 28..31 are padding (Bonsai keeps a version number there) */
  return 0;
}

/* Bytes the header's counts need (each count below 2^31: the sum stays
 * below 2^38, no overflow). */
static uint64_t expected_size(const struct theader *h) {
  return HEADER_BYTES + (uint64_t)h->nsph * GAS_BYTES + (uint64_t)h->ndark * DARK_BYTES +
         (uint64_t)h->nstar * STAR_BYTES;
}

static int counts_ok(const struct theader *h) {
  return h->nsph >= 0 && h->ndark >= 0 && h->nstar >= 0 &&
         (int64_t)h->nbodies == (int64_t)h->nsph + h->ndark + h->nstar;
}

int hy_io_tipsy_probe(const unsigned char *head, size_t got, long long file_size) {
  struct theader h;
  if (got < HEADER_BYTES || file_size < HEADER_BYTES || decode_header(head, &h) != 0) return 0;
  return counts_ok(&h) && expected_size(&h) == (uint64_t)file_size ? 2 : 1;
}

/* ------------------------------------------------------------------ reader */

/* Records of one kind: n of `bytes` each, into p from index `first`. */
static int read_records(FILE *f, const char *path, int big, int32_t n, size_t bytes, uint8_t type,
                        struct hy_part *p, size_t first, unsigned char *buf, struct hy_err *err) {
  const char *kind = type == 0 ? "gas" : type == 4 ? "star" : "dark";
  for (size_t done = 0; done < (size_t)n;) {
    size_t m = (size_t)n - done < CHUNK ? (size_t)n - done : CHUNK;
    if (fread(buf, bytes, m, f) != m) {
      if (ferror(f)) return hy_err_set(err, "%s: cannot read the %s records: %s", path, kind, strerror(errno));
      /* the size was checked, so only a file that shrank gets here */
      return hy_err_set(err, "%s: truncated file: the %s records end early", path, kind);
    }
    for (size_t k = 0; k < m; k++) {
      const unsigned char *r = buf + k * bytes;
      size_t i = first + done + k;
      p->mass[i] = get_f32(r, big);
      for (int c = 0; c < 3; c++) {
        p->pos[3 * i + c] = get_f32(r + 4 + 4 * c, big);
        p->vel[3 * i + c] = get_f32(r + 16 + 4 * c, big);
      }
      p->type[i] = type;
      p->id[i] = (uint64_t)i + 1; /* tipsy has no IDs: file order */
    }
    done += m;
  }
  return 0;
}

static int read_body(FILE *f, const char *path, long long size, struct hy_part *p, double *time,
                     struct hy_err *err) {
  unsigned char b[HEADER_BYTES];
  if (size < HEADER_BYTES)
    return hy_err_set(err, "%s: truncated file: %lld bytes, a tipsy header needs %d", path, size,
                      HEADER_BYTES);
  if (fread(b, 1, sizeof b, f) != sizeof b)
    return hy_err_set(err, "%s: cannot read the tipsy header: %s", path,
                      ferror(f) ? strerror(errno) : "file ended early");
  struct theader h;
  if (decode_header(b, &h) != 0) {
    uint32_t be = get_u32(b + 12, 1), le = get_u32(b + 12, 0);
    if (be <= 16 || le <= 16)
      return hy_err_set(err, "%s: tipsy header: ndim = %lu; only 3-dimensional files are supported", path,
                        (unsigned long)(be <= 16 ? be : le));
    return hy_err_set(err, "%s: not a tipsy file: ndim (bytes 12-15: %02x %02x %02x %02x) is 3 in neither byte order",
                      path, b[12], b[13], b[14], b[15]);
  }
  if (h.nsph < 0 || h.ndark < 0 || h.nstar < 0)
    return hy_err_set(err, "%s: tipsy header: negative particle count (nsph %ld, ndark %ld, nstar %ld)", path,
                      (long)h.nsph, (long)h.ndark, (long)h.nstar);
  if (!counts_ok(&h))
    return hy_err_set(err, "%s: tipsy header: nbodies = %ld but nsph + ndark + nstar = %lld", path,
                      (long)h.nbodies, (long long)h.nsph + h.ndark + h.nstar);
  uint64_t need = expected_size(&h);
  if (need != (uint64_t)size)
    return hy_err_set(err, "%s: %s: %lld bytes, but the tipsy header's counts (nsph %ld, ndark %ld, nstar %ld) "
                      "need %llu", path, (uint64_t)size < need ? "truncated file" : "wrong size", size,
                      (long)h.nsph, (long)h.ndark, (long)h.nstar, (unsigned long long)need);
  *time = h.time;
  /* the counts are backed by the file's bytes, so this allocation is bounded by it */
  size_t n = (size_t)h.nbodies;
  hy_part_resize(p, n);
  if (n == 0) return 0; /* hy_io_read_ic reports "no particles" */
  unsigned char *buf = hy_malloc("tipsy records", CHUNK, GAS_BYTES);
  int rc = read_records(f, path, h.big, h.nsph, GAS_BYTES, 0, p, 0, buf, err);
  if (rc == 0) rc = read_records(f, path, h.big, h.ndark, DARK_BYTES, 1, p, (size_t)h.nsph, buf, err);
  if (rc == 0)
    rc = read_records(f, path, h.big, h.nstar, STAR_BYTES, 4, p, (size_t)h.nsph + (size_t)h.ndark, buf, err);
  hy_free(buf);
  return rc;
}

int hy_io_read_tipsy(const char *path, struct hy_part *p, double *time, struct hy_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return hy_err_set(err, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0) {
    int e = errno;
    (void)fclose(f); /* read-only: the stat failure is what to report */
    return hy_err_set(err, "%s: cannot stat: %s", path, strerror(e));
  }
  int rc = read_body(f, path, (long long)st.st_size, p, time, err);
  if (fclose(f) != 0 && rc == 0) rc = hy_err_set(err, "%s: cannot close: %s", path, strerror(errno));
  return rc;
}

/* ------------------------------------------------------------------ writer */

/* v as a float32, refusing what float cannot hold (C leaves the conversion of
 * an out-of-range double undefined, so it is checked before the cast). */
static int to_f32(double v, float *out) {
  if (!isfinite(v) || fabs(v) > FLT_MAX) return -1;
  *out = (float)v;
  return 0;
}

struct tout {
  FILE *f;
  const char *path, *tmp;
  struct hy_err *err;
  int failed;
  int native; /* little-endian, IDs in phi */
};

static void put_bytes(struct tout *o, const unsigned char *b, size_t n) {
  if (o->failed || n == 0) return;
  if (fwrite(b, 1, n, o->f) != n) {
    hy_err_set(o->err, "%s: cannot write %s: %s", o->path, o->tmp, strerror(errno));
    o->failed = 1;
  }
}

/* The record of particle i of p as kind `type` (0 gas, 4 star, else dark)
 * into r; -1 with o->err set if a value does not fit a float32. */
static int put_record(struct tout *o, unsigned char *r, const struct hy_part *p, size_t i, float eps,
                      uint8_t type) {
  static const char *const what[7] = {"mass", "x", "y", "z", "vx", "vy", "vz"};
  float v[7];
  for (int c = 0; c < 7; c++) {
    double x = c == 0 ? p->mass[i] : c < 4 ? p->pos[3 * i + c - 1] : p->vel[3 * i + c - 4];
    if (to_f32(x, &v[c]) != 0)
      return hy_err_set(o->err, "%s: particle ID %llu (index %zu): %s = %g does not fit a 32-bit float", o->path,
                        (unsigned long long)p->id[i], i, what[c], x);
  }
  if (p->mass[i] > 0.0 && v[0] == 0.0f)
    return hy_err_set(o->err, "%s: particle ID %llu (index %zu): mass = %g is 0 as a 32-bit float", o->path,
                      (unsigned long long)p->id[i], i, p->mass[i]);
  const int big = !o->native;
  for (int c = 0; c < 7; c++) put_f32(r + 4 * c, v[c], big);
  /* the fields hytree does not have are 0; eps goes where each kind keeps it */
  size_t bytes = type == 0 ? GAS_BYTES : type == 4 ? STAR_BYTES : DARK_BYTES;
  memset(r + 28, 0, bytes - 28);
  size_t eps_at = type == 0 || type == 4 ? 36 : 28; /* gas hsmooth, star eps: word 9; dark eps: 7 */
  put_f32(r + eps_at, eps, big);
  if (o->native) { /* Bonsai's files: the particle ID as an int in phi, the last word */
    if (p->id[i] > (uint64_t)INT32_MAX)
      return hy_err_set(o->err, "%s: particle ID %llu (index %zu) does not fit the 32-bit ID of a native tipsy file",
                        o->path, (unsigned long long)p->id[i], i);
    put_u32(r + bytes - 4, (uint32_t)p->id[i], 0);
  }
  return 0;
}

int hy_io_write_tipsy(const char *path, const struct hy_part *p, double time, double softening, int native,
                      struct hy_err *err) {
  float eps;
  if (to_f32(softening, &eps) != 0 || softening < 0.0)
    return hy_err_set(err, "%s: softening %g is not a finite 32-bit float >= 0", path, softening);
  uint64_t counts[HY_NTYPES];
  size_t *order = hy_io_type_order(path, p, counts, err);
  if (!order) return -1;
  uint64_t nsph = counts[0], nstar = counts[4], ndark = p->n - nsph - nstar;
  if (p->n > INT32_MAX) {
    hy_free(order);
    return hy_err_set(err, "%s: %zu particles do not fit a tipsy header (at most %d)", path, p->n, INT32_MAX);
  }
  /* where each type starts in order[] (types ascending) */
  size_t start[HY_NTYPES + 1];
  start[0] = 0;
  for (int t = 0; t < HY_NTYPES; t++) start[t + 1] = start[t] + (size_t)counts[t];

  struct tout o = {NULL, path, NULL, err, 0, native != 0};
  const int big = !native;
  char *tmp = hy_io_tmpname_alloc(path);
  o.tmp = tmp;
  o.f = fopen(tmp, "wb");
  if (!o.f) {
    hy_err_set(err, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    hy_free(tmp);
    hy_free(order);
    return -1;
  }
  unsigned char head[HEADER_BYTES];
  put_f64(head, time, big);
  put_u32(head + 8, (uint32_t)p->n, big);
  put_u32(head + 12, 3, big);
  put_u32(head + 16, (uint32_t)nsph, big);
  put_u32(head + 20, (uint32_t)ndark, big);
  put_u32(head + 24, (uint32_t)nstar, big);
  put_u32(head + 28, 0, big);
  put_bytes(&o, head, sizeof head);

  /* gas (type 0), then dark (types 1, 2, 3, 5), then stars (type 4) */
  static const int seq[HY_NTYPES] = {0, 1, 2, 3, 5, 4};
  unsigned char *buf = hy_malloc("tipsy records", CHUNK, GAS_BYTES);
  for (int s = 0; s < HY_NTYPES && !o.failed; s++) {
    int t = seq[s];
    uint8_t kind = t == 0 ? 0 : t == 4 ? 4 : 1;
    size_t bytes = kind == 0 ? GAS_BYTES : kind == 4 ? STAR_BYTES : DARK_BYTES, fill = 0;
    for (size_t k = start[t]; k < start[t + 1] && !o.failed; k++) {
      if (put_record(&o, buf + fill * bytes, p, order[k], eps, kind) != 0) {
        o.failed = 1;
        break;
      }
      if (++fill == CHUNK || k + 1 == start[t + 1]) {
        put_bytes(&o, buf, fill * bytes);
        fill = 0;
      }
    }
  }
  hy_free(buf);
  hy_free(order);

  const int rc = hy_io_finish_tmp(o.f, path, tmp, o.failed, err);
  hy_free(tmp);
  return rc;
}
