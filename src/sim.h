/* SPDX-License-Identifier: GPL-3.0-or-later
 * sim.h: the time integrators. Owns the state between steps (time, the kick
 * acceleration acc_w valid at the current positions) and the step schedule,
 * one sequence for every scheme, rank count and place of the particle state
 * (sim.c), with the part of the next domain decomposition that the hard
 * steps make in the waits of the device's walks:
 *  - hybrid: symmetric multi-rate leapfrog (r-RESPA) with n hard steps per
 *    soft step; the soft-step kicks use a_hard + n a_soft from one walk with
 *    weight n - (n - 1) K(r), the hard steps use the cut-off hard walk;
 *  - tree and direct: kick-drift-kick leapfrog with the full force.
 * A step always ends at a soft-step boundary with synchronised velocities,
 * so energies and snapshots can be taken between steps. Knows nothing of
 * files or parameters. */
#ifndef HY_SIM_H
#define HY_SIM_H

#include <stdint.h>

#include "force.h"
#include "hy_shared.h"
#include "log.h"
#include "part.h"
#include "threads.h"

enum hy_scheme { HY_SCHEME_HYBRID = 0, HY_SCHEME_TREE, HY_SCHEME_DIRECT };

/** Parse "hybrid", "tree", "direct"; -1 if unknown. */
int hy_scheme_parse(const char *name, enum hy_scheme *out);
const char *hy_scheme_name(enum hy_scheme s);

/** What the force evaluation at the end of a step must also provide. */
#define HY_WANT_POT 1u /**< p->pot (for energies or snapshots) */
#define HY_WANT_ACC 2u /**< p->acc = total acceleration hard + soft (snapshots) */
#define HY_WANT_HOST 4u /**< p read on the host after the step (snapshots); energies need not */

#define HY_MAX_RATIO 1024 /**< largest SoftStepRatio */

/** Costs of one step [s] and its interactions. For hybrid, hard[k] is the
 *  k-th hard force step (drift, tree, hard walk, kick) and soft the closing
 *  soft-step force (drift, tree, soft-step walk, kick); for tree and direct,
 *  soft is the whole step and n_hard is 0. */
struct hy_step_times {
  int n_hard;
  double hard[HY_MAX_RATIO];
  double soft;
  double tree;        /**< key sort, build and export, all force evaluations of the step */
  double kernel;      /**< device kernels */
  double transfer;    /**< host-device transfers */
  double walk_wall;   /**< host view of the walk calls */
  double dd;          /**< domain decomposition (the decompose callback) */
  double total;
  uint64_t pp_hard, pc_hard, pp_soft, pc_soft;
  struct hy_force_stats st_hard; /**< force costs of the hard steps, summed */
  struct hy_force_stats st_soft; /**< force costs of the closing soft-step force */
};

/** What a decomposition kept in place (hy_decomp_moved): below n_keep
 *  every particle but those at holes[0 .. n_holes) is where it was; the
 *  one at holes[h] came from srcs[h] (>= n_keep). */
struct hy_moved {
  int known; /**< 0: nothing is known, everything may have moved */
  const size_t *holes, *srcs;
  size_t n_holes, n_keep;
};

struct hy_decomp;
struct hy_decomp_dev;

/** Domain decomposition hook (distributed runs): may move particles between
 *  ranks (p is resized) and says what it kept in place. dev NULL: p is
 *  complete; else the positions and velocities are on the device dev
 *  describes (hy_decomp_exchange_dev), and p's are stale. Returns 0 or -1
 *  with err set. */
typedef int (*hy_decompose_fn)(void *ctx, struct hy_part *p, const struct hy_decomp_dev *dev, struct hy_moved *moved,
                               struct hy_err *err);

/** Where the particle state lives between steps (hy_sim_cfg.state). */
enum hy_state_place {
  HY_STATE_AUTO = 0,  /**< on the device where possible, unless the device is a CPU */
  HY_STATE_HOST = 1,  /**< always on the host */
  HY_STATE_DEVICE = 2 /**< on the device where possible (hy_force_state_possible) */
};

struct hy_sim_cfg {
  enum hy_scheme scheme;
  double dt_h;  /**< hard step (tree, direct: the step) */
  int n_ratio;  /**< hard steps per soft step (hybrid) */
  hy_decompose_fn decompose; /**< NULL: none (one rank) */
  void *decompose_ctx;
  struct hy_decomp *dd_ahead; /**< with decompose, hybrid: the decomposition whose next exchange the hard
                                   steps sample and cut ahead (hy_decomp_pre_*); NULL: none */
  int dd_every; /**< tree and direct: decompose before every dd_every-th force (hybrid: every soft step) */
  int state;      /**< enum hy_state_place: where the particle state lives between steps */
};

struct hy_sim;

struct hy_sim *hy_sim_create(struct hy_part *p, struct hy_force *f, struct hy_pool *pool, const struct hy_sim_cfg *cfg,
                             double t0);
void hy_sim_free(struct hy_sim *s);
double hy_sim_time(const struct hy_sim *s);
/** Duration of one step (n dt_h for hybrid, dt_h otherwise). */
double hy_sim_step_length(const struct hy_sim *s);

/** Compute the forces at the current positions (before the first step), with
 *  the extras in `want`; decomposes first when a decompose hook is set.
 *  Returns 0 or -1 with err set. */
int hy_sim_start(struct hy_sim *s, unsigned want, struct hy_err *err);

/** Steps done since t0. */
long hy_sim_steps(const struct hy_sim *s);
/** Restarts: continue after `steps` steps from t0, with p->acc_w (the kick
 *  acceleration at the current positions) restored by the caller instead
 *  of hy_sim_start. */
void hy_sim_resume(struct hy_sim *s, long steps);

/** Advance by one step; the force at the end provides `want`. With the
 *  state on the device (hy_force_state_possible, hy_sim_cfg.state) the
 *  particle set p is brought up to date at the end of the step when `want`
 *  is non-zero or lazy syncing is off (the default); otherwise call
 *  hy_sim_sync before reading p. Distributed hybrid runs bring the
 *  positions and velocities over for every soft step's decomposition. */
int hy_sim_step(struct hy_sim *s, unsigned want, struct hy_step_times *tm, struct hy_err *err);

/** Nonzero if the particle state lives on the device between steps. */
int hy_sim_state_on_device(const struct hy_sim *s);
/** lazy = 1: hy_sim_step brings p up to date only when it computed a `want`. */
void hy_sim_set_lazy_sync(struct hy_sim *s, int lazy);
/** Bring p up to date from the device (no-op when it is). */
int hy_sim_sync(struct hy_sim *s, struct hy_err *err);
/** p was changed on the host: the device copy is stale (re-sent before the next step). */
void hy_sim_host_changed(struct hy_sim *s);
/** Particles with a non-finite position, velocity or kick acceleration
 *  (on the device when the state lives there). */
int hy_sim_count_nonfinite(struct hy_sim *s, size_t *n_bad, struct hy_err *err);
/** This rank's sums of a row of energy.csv (diag.h), where the state is: a
 *  state on the device is summed there, from the potentials of the last
 *  step, which must have asked for them (HY_WANT_POT). */
int hy_sim_energy_sums(struct hy_sim *s, double sums[HY_ENERGY_SUMS], struct hy_err *err);

#endif
