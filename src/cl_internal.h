/* SPDX-License-Identifier: GPL-3.0-or-later
 * cl_internal.h: what the OpenCL engine's middle layer offers the files
 * above it, beyond cl_engine.h. The layers, each using only those below:
 *   cl_engine.c                 devices, programs of the walks, walks, frees
 *   cl_build.c                  the device tree build
 *   cl_let.c, cl_state.c        the LET selection, the device state
 *   cl_core.c (cl_core.h)       buffers, programs, events, launch, scan, sort
 * cl_build.c uses cl_state.c (a build from the state's positions), never
 * the other way round; tools/cl_deps.py checks that no call goes upward. */
#ifndef HY_CL_INTERNAL_H
#define HY_CL_INTERNAL_H

#include "cl_core.h"

/* ------------------------- cl_state.c, for cl_build.c and cl_engine.c */

/** The keys of the state's positions first .. first + n - 1 (hy_st_keys:
 *  double, absolute) into key, idx; the commands' events in ev. */
int hy_cl_state_keys(struct hy_cl *cl, size_t first, size_t n, const double lo[3], double scale, struct cl_buf *key,
                     struct cl_buf *idx, struct cl_evlist *ev, int phase, struct hy_err *err);
/** The presort's events (hy_cl_state_presort): waited for, their device
 *  time added to *seconds (NULL: dropped), freed. */
void hy_cl_presort_drop(struct hy_cl *cl, double *seconds);
/** The state's positions (and zero groups) in front of the LET items
 *  hy_cl_state_append_* put in slot 1, if not done yet (on cl->q). */
int hy_cl_state_append_copy(struct hy_cl *cl, struct hy_err *err);
/** Release the state kernels and buffers, a presort's events first. */
void hy_cl_state_free(struct hy_cl *cl);

/* ------------------------------------------- cl_let.c, for cl_engine.c */

/** Release the LET selection's kernels and buffers. */
void hy_cl_let_free(struct hy_cl *cl);

/* ------------------------------------------ cl_build.c, for cl_engine.c */

/** The tree build's kernels of build.cl (once; hy_cl_build_kernels first). */
int hy_cl_tree_kernels(struct hy_cl *cl, struct hy_err *err);
/** Release the tree build's kernels and buffers. */
void hy_cl_build_free(struct hy_cl *cl);
/** Permute n float4 results from key order (device build) into the host's
 *  order, from src into dst; ev receives the event. */
int hy_cl_unsort(struct hy_cl *cl, int slot, cl_mem src, cl_mem dst, size_t n, cl_event *ev, struct hy_err *err);
/** acc[idx[i]] += x[i] with the last build's key order (hy_add_unsort); with
 *  use_blocks only for the sinks of the blocks that hy_block_mark marked last. */
int hy_cl_add_unsort(struct hy_cl *cl, cl_mem acc, cl_mem x, size_t n, int use_blocks, cl_event *ev,
                     struct hy_err *err);
/** The sink blocks (of the n_sink sinks sink[j * sink_stride]) that a hard
 *  walk of slot's tree, every cell opened, must walk (hy_block_mark), into
 *  cl->blocks; box (lo[3], hi[3] in the tree's frame, or NULL) holds every
 *  particle of the tree: blocks beyond R2 of it are not walked. */
int hy_cl_block_mark(struct hy_cl *cl, int slot, int n_part, int root, cl_mem sink, int sink_stride, size_t n_sink,
                     double r2, const float *box, cl_event *ev, struct hy_err *err);
/** The sink blocks (HY_SINK_BLOCK consecutive sinks of slot's last build,
 *  in key order) that hold one of its first n_local particles
 *  (hy_item_blocks), into cl->blocks. */
int hy_cl_item_blocks(struct hy_cl *cl, int slot, size_t n_sink, size_t n_local, cl_event *ev, struct hy_err *err);

#endif
