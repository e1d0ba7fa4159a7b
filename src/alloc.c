/* SPDX-License-Identifier: GPL-3.0-or-later
 * alloc.c: see alloc.h. */
#include "config.h"

#include "alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "stream.h"

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

void *hy_malloc(const char *label, size_t n, size_t size) {
  size_t bytes = hy_size_mul_or_die(n, size, label);
  if (bytes == 0) bytes = 1;
  void *p = malloc(bytes);
  if (!p) hy_die("%s: cannot allocate %zu bytes", label, bytes);
  return p;
}

void *hy_calloc(const char *label, size_t n, size_t size) {
  size_t bytes = hy_size_mul_or_die(n, size, label);
  void *p = calloc(bytes ? n : 1, bytes ? size : 1);
  if (!p) hy_die("%s: cannot allocate %zu bytes", label, bytes);
  return p;
}

void *hy_realloc(const char *label, void *p, size_t n, size_t size) {
  size_t bytes = hy_size_mul_or_die(n, size, label);
  if (bytes == 0) bytes = 1;
  void *q = realloc(p, bytes);
  if (!q) hy_die("%s: cannot allocate %zu bytes", label, bytes);
  return q;
}

char *hy_strdup(const char *label, const char *s) {
  size_t len = strlen(s) + 1;
  char *d = hy_malloc(label, len, 1);
  memcpy(d, s, len);
  return d;
}

void hy_free(void *p) { free(p); }

void hy_copy_stream(void *dst, const void *src, size_t n) {
#if HY_HAVE_STREAM
  if (n >= 256) {
    unsigned char *d = dst;
    const unsigned char *s = src;
    const size_t head = (16 - ((uintptr_t)d & 15)) & 15; /* to the destination's 16-byte boundary */
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
      const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
      const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
      const __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
      const __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
      _mm_stream_si128((__m128i *)(void *)d, a);
      _mm_stream_si128((__m128i *)(void *)(d + 16), b);
      _mm_stream_si128((__m128i *)(void *)(d + 32), c);
      _mm_stream_si128((__m128i *)(void *)(d + 48), e);
    }
    for (; n >= 16; n -= 16, d += 16, s += 16)
      _mm_stream_si128((__m128i *)(void *)d, _mm_loadu_si128((const __m128i *)(const void *)s));
    memcpy(d, s, n);
    hy_stream_fence();
    return;
  }
#endif
  memcpy(dst, src, n);
}
