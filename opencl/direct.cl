/* SPDX-License-Identifier: GPL-3.0-or-later
 * direct.cl: O(N^2) softened gravity, acceleration and potential, for the
 * `direct` scheme and as a device reference. One sink per work-item; sources
 * are staged through local memory one work-group-sized tile at a time, and
 * each tile's partial sum is added to the total separately (pairwise-style
 * accumulation keeps float rounding error small for large N).
 * Build options: none. Local memory: one float4 per work-item (argument). */
#ifndef HY_SHARED_H
#include "hy_shared.h"
#endif

__kernel void hy_direct(__global const float4 *src, const int n_src, __global const float4 *sink,
                        const int n_sink, const int self_base, const float eps2,
                        __global float4 *out, __local float4 *tile) {
  const int i = (int)get_global_id(0);
  const int lid = (int)get_local_id(0);
  const int lsz = (int)get_local_size(0);
  const float3 s = (i < n_sink) ? sink[i].xyz : (float3)(0.0f);
  const int self = (self_base >= 0) ? self_base + i : HY_NONE;
  float3 acc = (float3)(0.0f);
  float pot = 0.0f;
  for (int base = 0; base < n_src; base += lsz) {
    const int j = base + lid;
    tile[lid] = (j < n_src) ? src[j] : (float4)(0.0f);
    barrier(CLK_LOCAL_MEM_FENCE);
    float3 pa = (float3)(0.0f);
    float pp = 0.0f;
    const int nt = min(lsz, n_src - base);
    for (int t = 0; t < nt; t++) {
      const float4 q = tile[t];
      const float3 dx = q.xyz - s;
      const float r2s = dot(dx, dx) + eps2;
      if (base + t == self || r2s <= 0.0f) continue;
      const float rinv = rsqrt(r2s);
      const float mr = q.w * rinv;
      pa += (mr * rinv * rinv) * dx;
      pp -= mr;
    }
    acc += pa;
    pot += pp;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (i < n_sink) out[i] = (float4)(acc, pot);
}
