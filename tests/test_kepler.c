/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_kepler.c: the hybrid integrator on an eccentric two-body orbit whose
 * separation sweeps through the split region [R1, R2], so the force moves
 * between the hard and the soft part every orbit.
 *  - energy: |dE/E| <= 1e-6 over 100 orbits at a small step;
 *  - order: the maximum energy error over a few orbits falls as dt^2
 *    (measured order between 1.8 and 2.2 from two step sizes);
 *  - the separation keeps its pericentre and apocentre values.
 * Unsoftened point masses; G = 1, m1 = m2 = 1/2, a = 1: period 2 pi. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cl_engine.h"
#include "diag.h"
#include "force.h"
#include "hy_test.h"
#include "log.h"
#include "sim.h"
#include "threads.h"

static struct hy_cl *cl;
static struct hy_pool *pool;

static const double ecc = 0.2, R1 = 0.85, R2 = 1.15;

/* Two bodies at apocentre (separation a (1 + e)) in the centre-of-mass frame. */
static void setup(struct hy_part *p) {
  hy_part_resize(p, 2);
  double ra = 1.0 + ecc, va = sqrt((1.0 - ecc) / (1.0 + ecc)); /* relative speed, G M = 1 */
  for (int i = 0; i < 2; i++) {
    double sgn = i == 0 ? 1.0 : -1.0;
    p->pos[3 * i] = 0.5 * sgn * ra;
    p->pos[3 * i + 1] = 0.0;
    p->pos[3 * i + 2] = 0.0;
    p->vel[3 * i] = 0.0;
    p->vel[3 * i + 1] = 0.5 * sgn * va;
    p->vel[3 * i + 2] = 0.0;
    p->mass[i] = 0.5;
    p->id[i] = (uint64_t)i + 1;
    p->type[i] = 1;
  }
}

static double separation(const struct hy_part *p) {
  double d2 = 0;
  for (int k = 0; k < 3; k++) d2 += (p->pos[k] - p->pos[3 + k]) * (p->pos[k] - p->pos[3 + k]);
  return sqrt(d2);
}

/* Integrate n_orbits with soft step 2 pi / steps_per_orbit (n = 4); return the
 * largest |dE/E| seen at soft-step boundaries; rmin/rmax of the separation. */
static double run(int steps_per_orbit, int n_orbits, double *rmin, double *rmax) {
  struct hy_part p;
  hy_part_init(&p);
  setup(&p);
  struct hy_force_cfg fc = {.G = 1, .eps = 0, .r1 = R1, .r2 = R2, .a_err = 1e-3, .n_crit = 16, .nvec = 4,
                            .n_ratio = 4};
  struct hy_force *f = hy_force_create(cl, pool, &fc);
  const double period = 2.0 * 3.14159265358979323846;
  struct hy_sim_cfg sc = {.scheme = HY_SCHEME_HYBRID, .dt_h = period / steps_per_orbit / 4.0, .n_ratio = 4};
  struct hy_sim *s = hy_sim_create(&p, f, pool, &sc, 0.0);
  struct hy_err err;
  if (hy_sim_start(s, HY_WANT_POT, &err) != 0) {
    fprintf(stderr, "%s\n", err.msg);
    exit(99);
  }
  struct hy_diag d0, d;
  hy_diag_compute(&p, 0, 0, pool, &d0);
  double worst = 0;
  *rmin = INFINITY;
  *rmax = 0;
  struct hy_step_times tm;
  for (long k = 1; k <= (long)steps_per_orbit * n_orbits; k++) {
    if (hy_sim_step(s, HY_WANT_POT, &tm, &err) != 0) {
      fprintf(stderr, "%s\n", err.msg);
      exit(99);
    }
    hy_diag_compute(&p, hy_sim_time(s), d0.etot, pool, &d);
    if (d.de_rel > worst) worst = d.de_rel;
    double r = separation(&p);
    if (r < *rmin) *rmin = r;
    if (r > *rmax) *rmax = r;
  }
  hy_sim_free(s);
  hy_force_free(f);
  hy_part_free(&p);
  return worst;
}

int main(void) {
  hy_log_init(0, 1);
  pool = hy_pool_create(1);
  /* two particles: launch overhead dominates, and pocl is fastest on one core */
  if (setenv("POCL_CPU_MAX_CU_COUNT", "1", 1) != 0) return 99;
  struct hy_cl_opts o = {.kind = HY_CL_ANY, .platform = -1, .device = -1, .local_rank = 0, .nvec = 4};
  struct hy_err err;
  if (hy_cl_create(&cl, &o, &err) != 0) {
    fprintf(stderr, "no OpenCL device: %s\n", err.msg);
    return 99;
  }
  double rmin, rmax;
  printf("orbit: e = %g, separation %g .. %g; split radii R1 = %g, R2 = %g\n", ecc, 1 - ecc, 1 + ecc, R1, R2);
  /* order of convergence from two step sizes over 3 orbits */
  double e1 = run(250, 3, &rmin, &rmax);
  double e2 = run(500, 3, &rmin, &rmax);
  double order = log(e1 / e2) / log(2.0);
  printf("max |dE/E| over 3 orbits: %.4e (250 soft steps/orbit), %.4e (500): order %.3f\n", e1, e2, order);
  HY_CHECK_MSG(order >= 1.8 && order <= 2.2, "measured order %.3f outside [1.8, 2.2]", order);
  /* separation range: pericentre a(1-e) < R1, apocentre a(1+e) > R2 */
  HY_CHECK_ABS(rmin, 1.0 - ecc, 1e-3);
  HY_CHECK_ABS(rmax, 1.0 + ecc, 1e-3);
  /* long run: 100 orbits */
  double e3 = run(2500, 100, &rmin, &rmax);
  printf("max |dE/E| over 100 orbits at 2500 soft steps/orbit: %.4e; separation %.6f .. %.6f\n", e3, rmin, rmax);
  HY_CHECK_LE(e3, 1e-6);
  HY_CHECK_ABS(rmin, 1.0 - ecc, 1e-3);
  HY_CHECK_ABS(rmax, 1.0 + ecc, 1e-3);
  hy_cl_free(cl);
  hy_pool_free(pool);
  return hy_test_result();
}
