/* SPDX-License-Identifier: GPL-3.0-or-later
 * io_common.c: the format-independent half of io.h. Owns format names and
 * detection from a file's first bytes, the dispatch of hy_io_read_ic to the
 * HDF5, Gadget and tipsy readers plus the checks every set of initial conditions
 * must pass (N > 0, finite values, positive masses, unique IDs), and durable
 * atomic publication (temporary name, fsync, rename, fsync of the directory). It
 * parses no format itself and must never exit: every failure is a -1 with a
 * one-line message in struct hy_err. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "alloc.h"
#include "io.h"
#include "io_internal.h"

/* ------------------------------------------------------------ format names */

static const struct {
  const char *name;
  enum hy_ic_format fmt;
} format_names[] = {
    {"auto", HY_FMT_AUTO},
    {"hdf5", HY_FMT_HDF5},
    {"gadget1", HY_FMT_GADGET1},
    {"gadget2", HY_FMT_GADGET2},
    {"tipsy", HY_FMT_TIPSY},
};

int hy_io_format_parse(const char *name, enum hy_ic_format *out) {
  if (!name) return -1;
  for (size_t i = 0; i < sizeof format_names / sizeof format_names[0]; i++) {
    if (strcmp(name, format_names[i].name) == 0) {
      *out = format_names[i].fmt;
      return 0;
    }
  }
  return -1;
}

const char *hy_io_format_name(enum hy_ic_format f) {
  for (size_t i = 0; i < sizeof format_names / sizeof format_names[0]; i++)
    if (format_names[i].fmt == f) return format_names[i].name;
  return "unknown";
}

/* -------------------------------------------------------- format detection */

static uint32_t u32_le(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint32_t u32_be(const unsigned char *b) {
  return (uint32_t)b[3] | (uint32_t)b[2] << 8 | (uint32_t)b[1] << 16 | (uint32_t)b[0] << 24;
}

/* Enough for the HDF5 signature, the tipsy header and the end marker of a
 * Gadget-1 header record (bytes 260..263). */
#define DETECT_BYTES 264

int hy_io_detect_format(const char *path, enum hy_ic_format *out, struct hy_err *err) {
  static const unsigned char hdf5_sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  FILE *f = fopen(path, "rb");
  if (!f) return hy_err_set(err, "%s: cannot open: %s", path, strerror(errno));
  unsigned char buf[DETECT_BYTES];
  struct stat st;
  int read_errno = 0;
  size_t got = 0;
  if (fstat(fileno(f), &st) != 0) {
    read_errno = errno;
  } else {
    got = fread(buf, 1, sizeof buf, f);
    if (got < sizeof buf && ferror(f)) read_errno = errno ? errno : EIO;
  }
  if (fclose(f) != 0 && !read_errno) read_errno = errno;
  if (read_errno) return hy_err_set(err, "%s: cannot read: %s", path, strerror(read_errno));
  if (got == 0) return hy_err_set(err, "%s: empty file (0 bytes)", path);

  if (got >= sizeof hdf5_sig && memcmp(buf, hdf5_sig, sizeof hdf5_sig) == 0) {
    *out = HY_FMT_HDF5;
    return 0;
  }
  /* A tipsy file starts with its time, whose bytes can happen to look like a
   * Gadget marker; a Gadget file whose first record is closed by its end
   * marker stays Gadget, as it always was. */
  int tipsy_probe = hy_io_tipsy_probe(buf, got, (long long)st.st_size), tipsy = tipsy_probe == 2;
  if (got >= 4) {
    uint32_t le = u32_le(buf), be = u32_be(buf);
    if (le == 256 || be == 256) {
      int closed = got >= 264 && (le == 256 ? u32_le(buf + 260) : u32_be(buf + 260)) == 256;
      *out = tipsy && !closed ? HY_FMT_TIPSY : HY_FMT_GADGET1;
      return 0;
    }
    if ((le == 8 || be == 8) && got >= 8 && memcmp(buf + 4, "HEAD", 4) == 0) {
      int closed = got >= 16 && (le == 8 ? u32_le(buf + 12) : u32_be(buf + 12)) == 8;
      *out = tipsy && !closed ? HY_FMT_TIPSY : HY_FMT_GADGET2;
      return 0;
    }
  }
  /* ndim 3 alone: a damaged tipsy file, whose reader says what is wrong */
  if (tipsy_probe > 0) {
    *out = HY_FMT_TIPSY;
    return 0;
  }
  return hy_err_set(err, "%s: unrecognised file format (not HDF5, Gadget-1, Gadget-2 or tipsy)", path);
}

/* ------------------------------------------------------ reading + checking */

/* The first ID that p holds twice, with both indices: 0 if all differ.
 * IDs are sorted by an LSD radix sort (8-bit digits, digits in which all IDs
 * agree skipped: IDs 1..N take log256(N) passes); the indices are looked up
 * only when a duplicate exists. */
static int find_duplicate_id(const struct hy_part *p, uint64_t *dup, size_t *first, size_t *second) {
  size_t n = p->n;
  if (n < 2) return 0;
  uint64_t *a = hy_malloc("ID check", n, sizeof(uint64_t)), *b = hy_malloc("ID check", n, sizeof(uint64_t));
  memcpy(a, p->id, n * sizeof(uint64_t));
  uint64_t and_ = ~(uint64_t)0, or_ = 0;
  for (size_t i = 0; i < n; i++) {
    and_ &= a[i];
    or_ |= a[i];
  }
  for (int shift = 0; shift < 64; shift += 8) {
    if ((((and_ ^ or_) >> shift) & 0xff) == 0) continue;
    size_t cnt[257] = {0};
    for (size_t i = 0; i < n; i++) cnt[((a[i] >> shift) & 0xff) + 1]++;
    for (int d = 0; d < 256; d++) cnt[d + 1] += cnt[d];
    for (size_t i = 0; i < n; i++) b[cnt[(a[i] >> shift) & 0xff]++] = a[i];
    uint64_t *t = a;
    a = b;
    b = t;
  }
  int found = 0;
  for (size_t i = 1; i < n && !found; i++)
    if (a[i] == a[i - 1]) {
      *dup = a[i];
      found = 1;
    }
  hy_free(a);
  hy_free(b);
  if (!found) return 0;
  int k = 0;
  for (size_t i = 0; i < n && k < 2; i++)
    if (p->id[i] == *dup) *(k++ == 0 ? first : second) = i;
  return 1;
}

/* Physical sanity of freshly read initial conditions; message names the file,
 * the particle index in p and its ID. */
static int validate(const char *path, const struct hy_part *p, double time, struct hy_err *err) {
  if (p->n == 0) return hy_err_set(err, "%s: no particles (N = 0)", path);
  if (!isfinite(time)) return hy_err_set(err, "%s: header time is not finite (%g)", path, time);
  for (size_t i = 0; i < p->n; i++) {
    const double *x = p->pos + 3 * i, *v = p->vel + 3 * i;
    unsigned long long id = (unsigned long long)p->id[i];
    if (!isfinite(x[0]) || !isfinite(x[1]) || !isfinite(x[2]))
      return hy_err_set(err, "%s: particle ID %llu (index %zu): non-finite position (%g, %g, %g)",
                        path, id, i, x[0], x[1], x[2]);
    if (!isfinite(v[0]) || !isfinite(v[1]) || !isfinite(v[2]))
      return hy_err_set(err, "%s: particle ID %llu (index %zu): non-finite velocity (%g, %g, %g)",
                        path, id, i, v[0], v[1], v[2]);
    if (!isfinite(p->mass[i]))
      return hy_err_set(err, "%s: particle ID %llu (index %zu): non-finite mass %g", path, id, i,
                        p->mass[i]);
    if (p->mass[i] < 0.0)
      return hy_err_set(err, "%s: particle ID %llu (index %zu): negative mass %g", path, id, i,
                        p->mass[i]);
    if (!(p->mass[i] > 0.0))
      return hy_err_set(err, "%s: particle ID %llu (index %zu): zero mass", path, id, i);
  }
  /* IDs name particles in snapshots, in messages and in analysis tools that
   * follow them between snapshots (Gadget also refuses repeated IDs) */
  uint64_t dup = 0;
  size_t i1 = 0, i2 = 0;
  if (find_duplicate_id(p, &dup, &i1, &i2))
    return hy_err_set(err, "%s: particle ID %llu is used twice (indices %zu and %zu); IDs must be unique", path,
                      (unsigned long long)dup, i1, i2);
  return 0;
}

int hy_io_read_ic(const char *path, enum hy_ic_format fmt, struct hy_part *p, double *time,
                  struct hy_err *err) {
  double t = 0.0;
  int rc = -1;
  hy_part_resize(p, 0);
  char *base = fmt == HY_FMT_AUTO || fmt == HY_FMT_HDF5 ? hy_io_multifile_base(path) : NULL;
  if (base) {
    rc = hy_io_read_hdf5_set(base, p, &t, err);
    hy_free(base);
    if (rc == 0) rc = validate(path, p, t, err);
    goto out;
  }
  if (fmt == HY_FMT_AUTO) {
    if (hy_io_detect_format(path, &fmt, err) != 0) goto out;
  } else {
    /* A named format still deserves an errno-based message for a missing file. */
    FILE *f = fopen(path, "rb");
    if (!f) {
      hy_err_set(err, "%s: cannot open: %s", path, strerror(errno));
      goto out;
    }
    if (fclose(f) != 0) {
      hy_err_set(err, "%s: cannot close: %s", path, strerror(errno));
      goto out;
    }
  }
  switch (fmt) {
    case HY_FMT_HDF5: rc = hy_io_read_hdf5(path, p, &t, err); break;
    case HY_FMT_GADGET1: rc = hy_io_read_gadget(path, 1, p, &t, err); break;
    case HY_FMT_GADGET2: rc = hy_io_read_gadget(path, 2, p, &t, err); break;
    case HY_FMT_TIPSY: rc = hy_io_read_tipsy(path, p, &t, err); break;
    default: hy_err_set(err, "%s: invalid input format code %d", path, (int)fmt); break;
  }
  if (rc == 0) rc = validate(path, p, t, err);
out:
  if (rc != 0) {
    hy_part_resize(p, 0);
    return -1;
  }
  /* Fields the ICs do not carry start at zero, whatever p held before. */
  memset(p->acc, 0, 3 * p->n * sizeof(double));
  memset(p->acc_w, 0, 3 * p->n * sizeof(double));
  memset(p->pot, 0, p->n * sizeof(double));
  if (time) *time = t;
  return 0;
}

/* ----------------------------------------------------------- shared helpers */

char *hy_io_multifile_base(const char *path) {
  static const char suffix[] = ".0.hdf5";
  const size_t ls = sizeof suffix - 1, len = strlen(path);
  if (len > ls && strcmp(path + len - ls, suffix) == 0) {
    char *base = hy_malloc("multi-file snapshot base", len - ls + 1, 1);
    memcpy(base, path, len - ls);
    base[len - ls] = '\0';
    return base;
  }
  struct stat st;
  if (stat(path, &st) == 0 || errno != ENOENT) return NULL;
  char *first = hy_malloc("multi-file snapshot name", len + ls + 1, 1);
  memcpy(first, path, len);
  memcpy(first + len, suffix, ls + 1);
  int exists = stat(first, &st) == 0;
  hy_free(first);
  if (!exists) return NULL;
  char *base = hy_malloc("multi-file snapshot base", len + 1, 1);
  memcpy(base, path, len + 1);
  return base;
}

size_t *hy_io_type_order(const char *path, const struct hy_part *p, uint64_t counts[6],
                         struct hy_err *err) {
  size_t start[HY_NTYPES];
  for (int t = 0; t < HY_NTYPES; t++) counts[t] = 0;
  for (size_t i = 0; i < p->n; i++) {
    if (p->type[i] >= HY_NTYPES) {
      hy_err_set(err, "%s: particle %zu (ID %llu) has type %u; Gadget types are 0..5", path, i,
                 (unsigned long long)p->id[i], (unsigned)p->type[i]);
      return NULL;
    }
    counts[p->type[i]]++;
  }
  size_t s = 0;
  for (int t = 0; t < HY_NTYPES; t++) {
    start[t] = s;
    s += (size_t)counts[t];
  }
  size_t *order = hy_malloc("particle order by type", p->n, sizeof(size_t));
  for (size_t i = 0; i < p->n; i++) order[start[p->type[i]]++] = i;
  return order;
}

size_t hy_io_extent(const struct hy_part *p, double ext[6]) {
  size_t n = 0;
  for (int d = 0; d < 3; d++) {
    ext[d] = INFINITY;
    ext[3 + d] = -INFINITY;
  }
  for (size_t i = 0; i < p->n; i++) {
    const double *x = p->pos + 3 * i;
    if (!isfinite(x[0]) || !isfinite(x[1]) || !isfinite(x[2])) continue; /* an emergency snapshot's */
    for (int d = 0; d < 3; d++) {
      if (x[d] < ext[d]) ext[d] = x[d];
      if (x[d] > ext[3 + d]) ext[3 + d] = x[d];
    }
    n++;
  }
  return n;
}

void hy_io_discard_tmp(const char *tmp) {
  /* The write already failed and the caller's message explains why; a
   * leftover temporary (unlink failing) is all that can still go wrong. */
  int rc = unlink(tmp);
  (void)rc;
}

int hy_io_finish_tmp(FILE *f, const char *path, const char *tmp, int failed, struct hy_err *err) {
  if (fclose(f) != 0 && !failed) {
    hy_err_set(err, "%s: cannot close %s: %s", path, tmp, strerror(errno));
    failed = 1;
  }
  if (failed) {
    hy_io_discard_tmp(tmp);
    return -1;
  }
  return hy_io_publish(tmp, path, err);
}

/* close() on a path that is already failing: the first error is the one to
 * report, so this result is deliberately dropped. */
static void close_after_error(int fd) {
  int rc = close(fd);
  (void)rc;
}

/* ------------------------------------------------------ atomic publication */

int hy_io_tmpname(const char *path, char *buf, size_t size) {
  int n = snprintf(buf, size, "%s.tmp.%ld", path, (long)getpid());
  if (n < 0 || (size_t)n >= size) return -1;
  return 0;
}

char *hy_io_tmpname_alloc(const char *path) {
  size_t size = strlen(path) + 32; /* ".tmp." plus any pid */
  char *buf = hy_malloc("temporary file name", size, 1);
  if (hy_io_tmpname(path, buf, size) != 0) {
    /* cannot happen: 32 bytes hold ".tmp." and a 64-bit pid */
    buf[0] = '\0';
  }
  return buf;
}

static int fsync_retry(int fd) {
  int rc;
  do rc = fsync(fd);
  while (rc != 0 && errno == EINTR);
  return rc;
}

int hy_io_publish(const char *tmp, const char *path, struct hy_err *err) {
  int fd = open(tmp, O_RDONLY);
  if (fd < 0) {
    int e = errno;
    hy_io_discard_tmp(tmp);
    return hy_err_set(err, "%s: cannot open temporary %s to sync it: %s", path, tmp, strerror(e));
  }
  if (fsync_retry(fd) != 0) {
    int e = errno;
    close_after_error(fd);
    hy_io_discard_tmp(tmp);
    return hy_err_set(err, "%s: cannot sync temporary %s: %s", path, tmp, strerror(e));
  }
  if (close(fd) != 0) {
    int e = errno;
    hy_io_discard_tmp(tmp);
    return hy_err_set(err, "%s: cannot close temporary %s: %s", path, tmp, strerror(e));
  }
  if (rename(tmp, path) != 0) {
    int e = errno;
    hy_io_discard_tmp(tmp);
    return hy_err_set(err, "%s: cannot rename %s into place: %s", path, tmp, strerror(e));
  }

  /* Make the rename itself durable: sync the directory holding path. */
  size_t len = strlen(path);
  char *dir = hy_malloc("directory name", len + 2, 1);
  const char *slash = strrchr(path, '/');
  if (!slash) {
    strcpy(dir, ".");
  } else if (slash == path) {
    strcpy(dir, "/");
  } else {
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
  }
  int rc = 0;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  if (dfd < 0) {
    rc = hy_err_set(err, "%s: written, but cannot open directory %s to sync it: %s", path, dir,
                    strerror(errno));
  } else {
    /* EINVAL: the file system does not support syncing directories. */
    if (fsync_retry(dfd) != 0 && errno != EINVAL)
      rc = hy_err_set(err, "%s: written, but cannot sync directory %s: %s", path, dir,
                      strerror(errno));
    if (close(dfd) != 0 && rc == 0)
      rc = hy_err_set(err, "%s: written, but cannot close directory %s: %s", path, dir,
                      strerror(errno));
  }
  hy_free(dir);
  return rc;
}

int hy_io_write_text_atomic(const char *path, const char *text, struct hy_err *err) {
  char *tmp = hy_io_tmpname_alloc(path);
  int rc = -1;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd < 0) {
    hy_err_set(err, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    goto done;
  }
  const char *ptr = text;
  size_t left = strlen(text);
  while (left > 0) {
    ssize_t w = write(fd, ptr, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close_after_error(fd);
      hy_io_discard_tmp(tmp);
      hy_err_set(err, "%s: cannot write %s: %s", path, tmp, strerror(e));
      goto done;
    }
    ptr += w;
    left -= (size_t)w;
  }
  if (close(fd) != 0) {
    int e = errno;
    hy_io_discard_tmp(tmp);
    hy_err_set(err, "%s: cannot close %s: %s", path, tmp, strerror(e));
    goto done;
  }
  rc = hy_io_publish(tmp, path, err);
done:
  hy_free(tmp);
  return rc;
}
