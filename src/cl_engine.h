/* SPDX-License-Identifier: GPL-3.0-or-later
 * cl_engine.h: the OpenCL force engine. Owns the platform/device choice, the
 * context and in-order profiling queue, the kernel programs (built lazily per
 * walk variant from the sources embedded at build time, or from
 * $HYTREE_KERNEL_DIR), the device buffers (grown on demand, checked against
 * the device's limits) and the launches. Synchronous: each call returns when
 * its results are on the host. The only file that includes CL/cl.h besides
 * cl_check.c. Knows nothing of MPI, particles or the integrator. */
#ifndef HY_CL_ENGINE_H
#define HY_CL_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hy_shared.h"
#include "force_cpu.h"
#include "log.h"

struct hy_cl;

/** Which device to use. */
enum hy_cl_kind { HY_CL_ANY = 0, HY_CL_GPU = 1, HY_CL_CPU = 2, HY_CL_EXPLICIT = 3 };

struct hy_cl_opts {
  enum hy_cl_kind kind; /**< any: GPUs if present, else CPUs, else anything */
  int platform, device; /**< indices for HY_CL_EXPLICIT */
  int local_rank;       /**< rank on this node: picks candidate local_rank mod count */
  int nvec;             /**< sinks per work-item of the walk kernel */
  int mac_rel;          /**< walks with the relative opening criterion (HY_MAC_REL) */
  const char *origin;   /**< where the device choice was made ("params.txt:12"), prefixed to messages about
                             a device that does not exist; may be NULL */
};

/** Timings of one call, from OpenCL profiling events [s]. */
struct hy_cl_times {
  double upload;   /**< host-to-device transfers */
  double kernel;   /**< kernel execution */
  double download; /**< device-to-host transfers */
  double mark;     /**< of kernel: hy_block_mark (walks that skip far sink blocks) */
  double unsort;   /**< of kernel: results into (or added to) the host's order */
  double enqueue;  /**< host time from the walk's call to its kernel's enqueue returning */
  double span;     /**< device time from the first command's start to the last one's end */
  double submit;   /**< the walk kernel's wait from its enqueue to its submission to the device (profiling) */
  double start;    /**< and from its submission to its start */
};

/** A tree and its sinks for one walk. Node records as in hy_shared.h. */
struct hy_cl_walk_args {
  const float *node;   /**< 8 floats per node */
  size_t n_nodes;      /**< particles + cells */
  size_t n_part;       /**< nodes below this index are particles */
  int32_t root;        /**< root node */
  uint64_t tree_id;    /**< nonzero: skip the upload if this tree is already resident in slot */
  int slot;            /**< tree buffer slot (0 local, 1 remote) */
  const float *sink;   /**< 4 floats per sink (x, y, z, unused), relative to the tree centre; not read
                            (may be NULL) when self_base >= 0: the sinks are then the tree's particles
                            self_base .. self_base + n_sink - 1 and their node records give the positions */
  size_t n_sink;
  uint64_t sink_id;    /**< nonzero: skip the upload if these sinks are already resident */
  long self_base;      /**< sink j is particle self_base + j of this tree; -1: none;
                            HY_SELF_IN_SINK: its node index is in the sink's 4th word */
  float *out0;         /**< 4 floats per sink: acceleration (SPLIT: hard part), potential */
  float *out1;         /**< 4 floats per sink: SPLIT soft part; else unused (may be NULL) */
  int unsort;          /**< the tree is the last hy_cl_tree_build's of its slot (node may be NULL):
                            the sinks are its particles (self_base 0) and the results come back in
                            the order of the set it was built from instead of key order; with out0
                            NULL they stay on the device for hy_cl_state_unpack, hy_cl_unsorted_read
                            or add_unsorted (slot 0) */
  int sinks_resident;  /**< the sinks are the particles of the last hy_cl_tree_build (slot 0), in its
                            key order (spatially sorted: the sinks of a work-group are neighbours),
                            taken from its node records (same frame): nothing uploaded (walks of
                            another tree with the local particles as sinks; sink is not read) */
  int add_unsorted;    /**< the results are added on the device to those a previous unsort walk of
                            the same particles left there (out0 NULL), in the host's order, and the
                            sums come back in out0 / out1, or stay there for hy_cl_state_unpack when
                            out0 is NULL (sinks_resident needed) */
  int has_box;         /**< skip_far: box holds every particle of the tree (hy_block_mark's first test) */
  float box[6];        /**< lo[3], hi[3] in the tree's frame */
  int skip_far;        /**< HY_WALK_HARD walk of a tree whose every cell is opened (r_b^2 = FLT_MAX:
                            hy_tree_point_records, or open_all), sinks in the sink buffer or resident
                            (self_base < 0): blocks of HY_SINK_BLOCK sinks that no particle of the tree
                            reaches within R2 get their zero result without a walk (hy_block_mark; with
                            add_unsorted nothing is written or added for them); the results are those
                            of the full walk */
  size_t skip_items;   /**< > 0: a walk of a device-built tree's own particles (self_base 0) whose
                            first skip_items (in the order it was built from) are the local particles
                            and the rest LET items, whose results nobody reads: blocks of
                            HY_SINK_BLOCK sinks in key order without a local particle get zeros
                            without a walk (hy_item_blocks); the local particles' results are those of
                            the full walk, bit for bit (a work-item with a sink in a block that holds
                            a local particle walks as always) */
  int graft;           /**< the grafted merged tree of the last slot-1 build (whole): its records in the
                            slot-0 buffer, its sinks its local particles (local_sinks) */
  int local_sinks;     /**< a walk of the last slot-1 build (merged; hy_cl_build_result.local_sinks)
                            whose sinks are its local particles, in the slot-0 build's key order, each
                            with its own node in .w (self_base HY_SELF_IN_SINK), in the sink buffer under
                            sink_id = tree_id; n_sink: the slot-0 build's particles; unsort: the results
                            in the order of the set the slot-0 tree was built from */
};

/** Read the results an unsort walk left on the device (out0 NULL) into
 *  out0 (and out1 when split): n sinks, 4 floats each. */
int hy_cl_unsorted_read(struct hy_cl *cl, size_t n, int split, float *out0, float *out1, struct hy_cl_times *times,
                        struct hy_err *err);

/** Host staging memory for the device-built tree's transfers (page-locked
 *  where the implementation supports it). */
enum {
  HY_CL_HOST_POS = 0,
  HY_CL_HOST_OUT0 = 1,
  HY_CL_HOST_OUT1 = 2,
  HY_CL_HOST_GRP = 3,  /* merged trees: item moments */
  HY_CL_HOST_TREE = 4, /* the device-built tree for the host (hy_cl_tree_download) */
  HY_CL_HOST_XYZ = 5,  /* the device state's transfers; positions for the LET selection */
  HY_CL_HOST_DD0 = 6,  /* hy_cl_state_list mode 0: the leavers and their ranks */
  HY_CL_HOST_ITEMS = 7, /* the remote tree's LET items (float4 positions, then float2 B2 and b_max) */
  HY_CL_HOST_LET = 8,   /* hy_cl_let_select: the selected items */
  HY_CL_HOST_DD1 = 9,   /* hy_cl_state_list mode 1: the stayers beyond the kept count */
  HY_CL_HOST_RTREE = 10, /* the node records of a remote tree built on the host (hard walks) */
  HY_CL_HOST_GATHER = 11, /* hy_cl_state_gather_begin: the gathered positions */
  HY_CL_HOST_COUNTS = 12, /* a walk's interaction counts per work-group */
  HY_CL_HOST_GIDX = 13,   /* hy_cl_state_gather(_begin): the indices to gather */
  HY_CL_HOST_N = 14
};

/** A host buffer of at least bytes for use `which`, kept by the engine (its
 *  contents are lost when it grows). Returns NULL with err set on failure. */
void *hy_cl_host_buffer(struct hy_cl *cl, int which, size_t bytes, struct hy_err *err);
/** Bytes the host buffer `which` holds now (0 before the first use): a
 *  request of at most this many keeps its contents. */
size_t hy_cl_host_buffer_size(const struct hy_cl *cl, int which);

/** A tree to build on the device (opencl/build.cl): same rules and node
 *  records as the host build (tree.h). */
struct hy_cl_build_args {
  const float *pos;   /**< 4 floats per particle (x, y, z in the tree's frame, m), host order */
  const float *grp;   /**< NULL, or 2 floats per particle (B2, b_max: LET items of a merged tree that
                           stand for several particles), host order */
  size_t n;           /**< particles, at least 2 */
  double lo[3];       /**< lower corner of the key cube, in the same frame */
  double side;        /**< side of the key cube */
  int n_crit;         /**< leaf size */
  double a_err;       /**< absolute MAC accuracy, for G = 1 sums; 0: the cell records are the relative
                           criterion's (HY_MAC_WORD) */
  const float *sc;    /**< NULL, or the relative criterion's sink scales (HY_MAC_REL_SCALE) of the first
                           sc_n particles in host order, for the particle records (the others get 0) */
  size_t sc_n;
  int state_sc;       /**< pos NULL: the scales of the state's particles (hy_cl_state_scales) */
  uint64_t tree_id;   /**< the tree is resident in walk slot `slot` under this id */
  int slot;           /**< 0: the local (or merged) tree; 1: a second tree beside it (pos needed), the
                           remote tree of received LET items */
  int open_all;       /**< every cell's r_b^2 set to FLT_MAX, so that walks open every cell */
  int keep_keys;      /**< slot 0: keep the sorted keys for a merged build of slot 1 (merge_local) */
  size_t merge_local; /**< slot 1: the first merge_local positions are those of the slot-0 build merge_id
                           (kept with keep_keys), the same floats in the same frame and key cube: their key
                           order is reused and only the other positions are sorted and merged in (the
                           order of a full sort); ignored when that build's keys are not kept or its cube
                           differs */
  uint64_t merge_id;
  /* Keys from double positions (distributed runs' local trees, slot 0): the
   * host's hy_tree_key in the cube with lower corner key_lo (absolute) and
   * scale key_scale = 2^21 / side, so that they do not depend on the frame
   * of the floats. With one of these three the float keys (lo, side) are not
   * made: */
  int state_keys;          /**< from the device state's positions (pos NULL) */
  const uint64_t *keys;    /**< from the host: n keys (hy_tree_key) in host order, followed in the same
                                block by n uint32_t indices 0 .. n-1 */
  size_t presorted;        /**< from the state: the first `presorted` positions' keys sorted ahead
                                (hy_cl_state_presort, in this cube), the others' made, sorted and merged in
                                (the order of a full sort) */
  double key_lo[3], key_scale;
  int graft;          /**< slot 1 with merge_local, from the state (pos NULL): grafted onto the slot-0 tree
                           (its records unchanged since build merge_id) when it can be: the merged cells
                           without items that are slot-0 cells are not made again but taken whole, the
                           others' records follow the slot-0 tree's in its node buffer (opencl/build.cl,
                           "grafted merge"); the walk (hy_cl_walk_args.graft) meets the same nodes in the
                           same order as in the plain merged tree. hy_cl_build_result.whole says whether
                           it was; the slot-0 tree needs a build before its next walk */
};

/** What a device build made and what it cost (profiling events) [s]. */
struct hy_cl_build_result {
  int32_t root;       /**< root node (n: the first cell) */
  size_t n_cell;      /**< cells */
  int generations;    /**< cell generations (root = 1) */
  int batches;        /**< reads of the generation table (batches of generations enqueued) */
  double upload;      /**< positions to the device */
  double sort;        /**< keys and radix sort */
  double cells;       /**< cell generations and links */
  double moments;     /**< particle records and cell moments */
  double presort;     /**< the kept particles' keys and sort, queued ahead (hy_cl_state_presort) */
  int merged;         /**< slot 1: the key order came from the slot-0 build's (merge_local) */
  size_t grafted;     /**< merged builds: cells without LET items whose moments were copied from the
                           slot-0 tree's same cells (its records unchanged since that build), or with
                           whole, the slot-0 subtrees taken whole */
  int whole;          /**< the build was grafted (hy_cl_build_args.graft): root is a node of node[0] */
  int local_sinks;    /**< slot 1, the local particles' key order from the slot-0 build: they are in
                           the sink buffer as the sinks of its walks (hy_cl_walk_args.local_sinks) */
};

/** The device's sorts (tree keys, the LET selection's nodes) of up to this
 *  many pairs merge sorted tiles instead of making 16 radix passes; the
 *  same order. On GPUs every size (faster at every size, by the fewer
 *  launches), on CPU devices none (slower there than the radix sort). */
size_t hy_cl_merge_sort_default(const struct hy_cl *cl);
/** Tests: sort by merging up to max pairs (0: always the radix sort). */
void hy_cl_set_merge_sort_max(struct hy_cl *cl, size_t max);

/** Build the tree on the device; it stays resident for hy_cl_walk of its
 *  slot with its tree_id (node NULL; unsort for the results in the order of
 *  the set it was built from). pos NULL: the positions hy_cl_state_pack
 *  packed (slot 0), and in slot 1 the items hy_cl_state_append_* put behind
 *  them (grp must then be NULL). A build in one slot leaves the other's
 *  tree as it was. Returns 0 or -1 with err set. */
int hy_cl_tree_build(struct hy_cl *cl, const struct hy_cl_build_args *a, struct hy_cl_build_result *res,
                     struct hy_err *err);

/** hy_cl_tree_build of slot 1 from uploaded positions (a->pos) on a second
 *  command queue, so that it runs beside a walk of slot 0 that another
 *  thread has on the engine's queue: the commands of the two touch no
 *  common buffer or kernel object (slot 1's tree and the build's scratch
 *  buffers and kernels against the walk's; the engine's bookkeeping of
 *  buffer sizes is locked). Returns when the tree is built; the caller
 *  orders it before any walk of slot 1 (the walk's thread is handed the
 *  job after this returns). Not beside another build, LET selection
 *  or state operation, nor a walk of slot 1. Returns 0 or -1 with err set. */
int hy_cl_tree_build_side(struct hy_cl *cl, const struct hy_cl_build_args *a, struct hy_cl_build_result *res,
                          struct hy_err *err);

/** Print every platform and device to out (one line each). */
void hy_cl_print_devices(FILE *out, const struct hy_cl *chosen);

/** Choose a device and set up the engine. Returns 0, or -1 with err set
 *  (no platform, no matching device, context or queue failure). */
int hy_cl_create(struct hy_cl **out, const struct hy_cl_opts *opts, struct hy_err *err);
void hy_cl_free(struct hy_cl *cl);

/** Short description of the chosen device ("NVIDIA H100 (GPU, NVIDIA CUDA, OpenCL 3.0)"). */
const char *hy_cl_description(const struct hy_cl *cl);
/** Device name only. */
const char *hy_cl_device_name(const struct hy_cl *cl);
/** Nonzero if the chosen device is a GPU. */
int hy_cl_is_gpu(const struct hy_cl *cl);
/** Nonzero if the chosen device is a CPU (the host's own cores, e.g. pocl). */
int hy_cl_is_cpu(const struct hy_cl *cl);
/** Build every kernel variant now (so a broken kernel fails before any output). */
int hy_cl_build_all(struct hy_cl *cl, struct hy_err *err);

/** Run a tree walk. cfg->nvec must equal the engine's nvec. counts receives
 *  the particle-particle and particle-cell interaction totals. */
int hy_cl_walk(struct hy_cl *cl, const struct hy_cl_walk_args *a, const struct hy_walk_cfg *cfg,
               uint64_t counts[2], struct hy_cl_times *times, struct hy_err *err);

/** O(N^2) direct sum: out receives (ax, ay, az, potential) per sink (G = 1).
 *  src: 4 floats (x, y, z, m) per source; sink: 4 floats per sink; sink j is
 *  source self_base + j when self_base >= 0. */
int hy_cl_direct(struct hy_cl *cl, const float *src, size_t n_src, const float *sink, size_t n_sink,
                 long self_base, double eps, float *out, struct hy_cl_times *times, struct hy_err *err);

/** O(N^2) direct sum in double precision (opencl/direct.cl's hy_direct_ref,
 *  built on first use; needs cl_khr_fp64, hy_cl_has_fp64): out receives
 *  (ax, ay, az, potential) per sink for G = 1 and Plummer softening eps.
 *  src: 4 doubles (x, y, z, m) per source; sink: 4 doubles (x, y, z,
 *  unused) per sink, in the same frame (best centred on the particles); a
 *  source at a sink's own position adds nothing (its softened force is
 *  zero; with eps = 0 it would be infinite). Returns 0 or -1 with err set
 *  (also on a device without double precision). */
int hy_cl_direct_ref(struct hy_cl *cl, const double *src, size_t n_src, const double *sink, size_t n_sink, double eps,
                     double *out, struct hy_err *err);

/** The last device-built tree of a slot (0: the local tree), for the host
 *  (LET selection in distributed runs; tests): cells receives 8 floats per cell (the node records of nodes n ..
 *  n + n_cell - 1, hy_shared.h), next the next link of particle nodes
 *  0 .. n - 1, b2 the B2 of every cell, idx the host index of every
 *  particle node (key order -> host order). seconds: transfer time. */
int hy_cl_tree_download(struct hy_cl *cl, int slot, size_t n, size_t n_cell, float *cells, int32_t *next, float *b2,
                        uint32_t *idx, double *seconds, struct hy_err *err);

/* ----------------------------------------------------------------------
 * Device-resident particle state (opencl/state.cl, double precision): one
 * rank with the device tree build keeps positions, velocities, masses and
 * the kick acceleration on the device between outputs. */

/** Nonzero if the device supports double precision (cl_khr_fp64). */
int hy_cl_has_fp64(struct hy_cl *cl);
/** Copy n particles' state to the device (3 doubles per particle for pos,
 *  vel, acc_w, acc; 1 for mass); acc_w NULL: the device's kick acceleration is
 *  left undefined (the next unpack sets it); acc NULL: the total
 *  acceleration is not copied. */
int hy_cl_state_upload(struct hy_cl *cl, const double *pos, const double *vel, const double *mass,
                       const double *acc_w, const double *acc, size_t n, struct hy_err *err);
/** Copy the state back; any of the arrays may be NULL (not copied); acc and
 *  pot only if the last unpack wrote them. seconds (may be NULL) receives
 *  the transfer's wall time. */
int hy_cl_state_download(struct hy_cl *cl, double *pos, double *vel, double *acc_w, double *acc, double *pot,
                         size_t n, double *seconds, struct hy_err *err);
/** kick = 0: positions += dt velocities (a drift); kick = 1: velocities += dt acc_w. */
int hy_cl_state_step(struct hy_cl *cl, int kick, double dt, struct hy_err *err);
/** Pack (position - origin, mass) in float as the tree build's input
 *  (hy_cl_tree_build with pos NULL). red receives the coordinate ranges
 *  relative to origin (lo[3], hi[3]), the mass and first moment (relative to
 *  origin) of the finite positions, and the lowest index of a non-finite
 *  position (-1: none); with s > 0 (at most the state's n and
 *  HY_TREE_SAMPLE) sample receives the positions of hy_tree_sample (3 s
 *  doubles, absolute), read back with the reductions. */
int hy_cl_state_pack(struct hy_cl *cl, const double origin[3], double red[11], size_t s, double *sample,
                     double *seconds, struct hy_err *err);
/** hy_cl_state_pack's reductions and sample in the absolute frame
 *  (origin 0), without the packed positions (which stay as they were). */
int hy_cl_state_ranges(struct hy_cl *cl, double red[11], size_t s, double *sample, double *seconds,
                       struct hy_err *err);
/** The state's packed positions followed by m LET items (items: x, y, z,
 *  m in the frame of the last hy_cl_state_pack; grp: B2, b_max) in slot 1,
 *  for a merged tree (hy_cl_tree_build in slot 1 with pos NULL and n =
 *  state + m; its particles' B2 and b_max are zero); slot 0's tree and
 *  packing stay. The next hy_cl_state_pack drops them. In parts, so that
 *  the uploads overlap the host's work on the next items: begin makes room
 *  for m items, each part queues the upload of items first .. first +
 *  count - 1 (items and grp point at item 0; what they hold must stay until
 *  end), end waits for the uploads and makes the m items the appended ones
 *  (seconds, may be NULL: end's wall time). */
int hy_cl_state_append_begin(struct hy_cl *cl, size_t m, struct hy_err *err);
int hy_cl_state_append_part(struct hy_cl *cl, const float *items, const float *grp, size_t first, size_t count,
                            struct hy_err *err);
int hy_cl_state_append_end(struct hy_cl *cl, size_t m, double *seconds, struct hy_err *err);
/** Queue (without waiting) the keys of the state's first n_keep positions
 *  as they will be after hy_cl_state_patch's m moves (hole[h] takes the
 *  particle at src[h] >= n_keep; hy_cl_build_args.state_keys, cube lo and
 *  scale) and their sort, for a build with presorted = n_keep once that
 *  patch has moved them and put the received particles behind them. The
 *  positions must not change until then but by that patch; a state upload
 *  or a patch with another n_keep drops the keys. Returns 0 or -1 with err
 *  set. */
int hy_cl_state_presort(struct hy_cl *cl, size_t n_keep, const uint32_t *hole, const uint32_t *src, size_t m,
                        const double lo[3], double scale, struct hy_err *err);
/** The state after a domain decomposition (hy_decomp_exchange_dev) that
 *  kept its first n_keep particles in place except m of them, the holes
 *  hole[h], which the particle from src[h] (>= n_keep) fills, and appended
 *  n_new - n_keep received ones (tail_pos, tail_vel: 3 doubles each;
 *  tail_mass). The kick acceleration is left undefined (the next unpack
 *  sets it). */
int hy_cl_state_patch(struct hy_cl *cl, size_t n_new, size_t n_keep, const double *tail_pos,
                      const double *tail_vel, const double *tail_mass, const uint32_t *hole, const uint32_t *src,
                      size_t m, struct hy_err *err);
/** The domain decomposition on the device: the rank of every particle's
 *  cuboid (decomp.c's owner search; bounds as hy_decomp_bounds gives them),
 *  kept for hy_cl_state_list, and count[r] of them per rank r (grid[0]
 *  grid[1] grid[2] entries). */
int hy_cl_state_owners(struct hy_cl *cl, const double *bounds, size_t n_bounds, const int grid[3], uint64_t *count,
                       struct hy_err *err);
/** After hy_cl_state_owners: mode 0: the particles whose rank is not me,
 *  ascending, with their ranks (*rank); mode 1: those from n_keep on whose
 *  rank is me, ascending. *m of them, in the engine's staging memory (one
 *  buffer per mode, valid until its next use). */
int hy_cl_state_list(struct hy_cl *cl, int mode, unsigned me, size_t n_keep, uint32_t **idx, uint32_t **rank,
                     size_t *m, struct hy_err *err);
/** The positions (and velocities, vel not NULL) of the m particles idx[j]
 *  into pos (vel), 3 doubles each. */
int hy_cl_state_gather(struct hy_cl *cl, const uint32_t *idx, size_t m, double *pos, double *vel,
                       struct hy_err *err);
/** hy_cl_state_gather on the engine's second queue (side nonzero), beside
 *  work queued on the first that writes none of the gathered values (a
 *  presort). */
int hy_cl_state_gather_on(struct hy_cl *cl, int side, const uint32_t *idx, size_t m, double *pos, double *vel,
                          struct hy_err *err);
/** Waits for the sort queued by hy_cl_state_presort, if one is queued;
 *  returns 1 then, else 0 (for a trace of how long the host waits for it). */
int hy_cl_presort_wait(struct hy_cl *cl);
/** hy_cl_state_gather in two halves: _begin enqueues the gather of the
 *  positions (and velocities, with_vel) and its read into staging memory
 *  behind the earlier commands of the first queue (side 0; the commands
 *  enqueued after it, a walk, follow it) or of the second (side 1; beside
 *  the first's work) and returns (idx may be reused then); _end waits for
 *  the read and points *data at the m positions (3 doubles each), followed
 *  by the m velocities when with_vel, in the staging memory, valid until
 *  the next gather. One gather under way at a time; the state must not move
 *  in between. */
int hy_cl_state_gather_begin(struct hy_cl *cl, int side, const uint32_t *idx, size_t m, int with_vel,
                             struct hy_err *err);
int hy_cl_state_gather_end(struct hy_cl *cl, size_t m, const double **data, struct hy_err *err);
/** Walk results left on the device (hy_cl_walk, unsort, out0 NULL; after
 *  a merged build, the state's particles come first) into the
 *  state: split 0: acc_w = G out0; split 1: acc_w = G (out0 + n out1), acc =
 *  G (out0 + out1); want_pot: pot = G out0.w; split 0 with acc_scale > 0:
 *  also acc = acc_scale acc_w (the relative criterion's estimate). */
int hy_cl_state_unpack(struct hy_cl *cl, double G, double n_ratio, int split, int want_pot, double acc_scale,
                       double *seconds, struct hy_err *err);
/** The relative criterion's sink scales of the state's particles from their
 *  total accelerations (HY_MAC_REL_SCALE, alpha_g = alpha / G, aerr_g =
 *  a_err / G, capped), for the particle records of the next build from the state
 *  (hy_cl_build_args.state_sc); *largest: the largest of them. They are
 *  made again only when the accelerations changed (an upload, a patch, an
 *  unpack that writes them). */
int hy_cl_state_scales(struct hy_cl *cl, double alpha_g, double aerr_g, int capped, double *largest,
                       struct hy_err *err);
/** The LET items of the state's tree (the last device build, of the
 *  state's particles) for nb destination boxes (7 doubles each: lo[3],
 *  hi[3], the largest sink scale of the destination's particles for the
 *  relative criterion or 0, hy_let_scale) with their frames (3 doubles each): the full LET (hard = 0;
 *  count_hard: also count what the hard LET would send) or the hard LET cut
 *  at r2 (Watanabe & Nakasato eq 14, 15); the full LET opens a cell below
 *  fopen r_b (hy_let_set_full_open).
 *  The same items, in the same order and arithmetic, as let.c's host
 *  selection walks of that tree (frame: its records' frame, hy_cl_state_pack's
 *  origin): *items (HY_LET_ITEM floats each: x, y, z relative to the
 *  destination's frame, m, B2, b_max; the engine's staging memory, valid
 *  until the next call) holds those of destination 0, then 1, ..., count[j]
 *  of destination j and hcount[j] hard-LET items counted. seconds: wall
 *  time. Needs the state kernels (double precision). */
int hy_cl_let_select(struct hy_cl *cl, const double *boxes, const double *frames, size_t nb, const double frame[3],
                     double r2, double fopen, int hard, int count_hard, int async, float **items, size_t *count,
                     uint64_t *hcount, double *seconds, struct hy_err *err);
/** With async set, hy_cl_let_select returns before *items holds the items:
 *  their read runs on the engine's second queue (a copy engine, beside the
 *  kernels that the first queue runs next), and hy_cl_let_wait waits for it
 *  (nothing when no read is pending). Returns 0 or -1 with err set. */
int hy_cl_let_wait(struct hy_cl *cl, struct hy_err *err);
/** Particles with a non-finite position, velocity or kick acceleration
 *  (pos_only: position): their number and the lowest index (-1: none). */
int hy_cl_state_finite(struct hy_cl *cl, int pos_only, size_t *n_bad, long *first, struct hy_err *err);
/** The sums of a row of energy.csv (K, W, momentum, angular momentum; see
 *  diag.h) of the device state, from its potentials of the last force that
 *  computed them; only the sums are read back. */
int hy_cl_state_energy(struct hy_cl *cl, double sums[HY_ENERGY_SUMS], struct hy_err *err);

#endif
