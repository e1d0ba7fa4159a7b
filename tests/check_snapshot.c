/* SPDX-License-Identifier: GPL-3.0-or-later
 * check_snapshot.c: `check_snapshot FILE [N_SINKS [MAX]]` reads a snapshot written
 * with SnapshotFields Acceleration,Potential and compares its Acceleration and
 * Potential with a double-precision direct sum over all particles (G and the
 * softening from the /Header attributes) for N_SINKS particles spread evenly
 * through the file (default 4000). Prints the error percentiles and exits 1
 * unless the median relative acceleration error is <= 3e-3, its 99th
 * percentile <= 2e-2 (the tree's accuracy at the default a_err) and the
 * median potential error is <= 1e-3, and, with MAX, the largest relative
 * acceleration error <= MAX (the relative opening criterion's bound). */
#include "config.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "force_cpu.h"
#include "threads.h"

static double attr_double(hid_t f, const char *obj, const char *name) {
  double v = NAN;
  hid_t a = H5Aopen_by_name(f, obj, name, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0 || H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0) {
    fprintf(stderr, "check_snapshot: cannot read attribute %s/%s\n", obj, name);
    exit(99);
  }
  H5Aclose(a);
  return v;
}

/* read dataset PartTypeT/name (n rows of k doubles) into dst */
static void read_set(hid_t f, int t, const char *name, double *dst) {
  char path[64];
  snprintf(path, sizeof path, "/PartType%d/%s", t, name);
  hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
  if (d < 0 || H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) < 0) {
    fprintf(stderr, "check_snapshot: cannot read %s\n", path);
    exit(99);
  }
  H5Dclose(d);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs("usage: check_snapshot FILE [N_SINKS]\n", stderr);
    return 99;
  }
  size_t n_sink_req = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 4000;
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    fprintf(stderr, "check_snapshot: cannot open %s\n", argv[1]);
    return 99;
  }
  double G = attr_double(f, "/Header", "GravityConstant"), eps = attr_double(f, "/Header", "Softening");
  if (!(eps > 0)) {
    fputs("check_snapshot: needs a softened snapshot (Softening > 0)\n", stderr);
    return 99;
  }
  uint64_t counts[6];
  hid_t a = H5Aopen_by_name(f, "/Header", "NumPart_ThisFile", H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0 || H5Aread(a, H5T_NATIVE_UINT64, counts) < 0) return 99;
  H5Aclose(a);
  size_t n = 0;
  for (int t = 0; t < 6; t++) n += counts[t];
  double *pos = hy_malloc("pos", 3 * n, sizeof(double)), *mass = hy_malloc("mass", n, sizeof(double));
  double *acc = hy_malloc("acc", 3 * n, sizeof(double)), *pot = hy_malloc("pot", n, sizeof(double));
  size_t off = 0;
  for (int t = 0; t < 6; t++) {
    if (!counts[t]) continue;
    read_set(f, t, "Coordinates", pos + 3 * off);
    read_set(f, t, "Masses", mass + off);
    read_set(f, t, "Acceleration", acc + 3 * off);
    read_set(f, t, "Potential", pot + off);
    off += counts[t];
  }
  H5Fclose(f);
  size_t stride = n / n_sink_req ? n / n_sink_req : 1, ns = (n + stride - 1) / stride;
  double *spos = hy_malloc("sinks", 3 * ns, sizeof(double)), *ref = hy_malloc("ref", 3 * ns, sizeof(double));
  double *pref = hy_malloc("pref", ns, sizeof(double));
  double *ea = hy_malloc("ea", ns, sizeof(double)), *ep = hy_malloc("ep", ns, sizeof(double));
  struct hy_pool *pool = hy_pool_create(hy_pool_default_threads());
  /* all sinks at once without self-pair skipping: with eps > 0 a particle's
   * own contribution is zero in the acceleration and -m/eps in the potential */
  for (size_t j = 0; j < ns; j++)
    for (int k = 0; k < 3; k++) spos[3 * j + k] = pos[3 * j * stride + k];
  hy_cpu_direct(pos, mass, n, spos, ns, -1, eps, 0, 0, ref, NULL, pref, pool);
  for (size_t j = 0; j < ns; j++) {
    size_t i = j * stride;
    pref[j] += mass[i] / eps;
    double d2 = 0, r2 = 0;
    for (int k = 0; k < 3; k++) {
      double r = G * ref[3 * j + k];
      d2 += (acc[3 * i + k] - r) * (acc[3 * i + k] - r);
      r2 += r * r;
    }
    ea[j] = sqrt(d2 / r2);
    ep[j] = fabs(pot[i] - G * pref[j]) / fabs(G * pref[j]);
  }
  qsort(ea, ns, sizeof(double), cmp);
  qsort(ep, ns, sizeof(double), cmp);
  double med = ea[ns / 2], p99 = ea[(size_t)(0.99 * (double)ns)], pmed = ep[ns / 2];
  printf("%s: N = %zu, G = %.9g, eps = %.6g, %zu sinks\n", argv[1], n, G, eps, ns);
  printf("acceleration vs direct sum: median %.3e  p99 %.3e  max %.3e\n", med, p99, ea[ns - 1]);
  printf("potential vs direct sum:    median %.3e  max %.3e\n", pmed, ep[ns - 1]);
  const double max_bound = argc > 3 ? strtod(argv[3], NULL) : INFINITY;
  int ok = med <= 3e-3 && p99 <= 2e-2 && pmed <= 1e-3 && ea[ns - 1] <= max_bound;
  if (!ok)
    printf("FAIL: errors above the bounds (median 3e-3, p99 2e-2, potential median 1e-3, max %g)\n", max_bound);
  hy_pool_free(pool);
  hy_free(pos);
  hy_free(mass);
  hy_free(acc);
  hy_free(pot);
  hy_free(spos);
  hy_free(ref);
  hy_free(pref);
  hy_free(ea);
  hy_free(ep);
  return ok ? 0 : 1;
}
