/* SPDX-License-Identifier: GPL-3.0-or-later
 * tool_args.h: option values of the benchmark tools (tools/bench_*.c). */
#ifndef HY_TOOL_ARGS_H
#define HY_TOOL_ARGS_H

#include <stdio.h>
#include <stdlib.h>

/* The count in s (4194304 and 4.2e6 both accepted), at least min and at
 * most 4e9; anything else prints usage_line to stderr and exits with 2. */
static inline long tool_count(const char *s, long min, const char *usage_line) {
  char *end;
  const double v = strtod(s, &end);
  if (end == s || *end != '\0' || !(v >= (double)min && v <= 4e9)) {
    fprintf(stderr, "%s\n", usage_line);
    exit(2);
  }
  return (long)v;
}

#endif
