/* SPDX-License-Identifier: GPL-3.0-or-later
 * ic_plummer.c: built-in initial-condition generators. Owns the Plummer
 * sphere sampler (Aarseth, Henon & Wielen 1974) in Henon units and the
 * parser of "plummer:N[:seed]" generator strings. Random numbers come from
 * GSL's MT19937 so that a given (n, seed) always gives the same particles.
 * Knows nothing of files or devices. */
#include "config.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_rng.h>

#include "ic.h"

/* hy_pi is not part of C11 or of POSIX without XSI. */
static const double hy_pi = 3.14159265358979323846;

/* Isotropic unit vector scaled by len. */
static void iso_vec(gsl_rng *rng, double len, double out[3]) {
  double z = 2.0 * gsl_rng_uniform(rng) - 1.0;
  double phi = 2.0 * hy_pi * gsl_rng_uniform(rng);
  double s = sqrt(1.0 - z * z);
  out[0] = len * s * cos(phi);
  out[1] = len * s * sin(phi);
  out[2] = len * z;
}

int hy_ic_plummer(size_t n, uint64_t seed, struct hy_part *p, struct hy_err *err) {
  if (n == 0) return hy_err_set(err, "plummer: the number of particles must be positive");
  gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
  if (!rng) return hy_err_set(err, "plummer: cannot allocate the GSL random number generator");
  /* MT19937 takes an unsigned long seed; fold the upper half in on 32-bit longs. */
  gsl_rng_set(rng, (unsigned long)(seed ^ (sizeof(unsigned long) < 8 ? seed >> 32 : 0)));

  /* Henon units: G = M = 1, E = -1/4 gives Plummer scale a = 3 pi / 16.
   * Sampling is done in Plummer units (a = 1, v_esc = sqrt(2) (1+r^2)^-1/4)
   * and scaled: r *= a, v /= sqrt(a). */
  const double a = 3.0 * hy_pi / 16.0, vscale = 1.0 / sqrt(a);
  hy_part_resize(p, n);
  const double m = 1.0 / (double)n;
  double cm[3] = {0, 0, 0}, cv[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    /* X in (0, 0.999]: gsl_rng_uniform is in [0, 1). */
    double x = 0.999 * (1.0 - gsl_rng_uniform(rng));
    double r = 1.0 / sqrt(pow(x, -2.0 / 3.0) - 1.0);
    iso_vec(rng, r * a, p->pos + 3 * i);
    /* von Neumann rejection for g(q) = q^2 (1 - q^2)^{7/2} <= 0.1 on [0, 1]. */
    double q, y;
    do {
      q = gsl_rng_uniform(rng);
      y = 0.1 * gsl_rng_uniform(rng);
    } while (y > q * q * pow(1.0 - q * q, 3.5));
    double v = q * sqrt(2.0) * pow(1.0 + r * r, -0.25);
    iso_vec(rng, v * vscale, p->vel + 3 * i);
    p->mass[i] = m;
    p->id[i] = (uint64_t)i + 1;
    p->type[i] = 1;
    for (int c = 0; c < 3; c++) {
      cm[c] += m * p->pos[3 * i + c];
      cv[c] += m * p->vel[3 * i + c];
    }
  }
  gsl_rng_free(rng);
  for (size_t i = 0; i < n; i++)
    for (int c = 0; c < 3; c++) {
      p->pos[3 * i + c] -= cm[c];
      p->vel[3 * i + c] -= cv[c];
    }
  return 0;
}

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

int hy_ic_parse_spec(const char *spec, size_t *n, uint64_t *seed, struct hy_err *err) {
  static const char prefix[] = "plummer:";
  if (!spec || strncmp(spec, prefix, sizeof prefix - 1) != 0) return 0;
  const char *s = spec + sizeof prefix - 1;
  const char *colon = strchr(s, ':');
  const char *nend = colon ? colon : s + strlen(s);
  uint64_t nv, sv = 1;
  int rc = parse_u64(s, nend, &nv);
  if (rc == -2)
    return hy_err_set(err, "\"%s\": particle number is too large", spec);
  if (rc != 0)
    return hy_err_set(err, "\"%s\": expected plummer:N[:seed] with N a positive integer", spec);
  if (nv == 0) return hy_err_set(err, "\"%s\": particle number must be positive", spec);
  if (nv > SIZE_MAX / 128) return hy_err_set(err, "\"%s\": particle number is too large", spec);
  if (colon) {
    rc = parse_u64(colon + 1, colon + 1 + strlen(colon + 1), &sv);
    if (rc == -2) return hy_err_set(err, "\"%s\": seed does not fit 64 bits", spec);
    if (rc != 0)
      return hy_err_set(err, "\"%s\": seed must be a non-negative integer (plummer:N[:seed])",
                        spec);
  }
  *n = (size_t)nv;
  *seed = sv;
  return 1;
}
