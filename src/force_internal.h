/* SPDX-License-Identifier: GPL-3.0-or-later
 * force_internal.h: the force computation's state and the helpers that its
 * three files share: force.c (set-up, local trees, walks, direct sums),
 * force_state.c (the device-resident particle state, its decomposition and
 * its forces) and force_let.c (the remote and merged trees of the LET
 * items). Not for other modules: they use force.h. */
#ifndef HY_FORCE_INTERNAL_H
#define HY_FORCE_INTERNAL_H

#include "force.h"

#include "cl_engine.h"
#include "decomp.h"
#include "hy_shared.h"
#include "let.h"

/* One device walk, run on the device thread. */
struct walk_job {
  struct hy_cl *cl;
  struct hy_cl_walk_args a;
  struct hy_walk_cfg wc;
  uint64_t counts[2];
  struct hy_cl_times tm;
  struct hy_err err;
  int fetch; /* no walk: read the results an unsort walk left on the device into a.out0 / a.out1 */
  const char *what; /* its name in the trace (trace.h) */
};

struct hy_force {
  struct { /* the device force between hy_force_state_force_begin and _end */
    int mode, want_pot;
    int queued; /* the local walk is queued (end waits for it) */
    double t1;  /* the walk's start (walk_wall) */
  } sf;
  struct hy_cl *cl;
  struct hy_pool *pool;
  struct hy_force_cfg cfg;
  struct hy_tree tree;
  float *sc;          /* relative criterion, host-state device builds: the sink scales (host order) */
  double c_mine;      /* relative criterion: the largest sink scale of the last build's particles (0: none) */
  size_t sc_cap;
  uint64_t tree_id;   /* increases with every build: lets the engine skip re-uploads */
  int have_tree;
  float *node;        /* 8 floats per node */
  size_t node_cap;    /* in nodes */
  float *sink;        /* 4 floats per particle */
  float *out0, *out1; /* 4 floats per particle: local walk */
  float *rout0, *rout1; /* 4 floats per particle: remote walk */
  size_t sink_cap;    /* in particles */
  struct hy_worker *worker; /* the device thread */
  struct walk_job job[2];   /* local and remote walk */
  /* distributed */
  MPI_Comm comm;
  int nranks;
  struct hy_let *let;
  struct hy_part remote;    /* LET items received (positions, masses), but not a hard walk's (n_items) */
  size_t n_items;           /* the items of the last exchange (hard ones only in floats: hard_items_room) */
  struct hy_tree rtree;     /* remote tree */
  float *rnode;             /* its node records, in the local tree's frame */
  size_t rnode_cap;
  int rdev;                 /* the remote tree of the last exchange on the device: 0 no, 1 packed (rbuild), 2 built
                               there (rbres) */
  float *pnode;             /* or its records as a tree of points (hard walks), in pinned memory */
  size_t p_cells;           /* its cells */
  struct hy_cl_build_args rbuild; /* its build: the items packed in the local tree's frame, slot 1 */
  struct hy_cl_build_result rbres; /* and its result */
  float rbox[6];                  /* the box of its items' packed positions (lo, hi), if rbox_ok */
  int rbox_ok;
  int merged;               /* HY_LET_*: when to walk one tree of local particles + LET items */
  int sinks_packed;         /* f->sink holds the positions of the last build */
  uint64_t first_bad;       /* lowest ID with a non-finite position at the first build that saw one */
  struct hy_part comb;      /* merged: local particles and LET items */
  int32_t *self_node;       /* merged: node of local particle i in the merged tree */
  size_t self_cap;
  uint64_t last_hard;
  struct hy_force_stats st;
  double walk_total[2]; /* kernel seconds of every walk job, hard walks and the others (hy_force_walk_seconds) */
  /* device build (one rank): positions packed in p's order, results back in it */
  int dev_build;            /* the last build ran on the device */
  uint64_t m_tree_id;       /* distributed: the merged tree of the last soft walk (device slot 1) */
  size_t m_n, m_n_cell;
  size_t m_n_local; /* the merged tree's local particles (the first m_n_local of its m_n) */
  int32_t m_root;
  int m_whole;      /* it was grafted onto the local tree (hy_cl_build_args.graft): m_root is a node of the
                       local tree's buffer, which holds m_root + m_n_cell nodes */
  int m_local_sinks; /* its walks take only its local particles as sinks (hy_cl_build_result.local_sinks) */
  double origin[3];         /* device build: this build's centre of mass (its records' frame) */
  size_t packed_n;          /* distributed: the staging buffer holds the last local build's n particles,
                               packed relative to origin (0: not known to) */
  double packed_red[6];     /* their lo[3], hi[3] relative to origin */
  struct hy_box box;        /* distributed: the tight box of the last local device build's particles */
  int box_ok;               /* box is set (from that build's pack reductions) */
  double frame[3];          /* positions in the device records are relative to this point */
  double cube_c[3], cube_h; /* distributed: the key cube of the whole set at the last local build */
  int cube_shrunk;          /* (keep_cube), and whether escapers shrank it */
  float *dout0, *dout1;     /* walk results (engine's host staging memory) */
  uint32_t *u32;            /* 32-bit indices for the device (u32_scratch) */
  size_t u32_cap;
  size_t *dd_leave, *dd_beyond; /* decomposition: the device's lists, as size_t */
  int *dd_rank;
  size_t dd_list_cap[2];
  struct hy_decomp_dev dd_src; /* hy_force_decomp_source */
  /* distributed, state on the device: the soft step's local build begun in
   * the decomposition (hy_force_cube_ahead, dd_kept): the key cube of the
   * whole set before it, and the kept particles whose keys are sorted */
  double pre_c[3], pre_h;
  int pre_cube;             /* pre_c, pre_h hold this decomposition's cube */
  size_t pre_n;             /* the kept particles whose keys are sorted (0: none) */
  uint64_t *hkeys;          /* distributed, state on the host: keys and indices (hy_cl_build_args.keys) */
  size_t hkeys_cap;
  double *red;              /* pack: per-thread reductions (PACK_RED doubles) */
  uint64_t *red_bad;        /* pack: per-thread lowest ID with a non-finite position */
  int red_n;
};

/* A new tree id, unique across the process (the engine skips the upload
 * of a tree whose id is resident). */
uint64_t hy_force_next_tree_id(void);

static inline int hy_force_pot_invalid(int mode, int want_pot) { return want_pot && mode == HY_WALK_HARD; }

int hy_force_walk_job_run(void *arg);

int hy_force_wait_job(struct hy_force *f, struct walk_job *j, struct hy_err *err);

int hy_force_remote_tree(struct hy_force *f, const struct hy_part *p, int mode, int selected, struct hy_err *err);

int hy_force_remote_build_side(struct hy_force *f, struct hy_err *err);

void hy_force_second_tree_job(struct hy_force *f, struct walk_job *j, const struct hy_walk_cfg *wc, size_t n_sink,
                              uint64_t sink_id, long self_base, float *out0, float *out1);

void hy_force_pack_run(struct hy_force *f, const struct hy_part *p, const double origin[3], float *out, float *grp,
                       double red[10], uint64_t *bad);

int hy_force_key_cube(size_t n, const double red[6], const double origin[3], const double *sample, size_t s,
                      double centre[3], double *half);

int hy_force_cube_for(struct hy_force *f, size_t n, const double red[6], const double origin[3], const double *sample,
                      size_t s, double centre[3], double *half, struct hy_err *err);

int hy_force_host_cube(struct hy_force *f, const struct hy_part *p, double centre[3], double *half, struct hy_err *err);

void hy_force_box_from_pack(struct hy_force *f, const double red[6]);

struct hy_cl_build_args hy_force_build_args(const struct hy_force *f, const double frame[3], const float *pos4,
                                            const float *grp, size_t n, const double centre[3], double half,
                                            uint64_t id, int slot);

void hy_force_take_build(struct hy_force *f, const struct hy_cl_build_result *res, int lane, const char *const names[4],
                         double t_end);

void hy_force_key_cube_args(const double centre[3], double half, double lo[3], double *scale);

int hy_force_build_packed(struct hy_force *f, int slot, size_t n, size_t n_local, const float *pos4, const float *grp,
                          const double centre[3], double half, double t_host, const uint64_t *keys, size_t presorted,
                          struct hy_err *err);

int hy_force_walk_merged(const struct hy_force *f, int mode);

struct hy_walk_cfg hy_force_walk_cfg(const struct hy_force *f, int mode, int want_pot);

void hy_force_resident_walk_job(struct hy_force *f, struct walk_job *j, const struct hy_walk_cfg *wc, int slot);

void hy_force_restore_frame(struct hy_force *f, const double frame[3]);

int hy_force_exchange_let(struct hy_force *f, const struct hy_part *p, int mode, int selected, struct hy_let_floats *fl,
                          struct hy_err *err);

void hy_force_merged_cube(struct hy_force *f, float *items, float *grp, double centre[3], double *half);

void hy_force_unpack_results(struct hy_force *f, size_t n, int split, const float *o0, const float *o1, const float *r0,
                             const float *r1, double *acc0, double *acc1, double *pot);

void hy_force_pack_sinks(struct hy_force *f, const struct hy_part *p);

int hy_force_device_tree_job(struct hy_force *f, struct walk_job *j, const struct hy_walk_cfg *wc, int slot, size_t n,
                             float **out0, float **out1, struct hy_err *err);

int hy_force_merged_walk(struct hy_force *f, const struct hy_part *p, const struct hy_walk_cfg *wc, double *acc0,
                         double *acc1, double *pot, struct hy_err *err);

/* Room for nn node records (8 floats each) in *rec of capacity *cap nodes;
 * the old contents are not kept. */
void hy_force_records_room(float **rec, size_t *cap, size_t nn, const char *what);

#endif
