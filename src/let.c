/* SPDX-License-Identifier: GPL-3.0-or-later
 * let.c: see let.h.
 *
 * Selection for destination box B, walking the local tree with more/next
 * (d = distance from a node's position or centre of mass to B):
 *   full LET:  particle -> send;  cell: d < r_b -> open, else send (COM, M)
 *   hard LET:  cell with d >= R2 + b_max -> skip (no part of it is within R2
 *              of any sink in B); particle -> send if d < R2; cell:
 *              d < r_b -> open, else send (COM, M) if d < R2 (a monopole at
 *              d >= R2 has hard weight K = 0 for every sink in B).
 * Since d is a lower bound of the distance to every sink in B, a cell sent
 * whole would have been accepted by every sink of B walking our tree, so the
 * LET is conservative. */
#include "config.h"

#include "let.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hy_shared.h"
#include "shm.h"
#include "stream.h"
#include "trace.h"
#include "tree.h"

/* Floats per item (HY_LET_ITEM): the position relative to the receiver's
 * frame, the mass, and the B2 and b_max of a sent cell (0 for a particle),
 * so that the receiver's remote tree gets the moments of the real particles
 * (parallel-axis B2, b_max bound) and opens its cells as the sender's tree
 * would. The receiver's trees hold these very floats (it packs positions
 * relative to that frame in single precision), so the doubles it would
 * otherwise receive carry nothing more, at twice the bytes. */
#define ITEM HY_LET_ITEM

/* Counts exchanged per rank pair before the items: the items, the counted
 * hard-LET items and where they start in the sender's window half. */
#define CNT 3

struct dest_buf {
  float *item; /* ITEM per item */
  size_t n, cap;
  uint64_t n_hard; /* counted hard-LET items (count_hard) */
  const float *ext; /* hy_let_set_selected: the items, borrowed, instead of `item` */
};

/* One selection task: the part of the walk for rank r that starts at node
 * x of the frontier and ends at next[x] (hy_let_select). */
struct sel_task {
  int r;
  int32_t x;
  int skip; /* hard counts: x lies in a subtree the hard walk skips (below a far cell that the full walk opened) */
  struct dest_buf out;
};

struct hy_let {
  MPI_Comm comm;
  int rank, size;
  struct hy_pool *pool;
  struct hy_box *box;       /* per rank */
  double *scale;            /* per rank: its particles' largest sink scale (relative criterion; 0: absolute) */
  double *frame;            /* 3 per rank: the frame each rank's items are sent relative to */
  struct dest_buf *dest;    /* per rank */
  struct sel_task *task;    /* selection tasks of the last hy_let_select */
  size_t n_task, task_cap;
  int32_t *front[2];        /* frontier expansion scratch */
  unsigned char *fskip[2];  /* and the nodes' skip flags (sel_task.skip) */
  size_t front_cap;
  double full_open;         /* full walks open a cell when d < full_open r_b (hy_let_set_full_open) */
  uint64_t *send_cnt;       /* CNT per rank */
  uint64_t *recv_cnt;       /* CNT per rank */
  MPI_Request *req;         /* 2 per rank, and a rehearsed failure's */
  float *recv;              /* receive buffer, kept (a fresh one costs a page fault per 4 KiB at every exchange) */
  size_t recv_cap;          /* its items */
  int ext;                  /* the items to send are borrowed (hy_let_set_selected) */
  /* the ranks of this node: a shared-memory window where each rank puts
   * the items for the others of its node, read by theirs (shm.h) */
  struct hy_shm *shm;
  const float **run_src;    /* per rank: the runs of items an exchange copies or turns into particles */
  float **run_dst;
  size_t *run_first;        /* P + 1 */
  double *range;            /* 6 per pool thread: an exchange's item ranges (hy_let_floats.range) */
  int range_n;
};

struct hy_let *hy_let_create(MPI_Comm comm, struct hy_pool *pool) {
  struct hy_let *L = hy_calloc("LET", 1, sizeof *L);
  L->comm = comm;
  L->pool = pool;
  if (MPI_Comm_rank(comm, &L->rank) != MPI_SUCCESS || MPI_Comm_size(comm, &L->size) != MPI_SUCCESS)
    hy_die("LET: MPI_Comm_rank/MPI_Comm_size failed");
  size_t P = (size_t)L->size;
  L->box = hy_calloc("LET boxes", P, sizeof *L->box);
  L->scale = hy_calloc("LET scales", P, sizeof *L->scale);
  L->frame = hy_calloc("LET frames", P, 3 * sizeof(double));
  L->dest = hy_calloc("LET buffers", P, sizeof *L->dest);
  L->send_cnt = hy_calloc("LET counts", CNT * P, sizeof(uint64_t));
  L->recv_cnt = hy_calloc("LET counts", CNT * P, sizeof(uint64_t));
  L->req = hy_calloc("LET requests", 2 * P + 1, sizeof(MPI_Request));
  L->full_open = HY_LET_FULL_OPEN;
  L->run_src = hy_calloc("LET runs", P, sizeof(float *));
  L->run_dst = hy_calloc("LET runs", P, sizeof(float *));
  L->run_first = hy_calloc("LET runs", P + 1, sizeof(size_t));
  /* the ranks of this node (collective); hy_shm_set_use(0) (NodeSharedMemory no) on any rank
   * sends every rank's items in messages */
  L->shm = hy_shm_create(comm, hy_shm_env(), "LET", "let_window");
  return L;
}

void hy_let_set_full_open(struct hy_let *L, double f) { L->full_open = f; }

int hy_let_node_ranks(const struct hy_let *L) { return hy_shm_node_ranks(L->shm); }

double hy_let_full_open(const struct hy_let *L) { return L->full_open; }

void hy_let_free(struct hy_let *L) {
  if (!L) return;
  for (int r = 0; r < L->size; r++) hy_free(L->dest[r].item);
  for (size_t k = 0; k < L->task_cap; k++) hy_free(L->task[k].out.item);
  hy_free(L->task);
  hy_free(L->front[0]);
  hy_free(L->front[1]);
  hy_free(L->fskip[0]);
  hy_free(L->fskip[1]);
  hy_free(L->dest);
  hy_free(L->box);
  hy_free(L->scale);
  hy_free(L->frame);
  hy_free(L->send_cnt);
  hy_free(L->recv_cnt);
  hy_free(L->req);
  hy_free(L->recv);
  hy_shm_free(L->shm);
  hy_free(L->run_src);
  hy_free(L->run_dst);
  hy_free(L->run_first);
  hy_free(L->range);
  hy_free(L);
}

static void box_range(const double *pos, size_t b, size_t e, struct hy_box *box) {
  for (int d = 0; d < 3; d++) {
    box->lo[d] = INFINITY;
    box->hi[d] = -INFINITY;
  }
  for (size_t i = b; i < e; i++)
    for (int d = 0; d < 3; d++) {
      double x = pos[3 * i + d];
      if (x < box->lo[d]) box->lo[d] = x;
      if (x > box->hi[d]) box->hi[d] = x;
    }
}

void hy_let_tight_box(const struct hy_part *p, struct hy_box *b) { box_range(p->pos, 0, p->n, b); }

struct box_job {
  const double *pos;
  struct hy_box *part; /* per thread */
};

static void box_body(void *arg, size_t b, size_t e, int tid) {
  struct box_job *j = arg;
  struct hy_box r, *acc = &j->part[tid];
  box_range(j->pos, b, e, &r);
  for (int d = 0; d < 3; d++) {
    if (r.lo[d] < acc->lo[d]) acc->lo[d] = r.lo[d];
    if (r.hi[d] > acc->hi[d]) acc->hi[d] = r.hi[d];
  }
}

/* hy_let_tight_box over the pool's threads */
static void tight_box_pool(const struct hy_part *p, struct hy_pool *pool, struct hy_box *b) {
  const int nt = hy_pool_size(pool);
  struct box_job j = {.pos = p->pos, .part = hy_malloc("LET box reductions", (size_t)nt, sizeof(struct hy_box))};
  for (int t = 0; t < nt; t++) box_range(NULL, 0, 0, &j.part[t]);
  hy_pool_for(pool, p->n, 65536, box_body, &j);
  box_range(NULL, 0, 0, b);
  for (int t = 0; t < nt; t++)
    for (int d = 0; d < 3; d++) {
      if (j.part[t].lo[d] < b->lo[d]) b->lo[d] = j.part[t].lo[d];
      if (j.part[t].hi[d] > b->hi[d]) b->hi[d] = j.part[t].hi[d];
    }
  hy_free(j.part);
}

/* The device selection (opencl/let.cl) repeats these operations with
 * contraction off, and its items must equal the host's: no fused
 * multiply-add here either (GCC's ISO C mode does not contract; clang may). */
double hy_let_box_distance(const struct hy_box *b, const double x[3]) {
#ifdef __clang__
#pragma clang fp contract(off)
#endif
  if (!(b->lo[0] <= b->hi[0])) return INFINITY;
  double s = 0.0;
  for (int d = 0; d < 3; d++) {
    double g = 0.0;
    if (x[d] < b->lo[d]) g = b->lo[d] - x[d];
    else if (x[d] > b->hi[d]) g = x[d] - b->hi[d];
    s += g * g;
  }
  return sqrt(s);
}

int hy_let_boxes(struct hy_let *L, const struct hy_part *p, const struct hy_box *mine, const double frame[3],
                 double scale, struct hy_let_stats *st, struct hy_err *err) {
  double t0 = hy_wtime();
  struct hy_box own;
  if (mine)
    own = *mine;
  else
    tight_box_pool(p, L->pool, &own);
  double buf[10];
  for (int d = 0; d < 3; d++) {
    buf[d] = own.lo[d];
    buf[3 + d] = own.hi[d];
    buf[6 + d] = frame ? frame[d] : 0.0;
  }
  buf[9] = scale;
  double *all = hy_malloc("LET boxes", (size_t)L->size, 10 * sizeof(double));
  int rc = MPI_Allgather(buf, 10, MPI_DOUBLE, all, 10, MPI_DOUBLE, L->comm);
  if (rc == MPI_SUCCESS)
    for (int r = 0; r < L->size; r++) {
      for (int d = 0; d < 3; d++) {
        L->box[r].lo[d] = all[10 * r + d];
        L->box[r].hi[d] = all[10 * r + 3 + d];
        L->frame[3 * r + d] = all[10 * r + 6 + d];
      }
      L->scale[r] = all[10 * r + 9];
    }
  hy_free(all);
  st->t_boxes += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "let_boxes", t0);
  return hy_mpi_check(rc, "LET: MPI_Allgather of the domain boxes", err);
}

const struct hy_box *hy_let_box(const struct hy_let *L, int r) { return &L->box[r]; }
double hy_let_scale(const struct hy_let *L, int r) { return L->scale[r]; }

const double *hy_let_frame(const struct hy_let *L, int r) { return L->frame + 3 * r; }

int hy_let_key_cube(const struct hy_let *L, size_t n, const double lo[3], const double hi[3], const double *sample,
                    size_t s, double centre[3], double *half, struct hy_err *err) {
  double v[12], qlo[3], qhi[3], glo[3], ghi[3];
  const int have = n > 0 && lo[0] <= hi[0], bulk = n >= 2 && hy_tree_bulk_box(sample, s, qlo, qhi);
  for (int d = 0; d < 3; d++) { /* one MPI_MIN: maxima negated, nothing = +inf */
    v[d] = have ? lo[d] : INFINITY;
    v[3 + d] = have ? -hi[d] : INFINITY;
    v[6 + d] = bulk ? qlo[d] : INFINITY;
    v[9 + d] = bulk ? -qhi[d] : INFINITY;
  }
  if (hy_mpi_check(MPI_Allreduce(MPI_IN_PLACE, v, 12, MPI_DOUBLE, MPI_MIN, L->comm),
                   "tree: MPI_Allreduce of the key cube", err))
    return -1;
  for (int d = 0; d < 3; d++) {
    glo[d] = v[d];
    ghi[d] = -v[3 + d];
    qlo[d] = v[6 + d];
    qhi[d] = -v[9 + d];
  }
  hy_tree_cube(glo[0] <= ghi[0] ? 2 : 0, glo, ghi, centre, half);
  return hy_tree_shrink_cube(qlo, qhi, centre, half);
}

int hy_let_key_cube_of(const struct hy_let *L, struct hy_tree *t, const struct hy_part *p, struct hy_pool *pool,
                       double centre[3], double *half, struct hy_err *err) {
  double lo[3], hi[3], sample[3 * HY_TREE_SAMPLE];
  hy_tree_ranges(t, p, pool, lo, hi);
  const size_t s = hy_tree_sample(p->pos, p->n, sample);
  return hy_let_key_cube(L, p->n, lo, hi, sample, s, centre, half, err);
}

/* One item for the receiver with frame F (the device selection's
 * hy_let_gather makes the same floats). */
static void push_item(struct dest_buf *b, const double x[3], double m, double b2, double bmax, const double F[3]) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 1024;
    b->item = hy_realloc("LET items", b->item, hy_size_mul_or_die(cap, ITEM, "LET items"), sizeof(float));
    b->cap = cap;
  }
  float *o = b->item + ITEM * b->n++;
  o[0] = (float)(x[0] - F[0]);
  o[1] = (float)(x[1] - F[1]);
  o[2] = (float)(x[2] - F[2]);
  o[3] = (float)m;
  o[4] = (float)b2;
  o[5] = (float)bmax;
}

struct sel_job {
  struct hy_let *L;
  const struct hy_tree *t;
  const struct hy_part *p;
  int hard, count_hard;
  double r2;
};

/* Whether a walk opens cell c at distance d from box B: the hard walk
 * below r_b, a full walk below fopen r_b (hy_let_set_full_open); with the
 * relative criterion (the box's largest sink scale sc > 0) r_b is
 * b_max/2 + sqrt(b_max^2/4 + sqrt(3 B2) sc) (hy_shared.h). */
static int opens(const struct hy_tree *t, size_t c, double d, int hard, double fopen, double sc) {
  const double bm = t->bmax[c], rb = sc > 0 ? bm / 2 + sqrt(bm * bm / 4 + sqrt(3 * t->b2[c]) * sc) : t->rb[c];
  return d < (hard ? rb : fopen * rb);
}

/* The selection walk against box B over the nodes from x up to (excluding)
 * stop: the whole tree from the root with stop HY_NONE, or the subtree of a
 * frontier node x with stop next[x]. out NULL only counts. With hard_count
 * (full walks only) the same pass counts the items the hard walk would
 * select: it visits what the full walk visits except the subtrees of cells
 * with d >= R2 + b_max, which the full walk may open but the hard walk
 * skips (their end is the skipped cell's next link). Returns the item count. */
static uint64_t select_walk(const struct hy_tree *t, const struct hy_part *p, const struct hy_box *B, double sc,
                            int hard, double r2, double fopen, int32_t x, int32_t stop, int skip0,
                            struct dest_buf *out, const double *F, uint64_t *hard_count) {
  const int32_t np = (int32_t)t->n_part;
  uint64_t count = 0, hc = 0;
  /* hard_count: inside a skipped subtree until this node; skip0: the whole walk is */
  int32_t skip_end = skip0 ? stop : HY_NONE;
  int skipping = skip0;
  while (x != stop) {
    if (skipping && x == skip_end) skipping = 0;
    if (x < np) {
      const size_t i = t->pidx ? t->pidx[x] : (size_t)x; /* device-built trees keep p unsorted */
      const double *r = p->pos + 3 * i;
      const double d = hard || hard_count ? hy_let_box_distance(B, r) : 0.0;
      if (!hard || d < r2) {
        if (out) push_item(out, r, p->mass[i], 0.0, 0.0, F);
        count++;
      }
      hc += !skipping && d < r2;
      x = t->next[x];
      continue;
    }
    size_t c = (size_t)(x - np);
    const double *cm = t->cm + 3 * c;
    double d = hy_let_box_distance(B, cm);
    const int far = d >= HY_HARD_REACH(r2, t->bmax[c]); /* no part of the cell within R2 of B */
    if (hard && far) {
      x = t->next[x];
    } else if (opens(t, c, d, hard, fopen, sc)) {
      if (hard_count && !skipping && (far || !opens(t, c, d, 1, 1.0, sc))) {
        /* the hard walk does not open it: it skips it (far), or sends it
         * whole (within R2) or not at all */
        hc += !far && d < r2;
        skipping = 1;
        skip_end = t->next[x];
      }
      x = t->more[x];
    } else {
      if (!hard || d < r2) {
        if (out) push_item(out, cm, t->mass[c], t->b2[c], t->bmax[c], F);
        count++;
      }
      hc += !skipping && !far && d < r2;
      x = t->next[x];
    }
  }
  if (hard_count) *hard_count = hc;
  return count;
}

/* Split the walk for box B into subtrees: starting from the root, replace
 * every cell the walk would open by its children, level by level, until
 * there are at least `want` nodes or nothing opens. The walks of the
 * returned nodes, in order, visit what the whole walk visits, in the same
 * order. For the hard-LET counts of a full walk (count_hard) a node below a
 * cell that the full walk opens but the hard walk skips (d >= R2 + b_max)
 * is marked in L->fskip[0], so that its walk counts nothing, as the whole
 * walk would not. Returns the count; the nodes are in L->front[0]. */
static size_t frontier(struct hy_let *L, const struct hy_tree *t, const struct hy_box *B, double sc, int hard,
                       int count_hard, double r2, double fopen, size_t want) {
  const int32_t np = (int32_t)t->n_part;
  size_t n = 1;
  L->front[0][0] = t->root;
  L->fskip[0][0] = 0;
  for (;;) {
    size_t m = 0;
    int opened = 0;
    for (size_t k = 0; k < n; k++) {
      const int32_t x = L->front[0][k];
      int open = 0, skip = L->fskip[0][k];
      if (x >= np) {
        const size_t c = (size_t)(x - np);
        const double d = hy_let_box_distance(B, t->cm + 3 * c);
        const int far = d >= HY_HARD_REACH(r2, t->bmax[c]);
        open = !(hard && far) && opens(t, c, d, hard, fopen, sc);
        /* a cell that the hard walk sends whole stays a task (its walk counts it) */
        if (open && count_hard && !skip && !far && !opens(t, c, d, 1, 1.0, sc)) open = 0;
        if (open && count_hard && far) skip = 1;
      }
      /* the children of an opened cell: more[x], then next links up to next[x] */
      const int32_t stop = t->next[x];
      for (int32_t y = open ? t->more[x] : x; m < L->front_cap; y = t->next[y]) {
        L->fskip[1][m] = (unsigned char)skip;
        L->front[1][m++] = y;
        if (!open || t->next[y] == stop) break;
      }
      opened |= open;
    }
    if (m >= L->front_cap) return n; /* no room: keep the last complete level */
    int32_t *sw = L->front[0];
    L->front[0] = L->front[1];
    L->front[1] = sw;
    unsigned char *sf = L->fskip[0];
    L->fskip[0] = L->fskip[1];
    L->fskip[1] = sf;
    n = m;
    if (!opened || n >= want) return n;
  }
}

static void sel_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  struct sel_job *j = arg;
  struct hy_let *L = j->L;
  for (size_t k = b; k < e; k++) {
    struct sel_task *tk = &L->task[k];
    const struct hy_box *B = &L->box[tk->r];
    const int32_t stop = j->t->next[tk->x];
    tk->out.n = 0;
    tk->out.n_hard = 0;
    select_walk(j->t, j->p, B, L->scale[tk->r], j->hard, j->r2, L->full_open, tk->x, stop, tk->skip, &tk->out,
                L->frame + 3 * tk->r, j->count_hard ? &tk->out.n_hard : NULL);
  }
}

static void add_task(struct hy_let *L, int r, int32_t x, int skip) {
  if (L->n_task == L->task_cap) {
    size_t cap = 2 * L->task_cap + 64;
    L->task = hy_realloc("LET selection tasks", L->task, cap, sizeof *L->task);
    memset(L->task + L->task_cap, 0, (cap - L->task_cap) * sizeof *L->task);
    L->task_cap = cap;
  }
  L->task[L->n_task].r = r;
  L->task[L->n_task].x = x;
  L->task[L->n_task].skip = skip;
  L->n_task++;
}

void hy_let_select(struct hy_let *L, const struct hy_tree *t, const struct hy_part *p, int hard, double r2,
                   int count_hard, struct hy_let_stats *st) {
  double t0 = hy_wtime();
  struct sel_job j = {.L = L, .t = t, .p = p, .hard = hard, .count_hard = count_hard && !hard, .r2 = r2};
  L->ext = 0;
  /* tasks: every destination's walk split into subtrees, so that even one
   * destination keeps every thread busy */
  const size_t want = 16 * (size_t)hy_pool_size(L->pool);
  if (L->front_cap < 8 * want + 8) {
    L->front_cap = 8 * want + 8;
    for (int k = 0; k < 2; k++) {
      hy_free(L->front[k]);
      hy_free(L->fskip[k]);
      L->front[k] = hy_malloc("LET selection frontier", L->front_cap, sizeof(int32_t));
      L->fskip[k] = hy_malloc("LET selection frontier", L->front_cap, 1);
    }
  }
  L->n_task = 0;
  for (int r = 0; r < L->size; r++) {
    const struct hy_box *B = &L->box[r];
    if (r == L->rank || !t || p->n == 0 || !(B->lo[0] <= B->hi[0])) continue;
    size_t n = frontier(L, t, B, L->scale[r], hard, j.count_hard, r2, L->full_open, want);
    for (size_t k = 0; k < n; k++) add_task(L, r, L->front[0][k], L->fskip[0][k]);
  }
  hy_pool_for(L->pool, L->n_task, 1, sel_body, &j);
  /* each destination's items: its tasks' items in walk order */
  for (int r = 0; r < L->size; r++) {
    L->dest[r].n = 0;
    L->dest[r].n_hard = 0;
  }
  for (size_t k = 0; k < L->n_task; k++) {
    const struct sel_task *tk = &L->task[k];
    struct dest_buf *out = &L->dest[tk->r];
    if (tk->out.n) {
      if (out->n + tk->out.n > out->cap) {
        size_t cap = out->n + tk->out.n;
        cap += cap / 2 + 1024;
        out->item = hy_realloc("LET items", out->item, hy_size_mul_or_die(cap, ITEM, "LET items"), sizeof(float));
        out->cap = cap;
      }
      memcpy(out->item + ITEM * out->n, tk->out.item, tk->out.n * ITEM * sizeof(float));
      out->n += tk->out.n;
    }
    out->n_hard += tk->out.n_hard;
  }
  st->t_select += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, hard ? "let_select_hard" : "let_select_full", t0);
}

void hy_let_set_selected(struct hy_let *L, const int *rank, size_t nb, const float *items, const size_t *count,
                         const uint64_t *hcount) {
  for (int r = 0; r < L->size; r++) {
    L->dest[r].n = 0;
    L->dest[r].n_hard = 0;
    L->dest[r].ext = NULL;
  }
  size_t off = 0;
  for (size_t k = 0; k < nb; k++) {
    struct dest_buf *d = &L->dest[rank[k]];
    d->ext = items + ITEM * off;
    d->n = count[k];
    d->n_hard = hcount[k];
    off += count[k];
  }
  L->ext = 1;
}

static const float *send_items(const struct hy_let *L, int r) {
  return L->ext ? L->dest[r].ext : L->dest[r].item;
}


/* Items per message: ITEM floats each, the count must fit an int. */
static int check_msg(uint64_t n, int peer, const char *dir, struct hy_err *err) {
  if (n > (uint64_t)(INT_MAX / ITEM))
    return hy_err_set(err, "LET: %llu items %s rank %d exceed one MPI message (at most %d)", (unsigned long long)n,
                      dir, peer, INT_MAX / ITEM);
  return 0;
}

/* Tests: HYTREE_TEST_MPI_FAIL=N makes this rank's N-th exchange post a send
 * to a rank that does not exist, so that a failing MPI call is rehearsed
 * through the real error path (MPI_ERRORS_RETURN, message, all ranks end). */
static int test_fail_now(void) {
  static long calls = 0, at = -1;
  if (at < 0) {
    const char *e = getenv("HYTREE_TEST_MPI_FAIL");
    at = e && *e ? atol(e) : 0;
  }
  return at > 0 && ++calls == at;
}

/* Runs of items moved on the pool's threads: run k holds the items
 * first[k] .. first[k + 1] - 1 of the whole, read from src[k]; they are
 * copied to dst[k] (dst not NULL), or turned into the remote particles of
 * the same indices: positions back in the absolute frame (this rank's
 * frame plus the float offset, which a pack relative to that frame turns
 * into the same float again), or (pos4 not NULL) straight into the floats
 * that packing those particles relative to origin would give. */
struct runs_job {
  const float **src;
  float **dst;
  const size_t *first; /* nrun + 1 */
  const double *F;
  struct hy_part *q;
  const double *origin; /* with pos4: floats relative to it instead of q */
  float *pos4, *grp;
  double *range; /* with pos4, optional: 6 per thread, lo[3] and hi[3] of the finite positions relative to origin */
  size_t base;   /* the pool's indices are items base, base + 1, ... of the whole */
};

static void runs_body(void *arg, size_t b, size_t e, int tid) {
  const struct runs_job *j = arg;
  b += j->base;
  e += j->base;
  int k = 0;
  for (size_t g = b; g < e;) {
    while (j->first[k + 1] <= g) k++;
    const size_t i0 = g - j->first[k], m = (e < j->first[k + 1] ? e : j->first[k + 1]) - g;
    const float *it = j->src[k] + ITEM * i0;
    if (j->dst) { /* into the window, read next by the other ranks' cores: past this core's cache */
      hy_copy_stream(j->dst[k] + ITEM * i0, it, m * ITEM * sizeof(float));
    } else if (j->pos4) { /* as the remote particles packed relative to origin (force.c, pack_run) */
      const double *F = j->F, *o = j->origin;
      double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
      /* the pinned buffers go to the device by DMA: past the cache as well */
      const int st = HY_HAVE_STREAM && !((uintptr_t)j->pos4 & 15) && !((uintptr_t)j->grp & 7);
      for (size_t i = g; i < g + m; i++, it += ITEM) {
        double x[3];
        for (int d = 0; d < 3; d++) x[d] = (F[d] + (double)it[d]) - o[d];
        if (st) {
          hy_stream_f4(j->pos4 + 4 * i, (float)x[0], (float)x[1], (float)x[2], it[3]);
          hy_stream_f2(j->grp + 2 * i, it + 4); /* B2 and b_max */
        } else {
          for (int d = 0; d < 3; d++) j->pos4[4 * i + d] = (float)x[d];
          j->pos4[4 * i + 3] = it[3];
          memcpy(j->grp + 2 * i, it + 4, 2 * sizeof(float));
        }
        if (j->range && (isfinite(x[0]) & isfinite(x[1]) & isfinite(x[2]))) /* plain compares, as pack_run's */
          for (int d = 0; d < 3; d++) {
            lo[d] = x[d] < lo[d] ? x[d] : lo[d];
            hi[d] = x[d] > hi[d] ? x[d] : hi[d];
          }
      }
      if (st) hy_stream_fence();
      if (j->range) {
        double *r = j->range + 6 * (size_t)tid;
        for (int d = 0; d < 3; d++) {
          r[d] = fmin(r[d], lo[d]);
          r[3 + d] = fmax(r[3 + d], hi[d]);
        }
      }
    } else {
      struct hy_part *q = j->q;
      for (size_t i = g; i < g + m; i++, it += ITEM) {
        for (int d = 0; d < 3; d++) q->pos[3 * i + d] = j->F[d] + (double)it[d];
        q->mass[i] = it[3];
        q->grp[2 * i] = it[4];
        q->grp[2 * i + 1] = it[5];
        q->id[i] = i;
      }
    }
    g += m;
  }
}

int hy_let_test_small(void) {
  static int v = -1;
  if (v < 0) {
    const char *e = getenv("HYTREE_TEST_LET_SMALL");
    v = e && *e == '1';
  }
  return v;
}

/* Per-thread room for the exchange's ranges (runs_job.range), kept. */
static double *scratch_range(struct hy_let *L, int nt) {
  if (L->range_n < nt) {
    hy_free(L->range);
    L->range = hy_malloc("LET item ranges", (size_t)nt, 6 * sizeof(double));
    L->range_n = nt;
  }
  return L->range;
}

/* hy_tree_sample of the remote particles that the nrun runs of items
 * (first, src as in runs_job) would make, positions F + (double)x: item
 * (j m) / s for j < s = min(m, HY_TREE_SAMPLE). Returns s. */
static size_t sample_items(const float *const *src, const size_t *first, int nrun, const double *F, double *sample) {
  const size_t m = nrun ? first[nrun] : 0, s = m < HY_TREE_SAMPLE ? m : HY_TREE_SAMPLE;
  int k = 0;
  for (size_t j = 0; j < s; j++) {
    const size_t i = hy_tree_sample_index(j, m, s);
    while (first[k + 1] <= i) k++;
    const float *it = src[k] + ITEM * (i - first[k]);
    for (int d = 0; d < 3; d++) sample[3 * j + d] = F[d] + (double)it[d];
  }
  return s;
}

/* Whether rank r's items travel through the node's shared memory. */
static int via_shm(const struct hy_let *L, int r) { return hy_shm_peer(L->shm, r); }

static int exchange(struct hy_let *L, struct hy_part *remote, struct hy_let_floats *fl, struct hy_let_stats *st,
                    struct hy_err *err);

int hy_let_exchange(struct hy_let *L, struct hy_part *remote, struct hy_let_stats *st, struct hy_err *err) {
  return exchange(L, remote, NULL, st, err);
}

int hy_let_exchange_floats(struct hy_let *L, struct hy_let_floats *out, struct hy_let_stats *st, struct hy_err *err) {
  return exchange(L, NULL, out, st, err);
}

/* One exchange's figures: items per direction and where they go. */
struct xfer {
  uint64_t shm_n;                      /* items this rank puts into its window half */
  uint64_t total, sent, hard, by_msg;  /* received, sent, counted hard, received in messages */
  int nreq;                            /* requests posted */
  float *pos4, *grp4;                  /* hy_let_exchange_floats: the destination floats */
};

/* Per rank: items, counted hard items, and where they start in this rank's
 * shared-memory half (node peers); exchanged with every rank. */
static int exchange_counts(struct hy_let *L, struct xfer *x, struct hy_err *err) {
  for (int r = 0; r < L->size; r++) {
    L->send_cnt[CNT * r] = L->dest[r].n;
    L->send_cnt[CNT * r + 1] = L->dest[r].n_hard;
    L->send_cnt[CNT * r + 2] = via_shm(L, r) ? x->shm_n : 0;
    if (via_shm(L, r)) x->shm_n += L->dest[r].n;
  }
  int rc = MPI_Alltoall(L->send_cnt, CNT, MPI_UINT64_T, L->recv_cnt, CNT, MPI_UINT64_T, L->comm);
  return hy_mpi_check(rc, "LET: MPI_Alltoall of the item counts", err) ? -1 : 0;
}

/* The totals of the counts, each message's count checked. */
static int tally(const struct hy_let *L, struct xfer *x, struct hy_err *err) {
  for (int r = 0; r < L->size; r++) {
    if (check_msg(L->recv_cnt[CNT * r], r, "from", err) || check_msg(L->send_cnt[CNT * r], r, "to", err)) return -1;
    x->total += L->recv_cnt[CNT * r];
    x->hard += L->recv_cnt[CNT * r + 1];
    x->sent += L->send_cnt[CNT * r];
    if (!via_shm(L, r)) x->by_msg += L->recv_cnt[CNT * r];
  }
  if (x->total > (uint64_t)SIZE_MAX / ITEM)
    return hy_err_set(err, "LET: %llu items received", (unsigned long long)x->total);
  return 0;
}

/* Room for the items received: the remote particles or the caller's floats,
 * and the receive buffer of the messages. */
static int make_room(struct hy_let *L, struct hy_part *remote, struct hy_let_floats *fl, struct xfer *x,
                     struct hy_err *err) {
  if (fl) {
    x->pos4 = fl->alloc(fl->ctx, (size_t)x->total, &x->grp4, err);
    if (!x->pos4 || !x->grp4) return -1;
    fl->n = (size_t)x->total;
    fl->pos4 = x->pos4;
    fl->grp = x->grp4;
  } else {
    hy_part_use_groups(remote);
    hy_part_resize(remote, (size_t)x->total);
  }
  if (x->by_msg > L->recv_cap) {
    const size_t cap = (size_t)x->by_msg + (size_t)x->by_msg / 4 + 1024;
    hy_free(L->recv);
    L->recv = hy_malloc("LET receive buffer", hy_size_mul_or_die(cap, ITEM, "LET receive buffer"), sizeof(float));
    L->recv_cap = cap;
  }
  return 0;
}

/* Messages to and from the ranks of other nodes (all, without a window),
 * and the rehearsed failure to rank bad_dest (>= 0). */
static int post_messages(struct hy_let *L, int bad_dest, struct xfer *x, struct hy_err *err) {
  const int P = L->size, tag = 7301;
  int rc = MPI_SUCCESS;
  size_t off = 0;
  for (int r = 0; r < P && rc == MPI_SUCCESS; r++) {
    int n = (int)L->recv_cnt[CNT * r];
    if (via_shm(L, r)) continue;
    if (n > 0) rc = MPI_Irecv(L->recv + ITEM * off, ITEM * n, MPI_FLOAT, r, tag, L->comm, &L->req[x->nreq++]);
    off += (size_t)n;
  }
  for (int r = 0; r < P && rc == MPI_SUCCESS; r++) {
    int n = (int)L->send_cnt[CNT * r];
    if (n > 0 && !via_shm(L, r))
      rc = MPI_Isend(send_items(L, r), ITEM * n, MPI_FLOAT, r, tag, L->comm, &L->req[x->nreq++]);
  }
  if (rc == MPI_SUCCESS && bad_dest >= 0) /* the rehearsed failure */
    rc = MPI_Isend(send_items(L, L->rank), 0, MPI_FLOAT, bad_dest, tag, L->comm, &L->req[x->nreq++]);
  return hy_mpi_check(rc, "LET: exchange of the items", err) ? -1 : 0;
}

/* The node's ranks: each puts its items for the others into its half of the
 * window, and after a barrier each reads its own from theirs (the halves
 * alternate, so that the next exchange's writes never meet this one's
 * reads). */
static int put_node_items(struct hy_let *L, const struct xfer *x, double t1, struct hy_err *err) {
  /* the node's largest count, and the room to make if the window grows */
  const uint64_t bytes = x->shm_n * ITEM * sizeof(float);
  if (hy_shm_reserve(L->shm, bytes, hy_let_test_small() ? bytes : bytes + bytes / 4 + 4096 * ITEM * sizeof(float),
                     err) != 0)
    return -1;
  float *mine = (float *)(void *)hy_shm_mine(L->shm);
  const float **src = L->run_src;
  float **dst = L->run_dst;
  size_t *first = L->run_first;
  int nrun = 0;
  first[0] = 0;
  for (int r = 0; r < L->size; r++)
    if (via_shm(L, r) && L->send_cnt[CNT * r] > 0) {
      src[nrun] = send_items(L, r);
      dst[nrun] = mine + ITEM * (size_t)L->send_cnt[CNT * r + 2];
      first[nrun + 1] = first[nrun] + (size_t)L->send_cnt[CNT * r];
      nrun++;
    }
  struct runs_job cj = {.src = src, .dst = dst, .first = first};
  if (nrun) hy_pool_for(L->pool, first[nrun], 16384, runs_body, &cj);
  hy_trace(HY_TRACE_MAIN, "li_put", t1);
  return 0;
}

/* The node's barrier and the messages' completion. */
static int wait_items(struct hy_let *L, const struct xfer *x, struct hy_err *err) {
  const double tw = hy_trace_t();
  if (hy_let_node_ranks(L) > 0 && hy_shm_sync(L->shm, err) != 0) return -1;
  int rc = x->nreq > 0 ? MPI_Waitall(x->nreq, L->req, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
  if (hy_mpi_check(rc, "LET: exchange of the items", err)) return -1;
  hy_trace(HY_TRACE_MAIN, "li_wait", tw);
  return 0;
}

/* Every source's items, in rank order, as runs (L->run_src, L->run_first):
 * from the window for node peers, from the receive buffer otherwise.
 * Returns the number of runs. */
static int received_runs(struct hy_let *L) {
  const float **src = L->run_src;
  size_t *first = L->run_first;
  int nrun = 0;
  size_t off = 0;
  first[0] = 0;
  for (int r = 0; r < L->size; r++) {
    const size_t n = (size_t)L->recv_cnt[CNT * r];
    if (!n) continue;
    if (via_shm(L, r)) {
      src[nrun] = (const float *)(const void *)hy_shm_theirs(L->shm, r) + ITEM * (size_t)L->recv_cnt[CNT * r + 2];
    } else {
      src[nrun] = L->recv + ITEM * off;
      off += n;
    }
    first[nrun + 1] = first[nrun] + n;
    nrun++;
  }
  return nrun;
}

/* The per-thread ranges of an exchange into floats, emptied (NULL when the
 * caller wants no range). */
static double *start_ranges(struct hy_let *L, const struct hy_let_floats *fl, int nt) {
  if (!fl || !fl->range) return NULL;
  double *range = scratch_range(L, nt);
  for (int t = 0; t < nt; t++)
    for (int d = 0; d < 3; d++) {
      range[6 * t + d] = INFINITY;
      range[6 * t + 3 + d] = -INFINITY;
    }
  return range;
}

/* fl->range: the union of the threads' ranges. */
static void merge_ranges(struct hy_let_floats *fl, const double *range, int nt) {
  for (int d = 0; d < 3; d++) {
    fl->range[d] = INFINITY;
    fl->range[3 + d] = -INFINITY;
  }
  for (int t = 0; t < nt; t++)
    for (int d = 0; d < 3; d++) {
      fl->range[d] = fmin(fl->range[d], range[6 * t + d]);
      fl->range[3 + d] = fmax(fl->range[3 + d], range[6 * t + 3 + d]);
    }
}

/* The nrun runs of items received into the remote particles or the floats
 * (with their range and sample when asked for); with fl->ready, run by run,
 * each handed on when done. */
static int take_items(struct hy_let *L, struct hy_part *remote, struct hy_let_floats *fl, const struct xfer *x,
                      int nrun, struct hy_err *err) {
  const size_t *first = L->run_first;
  const int nt = hy_pool_size(L->pool);
  double *range = start_ranges(L, fl, nt);
  struct runs_job rj = {.src = L->run_src, .first = first, .F = L->frame + 3 * L->rank, .q = remote,
                        .origin = fl ? fl->origin : NULL, .pos4 = x->pos4, .grp = x->grp4, .range = range};
  if (nrun && fl && fl->ready) {
    for (int k = 0; k < nrun; k++) {
      const size_t nk = first[k + 1] - first[k];
      rj.base = first[k];
      hy_pool_for(L->pool, nk, 16384, runs_body, &rj);
      if (fl->ready(fl, first[k], nk, err) != 0) return -1;
    }
  } else if (nrun) {
    hy_pool_for(L->pool, (size_t)x->total, 16384, runs_body, &rj);
  }
  if (range) merge_ranges(fl, range, nt);
  if (fl && fl->sample) fl->n_sample = sample_items(L->run_src, first, nrun, L->frame + 3 * L->rank, fl->sample);
  return 0;
}

static int exchange(struct hy_let *L, struct hy_part *remote, struct hy_let_floats *fl, struct hy_let_stats *st,
                    struct hy_err *err) {
  double t0 = hy_wtime();
  const int bad_dest = test_fail_now() ? L->size + 7 : -1;
  struct xfer x;
  memset(&x, 0, sizeof x);
  if (exchange_counts(L, &x, err) != 0) return -1;
  hy_trace(HY_TRACE_MAIN, "let_counts", t0);
  const double t1 = hy_trace_t();
  if (tally(L, &x, err) != 0 || make_room(L, remote, fl, &x, err) != 0 || post_messages(L, bad_dest, &x, err) != 0)
    return -1;
  if (hy_let_node_ranks(L) > 0 && put_node_items(L, &x, t1, err) != 0) return -1;
  if (wait_items(L, &x, err) != 0) return -1;
  const double tt = hy_trace_t();
  if (take_items(L, remote, fl, &x, received_runs(L), err) != 0) return -1;
  hy_trace(HY_TRACE_MAIN, "li_take", tt);
  st->n_sent += x.sent;
  st->n_recv += x.total;
  st->n_recv_hard += x.hard;
  st->bytes_sent += x.sent * ITEM * sizeof(float);
  st->bytes_recv += x.total * ITEM * sizeof(float);
  st->t_comm += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "let_items", t1);
  return 0;
}
