/* SPDX-License-Identifier: GPL-3.0-or-later
 * alloc.c: see alloc.h. */
/* madvise and MADV_HUGEPAGE (not in ISO C's view of <sys/mman.h>) */
#define _DEFAULT_SOURCE
#include "config.h"

#include "alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"

int hy_size_mul(size_t a, size_t b, size_t *out) {
  if (a != 0 && b > SIZE_MAX / a) return -1;
  *out = a * b;
  return 0;
}

size_t hy_size_mul_or_die(size_t a, size_t b, const char *label) {
  size_t r;
  if (hy_size_mul(a, b, &r) != 0) hy_die("%s: size overflow (%zu x %zu)", label, a, b);
  return r;
}

/* Blocks from this size on (particle arrays, sort buffers) are offered to
 * the kernel's transparent huge pages: passes that read or write a few
 * particles in a thousand at random (the decomposition's leavers and holes)
 * then miss the TLB far less often. */
#define HY_HUGE_MIN ((size_t)16 << 20)

/* madvise(MADV_HUGEPAGE) over the whole pages of [p, p + bytes); a hint:
 * kernels without transparent huge pages refuse it (EINVAL), and the
 * memory works the same either way, so its result changes nothing. */
static void advise_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  static atomic_int want = -1; /* HYTREE_HUGEPAGES=0: no advice (comparisons) */
  int w = atomic_load(&want);
  if (w < 0) {
    const char *e = getenv("HYTREE_HUGEPAGES");
    w = !(e && strcmp(e, "0") == 0);
    atomic_store(&want, w);
  }
  if (!w || bytes < HY_HUGE_MIN) return;
  const long pg = sysconf(_SC_PAGESIZE);
  if (pg <= 0) return;
  const uintptr_t m = (uintptr_t)pg - 1, a = ((uintptr_t)p + m) & ~m, e = ((uintptr_t)p + bytes) & ~m;
  if (e > a && madvise((void *)a, e - a, MADV_HUGEPAGE) != 0) return; /* refused: small pages, as before */
#else
  (void)p;
  (void)bytes;
#endif
}

void *hy_malloc(const char *label, size_t n, size_t size) {
  size_t bytes = hy_size_mul_or_die(n, size, label);
  if (bytes == 0) bytes = 1;
  void *p = malloc(bytes);
  if (!p) hy_die("%s: cannot allocate %zu bytes", label, bytes);
  advise_huge(p, bytes);
  return p;
}

void *hy_calloc(const char *label, size_t n, size_t size) {
  size_t bytes = hy_size_mul_or_die(n, size, label);
  void *p = calloc(bytes ? n : 1, bytes ? size : 1);
  if (!p) hy_die("%s: cannot allocate %zu bytes", label, bytes);
  advise_huge(p, bytes);
  return p;
}

void *hy_realloc(const char *label, void *p, size_t n, size_t size) {
  size_t bytes = hy_size_mul_or_die(n, size, label);
  if (bytes == 0) bytes = 1;
  void *q = realloc(p, bytes);
  if (!q) hy_die("%s: cannot allocate %zu bytes", label, bytes);
  advise_huge(q, bytes);
  return q;
}

char *hy_strdup(const char *label, const char *s) {
  size_t len = strlen(s) + 1;
  char *d = hy_malloc(label, len, 1);
  memcpy(d, s, len);
  return d;
}

void hy_free(void *p) { free(p); }
