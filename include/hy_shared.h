/* SPDX-License-Identifier: GPL-3.0-or-later
 * hy_shared.h: definitions shared by the host C code and the OpenCL kernels.
 * Must stay valid both as C11 and as OpenCL C 1.2: no host types, no includes.
 *
 * Device node record (2 float4 = 32 bytes per node), particles first:
 *   node[2*i]   = (x, y, z, m)            position relative to the tree centre, mass
 *   node[2*i+1] = (r_b^2, b_max, next, more)  next/more stored as int bits
 * Nodes 0 .. n_part-1 are particles (r_b^2 = b_max = 0, more = HY_NONE),
 * nodes n_part .. are cells. */
#ifndef HY_SHARED_H
#define HY_SHARED_H

#define HY_NONE (-1)

/* Walk argument self_base: the sink's own node index is in the sink
 * record's 4th word (int bits) instead of self_base + sink index. */
#define HY_SELF_IN_SINK (-2)

/* Walk weight variants (HY_WALK_MODE build option of walk.cl). */
#define HY_WALK_FULL 0     /* weight 1: normal tree, potential, tests           */
#define HY_WALK_HARD 1     /* weight K(r), nodes beyond R2 + b_max skipped      */
#define HY_WALK_SPLIT 2    /* two accumulators: K(r) (hard) and 1 - K(r) (soft) */
#define HY_WALK_SOFTSTEP 3 /* weight n - (n - 1) K(r): the soft-step kick       */
#define HY_WALK_NMODES 4

/* Per-work-item counters written by the walk kernel. */
#define HY_COUNT_PP 0 /* particle-particle interactions */
#define HY_COUNT_PC 1 /* particle-cell interactions     */
#define HY_COUNT_N 2

/* Hard walks of a tree whose every cell is opened (the remote tree of
 * hard-LET items) may skip blocks of this many consecutive sinks that no
 * particle of the tree reaches within R2 (hy_block_mark in build.cl); a
 * multiple of the walk's sinks per work-item. */
#define HY_SINK_BLOCK 64

/* The sums of a row of energy.csv (src/diag.c on the host, state.cl's
 * hy_st_energy on the device): K, W, the momentum, the angular momentum. */
#define HY_ENERGY_SUMS 8

/* The rules that the host and the kernels apply alike, one definition each
 * (integer constants, so that each side computes in its own precision, float
 * or double, with the same operations). */

/* The opening criterion's radius (Watanabe & Nakasato eq 5-6, after Warren
 * & Salmon 1993): a cell of extent b_max and B2 = sum m |x - x_cm|^2 is
 * opened for a sink closer to its centre of mass than
 * r_b = b_max/2 + sqrt(b_max^2/4 + sqrt(3 B2 / a_err)). */
#define HY_MAC_RADIUS(bmax, b2, a_err) ((bmax) / 2 + sqrt((bmax) * (bmax) / 4 + sqrt(3 * (b2) / (a_err))))

/* The word a cell's node record holds in r_b^2's place: r_b^2 for the
 * absolute criterion (a_err > 0), sqrt(3 B2) for the relative one (a_err 0). */
#define HY_MAC_WORD(bmax, b2, a_err) \
  ((a_err) > 0 ? HY_MAC_RADIUS(bmax, b2, a_err) * HY_MAC_RADIUS(bmax, b2, a_err) : sqrt(3 * (b2)))

/* The relative opening criterion (Gadget's, with the error estimate above):
 * the cell is accepted when 3 B2 / (d^2 (d - b_max)^2), its monopole
 * error for G = 1, is below alpha |a_old| / G of the sink, i.e. at distances
 * d beyond the radius above with a_err = alpha |a_old| / G:
 * d (d - b_max) > w c with w = sqrt(3 B2) and the sink's scale
 * c = (alpha |a_old| / G)^-1/2, written without a root. */
#define HY_MAC_REL_ACCEPT(d2, w, c, bmax) \
  ((d2) - (w) * (c) > 0 && ((d2) - (w) * (c)) * ((d2) - (w) * (c)) > (d2) * (bmax) * (bmax))

/* A sink's scale c from its last total acceleration a (|a| = amag, G
 * included) with alpha_g = alpha / G; a sink without one (amag 0: the first
 * force of a run, a particle that just changed rank) takes the absolute
 * criterion's a_err / G (aerr_g) instead, and with capped set every sink
 * takes the smaller of the two (both criteria hold). */
#define HY_MAC_REL_SCALE(amag, alpha_g, aerr_g, capped) \
  (1 / sqrt((amag) > 0 && !((capped) && (alpha_g) * (amag) > (aerr_g)) ? (alpha_g) * (amag) : (aerr_g)))

/* The hard force's reach: nothing of a node of extent b_max (0 for a
 * particle) is within R2 of a point at least this far from its centre. */
#define HY_HARD_REACH(r2, bmax) ((r2) + (bmax))

/* The DLL switching kernel K (Oshino, Funato & Makino 2011; Watanabe &
 * Nakasato eq 8) between R1 and R2, in yy = y^2, y = (R2 - r) / (R2 - R1):
 * K = 10 y^6 - 15 y^8 + 6 y^10. */
#define HY_DLL_POLY(yy) ((yy) * (yy) * (yy) * (10 + (yy) * (-15 + 6 * (yy))))

/* Bits per axis of a Morton key (63-bit keys). */
#define HY_KEY_BITS 21

/* out = the key grid's cell of coordinate x along an axis of the key cube
 * (lo its lower corner, scale = 2^HY_KEY_BITS / side): (x - lo) scale in
 * type T, clamped to [0, 2^HY_KEY_BITS - 1], NaN to 0. */
#define HY_KEY_GRID(out, T, x, lo, scale)                                        \
  do {                                                                           \
    const T u_ = ((x) - (lo)) * (scale), max_ = (T)((1u << HY_KEY_BITS) - 1u);   \
    (out) = !(u_ >= 0) ? 0 : u_ >= max_ ? max_ : u_;                             \
  } while (0)

/* Morton keys (src/tree_internal.h on the host, build.cl and state.cl on the
 * device): the statements that spread the low 21 bits of the 64-bit unsigned
 * variable v so that bit i moves to bit 3i; one definition for both
 * languages, so that the host's and the device's keys agree. */
#define HY_KEY_SPREAD3(v)                                \
  do {                                                   \
    (v) &= 0x1fffffUL;                                   \
    (v) = ((v) | ((v) << 32)) & 0x001f00000000ffffUL;    \
    (v) = ((v) | ((v) << 16)) & 0x001f0000ff0000ffUL;    \
    (v) = ((v) | ((v) << 8)) & 0x100f00f00f00f00fUL;     \
    (v) = ((v) | ((v) << 4)) & 0x10c30c30c30c30c3UL;     \
    (v) = ((v) | ((v) << 2)) & 0x1249249249249249UL;     \
  } while (0)

/* Floats per LET item on the wire and from the device selection
 * (hy_let_gather in let.cl): x, y, z relative to the receiver's frame, m,
 * B2, b_max. */
#define HY_LET_ITEM 6

#endif
