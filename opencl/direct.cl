/* SPDX-License-Identifier: GPL-3.0-or-later
 * direct.cl: O(N^2) softened gravity, acceleration and potential, for the
 * `direct` scheme and as a device reference. One sink per work-item; sources
 * are staged through local memory one work-group-sized tile at a time, and
 * each tile's partial sum is added to the total separately (pairwise-style
 * accumulation keeps float rounding error small for large N).
 * Build options: none; -D HY_DIRECT_REF adds the double-precision reference
 * hy_direct_ref (needs cl_khr_fp64). Local memory: one float4 (double4) per
 * work-item (argument). */
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

/* hy_direct_ref: the same sum in double precision, the reference of force
 * errors (hytree bench). Built only with -D HY_DIRECT_REF, on devices with
 * cl_khr_fp64, so that the float kernel above builds everywhere. Sources and
 * sinks are (x, y, z, m) relative to one centre; a source at the sink's own
 * position (r = 0: the sink itself) adds nothing, as its softened force is
 * zero. */
#ifdef HY_DIRECT_REF
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void hy_direct_ref(__global const double4 *src, const int n_src, __global const double4 *sink,
                            const int n_sink, const double eps2, __global double4 *out, __local double4 *tile) {
  const int i = (int)get_global_id(0);
  const int lid = (int)get_local_id(0);
  const int lsz = (int)get_local_size(0);
  const double3 s = (i < n_sink) ? sink[i].xyz : (double3)(0.0);
  double3 acc = (double3)(0.0);
  double pot = 0.0;
  for (int base = 0; base < n_src; base += lsz) {
    const int j = base + lid;
    tile[lid] = (j < n_src) ? src[j] : (double4)(0.0);
    barrier(CLK_LOCAL_MEM_FENCE);
    const int nt = min(lsz, n_src - base);
    for (int t = 0; t < nt; t++) {
      const double4 q = tile[t];
      const double3 dx = q.xyz - s;
      const double r2 = dot(dx, dx);
      if (r2 == 0.0) continue;
      const double rinv = 1.0 / sqrt(r2 + eps2);
      const double mr = q.w * rinv;
      acc += (mr * rinv * rinv) * dx;
      pot -= mr;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (i < n_sink) out[i] = (double4)(acc, pot);
}
#endif
