/* SPDX-License-Identifier: GPL-3.0-or-later
 * sim.c: see sim.h.
 *
 * Hybrid step of length dt_s = n dt_h (merged form of the symmetric
 * multi-rate leapfrog, spec.md section 1):
 *   v += dt_h/2 (a_h + n a_s)                 opening half kick (acc_w)
 *   for k = 1 .. n:
 *     x += dt_h v;  build the tree of the new positions
 *     k < n:  a_h from the hard walk;  v += dt_h a_h   (two merged half kicks)
 *     k = n:  acc_w = a_h + n a_s;     v += dt_h/2 acc_w (closing half kick)
 * so velocities are synchronised at every soft-step boundary and the soft
 * force is never reused at a hard step. Every hard step builds its tree
 * anew: a walk decides the MAC for n_vec sinks together, grouped by the
 * build's keys, so a tree kept from an earlier step with its particles
 * refitted groups sinks that have since drifted apart, and each sink's
 * force errors then depend on its neighbours' relative velocities: they do
 * net work, and the energy drifts (tests/test_forces.c).
 *
 * The schedule (hy_sim_step, the last section) is this one sequence for
 * every scheme (tree and direct: n = 1), rank count and place of the state
 * (host or device arithmetic, chosen per call by the helpers):
 *   opening half kick
 *   hard steps: drift; hard force (distributed: the hard LET exchanged in
 *     it); kick; with the next soft step's decomposition made ahead in
 *     them (distributed hybrid): the draw in the first, while the device
 *     walks the local tree; in the last the samples' gather queued ahead of
 *     that walk and the cut while it runs (on the host: after the kick)
 *   closing drift; the decomposition; the soft-step force; closing half kick */
#include "config.h"

#include "sim.h"

#include "diag.h"

#include <math.h>
#include <string.h>

#include "alloc.h"
#include "decomp.h"
#include "hy_shared.h"
#include "trace.h"

struct hy_sim {
  struct hy_part *p;
  struct hy_force *f;
  struct hy_pool *pool;
  struct hy_sim_cfg cfg;
  double t;
  long step;      /* steps done since t0 (time = t0 + step * length, no drift of rounding) */
  double t0;
  double *soft;   /* scratch: soft part of a split walk, 3 per particle */
  size_t soft_n;
  /* the state on the device (hy_force_state_*) */
  int on_device;  /* the state lives on the device between steps */
  int dev_fresh;  /* the device copy is current */
  int host_fresh; /* p is current */
  int lazy;       /* sync p only when a step computed a `want` */
  int dev_acc, dev_pot; /* the last device force made p->acc, p->pot */
  struct hy_moved moved; /* the last decomposition */
  int ahead;             /* how far the hard steps made the next decomposition (enum ahead) */
  int ahead_dev;         /* its samples come from the device */
};

/* The next soft step's decomposition made ahead in its hard steps
 * (cfg.dd_ahead, hy_decomp_pre_*): what is done of it, in this order. */
enum ahead { AHEAD_NONE, AHEAD_DRAWN, AHEAD_SAMPLED, AHEAD_CUT };

int hy_scheme_parse(const char *name, enum hy_scheme *out) {
  static const char *names[] = {"hybrid", "tree", "direct"};
  for (int i = 0; i < 3; i++)
    if (strcmp(name, names[i]) == 0) {
      *out = (enum hy_scheme)i;
      return 0;
    }
  return -1;
}

const char *hy_scheme_name(enum hy_scheme s) {
  switch (s) {
    case HY_SCHEME_HYBRID: return "hybrid";
    case HY_SCHEME_TREE: return "tree";
    case HY_SCHEME_DIRECT: return "direct";
  }
  return "?";
}

struct hy_sim *hy_sim_create(struct hy_part *p, struct hy_force *f, struct hy_pool *pool, const struct hy_sim_cfg *cfg,
                             double t0) {
  struct hy_sim *s = hy_calloc("integrator", 1, sizeof *s);
  s->p = p;
  s->f = f;
  s->pool = pool;
  s->cfg = *cfg;
  if (s->cfg.scheme != HY_SCHEME_HYBRID) s->cfg.n_ratio = 1;
  s->t = s->t0 = t0;
  int want_dev = cfg->state == HY_STATE_DEVICE || (cfg->state == HY_STATE_AUTO && !hy_cl_is_cpu(hy_force_cl(f)));
  /* distributed: the hybrid scheme (its soft step's decomposition works on
   * the host's copy of the positions and velocities) */
  const int scheme_ok = cfg->decompose ? cfg->scheme == HY_SCHEME_HYBRID : cfg->scheme != HY_SCHEME_DIRECT;
  s->on_device = want_dev && scheme_ok && hy_force_state_possible(f, p);
  s->host_fresh = 1;
  return s;
}

int hy_sim_state_on_device(const struct hy_sim *s) { return s->on_device; }
void hy_sim_set_lazy_sync(struct hy_sim *s, int lazy) { s->lazy = lazy; }
void hy_sim_host_changed(struct hy_sim *s) {
  s->dev_fresh = 0;
  s->host_fresh = 1;
}

int hy_sim_sync(struct hy_sim *s, struct hy_err *err) {
  if (!s->on_device || s->host_fresh) return 0;
  /* the tree scheme's full walk leaves its acceleration in the kick
   * acceleration only: the device holds no separate total for it */
  const int tree = s->cfg.scheme == HY_SCHEME_TREE;
  if (hy_force_state_get(s->f, s->p, s->dev_acc && !tree, s->dev_pot, err) != 0) return -1;
  if (s->dev_acc && tree) memcpy(s->p->acc, s->p->acc_w, 3 * s->p->n * sizeof(double));
  s->host_fresh = 1;
  return 0;
}

/* with_accw = 0: the device's kick acceleration is not needed (a force
 * comes before the next kick) */
static int to_device(struct hy_sim *s, int with_accw, struct hy_err *err) {
  if (s->dev_fresh) return 0;
  if (hy_force_state_put(s->f, s->p, with_accw, err) != 0) return -1;
  s->dev_fresh = 1;
  return 0;
}

struct nonfinite_job {
  const struct hy_part *p;
  size_t *count; /* per thread */
};

static void nonfinite_body(void *arg, size_t b, size_t e, int tid) {
  const struct nonfinite_job *j = arg;
  const struct hy_part *p = j->p;
  size_t k = 0;
  for (size_t i = 3 * b; i < 3 * e; i++) k += !isfinite(p->pos[i]) || !isfinite(p->vel[i]) || !isfinite(p->acc_w[i]);
  j->count[tid] += k;
}

int hy_sim_count_nonfinite(struct hy_sim *s, size_t *n_bad, struct hy_err *err) {
  if (s->on_device && !s->host_fresh) return hy_force_state_finite(s->f, n_bad, err);
  const int nt = hy_pool_size(s->pool);
  struct nonfinite_job j = {.p = s->p, .count = hy_calloc("finite check", (size_t)nt, sizeof(size_t))};
  hy_pool_for(s->pool, s->p->n, 65536, nonfinite_body, &j);
  *n_bad = 0;
  for (int t = 0; t < nt; t++) *n_bad += j.count[t];
  hy_free(j.count);
  return 0;
}

int hy_sim_energy_sums(struct hy_sim *s, double sums[HY_ENERGY_SUMS], struct hy_err *err) {
  if (s->on_device && !s->host_fresh) {
    if (!s->dev_pot) return hy_err_set(err, "internal error: energy sums of a step that computed no potentials");
    return hy_force_state_energy(s->f, sums, err);
  }
  hy_diag_sums(s->p, s->pool, sums);
  return 0;
}

void hy_sim_free(struct hy_sim *s) {
  if (!s) return;
  hy_free(s->soft);
  hy_free(s);
}

double hy_sim_time(const struct hy_sim *s) { return s->t; }
long hy_sim_steps(const struct hy_sim *s) { return s->step; }

void hy_sim_resume(struct hy_sim *s, long steps) {
  hy_sim_host_changed(s); /* the caller restored p */
  s->step = steps;
  s->t = s->t0 + (double)steps * (double)s->cfg.n_ratio * s->cfg.dt_h;
}
double hy_sim_step_length(const struct hy_sim *s) { return s->cfg.n_ratio * s->cfg.dt_h; }

/* ----------------------------------------------------- kicks and drifts */

struct kd_job {
  double *x;
  const double *v;
  double dt;
};

static void kd_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct kd_job *j = arg;
  for (size_t i = 3 * b; i < 3 * e; i++) j->x[i] += j->dt * j->v[i];
}

static void kick(struct hy_sim *s, const double *acc, double dt) {
  struct kd_job j = {.x = s->p->vel, .v = acc, .dt = dt};
  hy_pool_for(s->pool, s->p->n, 16384, kd_body, &j);
}

static void drift(struct hy_sim *s, double dt) {
  struct kd_job j = {.x = s->p->pos, .v = s->p->vel, .dt = dt};
  hy_pool_for(s->pool, s->p->n, 16384, kd_body, &j);
}

struct comb_job {
  double *acc_w, *acc;
  const double *hard, *soft;
  double n;
};

static void comb_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct comb_job *j = arg;
  for (size_t i = 3 * b; i < 3 * e; i++) {
    j->acc_w[i] = j->hard[i] + j->n * j->soft[i];
    j->acc[i] = j->hard[i] + j->soft[i];
  }
}

/* -------------------------------------------------------------- forces */

struct scale_job {
  double *acc;
  const double *acc_w;
  double c;
};

static void scale_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct scale_job *j = arg;
  for (size_t i = 3 * b; i < 3 * e; i++) j->acc[i] = j->c * j->acc_w[i];
}

/* The relative criterion: p->acc, which scales the sinks of the next
 * walks, from the kick acceleration of a walk of this mode
 * (hy_force_acc_scale; the device state's unpack does the same). */
static void estimate_acc(struct hy_sim *s, int mode) {
  const double c = hy_force_acc_scale(s->f, mode);
  if (!(c > 0)) return;
  struct scale_job j = {.acc = s->p->acc, .acc_w = s->p->acc_w, .c = c};
  hy_pool_for(s->pool, s->p->n, 16384, scale_body, &j);
}

/* Full (soft-step) force at the current positions into p->acc_w, plus the extras. */
static int boundary_force(struct hy_sim *s, unsigned want, struct hy_err *err) {
  struct hy_part *p = s->p;
  double *pot = (want & HY_WANT_POT) ? p->pot : NULL;
  if (s->cfg.scheme == HY_SCHEME_DIRECT) {
    if (hy_force_direct(s->f, p, p->acc_w, pot, err) != 0) return -1;
    if (want & HY_WANT_ACC) memcpy(p->acc, p->acc_w, 3 * p->n * sizeof(double));
    return 0;
  }
  if (hy_force_build(s->f, p, err) != 0) return -1;
  if (s->cfg.scheme == HY_SCHEME_TREE) {
    if (hy_force_walk(s->f, p, HY_WALK_FULL, p->acc_w, NULL, pot, err) != 0) return -1;
    if (want & HY_WANT_ACC) memcpy(p->acc, p->acc_w, 3 * p->n * sizeof(double));
    estimate_acc(s, HY_WALK_FULL);
    return 0;
  }
  if (!(want & HY_WANT_ACC)) {
    if (hy_force_walk(s->f, p, HY_WALK_SOFTSTEP, p->acc_w, NULL, pot, err) != 0) return -1;
    estimate_acc(s, HY_WALK_SOFTSTEP);
    return 0;
  }
  /* the total acceleration is wanted: split walk, then combine */
  if (s->soft_n < p->n) {
    hy_free(s->soft);
    s->soft = hy_malloc("soft accelerations", hy_size_mul_or_die(p->n, 3, "soft accelerations"), sizeof(double));
    s->soft_n = p->n;
  }
  if (hy_force_walk(s->f, p, HY_WALK_SPLIT, p->acc, s->soft, pot, err) != 0) return -1;
  struct comb_job j = {.acc_w = p->acc_w, .acc = p->acc, .hard = p->acc, .soft = s->soft,
                       .n = (double)s->cfg.n_ratio};
  /* hard and acc are the same array: comb_body reads hard[i] before it writes acc[i] */
  hy_pool_for(s->pool, p->n, 16384, comb_body, &j);
  return 0;
}

/* dev: the positions and velocities are on the device, p's are stale */
static int decompose(struct hy_sim *s, struct hy_step_times *tm, int dev, struct hy_err *err) {
  if (!s->cfg.decompose) return 0;
  double t0 = hy_wtime();
  s->moved.known = 0;
  int rc = s->cfg.decompose(s->cfg.decompose_ctx, s->p, dev ? hy_force_decomp_source(s->f) : NULL, &s->moved, err);
  if (tm) tm->dd += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "decompose", t0);
  return rc;
}

/* The boundary force with the state on the device: the kick acceleration,
 * and the total acceleration (split walk) or the potential when wanted. */
static int device_boundary_force(struct hy_sim *s, unsigned want, struct hy_err *err) {
  int mode = s->cfg.scheme == HY_SCHEME_TREE ? HY_WALK_FULL
             : (want & HY_WANT_ACC)           ? HY_WALK_SPLIT
                                              : HY_WALK_SOFTSTEP;
  int pot = (want & HY_WANT_POT) != 0;
  if (hy_force_state_force(s->f, s->p, mode, pot, err) != 0) return -1;
  s->dev_acc = (want & HY_WANT_ACC) != 0;
  s->dev_pot = pot;
  return 0;
}

int hy_sim_start(struct hy_sim *s, unsigned want, struct hy_err *err) {
  if (decompose(s, NULL, 0, err) != 0) return -1;
  hy_force_stats_reset(s->f);
  /* the relative criterion scales each sink by its last acceleration: a
   * first force with the absolute criterion (p->acc is zero) makes them */
  const int twice = hy_force_config(s->f)->mac_alpha > 0 && s->cfg.scheme != HY_SCHEME_DIRECT;
  if (!s->on_device || s->cfg.decompose) /* distributed: on the host */
    return (twice && boundary_force(s, 0, err) != 0) ? -1 : boundary_force(s, want, err);
  if (to_device(s, 1, err) != 0 || (twice && device_boundary_force(s, 0, err) != 0) ||
      device_boundary_force(s, want, err) != 0)
    return -1;
  s->host_fresh = 0;
  return hy_sim_sync(s, err);
}

static void add_stats(struct hy_force_stats *a, const struct hy_force_stats *b) {
  a->sort += b->sort;
  a->build += b->build;
  a->export_ += b->export_;
  a->upload += b->upload;
  a->kernel += b->kernel;
  a->download += b->download;
  a->walk_wall += b->walk_wall;
  a->dev_sort += b->dev_sort;
  a->dev_cells += b->dev_cells;
  a->dev_moments += b->dev_moments;
  a->n_pp += b->n_pp;
  a->n_pc += b->n_pc;
  a->let_boxes += b->let_boxes;
  a->let_select += b->let_select;
  a->let_comm += b->let_comm;
  a->remote_build += b->remote_build;
  a->wait_device += b->wait_device;
  a->device_busy += b->device_busy;
  a->direct_comm += b->direct_comm;
  a->n_walks += b->n_walks;
  a->merged_builds += b->merged_builds;
  a->merged_whole += b->merged_whole;
  a->let_recv += b->let_recv;
  a->let_recv_hard += b->let_recv_hard;
  a->let_sent += b->let_sent;
  a->let_bytes_sent += b->let_bytes_sent;
  a->let_bytes_recv += b->let_bytes_recv;
}

static void take_stats(struct hy_sim *s, struct hy_step_times *tm, int hard) {
  struct hy_force_stats st;
  hy_force_stats_get(s->f, &st);
  hy_force_stats_reset(s->f);
  add_stats(hard ? &tm->st_hard : &tm->st_soft, &st);
  tm->tree += st.sort + st.build + st.export_ + st.remote_build;
  tm->kernel += st.kernel;
  tm->transfer += st.upload + st.download;
  tm->walk_wall += st.walk_wall;
  if (hard) {
    tm->pp_hard += st.n_pp;
    tm->pc_hard += st.n_pc;
  } else {
    tm->pp_soft += st.n_pp;
    tm->pc_soft += st.n_pc;
  }
}

/* Whether the soft step's decomposition is made ahead, in its hard steps. */
static int ahead_on(const struct hy_sim *s) {
  return s->cfg.decompose && s->cfg.dd_ahead && s->cfg.scheme == HY_SCHEME_HYBRID;
}

/* The decomposition made ahead, part by part: each once per soft step, and
 * each making the ones before it that are not made yet. The draw takes
 * N_hard of the last hard LET exchange, as the decomposition would. */
static void ahead_draw(struct hy_sim *s) {
  if (s->ahead >= AHEAD_DRAWN) return;
  hy_decomp_pre_draw(s->cfg.dd_ahead, s->p->n, (double)hy_force_last_hard_items(s->f));
  s->ahead = AHEAD_DRAWN;
}

/* The samples' positions (from the device: a gather queued there, which the cut completes). */
static int ahead_sample(struct hy_sim *s, struct hy_err *err) {
  ahead_draw(s);
  if (s->ahead >= AHEAD_SAMPLED) return 0;
  const struct hy_decomp_dev *dev = s->ahead_dev ? hy_force_decomp_source(s->f) : NULL;
  if (hy_decomp_pre_sample(s->cfg.dd_ahead, s->p, dev, err) != 0) return -1;
  s->ahead = AHEAD_SAMPLED;
  return 0;
}

/* The cut (collective), on a thread of rank 0's: the exchange at the soft step waits for it. */
static int ahead_cut(struct hy_sim *s, struct hy_err *err) {
  if (ahead_sample(s, err) != 0) return -1;
  if (s->ahead >= AHEAD_CUT) return 0;
  if (hy_decomp_pre_cut_begin(s->cfg.dd_ahead, err) != 0) return -1;
  s->ahead = AHEAD_CUT;
  return 0;
}

/* ---------------------------------------- the state, on the host or device */

/* Where the state lives for a step: on the device, or on the host (the
 * host state, or a distributed rank that holds fewer than two particles). */
static int dev_now(const struct hy_sim *s) { return s->on_device && s->p->n >= 2; }

/* x += dt v where the state lives. */
static int state_drift(struct hy_sim *s, int dev, double dt, struct hy_err *err) {
  if (dev) return hy_force_state_move(s->f, 0, dt, err);
  drift(s, dt);
  return 0;
}

/* v += dt acc_w where the state lives. */
static int state_kick(struct hy_sim *s, int dev, double dt, struct hy_err *err) {
  if (dev) return hy_force_state_move(s->f, 1, dt, err);
  kick(s, s->p->acc_w, dt);
  return 0;
}

/* The opening half kick, with a stale device copy sent first: on one rank
 * with the kick acceleration, kicked there; distributed kicked on the host,
 * then sent without it (the next force makes it anew). */
static int opening_kick(struct hy_sim *s, int dev, double dt, struct hy_err *err) {
  if (dev && !s->dev_fresh && s->cfg.decompose) {
    kick(s, s->p->acc_w, dt);
    hy_sim_host_changed(s);
    if (to_device(s, 0, err) != 0) return -1;
    s->host_fresh = 0;
    return 0;
  }
  if (dev) {
    if (to_device(s, 1, err) != 0) return -1;
    s->host_fresh = 0;
  }
  return state_kick(s, dev, dt, err);
}

/* The soft step's decomposition (distributed runs; tree and direct: every
 * dd_every-th step); *dev: where the state lives after it. With the state
 * on the device: first the key cube, so that the device sorts the kept
 * particles' keys while the host exchanges the others
 * (hy_force_cube_ahead); the decomposition reads the device's positions
 * and velocities (p's masses, IDs and types are current); then the device
 * moves the kept particles into the holes and receives the others. */
static int soft_decompose(struct hy_sim *s, struct hy_step_times *tm, int *dev, struct hy_err *err) {
  if (!s->cfg.decompose) return 0;
  const int every = s->cfg.scheme == HY_SCHEME_HYBRID || s->cfg.dd_every < 1 ? 1 : s->cfg.dd_every;
  if ((s->step + 1) % every != 0) return 0;
  if (!s->on_device) return decompose(s, tm, 0, err);
  const int was_dev = *dev;
  if (hy_force_cube_ahead(s->f, s->p, was_dev, err) != 0 || decompose(s, tm, was_dev, err) != 0) return -1;
  *dev = dev_now(s);
  const struct hy_moved *m = &s->moved;
  if (was_dev && *dev && m->known) {
    if (hy_force_state_patch(s->f, s->p, m->holes, m->srcs, m->n_holes, m->n_keep, err) != 0) return -1;
    s->dev_fresh = 1;
    s->host_fresh = 0;
  } else if (was_dev && *dev) {
    return hy_err_set(err, "internal error: a decomposition of the device state that says nothing of its moves");
  } else {
    hy_sim_host_changed(s); /* p is complete (hy_decomp_exchange_dev completes a rank left with one) */
  }
  return 0;
}

/* The soft-step force at the current positions where the state lives:
 * acc_w = a_h + n a_s (tree, direct: the full force), and the extras in
 * `want`. */
static int soft_force(struct hy_sim *s, int dev, unsigned want, struct hy_err *err) {
  if (!dev) return boundary_force(s, want, err);
  if (to_device(s, 0, err) != 0 || device_boundary_force(s, want, err) != 0) return -1;
  s->host_fresh = 0;
  return 0;
}

/* The end of a step whose soft part began at t0: its costs, the step count and the time. */
static void end_step(struct hy_sim *s, struct hy_step_times *tm, double t_start, double t0) {
  double t1 = hy_wtime();
  hy_trace(HY_TRACE_MAIN, "soft_step", t0);
  tm->soft = t1 - t0;
  take_stats(s, tm, 0);
  tm->total = t1 - t_start;
  s->step++;
  s->t = s->t0 + (double)s->step * (double)s->cfg.n_ratio * s->cfg.dt_h;
}

/* ------------------------------------------------------ the step schedule */

/* The hard force of a distributed run with the state on the device, with
 * the decomposition made ahead (ahead) in the waits of its walk: the
 * draw (host work) in the first hard step, after the LET exchange while
 * the local walk runs (N_hard of that exchange, as the host path takes it
 * after the step); in the last hard step the samples' gather queued on
 * the device ahead of the local walk when drawn already, and the cut,
 * with its gather on rank 0 and broadcast, while that walk runs (with one
 * hard step the draw and the gather come there too, the gather then
 * behind the walk). */
static int device_hard_force(struct hy_sim *s, int ahead, int last, struct hy_err *err) {
  struct hy_force *f = s->f;
  const int waits = hy_force_state_force_begin(f, s->p, HY_WALK_HARD, 0, err);
  if (waits <= 0) return waits;
  int rc = 0;
  /* the device idle: what is queued now runs ahead of the local walk */
  if (ahead && last && s->ahead == AHEAD_DRAWN) rc = ahead_sample(s, err);
  if (rc == 0) rc = hy_force_state_force_exchange(f, s->p, err);
  /* while the device walks the local tree */
  if (rc == 0 && ahead) {
    if (last)
      rc = ahead_cut(s, err);
    else
      ahead_draw(s);
  }
  return hy_force_state_force_end(f, s->p, rc, err);
}

/* The hard force into acc_w where the state lives (distributed: with the
 * hard LET's exchange, and on the device the decomposition made ahead in
 * its waits). */
static int hard_force(struct hy_sim *s, int dev, int ahead, int last, struct hy_err *err) {
  if (dev) return device_hard_force(s, ahead, last, err);
  if (hy_force_build(s->f, s->p, err) != 0) return -1;
  return hy_force_walk(s->f, s->p, HY_WALK_HARD, s->p->acc_w, NULL, NULL, err);
}

/* Hard step k of n (1 <= k < n): drift, the hard force (distributed: the
 * hard LET's exchange in it), the two merged half kicks. In distributed
 * hybrid runs the next soft step's decomposition is made ahead: drawn in
 * the first hard step, sampled and cut in the last, in the waits of the
 * device's walk (device_hard_force), and what they left (all of it on the
 * host) after the kick. */
static int hard_step(struct hy_sim *s, int dev, int k, int n, struct hy_err *err) {
  const double dt = s->cfg.dt_h;
  const int ahead = ahead_on(s), last = k == n - 1;
  if (ahead && k == 1) {
    s->ahead = AHEAD_NONE;
    s->ahead_dev = dev;
  }
  if (state_drift(s, dev, dt, err) != 0 || hard_force(s, dev, ahead, last, err) != 0 ||
      state_kick(s, dev, dt, err) != 0)
    return -1;
  if (ahead && last) return ahead_cut(s, err);
  if (ahead) ahead_draw(s);
  return 0;
}

/* The one schedule of a step for every scheme (tree and direct: n = 1),
 * rank count and place of the state: the helpers above run each part on
 * the host or the device, where the state lives, the same sequence of
 * kicks, drifts and forces in double precision. */
int hy_sim_step(struct hy_sim *s, unsigned want, struct hy_step_times *tm, struct hy_err *err) {
  const double dt = s->cfg.dt_h;
  const int n = s->cfg.n_ratio;
  memset(tm, 0, sizeof *tm);
  hy_force_stats_reset(s->f);
  const double t_start = hy_wtime();
  int dev = dev_now(s);
  s->dev_acc = s->dev_pot = 0;
  /* opening half kick: (a_h + n a_s) dt_h / 2 */
  if (opening_kick(s, dev, 0.5 * dt, err) != 0) return -1;
  for (int k = 1; k < n; k++) {
    const double t0 = hy_wtime();
    if (hard_step(s, dev, k, n, err) != 0) return -1;
    tm->hard[k - 1] = hy_wtime() - t0;
    hy_trace(HY_TRACE_MAIN, "hard_step", t0);
    take_stats(s, tm, 1);
  }
  tm->n_hard = n - 1;
  const double t0 = hy_wtime();
  /* closing drift */
  if (state_drift(s, dev, dt, err) != 0) return -1;
  /* the decomposition, with the boundaries made ahead in the hard steps */
  if (soft_decompose(s, tm, &dev, err) != 0) return -1;
  /* the soft-step force and the closing half kick */
  if (soft_force(s, dev, want, err) != 0 || state_kick(s, dev, 0.5 * dt, err) != 0) return -1;
  if (dev && ((want & HY_WANT_HOST) || !s->lazy) && hy_sim_sync(s, err) != 0) return -1;
  end_step(s, tm, t_start, t0);
  return 0;
}
