/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_io_hdf5.c: Gadget-style HDF5 snapshots. Round trip of a mixed-type
 * set with the optional fields, the header/units/run-parameter attributes as
 * seen through the HDF5 API, atomic publication (no temporary left, nothing
 * created when the directory is missing), and reading files written by other
 * codes: no ParticleIDs, float32 coordinates, int32 header counts, MassTable,
 * multi-file and shape mismatches. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "hy_test.h"
#include "io.h"
#include "io_test_util.h"

#define N 257

static void make_set(struct hy_part *p) {
  unsigned long long s = 99;
  hy_part_resize(p, N);
  for (size_t i = 0; i < N; i++) {
    p->type[i] = (i % 3 == 0) ? 2 : 1;
    for (int c = 0; c < 3; c++) {
      p->pos[3 * i + c] = hy_urand(&s) - 0.5;
      p->vel[3 * i + c] = hy_urand(&s) - 0.5;
      p->acc[3 * i + c] = hy_urand(&s) * 1e3;
    }
    p->pot[i] = -hy_urand(&s);
    p->mass[i] = 1e-3 * (1.0 + hy_urand(&s));
    p->id[i] = (i % 2 ? (UINT64_C(1) << 33) + 7 * i : i + 1);
  }
}

static double attr_d(hid_t loc, const char *name) {
  double v = NAN;
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  HY_CHECK_MSG(a >= 0, "attribute %s", name);
  if (a < 0) return v;
  HY_CHECK(H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0);
  HY_CHECK(H5Aclose(a) >= 0);
  return v;
}

static void attr_s(hid_t loc, const char *name, char *buf, size_t size) {
  buf[0] = '\0';
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  HY_CHECK_MSG(a >= 0, "attribute %s", name);
  if (a < 0) return;
  hid_t t = H5Aget_type(a);
  size_t len = H5Tget_size(t);
  HY_CHECK(H5Tget_class(t) == H5T_STRING);
  if (len < size) {
    HY_CHECK(H5Aread(a, t, buf) >= 0);
    buf[len] = '\0';
  }
  H5Tclose(t);
  HY_CHECK(H5Aclose(a) >= 0);
}

static void read_dset(hid_t file, const char *name, hid_t mem, void *buf) {
  hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
  HY_CHECK_MSG(d >= 0, "dataset %s", name);
  if (d < 0) return;
  HY_CHECK(H5Dread(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
  HY_CHECK(H5Dclose(d) >= 0);
}

static herr_t count_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data) {
  (void)loc;
  (void)name;
  (void)info;
  ++*(int *)data;
  return 0;
}

static void round_trip(void) {
  struct hy_part p, q;
  struct hy_err err;
  hy_part_init(&p);
  hy_part_init(&q);
  make_set(&p);
  const char *path = hy_tmp_path(0, "snap.hdf5");
  struct hy_snap_info info = {1.5, HY_FIELD_ACC | HY_FIELD_POT, {3.085678e21, 1.989e43, 1e5},
                              4.3e-6, 0.01,
                              "% comment\nOutputDir  out   % trailing\n# other comment\n"
                              "TimeMax 10.0\n\nSofteningLength 0.01\n",
                              "TimeMax 10.0\nSofteningLength auto   % auto -> 0.01\n", 0, 0, {0}, {0}};
  int rc = hy_io_write_hdf5(path, &p, &info, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  HY_CHECK_INT(hy_tmp_count(), 1); /* no temporary left */
  enum hy_ic_format f;
  HY_CHECK(hy_io_detect_format(path, &f, &err) == 0);
  HY_CHECK_INT(f, HY_FMT_HDF5);

  double t = -1;
  rc = hy_io_read_ic(path, HY_FMT_HDF5, &q, &t, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  HY_CHECK_INT(q.n, N);
  HY_CHECK(t == 1.5);
  size_t perm[N], k = 0, n1 = 0, n2 = 0;
  for (int ty = 0; ty < 6; ty++)
    for (size_t i = 0; i < N; i++)
      if (p.type[i] == ty) perm[k++] = i;
  for (size_t i = 0; i < N; i++) {
    if (p.type[i] == 1)
      n1++;
    else
      n2++;
  }
  int bad = 0;
  for (k = 0; k < N && q.n == N; k++) {
    size_t i = perm[k];
    bad += memcmp(q.pos + 3 * k, p.pos + 3 * i, 3 * sizeof(double)) != 0;
    bad += memcmp(q.vel + 3 * k, p.vel + 3 * i, 3 * sizeof(double)) != 0;
    bad += memcmp(&q.mass[k], &p.mass[i], sizeof(double)) != 0;
    bad += q.id[k] != p.id[i] || q.type[k] != p.type[i];
  }
  HY_CHECK_INT(bad, 0);

  /* The file seen through the HDF5 API. */
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  HY_CHECK(file >= 0);
  if (file >= 0) {
    hid_t h = H5Gopen2(file, "Header", H5P_DEFAULT);
    HY_CHECK(h >= 0);
    uint64_t np[6];
    uint32_t hw[6];
    double mt[6];
    int nf = 0, dim = 0;
    hid_t a = H5Aopen(h, "NumPart_ThisFile", H5P_DEFAULT);
    HY_CHECK(H5Aread(a, H5T_NATIVE_UINT64, np) >= 0);
    hid_t at = H5Aget_type(a);
    HY_CHECK(H5Tequal(at, H5T_STD_U64LE) > 0);
    H5Tclose(at);
    H5Aclose(a);
    HY_CHECK(np[0] == 0 && np[1] == n1 && np[2] == n2 && np[3] == 0 && np[4] == 0 && np[5] == 0);
    a = H5Aopen(h, "NumPart_Total", H5P_DEFAULT);
    HY_CHECK(H5Aread(a, H5T_NATIVE_UINT64, np) >= 0);
    H5Aclose(a);
    HY_CHECK(np[1] == n1 && np[2] == n2);
    a = H5Aopen(h, "NumPart_Total_HighWord", H5P_DEFAULT);
    HY_CHECK(H5Aread(a, H5T_NATIVE_UINT32, hw) >= 0);
    H5Aclose(a);
    HY_CHECK(hw[0] == 0 && hw[1] == 0 && hw[2] == 0 && hw[5] == 0);
    a = H5Aopen(h, "MassTable", H5P_DEFAULT);
    HY_CHECK(H5Aread(a, H5T_NATIVE_DOUBLE, mt) >= 0);
    H5Aclose(a);
    for (int i = 0; i < 6; i++) HY_CHECK(mt[i] == 0.0);
    a = H5Aopen(h, "NumFilesPerSnapshot", H5P_DEFAULT);
    HY_CHECK(H5Aread(a, H5T_NATIVE_INT, &nf) >= 0);
    H5Aclose(a);
    HY_CHECK_INT(nf, 1);
    a = H5Aopen(h, "Dimension", H5P_DEFAULT);
    HY_CHECK(H5Aread(a, H5T_NATIVE_INT, &dim) >= 0);
    H5Aclose(a);
    HY_CHECK_INT(dim, 3);
    HY_CHECK(attr_d(h, "Time") == 1.5);
    HY_CHECK(attr_d(h, "Redshift") == 0.0);
    HY_CHECK(attr_d(h, "BoxSize") == 0.0);
    /* BoundingBox: a cube around the particles' extent, 5% wider */
    double box[2][3], ext[6], side = 0.0;
    HY_CHECK(hy_io_extent(&p, ext) == N);
    for (int d = 0; d < 3; d++) side = fmax(side, ext[3 + d] - ext[d]);
    a = H5Aopen(h, "BoundingBox", H5P_DEFAULT);
    HY_CHECK(a >= 0);
    hid_t as = H5Aget_space(a);
    hsize_t bdims[2] = {0, 0};
    HY_CHECK(H5Sget_simple_extent_dims(as, bdims, NULL) == 2 && bdims[0] == 2 && bdims[1] == 3);
    H5Sclose(as);
    HY_CHECK(H5Aread(a, H5T_NATIVE_DOUBLE, box) >= 0);
    H5Aclose(a);
    for (int d = 0; d < 3; d++) {
      HY_CHECK_ABS(box[1][d] - box[0][d], 1.05 * side, 1e-12);
      HY_CHECK_ABS(box[0][d] + box[1][d], ext[d] + ext[3 + d], 1e-12);
      HY_CHECK(box[0][d] < ext[d] && ext[3 + d] < box[1][d]);
    }
    HY_CHECK(attr_d(h, "HubbleParam") == 1.0);
    HY_CHECK(attr_d(h, "GravityConstant") == 4.3e-6);
    HY_CHECK(attr_d(h, "Softening") == 0.01);
    char s[256];
    attr_s(h, "Code", s, sizeof s);
    HY_CHECK(strcmp(s, "hytree") == 0);
    attr_s(h, "CodeVersion", s, sizeof s);
    HY_CHECK(strcmp(s, PACKAGE_VERSION) == 0);
    H5Gclose(h);

    hid_t u = H5Gopen2(file, "Units", H5P_DEFAULT);
    HY_CHECK(u >= 0);
    HY_CHECK(attr_d(u, "UnitLength_in_cm") == 3.085678e21);
    HY_CHECK(attr_d(u, "UnitMass_in_g") == 1.989e43);
    HY_CHECK(attr_d(u, "UnitVelocity_in_cm_per_s") == 1e5);
    HY_CHECK(attr_d(u, "UnitTime_in_s") == 3.085678e21 / 1e5);
    HY_CHECK(attr_d(u, "Unit length in cgs (U_L)") == 3.085678e21);
    HY_CHECK(attr_d(u, "Unit mass in cgs (U_M)") == 1.989e43);
    HY_CHECK(attr_d(u, "Unit time in cgs (U_t)") == 3.085678e21 / 1e5);
    HY_CHECK(attr_d(u, "Unit current in cgs (U_I)") == 1.0);
    HY_CHECK(attr_d(u, "Unit temperature in cgs (U_T)") == 1.0);
    H5Gclose(u);

    hid_t rp = H5Gopen2(file, "RunParameters", H5P_DEFAULT);
    HY_CHECK(rp >= 0);
    attr_s(rp, "OutputDir", s, sizeof s);
    HY_CHECK_MSG(strcmp(s, "out") == 0, "OutputDir = \"%s\"", s);
    attr_s(rp, "TimeMax", s, sizeof s);
    HY_CHECK(strcmp(s, "10.0") == 0);
    attr_s(rp, "SofteningLength", s, sizeof s);
    HY_CHECK(strcmp(s, "0.01") == 0);
    int nattr = 0;
    HY_CHECK(H5Aiterate2(rp, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, count_attr, &nattr) >= 0);
    HY_CHECK_INT(nattr, 3);
    H5Gclose(rp);
    /* the values as given: `auto` kept, the comment dropped */
    hid_t rg = H5Gopen2(file, "RunParametersGiven", H5P_DEFAULT);
    HY_CHECK(rg >= 0);
    attr_s(rg, "SofteningLength", s, sizeof s);
    HY_CHECK_MSG(strcmp(s, "auto") == 0, "SofteningLength = \"%s\"", s);
    nattr = 0;
    HY_CHECK(H5Aiterate2(rg, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, count_attr, &nattr) >= 0);
    HY_CHECK_INT(nattr, 2);
    H5Gclose(rg);

    HY_CHECK(H5Lexists(file, "PartType0", H5P_DEFAULT) == 0);
    HY_CHECK(H5Lexists(file, "PartType3", H5P_DEFAULT) == 0);
    /* Optional fields, compared bitwise with p in type order. */
    static double acc[3 * N], pot[N];
    read_dset(file, "/PartType1/Acceleration", H5T_NATIVE_DOUBLE, acc);
    read_dset(file, "/PartType2/Acceleration", H5T_NATIVE_DOUBLE, acc + 3 * n1);
    read_dset(file, "/PartType1/Potential", H5T_NATIVE_DOUBLE, pot);
    read_dset(file, "/PartType2/Potential", H5T_NATIVE_DOUBLE, pot + n1);
    bad = 0;
    for (k = 0; k < N; k++) {
      bad += memcmp(acc + 3 * k, p.acc + 3 * perm[k], 3 * sizeof(double)) != 0;
      bad += memcmp(pot + k, p.pot + perm[k], sizeof(double)) != 0;
    }
    HY_CHECK_INT(bad, 0);
    HY_CHECK(H5Fclose(file) >= 0);
  }

  /* Without optional fields: no Acceleration dataset. */
  info.fields = 0;
  info.params_text = NULL;
  info.params_given = NULL;
  rc = hy_io_write_hdf5(path, &p, &info, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  HY_CHECK(file >= 0);
  HY_CHECK(H5Lexists(file, "/PartType1/Acceleration", H5P_DEFAULT) == 0);
  HY_CHECK(H5Lexists(file, "RunParameters", H5P_DEFAULT) == 0);
  HY_CHECK(H5Lexists(file, "RunParametersGiven", H5P_DEFAULT) == 0);
  H5Fclose(file);
  HY_CHECK(unlink(path) == 0);

  /* Target directory missing: failure with a message, nothing created. */
  const char *bad_path = hy_tmp_path(1, "no-such-dir/snap.hdf5");
  rc = hy_io_write_hdf5(bad_path, &p, &info, &err);
  HY_CHECK_INT(rc, -1);
  HY_CHECK_CONTAINS(err.msg, bad_path);
  HY_CHECK(strchr(err.msg, '\n') == NULL);
  printf("expected error: %s\n", err.msg);
  HY_CHECK_INT(hy_tmp_count(), 0);

  /* Particle type out of range. */
  p.type[3] = 6;
  rc = hy_io_write_hdf5(path, &p, &info, &err);
  HY_CHECK_INT(rc, -1);
  HY_CHECK_CONTAINS(err.msg, "type 6");
  HY_CHECK_INT(hy_tmp_count(), 0);

  hy_part_free(&p);
  hy_part_free(&q);
}

/* ------------------------------------------- files written like other codes */

static void put_attr(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int n, const void *v) {
  hsize_t d = (hsize_t)n;
  hid_t s = n ? H5Screate_simple(1, &d, NULL) : H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(loc, name, ftype, s, H5P_DEFAULT, H5P_DEFAULT);
  HY_CHECK(a >= 0 && H5Awrite(a, mtype, v) >= 0);
  H5Aclose(a);
  H5Sclose(s);
}

static void put_dset(hid_t loc, const char *name, hid_t ftype, hid_t mtype, size_t n, int cols,
                     const void *v) {
  hsize_t d[2] = {n, (hsize_t)cols};
  hid_t s = H5Screate_simple(cols > 1 ? 2 : 1, d, NULL);
  hid_t ds = H5Dcreate2(loc, name, ftype, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  HY_CHECK(ds >= 0 && H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
  H5Dclose(ds);
  H5Sclose(s);
}

/* Gadget-2 style: int32 counts, MassTable for type 1, float32 coordinates and
 * velocities, no ParticleIDs. variant 1: NumFilesPerSnapshot = 2; variant 2:
 * Velocities with a wrong number of rows; variant 3: no MassTable entry and no
 * Masses; variant 4: Coordinates created but never written; variant 5: a
 * header count of 2^40 (refused before anything is allocated for it). */
static void foreign_file(const char *path, int variant, size_t n) {
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  HY_CHECK(f >= 0);
  hid_t h = H5Gcreate2(f, "Header", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  int np[6] = {0, (int)n, 0, 0, 0, 0}, nf = variant == 1 ? 2 : 1;
  double mt[6] = {0, variant == 3 ? 0.0 : 0.125, 0, 0, 0, 0}, t = 2.0;
  uint64_t np64[6] = {0, (uint64_t)1 << 40, 0, 0, 0, 0};
  if (variant == 5)
    put_attr(h, "NumPart_ThisFile", H5T_STD_U64LE, H5T_NATIVE_UINT64, 6, np64);
  else
    put_attr(h, "NumPart_ThisFile", H5T_STD_I32LE, H5T_NATIVE_INT, 6, np);
  put_attr(h, "MassTable", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 6, mt);
  put_attr(h, "Time", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, &t);
  put_attr(h, "NumFilesPerSnapshot", H5T_STD_I32LE, H5T_NATIVE_INT, 0, &nf);
  H5Gclose(h);
  hid_t g = H5Gcreate2(f, "PartType1", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  float x[3 * 64];
  for (size_t i = 0; i < 3 * n; i++) x[i] = (float)i / 7.0f;
  if (variant == 4) {
    hsize_t d[2] = {n, 3};
    hid_t s = H5Screate_simple(2, d, NULL);
    hid_t ds = H5Dcreate2(g, "Coordinates", H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    HY_CHECK(ds >= 0);
    H5Dclose(ds);
    H5Sclose(s);
  } else {
    put_dset(g, "Coordinates", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, n, 3, x);
  }
  put_dset(g, "Velocities", H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, variant == 2 ? n - 1 : n, 3, x);
  H5Gclose(g);
  HY_CHECK(H5Fclose(f) >= 0);
}

static void foreign(void) {
  const char *path = hy_tmp_path(2, "foreign.hdf5");
  struct hy_part q;
  struct hy_err err;
  hy_part_init(&q);
  const size_t n = 64;
  foreign_file(path, 0, n);
  double t = -1;
  int rc = hy_io_read_ic(path, HY_FMT_AUTO, &q, &t, &err);
  HY_CHECK_MSG(rc == 0, "%s", err.msg);
  HY_CHECK_INT(q.n, n);
  HY_CHECK(t == 2.0);
  int bad = 0;
  for (size_t i = 0; i < q.n; i++) {
    bad += q.id[i] != i + 1 || q.mass[i] != 0.125 || q.type[i] != 1;
    for (int c = 0; c < 3; c++) {
      double want = (double)((float)(3 * i + (size_t)c) / 7.0f);
      bad += q.pos[3 * i + c] != want || q.vel[3 * i + c] != want;
    }
  }
  HY_CHECK_INT(bad, 0);

  static const char *const needles[] = {"", "NumFilesPerSnapshot = 2: this file is one part of a multi-file",
                                        "/PartType1/Velocities has shape [63, 3], expected [64, 3]",
                                        "no Masses dataset and MassTable[1] is 0",
                                        "/PartType1/Coordinates has no data stored for some or all of its 64 rows",
                                        "/PartType1/Coordinates has shape [64, 3], expected [1099511627776, 3]"};
  for (int v = 1; v <= 5; v++) {
    foreign_file(path, v, n);
    rc = hy_io_read_ic(path, HY_FMT_AUTO, &q, &t, &err);
    HY_CHECK_INT(rc, -1);
    HY_CHECK_INT(q.n, 0);
    HY_CHECK_CONTAINS(err.msg, needles[v]);
    HY_CHECK_CONTAINS(err.msg, path);
    printf("expected error: %s\n", err.msg);
  }
  HY_CHECK(unlink(path) == 0);
  rc = hy_io_read_ic(path, HY_FMT_HDF5, &q, &t, &err);
  HY_CHECK_INT(rc, -1);
  HY_CHECK_CONTAINS(err.msg, "cannot open: No such file or directory");
  hy_part_free(&q);
}

static void text_atomic(void) {
  const char *path = hy_tmp_path(3, "params-used.txt");
  struct hy_err err;
  HY_CHECK(hy_io_write_text_atomic(path, "A 1\n", &err) == 0);
  HY_CHECK(hy_io_write_text_atomic(path, "B 2\n", &err) == 0);
  FILE *f = fopen(path, "r");
  char buf[16] = {0};
  HY_CHECK(f && fread(buf, 1, sizeof buf - 1, f) == 4);
  if (f) fclose(f);
  HY_CHECK(strcmp(buf, "B 2\n") == 0);
  HY_CHECK_INT(hy_tmp_count(), 1);
  HY_CHECK(unlink(path) == 0);
  char tmp[64];
  HY_CHECK(hy_io_tmpname("a/b", tmp, sizeof tmp) == 0);
  char want[64];
  snprintf(want, sizeof want, "a/b.tmp.%ld", (long)getpid());
  HY_CHECK(strcmp(tmp, want) == 0);
  HY_CHECK(hy_io_tmpname("a/b", tmp, 4) == -1);
  HY_CHECK(hy_io_write_text_atomic(hy_tmp_path(3, "nodir/x.txt"), "x", &err) == -1);
  HY_CHECK_CONTAINS(err.msg, "nodir/x.txt");
}

int main(void) {
  hy_tmp_setup("io-hdf5");
  enum hy_ic_format f;
  HY_CHECK(hy_io_format_parse("gadget2", &f) == 0 && f == HY_FMT_GADGET2);
  HY_CHECK(hy_io_format_parse("hdf5", &f) == 0 && f == HY_FMT_HDF5);
  HY_CHECK(hy_io_format_parse("hdf", &f) == -1);
  HY_CHECK(strcmp(hy_io_format_name(HY_FMT_GADGET1), "gadget1") == 0);
  round_trip();
  foreign();
  text_atomic();
  HY_CHECK_INT(hy_tmp_count(), 0);
  hy_tmp_cleanup();
  return hy_test_result();
}
