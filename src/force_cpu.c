/* SPDX-License-Identifier: GPL-3.0-or-later
 * force_cpu.c: see force_cpu.h. */
#include "config.h"

#include "force_cpu.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "alloc.h"
#include "hy_shared.h"
#include "split.h"

#define MAX_NVEC 16

struct walk_job {
  const struct hy_tree *t;
  const struct hy_part *src;
  const double *sink;
  size_t n_sink;
  long self_base;
  const struct hy_walk_cfg *cfg;
  double *acc0, *acc1, *pot;
  atomic_uint_fast64_t n_pp, n_pc;
};

static void walk_body(void *arg, size_t gb, size_t ge, int tid) {
  (void)tid;
  struct walk_job *j = arg;
  const struct hy_tree *t = j->t;
  const struct hy_walk_cfg *cfg = j->cfg;
  const int nvec = cfg->nvec;
  const double eps2 = cfg->eps * cfg->eps;
  const double r2sq = cfg->r2 * cfg->r2;
  const int32_t n_part = (int32_t)t->n_part;
  uint64_t n_pp = 0, n_pc = 0;
  for (size_t g = gb; g < ge; g++) {
    size_t first = g * (size_t)nvec;
    int n_valid = (int)((j->n_sink - first) < (size_t)nvec ? (j->n_sink - first) : (size_t)nvec);
    double s[MAX_NVEC][3], a0[MAX_NVEC][3], a1[MAX_NVEC][3], pt[MAX_NVEC];
    long self[MAX_NVEC];
    double cmax = 0.0, bnd[MAX_NVEC] = {0};
    for (int k = 0; k < n_valid && cfg->sink_scale; k++)
      if (cfg->sink_scale[first + (size_t)k] > cmax) cmax = cfg->sink_scale[first + (size_t)k];
    for (int k = 0; k < nvec; k++) {
      size_t idx = first + (size_t)(k < n_valid ? k : n_valid - 1);
      for (int d = 0; d < 3; d++) {
        s[k][d] = j->sink[3 * idx + d];
        a0[k][d] = a1[k][d] = 0.0;
      }
      pt[k] = 0.0;
      self[k] = (j->self_base >= 0 && k < n_valid) ? j->self_base + (long)(first + (size_t)k) : -1;
    }
    int32_t cur = t->root;
    while (cur != HY_NONE) {
      const int is_part = cur < n_part;
      const double *r;
      double m, rb2 = 0.0, bmax = 0.0, b2 = 0.0;
      if (is_part) {
        r = j->src->pos + 3 * (size_t)cur;
        m = j->src->mass[cur];
      } else {
        size_t c = (size_t)(cur - n_part);
        r = t->cm + 3 * c;
        m = t->mass[c];
        rb2 = t->rb[c] * t->rb[c];
        bmax = t->bmax[c];
        b2 = t->b2[c];
      }
      double dx[MAX_NVEC][3], d2[MAX_NVEC], d2min = INFINITY;
      for (int k = 0; k < nvec; k++) {
        for (int d = 0; d < 3; d++) dx[k][d] = r[d] - s[k][d];
        d2[k] = dx[k][0] * dx[k][0] + dx[k][1] * dx[k][1] + dx[k][2] * dx[k][2];
        if (d2[k] < d2min) d2min = d2[k];
      }
      if (cfg->mode == HY_WALK_HARD) {
        double lim = HY_HARD_REACH(cfg->r2, bmax);
        if (d2min >= (is_part ? r2sq : lim * lim)) {
          cur = t->next[cur];
          continue;
        }
      }
      if (!is_part && (cfg->sink_scale ? !HY_MAC_REL_ACCEPT(d2min, sqrt(3 * b2), cmax, bmax) : rb2 > d2min)) {
        cur = t->more[cur];
        continue;
      }
      for (int k = 0; k < n_valid && !is_part; k++) {
        const double d = sqrt(d2[k]);
        bnd[k] += 3 * b2 / (d2[k] * (d - bmax) * (d - bmax));
      }
      for (int k = 0; k < nvec; k++) {
        double r2s = d2[k] + eps2;
        if (cur == self[k] || r2s <= 0.0) continue;
        double rinv = 1.0 / sqrt(r2s);
        double mr = m * rinv, mr3 = mr * rinv * rinv;
        double w0 = 1.0, w1 = 0.0;
        if (cfg->mode != HY_WALK_FULL) {
          double kk = hy_dll_k(sqrt(d2[k]), cfg->r1, cfg->r2);
          if (cfg->mode == HY_WALK_HARD) {
            w0 = kk;
          } else if (cfg->mode == HY_WALK_SPLIT) {
            w0 = kk;
            w1 = 1.0 - kk;
          } else {
            w0 = cfg->n_ratio - (cfg->n_ratio - 1.0) * kk;
          }
        }
        for (int d = 0; d < 3; d++) {
          a0[k][d] += w0 * mr3 * dx[k][d];
          a1[k][d] += w1 * mr3 * dx[k][d];
        }
        pt[k] -= mr;
      }
      if (is_part) /* the skipped self pair is not an interaction */
        n_pp += (uint64_t)n_valid - ((self[0] >= 0 && cur >= self[0] && cur < self[0] + n_valid) ? 1u : 0u);
      else
        n_pc += (uint64_t)n_valid;
      cur = t->next[cur];
    }
    for (int k = 0; k < n_valid; k++) {
      size_t i = first + (size_t)k;
      for (int d = 0; d < 3; d++) {
        j->acc0[3 * i + d] = a0[k][d];
        if (j->acc1) j->acc1[3 * i + d] = a1[k][d];
      }
      if (j->pot) j->pot[i] = cfg->want_pot ? pt[k] : 0.0;
      if (cfg->bound) cfg->bound[i] = bnd[k];
    }
  }
  atomic_fetch_add(&j->n_pp, n_pp);
  atomic_fetch_add(&j->n_pc, n_pc);
}

void hy_cpu_walk(const struct hy_tree *t, const struct hy_part *src, const double *sink_pos, size_t n_sink,
                 long self_base, const struct hy_walk_cfg *cfg, double *acc0, double *acc1, double *pot,
                 uint64_t counts[2], struct hy_pool *pool) {
  if (cfg->nvec < 1 || cfg->nvec > MAX_NVEC) hy_die("hy_cpu_walk: nvec %d out of range", cfg->nvec);
  struct walk_job j = {.t = t, .src = src, .sink = sink_pos, .n_sink = n_sink, .self_base = self_base,
                       .cfg = cfg, .acc0 = acc0, .acc1 = acc1, .pot = pot};
  atomic_init(&j.n_pp, 0);
  atomic_init(&j.n_pc, 0);
  size_t groups = (n_sink + (size_t)cfg->nvec - 1) / (size_t)cfg->nvec;
  hy_pool_for(pool, groups, 64, walk_body, &j);
  if (counts) {
    counts[HY_COUNT_PP] = atomic_load(&j.n_pp);
    counts[HY_COUNT_PC] = atomic_load(&j.n_pc);
  }
}

struct direct_job {
  const double *src_pos, *src_mass, *sink;
  size_t n_src;
  long self_base;
  double eps2, r1, r2;
  double *acc, *acc_hard, *pot;
};

static void direct_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct direct_job *j = arg;
  for (size_t i = b; i < e; i++) {
    const double *s = j->sink + 3 * i;
    double a[3] = {0, 0, 0}, ah[3] = {0, 0, 0}, p = 0.0;
    long self = j->self_base >= 0 ? j->self_base + (long)i : -1;
    for (size_t k = 0; k < j->n_src; k++) {
      if ((long)k == self) continue;
      const double *r = j->src_pos + 3 * k;
      double dx = r[0] - s[0], dy = r[1] - s[1], dz = r[2] - s[2];
      double d2 = dx * dx + dy * dy + dz * dz;
      double r2s = d2 + j->eps2;
      if (r2s <= 0.0) continue;
      double rinv = 1.0 / sqrt(r2s);
      double mr = j->src_mass[k] * rinv, mr3 = mr * rinv * rinv;
      a[0] += mr3 * dx;
      a[1] += mr3 * dy;
      a[2] += mr3 * dz;
      if (j->acc_hard) {
        double kk = hy_dll_k(sqrt(d2), j->r1, j->r2) * mr3;
        ah[0] += kk * dx;
        ah[1] += kk * dy;
        ah[2] += kk * dz;
      }
      p -= mr;
    }
    for (int d = 0; d < 3; d++) {
      j->acc[3 * i + d] = a[d];
      if (j->acc_hard) j->acc_hard[3 * i + d] = ah[d];
    }
    if (j->pot) j->pot[i] = p;
  }
}

void hy_cpu_direct(const double *src_pos, const double *src_mass, size_t n_src, const double *sink_pos,
                   size_t n_sink, long self_base, double eps, double r1, double r2, double *acc,
                   double *acc_hard, double *pot, struct hy_pool *pool) {
  struct direct_job j = {.src_pos = src_pos, .src_mass = src_mass, .sink = sink_pos, .n_src = n_src,
                         .self_base = self_base, .eps2 = eps * eps, .r1 = r1, .r2 = r2,
                         .acc = acc, .acc_hard = acc_hard, .pot = pot};
  hy_pool_for(pool, n_sink, 16, direct_body, &j);
}
