/* SPDX-License-Identifier: GPL-3.0-or-later
 * decomp_cut.c: the sampling of particle positions, the multisection of
 * the samples on rank 0 into boundaries and their broadcast, at an exchange
 * or made ahead (hy_decomp_pre_*, decomp.h). The sampling-based
 * multisection follows Makino (2004) and GreeM as summarised in
 * seeds-digest 4.6; the sample count per rank is Watanabe & Nakasato eq
 * 12-13 (seeds-digest 4.7). */
#include "config.h"

#include "decomp.h"
#include "decomp_internal.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "alloc.h"
#include "trace.h"

/* ------------------------------------------------------- multisection */

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
    const size_t i0 = hy_decomp_block_start(j->n, PAR_BLOCKS, k), i1 = hy_decomp_block_start(j->n, PAR_BLOCKS, k + 1);
    for (size_t i = i0; i < i1; i++) {
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
  /* np <= 128: buckets in a byte */
  if (np < 2 || np > 128 || n < PAR_SPLIT_MIN || hy_decomp_n_threads(d) < PAR_MIN_THREADS) return -1;
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
  double *out = hy_decomp_scratch(&d->bands, n, 25, "decomposition bands"); /* 24 + 1 bytes per sample */
  struct band_job j = {
      .s = s, .out = out, .bkt = (unsigned char *)(out + 3 * n), .n = n, .axis = axis, .np = np, .th = th, .at = at};
  hy_decomp_for_all(d, PAR_BLOCKS, 1, band_body, &j);
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
  hy_decomp_for_all(d, PAR_BLOCKS, 1, band_body, &j);
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
    split_axis(j->s + 3 * x0, x1 - x0, 1, py, nb + hy_decomp_yb_off(d, ix));
    for (int iy = 0; iy < py; iy++) {
      size_t y0 = x0 + group_start(x1 - x0, iy, py), y1 = x0 + group_start(x1 - x0, iy + 1, py);
      split_axis(j->s + 3 * y0, y1 - y0, 2, pz, nb + hy_decomp_zb_off(d, ix, iy));
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
  hy_decomp_for_all(d, (size_t)d->grid[0], 1, slab_body, &sj);
  /* Optional smoothing: a convex blend of two ordered sets of boundaries is
   * ordered; the infinite outer faces are left alone. */
  if (d->have_bounds && d->coef < 1)
    for (size_t i = 0; i < d->n_bounds; i++)
      if (isfinite(nb[i])) nb[i] = d->coef * nb[i] + (1 - d->coef) * d->bounds[i];
  return par;
}

/* ------------------------------------------------------------ sampling */

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

/* (1) N_samp = R_samp (N_local + N_hard) (W&N eq 12-13), times the cost
 * factor of hy_decomp_cost_update, at least 1 if there are particles, at
 * most N_local, stratified over the storage order
 * (hy_decomp_sample_indices): their indices into d->sidx. */
size_t hy_decomp_draw_samples(struct hy_decomp *d, size_t n, double weight_extra) {
  if (n == 0) return 0;
  const double want =
      round(d->sample_rate * d->cost * ((double)n + (weight_extra >= 0 ? weight_extra : 0.0)));
  const size_t ns = want < 1 ? 1 : want >= (double)n ? n : (size_t)want;
  hy_decomp_scratch(&d->samp, hy_size_mul_or_die(ns, 3, "decomposition samples"), sizeof(double),
                    "decomposition samples");
  hy_decomp_sample_indices(d, n, ns, hy_decomp_scratch(&d->sidx, ns, sizeof(size_t), "decomposition samples"));
  return ns;
}

/* The positions of the ns drawn samples into d->samp: from p, or from the
 * device (dev). */
int hy_decomp_gather_samples(struct hy_decomp *d, const struct hy_part *p, size_t ns,
                             const struct hy_decomp_dev *dev, struct hy_err *err) {
  if (ns == 0) return 0;
  double *samp = d->samp.p;
  const size_t *sidx = d->sidx.p;
  if (dev) return dev->gather(dev->ctx, sidx, ns, samp, NULL, err);
  for (size_t k = 0; k < ns; k++) memcpy(samp + 3 * k, p->pos + 3 * sidx[k], 3 * sizeof(double));
  return 0;
}

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
    all = hy_decomp_scratch(&d->all, (size_t)total * 3, sizeof(double), "decomposition samples");
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

/* (2) gather the ns samples of every rank on rank 0 (the counts first; the
 * total is broadcast so that every rank agrees on whether it fits), (3)
 * multisection there, (4) broadcast of the boundaries into every rank's
 * d->new_bounds. check: rank 0 first checks every sample for a non-finite
 * coordinate (samples taken ahead, before the exchange's own check); if it
 * finds one, no boundaries are cut and every rank returns
 * HY_DECOMP_NONFINITE. Collective; returns 0, that, or -1. */
int hy_decomp_cut_bounds(struct hy_decomp *d, size_t ns, int check, uint64_t *total_out, struct hy_err *err) {
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
/* -------------------------------------------------- boundaries made ahead */

void hy_decomp_pre_draw(struct hy_decomp *d, size_t n, double weight_extra) {
  const double t0 = hy_trace_t();
  d->pre_ns = hy_decomp_draw_samples(d, n, weight_extra);
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
    if (hy_decomp_gather_samples(d, p, d->pre_ns, dev, err) != 0) return -1;
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
void hy_decomp_join_cut(struct hy_decomp *d) {
  if (!d->cutting) return;
  const int rc = pthread_join(d->cut_thread, NULL);
  if (rc != 0) hy_die("domain decomposition: pthread_join of the cut failed: %s", strerror(rc));
  d->cutting = 0;
}

/* A device gather that hy_decomp_pre_sample began (PRE_SAMPLING), ended:
 * its samples in d->samp, PRE_SAMPLED. Else nothing. */
int hy_decomp_end_pre_gather(struct hy_decomp *d, struct hy_err *err) {
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
  if (hy_decomp_end_pre_gather(d, err) != 0) return -1;
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
int hy_decomp_pre_cut_end(struct hy_decomp *d, struct hy_err *err) {
  const double t0 = hy_trace_t();
  hy_decomp_join_cut(d);
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
  return hy_decomp_pre_cut_end(d, err);
}

