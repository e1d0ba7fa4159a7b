/* SPDX-License-Identifier: GPL-3.0-or-later
 * walk.cl: stackless Barnes-Hut tree walk (Nakasato 2012, OTOO) with n_vec
 * sinks per work-item, the absolute MAC (Warren & Salmon 1993; Watanabe &
 * Nakasato eq 5, 11) and the hard/soft force split by the DLL kernel K(r)
 * (Watanabe & Nakasato eq 7-10).
 *
 * Build options (all required unless a default is given):
 *   -D HY_WALK_MODE=m  HY_WALK_FULL | HY_WALK_HARD | HY_WALK_SPLIT | HY_WALK_SOFTSTEP
 *   -D HY_WALK_POT=p   1: also accumulate the softened potential (weight 1)
 *   -D HY_NVEC=v       sinks per work-item (default 4)
 *   -D HY_MAC_REL=r    1: the relative criterion (hy_shared.h): cell records
 *                      hold sqrt(3 B2), the sinks' scales c are in their
 *                      particle records' b_max word, or in .w of uploaded
 *                      sinks; a work-item uses the largest of its sinks'
 *                      (default 0: the absolute criterion, r_b^2 records)
 * Work-group size: any; one work-item handles sinks [v*gid, v*gid + v); the
 * interaction counts are summed per work-group (local memory: 2 ulong per
 * work-item, an argument). use_blocks: sinks of a block whose block_on
 * flag is 0 get a zero result without a walk (a hard walk: hy_block_mark
 * found no particle of the tree within R2 of the block; any walk: the block
 * holds only LET items, hy_item_blocks); 2: they get nothing (their results
 * are not read). Sink j is
 * sink[j * sink_stride]: stride 2 reads the particle records of another
 * tree's node buffer (its particles in key order) as the sinks.
 *
 * Tree layout: see hy_shared.h. Particles are nodes 0 .. n_part-1, and the
 * nodes with r_b^2 < 0 (the LET items of a grafted merged tree, build.cl). A node is
 * opened when r_b^2 > min_k |sink_k - COM|^2; accepted cells and particles
 * interact as softened point masses. In HY_WALK_HARD a node is skipped when
 * min_k |sink_k - COM| >= R2 + b_max (K = 0 for everything inside it). */
#ifndef HY_SHARED_H
#include "hy_shared.h"
#endif

#ifndef HY_WALK_MODE
#error "HY_WALK_MODE must be defined"
#endif
#ifndef HY_WALK_POT
#define HY_WALK_POT 0
#endif
#ifndef HY_NVEC
#define HY_NVEC 4
#endif
#ifndef HY_MAC_REL
#define HY_MAC_REL 0
#endif

/* DLL switching kernel: 1 for r <= R1, 0 for r >= R2, C2 in between. */
inline float hy_dll_k(float d2, float r1, float r2, float inv_dr) {
  if (d2 <= r1 * r1) return 1.0f;
  if (d2 >= r2 * r2) return 0.0f;
  float y = (r2 - sqrt(d2)) * inv_dr;
  y = y * y;
  return HY_DLL_POLY(y);
}

__kernel void hy_walk(__global const float4 *node, const int n_part, const int root,
                      __global const float4 *sink, const int n_sink, const int self_base,
                      const float eps2, const float r1, const float r2, const float inv_dr,
                      const float n_ratio, __global float4 *out0, __global float4 *out1,
                      __global ulong *counts, __local ulong *lc, __global const uchar *block_on,
                      const int use_blocks, const int sink_stride) {
  const int gid = (int)get_global_id(0);
  const int first = gid * HY_NVEC;
  uint n_pp = 0, n_pc = 0;
  /* a work-item's sinks may span two blocks (HY_NVEC need not divide
   * HY_SINK_BLOCK): it skips only when both are off */
  if (first < n_sink && use_blocks && !block_on[first / HY_SINK_BLOCK] &&
      !block_on[(min(first + HY_NVEC, n_sink) - 1) / HY_SINK_BLOCK]) {
    /* no particle of the tree within R2 of these sinks: the hard walk's
     * result, which it would reach after skipping every node (use_blocks 2:
     * nothing is written, as hy_add_unsort skips these sinks too) */
    if (use_blocks == 1)
      for (int k = 0; k < min(HY_NVEC, n_sink - first); k++) {
        out0[first + k] = (float4)(0.0f);
#if HY_WALK_MODE == HY_WALK_SPLIT
        out1[first + k] = (float4)(0.0f);
#endif
      }
  } else if (first < n_sink) { /* padding work-items only take part in the count reduction */

  float3 s[HY_NVEC];
  float3 a0[HY_NVEC];
#if HY_WALK_MODE == HY_WALK_SPLIT
  float3 a1[HY_NVEC];
#endif
#if HY_WALK_POT
  float pot[HY_NVEC];
#endif
  int self[HY_NVEC];
  int n_valid = min(HY_NVEC, n_sink - first);
  for (int k = 0; k < HY_NVEC; k++) {
    int j = first + min(k, n_valid - 1); /* padding sinks repeat the last one */
    /* sinks that are this tree's particles are read from the node records
     * (the same floats), so their positions need no separate upload */
    s[k] = self_base >= 0 ? node[2 * (self_base + j)].xyz : sink[j * sink_stride].xyz;
    a0[k] = (float3)(0.0f);
#if HY_WALK_MODE == HY_WALK_SPLIT
    a1[k] = (float3)(0.0f);
#endif
#if HY_WALK_POT
    pot[k] = 0.0f;
#endif
    /* the sink's own node, skipped: self_base + j, or per sink in sink.w */
    self[k] = k >= n_valid ? HY_NONE
              : self_base >= 0 ? self_base + first + k
              : self_base == HY_SELF_IN_SINK ? as_int(sink[j * sink_stride].w) : HY_NONE;
  }
#if HY_MAC_REL
  /* the strictest scale of the work-item's sinks (the smallest |a_old|) */
  float cmax = 0.0f;
  for (int k = 0; k < n_valid; k++) {
    const int j = first + k;
    cmax = fmax(cmax, self_base >= 0 ? node[2 * (self_base + j) + 1].y
                      : self_base == HY_SELF_IN_SINK ? node[2 * self[k] + 1].y
                      : sink_stride == 2 ? sink[2 * j + 1].y
                                         : sink[j].w);
  }
#endif
#if HY_WALK_MODE == HY_WALK_HARD
  const float r2sq = r2 * r2;
#endif

  int cur = root;
  while (cur != HY_NONE) {
    const float4 p = node[2 * cur];
    const float4 q = node[2 * cur + 1];
    float3 dx[HY_NVEC];
    float d2[HY_NVEC];
    float d2min = INFINITY;
    for (int k = 0; k < HY_NVEC; k++) {
      dx[k] = p.xyz - s[k];
      d2[k] = dot(dx[k], dx[k]);
      d2min = fmin(d2min, d2[k]);
    }
    const int is_part = cur < n_part || q.x < 0.0f; /* r_b^2 < 0: a LET item's record in a grafted merged tree */
#if HY_WALK_MODE == HY_WALK_HARD
    {
      const float lim = HY_HARD_REACH(r2, q.y); /* b_max is 0 for particles */
      if (d2min >= (is_part ? r2sq : lim * lim)) {
        cur = as_int(q.z);
        continue;
      }
    }
#endif
#if HY_MAC_REL
    /* r_b^2 = FLT_MAX: a tree whose every cell is opened */
    if (!is_part && (q.x >= FLT_MAX || !HY_MAC_REL_ACCEPT(d2min, q.x, cmax, q.y))) { /* open the cell */
#else
    if (!is_part && q.x > d2min) { /* open the cell */
#endif
      cur = as_int(q.w);
      continue;
    }
    /* interact with the particle or the accepted cell's monopole */
    uint n_self = 0;
    for (int k = 0; k < HY_NVEC; k++) {
      const float r2s = d2[k] + eps2;
      if (cur == self[k]) {
        n_self++;
        continue;
      }
      if (r2s <= 0.0f) continue;
      const float rinv = rsqrt(r2s);
      const float mr = p.w * rinv;
      const float mr3 = mr * rinv * rinv;
#if HY_WALK_MODE == HY_WALK_FULL
      a0[k] += mr3 * dx[k];
#elif HY_WALK_MODE == HY_WALK_HARD
      a0[k] += (hy_dll_k(d2[k], r1, r2, inv_dr) * mr3) * dx[k];
#elif HY_WALK_MODE == HY_WALK_SPLIT
      const float kk = hy_dll_k(d2[k], r1, r2, inv_dr);
      a0[k] += (kk * mr3) * dx[k];
      a1[k] += ((1.0f - kk) * mr3) * dx[k];
#elif HY_WALK_MODE == HY_WALK_SOFTSTEP
      const float kk = hy_dll_k(d2[k], r1, r2, inv_dr);
      a0[k] += ((n_ratio - (n_ratio - 1.0f) * kk) * mr3) * dx[k];
#else
#error "unknown HY_WALK_MODE"
#endif
#if HY_WALK_POT
      pot[k] -= mr;
#endif
    }
    if (is_part) /* a skipped self pair is not an interaction */
      n_pp += (uint)n_valid - n_self;
    else
      n_pc += (uint)n_valid;
    cur = as_int(q.z);
  }

  for (int k = 0; k < n_valid; k++) {
#if HY_WALK_POT
    out0[first + k] = (float4)(a0[k], pot[k]);
#else
    out0[first + k] = (float4)(a0[k], 0.0f);
#endif
#if HY_WALK_MODE == HY_WALK_SPLIT
    out1[first + k] = (float4)(a1[k], 0.0f);
#endif
  }
  }
  /* the work-group's interaction counts (64-bit: a work-group can exceed 2^32) */
  const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
  lc[HY_COUNT_N * lid + HY_COUNT_PP] = n_pp;
  lc[HY_COUNT_N * lid + HY_COUNT_PC] = n_pc;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    ulong pp = 0, pc = 0;
    for (uint k = 0; k < lsz; k++) {
      pp += lc[HY_COUNT_N * k + HY_COUNT_PP];
      pc += lc[HY_COUNT_N * k + HY_COUNT_PC];
    }
    counts[HY_COUNT_N * get_group_id(0) + HY_COUNT_PP] = pp;
    counts[HY_COUNT_N * get_group_id(0) + HY_COUNT_PC] = pc;
  }
}
