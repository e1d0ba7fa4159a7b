/* SPDX-License-Identifier: GPL-3.0-or-later
 * cl_build.c: the device tree build (opencl/build.cl). Uses the core
 * (cl_core.h) and, for builds from the device state, cl_state.c's keys,
 * presort and appended items. See cl_engine.h for the interface and
 * build.cl for the algorithms. Every cl* call is checked. */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cl_internal.h"
#include "trace.h"
#include "tree.h"

#define BMAX_GROUPS 1024 /* work-groups of hy_bmax_big */

/* ------------------------------------------------------------ kernels */

static int make_kernel(struct hy_cl *cl, const char *name, cl_kernel *k, struct hy_err *err) {
  return hy_cl_kernel(cl, cl->build_prog, name, k, err);
}

int hy_cl_tree_kernels(struct hy_cl *cl, struct hy_err *err) {
  if (hy_cl_build_kernels(cl, err) != 0) return -1;
  if (cl->k_keys) return 0;
  if (make_kernel(cl, "hy_keys", &cl->k_keys, err) || make_kernel(cl, "hy_gen_count", &cl->k_gen_count, err) ||
      make_kernel(cl, "hy_gen_scan", &cl->k_gen_scan, err) || make_kernel(cl, "hy_gen_emit", &cl->k_gen_emit, err) ||
      make_kernel(cl, "hy_gather", &cl->k_gather, err) || make_kernel(cl, "hy_moments", &cl->k_moments, err) ||
      make_kernel(cl, "hy_bmax_big", &cl->k_bmax_big, err) || make_kernel(cl, "hy_unsort", &cl->k_unsort, err) ||
      make_kernel(cl, "hy_open_cells", &cl->k_open_cells, err) ||
      make_kernel(cl, "hy_add_unsort", &cl->k_add_unsort, err) ||
      make_kernel(cl, "hy_merge_keys", &cl->k_merge_keys, err) ||
      make_kernel(cl, "hy_block_mark", &cl->k_block_mark, err) ||
      make_kernel(cl, "hy_item_blocks", &cl->k_item_blocks, err) ||
      make_kernel(cl, "hy_first_cells", &cl->k_first_cells, err) ||
      make_kernel(cl, "hy_graft_links", &cl->k_graft_links, err) ||
      make_kernel(cl, "hy_graft_stubs", &cl->k_graft_stubs, err) ||
      make_kernel(cl, "hy_graft_moments", &cl->k_graft_moments, err) ||
      make_kernel(cl, "hy_graft_bmax_big", &cl->k_graft_bmax_big, err) ||
      make_kernel(cl, "hy_box_small", &cl->k_box_small, err) || make_kernel(cl, "hy_box_large", &cl->k_box_large, err) ||
      make_kernel(cl, "hy_box_cells", &cl->k_box_cells, err) ||
      make_kernel(cl, "hy_merged_sinks", &cl->k_merged_sinks, err))
    return -1;
  /* the kernels of whole work-groups (the core checks the sort's and scan's) */
  cl_kernel need[] = {cl->k_bmax_big, cl->k_gen_count, cl->k_gen_scan, cl->k_gen_emit, cl->k_graft_bmax_big};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
    size_t kwg = 0;
    CL_CHECK(clGetKernelWorkGroupInfo(need[i], cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL),
             "clGetKernelWorkGroupInfo(build.cl)");
    if (kwg < cl->build_wg)
      return hy_err_set(err, "OpenCL device %s: the device tree build needs work-groups of %zu but allows %zu; use "
                             "TreeBuild host", cl->name, cl->build_wg, kwg);
  }
  return 0;
}

void hy_cl_build_free(struct hy_cl *cl) {
  cl_kernel ks[] = {cl->k_keys,         cl->k_gen_count,     cl->k_gen_scan,     cl->k_gen_emit,
                    cl->k_gather,       cl->k_moments,       cl->k_bmax_big,     cl->k_unsort,
                    cl->k_open_cells,   cl->k_add_unsort,    cl->k_merge_keys,   cl->k_block_mark,
                    cl->k_first_cells,  cl->k_item_blocks,   cl->k_graft_links,  cl->k_graft_stubs,
                    cl->k_graft_moments, cl->k_graft_bmax_big, cl->k_box_small,  cl->k_box_large,
                    cl->k_box_cells,    cl->k_merged_sinks};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    if (ks[i]) clReleaseKernel(ks[i]);
  struct cl_buf *bs[] = {&cl->n_child,  &cl->uout0,    &cl->uout1,   &cl->big,      &cl->n_big,
                         &cl->gen,      &cl->gen_sums, &cl->blocks,  &cl->ibefore,  &cl->first_at,
                         &cl->n_graft,  &cl->graft_gl, &cl->item_b2, &cl->boxes};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) hy_cl_buf_release(bs[i]);
  for (int t = 0; t < 2; t++) {
    struct cl_tree *T = &cl->tree[t];
    struct cl_buf *tb[] = {&T->pos, &T->idx, &T->c_lo, &T->c_hi, &T->nxt, &T->mor, &T->c_b2, &T->grp, &T->skey, &T->sc};
    for (size_t i = 0; i < sizeof tb / sizeof tb[0]; i++) hy_cl_buf_release(tb[i]);
  }
}

/* ------------------------------------------------------------- builds */

/* A build whose first na positions' keys are sorted already, in (akey,
 * aidx): the other n - na keys, which the caller put in (key[1], idx_tmp)
 * with indices na .., sorted and merged behind them into (key[0], T->idx),
 * an element of a before the others' of the same key, which is the order of
 * a stable sort of the whole. */
static int sort_merge_in(struct hy_cl *cl, struct cl_tree *T, const struct cl_buf *akey, const struct cl_buf *aidx,
                         size_t na, size_t n, struct cl_evlist *ev, struct hy_err *err) {
  const cl_uint ua = (cl_uint)na, um = (cl_uint)(n - na);
  struct cl_buf *mk[2] = {&cl->key[1], &cl->key[0]}, *mi[2] = {&cl->idx_tmp, &T->idx};
  return hy_cl_sort_pairs_ev(cl, mk, mi, n - na, 3 * HY_KEY_BITS, ev, PH_SORT, err) ||
                 hy_cl_ensure_buf(cl, &cl->ibefore, hy_size_mul_or_die(n + 1, 4, "merged positions"), "items before",
                                  err) ||
                 hy_cl_set_args(cl, cl->k_merge_keys, "hy_merge_keys", err, M(*akey), M(*aidx), V(ua), M(cl->key[1]),
                                M(cl->idx_tmp), V(um), M(cl->key[0]), M(T->idx), M(cl->ibefore), END) ||
                 hy_cl_launch(cl, cl->k_merge_keys, "hy_merge_keys", n, hy_cl_ev_new(ev, PH_SORT), err)
             ? -1
             : 0;
}

static int ensure_build_buffers(struct hy_cl *cl, struct cl_tree *T, int slot, size_t n, size_t n_tiles,
                                struct hy_err *err) {
  size_t n_nodes = hy_size_mul_or_die(n, 2, "tree nodes"); /* at most n - 1 cells */
  return hy_cl_ensure_buf(cl, &T->pos, hy_size_mul_or_die(n, 16, "positions"), "particle positions", err) ||
         hy_cl_ensure_buf(cl, &cl->key[0], hy_size_mul_or_die(n, 8, "keys"), "keys", err) ||
         hy_cl_ensure_buf(cl, &cl->key[1], hy_size_mul_or_die(n, 8, "keys"), "sorted keys", err) ||
         hy_cl_ensure_buf(cl, &T->idx, hy_size_mul_or_die(n, 4, "indices"), "key order", err) ||
         hy_cl_ensure_buf(cl, &cl->idx_tmp, hy_size_mul_or_die(n, 4, "indices"), "sorted key order", err) ||
         hy_cl_ensure_buf(cl, &cl->node[slot], hy_size_mul_or_die(n_nodes, 32, "tree nodes"), "tree nodes", err) ||
         hy_cl_ensure_buf(cl, &T->c_lo, hy_size_mul_or_die(n, 4, "cells"), "cell ranges", err) ||
         hy_cl_ensure_buf(cl, &T->c_hi, hy_size_mul_or_die(n, 4, "cells"), "cell ranges", err) ||
         hy_cl_ensure_buf(cl, &T->c_b2, hy_size_mul_or_die(n, 4, "cells"), "cell B2", err) ||
         hy_cl_ensure_buf(cl, &cl->n_child, hy_size_mul_or_die(n + 1, 4, "cells"), "child counts", err) ||
         hy_cl_ensure_buf(cl, &cl->gen, GEN_TABLE * 4, "cell generation table", err) ||
         hy_cl_ensure_buf(cl, &cl->gen_sums, 4 * cl->build_wg * 4, "cell generation sums", err) ||
         hy_cl_ensure_buf(cl, &T->nxt, hy_size_mul_or_die(n_nodes, 4, "tree links"), "tree links", err) ||
         hy_cl_ensure_buf(cl, &T->mor, hy_size_mul_or_die(n_nodes, 4, "tree links"), "tree links", err) ||
         hy_cl_ensure_buf(cl, &cl->big, hy_size_mul_or_die(n / BMAX_SERIAL + 1, 4, "cells"), "large cells", err) ||
         hy_cl_ensure_buf(cl, &cl->n_big, MAX_GENERATIONS * 4, "large cell counts", err) ||
         hy_cl_ensure_buf(cl, &cl->n_graft, 16, "copied cell count", err) ||
         hy_cl_ensure_buf(cl, hy_cl_sort_hist(cl), hy_size_mul_or_die(n_tiles, RADIX * 4, "sort histogram"),
                          "sort histogram", err);
}

/* graft: a merged build whose cells without items copy the moments of the
 * slot-0 tree's same cells (hy_moments) */
static int enqueue_moments(struct hy_cl *cl, struct cl_tree *T, int slot, size_t n, double a_err_d, int graft,
                           struct cl_evlist *ev, struct hy_err *err);
static int enqueue_boxes(struct hy_cl *cl, struct cl_tree *T, int slot, size_t n, cl_uint total, struct cl_evlist *ev,
                         struct hy_err *err);
static int enqueue_graft(struct hy_cl *cl, struct cl_tree *T, size_t n, size_t nl, cl_uint total, double a_err_d,
                         struct cl_evlist *ev, struct hy_err *err);

/* Host memory that the non-blocking writes of the cells read: it must
 * outlive those commands (enqueue_cells' blocking read of the table ends
 * them). */
struct cells_host {
  cl_uint table[GEN_TABLE]; /* the device's generation table */
  cl_uint root_range[2];    /* the root's first and end particle */
  cl_int root_next;
};

/* One build's choices, made before its commands are enqueued: which slot,
 * and what it takes over from the slot-0 tree. */
struct build_plan {
  size_t n;                /* positions */
  int slot;
  struct cl_tree *T;       /* the slot built */
  const struct cl_tree *L; /* the slot-0 tree */
  size_t nl;               /* merged builds: local particles in front of the items */
  cl_float lo[3], scale;   /* the key cube (hy_keys) */
  int merge;               /* the local particles' keys and order from the slot-0 build */
  int lend;                /* the slot-0 tree's cells lend their moments to the merged cells without items */
  int whole;               /* grafted: the merged tree walks the slot-0 records, copying none */
  int graft;               /* lend, with the first cells enqueued */
  int local_sinks;         /* the merged tree's sinks are its local particles */
  cl_uint total;           /* cells built */
  int n_gen;               /* generations that hold cells */
  struct cells_host host;  /* read by enqueue_cells' non-blocking writes */
};

/* Buffers, the positions and the LET item moments; the slot's last tree is
 * forgotten. */
static int upload_inputs(struct hy_cl *cl, const struct hy_cl_build_args *a, struct build_plan *b,
                         struct cl_evlist *ev, struct hy_err *err) {
  const size_t n = b->n;
  const int slot = b->slot;
  struct cl_tree *T = b->T;
  const size_t tile = cl->build_wg * SORT_PER;
  const size_t n_tiles = (n + tile - 1) / tile;
  if (ensure_build_buffers(cl, T, slot, n, n_tiles, err) != 0) return -1;
  cl->node_id[slot] = 0;
  cl->graft_id = 0; /* a build of either slot ends a grafted merged tree */
  T->sorted_n = 0;
  T->n_gen = 0;
  cl_int e;
  if (a->pos) {
    e = clEnqueueWriteBuffer(hy_cl_queue(cl), T->pos.mem, CL_FALSE, 0, n * 16, a->pos, 0, NULL,
                             hy_cl_ev_new(ev, PH_UPLOAD));
    if (e != CL_SUCCESS)
      return hy_err_set(err, "OpenCL: uploading %zu particle positions failed on %s: %s", n, cl->name,
                        hy_cl_errname(e));
  } else if (cl->state_n + (slot == 1 ? cl->appended : 0) != n || a->grp) {
    return hy_err_set(err, "internal error: device tree build from a device state of %zu particles and %zu items, "
                           "not %zu", cl->state_n, slot == 1 ? cl->appended : 0, n);
  }
  T->sc_use = NULL;
  T->sc_n = 0;
  if (a->sc && a->sc_n > 0) {
    const size_t ns = a->sc_n < n ? a->sc_n : n;
    if (hy_cl_ensure_buf(cl, &T->sc, hy_size_mul_or_die(ns, 4, "sink scales"), "sink scales", err) != 0) return -1;
    e = clEnqueueWriteBuffer(hy_cl_queue(cl), T->sc.mem, CL_FALSE, 0, ns * 4, a->sc, 0, NULL,
                             hy_cl_ev_new(ev, PH_UPLOAD));
    if (e != CL_SUCCESS)
      return hy_err_set(err, "OpenCL: uploading %zu sink scales failed on %s: %s", ns, cl->name, hy_cl_errname(e));
    T->sc_use = T->sc.mem;
    T->sc_n = (cl_uint)ns;
  } else if (a->state_sc && !a->pos) {
    if (cl->s_sc_n != cl->state_n)
      return hy_err_set(err, "internal error: a build with sink scales of %zu particles, not %zu", cl->s_sc_n,
                        cl->state_n);
    T->sc_use = cl->s_sc.mem;
    T->sc_n = (cl_uint)cl->state_n;
  }
  /* slot 1 from the state: its positions with LET items behind them, whose
   * moments are on the device (hy_cl_state_append_*) */
  T->has_grp = a->grp != NULL || (!a->pos && slot == 1 && cl->appended > 0);
  if (a->grp) {
    if (hy_cl_ensure_buf(cl, &T->grp, hy_size_mul_or_die(n, 8, "particle groups"), "LET item moments", err) != 0)
      return -1;
    e = clEnqueueWriteBuffer(hy_cl_queue(cl), T->grp.mem, CL_FALSE, 0, n * 8, a->grp, 0, NULL,
                             hy_cl_ev_new(ev, PH_UPLOAD));
    if (e != CL_SUCCESS)
      return hy_err_set(err, "OpenCL: uploading %zu LET item moments failed on %s: %s", n, cl->name,
                        hy_cl_errname(e));
  }
  return 0;
}

/* The key cube, and what a merged build (slot 1 after a slot-0 build of
 * the same cube) takes over from the slot-0 tree. */
static void plan_reuse(const struct hy_cl *cl, const struct hy_cl_build_args *a, struct build_plan *b) {
  for (int d = 0; d < 3; d++) b->lo[d] = (cl_float)a->lo[d];
  b->scale = (cl_float)((double)(1u << HY_KEY_BITS) / a->side);
  const struct cl_tree *L = b->L;
  const size_t n = b->n, nl = b->nl;
  b->merge = b->slot == 1 && nl > 0 && nl < n && L->skey_n == nl && L->skey_id == a->merge_id &&
             L->skey_side == a->side && L->skey_lo[0] == a->lo[0] && L->skey_lo[1] == a->lo[1] &&
             L->skey_lo[2] == a->lo[2];
  /* grafted onto the slot-0 tree (its records are walked, not copied):
   * its records unchanged since build merge_id, the positions the state's */
  b->lend = b->merge && cl->node_id[0] == a->merge_id && L->sorted_n == nl && L->n_cell > 0;
  b->whole = b->lend && a->graft && !a->pos && cl->state_n == nl;
  b->local_sinks = b->slot == 1 && b->merge && !a->open_all;
}

/* A merged build's keys: the local particles' keys and order from the
 * slot-0 build; the other m positions' keys sorted into (key[1], idx_tmp),
 * then both merged into (key[0], T->idx). With lend, each local particle's
 * first slot-0 cell (hy_first_cells). */
static int sort_merged(struct hy_cl *cl, struct build_plan *b, struct hy_cl_build_result *res, struct cl_evlist *ev,
                       struct hy_err *err) {
  const struct cl_tree *L = b->L;
  const size_t n = b->n, nl = b->nl;
  const cl_uint first = (cl_uint)nl, um = (cl_uint)(n - nl);
  if (hy_cl_set_args(cl, cl->k_keys, "hy_keys", err, M(b->T->pos), V(first), V(um), V(b->lo[0]), V(b->lo[1]),
                     V(b->lo[2]), V(b->scale), M(cl->key[1]), M(cl->idx_tmp), END) ||
      hy_cl_launch(cl, cl->k_keys, "hy_keys", n - nl, hy_cl_ev_new(ev, PH_SORT), err) ||
      sort_merge_in(cl, b->T, &L->skey, &L->idx, nl, n, ev, err))
    return -1;
  res->merged = 1;
  /* the slot-0 tree's cells, while its records are still those of that
   * build, lend their moments to the merged tree's cells
   * without items */
  if (!b->lend) return 0;
  const cl_uint none = UINT32_MAX, nc = (cl_uint)L->n_cell;
  if (hy_cl_ensure_buf(cl, &cl->first_at, hy_size_mul_or_die(nl, 4, "first cells"), "first cells", err) != 0)
    return -1;
  const cl_int e = clEnqueueFillBuffer(hy_cl_queue(cl), cl->first_at.mem, &none, sizeof none, 0, nl * 4, 0, NULL,
                                       hy_cl_ev_new(ev, PH_SORT));
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: clEnqueueFillBuffer failed on %s: %s", cl->name, hy_cl_errname(e));
  if (hy_cl_set_args(cl, cl->k_first_cells, "hy_first_cells", err, M(L->c_lo), V(nc), M(cl->first_at), END) ||
      hy_cl_launch(cl, cl->k_first_cells, "hy_first_cells", nc, hy_cl_ev_new(ev, PH_SORT), err))
    return -1;
  b->graft = 1;
  return 0;
}

/* The kept particles' keys sorted ahead (hy_cl_state_presort); the received
 * ones' sorted into (key[1], idx_tmp) and merged in behind equal keys, as a
 * stable sort of the whole set would place them. */
static int sort_presorted(struct hy_cl *cl, const struct hy_cl_build_args *a, struct build_plan *b,
                          struct hy_cl_build_result *res, struct cl_evlist *ev, struct hy_err *err) {
  const size_t n = b->n, pn = a->presorted;
  if (b->slot != 0 || a->pos || !a->state_keys || cl->presort_n != pn || pn > n ||
      memcmp(cl->presort_lo, a->key_lo, sizeof cl->presort_lo) != 0 || cl->presort_scale != a->key_scale)
    return hy_err_set(err, "internal error: a build of %zu particles with %zu presorted keys that are not there", n,
                      pn);
  cl->presort_n = 0;
  hy_cl_presort_drop(cl, &res->presort);
  if (pn < n)
    return hy_cl_state_keys(cl, pn, n - pn, a->key_lo, a->key_scale, &cl->key[1], &cl->idx_tmp, ev, PH_SORT, err) ||
                   sort_merge_in(cl, b->T, &cl->pkey, &cl->pidx, pn, n, ev, err)
               ? -1
               : 0;
  /* all presorted: copied into where a sort ends, (key[0], T->idx) */
  cl_int e;
  if ((e = clEnqueueCopyBuffer(hy_cl_queue(cl), cl->pkey.mem, cl->key[0].mem, 0, 0, n * 8, 0, NULL,
                               hy_cl_ev_new(ev, PH_SORT))) != CL_SUCCESS ||
      (e = clEnqueueCopyBuffer(hy_cl_queue(cl), cl->pidx.mem, b->T->idx.mem, 0, 0, n * 4, 0, NULL,
                               hy_cl_ev_new(ev, PH_SORT))) != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: copying %zu keys failed on %s: %s", n, cl->name, hy_cl_errname(e));
  return 0;
}

/* The keys of all positions (from the state, uploaded, or hy_keys) and
 * their sort. */
static int sort_all(struct hy_cl *cl, const struct hy_cl_build_args *a, struct build_plan *b, struct cl_evlist *ev,
                    struct hy_err *err) {
  const size_t n = b->n;
  /* the sort's ping-pong pairs: (key[0], T->idx), where it ends, and (key[1], idx_tmp) */
  struct cl_buf *kb[2] = {&cl->key[0], &cl->key[1]}, *ib[2] = {&b->T->idx, &cl->idx_tmp};
  cl_int e;
  if (a->state_keys) {
    if (hy_cl_state_keys(cl, 0, n, a->key_lo, a->key_scale, kb[0], ib[0], ev, PH_SORT, err) != 0) return -1;
  } else if (a->keys) {
    if ((e = clEnqueueWriteBuffer(hy_cl_queue(cl), kb[0]->mem, CL_FALSE, 0, n * 8, a->keys, 0, NULL,
                                  hy_cl_ev_new(ev, PH_SORT))) != CL_SUCCESS ||
        (e = clEnqueueWriteBuffer(hy_cl_queue(cl), ib[0]->mem, CL_FALSE, 0, n * 4, a->keys + n, 0, NULL,
                                  hy_cl_ev_new(ev, PH_SORT))) != CL_SUCCESS)
      return hy_err_set(err, "OpenCL: uploading %zu keys failed on %s: %s", n, cl->name, hy_cl_errname(e));
  } else {
    const cl_uint zero = 0, un = (cl_uint)n;
    if (hy_cl_set_args(cl, cl->k_keys, "hy_keys", err, M(b->T->pos), V(zero), V(un), V(b->lo[0]), V(b->lo[1]),
                       V(b->lo[2]), V(b->scale), M(*kb[0]), M(*ib[0]), END) ||
        hy_cl_launch(cl, cl->k_keys, "hy_keys", n, hy_cl_ev_new(ev, PH_SORT), err))
      return -1;
  }
  return hy_cl_sort_pairs_ev(cl, kb, ib, n, 3 * HY_KEY_BITS, ev, PH_SORT, err);
}

/* Slot 0: keep this build's sorted keys for a merged build, or forget the
 * last ones. */
static int keep_sorted_keys(struct hy_cl *cl, const struct hy_cl_build_args *a, struct build_plan *b,
                            struct cl_evlist *ev, struct hy_err *err) {
  struct cl_tree *T = b->T;
  const size_t n = b->n;
  if (b->slot != 0) return 0;
  T->skey_n = 0;
  if (!a->keep_keys) return 0;
  if (hy_cl_ensure_buf(cl, &T->skey, hy_size_mul_or_die(n, 8, "keys"), "kept keys", err) != 0) return -1;
  const cl_int e = clEnqueueCopyBuffer(hy_cl_queue(cl), cl->key[0].mem, T->skey.mem, 0, 0, n * 8, 0, NULL,
                                       hy_cl_ev_new(ev, PH_SORT));
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: copying %zu keys failed on %s: %s", n, cl->name, hy_cl_errname(e));
  T->skey_n = n;
  T->skey_id = a->tree_id;
  T->skey_side = a->side;
  memcpy(T->skey_lo, a->lo, sizeof T->skey_lo);
  return 0;
}

/* The generation table with the root (cell 0, all particles) as generation
 * 0, and the root's next; a grafted build's positions' links unset
 * (INT_MIN) unless a merged cell sets them (hy_graft_links). */
static int write_root(struct hy_cl *cl, struct build_plan *b, struct cl_evlist *ev, struct hy_err *err) {
  struct cl_tree *T = b->T;
  struct cells_host *h = &b->host;
  const size_t n = b->n;
  h->table[1] = 1; /* generation 0: the root, cell 0 */
  h->root_range[0] = 0;
  h->root_range[1] = (cl_uint)n;
  h->root_next = HY_NONE;
  cl_int e;
  if ((e = clEnqueueWriteBuffer(hy_cl_queue(cl), cl->gen.mem, CL_FALSE, 0, sizeof h->table, h->table, 0, NULL,
                                hy_cl_ev_new(ev, PH_CELLS))) != CL_SUCCESS ||
      (e = clEnqueueWriteBuffer(hy_cl_queue(cl), T->c_lo.mem, CL_FALSE, 0, sizeof(cl_uint), &h->root_range[0], 0,
                                NULL, hy_cl_ev_new(ev, PH_CELLS))) != CL_SUCCESS ||
      (e = clEnqueueWriteBuffer(hy_cl_queue(cl), T->c_hi.mem, CL_FALSE, 0, sizeof(cl_uint), &h->root_range[1], 0,
                                NULL, hy_cl_ev_new(ev, PH_CELLS))) != CL_SUCCESS ||
      (e = clEnqueueWriteBuffer(hy_cl_queue(cl), T->nxt.mem, CL_FALSE, n * sizeof(cl_int), sizeof(cl_int),
                                &h->root_next, 0, NULL, hy_cl_ev_new(ev, PH_CELLS))) != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: writing the root cell failed on %s: %s", cl->name, hy_cl_errname(e));
  if (!b->whole) return 0;
  const cl_int unset = INT_MIN;
  if (hy_cl_ensure_buf(cl, &cl->graft_gl, hy_size_mul_or_die(n, 4, "cells"), "merged cells taken whole", err) != 0)
    return -1;
  if ((e = clEnqueueFillBuffer(hy_cl_queue(cl), T->nxt.mem, &unset, sizeof unset, 0, n * sizeof(cl_int), 0, NULL,
                               hy_cl_ev_new(ev, PH_CELLS))) != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: clEnqueueFillBuffer failed on %s: %s", cl->name, hy_cl_errname(e));
  return 0;
}

/* The cells of generation g (hy_gen_count, hy_gen_scan, hy_gen_emit) in
 * `groups` work-groups. Grafted: each cell's slot-0 cell (else valid
 * buffers that are not read). */
static int enqueue_generation(struct hy_cl *cl, const struct build_plan *b, cl_uint g, size_t groups,
                              struct cl_evlist *ev, struct hy_err *err) {
  const struct cl_tree *T = b->T, *L = b->L;
  const int whole = b->whole;
  const cl_int use_whole = whole ? 1 : 0, l_np = whole ? (cl_int)b->nl : 0, n_part = (cl_int)b->n;
  const struct cl_buf *w_ib = whole ? &cl->ibefore : &T->c_lo, *w_first = whole ? &cl->first_at : &T->c_lo,
                      *w_hi = whole ? &L->c_hi : &T->c_hi, *w_mor = whole ? &L->mor : &T->mor,
                      *w_gl = whole ? &cl->graft_gl : &T->c_lo;
  const cl_uint crit = T->n_crit, max_cells = (cl_uint)b->n - 1u, ng = (cl_uint)groups;
  return hy_cl_set_args(cl, cl->k_gen_count, "hy_gen_count", err, M(cl->key[0]), M(cl->gen), V(g), M(T->c_lo),
                        M(T->c_hi), V(crit), M(cl->n_child), M(cl->gen_sums), V(use_whole), M(*w_ib), M(*w_first),
                        M(*w_hi), M(*w_mor), V(l_np), M(*w_gl), END) ||
                 hy_cl_launch(cl, cl->k_gen_count, "hy_gen_count", groups * cl->build_wg, hy_cl_ev_new(ev, PH_CELLS),
                              err) ||
                 hy_cl_set_args(cl, cl->k_gen_scan, "hy_gen_scan", err, M(cl->gen), V(g), M(cl->gen_sums), V(ng),
                                V(max_cells), END) ||
                 hy_cl_launch(cl, cl->k_gen_scan, "hy_gen_scan", cl->build_wg, hy_cl_ev_new(ev, PH_CELLS), err) ||
                 hy_cl_set_args(cl, cl->k_gen_emit, "hy_gen_emit", err, M(cl->key[0]), M(cl->gen), V(g), M(T->c_lo),
                                M(T->c_hi), V(crit), M(cl->n_child), M(cl->gen_sums), V(n_part), M(T->nxt),
                                M(T->mor), V(use_whole), M(*w_gl), END) ||
                 hy_cl_launch(cl, cl->k_gen_emit, "hy_gen_emit", groups * cl->build_wg, hy_cl_ev_new(ev, PH_CELLS), err)
             ? -1
             : 0;
}

/* The generations that hold cells (the last one enqueued is empty) into
 * T's table and the plan. */
static void record_generations(struct build_plan *b, const cl_uint table[GEN_TABLE], int n_gen) {
  struct cl_tree *T = b->T;
  int used = 0;
  while (used < n_gen && table[2 * used + 1] > 0) {
    T->gen_first[used] = table[2 * used];
    T->gen_count[used] = table[2 * used + 1];
    used++;
  }
  b->total = table[2 * used];
  b->n_gen = used;
  T->n_gen = used;
  T->gen_hint = used;
}

/* Cells, one generation at a time: the kernels read each generation's
 * first cell and size from the device's table (hy_gen_scan writes the
 * next one), so the host enqueues a batch of generations and reads the
 * table once; a tree whose generations outnumber the batch gets another. */
static int enqueue_cells(struct hy_cl *cl, const struct hy_cl_build_args *a, struct build_plan *b,
                         struct hy_cl_build_result *res, struct cl_evlist *ev, struct hy_err *err) {
  struct cl_tree *T = b->T;
  const size_t n = b->n;
  cl_uint *table = b->host.table;
  if (write_root(cl, b, ev, err) != 0) return -1;
  T->n_crit = (cl_uint)(a->n_crit < 1 ? 1 : a->n_crit);
  const size_t max_groups = 4 * cl->build_wg; /* hy_gen_scan's reach */
  /* a generation's cells are at most 8 times the last one's and at most n / 2
   * (two particles or more each): the work-groups it needs at most */
  size_t bound = 1;
  int n_gen = 0, done = 0;
  int batch = T->gen_hint > 0 ? T->gen_hint + 1 : HY_KEY_BITS + 2;
  while (!done) {
    if (n_gen + batch > MAX_GENERATIONS) batch = MAX_GENERATIONS - n_gen;
    if (batch <= 0) return hy_err_set(err, "internal error: more than %d cell generations", MAX_GENERATIONS);
    for (int k = 0; k < batch; k++, n_gen++) {
      size_t groups = (bound + cl->build_wg - 1) / cl->build_wg;
      if (groups > max_groups) groups = max_groups;
      if (enqueue_generation(cl, b, (cl_uint)n_gen, groups, ev, err) != 0) return -1;
      bound = 8 * bound < n / 2 + 1 ? 8 * bound : n / 2 + 1;
    }
    const cl_int e = clEnqueueReadBuffer(hy_cl_queue(cl), cl->gen.mem, CL_TRUE, 0, sizeof b->host.table, table, 0,
                                         NULL, hy_cl_ev_new(ev, PH_CELLS));
    if (e != CL_SUCCESS)
      return hy_err_set(err, "OpenCL: reading the cell generations failed on %s: %s (a kernel fault?)", cl->name,
                        hy_cl_errname(e));
    if (table[GEN_TABLE - 1] != 0)
      return hy_err_set(err, "internal error: device tree build made more than %u cells for %zu particles",
                        (unsigned)n - 1u, n);
    res->batches++;
    done = table[2 * n_gen + 1] == 0;
    batch = HY_KEY_BITS + 2;
  }
  record_generations(b, table, n_gen);
  return 0;
}

/* The node records: the particles' and the cells' moments (or an open-all
 * tree's boxes, or a grafted tree's), a merged tree's sinks, and r_b^2 =
 * FLT_MAX in every cell of an open-all tree. */
static int enqueue_records(struct hy_cl *cl, const struct hy_cl_build_args *a, const struct build_plan *b,
                           struct cl_evlist *ev, struct hy_err *err) {
  struct cl_tree *T = b->T;
  const size_t n = b->n;
  const int slot = b->slot;
  const cl_uint un = (cl_uint)n, total = b->total;
  const cl_int n_part = (cl_int)n;
  /* an open-all tree of plain particles: its cells' spheres from boxes,
   * opened by every sink (r_b^2 = FLT_MAX) */
  const int boxes = a->open_all && !b->whole && !b->graft && !T->has_grp;
  if (boxes ? enqueue_boxes(cl, T, slot, n, total, ev, err)
      : b->whole ? enqueue_graft(cl, T, n, b->nl, total, a->a_err, ev, err)
                 : enqueue_moments(cl, T, slot, n, a->a_err, b->graft, ev, err))
    return -1;
  /* a merged tree's sinks: its local particles (a grafted one's: hy_graft_links) */
  if (b->local_sinks && !b->whole) {
    if (hy_cl_ensure_buf(cl, &cl->sink, hy_size_mul_or_die(b->nl, 16, "sinks"), "sinks", err) != 0) return -1;
    cl->sink_id = 0;
    if (hy_cl_set_args(cl, cl->k_merged_sinks, "hy_merged_sinks", err, V(un), M(cl->ibefore), M(cl->node[slot]),
                       M(cl->sink), END) ||
        hy_cl_launch(cl, cl->k_merged_sinks, "hy_merged_sinks", n, hy_cl_ev_new(ev, PH_MOMENTS), err))
      return -1;
  }
  if (a->open_all && !boxes && total > 0) { /* every cell opened by every sink: r_b^2 = FLT_MAX */
    cl_uint nc = total;
    if (hy_cl_set_args(cl, cl->k_open_cells, "hy_open_cells", err, M(cl->node[slot]), V(n_part), V(nc), END) ||
        hy_cl_launch(cl, cl->k_open_cells, "hy_open_cells", nc, hy_cl_ev_new(ev, PH_MOMENTS), err))
      return -1;
  }
  return 0;
}

/* Waits for the build and records the tree: in the slot, the engine's
 * resident ids and res. */
static int finish_build(struct hy_cl *cl, const struct hy_cl_build_args *a, const struct build_plan *b,
                        struct hy_cl_build_result *res, struct cl_evlist *ev, struct hy_err *err) {
  const size_t n = b->n, nl = b->nl;
  hy_cl_ev_close(ev);
  cl_int e = clFinish(hy_cl_queue(cl));
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: the device tree build failed on %s: %s (a kernel fault or too little device "
                           "memory)", cl->name, hy_cl_errname(e));
  cl_uint grafted = 0; /* the queue is idle: this read waits for nothing */
  if ((b->graft || b->whole) && (e = clEnqueueReadBuffer(hy_cl_queue(cl), cl->n_graft.mem, CL_TRUE, 0, sizeof grafted,
                                                         &grafted, 0, NULL, NULL)) != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: reading the copied cell count failed on %s: %s", cl->name, hy_cl_errname(e));
  res->root = (cl_int)n;
  res->n_cell = b->total;
  res->grafted = grafted;
  res->generations = b->n_gen;
  cl->node_id[b->slot] = a->tree_id;
  b->T->sorted_n = n;
  b->T->n_cell = b->total;
  if (b->local_sinks) {
    res->local_sinks = 1;
    cl->sink_id = a->tree_id;
  }
  if (b->whole) { /* its records are in node[0], after the slot-0 tree's, whose links it changed */
    res->whole = 1;
    res->root = (int32_t)(nl + b->L->n_cell + (n - nl));
    cl->node_id[1] = 0;
    cl->node_id[0] = 0;
    cl->graft_id = a->tree_id;
  }
  return 0;
}

static int build_enqueued(struct hy_cl *cl, const struct hy_cl_build_args *a, struct hy_cl_build_result *res,
                          struct cl_evlist *ev, struct hy_err *err) {
  struct build_plan b = {.n = a->n, .slot = a->slot, .T = &cl->tree[a->slot], .L = &cl->tree[0],
                         .nl = a->merge_local};
  if (upload_inputs(cl, a, &b, ev, err) != 0) return -1;
  plan_reuse(cl, a, &b);
  /* a plain merged build from the state reads the state's positions in
   * front of the items */
  if (!a->pos && b.slot == 1 && !b.whole && hy_cl_state_append_copy(cl, err) != 0) return -1;
  if ((b.merge ? sort_merged(cl, &b, res, ev, err)
       : a->presorted ? sort_presorted(cl, a, &b, res, ev, err)
                      : sort_all(cl, a, &b, ev, err)) != 0 ||
      keep_sorted_keys(cl, a, &b, ev, err) != 0 || enqueue_cells(cl, a, &b, res, ev, err) != 0 ||
      enqueue_records(cl, a, &b, ev, err) != 0)
    return -1;
  return finish_build(cl, a, &b, res, ev, err);
}

/* A grafted merged build after its cells (build.cl, "grafted merge"): the
 * items' records and the links, the subtrees taken whole, the moments of
 * the other cells from the deepest generation up; the sinks in the sink
 * buffer. n: merged positions, nl of them local; total: merged cells. */
static int enqueue_graft(struct hy_cl *cl, struct cl_tree *T, size_t n, size_t nl, cl_uint total, double a_err_d,
                         struct cl_evlist *ev, struct hy_err *err) {
  const struct cl_tree *L = &cl->tree[0];
  const size_t m = n - nl, nodes = nl + L->n_cell + m + total;
  if (hy_cl_check_int(hy_size_mul_or_die(nodes, 2, "tree nodes"), "grafted tree node records", err) ||
      hy_cl_ensure_buf_keep(cl, &cl->node[0], hy_size_mul_or_die(nodes, 32, "tree nodes"),
                            hy_size_mul_or_die(nl + L->n_cell, 32, "tree nodes"), "tree nodes", err) ||
      hy_cl_ensure_buf(cl, &cl->item_b2, hy_size_mul_or_die(m, 4, "LET items"), "LET item B2", err) ||
      hy_cl_ensure_buf(cl, &cl->sink, hy_size_mul_or_die(nl, 16, "sinks"), "sinks", err))
    return -1;
  cl->sink_id = 0;
  cl->node_id[0] = 0; /* from here on the slot-0 records hold this tree's links */
  const cl_uint nm = (cl_uint)n, nc = total;
  const cl_int l_npart = (cl_int)nl, item_base = (cl_int)(nl + L->n_cell), u_base = (cl_int)(nl + L->n_cell + m);
  const cl_float a_err = (cl_float)a_err_d;
  const cl_uint zero = 0;
  cl_int e;
  if ((e = clEnqueueFillBuffer(hy_cl_queue(cl), cl->n_graft.mem, &zero, sizeof zero, 0, sizeof zero, 0, NULL,
                               hy_cl_ev_new(ev, PH_MOMENTS))) != CL_SUCCESS ||
      (T->n_gen > 0 &&
       (e = clEnqueueFillBuffer(hy_cl_queue(cl), cl->n_big.mem, &zero, sizeof zero, 0, (size_t)T->n_gen * sizeof zero,
                                0, NULL, hy_cl_ev_new(ev, PH_MOMENTS))) != CL_SUCCESS))
    return hy_err_set(err, "OpenCL: clEnqueueFillBuffer failed on %s: %s", cl->name, hy_cl_errname(e));
  if (hy_cl_set_args(cl, cl->k_graft_links, "hy_graft_links", err, V(nm), V(l_npart), V(item_base), V(u_base),
                     M(cl->ibefore), M(cl->graft_gl), M(T->nxt), M(T->idx), M(T->pos), M(T->grp), M(cl->node[0]),
                     M(cl->item_b2), M(cl->sink), END) ||
      hy_cl_launch(cl, cl->k_graft_links, "hy_graft_links", n, hy_cl_ev_new(ev, PH_MOMENTS), err) ||
      hy_cl_set_args(cl, cl->k_graft_stubs, "hy_graft_stubs", err, V(nc), V(nm), V(l_npart), V(item_base), V(u_base),
                     M(cl->ibefore), M(cl->graft_gl), M(T->nxt), M(L->nxt), M(L->mor), M(cl->node[0]),
                     M(cl->n_graft), END) ||
      hy_cl_launch(cl, cl->k_graft_stubs, "hy_graft_stubs", total, hy_cl_ev_new(ev, PH_MOMENTS), err))
    return -1;
  for (int g = T->n_gen - 1; g >= 0; g--) {
    const cl_uint gi = (cl_uint)g;
    if (hy_cl_set_args(cl, cl->k_graft_moments, "hy_graft_moments", err, V(T->gen_first[g]), V(T->gen_count[g]), V(nm),
                       M(T->c_lo), M(T->c_hi), M(T->nxt), M(T->mor), M(cl->ibefore), M(cl->graft_gl), V(l_npart),
                       V(item_base), V(u_base), M(L->c_b2), M(cl->item_b2), M(T->c_b2), V(a_err), M(cl->node[0]),
                       M(cl->big), M(cl->n_big), V(gi), END) ||
        hy_cl_launch(cl, cl->k_graft_moments, "hy_graft_moments", T->gen_count[g], hy_cl_ev_new(ev, PH_MOMENTS), err) ||
        hy_cl_set_args(cl, cl->k_graft_bmax_big, "hy_graft_bmax_big", err, M(T->c_lo), M(T->c_hi), M(T->c_b2),
                       M(cl->big), M(cl->n_big), V(gi), V(a_err), M(cl->node[0]), M(cl->ibefore), V(item_base),
                       V(u_base), END) ||
        hy_cl_launch(cl, cl->k_graft_bmax_big, "hy_graft_bmax_big", BMAX_GROUPS * cl->build_wg,
                     hy_cl_ev_new(ev, PH_MOMENTS), err))
      return -1;
  }
  return 0;
}

/* The particle records in key order (hy_gather). */
static int enqueue_gather(struct hy_cl *cl, struct cl_tree *T, int slot, size_t n, struct cl_evlist *ev,
                          struct hy_err *err) {
  const cl_uint un = (cl_uint)n, sc_n = T->sc_use ? T->sc_n : 0;
  const struct cl_buf scb = {.mem = T->sc_use ? T->sc_use : T->pos.mem};
  return hy_cl_set_args(cl, cl->k_gather, "hy_gather", err, M(T->pos), M(T->idx), V(un), M(T->nxt), M(cl->node[slot]),
                        M(scb), V(sc_n), END) ||
                 hy_cl_launch(cl, cl->k_gather, "hy_gather", n, hy_cl_ev_new(ev, PH_MOMENTS), err)
             ? -1
             : 0;
}

/* An open-all tree (build.cl, "Open-all trees"): the particle records, then
 * every cell's sphere from the boxes of its particles, r_b^2 = FLT_MAX. */
static int enqueue_boxes(struct hy_cl *cl, struct cl_tree *T, int slot, size_t n, cl_uint total, struct cl_evlist *ev,
                         struct hy_err *err) {
  const size_t n1 = (n + BOX_SMALL - 1) / BOX_SMALL, n2 = (n1 + BOX_SMALL - 1) / BOX_SMALL;
  if (hy_cl_ensure_buf(cl, &cl->boxes, hy_size_mul_or_die(n1 + n2, 32, "particle boxes"), "particle boxes", err) ||
      enqueue_gather(cl, T, slot, n, ev, err))
    return -1;
  if (total == 0) return 0;
  const cl_uint un = (cl_uint)n, un1 = (cl_uint)n1;
  const cl_int n_part = (cl_int)n;
  if (hy_cl_set_args(cl, cl->k_box_small, "hy_box_small", err, M(cl->node[slot]), V(un), M(cl->boxes), END) ||
      hy_cl_launch(cl, cl->k_box_small, "hy_box_small", n1, hy_cl_ev_new(ev, PH_MOMENTS), err) ||
      hy_cl_set_args(cl, cl->k_box_large, "hy_box_large", err, M(cl->boxes), V(un1), END) ||
      hy_cl_launch(cl, cl->k_box_large, "hy_box_large", n2, hy_cl_ev_new(ev, PH_MOMENTS), err) ||
      hy_cl_set_args(cl, cl->k_box_cells, "hy_box_cells", err, V(n_part), V(total), M(T->c_lo), M(T->c_hi), M(T->nxt),
                     M(T->mor), M(cl->boxes), V(un1), M(cl->node[slot]), END) ||
      hy_cl_launch(cl, cl->k_box_cells, "hy_box_cells", total, hy_cl_ev_new(ev, PH_MOMENTS), err))
    return -1;
  return 0;
}

/* Particle records in key order, then the cell moments from the deepest
 * generation up (the generations of T). */
static int enqueue_moments(struct hy_cl *cl, struct cl_tree *T, int slot, size_t n, double a_err_d, int graft,
                           struct cl_evlist *ev, struct hy_err *err) {
  const cl_int n_part = (cl_int)n;
  const int n_gen = T->n_gen;
  const cl_uint *gen_first = T->gen_first, *gen_count = T->gen_count;
  cl_int e;
  cl_float a_err = (cl_float)a_err_d;
  /* without item moments the kernels get a valid buffer they do not read */
  const cl_int has_grp = T->has_grp;
  const struct cl_buf *grp = has_grp ? &T->grp : &T->pos;
  if (enqueue_gather(cl, T, slot, n, ev, err) != 0) return -1;
  const cl_uint zero = 0;
  /* the slot-0 tree lending moments to a merged build (else valid buffers that are not read) */
  const cl_int use_graft = graft ? 1 : 0;
  const struct cl_tree *L = &cl->tree[0];
  const cl_int l_npart = graft ? (cl_int)L->sorted_n : 0;
  const struct cl_buf *g_ib = graft ? &cl->ibefore : &T->c_lo, *g_first = graft ? &cl->first_at : &T->c_lo,
                      *g_hi = graft ? &L->c_hi : &T->c_hi, *g_mor = graft ? &L->mor : &T->mor,
                      *g_node = graft ? &cl->node[0] : &cl->node[slot], *g_b2 = graft ? &L->c_b2 : &T->c_b2;
  if ((e = clEnqueueFillBuffer(hy_cl_queue(cl), cl->n_graft.mem, &zero, sizeof zero, 0, sizeof zero, 0, NULL,
                               hy_cl_ev_new(ev, PH_MOMENTS))) != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: clEnqueueFillBuffer failed on %s: %s", cl->name, hy_cl_errname(e));
  /* a count of listed large cells per generation, all cleared here: one
   * command instead of one before every generation */
  if (n_gen > 0 && (e = clEnqueueFillBuffer(hy_cl_queue(cl), cl->n_big.mem, &zero, sizeof zero, 0,
                                            (size_t)n_gen * sizeof zero, 0, NULL, hy_cl_ev_new(ev, PH_MOMENTS))) !=
                       CL_SUCCESS)
    return hy_err_set(err, "OpenCL: clEnqueueFillBuffer failed on %s: %s", cl->name, hy_cl_errname(e));
  for (int g = n_gen - 1; g >= 0; g--) {
    const cl_uint gi = (cl_uint)g;
    if (hy_cl_set_args(cl, cl->k_moments, "hy_moments", err, V(gen_first[g]), V(gen_count[g]), V(n_part), M(T->c_lo),
                 M(T->c_hi), M(T->nxt), M(T->mor), M(T->c_b2), V(a_err), M(cl->node[slot]), M(cl->big),
                 M(cl->n_big), V(gi), M(T->idx), M(*grp), V(has_grp), V(use_graft), M(*g_ib), M(*g_first), M(*g_hi),
                 M(*g_mor), M(*g_node), M(*g_b2), V(l_npart), M(cl->n_graft), V(T->n_crit), END) ||
        hy_cl_launch(cl, cl->k_moments, "hy_moments", gen_count[g], hy_cl_ev_new(ev, PH_MOMENTS), err))
      return -1;
    /* cells of more than BMAX_SERIAL particles (each holds that many, so
     * there are fewer than n / BMAX_SERIAL of them) */
    if (hy_cl_set_args(cl, cl->k_bmax_big, "hy_bmax_big", err, V(n_part), M(T->c_lo), M(T->c_hi), M(T->c_b2),
                 M(cl->big), M(cl->n_big), V(gi), V(a_err), M(cl->node[slot]), M(T->idx), M(*grp), V(has_grp),
                 END) ||
        hy_cl_launch(cl, cl->k_bmax_big, "hy_bmax_big", BMAX_GROUPS * cl->build_wg, hy_cl_ev_new(ev, PH_MOMENTS), err))
      return -1;
  }
  return 0;
}

int hy_cl_tree_build(struct hy_cl *cl, const struct hy_cl_build_args *a, struct hy_cl_build_result *res,
                     struct hy_err *err) {
  memset(res, 0, sizeof *res);
  if (a->n < 2) return hy_err_set(err, "internal error: device tree build of %zu particles", a->n);
  if (a->slot < 0 || a->slot > 1) return hy_err_set(err, "internal error: device tree build in slot %d", a->slot);
  /* the kernels index the node records (2 float4 per node, at most 2 n
   * nodes) with 32-bit ints */
  if (a->n > (size_t)INT_MAX / 4)
    return hy_err_set(err, "device tree build: %zu particles on one rank exceed the 32-bit range of the node records "
                           "(at most %d); use more ranks", a->n, INT_MAX / 4);
  if (!(a->side > 0.0)) return hy_err_set(err, "internal error: device tree build with cube side %g", a->side);
  if (hy_cl_tree_kernels(cl, err) != 0) return -1;
  struct cl_evlist ev = {.q = hy_cl_queue(cl)};
  int rc = build_enqueued(cl, a, res, &ev, err);
  if (rc != 0) clFinish(hy_cl_queue(cl));
  double t[PH_N] = {0};
  hy_cl_ev_finish(&ev, rc == 0 ? t : NULL);
  res->upload = t[PH_UPLOAD];
  res->sort = t[PH_SORT];
  res->cells = t[PH_CELLS];
  res->moments = t[PH_MOMENTS];
  return rc;
}

int hy_cl_tree_build_side(struct hy_cl *cl, const struct hy_cl_build_args *a, struct hy_cl_build_result *res,
                          struct hy_err *err) {
  memset(res, 0, sizeof *res);
  if (a->slot != 1 || !a->pos)
    return hy_err_set(err, "internal error: a side build must build slot 1 from uploaded positions");
  if (hy_cl_side_queue(cl, err) != 0) return -1;
  hy_cl_on_side = 1;
  const int rc = hy_cl_tree_build(cl, a, res, err);
  hy_cl_on_side = 0;
  return rc;
}

int hy_cl_unsort(struct hy_cl *cl, int slot, cl_mem src, cl_mem dst, size_t n, cl_event *ev, struct hy_err *err) {
  if (slot < 0 || slot > 1 || n != cl->tree[slot].sorted_n || !cl->k_unsort)
    return hy_err_set(err, "internal error: unsorting %zu results without a device-built tree of them", n);
  cl_uint un = (cl_uint)n;
  if (hy_cl_set_args(cl, cl->k_unsort, "hy_unsort", err, M(cl->tree[slot].idx), V(un), sizeof(cl_mem), (const void *)&src,
               sizeof(cl_mem), (const void *)&dst, END))
    return -1;
  return hy_cl_launch(cl, cl->k_unsort, "hy_unsort", n, ev, err);
}

int hy_cl_tree_download(struct hy_cl *cl, int slot, size_t n, size_t n_cell, float *cells, int32_t *next, float *b2,
                        uint32_t *idx, double *seconds, struct hy_err *err) {
  if (slot < 0 || slot > 1) return hy_err_set(err, "internal error: download of tree slot %d", slot);
  struct cl_tree *T = &cl->tree[slot];
  if (n != T->sorted_n || n_cell != T->n_cell || T->n_gen == 0)
    return hy_err_set(err, "internal error: download of a tree of %zu particles and %zu cells without it", n,
                      n_cell);
  struct cl_evlist ev = {.q = hy_cl_queue(cl)};
  cl_int e;
  if ((e = clEnqueueReadBuffer(hy_cl_queue(cl), cl->node[slot].mem, CL_FALSE, hy_size_mul_or_die(n, 32, "tree nodes"),
                               n_cell * 32, cells, 0, NULL, hy_cl_ev_new(&ev, PH_UPLOAD))) != CL_SUCCESS ||
      (e = clEnqueueReadBuffer(hy_cl_queue(cl), T->nxt.mem, CL_FALSE, 0, n * 4, next, 0, NULL,
                               hy_cl_ev_new(&ev, PH_UPLOAD))) != CL_SUCCESS ||
      (e = clEnqueueReadBuffer(hy_cl_queue(cl), T->c_b2.mem, CL_FALSE, 0, n_cell * 4, b2, 0, NULL,
                               hy_cl_ev_new(&ev, PH_UPLOAD))) != CL_SUCCESS ||
      (e = clEnqueueReadBuffer(hy_cl_queue(cl), T->idx.mem, CL_FALSE, 0, n * 4, idx, 0, NULL,
                               hy_cl_ev_new(&ev, PH_UPLOAD))) != CL_SUCCESS ||
      (hy_cl_ev_close(&ev), (e = clFinish(hy_cl_queue(cl))) != CL_SUCCESS)) {
    clFinish(hy_cl_queue(cl));
    hy_cl_ev_finish(&ev, NULL);
    return hy_err_set(err, "OpenCL: reading the device-built tree (%zu particles, %zu cells) failed on %s: %s", n,
                      n_cell, cl->name, hy_cl_errname(e));
  }
  double t[PH_N] = {0};
  hy_cl_ev_finish(&ev, t);
  *seconds = t[PH_UPLOAD];
  return 0;
}

int hy_cl_block_mark(struct hy_cl *cl, int slot, int n_part, int root, cl_mem sink, int sink_stride, size_t n_sink,
                     double r2, const float *box, cl_event *ev, struct hy_err *err) {
  if (hy_cl_tree_kernels(cl, err) != 0) return -1;
  const size_t nb = (n_sink + HY_SINK_BLOCK - 1) / HY_SINK_BLOCK;
  if (hy_cl_ensure_buf(cl, &cl->blocks, nb + 1, "sink block flags", err) != 0) return -1;
  const cl_int np = n_part, rt = root;
  const cl_uint ns = (cl_uint)n_sink;
  const cl_float fr2 = (cl_float)r2;
  const cl_uint stride = (cl_uint)sink_stride;
  cl_float4 blo = {{0.0f, 0.0f, 0.0f, 0.0f}}, bhi = blo;
  const cl_int use_box = box != NULL;
  if (box)
    for (int d = 0; d < 3; d++) {
      blo.s[d] = box[d];
      bhi.s[d] = box[3 + d];
    }
  if (hy_cl_set_args(cl, cl->k_block_mark, "hy_block_mark", err, M(cl->node[slot]), V(np), V(rt), sizeof(cl_mem),
                     (const void *)&sink, V(ns), V(fr2), M(cl->blocks), V(stride), V(blo), V(bhi), V(use_box), END))
    return -1;
  return hy_cl_launch(cl, cl->k_block_mark, "hy_block_mark", nb, ev, err);
}

int hy_cl_item_blocks(struct hy_cl *cl, int slot, size_t n_sink, size_t n_local, cl_event *ev, struct hy_err *err) {
  if (hy_cl_tree_kernels(cl, err) != 0) return -1;
  if (n_sink != cl->tree[slot].sorted_n || n_local > n_sink)
    return hy_err_set(err, "internal error: item blocks of %zu sinks (%zu local) of a tree of %zu", n_sink, n_local,
                      cl->tree[slot].sorted_n);
  const size_t nb = (n_sink + HY_SINK_BLOCK - 1) / HY_SINK_BLOCK;
  if (hy_cl_ensure_buf(cl, &cl->blocks, nb + 1, "sink block flags", err) != 0) return -1;
  const cl_uint un = (cl_uint)n_sink, ul = (cl_uint)n_local;
  if (hy_cl_set_args(cl, cl->k_item_blocks, "hy_item_blocks", err, M(cl->tree[slot].idx), V(un), V(ul),
                     M(cl->blocks), END))
    return -1;
  return hy_cl_launch(cl, cl->k_item_blocks, "hy_item_blocks", nb, ev, err);
}

int hy_cl_add_unsort(struct hy_cl *cl, cl_mem acc, cl_mem x, size_t n, int use_blocks, cl_event *ev,
                     struct hy_err *err) {
  if (n != cl->tree[0].sorted_n || !cl->k_add_unsort)
    return hy_err_set(err, "internal error: adding %zu key-ordered results without a device-built tree of them", n);
  if (use_blocks && (!cl->blocks.mem || cl->blocks.size < (n + HY_SINK_BLOCK - 1) / HY_SINK_BLOCK))
    return hy_err_set(err, "internal error: adding results of marked sink blocks without their marks");
  cl_uint un = (cl_uint)n;
  const cl_int ub = use_blocks ? 1 : 0;
  cl_mem blocks = use_blocks ? cl->blocks.mem : cl->tree[0].idx.mem; /* not read without use_blocks */
  if (hy_cl_set_args(cl, cl->k_add_unsort, "hy_add_unsort", err, M(cl->tree[0].idx), V(un), sizeof(cl_mem),
               (const void *)&x, sizeof(cl_mem), (const void *)&acc, sizeof(cl_mem), (const void *)&blocks, V(ub),
               END))
    return -1;
  return hy_cl_launch(cl, cl->k_add_unsort, "hy_add_unsort", n, ev, err);
}

