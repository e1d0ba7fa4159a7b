/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_io_tipsy.c: tipsy files. Values exact in float32 read back bitwise
 * (with the type mapping gas/dark/star = 0/1/4 and the file order), a file
 * read and written again is the same file byte for byte, hand-built
 * big-endian and little-endian (Bonsai-style) files read alike, format
 * detection against Gadget files, Bonsai's native variant (little-endian,
 * IDs in phi) written and read back, and damaged files, bad particles and
 * values float32 cannot hold are refused with messages naming the file. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hy_test.h"
#include "io.h"
#include "io_expect.h"
#include "io_test_util.h"

#define N 300

/* ------------------------------------------------ files built by hand here */

struct buf {
  unsigned char b[4096];
  size_t n;
  int big;
};

static void put32(struct buf *o, uint32_t x) {
  for (int k = 0; k < 4; k++) o->b[o->n + (size_t)k] = (unsigned char)(x >> (o->big ? 24 - 8 * k : 8 * k));
  o->n += 4;
}

static void putf(struct buf *o, float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  put32(o, x);
}

static void putd(struct buf *o, double d) {
  uint64_t x;
  memcpy(&x, &d, 8);
  if (o->big) {
    put32(o, (uint32_t)(x >> 32));
    put32(o, (uint32_t)x);
  } else {
    put32(o, (uint32_t)x);
    put32(o, (uint32_t)(x >> 32));
  }
}

static void header(struct buf *o, double t, uint32_t nbodies, uint32_t ndim, uint32_t nsph, uint32_t ndark,
                   uint32_t nstar, uint32_t pad) {
  putd(o, t);
  put32(o, nbodies);
  put32(o, ndim);
  put32(o, nsph);
  put32(o, ndark);
  put32(o, nstar);
  put32(o, pad);
}

/* Particle k of the hand-built files: mass, pos, vel exact in float32. */
static void hand_values(int k, float v[7]) {
  v[0] = 0.125f * (float)(k + 1);
  for (int c = 0; c < 3; c++) {
    v[1 + c] = (float)(k * 3 + c) * 0.25f - 2.0f;
    v[4 + c] = -(float)(k + c) * 0.5f + 0.75f;
  }
}

static void write_file(const char *path, const struct buf *o) {
  FILE *f = fopen(path, "wb");
  HY_CHECK(f != NULL);
  if (!f) return;
  HY_CHECK(fwrite(o->b, 1, o->n, f) == o->n);
  HY_CHECK(fclose(f) == 0);
}

/* 2 gas, 3 dark, 2 star records. The fields hytree ignores (rho, temp,
 * softenings, metals, tform, phi) hold junk; in the little-endian file phi
 * holds an integer ID and the pad a version, as Bonsai writes them. */
static void hand_file(struct buf *o, int big) {
  o->n = 0;
  o->big = big;
  header(o, 2.5, 7, 3, 2, 3, 2, big ? 0 : 2);
  for (int k = 0; k < 7; k++) {
    float v[7];
    hand_values(k, v);
    for (int c = 0; c < 7; c++) putf(o, v[c]);
    int extra = k < 2 ? 5 : k < 5 ? 2 : 4; /* gas: rho..phi; dark: eps, phi; star: metals..phi */
    for (int e = 0; e < extra; e++) {
      if (!big && e == extra - 1)
        put32(o, 1000u + (uint32_t)k); /* Bonsai's ID in phi */
      else
        putf(o, 7.0f + (float)e);
    }
  }
}

static void hand_built(void) {
  static const uint8_t types[7] = {0, 0, 1, 1, 1, 4, 4};
  struct hy_part p[2];
  struct hy_err err;
  for (int big = 0; big <= 1; big++) {
    struct buf o;
    hand_file(&o, big);
    HY_CHECK_INT(o.n, 32 + 2 * 48 + 3 * 36 + 2 * 44);
    const char *path = hy_tmp_path(0, big ? "hand-big.tipsy" : "hand-little.bin");
    write_file(path, &o);
    enum hy_ic_format f = HY_FMT_AUTO;
    HY_CHECK_MSG(hy_io_detect_format(path, &f, &err) == 0, "%s", err.msg);
    HY_CHECK_INT(f, HY_FMT_TIPSY);
    hy_part_init(&p[big]);
    double t = -1;
    int rc = hy_io_read_ic(path, HY_FMT_AUTO, &p[big], &t, &err);
    HY_CHECK_MSG(rc == 0, "%s: %s", path, err.msg);
    HY_CHECK(t == 2.5);
    HY_CHECK_INT(p[big].n, 7);
    for (size_t i = 0; i < p[big].n && p[big].n == 7; i++) {
      float v[7];
      hand_values((int)i, v);
      HY_CHECK_INT(p[big].type[i], types[i]);
      HY_CHECK_INT(p[big].id[i], i + 1);
      HY_CHECK(p[big].mass[i] == v[0]);
      for (int c = 0; c < 3; c++) {
        HY_CHECK(p[big].pos[3 * i + c] == v[1 + c]);
        HY_CHECK(p[big].vel[3 * i + c] == v[4 + c]);
      }
    }
    HY_CHECK(unlink(path) == 0);
  }
  /* both byte orders give the same particles */
  HY_CHECK(p[0].n == p[1].n && memcmp(p[0].pos, p[1].pos, 3 * p[0].n * sizeof(double)) == 0 &&
           memcmp(p[0].vel, p[1].vel, 3 * p[0].n * sizeof(double)) == 0 &&
           memcmp(p[0].mass, p[1].mass, p[0].n * sizeof(double)) == 0);
  hy_part_free(&p[0]);
  hy_part_free(&p[1]);
}

/* ----------------------------------------------------------- round trips */

/* Types 0..5 interleaved; every value exact in float32 (random floats). */
static void make_set(struct hy_part *p) {
  unsigned long long s = 4242;
  hy_part_resize(p, N);
  for (size_t i = 0; i < N; i++) {
    p->type[i] = (uint8_t)((i * 7 + i / 3) % HY_NTYPES);
    for (int c = 0; c < 3; c++) {
      p->pos[3 * i + c] = (double)(float)(100.0 * (hy_urand(&s) - 0.5));
      p->vel[3 * i + c] = (double)(float)(3.0 * (hy_urand(&s) - 0.5));
    }
    p->mass[i] = (double)(float)(1e-3 * (0.5 + hy_urand(&s)));
    p->id[i] = 77 + 5 * (uint64_t)i;
  }
}

/* The writer's file order: type 0, then 1, 2, 3, 5, then 4; p's order within. */
static void file_order(const struct hy_part *p, size_t *perm, size_t kinds[3]) {
  static const int seq[HY_NTYPES] = {0, 1, 2, 3, 5, 4};
  size_t k = 0;
  kinds[0] = kinds[1] = kinds[2] = 0;
  for (int s = 0; s < HY_NTYPES; s++)
    for (size_t i = 0; i < p->n; i++)
      if (p->type[i] == seq[s]) {
        perm[k++] = i;
        kinds[seq[s] == 0 ? 0 : seq[s] == 4 ? 2 : 1]++;
      }
}

static long long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static unsigned char *slurp(const char *path, size_t *n) {
  long long size = file_size(path);
  HY_CHECK(size >= 0);
  unsigned char *b = malloc(size > 0 ? (size_t)size : 1);
  if (!b) exit(99);
  FILE *f = fopen(path, "rb");
  HY_CHECK(f != NULL);
  *n = 0;
  if (f) {
    *n = fread(b, 1, (size_t)size, f);
    HY_CHECK(*n == (size_t)size);
    HY_CHECK(fclose(f) == 0);
  }
  return b;
}

static uint32_t be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static float bef(const unsigned char *b) {
  uint32_t x = be32(b);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static void round_trip(void) {
  struct hy_part p, q, r;
  struct hy_err err;
  hy_part_init(&p);
  hy_part_init(&q);
  hy_part_init(&r);
  make_set(&p);
  const char *a = hy_tmp_path(0, "rt-a.std"), *b = hy_tmp_path(1, "rt-b.std");
  const double time = 0.1; /* not a float32: the header time is a double */
  const double eps = 0.015625;
  int rc = hy_io_write_tipsy(a, &p, time, eps, 0, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);

  size_t perm[N], kinds[3];
  file_order(&p, perm, kinds);
  HY_CHECK(kinds[0] > 0 && kinds[1] > 0 && kinds[2] > 0);
  /* the header and the layout, decoded here, not by the reader */
  size_t len;
  unsigned char *fa = slurp(a, &len);
  HY_CHECK_INT(len, 32 + 48 * kinds[0] + 36 * kinds[1] + 44 * kinds[2]);
  if (len >= 32) {
    uint64_t tb = (uint64_t)be32(fa) << 32 | be32(fa + 4);
    double t;
    memcpy(&t, &tb, 8);
    HY_CHECK(t == time);
    HY_CHECK_INT(be32(fa + 8), N);
    HY_CHECK_INT(be32(fa + 12), 3);
    HY_CHECK_INT(be32(fa + 16), kinds[0]);
    HY_CHECK_INT(be32(fa + 20), kinds[1]);
    HY_CHECK_INT(be32(fa + 24), kinds[2]);
    HY_CHECK_INT(be32(fa + 28), 0);
  }
  if (len == 32 + 48 * kinds[0] + 36 * kinds[1] + 44 * kinds[2]) {
    const unsigned char *gas = fa + 32, *dark = gas + 48 * kinds[0], *star = dark + 36 * kinds[1];
    /* softening: hsmooth of gas (word 9), eps of dark (7) and stars (9); phi 0 */
    HY_CHECK(bef(gas + 36) == (float)eps && bef(gas + 44) == 0.0f);
    HY_CHECK(bef(dark + 28) == (float)eps && bef(dark + 32) == 0.0f);
    HY_CHECK(bef(star + 36) == (float)eps && bef(star + 40) == 0.0f);
    HY_CHECK(bef(dark) == (float)p.mass[perm[kinds[0]]]);
    HY_CHECK(bef(dark + 4) == (float)p.pos[3 * perm[kinds[0]]]);
  }

  enum hy_ic_format f = HY_FMT_AUTO;
  HY_CHECK_MSG(hy_io_detect_format(a, &f, &err) == 0, "%s", err.msg);
  HY_CHECK_INT(f, HY_FMT_TIPSY);
  for (int pass = 0; pass < 2; pass++) {
    double t = -1;
    rc = hy_io_read_ic(a, pass == 0 ? HY_FMT_AUTO : HY_FMT_TIPSY, &q, &t, &err);
    HY_CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc != 0) continue;
    HY_CHECK(memcmp(&t, &time, sizeof t) == 0);
    HY_CHECK_INT(q.n, N);
    int bad = 0;
    for (size_t k = 0; k < N && q.n == N; k++) {
      size_t i = perm[k];
      uint8_t want = p.type[i] == 0 ? 0 : p.type[i] == 4 ? 4 : 1;
      for (int c = 0; c < 3; c++) {
        bad += memcmp(&q.pos[3 * k + c], &p.pos[3 * i + c], sizeof(double)) != 0;
        bad += memcmp(&q.vel[3 * k + c], &p.vel[3 * i + c], sizeof(double)) != 0;
      }
      bad += memcmp(&q.mass[k], &p.mass[i], sizeof(double)) != 0;
      bad += q.type[k] != want;
      bad += q.id[k] != k + 1;
    }
    HY_CHECK_MSG(bad == 0, "%d mismatching values", bad);
  }

  /* read and written again: the same bytes */
  rc = hy_io_write_tipsy(b, &q, time, eps, 0, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  size_t lenb;
  unsigned char *fb = slurp(b, &lenb);
  HY_CHECK(len == lenb && memcmp(fa, fb, len) == 0);
  /* and once more through the second file */
  double t2 = -1;
  HY_CHECK(hy_io_read_ic(b, HY_FMT_AUTO, &r, &t2, &err) == 0);
  HY_CHECK(r.n == q.n && memcmp(r.pos, q.pos, 3 * q.n * sizeof(double)) == 0 && t2 == time);
  free(fa);
  free(fb);
  HY_CHECK(unlink(a) == 0);
  HY_CHECK(unlink(b) == 0);
  hy_part_free(&p);
  hy_part_free(&q);
  hy_part_free(&r);
}

/* ------------------------------------------------------------- detection */

static void detection(void) {
  struct hy_err err;
  enum hy_ic_format f;
  HY_CHECK(hy_io_format_parse("tipsy", &f) == 0 && f == HY_FMT_TIPSY);
  HY_CHECK(strcmp(hy_io_format_name(HY_FMT_TIPSY), "tipsy") == 0);

  struct hy_part p;
  hy_part_init(&p);
  make_set(&p);
  const char *path = hy_tmp_path(0, "detect.bin");
  /* Gadget files stay Gadget */
  for (int format = 1; format <= 2; format++) {
    for (int big = 0; big <= 1; big++) {
      struct hy_gadget_opts o = {format, 0, big, 0, 0};
      HY_CHECK(hy_io_write_gadget(path, &p, 0.0, &o, &err) == 0);
      HY_CHECK(hy_io_detect_format(path, &f, &err) == 0);
      HY_CHECK_INT(f, format == 1 ? HY_FMT_GADGET1 : HY_FMT_GADGET2);
    }
  }
  /* tipsy files whose time starts with the bytes of a Gadget-1 marker (256)
   * or of a Gadget-2 label record (8, "HEAD") */
  for (int big = 0; big <= 1; big++) {
    for (int like = 1; like <= 2; like++) {
      struct buf o = {.n = 0, .big = big};
      uint64_t bits = (uint64_t)(like == 1 ? 256 : 8) << (big ? 32 : 0);
      if (like == 2) bits |= (uint64_t)(big ? 0x48454144u : 0x44414548u) << (big ? 0 : 32); /* "HEAD" */
      double t;
      memcpy(&t, &bits, 8);
      header(&o, t, 2, 3, 0, 2, 0, 0);
      for (int k = 0; k < 2; k++) {
        float v[7];
        hand_values(k, v);
        for (int c = 0; c < 7; c++) putf(&o, v[c]);
        putf(&o, 0.0f);
        putf(&o, 0.0f);
      }
      /* the file does start like a Gadget file of that format */
      uint32_t m = big ? be32(o.b) : (uint32_t)o.b[0] | (uint32_t)o.b[1] << 8 | (uint32_t)o.b[2] << 16 |
                                          (uint32_t)o.b[3] << 24;
      HY_CHECK_INT(m, like == 1 ? 256 : 8);
      HY_CHECK(like == 1 || memcmp(o.b + 4, "HEAD", 4) == 0);
      write_file(path, &o);
      HY_CHECK(hy_io_detect_format(path, &f, &err) == 0);
      HY_CHECK_MSG(f == HY_FMT_TIPSY, "big %d, like Gadget-%d: detected %s", big, like, hy_io_format_name(f));
      struct hy_part q;
      hy_part_init(&q);
      double tr = 0;
      HY_CHECK_MSG(hy_io_read_ic(path, HY_FMT_AUTO, &q, &tr, &err) == 0, "%s", err.msg);
      HY_CHECK(q.n == 2 && memcmp(&tr, &t, 8) == 0);
      hy_part_free(&q);
    }
  }
  HY_CHECK(unlink(path) == 0);
  hy_part_free(&p);
}

/* ------------------------------------------------------------ bad files */


/* The hand-built big-endian file with one header word or one value changed. */
static void damaged(void) {
  const char *path = hy_tmp_path(0, "damaged.tipsy");
  struct buf o;
  for (int big = 0; big <= 1; big++) {
    /* truncated: 10 bytes short, and only a part of the header */
    hand_file(&o, big);
    o.n -= 10;
    write_file(path, &o);
    hy_read_expect_fail(path, HY_FMT_AUTO, "truncated file: 314 bytes, but the tipsy header's counts "
                                        "(nsph 2, ndark 3, nstar 2) need 324");
    hy_read_expect_fail(path, HY_FMT_TIPSY, "truncated file");
    o.n = 20;
    write_file(path, &o);
    hy_read_expect_fail(path, HY_FMT_TIPSY, "truncated file: 20 bytes, a tipsy header needs 32");
    /* a byte too many */
    hand_file(&o, big);
    o.b[o.n++] = 0;
    write_file(path, &o);
    hy_read_expect_fail(path, HY_FMT_AUTO, "wrong size: 325 bytes");
    /* ndim 2 */
    hand_file(&o, big);
    size_t n = o.n;
    o.n = 12;
    put32(&o, 2);
    o.n = n;
    write_file(path, &o);
    hy_read_expect_fail(path, HY_FMT_TIPSY, "tipsy header: ndim = 2; only 3-dimensional files are supported");
    hy_read_expect_fail(path, HY_FMT_AUTO, "unrecognised file format");
    /* nbodies 8 for 2 + 3 + 2 */
    hand_file(&o, big);
    o.n = 8;
    put32(&o, 8);
    o.n = n;
    write_file(path, &o);
    hy_read_expect_fail(path, HY_FMT_AUTO, "tipsy header: nbodies = 8 but nsph + ndark + nstar = 7");
    /* a negative count, nbodies still the sum */
    hand_file(&o, big);
    o.n = 8;
    put32(&o, 3);
    o.n = 16;
    put32(&o, (uint32_t)-2);
    o.n = n;
    write_file(path, &o);
    hy_read_expect_fail(path, HY_FMT_AUTO, "negative particle count (nsph -2, ndark 3, nstar 2)");
    /* NaN y of the second dark particle (index 3: ID 4) */
    hand_file(&o, big);
    o.n = 32 + 2 * 48 + 36 + 8;
    putf(&o, NAN);
    o.n = n;
    write_file(path, &o);
    hy_read_expect_fail(path, HY_FMT_AUTO, "particle ID 4 (index 3): non-finite position");
    /* zero mass of the first star (index 5) */
    hand_file(&o, big);
    o.n = 32 + 2 * 48 + 3 * 36;
    putf(&o, 0.0f);
    o.n = n;
    write_file(path, &o);
    hy_read_expect_fail(path, HY_FMT_AUTO, "particle ID 6 (index 5): zero mass");
  }
  /* no particles */
  o.n = 0;
  o.big = 1;
  header(&o, 0.0, 0, 3, 0, 0, 0, 0);
  write_file(path, &o);
  hy_read_expect_fail(path, HY_FMT_AUTO, "no particles");
  /* neither byte order says 3 */
  hand_file(&o, 1);
  memcpy(o.b + 12, "\1\2\3\4", 4);
  write_file(path, &o);
  hy_read_expect_fail(path, HY_FMT_TIPSY, "not a tipsy file: ndim (bytes 12-15: 01 02 03 04) is 3 in neither byte order");
  HY_CHECK(unlink(path) == 0);
  hy_read_expect_fail(hy_tmp_path(1, "missing.tipsy"), HY_FMT_TIPSY, "cannot open: No such file");
}

/* Values float32 cannot hold: refused, no file (and no temporary) left. */
static void write_refused(void) {
  struct hy_part p;
  struct hy_err err;
  hy_part_init(&p);
  const char *path = hy_tmp_path(0, "refused.tipsy");
  struct {
    int what; /* 0 position, 1 velocity, 2 mass */
    double v;
    const char *needle;
  } cases[] = {
      {0, 1e39, "particle ID 92 (index 3): y = 1e+39 does not fit a 32-bit float"},
      {0, -4e38, "particle ID 92 (index 3): y = -4e+38 does not fit a 32-bit float"},
      {1, NAN, "particle ID 92 (index 3): vy = nan does not fit a 32-bit float"},
      {1, INFINITY, "vy = inf does not fit"},
      {2, 1e-50, "particle ID 92 (index 3): mass = 1e-50 is 0 as a 32-bit float"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    make_set(&p);
    for (size_t i = 0; i < p.n; i++) p.type[i] = 1;
    if (cases[c].what == 0) p.pos[3 * 3 + 1] = cases[c].v;
    if (cases[c].what == 1) p.vel[3 * 3 + 1] = cases[c].v;
    if (cases[c].what == 2) p.mass[3] = cases[c].v;
    HY_CHECK_INT(hy_io_write_tipsy(path, &p, 0.0, 0.0, 0, &err), -1);
    HY_CHECK_CONTAINS(err.msg, cases[c].needle);
    HY_CHECK_CONTAINS(err.msg, path);
    printf("expected error: %s\n", err.msg);
    HY_CHECK_INT(hy_tmp_count(), 0);
  }
  make_set(&p);
  HY_CHECK_INT(hy_io_write_tipsy(path, &p, 0.0, -1.0, 0, &err), -1);
  HY_CHECK_CONTAINS(err.msg, "softening -1 is not a finite 32-bit float >= 0");
  p.type[7] = 6;
  HY_CHECK_INT(hy_io_write_tipsy(path, &p, 0.0, 0.0, 0, &err), -1);
  HY_CHECK_CONTAINS(err.msg, "has type 6");
  HY_CHECK_INT(hy_tmp_count(), 0);
  /* the largest float32 itself is fine */
  make_set(&p);
  p.pos[0] = 3.4028234663852886e38;
  HY_CHECK_MSG(hy_io_write_tipsy(path, &p, 0.0, 0.0, 0, &err) == 0, "%s", err.msg);
  HY_CHECK(unlink(path) == 0);
  hy_part_free(&p);
}

static uint32_t le32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Bonsai's native variant: little-endian words, each record's last word
 * the particle's ID as an int; read back (by the detection of either byte
 * order) to the same values, and its IDs as written. */
static void native_write(void) {
  struct hy_part p, q;
  struct hy_err err;
  hy_part_init(&p);
  hy_part_init(&q);
  make_set(&p);
  for (size_t i = 0; i < N; i++) p.id[i] = 1000 + 7 * (uint64_t)i;
  const char *a = hy_tmp_path(0, "native.tipsy");
  HY_CHECK_MSG(hy_io_write_tipsy(a, &p, 0.5, 0.0, 1, &err) == 0, "%s", err.msg);
  size_t perm[N], kinds[3], len;
  file_order(&p, perm, kinds);
  unsigned char *fa = slurp(a, &len);
  HY_CHECK_INT(len, 32 + 48 * kinds[0] + 36 * kinds[1] + 44 * kinds[2]);
  if (len == 32 + 48 * kinds[0] + 36 * kinds[1] + 44 * kinds[2]) {
    HY_CHECK_INT(le32(fa + 8), N);
    HY_CHECK_INT(le32(fa + 12), 3);
    HY_CHECK_INT(le32(fa + 20), kinds[1]);
    size_t bad = 0, at = 32;
    for (size_t k = 0; k < N; k++) {
      const size_t bytes = k < kinds[0] ? 48 : k < kinds[0] + kinds[1] ? 36 : 44;
      bad += le32(fa + at + bytes - 4) != p.id[perm[k]];
      float m;
      uint32_t x = le32(fa + at);
      memcpy(&m, &x, 4);
      bad += m != (float)p.mass[perm[k]];
      at += bytes;
    }
    HY_CHECK_MSG(bad == 0, "%zu records without their ID or mass", bad);
  }
  double t = -1;
  HY_CHECK_MSG(hy_io_read_ic(a, HY_FMT_AUTO, &q, &t, &err) == 0, "%s", err.msg);
  HY_CHECK(t == 0.5 && q.n == N);
  for (size_t k = 0; k < N && q.n == N; k++)
    HY_CHECK(memcmp(&q.pos[3 * k], &p.pos[3 * perm[k]], 3 * sizeof(double)) == 0);
  free(fa);
  /* an ID beyond a 32-bit int is refused, and nothing is left behind */
  p.id[N / 2] = (uint64_t)INT32_MAX + 1;
  HY_CHECK_INT(hy_io_write_tipsy(a, &p, 0.5, 0.0, 1, &err), -1);
  HY_CHECK_CONTAINS(err.msg, "32-bit ID");
  HY_CHECK(unlink(a) == 0);
  hy_part_free(&p);
  hy_part_free(&q);
}

int main(void) {
  hy_tmp_setup("io-tipsy");
  round_trip();
  native_write();
  hand_built();
  detection();
  damaged();
  write_refused();
  HY_CHECK_INT(hy_tmp_count(), 0);
  hy_tmp_cleanup();
  return hy_test_result();
}
