/* SPDX-License-Identifier: GPL-3.0-or-later
 * build.cl: the octree built on the device, with the same rules and the same
 * node records (hy_shared.h) as the host build (src/tree.c), so walk.cl walks
 * either.
 *
 *  1. hy_keys: 63-bit Morton keys of the particle positions (21 bits per
 *     axis) in the cube given by the host; non-finite or outside positions
 *     are clamped to the cube's faces, as on the host.
 *  2. hy_radix_count / hy_scan_* / hy_radix_scatter: a stable LSD radix sort
 *     of (key, index) with HY_RADIX_BITS-bit digits. A work-group owns a tile
 *     of HY_WG * HY_PER keys; its digit counts go to a digit-major table whose
 *     exclusive scan gives every (digit, tile) its output offset; inside a
 *     tile each work-item ranks its HY_PER consecutive keys after a local scan
 *     of the per-work-item digit counts, so equal digits keep their order.
 *     On GPUs the pairs are sorted by merging instead (hy_tile_sort,
 *     hy_merge_pass: half the time at 2^24 keys, a fifth of the launches for
 *     small sets; the same order).
 *  3. hy_gen_count / hy_gen_scan / hy_gen_emit: the cells, one generation
 *     (cells whose parents are the previous generation) at a time. A cell is
 *     a key range; it is a leaf bucket when it holds fewer than n_crit
 *     particles or all its keys are equal, else it is split at the highest
 *     octal digit in which its keys differ (so chains of single-child cells
 *     never appear, and a tree has at most 22 generations), and an octant of
 *     one particle is attached as that particle. The children of a
 *     generation are numbered after an exclusive scan of their counts, so the
 *     numbering is deterministic (breadth-first). Each generation's first
 *     cell and size are in a device table that the kernels read, so the host
 *     enqueues the generations without waiting for their counts. Links: more
 *     = first child, next = next sibling, the parent's next for the last
 *     child.
 *  4. hy_gather: the particle records in key order.
 *  5. hy_moments: mass, centre of mass, B2 (parallel-axis rule) and b_max
 *     (exact over the particles up to HY_BMAX_EXACT of them, else the bound
 *     max_child(b_child + |r_child - r_cm|)), r_b of the absolute MAC
 *     (Watanabe & Nakasato eq 5), one generation per launch from the deepest;
 *     hy_bmax_big gives the larger cells their exact b_max with a work-group
 *     each before the next generation up reads it.
 *  6. hy_unsort: walk results from key order back to the host's order.
 *  7. hy_open_cells: a tree whose every cell is opened by every sink
 *     (HardRemoteTree device); hy_block_mark: the blocks of sinks that the
 *     hard walk of such a tree can skip; hy_add_unsort: another tree walked
 *     with the particles in key order (read from their node records), its
 *     results added in the host's order.
 *
 * Build options: -D HY_WG=w (work-group size of the sort, scan and b_max
 * kernels, a power of two, 16..1024), -D HY_PER=p (keys per work-item of a
 * sort tile), -D HY_BMAX_EXACT=b, -D HY_BMAX_SERIAL=s (cells up to s
 * particles get their exact b_max from one work-item, larger ones up to b
 * from a work-group), -D HY_GEN_FLAG=f (the error flag's index in the
 * generation table), -D HY_BOX1=u (unsigned: particles per small box of
 * an open-all build, and small boxes per large one). OpenCL C 1.2; uses
 * 64-bit integers (ulong). */
#ifndef HY_SHARED_H
#include "hy_shared.h"
#endif

#ifndef HY_WG
#error "HY_WG must be defined"
#endif
#ifndef HY_PER
#error "HY_PER must be defined"
#endif
#ifndef HY_BMAX_EXACT
#error "HY_BMAX_EXACT must be defined"
#endif
#ifndef HY_GEN_FLAG
#error "HY_GEN_FLAG must be defined"
#endif
#ifndef HY_BMAX_SERIAL
#define HY_BMAX_SERIAL 128
#endif

#define HY_RADIX_BITS 4
#define HY_RADIX (1 << HY_RADIX_BITS)

/* ------------------------------------------------------------- keys */

inline ulong hy_spread3(ulong v) {
  HY_KEY_SPREAD3(v);
  return v;
}

inline ulong hy_grid(float x, float lo, float scale) {
  ulong g;
  HY_KEY_GRID(g, float, x, lo, scale);
  return g;
}

/* The keys of particles first .. first + n - 1: key[i], idx[i] = first + i. */
__kernel void hy_keys(__global const float4 *pos, const uint first, const uint n, const float lox, const float loy,
                      const float loz, const float scale, __global ulong *key, __global uint *idx) {
  const uint i = (uint)get_global_id(0);
  if (i >= n) return;
  const float4 p = pos[first + i];
  key[i] = (hy_spread3(hy_grid(p.x, lox, scale)) << 2) | (hy_spread3(hy_grid(p.y, loy, scale)) << 1) |
           hy_spread3(hy_grid(p.z, loz, scale));
  idx[i] = first + i;
}

/* The merge of two key-sorted runs of (key, index) pairs, a (na) and b (nb),
 * into key, idx (na + nb): an element of a goes before the elements of b
 * with the same key, so that when a's indices are all below b's the result
 * is the order of a stable sort of the concatenation. Each work-item places
 * one element at its rank: its index in its own run plus, by binary
 * search, the count of the other run's elements that precede it. */
__kernel void hy_merge_keys(__global const ulong *akey, __global const uint *aidx, const uint na,
                            __global const ulong *bkey, __global const uint *bidx, const uint nb,
                            __global ulong *key, __global uint *idx, __global uint *ibefore) {
  const uint g = (uint)get_global_id(0);
  if (g == 0) ibefore[na + nb] = nb;
  if (g >= na + nb) return;
  ulong k;
  uint v, lo = 0, hi;
  if (g < na) { /* the count of b's keys below k */
    k = akey[g];
    v = aidx[g];
    hi = nb;
    while (lo < hi) {
      const uint mid = lo + (hi - lo) / 2;
      if (bkey[mid] < k)
        lo = mid + 1;
      else
        hi = mid;
    }
    lo += g;
  } else { /* the count of a's keys at or below k */
    const uint j = g - na;
    k = bkey[j];
    v = bidx[j];
    hi = na;
    while (lo < hi) {
      const uint mid = lo + (hi - lo) / 2;
      if (akey[mid] <= k)
        lo = mid + 1;
      else
        hi = mid;
    }
    lo += j;
  }
  key[lo] = k;
  idx[lo] = v;
  ibefore[lo] = g < na ? lo - g : g - na; /* the b keys (items) before position lo */
}

/* ------------------------------------------------------------- scan */

/* Inclusive scan of one value per work-item over the work-group; tmp holds
 * HY_WG entries. Returns the inclusive prefix; all work-items must call it. */
inline uint hy_wg_scan(uint v, __local uint *tmp) {
  const uint lid = (uint)get_local_id(0);
  tmp[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint off = 1; off < HY_WG; off <<= 1) {
    const uint add = lid >= off ? tmp[lid - off] : 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    tmp[lid] += add;
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const uint r = tmp[lid];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

/* Exclusive scan in place of blocks of 4 * HY_WG values; the block totals go
 * to sums[group]. */
__kernel void hy_scan_block(__global uint *data, const uint n, __global uint *sums) {
  __local uint tmp[HY_WG];
  const uint lid = (uint)get_local_id(0);
  const uint base = (uint)get_group_id(0) * 4u * HY_WG + 4u * lid;
  uint v[4], s = 0;
  for (uint k = 0; k < 4; k++) {
    v[k] = base + k < n ? data[base + k] : 0u;
    s += v[k];
  }
  const uint incl = hy_wg_scan(s, tmp);
  uint run = incl - s;
  for (uint k = 0; k < 4; k++) {
    if (base + k < n) data[base + k] = run;
    run += v[k];
  }
  if (lid == HY_WG - 1) sums[get_group_id(0)] = incl;
}

/* Add the scanned block totals to their blocks. */
__kernel void hy_scan_add(__global uint *data, const uint n, __global const uint *sums) {
  const uint i = (uint)get_global_id(0);
  if (i < n) data[i] += sums[i / (4u * HY_WG)];
}

/* ------------------------------------------------------------- sort */

__kernel void hy_radix_count(__global const ulong *key, const uint n, const uint shift, __global uint *hist) {
  __local uint cnt[HY_RADIX];
  const uint lid = (uint)get_local_id(0);
  const uint tile = (uint)get_group_id(0), n_tiles = (uint)get_num_groups(0);
  if (lid < HY_RADIX) cnt[lid] = 0u;
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint base = tile * HY_WG * HY_PER;
  for (uint j = 0; j < HY_PER; j++) {
    const uint i = base + j * HY_WG + lid;
    if (i < n) atomic_inc(&cnt[(uint)(key[i] >> shift) & (HY_RADIX - 1u)]);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < HY_RADIX) hist[lid * n_tiles + tile] = cnt[lid];
}

__kernel void hy_radix_scatter(__global const ulong *key_in, __global const uint *idx_in, const uint n,
                               const uint shift, __global const uint *hist, __global ulong *key_out,
                               __global uint *idx_out) {
  __local uint cnt[HY_RADIX * HY_WG]; /* digit-major: cnt[d * HY_WG + lid] */
  __local uint tmp[HY_WG];
  __local uint start[HY_RADIX];
  const uint lid = (uint)get_local_id(0);
  const uint tile = (uint)get_group_id(0), n_tiles = (uint)get_num_groups(0);
  const uint base = tile * HY_WG * HY_PER + lid * HY_PER;
  for (uint d = 0; d < HY_RADIX; d++) cnt[d * HY_WG + lid] = 0u;
  for (uint j = 0; j < HY_PER; j++) /* only this work-item touches column lid */
    if (base + j < n) cnt[((uint)(key_in[base + j] >> shift) & (HY_RADIX - 1u)) * HY_WG + lid]++;
  barrier(CLK_LOCAL_MEM_FENCE);
  /* exclusive scan of the flat table: work-item lid scans entries
   * [lid * HY_RADIX, lid * HY_RADIX + HY_RADIX), then the chunk totals */
  uint s = 0;
  for (uint r = 0; r < HY_RADIX; r++) {
    const uint v = cnt[lid * HY_RADIX + r];
    cnt[lid * HY_RADIX + r] = s;
    s += v;
  }
  const uint off = hy_wg_scan(s, tmp) - s; /* has barriers: the chunk scans are done */
  for (uint r = 0; r < HY_RADIX; r++) cnt[lid * HY_RADIX + r] += off;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid < HY_RADIX) start[lid] = cnt[lid * HY_WG];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint j = 0; j < HY_PER; j++) {
    const uint i = base + j;
    if (i >= n) break;
    const ulong k = key_in[i];
    const uint d = (uint)(k >> shift) & (HY_RADIX - 1u);
    const uint at = hist[d * n_tiles + tile] + cnt[d * HY_WG + lid] - start[d];
    cnt[d * HY_WG + lid]++;
    key_out[at] = k;
    idx_out[at] = idx_in[i];
  }
}

/* A sort by merging (on GPUs faster than the radix sort's 16 passes, with
 * far fewer launches): pairs are ordered by
 * (key, idx), which is the stable order of the keys when idx grows with the
 * position (or the keys are distinct). hy_tile_sort orders tiles of
 * HY_MTILE pairs in local memory (a bitonic network); hy_merge_pass merges
 * runs of `width` pairs two by two, each pair finding its place by binary
 * search in the other run. */
#define HY_MTILE (4 * HY_WG)

inline int hy_pair_less(ulong ka, uint ia, ulong kb, uint ib) { return ka < kb || (ka == kb && ia < ib); }

__kernel void hy_tile_sort(__global ulong *key, __global uint *idx, const uint n) {
  __local ulong lk[HY_MTILE];
  __local uint li[HY_MTILE];
  const uint lid = (uint)get_local_id(0);
  const uint base = (uint)get_group_id(0) * HY_MTILE;
  for (uint j = lid; j < HY_MTILE; j += HY_WG) {
    const uint i = base + j;
    lk[j] = i < n ? key[i] : ULONG_MAX; /* padding sorts last: its idx is above every real one */
    li[j] = i < n ? idx[i] : UINT_MAX;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint k = 2; k <= HY_MTILE; k <<= 1) {
    for (uint j = k >> 1; j > 0; j >>= 1) {
      for (uint t = lid; t < HY_MTILE / 2; t += HY_WG) {
        const uint a = 2u * j * (t / j) + (t % j), b = a + j;
        const int up = (a & k) == 0u;
        const ulong ka = lk[a], kb = lk[b];
        const uint ia = li[a], ib = li[b];
        if (hy_pair_less(kb, ib, ka, ia) == up) {
          lk[a] = kb;
          lk[b] = ka;
          li[a] = ib;
          li[b] = ia;
        }
      }
      barrier(CLK_LOCAL_MEM_FENCE);
    }
  }
  for (uint j = lid; j < HY_MTILE; j += HY_WG) {
    const uint i = base + j;
    if (i < n) {
      key[i] = lk[j];
      idx[i] = li[j];
    }
  }
}

__kernel void hy_merge_pass(__global const ulong *kin, __global const uint *iin, const uint n, const uint width,
                            __global ulong *kout, __global uint *iout) {
  const uint i = (uint)get_global_id(0);
  if (i >= n) return;
  const ulong k = kin[i];
  const uint v = iin[i];
  const uint a0 = i / (2u * width) * (2u * width);
  const uint b0 = min(n, a0 + width), b1 = min(n, a0 + 2u * width);
  uint lo, hi, at;
  if (i < b0) { /* in the first run: after the second run's smaller pairs */
    lo = b0;
    hi = b1;
    at = i - a0;
  } else {
    lo = a0;
    hi = b0;
    at = i - b0;
  }
  const uint from = lo;
  while (lo < hi) {
    const uint mid = lo + (hi - lo) / 2u;
    if (hy_pair_less(kin[mid], iin[mid], k, v))
      lo = mid + 1u;
    else
      hi = mid;
  }
  at += lo - from;
  kout[a0 + at] = k;
  iout[a0 + at] = v;
}

/* ------------------------------------------------------------ cells */

/* first index in [lo, hi) whose key satisfies (key >> shift) > v */
inline uint hy_upper_digit(__global const ulong *key, uint lo, uint hi, uint shift, ulong v) {
  while (lo < hi) {
    const uint mid = lo + (hi - lo) / 2u;
    if ((key[mid] >> shift) <= v)
      lo = mid + 1u;
    else
      hi = mid;
  }
  return lo;
}

inline int hy_is_leaf(__global const ulong *key, uint lo, uint hi, uint n_crit) {
  return hi - lo < n_crit || key[lo] == key[hi - 1u];
}

/* The non-empty octants [clo, chi) of a non-leaf range at the highest octal
 * digit in which its keys differ; returns their number. */
inline int hy_split(__global const ulong *key, uint lo, uint hi, uint *clo, uint *chi) {
  const ulong diff = key[lo] ^ key[hi - 1u];
  const uint bit = 63u - (uint)clz(diff);
  const uint shift = (bit / 3u) * 3u;
  const ulong prefix = key[lo] >> (shift + 3u);
  int nc = 0;
  uint b = lo;
  for (ulong d = 0; d < 8UL && b < hi; d++) {
    const uint e = hy_upper_digit(key, b, hi, shift, (prefix << 3) | d);
    if (e > b) {
      clo[nc] = b;
      chi[nc] = e;
      nc++;
    }
    b = e;
  }
  return nc;
}

/* The generation table gen: gen[2 g] is the first cell of generation g,
 * gen[2 g + 1] its number of cells; gen[HY_GEN_FLAG] is set when a build
 * would exceed its cell count (the host reports it). The three kernels of a
 * generation read it, so the host enqueues generation after generation
 * without reading a count back. Each of the ng work-groups (the same ng in
 * hy_gen_count and hy_gen_emit) takes one contiguous chunk of the
 * generation's cells. */
inline void hy_gen_chunk(uint count, uint *b, uint *e) {
  const uint ng = (uint)get_num_groups(0);
  uint per = (count + ng - 1u) / ng;
  per = (per + HY_WG - 1u) / HY_WG * HY_WG;
  *b = min(count, (uint)get_group_id(0) * per);
  *e = min(count, *b + per);
}

/* Child cells (octants of two or more particles) of the cell [lo, hi). */
inline uint hy_child_cells(__global const ulong *key, uint lo, uint hi, uint n_crit) {
  if (hy_is_leaf(key, lo, hi, n_crit)) return 0u;
  uint clo[8], chi[8], nc = 0;
  const int k = hy_split(key, lo, hi, clo, chi);
  for (int j = 0; j < k; j++) nc += chi[j] - clo[j] > 1u ? 1u : 0u;
  return nc;
}

/* A grafted merged build (hy_graft_*): the slot-0 cell whose particles are
 * exactly those of the merged range [lo, hi) when it holds no LET item
 * (ibefore: the items before each merged position; first_at: the outermost
 * slot-0 cell starting at each local position, whose first children start
 * there too), else UINT_MAX. Such a cell's subtree is the merged tree's
 * below that range (the same keys split alike), so it is taken whole. */
inline uint hy_graft_of(uint lo, uint hi, __global const uint *ibefore, __global const uint *first_at,
                        __global const uint *l_hi, __global const int *l_mor, const int l_npart) {
  const uint ib = ibefore[lo];
  if (ibefore[hi] != ib) return UINT_MAX;
  const uint llo = lo - ib, lhi = hi - ib;
  uint lc = first_at[llo];
  while (lc != UINT_MAX && l_hi[lc] > lhi) {
    const int ch = l_mor[l_npart + (int)lc];
    lc = ch >= l_npart ? (uint)(ch - l_npart) : UINT_MAX;
  }
  return lc != UINT_MAX && l_hi[lc] == lhi ? lc : UINT_MAX;
}

/* Generation g: each cell's child-cell count, scanned within its work-group's
 * chunk into n_child (exclusive), the chunk's total into sums[group]. With
 * graft, a cell that is a slot-0 cell (hy_graft_of, recorded in gl) has no
 * children here. */
__kernel void hy_gen_count(__global const ulong *key, __global const uint *gen, const uint g,
                           __global const uint *c_lo, __global const uint *c_hi, const uint n_crit,
                           __global uint *n_child, __global uint *sums, const int graft,
                           __global const uint *ibefore, __global const uint *first_at,
                           __global const uint *l_hi, __global const int *l_mor, const int l_npart,
                           __global uint *gl) {
  __local uint tmp[HY_WG];
  const uint lid = (uint)get_local_id(0);
  const uint first = gen[2u * g], count = gen[2u * g + 1u];
  uint b, e, carry = 0;
  hy_gen_chunk(count, &b, &e);
  for (uint base = b; base < e; base += HY_WG) {
    const uint i = base + lid;
    uint nc = 0u;
    if (i < e) {
      const uint lo = c_lo[first + i], hi = c_hi[first + i];
      const uint lc = graft ? hy_graft_of(lo, hi, ibefore, first_at, l_hi, l_mor, l_npart) : UINT_MAX;
      if (graft) gl[first + i] = lc;
      nc = lc == UINT_MAX ? hy_child_cells(key, lo, hi, n_crit) : 0u;
    }
    const uint incl = hy_wg_scan(nc, tmp);
    if (i < e) n_child[i] = carry + incl - nc;
    const uint tot = tmp[HY_WG - 1u];
    barrier(CLK_LOCAL_MEM_FENCE);
    carry += tot;
  }
  if (lid == 0) sums[get_group_id(0)] = carry;
}

/* One work-group: the exclusive scan of the ng chunk totals (ng <= 4 HY_WG)
 * in place, and generation g + 1 into the table. A tree of n_part particles
 * has at most n_part - 1 cells; a build that would make more sets the flag
 * and ends (it cannot happen with a correct split). */
__kernel void hy_gen_scan(__global uint *gen, const uint g, __global uint *sums, const uint ng,
                          const uint max_cells) {
  __local uint tmp[HY_WG];
  const uint lid = (uint)get_local_id(0);
  uint v[4], s = 0;
  for (uint k = 0; k < 4u; k++) {
    v[k] = 4u * lid + k < ng ? sums[4u * lid + k] : 0u;
    s += v[k];
  }
  const uint incl = hy_wg_scan(s, tmp);
  uint run = incl - s;
  for (uint k = 0; k < 4u; k++) {
    if (4u * lid + k < ng) sums[4u * lid + k] = run;
    run += v[k];
  }
  if (lid == HY_WG - 1u) {
    const uint first = gen[2u * g], count = gen[2u * g + 1u];
    const uint next = first + count;
    if (gen[HY_GEN_FLAG] != 0u || incl > max_cells - min(max_cells, next)) {
      gen[HY_GEN_FLAG] = 1u;
      gen[2u * g + 2u] = next;
      gen[2u * g + 3u] = 0u;
    } else {
      gen[2u * g + 2u] = next;
      gen[2u * g + 3u] = incl;
    }
  }
}

/* Generation g: create the child cells (at the next generation's first cell
 * plus the cell's scanned offset) and link the children of every cell. nxt
 * of the generation's cells is set (by their parents, or the host for the
 * root). */
__kernel void hy_gen_emit(__global const ulong *key, __global const uint *gen, const uint g,
                          __global uint *c_lo, __global uint *c_hi, const uint n_crit,
                          __global const uint *n_child, __global const uint *sums, const int n_part,
                          __global int *nxt, __global int *mor, const int graft, __global const uint *gl) {
  if (gen[HY_GEN_FLAG] != 0u) return;
  const uint first = gen[2u * g], count = gen[2u * g + 1u];
  const uint new0 = first + count + sums[get_group_id(0)];
  uint b, e;
  hy_gen_chunk(count, &b, &e);
  for (uint i = b + (uint)get_local_id(0); i < e; i += HY_WG) {
    const uint c = first + i;
    if (graft && gl[c] != UINT_MAX) continue; /* a slot-0 cell, taken whole */
    const uint lo = c_lo[c], hi = c_hi[c];
    const int self = n_part + (int)c;
    const int after = nxt[self];
    if (hy_is_leaf(key, lo, hi, n_crit)) { /* leaf bucket: the particles are the children */
      mor[self] = (int)lo;
      for (uint p = lo; p + 1u < hi; p++) nxt[p] = (int)(p + 1u);
      nxt[hi - 1u] = after;
      continue;
    }
    uint clo[8], chi[8];
    const int k = hy_split(key, lo, hi, clo, chi);
    uint made = new0 + n_child[i];
    int prev = HY_NONE;
    for (int j = 0; j < k; j++) {
      int child;
      if (chi[j] - clo[j] == 1u) {
        child = (int)clo[j];
      } else {
        c_lo[made] = clo[j];
        c_hi[made] = chi[j];
        child = n_part + (int)made;
        made++;
      }
      if (prev == HY_NONE)
        mor[self] = child;
      else
        nxt[prev] = child;
      prev = child;
    }
    nxt[prev] = after;
  }
}

/* ---------------------------------------------------------- records */

/* Particle records in key order: position and mass, next, no children;
 * the relative criterion's sink scales sc (host order, the first sc_n
 * particles; the others, LET items, 0) in the b_max word, which particles
 * do not use. */
__kernel void hy_gather(__global const float4 *pos, __global const uint *idx, const uint n,
                        __global const int *nxt, __global float4 *node, __global const float *sc,
                        const uint sc_n) {
  const uint i = (uint)get_global_id(0);
  if (i >= n) return;
  const uint h = idx[i];
  node[2u * i] = pos[h];
  node[2u * i + 1u] = (float4)(0.0f, h < sc_n ? sc[h] : 0.0f, as_float(nxt[i]), as_float(HY_NONE));
}

/* float rounding must not leave a particle outside b_max (the hard walk
 * skips cells beyond R2 + b_max) */
inline float hy_bmax_safe(float b) { return b * (1.0f + 4.0f * FLT_EPSILON); }

/* B2 and b_max of particle node x (key order) as a group: zero for a true
 * particle; a LET item of a merged tree carries those of the particles it
 * stands for (grp in the host's order, idx: key order -> host order). */
inline float2 hy_group(__global const uint *idx, __global const float2 *grp, const int has_grp, const int x) {
  return has_grp ? grp[idx[x]] : (float2)(0.0f);
}

/* max over particles lo + k step < hi of |x_i - cm| (+ the item's own b_max) */
inline float hy_extent(__global const float4 *node, const uint lo, const uint hi, const uint step, const float3 cm,
                       __global const uint *idx, __global const float2 *grp, const int has_grp) {
  /* particles without an extent of their own give sqrt(max |d|^2) either
   * way, so a set of them gets the same bound with or without grp (a merged
   * build copies such cells from the local tree: hy_moments) */
  float m2 = 0.0f, m1 = 0.0f;
  if (has_grp) {
    for (uint i = lo; i < hi; i += step) {
      const float3 d = node[2u * i].xyz - cm;
      const float b = grp[idx[i]].y;
      if (b > 0.0f)
        m1 = fmax(m1, sqrt(dot(d, d)) + b);
      else
        m2 = fmax(m2, dot(d, d));
    }
    return fmax(sqrt(m2), m1);
  }
  /* four loads in flight per pass (a maximum does not depend on the order) */
  float m2b = 0.0f, m2c = 0.0f, m2d = 0.0f;
  uint i = lo;
  for (; i + 3u * step < hi; i += 4u * step) {
    const float3 d0 = node[2u * i].xyz - cm, d1 = node[2u * (i + step)].xyz - cm;
    const float3 d2 = node[2u * (i + 2u * step)].xyz - cm, d3 = node[2u * (i + 3u * step)].xyz - cm;
    m2 = fmax(m2, dot(d0, d0));
    m2b = fmax(m2b, dot(d1, d1));
    m2c = fmax(m2c, dot(d2, d2));
    m2d = fmax(m2d, dot(d3, d3));
  }
  for (; i < hi; i += step) {
    const float3 d = node[2u * i].xyz - cm;
    m2 = fmax(m2, dot(d, d));
  }
  return sqrt(fmax(fmax(m2, m2b), fmax(m2c, m2d)));
}

/* A cell record's MAC word (HY_MAC_WORD): r_b^2 of the absolute MAC,
 * r_b = b/2 + sqrt(b^2/4 + sqrt(3 B2 / a_err)), or with a_err 0 the
 * relative criterion's sqrt(3 B2) */
inline float hy_mac_rb2(float bmax, float b2, float a_err) {
  if (!(a_err > 0.0f)) return sqrt(3.0f * b2);
  const float rb = HY_MAC_RADIUS(bmax, b2, a_err);
  return rb * rb;
}

/* Moments and records of the cells of one generation (their children's are
 * final). b_max: exact here up to HY_BMAX_SERIAL particles; cells up to
 * HY_BMAX_EXACT are listed in big (count in n_big[gi], one counter per
 * generation, all cleared once before the first) for hy_bmax_big and
 * get the bound from their children meanwhile; larger cells keep the bound.
 * graft (a merged build of the slot-0 tree's particles and LET items): a
 * cell without items (ibefore: the items before each merged position) whose
 * particles form a cell of the slot-0 tree (first_at: the outermost slot-0
 * cell starting at each position; its first children start there too) has
 * that cell's moments, the same floats from the same particles in the same
 * order: they are copied, and n_graft counts the copies. A leaf bucket
 * (fewer than n_crit particles, the build's) reads its particles by index,
 * lo .. hi - 1, and its bound over them is already their exact b_max; other
 * cells keep their (at most 8) children in registers between the two sums,
 * so each link is followed once. */
__kernel void hy_moments(const uint gen0, const uint n_gen, const int n_part, __global const uint *c_lo,
                         __global const uint *c_hi, __global const int *nxt, __global const int *mor,
                         __global float *c_b2, const float a_err, __global float4 *node,
                         __global uint *big, __global uint *n_big, const uint gi, __global const uint *idx,
                         __global const float2 *grp, const int has_grp, const int graft,
                         __global const uint *ibefore, __global const uint *first_at, __global const uint *l_hi,
                         __global const int *l_mor, __global const float4 *l_node, __global const float *l_b2,
                         const int l_npart, __global uint *n_graft, const uint n_crit) {
  __local uint l_count;
  if (get_local_id(0) == 0) l_count = 0u;
  barrier(CLK_LOCAL_MEM_FENCE);
  const uint g = (uint)get_global_id(0);
  if (g < n_gen) {
    const uint c = gen0 + g;
    const int self = n_part + (int)c;
    const int after = nxt[self], first = mor[self];
    const uint lo = c_lo[c], hi = c_hi[c];
    int done = 0;
    if (graft && ibefore[hi] == ibefore[lo]) {
      const uint ib = ibefore[lo], llo = lo - ib, lhi = hi - ib;
      uint lc = first_at[llo];
      while (lc != UINT_MAX && l_hi[lc] > lhi) {
        const int ch = l_mor[l_npart + (int)lc];
        lc = ch >= l_npart ? (uint)(ch - l_npart) : UINT_MAX;
      }
      if (lc != UINT_MAX && l_hi[lc] == lhi) {
        const int ls = l_npart + (int)lc;
        const float4 q = l_node[2 * ls + 1];
        c_b2[c] = l_b2[lc];
        node[2 * self] = l_node[2 * ls];
        node[2 * self + 1] = (float4)(q.x, q.y, as_float(after), as_float(first));
        atomic_inc(&l_count);
        done = 1;
      }
    }
    if (!done) {
      /* a leaf bucket (hy_gen_emit): its children are the particles lo ..
       * hi - 1, read by index rather than along the links, and the bound
       * over them is their exact b_max (hy_extent's value); other cells
       * have at most 8 children (but for buckets of equal keys), kept from
       * the first pass along the links for the second sum */
      const int leaf = hi - lo < n_crit;
      float m = 0.0f;
      float3 s = (float3)(0.0f);
      float4 kp[8];
      float2 kg[8];
      int nk = 0;
      if (leaf) {
        for (uint x = lo; x < hi; x++) {
          const float4 p = node[2u * x];
          m += p.w;
          s += p.w * p.xyz;
        }
      } else {
        for (int x = first; x != after; x = nxt[x]) {
          const float4 p = node[2 * x];
          m += p.w;
          s += p.w * p.xyz;
          if (nk < 8) {
            kp[nk] = p;
            kg[nk] = x >= n_part ? (float2)(c_b2[x - n_part], node[2 * x + 1].y) : hy_group(idx, grp, has_grp, x);
          }
          nk++;
        }
      }
      const float3 cm = m > 0.0f ? s / m : (float3)(0.0f);
      float b2 = 0.0f, bound = 0.0f;
      if (leaf) {
        for (uint x = lo; x < hi; x++) {
          const float4 p = node[2u * x];
          const float3 d = p.xyz - cm;
          const float r2 = dot(d, d);
          const float2 gg = hy_group(idx, grp, has_grp, (int)x);
          b2 += gg.x + p.w * r2;
          bound = fmax(bound, gg.y + sqrt(r2));
        }
      } else if (nk <= 8) {
        for (int k = 0; k < nk; k++) {
          const float3 d = kp[k].xyz - cm;
          const float r2 = dot(d, d);
          b2 += kg[k].x + kp[k].w * r2;
          bound = fmax(bound, kg[k].y + sqrt(r2));
        }
      } else {
        for (int x = first; x != after; x = nxt[x]) {
          const float4 p = node[2 * x];
          const float3 d = p.xyz - cm;
          const float r2 = dot(d, d);
          const int is_cell = x >= n_part;
          const float2 gg = is_cell ? (float2)(c_b2[x - n_part], node[2 * x + 1].y) : hy_group(idx, grp, has_grp, x);
          b2 += gg.x + p.w * r2;
          bound = fmax(bound, gg.y + sqrt(r2));
        }
      }
      float bmax = bound;
      if (leaf) {
        bmax = hy_bmax_safe(bound);
      } else if (hi - lo <= (uint)HY_BMAX_SERIAL) {
        bmax = hy_bmax_safe(hy_extent(node, lo, hi, 1u, cm, idx, grp, has_grp));
      } else if (hi - lo <= (uint)HY_BMAX_EXACT) {
        big[atomic_inc(&n_big[gi])] = c; /* exact b_max by hy_bmax_big, a work-group per cell */
      }
      c_b2[c] = b2;
      node[2 * self] = (float4)(cm, m);
      node[2 * self + 1] = (float4)(hy_mac_rb2(bmax, b2, a_err), bmax, as_float(after), as_float(first));
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (get_local_id(0) == 0 && l_count > 0u) atomic_add(n_graft, l_count);
}

/* Open-all trees (a hard step's remote tree: every cell is opened, so a
 * cell's record serves only the hard walk's cut-off at R2 + b_max and the
 * block marks): a cell's sphere is the box of its particles, which are
 * contiguous in key order (c_lo .. c_hi - 1): its centre, and the distance
 * from there to the farthest corner as b_max. The boxes come from boxes of
 * HY_BOX1 particles (hy_box_small), of HY_BOX1 such boxes (hy_box_large),
 * and per cell its partial ends and the whole boxes between them
 * (hy_box_cells): three launches, where the moments take two per cell
 * generation. A box's record: (min,
 * mass), (max, 0). */
#ifndef HY_BOX1
#error "HY_BOX1 must be defined"
#endif
#define HY_BOX2 (HY_BOX1 * HY_BOX1)

inline void hy_box_add(float4 *mn, float4 *mx, float4 lo, float4 hi) {
  *mn = (float4)(fmin((*mn).xyz, lo.xyz), (*mn).w + lo.w);
  *mx = (float4)(fmax((*mx).xyz, hi.xyz), 0.0f);
}

__kernel void hy_box_small(__global const float4 *node, const uint n, __global float4 *box1) {
  const uint b = (uint)get_global_id(0);
  const uint lo = b * HY_BOX1;
  if (lo >= n) return;
  const uint hi = min(n, lo + HY_BOX1);
  float4 mn = (float4)(INFINITY, INFINITY, INFINITY, 0.0f), mx = (float4)(-INFINITY, -INFINITY, -INFINITY, 0.0f);
  for (uint i = lo; i < hi; i++) {
    const float4 p = node[2u * i];
    hy_box_add(&mn, &mx, p, p);
  }
  box1[2u * b] = mn;
  box1[2u * b + 1u] = mx;
}

/* box: the n1 small boxes, then the large ones */
__kernel void hy_box_large(__global float4 *box, const uint n1) {
  __global const float4 *box1 = box;
  __global float4 *box2 = box + 2u * n1;
  const uint b = (uint)get_global_id(0);
  const uint lo = b * HY_BOX1;
  if (lo >= n1) return;
  const uint hi = min(n1, lo + HY_BOX1);
  float4 mn = (float4)(INFINITY, INFINITY, INFINITY, 0.0f), mx = (float4)(-INFINITY, -INFINITY, -INFINITY, 0.0f);
  for (uint i = lo; i < hi; i++) hy_box_add(&mn, &mx, box1[2u * i], box1[2u * i + 1u]);
  box2[2u * b] = mn;
  box2[2u * b + 1u] = mx;
}

__kernel void hy_box_cells(const int n_part, const uint n_cell, __global const uint *c_lo, __global const uint *c_hi,
                           __global const int *nxt, __global const int *mor, __global const float4 *box,
                           const uint n1, __global float4 *node) {
  __global const float4 *box1 = box, *box2 = box + 2u * n1;
  const uint c = (uint)get_global_id(0);
  if (c >= n_cell) return;
  const uint hi = c_hi[c];
  uint i = c_lo[c];
  float4 mn = (float4)(INFINITY, INFINITY, INFINITY, 0.0f), mx = (float4)(-INFINITY, -INFINITY, -INFINITY, 0.0f);
  for (; i < hi && i % HY_BOX1 != 0u; i++) {
    const float4 p = node[2u * i];
    hy_box_add(&mn, &mx, p, p);
  }
  for (; i + HY_BOX1 <= hi && i % HY_BOX2 != 0u; i += HY_BOX1)
    hy_box_add(&mn, &mx, box1[2u * (i / HY_BOX1)], box1[2u * (i / HY_BOX1) + 1u]);
  for (; i + HY_BOX2 <= hi; i += HY_BOX2) hy_box_add(&mn, &mx, box2[2u * (i / HY_BOX2)], box2[2u * (i / HY_BOX2) + 1u]);
  for (; i + HY_BOX1 <= hi; i += HY_BOX1)
    hy_box_add(&mn, &mx, box1[2u * (i / HY_BOX1)], box1[2u * (i / HY_BOX1) + 1u]);
  for (; i < hi; i++) {
    const float4 p = node[2u * i];
    hy_box_add(&mn, &mx, p, p);
  }
  /* the farthest corner from the rounded centre (each difference exact or
   * rounded by half an ulp of itself, which hy_bmax_safe covers with the
   * norm's own rounding) */
  const float3 cen = 0.5f * (mn.xyz + mx.xyz);
  const float3 far = fmax(cen - mn.xyz, mx.xyz - cen);
  const int self = n_part + (int)c;
  node[2 * self] = (float4)(cen, mn.w);
  node[2 * self + 1] = (float4)(FLT_MAX, hy_bmax_safe(sqrt(dot(far, far))), as_float(nxt[self]), as_float(mor[self]));
}

/* The outermost slot-0 cell that starts at each particle position: the
 * lowest cell number (cells are numbered from the root down). first_at
 * holds UINT_MAX before. */
__kernel void hy_first_cells(__global const uint *c_lo, const uint n_cell, __global uint *first_at) {
  const uint c = (uint)get_global_id(0);
  if (c < n_cell) atomic_min(&first_at[c_lo[c]], c);
}

/* ------------------------------------------------------- grafted merge
 *
 * The merged tree of a soft step (local particles and LET items) built
 * around the slot-0 tree instead of beside it: its cells that hold no item
 * and are slot-0 cells (hy_graft_of) are not made again but taken whole,
 * so that only the cells with items get records. These records follow the
 * slot-0 tree's in its node buffer: the items at item_base + k (k: the
 * item's rank in key order), the merged cells at u_base + c. The walk then
 * meets the same nodes in the same order as in the plain merged tree, with
 * the same floats. Node numbers: the merged build's (positions 0 .. nm-1 in
 * merged key order, cells nm + c) map to the walk's by hy_gu. The slot-0
 * records whose `next` the merged tree changes (its particles that are
 * children of merged cells, and the last nodes of the subtrees taken whole)
 * are overwritten: the next build of slot 0 writes them anew. */

inline int hy_gu(const int x, const uint nm, __global const uint *ibefore, __global const uint *gl, const int l_npart,
                 const int item_base, const int u_base) {
  if (x == HY_NONE) return HY_NONE;
  if ((uint)x < nm) {
    const uint ib = ibefore[x];
    return ibefore[x + 1] != ib ? item_base + (int)ib : x - (int)ib;
  }
  const uint c = (uint)x - nm, lc = gl[c];
  return lc != UINT_MAX ? l_npart + (int)lc : u_base + (int)c;
}

/* Merged position j: an item's record (r_b^2 < 0: a particle to the walk;
 * b_max from its group, its B2 into item_b2), or a local particle's new
 * `next` when a merged cell links it and its sink: local particle i (its
 * slot-0 node, j less the items before it) is the walk's sink i (position,
 * and its own node in .w). The items are not sinks. ipos, igrp: the state's
 * appended items (host order, idx). */
__kernel void hy_graft_links(const uint nm, const int l_npart, const int item_base, const int u_base,
                             __global const uint *ibefore, __global const uint *gl, __global const int *nxt,
                             __global const uint *idx, __global const float4 *ipos, __global const float2 *igrp,
                             __global float4 *node, __global float *item_b2, __global float4 *sink) {
  const uint j = (uint)get_global_id(0);
  if (j >= nm) return;
  const uint ib = ibefore[j];
  if (ibefore[j + 1] != ib) {
    const uint h = idx[j];
    const float4 p = ipos[h];
    const float2 gg = igrp[h];
    const int rec = item_base + (int)ib;
    node[2 * rec] = p;
    node[2 * rec + 1] =
        (float4)(-1.0f, gg.y, as_float(hy_gu(nxt[j], nm, ibefore, gl, l_npart, item_base, u_base)), as_float(HY_NONE));
    item_b2[ib] = gg.x;
  } else {
    const int i = (int)(j - ib);
    const int nx = nxt[j];
    if (nx != INT_MIN) node[2 * i + 1].z = as_float(hy_gu(nx, nm, ibefore, gl, l_npart, item_base, u_base));
    sink[i] = (float4)(node[2 * i].xyz, as_float(i));
  }
}

/* A merged tree (not grafted) whose local particles kept their slot-0 key
 * order (ibefore: the items before each merged position): local particle i,
 * at merged position j = i + ibefore[j], is the walk's sink i (its record's
 * position, and its node j in .w). The items are not sinks, so that a
 * work-item's sinks are local neighbours (they share the walk's opening
 * tests: an item among them, far from the others, opens cells for all). */
__kernel void hy_merged_sinks(const uint nm, __global const uint *ibefore, __global const float4 *node,
                              __global float4 *sink) {
  const uint j = (uint)get_global_id(0);
  if (j >= nm) return;
  const uint ib = ibefore[j];
  if (ibefore[j + 1] != ib) return;
  sink[j - ib] = (float4)(node[2 * j].xyz, as_float((int)j));
}

/* A subtree taken whole (gl[c]: its slot-0 cell): its root's `next` and
 * those of its last nodes (which left the subtree for the root's old
 * `next`) to the merged tree's. l_nxt, l_mor: the slot-0 build's links. */
__kernel void hy_graft_stubs(const uint n_cell, const uint nm, const int l_npart, const int item_base, const int u_base,
                             __global const uint *ibefore, __global const uint *gl, __global const int *nxt,
                             __global const int *l_nxt, __global const int *l_mor, __global float4 *node,
                             __global uint *n_graft) {
  const uint c = (uint)get_global_id(0);
  if (c >= n_cell || gl[c] == UINT_MAX) return;
  atomic_inc(n_graft);
  const int ls = l_npart + (int)gl[c];
  const int after = hy_gu(nxt[nm + c], nm, ibefore, gl, l_npart, item_base, u_base);
  const int old = l_nxt[ls];
  node[2 * ls + 1].z = as_float(after);
  int x = l_mor[ls];
  for (;;) {
    while (l_nxt[x] != old) x = l_nxt[x];
    node[2 * x + 1].z = as_float(after);
    if (x < l_npart) break;
    x = l_mor[x];
  }
}

/* hy_extent over the merged positions [lo, hi) (every step-th) by their
 * records: local particles without an extent, items with their b_max. */
inline float hy_graft_extent(__global const float4 *node, const uint lo, const uint hi, const uint step,
                             const float3 cm, __global const uint *ibefore, const int item_base) {
  float m2 = 0.0f, m1 = 0.0f;
  for (uint j = lo; j < hi; j += step) {
    const uint ib = ibefore[j];
    const int item = ibefore[j + 1] != ib;
    const int rec = item ? item_base + (int)ib : (int)(j - ib);
    const float3 d = node[2 * rec].xyz - cm;
    const float b = item ? node[2 * rec + 1].y : 0.0f;
    if (b > 0.0f)
      m1 = fmax(m1, sqrt(dot(d, d)) + b);
    else
      m2 = fmax(m2, dot(d, d));
  }
  return fmax(sqrt(m2), m1);
}

/* hy_moments for the merged cells of one generation that are not taken
 * whole: the same sums over the children in the same order. */
__kernel void hy_graft_moments(const uint gen0, const uint n_gen, const uint nm, __global const uint *c_lo,
                               __global const uint *c_hi, __global const int *nxt, __global const int *mor,
                               __global const uint *ibefore, __global const uint *gl, const int l_npart,
                               const int item_base, const int u_base, __global const float *l_b2,
                               __global const float *item_b2, __global float *u_b2, const float a_err,
                               __global float4 *node, __global uint *big, __global uint *n_big, const uint gi) {
  const uint g = (uint)get_global_id(0);
  if (g >= n_gen) return;
  const uint c = gen0 + g;
  if (gl[c] != UINT_MAX) return;
  const int self = u_base + (int)c;
  const int after = hy_gu(nxt[nm + c], nm, ibefore, gl, l_npart, item_base, u_base);
  const int first = hy_gu(mor[nm + c], nm, ibefore, gl, l_npart, item_base, u_base);
  const uint lo = c_lo[c], hi = c_hi[c];
  float m = 0.0f;
  float3 s = (float3)(0.0f);
  for (int x = first; x != after; x = as_int(node[2 * x + 1].z)) {
    const float4 p = node[2 * x];
    m += p.w;
    s += p.w * p.xyz;
  }
  const float3 cm = m > 0.0f ? s / m : (float3)(0.0f);
  float b2 = 0.0f, bound = 0.0f;
  for (int x = first; x != after; x = as_int(node[2 * x + 1].z)) {
    const float4 p = node[2 * x];
    const float3 d = p.xyz - cm;
    const float r2 = dot(d, d);
    float2 gg = (float2)(0.0f);
    if (x >= l_npart) {
      const float gb = x < item_base ? l_b2[x - l_npart] : x < u_base ? item_b2[x - item_base] : u_b2[x - u_base];
      gg = (float2)(gb, node[2 * x + 1].y);
    }
    b2 += gg.x + p.w * r2;
    bound = fmax(bound, gg.y + sqrt(r2));
  }
  float bmax = bound;
  if (hi - lo <= (uint)HY_BMAX_SERIAL) {
    bmax = hy_bmax_safe(hy_graft_extent(node, lo, hi, 1u, cm, ibefore, item_base));
  } else if (hi - lo <= (uint)HY_BMAX_EXACT) {
    big[atomic_inc(&n_big[gi])] = c; /* exact b_max by hy_graft_bmax_big */
  }
  u_b2[c] = b2;
  node[2 * self] = (float4)(cm, m);
  node[2 * self + 1] = (float4)(hy_mac_rb2(bmax, b2, a_err), bmax, as_float(after), as_float(first));
}

/* The work-group's maximum of red (each work-item's extent) as cell
 * self's exact b_max, and its r_b^2 with B2 b2; every work-item calls it. */
inline void hy_bmax_reduce(__local float *red, const uint lid, __global float4 *node, const int self, const float b2,
                           const float a_err) {
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint off = HY_WG / 2u; off > 0u; off >>= 1) {
    if (lid < off) red[lid] = fmax(red[lid], red[lid + off]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    const float bmax = hy_bmax_safe(red[0]);
    float4 q = node[2 * self + 1];
    q.x = hy_mac_rb2(bmax, b2, a_err);
    q.y = bmax;
    node[2 * self + 1] = q;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
}

/* hy_bmax_big for the cells that hy_graft_moments listed. */
__kernel void hy_graft_bmax_big(__global const uint *c_lo, __global const uint *c_hi, __global const float *u_b2,
                                __global const uint *big, __global const uint *n_big, const uint gi, const float a_err,
                                __global float4 *node, __global const uint *ibefore, const int item_base,
                                const int u_base) {
  __local float red[HY_WG];
  const uint lid = (uint)get_local_id(0);
  const uint nb = n_big[gi];
  for (uint b = (uint)get_group_id(0); b < nb; b += (uint)get_num_groups(0)) {
    const uint c = big[b];
    const int self = u_base + (int)c;
    const float3 cm = node[2 * self].xyz;
    red[lid] = hy_graft_extent(node, c_lo[c] + lid, c_hi[c], HY_WG, cm, ibefore, item_base);
    hy_bmax_reduce(red, lid, node, self, u_b2[c], a_err);
  }
}

/* Exact b_max (and r_b) of the cells listed by hy_moments, a work-group per
 * cell: each work-item takes every HY_WG-th particle, then a local max. The
 * list's order (atomic appends) does not matter: a maximum is exact. Runs
 * in a fixed grid of work-groups that loop over the list. */
__kernel void hy_bmax_big(const int n_part, __global const uint *c_lo, __global const uint *c_hi,
                          __global const float *c_b2, __global const uint *big, __global const uint *n_big, const uint gi,
                          const float a_err, __global float4 *node, __global const uint *idx,
                          __global const float2 *grp, const int has_grp) {
  __local float red[HY_WG];
  const uint lid = (uint)get_local_id(0);
  const uint nb = n_big[gi];
  for (uint b = (uint)get_group_id(0); b < nb; b += (uint)get_num_groups(0)) {
    const uint c = big[b];
    const int self = n_part + (int)c;
    const float3 cm = node[2 * self].xyz;
    red[lid] = hy_extent(node, c_lo[c] + lid, c_hi[c], HY_WG, cm, idx, grp, has_grp);
    hy_bmax_reduce(red, lid, node, self, c_b2[c], a_err);
  }
}

/* For a hard walk of a tree whose every cell is opened: block_on[b] = 1 when
 * some particle of the tree may lie within R2 of a sink of block b
 * (HY_SINK_BLOCK consecutive sinks), else 0. The block's sphere (centre c,
 * radius rho) walks the tree as its sinks would, skipping a node at
 * |p - c| >= rho + R2 + b_max, which every sink of the block skips too, and
 * is marked at the first particle closer than rho + R2. A slack covers the
 * rounding of rho and of the sinks' own tests: 1e-5 of the reach, and 1e-6
 * of the coordinates' size (the differences of float positions). With
 * use_box, a block whose sphere lies farther than rho + R2 from the box
 * [box_lo, box_hi] that holds every particle of the tree is 0 without a
 * walk (a wider slack: 1e-3 and 1e-5; a block marked needlessly only walks
 * to find nothing). */
__kernel void hy_block_mark(__global const float4 *node, const int n_part, const int root,
                            __global const float4 *sink, const uint n_sink, const float r2,
                            __global uchar *block_on, const uint sink_stride, const float4 box_lo,
                            const float4 box_hi, const int use_box) {
  const uint b = (uint)get_global_id(0);
  const uint s0 = b * HY_SINK_BLOCK;
  if (s0 >= n_sink) return;
  const uint s1 = min(n_sink, s0 + HY_SINK_BLOCK);
  float3 lo = sink[s0 * sink_stride].xyz, hi = lo;
  for (uint j = s0 + 1u; j < s1; j++) {
    lo = fmin(lo, sink[j * sink_stride].xyz);
    hi = fmax(hi, sink[j * sink_stride].xyz);
  }
  /* the block's sphere: the centre of its box and half the box's diagonal
   * (at least the farthest sink's distance: one pass over the sinks, not
   * two; a wider sphere only walks where it finds nothing) */
  const float3 c = 0.5f * (lo + hi);
  const float rho = 0.5f * length(hi - lo) * 1.000001f;
  const float c_mag = fmax(fmax(fabs(c.x), fabs(c.y)), fabs(c.z)) + rho;
  if (use_box) {
    const float3 out = fmax(fmax(box_lo.xyz - c, c - box_hi.xyz), (float3)(0.0f));
    const float3 m = fmax(fabs(box_lo.xyz), fabs(box_hi.xyz));
    const float b_mag = fmax(fmax(m.x, m.y), m.z);
    if (length(out) >= (rho + r2) * 1.001f + 1e-5f * (c_mag + b_mag)) {
      block_on[b] = 0;
      return;
    }
  }
  uchar on = 0;
  int cur = root;
  while (cur != HY_NONE) {
    const float4 p = node[2 * cur];
    const float4 q = node[2 * cur + 1];
    const float d = length(p.xyz - c);
    const float p_mag = fmax(fmax(fabs(p.x), fabs(p.y)), fabs(p.z));
    const float reach = (rho + r2 + q.y) * 1.00001f + 1e-6f * (c_mag + p_mag); /* b_max (q.y): 0 for particles */
    if (d >= reach) {
      cur = as_int(q.z);
    } else if (cur < n_part) {
      on = 1;
      break;
    } else {
      cur = as_int(q.w);
    }
  }
  block_on[b] = on;
}

/* The blocks of HY_SINK_BLOCK sinks in key order (idx: each one's index
 * before the sort) that hold at least one of the first n_local, the local
 * particles of a merged tree (the rest are LET items, whose results are
 * dropped): block_on 1, else 0. */
__kernel void hy_item_blocks(__global const uint *idx, const uint n, const uint n_local, __global uchar *block_on) {
  const uint b = (uint)get_global_id(0);
  const uint s0 = b * HY_SINK_BLOCK;
  if (s0 >= n) return;
  const uint s1 = min(n, s0 + HY_SINK_BLOCK);
  uchar on = 0;
  for (uint j = s0; j < s1; j++) on |= idx[j] < n_local;
  block_on[b] = on;
}

/* Every cell's r_b^2 to FLT_MAX, so that every sink opens it (the remote
 * tree of hard-LET items: its leaves were accepted against the receiving
 * box already). */
__kernel void hy_open_cells(__global float4 *node, const int n_part, const uint n_cell) {
  const uint c = (uint)get_global_id(0);
  if (c < n_cell) node[2 * (n_part + (int)c) + 1].x = FLT_MAX;
}

/* acc[idx[i]] += x[i]: a walk's results in key order added to those of an
 * unsort walk of the same particles (in the host's order); with use_blocks,
 * only the sinks of blocks that hy_block_mark marked (the others' results
 * are zero and were not written). */
__kernel void hy_add_unsort(__global const uint *idx, const uint n, __global const float4 *x, __global float4 *acc,
                            __global const uchar *block_on, const int use_blocks) {
  const uint i = (uint)get_global_id(0);
  if (i >= n || (use_blocks && !block_on[i / HY_SINK_BLOCK])) return;
  acc[idx[i]] += x[i];
}


/* out[idx[i]] = in[i]: results from key order to the host's order. */
__kernel void hy_unsort(__global const uint *idx, const uint n, __global const float4 *in,
                        __global float4 *out) {
  const uint i = (uint)get_global_id(0);
  if (i < n) out[idx[i]] = in[i];
}
