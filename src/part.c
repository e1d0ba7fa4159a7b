/* SPDX-License-Identifier: GPL-3.0-or-later
 * part.c: see part.h. */
#include "config.h"

#include "part.h"

#include <math.h>

#include <string.h>

#include "alloc.h"
#include "threads.h"

void hy_part_init(struct hy_part *p) { memset(p, 0, sizeof *p); }

void hy_part_reserve(struct hy_part *p, size_t n) {
  if (n <= p->n_alloc) return;
  size_t old = p->n_alloc;
  const size_t n3 = hy_size_mul_or_die(n, 3, "particles");
  p->pos = hy_realloc("particle positions", p->pos, n3, sizeof(double));
  p->vel = hy_realloc("particle velocities", p->vel, n3, sizeof(double));
  p->acc = hy_realloc("particle accelerations", p->acc, n3, sizeof(double));
  p->acc_w = hy_realloc("particle kick accelerations", p->acc_w, n3, sizeof(double));
  p->mass = hy_realloc("particle masses", p->mass, n, sizeof(double));
  p->pot = hy_realloc("particle potentials", p->pot, n, sizeof(double));
  p->id = hy_realloc("particle IDs", p->id, n, sizeof(uint64_t));
  p->type = hy_realloc("particle types", p->type, n, sizeof(uint8_t));
  if (p->grp) p->grp = hy_realloc("pseudo-particle moments", p->grp, hy_size_mul_or_die(n, 2, "particles"), sizeof(double));
  size_t k = n - old;
  if (p->grp) memset(p->grp + 2 * old, 0, 2 * k * sizeof(double));
  memset(p->pos + 3 * old, 0, 3 * k * sizeof(double));
  memset(p->vel + 3 * old, 0, 3 * k * sizeof(double));
  memset(p->acc + 3 * old, 0, 3 * k * sizeof(double));
  memset(p->acc_w + 3 * old, 0, 3 * k * sizeof(double));
  memset(p->mass + old, 0, k * sizeof(double));
  memset(p->pot + old, 0, k * sizeof(double));
  memset(p->id + old, 0, k * sizeof(uint64_t));
  memset(p->type + old, 0, k * sizeof(uint8_t));
  p->n_alloc = n;
}

void hy_part_resize(struct hy_part *p, size_t n) {
  hy_part_reserve(p, n);
  p->n = n;
}

void hy_part_free(struct hy_part *p) {
  hy_free(p->pos);
  hy_free(p->vel);
  hy_free(p->acc);
  hy_free(p->acc_w);
  hy_free(p->mass);
  hy_free(p->pot);
  hy_free(p->id);
  hy_free(p->type);
  hy_free(p->grp);
  hy_part_init(p);
}

void hy_part_use_groups(struct hy_part *p) {
  if (p->grp) return;
  p->grp = hy_calloc("pseudo-particle moments", p->n_alloc ? 2 * p->n_alloc : 2, sizeof(double));
}

#define PERMUTE_ARRAY(T, arr, width)                                    \
  do {                                                                  \
    T *tmp_ = hy_malloc("permutation buffer", n * (width), sizeof(T)); \
    for (size_t i_ = 0; i_ < n; i_++)                                   \
      for (size_t k_ = 0; k_ < (width); k_++)                           \
        tmp_[i_ * (width) + k_] = (arr)[perm[i_] * (width) + k_];       \
    memcpy((arr), tmp_, n * (width) * sizeof(T));                       \
    hy_free(tmp_);                                                      \
  } while (0)

void hy_part_permute(struct hy_part *p, const size_t *perm) {
  size_t n = p->n;
  if (n == 0) return;
  PERMUTE_ARRAY(double, p->pos, 3);
  PERMUTE_ARRAY(double, p->vel, 3);
  PERMUTE_ARRAY(double, p->acc, 3);
  PERMUTE_ARRAY(double, p->acc_w, 3);
  PERMUTE_ARRAY(double, p->mass, 1);
  PERMUTE_ARRAY(double, p->pot, 1);
  PERMUTE_ARRAY(uint64_t, p->id, 1);
  PERMUTE_ARRAY(uint8_t, p->type, 1);
  if (p->grp) PERMUTE_ARRAY(double, p->grp, 2);
}

struct permute_job {
  const uint32_t *perm;
  const unsigned char *src;
  unsigned char *dst;
  size_t width; /* bytes per particle */
};

static void gather_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct permute_job *j = arg;
  const uint32_t *perm = j->perm;
  switch (j->width) { /* constant widths let the compiler emit plain loads */
  case 24:
    for (size_t i = b; i < e; i++) memcpy(j->dst + 24 * i, j->src + 24 * (size_t)perm[i], 24);
    break;
  case 8:
    for (size_t i = b; i < e; i++) memcpy(j->dst + 8 * i, j->src + 8 * (size_t)perm[i], 8);
    break;
  case 1:
    for (size_t i = b; i < e; i++) j->dst[i] = j->src[perm[i]];
    break;
  default:
    for (size_t i = b; i < e; i++) memcpy(j->dst + j->width * i, j->src + j->width * (size_t)perm[i], j->width);
  }
}

static void copy_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct permute_job *j = arg;
  memcpy(j->dst + b, j->src + b, e - b);
}

void hy_part_permute_pool(struct hy_part *p, const uint32_t *perm, struct hy_pool *pool, void **scratch,
                          size_t *scratch_bytes) {
  size_t n = p->n;
  if (n == 0) return;
  size_t need = hy_size_mul_or_die(n, 3 * sizeof(double), "permutation buffer");
  if (!*scratch || *scratch_bytes < need) {
    hy_free(*scratch);
    size_t cap = need + need / 8;
    *scratch = hy_malloc("permutation buffer", cap, 1);
    *scratch_bytes = cap;
  }
  unsigned char *tmp = *scratch;
  struct {
    void *arr;
    size_t width;
  } a[] = {{p->pos, 24}, {p->vel, 24},         {p->acc, 24},          {p->acc_w, 24},
           {p->mass, 8}, {p->pot, 8}, {p->id, sizeof(uint64_t)}, {p->type, sizeof(uint8_t)},
           {p->grp, 2 * sizeof(double)}};
  for (size_t k = 0; k < sizeof a / sizeof a[0]; k++) {
    if (!a[k].arr) continue; /* grp is optional */
    struct permute_job g = {.perm = perm, .src = a[k].arr, .dst = tmp, .width = a[k].width};
    hy_pool_for(pool, n, 16384, gather_body, &g);
    struct permute_job c = {.src = tmp, .dst = a[k].arr, .width = 1};
    hy_pool_for(pool, n * a[k].width, 1 << 18, copy_body, &c);
  }
}

void hy_part_copy(struct hy_part *dst, const struct hy_part *src) {
  hy_part_init(dst);
  hy_part_resize(dst, src->n);
  size_t n = src->n;
  if (n == 0) return;
  memcpy(dst->pos, src->pos, 3 * n * sizeof(double));
  memcpy(dst->vel, src->vel, 3 * n * sizeof(double));
  memcpy(dst->acc, src->acc, 3 * n * sizeof(double));
  memcpy(dst->acc_w, src->acc_w, 3 * n * sizeof(double));
  memcpy(dst->mass, src->mass, n * sizeof(double));
  memcpy(dst->pot, src->pot, n * sizeof(double));
  memcpy(dst->id, src->id, n * sizeof(uint64_t));
  memcpy(dst->type, src->type, n * sizeof(uint8_t));
}

double hy_part_total_mass(const struct hy_part *p) {
  double m = 0.0;
  for (size_t i = 0; i < p->n; i++) m += p->mass[i];
  return m;
}

/* sums over [b, e): mass, m x[3], x[3], count of finite positions */
static void com_sums(const struct hy_part *p, size_t b, size_t e, double s[8]) {
  double m = 0.0, mx[3] = {0.0, 0.0, 0.0}, x[3] = {0.0, 0.0, 0.0};
  size_t k = 0;
  for (size_t i = b; i < e; i++) {
    const double *r = p->pos + 3 * i;
    if (!(isfinite(r[0]) && isfinite(r[1]) && isfinite(r[2]))) continue;
    for (int d = 0; d < 3; d++) {
      mx[d] += p->mass[i] * r[d];
      x[d] += r[d];
    }
    m += p->mass[i];
    k++;
  }
  s[0] = m;
  for (int d = 0; d < 3; d++) {
    s[1 + d] = mx[d];
    s[4 + d] = x[d];
  }
  s[7] = (double)k;
}

static void com_finish(const double s[8], double c[3]) {
  for (int d = 0; d < 3; d++) c[d] = s[0] > 0.0 ? s[1 + d] / s[0] : s[7] > 0.0 ? s[4 + d] / s[7] : 0.0;
}

void hy_part_com(const struct hy_part *p, double c[3]) {
  double s[8];
  com_sums(p, 0, p->n, s);
  com_finish(s, c);
}

struct com_job {
  const struct hy_part *p;
  double *part; /* 8 per thread */
};

static void com_body(void *arg, size_t b, size_t e, int tid) {
  struct com_job *j = arg;
  double s[8];
  com_sums(j->p, b, e, s);
  for (int k = 0; k < 8; k++) j->part[8 * tid + k] += s[k];
}

void hy_part_com_pool(const struct hy_part *p, struct hy_pool *pool, double c[3]) {
  int nt = hy_pool_size(pool);
  double *part = hy_calloc("centre of mass", (size_t)nt * 8, sizeof(double));
  struct com_job j = {.p = p, .part = part};
  hy_pool_for(pool, p->n, 65536, com_body, &j);
  double s[8] = {0};
  for (int t = 0; t < nt; t++)
    for (int k = 0; k < 8; k++) s[k] += part[8 * t + k];
  hy_free(part);
  com_finish(s, c);
}
