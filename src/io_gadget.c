/* SPDX-License-Identifier: GPL-3.0-or-later
 * io_gadget.c: Gadget binary files, formats 1 and 2 (Fortran-style records
 * framed by 4-byte length markers). Owns the reader (either byte order,
 * detected from the first marker; float or double positions, velocities and
 * masses and 32- or 64-bit IDs, each decided from the block size; format-2
 * blocks found by their 4-character label, unknown blocks skipped) and the
 * atomic writer used by tests and `hytree ic`. Only the header, POS, VEL, ID
 * and MASS blocks are read; gas blocks (U, RHO, ...) are ignored. Every
 * record marker is checked and a short file is reported with the block that
 * does not fit; the particle arrays are allocated only once a block of the
 * right size shows that the header's counts fit in the file. Multi-file
 * snapshots are refused. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "io.h"
#include "io_internal.h"

#define HEADER_BYTES 256

/* ------------------------------------------------------------- byte order */

static uint32_t bswap32(uint32_t x) {
  return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

static uint64_t bswap64(uint64_t x) {
  return ((uint64_t)bswap32((uint32_t)x) << 32) | bswap32((uint32_t)(x >> 32));
}

static int host_is_big_endian(void) {
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 0;
}

static uint32_t get_u32(const unsigned char *b, int swap) {
  uint32_t x;
  memcpy(&x, b, 4);
  return swap ? bswap32(x) : x;
}

static uint64_t get_u64(const unsigned char *b, int swap) {
  uint64_t x;
  memcpy(&x, b, 8);
  return swap ? bswap64(x) : x;
}

static double get_f32(const unsigned char *b, int swap) {
  uint32_t x = get_u32(b, swap);
  float f;
  memcpy(&f, &x, 4);
  return (double)f;
}

static double get_f64(const unsigned char *b, int swap) {
  uint64_t x = get_u64(b, swap);
  double d;
  memcpy(&d, &x, 8);
  return d;
}

static void put_u32(unsigned char *b, uint32_t x, int swap) {
  if (swap) x = bswap32(x);
  memcpy(b, &x, 4);
}

static void put_u64(unsigned char *b, uint64_t x, int swap) {
  if (swap) x = bswap64(x);
  memcpy(b, &x, 8);
}

static void put_f32(unsigned char *b, double v, int swap) {
  float f = (float)v;
  uint32_t x;
  memcpy(&x, &f, 4);
  put_u32(b, x, swap);
}

static void put_f64(unsigned char *b, double v, int swap) {
  uint64_t x;
  memcpy(&x, &v, 8);
  put_u64(b, x, swap);
}

/* ------------------------------------------------------------------ reader */

struct gin {
  FILE *f;
  const char *path;
  struct hy_err *err;
  long long size, off; /* file size and read position in bytes */
  int swap;
};

static int read_bytes(struct gin *g, void *buf, size_t n, const char *block) {
  if (n > 0 && fread(buf, 1, n, g->f) != n) {
    if (ferror(g->f))
      return hy_err_set(g->err, "%s: cannot read %s block: %s", g->path, block, strerror(errno));
    return hy_err_set(g->err, "%s: truncated file: %s block ends early", g->path, block);
  }
  g->off += (long long)n;
  return 0;
}

/* Read one record (marker, payload, marker) into a fresh buffer. */
static int read_record(struct gin *g, const char *block, unsigned char **out, size_t *len) {
  unsigned char m[4];
  long long left = g->size - g->off;
  *out = NULL;
  if (left < 4)
    return hy_err_set(g->err, "%s: truncated file: %s block needs a 4-byte record marker, %lld left",
                      g->path, block, left);
  if (read_bytes(g, m, 4, block) != 0) return -1;
  uint32_t n = get_u32(m, g->swap);
  left -= 4;
  if ((long long)n + 4 > left)
    return hy_err_set(g->err, "%s: truncated file: %s block needs %llu bytes, %lld left", g->path,
                      block, (unsigned long long)n + 4, left);
  unsigned char *buf = hy_malloc("Gadget block", n > 0 ? n : 1, 1);
  if (read_bytes(g, buf, n, block) != 0 || read_bytes(g, m, 4, block) != 0) {
    hy_free(buf);
    return -1;
  }
  uint32_t e = get_u32(m, g->swap);
  if (e != n) {
    hy_free(buf);
    return hy_err_set(g->err,
                      "%s: corrupt %s block: record markers differ (%lu at the start, %lu at the end)",
                      g->path, block, (unsigned long)n, (unsigned long)e);
  }
  *out = buf;
  *len = n;
  return 0;
}

/* Format 2: the 8-byte label record before each block ("POS " + next size). */
static int read_label(struct gin *g, char name[5]) {
  unsigned char *buf;
  size_t len;
  if (read_record(g, "block label", &buf, &len) != 0) return -1;
  if (len != 8) {
    hy_free(buf);
    return hy_err_set(g->err, "%s: corrupt format-2 block label at byte %lld: record of %zu bytes, expected 8",
                      g->path, g->off, len);
  }
  memcpy(name, buf, 4);
  name[4] = '\0';
  hy_free(buf);
  /* Trim the blank padding of short labels ("ID  " -> "ID"). */
  for (int i = 3; i >= 0 && name[i] == ' '; i--) name[i] = '\0';
  return 0;
}

struct ghead {
  int32_t npart[HY_NTYPES];
  double mass[HY_NTYPES];
  double time;
  int32_t num_files;
};

static int parse_header(struct gin *g, const unsigned char *b, size_t len, struct ghead *h) {
  if (len != HEADER_BYTES)
    return hy_err_set(g->err, "%s: header block has %zu bytes, expected %d", g->path, len,
                      HEADER_BYTES);
  for (int t = 0; t < HY_NTYPES; t++) {
    h->npart[t] = (int32_t)get_u32(b + 4 * t, g->swap);
    h->mass[t] = get_f64(b + 24 + 8 * t, g->swap);
    if (h->npart[t] < 0)
      return hy_err_set(g->err, "%s: header: negative particle count %ld for type %d", g->path,
                        (long)h->npart[t], t);
  }
  h->time = get_f64(b + 72, g->swap);
  h->num_files = (int32_t)get_u32(b + 124, g->swap);
  if (h->num_files > 1)
    return hy_err_set(g->err, "%s: multi-file snapshots are not supported (num_files = %ld)",
                      g->path, (long)h->num_files);
  return 0;
}

/* Element width of a block holding n items of `per` components: 4 or 8. */
static int block_width(struct gin *g, const char *block, size_t len, size_t n, int per) {
  if (len == 4 * n * (size_t)per) return 4;
  if (len == 8 * n * (size_t)per) return 8;
  return hy_err_set(g->err, "%s: %s block has %zu bytes; expected %zu or %zu for %zu particles",
                    g->path, block, len, 4 * n * (size_t)per, 8 * n * (size_t)per, n);
}

/* The particles being read. Their arrays are allocated only once a POS, VEL
 * or ID block of the right size for all of them has been read, so that the
 * header's counts cannot make the reader allocate more than the file holds. */
struct gset {
  const struct ghead *h;
  size_t n, nmass;  /* particles; those whose mass comes from the MASS block */
  struct hy_part *p;
  int ready;        /* p holds n particles with their types and mass-table masses */
};

static void gset_ready(struct gset *s) {
  if (s->ready) return;
  hy_part_resize(s->p, s->n);
  size_t off = 0;
  for (int t = 0; t < HY_NTYPES; t++) {
    for (int32_t i = 0; i < s->h->npart[t]; i++) {
      s->p->type[off] = (uint8_t)t;
      s->p->mass[off++] = s->h->mass[t];
    }
  }
  s->ready = 1;
}

/* POS (vel == 0) or VEL (vel == 1). */
static int store_vec(struct gin *g, struct gset *s, const unsigned char *b, size_t len, int vel) {
  int w = block_width(g, vel ? "VEL" : "POS", len, s->n, 3);
  if (w < 0) return -1;
  gset_ready(s);
  double *out = vel ? s->p->vel : s->p->pos;
  for (size_t i = 0; i < 3 * s->n; i++)
    out[i] = w == 4 ? get_f32(b + 4 * i, g->swap) : get_f64(b + 8 * i, g->swap);
  return 0;
}

static int store_ids(struct gin *g, struct gset *s, const unsigned char *b, size_t len) {
  int w = block_width(g, "ID", len, s->n, 1);
  if (w < 0) return -1;
  gset_ready(s);
  for (size_t i = 0; i < s->n; i++)
    s->p->id[i] = w == 4 ? get_u32(b + 4 * i, g->swap) : get_u64(b + 8 * i, g->swap);
  return 0;
}

/* Needs s->ready (a POS, VEL or ID block read before). */
static int store_mass(struct gin *g, struct gset *s, const unsigned char *b, size_t len) {
  int w = block_width(g, "MASS", len, s->nmass, 1);
  if (w < 0) return -1;
  size_t k = 0, off = 0;
  for (int t = 0; t < HY_NTYPES; t++) {
    size_t n = (size_t)s->h->npart[t];
    if (s->h->mass[t] == 0.0)
      for (size_t i = 0; i < n; i++, k++)
        s->p->mass[off + i] = w == 4 ? get_f32(b + 4 * k, g->swap) : get_f64(b + 8 * k, g->swap);
    off += n;
  }
  return 0;
}

static int read_body(struct gin *g, int format, struct hy_part *p, double *time) {
  unsigned char first[8];
  size_t got = fread(first, 1, sizeof first, g->f);
  if (got < 4)
    return hy_err_set(g->err, "%s: not a Gadget format %d file (only %zu bytes)", g->path, format,
                      got);
  uint32_t le = first[0] | (uint32_t)first[1] << 8 | (uint32_t)first[2] << 16 |
                (uint32_t)first[3] << 24;
  uint32_t want = format == 1 ? HEADER_BYTES : 8;
  int file_big;
  if (le == want)
    file_big = 0;
  else if (bswap32(le) == want)
    file_big = 1;
  else
    return hy_err_set(g->err, "%s: not a Gadget format %d file (first record marker is %lu)",
                      g->path, format, (unsigned long)le);
  if (format == 2 && (got < 8 || memcmp(first + 4, "HEAD", 4) != 0))
    return hy_err_set(g->err, "%s: not a Gadget format 2 file (first block label is not HEAD)",
                      g->path);
  g->swap = file_big != host_is_big_endian();
  if (fseek(g->f, 0, SEEK_SET) != 0)
    return hy_err_set(g->err, "%s: cannot seek: %s", g->path, strerror(errno));
  g->off = 0;

  char label[5] = "HEAD";
  if (format == 2 && read_label(g, label) != 0) return -1;
  unsigned char *b;
  size_t len;
  if (read_record(g, "HEAD", &b, &len) != 0) return -1;
  struct ghead h;
  int rc = parse_header(g, b, len, &h);
  hy_free(b);
  if (rc != 0) return -1;
  *time = h.time;

  struct gset s = {&h, 0, 0, p, 0};
  for (int t = 0; t < HY_NTYPES; t++) {
    s.n += (size_t)h.npart[t];
    if (h.mass[t] == 0.0) s.nmass += (size_t)h.npart[t];
  }
  if (s.n == 0) {
    hy_part_resize(p, 0);
    return 0; /* hy_io_read_ic reports "no particles" */
  }

  if (format == 1) {
    static const char *const names[] = {"POS", "VEL", "ID", "MASS"};
    int nblocks = s.nmass > 0 ? 4 : 3;
    for (int k = 0; k < nblocks; k++) {
      if (read_record(g, names[k], &b, &len) != 0) return -1;
      if (k == 0) rc = store_vec(g, &s, b, len, 0);
      if (k == 1) rc = store_vec(g, &s, b, len, 1);
      if (k == 2) rc = store_ids(g, &s, b, len);
      if (k == 3) rc = store_mass(g, &s, b, len);
      hy_free(b);
      if (rc != 0) return -1;
    }
    return 0;
  }

  /* Format 2: labelled blocks in any order; unknown labels are skipped. A
   * MASS block that comes before POS, VEL and ID waits for them. */
  int have_pos = 0, have_vel = 0, have_id = 0, have_mass = 0;
  unsigned char *mass_b = NULL;
  size_t mass_len = 0;
  while (g->off < g->size && rc == 0) {
    if (read_label(g, label) != 0 || read_record(g, label, &b, &len) != 0) {
      rc = -1;
      break;
    }
    if (strcmp(label, "POS") == 0 && !have_pos)
      rc = store_vec(g, &s, b, len, 0), have_pos = 1;
    else if (strcmp(label, "VEL") == 0 && !have_vel)
      rc = store_vec(g, &s, b, len, 1), have_vel = 1;
    else if (strcmp(label, "ID") == 0 && !have_id)
      rc = store_ids(g, &s, b, len), have_id = 1;
    else if (strcmp(label, "MASS") == 0 && !have_mass && s.nmass > 0) {
      have_mass = 1;
      if (s.ready) {
        rc = store_mass(g, &s, b, len);
      } else {
        mass_b = b, mass_len = len; /* kept for later */
        b = NULL;
      }
    }
    hy_free(b);
  }
  if (rc != 0) {
    hy_free(mass_b);
    return -1;
  }
  const char *missing = !have_pos ? "POS" : !have_vel ? "VEL" : !have_id ? "ID"
                        : (s.nmass > 0 && !have_mass) ? "MASS" : NULL;
  if (!missing && mass_b) rc = store_mass(g, &s, mass_b, mass_len);
  hy_free(mass_b);
  if (missing)
    return hy_err_set(g->err, "%s: truncated file: no %s block (end of file at byte %lld)", g->path,
                      missing, g->size);
  return rc;
}

int hy_io_read_gadget(const char *path, int format, struct hy_part *p, double *time,
                      struct hy_err *err) {
  struct gin g = {NULL, path, err, 0, 0, 0};
  g.f = fopen(path, "rb");
  if (!g.f) return hy_err_set(err, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(g.f), &st) != 0) {
    int e = errno;
    fclose(g.f);
    return hy_err_set(err, "%s: cannot stat: %s", path, strerror(e));
  }
  g.size = (long long)st.st_size;
  int rc = read_body(&g, format, p, time);
  if (fclose(g.f) != 0 && rc == 0) rc = hy_err_set(err, "%s: cannot close: %s", path, strerror(errno));
  return rc;
}

/* ------------------------------------------------------------------ writer */

struct gout {
  FILE *f;
  const char *path;
  struct hy_err *err;
  int swap, format, failed;
};

static void put_raw(struct gout *o, const void *b, size_t n, const char *block) {
  if (o->failed || n == 0) return;
  if (fwrite(b, 1, n, o->f) != n) {
    hy_err_set(o->err, "%s: cannot write %s block: %s", o->path, block, strerror(errno));
    o->failed = 1;
  }
}

/* One block: format-2 label record (if any), then the framed payload. */
static void put_block(struct gout *o, const char *label, const unsigned char *b, size_t n) {
  if (o->failed) return;
  if (n > UINT32_MAX - 8) {
    hy_err_set(o->err, "%s: %s block of %zu bytes does not fit a 4-byte record marker", o->path,
               label, n);
    o->failed = 1;
    return;
  }
  unsigned char m[4], lab[16];
  if (o->format == 2) {
    put_u32(lab, 8, o->swap);
    memset(lab + 4, ' ', 4);
    memcpy(lab + 4, label, strlen(label));
    put_u32(lab + 8, (uint32_t)n + 8, o->swap);
    put_u32(lab + 12, 8, o->swap);
    put_raw(o, lab, sizeof lab, label);
  }
  put_u32(m, (uint32_t)n, o->swap);
  put_raw(o, m, 4, label);
  put_raw(o, b, n, label);
  put_raw(o, m, 4, label);
}

int hy_io_write_gadget(const char *path, const struct hy_part *p, double time,
                       const struct hy_gadget_opts *opts, struct hy_err *err) {
  if (opts->format != 1 && opts->format != 2)
    return hy_err_set(err, "%s: Gadget format must be 1 or 2 (got %d)", path, opts->format);
  uint64_t counts[HY_NTYPES];
  size_t *order = hy_io_type_order(path, p, counts, err);
  if (!order) return -1;
  double mtab[HY_NTYPES] = {0};
  size_t start = 0, nmass = 0;
  for (int t = 0; t < HY_NTYPES; t++) {
    if (counts[t] > INT32_MAX) {
      hy_free(order);
      return hy_err_set(err, "%s: %llu particles of type %d do not fit a Gadget header", path,
                        (unsigned long long)counts[t], t);
    }
    size_t n = (size_t)counts[t];
    int same = n > 0 && opts->use_mass_table;
    for (size_t k = 1; k < n && same; k++)
      same = p->mass[order[start + k]] == p->mass[order[start]];
    if (same && p->mass[order[start]] != 0.0)
      mtab[t] = p->mass[order[start]];
    else
      nmass += n;
    start += n;
  }

  struct gout o = {NULL, path, err, opts->big_endian != host_is_big_endian(), opts->format, 0};
  char *tmp = hy_io_tmpname_alloc(path);
  o.f = fopen(tmp, "wb");
  if (!o.f) {
    hy_err_set(err, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    hy_free(tmp);
    hy_free(order);
    return -1;
  }

  unsigned char head[HEADER_BYTES];
  memset(head, 0, sizeof head);
  for (int t = 0; t < HY_NTYPES; t++) {
    put_u32(head + 4 * t, (uint32_t)counts[t], o.swap);
    put_f64(head + 24 + 8 * t, mtab[t], o.swap);
    put_u32(head + 96 + 4 * t, (uint32_t)counts[t], o.swap);
  }
  put_f64(head + 72, time, o.swap);
  put_u32(head + 124, 1, o.swap);   /* num_files */
  put_f64(head + 152, 1.0, o.swap); /* HubbleParam */
  put_block(&o, "HEAD", head, sizeof head);

  size_t n = p->n, fw = opts->double_prec ? 8 : 4, iw = opts->id64 ? 8 : 4;
  unsigned char *buf = hy_malloc("Gadget output block", hy_size_mul_or_die(n ? n : 1, 3 * fw, "Gadget block"), 1);
  for (int pass = 0; pass < 2; pass++) {
    const double *src = pass == 0 ? p->pos : p->vel;
    for (size_t k = 0; k < n; k++)
      for (int c = 0; c < 3; c++) {
        unsigned char *d = buf + (3 * k + (size_t)c) * fw;
        if (fw == 8)
          put_f64(d, src[3 * order[k] + c], o.swap);
        else
          put_f32(d, src[3 * order[k] + c], o.swap);
      }
    put_block(&o, pass == 0 ? "POS" : "VEL", buf, 3 * n * fw);
  }
  for (size_t k = 0; k < n; k++) {
    uint64_t id = p->id[order[k]];
    if (iw == 4 && id > UINT32_MAX && !o.failed) {
      hy_err_set(err, "%s: particle ID %llu does not fit 32 bits (use 64-bit IDs)", path,
                 (unsigned long long)id);
      o.failed = 1;
    }
    if (iw == 8)
      put_u64(buf + 8 * k, id, o.swap);
    else
      put_u32(buf + 4 * k, (uint32_t)id, o.swap);
  }
  put_block(&o, "ID", buf, n * iw);
  if (nmass > 0) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      size_t j = order[i];
      if (mtab[p->type[j]] != 0.0) continue;
      if (fw == 8)
        put_f64(buf + 8 * k, p->mass[j], o.swap);
      else
        put_f32(buf + 4 * k, p->mass[j], o.swap);
      k++;
    }
    put_block(&o, "MASS", buf, nmass * fw);
  }
  hy_free(buf);
  hy_free(order);

  const int rc = hy_io_finish_tmp(o.f, path, tmp, o.failed, err);
  hy_free(tmp);
  return rc;
}
