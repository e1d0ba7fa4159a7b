/* SPDX-License-Identifier: GPL-3.0-or-later
 * io_hdf5.c: Gadget-style HDF5 snapshots ("SnapFormat 3"). Owns the writer
 * (/Header, /Units, /RunParameters and one /PartTypeN group per particle type
 * present, written under a temporary name and published atomically) and the
 * reader for single-file snapshots as written by Gadget-2/3/4, SWIFT, AREPO
 * and IC generators (float or double coordinates, any integer ID width,
 * Masses dataset or MassTable). HDF5's automatic error printing is switched
 * off; every HDF5 return is checked and turned into a one-line message that
 * names the file and the object. Validation of the values read is left to
 * hy_io_read_ic. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#if defined(__SANITIZE_ADDRESS__)
#define HY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HY_ASAN 1
#endif
#endif
#ifdef HY_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#include "alloc.h"
#include "io.h"
#include "io_internal.h"

/* ------------------------------------------------------------ write helpers */

/* Write context: first failure wins, later calls are no-ops. */
struct wctx {
  const char *path;
  struct hy_err *err;
  int failed;
};

static int wfail_errno(struct wctx *w, const char *what, const char *obj, int e) {
  if (!w->failed)
    hy_err_set(w->err, "%s: HDF5 error: cannot %s %s%s%s", w->path, what, obj, e ? ": " : "", e ? strerror(e) : "");
  w->failed = 1;
  return -1;
}

static int wfail(struct wctx *w, const char *what, const char *obj) { return wfail_errno(w, what, obj, 0); }

/* HDF5 1.10 frees a file's state when H5Fclose fails (a write error while
 * flushing, e.g. a full disk) but keeps its ID, and then crashes on that ID
 * when it closes itself at exit (HDFFV-11052, fixed in 1.14). So HDF5 gets no
 * atexit handler (hy_io_hdf5_init) and is closed only if no file failed to
 * close (hy_io_hdf5_close). */
static int hdf5_poisoned = 0;

void hy_io_hdf5_init(void) {
  herr_t rc = H5dont_atexit(); /* fails only after HDF5 is already in use: then nothing changes */
  (void)rc;
}

void hy_io_hdf5_close(void) {
  if (!hdf5_poisoned) {
    herr_t rc = H5close(); /* the end of the process: nothing is left to report to */
    (void)rc;
  }
}

/* Attribute of rank 0 (rank == 0) or of rank 1 or 2 with the given dims. */
static void attr_write_dims(struct wctx *w, hid_t loc, const char *name, hid_t file_type, hid_t mem_type,
                            int rank, const hsize_t *dims, const void *data) {
  if (w->failed) return;
  hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims, NULL);
  if (space < 0) {
    wfail(w, "create dataspace for attribute", name);
    return;
  }
  hid_t a = H5Acreate2(loc, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0) {
    H5Sclose(space);
    wfail(w, "create attribute", name);
    return;
  }
  errno = 0;
  herr_t rc = H5Awrite(a, mem_type, data);
  int e = errno;
  if (rc >= 0) {
    errno = 0;
    rc = H5Aclose(a);
    e = errno;
  } else {
    H5Aclose(a);
  }
  if (rc < 0) wfail_errno(w, "write attribute", name, e);
  if (H5Sclose(space) < 0) wfail(w, "close dataspace of attribute", name);
}

/* Attribute of rank 0 (n == 0) or rank 1 with n elements. */
static void attr_write(struct wctx *w, hid_t loc, const char *name, hid_t file_type, hid_t mem_type,
                       size_t n, const void *data) {
  hsize_t dims[1] = {(hsize_t)n};
  attr_write_dims(w, loc, name, file_type, mem_type, n == 0 ? 0 : 1, dims, data);
}

static void attr_double(struct wctx *w, hid_t loc, const char *name, double v) {
  attr_write(w, loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, &v);
}

static void attr_int(struct wctx *w, hid_t loc, const char *name, int v) {
  attr_write(w, loc, name, H5T_STD_I32LE, H5T_NATIVE_INT, 0, &v);
}

static void attr_string(struct wctx *w, hid_t loc, const char *name, const char *s) {
  if (w->failed) return;
  hid_t t = H5Tcopy(H5T_C_S1);
  if (t < 0) {
    wfail(w, "create string type for attribute", name);
    return;
  }
  size_t len = strlen(s);
  if (H5Tset_size(t, len > 0 ? len : 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLPAD) < 0) {
    H5Tclose(t);
    wfail(w, "set string type for attribute", name);
    return;
  }
  attr_write(w, loc, name, t, t, 0, len > 0 ? s : " ");
  if (H5Tclose(t) < 0) wfail(w, "close string type of attribute", name);
}

static hid_t group_create(struct wctx *w, hid_t loc, const char *name) {
  if (w->failed) return -1;
  hid_t g = H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (g < 0) wfail(w, "create group", name);
  return g;
}

static void group_close(struct wctx *w, hid_t g, const char *name) {
  if (g >= 0 && H5Gclose(g) < 0) wfail(w, "close group", name);
}

/* Dataset [n] or [n, 3] (cols == 3). */
static void dset_write(struct wctx *w, hid_t loc, const char *obj, const char *name,
                       hid_t file_type, hid_t mem_type, size_t n, int cols, const void *data) {
  if (w->failed) return;
  hsize_t dims[2] = {(hsize_t)n, (hsize_t)cols};
  hid_t space = H5Screate_simple(cols > 1 ? 2 : 1, dims, NULL);
  if (space < 0) {
    wfail(w, "create dataspace for", obj);
    return;
  }
  hid_t d = H5Dcreate2(loc, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (d < 0) {
    H5Sclose(space);
    wfail(w, "create dataset", obj);
    return;
  }
  errno = 0;
  herr_t rc = n > 0 ? H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) : 0;
  int e = errno;
  if (rc >= 0) {
    errno = 0;
    rc = H5Dclose(d);
    e = errno;
  } else {
    H5Dclose(d);
  }
  if (rc < 0) wfail_errno(w, "write dataset", obj, e);
  if (H5Sclose(space) < 0) wfail(w, "close dataspace of", obj);
}

/* Group `name`: one attribute per "Key Value" line of a parameter file. */
static void write_run_params(struct wctx *w, hid_t file, const char *name, const char *text) {
  hid_t g = group_create(w, file, name);
  if (g < 0) return;
  const char *line = text;
  char *buf = hy_malloc("parameter line", strlen(text) + 1, 1);
  while (*line && !w->failed) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    memcpy(buf, line, len);
    buf[len] = '\0';
    line = end ? end + 1 : line + len;
    char *cmt = strchr(buf, '%');
    if (cmt) *cmt = '\0';
    char *s = buf;
    while (isspace((unsigned char)*s)) s++;
    if (*s == '\0' || *s == '#') continue;
    char *k_end = s;
    while (*k_end && !isspace((unsigned char)*k_end)) k_end++;
    char *v = k_end;
    if (*v) *v++ = '\0';
    while (isspace((unsigned char)*v)) v++;
    size_t vl = strlen(v);
    while (vl > 0 && isspace((unsigned char)v[vl - 1])) v[--vl] = '\0';
    htri_t ex = H5Aexists(g, s);
    if (ex < 0) {
      char what[64];
      snprintf(what, sizeof what, "query attribute /%s/", name);
      wfail(w, what, s);
      break;
    }
    if (ex > 0) continue; /* a repeated key: the first one is kept */
    attr_string(w, g, s, v);
  }
  hy_free(buf);
  group_close(w, g, name);
}

/* Several files per snapshot: NumPart_Total must cover this file's counts. */
static int check_totals(const char *path, const struct hy_snap_info *info, const uint64_t *counts,
                        struct hy_err *err) {
  for (int t = 0; t < HY_NTYPES; t++) {
    if (info->npart_total[t] < counts[t])
      return hy_err_set(err, "%s: NumPart_Total[%d] = %llu is less than the %llu particles of this file",
                        path, t, (unsigned long long)info->npart_total[t],
                        (unsigned long long)counts[t]);
  }
  return 0;
}

/* The temporary file tmp, closed strongly (every object with it); -1 and w
 * failed if it cannot be made. */
static hid_t create_file(struct wctx *w, const char *tmp) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  hid_t file = -1;
  if (fapl < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
    wfail(w, "set up file access properties for", tmp);
  } else {
    errno = 0;
    file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0) {
      /* The sec2 driver leaves open()'s errno behind; report it when set. */
      int e = errno;
      hy_err_set(w->err, "%s: cannot create HDF5 file %s%s%s", w->path, tmp, e ? ": " : "",
                 e ? strerror(e) : "");
      w->failed = 1;
    }
  }
  if (fapl >= 0) H5Pclose(fapl);
  return file;
}

/* Header/BoundingBox [2][3], lower then upper corner: a cube around the
 * particles, 5% wider than their extent so that none lies on its faces (yt
 * takes it as bounding_box= and reads no coordinates to find one). BoxSize
 * stays 0: a box there would mean a periodic one from the origin. Nothing is
 * written without a finite coordinate. */
static void write_bounding_box(struct wctx *w, hid_t g, const double ext[6]) {
  double side = 0.0, far = 0.0, c[3], box[2][3];
  for (int d = 0; d < 3; d++) {
    if (!(ext[d] <= ext[3 + d])) return;
    side = fmax(side, ext[3 + d] - ext[d]);
    c[d] = 0.5 * ext[d] + 0.5 * ext[3 + d];
    far = fmax(far, fabs(c[d]));
  }
  /* wide enough that its faces differ from the centre in double precision
   * (one particle, or all in one place, far from the origin) */
  side = fmax(1.05 * side, 1e-9 * far);
  if (!(side > 0.0)) side = 1.0; /* all particles at the origin */
  for (int d = 0; d < 3; d++) {
    box[0][d] = c[d] - 0.5 * side;
    box[1][d] = c[d] + 0.5 * side;
  }
  const hsize_t dims[2] = {2, 3};
  attr_write_dims(w, g, "BoundingBox", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2, dims, box);
}

static void write_header(struct wctx *w, hid_t file, const uint64_t *counts, int nfiles,
                         const struct hy_snap_info *info, const double ext[6]) {
  hid_t g = group_create(w, file, "Header");
  if (g < 0) return;
  uint64_t this_file[HY_NTYPES], total[HY_NTYPES];
  uint32_t high[HY_NTYPES];
  double mtab[HY_NTYPES] = {0};
  for (int t = 0; t < HY_NTYPES; t++) {
    this_file[t] = counts[t];
    uint64_t all = nfiles > 1 ? info->npart_total[t] : counts[t];
    /* Gadget/SWIFT convention: the whole count is NumPart_Total + (HighWord << 32) */
    total[t] = all & 0xffffffffu;
    high[t] = (uint32_t)(all >> 32);
  }
  attr_write(w, g, "NumPart_ThisFile", H5T_STD_U64LE, H5T_NATIVE_UINT64, 6, this_file);
  attr_write(w, g, "NumPart_Total", H5T_STD_U64LE, H5T_NATIVE_UINT64, 6, total);
  attr_write(w, g, "NumPart_Total_HighWord", H5T_STD_U32LE, H5T_NATIVE_UINT32, 6, high);
  attr_write(w, g, "MassTable", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 6, mtab);
  attr_double(w, g, "Time", info->time);
  attr_double(w, g, "Redshift", 0.0);
  attr_double(w, g, "BoxSize", 0.0);
  attr_int(w, g, "NumFilesPerSnapshot", nfiles);
  attr_double(w, g, "Omega0", 0.0);
  attr_double(w, g, "OmegaLambda", 0.0);
  attr_double(w, g, "HubbleParam", 1.0);
  attr_int(w, g, "Flag_Entropy_ICs", 0);
  attr_int(w, g, "Dimension", 3);
  attr_string(w, g, "Code", "hytree");
  attr_string(w, g, "CodeVersion", PACKAGE_VERSION);
  attr_double(w, g, "GravityConstant", info->gravity_constant);
  attr_double(w, g, "Softening", info->softening);
  write_bounding_box(w, g, ext);
  group_close(w, g, "/Header");
}

static void write_units(struct wctx *w, hid_t file, const struct hy_units *u) {
  hid_t g = group_create(w, file, "Units");
  if (g < 0) return;
  double t_s = u->velocity_cm_per_s != 0.0 ? u->length_cm / u->velocity_cm_per_s : 0.0;
  attr_double(w, g, "UnitLength_in_cm", u->length_cm);
  attr_double(w, g, "UnitMass_in_g", u->mass_g);
  attr_double(w, g, "UnitVelocity_in_cm_per_s", u->velocity_cm_per_s);
  attr_double(w, g, "UnitTime_in_s", t_s);
  attr_double(w, g, "Unit length in cgs (U_L)", u->length_cm);
  attr_double(w, g, "Unit mass in cgs (U_M)", u->mass_g);
  attr_double(w, g, "Unit time in cgs (U_t)", t_s);
  attr_double(w, g, "Unit current in cgs (U_I)", 1.0);
  attr_double(w, g, "Unit temperature in cgs (U_T)", 1.0);
  group_close(w, g, "/Units");
}

/* Room to gather one type's particles into contiguous arrays. */
struct type_bufs {
  double *buf3, *buf1;
  uint64_t *bufid;
};

/* The n particles idx[0..n) of type t as /PartTypeT. */
static void write_type(struct wctx *w, hid_t file, int t, const struct hy_part *p, const size_t *idx, size_t n,
                       unsigned fields, const struct type_bufs *b) {
  double *buf3 = b->buf3, *buf1 = b->buf1;
  uint64_t *bufid = b->bufid;
  char gname[32], obj[64];
  snprintf(gname, sizeof gname, "PartType%d", t);
  hid_t g = group_create(w, file, gname);
  if (g < 0) return;
#define OBJ(name) (snprintf(obj, sizeof obj, "/%s/%s", gname, name), obj)
  for (size_t k = 0; k < n; k++)
    for (int c = 0; c < 3; c++) buf3[3 * k + c] = p->pos[3 * idx[k] + c];
  dset_write(w, g, OBJ("Coordinates"), "Coordinates", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 3,
             buf3);
  for (size_t k = 0; k < n; k++)
    for (int c = 0; c < 3; c++) buf3[3 * k + c] = p->vel[3 * idx[k] + c];
  dset_write(w, g, OBJ("Velocities"), "Velocities", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 3,
             buf3);
  for (size_t k = 0; k < n; k++) bufid[k] = p->id[idx[k]];
  dset_write(w, g, OBJ("ParticleIDs"), "ParticleIDs", H5T_STD_U64LE, H5T_NATIVE_UINT64, n, 1,
             bufid);
  for (size_t k = 0; k < n; k++) buf1[k] = p->mass[idx[k]];
  dset_write(w, g, OBJ("Masses"), "Masses", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 1, buf1);
  if (fields & HY_FIELD_ACC) {
    for (size_t k = 0; k < n; k++)
      for (int c = 0; c < 3; c++) buf3[3 * k + c] = p->acc[3 * idx[k] + c];
    dset_write(w, g, OBJ("Acceleration"), "Acceleration", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n,
               3, buf3);
  }
  if (fields & HY_FIELD_POT) {
    for (size_t k = 0; k < n; k++) buf1[k] = p->pot[idx[k]];
    dset_write(w, g, OBJ("Potential"), "Potential", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, n, 1,
               buf1);
  }
#undef OBJ
  snprintf(obj, sizeof obj, "/%s", gname);
  group_close(w, g, obj);
}

/* /PartTypeN for every type present, in the type order of `order`. */
static void write_particles(struct wctx *w, hid_t file, const struct hy_part *p, const size_t *order,
                            const uint64_t *counts, unsigned fields) {
  size_t nmax = 0;
  for (int t = 0; t < HY_NTYPES; t++)
    if (counts[t] > nmax) nmax = (size_t)counts[t];
  struct type_bufs b;
  b.buf3 = hy_malloc("HDF5 vector buffer", hy_size_mul_or_die(nmax, 3, "HDF5 buffer"), sizeof(double));
  b.buf1 = hy_malloc("HDF5 scalar buffer", nmax, sizeof(double));
  b.bufid = hy_malloc("HDF5 ID buffer", nmax, sizeof(uint64_t));
  size_t start = 0;
  for (int t = 0; t < HY_NTYPES && !w->failed; t++) {
    size_t n = (size_t)counts[t];
    const size_t *idx = order + start;
    start += n;
    if (n == 0) continue;
    write_type(w, file, t, p, idx, n, fields, &b);
  }
  hy_free(b.buf3);
  hy_free(b.buf1);
  hy_free(b.bufid);
}

/* Close the file and publish it under path, or discard it after a failure. */
static int close_and_publish(struct wctx *w, hid_t file, const char *tmp) {
  if (file >= 0) {
    errno = 0;
    if (H5Fclose(file) < 0) {
      hdf5_poisoned = 1;
      wfail_errno(w, "write and close", tmp, errno);
    }
  }
  if (w->failed) {
    hy_io_discard_tmp(tmp);
    return -1;
  }
  return hy_io_publish(tmp, w->path, w->err);
}

int hy_io_write_hdf5(const char *path, const struct hy_part *p, const struct hy_snap_info *info,
                     struct hy_err *err) {
  uint64_t counts[HY_NTYPES];
  size_t *order = hy_io_type_order(path, p, counts, err);
  if (!order) return -1;
  const int nfiles = info->num_files > 1 ? info->num_files : 1;
  if (nfiles > 1 && check_totals(path, info, counts, err) != 0) {
    hy_free(order);
    return -1;
  }
  if (H5Eset_auto2(H5E_DEFAULT, NULL, NULL) < 0) {
    hy_free(order);
    return hy_err_set(err, "%s: cannot silence the HDF5 error stack", path);
  }
  struct wctx w = {path, err, 0};
  char *tmp = hy_io_tmpname_alloc(path);
  hid_t file = create_file(&w, tmp);
  double ext[6];
  if (info->has_extent)
    memcpy(ext, info->extent, sizeof ext);
  else
    hy_io_extent(p, ext);
  write_header(&w, file, counts, nfiles, info, ext);
  write_units(&w, file, &info->units);
  if (info->params_text && !w.failed) write_run_params(&w, file, "RunParameters", info->params_text);
  if (info->params_given && !w.failed) write_run_params(&w, file, "RunParametersGiven", info->params_given);
  write_particles(&w, file, p, order, counts, info->fields);
  hy_free(order);
  int rc = close_and_publish(&w, file, tmp);
  hy_free(tmp);
  return rc;
}

/* ------------------------------------------------------------------ reader */

struct rctx {
  const char *path;
  struct hy_err *err;
  int multi;                  /**< in: reading one file of a multi-file set */
  int probe;                  /**< in: the headers only (probe_headers): nothing is read into p */
  hsize_t fsize;              /**< the open file's size (0: unknown) */
  uint64_t id_base;           /**< in: IDs made up for files without ParticleIDs start after it */
  int num_files;              /**< out: NumFilesPerSnapshot (1 when absent) */
  uint64_t total[HY_NTYPES];  /**< out (multi only): NumPart_Total (+HighWord), or the file's counts */
};

/* Read a numeric header attribute of up to 6 elements as mem_type; returns
 * 1 if read, 0 if absent, -1 on error. n is the number of elements wanted
 * (1 for scalars: a scalar or 1-element attribute). */
static int attr_read(struct rctx *r, hid_t g, const char *name, hid_t mem_type, size_t n,
                     void *out) {
  htri_t ex = H5Aexists(g, name);
  if (ex < 0) return hy_err_set(r->err, "%s: HDF5 error: cannot query /Header/%s", r->path, name);
  if (ex == 0) return 0;
  hid_t a = H5Aopen(g, name, H5P_DEFAULT);
  if (a < 0) return hy_err_set(r->err, "%s: HDF5 error: cannot open /Header/%s", r->path, name);
  hid_t s = H5Aget_space(a);
  hssize_t np = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
  if (s >= 0) H5Sclose(s);
  if (np != (hssize_t)n) {
    H5Aclose(a);
    return hy_err_set(r->err, "%s: /Header/%s has %lld elements, expected %zu", r->path, name,
                      (long long)np, n);
  }
  herr_t rc = H5Aread(a, mem_type, out);
  if (H5Aclose(a) < 0 || rc < 0)
    return hy_err_set(r->err, "%s: HDF5 error: cannot read /Header/%s", r->path, name);
  return 1;
}

/* 1 when every element of dataset d (of the given rank and dims) has data
 * stored in the file, 0 when some has not (it would read as the fill value),
 * -1 on error. Chunked: all chunks are written (HDF5 >= 1.10.5; before,
 * at least one); contiguous and compact: the storage is allocated. Virtual
 * datasets are left to HDF5. */
static int dset_stored(hid_t d, int rank, const hsize_t dims[2]) {
  hid_t dcpl = H5Dget_create_plist(d);
  if (dcpl < 0) return -1;
  H5D_layout_t layout = H5Pget_layout(dcpl);
  hsize_t cdims[2] = {1, 1};
  int crank = layout == H5D_CHUNKED ? H5Pget_chunk(dcpl, 2, cdims) : 0;
  H5Pclose(dcpl);
  if (layout < 0 || crank < 0) return -1;
  if (layout == H5D_VIRTUAL) return 1;
#if H5_VERSION_GE(1, 10, 5)
  if (layout == H5D_CHUNKED) {
    if (crank != rank) return -1;
    hsize_t want = 1, have = 0;
    for (int i = 0; i < rank; i++) {
      if (cdims[i] == 0) return -1;
      want *= (dims[i] + cdims[i] - 1) / cdims[i];
    }
    hid_t space = H5Dget_space(d);
    herr_t rc = space >= 0 ? H5Dget_num_chunks(d, space, &have) : -1;
    if (space >= 0) H5Sclose(space);
    if (rc < 0) return -1;
    return have == want;
  }
#endif
  H5D_space_status_t status;
  if (H5Dget_space_status(d, &status) < 0) return -1;
  return status != H5D_SPACE_STATUS_NOT_ALLOCATED;
}

/* 0 when d's data is stored contiguously (in its file, of fsize bytes)
 * and does not lie wholly inside it, else 1. */
static int contig_inside(hid_t d, hsize_t fsize) {
  hid_t dcpl = H5Dget_create_plist(d);
  if (dcpl < 0) return 1;
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  const int external = H5Pget_external_count(dcpl) > 0;
  H5Pclose(dcpl);
  if (layout != H5D_CONTIGUOUS || external) return 1;
  const haddr_t off = H5Dget_offset(d);
  const hsize_t size = H5Dget_storage_size(d);
  if (fsize == 0 || off == HADDR_UNDEF) return 1; /* left to the read, which reports it */
  return off <= fsize && size <= fsize - off;
}

/* Open dataset name of group g and check that it is an [n] or [n, 3] array
 * (cols == 3) whose storage holds data for all its elements (a dataset that
 * was created but never, or only partly, written is refused: it would read
 * as fill values). Returns 1 with *out open, 0 if the dataset does not
 * exist, -1 on error. */
static int dset_open(struct rctx *r, hid_t g, const char *gname, const char *name, size_t n,
                     int cols, hid_t *out) {
  htri_t ex = H5Lexists(g, name, H5P_DEFAULT);
  if (ex < 0)
    return hy_err_set(r->err, "%s: HDF5 error: cannot query /%s/%s", r->path, gname, name);
  if (ex == 0) return 0;
  hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
  if (d < 0) return hy_err_set(r->err, "%s: HDF5 error: cannot open /%s/%s", r->path, gname, name);
  hid_t s = H5Dget_space(d);
  int rank = s >= 0 ? H5Sget_simple_extent_ndims(s) : -1;
  hsize_t dims[2] = {0, 0};
  if (rank >= 1 && rank <= 2 && H5Sget_simple_extent_dims(s, dims, NULL) < 0) rank = -1;
  if (s >= 0) H5Sclose(s);
  if (rank < 0) {
    H5Dclose(d);
    return hy_err_set(r->err, "%s: HDF5 error: cannot get the shape of /%s/%s", r->path, gname,
                      name);
  }
  int ok = cols == 1 ? (rank == 1 && dims[0] == n) || (rank == 2 && dims[0] == n && dims[1] == 1)
                     : rank == 2 && dims[0] == n && dims[1] == (hsize_t)cols;
  if (!ok) {
    H5Dclose(d);
    if (cols == 1)
      return hy_err_set(r->err, "%s: /%s/%s has shape %s[%llu%s], header count is %zu", r->path,
                        gname, name, "", (unsigned long long)dims[0], rank == 2 ? ",..." : "", n);
    return hy_err_set(r->err, "%s: /%s/%s has shape [%llu, %llu], expected [%zu, %d]", r->path,
                      gname, name, (unsigned long long)dims[0],
                      (unsigned long long)(rank == 2 ? dims[1] : 0), n, cols);
  }
  int stored = n > 0 ? dset_stored(d, rank, dims) : 1;
  if (stored > 0 && n > 0 && !contig_inside(d, r->fsize)) {
    H5Dclose(d);
    return hy_err_set(r->err, "%s: the data of /%s/%s lies beyond the end of the file (a truncated file?)", r->path,
                      gname, name);
  }
  if (stored <= 0) {
    H5Dclose(d);
    if (stored < 0)
      return hy_err_set(r->err, "%s: HDF5 error: cannot query the storage of /%s/%s", r->path,
                        gname, name);
    return hy_err_set(r->err,
                      "%s: /%s/%s has no data stored for some or all of its %zu rows (never written)",
                      r->path, gname, name, n);
  }
  *out = d;
  return 1;
}

/* Read dataset name of group g (checked by dset_open) into out as mem_type.
 * Returns 1 if read, 0 if the dataset does not exist, -1 on error. */
static int dset_read(struct rctx *r, hid_t g, const char *gname, const char *name, size_t n,
                     int cols, hid_t mem_type, void *out) {
  hid_t d;
  int rc = dset_open(r, g, gname, name, n, cols, &d);
  if (rc <= 0) return rc;
  herr_t hrc = n > 0 ? H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) : 0;
  if (H5Dclose(d) < 0 || hrc < 0)
    return hy_err_set(r->err, "%s: HDF5 error: cannot read /%s/%s", r->path, gname, name);
  return 1;
}

/* Before anything is allocated for the header's counts: every type with
 * particles has its group and a Coordinates dataset of that many rows with
 * its data stored. */
static int check_types(struct rctx *r, hid_t file, const uint64_t counts[HY_NTYPES]) {
  for (int t = 0; t < HY_NTYPES; t++) {
    size_t n = (size_t)counts[t];
    if (n == 0) continue;
    char gname[32];
    snprintf(gname, sizeof gname, "PartType%d", t);
    htri_t ex = H5Lexists(file, gname, H5P_DEFAULT);
    if (ex <= 0)
      return hy_err_set(r->err, "%s: /Header announces %zu particles of type %d but there is no /%s",
                        r->path, n, t, gname);
    hid_t g = H5Gopen2(file, gname, H5P_DEFAULT);
    if (g < 0) return hy_err_set(r->err, "%s: HDF5 error: cannot open /%s", r->path, gname);
    hid_t d;
    int rc = dset_open(r, g, gname, "Coordinates", n, 3, &d);
    if (rc == 0) rc = hy_err_set(r->err, "%s: /%s has no Coordinates dataset", r->path, gname);
    if (rc > 0 && H5Dclose(d) < 0)
      rc = hy_err_set(r->err, "%s: HDF5 error: cannot close /%s/Coordinates", r->path, gname);
    if (H5Gclose(g) < 0 && rc > 0)
      rc = hy_err_set(r->err, "%s: HDF5 error: cannot close /%s", r->path, gname);
    if (rc < 0) return -1;
  }
  return 0;
}

/* Read dataset d of n rows of cols values, block by block into a small
 * buffer, and drop what it holds (probe_types). */
static void read_through(hid_t d, size_t n, int cols) {
  enum { ROWS = 16384 };
  double *buf = malloc(ROWS * 3 * sizeof(double));
  hid_t fs = H5Dget_space(d);
  const int rank = fs >= 0 ? H5Sget_simple_extent_ndims(fs) : -1;
  for (size_t lo = 0; buf && rank >= 1 && rank <= 2 && lo < n; lo += ROWS) {
    const hsize_t start[2] = {lo, 0}, count[2] = {n - lo < ROWS ? n - lo : ROWS, rank == 2 ? (hsize_t)cols : 1};
    hid_t ms = H5Screate_simple(rank, count, NULL);
    if (ms < 0) break;
    herr_t rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    if (rc >= 0) rc = H5Dread(d, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, buf);
    H5Sclose(ms);
    if (rc < 0) break;
  }
  if (fs >= 0) H5Sclose(fs);
  free(buf);
}

/* The headers of every dataset read_file reads (their shapes, types and
 * storage), and the data of those whose stored form libhdf5 decodes: kept
 * in the header (compact) or in chunks (through the chunk index and the
 * filters). Contiguous data is copied from the file as it is, once
 * dset_open has checked that it lies inside the file. */
static int probe_types(struct rctx *r, hid_t file, const uint64_t counts[HY_NTYPES]) {
  static const char *const names[] = {"Coordinates", "Velocities", "ParticleIDs", "Masses"};
  static const int cols[] = {3, 3, 1, 1};
  for (int t = 0; t < HY_NTYPES; t++) {
    if (counts[t] == 0) continue;
    char gname[32];
    snprintf(gname, sizeof gname, "PartType%d", t);
    hid_t g = H5Gopen2(file, gname, H5P_DEFAULT);
    if (g < 0) return -1;
    int rc = 0;
    for (int k = 0; k < 4 && rc >= 0; k++) {
      hid_t d;
      rc = dset_open(r, g, gname, names[k], (size_t)counts[t], cols[k], &d);
      if (rc > 0) {
        hid_t type = H5Dget_type(d), dcpl = H5Dget_create_plist(d);
        if (type >= 0) H5Tclose(type);
        const H5D_layout_t layout = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
        if (dcpl >= 0) H5Pclose(dcpl);
        if (layout == H5D_COMPACT || layout == H5D_CHUNKED) read_through(d, (size_t)counts[t], cols[k]);
        H5Dclose(d);
      }
    }
    H5Gclose(g);
    if (rc < 0) return -1;
  }
  return 0;
}

static int read_file(struct rctx *r, hid_t file, struct hy_part *p, double *time) {
  struct hy_err *err = r->err;
  const char *path = r->path;
  htri_t ex = H5Lexists(file, "Header", H5P_DEFAULT);
  if (ex <= 0) return hy_err_set(err, "%s: no /Header group (not a Gadget-style snapshot)", path);
  hid_t h = H5Gopen2(file, "Header", H5P_DEFAULT);
  if (h < 0) return hy_err_set(err, "%s: HDF5 error: cannot open /Header", path);
  uint64_t counts[HY_NTYPES] = {0};
  uint32_t high[HY_NTYPES] = {0};
  double mtab[HY_NTYPES] = {0};
  int nfiles = 1, rc;
  *time = 0.0;
  rc = attr_read(r, h, "NumFilesPerSnapshot", H5T_NATIVE_INT, 1, &nfiles);
  if (rc >= 0 && nfiles > 1 && !r->multi) {
    rc = hy_err_set(err,
                    "%s: NumFilesPerSnapshot = %d: this file is one part of a multi-file snapshot; "
                    "name its first file (BASE.0.hdf5) to read the whole set",
                    path, nfiles);
  }
  r->num_files = nfiles > 1 ? nfiles : 1;
  if (rc >= 0) rc = attr_read(r, h, "NumPart_ThisFile", H5T_NATIVE_UINT64, 6, counts);
  if (rc == 0 && r->multi)
    rc = hy_err_set(err, "%s: /Header has no NumPart_ThisFile (needed in a multi-file snapshot)", path);
  if (rc > 0 && r->multi) {
    /* NumPart_Total holds either the low 32 bits (Gadget, SWIFT) or the whole
     * count (hytree): a value >= 2^32 is taken as the whole count. */
    for (int t = 0; t < HY_NTYPES; t++) r->total[t] = counts[t];
    rc = attr_read(r, h, "NumPart_Total", H5T_NATIVE_UINT64, 6, r->total);
    if (rc == 1 && attr_read(r, h, "NumPart_Total_HighWord", H5T_NATIVE_UINT32, 6, high) == 1)
      for (int t = 0; t < HY_NTYPES; t++)
        if (r->total[t] >> 32 == 0) r->total[t] += (uint64_t)high[t] << 32;
    if (rc >= 0) rc = 1;
  }
  if (rc == 0) {
    rc = attr_read(r, h, "NumPart_Total", H5T_NATIVE_UINT64, 6, counts);
    if (rc == 1 && attr_read(r, h, "NumPart_Total_HighWord", H5T_NATIVE_UINT32, 6, high) == 1)
      for (int t = 0; t < HY_NTYPES; t++) counts[t] += (uint64_t)high[t] << 32;
    if (rc == 0)
      rc = hy_err_set(err, "%s: /Header has neither NumPart_ThisFile nor NumPart_Total", path);
  }
  if (rc >= 0) rc = attr_read(r, h, "MassTable", H5T_NATIVE_DOUBLE, 6, mtab);
  if (rc >= 0) rc = attr_read(r, h, "Time", H5T_NATIVE_DOUBLE, 1, time);
  if (H5Gclose(h) < 0 && rc >= 0) rc = hy_err_set(err, "%s: HDF5 error: cannot close /Header", path);
  if (rc < 0) return -1;

  size_t ntot = 0;
  for (int t = 0; t < HY_NTYPES; t++) {
    if (counts[t] > SIZE_MAX / 32 || ntot + counts[t] > SIZE_MAX / 32)
      return hy_err_set(err, "%s: particle counts in /Header are too large", path);
    ntot += (size_t)counts[t];
  }
  if (check_types(r, file, counts) != 0) return -1;
  if (r->probe) return probe_types(r, file, counts);
  hy_part_resize(p, ntot);
  size_t off = 0;
  for (int t = 0; t < HY_NTYPES; t++) {
    size_t n = (size_t)counts[t];
    if (n == 0) continue;
    char gname[32];
    snprintf(gname, sizeof gname, "PartType%d", t);
    ex = H5Lexists(file, gname, H5P_DEFAULT);
    if (ex <= 0)
      return hy_err_set(err, "%s: /Header announces %zu particles of type %d but there is no /%s",
                        path, n, t, gname);
    hid_t g = H5Gopen2(file, gname, H5P_DEFAULT);
    if (g < 0) return hy_err_set(err, "%s: HDF5 error: cannot open /%s", path, gname);
    rc = dset_read(r, g, gname, "Coordinates", n, 3, H5T_NATIVE_DOUBLE, p->pos + 3 * off);
    if (rc == 0) rc = hy_err_set(err, "%s: /%s has no Coordinates dataset", path, gname);
    if (rc > 0) {
      rc = dset_read(r, g, gname, "Velocities", n, 3, H5T_NATIVE_DOUBLE, p->vel + 3 * off);
      if (rc == 0) rc = hy_err_set(err, "%s: /%s has no Velocities dataset", path, gname);
    }
    if (rc > 0) {
      rc = dset_read(r, g, gname, "ParticleIDs", n, 1, H5T_NATIVE_UINT64, p->id + off);
      if (rc == 0) {
        for (size_t k = 0; k < n; k++) p->id[off + k] = r->id_base + (uint64_t)(off + k + 1);
        rc = 1;
      }
    }
    if (rc > 0) {
      rc = dset_read(r, g, gname, "Masses", n, 1, H5T_NATIVE_DOUBLE, p->mass + off);
      if (rc == 0) {
        if (mtab[t] != 0.0) {
          for (size_t k = 0; k < n; k++) p->mass[off + k] = mtab[t];
          rc = 1;
        } else {
          rc = hy_err_set(err, "%s: /%s has no Masses dataset and MassTable[%d] is 0", path, gname,
                          t);
        }
      }
    }
    for (size_t k = 0; k < n; k++) p->type[off + k] = (uint8_t)t;
    if (H5Gclose(g) < 0 && rc > 0) rc = hy_err_set(err, "%s: HDF5 error: cannot close /%s", path, gname);
    if (rc < 0) return -1;
    off += n;
  }
  return 0;
}

static int open_and_read(struct rctx *r, struct hy_part *p, double *time);

/* libhdf5 (1.10.8 on Debian 12) can crash decoding a damaged file's object
 * headers and attributes. So a child process first opens the file and
 * reads what read_file reads but the datasets' data: if the library
 * crashes there, the run ends with a message instead of a crash. The
 * child's own errors do not matter: the read that follows reports them. */
static int probe_headers(struct rctx *r) {
  const pid_t pid = fork();
  if (pid < 0) return hy_err_set(r->err, "%s: cannot start a process to check the file: %s", r->path, strerror(errno));
  if (pid == 0) {
    /* a crash ends the child by its signal, without a core file, the
     * parent's handlers (a sanitizer's, a fuzzer's) or any message */
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) (void)sigaction(sigs[k], &sa, NULL);
    const struct rlimit no_core = {0, 0};
    (void)setrlimit(RLIMIT_CORE, &no_core);
#ifdef HY_ASAN
    __sanitizer_set_death_callback(NULL); /* a memory error it finds in libhdf5 ends the child alone */
#endif
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) (void)dup2(null, STDERR_FILENO);
    if (getenv("HYTREE_TEST_HDF5_CRASH")) raise(SIGSEGV); /* tests: the library crashed */
    struct hy_err e;
    struct rctx c = *r;
    c.err = &e;
    c.probe = 1;
    double t;
    (void)open_and_read(&c, NULL, &t);
    _exit(0);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return hy_err_set(r->err, "%s: waiting for the file's check failed: %s", r->path, strerror(errno));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  return hy_err_set(r->err, "%s is a damaged HDF5 file: the HDF5 library crashed reading it", r->path);
}

/* Open, check the signature and read one file with the settings of r. */
static int read_path(struct rctx *r, struct hy_part *p, double *time) {
  static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  const char *path = r->path;
  struct hy_err *err = r->err;
  unsigned char head[8];
  FILE *f = fopen(path, "rb");
  if (!f) return hy_err_set(err, "%s: cannot open: %s", path, strerror(errno));
  size_t got = fread(head, 1, sizeof head, f);
  if (fclose(f) != 0) return hy_err_set(err, "%s: cannot close: %s", path, strerror(errno));
  if (got != sizeof head || memcmp(head, sig, sizeof sig) != 0)
    return hy_err_set(err, "%s: not an HDF5 file (no HDF5 signature at the start)", path);
  if (H5Eset_auto2(H5E_DEFAULT, NULL, NULL) < 0)
    return hy_err_set(err, "%s: cannot silence the HDF5 error stack", path);
  if (probe_headers(r) != 0) return -1;
  return open_and_read(r, p, time);
}

static int open_and_read(struct rctx *r, struct hy_part *p, double *time) {
  const char *path = r->path;
  struct hy_err *err = r->err;
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
    if (fapl >= 0) H5Pclose(fapl);
    return hy_err_set(err, "%s: HDF5 error: cannot set up file access properties", path);
  }
  hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
  H5Pclose(fapl);
  if (file < 0) return hy_err_set(err, "%s: HDF5 error: cannot open the file", path);
  if (H5Fget_filesize(file, &r->fsize) < 0) r->fsize = 0;
  int rc = read_file(r, file, p, time);
  if (H5Fclose(file) < 0 && rc == 0) rc = hy_err_set(err, "%s: HDF5 error: cannot close", path);
  return rc;
}

int hy_io_read_hdf5(const char *path, struct hy_part *p, double *time, struct hy_err *err) {
  struct rctx r = {.path = path, .err = err};
  return read_path(&r, p, time);
}

/* p += q (the fields a reader fills). */
static void part_append(struct hy_part *p, const struct hy_part *q) {
  size_t n0 = p->n;
  hy_part_resize(p, n0 + q->n);
  if (q->n == 0) return;
  memcpy(p->pos + 3 * n0, q->pos, 3 * q->n * sizeof(double));
  memcpy(p->vel + 3 * n0, q->vel, 3 * q->n * sizeof(double));
  memcpy(p->mass + n0, q->mass, q->n * sizeof(double));
  memcpy(p->id + n0, q->id, q->n * sizeof(uint64_t));
  memcpy(p->type + n0, q->type, q->n * sizeof(uint8_t));
}

int hy_io_read_hdf5_set(const char *base, struct hy_part *p, double *time, struct hy_err *err) {
  size_t len = strlen(base) + 32;
  char *path = hy_malloc("multi-file snapshot name", len, 1);
  struct hy_part q;
  hy_part_init(&q);
  hy_part_resize(p, 0);
  uint64_t total[HY_NTYPES] = {0}, sum[HY_NTYPES] = {0};
  int nfiles = 1, rc = 0;
  double t0 = 0.0;
  for (int k = 0; k < nfiles && rc == 0; k++) {
    snprintf(path, len, "%s.%d.hdf5", base, k);
    struct rctx r = {.path = path, .err = err, .multi = 1, .id_base = (uint64_t)p->n};
    double t = 0.0;
    rc = read_path(&r, &q, &t);
    if (rc != 0) break;
    if (k == 0) {
      nfiles = r.num_files;
      t0 = t;
      memcpy(total, r.total, sizeof total);
    } else if (r.num_files != nfiles) {
      rc = hy_err_set(err, "%s: NumFilesPerSnapshot = %d, but %s.0.hdf5 says %d", path,
                      r.num_files, base, nfiles);
    } else if (t != t0) {
      rc = hy_err_set(err, "%s: Time = %.17g, but %s.0.hdf5 says %.17g", path, t, base, t0);
    } else {
      for (int s = 0; s < HY_NTYPES && rc == 0; s++)
        if (r.total[s] != total[s])
          rc = hy_err_set(err, "%s: NumPart_Total[%d] = %llu, but %s.0.hdf5 says %llu", path, s,
                          (unsigned long long)r.total[s], base, (unsigned long long)total[s]);
    }
    for (size_t i = 0; i < q.n && rc == 0; i++) sum[q.type[i]]++;
    if (rc == 0) part_append(p, &q);
  }
  for (int s = 0; s < HY_NTYPES && rc == 0; s++)
    if (sum[s] != total[s])
      rc = hy_err_set(err, "%s.0.hdf5: NumPart_Total[%d] = %llu, but the %d files hold %llu", base,
                      s, (unsigned long long)total[s], nfiles, (unsigned long long)sum[s]);
  if (rc == 0 && nfiles > 1) {
    /* Type by type over the whole set, file order within a type. */
    uint64_t counts[HY_NTYPES];
    size_t *order = hy_io_type_order(base, p, counts, err);
    if (!order) {
      rc = -1;
    } else {
      hy_part_permute(p, order);
      hy_free(order);
    }
  }
  if (rc == 0) *time = t0;
  hy_part_free(&q);
  hy_free(path);
  return rc;
}
