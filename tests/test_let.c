/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_let.c: the LET exchange (src/let.c) under MPI at any rank count
 * (tests/let_mpi.sh runs it at 1 to 4 ranks, through the node's
 * shared-memory window and with MPI messages only). Each rank holds a
 * clumpy particle set in its own slab, far from the origin; the hard and
 * the full LET are selected from its tree and exchanged twice: into remote
 * particles (hy_let_exchange, the reference) and straight into floats
 * (hy_let_exchange_floats, what the device paths take). The floats must be
 * bit for bit the reference particles packed relative to the same origin,
 * (float)(pos - origin), with their masses and group moments; the range
 * the extremes of pos - origin in double; the sample hy_tree_sample of the
 * reference positions; with a ready callback (as the soft step's merged
 * walk uploads them) each source's run must be handed on in order and
 * already converted. Both exchanges must deliver the same count, and with
 * several ranks some items of the large set must arrive. */
#include "config.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hy_test.h"
#include "hy_test_mpi.h"
#include "let.h"
#include "shm.h"
#include "part.h"
#include "threads.h"
#include "tree.h"

static int rank, nranks;

#define SHIFT_X 1.0e9
#define SHIFT_Y (-2.0e9)
#define SHIFT_Z 3.0e9

/* Rank-local rooms of the float exchange (hy_let_floats.alloc), and what
 * its ready calls must find there: the reference particles packed. */
struct room {
  float *pos4, *grp;
  size_t cap;
  const struct hy_part *ref; /* NULL: no ready callback */
  const double *origin;
  size_t next;  /* the first item the next ready call must start at */
  size_t wrong; /* items not yet in place when handed on */
};

static float *alloc_room(void *ctx, size_t m, float **grp, struct hy_err *err) {
  (void)err;
  struct room *r = ctx;
  const size_t k = m ? m : 1;
  if (k > r->cap) {
    hy_free(r->pos4);
    hy_free(r->grp);
    r->pos4 = hy_malloc("test items", k, 4 * sizeof(float));
    r->grp = hy_malloc("test items", k, 2 * sizeof(float));
    r->cap = k;
  }
  *grp = r->grp;
  return r->pos4;
}

static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* hy_let_floats.ready: the runs come in order, back to back, each already
 * converted (checked against the reference particles here). */
static int ready_run(const struct hy_let_floats *fl, size_t first, size_t count, struct hy_err *err) {
  (void)err;
  struct room *r = fl->ctx;
  HY_CHECK(fl->pos4 == r->pos4);
  HY_CHECK_MSG(first == r->next && count > 0, "ready(%zu, %zu) after %zu items", first, count, r->next);
  for (size_t i = first; i < first + count && i < r->ref->n; i++)
    for (int d = 0; d < 3; d++) r->wrong += !same_bits(r->pos4[4 * i + d], (float)(r->ref->pos[3 * i + d] - r->origin[d]));
  r->next = first + count;
  return 0;
}
static int same_bits_d(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

/* n particles in this rank's slab of x (width 1, the slabs touching), a
 * few clumps in it, all shifted so far from the origin (1e9: a double's
 * unit in the last place there is 1.2e-7) that a frame plus an item's float
 * offset rounds, and the order of the floats path's double arithmetic
 * shows in its results. */
static void make_set(struct hy_part *p, size_t n, gsl_rng *rng) {
  hy_part_resize(p, n);
  const double shift[3] = {SHIFT_X, SHIFT_Y, SHIFT_Z};
  for (size_t i = 0; i < n; i++) {
    const int clump = (int)(i % 4);
    const double cx = rank + 0.2 + 0.2 * clump, cy = 0.5 + 0.1 * clump, cz = 0.5 - 0.1 * clump;
    const double s = 0.02 + 0.03 * clump;
    p->pos[3 * i] = shift[0] + cx + gsl_ran_gaussian(rng, s);
    p->pos[3 * i + 1] = shift[1] + cy + gsl_ran_gaussian(rng, s);
    p->pos[3 * i + 2] = shift[2] + cz + gsl_ran_gaussian(rng, s);
    for (int d = 0; d < 3; d++) p->vel[3 * i + d] = 0.0;
    p->mass[i] = (1.0 + gsl_rng_uniform(rng)) / (double)n;
    p->id[i] = (uint64_t)rank * n + i;
    p->type[i] = 1;
  }
}

/* One selection (hard or full) exchanged both ways and compared. */
static void check_exchange(struct hy_let *L, struct hy_tree *t, struct hy_part *p, int hard, const double frame[3],
                           const double origin[3], int want_items, int with_ready, struct room *room) {
  struct hy_err err = {0};
  struct hy_let_stats st = {0};
  HY_CHECK(hy_let_boxes(L, p, NULL, frame, 0.0, &st, &err) == 0);
  const double r2 = 0.15;
  hy_let_select(L, t, p, hard, r2, !hard, &st);
  struct hy_part remote;
  hy_part_init(&remote);
  HY_CHECK_MSG(hy_let_exchange(L, &remote, &st, &err) == 0, "%s", err.msg);
  double range[6], sample[3 * HY_TREE_SAMPLE];
  struct hy_let_floats fl = {.origin = origin, .alloc = alloc_room, .ctx = room, .range = range, .sample = sample};
  if (with_ready) { /* as the merged walk takes them: each source's run handed on when converted */
    fl.ready = ready_run;
    room->ref = &remote;
    room->origin = origin;
    room->next = room->wrong = 0;
  }
  HY_CHECK_MSG(hy_let_exchange_floats(L, &fl, &st, &err) == 0, "%s", err.msg);
  const size_t m = remote.n;
  if (with_ready) {
    HY_CHECK_MSG(room->next == m, "ready calls covered %zu of %zu items", room->next, m);
    HY_CHECK_MSG(room->wrong == 0, "%zu coordinates not in place when their run was handed on", room->wrong);
  }
  HY_CHECK_INT(fl.n, m);
  uint64_t total = m, all = 0;
  MPI_Allreduce(&total, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (nranks > 1 && want_items) HY_CHECK_MSG(all > 0, "no %s LET items arrived anywhere", hard ? "hard" : "full");
  if (fl.n != m) return;
  size_t bad = 0;
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  for (size_t i = 0; i < m; i++) {
    for (int d = 0; d < 3; d++) {
      const double x = remote.pos[3 * i + d] - origin[d];
      bad += !same_bits(fl.pos4[4 * i + d], (float)x);
      lo[d] = fmin(lo[d], x);
      hi[d] = fmax(hi[d], x);
    }
    bad += !same_bits(fl.pos4[4 * i + 3], (float)remote.mass[i]);
    bad += !same_bits(fl.grp[2 * i], (float)remote.grp[2 * i]);
    bad += !same_bits(fl.grp[2 * i + 1], (float)remote.grp[2 * i + 1]);
  }
  HY_CHECK_MSG(bad == 0, "%s LET: %zu floats of %zu items differ from the packed remote particles",
               hard ? "hard" : "full", bad, m);
  if (m > 0)
    for (int d = 0; d < 3; d++) {
      HY_CHECK_MSG(same_bits_d(range[d], lo[d]) && same_bits_d(range[3 + d], hi[d]),
                   "%s LET: range of axis %d [%.17g, %.17g], want [%.17g, %.17g]", hard ? "hard" : "full", d,
                   range[d], range[3 + d], lo[d], hi[d]);
    }
  double ref[3 * HY_TREE_SAMPLE];
  const size_t s = hy_tree_sample(remote.pos, m, ref);
  HY_CHECK_INT(fl.n_sample, s);
  if (fl.n_sample == s)
    HY_CHECK_MSG(memcmp(ref, sample, 3 * s * sizeof(double)) == 0, "%s LET: the sample differs",
                 hard ? "hard" : "full");
  hy_part_free(&remote);
}

int main(int argc, char **argv) {
  hy_test_mpi_begin(&argc, &argv, "test_let", &rank, &nranks);
  /* --messages: the node's ranks exchange in MPI messages, as between nodes */
  if (argc > 1 && strcmp(argv[1], "--messages") == 0) hy_shm_set_use(0);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  gsl_rng_set(rng, 4242u + (unsigned long)rank);
  struct hy_pool *pool = hy_pool_create(3);
  struct hy_let *L = hy_let_create(MPI_COMM_WORLD, pool);
  struct hy_part p;
  hy_part_init(&p);
  struct hy_tree t;
  hy_tree_init(&t);
  struct room room = {0};
  const size_t sizes[] = {20000, 3, 700};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    make_set(&p, sizes[k], rng);
    hy_tree_sort(&t, &p, pool);
    struct hy_err err = {0};
    HY_CHECK_MSG(hy_tree_build(&t, &p, 16, 1e-4, pool, &err) == 0, "%s", err.msg);
    /* the frame near the particles (no short binary fractions, so that the
     * frame plus an item's float offset rounds), the origin the frame
     * itself or elsewhere */
    const double frame[3] = {SHIFT_X + rank + 0.1, SHIFT_Y + 0.3, SHIFT_Z + 0.7};
    const double away[3] = {frame[0] + 0.375, frame[1] - 1.0 / 3.0, frame[2] + 7.0};
    for (int hard = 0; hard < 2; hard++) {
      /* the large set's slabs overlap: items must cross (the small ones may lie too far apart) */
      check_exchange(L, &t, &p, hard, frame, frame, sizes[k] >= 1000, 0, &room);
      check_exchange(L, &t, &p, hard, frame, away, sizes[k] >= 1000, 1, &room);
    }
  }
  hy_free(room.pos4);
  hy_free(room.grp);
  hy_tree_free(&t);
  hy_part_free(&p);
  hy_let_free(L);
  hy_pool_free(pool);
  gsl_rng_free(rng);
  return hy_test_mpi_end("test_let", rank, nranks);
}
