/* SPDX-License-Identifier: GPL-3.0-or-later
 * part.h: the particle set (structure of arrays). Owns allocation, growth and
 * the one place where particles are reordered (hy_part_permute). Knows nothing
 * of trees, devices or files. */
#ifndef HY_PART_H
#define HY_PART_H

#include <stddef.h>
#include <stdint.h>

#include "threads.h"

#define HY_NTYPES 6 /**< Gadget particle types 0..5 */

struct hy_part {
  size_t n;       /**< number of particles */
  size_t n_alloc; /**< capacity of every array */
  double *pos;    /**< positions, 3 per particle [length] */
  double *vel;    /**< velocities, 3 per particle [length/time] */
  double *mass;   /**< masses [mass] */
  uint64_t *id;   /**< particle IDs, preserved from the ICs */
  uint8_t *type;  /**< Gadget particle type 0..5 */
  double *acc;    /**< total acceleration (hard + soft) of the last step-end force, 3 per particle; with
                       the relative opening criterion and no split walk (hybrid), its estimate
                       a_kick / n (hy_force_acc_scale), which scales the particle's walks */
  double *pot;    /**< softened potential per unit mass */
  double *acc_w;  /**< acceleration used by the kicks (a_hard + n a_soft at soft steps) */
  double *grp;    /**< optional (NULL: none): 2 per particle, B2 and b_max of the particles a
                       pseudo-particle stands for (received LET cells; 0 for real particles) */
};

/** Initialise an empty set (no allocation). */
void hy_part_init(struct hy_part *p);
/** Make room for n particles, keeping the first min(n, p->n) entries. */
void hy_part_reserve(struct hy_part *p, size_t n);
/** Resize to n particles (new entries zeroed). */
void hy_part_resize(struct hy_part *p, size_t n);
void hy_part_free(struct hy_part *p);
/** Allocate p->grp (zeroed) for the current and future capacity. */
void hy_part_use_groups(struct hy_part *p);
/** Reorder all arrays: new particle i is old particle perm[i]. */
void hy_part_permute(struct hy_part *p, const size_t *perm);
/** The same as hy_part_permute with a 32-bit permutation, array by array
 *  over the pool (a parallel gather, then a parallel copy back). scratch is
 *  a buffer the caller keeps between calls (grown here, freed with hy_free;
 *  start with NULL and 0), so that repeated calls allocate nothing. */
void hy_part_permute_pool(struct hy_part *p, const uint32_t *perm, struct hy_pool *pool, void **scratch,
                          size_t *scratch_bytes);
/** Centre of mass of the particles with finite positions (their mean
 *  position if their mass is zero; the origin if there are none). */
void hy_part_com(const struct hy_part *p, double c[3]);
/** hy_part_com over the pool (the rounding depends on the thread count). */
struct hy_pool;
void hy_part_com_pool(const struct hy_part *p, struct hy_pool *pool, double c[3]);
/** Deep copy. */
void hy_part_copy(struct hy_part *dst, const struct hy_part *src);
/** Sum of masses. */
double hy_part_total_mass(const struct hy_part *p);

#endif
