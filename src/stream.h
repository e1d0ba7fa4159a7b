/* SPDX-License-Identifier: GPL-3.0-or-later
 * stream.h: stores that bypass the caches (x86-64's non-temporal stores),
 * for large buffers that the next reader takes from memory anyway: another
 * process's cores (the LET's shared-memory window) or a device's DMA (the
 * pinned buffers of uploads). A plain store leaves the line dirty in this
 * core's cache, costs a read of the line first, and makes the other core
 * fetch it from this one. Plain stores where there are no such stores.
 * After a run of them,
 * hy_stream_fence, before anyone else may read the memory. */
#ifndef HY_STREAM_H
#define HY_STREAM_H

#include <stdint.h>
#include <string.h>

#include "alloc.h"

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#define HY_HAVE_STREAM 1
#else
#define HY_HAVE_STREAM 0
#endif

/* four floats at dst (16-byte aligned) */
static inline void hy_stream_f4(float *dst, float a, float b, float c, float d) {
#if HY_HAVE_STREAM
  _mm_stream_ps(dst, _mm_set_ps(d, c, b, a));
#else
  dst[0] = a;
  dst[1] = b;
  dst[2] = c;
  dst[3] = d;
#endif
}

/* two floats from src at dst (8-byte aligned) */
static inline void hy_stream_f2(float *dst, const float *src) {
#if HY_HAVE_STREAM
  long long v;
  memcpy(&v, src, sizeof v);
  _mm_stream_si64((long long *)(void *)dst, v);
#else
  memcpy(dst, src, 2 * sizeof(float));
#endif
}

/* the streamed stores before every later store (and the barrier after them) */
static inline void hy_stream_fence(void) {
#if HY_HAVE_STREAM
  _mm_sfence();
#endif
}

#endif
