/* SPDX-License-Identifier: GPL-3.0-or-later
 * params.c: the run-parameter reader. Owns the parsing of parameter files
 * (`Key  Value` lines, `%`/`#` comments, CRLF), `-P Key=Value` overrides,
 * validation of every value against the schema (src/param_schema.c), the
 * collection of every problem into one sorted report, the typed getters,
 * params-used.txt (hy_params_dump) and the `--help` parameter table. */
#include "config.h"

#include "params.h"

#include "alloc.h"
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ text buffer */

/** Growable NUL-terminated string. */
struct sbuf {
  char *s;
  size_t len, cap;
};

static void sb_reserve(struct sbuf *b, size_t extra) {
  if (extra > SIZE_MAX - b->len - 1) hy_die("params: text too long");
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  b->s = hy_realloc("params text", b->s, cap, 1);
  b->cap = cap;
}

static void sb_addn(struct sbuf *b, const char *s, size_t n) {
  sb_reserve(b, n);
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static void sb_add(struct sbuf *b, const char *s) { sb_addn(b, s, strlen(s)); }

static void sb_vprintf(struct sbuf *b, const char *fmt, va_list ap) {
  va_list aq;
  va_copy(aq, ap);
  int n = vsnprintf(NULL, 0, fmt, aq);
  va_end(aq);
  if (n < 0) hy_die("params: cannot format a message");
  sb_reserve(b, (size_t)n);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(b, fmt, ap);
  va_end(ap);
}

/** The buffer's text (an empty string when nothing was added), owned by the caller. */
static char *sb_take(struct sbuf *b) {
  if (!b->s) return hy_strdup("params text", "");
  char *s = b->s;
  b->s = NULL;
  b->len = b->cap = 0;
  return s;
}

static char *dup_n(const char *s, size_t n) {
  char *d = hy_malloc("params text", n + 1, 1);
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...) {
  struct sbuf b = {0};
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&b, fmt, ap);
  va_end(ap);
  return sb_take(&b);
}

/* ------------------------------------------------------------ error list */

/** One problem; sorted by `order` (file line, then overrides, then the file
 *  as a whole), ties kept in the order found. */
struct perr {
  long order;
  size_t seq;
  char *msg;
};

struct errlist {
  struct perr *v;
  size_t n, cap;
};

static void err_add(struct errlist *e, long order, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void err_add(struct errlist *e, long order, const char *prefix, const char *fmt, ...) {
  struct sbuf b = {0};
  sb_add(&b, prefix);
  sb_add(&b, ": ");
  va_list ap;
  va_start(ap, fmt);
  sb_vprintf(&b, fmt, ap);
  va_end(ap);
  if (e->n == e->cap) {
    e->cap = e->cap ? 2 * e->cap : 8;
    e->v = hy_realloc("params errors", e->v, e->cap, sizeof *e->v);
  }
  e->v[e->n].order = order;
  e->v[e->n].seq = e->n;
  e->v[e->n].msg = sb_take(&b);
  e->n++;
}

static int perr_cmp(const void *a, const void *b) {
  const struct perr *x = a, *y = b;
  if (x->order != y->order) return x->order < y->order ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/** Sort, join with '\n' (no final newline), free the list. */
static char *err_join(struct errlist *e) {
  qsort(e->v, e->n, sizeof *e->v, perr_cmp);
  struct sbuf b = {0};
  for (size_t i = 0; i < e->n; i++) {
    if (i) sb_add(&b, "\n");
    sb_add(&b, e->v[i].msg);
    hy_free(e->v[i].msg);
  }
  hy_free(e->v);
  e->v = NULL;
  e->n = e->cap = 0;
  return sb_take(&b);
}

static void err_free(struct errlist *e) {
  for (size_t i = 0; i < e->n; i++) hy_free(e->v[i].msg);
  hy_free(e->v);
  e->v = NULL;
  e->n = e->cap = 0;
}

/* ------------------------------------------------------------ the table */

/** Parsed value of one key. */
struct pval {
  char *text;     /**< value as given, NULL when the default is used */
  char *origin;   /**< message prefix of the place that set it: "FILE:LINE" or "-P K=V" */
  long line;      /**< file line that set it, 0 for an override or a default */
  long order;     /**< sort key of messages about this value */
  int is_auto;    /**< NUMBER_AUTO: the value is `auto` */
  int valid;      /**< the value passed validation */
  double num;     /**< NUMBER, NUMBER_AUTO (not auto) */
  long ival;      /**< INT */
  unsigned list;  /**< LIST: bit i set when choice i is listed */
  int dev_kind;   /**< DEVICE: 0 any, 1 gpu, 2 cpu, 3 explicit */
  int dev_plat;   /**< DEVICE, kind 3 */
  int dev_dev;    /**< DEVICE, kind 3 */
  int resolved;   /**< NUMBER_AUTO: hy_params_set_resolved was called */
  double res_val; /**< the resolved value */
};

struct hy_params {
  const struct hy_param_def *schema;
  size_t n;
  struct pval *v;
  char *name; /**< the parameter file's name (or the name given for a text) */
};

/* Order keys of messages: file lines use their number; overrides come after
 * every line; whole-file messages (missing keys) come last. */
#define ORDER_OVERRIDE(i) (LONG_MAX / 2 + (long)(i))
#define ORDER_FILE (LONG_MAX - 1)

static long find_key(const struct hy_param_def *s, size_t n, const char *key, size_t keylen) {
  for (size_t i = 0; i < n; i++)
    if (strlen(s[i].key) == keylen && memcmp(s[i].key, key, keylen) == 0) return (long)i;
  return -1;
}

static int lower(int c) { return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c; }

/** Case-insensitive Levenshtein distance; returns `limit + 1` when it exceeds `limit`. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb, size_t limit) {
  size_t diff = la > lb ? la - lb : lb - la;
  if (diff > limit) return limit + 1;
  size_t *row = hy_malloc("params edit distance", lb + 1, sizeof *row);
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t cost = lower((unsigned char)a[i - 1]) == lower((unsigned char)b[j - 1]) ? 0 : 1;
      size_t best = diag + cost;
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  size_t d = row[lb];
  hy_free(row);
  return d > limit ? limit + 1 : d;
}

/** The schema key closest to `word` (a case-insensitive match, or an edit
 *  distance of at most 3 that is also less than the word's length), or NULL
 *  when none is close. */
static const char *suggest_key(const struct hy_param_def *defs, size_t n, const char *word,
                               size_t wl) {
  const char *best = NULL;
  size_t bestd = 4;
  for (size_t i = 0; i < n; i++) {
    size_t d = edit_distance(word, wl, defs[i].key, strlen(defs[i].key), 3);
    if (d < bestd && (d == 0 || d < wl)) {
      bestd = d;
      best = defs[i].key;
    }
  }
  return best;
}

/** Index of `word` in the comma-separated `choices`, or -1. */
static int choice_index(const char *choices, const char *word, size_t wl) {
  int idx = 0;
  const char *p = choices;
  for (;;) {
    const char *c = strchr(p, ',');
    size_t l = c ? (size_t)(c - p) : strlen(p);
    if (l == wl && memcmp(p, word, wl) == 0) return idx;
    if (!c) return -1;
    p = c + 1;
    idx++;
  }
}

/** Case-insensitive match of `word` among `choices` (for a hint), malloc'd, or NULL. */
static char *choice_hint(const char *choices, const char *word) {
  size_t wl = strlen(word);
  const char *p = choices;
  for (;;) {
    const char *c = strchr(p, ',');
    size_t l = c ? (size_t)(c - p) : strlen(p);
    if (edit_distance(word, wl, p, l, wl > 4 ? 2 : 0) <= (wl > 4 ? 2u : 0u)) return dup_n(p, l);
    if (!c) return NULL;
    p = c + 1;
  }
}

/** "a, b, c" from "a,b,c" (malloc'd). */
static char *choices_text(const char *choices) {
  struct sbuf b = {0};
  for (const char *p = choices; *p; p++) {
    if (*p == ',')
      sb_add(&b, ", ");
    else
      sb_addn(&b, p, 1);
  }
  return sb_take(&b);
}

/** The range rule of a numeric key, e.g. "allowed: 1 to 1024", "must be > 0"
 *  (malloc'd; an empty string when unbounded). */
static char *range_text(const struct hy_param_def *d) {
  int has_min = isfinite(d->min), has_max = isfinite(d->max);
  /* integer keys' bounds in full (%g would give 1e+09) */
  const char *const v = d->type == HY_PT_INT ? "%.0f" : "%g";
  char fmt[64];
  if (has_min && has_max && !d->min_open && !d->max_open) {
    snprintf(fmt, sizeof fmt, "allowed: %s to %s", v, v);
    return str_printf(fmt, d->min, d->max);
  }
  if (has_min && has_max) {
    snprintf(fmt, sizeof fmt, "must be %%s %s and %%s %s", v, v);
    return str_printf(fmt, d->min_open ? ">" : ">=", d->min, d->max_open ? "<" : "<=", d->max);
  }
  snprintf(fmt, sizeof fmt, "must be %%s %s", v);
  if (has_min) return str_printf(fmt, d->min_open ? ">" : ">=", d->min);
  if (has_max) return str_printf(fmt, d->max_open ? "<" : "<=", d->max);
  return hy_strdup("params text", "");
}

static int in_range(const struct hy_param_def *d, double x) {
  if (isfinite(d->min) && (d->min_open ? !(x > d->min) : !(x >= d->min))) return 0;
  if (isfinite(d->max) && (d->max_open ? !(x < d->max) : !(x <= d->max))) return 0;
  return 1;
}

/** Parse a finite number that fills all of `s`: 0, or -1 when it is not a
 *  number, -2 when it is one but not finite (nan, inf, overflow). */
static int parse_number(const char *s, double *out) {
  if (!*s) return -1;
  char *end;
  errno = 0;
  double x = strtod(s, &end);
  if (end == s || *end) return -1;
  if (!isfinite(x)) return -2;
  *out = x;
  return 0;
}

/** Parse a non-negative decimal integer that fits in an int (digits only). */
static int parse_index(const char *s, size_t n, int *out) {
  if (n == 0) return -1;
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
    if (v > INT_MAX) return -1;
  }
  *out = (int)v;
  return 0;
}

/** Check `text` against definition `d`, filling the parsed fields of `v`.
 *  Returns 0, or -1 with *msg set to a malloc'd message (without the place). */
static int validate(const struct hy_param_def *d, const char *text, struct pval *v, char **msg) {
  *msg = NULL;
  v->is_auto = 0;
  switch (d->type) {
  case HY_PT_STRING:
    return 0;
  case HY_PT_NUMBER_AUTO:
    if (strcmp(text, "auto") == 0) {
      v->is_auto = 1;
      return 0;
    }
    /* fall through */
  case HY_PT_NUMBER: {
    double x;
    int rc = parse_number(text, &x);
    if (rc != 0) {
      *msg = str_printf("parameter '%s': '%s' is not a number%s%s", d->key, text,
                        d->type == HY_PT_NUMBER_AUTO ? " or auto" : "",
                        rc == -2 ? " (it must be finite)" : "");
      return -1;
    }
    if (!in_range(d, x)) {
      char *r = range_text(d);
      *msg = str_printf("parameter '%s' = %s is out of range (%s)", d->key, text, r);
      hy_free(r);
      return -1;
    }
    v->num = x;
    return 0;
  }
  case HY_PT_INT: {
    char *end;
    errno = 0;
    long x = strtol(text, &end, 10);
    if (end == text || *end) {
      double dx;
      if (parse_number(text, &dx) == 0)
        *msg = str_printf("parameter '%s': '%s' is not an integer", d->key, text);
      else
        *msg = str_printf("parameter '%s': '%s' is not a number", d->key, text);
      return -1;
    }
    if (errno == ERANGE || !in_range(d, (double)x)) {
      char *r = range_text(d);
      *msg = str_printf("parameter '%s' = %s is out of range (%s)", d->key, text, r);
      hy_free(r);
      return -1;
    }
    v->ival = x;
    v->num = (double)x;
    return 0;
  }
  case HY_PT_CHOICE: {
    if (choice_index(d->choices, text, strlen(text)) >= 0) return 0;
    char *c = choices_text(d->choices);
    char *hint = choice_hint(d->choices, text);
    *msg = str_printf("parameter '%s': '%s' is not one of %s%s%s%s", d->key, text, c,
                      hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
    hy_free(hint);
    hy_free(c);
    return -1;
  }
  case HY_PT_LIST: {
    v->list = 0;
    if (strcmp(text, "none") == 0) return 0;
    const char *p = text;
    int has_none = 0;
    for (;;) {
      const char *c = strchr(p, ',');
      size_t l = c ? (size_t)(c - p) : strlen(p);
      if (l == 0) {
        *msg = str_printf("parameter '%s': empty item in '%s'", d->key, text);
        return -1;
      }
      if (l == 4 && memcmp(p, "none", 4) == 0) {
        has_none = 1;
      } else {
        int idx = choice_index(d->choices, p, l);
        if (idx < 0) {
          char *ct = choices_text(d->choices);
          char *item = dup_n(p, l);
          char *hint = choice_hint(d->choices, item);
          *msg = str_printf("parameter '%s': '%s' is not one of %s (or none)%s%s%s", d->key, item,
                            ct, hint ? " (did you mean '" : "", hint ? hint : "",
                            hint ? "'?)" : "");
          hy_free(hint);
          hy_free(item);
          hy_free(ct);
          return -1;
        }
        if (idx >= 32) hy_die("params: too many choices for LIST key '%s'", d->key);
        if (v->list & (1u << idx)) {
          char *item = dup_n(p, l);
          *msg = str_printf("parameter '%s': '%s' is listed more than once", d->key, item);
          hy_free(item);
          return -1;
        }
        v->list |= 1u << idx;
      }
      if (!c) break;
      p = c + 1;
    }
    if (has_none) {
      *msg = str_printf("parameter '%s': 'none' cannot be combined with other items in '%s'",
                        d->key, text);
      return -1;
    }
    return 0;
  }
  case HY_PT_DEVICE: {
    v->dev_plat = v->dev_dev = -1;
    if (strcmp(text, "any") == 0) {
      v->dev_kind = 0;
      return 0;
    }
    if (strcmp(text, "gpu") == 0) {
      v->dev_kind = 1;
      return 0;
    }
    if (strcmp(text, "cpu") == 0) {
      v->dev_kind = 2;
      return 0;
    }
    const char *colon = strchr(text, ':');
    int pl, dv;
    if (colon && parse_index(text, (size_t)(colon - text), &pl) == 0 &&
        parse_index(colon + 1, strlen(colon + 1), &dv) == 0) {
      v->dev_kind = 3;
      v->dev_plat = pl;
      v->dev_dev = dv;
      return 0;
    }
    *msg = str_printf("parameter '%s': '%s' is not gpu, cpu, any or P:D (platform index P and "
                      "device index D, integers >= 0)",
                      d->key, text);
    return -1;
  }
  }
  hy_die("params: key '%s' has an unknown type %d", d->key, (int)d->type);
}

/* ------------------------------------------------------------ parsing */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/** Set key `k` to `text` from `origin` (replacing an earlier value). */
static void set_value(struct pval *v, const char *text, size_t tl, const char *origin, long line,
                      long order) {
  hy_free(v->text);
  hy_free(v->origin);
  v->text = dup_n(text, tl);
  v->origin = hy_strdup("params origin", origin);
  v->line = line;
  v->order = order;
}

/** Scan the file text: one `Key Value` per line. */
static void scan_text(struct hy_params *p, const char *name, const char *text, size_t len,
                      struct errlist *e) {
  long line = 0;
  size_t pos = 0;
  struct sbuf where = {0};
  while (pos < len) {
    line++;
    const char *ls = text + pos;
    const char *nl = memchr(ls, '\n', len - pos);
    size_t ll = nl ? (size_t)(nl - ls) : len - pos;
    pos += ll + (nl ? 1 : 0);

    where.len = 0;
    sb_printf(&where, "%s:%ld", name, line);
    if (memchr(ls, '\0', ll)) {
      err_add(e, line, where.s, "line contains a NUL byte");
      continue;
    }
    /* Cut the comment: `%` or `#` at the start of a line or after whitespace. */
    for (size_t i = 0; i < ll; i++) {
      if ((ls[i] == '%' || ls[i] == '#') && (i == 0 || is_space(ls[i - 1]))) {
        ll = i;
        break;
      }
    }
    /* Tokens: key, value, rest. */
    size_t i = 0;
    while (i < ll && is_space(ls[i])) i++;
    if (i == ll) continue; /* blank or comment-only */
    const char *key = ls + i;
    while (i < ll && !is_space(ls[i])) i++;
    size_t kl = (size_t)(ls + i - key);
    while (i < ll && is_space(ls[i])) i++;
    const char *val = ls + i;
    while (i < ll && !is_space(ls[i])) i++;
    size_t vl = (size_t)(ls + i - val);
    while (i < ll && is_space(ls[i])) i++;
    const char *rest = ls + i;
    size_t rl = ll - i;
    while (rl > 0 && is_space(rest[rl - 1])) rl--;

    long k = find_key(p->schema, p->n, key, kl);
    if (k < 0) {
      char *kk = dup_n(key, kl);
      const char *s = suggest_key(p->schema, p->n, kk, kl);
      if (s)
        err_add(e, line, where.s, "unknown parameter '%s' (did you mean '%s'?)", kk, s);
      else
        err_add(e, line, where.s, "unknown parameter '%s'", kk);
      hy_free(kk);
      continue;
    }
    struct pval *v = &p->v[k];
    const char *kname = p->schema[k].key;
    if (v->text) {
      err_add(e, line, where.s, "parameter '%s' already set at line %ld", kname, v->line);
      continue;
    }
    if (vl == 0) {
      err_add(e, line, where.s, "parameter '%s' has no value", kname);
      /* Mark it as given so that it is not also reported as missing. */
      set_value(v, "", 0, where.s, line, line);
      continue;
    }
    if (rl > 0) {
      char *r = dup_n(rest, rl);
      err_add(e, line, where.s, "unexpected text after the value of '%s': '%s'", kname, r);
      hy_free(r);
    }
    set_value(v, val, vl, where.s, line, line);
  }
  hy_free(where.s);
}

/** Apply one `Key=Value` override. */
static void apply_override(struct hy_params *p, const char *ov, int idx, struct errlist *e) {
  long order = ORDER_OVERRIDE(idx);
  if (strchr(ov, '\n')) {
    /* Such a value could not be written back into a parameter file (and the
     * message itself must stay on one line). */
    struct sbuf w = {0};
    sb_add(&w, "-P ");
    for (const char *c = ov; *c; c++) sb_add(&w, *c == '\n' ? "\\n" : (char[2]){*c, '\0'});
    err_add(e, order, w.s, "a line break cannot be part of an override");
    hy_free(w.s);
    return;
  }
  struct sbuf wb = {0}; /* not str_printf("-P %s"): gcc 12 with -fsanitize=address takes ov for NULL there */
  sb_add(&wb, "-P ");
  sb_add(&wb, ov);
  char *where = wb.s;
  const char *eq = strchr(ov, '=');
  if (!eq) {
    err_add(e, order, where, "expected Key=Value");
    hy_free(where);
    return;
  }
  const char *key = ov;
  size_t kl = (size_t)(eq - ov);
  while (kl > 0 && is_space(key[kl - 1])) kl--;
  while (kl > 0 && is_space(*key)) {
    key++;
    kl--;
  }
  long k = find_key(p->schema, p->n, key, kl);
  if (k < 0) {
    char *kk = dup_n(key, kl);
    const char *s = kl ? suggest_key(p->schema, p->n, kk, kl) : NULL;
    if (s)
      err_add(e, order, where, "unknown parameter '%s' (did you mean '%s'?)", kk, s);
    else
      err_add(e, order, where, "unknown parameter '%s'", kk);
    hy_free(kk);
    hy_free(where);
    return;
  }
  const char *kname = p->schema[k].key;
  const char *val = eq + 1;
  while (*val && is_space(*val)) val++;
  size_t vl = 0;
  while (val[vl] && !is_space(val[vl])) vl++;
  const char *rest = val + vl;
  while (*rest && is_space(*rest)) rest++;
  size_t rl = strlen(rest);
  while (rl > 0 && is_space(rest[rl - 1])) rl--;
  if (vl == 0) {
    err_add(e, order, where, "parameter '%s' has no value", kname);
    set_value(&p->v[k], "", 0, where, 0, order);
    hy_free(where);
    return;
  }
  if (rl > 0) {
    char *r = dup_n(rest, rl);
    err_add(e, order, where, "unexpected text after the value of '%s': '%s'", kname, r);
    hy_free(r);
  }
  if (val[0] == '%' || val[0] == '#') {
    /* Such a value could not be written back into a parameter file. */
    err_add(e, order, where, "the value of '%s' cannot start with '%c' (a comment in a parameter file)",
            kname, val[0]);
  }
  set_value(&p->v[k], val, vl, where, 0, order);
  hy_free(where);
}

static struct hy_params *params_new(void) {
  struct hy_params *p = hy_calloc("params", 1, sizeof *p);
  p->schema = hy_params_schema(&p->n);
  p->v = hy_calloc("params values", p->n, sizeof *p->v);
  return p;
}

/** The common parser: `text` of `len` bytes (may hold NUL bytes, which are errors). */
static struct hy_params *parse_buffer(const char *name, const char *text, size_t len,
                                      char *const *overrides, int n_overrides, char **errors) {
  struct hy_params *p = params_new();
  p->name = hy_strdup("params name", name);
  struct errlist e = {0};
  scan_text(p, name, text, len, &e);
  for (int i = 0; i < n_overrides; i++) apply_override(p, overrides[i], i, &e);

  for (size_t k = 0; k < p->n; k++) {
    const struct hy_param_def *d = &p->schema[k];
    struct pval *v = &p->v[k];
    char *msg;
    if (!v->text) {
      if (!d->def) {
        err_add(&e, ORDER_FILE, name, "missing required parameter '%s'", d->key);
        continue;
      }
      if (validate(d, d->def, v, &msg) != 0)
        hy_die("params: the default of '%s' is invalid: %s", d->key, msg);
      v->valid = 1;
      continue;
    }
    if (!v->text[0]) continue; /* "has no value", already reported */
    if (validate(d, v->text, v, &msg) != 0) {
      err_add(&e, v->order, v->origin, "%s", msg);
      hy_free(msg);
      continue;
    }
    v->valid = 1;
  }

  /* Cross-check: R2 > R1 when both are numbers. */
  long k1 = find_key(p->schema, p->n, "R1", 2), k2 = find_key(p->schema, p->n, "R2", 2);
  if (k1 >= 0 && k2 >= 0) {
    const struct pval *r1 = &p->v[k1], *r2 = &p->v[k2];
    if (r1->valid && r2->valid && !r1->is_auto && !r2->is_auto && !(r2->num > r1->num)) {
      const char *t1 = r1->text ? r1->text : p->schema[k1].def;
      const char *t2 = r2->text ? r2->text : p->schema[k2].def;
      err_add(&e, r2->text ? r2->order : ORDER_FILE, r2->text ? r2->origin : name,
              "R2 = %s must be larger than R1 = %s", t2, t1);
    }
  }

  if (e.n) {
    if (errors)
      *errors = err_join(&e);
    else
      err_free(&e);
    hy_params_free(p);
    return NULL;
  }
  if (errors) *errors = NULL;
  return p;
}

struct hy_params *hy_params_parse_text(const char *name, const char *text, char *const *overrides,
                                       int n_overrides, char **errors) {
  return parse_buffer(name, text, strlen(text), overrides, n_overrides, errors);
}

struct hy_params *hy_params_parse_buffer(const char *name, const char *text, size_t len,
                                         char *const *overrides, int n_overrides, char **errors) {
  return parse_buffer(name, len ? text : "", len, overrides, n_overrides, errors);
}

struct hy_params *hy_params_parse_file(const char *path, char *const *overrides, int n_overrides,
                                       char **errors) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    char *msg = str_printf("%s: cannot open: %s", path, strerror(errno));
    if (errors)
      *errors = msg;
    else
      hy_free(msg);
    return NULL;
  }
  struct sbuf b = {0};
  char chunk[65536];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) sb_addn(&b, chunk, got);
  int bad = ferror(f);
  int err = errno;
  fclose(f);
  if (bad) {
    hy_free(b.s);
    char *msg = str_printf("%s: cannot read: %s", path, strerror(err));
    if (errors)
      *errors = msg;
    else
      hy_free(msg);
    return NULL;
  }
  struct hy_params *p =
      parse_buffer(path, b.s ? b.s : "", b.len, overrides, n_overrides, errors);
  hy_free(b.s);
  return p;
}

/* ------------------------------------------------------------ getters */

static size_t key_index(const struct hy_params *p, const char *key) {
  if (!p) hy_die("params: no parameter table (looking up '%s')", key);
  long k = find_key(p->schema, p->n, key, strlen(key));
  if (k < 0) hy_die("params: unknown parameter '%s' requested", key);
  return (size_t)k;
}

const char *hy_params_where(const struct hy_params *p, const char *key) {
  long k = find_key(p->schema, p->n, key, strlen(key));
  if (k < 0) hy_die("params: unknown key '%s'", key);
  return p->v[k].origin ? p->v[k].origin : p->name;
}

const char *hy_params_get_str(const struct hy_params *p, const char *key) {
  size_t k = key_index(p, key);
  return p->v[k].text ? p->v[k].text : p->schema[k].def;
}

double hy_params_get_number(const struct hy_params *p, const char *key) {
  size_t k = key_index(p, key);
  const struct hy_param_def *d = &p->schema[k];
  const struct pval *v = &p->v[k];
  if (d->type != HY_PT_NUMBER && d->type != HY_PT_NUMBER_AUTO)
    hy_die("params: parameter '%s' is not a NUMBER key", key);
  if (v->is_auto) {
    if (!v->resolved) hy_die("params: parameter '%s' is auto and has not been resolved", key);
    return v->res_val;
  }
  return v->num;
}

long hy_params_get_int(const struct hy_params *p, const char *key) {
  size_t k = key_index(p, key);
  if (p->schema[k].type != HY_PT_INT) hy_die("params: parameter '%s' is not an integer", key);
  return p->v[k].ival;
}

int hy_params_is_auto(const struct hy_params *p, const char *key) {
  size_t k = key_index(p, key);
  return p->schema[k].type == HY_PT_NUMBER_AUTO && p->v[k].is_auto;
}

int hy_params_is_default(const struct hy_params *p, const char *key) {
  size_t k = key_index(p, key);
  return p->v[k].text == NULL;
}

int hy_params_list_has(const struct hy_params *p, const char *key, const char *item) {
  size_t k = key_index(p, key);
  const struct hy_param_def *d = &p->schema[k];
  if (d->type != HY_PT_LIST) hy_die("params: parameter '%s' is not a list", key);
  int idx = choice_index(d->choices, item, strlen(item));
  if (idx < 0) hy_die("params: '%s' is not an item of parameter '%s'", item, key);
  return (p->v[k].list >> idx) & 1u;
}

void hy_params_get_device(const struct hy_params *p, int *kind, int *platform, int *device) {
  size_t k = key_index(p, "OpenCLDevice");
  if (p->schema[k].type != HY_PT_DEVICE) hy_die("params: OpenCLDevice is not a device key");
  const struct pval *v = &p->v[k];
  if (kind) *kind = v->dev_kind;
  if (platform) *platform = v->dev_kind == 3 ? v->dev_plat : -1;
  if (device) *device = v->dev_kind == 3 ? v->dev_dev : -1;
}

void hy_params_set_resolved(struct hy_params *p, const char *key, double value) {
  size_t k = key_index(p, key);
  if (p->schema[k].type != HY_PT_NUMBER_AUTO || !p->v[k].is_auto)
    hy_die("params: parameter '%s' is not auto and cannot be resolved", key);
  if (!isfinite(value)) hy_die("params: resolved value of '%s' is not finite", key);
  p->v[k].resolved = 1;
  p->v[k].res_val = value;
}

/* ------------------------------------------------------------ output */

/** Widest value column in params-used.txt; longer values push their comment right. */
#define DUMP_VALUE_COLUMN 24

char *hy_params_dump(const struct hy_params *p) {
  if (!p) hy_die("params: no parameter table to dump");
  size_t kw = 0, vw = 0;
  for (size_t k = 0; k < p->n; k++) {
    size_t l = strlen(p->schema[k].key);
    if (l > kw) kw = l;
    l = strlen(hy_params_get_str(p, p->schema[k].key));
    if (l > vw && l <= DUMP_VALUE_COLUMN) vw = l;
  }
  struct sbuf b = {0};
  sb_printf(&b, "%% hytree %s: parameters used\n", PACKAGE_VERSION);
  for (size_t k = 0; k < p->n; k++) {
    const struct pval *v = &p->v[k];
    const char *val = hy_params_get_str(p, p->schema[k].key);
    int dflt = v->text == NULL;
    int res = v->is_auto && v->resolved;
    sb_printf(&b, "%-*s  %s", (int)kw, p->schema[k].key, val);
    if (dflt || res) {
      size_t l = strlen(val);
      for (size_t i = l; i < vw; i++) sb_add(&b, " ");
      if (res)
        sb_printf(&b, "  %% auto -> %.9g%s", v->res_val, dflt ? " (default)" : "");
      else
        sb_add(&b, "  % default");
    }
    sb_add(&b, "\n");
  }
  return sb_take(&b);
}

/** v in the fewest significant digits that read back as exactly v. */
static void format_exact(char *buf, size_t size, double v) {
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, size, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

char *hy_params_dump_used(const struct hy_params *p) {
  if (!p) hy_die("params: no parameter table to dump");
  struct sbuf b = {0};
  char num[32];
  for (size_t k = 0; k < p->n; k++) {
    const struct pval *v = &p->v[k];
    const char *val = hy_params_get_str(p, p->schema[k].key);
    if (v->is_auto && v->resolved) {
      format_exact(num, sizeof num, v->res_val);
      val = num;
    }
    sb_printf(&b, "%s  %s\n", p->schema[k].key, val);
  }
  return sb_take(&b);
}

/** The rule column of the help table (malloc'd). */
static char *rule_text(const struct hy_param_def *d) {
  switch (d->type) {
  case HY_PT_STRING:
    return hy_strdup("params text", "text");
  case HY_PT_INT: {
    char *r = range_text(d);
    char *s = str_printf("integer, %s", r);
    hy_free(r);
    return s;
  }
  case HY_PT_NUMBER:
  case HY_PT_NUMBER_AUTO: {
    char *r = range_text(d);
    char *s = str_printf("number%s%s%s", *r ? ", " : "", r,
                         d->type == HY_PT_NUMBER_AUTO ? ", or auto" : "");
    hy_free(r);
    return s;
  }
  case HY_PT_CHOICE: {
    char *c = choices_text(d->choices);
    char *s = str_printf("one of %s", c);
    hy_free(c);
    return s;
  }
  case HY_PT_LIST: {
    char *c = choices_text(d->choices);
    char *s = str_printf("comma list of %s (no repeats), or none", c);
    hy_free(c);
    return s;
  }
  case HY_PT_DEVICE:
    return hy_strdup("params text", "gpu, cpu, any, or P:D (indices >= 0)");
  }
  return hy_strdup("params text", "");
}

void hy_params_print_help(FILE *out) {
  size_t n;
  const struct hy_param_def *s = hy_params_schema(&n);
  size_t kw = 0, dw = 0;
  for (size_t k = 0; k < n; k++) {
    size_t l = strlen(s[k].key);
    if (l > kw) kw = l;
    l = s[k].def ? strlen(s[k].def) : strlen("(required)");
    if (l > dw) dw = l;
  }
  for (size_t k = 0; k < n; k++) {
    char *r = rule_text(&s[k]);
    fprintf(out, "  %-*s  %-*s  %s\n", (int)kw, s[k].key, (int)dw,
            s[k].def ? s[k].def : "(required)", r);
    hy_free(r);
    if (s[k].unit && *s[k].unit)
      fprintf(out, "      %s [%s]\n", s[k].doc, s[k].unit);
    else
      fprintf(out, "      %s\n", s[k].doc);
  }
}

void hy_params_free(struct hy_params *p) {
  if (!p) return;
  for (size_t k = 0; k < p->n; k++) {
    hy_free(p->v[k].text);
    hy_free(p->v[k].origin);
  }
  hy_free(p->v);
  hy_free(p->name);
  hy_free(p);
}
