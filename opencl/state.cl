/* SPDX-License-Identifier: GPL-3.0-or-later
 * state.cl: the particle state kept on the device between outputs (one rank,
 * device tree build): positions, velocities, masses and the kick
 * acceleration in double precision, in the host's particle order, so that
 * the leapfrog's kicks and drifts, the packing of the tree build's input and
 * the unpacking of the walk results move nothing over the bus. The
 * arithmetic is that of the host integrator (src/sim.c, src/force.c).
 *
 * Reductions (pack, finite check) run in a fixed grid of HY_WG-sized
 * work-groups that loop over the particles; each work-group writes one
 * partial result that the host combines. Build options: -D HY_WG=w (power of
 * two). Needs cl_khr_fp64. */
#ifndef HY_SHARED_H
#include "hy_shared.h"
#endif
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#pragma OPENCL FP_CONTRACT OFF /* the host's rounding: no fused multiply-adds */

#ifndef HY_WG
#error "HY_WG must be defined"
#endif

/* x[i] += dt * v[i] for i < n3: a drift (x = positions, v = velocities) or a
 * kick (x = velocities, v = accelerations). */
__kernel void hy_st_axpy(__global double *x, __global const double *v, const uint n3, const double dt) {
  for (uint i = (uint)get_global_id(0); i < n3; i += (uint)get_global_size(0)) x[i] += dt * v[i];
}

#define HY_PACK_RED 11 /* per work-group: lo[3], hi[3], m, m x[3], lowest non-finite index (as double) */

/* The tree build's input: (x - o, m) in float per particle (unless write
 * is 0: the reductions only), and per
 * work-group the ranges (relative to o), mass and first moment of the finite
 * positions and the lowest index of a non-finite one. With s > 0 also a
 * sample of s absolute positions after the work-groups' results, the j-th
 * being particle floor(j n / s) (the host's hy_tree_sample), for the
 * estimate of the bulk's extent that keeps escapers from widening the key
 * cube (src/tree.h). */
__kernel void hy_st_pack(__global const double *pos, __global const double *mass, const uint n, const double ox,
                         const double oy, const double oz, __global float4 *out, __global double *red,
                         const uint s, const int write) {
  __global double *smp = red + HY_PACK_RED * get_num_groups(0);
  __local double l[HY_WG];
  __local uint lb[HY_WG];
  const uint lid = (uint)get_local_id(0);
  double r[HY_PACK_RED - 1];
  for (int d = 0; d < 3; d++) {
    r[d] = INFINITY;
    r[3 + d] = -INFINITY;
    r[7 + d] = 0.0;
  }
  r[6] = 0.0;
  uint bad = 0xffffffffu;
  for (uint i = (uint)get_global_id(0); i < n; i += (uint)get_global_size(0)) {
    if (s > 0u) { /* the first j with floor(j n / s) >= i is ceil(i s / n) */
      const ulong j = ((ulong)i * s + n - 1u) / n;
      if (j < s && (j * n) / s == i)
        for (int d = 0; d < 3; d++) smp[3 * j + d] = pos[3 * i + d];
    }
    const double x = pos[3 * i] - ox, y = pos[3 * i + 1] - oy, z = pos[3 * i + 2] - oz, m = mass[i];
    if (write) out[i] = (float4)((float)x, (float)y, (float)z, (float)m);
    if (isfinite(x) && isfinite(y) && isfinite(z)) {
      r[0] = fmin(r[0], x);
      r[1] = fmin(r[1], y);
      r[2] = fmin(r[2], z);
      r[3] = fmax(r[3], x);
      r[4] = fmax(r[4], y);
      r[5] = fmax(r[5], z);
      r[6] += m;
      r[7] += m * x;
      r[8] += m * y;
      r[9] += m * z;
    } else {
      bad = min(bad, i);
    }
  }
  const uint grp = (uint)get_group_id(0);
  for (int k = 0; k < HY_PACK_RED - 1; k++) {
    l[lid] = r[k];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint off = HY_WG / 2u; off > 0u; off >>= 1) {
      if (lid < off)
        l[lid] = k < 3 ? fmin(l[lid], l[lid + off]) : k < 6 ? fmax(l[lid], l[lid + off]) : l[lid] + l[lid + off];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) red[HY_PACK_RED * grp + (uint)k] = l[0];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  lb[lid] = bad;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint off = HY_WG / 2u; off > 0u; off >>= 1) {
    if (lid < off) lb[lid] = min(lb[lid], lb[lid + off]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) red[HY_PACK_RED * grp + HY_PACK_RED - 1] = lb[0] == 0xffffffffu ? -1.0 : (double)lb[0];
}

/* Walk results (float4, host order, G = 1) into the double state:
 *   split == 0: a0 = G o0.xyz (the kick acceleration, or the hard part),
 *               and with acc_scale > 0 acc = acc_scale a0 (the relative
 *               criterion's estimate of the total acceleration);
 *   split == 1: hard = G o0, soft = G o1: acc_w = hard + n soft, acc = hard + soft;
 *   pot (if non-zero want_pot): G o0.w. */
__kernel void hy_st_unpack(__global const float4 *o0, __global const float4 *o1, const uint n, const double G,
                           const double n_ratio, const int split, const int want_pot, __global double *acc_w,
                           __global double *acc, __global double *pot, const double acc_scale) {
  for (uint i = (uint)get_global_id(0); i < n; i += (uint)get_global_size(0)) {
    const float4 a = o0[i];
    const double h[3] = {G * (double)a.x, G * (double)a.y, G * (double)a.z};
    if (split) {
      const float4 b = o1[i];
      const double s[3] = {G * (double)b.x, G * (double)b.y, G * (double)b.z};
      for (int d = 0; d < 3; d++) {
        acc_w[3 * i + d] = h[d] + n_ratio * s[d];
        acc[3 * i + d] = h[d] + s[d];
      }
    } else {
      for (int d = 0; d < 3; d++) acc_w[3 * i + d] = h[d];
      if (acc_scale > 0.0)
        for (int d = 0; d < 3; d++) acc[3 * i + d] = acc_scale * h[d];
    }
    if (want_pot) pot[i] = G * (double)a.w;
  }
}

/* The relative criterion's sink scales (HY_MAC_REL_SCALE) from the total
 * accelerations: src/tree.c's hy_tree_sink_scale, operation for operation. */
__kernel void hy_st_scales(__global const double *acc, const uint n, const double alpha_g, const double aerr_g,
                           const int capped, __global float *sc, __global float *gmax) {
  __local float lm[HY_WG];
  const uint lid = (uint)get_local_id(0);
  float m = 0.0f;
  for (uint i = (uint)get_global_id(0); i < n; i += (uint)get_global_size(0)) {
    const double ax = acc[3 * i], ay = acc[3 * i + 1], az = acc[3 * i + 2];
    const double amag = sqrt(ax * ax + ay * ay + az * az);
    sc[i] = (float)HY_MAC_REL_SCALE(amag, alpha_g, aerr_g, capped);
    m = fmax(m, sc[i]);
  }
  /* the work-group's largest scale (the LET selection for this rank's box) */
  lm[lid] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint off = HY_WG / 2u; off > 0u; off >>= 1) {
    if (lid < off) lm[lid] = fmax(lm[lid], lm[lid + off]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) gmax[get_group_id(0)] = lm[0];
}

/* Per work-group: the number of particles with a non-finite position,
 * velocity or kick acceleration (pos_only: position), and the lowest such
 * index (as double; -1: none). */
__kernel void hy_st_finite(__global const double *pos, __global const double *vel, __global const double *acc_w,
                           const uint n, const int pos_only, __global double *red) {
  __local uint lc[HY_WG], lb[HY_WG];
  const uint lid = (uint)get_local_id(0);
  uint cnt = 0, bad = 0xffffffffu;
  for (uint i = (uint)get_global_id(0); i < n; i += (uint)get_global_size(0)) {
    int ok = 1;
    for (int d = 0; d < 3; d++)
      ok &= isfinite(pos[3 * i + d]) && (pos_only || (isfinite(vel[3 * i + d]) && isfinite(acc_w[3 * i + d])));
    if (!ok) {
      cnt++;
      bad = min(bad, i);
    }
  }
  lc[lid] = cnt;
  lb[lid] = bad;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint off = HY_WG / 2u; off > 0u; off >>= 1) {
    if (lid < off) {
      lc[lid] += lc[lid + off];
      lb[lid] = min(lb[lid], lb[lid + off]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    red[2 * get_group_id(0)] = (double)lc[0];
    red[2 * get_group_id(0) + 1] = lb[0] == 0xffffffffu ? -1.0 : (double)lb[0];
  }
}

/* Per work-group the sums of energy.csv (src/diag.c's, in the same
 * order): K = sum m v^2 / 2, W = sum m phi / 2, the momentum and the
 * angular momentum about the origin; the host adds the groups' sums, so
 * that only 8 doubles a group come back instead of the whole state. */
__kernel void hy_st_energy(__global const double *pos, __global const double *vel, __global const double *mass,
                           __global const double *pot, const uint n, __global double *red) {
  __local double l[HY_WG];
  const uint lid = (uint)get_local_id(0);
  double s[HY_ENERGY_SUMS];
  for (int k = 0; k < HY_ENERGY_SUMS; k++) s[k] = 0.0;
  for (uint i = (uint)get_global_id(0); i < n; i += (uint)get_global_size(0)) {
    const double m = mass[i];
    const double x0 = pos[3 * i], x1 = pos[3 * i + 1], x2 = pos[3 * i + 2];
    const double v0 = vel[3 * i], v1 = vel[3 * i + 1], v2 = vel[3 * i + 2];
    s[0] += 0.5 * m * (v0 * v0 + v1 * v1 + v2 * v2);
    s[1] += 0.5 * m * pot[i];
    s[2] += m * v0;
    s[3] += m * v1;
    s[4] += m * v2;
    s[5] += m * (x1 * v2 - x2 * v1);
    s[6] += m * (x2 * v0 - x0 * v2);
    s[7] += m * (x0 * v1 - x1 * v0);
  }
  for (int k = 0; k < HY_ENERGY_SUMS; k++) {
    l[lid] = s[k];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint off = HY_WG / 2u; off > 0u; off >>= 1) {
      if (lid < off) l[lid] += l[lid + off];
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) red[HY_ENERGY_SUMS * get_group_id(0) + (uint)k] = l[0];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

/* ------------------------------------------------ domain decomposition
 * (src/decomp.c's hy_decomp_exchange with the state here: the same owners,
 * the same lists, the same moves) */

/* b[0..np] ascending, b[0] = -inf, b[np] = +inf: the slot [b[i], b[i+1])
 * that holds x (decomp.c's find_slot). */
inline int hy_slot(__global const double *b, const int np, const double x) {
  int lo = 0, hi = np - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (b[mid] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* dest[i]: the rank whose cuboid holds particle i (px + 1 x boundaries,
 * then py + 1 y boundaries per slab, then pz + 1 z boundaries per column;
 * rank (ix py + iy) pz + iz); count[r] += the particles of rank r (a local
 * histogram of n_rank entries per work-group first). */
__kernel void hy_st_owner(__global const double *pos, const uint n, __global const double *bounds, const int px,
                          const int py, const int pz, __global uint *dest, __global uint *count, const uint n_rank,
                          __local uint *hist) {
  const uint lid = (uint)get_local_id(0), lsz = (uint)get_local_size(0);
  for (uint r = lid; r < n_rank; r += lsz) hist[r] = 0u;
  barrier(CLK_LOCAL_MEM_FENCE);
  __global const double *yb0 = bounds + px + 1, *zb0 = yb0 + px * (py + 1);
  for (uint i = (uint)get_global_id(0); i < n; i += (uint)get_global_size(0)) {
    __global const double *x = pos + 3 * (size_t)i;
    const int ix = hy_slot(bounds, px, x[0]);
    const int iy = hy_slot(yb0 + ix * (py + 1), py, x[1]);
    const int iz = hy_slot(zb0 + (ix * py + iy) * (pz + 1), pz, x[2]);
    const uint r = (uint)((ix * py + iy) * pz + iz);
    dest[i] = r;
    atomic_inc(&hist[r]);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint r = lid; r < n_rank; r += lsz)
    if (hist[r]) atomic_add(&count[r], hist[r]);
}

/* flag[i] for i < n: mode 0: the particle leaves (dest != me); mode 1: it
 * stays and lies beyond the kept count (i >= n_keep, dest == me). flag[n] =
 * 0, so that its exclusive scan ends with the total. */
inline uint hy_st_flagged(__global const uint *dest, const uint i, const uint me, const uint n_keep, const int mode) {
  return mode == 0 ? (uint)(dest[i] != me) : (uint)(i >= n_keep && dest[i] == me);
}

__kernel void hy_st_flag(__global const uint *dest, const uint n, const uint me, const uint n_keep, const int mode,
                         __global uint *flag) {
  const uint i = (uint)get_global_id(0);
  if (i < n) flag[i] = hy_st_flagged(dest, i, me, n_keep, mode);
  if (i == n) flag[n] = 0u;
}

/* After the exclusive scan of the flags: the flagged indices, ascending, and
 * (mode 0) their ranks. */
__kernel void hy_st_list(__global const uint *dest, __global const uint *at, const uint n, const uint me,
                         const uint n_keep, const int mode, __global uint *idx, __global uint *rank) {
  const uint i = (uint)get_global_id(0);
  if (i >= n || !hy_st_flagged(dest, i, me, n_keep, mode)) return;
  idx[at[i]] = i;
  if (mode == 0) rank[at[i]] = dest[i];
}

/* The positions of the m particles idx[j] into out[3 j ..], and with_vel
 * their velocities behind them, into out[3 m + 3 j ..]. */
__kernel void hy_st_gather(__global const double *pos, __global const double *vel, __global const uint *idx,
                           const uint m, const int with_vel, __global double *out) {
  for (uint j = (uint)get_global_id(0); j < m; j += (uint)get_global_size(0)) {
    const size_t i = idx[j];
    for (int d = 0; d < 3; d++) {
      out[3 * (size_t)j + d] = pos[3 * i + d];
      if (with_vel) out[3 * ((size_t)m + j) + d] = vel[3 * i + d];
    }
  }
}

/* The particle from src[h] into hole[h] (holes below the kept count,
 * sources from it on: no overlap); with_acc: its total acceleration too
 * (the relative criterion's scale). */
__kernel void hy_st_move(__global const uint *hole, __global const uint *src, const uint m, __global double *pos,
                         __global double *vel, __global double *mass, __global double *acc, const int with_acc) {
  for (uint h = (uint)get_global_id(0); h < m; h += (uint)get_global_size(0)) {
    const size_t i = hole[h], j = src[h];
    for (int d = 0; d < 3; d++) {
      pos[3 * i + d] = pos[3 * j + d];
      vel[3 * i + d] = vel[3 * j + d];
      if (with_acc) acc[3 * i + d] = acc[3 * j + d];
    }
    mass[i] = mass[j];
  }
}

/* ------------------------------------------------------------------ keys */

/* The Morton keys of the distributed runs' local trees, from the double
 * positions in the host's arithmetic (hy_tree_key, src/tree_sort.c), so
 * that they do not depend on the frame of the packed floats. lo: the key
 * cube's lower corner, scale = 2^21 / side. */
inline ulong hy_st_grid(double x, double lo, double scale) {
  ulong g;
  HY_KEY_GRID(g, double, x, lo, scale);
  return g;
}

/* The key of the position at j. */
inline ulong hy_st_key(__global const double *pos, size_t j, double lox, double loy, double loz, double scale) {
  ulong x = hy_st_grid(pos[3 * j], lox, scale), y = hy_st_grid(pos[3 * j + 1], loy, scale),
        z = hy_st_grid(pos[3 * j + 2], loz, scale);
  HY_KEY_SPREAD3(x);
  HY_KEY_SPREAD3(y);
  HY_KEY_SPREAD3(z);
  return (x << 2) | (y << 1) | z;
}

/* Of positions first .. first + n - 1: key[i] and idx[i] = first + i. */
__kernel void hy_st_keys(__global const double *pos, const uint first, const uint n, const double lox,
                         const double loy, const double loz, const double scale, __global ulong *key,
                         __global uint *idx) {
  const uint i = (uint)get_global_id(0);
  if (i >= n) return;
  const size_t j = (size_t)first + i;
  key[i] = hy_st_key(pos, j, lox, loy, loz, scale);
  idx[i] = (uint)j;
}

/* The keys of the m holes that the stayers from beyond will fill, before
 * they move: key[hole[h]] from the position at src[h] (fix: m holes, then
 * m sources). */
__kernel void hy_st_keys_fix(__global const double *pos, __global const uint *fix, const uint m, const double lox,
                             const double loy, const double loz, const double scale, __global ulong *key) {
  const uint h = (uint)get_global_id(0);
  if (h >= m) return;
  key[fix[h]] = hy_st_key(pos, fix[m + h], lox, loy, loz, scale);
}
