/* SPDX-License-Identifier: GPL-3.0-or-later
 * diag.c: see diag.h. */
#include "config.h"

#include "diag.h"

#include <math.h>
#include <string.h>

#include "alloc.h"

#define NSUM HY_ENERGY_SUMS /* K, W, p[3], L[3] */

struct diag_job {
  const struct hy_part *p;
  double *part; /* NSUM per thread */
};

static void diag_body(void *arg, size_t b, size_t e, int tid) {
  const struct diag_job *j = arg;
  const struct hy_part *p = j->p;
  double s[NSUM] = {0};
  for (size_t i = b; i < e; i++) {
    const double m = p->mass[i], *x = p->pos + 3 * i, *v = p->vel + 3 * i;
    s[0] += 0.5 * m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    s[1] += 0.5 * m * p->pot[i];
    for (int d = 0; d < 3; d++) s[2 + d] += m * v[d];
    s[5] += m * (x[1] * v[2] - x[2] * v[1]);
    s[6] += m * (x[2] * v[0] - x[0] * v[2]);
    s[7] += m * (x[0] * v[1] - x[1] * v[0]);
  }
  for (int k = 0; k < NSUM; k++) j->part[NSUM * tid + k] += s[k];
}

void hy_diag_sums(const struct hy_part *p, struct hy_pool *pool, double sums[HY_ENERGY_SUMS]) {
  int nt = hy_pool_size(pool);
  struct diag_job j = {.p = p, .part = hy_calloc("diagnostic sums", (size_t)nt * NSUM, sizeof(double))};
  hy_pool_for(pool, p->n, 65536, diag_body, &j);
  for (int q = 0; q < NSUM; q++) sums[q] = 0.0;
  for (int k = 0; k < nt; k++)
    for (int q = 0; q < NSUM; q++) sums[q] += j.part[NSUM * k + q];
  hy_free(j.part);
}

int hy_diag_from_sums(const double sums[HY_ENERGY_SUMS], double t, double e0, const MPI_Comm *comm,
                      struct hy_diag *d) {
  double s[NSUM];
  memcpy(s, sums, sizeof s);
  memset(d, 0, sizeof *d);
  if (comm && MPI_Allreduce(sums, s, NSUM, MPI_DOUBLE, MPI_SUM, *comm) != MPI_SUCCESS) return -1;
  d->time = t;
  d->kin = s[0];
  d->pot = s[1];
  d->etot = s[0] + s[1];
  d->de_rel = e0 != 0.0 ? fabs((d->etot - e0) / e0) : 0.0;
  for (int q = 0; q < 3; q++) {
    d->mom[q] = s[2 + q];
    d->ang[q] = s[5 + q];
  }
  d->virial = s[1] != 0.0 ? 2.0 * s[0] / fabs(s[1]) : 0.0;
  return 0;
}

int hy_diag_compute_comm(const struct hy_part *p, double t, double e0, struct hy_pool *pool, const MPI_Comm *comm,
                         struct hy_diag *d) {
  double s[NSUM];
  hy_diag_sums(p, pool, s);
  return hy_diag_from_sums(s, t, e0, comm, d);
}

void hy_diag_compute(const struct hy_part *p, double t, double e0, struct hy_pool *pool, struct hy_diag *d) {
  hy_diag_compute_comm(p, t, e0, pool, NULL, d);
}

void hy_diag_csv_header(FILE *f) {
  fputs("time,kinetic,potential,total,rel_energy_error,px,py,pz,Lx,Ly,Lz,virial_ratio\n", f);
}

void hy_diag_csv_row(FILE *f, const struct hy_diag *d) {
  fprintf(f, "%.17g,%.17g,%.17g,%.17g,%.6e,%.9e,%.9e,%.9e,%.9e,%.9e,%.9e,%.9g\n", d->time, d->kin, d->pot, d->etot,
          d->de_rel, d->mom[0], d->mom[1], d->mom[2], d->ang[0], d->ang[1], d->ang[2], d->virial);
}
