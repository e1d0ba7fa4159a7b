/* SPDX-License-Identifier: GPL-3.0-or-later
 * decomp.c: see decomp.h. The sampling-based multisection follows Makino
 * (2004) and GreeM as summarised in seeds-digest 4.6; the sample count per
 * rank is Watanabe & Nakasato eq 12-13 (seeds-digest 4.7). */
#include "config.h"

#include "decomp.h"
#include "shm.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "alloc.h"
#include "trace.h"

/* One particle on the wire: pos, vel, acc, acc_w (3 doubles each), mass,
 * pot (doubles), id (uint64), type (uint8); packed with memcpy, no padding. */
#define OFF_POS 0
#define OFF_VEL 24
#define OFF_ACC 48
#define OFF_ACCW 72
#define OFF_MASS 96
#define OFF_POT 104
#define OFF_ID 112
#define OFF_TYPE 120
#define REC_BYTES 121

/* A buffer kept from one exchange to the next: grown when too small, never
 * shrunk. A freshly allocated buffer of several MB costs a page fault per
 * page at its first use, at every decomposition: with the samples, the
 * gathered samples and the records sent and received allocated anew, the
 * exchange of 2^26 particles on two ranks (one H100 each) took several
 * times as long (doc/performance.md). */
struct scratch {
  void *p;
  size_t bytes;
};

static void *scratch(struct scratch *s, size_t n, size_t size, const char *label) {
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

struct hy_decomp {
  MPI_Comm comm;        /**< duplicate of the caller's communicator, MPI_ERRORS_RETURN */
  int rank, size;       /**< this rank and the number of ranks in comm */
  int grid[3];          /**< Px, Py, Pz */
  double sample_rate;   /**< R_samp */
  double cost;          /**< this rank's sample weight (hy_decomp_cost_update), 1 = off */
  double cost_lo, cost_hi; /**< the smallest and largest of every rank's cost */
  double *cost_avg, *cost_all; /**< per rank: its measured factor averaged, and the factor held (hy_decomp_cost_update; in use over the mean) */
  double coef;          /**< boundary smoothing, 1 = off */
  int have_bounds;      /**< nonzero after the first exchange */
  size_t n_bounds;      /**< (Px+1) + Px (Py+1) + Px Py (Pz+1) */
  double *bounds;       /**< x bounds, then y bounds per slab, then z bounds per column */
  double *new_bounds;   /**< scratch for rank 0 (n_bounds) */
  gsl_rng *rng;         /**< sampling RNG, seeded with seed + rank */
  size_t max_msg_bytes; /**< cap on one MPI_Alltoallv, INT_MAX by default */
  struct hy_pool *pool; /**< threads for the per-particle passes (NULL: the calling thread) */
  int moved_ok;         /**< the last exchange finished: holes, n_holes and n_keep describe it */
  size_t *holes;        /**< indices below n_keep that a particle from beyond took */
  size_t *srcs;         /**< the index from n_keep on that each hole's particle came from */
  size_t n_holes, holes_cap, n_keep;
  /* buffers of every exchange, kept (see scratch; `leave` for the host path) */
  struct scratch samp, sidx, all, order, leave, sbuf, rbuf, lpv, bands;
  /* the next exchange's boundaries made ahead (hy_decomp_pre_*): the step
   * done last (PRE_NONE, PRE_DRAWN, PRE_SAMPLING: the device's gather
   * begun by pre_dev, PRE_SAMPLED, PRE_CUT: new_bounds hold them on every
   * rank), for pre_n particles with pre_ns samples of pre_total */
  int pre;
  const struct hy_decomp_dev *pre_dev;
  pthread_t cut_thread; /* rank 0, PRE_CUTTING: the thread that cuts (cut_main) */
  int cutting;          /* cut_thread runs and has to be joined */
  size_t pre_n, pre_ns;
  int par_split; /* the x cuts may use split_axis_par (0 only inside hy_decomp_cut_samples) */
  uint64_t pre_total;
  struct hy_shm *shm; /* the node's ranks: the leavers' records through a shared-memory window (shm.h) */
};

enum { PRE_NONE, PRE_DRAWN, PRE_SAMPLING, PRE_SAMPLED, PRE_CUTTING, PRE_CUT };

static void join_cut(struct hy_decomp *d);

void hy_decomp_set_pool(struct hy_decomp *d, struct hy_pool *pool) { d->pool = pool; }

static int n_threads(const struct hy_decomp *d) { return d->pool ? hy_pool_size(d->pool) : 1; }

/* body over [0, n) in chunks of at least `grain` on the pool's threads, or on this one */
static void for_all(const struct hy_decomp *d, size_t n, size_t grain, void (*body)(void *, size_t, size_t, int),
                    void *arg) {
  if (d->pool)
    hy_pool_for(d->pool, n, grain, body, arg);
  else if (n)
    body(arg, 0, n, 0);
}

/* The lowest ID with a non-finite position, per thread. */
struct finite_job {
  const struct hy_part *p;
  uint64_t *bad;
};

static void finite_body(void *arg, size_t b, size_t e, int tid) {
  struct finite_job *j = arg;
  uint64_t bad = j->bad[tid];
  for (size_t i = b; i < e; i++) {
    const double *x = j->p->pos + 3 * i;
    if (!(isfinite(x[0]) && isfinite(x[1]) && isfinite(x[2])) && j->p->id[i] < bad) bad = j->p->id[i];
  }
  j->bad[tid] = bad;
}

/* The owner pass and the leaver lists run over nb fixed blocks of the
 * particles (block k: [k n / nb, (k+1) n / nb)), so that each block's
 * leavers, in ascending order, go to places the counts of the blocks
 * before it fix: the same lists on any number of threads. */
struct owner_job {
  const struct hy_decomp *d;
  const double *pos;
  int *dest;
  size_t n, nb;
  size_t stride;   /* counts per block: P, padded so that blocks share no cache line */
  uint64_t *count; /* per block: particles per destination */
  size_t *at;      /* per block: next place of its leavers per destination in `order` (fill pass) */
  size_t *leave_at; /* per block: next place of its leavers in `leave` (fill pass) */
  size_t *order;   /* the leavers by destination, ascending within each (the sending order) */
  size_t *leave;   /* all leavers, ascending */
};

static size_t block_start(size_t n, size_t nb, size_t k) {
  const size_t q = n / nb, rem = n % nb;
  return k * q + (k < rem ? k : rem);
}

/* Bounds of slab ix: y bounds start at yb(ix), Py + 1 values. */
static const double *xbounds(const struct hy_decomp *d) { return d->bounds; }
static size_t yb_off(const struct hy_decomp *d, int ix) {
  return (size_t)d->grid[0] + 1 + (size_t)ix * ((size_t)d->grid[1] + 1);
}
static size_t zb_off(const struct hy_decomp *d, int ix, int iy) {
  size_t base = (size_t)d->grid[0] + 1 + (size_t)d->grid[0] * ((size_t)d->grid[1] + 1);
  return base + ((size_t)ix * (size_t)d->grid[1] + (size_t)iy) * ((size_t)d->grid[2] + 1);
}

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

static int mpi_fail(struct hy_err *err, int rc, const char *what) {
  char w[256];
  snprintf(w, sizeof w, "domain decomposition: %s", what);
  return hy_mpi_check(rc, w, err);
}

#define MPI_TRY(call, what)                 \
  do {                                      \
    int rc_ = (call);                       \
    if (rc_ != MPI_SUCCESS) {               \
      ret = mpi_fail(err, rc_, what);       \
      goto done;                            \
    }                                       \
  } while (0)

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
  d->n_bounds = zb_off(d, d->grid[0], 0); /* one past the last column */
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
  join_cut(d);
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
  int iy = find_slot(d->bounds + yb_off(d, ix), d->grid[1], x[1]);
  int iz = find_slot(d->bounds + zb_off(d, ix, iy), d->grid[2], x[2]);
  return hy_decomp_rank_of(d, ix, iy, iz);
}

int hy_decomp_box(const struct hy_decomp *d, int rank, double lo[3], double hi[3]) {
  if (!d->have_bounds || rank < 0 || rank >= d->size) return -1;
  int ix, iy, iz;
  hy_decomp_cell_of(d, rank, &ix, &iy, &iz);
  const double *xb = xbounds(d), *yb = d->bounds + yb_off(d, ix), *zb = d->bounds + zb_off(d, ix, iy);
  lo[0] = xb[ix];
  hi[0] = xb[ix + 1];
  lo[1] = yb[iy];
  hi[1] = yb[iy + 1];
  lo[2] = zb[iz];
  hi[2] = zb[iz + 1];
  return 0;
}

/* ------------------------------------------------------- multisection */

static void owner_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct owner_job *j = arg;
  for (size_t k = b; k < e; k++) {
    uint64_t *count = j->count + k * j->stride;
    for (size_t i = block_start(j->n, j->nb, k), i1 = block_start(j->n, j->nb, k + 1); i < i1; i++) {
      const int r = hy_decomp_owner(j->d, j->pos + 3 * i);
      j->dest[i] = r;
      count[r]++;
    }
  }
}

static void fill_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct owner_job *j = arg;
  const int me = j->d->rank;
  for (size_t k = b; k < e; k++) {
    size_t *at = j->at + k * j->stride, la = j->leave_at[k];
    for (size_t i = block_start(j->n, j->nb, k), i1 = block_start(j->n, j->nb, k + 1); i < i1; i++) {
      const int r = j->dest[i];
      if (r == me) continue;
      j->order[at[r]++] = i;
      j->leave[la++] = i;
    }
  }
}

/* Start of group k of np over n samples: k n / np (k = np gives n). */
static size_t group_start(size_t n, int k, int np) { return (size_t)((uint64_t)k * n / (uint64_t)np); }

static void swap_rec(double *a, double *b) {
  double t[3];
  memcpy(t, a, sizeof t);
  memcpy(a, b, sizeof t);
  memcpy(b, t, sizeof t);
}

/* Move the records of [lo, hi) whose value along `axis` is below pv
 * (strict) or not above it (!strict) to the front, in one pass with no
 * branch on the values (every record is swapped, the front grows by the
 * comparison's result: random samples would mispredict half the branches of
 * a branching partition); returns the end of that front. */
static size_t part_rec(double *s, size_t lo, size_t hi, int axis, double pv, int strict) {
  size_t m = lo;
  for (size_t i = lo; i < hi; i++) {
    const double v = s[3 * i + (size_t)axis];
    swap_rec(s + 3 * m, s + 3 * i);
    m += strict ? v < pv : v <= pv;
  }
  return m;
}

/* Reorder the n records s (3 doubles each) so that s[j] holds the j-th
 * smallest value along `axis`, the records before it none larger and those
 * after it none smaller (quickselect: median-of-three pivot value, the
 * values below it in front, then, if j lies beyond them, the values equal
 * to it, so that equal values cannot stall it; insertion sort for short
 * ranges). O(n) expected; the samples are random draws. */
static void select_rec(double *s, size_t n, size_t j, int axis) {
  size_t lo = 0, hi = n;
  while (hi - lo > 16) {
    const double a = s[3 * lo + (size_t)axis], b = s[3 * (lo + (hi - lo) / 2) + (size_t)axis],
                 c = s[3 * (hi - 1) + (size_t)axis];
    const double pv = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
    /* pv is one of the values, so [lo, lt) < pv is short of hi and
     * [lt, eq) == pv is not empty: every round shrinks the range */
    const size_t lt = part_rec(s, lo, hi, axis, pv, 1);
    if (j < lt) {
      hi = lt;
      continue;
    }
    const size_t eq = part_rec(s, lt, hi, axis, pv, 0);
    if (j < eq) return;
    lo = eq;
  }
  for (size_t i = lo + 1; i < hi; i++)
    for (size_t k = i; k > lo && s[3 * (k - 1) + (size_t)axis] > s[3 * k + (size_t)axis]; k--)
      swap_rec(s + 3 * (k - 1), s + 3 * k);
}

/* The largest value along `axis` of the records [from, to) (from < to). */
static double max_rec(const double *s, size_t from, size_t to, int axis) {
  double m = s[3 * from + (size_t)axis];
  for (size_t i = from + 1; i < to; i++) m = s[3 * i + (size_t)axis] > m ? s[3 * i + (size_t)axis] : m;
  return m;
}

/* Split the n samples s (3 doubles each) along `axis` into np groups of
 * equal count and set b[0..np]: b[0] = -inf, b[np] = +inf, and b[k] between
 * group k-1 and group k: the midpoint of the largest sample of one and the
 * smallest of the next (0.5 a + 0.5 b cannot overflow), which are the
 * (j-1)-th and j-th smallest for j = floor(k n / np) < n. The samples are
 * reordered so that group k holds [j_k, j_{k+1}) (order statistics by
 * selection, not a full sort: the boundaries are those a sort gives). When
 * j = 0 (fewer samples than groups) the groups before it are empty and their
 * boundaries are the smallest sample, so they get empty domains and the
 * boundaries stay ordered. No samples: the interior boundaries are 0. Never
 * NaN, since the positions are finite. */
static void split_axis(double *s, size_t n, int axis, int np, double *b) {
  b[0] = -INFINITY;
  b[np] = INFINITY;
  size_t prev = 0;
  int placed = 0;
  double last_max = 0.0; /* largest value of [0, prev) */
  for (int k = 1; k < np; k++) {
    const size_t j = group_start(n, k, np);
    if (n == 0) {
      b[k] = 0.0;
      continue;
    }
    if (j > prev || !placed) select_rec(s + 3 * prev, n - prev, j - prev, axis);
    if (j > prev) last_max = max_rec(s, prev, j, axis);
    b[k] = j == 0 ? s[axis] : 0.5 * last_max + 0.5 * s[3 * j + (size_t)axis];
    prev = j;
    placed = 1;
  }
}

/* The x cuts of many samples on the pool's threads (split_axis_par): the
 * samples are first moved, in parallel and stably, into the buckets that
 * two values per cut delimit (a band around each cut's value, estimated
 * from an evenly spaced subsample), so that each cut's selection runs in
 * its band alone. */
/* PAR_MIN_THREADS: on 2 cores two threads gave no steady gain for 262 144
 * samples, the two passes over the samples costing about 8 ns each per
 * sample on one thread; the GPU hosts give a rank 16 */
enum {
  PAR_SPLIT_MIN = 65536,
  PAR_MIN_THREADS = 4,
  PAR_BLOCKS = 64,
  PAR_SUB = 4096,
  PAR_BAND = 192 /* 3 sqrt(PAR_SUB) */
};

struct band_job {
  const double *s;  /* the samples (3 doubles each) */
  double *out;      /* their copy in bucket order */
  unsigned char *bkt; /* each sample's bucket */
  int scatter;      /* 0: find and count the buckets; 1: copy the samples into them */
  size_t n;
  int axis, np;     /* np groups: 2 np - 1 buckets */
  const double *th; /* per cut: the band's lowest and highest value */
  size_t *at;       /* [PAR_BLOCKS][2 np - 1]: counts, then each block's next place per bucket */
};

/* Bucket of v: 2c below cut c's band (and above the one before), 2c + 1 in
 * it, 2 (np - 1) above the last band; counted without branches (random
 * samples would mispredict a search's). */
static int bucket_of(double v, const double *th, int np) {
  int k = 0;
  for (int c = 0; c < np - 1; c++) k += (v >= th[2 * c]) + (v > th[2 * c + 1]);
  return k;
}

/* Blocks [b, e) of the samples: their buckets counted, or the samples
 * copied to their places (j->scatter). */
static void band_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct band_job *j = arg;
  const size_t nb = (size_t)(2 * j->np - 1);
  for (size_t k = b; k < e; k++) {
    size_t *at = j->at + k * nb;
    for (size_t i = block_start(j->n, PAR_BLOCKS, k), i1 = block_start(j->n, PAR_BLOCKS, k + 1); i < i1; i++) {
      if (j->scatter) {
        memcpy(j->out + 3 * at[j->bkt[i]]++, j->s + 3 * i, 3 * sizeof(double));
      } else {
        const int bk = bucket_of(j->s[3 * i + (size_t)j->axis], j->th, j->np);
        j->bkt[i] = (unsigned char)bk;
        at[bk]++;
      }
    }
  }
}

/* split_axis of many samples (n >= PAR_SPLIT_MIN) with the pool: the
 * buckets above, then each cut's selection in its band. The samples end up
 * in d->bands' buffer, in group order: *sp points there (else it stays s).
 * Returns 0, or -1 when the bands of two cuts meet or a cut's rank falls
 * outside its band (about a 6-sigma event for random samples): split_axis
 * then cuts *sp. The boundaries are split_axis's: the same order
 * statistics. */
static int split_axis_par(struct hy_decomp *d, double *s, size_t n, int axis, int np, double *b, double **sp) {
  *sp = s;
  if (np < 2 || np > 128 || n < PAR_SPLIT_MIN || n_threads(d) < PAR_MIN_THREADS) return -1; /* buckets in a byte */
  /* the subsample's values at the bands' edges, by selection (as records:
   * select_rec) */
  double *sub = hy_malloc("decomposition bands", 3 * PAR_SUB, sizeof(double));
  for (size_t i = 0; i < PAR_SUB; i++) sub[3 * i] = s[3 * (i * (n / PAR_SUB)) + (size_t)axis];
  const size_t nb = (size_t)(2 * np - 1);
  double *th = hy_malloc("decomposition bands", 2 * (size_t)np, sizeof(double));
  int ok = 1;
  for (int c = 0; c < np - 1; c++) {
    const size_t q = (size_t)((uint64_t)group_start(n, c + 1, np) * PAR_SUB / n);
    if (q > PAR_BAND) select_rec(sub, PAR_SUB, q - PAR_BAND, 0);
    th[2 * c] = q > PAR_BAND ? sub[3 * (q - PAR_BAND)] : -INFINITY;
    if (q + PAR_BAND < PAR_SUB) select_rec(sub, PAR_SUB, q + PAR_BAND, 0);
    th[2 * c + 1] = q + PAR_BAND < PAR_SUB ? sub[3 * (q + PAR_BAND)] : INFINITY;
    if (c > 0 && !(th[2 * c - 1] < th[2 * c])) ok = 0; /* bands must not meet */
  }
  hy_free(sub);
  if (!ok) {
    hy_free(th);
    return -1;
  }
  size_t *at = hy_calloc("decomposition bands", PAR_BLOCKS * nb, sizeof(size_t));
  /* the copy, then a bucket byte per sample */
  double *out = scratch(&d->bands, n, 25, "decomposition bands"); /* 24 + 1 bytes per sample */
  struct band_job j = {
      .s = s, .out = out, .bkt = (unsigned char *)(out + 3 * n), .n = n, .axis = axis, .np = np, .th = th, .at = at};
  for_all(d, PAR_BLOCKS, 1, band_body, &j);
  /* bucket by bucket, block by block: each block's first place per bucket */
  size_t *first = hy_malloc("decomposition bands", nb + 1, sizeof(size_t));
  size_t pos = 0;
  for (size_t k = 0; k < nb; k++) {
    first[k] = pos;
    for (size_t blk = 0; blk < PAR_BLOCKS; blk++) {
      const size_t c = at[blk * nb + k];
      at[blk * nb + k] = pos;
      pos += c;
    }
  }
  first[nb] = pos;
  j.scatter = 1;
  for_all(d, PAR_BLOCKS, 1, band_body, &j);
  *sp = s = out;
  int rc = 0;
  size_t prev = 0;
  double last_max = 0.0;
  b[0] = -INFINITY;
  b[np] = INFINITY;
  for (int c = 0; c < np - 1 && rc == 0; c++) {
    const size_t jc = group_start(n, c + 1, np), lo = first[2 * c + 1], hi = first[2 * c + 2];
    if (!(lo <= jc && jc < hi)) {
      rc = -1;
      break;
    }
    select_rec(s + 3 * lo, hi - lo, jc - lo, axis);
    /* the largest of [prev, jc) (jc >= 1 here: n >= PAR_SPLIT_MIN > np):
     * every value before the band is below each of the band's, so [lo, jc)
     * holds it unless that is empty */
    if (jc > prev) last_max = max_rec(s, jc > lo ? lo : prev, jc, axis);
    b[c + 1] = 0.5 * last_max + 0.5 * s[3 * jc + (size_t)axis];
    prev = jc;
  }
  hy_free(first);
  hy_free(at);
  hy_free(th);
  return rc;
}

/* Rank 0: the slabs' cuts (y, then z per column), one slab per task. */
struct slab_job {
  const struct hy_decomp *d;
  double *s;
  size_t ns;
};

static void slab_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct slab_job *j = arg;
  const struct hy_decomp *d = j->d;
  const int px = d->grid[0], py = d->grid[1], pz = d->grid[2];
  double *nb = d->new_bounds;
  for (size_t k = b; k < e; k++) {
    const int ix = (int)k;
    const size_t x0 = group_start(j->ns, ix, px), x1 = group_start(j->ns, ix + 1, px);
    split_axis(j->s + 3 * x0, x1 - x0, 1, py, nb + yb_off(d, ix));
    for (int iy = 0; iy < py; iy++) {
      size_t y0 = x0 + group_start(x1 - x0, iy, py), y1 = x0 + group_start(x1 - x0, iy + 1, py);
      split_axis(j->s + 3 * y0, y1 - y0, 2, pz, nb + zb_off(d, ix, iy));
    }
  }
}

/* Rank 0: cut the ns samples into the new boundaries (d->new_bounds): the
 * x cuts (split_axis_par where there are many samples and threads), then
 * each slab's on the pool's threads (disjoint samples and boundaries).
 * Returns 1 if the x cuts ran on the pool, else 0. */
static int multisection(struct hy_decomp *d, double *s, size_t ns) {
  double *nb = d->new_bounds;
  const int par = d->par_split && split_axis_par(d, s, ns, 0, d->grid[0], nb, &s) == 0;
  if (!par) split_axis(s, ns, 0, d->grid[0], nb);
  struct slab_job sj = {.d = d, .s = s, .ns = ns};
  for_all(d, (size_t)d->grid[0], 1, slab_body, &sj);
  /* Optional smoothing: a convex blend of two ordered sets of boundaries is
   * ordered; the infinite outer faces are left alone. */
  if (d->have_bounds && d->coef < 1)
    for (size_t i = 0; i < d->n_bounds; i++)
      if (isfinite(nb[i])) nb[i] = d->coef * nb[i] + (1 - d->coef) * d->bounds[i];
  return par;
}

/* ------------------------------------------------------------ exchange */

/* Stratified over the storage order: sample k is particle
 * floor((k + u_k) n / ns) with u_k uniform in [0, 1), so every particle is
 * drawn ns / n times on average, as by a uniform draw without replacement,
 * and the sample quantiles scatter no more when the order is unrelated to
 * position (less when it follows position). One random number per sample
 * and ascending indices: no marks over all n particles (the bit per
 * particle of Floyd's draw, used before, cost 4 MB of random accesses at
 * 2^25 particles a rank), and the gather walks memory in order. */
void hy_decomp_sample_indices(struct hy_decomp *d, size_t n, size_t ns, size_t *idx) {
  if (n == 0 || ns == 0) return;
  const double w = (double)n / (double)ns;
  for (size_t k = 0; k < ns; k++) {
    const double x = ((double)k + gsl_rng_uniform(d->rng)) * w;
    size_t t = x < (double)n ? (size_t)x : n - 1; /* x < n in exact arithmetic */
    if (k > 0 && t < idx[k - 1]) t = idx[k - 1];  /* rounding cannot reorder them */
    idx[k] = t;
  }
}

/* Particle i's record; its position and velocity from pos and vel (p's own,
 * or a device's copies). forces 0 (the state on a device, whose next force
 * makes them anew): zeros for the accelerations and the potential. */
/* pos NULL: every field but the position and velocity (pack_pv's) */
static void pack(unsigned char *b, const struct hy_part *p, size_t i, const double *pos, const double *vel,
                 int forces) {
  if (pos) {
    memcpy(b + OFF_POS, pos, 24);
    memcpy(b + OFF_VEL, vel, 24);
  }
  if (forces) {
    memcpy(b + OFF_ACC, p->acc + 3 * i, 24);
    memcpy(b + OFF_ACCW, p->acc_w + 3 * i, 24);
    memcpy(b + OFF_POT, p->pot + i, 8);
  } else {
    memset(b + OFF_ACC, 0, 48); /* acc, acc_w */
    memset(b + OFF_POT, 0, 8);
  }
  memcpy(b + OFF_MASS, p->mass + i, 8);
  memcpy(b + OFF_ID, p->id + i, 8);
  memcpy(b + OFF_TYPE, p->type + i, 1);
}

static void unpack(const unsigned char *b, struct hy_part *p, size_t i) {
  memcpy(p->pos + 3 * i, b + OFF_POS, 24);
  memcpy(p->vel + 3 * i, b + OFF_VEL, 24);
  memcpy(p->acc + 3 * i, b + OFF_ACC, 24);
  memcpy(p->acc_w + 3 * i, b + OFF_ACCW, 24);
  memcpy(p->mass + i, b + OFF_MASS, 8);
  memcpy(p->pot + i, b + OFF_POT, 8);
  memcpy(p->id + i, b + OFF_ID, 8);
  memcpy(p->type + i, b + OFF_TYPE, 1);
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

static void copy_particle(struct hy_part *p, size_t j, size_t i) {
  memcpy(p->pos + 3 * j, p->pos + 3 * i, 24);
  memcpy(p->vel + 3 * j, p->vel + 3 * i, 24);
  memcpy(p->acc + 3 * j, p->acc + 3 * i, 24);
  memcpy(p->acc_w + 3 * j, p->acc_w + 3 * i, 24);
  p->mass[j] = p->mass[i];
  p->pot[j] = p->pot[i];
  p->id[j] = p->id[i];
  p->type[j] = p->type[i];
  if (p->grp) memcpy(p->grp + 2 * j, p->grp + 2 * i, 16);
}

/* The leavers' records, the holes' fills and the received records, on the
 * pool's threads: each index of these passes is written once, and the
 * holes (below n_keep) and their sources (from n_keep on) are distinct. */
struct move_job {
  struct hy_part *p;
  unsigned char *buf;      /* records */
  const size_t *list;      /* pack: the leavers in sending order; fill: the holes */
  const size_t *src;       /* fill: each hole's source */
  const double *pos, *vel; /* pack with a device: the leavers' positions and velocities (3 per leaver) */
  int later_pv;            /* pack with a device: no positions and velocities yet (pv_body writes them) */
  const unsigned char **runs; /* unpack: each run's records (else buf holds them one run after another) */
  const size_t *seg;       /* unpack: the first record of each source rank's run (P + 1) */
  const size_t *to;        /* unpack: where each run goes in p */
};

/* How many particles ahead the random passes below (the leavers' records,
 * the holes' fills) ask for their host fields: their indices are spread
 * over arrays of hundreds of MB, so each field is a cache (and often a TLB)
 * miss, which the prefetches let overlap instead of waiting for in turn. */
#define PREFETCH_AHEAD 16

/* Particle i's host fields that travel with it (see pack), asked for
 * ahead; rw: 1 when they will be written (a constant, as the builtin needs). */
#define PREFETCH_FIELDS(p, i, rw)                                \
  do {                                                           \
    __builtin_prefetch((p)->mass + (i), rw);                     \
    __builtin_prefetch((p)->id + (i), rw);                       \
    __builtin_prefetch((p)->type + (i), rw);                     \
    if ((p)->grp) __builtin_prefetch((p)->grp + 2 * (i), rw);    \
  } while (0)

static void pack_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct move_job *j = arg;
  for (size_t k = b; k < e; k++) {
    const size_t i = j->list[k];
    if (k + PREFETCH_AHEAD < e) PREFETCH_FIELDS(j->p, j->list[k + PREFETCH_AHEAD], 0);
    if (j->later_pv) /* a device's state, its positions and velocities still on the way */
      pack(j->buf + k * REC_BYTES, j->p, i, NULL, NULL, 0);
    else if (j->pos) /* a device's state: its positions and velocities, no forces */
      pack(j->buf + k * REC_BYTES, j->p, i, j->pos + 3 * k, j->vel + 3 * k, 0);
    else
      pack(j->buf + k * REC_BYTES, j->p, i, j->p->pos + 3 * i, j->p->vel + 3 * i, 1);
  }
}

/* The leavers' positions and velocities from the device into their
 * records (the rest packed before, later_pv). */
static void pv_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct move_job *j = arg;
  for (size_t k = b; k < e; k++) {
    memcpy(j->buf + k * REC_BYTES + OFF_POS, j->pos + 3 * k, 24);
    memcpy(j->buf + k * REC_BYTES + OFF_VEL, j->vel + 3 * k, 24);
  }
}

/* The holes' fills with the state on a device: the masses, IDs and types
 * (the rest is the device's). */
static void fill_holes_dev_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct move_job *j = arg;
  struct hy_part *p = j->p;
  for (size_t k = b; k < e; k++) {
    const size_t h = j->list[k], i = j->src[k];
    if (k + PREFETCH_AHEAD < e) {
      PREFETCH_FIELDS(p, j->src[k + PREFETCH_AHEAD], 0);
      PREFETCH_FIELDS(p, j->list[k + PREFETCH_AHEAD], 1);
    }
    p->mass[h] = p->mass[i];
    p->id[h] = p->id[i];
    p->type[h] = p->type[i];
    if (p->grp) memcpy(p->grp + 2 * h, p->grp + 2 * i, 16);
  }
}

static void unpack_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct move_job *j = arg;
  int r = 0;
  for (size_t k = b; k < e; k++) {
    while (k >= j->seg[r + 1]) r++;
    const unsigned char *rec = j->runs ? j->runs[r] + (k - j->seg[r]) * REC_BYTES : j->buf + k * REC_BYTES;
    unpack(rec, j->p, j->to[r] + (k - j->seg[r]));
  }
}

/* at[r]: where the leavers to rank r start in the list of all leavers by
 * destination (the sending order; this rank's own count is skipped). */
static void leaver_offsets(const uint64_t *send_n, int P, int me, size_t *at) {
  size_t b = 0;
  for (int r = 0; r < P; r++) {
    at[r] = b;
    if (r != me) b += (size_t)send_n[r];
  }
}

/* Room for n_new particles in p, and for a count that grows by a few at
 * the next decompositions: below 1/128 of headroom, 1/32 of it. A rank's
 * count moves by about 0.1 % from one soft step to the next in a
 * near-equilibrium run, so the arrays grow at the first decomposition (the
 * setup's) and not in the timed steps, where a reallocation of every array
 * cost 25 ms at 2^24 particles a rank (doc/performance.md). */
static void reserve_room(struct hy_part *p, size_t n_new) {
  if (n_new + n_new / 128 > p->n_alloc) hy_part_reserve(p, n_new + n_new / 32);
}

/* Gather the n_keep particles that stay (dest[i] == me) into [0, n_keep):
 * each one at or beyond n_keep takes the place of a leaver below n_keep
 * (both in ascending order; there are as many of one as of the other), so
 * only those move, not every particle after the first leaver. `leave` lists
 * the n_out = n - n_keep leavers in ascending order, so the holes are its
 * first entries and the search for stayers covers [n_keep, n) only. Then p
 * holds n_new particles, the ones received to follow from n_keep on. */
static void keep_stayers(struct hy_part *p, const int *dest, const size_t *leave, int me, size_t n, size_t n_keep,
                         size_t n_new, size_t *srcs) {
  size_t h = 0, src = n_keep;
  const size_t n_out = n - n_keep;
  for (;;) {
    while (src < n && dest[src] != me) src++;
    if (h >= n_out || leave[h] >= n_keep || src >= n) break;
    srcs[h] = src;
    copy_particle(p, leave[h++], src++);
  }
  reserve_room(p, n_new);
  p->n = n_new;
}

/* (1) N_samp = R_samp (N_local + N_hard) (W&N eq 12-13), times the cost
 * factor of hy_decomp_cost_update, at least 1 if there are particles, at
 * most N_local, stratified over the storage order
 * (hy_decomp_sample_indices): their indices into d->sidx. */
static size_t draw_samples(struct hy_decomp *d, size_t n, double weight_extra) {
  if (n == 0) return 0;
  const double want =
      round(d->sample_rate * d->cost * ((double)n + (weight_extra >= 0 ? weight_extra : 0.0)));
  const size_t ns = want < 1 ? 1 : want >= (double)n ? n : (size_t)want;
  scratch(&d->samp, hy_size_mul_or_die(ns, 3, "decomposition samples"), sizeof(double), "decomposition samples");
  hy_decomp_sample_indices(d, n, ns, scratch(&d->sidx, ns, sizeof(size_t), "decomposition samples"));
  return ns;
}

/* The positions of the ns drawn samples into d->samp: from p, or from the
 * device (dev). */
static int gather_samples(struct hy_decomp *d, const struct hy_part *p, size_t ns, const struct hy_decomp_dev *dev,
                          struct hy_err *err) {
  if (ns == 0) return 0;
  double *samp = d->samp.p;
  const size_t *sidx = d->sidx.p;
  if (dev) return dev->gather(dev->ctx, sidx, ns, samp, NULL, err);
  for (size_t k = 0; k < ns; k++) memcpy(samp + 3 * k, p->pos + 3 * sidx[k], 3 * sizeof(double));
  return 0;
}

/* (2) gather the ns samples of every rank on rank 0 (the counts first; the
 * total is broadcast so that every rank agrees on whether it fits), (3)
 * multisection there, (4) broadcast of the boundaries into every rank's
 * d->new_bounds. check: rank 0 first checks every sample for a non-finite
 * coordinate (samples taken ahead, before the exchange's own check); if it
 * finds one, no boundaries are cut and every rank returns
 * HY_DECOMP_NONFINITE. Collective; returns 0, that, or -1. */
/* (2) of cut_bounds: the samples of every rank into d->all on rank 0 and
 * their total on every rank. Collective. */
static int gather_all(struct hy_decomp *d, size_t ns, uint64_t *total_out, struct hy_err *err) {
  int ret = 0;
  const int P = d->size;
  uint64_t ns_u = ns, total = 0, *ns_all = NULL;
  int *rc = NULL, *rd = NULL;
  double *all = NULL;
  double tt = hy_trace_t();
  if (d->rank == 0) ns_all = hy_malloc("decomposition sample counts", (size_t)P, sizeof(uint64_t));
  MPI_TRY(MPI_Gather(&ns_u, 1, MPI_UINT64_T, ns_all, 1, MPI_UINT64_T, 0, d->comm), "MPI_Gather of sample counts");
  if (d->rank == 0)
    for (int r = 0; r < P; r++) total += ns_all[r];
  MPI_TRY(MPI_Bcast(&total, 1, MPI_UINT64_T, 0, d->comm), "MPI_Bcast of the sample total");
  *total_out = total;
  if (total > (uint64_t)INT_MAX / 3) {
    ret = hy_err_set(err,
                     "domain decomposition: %llu samples in total are more than one MPI_Gatherv can carry "
                     "(%d); lower SampleRate (now %g)",
                     (unsigned long long)total, INT_MAX / 3, d->sample_rate);
    goto done;
  }
  if (d->n_bounds + 1 > INT_MAX) {
    ret = hy_err_set(err, "domain decomposition: %zu boundaries do not fit one MPI_Bcast", d->n_bounds);
    goto done;
  }
  if (d->rank == 0) {
    rc = hy_malloc("decomposition counts", (size_t)P, sizeof(int));
    rd = hy_malloc("decomposition counts", (size_t)P, sizeof(int));
    int off = 0;
    for (int r = 0; r < P; r++) {
      rc[r] = (int)(3 * ns_all[r]);
      rd[r] = off;
      off += rc[r];
    }
    all = scratch(&d->all, (size_t)total * 3, sizeof(double), "decomposition samples");
  }
  MPI_TRY(MPI_Gatherv(d->samp.p, (int)(3 * ns), MPI_DOUBLE, all, rc, rd, MPI_DOUBLE, 0, d->comm),
          "MPI_Gatherv of samples");
  hy_trace(HY_TRACE_MAIN, "dd_gather", tt);
done:
  hy_free(ns_all);
  hy_free(rc);
  hy_free(rd);
  return ret;
}

/* (3) of cut_bounds on rank 0: the multisection of the `total` samples in
 * d->all into d->new_bounds, after a check that each is finite (check);
 * new_bounds[n_bounds] is 1, or 0 if one is not (nothing cut). */
static void cut_all(struct hy_decomp *d, uint64_t total, int check, int lane) {
  const double tt = hy_trace_t();
  double *all = d->all.p; /* reordered by the multisection */
  int ok = 1;
  for (size_t k = 0; check && ok && k < 3 * (size_t)total; k++) ok = isfinite(all[k]);
  if (ok) multisection(d, all, (size_t)total);
  d->new_bounds[d->n_bounds] = ok; /* the flag travels with the boundaries */
  hy_trace(lane, "dd_bounds", tt);
}

/* (4) of cut_bounds: rank 0's boundaries (and flag) to every rank.
 * Collective; returns 0, HY_DECOMP_NONFINITE or -1. */
static int bcast_bounds(struct hy_decomp *d, struct hy_err *err) {
  int ret = 0;
  const double tt = hy_trace_t();
  MPI_TRY(MPI_Bcast(d->new_bounds, (int)d->n_bounds + 1, MPI_DOUBLE, 0, d->comm), "MPI_Bcast of boundaries");
  if (d->new_bounds[d->n_bounds] == 0.0) ret = HY_DECOMP_NONFINITE;
  hy_trace(HY_TRACE_MAIN, "dd_bcast", tt);
done:
  return ret;
}

static int cut_bounds(struct hy_decomp *d, size_t ns, int check, uint64_t *total_out, struct hy_err *err) {
  if (gather_all(d, ns, total_out, err) != 0) return -1;
  if (d->rank == 0) cut_all(d, *total_out, check, HY_TRACE_MAIN);
  return bcast_bounds(d, err);
}

int hy_decomp_cut_samples(struct hy_decomp *d, double *s, size_t ns, int par, double *bounds) {
  const int keep = d->par_split;
  d->par_split = par;
  const int ran = multisection(d, s, ns);
  d->par_split = keep;
  memcpy(bounds, d->new_bounds, d->n_bounds * sizeof(double));
  return ran;
}

/* The factors are clamped to [1/2, 2]: a rank whose walks
 * were unusually slow once (a device shared for a moment) cannot give up
 * most of its domain in one decomposition. */
#define COST_CLAMP 2.0
static double cost_clamp(double f) { return f > COST_CLAMP ? COST_CLAMP : f < 1.0 / COST_CLAMP ? 1.0 / COST_CLAMP : f; }
/* Each rank's measured factor is averaged over the decompositions (weight
 * COST_AVG for the newest), and the factor in use is the first measured one,
 * then follows the average only when they differ by more than COST_BAND: the
 * walks' times scatter by 1-2 % from one Δt_s to the next, and a factor
 * that followed them moved the boundaries back and forth at every
 * decomposition (on four H100s 85 000 instead of 58 000 leavers per
 * decomposition, and 3-5 ms more in it). */
#define COST_AVG 0.3
#define COST_BAND 0.01

/* The measured factors of hy_decomp_cost_update before the clamp, the
 * average and the band: c[r] for the P ranks (0: no factor, the rank had no
 * time or no work) from each rank's hard-step seconds t[3 r], other seconds
 * t[3 r + 1] and work t[3 r + 2]; ab: room for 2 P doubles. */
static void cost_factors(const double *t, int P, double *c, double *ab) {
  /* a[r], b[r]: seconds per unit of work of either kind (a + b = 0: no
   * factor); W'_r the work a rank should get: for a ratio rho of the
   * slowest other time S to the slowest hard time H, W'_r = H u_r(rho),
   * u_r = min(1 / a_r, rho / b_r), with H from sum W'_r = sum W_r, so the
   * objective H + S is sum W (1 + rho) / sum u_r(rho): monotone between
   * consecutive ranks' breakpoints rho = b_r / a_r, falling below the first
   * and rising above the last, so its least value is at one of them (P^2
   * operations: 10^6 at 1000 ranks, once per decomposition) */
  double *a = ab, *b = ab + P, w_sum = 0.0;
  int both = 0, any = 0;
  for (int r = 0; r < P; r++) {
    const double w = t[3 * r + 2];
    c[r] = a[r] = b[r] = 0.0;
    if (!(w > 0) || !(t[3 * r] + t[3 * r + 1] > 0)) continue;
    a[r] = t[3 * r] / w;
    b[r] = t[3 * r + 1] / w;
    any = 1;
    both |= a[r] > 0 && b[r] > 0;
    w_sum += w;
  }
  if (!any) return;
#define U(r, q) fmin(a[r] > 0 ? 1.0 / a[r] : INFINITY, b[r] > 0 ? (q) / b[r] : INFINITY)
  double rho = -1.0; /* one kind only: equal time */
  if (both) {
    double best = INFINITY;
    for (int k = 0; k < P; k++) {
      if (!(a[k] > 0) || !(b[k] > 0)) continue;
      const double q = b[k] / a[k];
      double g = 0.0;
      for (int r = 0; r < P; r++)
        if (a[r] + b[r] > 0) g += U(r, q);
      if ((1.0 + q) / g < best) {
        best = (1.0 + q) / g;
        rho = q;
      }
    }
  }
  double cw = 0.0;
  for (int r = 0; r < P; r++) {
    if (!(a[r] + b[r] > 0)) continue;
    c[r] = rho < 0 ? a[r] + b[r] : 1.0 / U(r, rho);
    cw += c[r] * t[3 * r + 2];
  }
#undef U
  for (int r = 0; r < P; r++) c[r] /= cw / w_sum; /* over the mean: 1 where the work stays */
}

int hy_decomp_cost_update(struct hy_decomp *d, const double seconds[2], double work, struct hy_err *err) {
  int ret = 0;
  const int P = d->size;
  double mine[3];
  for (int k = 0; k < 2; k++) mine[k] = seconds[k] > 0 && isfinite(seconds[k]) ? seconds[k] : 0.0;
  mine[2] = work > 0 && isfinite(work) ? work : 0.0;
  double *all = hy_malloc("decomposition costs", 6 * (size_t)P, sizeof(double));
  double *c = all + 3 * (size_t)P;
  MPI_TRY(MPI_Allgather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, d->comm), "MPI_Allgather of the walk times");
  cost_factors(all, P, c, c + P);
  if (!d->cost_avg) {
    d->cost_avg = hy_malloc("decomposition costs", (size_t)P, sizeof(double));
    d->cost_all = hy_malloc("decomposition costs", (size_t)P, sizeof(double));
    for (int r = 0; r < P; r++) {
      d->cost_avg[r] = 0.0; /* none yet */
      d->cost_all[r] = 1.0;
    }
  }
  double m_w = 0.0, m_sum = 0.0;
  for (int r = 0; r < P; r++) {
    if (c[r] > 0 && isfinite(c[r])) {
      double f = cost_clamp(c[r]);
      /* averaged (geometric: a factor and its inverse weigh alike); the
       * first is taken as it is, the later ones within the band */
      const int first = !(d->cost_avg[r] > 0);
      if (!first) f = exp((1.0 - COST_AVG) * log(d->cost_avg[r]) + COST_AVG * log(f));
      d->cost_avg[r] = f;
      if (first || fabs(f / d->cost_all[r] - 1.0) > COST_BAND) d->cost_all[r] = f;
      m_sum += d->cost_all[r] * all[3 * r + 2];
      m_w += all[3 * r + 2];
    } else { /* no time or no work: the plain count, and the average starts again */
      d->cost_avg[r] = 0.0;
      d->cost_all[r] = 1.0;
    }
  }
  /* The factors in use over their mean weighted by the ranks' work, so that
   * the samples drawn stay SampleRate's in all: the ranks' factors are
   * averaged and held apart, so those in use need not keep the measured
   * factors' mean of 1 (2 pocl ranks ended at 0.87 and 0.88). Only their
   * ratios move the boundaries, so the band still holds them; a rank
   * without a factor keeps 1, the mean; clamped again. */
  const double m = m_w > 0 && m_sum > 0 ? m_sum / m_w : 1.0;
  d->cost_lo = INFINITY;
  d->cost_hi = -INFINITY;
  for (int r = 0; r < P; r++) {
    double f = d->cost_avg[r] > 0 ? d->cost_all[r] / m : 1.0;
    f = cost_clamp(f);
    if (r == d->rank) d->cost = f;
    d->cost_lo = fmin(d->cost_lo, f);
    d->cost_hi = fmax(d->cost_hi, f);
  }
done:
  hy_free(all);
  return ret;
}

double hy_decomp_cost(const struct hy_decomp *d, double *lo, double *hi) {
  if (lo) *lo = d->cost_lo;
  if (hi) *hi = d->cost_hi;
  return d->cost;
}

void hy_decomp_pre_draw(struct hy_decomp *d, size_t n, double weight_extra) {
  const double t0 = hy_trace_t();
  d->pre_ns = draw_samples(d, n, weight_extra);
  d->pre_n = n;
  d->pre = PRE_DRAWN;
  hy_trace(HY_TRACE_MAIN, "dd_pre_draw", t0);
}

int hy_decomp_pre_sample(struct hy_decomp *d, const struct hy_part *p, const struct hy_decomp_dev *dev,
                         struct hy_err *err) {
  if (d->pre != PRE_DRAWN || p->n != d->pre_n)
    return hy_err_set(err, "internal error: domain decomposition: samples taken ahead without their draw");
  const double t0 = hy_trace_t();
  if (dev && dev->gather_begin && d->pre_ns > 0) {
    if (dev->gather_begin(dev->ctx, d->sidx.p, d->pre_ns, err) != 0) return -1;
    d->pre_dev = dev;
    d->pre = PRE_SAMPLING;
  } else {
    if (gather_samples(d, p, d->pre_ns, dev, err) != 0) return -1;
    d->pre = PRE_SAMPLED;
  }
  hy_trace(HY_TRACE_MAIN, "dd_pre_sample", t0);
  return 0;
}

/* Rank 0's cut of the samples gathered ahead, on a thread of its own. */
static void *cut_main(void *arg) {
  struct hy_decomp *d = arg;
  cut_all(d, d->pre_total, 1, HY_TRACE_AUX);
  return NULL;
}

/* Wait for rank 0's cut thread, if one runs. */
static void join_cut(struct hy_decomp *d) {
  if (!d->cutting) return;
  const int rc = pthread_join(d->cut_thread, NULL);
  if (rc != 0) hy_die("domain decomposition: pthread_join of the cut failed: %s", strerror(rc));
  d->cutting = 0;
}

/* A device gather that hy_decomp_pre_sample began (PRE_SAMPLING), ended:
 * its samples in d->samp, PRE_SAMPLED. Else nothing. */
static int end_pre_gather(struct hy_decomp *d, struct hy_err *err) {
  if (d->pre != PRE_SAMPLING) return 0;
  const double ts = hy_trace_t();
  const struct hy_decomp_dev *dev = d->pre_dev;
  d->pre = PRE_NONE;
  d->pre_dev = NULL;
  if (dev->gather_end(dev->ctx, d->pre_ns, d->samp.p, err) != 0) return -1;
  d->pre = PRE_SAMPLED;
  hy_trace(HY_TRACE_MAIN, "dd_pre_sampled", ts);
  return 0;
}

int hy_decomp_pre_cut_begin(struct hy_decomp *d, struct hy_err *err) {
  if (end_pre_gather(d, err) != 0) return -1;
  if (d->pre != PRE_SAMPLED)
    return hy_err_set(err, "internal error: domain decomposition: boundaries cut ahead without samples");
  const double t0 = hy_trace_t();
  d->pre = PRE_NONE;
  if (gather_all(d, d->pre_ns, &d->pre_total, err) != 0) return -1;
  if (d->rank == 0) {
    /* no thread to be had: the cut right here */
    if (pthread_create(&d->cut_thread, NULL, cut_main, d) == 0)
      d->cutting = 1;
    else
      cut_all(d, d->pre_total, 1, HY_TRACE_MAIN);
  }
  d->pre = PRE_CUTTING;
  hy_trace(HY_TRACE_MAIN, "dd_pre_cut", t0);
  return 0;
}

/* The end of hy_decomp_pre_cut_begin: rank 0's cut joined, the boundaries
 * broadcast. Collective. If a sample was not finite, nothing is left
 * pending (the exchange samples anew, checks and reports). */
static int pre_cut_end(struct hy_decomp *d, struct hy_err *err) {
  const double t0 = hy_trace_t();
  join_cut(d);
  d->pre = PRE_NONE;
  const int rc = bcast_bounds(d, err);
  hy_trace(HY_TRACE_MAIN, "dd_pre_cut_end", t0);
  if (rc == HY_DECOMP_NONFINITE) return 0;
  if (rc != 0) return -1;
  d->pre = PRE_CUT;
  return 0;
}

int hy_decomp_pre_cut(struct hy_decomp *d, struct hy_err *err) {
  if (hy_decomp_pre_cut_begin(d, err) != 0) return -1;
  return pre_cut_end(d, err);
}

/* hy_decomp_exchange (dev NULL) and hy_decomp_exchange_dev. */
static int exchange(struct hy_decomp *d, struct hy_part *p, double weight_extra, const struct hy_decomp_dev *dev,
                    struct hy_decomp_stats *st, struct hy_err *err) {
  _Static_assert(REC_BYTES == OFF_TYPE + 1, "record layout");
  _Static_assert(sizeof(uint64_t) == 8 && sizeof(double) == 8, "8-byte fields");
  int ret = 0;
  double t0 = hy_wtime();
  struct hy_decomp_stats s;
  memset(&s, 0, sizeof s);
  const int P = d->size;
  const size_t n = p->n;
  size_t *order = NULL, *send_off = NULL, *recv_off = NULL;
  const size_t *leave = NULL; /* the leavers, ascending: the device's list, or the host's fill pass */
  uint64_t *send_n = NULL, *recv_n = NULL, *cnt = NULL;
  int *dest = NULL, *sc = NULL, *sd = NULL, *rc = NULL, *rd = NULL;
  double *lpv = NULL;
  unsigned char *sbuf = NULL, *rbuf = NULL;
  const size_t *dleave = NULL, *dbeyond = NULL; /* dev: the leavers (ascending) and the stayers beyond n_keep */
  const int *dleave_rank = NULL;
  size_t d_out = 0, d_beyond = 0;
  /* dev with leave_begin/leave_end: the leavers' positions and velocities
   * read while the host packs the rest (pv_pending: begun, not ended) */
  const int async = dev && dev->leave_begin && dev->leave_end;
  int pv_pending = 0;
  size_t pv_m = 0;

  d->moved_ok = 0;
  /* boundaries cut ahead for this many particles (hy_decomp_pre_*): used once */
  if (d->pre == PRE_CUTTING && pre_cut_end(d, err) != 0) return -1;
  const int use_pre = d->pre == PRE_CUT && d->pre_n == n;
  /* a device gather begun and not cut: finished, its samples dropped */
  if (end_pre_gather(d, err) != 0) return -1;
  d->pre = PRE_NONE;
  double tt = hy_trace_t();
  if (!(weight_extra >= 0) || !isfinite(weight_extra)) {
    ret = hy_err_set(err, "domain decomposition: weight_extra %g is not a finite number >= 0", weight_extra);
    goto done;
  }
  {
    /* a non-finite position has no domain: the ranks agree on it and move
     * nothing (HY_DECOMP_NONFINITE), so the caller can end the step */
    /* with a device: its count, and only when some are bad every position on
     * the host to find the lowest ID */
    size_t n_bad_dev = 0;
    if (dev && dev->check(dev->ctx, p, &n_bad_dev, err) != 0) {
      ret = -1;
      goto done;
    }
    uint64_t bad = UINT64_MAX;
    if (!dev || n_bad_dev > 0) {
      const int nt = n_threads(d);
      struct finite_job fj = {.p = p, .bad = hy_malloc("decomposition checks", (size_t)nt, sizeof(uint64_t))};
      for (int t = 0; t < nt; t++) fj.bad[t] = UINT64_MAX;
      for_all(d, n, 65536, finite_body, &fj);
      for (int t = 0; t < nt; t++)
        if (fj.bad[t] < bad) bad = fj.bad[t];
      hy_free(fj.bad);
    }
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_UINT64_T, MPI_MIN, d->comm), "MPI_Allreduce (finite check)");
    if (bad != UINT64_MAX) {
      hy_err_set(err, "domain decomposition: particle ID %llu has a non-finite position; no particle was moved",
                 (unsigned long long)bad);
      ret = HY_DECOMP_NONFINITE;
      d->n_holes = 0; /* nothing moved */
      d->n_keep = n;
      d->moved_ok = 1;
      goto done;
    }
  }
  s.n_before = n;
  hy_trace(HY_TRACE_MAIN, "dd_finite", tt);
  tt = hy_trace_t();

  /* (1)-(4): samples, rank 0's cut, the boundaries on every rank; or those
   * made ahead for this many particles (hy_decomp_pre_*) */
  if (use_pre) {
    s.n_samples_local = d->pre_ns;
    s.n_samples_total = d->pre_total;
  } else {
    const size_t ns = draw_samples(d, n, weight_extra);
    if (gather_samples(d, p, ns, dev, err) != 0) {
      ret = -1;
      goto done;
    }
    s.n_samples_local = ns;
    hy_trace(HY_TRACE_MAIN, "dd_sample", tt);
    if ((ret = cut_bounds(d, ns, 0, &s.n_samples_total, err)) != 0) goto done;
  }
  memcpy(d->bounds, d->new_bounds, d->n_bounds * sizeof(double));
  d->have_bounds = 1;
  tt = hy_trace_t();

  /* (5) destinations, a stable counting sort by destination, the counts. */
  send_n = hy_calloc("decomposition counts", (size_t)P, sizeof(uint64_t));
  recv_n = hy_calloc("decomposition counts", (size_t)P, sizeof(uint64_t));
  send_off = hy_malloc("decomposition offsets", (size_t)P + 1, sizeof(size_t));
  recv_off = hy_malloc("decomposition offsets", (size_t)P + 1, sizeof(size_t));
  if (dev) {
    /* the owners on the device; its lists of the leavers and of the stayers
     * beyond n_keep, both ascending, as the host passes below make them */
    if (dev->owners(dev->ctx, d, send_n, err) != 0) {
      ret = -1;
      goto done;
    }
    send_off[0] = 0;
    for (int r = 0; r < P; r++) send_off[r + 1] = send_off[r] + (size_t)send_n[r];
    const size_t keep = (size_t)send_n[d->rank];
    if (keep > n || send_off[P] != n) {
      ret = hy_err_set(err, "internal error: domain decomposition: the device's owner counts add up to %zu, not %zu",
                       send_off[P], n);
      goto done;
    }
    if (dev->lists(dev->ctx, d->rank, keep, &dleave, &dleave_rank, &d_out, &dbeyond, &d_beyond, err) != 0) {
      ret = -1;
      goto done;
    }
    if (d_out != n - keep) {
      ret = hy_err_set(err, "internal error: domain decomposition: the device lists %zu leavers, not %zu", d_out,
                       n - keep);
      goto done;
    }
    order = scratch(&d->order, d_out, sizeof(size_t), "decomposition send order");
    leave = dleave;
    size_t *at = hy_malloc("decomposition offsets", (size_t)P, sizeof(size_t));
    leaver_offsets(send_n, P, d->rank, at);
    for (size_t k = 0; k < d_out; k++) { /* by destination, ascending within each, as fill_body */
      const int r = dleave_rank[k];
      if (r < 0 || r >= P || r == d->rank) {
        hy_free(at);
        ret = hy_err_set(err, "internal error: domain decomposition: the device gives a leaver rank %d", r);
        goto done;
      }
      order[at[r]++] = dleave[k];
    }
    hy_free(at);
    /* the device may begin on the kept particles now: the holes below the
     * kept count are the first leavers, filled by the stayers beyond it */
    size_t h = 0;
    while (h < d_out && leave[h] < keep) h++;
    if (d_beyond != h) {
      ret = hy_err_set(err, "internal error: domain decomposition: %zu stayers beyond the kept count for %zu holes",
                       d_beyond, h);
      goto done;
    }
    if (dev->kept && dev->kept(dev->ctx, leave, dbeyond, h, keep, err) != 0) {
      ret = -1;
      goto done;
    }
  } else {
    dest = hy_malloc("decomposition destinations", n + 1, sizeof(int));
    /* blocks: a few per thread, each at least 4096 particles */
    const size_t nb = n == 0 ? 1 : min_size((size_t)n_threads(d) * 4, (n + 4095) / 4096);
    struct owner_job oj = {.d = d, .pos = p->pos, .dest = dest, .n = n, .nb = nb, .stride = ((size_t)P + 15) / 8 * 8};
    oj.count = hy_calloc("decomposition counts", hy_size_mul_or_die(nb, oj.stride, "decomposition counts"),
                         sizeof(uint64_t));
    for_all(d, nb, 1, owner_body, &oj);
    for (size_t k = 0; k < nb; k++)
      for (int r = 0; r < P; r++) send_n[r] += oj.count[k * oj.stride + (size_t)r];
    send_off[0] = 0;
    for (int r = 0; r < P; r++) send_off[r + 1] = send_off[r] + (size_t)send_n[r];
    /* the leavers only: the others stay where they are or fill holes */
    const size_t n_leave = n - (size_t)send_n[d->rank];
    order = scratch(&d->order, n_leave, sizeof(size_t), "decomposition send order");
    size_t *lw = scratch(&d->leave, n_leave, sizeof(size_t), "decomposition leavers");
    leave = lw;
    oj.at = hy_malloc("decomposition offsets", nb * oj.stride, sizeof(size_t));
    oj.leave_at = hy_malloc("decomposition offsets", nb, sizeof(size_t));
    oj.order = order;
    oj.leave = lw;
    {
      size_t la = 0;
      leaver_offsets(send_n, P, d->rank, oj.at);
      for (size_t k = 0; k < nb; k++) {
        oj.leave_at[k] = la;
        for (int r = 0; r < P; r++) {
          const uint64_t c = oj.count[k * oj.stride + (size_t)r];
          if (k + 1 < nb) oj.at[(k + 1) * oj.stride + (size_t)r] = oj.at[k * oj.stride + (size_t)r] + (size_t)c;
          if (r != d->rank) la += (size_t)c;
        }
      }
    }
    for_all(d, nb, 1, fill_body, &oj);
    hy_free(oj.count);
    hy_free(oj.at);
    hy_free(oj.leave_at);
  }
  hy_trace(HY_TRACE_MAIN, "dd_owners", tt);
  tt = hy_trace_t();
  /* per rank: the count, and where its records start among this rank's
   * leavers (by destination: the node's window half of a peer) */
  cnt = hy_malloc("decomposition counts", 4 * (size_t)P, sizeof(uint64_t));
  {
    size_t *at = hy_malloc("decomposition offsets", (size_t)P, sizeof(size_t));
    leaver_offsets(send_n, P, d->rank, at);
    for (int r = 0; r < P; r++) {
      cnt[2 * r] = send_n[r];
      cnt[2 * r + 1] = at[r];
    }
    hy_free(at);
  }
  MPI_TRY(MPI_Alltoall(cnt, 2, MPI_UINT64_T, cnt + 2 * P, 2, MPI_UINT64_T, d->comm), "MPI_Alltoall of counts");
  for (int r = 0; r < P; r++) recv_n[r] = cnt[2 * P + 2 * r];
  recv_off[0] = 0;
  for (int r = 0; r < P; r++) {
    if (recv_n[r] > SIZE_MAX - recv_off[r]) {
      ret = hy_err_set(err, "domain decomposition: the received particle count overflows size_t");
      goto done;
    }
    recv_off[r + 1] = recv_off[r] + (size_t)recv_n[r];
  }
  const size_t n_new = recv_off[P];
  hy_trace(HY_TRACE_MAIN, "dd_counts", tt);
  tt = hy_trace_t();
  const size_t n_keep = (size_t)send_n[d->rank];

  /* Only the particles that leave are packed and sent: pack them all first
   * (they are overwritten next), then gather the ones that stay at the
   * front, and receive the others after them, by source rank. */
  const size_t n_out = n - n_keep, n_in = n_new - n_keep;
  /* the node's peers read this rank's records from its window half, the
   * others get them in messages from there too */
  const int shm = hy_shm_node_ranks(d->shm) > 0;
  if (shm) {
    const uint64_t bytes = (uint64_t)n_out * REC_BYTES;
    if (hy_shm_reserve(d->shm, bytes, bytes + bytes / 4 + 4096 * (uint64_t)REC_BYTES, err) != 0) {
      ret = -1;
      goto done;
    }
    hy_trace(HY_TRACE_MAIN, "dd_reserve", tt);
    sbuf = hy_shm_mine(d->shm);
  } else {
    sbuf = scratch(&d->sbuf, n_out, REC_BYTES, "decomposition send buffer");
  }
  {
    /* the leavers in sending order (`order`, by destination); with a device
     * their positions and velocities come from there */
    if (async) {
      /* read while the host packs the other fields and fills the holes */
      if (dev->leave_begin(dev->ctx, order, n_out, err) != 0) {
        ret = -1;
        goto done;
      }
      pv_pending = 1;
      pv_m = n_out;
      hy_trace(HY_TRACE_MAIN, "dd_leavers_begin", tt);
    } else if (dev) {
      lpv = scratch(&d->lpv, hy_size_mul_or_die(n_out, 6, "decomposition leavers"), sizeof(double),
                    "decomposition leavers");
      if (dev->gather(dev->ctx, order, n_out, lpv, lpv + 3 * n_out, err) != 0) {
        ret = -1;
        goto done;
      }
      hy_trace(HY_TRACE_MAIN, "dd_leavers", tt);
    }
    const double tr = hy_trace_t();
    struct move_job mj = {.p = p, .buf = sbuf, .list = order, .pos = dev ? lpv : NULL,
                          .vel = dev ? lpv + 3 * n_out : NULL, .later_pv = async};
    for_all(d, n_out, 4096, pack_body, &mj);
    hy_trace(HY_TRACE_MAIN, "dd_records", tr);
  }
  {
    /* the holes below n_keep, each taken by a stayer from beyond */
    const double th = hy_trace_t();
    size_t h = 0;
    while (h < n_out && leave[h] < n_keep) h++;
    if (h > d->holes_cap) {
      hy_free(d->holes);
      hy_free(d->srcs);
      d->holes_cap = h + h / 4 + 16;
      d->holes = hy_malloc("decomposition holes", d->holes_cap, sizeof(size_t));
      d->srcs = hy_malloc("decomposition holes", d->holes_cap, sizeof(size_t));
    }
    if (h) memcpy(d->holes, leave, h * sizeof(size_t));
    d->n_holes = h;
    d->n_keep = n_keep;
    if (dev) {
      if (d_beyond != h) {
        ret = hy_err_set(err, "internal error: domain decomposition: %zu stayers beyond the kept count for %zu holes",
                         d_beyond, h);
        goto done;
      }
      /* the masses, IDs and types (positions: stale copies) */
      if (h) memcpy(d->srcs, dbeyond, h * sizeof(size_t));
      struct move_job mj = {.p = p, .list = d->holes, .src = d->srcs};
      for_all(d, h, 4096, fill_holes_dev_body, &mj);
      hy_trace(HY_TRACE_MAIN, "dd_holes", th);
      if (async) { /* the leavers' positions and velocities into their records */
        const double tw = hy_trace_t();
        const double *pv = NULL;
        pv_pending = 0;
        if (dev->leave_end(dev->ctx, n_out, &pv, err) != 0) {
          ret = -1;
          goto done;
        }
        hy_trace(HY_TRACE_MAIN, "dd_leavers", tw);
        const double tp = hy_trace_t();
        struct move_job pj = {.buf = sbuf, .pos = pv, .vel = pv ? pv + 3 * n_out : NULL};
        if (n_out) for_all(d, n_out, 4096, pv_body, &pj);
        hy_trace(HY_TRACE_MAIN, "dd_records_pv", tp);
      }
      reserve_room(p, n_new);
      p->n = n_new;
      if (n_new < 2 && n_keep == 1) {
        /* one particle left, too few for the device: completed on the host
         * (it is at 0, or the one from beyond that filled that hole) */
        const size_t old = h > 0 ? d->srcs[0] : 0;
        double kpv[6];
        if (dev->gather(dev->ctx, &old, 1, kpv, kpv + 3, err) != 0) {
          ret = -1;
          goto done;
        }
        memcpy(p->pos, kpv, 3 * sizeof(double));
        memcpy(p->vel, kpv + 3, 3 * sizeof(double));
      }
    } else {
      keep_stayers(p, dest, leave, d->rank, n, n_keep, n_new, d->srcs);
    }
  }
  /* where each source rank's particles go: after the kept ones */
  {
    size_t at = n_keep;
    for (int r = 0; r < P; r++) {
      recv_off[r] = at;
      if (r != d->rank) at += (size_t)recv_n[r];
    }
  }
  hy_trace(HY_TRACE_MAIN, "dd_pack", tt);
  tt = hy_trace_t();
  if (shm) { /* the peers' records, read from their window halves */
    if (hy_shm_sync(d->shm, err) != 0) {
      ret = -1;
      goto done;
    }
    const unsigned char **src = hy_malloc("decomposition runs", (size_t)P, sizeof(unsigned char *));
    size_t *seg = hy_malloc("decomposition runs", (size_t)P + 1, sizeof(size_t));
    size_t *to = hy_malloc("decomposition runs", (size_t)P, sizeof(size_t));
    int nr = 0;
    seg[0] = 0;
    for (int r = 0; r < P; r++)
      if (hy_shm_peer(d->shm, r) && recv_n[r] > 0) {
        src[nr] = hy_shm_theirs(d->shm, r) + (size_t)cnt[2 * P + 2 * r + 1] * REC_BYTES;
        to[nr] = recv_off[r];
        seg[nr + 1] = seg[nr] + (size_t)recv_n[r];
        nr++;
      }
    struct move_job mj = {.p = p, .runs = src, .seg = seg, .to = to};
    if (nr) for_all(d, seg[nr], 4096, unpack_body, &mj);
    hy_free(src);
    hy_free(seg);
    hy_free(to);
    hy_trace(HY_TRACE_MAIN, "dd_shm", tt);
    tt = hy_trace_t();
  }
  s.n_sent = n_out;
  s.n_recv = n_in;
  s.bytes_sent = (uint64_t)n_out * REC_BYTES;
  s.bytes_recv = (uint64_t)n_in * REC_BYTES;

  /* Rounds of MPI_Alltoallv: in round k each pair moves up to `chunk`
   * particles, so that one call's byte counts and displacements (ints) stay
   * within max_msg_bytes <= INT_MAX. Both sides derive the per-round counts
   * from the exchanged totals, so no further counts are sent. */
  if ((uint64_t)P * REC_BYTES > d->max_msg_bytes) {
    ret = hy_err_set(err, "domain decomposition: %d ranks x %d bytes exceed one MPI_Alltoallv (%zu bytes)", P,
                     REC_BYTES, d->max_msg_bytes);
    goto done;
  }
  const size_t chunk = d->max_msg_bytes / ((size_t)P * REC_BYTES);
  uint64_t local_max = 0, global_max = 0; /* the pairs that exchange messages (not the node's peers) */
  for (int r = 0; r < P; r++) {
    if (r == d->rank || hy_shm_peer(d->shm, r)) continue;
    if (send_n[r] > local_max) local_max = send_n[r];
    if (recv_n[r] > local_max) local_max = recv_n[r];
  }
  if (!hy_shm_all(d->shm)) /* all on one node's window: no messages (the same on every rank) */
    MPI_TRY(MPI_Allreduce(&local_max, &global_max, 1, MPI_UINT64_T, MPI_MAX, d->comm), "MPI_Allreduce of counts");
  uint64_t rounds = (global_max + chunk - 1) / chunk;
  if (rounds > INT_MAX) {
    ret = hy_err_set(err, "domain decomposition: %llu exchange rounds needed", (unsigned long long)rounds);
    goto done;
  }
  s.rounds = (int)rounds;
  sc = hy_malloc("decomposition counts", (size_t)P, sizeof(int));
  sd = hy_malloc("decomposition counts", (size_t)P, sizeof(int));
  if (!rc) rc = hy_malloc("decomposition counts", (size_t)P, sizeof(int));
  if (!rd) rd = hy_malloc("decomposition counts", (size_t)P, sizeof(int));
  size_t cap = (size_t)P * chunk;
  size_t n_in_msg = 0; /* received in messages */
  for (int r = 0; r < P; r++)
    if (r != d->rank && !hy_shm_peer(d->shm, r)) n_in_msg += (size_t)recv_n[r];
  rbuf = scratch(&d->rbuf, min_size(n_in_msg, cap), REC_BYTES, "decomposition receive buffer");
  /* rank r's records start at sbase[r] in sbuf; when all of sbuf is within
   * one message's byte range the rounds address it directly, else each
   * round's slices are copied into a round buffer */
  size_t *sbase = hy_malloc("decomposition offsets", (size_t)P, sizeof(size_t));
  size_t *seg = hy_malloc("decomposition offsets", (size_t)P + 1, sizeof(size_t));
  size_t *to = hy_malloc("decomposition offsets", (size_t)P, sizeof(size_t));
  leaver_offsets(send_n, P, d->rank, sbase);
  const int direct = (uint64_t)n_out * REC_BYTES <= d->max_msg_bytes;
  unsigned char *rsend = direct ? sbuf : hy_malloc("decomposition round buffer", min_size(n_out, cap) + 1, REC_BYTES);
  for (uint64_t k = 0; k < rounds; k++) {
    const size_t first = (size_t)k * chunk;
    size_t pos = 0;
    for (int r = 0; r < P; r++) {
      size_t m = r != d->rank && !hy_shm_peer(d->shm, r) && send_n[r] > first
                     ? min_size((size_t)send_n[r] - first, chunk)
                     : 0;
      sc[r] = (int)(m * REC_BYTES);
      if (direct) {
        sd[r] = (int)((sbase[r] + (m ? first : 0)) * REC_BYTES);
      } else {
        sd[r] = (int)(pos * REC_BYTES);
        memcpy(rsend + pos * REC_BYTES, sbuf + (sbase[r] + first) * REC_BYTES, m * REC_BYTES);
      }
      pos += m;
    }
    pos = 0;
    for (int r = 0; r < P; r++) {
      size_t m = r != d->rank && !hy_shm_peer(d->shm, r) && recv_n[r] > first
                     ? min_size((size_t)recv_n[r] - first, chunk)
                     : 0;
      rc[r] = (int)(m * REC_BYTES);
      rd[r] = (int)(pos * REC_BYTES);
      pos += m;
    }
    int rc_mpi = MPI_Alltoallv(rsend, sc, sd, MPI_BYTE, rbuf, rc, rd, MPI_BYTE, d->comm);
    if (rc_mpi != MPI_SUCCESS) {
      if (!direct) hy_free(rsend);
      hy_free(sbase);
      hy_free(seg);
      hy_free(to);
      ret = mpi_fail(err, rc_mpi, "MPI_Alltoallv of particles");
      goto done;
    }
    seg[0] = 0;
    for (int r = 0; r < P; r++) {
      seg[r + 1] = seg[r] + (size_t)rc[r] / REC_BYTES;
      to[r] = recv_off[r] + first;
    }
    struct move_job mj = {.p = p, .buf = rbuf, .seg = seg, .to = to};
    for_all(d, seg[P], 4096, unpack_body, &mj);
  }
  if (!direct) hy_free(rsend);
  hy_free(sbase);
  hy_free(seg);
  hy_free(to);
  s.n_after = n_new;
  d->moved_ok = 1;
  hy_trace(HY_TRACE_MAIN, "dd_exchange", tt);
  tt = hy_trace_t();

  /* Load-balance record: max and mean over ranks. */
  {
    double loc[2] = {(double)s.n_before + weight_extra, (double)s.n_after}, mx[2], sum[2];
    MPI_TRY(MPI_Allreduce(loc, mx, 2, MPI_DOUBLE, MPI_MAX, d->comm), "MPI_Allreduce (max)");
    MPI_TRY(MPI_Allreduce(loc, sum, 2, MPI_DOUBLE, MPI_SUM, d->comm), "MPI_Allreduce (sum)");
    s.load_max = mx[0];
    s.load_mean = sum[0] / P;
    s.n_after_max = mx[1];
    s.n_after_mean = sum[1] / P;
  }
  hy_trace(HY_TRACE_MAIN, "dd_balance", tt);

done:
  if (pv_pending) { /* a failure after the leavers' read began: ended, so that the next gather may start */
    const double *pv;
    struct hy_err e2;
    (void)dev->leave_end(dev->ctx, pv_m, &pv, &e2);
  }
  s.time = hy_wtime() - t0;
  if (st) *st = s;
  hy_free(cnt);
  hy_free(send_off);
  hy_free(recv_off);
  hy_free(send_n);
  hy_free(recv_n);
  hy_free(dest);
  hy_free(sc);
  hy_free(sd);
  hy_free(rc);
  hy_free(rd);
  return ret;
}

int hy_decomp_exchange(struct hy_decomp *d, struct hy_part *p, double weight_extra, struct hy_decomp_stats *st,
                       struct hy_err *err) {
  return exchange(d, p, weight_extra, NULL, st, err);
}

int hy_decomp_exchange_dev(struct hy_decomp *d, struct hy_part *p, double weight_extra,
                           const struct hy_decomp_dev *dev, struct hy_decomp_stats *st, struct hy_err *err) {
  return exchange(d, p, weight_extra, dev, st, err);
}

const double *hy_decomp_bounds(const struct hy_decomp *d, size_t *n) {
  *n = d->n_bounds;
  return d->have_bounds ? d->bounds : NULL;
}

int hy_decomp_moved(const struct hy_decomp *d, const size_t **holes, const size_t **srcs, size_t *n_holes,
                    size_t *n_keep) {
  if (!d->moved_ok) return -1;
  *holes = d->holes;
  *srcs = d->srcs;
  *n_holes = d->n_holes;
  *n_keep = d->n_keep;
  return 0;
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
  join_cut(d);
  d->pre = PRE_NONE;
  memcpy(d->bounds, b, d->n_bounds * sizeof(double));
  b += d->n_bounds * sizeof(double);
  memcpy(gsl_rng_state(d->rng), b, gsl_rng_size(d->rng));
  return 0;
}
