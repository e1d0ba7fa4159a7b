/* SPDX-License-Identifier: GPL-3.0-or-later
 * cmd_ic.c: the `hytree ic` subcommand. Owns its command line (model name,
 * -N, --seed, --W0, --virial, -o, --format, --help), the choice of output format from the
 * file name (.dat/.gadget: Gadget format 1, double precision, little endian;
 * .tipsy/.std: standard big-endian tipsy; anything else: HDF5) and its messages: usage errors return 2, runtime
 * errors 1, each reported as one "hytree: error: ..." line on stderr. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ic.h"
#include "io.h"

static void usage(FILE *f) {
  fputs("usage: hytree ic MODEL -N N [--seed S] [--W0 W] [--virial Q] -o FILE\n"
        "                [--format hdf5|gadget1|gadget2|tipsy|tipsy-native]\n"
        "  Equal masses 1/N, IDs 1..N, type 1, centre-of-mass frame, Henon units\n"
        "  (G = M = 1, E = -1/4); see doc/ic.md. models:\n"
        "    plummer    Plummer sphere, truncated at mass fraction 0.999\n"
        "    hernquist  Hernquist (1990) sphere, truncated at mass fraction 0.99\n"
        "    king       King (1966) model with central potential W0 (--W0)\n"
        "    uniform    uniform-density sphere, Gaussian velocities with virial\n"
        "               ratio 2K/|W| = Q (--virial); E = -1/4 for Q < 2\n"
        "  -N N           number of particles (> 0)\n"
        "  --seed S       random seed (default 1)\n"
        "  --W0 W         king only: dimensionless central potential, 0 < W <= 16\n"
        "                 (default 6)\n"
        "  --virial Q     uniform only: virial ratio Q >= 0 (default 0.5; 0: cold)\n"
        "  -o FILE        output file; .dat or .gadget: Gadget format 1; .tipsy or\n"
        "                 .std: tipsy (big-endian, dark matter, softening 0); else HDF5\n"
        "  --format F     force the output format (hdf5, gadget1, gadget2, tipsy;\n"
        "                 tipsy-native: Bonsai's tipsy, little-endian, IDs in phi)\n"
        "  -h, --help     show this help\n"
        "  The same models are available to `hytree run` as InitCondFile\n"
        "  plummer:N[:seed], hernquist:N[:seed], king:N[:seed[:W0]], uniform:N[:seed[:Q]].\n",
        f);
}

static int fail(int status, const char *msg, const char *arg) {
  fprintf(stderr, "hytree: error: ic: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
  return status;
}

/* Strict unsigned decimal (digits only, no overflow). */
static int parse_count(const char *s, uint64_t *out) {
  uint64_t v = 0;
  if (!*s) return -1;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    unsigned d = (unsigned)(*s - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

/* Finite decimal number (the whole string). */
static int parse_real(const char *s, double *out) {
  char *e;
  errno = 0;
  double v = strtod(s, &e);
  if (!*s || *e || errno == ERANGE || !isfinite(v) || s[0] == ' ' || s[0] == '\t') return -1;
  *out = v;
  return 0;
}

static int ends_with(const char *s, const char *suffix) {
  size_t ls = strlen(s), lx = strlen(suffix);
  return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

int hy_cmd_ic(int argc, char **argv) {
  const char *model = NULL, *nstr = NULL, *seedstr = NULL, *out = NULL, *fmtstr = NULL, *w0str = NULL,
             *qstr = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    }
    const char **slot = NULL;
    if (strcmp(a, "-N") == 0)
      slot = &nstr;
    else if (strcmp(a, "--seed") == 0)
      slot = &seedstr;
    else if (strcmp(a, "-o") == 0)
      slot = &out;
    else if (strcmp(a, "--format") == 0)
      slot = &fmtstr;
    else if (strcmp(a, "--W0") == 0)
      slot = &w0str;
    else if (strcmp(a, "--virial") == 0)
      slot = &qstr;
    if (slot) {
      if (i + 1 >= argc) return fail(2, "option needs a value", a);
      *slot = argv[++i];
    } else if (a[0] == '-') {
      return fail(2, "unknown option (see hytree ic --help)", a);
    } else if (!model) {
      model = a;
    } else {
      return fail(2, "unexpected argument", a);
    }
  }
  if (!model) return fail(2, "no model given (see hytree ic --help)", NULL);
  struct hy_ic_spec gen = {HY_IC_PLUMMER, 0, 1, 0.0};
  if (hy_ic_model_parse(model, &gen.model) != 0)
    return fail(2, "unknown model (known: plummer, hernquist, king, uniform)", model);
  if (w0str && gen.model != HY_IC_KING) return fail(2, "--W0 applies only to the king model", w0str);
  if (qstr && gen.model != HY_IC_UNIFORM) return fail(2, "--virial applies only to the uniform model", qstr);
  if (!nstr) return fail(2, "missing -N (number of particles)", NULL);
  if (!out) return fail(2, "missing -o FILE", NULL);

  uint64_t nv;
  if (parse_count(nstr, &nv) != 0 || nv == 0 || nv > SIZE_MAX / 128)
    return fail(2, "-N needs a positive integer", nstr);
  if (seedstr && parse_count(seedstr, &gen.seed) != 0)
    return fail(2, "--seed needs a non-negative integer", seedstr);
  gen.n = (size_t)nv;
  if (gen.model == HY_IC_KING) {
    gen.param = HY_IC_KING_W0_DEFAULT;
    if (w0str && (parse_real(w0str, &gen.param) != 0 || hy_ic_check_param(gen.model, gen.param, NULL) != 0))
      return fail(2, "--W0 needs a number in (0, 16]", w0str);
  } else if (gen.model == HY_IC_UNIFORM) {
    gen.param = HY_IC_UNIFORM_Q_DEFAULT;
    if (qstr && (parse_real(qstr, &gen.param) != 0 || hy_ic_check_param(gen.model, gen.param, NULL) != 0))
      return fail(2, "--virial needs a number >= 0", qstr);
  }
  size_t n = gen.n;
  struct hy_err err;

  enum hy_ic_format fmt = HY_FMT_HDF5;
  const int native = fmtstr && strcmp(fmtstr, "tipsy-native") == 0; /* Bonsai's tipsy */
  if (native) {
    fmt = HY_FMT_TIPSY;
  } else if (fmtstr) {
    if (hy_io_format_parse(fmtstr, &fmt) != 0 || fmt == HY_FMT_AUTO)
      return fail(2, "unknown --format (hdf5, gadget1, gadget2, tipsy, tipsy-native)", fmtstr);
  } else if (ends_with(out, ".dat") || ends_with(out, ".gadget")) {
    fmt = HY_FMT_GADGET1;
  } else if (ends_with(out, ".tipsy") || ends_with(out, ".std")) {
    fmt = HY_FMT_TIPSY;
  }

  struct hy_part p;
  hy_part_init(&p);
  int rc = hy_ic_generate(&gen, &p, NULL, &err);
  if (rc == 0) {
    if (fmt == HY_FMT_HDF5) {
      struct hy_snap_info info;
      memset(&info, 0, sizeof info);
      info.units.length_cm = 1.0;
      info.units.mass_g = 1.0;
      info.units.velocity_cm_per_s = 1.0;
      info.gravity_constant = 1.0;
      rc = hy_io_write_hdf5(out, &p, &info, &err);
    } else if (fmt == HY_FMT_TIPSY) {
      /* the softening is the run's choice, not the model's: 0 in the file */
      rc = hy_io_write_tipsy(out, &p, 0.0, 0.0, native, &err);
    } else {
      struct hy_gadget_opts o = {fmt == HY_FMT_GADGET2 ? 2 : 1, 1, 0, 1, 0};
      rc = hy_io_write_gadget(out, &p, 0.0, &o, &err);
    }
  }
  double mtot = rc == 0 ? hy_part_total_mass(&p) : 0.0;
  hy_part_free(&p);
  if (rc != 0) return fail(1, err.msg, NULL);
  char extra[64] = "";
  if (gen.model == HY_IC_KING) snprintf(extra, sizeof extra, ", W0 = %g", gen.param);
  if (gen.model == HY_IC_UNIFORM) snprintf(extra, sizeof extra, ", Q = %g", gen.param);
  printf("hytree ic: %s N = %zu, seed = %llu%s, total mass = %.12g, wrote %s (%s)\n", hy_ic_model_name(gen.model), n,
         (unsigned long long)gen.seed, extra, mtot, out, hy_io_format_name(fmt));
  return 0;
}
