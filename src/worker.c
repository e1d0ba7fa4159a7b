/* SPDX-License-Identifier: GPL-3.0-or-later
 * worker.c: see worker.h. A mutex and two condition variables hand one job
 * at a time to the thread; the job's result and the busy time are read under
 * the same mutex, so the owner sees everything the job wrote once
 * hy_worker_wait returns. */
#include "config.h"

#include "worker.h"

#include <pthread.h>
#include <string.h>

#include "alloc.h"
#include "log.h"

struct hy_worker {
  int threaded;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* a job or stop is posted */
  pthread_cond_t done; /* the job finished */
  hy_worker_fn fn;
  void *arg;
  int posted;  /* a job is waiting to start or running */
  int result;
  int stop;
  double busy;
};

static void check(int rc, const char *what) {
  if (rc != 0) hy_die("device thread: %s failed: %s", what, strerror(rc));
}

static void *worker_main(void *varg) {
  struct hy_worker *w = varg;
  check(pthread_mutex_lock(&w->lock), "mutex lock");
  for (;;) {
    while (!w->stop && !w->posted) check(pthread_cond_wait(&w->wake, &w->lock), "cond wait");
    if (w->stop && !w->posted) break;
    hy_worker_fn fn = w->fn;
    void *arg = w->arg;
    check(pthread_mutex_unlock(&w->lock), "mutex unlock");
    double t0 = hy_wtime();
    int rc = fn(arg);
    double dt = hy_wtime() - t0;
    check(pthread_mutex_lock(&w->lock), "mutex lock");
    w->result = rc;
    w->busy += dt;
    w->posted = 0;
    check(pthread_cond_signal(&w->done), "cond signal");
  }
  check(pthread_mutex_unlock(&w->lock), "mutex unlock");
  return NULL;
}

struct hy_worker *hy_worker_create(int threaded) {
  struct hy_worker *w = hy_calloc("device thread", 1, sizeof *w);
  w->threaded = threaded;
  check(pthread_mutex_init(&w->lock, NULL), "mutex init");
  check(pthread_cond_init(&w->wake, NULL), "cond init");
  check(pthread_cond_init(&w->done, NULL), "cond init");
  if (threaded) check(pthread_create(&w->thread, NULL, worker_main, w), "pthread_create");
  return w;
}

void hy_worker_free(struct hy_worker *w) {
  if (!w) return;
  if (w->threaded) {
    check(pthread_mutex_lock(&w->lock), "mutex lock");
    w->stop = 1;
    check(pthread_cond_signal(&w->wake), "cond signal");
    check(pthread_mutex_unlock(&w->lock), "mutex unlock");
    check(pthread_join(w->thread, NULL), "pthread_join");
  }
  check(pthread_mutex_destroy(&w->lock), "mutex destroy");
  check(pthread_cond_destroy(&w->wake), "cond destroy");
  check(pthread_cond_destroy(&w->done), "cond destroy");
  hy_free(w);
}

void hy_worker_submit(struct hy_worker *w, hy_worker_fn fn, void *arg) {
  if (!w->threaded) {
    if (w->posted) hy_die("internal error: device thread job submitted while another is outstanding");
    double t0 = hy_wtime();
    w->result = fn(arg);
    w->busy += hy_wtime() - t0;
    w->posted = 1; /* outstanding until hy_worker_wait */
    return;
  }
  check(pthread_mutex_lock(&w->lock), "mutex lock");
  if (w->posted) hy_die("internal error: device thread job submitted while another is outstanding");
  w->fn = fn;
  w->arg = arg;
  w->posted = 1;
  check(pthread_cond_signal(&w->wake), "cond signal");
  check(pthread_mutex_unlock(&w->lock), "mutex unlock");
}

int hy_worker_wait(struct hy_worker *w) {
  if (!w->threaded) {
    int rc = w->posted ? w->result : 0;
    w->posted = 0;
    return rc;
  }
  check(pthread_mutex_lock(&w->lock), "mutex lock");
  while (w->posted) check(pthread_cond_wait(&w->done, &w->lock), "cond wait");
  int rc = w->result;
  w->result = 0;
  check(pthread_mutex_unlock(&w->lock), "mutex unlock");
  return rc;
}

double hy_worker_take_busy(struct hy_worker *w) {
  check(pthread_mutex_lock(&w->lock), "mutex lock");
  double b = w->busy;
  w->busy = 0.0;
  check(pthread_mutex_unlock(&w->lock), "mutex unlock");
  return b;
}
