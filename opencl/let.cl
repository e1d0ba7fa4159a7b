/* SPDX-License-Identifier: GPL-3.0-or-later
 * let.cl: the selection of locally essential tree items (Watanabe &
 * Nakasato eq 14 and 15) from the tree built on the device (build.cl), for
 * distributed runs that keep the particle state on the device. It selects
 * what src/let.c's host walk selects, in the same order and with the same
 * double-precision arithmetic, so the items are the same bit for bit:
 *
 *   full LET:  particle -> send;  cell: d < f r_b -> open, else send
 *   hard LET:  cell with d >= R2 + b_max -> skip; particle -> send if d < R2;
 *              cell: d < r_b -> open, else send if d < R2
 *
 * (f = fopen >= 1, hy_let_set_full_open; the hard walk, whose items a full
 * walk may count, opens a subset of the cells the full walk opens)
 *
 * with d the distance from the node's position (particles: the state's
 * double position; cells: the float centre of mass plus the records' frame)
 * to the destination box. A node is reached when every ancestor was opened:
 *
 *  1. hy_let_vis, one launch per cell generation from the root down: a cell
 *     that is reached passes to its children the destinations (bits of a
 *     mask, up to 32 per launch) for which it opens; the host clears every
 *     mask first, so only the reached cells that open write.
 *     vis.x: reached by the selected walk; vis.y (full walks with the hard
 *     count): reached by the hard walk, whose opened cells are a subset.
 *  2. hy_let_emit: every node reached and sent appends (destination << 32 |
 *     its first particle in key order, node); a work-group reserves its
 *     slots with one atomic. The walk's depth-first order is the order of
 *     the first particles (the sent nodes are disjoint subtrees), so a sort
 *     of these keys (build.cl's radix sort) restores the host's order per
 *     destination. Per-destination counts of the sent items and of the items
 *     the hard walk would send.
 *  3. hy_let_gather: the sorted nodes' items (x, y, z relative to the
 *     destination's frame, m, B2, b_max; floats).
 *
 * Build options: -D HY_WG=w (work-group size of hy_let_emit). Needs
 * cl_khr_fp64. */
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF

#ifndef HY_SHARED_H
#include "hy_shared.h"
#endif

#ifndef HY_WG
#error "HY_WG must be defined"
#endif

#define HY_LET_MAXB 32 /* destinations per launch: the bits of a mask */

/* Doubles per destination box: lo[3], hi[3], and the largest sink scale c
 * of its particles (the relative criterion; 0: the absolute one). */
#define HY_LET_BOX 7

/* The MAC radius of a cell record for destination box b: the absolute
 * criterion's sqrt(r_b^2), or with the relative one's sqrt(3 B2) = w in
 * the record, b_max/2 + sqrt(b_max^2/4 + w c) (hy_shared.h) with the box's c. */
inline double hy_let_rb(const float4 q, __global const double *b) {
  const double c = b[6], bm = (double)q.y;
  return c > 0.0 ? bm / 2 + sqrt(bm * bm / 4 + (double)q.x * c) : sqrt((double)q.x);
}

/* Distance from x to box b (lo[3], hi[3]), 0 inside: src/let.c's
 * hy_let_box_distance, operation for operation (no contraction). */
inline double hy_box_dist(__global const double *b, const double x0, const double x1, const double x2) {
  const double x[3] = {x0, x1, x2};
  double s = 0.0;
  for (int d = 0; d < 3; d++) {
    double g = 0.0;
    if (x[d] < b[d])
      g = b[d] - x[d];
    else if (x[d] > b[3 + d])
      g = x[d] - b[3 + d];
    s += g * g;
  }
  return sqrt(s);
}

/* Cells gen0 .. gen0 + n_gen - 1 (numbered after the particles in the node
 * records): the visibility masks of their children. The root's mask is set
 * by the host. */
__kernel void hy_let_vis(const uint gen0, const uint n_gen, const int n_part, __global const float4 *node,
                         __global const double *boxes, const uint nb, const double fx, const double fy,
                         const double fz, const double r2, const double fopen, const int hard, __global uint2 *vis) {
  const uint g = (uint)get_global_id(0);
  if (g >= n_gen) return;
  const int self = n_part + (int)(gen0 + g);
  const uint2 v = vis[self];
  if (!(v.x | v.y)) return; /* not reached: its children keep the zeros the host filled in */
  const float4 p = node[2 * self], q = node[2 * self + 1];
  uint2 cv = (uint2)(0u, 0u);
  {
    const double cx = (double)p.x + fx, cy = (double)p.y + fy, cz = (double)p.z + fz;
    const double lim = HY_HARD_REACH(r2, (double)q.y);
    for (uint j = 0; j < nb; j++) {
      const uint bit = 1u << j;
      if (!((v.x | v.y) & bit)) continue;
      const double d = hy_box_dist(boxes + HY_LET_BOX * j, cx, cy, cz), rb = hy_let_rb(q, boxes + HY_LET_BOX * j);
      const int open = d < rb, near = !(d >= lim);
      if ((v.x & bit) && (hard ? open && near : d < fopen * rb)) cv.x |= bit;
      if ((v.y & bit) && open && near) cv.y |= bit;
    }
  }
  if (!(cv.x | cv.y)) return;
  const int after = as_int(q.z);
  for (int x = as_int(q.w); x != after; x = as_int(node[2 * x + 1].z)) vis[x] = cv;
}

/* Nodes 0 .. n_nodes - 1: the sent ones appended to (key, val) at slots
 * reserved with cnt[0] (not written beyond cap; the caller retries with
 * more room; key = destination << pshift | first particle), the
 * per-destination counts of sent items into cnt[1 + j] and of the hard
 * walk's items into cnt[1 + HY_LET_MAXB + j]. */
__kernel void hy_let_emit(const uint n_nodes, const int n_part, __global const float4 *node,
                          __global const uint *c_lo, __global const uint *idx, __global const double *spos,
                          __global const double *boxes, const uint nb, const double fx, const double fy,
                          const double fz, const double r2, const double fopen, const int hard,
                          __global const uint2 *vis,
                          __global uint *cnt, const uint cap, __global ulong *key, __global uint *val,
                          const uint pshift) {
  __local uint l_n, l_base;
  __local uint l_count[HY_LET_MAXB], l_hcount[HY_LET_MAXB];
  const uint lid = (uint)get_local_id(0);
  const uint x = (uint)get_global_id(0);
  const uint lsz = (uint)get_local_size(0);
  if (lid == 0) l_n = 0u;
  for (uint j = lid; j < HY_LET_MAXB; j += lsz) {
    l_count[j] = 0u;
    l_hcount[j] = 0u;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  uint em = 0u, at = 0u;
  const uint2 v = x < n_nodes ? vis[x] : (uint2)(0u, 0u);
  if (v.x | v.y) {
    const int is_part = (int)x < n_part;
    const float4 q = node[2 * x + 1];
    double px, py, pz;
    if (is_part) {
      const uint i = idx[x];
      px = spos[3 * i];
      py = spos[3 * i + 1];
      pz = spos[3 * i + 2];
    } else {
      const float4 p = node[2 * x];
      px = (double)p.x + fx;
      py = (double)p.y + fy;
      pz = (double)p.z + fz;
    }
    const double lim = HY_HARD_REACH(r2, is_part ? 0.0 : (double)q.y);
    for (uint j = 0; j < nb; j++) {
      const uint bit = 1u << j;
      if (!((v.x | v.y) & bit)) continue;
      const double d = hy_box_dist(boxes + HY_LET_BOX * j, px, py, pz);
      const double rb = is_part ? 0.0 : hy_let_rb(q, boxes + HY_LET_BOX * j);
      /* sent by the hard walk: a particle within R2; a cell neither skipped
       * nor opened, within R2 */
      const int hsend = is_part ? d < r2 : !(d >= lim) && !(d < rb) && d < r2;
      const int send = hard ? hsend : (is_part || !(d < fopen * rb));
      if ((v.x & bit) && send) em |= bit;
      if ((v.y & bit) && hsend) atomic_inc(&l_hcount[j]);
    }
    if (em) {
      at = atomic_add(&l_n, (uint)popcount(em));
      for (uint j = 0; j < nb; j++)
        if (em & (1u << j)) atomic_inc(&l_count[j]);
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0 && l_n) l_base = atomic_add(&cnt[0], l_n);
  for (uint j = lid; j < nb; j += lsz) {
    if (l_count[j]) atomic_add(&cnt[1 + j], l_count[j]);
    if (l_hcount[j]) atomic_add(&cnt[1 + HY_LET_MAXB + j], l_hcount[j]);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (em) {
    const uint first = (int)x < n_part ? x : c_lo[x - (uint)n_part];
    uint k = l_base + at;
    for (uint j = 0; j < nb; j++)
      if (em & (1u << j)) {
        if (k < cap) {
          key[k] = ((ulong)j << pshift) | (ulong)first;
          val[k] = x;
        }
        k++;
      }
  }
}

/* The items of the n sorted nodes val[0 .. n-1] (sort keys key[0 .. n-1],
 * the destination above bit pshift): x, y, z relative to the destination's
 * frame (frames: 3 per destination), m, B2, b_max in single precision
 * (particles: the state's position and mass, no B2 or b_max), into items
 * at + 0 .. at + n - 1; src/let.c's push_item makes the same floats. */
__kernel void hy_let_gather(const uint n, __global const uint *val, __global const ulong *key, const uint pshift,
                            __global const double *frames, const int n_part, __global const float4 *node,
                            __global const float *c_b2, __global const uint *idx, __global const double *spos,
                            __global const double *smass, const double fx, const double fy, const double fz,
                            __global float *item, const ulong at) {
  const uint k = (uint)get_global_id(0);
  if (k >= n) return;
  const int x = (int)val[k];
  __global const double *F = frames + 3 * (uint)(key[k] >> pshift);
  __global float *o = item + HY_LET_ITEM * (at + k);
  if (x < n_part) {
    const uint i = idx[x];
    o[0] = (float)(spos[3 * i] - F[0]);
    o[1] = (float)(spos[3 * i + 1] - F[1]);
    o[2] = (float)(spos[3 * i + 2] - F[2]);
    o[3] = (float)smass[i];
    o[4] = 0.0f;
    o[5] = 0.0f;
  } else {
    const float4 p = node[2 * x], q = node[2 * x + 1];
    const double cx = (double)p.x + fx, cy = (double)p.y + fy, cz = (double)p.z + fz;
    o[0] = (float)(cx - F[0]);
    o[1] = (float)(cy - F[1]);
    o[2] = (float)(cz - F[2]);
    o[3] = p.w;
    o[4] = c_b2[x - n_part];
    o[5] = q.y;
  }
}
