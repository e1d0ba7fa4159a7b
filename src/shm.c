/* SPDX-License-Identifier: GPL-3.0-or-later
 * shm.c: see shm.h. */
#include "config.h"

#include "shm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "trace.h"

struct hy_shm {
  MPI_Comm node;       /* MPI_COMM_NULL: no window */
  int rank, size;      /* in comm */
  int all;             /* every rank of comm on this node's window */
  int *node_rank;      /* per rank of comm: its rank in `node`, or -1 */
  MPI_Win win;         /* MPI_WIN_NULL until the first hy_shm_reserve */
  unsigned char *seg;  /* this rank's segment: two halves of `cap` bytes */
  unsigned char **peer; /* per rank of comm on this node: its segment */
  size_t cap;          /* bytes per half */
  unsigned long n_xchg; /* exchanges begun (hy_shm_reserve) */
  size_t half;         /* the current exchange's half: 0 or 1 */
  const char *what, *phase;
};

static int check(const struct hy_shm *S, int rc, const char *call, struct hy_err *err) {
  if (rc == MPI_SUCCESS) return 0;
  char m[256];
  snprintf(m, sizeof m, "%s: %s", S->what, call);
  return hy_mpi_check(rc, m, err);
}

static int shm_use = 1;
void hy_shm_set_use(int use) { shm_use = use != 0; }
int hy_shm_env(void) { return shm_use; }

struct hy_shm *hy_shm_create(MPI_Comm comm, int want, const char *what, const char *phase) {
  struct hy_shm *S = hy_calloc("shared-memory exchange", 1, sizeof *S);
  S->what = what;
  S->phase = phase;
  S->node = MPI_COMM_NULL;
  S->win = MPI_WIN_NULL;
  if (MPI_Comm_rank(comm, &S->rank) != MPI_SUCCESS || MPI_Comm_size(comm, &S->size) != MPI_SUCCESS)
    hy_die("%s: MPI_Comm_rank/MPI_Comm_size failed", what);
  const size_t P = (size_t)S->size;
  S->node_rank = hy_malloc("node ranks", P, sizeof(int));
  for (size_t r = 0; r < P; r++) S->node_rank[r] = -1;
  S->peer = hy_calloc("node segments", P, sizeof(unsigned char *));
  if (MPI_Allreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
    hy_die("%s: MPI_Allreduce failed", what);
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, want ? MPI_COMM_TYPE_SHARED : MPI_UNDEFINED, S->rank, MPI_INFO_NULL, &node) !=
      MPI_SUCCESS)
    hy_die("%s: MPI_Comm_split_type failed", what);
  int nn = 0;
  if (node != MPI_COMM_NULL && (MPI_Comm_size(node, &nn) != MPI_SUCCESS || nn < 2)) {
    if (MPI_Comm_free(&node) != MPI_SUCCESS) hy_die("%s: MPI_Comm_free failed", what);
    node = MPI_COMM_NULL;
  }
  if (node != MPI_COMM_NULL) {
    if (MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN) != MPI_SUCCESS)
      hy_die("%s: MPI_Comm_set_errhandler failed", what);
    MPI_Group gc, gn;
    int *in = hy_malloc("node ranks", P, sizeof(int));
    for (size_t r = 0; r < P; r++) in[r] = (int)r;
    if (MPI_Comm_group(comm, &gc) != MPI_SUCCESS || MPI_Comm_group(node, &gn) != MPI_SUCCESS ||
        MPI_Group_translate_ranks(gc, (int)P, in, gn, S->node_rank) != MPI_SUCCESS ||
        MPI_Group_free(&gc) != MPI_SUCCESS || MPI_Group_free(&gn) != MPI_SUCCESS)
      hy_die("%s: the ranks of this node could not be found (MPI group calls failed)", what);
    for (size_t r = 0; r < P; r++)
      if (S->node_rank[r] == MPI_UNDEFINED) S->node_rank[r] = -1;
    hy_free(in);
  }
  S->node = node;
  /* one node for all: the same on every rank */
  int one = node != MPI_COMM_NULL && nn == S->size;
  if (MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
    hy_die("%s: MPI_Allreduce failed", what);
  S->all = one;
  return S;
}

void hy_shm_free(struct hy_shm *S) {
  if (!S) return;
  if (S->win != MPI_WIN_NULL && (MPI_Win_unlock_all(S->win) != MPI_SUCCESS || MPI_Win_free(&S->win) != MPI_SUCCESS))
    hy_die("%s: freeing the shared-memory window failed", S->what);
  if (S->node != MPI_COMM_NULL && MPI_Comm_free(&S->node) != MPI_SUCCESS) hy_die("%s: MPI_Comm_free failed", S->what);
  hy_free(S->node_rank);
  hy_free(S->peer);
  hy_free(S);
}

int hy_shm_node_ranks(const struct hy_shm *S) {
  int n = 0;
  if (S->node != MPI_COMM_NULL && MPI_Comm_size(S->node, &n) != MPI_SUCCESS) n = 0;
  return n;
}

int hy_shm_peer(const struct hy_shm *S, int r) {
  return S->node != MPI_COMM_NULL && r != S->rank && S->node_rank[r] >= 0;
}

int hy_shm_all(const struct hy_shm *S) { return S->all; }

int hy_shm_reserve(struct hy_shm *S, uint64_t need, uint64_t want, struct hy_err *err) {
  if (S->node == MPI_COMM_NULL) return 0;
  uint64_t loc[2] = {need, want > need ? want : need}, mx[2] = {0, 0};
  int rc = MPI_Allreduce(loc, mx, 2, MPI_UINT64_T, MPI_MAX, S->node);
  if (check(S, rc, "MPI_Allreduce of the node's shared-memory sizes", err)) return -1;
  S->half = (size_t)(S->n_xchg++ & 1u);
  if (S->win != MPI_WIN_NULL && mx[0] <= S->cap) return 0;
  const double t0 = hy_trace_t();
  if (S->win != MPI_WIN_NULL) {
    rc = MPI_Win_unlock_all(S->win);
    if (rc == MPI_SUCCESS) rc = MPI_Win_free(&S->win);
    if (check(S, rc, "freeing the shared-memory window", err)) return -1;
    S->win = MPI_WIN_NULL;
  }
  /* a whole number of 64-byte lines, so that the second half is aligned
   * for any element type */
  uint64_t cap = mx[1] > 0 ? mx[1] : 1;
  if (cap > UINT64_MAX - 63) return hy_err_set(err, "%s: %llu bytes do not fit a shared-memory window", S->what,
                                               (unsigned long long)cap);
  cap = (cap + 63) / 64 * 64;
  if (cap > (uint64_t)(SIZE_MAX / 2) || 2 * cap > (uint64_t)PTRDIFF_MAX)
    return hy_err_set(err, "%s: %llu bytes do not fit a shared-memory window", S->what, (unsigned long long)cap);
  MPI_Info info;
  rc = MPI_Info_create(&info);
  if (rc == MPI_SUCCESS) rc = MPI_Info_set(info, "alloc_shared_noncontig", "true");
  unsigned char *base = NULL;
  if (rc == MPI_SUCCESS) rc = MPI_Win_allocate_shared((MPI_Aint)(2 * cap), 1, info, S->node, &base, &S->win);
  if (check(S, rc,
            "MPI_Win_allocate_shared of the node's window (NodeSharedMemory no sends everything in MPI messages "
            "instead; a container may need a larger /dev/shm)",
            err))
    return -1;
  if (check(S, MPI_Info_free(&info), "MPI_Info_free", err) ||
      check(S, MPI_Win_set_errhandler(S->win, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler", err))
    return -1;
  S->seg = base;
  S->cap = (size_t)cap;
  for (int r = 0; r < S->size; r++) {
    S->peer[r] = NULL;
    if (S->node_rank[r] < 0) continue;
    MPI_Aint sz;
    int du;
    void *ptr = NULL;
    rc = MPI_Win_shared_query(S->win, S->node_rank[r], &sz, &du, &ptr);
    if (check(S, rc, "MPI_Win_shared_query", err)) return -1;
    S->peer[r] = ptr;
  }
  if (check(S, MPI_Win_lock_all(MPI_MODE_NOCHECK, S->win), "MPI_Win_lock_all", err)) return -1;
  hy_trace(HY_TRACE_MAIN, S->phase, t0);
  return 0;
}

unsigned char *hy_shm_mine(const struct hy_shm *S) { return S->seg + S->half * S->cap; }

const unsigned char *hy_shm_theirs(const struct hy_shm *S, int r) { return S->peer[r] + S->half * S->cap; }

int hy_shm_sync(struct hy_shm *S, struct hy_err *err) {
  if (S->node == MPI_COMM_NULL) return 0;
  int rc = MPI_Win_sync(S->win);
  if (rc == MPI_SUCCESS) rc = MPI_Barrier(S->node);
  if (rc == MPI_SUCCESS) rc = MPI_Win_sync(S->win);
  return check(S, rc, "the node's shared-memory exchange", err);
}
