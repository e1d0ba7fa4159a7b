/* SPDX-License-Identifier: GPL-3.0-or-later
 * decomp.c: see decomp.h. The decomposition's set-up, grid, owner lookup
 * and restart state; the sampling and cut are in decomp_cut.c, the sample
 * weights by cost in decomp_cost.c, the particle exchange in
 * decomp_exchange.c (decomp_internal.h: their shared state). */
#include "config.h"

#include "decomp.h"
#include "decomp_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

void *hy_decomp_scratch(struct scratch *s, size_t n, size_t size, const char *label) {
  const size_t need = hy_size_mul_or_die(n + 1, size, label);
  if (need > s->bytes) {
    hy_free(s->p);
    s->bytes = need <= SIZE_MAX / 2 ? need + need / 8 : need;
    s->p = hy_malloc(label, s->bytes, 1);
  }
  return s->p;
}

static void scratch_free(struct scratch *s) {
  hy_free(s->p);
  s->p = NULL;
  s->bytes = 0;
}

void hy_decomp_set_pool(struct hy_decomp *d, struct hy_pool *pool) { d->pool = pool; }

int hy_decomp_n_threads(const struct hy_decomp *d) { return d->pool ? hy_pool_size(d->pool) : 1; }

void hy_decomp_for_all(const struct hy_decomp *d, size_t n, size_t grain, void (*body)(void *, size_t, size_t, int),
                       void *arg) {
  if (d->pool)
    hy_pool_for(d->pool, n, grain, body, arg);
  else if (n)
    body(arg, 0, n, 0);
}

static const double *xbounds(const struct hy_decomp *d) { return d->bounds; }

/* ------------------------------------------------------------------ grid */

void hy_decomp_factor(int P, int grid[3]) {
  int best[3] = {P > 0 ? P : 1, 1, 1};
  if (P < 1) {
    memcpy(grid, best, sizeof best);
    return;
  }
  /* a >= b >= c, a b c = P; minimise a / c (compared as a c' < a' c); ties
   * to the larger a, then the larger b. */
  for (int c = 1; (long long)c * c * c <= P; c++) {
    if (P % c) continue;
    int q = P / c;
    for (int b = c; (long long)b * b <= q; b++) {
      if (q % b) continue;
      int a = q / b;
      long long lhs = (long long)a * best[2], rhs = (long long)best[0] * c;
      int better = lhs < rhs || (lhs == rhs && (a > best[0] || (a == best[0] && b > best[1])));
      if (better) {
        best[0] = a;
        best[1] = b;
        best[2] = c;
      }
    }
  }
  memcpy(grid, best, sizeof best);
}

/* A positive int at *s, advancing *s; -1 if there is none or it overflows. */
static int parse_pos_int(const char **s) {
  const char *p = *s;
  if (*p < '0' || *p > '9') return -1;
  char *end;
  errno = 0;
  long v = strtol(p, &end, 10);
  if (errno || v < 1 || v > INT_MAX) return -1;
  *s = end;
  return (int)v;
}

int hy_decomp_parse_grid(const char *s, int P, int grid[3], struct hy_err *err) {
  if (P < 1) return hy_err_set(err, "DomainGrid: bad rank count %d", P);
  if (!s) return hy_err_set(err, "DomainGrid: no value");
  if (strcmp(s, "auto") == 0) {
    hy_decomp_factor(P, grid);
    return 0;
  }
  int g[3];
  const char *c = s;
  for (int k = 0; k < 3; k++) {
    g[k] = parse_pos_int(&c);
    if (g[k] < 0 || (k < 2 && *c++ != 'x')) break;
    if (k == 2 && *c == '\0') {
      long long prod = (long long)g[0] * g[1] * g[2];
      if (prod != P)
        return hy_err_set(err, "DomainGrid %dx%dx%d needs %lld MPI ranks, the run has %d", g[0], g[1], g[2],
                          prod, P);
      memcpy(grid, g, sizeof g);
      return 0;
    }
  }
  return hy_err_set(err, "DomainGrid '%s' is not auto or AxBxC with positive integers (e.g. 4x2x2)", s);
}

/* ------------------------------------------------------------------ setup */

int hy_decomp_mpi_fail(struct hy_err *err, int rc, const char *what) {
  char w[256];
  snprintf(w, sizeof w, "domain decomposition: %s", what);
  return hy_mpi_check(rc, w, err);
}

struct hy_decomp *hy_decomp_create(MPI_Comm comm, const int grid[3], double sample_rate, double coef,
                                   unsigned long seed, struct hy_err *err) {
  int ret = 0;
  struct hy_decomp *d = hy_calloc("domain decomposition", 1, sizeof *d);
  d->comm = MPI_COMM_NULL;
  if (!(sample_rate > 0 && sample_rate <= 1)) {
    hy_err_set(err, "domain decomposition: SampleRate %g is not in (0, 1]", sample_rate);
    goto fail;
  }
  if (!(coef > 0 && coef <= 1)) {
    hy_err_set(err, "domain decomposition: smoothing factor %g is not in (0, 1]", coef);
    goto fail;
  }
  d->sample_rate = sample_rate;
  d->cost = d->cost_lo = d->cost_hi = 1.0;
  d->coef = coef;
  d->par_split = 1;
  d->max_msg_bytes = INT_MAX;
  MPI_TRY(MPI_Comm_dup(comm, &d->comm), "MPI_Comm_dup");
  MPI_TRY(MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  MPI_TRY(MPI_Comm_rank(d->comm, &d->rank), "MPI_Comm_rank");
  MPI_TRY(MPI_Comm_size(d->comm, &d->size), "MPI_Comm_size");
  /* NodeSharedMemory no (hy_shm_set_use) on any rank: every record in MPI messages */
  d->shm = hy_shm_create(d->comm, hy_shm_env(), "domain decomposition", "dd_window");
  if (grid) {
    if (grid[0] < 1 || grid[1] < 1 || grid[2] < 1 || (long long)grid[0] * grid[1] * grid[2] != d->size) {
      hy_err_set(err, "DomainGrid %dx%dx%d needs %lld MPI ranks, the run has %d", grid[0], grid[1], grid[2],
                 (long long)grid[0] * grid[1] * grid[2], d->size);
      goto fail;
    }
    memcpy(d->grid, grid, sizeof d->grid);
  } else {
    hy_decomp_factor(d->size, d->grid);
  }
  d->n_bounds = hy_decomp_zb_off(d, d->grid[0], 0); /* one past the last column */
  d->bounds = hy_malloc("domain boundaries", d->n_bounds, sizeof(double));
  d->new_bounds = hy_malloc("domain boundaries", d->n_bounds + 1, sizeof(double)); /* + the samples' flag */
  d->rng = gsl_rng_alloc(gsl_rng_mt19937);
  if (!d->rng) {
    hy_err_set(err, "domain decomposition: cannot allocate the sampling RNG");
    goto fail;
  }
  gsl_rng_set(d->rng, seed + (unsigned long)d->rank);
done:
  if (ret == 0) return d;
fail:
  hy_decomp_free(d);
  return NULL;
}

void hy_decomp_free(struct hy_decomp *d) {
  if (!d) return;
  hy_decomp_join_cut(d);
  hy_free(d->holes);
  hy_free(d->srcs);
  struct scratch *sc[] = {&d->samp, &d->sidx, &d->all,  &d->order, &d->leave,
                          &d->sbuf, &d->rbuf, &d->lpv,  &d->bands};
  for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++) scratch_free(sc[k]);
  hy_shm_free(d->shm);
  if (d->comm != MPI_COMM_NULL) MPI_Comm_free(&d->comm);
  if (d->rng) gsl_rng_free(d->rng);
  hy_free(d->bounds);
  hy_free(d->new_bounds);
  hy_free(d->cost_avg);
  hy_free(d->cost_all);
  hy_free(d);
}

void hy_decomp_grid(const struct hy_decomp *d, int grid[3]) { memcpy(grid, d->grid, sizeof d->grid); }

void hy_decomp_use_messages(struct hy_decomp *d) {
  hy_shm_free(d->shm);
  d->shm = hy_shm_create(d->comm, 0, "domain decomposition", "dd_window");
}

int hy_decomp_node_ranks(const struct hy_decomp *d) { return hy_shm_node_ranks(d->shm); }

void hy_decomp_set_max_msg_bytes(struct hy_decomp *d, size_t bytes) {
  d->max_msg_bytes = bytes < 1 ? 1 : bytes > INT_MAX ? (size_t)INT_MAX : bytes;
}

int hy_decomp_rank_of(const struct hy_decomp *d, int ix, int iy, int iz) {
  return (ix * d->grid[1] + iy) * d->grid[2] + iz;
}

void hy_decomp_cell_of(const struct hy_decomp *d, int rank, int *ix, int *iy, int *iz) {
  *iz = rank % d->grid[2];
  *iy = (rank / d->grid[2]) % d->grid[1];
  *ix = rank / (d->grid[2] * d->grid[1]);
}

/* ---------------------------------------------------------- owner lookup */

/* b[0..np] ascending with b[0] = -inf, b[np] = +inf: the largest i < np
 * with b[i] <= x, i.e. the slot [b[i], b[i+1]) that holds x. */
static int find_slot(const double *b, int np, double x) {
  int lo = 0, hi = np - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (b[mid] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

int hy_decomp_owner(const struct hy_decomp *d, const double x[3]) {
  if (!d->have_bounds) return -1;
  int ix = find_slot(xbounds(d), d->grid[0], x[0]);
  int iy = find_slot(d->bounds + hy_decomp_yb_off(d, ix), d->grid[1], x[1]);
  int iz = find_slot(d->bounds + hy_decomp_zb_off(d, ix, iy), d->grid[2], x[2]);
  return hy_decomp_rank_of(d, ix, iy, iz);
}

int hy_decomp_box(const struct hy_decomp *d, int rank, double lo[3], double hi[3]) {
  if (!d->have_bounds || rank < 0 || rank >= d->size) return -1;
  int ix, iy, iz;
  hy_decomp_cell_of(d, rank, &ix, &iy, &iz);
  const double *xb = xbounds(d), *yb = d->bounds + hy_decomp_yb_off(d, ix);
  const double *zb = d->bounds + hy_decomp_zb_off(d, ix, iy);
  lo[0] = xb[ix];
  hi[0] = xb[ix + 1];
  lo[1] = yb[iy];
  hi[1] = yb[iy + 1];
  lo[2] = zb[iz];
  hi[2] = zb[iz + 1];
  return 0;
}

const double *hy_decomp_bounds(const struct hy_decomp *d, size_t *n) {
  *n = d->n_bounds;
  return d->have_bounds ? d->bounds : NULL;
}

/* -------------------------------------------------------------- restarts */

/* State blob: have_bounds (int32), the n_bounds boundaries, the RNG state. */
size_t hy_decomp_state_size(const struct hy_decomp *d) {
  return sizeof(int32_t) + d->n_bounds * sizeof(double) + gsl_rng_size(d->rng);
}

void hy_decomp_state_save(const struct hy_decomp *d, void *buf) {
  unsigned char *b = buf;
  int32_t hb = d->have_bounds;
  memcpy(b, &hb, sizeof hb);
  b += sizeof hb;
  memcpy(b, d->bounds, d->n_bounds * sizeof(double));
  b += d->n_bounds * sizeof(double);
  memcpy(b, gsl_rng_state(d->rng), gsl_rng_size(d->rng));
}

int hy_decomp_state_load(struct hy_decomp *d, const void *buf, size_t bytes, struct hy_err *err) {
  if (bytes != hy_decomp_state_size(d))
    return hy_err_set(err, "domain decomposition: restart state of %zu bytes, expected %zu (another DomainGrid?)",
                      bytes, hy_decomp_state_size(d));
  const unsigned char *b = buf;
  int32_t hb;
  memcpy(&hb, b, sizeof hb);
  b += sizeof hb;
  d->have_bounds = hb != 0;
  hy_decomp_join_cut(d);
  d->pre = PRE_NONE;
  memcpy(d->bounds, b, d->n_bounds * sizeof(double));
  b += d->n_bounds * sizeof(double);
  memcpy(gsl_rng_state(d->rng), b, gsl_rng_size(d->rng));
  return 0;
}
