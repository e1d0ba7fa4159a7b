/* SPDX-License-Identifier: GPL-3.0-or-later
 * decomp_exchange.c: the particle exchange of hy_decomp_exchange(_dev)
 * (decomp.h): the finite check, the boundaries (decomp_cut.c), every
 * particle's owner, the counts, the leavers' records, the holes' fills and
 * the records through the node's window and in rounds of MPI_Alltoallv. */
#include "config.h"

#include "decomp.h"
#include "decomp_internal.h"

#include <limits.h>
#include <math.h>
#include <string.h>

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
_Static_assert(REC_BYTES == OFF_TYPE + 1, "record layout");
_Static_assert(sizeof(uint64_t) == 8 && sizeof(double) == 8, "8-byte fields");

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

/* --------------------------------------------------------------- owners */

static void owner_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct owner_job *j = arg;
  for (size_t k = b; k < e; k++) {
    uint64_t *count = j->count + k * j->stride;
    const size_t i0 = hy_decomp_block_start(j->n, j->nb, k), i1 = hy_decomp_block_start(j->n, j->nb, k + 1);
    for (size_t i = i0; i < i1; i++) {
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
    const size_t i0 = hy_decomp_block_start(j->n, j->nb, k), i1 = hy_decomp_block_start(j->n, j->nb, k + 1);
    for (size_t i = i0; i < i1; i++) {
      const int r = j->dest[i];
      if (r == me) continue;
      j->order[at[r]++] = i;
      j->leave[la++] = i;
    }
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
 * setup's) and not in the steps, where reallocating every array would
 * cost a copy of the whole state. */
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
/* ------------------------------------------------------------ exchange */

/* One exchange's state, from its first step to its last (exchange). */
struct xchg {
  struct hy_decomp *d;
  struct hy_part *p;
  const struct hy_decomp_dev *dev;
  double weight_extra;
  struct hy_decomp_stats s;
  size_t n;                  /* local particles before the exchange */
  uint64_t *send_n, *recv_n; /* per rank: particles to it and from it (this rank's own: the kept ones) */
  size_t *recv_off;          /* per rank: the prefix sums of recv_n, then where its particles go in p */
  uint64_t *cnt;             /* per rank: count and first record among the leavers, sent, then received */
  size_t *order;             /* the leavers by destination, ascending within each (the sending order) */
  const size_t *leave;       /* the leavers, ascending: the device's list, or the host's fill pass */
  int *dest;                 /* host: each particle's rank */
  const size_t *beyond;      /* device: the stayers from n_keep on, ascending */
  size_t n_beyond;
  size_t n_keep, n_new;      /* particles kept, and held after the exchange */
  size_t n_out, n_in;        /* particles that leave, and that arrive */
  int shm;                   /* the node's peers read the records from this rank's window half */
  unsigned char *sbuf;       /* the leavers' records, in sending order */
  double *lpv;               /* device without leave_begin: the leavers' positions, then velocities */
  /* device with leave_begin/leave_end: the leavers' positions and
   * velocities read while the host packs the rest (pv_pending: begun, not
   * ended) */
  int async, pv_pending;
};

/* Boundaries cut ahead (hy_decomp_pre_*) for this many (n) particles:
 * *use_pre when this exchange takes them (they are used once). A device
 * gather begun and not cut is finished, its samples dropped. */
static int take_pre_bounds(struct hy_decomp *d, size_t n, int *use_pre, struct hy_err *err) {
  if (d->pre == PRE_CUTTING && hy_decomp_pre_cut_end(d, err) != 0) return -1;
  *use_pre = d->pre == PRE_CUT && d->pre_n == n;
  if (hy_decomp_end_pre_gather(d, err) != 0) return -1;
  d->pre = PRE_NONE;
  return 0;
}

/* The lowest ID of this rank's particles with a non-finite position
 * (UINT64_MAX: none): with a device, its count, and only when some are bad
 * every position on the host to find the lowest ID. */
static int local_nonfinite(struct xchg *x, uint64_t *bad, struct hy_err *err) {
  size_t n_bad_dev = 0;
  *bad = UINT64_MAX;
  if (x->dev && x->dev->check(x->dev->ctx, x->p, &n_bad_dev, err) != 0) return -1;
  if (x->dev && n_bad_dev == 0) return 0;
  const int nt = hy_decomp_n_threads(x->d);
  struct finite_job fj = {.p = x->p, .bad = hy_malloc("decomposition checks", (size_t)nt, sizeof(uint64_t))};
  for (int t = 0; t < nt; t++) fj.bad[t] = UINT64_MAX;
  hy_decomp_for_all(x->d, x->n, 65536, finite_body, &fj);
  for (int t = 0; t < nt; t++)
    if (fj.bad[t] < *bad) *bad = fj.bad[t];
  hy_free(fj.bad);
  return 0;
}

/* weight_extra checked, and every position: a non-finite one has no
 * domain, so the ranks agree on it and move nothing (HY_DECOMP_NONFINITE),
 * and the caller can end the step. Collective. */
static int check_finite(struct xchg *x, struct hy_err *err) {
  int ret = 0;
  struct hy_decomp *d = x->d;
  const double tt = hy_trace_t();
  if (!(x->weight_extra >= 0) || !isfinite(x->weight_extra))
    return hy_err_set(err, "domain decomposition: weight_extra %g is not a finite number >= 0", x->weight_extra);
  uint64_t bad;
  if (local_nonfinite(x, &bad, err) != 0) return -1;
  MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_UINT64_T, MPI_MIN, d->comm), "MPI_Allreduce (finite check)");
  if (bad != UINT64_MAX) {
    hy_err_set(err, "domain decomposition: particle ID %llu has a non-finite position; no particle was moved",
               (unsigned long long)bad);
    d->n_holes = 0; /* nothing moved */
    d->n_keep = x->n;
    d->moved_ok = 1;
    return HY_DECOMP_NONFINITE;
  }
  x->s.n_before = x->n;
  hy_trace(HY_TRACE_MAIN, "dd_finite", tt);
done:
  return ret;
}

/* (1)-(4): samples, rank 0's cut, the boundaries on every rank; or those
 * made ahead for this many particles (hy_decomp_pre_*). Collective. */
static int make_bounds(struct xchg *x, int use_pre, struct hy_err *err) {
  struct hy_decomp *d = x->d;
  const double tt = hy_trace_t();
  if (use_pre) {
    x->s.n_samples_local = d->pre_ns;
    x->s.n_samples_total = d->pre_total;
  } else {
    const size_t ns = hy_decomp_draw_samples(d, x->n, x->weight_extra);
    if (hy_decomp_gather_samples(d, x->p, ns, x->dev, err) != 0) return -1;
    x->s.n_samples_local = ns;
    hy_trace(HY_TRACE_MAIN, "dd_sample", tt);
    const int ret = hy_decomp_cut_bounds(d, ns, 0, &x->s.n_samples_total, err);
    if (ret != 0) return ret;
  }
  memcpy(d->bounds, d->new_bounds, d->n_bounds * sizeof(double));
  d->have_bounds = 1;
  return 0;
}

/* The leavers below n_keep (the first of the ascending leavers): the holes
 * that stayers from beyond fill. */
static size_t count_holes(const size_t *leave, size_t n_out, size_t n_keep) {
  size_t h = 0;
  while (h < n_out && leave[h] < n_keep) h++;
  return h;
}

/* The device's stayers beyond the kept count: one for each of the h holes. */
static int check_beyond(size_t n_beyond, size_t h, struct hy_err *err) {
  if (n_beyond == h) return 0;
  return hy_err_set(err, "internal error: domain decomposition: %zu stayers beyond the kept count for %zu holes",
                    n_beyond, h);
}

/* The device's owner counts per rank into send_n: they add up to n. */
static int device_owner_counts(struct xchg *x, struct hy_err *err) {
  const struct hy_decomp_dev *dev = x->dev;
  if (dev->owners(dev->ctx, x->d, x->send_n, err) != 0) return -1;
  size_t total = 0;
  for (int r = 0; r < x->d->size; r++) total += (size_t)x->send_n[r];
  if ((size_t)x->send_n[x->d->rank] > x->n || total != x->n)
    return hy_err_set(err, "internal error: domain decomposition: the device's owner counts add up to %zu, not %zu",
                      total, x->n);
  return 0;
}

/* The device's leavers (x->leave, with their ranks) in sending order: by
 * destination, ascending within each, as fill_body. */
static int device_send_order(struct xchg *x, const int *leave_rank, size_t n_leave, struct hy_err *err) {
  const int P = x->d->size, me = x->d->rank;
  int ret = 0;
  x->order = hy_decomp_scratch(&x->d->order, n_leave, sizeof(size_t), "decomposition send order");
  size_t *at = hy_malloc("decomposition offsets", (size_t)P, sizeof(size_t));
  leaver_offsets(x->send_n, P, me, at);
  for (size_t k = 0; k < n_leave; k++) {
    const int r = leave_rank[k];
    if (r < 0 || r >= P || r == me) {
      ret = hy_err_set(err, "internal error: domain decomposition: the device gives a leaver rank %d", r);
      break;
    }
    x->order[at[r]++] = x->leave[k];
  }
  hy_free(at);
  return ret;
}

/* (5) on the device: the owners there; its lists of the leavers and of the
 * stayers beyond n_keep, both ascending, as the host passes make them. Then
 * the device may begin on the kept particles: the holes below the kept
 * count are the first leavers, filled by the stayers beyond it. */
static int owners_on_device(struct xchg *x, struct hy_err *err) {
  const struct hy_decomp_dev *dev = x->dev;
  const int *leave_rank = NULL;
  size_t n_leave = 0;
  if (device_owner_counts(x, err) != 0) return -1;
  const size_t keep = (size_t)x->send_n[x->d->rank];
  if (dev->lists(dev->ctx, x->d->rank, keep, &x->leave, &leave_rank, &n_leave, &x->beyond, &x->n_beyond, err) != 0)
    return -1;
  if (n_leave != x->n - keep)
    return hy_err_set(err, "internal error: domain decomposition: the device lists %zu leavers, not %zu", n_leave,
                      x->n - keep);
  if (device_send_order(x, leave_rank, n_leave, err) != 0) return -1;
  const size_t h = count_holes(x->leave, n_leave, keep);
  if (check_beyond(x->n_beyond, h, err) != 0) return -1;
  if (dev->kept && dev->kept(dev->ctx, x->leave, x->beyond, h, keep, err) != 0) return -1;
  return 0;
}

/* Where each block's leavers go, from the blocks' counts: oj->at (per block
 * and destination, in the sending order) and oj->leave_at (per block, in
 * the ascending list). */
static void block_places(struct owner_job *oj, const uint64_t *send_n, int P, int me) {
  size_t la = 0;
  leaver_offsets(send_n, P, me, oj->at);
  for (size_t k = 0; k < oj->nb; k++) {
    oj->leave_at[k] = la;
    for (int r = 0; r < P; r++) {
      const uint64_t c = oj->count[k * oj->stride + (size_t)r];
      if (k + 1 < oj->nb) oj->at[(k + 1) * oj->stride + (size_t)r] = oj->at[k * oj->stride + (size_t)r] + (size_t)c;
      if (r != me) la += (size_t)c;
    }
  }
}

/* (5) on the host: the destinations and their counts (owner_body), then
 * the lists of the leavers only (fill_body): the others stay where they
 * are or fill holes. */
static void owners_on_host(struct xchg *x) {
  struct hy_decomp *d = x->d;
  const int P = d->size;
  const size_t n = x->n;
  x->dest = hy_malloc("decomposition destinations", n + 1, sizeof(int));
  /* blocks: a few per thread, each at least 4096 particles */
  const size_t nb = n == 0 ? 1 : min_size((size_t)hy_decomp_n_threads(d) * 4, (n + 4095) / 4096);
  struct owner_job oj = {
      .d = d, .pos = x->p->pos, .dest = x->dest, .n = n, .nb = nb, .stride = ((size_t)P + 15) / 8 * 8};
  oj.count = hy_calloc("decomposition counts", hy_size_mul_or_die(nb, oj.stride, "decomposition counts"),
                       sizeof(uint64_t));
  hy_decomp_for_all(d, nb, 1, owner_body, &oj);
  for (size_t k = 0; k < nb; k++)
    for (int r = 0; r < P; r++) x->send_n[r] += oj.count[k * oj.stride + (size_t)r];
  const size_t n_leave = n - (size_t)x->send_n[d->rank];
  x->order = oj.order = hy_decomp_scratch(&d->order, n_leave, sizeof(size_t), "decomposition send order");
  oj.leave = hy_decomp_scratch(&d->leave, n_leave, sizeof(size_t), "decomposition leavers");
  x->leave = oj.leave;
  oj.at = hy_malloc("decomposition offsets", nb * oj.stride, sizeof(size_t));
  oj.leave_at = hy_malloc("decomposition offsets", nb, sizeof(size_t));
  block_places(&oj, x->send_n, P, d->rank);
  hy_decomp_for_all(d, nb, 1, fill_body, &oj);
  hy_free(oj.count);
  hy_free(oj.at);
  hy_free(oj.leave_at);
}

/* (5) destinations, a stable counting sort by destination, the counts. */
static int find_owners(struct xchg *x, struct hy_err *err) {
  const size_t P = (size_t)x->d->size;
  const double tt = hy_trace_t();
  x->send_n = hy_calloc("decomposition counts", P, sizeof(uint64_t));
  x->recv_n = hy_calloc("decomposition counts", P, sizeof(uint64_t));
  x->recv_off = hy_malloc("decomposition offsets", P + 1, sizeof(size_t));
  if (x->dev) {
    if (owners_on_device(x, err) != 0) return -1;
  } else {
    owners_on_host(x);
  }
  hy_trace(HY_TRACE_MAIN, "dd_owners", tt);
  return 0;
}

/* Per rank: the count, and where its records start among this rank's
 * leavers (by destination: the node's window half of a peer), to every
 * rank; the counts received into recv_n, their prefix sums into recv_off.
 * Collective. */
static int exchange_counts(struct xchg *x, struct hy_err *err) {
  int ret = 0;
  struct hy_decomp *d = x->d;
  const int P = d->size;
  const double tt = hy_trace_t();
  x->cnt = hy_malloc("decomposition counts", 4 * (size_t)P, sizeof(uint64_t));
  size_t *at = hy_malloc("decomposition offsets", (size_t)P, sizeof(size_t));
  leaver_offsets(x->send_n, P, d->rank, at);
  for (int r = 0; r < P; r++) {
    x->cnt[2 * r] = x->send_n[r];
    x->cnt[2 * r + 1] = at[r];
  }
  hy_free(at);
  MPI_TRY(MPI_Alltoall(x->cnt, 2, MPI_UINT64_T, x->cnt + 2 * P, 2, MPI_UINT64_T, d->comm), "MPI_Alltoall of counts");
  for (int r = 0; r < P; r++) x->recv_n[r] = x->cnt[2 * P + 2 * r];
  x->recv_off[0] = 0;
  for (int r = 0; r < P; r++) {
    if (x->recv_n[r] > SIZE_MAX - x->recv_off[r]) {
      ret = hy_err_set(err, "domain decomposition: the received particle count overflows size_t");
      goto done;
    }
    x->recv_off[r + 1] = x->recv_off[r] + (size_t)x->recv_n[r];
  }
  x->n_new = x->recv_off[P];
  hy_trace(HY_TRACE_MAIN, "dd_counts", tt);
  x->n_keep = (size_t)x->send_n[d->rank];
  x->n_out = x->n - x->n_keep;
  x->n_in = x->n_new - x->n_keep;
done:
  return ret;
}

/* Where the leavers' records go: this rank's window half, where the node's
 * peers read them and from where the others get them in messages too; or,
 * with no window, d->sbuf. */
static int send_buffer(struct xchg *x, double tt, struct hy_err *err) {
  struct hy_decomp *d = x->d;
  x->shm = hy_shm_node_ranks(d->shm) > 0;
  if (!x->shm) {
    x->sbuf = hy_decomp_scratch(&d->sbuf, x->n_out, REC_BYTES, "decomposition send buffer");
    return 0;
  }
  const uint64_t bytes = (uint64_t)x->n_out * REC_BYTES;
  if (hy_shm_reserve(d->shm, bytes, bytes + bytes / 4 + 4096 * (uint64_t)REC_BYTES, err) != 0) return -1;
  hy_trace(HY_TRACE_MAIN, "dd_reserve", tt);
  x->sbuf = hy_shm_mine(d->shm);
  return 0;
}

/* The leavers' positions and velocities from the device: begun (async:
 * read while the host packs the other fields and fills the holes), or read
 * into d->lpv. */
static int read_leavers_pv(struct xchg *x, double tt, struct hy_err *err) {
  const struct hy_decomp_dev *dev = x->dev;
  const size_t n_out = x->n_out;
  if (x->async) {
    if (dev->leave_begin(dev->ctx, x->order, n_out, err) != 0) return -1;
    x->pv_pending = 1;
    hy_trace(HY_TRACE_MAIN, "dd_leavers_begin", tt);
    return 0;
  }
  x->lpv = hy_decomp_scratch(&x->d->lpv, hy_size_mul_or_die(n_out, 6, "decomposition leavers"), sizeof(double),
                             "decomposition leavers");
  if (dev->gather(dev->ctx, x->order, n_out, x->lpv, x->lpv + 3 * n_out, err) != 0) return -1;
  hy_trace(HY_TRACE_MAIN, "dd_leavers", tt);
  return 0;
}

/* The leavers' records in sending order (x->order, by destination); with a
 * device their positions and velocities come from there. */
static int pack_leavers(struct xchg *x, double tt, struct hy_err *err) {
  if (x->dev && read_leavers_pv(x, tt, err) != 0) return -1;
  const double tr = hy_trace_t();
  struct move_job mj = {.p = x->p, .buf = x->sbuf, .list = x->order, .pos = x->dev ? x->lpv : NULL,
                        .vel = x->dev ? x->lpv + 3 * x->n_out : NULL, .later_pv = x->async};
  hy_decomp_for_all(x->d, x->n_out, 4096, pack_body, &mj);
  hy_trace(HY_TRACE_MAIN, "dd_records", tr);
  return 0;
}

/* The h holes below n_keep (the first h leavers) into d->holes, with room
 * for their sources in d->srcs, for hy_decomp_moved; returns h. */
static size_t record_holes(struct hy_decomp *d, const size_t *leave, size_t n_out, size_t n_keep) {
  const size_t h = count_holes(leave, n_out, n_keep);
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
  return h;
}

/* async: the leavers' positions and velocities, read beside the packing,
 * into their records. */
static int finish_leaver_records(struct xchg *x, struct hy_err *err) {
  const double tw = hy_trace_t();
  const double *pv = NULL;
  x->pv_pending = 0;
  if (x->dev->leave_end(x->dev->ctx, x->n_out, &pv, err) != 0) return -1;
  hy_trace(HY_TRACE_MAIN, "dd_leavers", tw);
  const double tp = hy_trace_t();
  struct move_job pj = {.buf = x->sbuf, .pos = pv, .vel = pv ? pv + 3 * x->n_out : NULL};
  if (x->n_out) hy_decomp_for_all(x->d, x->n_out, 4096, pv_body, &pj);
  hy_trace(HY_TRACE_MAIN, "dd_records_pv", tp);
  return 0;
}

/* One particle left, too few for the device: completed on the host (it is
 * at 0, or the one from beyond that filled that hole, of the h). */
static int fetch_last_kept(struct xchg *x, size_t h, struct hy_err *err) {
  const size_t old = h > 0 ? x->d->srcs[0] : 0;
  double kpv[6];
  if (x->dev->gather(x->dev->ctx, &old, 1, kpv, kpv + 3, err) != 0) return -1;
  memcpy(x->p->pos, kpv, 3 * sizeof(double));
  memcpy(x->p->vel, kpv + 3, 3 * sizeof(double));
  return 0;
}

/* The h holes filled with the state on a device: the masses, IDs and types
 * (positions: stale copies, which the device moves itself); then the
 * leavers' records completed (async) and room for the received ones. */
static int keep_on_device(struct xchg *x, size_t h, double th, struct hy_err *err) {
  struct hy_decomp *d = x->d;
  if (check_beyond(x->n_beyond, h, err) != 0) return -1;
  if (h) memcpy(d->srcs, x->beyond, h * sizeof(size_t));
  struct move_job mj = {.p = x->p, .list = d->holes, .src = d->srcs};
  hy_decomp_for_all(d, h, 4096, fill_holes_dev_body, &mj);
  hy_trace(HY_TRACE_MAIN, "dd_holes", th);
  if (x->async && finish_leaver_records(x, err) != 0) return -1;
  reserve_room(x->p, x->n_new);
  x->p->n = x->n_new;
  if (x->n_new < 2 && x->n_keep == 1) return fetch_last_kept(x, h, err);
  return 0;
}

/* The holes below n_keep, each taken by a stayer from beyond; then p holds
 * n_new particles. */
static int fill_holes(struct xchg *x, struct hy_err *err) {
  const double th = hy_trace_t();
  const size_t h = record_holes(x->d, x->leave, x->n_out, x->n_keep);
  if (x->dev) return keep_on_device(x, h, th, err);
  keep_stayers(x->p, x->dest, x->leave, x->d->rank, x->n, x->n_keep, x->n_new, x->d->srcs);
  return 0;
}

/* Where each source rank's particles go: after the kept ones, by rank. */
static void place_received(struct xchg *x) {
  size_t at = x->n_keep;
  for (int r = 0; r < x->d->size; r++) {
    x->recv_off[r] = at;
    if (r != x->d->rank) at += (size_t)x->recv_n[r];
  }
}

/* Only the particles that leave are packed and sent: pack them all first
 * (they are overwritten next), then gather the ones that stay at the
 * front, and place the received ones after them, by source rank. */
static int pack_and_keep(struct xchg *x, struct hy_err *err) {
  const double tt = hy_trace_t();
  if (send_buffer(x, tt, err) != 0) return -1;
  if (pack_leavers(x, tt, err) != 0) return -1;
  if (fill_holes(x, err) != 0) return -1;
  place_received(x);
  hy_trace(HY_TRACE_MAIN, "dd_pack", tt);
  return 0;
}

/* The node's peers' records for this rank, read from their window halves
 * (where cnt says this rank's run starts). */
static int read_peer_records(struct xchg *x, struct hy_err *err) {
  struct hy_decomp *d = x->d;
  const int P = d->size;
  const double tt = hy_trace_t();
  if (hy_shm_sync(d->shm, err) != 0) return -1;
  const unsigned char **src = hy_malloc("decomposition runs", (size_t)P, sizeof(unsigned char *));
  size_t *seg = hy_malloc("decomposition runs", (size_t)P + 1, sizeof(size_t));
  size_t *to = hy_malloc("decomposition runs", (size_t)P, sizeof(size_t));
  int nr = 0;
  seg[0] = 0;
  for (int r = 0; r < P; r++)
    if (hy_shm_peer(d->shm, r) && x->recv_n[r] > 0) {
      src[nr] = hy_shm_theirs(d->shm, r) + (size_t)x->cnt[2 * P + 2 * r + 1] * REC_BYTES;
      to[nr] = x->recv_off[r];
      seg[nr + 1] = seg[nr] + (size_t)x->recv_n[r];
      nr++;
    }
  struct move_job mj = {.p = x->p, .runs = src, .seg = seg, .to = to};
  if (nr) hy_decomp_for_all(d, seg[nr], 4096, unpack_body, &mj);
  hy_free(src);
  hy_free(seg);
  hy_free(to);
  hy_trace(HY_TRACE_MAIN, "dd_shm", tt);
  return 0;
}

/* Rank r's particles travel in messages: not this rank's own, nor a node
 * peer's (those go through the window). */
static int by_message(const struct hy_decomp *d, int r) { return r != d->rank && !hy_shm_peer(d->shm, r); }

/* Of the n_r particles between this rank and rank r, those of the round
 * that starts at `first`: up to chunk, where they travel in messages. */
static size_t round_count(const struct hy_decomp *d, int r, uint64_t n_r, size_t first, size_t chunk) {
  return by_message(d, r) && n_r > first ? min_size((size_t)n_r - first, chunk) : 0;
}

/* Rounds of MPI_Alltoallv: in round k each pair moves up to `chunk`
 * particles, so that one call's byte counts and displacements (ints) stay
 * within max_msg_bytes <= INT_MAX. Both sides derive the per-round counts
 * from the exchanged totals, so no further counts are sent. Collective. */
static int count_rounds(struct xchg *x, size_t *chunk, uint64_t *rounds, struct hy_err *err) {
  int ret = 0;
  struct hy_decomp *d = x->d;
  const int P = d->size;
  if ((uint64_t)P * REC_BYTES > d->max_msg_bytes)
    return hy_err_set(err, "domain decomposition: %d ranks x %d bytes exceed one MPI_Alltoallv (%zu bytes)", P,
                      REC_BYTES, d->max_msg_bytes);
  *chunk = d->max_msg_bytes / ((size_t)P * REC_BYTES);
  uint64_t local_max = 0, global_max = 0; /* the pairs that exchange messages (not the node's peers) */
  for (int r = 0; r < P; r++) {
    if (!by_message(d, r)) continue;
    if (x->send_n[r] > local_max) local_max = x->send_n[r];
    if (x->recv_n[r] > local_max) local_max = x->recv_n[r];
  }
  if (!hy_shm_all(d->shm)) /* all on one node's window: no messages (the same on every rank) */
    MPI_TRY(MPI_Allreduce(&local_max, &global_max, 1, MPI_UINT64_T, MPI_MAX, d->comm), "MPI_Allreduce of counts");
  *rounds = (global_max + *chunk - 1) / *chunk;
  if (*rounds > INT_MAX)
    ret = hy_err_set(err, "domain decomposition: %llu exchange rounds needed", (unsigned long long)*rounds);
done:
  return ret;
}

/* The buffers and counts of the rounds of MPI_Alltoallv. */
struct rounds {
  size_t chunk;           /* particles per pair and round */
  int *sc, *sd, *rc, *rd; /* one round's byte counts and displacements, sent and received */
  unsigned char *rbuf;    /* one round's records received */
  size_t *sbase;          /* rank r's records start at sbase[r] in sbuf */
  size_t *seg, *to;       /* one round's first record from each rank (P + 1), and where they go in p */
  /* when all of sbuf is within one message's byte range (direct) the
   * rounds address it directly (rsend: sbuf), else each round's slices are
   * copied into a round buffer (rsend) */
  int direct;
  unsigned char *rsend;
};

static void rounds_alloc(struct xchg *x, struct rounds *R) {
  struct hy_decomp *d = x->d;
  const int P = d->size;
  R->sc = hy_malloc("decomposition counts", (size_t)P, sizeof(int));
  R->sd = hy_malloc("decomposition counts", (size_t)P, sizeof(int));
  R->rc = hy_malloc("decomposition counts", (size_t)P, sizeof(int));
  R->rd = hy_malloc("decomposition counts", (size_t)P, sizeof(int));
  const size_t cap = (size_t)P * R->chunk;
  size_t n_in_msg = 0; /* received in messages */
  for (int r = 0; r < P; r++)
    if (by_message(d, r)) n_in_msg += (size_t)x->recv_n[r];
  R->rbuf = hy_decomp_scratch(&d->rbuf, min_size(n_in_msg, cap), REC_BYTES, "decomposition receive buffer");
  R->sbase = hy_malloc("decomposition offsets", (size_t)P, sizeof(size_t));
  R->seg = hy_malloc("decomposition offsets", (size_t)P + 1, sizeof(size_t));
  R->to = hy_malloc("decomposition offsets", (size_t)P, sizeof(size_t));
  leaver_offsets(x->send_n, P, d->rank, R->sbase);
  R->direct = (uint64_t)x->n_out * REC_BYTES <= d->max_msg_bytes;
  R->rsend = R->direct ? x->sbuf
                       : hy_malloc("decomposition round buffer", min_size(x->n_out, cap) + 1, REC_BYTES);
}

static void rounds_free(struct rounds *R) {
  if (!R->direct) hy_free(R->rsend);
  hy_free(R->sbase);
  hy_free(R->seg);
  hy_free(R->to);
  hy_free(R->sc);
  hy_free(R->sd);
  hy_free(R->rc);
  hy_free(R->rd);
}

/* The byte counts and displacements of the round that starts at `first`,
 * its records copied into the round buffer unless direct. */
static void round_counts(const struct xchg *x, struct rounds *R, size_t first) {
  const struct hy_decomp *d = x->d;
  size_t pos = 0;
  for (int r = 0; r < d->size; r++) {
    const size_t m = round_count(d, r, x->send_n[r], first, R->chunk);
    R->sc[r] = (int)(m * REC_BYTES);
    if (R->direct) {
      R->sd[r] = (int)((R->sbase[r] + (m ? first : 0)) * REC_BYTES);
    } else {
      R->sd[r] = (int)(pos * REC_BYTES);
      memcpy(R->rsend + pos * REC_BYTES, x->sbuf + (R->sbase[r] + first) * REC_BYTES, m * REC_BYTES);
    }
    pos += m;
  }
  pos = 0;
  for (int r = 0; r < d->size; r++) {
    const size_t m = round_count(d, r, x->recv_n[r], first, R->chunk);
    R->rc[r] = (int)(m * REC_BYTES);
    R->rd[r] = (int)(pos * REC_BYTES);
    pos += m;
  }
}

/* The records of the round that starts at `first` into p: each source's
 * after those of its earlier rounds. */
static void unpack_round(struct xchg *x, struct rounds *R, size_t first) {
  const int P = x->d->size;
  R->seg[0] = 0;
  for (int r = 0; r < P; r++) {
    R->seg[r + 1] = R->seg[r] + (size_t)R->rc[r] / REC_BYTES;
    R->to[r] = x->recv_off[r] + first;
  }
  struct move_job mj = {.p = x->p, .buf = R->rbuf, .seg = R->seg, .to = R->to};
  hy_decomp_for_all(x->d, R->seg[P], 4096, unpack_body, &mj);
}

/* The rounds of MPI_Alltoallv, each one's records unpacked. Collective. */
static int run_rounds(struct xchg *x, size_t chunk, uint64_t rounds, struct hy_err *err) {
  struct rounds R = {.chunk = chunk};
  int ret = 0;
  rounds_alloc(x, &R);
  for (uint64_t k = 0; k < rounds && ret == 0; k++) {
    const size_t first = (size_t)k * chunk;
    round_counts(x, &R, first);
    const int rc_mpi = MPI_Alltoallv(R.rsend, R.sc, R.sd, MPI_BYTE, R.rbuf, R.rc, R.rd, MPI_BYTE, x->d->comm);
    if (rc_mpi != MPI_SUCCESS)
      ret = hy_decomp_mpi_fail(err, rc_mpi, "MPI_Alltoallv of particles");
    else
      unpack_round(x, &R, first);
  }
  rounds_free(&R);
  return ret;
}

/* The particles to and from the ranks off the node's window, in messages.
 * Collective. */
static int send_and_receive(struct xchg *x, struct hy_err *err) {
  const double tt = hy_trace_t();
  size_t chunk = 0;
  uint64_t rounds = 0;
  x->s.n_sent = x->n_out;
  x->s.n_recv = x->n_in;
  x->s.bytes_sent = (uint64_t)x->n_out * REC_BYTES;
  x->s.bytes_recv = (uint64_t)x->n_in * REC_BYTES;
  if (count_rounds(x, &chunk, &rounds, err) != 0) return -1;
  x->s.rounds = (int)rounds;
  if (run_rounds(x, chunk, rounds, err) != 0) return -1;
  x->s.n_after = x->n_new;
  x->d->moved_ok = 1;
  hy_trace(HY_TRACE_MAIN, "dd_exchange", tt);
  return 0;
}

/* Load-balance record: max and mean over ranks. Collective. */
static int record_balance(struct xchg *x, struct hy_err *err) {
  int ret = 0;
  struct hy_decomp *d = x->d;
  const int P = d->size;
  const double tt = hy_trace_t();
  double loc[2] = {(double)x->s.n_before + x->weight_extra, (double)x->s.n_after}, mx[2], sum[2];
  MPI_TRY(MPI_Allreduce(loc, mx, 2, MPI_DOUBLE, MPI_MAX, d->comm), "MPI_Allreduce (max)");
  MPI_TRY(MPI_Allreduce(loc, sum, 2, MPI_DOUBLE, MPI_SUM, d->comm), "MPI_Allreduce (sum)");
  x->s.load_max = mx[0];
  x->s.load_mean = sum[0] / P;
  x->s.n_after_max = mx[1];
  x->s.n_after_mean = sum[1] / P;
  hy_trace(HY_TRACE_MAIN, "dd_balance", tt);
done:
  return ret;
}

/* After a failure once the leavers' read began: that read ended, so that
 * the device's next gather may start. */
static void end_pending_leavers(struct xchg *x) {
  if (!x->pv_pending) return;
  const double *pv;
  struct hy_err e2;
  (void)x->dev->leave_end(x->dev->ctx, x->n_out, &pv, &e2);
}

static void xchg_free(struct xchg *x) {
  hy_free(x->cnt);
  hy_free(x->recv_off);
  hy_free(x->send_n);
  hy_free(x->recv_n);
  hy_free(x->dest);
}

/* hy_decomp_exchange (dev NULL) and hy_decomp_exchange_dev. */
static int exchange(struct hy_decomp *d, struct hy_part *p, double weight_extra, const struct hy_decomp_dev *dev,
                    struct hy_decomp_stats *st, struct hy_err *err) {
  const double t0 = hy_wtime();
  struct xchg x = {.d = d, .p = p, .dev = dev, .weight_extra = weight_extra, .n = p->n,
                   .async = dev && dev->leave_begin && dev->leave_end};
  int use_pre = 0;
  d->moved_ok = 0;
  if (take_pre_bounds(d, x.n, &use_pre, err) != 0) return -1;
  int ret = check_finite(&x, err);
  if (ret == 0) ret = make_bounds(&x, use_pre, err);
  if (ret == 0) ret = find_owners(&x, err);
  if (ret == 0) ret = exchange_counts(&x, err);
  if (ret == 0) ret = pack_and_keep(&x, err);
  if (ret == 0 && x.shm) ret = read_peer_records(&x, err);
  if (ret == 0) ret = send_and_receive(&x, err);
  if (ret == 0) ret = record_balance(&x, err);
  end_pending_leavers(&x);
  x.s.time = hy_wtime() - t0;
  if (st) *st = x.s;
  xchg_free(&x);
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

int hy_decomp_moved(const struct hy_decomp *d, const size_t **holes, const size_t **srcs, size_t *n_holes,
                    size_t *n_keep) {
  if (!d->moved_ok) return -1;
  *holes = d->holes;
  *srcs = d->srcs;
  *n_holes = d->n_holes;
  *n_keep = d->n_keep;
  return 0;
}
