/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_tree.c: tree invariants. Keys: the interleaving equals a bit-by-bit
 * reference. Build: keys sorted, every particle in exactly one leaf, a walk
 * that opens every cell visits every node exactly once, children partition
 * their parent's particle range, moments equal direct sums over the cell's
 * particles (mass, COM, B2 exactly; b_max exact for small cells and an upper
 * bound for the largest), and r_b follows eq 5 of Watanabe & Nakasato.
 * Distributions: clustered Gaussian blobs, a uniform cube, a blob with two
 * escapers (the key cube follows the blob: hy_tree_robust_cube), coincident
 * particles, N = 1 and N = 2. Trees of points (hy_tree_point_records, the
 * remote trees of hard walks): the records hold the points once each, a
 * walk that opens every cell visits every node once, every cell has two
 * children or more (the root of one point excepted), its mass and centre
 * are those of its points, every point lies within b_max of the centre with
 * room for float rounding, r_b^2 is FLT_MAX, and the records do not depend
 * on the thread count. */
#include "config.h"

#include <float.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hy_shared.h"
#include "hy_test.h"
#include "part.h"
#include "threads.h"
#include "tree.h"

static uint64_t naive_key(uint64_t ix, uint64_t iy, uint64_t iz) {
  uint64_t k = 0;
  for (int b = 0; b < HY_KEY_BITS; b++) {
    k |= ((ix >> b) & 1) << (3 * b + 2);
    k |= ((iy >> b) & 1) << (3 * b + 1);
    k |= ((iz >> b) & 1) << (3 * b);
  }
  return k;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* hy_tree_robust_cube_sampled selects its percentiles without sorting: it
 * must give the cube that a full sort of the sample gives, on samples with
 * ties, runs of equal values and far outliers, for every sample size. */
static void test_robust_select(gsl_rng *r) {
  static double smp[3 * HY_TREE_SAMPLE], q[HY_TREE_SAMPLE];
  for (int t = 0; t < 300; t++) {
    size_t s = 2 + gsl_rng_uniform_int(r, HY_TREE_SAMPLE - 1);
    for (size_t j = 0; j < 3 * s; j++) {
      double x = gsl_ran_gaussian(r, 1.0);
      if (t % 3 == 1) x = floor(4.0 * x); /* many ties */
      if (gsl_rng_uniform(r) < 0.02) x = (gsl_rng_uniform(r) < 0.5 ? -1.0 : 1.0) * 1e12; /* outliers */
      smp[j] = x;
    }
    /* the reference: sorted per axis, k values cut from each end */
    const size_t k = s >= 400 ? s / 100 : s >= 4 ? 1 : 0;
    double mid[3], rr = 0.0;
    for (int d = 0; d < 3; d++) {
      for (size_t j = 0; j < s; j++) q[j] = smp[3 * j + d];
      qsort(q, s, sizeof q[0], cmp_dbl);
      size_t kk = k < s / 2 ? k : 0;
      mid[d] = 0.5 * (q[kk] + q[s - 1 - kk]);
      rr = fmax(rr, 0.5 * (q[s - 1 - kk] - q[kk]));
    }
    double c[3] = {0.0, 0.0, 0.0}, half = 2e12;
    int shrunk = hy_tree_robust_cube_sampled(smp, s, s, c, &half);
    int want = rr > 0.0 && 2e12 > HY_TREE_OUTLIER_FACTOR * rr;
    HY_CHECK_MSG(shrunk == want, "sample of %zu: shrunk %d, expected %d", s, shrunk, want);
    if (shrunk && want)
      for (int d = 0; d < 3; d++) HY_CHECK_MSG(c[d] == mid[d], "sample of %zu, axis %d: centre %.17g != %.17g", s, d, c[d], mid[d]);
  }
}

static void test_keys(gsl_rng *r) {
  double c[3] = {0.5, 0.5, 0.5};
  double half = 0.5;
  const double scale = (double)(1u << HY_KEY_BITS);
  for (int t = 0; t < 10000; t++) {
    uint64_t g[3];
    double x[3];
    for (int d = 0; d < 3; d++) {
      g[d] = gsl_rng_uniform_int(r, 1u << HY_KEY_BITS);
      x[d] = ((double)g[d] + 0.5) / scale; /* centre of grid cell g */
    }
    HY_CHECK_INT(hy_tree_key(x, c, half), naive_key(g[0], g[1], g[2]));
  }
  /* clamping: outside points and NaN map to the faces without UB */
  double out[3] = {-5.0, 7.0, 0.0 / 0.0};
  uint64_t max = (1u << HY_KEY_BITS) - 1;
  HY_CHECK_INT(hy_tree_key(out, c, half), naive_key(0, max, 0));
}

/* Walk the tree opening every cell: each node must be visited exactly once. */
static void check_structure(const struct hy_tree *t, const struct hy_part *p, const char *label) {
  size_t n = t->n_part, nn = hy_tree_n_nodes(t);
  for (size_t i = 1; i < n; i++) HY_CHECK_MSG(t->key[i - 1] <= t->key[i], "%s: keys not sorted at %zu", label, i);
  int *visits = hy_calloc("test", nn, sizeof(int));
  size_t steps = 0;
  for (int32_t cur = t->root; cur != HY_NONE && steps <= nn; steps++) {
    visits[cur]++;
    cur = (cur >= (int32_t)n) ? t->more[cur] : t->next[cur];
  }
  int bad = 0;
  for (size_t x = 0; x < nn; x++)
    if (visits[x] != 1) bad++;
  HY_CHECK_MSG(bad == 0, "%s: %d nodes not visited exactly once (%zu nodes)", label, bad, nn);
  hy_free(visits);

  /* every particle belongs to exactly one leaf bucket (a cell whose children
   * include it) or is attached directly as a single-particle child */
  int *owner = hy_calloc("test", n ? n : 1, sizeof(int));
  for (size_t c = 0; c < t->n_cell; c++) {
    int32_t node = (int32_t)(n + c);
    size_t expect = t->first[c], total = 0;
    for (int32_t x = t->more[node]; x != t->next[node]; x = t->next[x]) {
      size_t f, k;
      if (x < (int32_t)n) {
        owner[x]++;
        f = (size_t)x;
        k = 1;
      } else {
        f = t->first[x - n];
        k = t->count[x - n];
      }
      HY_CHECK_MSG(f == expect, "%s: cell %zu children do not tile its range", label, c);
      expect = f + k;
      total += k;
    }
    HY_CHECK_MSG(total == t->count[c], "%s: cell %zu children hold %zu of %zu particles", label, c, total,
                 t->count[c]);
    HY_CHECK_MSG(t->count[c] >= 2, "%s: cell %zu holds %zu particles", label, c, t->count[c]);
  }
  bad = 0;
  for (size_t i = 0; i < n; i++)
    if (owner[i] != 1 && !(n == 1 && owner[i] == 0)) bad++;
  HY_CHECK_MSG(bad == 0, "%s: %d particles not in exactly one cell", label, bad);
  hy_free(owner);

  /* moments against direct sums over each cell's particles */
  int bad_m = 0, bad_b = 0, bad_r = 0;
  for (size_t c = 0; c < t->n_cell; c++) {
    /* reference sums in long double so that they are more exact than the tree's */
    long double ml = 0, s[3] = {0, 0, 0};
    for (size_t i = t->first[c]; i < t->first[c] + t->count[c]; i++) {
      ml += p->mass[i];
      for (int d = 0; d < 3; d++) s[d] += (long double)p->mass[i] * p->pos[3 * i + d];
    }
    double m = (double)ml, cm[3], b2 = 0, bmax = 0;
    for (int d = 0; d < 3; d++) cm[d] = (double)(s[d] / ml);
    for (size_t i = t->first[c]; i < t->first[c] + t->count[c]; i++) {
      double r2 = 0;
      for (int d = 0; d < 3; d++) r2 += (p->pos[3 * i + d] - cm[d]) * (p->pos[3 * i + d] - cm[d]);
      b2 += p->mass[i] * r2;
      if (sqrt(r2) > bmax) bmax = sqrt(r2);
    }
    /* rounding scale: positions carry ~1e-16 of the cube's offset from the
     * origin, or of their own size where they lie outside the cube (escapers) */
    double scale = 1e-12 * (t->half + fabs(t->centre[0]) + fabs(t->centre[1]) + fabs(t->centre[2]) + bmax +
                            fabs(cm[0]) + fabs(cm[1]) + fabs(cm[2]));
    if (fabs(t->mass[c] - m) > 1e-12 * m) {
      if (bad_m < 5) fprintf(stderr, "mass c=%zu tree=%.17g direct=%.17g\n", c, t->mass[c], m);
      bad_m++;
    }
    for (int d = 0; d < 3; d++)
      if (fabs(t->cm[3 * c + d] - cm[d]) > scale) {
        if (bad_m < 5) fprintf(stderr, "cm c=%zu tree=%.17g direct=%.17g\n", c, t->cm[3 * c + d], cm[d]);
        bad_m++;
      }
    if (fabs(t->b2[c] - b2) > 1e-9 * b2 + 4.0 * m * bmax * scale) {
      if (bad_m < 5) fprintf(stderr, "b2 c=%zu count=%zu tree=%.17g direct=%.17g\n", c, t->count[c], t->b2[c], b2);
      bad_m++;
    }
    if (t->count[c] <= HY_BMAX_EXACT) {
      if (fabs(t->bmax[c] - bmax) > 1e-10 * (bmax + t->half) + 2.0 * scale) {
        if (bad_b < 5) fprintf(stderr, "bmax c=%zu count=%zu tree=%.17g direct=%.17g\n", c, t->count[c], t->bmax[c], bmax);
        bad_b++;
      }
    } else if (t->bmax[c] < bmax * (1.0 - 1e-12)) {
      bad_b++;
    }
    double rb = 0.5 * t->bmax[c] + sqrt(0.25 * t->bmax[c] * t->bmax[c] + sqrt(3.0 * t->b2[c] / t->a_err));
    if (fabs(t->rb[c] - rb) > 1e-12 * rb) bad_r++;
  }
  HY_CHECK_MSG(bad_m == 0, "%s: %d mass/COM/B2 mismatches", label, bad_m);
  HY_CHECK_MSG(bad_b == 0, "%s: %d b_max mismatches", label, bad_b);
  HY_CHECK_MSG(bad_r == 0, "%s: %d r_b mismatches", label, bad_r);
}

static void build_and_check(struct hy_part *p, int n_crit, struct hy_pool *pool, const char *label) {
  struct hy_tree t;
  hy_tree_init(&t);
  struct hy_err err;
  /* remember the particle set as a multiset of IDs: sorting must permute only */
  uint64_t id_sum = 0;
  double m_sum = 0;
  for (size_t i = 0; i < p->n; i++) {
    id_sum += p->id[i] * 2654435761u;
    m_sum += p->mass[i];
  }
  hy_tree_sort(&t, p, pool);
  uint64_t id_sum2 = 0;
  for (size_t i = 0; i < p->n; i++) id_sum2 += p->id[i] * 2654435761u;
  HY_CHECK_INT(id_sum2, id_sum);
  HY_CHECK_INT(hy_tree_build(&t, p, n_crit, 1.0 / 256.0, pool, &err), 0);
  check_structure(&t, p, label);
  HY_CHECK_REL(hy_part_total_mass(p), m_sum, 1e-12);
  /* a cell whose children are all particles is either a leaf bucket (fewer
   * than n_crit particles, or all keys equal) or a split cell whose octants
   * each hold one particle (then it has at most 8 particles) */
  for (size_t c = 0; c < t.n_cell; c++) {
    int32_t node = (int32_t)(t.n_part + c);
    int all_part = 1;
    for (int32_t x = t.more[node]; x != t.next[node]; x = t.next[x])
      if (x >= (int32_t)t.n_part) all_part = 0;
    if (all_part && t.count[c] >= (size_t)n_crit && t.count[c] > 8)
      HY_CHECK_MSG(t.key[t.first[c]] == t.key[t.first[c] + t.count[c] - 1], "%s: oversized leaf %zu", label, c);
  }
  hy_tree_free(&t);
}

/* Sort, build and export a copy of p with a pool of nt threads; returns the
 * node records (8 floats per node) and the particle IDs in key order. */
static float *build_export(const struct hy_part *p, int nt, int n_crit, size_t *n_nodes, uint64_t **ids) {
  struct hy_pool *pool = hy_pool_create(nt);
  struct hy_part q;
  hy_part_copy(&q, p);
  struct hy_tree t;
  hy_tree_init(&t);
  struct hy_err err;
  float *node = NULL;
  /* twice: the second build reuses the tree's scratch and starts from sorted order */
  for (int rep = 0; rep < 2; rep++) {
    hy_tree_sort(&t, &q, pool);
    HY_CHECK_INT(hy_tree_build(&t, &q, n_crit, 1.0 / 256.0, pool, &err), 0);
    hy_free(node);
    *n_nodes = hy_tree_n_nodes(&t);
    node = hy_malloc("test", 8 * *n_nodes, sizeof(float));
    hy_tree_export(&t, &q, node, pool);
  }
  *ids = hy_malloc("test", q.n, sizeof(uint64_t));
  memcpy(*ids, q.id, q.n * sizeof(uint64_t));
  hy_tree_free(&t);
  hy_part_free(&q);
  hy_pool_free(pool);
  return node;
}

/* The build must not depend on the thread count: node records bitwise equal. */
static void check_thread_independence(const struct hy_part *p, int n_crit, const char *label) {
  size_t nn1, nn3;
  uint64_t *id1, *id3;
  float *n1 = build_export(p, 1, n_crit, &nn1, &id1);
  float *n3 = build_export(p, 3, n_crit, &nn3, &id3);
  HY_CHECK_MSG(nn1 == nn3, "%s: %zu nodes with 1 thread, %zu with 3", label, nn1, nn3);
  if (nn1 == nn3) {
    HY_CHECK_MSG(memcmp(id1, id3, p->n * sizeof(uint64_t)) == 0, "%s: particle order differs (1 vs 3 threads)", label);
    size_t bad = 0;
    for (size_t x = 0; x < nn1; x++)
      if (memcmp(n1 + 8 * x, n3 + 8 * x, 8 * sizeof(float)) != 0) bad++;
    HY_CHECK_MSG(bad == 0, "%s: %zu of %zu node records differ (1 vs 3 threads)", label, bad, nn1);
  }
  hy_free(n1);
  hy_free(n3);
  hy_free(id1);
  hy_free(id3);
}

static int32_t bits_int(float f) {
  int32_t v;
  memcpy(&v, &f, sizeof v);
  return v;
}

static int cmp_point(const void *a, const void *b) {
  const float *x = a, *y = b;
  for (int k = 0; k < 4; k++)
    if (x[k] != y[k]) return x[k] < y[k] ? -1 : 1;
  return 0;
}

/* hy_tree_point_records of m points (4 floats each) in box, checked. */
static void check_points(const float *pos4, size_t m, const float box[6], int n_crit, struct hy_pool *pool,
                         const char *label) {
  struct hy_tree t;
  hy_tree_init(&t);
  float *rec = hy_malloc("records", 16 * m, sizeof(float));
  const size_t nc = hy_tree_point_records(&t, pos4, m, box, n_crit, rec, pool);
  const size_t nn = m + nc;
  HY_CHECK_MSG(nc >= 1 && (m < 2 || nc <= m - 1), "%s: %zu cells for %zu points", label, nc, m);
  /* the points, once each */
  float *a = hy_malloc("points", 4 * m, sizeof(float)), *b = hy_malloc("points", 4 * m, sizeof(float));
  memcpy(a, pos4, 4 * m * sizeof(float));
  for (size_t i = 0; i < m; i++) memcpy(b + 4 * i, rec + 8 * i, 4 * sizeof(float));
  qsort(a, m, 4 * sizeof(float), cmp_point);
  qsort(b, m, 4 * sizeof(float), cmp_point);
  HY_CHECK_MSG(memcmp(a, b, 4 * m * sizeof(float)) == 0, "%s: the records' points are not the input's", label);
  /* a walk that opens every cell visits every node once */
  unsigned char *seen = hy_calloc("seen", nn, 1);
  size_t visits = 0, twice = 0;
  for (int32_t x = (int32_t)m; x != HY_NONE && visits <= nn; visits++) {
    HY_CHECK_MSG(x >= 0 && (size_t)x < nn, "%s: node %d out of range", label, x);
    if (x < 0 || (size_t)x >= nn) break;
    twice += seen[x]++;
    x = bits_int(rec[8 * (size_t)x + ((size_t)x < m ? 6 : 7)]);
  }
  HY_CHECK_MSG(visits == nn && twice == 0, "%s: %zu visits of %zu nodes, %zu twice", label, visits, nn, twice);
  /* each cell: children, moments, b_max against every point below */
  size_t bad_kids = 0, bad_mass = 0, bad_b = 0, bad_rec = 0;
  double worst = 0.0;
  for (size_t c = m; c < nn; c++) {
    const float *o = rec + 8 * c;
    const int32_t after = bits_int(o[6]);
    size_t kids = 0;
    for (int32_t x = bits_int(o[7]); x != after && kids <= nn; x = bits_int(rec[8 * (size_t)x + 6])) kids++;
    if (kids < 2 && !(c == m && m == 1)) bad_kids++;
    double mass = 0.0, mx[3] = {0.0, 0.0, 0.0}, dmax = 0.0, lo[3] = {INFINITY, INFINITY, INFINITY},
           hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    size_t steps = 0;
    for (int32_t x = bits_int(o[7]); x != after && steps <= nn; steps++) {
      const float *q = rec + 8 * (size_t)x;
      if ((size_t)x >= m) { /* open the cell */
        x = bits_int(q[7]);
        continue;
      }
      mass += q[3];
      double d2 = 0.0;
      for (int d = 0; d < 3; d++) {
        mx[d] += (double)q[3] * q[d];
        d2 += ((double)q[d] - o[d]) * ((double)q[d] - o[d]);
        lo[d] = fmin(lo[d], q[d]);
        hi[d] = fmax(hi[d], q[d]);
      }
      dmax = fmax(dmax, sqrt(d2));
      x = bits_int(q[6]);
    }
    if (fabs(mass - o[3]) > 1e-6 * mass) bad_mass++;
    for (int d = 0; d < 3; d++) /* the centre among its points (massless cells: their mean) */
      if (o[d] < lo[d] - 1e-6 * (fabs(lo[d]) + 1.0) || o[d] > hi[d] + 1e-6 * (fabs(hi[d]) + 1.0)) bad_mass++;
    for (int d = 0; d < 3; d++)
      if (mass > 0.0 && fabs(mx[d] / mass - o[d]) > 1e-6 * (fabs(o[d]) + (double)o[5])) bad_mass++;
    if (dmax * (1.0 + 4.0 * FLT_EPSILON) > (double)o[5]) bad_b++;
    if (dmax > 0.0) worst = fmax(worst, (double)o[5] / dmax);
    if (o[4] != FLT_MAX) bad_rec++;
  }
  for (size_t i = 0; i < m; i++)
    if (rec[8 * i + 4] != 0.0f || rec[8 * i + 5] != 0.0f || bits_int(rec[8 * i + 7]) != HY_NONE) bad_rec++;
  HY_CHECK_MSG(bad_kids == 0, "%s: %zu cells with fewer than two children", label, bad_kids);
  HY_CHECK_MSG(bad_mass == 0, "%s: %zu wrong masses or centres", label, bad_mass);
  HY_CHECK_MSG(bad_b == 0, "%s: %zu cells with a point beyond b_max", label, bad_b);
  HY_CHECK_MSG(bad_rec == 0, "%s: %zu records with wrong r_b^2, b_max or more", label, bad_rec);
  /* the same records with 1 and 3 threads */
  struct hy_pool *p1 = hy_pool_create(1), *p3 = hy_pool_create(3);
  float *r1 = hy_malloc("records", 16 * m, sizeof(float)), *r3 = hy_malloc("records", 16 * m, sizeof(float));
  const size_t n1 = hy_tree_point_records(&t, pos4, m, box, n_crit, r1, p1);
  const size_t n3 = hy_tree_point_records(&t, pos4, m, box, n_crit, r3, p3);
  HY_CHECK_MSG(n1 == nc && n3 == nc && memcmp(r1, rec, 8 * nn * sizeof(float)) == 0 &&
                   memcmp(r3, rec, 8 * nn * sizeof(float)) == 0,
               "%s: the records depend on the thread count", label);
  printf("%-28s %zu points, %zu cells, b_max / max distance up to %.3f\n", label, m, nc, worst);
  hy_free(r1);
  hy_free(r3);
  hy_pool_free(p1);
  hy_pool_free(p3);
  hy_free(seen);
  hy_free(a);
  hy_free(b);
  hy_free(rec);
  hy_tree_free(&t);
}

static void test_point_records(gsl_rng *r, struct hy_pool *pool) {
  const size_t n = 30000;
  float *x = hy_malloc("points", 4 * n, sizeof(float));
  float box[6] = {INFINITY, INFINITY, INFINITY, -INFINITY, -INFINITY, -INFINITY};
  for (size_t i = 0; i < n; i++) { /* blobs of three scales around a shell of items */
    const int blob = (int)(i % 3);
    const double sig = blob == 0 ? 1.0 : blob == 1 ? 1e-3 : 0.05;
    for (int d = 0; d < 3; d++) {
      x[4 * i + d] = (float)((blob == 2 ? 3.0 : 0.0) + gsl_ran_gaussian(r, sig));
      box[d] = fminf(box[d], x[4 * i + d]);
      box[3 + d] = fmaxf(box[3 + d], x[4 * i + d]);
    }
    x[4 * i + 3] = (float)(0.5 + gsl_rng_uniform(r));
  }
  check_points(x, n, box, 16, pool, "points: blobs");
  check_points(x, n, box, 1, pool, "points: blobs, n_crit 1");
  check_points(x, 5000, box, 64, pool, "points: blobs, n_crit 64");
  const float unit[6] = {0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f};
  for (size_t i = 0; i < 300; i++) /* massless points spread out: every centre geometric */
    for (int d = 0; d < 4; d++) x[4 * i + d] = d < 3 ? (float)gsl_rng_uniform(r) : 0.0f;
  check_points(x, 300, unit, 4, pool, "points: massless");
  for (size_t i = 0; i < 50; i++) /* coincident: 40 at one point, massless ones among them */
    for (int d = 0; d < 4; d++) x[4 * i + d] = i < 40 ? (d < 3 ? 0.25f : (i < 20 ? 0.0f : 1.0f)) : (float)gsl_rng_uniform(r);
  check_points(x, 50, unit, 16, pool, "points: coincident");
  check_points(x + 4 * 40, 2, unit, 16, pool, "points: two");
  check_points(x + 4 * 40, 1, unit, 16, pool, "points: one");
  hy_free(x);
}

int main(void) {
  gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
  if (!r) return 99;
  gsl_rng_set(r, 12345);
  struct hy_pool *pool = hy_pool_create(2);
  test_robust_select(r);
  test_keys(r);
  test_point_records(r, pool);

  struct hy_part p;
  hy_part_init(&p);
  /* clustered blobs with very different scales, unequal masses */
  size_t n = 30000;
  hy_part_resize(&p, n);
  for (size_t i = 0; i < n; i++) {
    int blob = (int)(i % 3);
    double sig = blob == 0 ? 1.0 : blob == 1 ? 1e-3 : 0.05;
    for (int d = 0; d < 3; d++) p.pos[3 * i + d] = (blob == 2 ? 3.0 : 0.0) + gsl_ran_gaussian(r, sig);
    p.mass[i] = 0.5 + gsl_rng_uniform(r);
    p.id[i] = i + 1;
  }
  check_thread_independence(&p, 16, "blobs threads");
  build_and_check(&p, 16, pool, "blobs ncrit 16");
  build_and_check(&p, 1, pool, "blobs ncrit 1");
  build_and_check(&p, 64, pool, "blobs ncrit 64");
  check_thread_independence(&p, 1, "blobs threads ncrit 1");

  /* uniform cube larger than HY_BMAX_EXACT (root uses the b_max bound) */
  n = 100000;
  hy_part_resize(&p, n);
  for (size_t i = 0; i < n; i++) {
    for (int d = 0; d < 3; d++) p.pos[3 * i + d] = 1e3 + gsl_rng_uniform(r);
    p.mass[i] = 1.0 / (double)n;
    p.id[i] = i + 1;
  }
  check_thread_independence(&p, 16, "uniform threads");
  build_and_check(&p, 16, pool, "uniform 100k");

  /* escapers: a Gaussian blob of radius 1 plus one particle at 1e12 and one
   * at -1e9: the key cube follows the blob (its keys stay distinct), the far
   * particles are clamped into it and the tree is still valid; a blob
   * without them keeps its exact bounding cube */
  n = 20000;
  hy_part_resize(&p, n);
  for (size_t i = 0; i < n; i++) {
    for (int d = 0; d < 3; d++) p.pos[3 * i + d] = 5.0 + gsl_ran_gaussian(r, 1.0);
    p.mass[i] = 1.0 / (double)n;
    p.id[i] = i + 1;
  }
  {
    double c0[3], h0, c1[3], h1;
    hy_tree_bounds(&p, c0, &h0);
    struct hy_tree t;
    hy_tree_init(&t);
    hy_tree_sort(&t, &p, pool);
    HY_CHECK_ABS(t.half, h0, 0.0); /* no escaper: the cube is the bounding cube */
    hy_tree_free(&t);
    p.pos[3 * 7] = 1e12;
    p.pos[3 * 12345 + 2] = -1e9;
    hy_tree_bounds(&p, c1, &h1);
    HY_CHECK_MSG(h1 < 1e4, "half side %g: the cube should follow the blob", h1);
    for (int d = 0; d < 3; d++) HY_CHECK_ABS(c1[d], 5.0, 0.5);
    hy_tree_init(&t);
    hy_tree_sort(&t, &p, pool);
    size_t distinct = 1;
    for (size_t i = 1; i < n; i++) distinct += t.key[i] != t.key[i - 1];
    HY_CHECK_MSG(distinct > n - n / 100, "only %zu distinct keys of %zu", distinct, n);
    hy_tree_free(&t);
    build_and_check(&p, 16, pool, "escapers");
    check_thread_independence(&p, 16, "escapers threads");
    /* a small set: 50 particles and one escaper */
    hy_part_resize(&p, 51);
    p.pos[3 * 50] = 1e12;
    hy_tree_bounds(&p, c1, &h1);
    HY_CHECK_MSG(h1 < 1e4, "51 particles: half side %g: the cube should follow the 50", h1);
    build_and_check(&p, 4, pool, "small set with an escaper");
  }

  /* coincident particles: 40 at one point plus a few others */
  n = 50;
  hy_part_resize(&p, n);
  for (size_t i = 0; i < n; i++) {
    for (int d = 0; d < 3; d++) p.pos[3 * i + d] = i < 40 ? 0.25 : gsl_rng_uniform(r);
    p.mass[i] = 1.0;
    p.id[i] = i + 1;
  }
  build_and_check(&p, 16, pool, "coincident");

  hy_part_resize(&p, 2);
  p.pos[0] = 0;
  p.pos[3] = 1;
  build_and_check(&p, 16, pool, "two");
  hy_part_resize(&p, 1);
  build_and_check(&p, 16, pool, "one");

  hy_part_free(&p);
  hy_pool_free(pool);
  gsl_rng_free(r);
  return hy_test_result();
}
