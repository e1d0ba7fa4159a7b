/* SPDX-License-Identifier: GPL-3.0-or-later
 * ic_common.c: what the initial-condition generators share: the random
 * number generator (GSL MT19937), isotropic directions, the speed sampler for
 * isotropic distribution functions, the final scaling and centre-of-mass
 * shift, the model names and the parser of generator strings
 * ("king:N[:seed[:W0]]" ...) with its one-line error messages. The models
 * themselves live in ic_plummer.c, ic_hernquist.c, ic_king.c, ic_uniform.c.
 * Knows nothing of files or devices. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ic.h"
#include "ic_internal.h"

gsl_rng *hy_ic_rng(uint64_t seed) {
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  if (!rng) return NULL;
  /* MT19937 takes an unsigned long seed; fold the upper half in on 32-bit longs. */
  gsl_rng_set(rng, (unsigned long)(seed ^ (sizeof(unsigned long) < 8 ? seed >> 32 : 0)));
  return rng;
}

void hy_ic_iso_vec(gsl_rng *rng, double len, double out[3]) {
  double z = 2.0 * gsl_rng_uniform(rng) - 1.0;
  double phi = 2.0 * HY_IC_PI * gsl_rng_uniform(rng);
  double s = sqrt(1.0 - z * z);
  out[0] = len * s * cos(phi);
  out[1] = len * s * sin(phi);
  out[2] = len * z;
}

/* Bins of the envelope in hy_ic_draw_speed. */
#define HY_IC_VBINS 32

double hy_ic_draw_speed(gsl_rng *rng, double psi, hy_ic_df_fn f, const void *ctx) {
  if (!(psi > 0.0)) return 0.0;
  const double vmax = sqrt(2.0 * psi), dv = vmax / HY_IC_VBINS;
  double cum[HY_IC_VBINS], bound[HY_IC_VBINS], total = 0.0;
  for (int k = 0; k < HY_IC_VBINS; k++) {
    double vlo = k * dv, vhi = (k + 1) * dv;
    double b = vhi * vhi * f(psi - 0.5 * vlo * vlo, ctx);
    bound[k] = b > 0.0 ? b : 0.0;
    total += bound[k];
    cum[k] = total;
  }
  if (!(total > 0.0)) return 0.0;
  for (;;) {
    double u = total * gsl_rng_uniform(rng);
    int k = 0;
    while (k < HY_IC_VBINS - 1 && cum[k] <= u) k++;
    if (bound[k] <= 0.0) continue;
    double v = (k + gsl_rng_uniform(rng)) * dv;
    double e = psi - 0.5 * v * v;
    double g = e > 0.0 ? v * v * f(e, ctx) : 0.0;
    if (gsl_rng_uniform(rng) * bound[k] < g) return v;
  }
}

void hy_ic_finish(struct hy_part *p, double rscale, double vscale) {
  const size_t n = p->n;
  const double m = 1.0 / (double)n;
  double cm[3] = {0, 0, 0}, cv[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    p->mass[i] = m;
    p->id[i] = (uint64_t)i + 1;
    p->type[i] = 1;
    for (int c = 0; c < 3; c++) {
      p->pos[3 * i + c] *= rscale;
      p->vel[3 * i + c] *= vscale;
      cm[c] += m * p->pos[3 * i + c];
      cv[c] += m * p->vel[3 * i + c];
    }
  }
  for (size_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) {
      p->pos[3 * i + c] -= cm[c];
      p->vel[3 * i + c] -= cv[c];
    }
}

/* ------------------------------------------------------------ names */

static const char *const model_names[] = {NULL, "plummer", "hernquist", "king", "uniform"};
#define N_MODELS ((int)(sizeof model_names / sizeof model_names[0]))

const char *hy_ic_model_name(enum hy_ic_model m) {
  return (int)m > 0 && (int)m < N_MODELS ? model_names[m] : "?";
}

/* Model from the first len characters of name. */
static int model_lookup(const char *name, size_t len, enum hy_ic_model *m) {
  for (int k = 1; k < N_MODELS; k++)
    if (strlen(model_names[k]) == len && strncmp(name, model_names[k], len) == 0) {
      *m = (enum hy_ic_model)k;
      return 0;
    }
  return -1;
}

int hy_ic_model_parse(const char *name, enum hy_ic_model *m) {
  return name ? model_lookup(name, strlen(name), m) : -1;
}

int hy_ic_check_param(enum hy_ic_model m, double param, struct hy_err *err) {
  if (m == HY_IC_KING && !(param > 0.0 && param <= HY_IC_KING_W0_MAX))
    return hy_err_set(err, "king: W0 = %g is out of range (0, %g]", param, HY_IC_KING_W0_MAX);
  if (m == HY_IC_UNIFORM && !(param >= 0.0 && isfinite(param)))
    return hy_err_set(err, "uniform: virial ratio Q = %g must be finite and >= 0", param);
  return 0;
}

/* ------------------------------------------------------------ parser */

/* Strict unsigned decimal: digits only, no sign, no overflow. */
static int parse_u64(const char *s, const char *end, uint64_t *out) {
  if (s == end) return -1;
  uint64_t v = 0;
  for (const char *c = s; c < end; c++) {
    if (*c < '0' || *c > '9') return -1;
    unsigned d = (unsigned)(*c - '0');
    if (v > (UINT64_MAX - d) / 10) return -2;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

/* Finite decimal number filling [s, end) exactly. */
static int parse_real(const char *s, const char *end, double *out) {
  char buf[64];
  size_t len = (size_t)(end - s);
  if (len == 0 || len >= sizeof buf || isspace((unsigned char)*s)) return -1;
  memcpy(buf, s, len);
  buf[len] = '\0';
  char *e;
  errno = 0;
  double v = strtod(buf, &e);
  if (*e != '\0' || errno == ERANGE || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

int hy_ic_parse_spec(const char *spec, struct hy_ic_spec *out, struct hy_err *err) {
  if (!spec) return 0;
  const char *colon = strchr(spec, ':');
  enum hy_ic_model m;
  if (!colon || model_lookup(spec, (size_t)(colon - spec), &m) != 0) return 0;
  const char *form = m == HY_IC_KING      ? "king:N[:seed[:W0]]"
                     : m == HY_IC_UNIFORM ? "uniform:N[:seed[:Q]]"
                     : m == HY_IC_PLUMMER ? "plummer:N[:seed]"
                                          : "hernquist:N[:seed]";
  /* fields: N, seed, parameter (king and uniform only) */
  const char *f[3] = {NULL, NULL, NULL}, *fend[3] = {NULL, NULL, NULL};
  const int nf = m == HY_IC_KING || m == HY_IC_UNIFORM ? 3 : 2;
  const char *s = colon + 1;
  for (int k = 0;; k++) {
    const char *c = strchr(s, ':');
    const char *e = c ? c : s + strlen(s);
    if (k == nf)
      return hy_err_set(err, "\"%s\": unexpected \"%s\" after the %s (%s)", spec, s,
                        k == 2 ? "seed" : (m == HY_IC_KING ? "W0" : "Q"), form);
    f[k] = s;
    fend[k] = e;
    if (!c) break;
    s = c + 1;
  }
  struct hy_ic_spec r = {m, 0, 1, 0.0};
  if (m == HY_IC_KING) r.param = HY_IC_KING_W0_DEFAULT;
  if (m == HY_IC_UNIFORM) r.param = HY_IC_UNIFORM_Q_DEFAULT;
  uint64_t nv;
  int len0 = (int)(fend[0] - f[0]);
  int rc = parse_u64(f[0], fend[0], &nv);
  if (rc == -2) return hy_err_set(err, "\"%s\": particle number \"%.*s\" is too large", spec, len0, f[0]);
  if (rc != 0)
    return hy_err_set(err, "\"%s\": particle number \"%.*s\": expected %s with N a positive integer", spec,
                      len0, f[0], form);
  if (nv == 0) return hy_err_set(err, "\"%s\": particle number must be positive, got \"0\"", spec);
  if (nv > SIZE_MAX / 128) return hy_err_set(err, "\"%s\": particle number \"%.*s\" is too large", spec, len0, f[0]);
  r.n = (size_t)nv;
  if (f[1]) {
    int len1 = (int)(fend[1] - f[1]);
    rc = parse_u64(f[1], fend[1], &r.seed);
    if (rc == -2) return hy_err_set(err, "\"%s\": seed \"%.*s\" does not fit 64 bits", spec, len1, f[1]);
    if (rc != 0)
      return hy_err_set(err, "\"%s\": seed \"%.*s\" must be a non-negative integer (%s)", spec, len1, f[1], form);
  }
  if (f[2]) {
    int len2 = (int)(fend[2] - f[2]);
    const char *what = m == HY_IC_KING ? "W0" : "virial ratio Q";
    if (parse_real(f[2], fend[2], &r.param) != 0)
      return hy_err_set(err, "\"%s\": %s \"%.*s\" is not a number (%s)", spec, what, len2, f[2], form);
    if (hy_ic_check_param(m, r.param, NULL) != 0)
      return hy_err_set(err, "\"%s\": %s \"%.*s\" is out of range (%s)", spec, what, len2, f[2],
                        m == HY_IC_KING ? "0 < W0 <= 16" : "Q >= 0");
  }
  *out = r;
  return 1;
}

int hy_ic_generate(const struct hy_ic_spec *s, struct hy_part *p, struct hy_ic_info *info, struct hy_err *err) {
  switch (s->model) {
    case HY_IC_PLUMMER:
      if (hy_ic_plummer(s->n, s->seed, p, err) != 0) return -1;
      if (info) {
        const double a = 3.0 * HY_IC_PI / 16.0;
        info->scale = a;
        info->r_half = a / sqrt(pow(0.5 * 0.999, -2.0 / 3.0) - 1.0);
        info->r_max = a / sqrt(pow(0.999, -2.0 / 3.0) - 1.0);
        info->w_pot = -0.5;
      }
      return 0;
    case HY_IC_HERNQUIST:
      return hy_ic_hernquist(s->n, s->seed, p, info, err);
    case HY_IC_KING:
      return hy_ic_king(s->n, s->seed, s->param, p, info, err);
    case HY_IC_UNIFORM:
      return hy_ic_uniform(s->n, s->seed, s->param, p, info, err);
  }
  return hy_err_set(err, "unknown initial-condition model %d", (int)s->model);
}
