/* SPDX-License-Identifier: GPL-3.0-or-later
 * force.h: gravitational accelerations and potentials of the particle set.
 * Owns the per-step pipeline "sort and build the local tree, export its node
 * records, walk it on the OpenCL device with the local particles as sinks,
 * add the results in double precision on the host", the O(N^2) device direct
 * sum, and the timing and interaction counters of these steps. Remote (LET)
 * trees are walked with the same sinks and added to the same double sums.
 * Results include the gravitational constant G.
 *
 * Distributed runs (hy_force_set_comm with more than one rank): every walk
 * exchanges locally essential trees (let.h: the hard LET for hard walks, the
 * full LET otherwise), builds one remote tree of the received items and
 * walks it with the same sinks. The device work runs on one persistent
 * device thread (worker.h) so that the local walk overlaps the main
 * thread's LET selection, MPI exchange and remote tree build; all MPI calls
 * stay on the calling thread. Knows nothing of files, parameters or the
 * integrator. */
#ifndef HY_FORCE_H
#define HY_FORCE_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "cl_engine.h"
#include "log.h"
#include "part.h"
#include "threads.h"
#include "tree.h"

/** Where the local tree is built (hy_force_cfg.tree_build). */
enum hy_tree_build {
  HY_TREE_BUILD_AUTO = 0,   /**< on the device with one rank unless the device is a CPU, else on the host */
  HY_TREE_BUILD_HOST = 1,   /**< on the host (threads), node records uploaded */
  HY_TREE_BUILD_DEVICE = 2  /**< on the device (one rank only; else as host) */
};

struct hy_force_cfg {
  double G;       /**< gravitational constant */
  double eps;     /**< Plummer softening */
  double r1, r2;  /**< split radii (hybrid) */
  double a_err;   /**< absolute MAC accuracy [acceleration], G included */
  int mac_both;     /**< with mac_alpha: a cell must meet the absolute criterion too (HY_MAC_REL_SCALE's
                         capped) */
  double mac_alpha; /**< > 0: the relative opening criterion with this alpha (hy_shared.h), sinks scaled
                         by their last total acceleration p->acc (zero: a_err instead); the engine's
                         walks must be built for it (hy_cl_opts.mac_rel); 0: the absolute one */
  int n_crit;     /**< leaf size */
  int nvec;       /**< sinks per work-item */
  int n_ratio;    /**< hard steps per soft step */
  int tree_build; /**< enum hy_tree_build */
  int hard_remote;  /**< enum hy_tree_build; several ranks, device-built local tree: who builds the hard
                         walks' remote tree: the device after the local walk, or the host
                         threads during it (hy_tree_point_records); auto: where the local tree is built */
};

/** Accumulated costs since the last hy_force_stats_reset [s, counts]. */
struct hy_force_stats {
  double sort;       /**< key computation and sort, particle reordering */
  double build;      /**< links and moments */
  double export_;    /**< node records and sink positions */
  double upload;     /**< host-to-device transfers (profiling) */
  double kernel;     /**< device kernels (profiling) */
  double download;   /**< device-to-host transfers (profiling) */
  double walk_wall;  /**< wall time of the walk calls (host view) */
  double dev_sort;    /**< device build: keys and radix sort (profiling) */
  double dev_cells;   /**< device build: cell generations and links (profiling) */
  double dev_moments; /**< device build: particle records and moments (profiling) */
  uint64_t n_pp;     /**< particle-particle interactions */
  uint64_t n_pc;     /**< particle-cell interactions */
  /* distributed runs (main thread unless said otherwise) */
  double let_boxes;    /**< tight boxes and their MPI_Allgather */
  double let_select;   /**< LET selection walks */
  double let_comm;     /**< LET count exchange and messages, including waiting */
  double remote_build; /**< remote tree: sort, build, export */
  double wait_device;  /**< waiting for the device thread */
  double device_busy;  /**< device thread: time spent in walks */
  double direct_comm;  /**< direct scheme: MPI_Allgatherv of the sources */
  uint64_t n_walks;        /**< local walks done */
  uint64_t merged_builds;  /**< merged trees built (distributed walks of local particles and LET items) */
  uint64_t merged_whole;   /**< of them, grafted onto the local tree (hy_cl_build_args.graft) */
  uint64_t let_recv;       /**< LET items received */
  uint64_t let_recv_hard;  /**< full LETs: items a hard LET would have delivered */
  uint64_t let_sent;       /**< LET items sent */
  uint64_t let_bytes_sent;
  uint64_t let_bytes_recv;
};

struct hy_force;
struct hy_decomp_dev;

/** cl and pool are borrowed and must outlive the force object. */
struct hy_force *hy_force_create(struct hy_cl *cl, struct hy_pool *pool, const struct hy_force_cfg *cfg);
void hy_force_free(struct hy_force *f);

/** How the LET is walked (hy_force_set_comm). */
enum hy_let_walk {
  HY_LET_SEPARATE = 0, /**< the device walks the local tree while the LET is exchanged, then a separate
                            remote tree of the received items (overlap; the far field is summarised by
                            two trees, which about doubles the median force error of a one-rank run) */
  HY_LET_MERGED = 1,   /**< after the exchange, one tree of local particles and received items (the
                            accuracy of a one-rank run, no overlap) */
  HY_LET_AUTO = 2      /**< separate for hard walks (short range: no accuracy cost), merged otherwise */
};

/** Make the force distributed over comm (borrowed; its error handler should
 *  be MPI_ERRORS_RETURN), choose whether the device work runs on its own
 *  thread (threaded = 1, the overlap scheme) or inline, and how the LET is
 *  walked (enum hy_let_walk). Call once, before the first build. A
 *  communicator of one rank needs no LET. */
void hy_force_set_comm(struct hy_force *f, MPI_Comm comm, int threaded, int let_walk);
/** Several ranks: take part, with p's positions, in the collective of the
 *  common key cube that every local build makes (cube_for in force.c),
 *  where this rank skips a build that the others make.
 *  No effect on one rank. Returns 0, or -1 with err set on an MPI error. */
int hy_force_join_cube(struct hy_force *f, const struct hy_part *p, struct hy_err *err);

/** Distributed runs: the full LET's opening factor (hy_let_set_full_open,
 *  the LETOpenFactor parameter); no effect on one rank. */
void hy_force_set_let_open(struct hy_force *f, double factor);
/** Number of ranks of the force's communicator (1 when none is set). */
/** hy_let_node_ranks of the force's LET (0 on one rank). */
int hy_force_let_node_ranks(const struct hy_force *f);
int hy_force_nranks(const struct hy_force *f);
/** LET items received by the last hard walk, or, when no hard walk came
 *  after the last full walk, the hard-LET items counted there (N_hard of
 *  Watanabe & Nakasato eq 13); 0 before any walk or on one rank. */
uint64_t hy_force_last_hard_items(const struct hy_force *f);
/** Lowest particle ID with a non-finite position at the first build that
 *  met one (UINT64_MAX while all positions were finite). */
uint64_t hy_force_first_bad_id(const struct hy_force *f);
/** Restarts: set the value hy_force_last_hard_items returns. */
void hy_force_set_last_hard_items(struct hy_force *f, uint64_t n);
const struct hy_force_cfg *hy_force_config(const struct hy_force *f);
/** The OpenCL engine the forces run on. */
struct hy_cl *hy_force_cl(const struct hy_force *f);

/** Build the local tree of p and its device records. A host build sorts p
 *  into key order (reorders every particle array); a device build (one rank,
 *  tree_build auto or device) keeps p's order, keeps the tree on the device
 *  only (hy_force_tree then has no links or moments) and returns the walk
 *  results in p's order. Returns 0 or -1 with err set. */
int hy_force_build(struct hy_force *f, struct hy_part *p, struct hy_err *err);

/** Nonzero if the last hy_force_build built the tree on the device. */
int hy_force_device_built(const struct hy_force *f);

/** The local tree of the last hy_force_build (for tests and LET selection);
 *  after a device build only its counts, root and frame are set. */
const struct hy_tree *hy_force_tree(const struct hy_force *f);

/** Walk the local tree for every particle of p (as sorted by the last build;
 *  positions must not have changed since). mode is HY_WALK_*; acc0 receives
 *  the weighted acceleration (HY_WALK_SPLIT: hard part), acc1 the soft part
 *  (HY_WALK_SPLIT only, else may be NULL), pot the potential when non-NULL
 *  (modes FULL, SPLIT and SOFTSTEP only). Arrays have 3 (acc) or 1 (pot)
 *  values per particle and are overwritten. Returns 0 or -1 with err set. */
int hy_force_walk(struct hy_force *f, const struct hy_part *p, int mode, double *acc0, double *acc1, double *pot,
                  struct hy_err *err);

/* Device-resident particle state (TreeBuild auto or device, a
 * double-precision device): positions, velocities, masses and the kick
 * acceleration stay on the device between hy_force_state_put and
 * hy_force_state_get, in p's order; the integrator kicks and drifts them
 * there and the forces are computed from them, so a step moves no particle
 * data over the bus. The caller keeps track of which copy is current.
 * Distributed runs: the device selects the LET items from its tree and
 * only the items come back; the remote tree of the received items is built
 * and walked there too; the decomposition reads the device's positions
 * through hy_force_decomp_source. p's masses, IDs and types must be
 * current (the decomposition keeps them so). */

/** Nonzero if p's state can live on the device (distributed runs: on any
 *  rank with at least two particles). */
int hy_force_state_possible(struct hy_force *f, const struct hy_part *p);
/** Copy p's positions, velocities, masses and (with_accw) kick
 *  accelerations to the device. */
int hy_force_state_put(struct hy_force *f, const struct hy_part *p, int with_accw, struct hy_err *err);
/** Copy them back, with the total accelerations (with_acc: the last force
 *  was HY_WALK_SPLIT) and the potentials (with_pot: the last force made them). */
int hy_force_state_get(struct hy_force *f, struct hy_part *p, int with_acc, int with_pot, struct hy_err *err);
/** Where a domain decomposition finds the state's positions and velocities
 *  (hy_decomp_exchange_dev): on the device, whose kernels find every
 *  particle's rank and list the leavers and the stayers that fill their
 *  places; only the samples and the leavers come to the host. Valid while
 *  f lives. */
const struct hy_decomp_dev *hy_force_decomp_source(struct hy_force *f);
/** Distributed runs with the state on the device, before the soft step's
 *  decomposition (collective: every rank, dev nonzero where the state is on
 *  the device): the key cube of the whole set, which the decomposition does
 *  not change unless the bulk's box that shrinks it does, so that the
 *  device can sort the kept particles' keys while the host exchanges the
 *  leavers (hy_force_decomp_source's `kept`); the build after the
 *  decomposition takes them when its cube is this one. Returns 0 or -1
 *  with err set. */
int hy_force_cube_ahead(struct hy_force *f, const struct hy_part *p, int dev, struct hy_err *err);
/** After hy_decomp_exchange_dev of the state's particles: the device moves
 *  the particle from srcs[h] into holes[h] for the n_holes holes below
 *  n_keep (hy_decomp_moved) and receives p's particles from n_keep on (the
 *  received ones); the kick acceleration is not set (a force comes first). */
int hy_force_state_patch(struct hy_force *f, const struct hy_part *p, const size_t *holes, const size_t *srcs,
                         size_t n_holes, size_t n_keep, struct hy_err *err);
/** kick = 0: drift the positions by dt; kick = 1: kick the velocities by dt with the kick acceleration. */
int hy_force_state_move(struct hy_force *f, int kick, double dt, struct hy_err *err);
/** Build the tree of the device positions
 *  and walk it (mode < 0: the tree only; otherwise, distributed, with the LET
 *  as for hy_force_walk): mode HY_WALK_HARD,
 *  SOFTSTEP or FULL set the kick acceleration; HY_WALK_SPLIT sets it to
 *  hard + n soft and the total acceleration to hard + soft; want_pot also
 *  the potential. p gives the IDs (for the non-finite report) and, on
 *  several ranks, the masses of the LET items. */
int hy_force_state_force(struct hy_force *f, const struct hy_part *p, int mode, int want_pot, struct hy_err *err);
/** hy_force_state_force in three calls, so that the caller can do work of
 *  its own in the waits of a distributed walk of the local and the remote
 *  tree in turn (HY_LET_SEPARATE: the hard walks), as the integrator's
 *  schedule does (sim.c):
 *  - begin builds the tree and selects the LET items; returns 1 with the
 *    local walk not yet queued (device commands the caller queues now run
 *    ahead of it), or 0 when the force is whole already (one rank, a merged
 *    walk, mode < 0), or -1 with err set;
 *  - exchange (after begin returned 1) queues the local walk and exchanges
 *    the LET while the device walks; returns while it still walks (N_hard
 *    of hy_force_last_hard_items is this walk's then), 0 or -1 with err set;
 *  - end builds the remote tree, waits for the walks and unpacks their
 *    results; rc: 0, or -1 when exchange or the caller's work since begin
 *    failed (err set): end then waits for what is queued and returns -1.
 *  After begin returned 1, end must come (when anything in between failed
 *  too). */
int hy_force_state_force_begin(struct hy_force *f, const struct hy_part *p, int mode, int want_pot,
                               struct hy_err *err);
int hy_force_state_force_exchange(struct hy_force *f, const struct hy_part *p, struct hy_err *err);
int hy_force_state_force_end(struct hy_force *f, const struct hy_part *p, int rc, struct hy_err *err);
/** Number of particles with a non-finite position, velocity or kick acceleration. */
int hy_force_state_finite(struct hy_force *f, size_t *n_bad, struct hy_err *err);
/** The sums of a row of energy.csv over the device state (hy_cl_state_energy). */
int hy_force_state_energy(struct hy_force *f, double sums[HY_ENERGY_SUMS], struct hy_err *err);

/** O(N^2) softened direct sum on the device: acc (3 per particle) and pot
 *  (1 per particle, may be NULL) are overwritten. Distributed: the sources
 *  are every rank's particles (MPI_Allgatherv). */
int hy_force_direct(struct hy_force *f, const struct hy_part *p, double *acc, double *pot, struct hy_err *err);

void hy_force_stats_get(const struct hy_force *f, struct hy_force_stats *s);
/** The relative criterion (cfg.mac_alpha > 0): the factor that turns the
 *  kick acceleration of a walk of this mode into the estimate of the total
 *  acceleration that scales the sinks of the next walks (p->acc): 1 for
 *  HY_WALK_FULL, 1 / n for HY_WALK_SOFTSTEP (a_hard / n + a_soft); 0 when
 *  the walk leaves the estimate as it is (HY_WALK_HARD; HY_WALK_SPLIT makes
 *  the exact total) or with the absolute criterion. */
double hy_force_acc_scale(const struct hy_force *f, int mode);
/** The kernel time of every walk job since the force object was made
 *  (profiling events, never reset), seconds[0] of the hard walks
 *  (HY_WALK_HARD: the hard steps'), seconds[1] of the others: a rank's
 *  measured cost for `DomainCost walktime`. */
void hy_force_walk_seconds(const struct hy_force *f, double seconds[2]);
void hy_force_stats_reset(struct hy_force *f);

#endif
