/* SPDX-License-Identifier: GPL-3.0-or-later
 * trace.c: see trace.h. */
#include "config.h"

#include "trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "io.h"

struct event {
  const char *name;
  double t0, t1;
  int lane;
};

/* events beyond the capacity are counted, not kept (a long run keeps its start) */
#define TRACE_CAP ((size_t)1 << 20)

static struct {
  atomic_int on;
  int rank;
  char *path;
  double t_ref; /* rank 0's clock at the start */
  struct event *ev;
  size_t n, dropped;
  pthread_mutex_t lock;
} tr = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* hy_die on this rank: its timeline up to the failure */
static void trace_on_die(void) {
  struct hy_err e;
  if (hy_trace_close(&e) != 0) fprintf(stderr, "hytree: warning: %s\n", e.msg);
}

int hy_trace_open(MPI_Comm comm, struct hy_err *err) {
  /* rank 0's HYTREE_TRACE decides for every rank (a launcher may pass the
   * environment to some ranks only) */
  if (hy_mpi_check(MPI_Comm_rank(comm, &tr.rank), "trace: MPI_Comm_rank", err)) return -1;
  const char *env = tr.rank == 0 ? getenv("HYTREE_TRACE") : NULL;
  char prefix[4096];
  int len = env && *env ? (int)strlen(env) : 0;
  if (len >= (int)sizeof prefix) return hy_err_set(err, "HYTREE_TRACE: a prefix of %d characters is too long", len);
  if (len) memcpy(prefix, env, (size_t)len);
  if (hy_mpi_check(MPI_Bcast(&len, 1, MPI_INT, 0, comm), "trace: MPI_Bcast of the prefix", err) ||
      (len > 0 && hy_mpi_check(MPI_Bcast(prefix, len, MPI_CHAR, 0, comm), "trace: MPI_Bcast of the prefix", err)))
    return -1;
  if (len == 0) return 0;
  prefix[len] = '\0';
  double t = hy_wtime();
  if (hy_mpi_check(MPI_Bcast(&t, 1, MPI_DOUBLE, 0, comm), "trace: MPI_Bcast of the start time", err)) return -1;
  size_t plen = (size_t)len + 32;
  tr.path = hy_malloc("trace file name", plen, 1);
  snprintf(tr.path, plen, "%s.%d.csv", prefix, tr.rank);
  tr.ev = malloc(TRACE_CAP * sizeof *tr.ev);
  if (!tr.ev) {
    hy_free(tr.path);
    tr.path = NULL;
    return hy_err_set(err, "trace: no memory for %zu events", TRACE_CAP);
  }
  tr.t_ref = t;
  tr.n = tr.dropped = 0;
  tr.on = 1;
  hy_log_on_die(trace_on_die);
  return 0;
}

int hy_trace_on(void) { return tr.on; }

double hy_trace_t(void) { return tr.on ? hy_wtime() : 0.0; }

void hy_trace(int lane, const char *name, double t0) {
  if (tr.on) hy_trace_span(lane, name, t0, hy_wtime());
}

void hy_trace_span(int lane, const char *name, double t0, double t1) {
  if (!tr.on) return;
  if (pthread_mutex_lock(&tr.lock) != 0) return; /* a diagnostic: a lost event is no error */
  if (tr.on) { /* not closed meanwhile */
    if (tr.n < TRACE_CAP)
      tr.ev[tr.n++] = (struct event){.name = name, .t0 = t0 - tr.t_ref, .t1 = t1 - tr.t_ref, .lane = lane};
    else
      tr.dropped++;
  }
  pthread_mutex_unlock(&tr.lock);
}

int hy_trace_close(struct hy_err *err) {
  if (!tr.on) return 0;
  hy_log_on_die(NULL);
  if (pthread_mutex_lock(&tr.lock) == 0) { /* no event is being recorded from here on */
    tr.on = 0;
    pthread_mutex_unlock(&tr.lock);
  } else {
    tr.on = 0;
  }
  int rc = 0;
  char tmp[4096];
  FILE *f = NULL;
  if (hy_io_tmpname(tr.path, tmp, sizeof tmp) != 0) {
    rc = hy_err_set(err, "trace: file name too long: %s", tr.path);
    goto out;
  }
  if (!(f = fopen(tmp, "w"))) {
    rc = hy_err_set(err, "trace: cannot create %s: %s", tmp, strerror(errno));
    goto out;
  }
  int bad = fprintf(f, "lane,phase,t0,t1\n") < 0;
  for (size_t k = 0; k < tr.n && !bad; k++)
    bad = fprintf(f, "%d,%s,%.6f,%.6f\n", tr.ev[k].lane, tr.ev[k].name, tr.ev[k].t0, tr.ev[k].t1) < 0;
  if (!bad && tr.dropped) bad = fprintf(f, "0,dropped_%zu_events,0,0\n", tr.dropped) < 0;
  if (fclose(f) != 0 || bad) {
    remove(tmp);
    rc = hy_err_set(err, "trace: cannot write %s", tmp);
    goto out;
  }
  rc = hy_io_publish(tmp, tr.path, err);
out:
  free(tr.ev);
  tr.ev = NULL;
  hy_free(tr.path);
  tr.path = NULL;
  return rc;
}
