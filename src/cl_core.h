/* SPDX-License-Identifier: GPL-3.0-or-later
 * cl_core.h: the OpenCL engine's state and its base layer (cl_core.c),
 * which every other cl_*.c file uses and which uses none of them. Above it
 * cl_let.c and cl_state.c, then cl_build.c (cl_internal.h), and on top
 * cl_engine.c (doc/developing.md). Private to the cl_*.c files: includes
 * CL/cl.h. */
#ifndef HY_CL_CORE_H
#define HY_CL_CORE_H

#include <CL/cl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cl_check.h"
#include "cl_engine.h"
#include "hy_shared.h"
#include "log.h"

struct cl_buf {
  cl_mem mem;
  size_t size;
};

/* Host memory mapped from a CL_MEM_ALLOC_HOST_PTR buffer: page-locked on
 * implementations that support it, so transfers from and to it run at the
 * bus's speed. */
struct cl_pinned {
  cl_mem mem;
  void *ptr;
  size_t size;
};

#define HY_CL_SCAN_LEVELS 6 /* scan of up to (4 * wg)^6 values */
#define MAX_GENERATIONS 96  /* > 21 + 1: a cell generation descends at least one octal key digit */
#define GEN_TABLE (2 * MAX_GENERATIONS + 3) /* the device's generation table: (first, count) pairs, flag */
/* build.cl's constants beside those above, all its build options (hy_cl_build_kernels) */
#define SORT_PER 8 /* keys per work-item of a sort tile (HY_PER) */
#define BMAX_SERIAL 128 /* exact b_max by one work-item up to this many particles */
#define BOX_SMALL 64 /* open-all builds: particles per small box, small boxes per large one (HY_BOX1) */
#define RADIX_BITS 4
#define RADIX (1u << RADIX_BITS)

/* A tree built on the device (cl_build.c), its node records in the walk
 * buffer of its slot (hy_cl.node[slot]). */
struct cl_tree {
  struct cl_buf pos;   /* positions and masses (float4, host order) */
  struct cl_buf idx;   /* key order -> host order */
  struct cl_buf c_lo, c_hi, nxt, mor, c_b2;
  struct cl_buf grp;   /* LET items: B2 and b_max per particle (float2, host order) */
  int has_grp;         /* the last build's particles carry grp */
  struct cl_buf sc;    /* the relative criterion's sink scales (float, host order; hy_cl_build_args.sc) */
  cl_mem sc_use;       /* the scales hy_gather reads: sc, the state's s_sc, or NULL (none) */
  cl_uint sc_n;        /* particles sc_use holds (host indices from sc_n on get 0) */
  size_t sorted_n;     /* particles of the last build (0: none) */
  size_t n_cell;       /* its cells */
  int n_gen;           /* its cell generations (0: none built) */
  int gen_hint;        /* the generations of the slot's last build (the next build's first batch) */
  cl_uint n_crit;      /* its n_crit: its cells of fewer particles are leaf buckets */
  struct cl_buf skey;  /* slot 0, keep_keys: the last build's sorted keys (its order is idx) */
  size_t skey_n;       /* their count (0: none kept) */
  uint64_t skey_id;    /* that build's tree id */
  double skey_lo[3], skey_side; /* and its key cube, in its frame */
  cl_uint gen_first[MAX_GENERATIONS], gen_count[MAX_GENERATIONS];
};

struct hy_cl {
  cl_platform_id platform;
  cl_device_id device;
  cl_context ctx;
  cl_command_queue q;
  cl_command_queue q2; /* hy_cl_tree_build_side's queue (made on first use; NULL: none yet) */
  cl_command_queue qm; /* maps of new page-locked staging memory (hy_cl_host_buffer): nothing else is
                          queued there, so a map waits for no kernel of q or q2 */
  pthread_mutex_t mem_lock; /* in_use: buffers grow on two threads while a side build runs */
  int mem_lock_ok;          /* mem_lock initialised */
  cl_device_type type;
  cl_ulong max_alloc, global_mem;
  size_t in_use;    /* bytes of all engine buffers */
  size_t mem_limit; /* global memory, or HYTREE_TEST_DEVICE_MEM_LIMIT when smaller */
  size_t max_wg;
  int plat_index, dev_index;
  int nvec;
  int mac_rel; /* walks with the relative criterion (hy_cl_opts.mac_rel) */
  char name[256], vendor[256], version[256], platform_name[256], desc[1024];
  cl_program walk_prog[HY_WALK_NMODES][2];
  cl_kernel walk_k[HY_WALK_NMODES][2];
  cl_program direct_prog;
  cl_kernel direct_k;
  cl_program direct_ref_prog; /* direct.cl with -D HY_DIRECT_REF (fp64 devices, built on first use) */
  cl_kernel direct_ref_k;
  struct cl_buf node[2];
  uint64_t node_id[2];
  uint64_t sink_id; /* id of the sinks resident in the sink buffer (0: none) */
  struct cl_buf sink, out0, out1, counts, dsrc;
  /* the core's (cl_core.c): build.cl (built once) with its scan and sort
   * kernels, their scratch, and the host staging memory */
  cl_program build_prog;
  cl_kernel k_scan_block, k_scan_add, k_count, k_scatter, k_tile_sort, k_merge_pass;
  size_t merge_sort_max;           /* sorts of up to this many pairs merge (hy_cl_set_merge_sort_max) */
  size_t build_wg;                 /* work-group size of the sort and scan kernels */
  struct cl_buf key[2], idx_tmp;   /* sort scratch: keys (ping-pong) and the indices' second buffer */
  struct cl_buf hist, scan[HY_CL_SCAN_LEVELS];
  struct cl_buf hist_side, scan_side[HY_CL_SCAN_LEVELS]; /* the second queue's own sort histogram and scan sums */
  struct cl_pinned host[HY_CL_HOST_N];
  /* device tree build (cl_build.c, hy_cl_tree_kernels): one tree per walk
   * slot (0: the local or merged tree, 1: the remote tree of received LET
   * items), sharing the sort's and the cell generations' scratch buffers */
  cl_kernel k_keys, k_gen_count, k_gen_scan, k_gen_emit, k_gather, k_moments, k_bmax_big, k_unsort, k_open_cells,
      k_add_unsort, k_merge_keys, k_block_mark, k_first_cells, k_item_blocks, k_graft_links, k_graft_stubs,
      k_graft_moments, k_graft_bmax_big, k_box_small, k_box_large, k_box_cells, k_merged_sinks;
  struct cl_tree tree[2];
  struct cl_buf n_child, uout0, uout1, big, n_big, gen, gen_sums, blocks;
  struct cl_buf boxes; /* open-all builds: the boxes of 64 particles, then of 64 such boxes */
  struct cl_buf ibefore, first_at, n_graft; /* merged builds: items before each position, the slot-0 tree's
                                               outermost cell at each position, cells copied from it */
  struct cl_buf graft_gl, item_b2; /* grafted merged builds: each merged cell's slot-0 cell taken whole (or
                                      UINT32_MAX), the items' B2 */
  uint64_t graft_id; /* the grafted merged tree whose records follow the slot-0 tree's in node[0] (0: none) */
  /* LET selection on the device (cl_let.c) */
  cl_program let_prog;
  cl_kernel k_let_vis, k_let_emit, k_let_gather;
  struct cl_buf l_vis, l_boxes, l_frames, l_cnt, l_key[2], l_val[2], l_items;
  cl_event l_read; /* hy_cl_let_select's read of the items on the second queue, until hy_cl_let_wait */
  /* device-resident particle state (cl_state.c) */
  cl_program state_prog;
  cl_kernel k_axpy, k_pack, k_unpack, k_finite, k_owner, k_flag, k_list, k_gather_state, k_move, k_st_keys,
      k_st_keys_fix, k_energy, k_scales;
  struct cl_buf s_pos, s_vel, s_mass, s_accw, s_acc, s_pot, s_red;
  struct cl_buf s_sc, s_scmax; /* the relative criterion's sink scales of the state, their largest per
                                  work-group (hy_cl_state_scales) */
  size_t s_sc_n;      /* particles they were made for (0: none, or the accelerations changed since) */
  double s_sc_max;    /* their largest */
  struct cl_buf s_dest, s_flag, s_idx, s_rank, s_out, s_bounds, s_count; /* decomposition (hy_cl_state_owners ...) */
  struct cl_buf s_gidx; /* the gathers' indices (their own: s_idx is the lists' and the patch's, on the first queue) */
  struct cl_buf s_patch_i;                   /* hy_cl_state_patch: the holes */
  /* hy_cl_state_presort: the kept particles' sorted keys and indices, their
   * count (0: none), cube, and the span of their sort's events (a struct
   * cl_evlist, finished by the build that takes them) */
  struct cl_buf pkey, pidx, pfix;
  size_t presort_n;
  double presort_lo[3], presort_scale;
  struct cl_evlist *presort_ev;
  size_t state_n;  /* particles in the state buffers (0: none) */
  cl_event gather_ev; /* hy_cl_state_gather_begin's read, until _end (NULL: none under way) */
  size_t gather_m;    /* its particles */
  size_t appended; /* LET items packed behind the state's positions in slot 1 (hy_cl_state_append_*; 0 after a
                      pack) */
  int appended_copy; /* the state's positions still to be copied in front of them (a merged build that is
                        not grafted does it: a grafted one reads the slot-0 tree's records instead) */
  int unsorted_slot;  /* the tree slot of the last unsort walk, whose results are in uout0 / uout1 */
  size_t unsorted_n;  /* its particles (0: none) */
  int has_fp64;    /* 0 not asked yet, 1 no, 2 yes */
};

/* Nonzero on a thread inside hy_cl_tree_build_side: the build's commands
 * go to q2, so that they run beside the walk another thread has on q. */
extern _Thread_local int hy_cl_on_side;

/* The queue of the calling thread's commands. */
static inline cl_command_queue hy_cl_queue(const struct hy_cl *cl) { return hy_cl_on_side ? cl->q2 : cl->q; }
/* The second queue (cl->q2), made on first use. Returns 0 or -1 with err set. */
int hy_cl_side_queue(struct hy_cl *cl, struct hy_err *err);

static inline const char *hy_cl_dev_label(const struct hy_cl *cl) {
  return cl && cl->name[0] ? cl->name : "the OpenCL device";
}

#define CL_CHECK(call, what)                                                                     \
  do {                                                                                           \
    cl_int e_ = (call);                                                                          \
    if (e_ != CL_SUCCESS)                                                                        \
      return hy_err_set(err, "OpenCL: %s failed on %s: %s (%d)", (what), hy_cl_dev_label(cl),   \
                        hy_cl_errname(e_), (int)e_);                                             \
  } while (0)

/* ----------------------------------------------------------- buffers */

void hy_cl_buf_release(struct cl_buf *b);
/** Grow buffer b to at least bytes (checked against the device's limits). */
int hy_cl_ensure_buf(struct hy_cl *cl, struct cl_buf *b, size_t bytes, const char *label, struct hy_err *err);
/** As hy_cl_ensure_buf, keeping the first `keep` bytes of b's contents. */
int hy_cl_ensure_buf_keep(struct hy_cl *cl, struct cl_buf *b, size_t bytes, size_t keep, const char *label,
                          struct hy_err *err);
/** mem_lock around changes of in_use outside hy_cl_ensure_buf (dies if
 *  the lock fails). */
void hy_cl_mem_lock(struct hy_cl *cl);
void hy_cl_mem_unlock(struct hy_cl *cl);
int hy_cl_check_int(size_t v, const char *what, struct hy_err *err);

/* ---------------------------------------------- programs and kernels */

/** Build a program from its embedded source (or $HYTREE_KERNEL_DIR/file) with
 *  extra defines; a failure prints the build log to stderr. */
int hy_cl_build_program(struct hy_cl *cl, const char *file, const char *embedded, const char *defines,
                        cl_program *out, struct hy_err *err);
/** The kernel `name` of program prog into *k. */
int hy_cl_kernel(struct hy_cl *cl, cl_program prog, const char *name, cl_kernel *k, struct hy_err *err);
/** Build build.cl (once) and its scan and sort kernels; sets the work-group
 *  size of hy_cl_launch (cl->build_wg). The tree build's kernels of the same
 *  program are cl_build.c's (hy_cl_tree_kernels). */
int hy_cl_build_kernels(struct hy_cl *cl, struct hy_err *err);
/** Release what the core made: build.cl and its scan and sort kernels, their
 *  scratch buffers and the host staging memory (after the other modules'
 *  frees: a read into staging memory may still be waited for). */
void hy_cl_core_free(struct hy_cl *cl);

/* ------------------------------------------------------------- events */

double hy_cl_event_seconds(cl_event ev);
void hy_cl_release_events(cl_event *ev, int n);

/* The phases of a device tree build's time (hy_cl_build_result). */
enum { PH_UPLOAD, PH_SORT, PH_CELLS, PH_MOMENTS, PH_N };

/* The device time of each phase, from spans of consecutive commands of one
 * phase: the first command's event and a marker after the last one (an
 * event per command costs a few microseconds each, which small trees of
 * ~150 commands would feel). A span's time includes the device's idle gaps
 * between its commands. */
struct cl_evlist {
  cl_command_queue q;
  cl_event *ev; /* two per span: its first command, the marker after its last */
  int *phase;   /* one per span */
  size_t n, cap; /* spans */
  int open;      /* the last span has no marker yet */
};

/** The event slot for a command of `phase`: NULL inside a span of that phase. */
cl_event *hy_cl_ev_new(struct cl_evlist *l, int phase);
/** End the open span with a marker (before the queue is waited for). */
void hy_cl_ev_close(struct cl_evlist *l);
/** Close the list, add each span's device time to t[its phase] (t NULL:
 *  not read) and release the events. */
void hy_cl_ev_finish(struct cl_evlist *l, double t[PH_N]);

/* ------------------------------------------------ launch, scan, sort */

/* Argument pairs of hy_cl_set_args: a buffer, a value, the end. */
#define M(b) sizeof(cl_mem), (const void *)&(b).mem
#define V(v) sizeof(v), (const void *)&(v)
#define END ((size_t)0)

/** Set the arguments of k from (size, pointer) pairs ended by a size of 0. */
int hy_cl_set_args(struct hy_cl *cl, cl_kernel k, const char *name, struct hy_err *err, ...);
/** Launch k over at least `items` work-items in work-groups of the build
 *  size (ev may be NULL). */
int hy_cl_launch(struct hy_cl *cl, cl_kernel k, const char *name, size_t items, cl_event *ev, struct hy_err *err);
/** Exclusive scan in place of n uints of data (enqueued, in queue order
 *  with what follows). */
int hy_cl_scan(struct hy_cl *cl, cl_mem data, size_t n, struct hy_err *err);
/** Stable sort of n (ulong key, uint val) pairs, keys below 2^bits (the
 *  radix sort's passes; the merge sort compares whole keys:
 *  hy_cl_merge_sort_default), from and into kb[0], ib[0] (kb[1], ib[1]:
 *  scratch of n entries); enqueued, the caller waits. */
int hy_cl_sort_pairs(struct hy_cl *cl, struct cl_buf *kb[2], struct cl_buf *ib[2], size_t n, unsigned bits,
                     struct hy_err *err);
/** hy_cl_sort_pairs with its commands' events in ev under `phase`; the
 *  histogram (hy_cl_sort_hist) must hold RADIX entries per sort tile. */
int hy_cl_sort_pairs_ev(struct hy_cl *cl, struct cl_buf *kb[2], struct cl_buf *ib[2], size_t n, unsigned bits,
                        struct cl_evlist *ev, int phase, struct hy_err *err);
/** The radix sort's histogram of the queue in use (hy_cl_on_side: the
 *  second queue's own, as its commands run beside the first's). */
struct cl_buf *hy_cl_sort_hist(struct hy_cl *cl);

#endif
