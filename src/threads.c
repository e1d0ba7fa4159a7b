/* SPDX-License-Identifier: GPL-3.0-or-later
 * threads.c: see threads.h. Workers sleep on a condition variable; a job is
 * published with a generation counter, and the caller works on chunk 0
 * itself, then waits until every worker has finished its chunk. Jobs from
 * several threads take turns. */
#include "config.h"

#include "threads.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"

struct hy_pool {
  int n_threads;
  pthread_t *threads;
  pthread_mutex_t use; /* one hy_pool_for at a time (callers on several threads wait their turn) */
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_cond_t done;
  unsigned long generation;
  int pending;
  int stop;
  /* current job */
  hy_pool_fn fn;
  void *arg;
  size_t n, chunk;
  int n_chunks;
};

struct worker_arg {
  struct hy_pool *pool;
  int tid;
};

static void check_pthread(int rc, const char *what) {
  if (rc != 0) hy_die("thread pool: %s failed: %s", what, strerror(rc));
}

/* Nonzero on a thread while it runs a chunk: a hy_pool_for from inside a
 * job runs inline. */
static _Thread_local int in_job;

static void run_chunk(struct hy_pool *p, int c) {
  size_t begin = (size_t)c * p->chunk;
  size_t end = begin + p->chunk;
  if (end > p->n) end = p->n;
  if (begin < end) {
    in_job = 1;
    p->fn(p->arg, begin, end, c);
    in_job = 0;
  }
}

static void *worker_main(void *varg) {
  struct worker_arg *wa = varg;
  struct hy_pool *p = wa->pool;
  int tid = wa->tid;
  hy_free(wa);
  unsigned long seen = 0;
  for (;;) {
    check_pthread(pthread_mutex_lock(&p->lock), "mutex lock");
    while (!p->stop && p->generation == seen) check_pthread(pthread_cond_wait(&p->wake, &p->lock), "cond wait");
    if (p->stop) {
      check_pthread(pthread_mutex_unlock(&p->lock), "mutex unlock");
      return NULL;
    }
    seen = p->generation;
    int active = tid < p->n_chunks;
    check_pthread(pthread_mutex_unlock(&p->lock), "mutex unlock");
    if (active) run_chunk(p, tid);
    check_pthread(pthread_mutex_lock(&p->lock), "mutex lock");
    if (--p->pending == 0) check_pthread(pthread_cond_signal(&p->done), "cond signal");
    check_pthread(pthread_mutex_unlock(&p->lock), "mutex unlock");
  }
}

int hy_pool_default_threads(void) {
  const char *env = getenv("HYTREE_NUM_THREADS");
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end != '\0' || v < 1 || v > 4096) hy_die("HYTREE_NUM_THREADS='%s': must be an integer between 1 and 4096", env);
    return (int)v;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > 256) n = 256;
  return (int)n;
}

struct hy_pool *hy_pool_create(int n_threads) {
  if (n_threads < 1) n_threads = 1;
  struct hy_pool *p = hy_calloc("thread pool", 1, sizeof *p);
  p->n_threads = n_threads;
  check_pthread(pthread_mutex_init(&p->use, NULL), "mutex init");
  check_pthread(pthread_mutex_init(&p->lock, NULL), "mutex init");
  check_pthread(pthread_cond_init(&p->wake, NULL), "cond init");
  check_pthread(pthread_cond_init(&p->done, NULL), "cond init");
  if (n_threads > 1) {
    p->threads = hy_calloc("thread pool", (size_t)n_threads, sizeof(pthread_t));
    for (int t = 1; t < n_threads; t++) {
      struct worker_arg *wa = hy_malloc("thread pool", 1, sizeof *wa);
      wa->pool = p;
      wa->tid = t;
      check_pthread(pthread_create(&p->threads[t], NULL, worker_main, wa), "pthread_create");
    }
  }
  return p;
}

void hy_pool_free(struct hy_pool *p) {
  if (!p) return;
  if (p->n_threads > 1) {
    check_pthread(pthread_mutex_lock(&p->lock), "mutex lock");
    p->stop = 1;
    check_pthread(pthread_cond_broadcast(&p->wake), "cond broadcast");
    check_pthread(pthread_mutex_unlock(&p->lock), "mutex unlock");
    for (int t = 1; t < p->n_threads; t++) check_pthread(pthread_join(p->threads[t], NULL), "pthread_join");
    hy_free(p->threads);
  }
  check_pthread(pthread_mutex_destroy(&p->use), "mutex destroy");
  check_pthread(pthread_mutex_destroy(&p->lock), "mutex destroy");
  check_pthread(pthread_cond_destroy(&p->wake), "cond destroy");
  check_pthread(pthread_cond_destroy(&p->done), "cond destroy");
  hy_free(p);
}

int hy_pool_size(const struct hy_pool *p) { return p->n_threads; }

void hy_pool_for(struct hy_pool *p, size_t n, size_t min_chunk, hy_pool_fn fn, void *arg) {
  if (n == 0) return;
  if (min_chunk < 1) min_chunk = 1;
  size_t max_chunks = (n + min_chunk - 1) / min_chunk;
  int n_chunks = p->n_threads;
  if ((size_t)n_chunks > max_chunks) n_chunks = (int)max_chunks;
  if (n_chunks <= 1 || in_job) {
    fn(arg, 0, n, 0);
    return;
  }
  check_pthread(pthread_mutex_lock(&p->use), "mutex lock");
  check_pthread(pthread_mutex_lock(&p->lock), "mutex lock");
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  p->n_chunks = n_chunks;
  p->chunk = (n + (size_t)n_chunks - 1) / (size_t)n_chunks;
  p->pending = p->n_threads - 1;
  p->generation++;
  check_pthread(pthread_cond_broadcast(&p->wake), "cond broadcast");
  check_pthread(pthread_mutex_unlock(&p->lock), "mutex unlock");
  run_chunk(p, 0);
  check_pthread(pthread_mutex_lock(&p->lock), "mutex lock");
  while (p->pending > 0) check_pthread(pthread_cond_wait(&p->done, &p->lock), "cond wait");
  check_pthread(pthread_mutex_unlock(&p->lock), "mutex unlock");
  check_pthread(pthread_mutex_unlock(&p->use), "mutex unlock");
}
