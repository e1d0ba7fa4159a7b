/* SPDX-License-Identifier: GPL-3.0-or-later
 * threads.c: see threads.h. A job is published with a generation counter
 * and the caller works on chunk 0 itself, then waits until every worker has
 * finished its chunk. Workers and the waiting caller spin for a short while
 * (HY_SPIN_NS) before they sleep on a condition variable, so that the many
 * short jobs of a step (a radix sort's passes, a tree's generations) start
 * in microseconds instead of a wake-up of every worker each. Jobs from
 * several threads take turns. */
#include "config.h"

#include "threads.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "log.h"

/* How long an idle worker, and a caller waiting for its job's end, poll
 * before sleeping: long enough to bridge the serial work between the
 * parallel loops of one phase, short enough that idle workers give the
 * cores back to the other ranks of a node soon. */
#define HY_SPIN_NS 50000L

struct hy_pool {
  int n_threads;
  pthread_t *threads;
  pthread_mutex_t use; /* one hy_pool_for at a time (callers on several threads wait their turn) */
  pthread_mutex_t lock; /* the sleepers' condition variables */
  pthread_cond_t wake;
  pthread_cond_t done;
  atomic_ulong generation; /* a new job: its fields below are written before this is raised */
  atomic_int pending;      /* workers yet to finish the current job */
  atomic_int sleepers;     /* workers asleep (or about to be) on `wake` */
  atomic_int waiting;      /* the caller asleep (or about to be) on `done` */
  atomic_int stop;
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

static long now_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 0; /* no clock: no spinning (see spin_until) */
  return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Poll until done(p, arg) holds or HY_SPIN_NS have passed; returns whether
 * it holds. */
static int spin_until(struct hy_pool *p, int (*done)(struct hy_pool *, unsigned long), unsigned long arg) {
  const long t0 = now_ns();
  for (unsigned k = 1;; k++) {
    if (done(p, arg)) return 1;
    cpu_relax();
    if ((k & 63) == 0) {
      const long t = now_ns();
      if (t == 0 || t - t0 > HY_SPIN_NS) return done(p, arg);
    }
  }
}

static int new_job(struct hy_pool *p, unsigned long seen) {
  return atomic_load(&p->generation) != seen || atomic_load(&p->stop);
}

static int job_done(struct hy_pool *p, unsigned long unused) {
  (void)unused;
  return atomic_load(&p->pending) == 0;
}

static void *worker_main(void *varg) {
  struct worker_arg *wa = varg;
  struct hy_pool *p = wa->pool;
  int tid = wa->tid;
  hy_free(wa);
  unsigned long seen = 0;
  for (;;) {
    if (!spin_until(p, new_job, seen)) {
      /* asleep until the next job: `sleepers` raised before the last look
       * at the generation, which the caller raises before it reads
       * `sleepers` (both sequentially consistent), so one of them sees the
       * other's change and no wake-up is lost */
      check_pthread(pthread_mutex_lock(&p->lock), "mutex lock");
      atomic_fetch_add(&p->sleepers, 1);
      while (!new_job(p, seen)) check_pthread(pthread_cond_wait(&p->wake, &p->lock), "cond wait");
      atomic_fetch_sub(&p->sleepers, 1);
      check_pthread(pthread_mutex_unlock(&p->lock), "mutex unlock");
    }
    if (atomic_load(&p->stop)) return NULL;
    seen = atomic_load(&p->generation);
    if (tid < p->n_chunks) run_chunk(p, tid);
    if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->waiting)) {
      check_pthread(pthread_mutex_lock(&p->lock), "mutex lock");
      check_pthread(pthread_cond_signal(&p->done), "cond signal");
      check_pthread(pthread_mutex_unlock(&p->lock), "mutex unlock");
    }
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
  atomic_init(&p->generation, 0);
  atomic_init(&p->pending, 0);
  atomic_init(&p->sleepers, 0);
  atomic_init(&p->waiting, 0);
  atomic_init(&p->stop, 0);
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
    atomic_store(&p->stop, 1);
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

/* The end of the current job: poll, then sleep on `done` (the mirror of
 * the workers' sleep: `waiting` raised before the last look at `pending`). */
static void wait_job_end(struct hy_pool *p) {
  if (spin_until(p, job_done, 0)) return;
  check_pthread(pthread_mutex_lock(&p->lock), "mutex lock");
  atomic_store(&p->waiting, 1);
  while (!job_done(p, 0)) check_pthread(pthread_cond_wait(&p->done, &p->lock), "cond wait");
  atomic_store(&p->waiting, 0);
  check_pthread(pthread_mutex_unlock(&p->lock), "mutex unlock");
}

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
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  p->n_chunks = n_chunks;
  p->chunk = (n + (size_t)n_chunks - 1) / (size_t)n_chunks;
  atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
  atomic_fetch_add(&p->generation, 1); /* publishes the fields above (sequentially consistent, as sleepers' load) */
  if (atomic_load(&p->sleepers) > 0) {
    check_pthread(pthread_mutex_lock(&p->lock), "mutex lock");
    check_pthread(pthread_cond_broadcast(&p->wake), "cond broadcast");
    check_pthread(pthread_mutex_unlock(&p->lock), "mutex unlock");
  }
  run_chunk(p, 0);
  wait_job_end(p);
  check_pthread(pthread_mutex_unlock(&p->use), "mutex unlock");
}

