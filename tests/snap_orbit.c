/* SPDX-License-Identifier: GPL-3.0-or-later
 * snap_orbit.c: the circular two-body orbit of tests/snapshot_times.sh.
 *   snap_orbit ics FILE         writes its initial conditions: two bodies of
 *                               mass 1/2 (IDs 1, 2, type 1) at (+-1/2, 0, 0)
 *                               with velocities (0, +-1/2, 0); with G = 1 and
 *                               no softening they circle their centre of mass
 *                               at angular frequency 1: body 1 at
 *                               (cos t, sin t, 0) / 2, body 2 opposite.
 *   snap_orbit check FILE K DT  reads the snapshot FILE, exits 1 unless its
 *                               header Time is K DT to 1e-12, and prints
 *                               `TIME DX DV`: its Time and the largest
 *                               distance of a body's position and velocity
 *                               from the orbit at that time. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "log.h"
#include "part.h"

static int write_ics(const char *path) {
  struct hy_part p;
  hy_part_init(&p);
  hy_part_resize(&p, 2);
  for (int b = 0; b < 2; b++) {
    const double s = b == 0 ? 1.0 : -1.0;
    p.pos[3 * b] = 0.5 * s;
    p.vel[3 * b + 1] = 0.5 * s;
    p.mass[b] = 0.5;
    p.id[b] = (uint64_t)b + 1;
    p.type[b] = 1;
  }
  struct hy_snap_info info;
  memset(&info, 0, sizeof info);
  info.gravity_constant = 1.0;
  info.units.length_cm = info.units.mass_g = info.units.velocity_cm_per_s = 1.0;
  struct hy_err err;
  int rc = hy_io_write_hdf5(path, &p, &info, &err);
  if (rc != 0) fprintf(stderr, "snap_orbit: %s\n", err.msg);
  hy_part_free(&p);
  return rc == 0 ? 0 : 99;
}

static int check(const char *path, long k, double dt) {
  struct hy_part p;
  hy_part_init(&p);
  double t = 0.0;
  struct hy_err err;
  if (hy_io_read_ic(path, HY_FMT_HDF5, &p, &t, &err) != 0 || p.n != 2) {
    fprintf(stderr, "snap_orbit: %s: %s\n", path, p.n != 2 ? "not the two bodies" : err.msg);
    return 99;
  }
  const double want = (double)k * dt;
  double dx = 0.0, dv = 0.0;
  for (size_t i = 0; i < 2; i++) {
    const double s = p.id[i] == 1 ? 0.5 : -0.5;
    const double x[3] = {s * cos(t), s * sin(t), 0.0}, v[3] = {-s * sin(t), s * cos(t), 0.0};
    double ex = 0.0, ev = 0.0;
    for (int d = 0; d < 3; d++) {
      ex += (p.pos[3 * i + d] - x[d]) * (p.pos[3 * i + d] - x[d]);
      ev += (p.vel[3 * i + d] - v[d]) * (p.vel[3 * i + d] - v[d]);
    }
    dx = fmax(dx, sqrt(ex));
    dv = fmax(dv, sqrt(ev));
  }
  hy_part_free(&p);
  printf("%.17g %.6e %.6e\n", t, dx, dv);
  if (!(fabs(t - want) <= 1e-12)) {
    fprintf(stderr, "FAIL: %s: Time %.17g is not the requested %ld x %.17g = %.17g\n", path, t, k, dt, want);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  hy_io_hdf5_init();
  int rc = 99;
  if (argc == 3 && strcmp(argv[1], "ics") == 0)
    rc = write_ics(argv[2]);
  else if (argc == 5 && strcmp(argv[1], "check") == 0)
    rc = check(argv[2], atol(argv[3]), atof(argv[4]));
  else
    fputs("usage: snap_orbit ics FILE | snap_orbit check FILE K DT\n", stderr);
  hy_io_hdf5_close();
  return rc;
}
