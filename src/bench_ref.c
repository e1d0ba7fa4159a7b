/* SPDX-License-Identifier: GPL-3.0-or-later
 * bench_ref.c: the force error of `hytree bench`: sampled particles' forces
 * against a direct sum in double precision over every particle, whose
 * rounding (~1e-15) lies far below any scheme's error, even the float
 * direct sum's (~1e-7). Owns the sampling and the error statistics; the sum
 * itself is the device's (hy_cl_direct_ref) or, on a device without double
 * precision, the host's (hy_cpu_direct). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_ref.h"
#include "force_cpu.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The particles in the order "the m sampled ones (every (n/m)-th of p's
 * order), then the others", relative to their centre of mass: 4 doubles
 * (x, y, z, m) each into src; pick[k] is the k-th sample's index in p. */
static void order_sources(const struct hy_part *p, size_t m, double *src, size_t *pick) {
  const size_t n = p->n;
  double c[3];
  hy_part_com(p, c);
  unsigned char *taken = hy_calloc("bench reference", n, 1);
  for (size_t k = 0; k < m; k++) {
    pick[k] = hy_size_mul_or_die(k, n, "bench samples") / m; /* < n, and increasing as m <= n */
    taken[pick[k]] = 1;
  }
  for (size_t k = 0; k < m; k++) {
    for (int d = 0; d < 3; d++) src[4 * k + d] = p->pos[3 * pick[k] + d] - c[d];
    src[4 * k + 3] = p->mass[pick[k]];
  }
  size_t at = m;
  for (size_t i = 0; i < n; i++) {
    if (taken[i]) continue;
    for (int d = 0; d < 3; d++) src[4 * at + d] = p->pos[3 * i + d] - c[d];
    src[4 * at + 3] = p->mass[i];
    at++;
  }
  hy_free(taken);
}

/* The reference accelerations (4 doubles per sample, G = 1) of the first m
 * of the ordered sources: on the device, else on the host. */
static int reference(struct hy_cl *cl, struct hy_pool *pool, const double *src, size_t n, size_t m, double eps,
                     double *out, int *on_host, struct hy_err *err) {
  *on_host = !hy_cl_has_fp64(cl);
  if (!*on_host) return hy_cl_direct_ref(cl, src, n, src, m, eps, out, err);
  hy_warn("bench: %s has no double precision: the reference direct sum runs on the host (slower)",
          hy_cl_device_name(cl));
  double *pos = hy_malloc("bench reference", n, 3 * sizeof(double));
  double *mass = hy_malloc("bench reference", n, sizeof(double));
  double *acc = hy_malloc("bench reference", m, 3 * sizeof(double));
  for (size_t i = 0; i < n; i++) {
    memcpy(pos + 3 * i, src + 4 * i, 3 * sizeof(double));
    mass[i] = src[4 * i + 3];
  }
  /* the samples are sources 0 .. m-1: self_base 0 skips their own pairs */
  hy_cpu_direct(pos, mass, n, pos, m, 0, eps, 0.0, 0.0, acc, NULL, NULL, pool);
  for (size_t k = 0; k < m; k++) {
    memcpy(out + 4 * k, acc + 3 * k, 3 * sizeof(double));
    out[4 * k + 3] = 0.0;
  }
  hy_free(pos);
  hy_free(mass);
  hy_free(acc);
  return 0;
}

int hy_bench_force_error(struct hy_cl *cl, struct hy_pool *pool, const struct hy_part *p, const double *acc,
                         double G, double eps, size_t n_sinks, struct hy_bench_err *e, struct hy_err *err) {
  memset(e, 0, sizeof *e);
  const size_t n = p->n, m = n_sinks < n ? n_sinks : n;
  if (m == 0) return hy_err_set(err, "bench: no particle to measure the force error on");
  double *src = hy_malloc("bench reference", n, 4 * sizeof(double));
  double *out = hy_malloc("bench reference", m, 4 * sizeof(double));
  size_t *pick = hy_malloc("bench reference", m, sizeof(size_t));
  order_sources(p, m, src, pick);
  int rc = reference(cl, pool, src, n, m, eps, out, &e->on_host, err);
  double *rel = hy_malloc("bench errors", m, sizeof(double));
  for (size_t k = 0; rc == 0 && k < m; k++) {
    double d2 = 0.0, r2 = 0.0;
    for (int d = 0; d < 3; d++) {
      const double ref = G * out[4 * k + d], x = acc[3 * pick[k] + d];
      d2 += (x - ref) * (x - ref);
      r2 += ref * ref;
    }
    /* a particle with no force on it (alone, or eps = 0 with twins) has
     * no relative error: count it as exact only when its a is zero too */
    rel[k] = r2 > 0.0 ? sqrt(d2 / r2) : (d2 > 0.0 ? INFINITY : 0.0);
  }
  if (rc == 0) {
    qsort(rel, m, sizeof(double), cmp_double);
    e->n_sampled = m;
    e->med = rel[m / 2];
    e->p99 = rel[(size_t)(0.99 * (double)(m - 1))];
    e->max = rel[m - 1];
  }
  hy_free(rel);
  hy_free(pick);
  hy_free(out);
  hy_free(src);
  return rc;
}
