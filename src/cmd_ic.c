/* SPDX-License-Identifier: GPL-3.0-or-later
 * cmd_ic.c: the `hytree ic` subcommand. Owns its command line (model name,
 * -N, --seed, -o, --format, --help), the choice of output format from the
 * file name (.dat/.gadget: Gadget format 1, double precision, little endian;
 * anything else: HDF5) and its messages: usage errors return 2, runtime
 * errors 1, each reported as one "hytree: error: ..." line on stderr. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ic.h"
#include "io.h"

static void usage(FILE *f) {
  fputs("usage: hytree ic MODEL -N N [--seed S] -o FILE [--format hdf5|gadget1|gadget2]\n"
        "  models:\n"
        "    plummer   Plummer sphere in Henon units (G = M = 1, E = -1/4)\n"
        "  -N N           number of particles (> 0)\n"
        "  --seed S       random seed (default 1)\n"
        "  -o FILE        output file; .dat or .gadget: Gadget format 1, else HDF5\n"
        "  --format F     force the output format (hdf5, gadget1, gadget2)\n"
        "  -h, --help     show this help\n",
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

static int ends_with(const char *s, const char *suffix) {
  size_t ls = strlen(s), lx = strlen(suffix);
  return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

int hy_cmd_ic(int argc, char **argv) {
  const char *model = NULL, *nstr = NULL, *seedstr = NULL, *out = NULL, *fmtstr = NULL;
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
  if (strcmp(model, "plummer") != 0) return fail(2, "unknown model (known: plummer)", model);
  if (!nstr) return fail(2, "missing -N (number of particles)", NULL);
  if (!out) return fail(2, "missing -o FILE", NULL);

  uint64_t nv, seed = 1;
  if (parse_count(nstr, &nv) != 0 || nv == 0 || nv > SIZE_MAX / 128)
    return fail(2, "-N needs a positive integer", nstr);
  if (seedstr && parse_count(seedstr, &seed) != 0)
    return fail(2, "--seed needs a non-negative integer", seedstr);
  size_t n = (size_t)nv;
  struct hy_err err;

  enum hy_ic_format fmt = HY_FMT_HDF5;
  if (fmtstr) {
    if (hy_io_format_parse(fmtstr, &fmt) != 0 || fmt == HY_FMT_AUTO)
      return fail(2, "unknown --format (hdf5, gadget1, gadget2)", fmtstr);
  } else if (ends_with(out, ".dat") || ends_with(out, ".gadget")) {
    fmt = HY_FMT_GADGET1;
  }

  struct hy_part p;
  hy_part_init(&p);
  int rc = hy_ic_plummer(n, seed, &p, &err);
  if (rc == 0) {
    if (fmt == HY_FMT_HDF5) {
      struct hy_snap_info info;
      memset(&info, 0, sizeof info);
      info.units.length_cm = 1.0;
      info.units.mass_g = 1.0;
      info.units.velocity_cm_per_s = 1.0;
      info.gravity_constant = 1.0;
      rc = hy_io_write_hdf5(out, &p, &info, &err);
    } else {
      struct hy_gadget_opts o = {fmt == HY_FMT_GADGET2 ? 2 : 1, 1, 0, 1, 0};
      rc = hy_io_write_gadget(out, &p, 0.0, &o, &err);
    }
  }
  double mtot = rc == 0 ? hy_part_total_mass(&p) : 0.0;
  hy_part_free(&p);
  if (rc != 0) return fail(1, err.msg, NULL);
  printf("hytree ic: plummer N = %zu, seed = %llu, total mass = %.17g, wrote %s (%s)\n", n,
         (unsigned long long)seed, mtot, out, hy_io_format_name(fmt));
  return 0;
}
