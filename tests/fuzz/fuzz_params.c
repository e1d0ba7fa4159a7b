/* SPDX-License-Identifier: GPL-3.0-or-later
 * fuzz_params.c: libFuzzer harness for the parameter-file parser
 * (hy_params_parse_buffer). The input is a parameter file; what follows a
 * line "%%OVERRIDES" (a comment for the parser) is the `-P Key=Value`
 * overrides, each ended by a NUL byte as in argv (so they may hold line
 * breaks). A rejected input must come with a non-empty error
 * text; an accepted one must answer every typed getter, and its
 * params-used.txt (hy_params_dump) must parse back into the same values.
 * A broken property calls abort(), which the fuzzer reports as a crash.
 * With HY_FUZZ_VERBOSE set in the environment (tests/fuzz_regress.sh), the
 * outcome is printed.
 * Built by tools/fuzz.sh (libFuzzer) and by make check (tests/fuzz/driver.c
 * over the seed corpus and the regression inputs). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "params.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OVERRIDES 16

static const char marker[] = "\n%%OVERRIDES\n";

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_params: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  abort();
}

/* Every getter of every key, by type; `auto` keys are resolved first. */
static void use_values(struct hy_params *p) {
  size_t n;
  const struct hy_param_def *s = hy_params_schema(&n);
  for (size_t k = 0; k < n; k++) {
    const char *key = s[k].key;
    if (!hy_params_get_str(p, key)) fail("no value text for", key);
    (void)hy_params_is_default(p, key);
    switch (s[k].type) {
    case HY_PT_NUMBER_AUTO:
      if (hy_params_is_auto(p, key)) hy_params_set_resolved(p, key, 0.5 + (double)k);
      /* fall through */
    case HY_PT_NUMBER:
      if (!isfinite(hy_params_get_number(p, key))) fail("non-finite number for", key);
      break;
    case HY_PT_INT:
      (void)hy_params_get_int(p, key);
      break;
    case HY_PT_LIST: {
      const char *c = s[k].choices;
      while (c && *c) {
        const char *e = strchr(c, ',');
        size_t l = e ? (size_t)(e - c) : strlen(c);
        char item[64];
        if (l >= sizeof item) fail("schema choice too long for", key);
        memcpy(item, c, l);
        item[l] = '\0';
        (void)hy_params_list_has(p, key, item);
        c = e ? e + 1 : c + l;
      }
      break;
    }
    case HY_PT_DEVICE: {
      int kind, plat, dev;
      hy_params_get_device(p, &kind, &plat, &dev);
      if (kind < 0 || kind > 3 || (kind == 3) != (plat >= 0 && dev >= 0))
        fail("inconsistent device for", key);
      break;
    }
    case HY_PT_STRING:
    case HY_PT_CHOICE:
      break;
    }
  }
}

/* params-used.txt parses back into the same value texts. */
static void check_round_trip(const struct hy_params *p) {
  char *dump = hy_params_dump(p);
  char *errors = NULL;
  struct hy_params *q = hy_params_parse_text("params-used.txt", dump, NULL, 0, &errors);
  if (!q) {
    fprintf(stderr, "fuzz_params: dump:\n%s\n", dump);
    fail("params-used.txt does not parse back", errors);
  }
  size_t n;
  const struct hy_param_def *s = hy_params_schema(&n);
  for (size_t k = 0; k < n; k++) {
    const char *a = hy_params_get_str(p, s[k].key), *b = hy_params_get_str(q, s[k].key);
    if (strcmp(a, b) != 0) {
      fprintf(stderr, "fuzz_params: '%s': '%s' became '%s'\n", s[k].key, a, b);
      fail("params-used.txt changes a value", s[k].key);
    }
  }
  hy_params_free(q);
  free(dump);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  size_t len = size;
  char *ovbuf = NULL;
  char *ov[MAX_OVERRIDES];
  int n_ov = 0;
  /* The marker splits the file text from the overrides. */
  for (size_t i = 0; i + sizeof marker - 1 <= size; i++) {
    if (memcmp(text + i, marker, sizeof marker - 1) != 0) continue;
    len = i + 1;
    size_t start = i + sizeof marker - 1, ol = size - start;
    ovbuf = malloc(ol + 1);
    if (!ovbuf) return 0;
    memcpy(ovbuf, text + start, ol);
    ovbuf[ol] = '\0';
    /* NUL-ended strings; the last one may lack its NUL. */
    for (size_t k = 0; k < ol && n_ov < MAX_OVERRIDES; k += strlen(ovbuf + k) + 1)
      ov[n_ov++] = ovbuf + k;
    break;
  }

  static int verbose = -1;
  if (verbose < 0) verbose = getenv("HY_FUZZ_VERBOSE") != NULL;
  char *errors = NULL;
  struct hy_params *p = hy_params_parse_buffer("fuzz.par", text, len, ov, n_ov, &errors);
  if (verbose) printf("  %s%s\n", p ? "accepted" : "rejected:\n", p ? "" : errors ? errors : "");
  if (!p) {
    if (!errors || !errors[0]) fail("rejected without an error message", NULL);
    free(errors);
  } else {
    if (errors) fail("accepted with an error message", errors);
    use_values(p);
    check_round_trip(p);
    hy_params_free(p);
  }
  free(ovbuf);
  return 0;
}
