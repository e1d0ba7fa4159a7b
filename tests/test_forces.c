/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_forces.c: accuracy of the OpenCL force kernels on the available
 * OpenCL device (pocl's CPU device in CI) against double-precision
 * references computed on the host:
 *  - device direct sum vs host double direct sum (float rounding only);
 *  - tree walk vs direct sum on a 32k Plummer sphere at the default a_err,
 *    and the error falling as a_err falls from 2^-6 to 2^-12;
 *  - a tree that opens every cell reproduces the direct sum;
 *  - hard + soft of the split walk equals the unsplit walk (same cells are
 *    accepted by construction), the cut-off hard walk equals the split hard
 *    part, and the soft-step weight equals hard + n soft;
 *  - hard and soft parts against the split direct sum;
 *  - device walk vs the host reference walk (same interactions);
 *  - the merged device build that reuses the local build's key order makes
 *    the tree of a full sort;
 *  - the hard steps' force errors do no net work (Hernquist cusp);
 *  - the device state's energy sums equal the host's to rounding;
 *  - the relative opening criterion: the monopole error bound per sink,
 *    device walk against the host reference walk, errors of order alpha,
 *    and both criteria at once making at least either one's interactions;
 *  - the double-precision reference direct sum (hy_cl_direct_ref) equals the
 *    host's double direct sum to rounding, and hytree bench's force error
 *    (hy_bench_force_error) measures a known error exactly. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bench_ref.h"
#include "cl_engine.h"
#include "diag.h"
#include "force.h"
#include "force_cpu.h"
#include "hy_shared.h"
#include "hy_test.h"
#include "ic.h"
#include "log.h"
#include "split.h"
#include "threads.h"
#include "tree.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

struct errs {
  double med, p90, p99, max;
};

/* Per-particle errors |a - ref| / |norm| (norm = ref for the relative error of
 * a force; norm = the total force for the error of a hard or soft part),
 * summarised by their median, 90th and 99th percentiles and maximum. */
static struct errs errors_vs(const double *a, const double *ref, const double *norm, size_t n) {
  double *e = hy_malloc("errors", n, sizeof(double));
  for (size_t i = 0; i < n; i++) {
    double d2 = 0, r2 = 0;
    for (int k = 0; k < 3; k++) {
      double d = a[3 * i + k] - ref[3 * i + k];
      d2 += d * d;
      r2 += norm[3 * i + k] * norm[3 * i + k];
    }
    e[i] = sqrt(d2 / r2);
  }
  qsort(e, n, sizeof(double), cmp_double);
  struct errs r = {e[n / 2], e[(size_t)(0.9 * (double)n)], e[(size_t)(0.99 * (double)n)], e[n - 1]};
  hy_free(e);
  return r;
}

static struct errs rel_errors(const double *a, const double *ref, size_t n) { return errors_vs(a, ref, ref, n); }

static void print_errs(const char *what, struct errs e) {
  printf("%-44s median %.3e  p90 %.3e  p99 %.3e  max %.3e\n", what, e.med, e.p90, e.p99, e.max);
}

static struct hy_cl *cl;
static struct hy_pool *pool;

static struct hy_force *make_force_on(double eps, double r1, double r2, double a_err, int n_ratio, int tree_build) {
  struct hy_force_cfg fc = {.G = 1.0, .eps = eps, .r1 = r1, .r2 = r2, .a_err = a_err, .n_crit = 16, .nvec = 4,
                            .n_ratio = n_ratio, .tree_build = tree_build};
  return hy_force_create(cl, pool, &fc);
}

static struct hy_force *make_force(double eps, double r1, double r2, double a_err, int n_ratio) {
  return make_force_on(eps, r1, r2, a_err, n_ratio, HY_TREE_BUILD_HOST);
}

static void plummer(size_t n, uint64_t seed, struct hy_part *p) {
  struct hy_err err;
  if (hy_ic_plummer(n, seed, p, &err) != 0) {
    fprintf(stderr, "plummer: %s\n", err.msg);
    exit(99);
  }
}

/* device direct sum vs host double direct sum */
static void test_direct(void) {
  struct hy_part p;
  hy_part_init(&p);
  plummer(4096, 7, &p);
  size_t n = p.n;
  double eps = 0.01;
  double *ref = hy_malloc("ref", 3 * n, sizeof(double)), *pref = hy_malloc("pref", n, sizeof(double));
  double *acc = hy_malloc("acc", 3 * n, sizeof(double)), *pot = hy_malloc("pot", n, sizeof(double));
  hy_cpu_direct(p.pos, p.mass, n, p.pos, n, 0, eps, 0, 0, ref, NULL, pref, pool);
  struct hy_force *f = make_force(eps, 0.1, 0.2, 1.0 / 256, 4);
  struct hy_err err;
  HY_CHECK_INT(hy_force_direct(f, &p, acc, pot, &err), 0);
  struct errs e = rel_errors(acc, ref, n);
  print_errs("device direct vs double direct (acc)", e);
  HY_CHECK_LE(e.med, 1e-5);
  HY_CHECK_LE(e.max, 1e-3);
  double *pe = hy_malloc("pe", n, sizeof(double));
  for (size_t i = 0; i < n; i++) pe[i] = fabs(pot[i] - pref[i]) / fabs(pref[i]);
  qsort(pe, n, sizeof(double), cmp_double);
  printf("%-44s median %.3e  max %.3e\n", "device direct vs double direct (pot)", pe[n / 2], pe[n - 1]);
  HY_CHECK_LE(pe[n / 2], 1e-5);
  hy_free(pe);
  hy_force_free(f);
  hy_free(ref);
  hy_free(pref);
  hy_free(acc);
  hy_free(pot);
  hy_part_free(&p);
}

/* a tree whose every cell is opened is a direct sum in a different order */
static void test_open_all(int tree_build) {
  struct hy_part p;
  hy_part_init(&p);
  plummer(2048, 3, &p);
  size_t n = p.n;
  double eps = 0.01;
  struct hy_force *f = make_force_on(eps, 0.1, 0.2, 1e-30, 4, tree_build);
  struct hy_err err;
  HY_CHECK_INT(hy_force_build(f, &p, &err), 0);
  HY_CHECK_INT(hy_force_device_built(f), tree_build == HY_TREE_BUILD_DEVICE);
  double *ref = hy_malloc("ref", 3 * n, sizeof(double)), *acc = hy_malloc("acc", 3 * n, sizeof(double));
  hy_cpu_direct(p.pos, p.mass, n, p.pos, n, 0, eps, 0, 0, ref, NULL, NULL, pool);
  HY_CHECK_INT(hy_force_walk(f, &p, HY_WALK_FULL, acc, NULL, NULL, &err), 0);
  struct hy_force_stats st;
  hy_force_stats_get(f, &st);
  HY_CHECK_INT(st.n_pc, 0);
  HY_CHECK_INT(st.n_pp, (uint64_t)n * (n - 1));
  struct errs e = rel_errors(acc, ref, n);
  print_errs(tree_build == HY_TREE_BUILD_DEVICE ? "device-built tree opening every cell vs direct"
                                                : "tree opening every cell vs direct",
             e);
  HY_CHECK_LE(e.med, 1e-5);
  hy_force_free(f);
  hy_free(ref);
  hy_free(acc);
  hy_part_free(&p);
}

static void test_tree_accuracy(void) {
  struct hy_part p;
  hy_part_init(&p);
  const size_t n = 32768;
  plummer(n, 11, &p);
  /* Watanabe & Nakasato's defaults in Henon units (r_v = 1 for the Plummer model) */
  const double eps = 0.1 * pow((double)n, -0.26), r1 = 1.03 * pow((double)n, -1.0 / 3.0), r2 = 2 * r1;
  const int n_ratio = 4;
  struct hy_err err;
  double *acc = hy_malloc("acc", 3 * n, sizeof(double)), *acc1 = hy_malloc("acc1", 3 * n, sizeof(double));
  double *acc2 = hy_malloc("acc2", 3 * n, sizeof(double)), *tmp = hy_malloc("tmp", 3 * n, sizeof(double));
  double *ref = hy_malloc("ref", 3 * n, sizeof(double)), *ref_h = hy_malloc("ref_h", 3 * n, sizeof(double));
  double *ref_s = hy_malloc("ref_s", 3 * n, sizeof(double));
  double *pot = hy_malloc("pot", n, sizeof(double)), *pref = hy_malloc("pref", n, sizeof(double));

  /* sort once so that all trees below see the same particle order */
  struct hy_force *f = make_force(eps, r1, r2, 1.0 / 256, n_ratio);
  HY_CHECK_INT(hy_force_build(f, &p, &err), 0);
  hy_cpu_direct(p.pos, p.mass, n, p.pos, n, 0, eps, r1, r2, ref, ref_h, pref, pool);
  for (size_t i = 0; i < 3 * n; i++) ref_s[i] = ref[i] - ref_h[i];

  /* default a_err = 2^-8 */
  HY_CHECK_INT(hy_force_walk(f, &p, HY_WALK_FULL, acc, NULL, pot, &err), 0);
  struct errs e = rel_errors(acc, ref, n);
  print_errs("tree (a_err 2^-8) vs direct", e);
  HY_CHECK_LE(e.med, 3e-3);
  HY_CHECK_LE(e.p99, 2e-2);
  {
    double *pe = hy_malloc("pe", n, sizeof(double));
    for (size_t i = 0; i < n; i++) pe[i] = fabs(pot[i] - pref[i]) / fabs(pref[i]);
    qsort(pe, n, sizeof(double), cmp_double);
    printf("%-44s median %.3e  p99 %.3e\n", "tree potential (a_err 2^-8) vs direct", pe[n / 2],
           pe[(size_t)(0.99 * n)]);
    HY_CHECK_LE(pe[n / 2], 3e-3);
    hy_free(pe);
  }

  /* split walk: hard + soft == full (identical cells accepted), parts vs direct split */
  HY_CHECK_INT(hy_force_walk(f, &p, HY_WALK_SPLIT, acc1, acc2, NULL, &err), 0);
  for (size_t i = 0; i < 3 * n; i++) tmp[i] = acc1[i] + acc2[i];
  e = rel_errors(tmp, acc, n);
  print_errs("split hard + soft vs unsplit walk", e);
  HY_CHECK_LE(e.med, 1e-6);
  HY_CHECK_LE(e.max, 1e-4);
  e = errors_vs(acc1, ref_h, ref, n);
  print_errs("hard part vs direct hard (rel. to |a|)", e);
  HY_CHECK_LE(e.med, 3e-3);
  HY_CHECK_LE(e.p99, 2e-2);
  e = errors_vs(acc2, ref_s, ref, n);
  print_errs("soft part vs direct soft (rel. to |a|)", e);
  HY_CHECK_LE(e.med, 3e-3);
  HY_CHECK_LE(e.p99, 2e-2);
  /* the hard part is nonzero for most particles at these radii */
  size_t n_hard = 0;
  for (size_t i = 0; i < n; i++)
    if (ref_h[3 * i] != 0 || ref_h[3 * i + 1] != 0 || ref_h[3 * i + 2] != 0) n_hard++;
  HY_CHECK_MSG(n_hard > n / 2, "only %zu of %zu particles have hard neighbours", n_hard, n);

  /* the cut-off hard walk skips only nodes whose K is zero: equals the split hard part */
  struct hy_force_stats s0, s1; /* s0: after the full and the split walk */
  hy_force_stats_get(f, &s0);
  HY_CHECK_INT(hy_force_walk(f, &p, HY_WALK_HARD, tmp, NULL, NULL, &err), 0);
  hy_force_stats_get(f, &s1);
  e = errors_vs(tmp, acc1, ref, n);
  print_errs("hard walk vs split hard part", e);
  HY_CHECK_LE(e.max, 1e-6);
  uint64_t hard_inter = (s1.n_pp - s0.n_pp) + (s1.n_pc - s0.n_pc);
  printf("interactions per particle: full %.1f, hard %.1f\n", (double)(s0.n_pp + s0.n_pc) / 2.0 / (double)n,
         (double)hard_inter / (double)n);
  /* the R2 cut-off must save most of the work */
  HY_CHECK_LE((double)hard_inter, 0.5 * (double)(s0.n_pp + s0.n_pc) / 2.0);

  /* soft-step weight n - (n-1) K equals hard + n soft */
  HY_CHECK_INT(hy_force_walk(f, &p, HY_WALK_SOFTSTEP, tmp, NULL, NULL, &err), 0);
  for (size_t i = 0; i < 3 * n; i++) acc2[i] = acc1[i] + n_ratio * acc2[i];
  e = rel_errors(tmp, acc2, n);
  print_errs("soft-step walk vs hard + n soft", e);
  HY_CHECK_LE(e.med, 1e-5);
  HY_CHECK_LE(e.p99, 1e-4);

  /* device walk vs host reference walk on the same tree */
  {
    const struct hy_tree *t = hy_force_tree(f);
    struct hy_walk_cfg wc = {.mode = HY_WALK_FULL, .want_pot = 0, .nvec = 4, .eps = eps, .r1 = r1, .r2 = r2,
                             .n_ratio = n_ratio};
    uint64_t cnt[2];
    hy_cpu_walk(t, &p, p.pos, n, 0, &wc, tmp, NULL, NULL, cnt, pool);
    e = rel_errors(acc, tmp, n);
    print_errs("device walk vs host reference walk", e);
    HY_CHECK_LE(e.med, 1e-5);
    double full_dev = (double)(s0.n_pp + s0.n_pc) / 2.0, full_cpu = (double)(cnt[0] + cnt[1]);
    printf("interactions: device %.0f, host reference %.0f\n", full_dev, full_cpu);
    HY_CHECK_REL(full_dev, full_cpu, 1e-3);
  }
  hy_force_free(f);

  /* accuracy improves as a_err falls */
  double prev_med = INFINITY, prev_p99 = INFINITY;
  for (int k = 6; k <= 12; k += 2) {
    struct hy_force *g = make_force(eps, r1, r2, ldexp(1.0, -k), n_ratio);
    HY_CHECK_INT(hy_force_build(g, &p, &err), 0);
    HY_CHECK_INT(hy_force_walk(g, &p, HY_WALK_FULL, acc, NULL, NULL, &err), 0);
    e = rel_errors(acc, ref, n);
    char label[64];
    snprintf(label, sizeof label, "tree (a_err 2^-%d) vs direct", k);
    print_errs(label, e);
    HY_CHECK_MSG(e.med < 0.7 * prev_med, "median error %.3e at 2^-%d does not fall below 0.7 x %.3e", e.med, k,
                 prev_med);
    HY_CHECK_MSG(e.p99 < prev_p99, "p99 error %.3e at 2^-%d does not fall below %.3e", e.p99, k, prev_p99);
    prev_med = e.med;
    prev_p99 = e.p99;
    hy_force_free(g);
  }
  hy_free(acc);
  hy_free(acc1);
  hy_free(acc2);
  hy_free(tmp);
  hy_free(ref);
  hy_free(ref_h);
  hy_free(ref_s);
  hy_free(pot);
  hy_free(pref);
  hy_part_free(&p);
}

/* Walks of the host- and the device-built tree of the same particles: mode
 * FULL, SPLIT (hard, soft) and HARD; interactions in cnt[mode]. */
struct walk_set {
  double *full, *hard, *soft, *cut;
  uint64_t inter_full, inter_hard;
  size_t n_cell;
};

static void walk_set(struct hy_force *f, struct hy_part *p, struct walk_set *w) {
  struct hy_err err;
  size_t n = p->n;
  w->full = hy_malloc("walk", 3 * n, sizeof(double));
  w->hard = hy_malloc("walk", 3 * n, sizeof(double));
  w->soft = hy_malloc("walk", 3 * n, sizeof(double));
  w->cut = hy_malloc("walk", 3 * n, sizeof(double));
  struct hy_force_stats s0, s1, s2;
  HY_CHECK_INT(hy_force_build(f, p, &err), 0);
  w->n_cell = hy_force_tree(f)->n_cell;
  hy_force_stats_reset(f);
  HY_CHECK_INT(hy_force_walk(f, p, HY_WALK_FULL, w->full, NULL, NULL, &err), 0);
  hy_force_stats_get(f, &s0);
  HY_CHECK_INT(hy_force_walk(f, p, HY_WALK_SPLIT, w->hard, w->soft, NULL, &err), 0);
  hy_force_stats_get(f, &s1);
  HY_CHECK_INT(hy_force_walk(f, p, HY_WALK_HARD, w->cut, NULL, NULL, &err), 0);
  hy_force_stats_get(f, &s2);
  w->inter_full = s0.n_pp + s0.n_pc;
  w->inter_hard = (s2.n_pp + s2.n_pc) - (s1.n_pp + s1.n_pc);
}

static void walk_set_free(struct walk_set *w) {
  hy_free(w->full);
  hy_free(w->hard);
  hy_free(w->soft);
  hy_free(w->cut);
}

/* The device build against the host build and the direct sum: same accuracy,
 * the same tree up to keys rounded differently (single vs double precision),
 * the particle order untouched, and a correct b_max (the cut-off hard walk,
 * which skips cells beyond R2 + b_max, equals the split walk's hard part). */
static void test_device_build(void) {
  struct hy_part p;
  hy_part_init(&p);
  const size_t n = 32768;
  plummer(n, 21, &p);
  const double eps = 0.1 * pow((double)n, -0.26), r1 = 1.03 * pow((double)n, -1.0 / 3.0), r2 = 2 * r1;
  struct hy_force *fh = make_force_on(eps, r1, r2, 1.0 / 256, 4, HY_TREE_BUILD_HOST);
  struct hy_force *fd = make_force_on(eps, r1, r2, 1.0 / 256, 4, HY_TREE_BUILD_DEVICE);
  /* auto: the host build on a CPU device (same cores, no launch costs), else the device build; the same
   * for the hard steps' remote tree (hard_remote 0: auto, where the local tree is built) */
  struct hy_force *fa = make_force_on(eps, r1, r2, 1.0 / 256, 4, HY_TREE_BUILD_AUTO);
  HY_CHECK_INT(hy_force_config(fa)->tree_build, hy_cl_is_cpu(cl) ? HY_TREE_BUILD_HOST : HY_TREE_BUILD_DEVICE);
  HY_CHECK_INT(hy_force_config(fa)->hard_remote, hy_cl_is_cpu(cl) ? HY_TREE_BUILD_HOST : HY_TREE_BUILD_DEVICE);
  hy_force_free(fa);
  struct walk_set wh, wd;
  walk_set(fh, &p, &wh); /* sorts p into key order */
  uint64_t *ids = hy_malloc("ids", n, sizeof(uint64_t));
  for (size_t i = 0; i < n; i++) ids[i] = p.id[i];
  /* reverse the order so the device build must sort and unsort for real */
  {
    size_t *perm = hy_malloc("perm", n, sizeof(size_t));
    for (size_t i = 0; i < n; i++) perm[i] = n - 1 - i;
    hy_part_permute(&p, perm);
    hy_free(perm);
  }
  walk_set(fd, &p, &wd);
  HY_CHECK_INT(hy_force_device_built(fd), 1);
  for (size_t i = 0; i < n; i++)
    if (p.id[i] != ids[n - 1 - i]) {
      HY_CHECK_MSG(0, "device build moved particle %zu (ID %llu)", i, (unsigned long long)p.id[i]);
      break;
    }
  /* host results into the reversed order */
  double *ref = hy_malloc("ref", 3 * n, sizeof(double)), *ref_h = hy_malloc("ref_h", 3 * n, sizeof(double));
  hy_cpu_direct(p.pos, p.mass, n, p.pos, n, 0, eps, r1, r2, ref, ref_h, NULL, pool);
  double *hf = hy_malloc("hf", 3 * n, sizeof(double)), *hh = hy_malloc("hh", 3 * n, sizeof(double));
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 3; k++) {
      hf[3 * i + k] = wh.full[3 * (n - 1 - i) + k];
      hh[3 * i + k] = wh.hard[3 * (n - 1 - i) + k];
    }
  struct errs eh = rel_errors(hf, ref, n), ed = rel_errors(wd.full, ref, n);
  print_errs("host-built tree vs direct", eh);
  print_errs("device-built tree vs direct", ed);
  HY_CHECK_LE(ed.med, 3e-3);
  HY_CHECK_LE(ed.p99, 2e-2);
  /* the same tree but for keys at cell boundaries: the same errors to a few % */
  HY_CHECK_LE(ed.med, 1.05 * eh.med);
  HY_CHECK_LE(ed.p99, 1.05 * eh.p99);
  struct errs ehh = errors_vs(hh, ref_h, ref, n), edh = errors_vs(wd.hard, ref_h, ref, n);
  print_errs("device-built hard part vs direct hard", edh);
  HY_CHECK_LE(edh.med, 1.05 * ehh.med + 1e-7);
  HY_CHECK_LE(edh.p99, 1.05 * ehh.p99 + 1e-7);
  struct errs ec = errors_vs(wd.cut, wd.hard, ref, n);
  print_errs("device-built: hard walk vs split hard part", ec);
  HY_CHECK_LE(ec.max, 1e-6);
  printf("cells: host %zu, device %zu; interactions full %llu / %llu, hard %llu / %llu\n", wh.n_cell, wd.n_cell,
         (unsigned long long)wh.inter_full, (unsigned long long)wd.inter_full, (unsigned long long)wh.inter_hard,
         (unsigned long long)wd.inter_hard);
  HY_CHECK_REL((double)wd.n_cell, (double)wh.n_cell, 0.01);
  HY_CHECK_REL((double)wd.inter_full, (double)wh.inter_full, 0.01);
  HY_CHECK_REL((double)wd.inter_hard, (double)wh.inter_hard, 0.01);
  walk_set_free(&wh);
  walk_set_free(&wd);
  hy_free(ids);
  hy_free(ref);
  hy_free(ref_h);
  hy_free(hf);
  hy_free(hh);
  hy_force_free(fh);
  hy_force_free(fd);
  hy_part_free(&p);
}

/* Awkward particle sets built on the device match the host build: two
 * particles; fewer than n_crit (the root is a leaf); 100 particles at one
 * point among others (a leaf bucket of equal keys); a far escaper (a deep
 * chain of cells). Every cell opened, so both are direct sums. */
static void test_device_build_edges(void) {
  const size_t sizes[] = {2, 9, 600, 600};
  for (int c = 0; c < 4; c++) {
    struct hy_part p;
    hy_part_init(&p);
    plummer(sizes[c], 40 + (uint64_t)c, &p);
    size_t n = p.n;
    if (c == 2)
      for (size_t i = 0; i < 100; i++)
        for (int k = 0; k < 3; k++) p.pos[3 * (200 + i) + k] = 0.25;
    if (c == 3) p.pos[3 * 17] = 1e6;
    struct hy_force *fd = make_force_on(0.01, 0.1, 0.2, 1e-30, 4, HY_TREE_BUILD_DEVICE);
    struct hy_err err;
    double *acc = hy_malloc("acc", 3 * n, sizeof(double)), *ref = hy_malloc("ref", 3 * n, sizeof(double));
    hy_cpu_direct(p.pos, p.mass, n, p.pos, n, 0, 0.01, 0, 0, ref, NULL, NULL, pool);
    HY_CHECK_INT(hy_force_build(fd, &p, &err), 0);
    HY_CHECK_INT(hy_force_device_built(fd), 1);
    HY_CHECK_INT(hy_force_walk(fd, &p, HY_WALK_FULL, acc, NULL, NULL, &err), 0);
    struct hy_force_stats st;
    hy_force_stats_get(fd, &st);
    HY_CHECK_INT(st.n_pc, 0);
    HY_CHECK_INT(st.n_pp, (uint64_t)n * (n - 1));
    struct errs e = rel_errors(acc, ref, n);
    char label[80];
    snprintf(label, sizeof label, "device build, case %d (N = %zu) vs direct", c, n);
    print_errs(label, e);
    /* case 3: the records' frame is the centre of mass, which the escaper
     * (1 of 600 equal masses at 1e6) moves by D/N = 1667; positions then keep
     * 2^-24 x 1667 = 1e-4 absolute, against separations of about 0.1 */
    HY_CHECK_LE(e.med, c == 3 ? 3e-4 : 1e-5);
    HY_CHECK_LE(e.max, c == 3 ? 2e-2 : 1e-4);
    hy_free(acc);
    hy_free(ref);
    hy_force_free(fd);
    hy_part_free(&p);
  }
}

/* A device-built tree brought back for record-for-record comparisons. */
struct dl_tree {
  float *cells, *b2;
  int32_t *next;
  uint32_t *idx;
  size_t n, n_cell;
};

/* Tree slot `slot` of n particles and r's cells into t (its buffers replaced). */
static int dl_tree_get(struct dl_tree *t, int slot, size_t n, const struct hy_cl_build_result *r, struct hy_err *err) {
  hy_free(t->cells);
  hy_free(t->b2);
  hy_free(t->next);
  hy_free(t->idx);
  t->n = n;
  t->n_cell = r->n_cell;
  t->cells = hy_malloc("cells", 8 * (r->n_cell + 1), sizeof(float));
  t->b2 = hy_malloc("b2", r->n_cell + 1, sizeof(float));
  t->next = hy_malloc("next", n, sizeof(int32_t));
  t->idx = hy_malloc("idx", n, sizeof(uint32_t));
  double tx = 0.0;
  return hy_cl_tree_download(cl, slot, n, r->n_cell, t->cells, t->next, t->b2, t->idx, &tx, err);
}

/* The same tree: cells, links, B2 and key order, bit for bit. */
static void dl_tree_same(const struct dl_tree *a, const struct dl_tree *b) {
  HY_CHECK_INT(a->n, b->n);
  HY_CHECK_INT(a->n_cell, b->n_cell);
  if (a->n != b->n || a->n_cell != b->n_cell) return;
  HY_CHECK(memcmp(a->idx, b->idx, a->n * sizeof(uint32_t)) == 0);
  HY_CHECK(memcmp(a->next, b->next, a->n * sizeof(int32_t)) == 0);
  HY_CHECK(memcmp(a->cells, b->cells, 8 * a->n_cell * sizeof(float)) == 0);
  HY_CHECK(memcmp(a->b2, b->b2, a->n_cell * sizeof(float)) == 0);
}

static void dl_tree_free(struct dl_tree *t) {
  hy_free(t->cells);
  hy_free(t->b2);
  hy_free(t->next);
  hy_free(t->idx);
  memset(t, 0, sizeof *t);
}

/* n positions uniform in [0, 1)^3 (4 floats each, mass 1/n) from seed s. */
static void unit_positions(float *pos, size_t n, uint64_t s) {
  for (size_t i = 0; i < n; i++) {
    for (int d = 0; d < 3; d++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      pos[4 * i + (size_t)d] = (float)((double)(s >> 11) / 9007199254740992.0);
    }
    pos[4 * i + 3] = 1.0f / (float)n;
  }
}

/* The merged build (slot 1: local particles, then LET items) that reuses
 * the local build's key order (merge_local: only the items are sorted and
 * merged in) makes the tree of a full sort, record for record: a local
 * particle goes before an item of the same key, as in the stable sort. Items
 * that sit exactly on local particles give equal keys; some lie outside
 * the cube (clamped keys). Its cells without items copy the slot-0 tree's
 * moments (grafted), which the comparison covers too; clustered puts the
 * items in a slab apart from the local particles, so that most cells,
 * large ones too, are copies (and most items' sink blocks hold no local
 * particle, which the walk with skip_items skips). Then the
 * fallbacks: a different cube, or another slot-0 build since, sort
 * everything. */
static void test_merged_build(int clustered) {
  const size_t nl = clustered ? 40000 : 6000, m = 2500, n = nl + m;
  float *pos = hy_malloc("positions", 4 * n, sizeof(float));
  unit_positions(pos, n, 12345);
  if (clustered) { /* the local particles below x = 0.8, the items in a slab above (but the ties) */
    for (size_t i = 0; i < nl; i++) pos[4 * i] *= 0.8f;
    for (size_t j = 0; j < m; j++) pos[4 * (nl + j)] = 0.85f + 0.15f * pos[4 * (nl + j)];
  }
  for (size_t j = 0; j < m; j += 5) memcpy(pos + 4 * (nl + j), pos + 4 * (j * 2), 3 * sizeof(float)); /* ties */
  for (size_t j = 1; j < m; j += 97) pos[4 * (nl + j)] = 1.5f;                                          /* outside */
  struct hy_cl_build_args a0 = {.pos = pos, .n = nl, .lo = {0.0, 0.0, 0.0}, .side = 1.0, .n_crit = 16,
                                .a_err = 1e-3, .tree_id = 9001, .slot = 0, .keep_keys = 1};
  struct hy_cl_build_args a1 = a0;
  a1.n = n;
  a1.slot = 1;
  a1.keep_keys = 0;
  a1.merge_local = nl;
  a1.merge_id = a0.tree_id;
  struct hy_cl_build_result r0, r1, rf;
  struct hy_err err;
  struct dl_tree t[2] = {{0}};
  if (hy_cl_tree_build(cl, &a0, &r0, &err) != 0 || hy_cl_tree_build(cl, &a1, &r1, &err) != 0 ||
      dl_tree_get(&t[0], 1, n, &r1, &err) != 0) {
    HY_CHECK_MSG(0, "merged device build: %s", err.msg);
    goto out;
  }
  HY_CHECK_INT(r1.merged, 1);
  HY_CHECK(r1.grafted > 0); /* cells without items copied from the slot-0 tree */
  {
    /* its split walk with the blocks of items only skipped (skip_items):
     * the local particles' results bit for bit those of the full walk, the
     * skipped items' zero, fewer interactions (clustered: runs of items in
     * key order fill whole blocks; with 26 items per cell of the third
     * level in the slab, about a quarter of them) */
    const struct hy_walk_cfg wc = {.mode = HY_WALK_SPLIT, .nvec = 4, .eps = 1e-3, .r1 = 0.02, .r2 = 0.04,
                                   .n_ratio = 4};
    float *o[2][2];
    uint64_t c[2][2];
    for (int s = 0; s < 2; s++) {
      o[s][0] = hy_malloc("walk results", 4 * n, sizeof(float));
      o[s][1] = hy_malloc("walk results", 4 * n, sizeof(float));
      struct hy_cl_walk_args w = {.n_nodes = n + r1.n_cell, .n_part = n, .root = r1.root, .tree_id = a1.tree_id,
                                  .slot = 1, .n_sink = n, .self_base = 0, .unsort = 1, .skip_items = s ? nl : 0};
      if (hy_cl_walk(cl, &w, &wc, c[s], NULL, &err) != 0 ||
          hy_cl_unsorted_read(cl, n, 1, o[s][0], o[s][1], NULL, &err) != 0)
        HY_CHECK_MSG(0, "merged walk (skip_items %d): %s", s, err.msg);
    }
    HY_CHECK(memcmp(o[0][0], o[1][0], 4 * nl * sizeof(float)) == 0);
    HY_CHECK(memcmp(o[0][1], o[1][1], 4 * nl * sizeof(float)) == 0);
    size_t zero = 0, nonzero_ref = 0;
    for (size_t j = nl; j < n; j++) {
      const int z = o[1][0][4 * j] == 0.0f && o[1][0][4 * j + 1] == 0.0f && o[1][1][4 * j] == 0.0f;
      zero += z;
      if (z) nonzero_ref += o[0][1][4 * j] != 0.0f; /* the full walk gave a skipped item a force */
    }
    HY_CHECK_MSG(!clustered || (zero >= m / 5 && nonzero_ref == zero && c[1][0] + c[1][1] < c[0][0] + c[0][1]),
                 "skip_items: %zu of %zu items skipped, interactions %llu against %llu", zero, m,
                 (unsigned long long)(c[1][0] + c[1][1]), (unsigned long long)(c[0][0] + c[0][1]));
    printf("merged walk without the blocks of items only: %zu of %zu items skipped, %llu interactions against "
           "%llu, the local particles' results bit for bit\n", zero, m, (unsigned long long)(c[1][0] + c[1][1]),
           (unsigned long long)(c[0][0] + c[0][1]));
    for (int s = 0; s < 2; s++) {
      hy_free(o[s][0]);
      hy_free(o[s][1]);
    }
  }
  a1.merge_local = 0; /* the same set, fully sorted */
  a1.tree_id = 9002;
  if (hy_cl_tree_build(cl, &a1, &rf, &err) != 0 || dl_tree_get(&t[1], 1, n, &rf, &err) != 0) {
    HY_CHECK_MSG(0, "full device build: %s", err.msg);
    goto out;
  }
  HY_CHECK_INT(rf.merged, 0);
  dl_tree_same(&t[0], &t[1]);
  /* fallbacks to the full sort: another cube; a slot-0 build since */
  a1.merge_local = nl;
  a1.side = 1.25;
  if (hy_cl_tree_build(cl, &a1, &rf, &err) != 0) HY_CHECK_MSG(0, "merged build, other cube: %s", err.msg);
  HY_CHECK_INT(rf.merged, 0);
  a1.side = 1.0;
  a0.tree_id = 9003;
  if (hy_cl_tree_build(cl, &a0, &r0, &err) != 0 || hy_cl_tree_build(cl, &a1, &rf, &err) != 0)
    HY_CHECK_MSG(0, "merged build after another local build: %s", err.msg);
  HY_CHECK_INT(rf.merged, 0);
  printf("merged device build: %zu + %zu particles, %zu cells (%zu copied from the local tree), the same tree as a full "
         "sort\n", nl, m, r1.n_cell, r1.grafted);
out:
  dl_tree_free(&t[0]);
  dl_tree_free(&t[1]);
  hy_free(pos);
}

/* The remote tree's hard walk of a distributed hard step: the host's tree
 * of points of the received items, or (dev) the device's build of them with
 * every cell opened (hy_force_cfg.hard_remote device), the local particles of the slot-0 build as
 * resident sinks (read from its node records), the results added on the
 * device to those the local walk left there, and sink blocks that no item
 * reaches within R2 skipped (hy_block_mark, first against the items' box).
 * Checked against the local walk's results fetched alone plus the hard
 * force of every item within R2 summed on the host in double: an item that
 * a skipped block missed would leave its whole pair force out, while the
 * tolerance is float rounding; sinks that no item reaches must keep the
 * local walk's result exactly. clump: the items in a small clump inside the
 * local cube (most blocks pass the box test), else in a slab beyond its
 * face x = 1 (most blocks fail it). */
static void test_remote_hard_walk(int clump, int dev) {
  const size_t nl = 120000, m = 4000; /* blocks of 64 sinks ~0.08 across: R2 matters to the box test */
  const double eps = 0.002, r1 = 0.025, r2 = 0.05;
  float *pos = hy_malloc("positions", 4 * nl, sizeof(float)), *items = hy_malloc("items", 4 * m, sizeof(float));
  float *loc = hy_malloc("results", 4 * nl, sizeof(float)), *tot = hy_malloc("results", 4 * nl, sizeof(float));
  unit_positions(pos, nl, clump ? 777 : 778);
  unit_positions(items, m, 779);
  float box[6] = {INFINITY, INFINITY, INFINITY, -INFINITY, -INFINITY, -INFINITY};
  for (size_t j = 0; j < m; j++) {
    float *x = items + 4 * j;
    if (clump) {
      for (int d = 0; d < 3; d++) x[d] = 0.4f + 0.2f * x[d];
    } else {
      x[0] = 1.0f + 0.06f * x[0];
    }
    x[3] = 1.0f / (float)nl;
    for (int d = 0; d < 3; d++) {
      box[d] = fminf(box[d], x[d]);
      box[3 + d] = fmaxf(box[3 + d], x[d]);
    }
  }
  struct hy_cl_build_args a0 = {.pos = pos, .n = nl, .lo = {0.0, 0.0, 0.0}, .side = 1.0, .n_crit = 16,
                                .a_err = 1e-3, .tree_id = 9101, .slot = 0};
  float *rec = hy_malloc("point tree", 16 * m, sizeof(float));
  struct hy_tree pt;
  hy_tree_init(&pt);
  const size_t n_pc = dev ? 0 : hy_tree_point_records(&pt, items, m, box, 16, rec, pool);
  struct hy_cl_build_args a1 = {.pos = items, .n = m, .lo = {clump ? 0.0 : 1.0, 0.0, 0.0}, .side = 1.0,
                                .n_crit = 16, .a_err = 1e-3, .tree_id = 9102, .slot = 1, .open_all = 1};
  const struct hy_walk_cfg wc = {.mode = HY_WALK_HARD, .nvec = 4, .eps = eps, .r1 = r1, .r2 = r2, .n_ratio = 4};
  struct hy_cl_build_result r0, r1b;
  struct hy_err err;
  uint64_t c0[2], c1[2];
  if (hy_cl_tree_build(cl, &a0, &r0, &err) != 0) {
    HY_CHECK_MSG(0, "remote hard walk: local build: %s", err.msg);
    goto out;
  }
  struct hy_cl_walk_args w0 = {.n_nodes = nl + r0.n_cell, .n_part = nl, .root = r0.root, .tree_id = a0.tree_id,
                               .slot = 0, .n_sink = nl, .self_base = 0, .unsort = 1};
  if (hy_cl_walk(cl, &w0, &wc, c0, NULL, &err) != 0 || hy_cl_unsorted_read(cl, nl, 0, loc, NULL, NULL, &err) != 0 ||
      (dev && hy_cl_tree_build(cl, &a1, &r1b, &err) != 0)) {
    HY_CHECK_MSG(0, "remote hard walk: local walk or remote build: %s", err.msg);
    goto out;
  }
  struct hy_cl_walk_args w1 = {.node = rec, .n_nodes = m + n_pc, .n_part = m, .root = (int32_t)m, .slot = 1,
                               .n_sink = nl, .self_base = HY_NONE, .out0 = tot, .sinks_resident = 1,
                               .add_unsorted = 1, .skip_far = 1, .has_box = 1};
  if (dev) { /* the device's records, resident in slot 1 */
    w1.node = NULL;
    w1.n_nodes = m + r1b.n_cell;
    w1.root = r1b.root;
    w1.tree_id = a1.tree_id;
  }
  memcpy(w1.box, box, sizeof box);
  if (hy_cl_walk(cl, &w1, &wc, c1, NULL, &err) != 0) {
    HY_CHECK_MSG(0, "remote hard walk: %s", err.msg);
    goto out;
  }
  size_t reached = 0, bad = 0;
  uint64_t pairs = 0;
  for (size_t i = 0; i < nl; i++) {
    double ref[3] = {0.0, 0.0, 0.0}, mag = 0.0;
    for (size_t j = 0; j < m; j++) {
      double dx[3], d2 = 0.0;
      for (int d = 0; d < 3; d++) {
        dx[d] = (double)items[4 * j + (size_t)d] - (double)pos[4 * i + (size_t)d];
        d2 += dx[d] * dx[d];
      }
      if (d2 >= r2 * r2) continue;
      pairs++;
      const double w = hy_dll_k(sqrt(d2), r1, r2) * (double)items[4 * j + 3] * pow(d2 + eps * eps, -1.5);
      for (int d = 0; d < 3; d++) ref[d] += w * dx[d];
      mag += w * sqrt(d2);
    }
    double diff = 0.0, lmag = 0.0;
    for (int d = 0; d < 3; d++) {
      const double e = (double)tot[4 * i + (size_t)d] - (double)loc[4 * i + (size_t)d] - ref[d];
      diff += e * e;
      lmag += (double)loc[4 * i + (size_t)d] * (double)loc[4 * i + (size_t)d];
    }
    if (mag > 0.0) reached++;
    if (sqrt(diff) > 1e-4 * mag + 1e-6 * sqrt(lmag)) bad++;
  }
  printf("remote hard walk (%s, %s): %zu of %zu sinks within R2 of %zu items (%llu pairs, %llu interactions walked), "
         "%zu wrong\n",
         dev ? "device-built tree" : "tree of points", clump ? "items in a clump" : "items beyond a face", reached, nl,
         m, (unsigned long long)pairs, (unsigned long long)c1[HY_COUNT_PP], bad);
  HY_CHECK(reached > 500 && reached < nl / 2);
  HY_CHECK_INT(bad, 0);
  HY_CHECK(c1[HY_COUNT_PP] >= pairs); /* every pair within R2 walked (a group of sinks takes an item for all) */
out:
  hy_tree_free(&pt);
  hy_free(rec);
  hy_free(pos);
  hy_free(items);
  hy_free(loc);
  hy_free(tot);
}

/* The cell generations are enqueued in batches as long as the slot's last
 * tree had generations (plus one), and the host reads the device's
 * generation table once per batch: a deep tree after a shallow one in the
 * same slot needs a second batch. A chain of particles at 0.7 x 2^-k (k =
 * 0 .. 19) in the unit cube, with n_crit 2, splits one key digit per
 * generation; the tree must be the same record for record whether it took
 * one batch or two, and as deep as the chain. */
static void test_build_batches(void) {
  const size_t chain = 20, n = chain + 40;
  float *pos = hy_malloc("positions", 4 * n, sizeof(float));
  unit_positions(pos, n, 777);
  for (size_t i = 0; i < chain; i++)
    for (int d = 0; d < 3; d++) pos[4 * i + (size_t)d] = (float)(0.7 * ldexp(1.0, -(int)i));
  struct hy_cl_build_args a = {.pos = pos, .n = 2, .lo = {0.0, 0.0, 0.0}, .side = 1.0, .n_crit = 2,
                               .a_err = 1e-3, .tree_id = 9101, .slot = 0};
  struct hy_cl_build_result r[3];
  struct hy_err err;
  struct dl_tree t[2] = {{0}};
  int rc = hy_cl_tree_build(cl, &a, &r[2], &err); /* two particles: one or two generations */
  for (int k = 0; k < 2 && rc == 0; k++) {
    a.n = n;
    a.tree_id = 9102 + (uint64_t)k;
    rc = hy_cl_tree_build(cl, &a, &r[k], &err) || dl_tree_get(&t[k], 0, n, &r[k], &err);
  }
  if (rc != 0) {
    HY_CHECK_MSG(0, "device build of a deep tree: %s", err.msg);
  } else {
    HY_CHECK_LE(r[2].generations, 2);
    HY_CHECK_LE((int)chain - 2, r[0].generations);
    HY_CHECK_INT(r[0].batches, 2);
    HY_CHECK_INT(r[1].batches, 1);
    HY_CHECK_INT(r[0].generations, r[1].generations);
    dl_tree_same(&t[0], &t[1]);
    printf("deep device build: %zu particles, %d generations, %zu cells, the same tree in one batch or two\n", n,
           r[0].generations, r[0].n_cell);
  }
  dl_tree_free(&t[0]);
  dl_tree_free(&t[1]);
  hy_free(pos);
}

/* The two sorts of the device build, by merging (GPUs) and radix (CPU
 * devices), give the same tree record for record: the stable order of the
 * keys, with ties (particles at the same position) and keys clamped at the
 * cube's faces. Sizes with an even and an odd number of merge passes. */
static void test_sort_methods(void) {
  const size_t sizes[] = {5000, 8500};
  for (int c = 0; c < 2; c++) {
    const size_t n = sizes[c];
    float *pos = hy_malloc("positions", 4 * n, sizeof(float));
    unit_positions(pos, n, 4242 + (uint64_t)c);
    for (size_t j = 0; j + 7 < n; j += 7) memcpy(pos + 4 * (j + 3), pos + 4 * j, 3 * sizeof(float)); /* ties */
    for (size_t j = 1; j < n; j += 101) pos[4 * j + 1] = -0.5f;                                      /* outside */
    struct hy_cl_build_args a = {.pos = pos, .n = n, .lo = {0.0, 0.0, 0.0}, .side = 1.0, .n_crit = 8,
                                 .a_err = 1e-3, .slot = 0};
    struct hy_cl_build_result r[2];
    struct hy_err err;
    struct dl_tree t[2] = {{0}};
    int rc = 0;
    for (int k = 0; k < 2 && rc == 0; k++) {
      hy_cl_set_merge_sort_max(cl, k == 0 ? 0 : n);
      a.tree_id = 9201 + 2 * (uint64_t)c + (uint64_t)k;
      rc = hy_cl_tree_build(cl, &a, &r[k], &err) || dl_tree_get(&t[k], 0, n, &r[k], &err);
    }
    hy_cl_set_merge_sort_max(cl, hy_cl_merge_sort_default(cl));
    if (rc != 0) {
      HY_CHECK_MSG(0, "device builds with both sorts: %s", err.msg);
    } else {
      dl_tree_same(&t[0], &t[1]);
      printf("device build of %zu particles: the same tree with the radix and the merge sort (%zu cells)\n", n,
             r[0].n_cell);
    }
    dl_tree_free(&t[0]);
    dl_tree_free(&t[1]);
    hy_free(pos);
  }
}

/* The soft step's local build begun inside a decomposition
 * (hy_cl_state_presort): the kept particles' keys made from the state before
 * the stayers' moves (a hole's from the position of its filler) and sorted,
 * then, after hy_cl_state_patch, the arrivals' keys sorted and merged in,
 * give the tree of a full sort of the patched state's double keys, record
 * for record; and those keys are the host's hy_tree_key (a build from keys
 * made on the host gives the same tree). Ties: a moved stayer and an arrival
 * on kept particles' positions, and arrivals on each other; clamped keys:
 * positions outside the cube. A state upload drops the sorted keys. */
static void test_presort_build(void) {
  if (!hy_cl_has_fp64(cl)) {
    printf("presorted build: the device has no double precision, not tested\n");
    return;
  }
  const size_t n_old = 7000, n_keep = 5200, n_in = 1900, n_new = n_keep + n_in;
  double *pos = hy_malloc("positions", 3 * (n_old + n_in), sizeof(double));
  double *vel = hy_calloc("velocities", 3 * (n_old + n_in), sizeof(double));
  double *mass = hy_malloc("masses", n_old + n_in, sizeof(double));
  double *post = hy_malloc("positions", 3 * n_new, sizeof(double));
  uint64_t *keys = hy_malloc("keys", n_new + n_new / 2 + 1, sizeof(uint64_t));
  uint32_t *mv = hy_malloc("moves", 2 * n_keep, sizeof(uint32_t));
  uint64_t s = 777;
  for (size_t i = 0; i < n_old + n_in; i++) {
    for (int d = 0; d < 3; d++) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      pos[3 * i + (size_t)d] = (double)(s >> 11) / 9007199254740992.0;
    }
    if (i % 89 == 5) pos[3 * i + 1] = -0.25; /* outside: clamped */
    mass[i] = 1.0 / (double)(n_old + n_in);
  }
  /* holes: every 7th kept index; their fillers every other index beyond */
  size_t m = 0;
  for (size_t i = 3; i < n_keep; i += 7) {
    mv[m] = (uint32_t)i;
    m++;
  }
  for (size_t h = 0; h < m; h++) mv[m + h] = (uint32_t)(n_keep + 2 * h);
  memcpy(pos + 3 * mv[m], pos + 3 * 11, 3 * sizeof(double));           /* a filler on a kept particle */
  { /* and one beside a kept particle in the same key cell: equal keys, other positions, in the order of the
     * indices after the move (the filler's hole 10 before 18) */
    const double c = floor(pos[3 * 18] * 2097152.0);
    pos[3 * 18] = (c + 0.3) / 2097152.0;
    memcpy(pos + 3 * mv[m + 1], pos + 3 * 18, 3 * sizeof(double));
    pos[3 * mv[m + 1]] = (c + 0.6) / 2097152.0;
  }
  memcpy(pos + 3 * n_old, pos + 3 * 12, 3 * sizeof(double));           /* an arrival on one */
  memcpy(pos + 3 * (n_old + 1), pos + 3 * (n_old + 2), 3 * sizeof(double)); /* two arrivals on one spot */
  const double centre[3] = {0.5, 0.5, 0.5}, half = 0.5, lo[3] = {0.0, 0.0, 0.0};
  const double scale = (double)(1u << HY_KEY_BITS) / (2.0 * half);
  struct hy_err err;
  struct dl_tree t[3] = {{0}};
  struct hy_cl_build_result r[3];
  double red[11], tk = 0.0;
  struct hy_cl_build_args a = {.n = n_new, .lo = {-0.5, -0.5, -0.5}, .side = 1.0, .n_crit = 8, .a_err = 1e-3,
                               .slot = 0, .key_lo = {0.0, 0.0, 0.0}, .key_scale = scale};
  /* build 0 takes keys sorted once the moves are known; 1 sorts the
   * state's keys after the patch, 2 takes the host's keys of it */
  for (int k = 0; k < 3; k++) {
    if (k == 0 &&
        (hy_cl_state_upload(cl, pos, vel, mass, NULL, NULL, n_old, &err) != 0 ||
         hy_cl_state_presort(cl, n_keep, mv, mv + m, m, lo, scale, &err) != 0 ||
         hy_cl_state_patch(cl, n_new, n_keep, pos + 3 * n_old, vel + 3 * n_old, mass + n_old, mv, mv + m, m,
                           &err) != 0 ||
         hy_cl_state_pack(cl, centre, red, 0, NULL, &tk, &err) != 0)) {
      HY_CHECK_MSG(0, "presort: the state: %s", err.msg);
      goto out;
    }
    a.tree_id = 9301 + (uint64_t)k;
    a.presorted = k == 0 ? n_keep : 0;
    a.state_keys = k != 2;
    a.keys = NULL;
    if (k == 2) { /* keys from the host, of the state as the patch left it */
      for (size_t i = 0; i < n_new; i++) memcpy(post + 3 * i, pos + 3 * (i < n_keep ? i : n_old + i - n_keep), 24);
      for (size_t h = 0; h < m; h++) memcpy(post + 3 * mv[h], pos + 3 * mv[m + h], 24);
      for (size_t i = 0; i < n_new; i++) {
        keys[i] = hy_tree_key(post + 3 * i, centre, half);
        ((uint32_t *)(keys + n_new))[i] = (uint32_t)i;
      }
      a.keys = keys;
    }
    if (hy_cl_tree_build(cl, &a, &r[k], &err) != 0 || dl_tree_get(&t[k], 0, n_new, &r[k], &err) != 0) {
      HY_CHECK_MSG(0, "presort: build %d: %s", k, err.msg);
      goto out;
    }
  }
  /* the presort was taken (its device time, from profiling events) */
  HY_CHECK(r[0].presort > 0.0);
  HY_CHECK(r[1].presort == 0.0 && r[2].presort == 0.0);
  dl_tree_same(&t[0], &t[1]);
  dl_tree_same(&t[1], &t[2]);
  /* a new state: the keys sorted for the old one are not taken */
  if (hy_cl_state_presort(cl, n_keep, mv, mv + m, m, lo, scale, &err) != 0 ||
      hy_cl_state_upload(cl, pos, vel, mass, NULL, NULL, n_new, &err) != 0 ||
      hy_cl_state_pack(cl, centre, red, 0, NULL, &tk, &err) != 0) {
    HY_CHECK_MSG(0, "presort: the second state: %s", err.msg);
    goto out;
  }
  a.state_keys = 1;
  a.keys = NULL;
  a.presorted = n_keep;
  a.tree_id = 9305;
  HY_CHECK_MSG(hy_cl_tree_build(cl, &a, &r[0], &err) != 0, "a build took keys sorted for another state");
  printf("presorted device build: %zu kept (%zu moved) + %zu arrivals, the tree of a full sort of the host's keys "
         "(%zu cells)\n", n_keep, m, n_in, r[1].n_cell);
out:
  for (int k = 0; k < 3; k++) dl_tree_free(&t[k]);
  hy_free(pos);
  hy_free(vel);
  hy_free(mass);
  hy_free(post);
  hy_free(keys);
  hy_free(mv);
}

/* The work done by the hard force's errors over a soft step's hard steps.
 * A Hernquist sphere (its cusp, where particles cross the small central
 * cells within a hard step, shows it most) moves for three hard steps
 * dt_h = eps / sigma_v by kick-drift-kick with a full tree force (a quarter
 * of the default a_err) on an engine of its own; after each drift the hard
 * force is computed as a hard step does, after the soft step's build, and
 * against the exact hard force (a tree whose every cell is opened: the sum
 * over the pairs within R2, in float). Errors that do net work are
 * correlated with the velocities: beta = sum m v.(a - a_exact) / sum m
 * |v.(a - a_exact)| over the three steps is of order N^-1/2 (a few 0.01
 * here) for errors that are not, and the energy then does not drift. The
 * soft step's tree kept and its moments refitted to the drifted positions
 * gives beta = -0.47 to -0.59 at every hard step (2^16 to 2^19 particles):
 * its n_vec sinks, grouped by the build's keys, have drifted apart, and the
 * group's MAC makes each sink's errors depend on its neighbours' relative
 * velocities. */
static void test_hard_step_work(void) {
  struct hy_part p;
  hy_part_init(&p);
  const size_t n = 65536;
  struct hy_err err;
  if (hy_ic_hernquist(n, 1, &p, NULL, &err) != 0) {
    fprintf(stderr, "hernquist: %s\n", err.msg);
    exit(99);
  }
  double sv = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double *v = p.vel + 3 * i;
    sv += p.mass[i] * sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  }
  const double eps = 0.1 * pow((double)n, -0.26), r1 = 1.03 * pow((double)n, -1.0 / 3.0), r2 = 2 * r1, dt = eps / sv;
  struct hy_cl_opts o = {.kind = HY_CL_ANY, .platform = -1, .device = -1, .local_rank = 0, .nvec = 4};
  struct hy_cl *cl_ref;
  if (hy_cl_create(&cl_ref, &o, &err) != 0) {
    fprintf(stderr, "second OpenCL engine: %s\n", err.msg);
    exit(99);
  }
  struct hy_force_cfg fc = {.G = 1.0, .eps = eps, .r1 = r1, .r2 = r2, .a_err = 1.0 / 1024, .n_crit = 16, .nvec = 4,
                            .n_ratio = 4, .tree_build = HY_TREE_BUILD_DEVICE};
  struct hy_force *f_full = hy_force_create(cl_ref, pool, &fc);
  fc.a_err = 1e-30;
  struct hy_force *f_exact = hy_force_create(cl_ref, pool, &fc);
  struct hy_force *f = make_force_on(eps, r1, r2, 1.0 / 256, 4, HY_TREE_BUILD_DEVICE);
  double *a = hy_malloc("hard", 3 * n, sizeof(double)), *ax = hy_malloc("exact hard", 3 * n, sizeof(double));
  double *af = hy_malloc("full", 3 * n, sizeof(double));
  HY_CHECK_INT(hy_force_build(f_full, &p, &err), 0);
  HY_CHECK_INT(hy_force_walk(f_full, &p, HY_WALK_FULL, af, NULL, NULL, &err), 0);
  HY_CHECK_INT(hy_force_build(f, &p, &err), 0); /* the soft step's */
  double work = 0.0, abs_work = 0.0, err_sum = 0.0, ref_sum = 0.0;
  for (int k = 1; k <= 3; k++) {
    for (size_t i = 0; i < 3 * n; i++) p.vel[i] += 0.5 * dt * af[i];
    for (size_t i = 0; i < 3 * n; i++) p.pos[i] += dt * p.vel[i];
    HY_CHECK_INT(hy_force_build(f, &p, &err), 0); /* what a hard step does (sim.c) */
    HY_CHECK_INT(hy_force_walk(f, &p, HY_WALK_HARD, a, NULL, NULL, &err), 0);
    HY_CHECK_INT(hy_force_build(f_exact, &p, &err), 0);
    HY_CHECK_INT(hy_force_walk(f_exact, &p, HY_WALK_HARD, ax, NULL, NULL, &err), 0);
    HY_CHECK_INT(hy_force_build(f_full, &p, &err), 0);
    HY_CHECK_INT(hy_force_walk(f_full, &p, HY_WALK_FULL, af, NULL, NULL, &err), 0);
    for (size_t i = 0; i < 3 * n; i++) p.vel[i] += 0.5 * dt * af[i];
    for (size_t i = 0; i < n; i++) {
      double w = 0.0, e2 = 0.0, r2s = 0.0;
      for (int d = 0; d < 3; d++) {
        const double e = a[3 * i + d] - ax[3 * i + d];
        w += p.vel[3 * i + d] * e;
        e2 += e * e;
        r2s += ax[3 * i + d] * ax[3 * i + d];
      }
      work += p.mass[i] * w;
      abs_work += p.mass[i] * fabs(w);
      err_sum += sqrt(e2);
      ref_sum += sqrt(r2s);
    }
  }
  const double beta = work / abs_work;
  printf("hard steps: mean |a - a_exact| / mean |a_exact| %.3e, work fraction of the errors %+.3f\n",
         err_sum / ref_sum, beta);
  HY_CHECK(abs_work > 0.0); /* cells were accepted: there are errors to weigh */
  HY_CHECK_LE(err_sum / ref_sum, 2e-2);
  HY_CHECK_LE(fabs(beta), 0.15);
  hy_free(a);
  hy_free(ax);
  hy_free(af);
  hy_force_free(f);
  hy_force_free(f_exact);
  hy_force_free(f_full);
  hy_cl_free(cl_ref);
  hy_part_free(&p);
}

/* The sums of energy.csv over the device state against the host's sums
 * of the same state: both sum the same terms in different orders, so each
 * pair differs by at most 2 (n + 4) u sum |term| (the summation's rounding
 * bound plus a few roundings in each term). A bulk offset and velocity
 * make the momentum and angular momentum sums non-zero. */
static void test_device_energy(void) {
  struct hy_part p;
  hy_part_init(&p);
  const size_t n = 32768;
  plummer(n, 11, &p);
  const double off[3] = {0.3, -0.2, 0.1}, bulk[3] = {0.05, 0.02, -0.03};
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < 3; d++) {
      p.pos[3 * i + d] += off[d];
      p.vel[3 * i + d] += bulk[d];
    }
  const double eps = 0.01, r1 = 0.05, r2 = 0.1;
  struct hy_force *f = make_force_on(eps, r1, r2, 1.0 / 256, 4, HY_TREE_BUILD_DEVICE);
  struct hy_err err;
  HY_CHECK(hy_force_state_possible(f, &p));
  HY_CHECK_INT(hy_force_state_put(f, &p, 0, &err), 0);
  HY_CHECK_INT(hy_force_state_force(f, &p, HY_WALK_SOFTSTEP, 1, &err), 0);
  HY_CHECK_INT(hy_force_state_get(f, &p, 0, 1, &err), 0);
  double host[HY_ENERGY_SUMS], dev[HY_ENERGY_SUMS], mag[HY_ENERGY_SUMS] = {0};
  hy_diag_sums(&p, pool, host);
  HY_CHECK_INT(hy_force_state_energy(f, dev, &err), 0);
  for (size_t i = 0; i < n; i++) {
    const double m = p.mass[i], *x = p.pos + 3 * i, *v = p.vel + 3 * i;
    mag[0] += 0.5 * m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    mag[1] += 0.5 * m * fabs(p.pot[i]);
    for (int d = 0; d < 3; d++) mag[2 + d] += m * fabs(v[d]);
    mag[5] += m * (fabs(x[1] * v[2]) + fabs(x[2] * v[1]));
    mag[6] += m * (fabs(x[2] * v[0]) + fabs(x[0] * v[2]));
    mag[7] += m * (fabs(x[0] * v[1]) + fabs(x[1] * v[0]));
  }
  const double u = 0x1p-53;
  for (int k = 0; k < HY_ENERGY_SUMS; k++) {
    printf("energy sum %d: device %.17g host %.17g\n", k, dev[k], host[k]);
    HY_CHECK(fabs(host[k]) > 1e-3 * mag[k]); /* a sum that does not cancel to nothing */
    HY_CHECK_LE(fabs(dev[k] - host[k]), 2.0 * (double)(n + 4) * u * mag[k]);
  }
  hy_force_free(f);
  hy_part_free(&p);
}

/* The relative criterion (walks built with HY_MAC_REL, engine rel) on a
 * Hernquist sphere, whose outskirts have small |a|, unsoftened so that the
 * monopole error bound holds: with the sinks scaled by their exact
 * accelerations (the direct sum), every sink's error is within the sum
 * over its accepted cells of 3 B2 / (d^2 (d - b_max)^2) (Warren & Salmon
 * 1993; the host reference walk adds them up) plus float rounding; the
 * device walk makes the host reference walk's interactions; each accepted
 * cell's bound is below alpha |a| by construction, and the error relative
 * to |a| stays of order alpha where the absolute criterion's is not. */
static void test_relative_criterion(struct hy_cl *rel, int tree_build) {
  struct hy_part p;
  hy_part_init(&p);
  const size_t n = 32768;
  struct hy_err err;
  HY_CHECK_INT(hy_ic_hernquist(n, 5, &p, NULL, &err), 0);
  const double alpha = 0.005, a_err = 1.0 / 256;
  double *ref = hy_malloc("ref", 3 * n, sizeof(double)), *acc = hy_malloc("acc", 3 * n, sizeof(double));
  double *cpu = hy_malloc("cpu", 3 * n, sizeof(double)), *bound = hy_malloc("bound", n, sizeof(double));
  double *sc = hy_malloc("scales", n, sizeof(double));
  struct hy_force_cfg fc = {.G = 1.0, .eps = 0.0, .r1 = 0.01, .r2 = 0.02, .a_err = a_err, .mac_alpha = alpha,
                            .n_crit = 16, .nvec = 4, .n_ratio = 4, .tree_build = tree_build};
  struct hy_force *f = hy_force_create(rel, pool, &fc), *fa = make_force_on(0.0, 0.01, 0.02, a_err, 4, tree_build);
  /* the host build sorts p: the references after it */
  HY_CHECK_INT(hy_force_build(fa, &p, &err), 0);
  hy_cpu_direct(p.pos, p.mass, n, p.pos, n, 0, 0.0, 0.01, 0.02, ref, NULL, NULL, pool);
  struct hy_force_stats sa, sb;
  hy_force_stats_reset(fa);
  HY_CHECK_INT(hy_force_walk(fa, &p, HY_WALK_FULL, acc, NULL, NULL, &err), 0);
  hy_force_stats_get(fa, &sa);
  const struct errs ea = rel_errors(acc, ref, n);
  print_errs("absolute criterion (a_err 2^-8), Hernquist", ea);
  memcpy(p.acc, ref, 3 * n * sizeof(double)); /* the sinks' last accelerations */
  HY_CHECK_INT(hy_force_build(f, &p, &err), 0);
  struct hy_force_stats s0;
  hy_force_stats_reset(f);
  HY_CHECK_INT(hy_force_walk(f, &p, HY_WALK_FULL, acc, NULL, NULL, &err), 0);
  hy_force_stats_get(f, &s0);
  const struct errs er = rel_errors(acc, ref, n);
  print_errs("relative criterion (alpha 0.005), Hernquist", er);
  HY_CHECK_LE(er.max, 3 * alpha);
  HY_CHECK_MSG(er.max < ea.max, "relative max error %.3e not below the absolute criterion's %.3e", er.max, ea.max);
  { /* both criteria: a cell either one opens is opened, so at least either one's interactions */
    struct hy_force_cfg fb_cfg = fc;
    fb_cfg.mac_both = 1;
    struct hy_force *fb = hy_force_create(rel, pool, &fb_cfg);
    HY_CHECK_INT(hy_force_build(fb, &p, &err), 0);
    hy_force_stats_reset(fb);
    HY_CHECK_INT(hy_force_walk(fb, &p, HY_WALK_FULL, cpu, NULL, NULL, &err), 0);
    hy_force_stats_get(fb, &sb);
    const struct errs eb = rel_errors(cpu, ref, n);
    print_errs("both criteria, Hernquist", eb);
    const uint64_t ia = sa.n_pp + sa.n_pc, ir = s0.n_pp + s0.n_pc, ib = sb.n_pp + sb.n_pc;
    printf("interactions: absolute %llu, relative %llu, both %llu\n", (unsigned long long)ia,
           (unsigned long long)ir, (unsigned long long)ib);
    HY_CHECK(ib >= ia && ib >= ir);
    HY_CHECK_LE(eb.max, 3 * alpha);
    hy_force_free(fb);
  }
  if (tree_build == HY_TREE_BUILD_HOST) { /* the host reference walk needs the host's tree */
    for (size_t i = 0; i < n; i++) sc[i] = hy_tree_sink_scale(ref + 3 * i, alpha, a_err, 0);
    struct hy_walk_cfg wc = {.mode = HY_WALK_FULL, .nvec = 4, .eps = 0.0, .r1 = 0.01, .r2 = 0.02, .n_ratio = 4,
                             .sink_scale = sc, .bound = bound};
    uint64_t cnt[2];
    hy_cpu_walk(hy_force_tree(f), &p, p.pos, n, 0, &wc, cpu, NULL, NULL, cnt, pool);
    HY_CHECK_REL((double)(s0.n_pp + s0.n_pc), (double)(cnt[0] + cnt[1]), 1e-3);
    size_t over = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
      double d2 = 0, r2 = 0;
      for (int k = 0; k < 3; k++) {
        d2 += (cpu[3 * i + k] - ref[3 * i + k]) * (cpu[3 * i + k] - ref[3 * i + k]);
        r2 += ref[3 * i + k] * ref[3 * i + k];
      }
      const double e = sqrt(d2), lim = bound[i] + 1e-12 * sqrt(r2);
      if (e > lim) over++;
      if (sqrt(r2) > 0 && bound[i] / sqrt(r2) > worst) worst = bound[i] / sqrt(r2);
    }
    printf("relative criterion: %zu of %zu sinks beyond the error bound; largest bound / |a| %.3e\n", over, n,
           worst);
    HY_CHECK_MSG(over == 0, "%zu sinks' errors exceed the monopole error bound", over);
    const struct errs ed = rel_errors(acc, cpu, n);
    print_errs("device walk vs host reference walk (relative)", ed);
    HY_CHECK_LE(ed.med, 1e-5);
  }
  hy_force_free(f);
  hy_force_free(fa);
  hy_free(ref);
  hy_free(acc);
  hy_free(cpu);
  hy_free(bound);
  hy_free(sc);
  hy_part_free(&p);
}

/* The double-precision reference of hytree bench against the host's double
 * direct sum of the same particles (relative to their centre of mass):
 * both sum the same n terms in different orders, so each component differs
 * by at most 4 (n + 8) u sum_j |term_j| (the summation's rounding bound,
 * with a few roundings in each term's 1/sqrt); for sums that do not cancel
 * this is ~1e-13 relative, far below the float kernel's ~1e-7. */
static void test_direct_ref(void) {
  if (!hy_cl_has_fp64(cl)) {
    printf("direct ref: the device has no double precision, skipped\n");
    return;
  }
  struct hy_part p;
  hy_part_init(&p);
  plummer(4096, 5, &p);
  const size_t n = p.n;
  const double eps = 0.01, u = 0x1p-53;
  double c[3], *src = hy_malloc("src", n, 4 * sizeof(double)), *out = hy_malloc("out", n, 4 * sizeof(double));
  double *pos = hy_malloc("pos", 3 * n, sizeof(double)), *ref = hy_malloc("ref", 3 * n, sizeof(double));
  double *pref = hy_malloc("pref", n, sizeof(double)), *rel = hy_malloc("rel", n, sizeof(double));
  hy_part_com(&p, c);
  for (size_t i = 0; i < n; i++) {
    for (int d = 0; d < 3; d++) src[4 * i + d] = pos[3 * i + d] = p.pos[3 * i + d] - c[d];
    src[4 * i + 3] = p.mass[i];
  }
  struct hy_err err;
  HY_CHECK_INT(hy_cl_direct_ref(cl, src, n, src, n, eps, out, &err), 0);
  hy_cpu_direct(pos, p.mass, n, pos, n, 0, eps, 0, 0, ref, NULL, pref, pool);
  double worst = 0.0; /* the largest difference in units of its bound */
  for (size_t i = 0; i < n; i++) {
    double mag[4] = {0}, d2 = 0.0, r2 = 0.0;
    for (size_t j = 0; j < n; j++) {
      if (j == i) continue;
      double dx[3], q = eps * eps;
      for (int d = 0; d < 3; d++) {
        dx[d] = pos[3 * j + d] - pos[3 * i + d];
        q += dx[d] * dx[d];
      }
      const double w = p.mass[j] / (q * sqrt(q));
      for (int d = 0; d < 3; d++) mag[d] += w * fabs(dx[d]);
      mag[3] += p.mass[j] / sqrt(q);
    }
    for (int d = 0; d < 4; d++) {
      const double a = out[4 * i + d], b = d < 3 ? ref[3 * i + d] : pref[i];
      const double r = fabs(a - b) / (4.0 * (double)(n + 8) * u * mag[d]);
      if (r > worst) worst = r;
      if (d < 3) {
        d2 += (a - b) * (a - b);
        r2 += b * b;
      }
    }
    rel[i] = sqrt(d2 / r2);
  }
  qsort(rel, n, sizeof(double), cmp_double);
  printf("%-44s median %.3e  max %.3e  (worst difference %.2e of its bound)\n", "double reference vs host double (acc)",
         rel[n / 2], rel[n - 1], worst);
  HY_CHECK_LE(worst, 1.0);
  HY_CHECK_LE(rel[n / 2], 1e-12);
  hy_free(src);
  hy_free(out);
  hy_free(pos);
  hy_free(ref);
  hy_free(pref);
  hy_free(rel);
  hy_part_free(&p);
}

/* hy_bench_force_error on accelerations with a known error: the exact
 * force (host double direct sum, G = 2) scaled by 1 + k/1000 on the k-th
 * particle of 1000: the relative error is k/1000 exactly, so the median,
 * 99th percentile and maximum over 500 samples (every 2nd particle, even k)
 * are known; the exact force gives errors at rounding level. */
static void test_bench_error(void) {
  struct hy_part p;
  hy_part_init(&p);
  plummer(1000, 9, &p);
  const size_t n = p.n;
  const double eps = 0.02, G = 2.0;
  double *acc = hy_malloc("acc", 3 * n, sizeof(double));
  hy_cpu_direct(p.pos, p.mass, n, p.pos, n, 0, eps, 0, 0, acc, NULL, NULL, pool);
  for (size_t i = 0; i < 3 * n; i++) acc[i] *= G;
  struct hy_bench_err e;
  struct hy_err err;
  HY_CHECK_INT(hy_bench_force_error(cl, pool, &p, acc, G, eps, 10000, &e, &err), 0);
  printf("%-44s median %.3e  p99 %.3e  max %.3e (%zu sampled)\n", "bench error of the exact force", e.med, e.p99,
         e.max, e.n_sampled);
  HY_CHECK(e.n_sampled == n);
  HY_CHECK_LE(e.max, 1e-12);
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < 3; d++) acc[3 * i + d] *= 1.0 + (double)i / 1000.0;
  HY_CHECK_INT(hy_bench_force_error(cl, pool, &p, acc, G, eps, 500, &e, &err), 0);
  /* samples k = 2j, j < 500: the median is j = 250, the 99th percentile j = floor(0.99 * 499) = 494 */
  printf("%-44s median %.6e  p99 %.6e  max %.6e\n", "bench error of a known error", e.med, e.p99, e.max);
  HY_CHECK(e.n_sampled == 500);
  HY_CHECK_ABS(e.med, 0.500, 1e-12);
  HY_CHECK_ABS(e.p99, 0.988, 1e-12);
  HY_CHECK_ABS(e.max, 0.998, 1e-12);
  hy_free(acc);
  hy_part_free(&p);
}

int main(void) {
  hy_log_init(0, 1);
  pool = hy_pool_create(hy_pool_default_threads());
  struct hy_cl_opts o = {.kind = HY_CL_ANY, .platform = -1, .device = -1, .local_rank = 0, .nvec = 4};
  struct hy_err err;
  if (hy_cl_create(&cl, &o, &err) != 0) {
    fprintf(stderr, "no OpenCL device: %s\n", err.msg);
    return 99;
  }
  printf("device: %s\n", hy_cl_description(cl));
  test_direct();
  test_direct_ref();
  test_bench_error();
  test_open_all(HY_TREE_BUILD_HOST);
  test_open_all(HY_TREE_BUILD_DEVICE);
  test_tree_accuracy();
  test_device_build();
  test_device_build_edges();
  test_hard_step_work();
  test_device_energy();
  test_merged_build(0);
  test_merged_build(1);
  test_remote_hard_walk(0, 0);
  test_remote_hard_walk(1, 0);
  test_remote_hard_walk(0, 1);
  test_remote_hard_walk(1, 1);
  test_build_batches();
  test_sort_methods();
  test_presort_build();
  {
    struct hy_cl *rel = NULL;
    o.mac_rel = 1;
    if (hy_cl_create(&rel, &o, &err) != 0) {
      fprintf(stderr, "no OpenCL device: %s\n", err.msg);
      return 99;
    }
    test_relative_criterion(rel, HY_TREE_BUILD_HOST);
    test_relative_criterion(rel, HY_TREE_BUILD_DEVICE);
    hy_cl_free(rel);
  }
  hy_cl_free(cl);
  hy_pool_free(pool);
  return hy_test_result();
}
