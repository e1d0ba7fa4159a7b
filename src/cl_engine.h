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
  const char *origin;   /**< where the device choice was made ("params.txt:12"), prefixed to messages about
                             a device that does not exist; may be NULL */
};

/** Timings of one call, from OpenCL profiling events [s]. */
struct hy_cl_times {
  double upload;   /**< host-to-device transfers */
  double kernel;   /**< kernel execution */
  double download; /**< device-to-host transfers */
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
};

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

#endif
