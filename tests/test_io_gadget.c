/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_io_gadget.c: Gadget binary formats 1 and 2. Round trips over every
 * writer option (format, precision, byte order, ID width, mass table),
 * format detection, damaged files (truncated, bad markers, multi-file),
 * validation of bad particles and the real Gadget-2 galaxy collision ICs. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hy_test.h"
#include "io.h"
#include "io_expect.h"
#include "io_test_util.h"

#define N 300

/* Mixed set: types interleaved (0, 1, 2, 4); types 0 and 1 share one mass
 * per type, type 2 and 4 have random masses. */
static void make_set(struct hy_part *p, int big_ids) {
  static const uint8_t types[4] = {1, 2, 0, 4};
  unsigned long long s = 12345;
  hy_part_resize(p, N);
  for (size_t i = 0; i < N; i++) {
    p->type[i] = types[(i * 7 + i / 5) % 4];
    for (int c = 0; c < 3; c++) {
      p->pos[3 * i + c] = 10.0 * (hy_urand(&s) - 0.5);
      p->vel[3 * i + c] = 2.0 * (hy_urand(&s) - 0.5);
    }
    p->mass[i] = p->type[i] == 0 ? 0.25 : p->type[i] == 1 ? 1e-3 : 0.5 + hy_urand(&s);
    p->id[i] = (big_ids ? (1ULL << 40) : 0) + 1000 + 3 * (uint64_t)i;
  }
}

/* Expected read order: stable by type. */
static void by_type(const struct hy_part *p, size_t *perm) {
  size_t k = 0;
  for (int t = 0; t < HY_NTYPES; t++)
    for (size_t i = 0; i < p->n; i++)
      if (p->type[i] == t) perm[k++] = i;
}

static double rnd(double x, int dbl) { return dbl ? x : (double)(float)x; }

static void round_trip(int format, int dbl, int big, int id64, int mtab) {
  struct hy_part p, q;
  struct hy_err err;
  hy_part_init(&p);
  hy_part_init(&q);
  make_set(&p, id64);
  char name[96]; /* room for any int in every field (gcc -fsanitize=address,undefined warns otherwise) */
  snprintf(name, sizeof name, "rt-f%d-d%d-b%d-i%d-m%d.gadget", format, dbl, big, id64, mtab);
  const char *path = hy_tmp_path(0, name);
  struct hy_gadget_opts o = {format, dbl, big, id64, mtab};
  int rc = hy_io_write_gadget(path, &p, 0.625, &o, &err);
  HY_CHECK_MSG(rc == 0, "%s: %s", name, err.msg);
  enum hy_ic_format f = HY_FMT_AUTO;
  rc = hy_io_detect_format(path, &f, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  HY_CHECK_INT(f, format == 1 ? HY_FMT_GADGET1 : HY_FMT_GADGET2);
  for (int pass = 0; pass < 2; pass++) {
    double t = -1;
    rc = hy_io_read_ic(path, pass == 0 ? HY_FMT_AUTO : f, &q, &t, &err);
    HY_CHECK_MSG(rc == 0, "%s: %s", name, err.msg);
    if (rc != 0) continue;
    HY_CHECK_INT(q.n, N);
    HY_CHECK(t == 0.625);
    size_t perm[N];
    by_type(&p, perm);
    int bad = 0;
    for (size_t k = 0; k < N && q.n == N; k++) {
      size_t i = perm[k];
      for (int c = 0; c < 3; c++) {
        bad += q.pos[3 * k + c] != rnd(p.pos[3 * i + c], dbl);
        bad += q.vel[3 * k + c] != rnd(p.vel[3 * i + c], dbl);
      }
      /* mass-table entries are always double in the header */
      int in_table = mtab && (p.type[i] == 0 || p.type[i] == 1);
      bad += q.mass[k] != (in_table ? p.mass[i] : rnd(p.mass[i], dbl));
      bad += q.id[k] != p.id[i];
      bad += q.type[k] != p.type[i];
    }
    HY_CHECK_MSG(bad == 0, "%s: %d mismatching values", name, bad);
  }
  hy_part_free(&p);
  hy_part_free(&q);
  HY_CHECK(unlink(path) == 0);
}


static void write_or_fail(const char *path, const struct hy_part *p, int format, int dbl,
                          int mtab) {
  struct hy_err err;
  struct hy_gadget_opts o = {format, dbl, 0, 0, mtab};
  int rc = hy_io_write_gadget(path, p, 0.0, &o, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
}

static void damaged_files(void) {
  struct hy_part p;
  hy_part_init(&p);
  make_set(&p, 0);
  const char *path = hy_tmp_path(1, "damaged.gadget");

  /* Truncated inside the POS block (format 1) and inside MASS (format 2). */
  write_or_fail(path, &p, 1, 1, 0);
  HY_CHECK(truncate(path, 4 + 256 + 4 + 1000) == 0);
  hy_read_expect_fail(path, HY_FMT_AUTO, "truncated file: POS block needs");
  write_or_fail(path, &p, 2, 0, 0);
  struct stat st;
  HY_CHECK(stat(path, &st) == 0);
  HY_CHECK(truncate(path, st.st_size - 10) == 0);
  hy_read_expect_fail(path, HY_FMT_GADGET2, "truncated");
  hy_read_expect_fail(path, HY_FMT_GADGET2, "MASS");
  /* Cut just before the MASS block of format 1: the block is missing. */
  write_or_fail(path, &p, 1, 1, 1);
  HY_CHECK(stat(path, &st) == 0);
  size_t nmass = 0;
  for (size_t i = 0; i < p.n; i++) nmass += p.type[i] >= 2;
  HY_CHECK(truncate(path, st.st_size - (off_t)(nmass * 8 + 8)) == 0);
  hy_read_expect_fail(path, HY_FMT_AUTO, "truncated file: MASS block");

  /* Bad first marker. */
  FILE *f = fopen(path, "wb");
  HY_CHECK(f != NULL);
  if (f) {
    unsigned char junk[64] = {0x39, 0x05, 0, 0};
    HY_CHECK(fwrite(junk, 1, sizeof junk, f) == sizeof junk);
    HY_CHECK(fclose(f) == 0);
  }
  hy_read_expect_fail(path, HY_FMT_AUTO, "unrecognised file format");
  hy_read_expect_fail(path, HY_FMT_GADGET1, "not a Gadget format 1 file (first record marker is 1337)");
  hy_read_expect_fail(path, HY_FMT_GADGET2, "not a Gadget format 2 file");
  hy_read_expect_fail(path, HY_FMT_HDF5, "not an HDF5 file");
  enum hy_ic_format fmt;
  struct hy_err err;
  HY_CHECK(hy_io_detect_format(path, &fmt, &err) == -1);
  HY_CHECK_CONTAINS(err.msg, "unrecognised");

  /* Format 1 file read as format 2 and vice versa. */
  write_or_fail(path, &p, 1, 0, 1);
  hy_read_expect_fail(path, HY_FMT_GADGET2, "not a Gadget format 2 file (first record marker is 256)");
  write_or_fail(path, &p, 2, 0, 1);
  hy_read_expect_fail(path, HY_FMT_GADGET1, "not a Gadget format 1 file (first record marker is 8)");

  /* Mismatched end marker of the header record (format 1: bytes 260..263). */
  write_or_fail(path, &p, 1, 0, 1);
  f = fopen(path, "r+b");
  HY_CHECK(f != NULL);
  if (f) {
    unsigned char m[4] = {0x00, 0x02, 0, 0}; /* 512 */
    HY_CHECK(fseek(f, 260, SEEK_SET) == 0);
    HY_CHECK(fwrite(m, 1, 4, f) == 4);
    HY_CHECK(fclose(f) == 0);
  }
  hy_read_expect_fail(path, HY_FMT_AUTO, "record markers differ");

  /* Multi-file: num_files = 2 at header offset 124. */
  write_or_fail(path, &p, 1, 0, 1);
  f = fopen(path, "r+b");
  HY_CHECK(f != NULL);
  if (f) {
    unsigned char m[4] = {2, 0, 0, 0};
    HY_CHECK(fseek(f, 4 + 124, SEEK_SET) == 0);
    HY_CHECK(fwrite(m, 1, 4, f) == 4);
    HY_CHECK(fclose(f) == 0);
  }
  hy_read_expect_fail(path, HY_FMT_AUTO, "multi-file snapshots are not supported");

  /* A header count far beyond the file (2^31 - 1 more particles, of type
   * 5): the POS block shows it, before anything is allocated for them. */
  for (int format = 1; format <= 2; format++) {
    write_or_fail(path, &p, format, 0, 1);
    f = fopen(path, "r+b");
    HY_CHECK(f != NULL);
    if (f) {
      unsigned char m[4] = {0xff, 0xff, 0xff, 0x7f};
      HY_CHECK(fseek(f, (format == 2 ? 16 : 0) + 4 + 4 * 5, SEEK_SET) == 0);
      HY_CHECK(fwrite(m, 1, 4, f) == 4);
      HY_CHECK(fclose(f) == 0);
    }
    hy_read_expect_fail(path, HY_FMT_AUTO, "POS block has 3600 bytes; expected 25769807364 or 51539614728 for 2147483947 particles");
  }

  /* Missing file. */
  hy_read_expect_fail(hy_tmp_path(2, "no-such-file.dat"), HY_FMT_GADGET1, "cannot open: No such file");
  hy_read_expect_fail(hy_tmp_path(2, "no-such-file.dat"), HY_FMT_AUTO, "cannot open: No such file");

  HY_CHECK(unlink(path) == 0);
  hy_part_free(&p);
}

static void validation(void) {
  struct hy_part p;
  hy_part_init(&p);
  const char *path = hy_tmp_path(1, "invalid.gadget");

  make_set(&p, 0);
  for (size_t i = 0; i < p.n; i++) p.type[i] = 1;
  p.pos[3 * 16 + 1] = NAN;
  write_or_fail(path, &p, 1, 1, 0);
  hy_read_expect_fail(path, HY_FMT_AUTO, "particle ID 1048 (index 16): non-finite position");

  make_set(&p, 0);
  for (size_t i = 0; i < p.n; i++) p.type[i] = 1;
  p.vel[3 * 5] = INFINITY;
  write_or_fail(path, &p, 2, 1, 0);
  hy_read_expect_fail(path, HY_FMT_AUTO, "particle ID 1015 (index 5): non-finite velocity");

  make_set(&p, 0);
  for (size_t i = 0; i < p.n; i++) p.type[i] = 1;
  p.mass[16] = -1.0;
  write_or_fail(path, &p, 1, 1, 1);
  hy_read_expect_fail(path, HY_FMT_AUTO, "particle ID 1048 (index 16): negative mass -1");

  hy_part_resize(&p, 0);
  write_or_fail(path, &p, 1, 1, 1);
  hy_read_expect_fail(path, HY_FMT_AUTO, "no particles");
  write_or_fail(path, &p, 2, 0, 0);
  hy_read_expect_fail(path, HY_FMT_AUTO, "no particles");

  HY_CHECK(unlink(path) == 0);
  hy_part_free(&p);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The Gadget-2 galaxy collision ICs (format 1, little endian, float, mass table). */
static void galaxy(void) {
  const char *src = getenv("top_srcdir");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/data/galaxy_littleendian.dat", src ? src : ".");
  /* Header counts and mass table, decoded here independently of the reader. */
  FILE *f = fopen(path, "rb");
  HY_CHECK_MSG(f != NULL, "cannot open %s", path);
  if (!f) return;
  unsigned char h[4 + 256];
  HY_CHECK(fread(h, 1, sizeof h, f) == sizeof h);
  HY_CHECK(fclose(f) == 0);
  size_t nhead = 0;
  double mhead = 0;
  for (int t = 0; t < 6; t++) {
    const unsigned char *b = h + 4 + 4 * t;
    uint32_t np = b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    uint64_t mb = 0;
    for (int k = 7; k >= 0; k--) mb = mb << 8 | h[4 + 24 + 8 * t + k];
    double m;
    memcpy(&m, &mb, 8);
    nhead += np;
    mhead += np * m;
  }

  enum hy_ic_format fmt;
  struct hy_err err;
  HY_CHECK(hy_io_detect_format(path, &fmt, &err) == 0);
  HY_CHECK_INT(fmt, HY_FMT_GADGET1);
  struct hy_part p;
  hy_part_init(&p);
  double t = -1;
  int rc = hy_io_read_ic(path, HY_FMT_AUTO, &p, &t, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  HY_CHECK_INT(p.n, nhead);
  HY_CHECK(t == 0.0);
  int bad = 0;
  double mtot = 0;
  uint64_t *ids = malloc((p.n ? p.n : 1) * sizeof *ids);
  if (!ids) exit(99);
  memcpy(ids, p.id, p.n * sizeof *ids);
  for (size_t i = 0; i < p.n; i++) {
    bad += !(p.mass[i] > 0);
    for (int c = 0; c < 3; c++) bad += !isfinite(p.pos[3 * i + c]) || !isfinite(p.vel[3 * i + c]);
    mtot += p.mass[i];
  }
  HY_CHECK_INT(bad, 0);
  qsort(ids, p.n, sizeof *ids, cmp_u64);
  size_t dup = 0;
  for (size_t i = 1; i < p.n; i++) dup += ids[i] == ids[i - 1];
  HY_CHECK_INT(dup, 0);
  free(ids);
  /* Summing N doubles: relative rounding error below N * eps. */
  HY_CHECK_REL(mtot, mhead, (double)p.n * 2.3e-16);
  printf("galaxy_littleendian.dat: N = %zu, total mass = %.10g\n", p.n, mtot);
  hy_part_free(&p);
}

int main(void) {
  hy_tmp_setup("io-gadget");
  for (int format = 1; format <= 2; format++)
    for (int dbl = 0; dbl <= 1; dbl++)
      for (int big = 0; big <= 1; big++)
        for (int id64 = 0; id64 <= 1; id64++)
          for (int mtab = 0; mtab <= 1; mtab++) round_trip(format, dbl, big, id64, mtab);
  damaged_files();
  validation();
  galaxy();
  HY_CHECK_INT(hy_tmp_count(), 0);
  hy_tmp_cleanup();
  return hy_test_result();
}
