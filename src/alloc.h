/* SPDX-License-Identifier: GPL-3.0-or-later
 * alloc.h: checked allocation. Every allocation carries a label; failure ends
 * the run with the label and the byte count. Size arithmetic is checked. */
#ifndef HY_ALLOC_H
#define HY_ALLOC_H

#include <stddef.h>

/** a*b with overflow detection: returns 0 and sets *out, or -1 on overflow. */
int hy_size_mul(size_t a, size_t b, size_t *out);
/** a*b, ending the run with `label` on overflow. */
size_t hy_size_mul_or_die(size_t a, size_t b, const char *label);

void *hy_malloc(const char *label, size_t n, size_t size);
void *hy_calloc(const char *label, size_t n, size_t size);
void *hy_realloc(const char *label, void *p, size_t n, size_t size);
char *hy_strdup(const char *label, const char *s);
void hy_free(void *p);
/** memcpy of n bytes whose stores bypass the caches where the machine has
 *  such stores (stream.h), fenced. */
void hy_copy_stream(void *dst, const void *src, size_t n);

#endif
