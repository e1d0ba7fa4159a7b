/* SPDX-License-Identifier: GPL-3.0-or-later
 * alloc.c: see alloc.h. */
#include "config.h"

#include "alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
