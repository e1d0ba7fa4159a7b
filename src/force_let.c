/* SPDX-License-Identifier: GPL-3.0-or-later
 * force_let.c: the trees of the LET items a rank receives: the remote tree
 * of a hard step (built on the device beside the local walk, or on the
 * host as a tree of points) and the merged tree of local particles and
 * items of the soft steps, and their walks. */
#include "config.h"

#include "force_internal.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hy_shared.h"
#include "trace.h"
#include "worker.h"

/* Exchange the LET for this walk into f->remote; selected: the items were
 * selected already (state_select), else the tight boxes are exchanged and
 * the host walks the local tree for them. Returns 0 or -1. */
int hy_force_exchange_let(struct hy_force *f, const struct hy_part *p, int mode, int selected, struct hy_let_floats *fl,
                          struct hy_err *err) {
  struct hy_let_stats ls = {0};
  f->rdev = 0; /* until hy_force_remote_tree has the remote tree built on the device */
  f->pnode = NULL;
  f->n_items = 0;
  const int hard = mode == HY_WALK_HARD;
  if (selected && hy_cl_let_wait(f->cl, err) != 0) return -1; /* the device selection's items are read */
  int rc = selected ? 0 : hy_let_boxes(f->let, p, f->box_ok ? &f->box : NULL, f->frame, f->c_mine, &ls, err);
  if (rc == 0) {
    if (!selected) hy_let_select(f->let, p->n ? &f->tree : NULL, p, hard, f->cfg.r2, !hard, &ls);
    if (fl) {
      rc = hy_let_exchange_floats(f->let, fl, &ls, err);
      hy_part_resize(&f->remote, 0); /* the items are in fl's floats only */
    } else {
      rc = hy_let_exchange(f->let, &f->remote, &ls, err);
    }
  }
  f->st.let_boxes += ls.t_boxes;
  f->st.let_select += ls.t_select;
  f->st.let_comm += ls.t_comm;
  f->st.let_recv += ls.n_recv;
  f->st.let_recv_hard += ls.n_recv_hard;
  f->st.let_sent += ls.n_sent;
  f->st.let_bytes_sent += ls.bytes_sent;
  f->st.let_bytes_recv += ls.bytes_recv;
  if (rc != 0) return -1;
  f->n_items = fl ? fl->n : f->remote.n;
  f->last_hard = hard ? ls.n_recv : ls.n_recv_hard;
  return 0;
}

/* Build the tree of set q (the LET items, or local particles + items) as
 * f->rtree with its records in the local tree's frame; whole: in the key
 * cube of the whole set (hy_force_cube_for), as the merged tree is built. */
static int build_second_tree(struct hy_force *f, struct hy_part *q, int whole, struct hy_err *err) {
  double t0 = hy_wtime();
  hy_tree_sort_in(&f->rtree, q, f->pool, whole ? f->cube_c : NULL, f->cube_h, f->cube_shrunk);
  if (hy_tree_build(&f->rtree, q, f->cfg.n_crit, f->cfg.a_err / f->cfg.G, f->pool, err) != 0) return -1;
  f->rtree.rel_alpha = f->cfg.mac_alpha / f->cfg.G; /* the records the walks' criterion reads */
  f->rtree.rel_capped = f->cfg.mac_both;
  hy_force_records_room(&f->rnode, &f->rnode_cap, hy_tree_n_nodes(&f->rtree), "remote tree records");
  hy_tree_export_at(&f->rtree, q, f->frame, f->rnode, f->pool);
  f->st.remote_build += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "remote_build", t0);
  return 0;
}

/* The box of the received items' packed positions (red: lo[3], hi[3] of a
 * hy_force_pack_run): rounding to float is monotonic, so (float)lo is at most every
 * item's packed coordinate and (float)hi at least. */
static void set_rbox(struct hy_force *f, const double red[6]) {
  f->rbox_ok = red[0] <= red[3] && red[1] <= red[4] && red[2] <= red[5];
  for (int k = 0; k < 6; k++) f->rbox[k] = (float)red[k];
}

/* With a device-built local tree the remote tree is built on the device as
 * well: here the key cube of its m items (packed in the local records' frame
 * with their B2 and b_max: pos4, grp in the pinned HY_CL_HOST_ITEMS buffer;
 * red: lo[3], hi[3] of their positions relative to that frame; sample:
 * hy_tree_sample of the items' positions) is chosen as for a local build;
 * then hy_force_remote_build_side builds it on the engine's second queue while the
 * device thread's local walk runs on the first (hy_cl_tree_build_side: slot
 * 1 and the build's buffers, none of the walk's), so that the remote walk
 * can start right after the local one, with the build off the critical
 * path. */
static void remote_device_args(struct hy_force *f, int mode, const float *pos4, const float *grp, size_t m,
                               const double red[6], const double *sample, size_t s) {
  double centre[3], half;
  hy_force_key_cube(m, red, f->frame, sample, s, centre, &half);
  /* a hard walk takes every item as a point (its cut-off is R2 from the
   * item's position) and opens every cell: the cells' b_max need bound only
   * the items' positions, as remote_points' do, not the extents of the
   * cells among the items, which made them wider (and cost an upload) */
  const int hard = mode == HY_WALK_HARD;
  f->rbuild = hy_force_build_args(f, f->frame, pos4, hard ? NULL : grp, m, centre, half, hy_force_next_tree_id(), 1);
  f->rbuild.open_all = hard; /* every cell opened, as in remote_points */
  set_rbox(f, red);
  f->rdev = 1; /* to be built by hy_force_remote_build_side */
}

/* remote_device_args of the items in f->remote (soft walks with HY_LET_SEPARATE),
 * packed here. */
static int remote_device_pack(struct hy_force *f, int mode, struct hy_err *err) {
  double t0 = hy_wtime();
  const size_t m = f->remote.n;
  float *buf = hy_cl_host_buffer(f->cl, HY_CL_HOST_ITEMS, hy_size_mul_or_die(m, 24, "LET items"), err);
  if (!buf) return -1;
  float *pos4 = buf, *grp = buf + 4 * m;
  double red[10], sample[3 * HY_TREE_SAMPLE];
  uint64_t bad = UINT64_MAX; /* items are checked where they are sent from */
  hy_force_pack_run(f, &f->remote, f->frame, pos4, grp, red, &bad);
  const size_t s = hy_tree_sample(f->remote.pos, m, sample);
  remote_device_args(f, mode, pos4, grp, m, red, sample, s);
  f->st.remote_build += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "remote_pack", t0);
  return 0;
}

/* The remote tree that remote_device_args packed (if any, and not built
 * yet), built on the engine's second queue (hy_cl_tree_build_side) beside
 * the device thread's local walk. */
int hy_force_remote_build_side(struct hy_force *f, struct hy_err *err) {
  if (f->rdev != 1) return 0;
  const double tb = hy_wtime();
  if (hy_cl_tree_build_side(f->cl, &f->rbuild, &f->rbres, err) != 0) return -1;
  f->rdev = 2;
  const double te = hy_wtime();
  f->st.remote_build += te - tb;
  hy_trace(HY_TRACE_MAIN, "remote_build_side", tb);
  /* its parts on the main lane: the device lane holds the local walk */
  static const char *const nm[] = {"rb_upload", "rb_sort", "rb_cells", "rb_moments"};
  hy_force_take_build(f, &f->rbres, HY_TRACE_MAIN, nm, te);
  return 0;
}

/* A hard walk's remote tree: every cell of it is opened, since its leaves,
 * the hard-LET items, were accepted by the sender's MAC against this rank's
 * whole box, so each is already as coarse as any of its sinks may take it,
 * and accepting groups of them as well would approximate a second time (the
 * 99th percentile of the galaxy's hard force on 4 ranks rose above 1.2
 * times that of one rank). The cut-off at R2 + b_max still skips every cell
 * out of reach, so a sink meets only the items within R2 of it. Such a tree
 * needs no moments beyond centres, masses and b_max: the host's threads
 * build it (hy_tree_point_records) while the device walks the local tree,
 * in the pinned buffer that the remote walk uploads, where a device build
 * of its ~100 small kernels would follow the local walk. */
static int remote_points(struct hy_force *f, const float *pos4, size_t m, const double red[6], struct hy_err *err) {
  double t0 = hy_wtime();
  float *node = hy_cl_host_buffer(f->cl, HY_CL_HOST_RTREE, hy_size_mul_or_die(m, 64, "remote tree records"), err);
  if (!node) return -1;
  set_rbox(f, red);
  f->p_cells = hy_tree_point_records(&f->rtree, pos4, m, f->rbox, f->cfg.n_crit, node, f->pool);
  f->pnode = node;
  f->st.remote_build += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "remote_build", t0);
  return 0;
}

/* Room for the m items of a hard walk's exchange (hy_let_floats.alloc): in
 * the pinned buffer that the remote build or walk uploads, positions and
 * masses (4 floats each), then their B2 and b_max (2 each). */
static float *hard_items_room(void *ctx, size_t m, float **grp, struct hy_err *err) {
  struct hy_force *f = ctx;
  const size_t k = m ? m : 1;
  float *buf = hy_cl_host_buffer(f->cl, HY_CL_HOST_ITEMS, hy_size_mul_or_die(k, 24, "LET items"), err);
  *grp = buf ? buf + 4 * k : NULL;
  return buf;
}

static float int_bits(int32_t v) {
  float x;
  memcpy(&x, &v, sizeof x);
  return x;
}

/* A hard walk's exchange, its items straight into the floats of the remote
 * tree (relative to the local records' frame, as packing the received
 * particles would make them, with their range and sample from the same
 * pass), and its remote tree: of points (remote_points), or on the device
 * (remote_device_args). */
static int remote_hard(struct hy_force *f, const struct hy_part *p, int selected, struct hy_err *err) {
  double range[6], sample[3 * HY_TREE_SAMPLE];
  struct hy_let_floats fl = {.origin = f->frame, .alloc = hard_items_room, .ctx = f, .range = range, .sample = sample};
  if (hy_force_exchange_let(f, p, HY_WALK_HARD, selected, &fl, err) != 0) return -1;
  const size_t m = fl.n;
  if (m == 0 || p->n == 0) return 0;
  if (f->dev_build && m >= 2 && f->cfg.hard_remote == HY_TREE_BUILD_DEVICE) {
    remote_device_args(f, HY_WALK_HARD, fl.pos4, fl.grp, m, range, sample, fl.n_sample);
    return 0;
  }
  return remote_points(f, fl.pos4, m, range, err);
}

/* Exchange the LET and build the remote tree of the received items: for a
 * hard walk a tree of points (remote_points), else an octree with the
 * moments of the MAC; with a device-built local tree, on the device (a
 * hard walk's too where the local tree is built on the device: every
 * cell opened). */
int hy_force_remote_tree(struct hy_force *f, const struct hy_part *p, int mode, int selected, struct hy_err *err) {
  if (mode == HY_WALK_HARD) return remote_hard(f, p, selected, err);
  if (hy_force_exchange_let(f, p, mode, selected, NULL, err) != 0) return -1;
  if (f->remote.n == 0 || p->n == 0) return 0;
  if (f->dev_build && f->remote.n >= 2) return remote_device_pack(f, mode, err);
  return build_second_tree(f, &f->remote, 0, err);
}

/* Walk job for the tree in f->rnode (remote items, or local particles and
 * items when merged) with the local sinks. */
void hy_force_second_tree_job(struct hy_force *f, struct walk_job *j, const struct hy_walk_cfg *wc, size_t n_sink,
                              uint64_t sink_id, long self_base, float *out0, float *out1) {
  j->cl = f->cl;
  j->wc = *wc;
  j->fetch = 0;
  j->what = "walk_remote";
  j->a = (struct hy_cl_walk_args){.slot = 1,
                                  .sink = f->sink,
                                  .n_sink = n_sink,
                                  .sink_id = sink_id,
                                  .self_base = self_base,
                                  .out0 = out0,
                                  .out1 = out1,
                                  /* hard walks: the remote tree's cells are all opened (remote_points) */
                                  .skip_far = wc->mode == HY_WALK_HARD && self_base == HY_NONE};
  if (f->rdev || f->pnode) {
    j->a.has_box = f->rbox_ok;
    memcpy(j->a.box, f->rbox, sizeof j->a.box);
  }
  if (f->rdev == 2) { /* built on the device (hy_force_remote_build_side), resident in slot 1 */
    j->a.tree_id = f->rbuild.tree_id;
    j->a.n_part = f->rbuild.n;
    j->a.n_nodes = f->rbuild.n + f->rbres.n_cell;
    j->a.root = f->rbres.root;
  } else if (f->pnode) { /* a tree of points, uploaded with the walk */
    j->a.node = f->pnode;
    j->a.n_nodes = f->n_items + f->p_cells;
    j->a.n_part = f->n_items;
    j->a.root = (int32_t)f->n_items;
  } else {
    j->a.node = f->rnode;
    j->a.n_nodes = hy_tree_n_nodes(&f->rtree);
    j->a.n_part = f->rtree.n_part;
    j->a.root = f->rtree.root;
  }
}

/* Merged walk: exchange the LET, build one tree of the local particles and
 * the received items (as Watanabe & Nakasato describe: "concatenates the
 * arrays of own particles and the cells received"), walk it with the local
 * sinks, each skipping its own node. Far regions are then summarised by
 * cells that hold both local and remote mass, as on one rank; the price is
 * that the walk cannot start before the exchange is done. */
/* The local particles followed by the received LET items, with the items'
 * group moments, IDs = indices (merged walks). */
struct merged_job {
  const struct hy_part *p;     /* local particles: nodes [0, n) */
  const struct hy_part *items; /* LET items: nodes [n, n + m) */
  struct hy_part *q;
};

static void merged_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  const struct merged_job *j = arg;
  struct hy_part *q = j->q;
  const size_t n = j->p->n;
  for (size_t i = b; i < e; i++) {
    const struct hy_part *src = i < n ? j->p : j->items;
    const size_t k = i < n ? i : i - n;
    memcpy(q->pos + 3 * i, src->pos + 3 * k, 3 * sizeof(double));
    q->mass[i] = src->mass[k];
    q->grp[2 * i] = i < n ? 0.0 : src->grp[2 * k];
    q->grp[2 * i + 1] = i < n ? 0.0 : src->grp[2 * k + 1];
    q->id[i] = i;
    /* the sink scales of the relative criterion: the local particles', and
     * 0 for the items (infinite |a|), whose results nobody reads */
    for (int d = 0; d < 3; d++) q->acc[3 * i + d] = i < n ? j->p->acc[3 * k + d] : INFINITY;
  }
}

/* The soft step's merged set: the local particles, then the LET items (with
 * their B2 and b_max), copied on the pool's threads; room for 1/16 more, so
 * that the item count's changes do not reallocate at every soft step. */
static struct hy_part *merged_set(struct hy_force *f, const struct hy_part *p) {
  const size_t n = p->n, m = f->remote.n, nm = n + m;
  struct hy_part *q = &f->comb;
  hy_part_use_groups(q);
  if (nm > q->n_alloc) hy_part_reserve(q, nm + nm / 16);
  q->n = nm;
  struct merged_job j = {.p = p, .items = &f->remote, .q = q};
  hy_pool_for(f->pool, nm, 16384, merged_body, &j);
  return q;
}

static void zero_floats_body(void *arg, size_t b, size_t e, int tid) {
  (void)tid;
  float *x = arg;
  memset(x + b, 0, (e - b) * sizeof(float));
}

/* The soft step's merged tree (local particles, then the LET items) on the
 * device, in the second tree slot, packed in the local build's frame as
 * the device state's merged walk packs it (state_merged_walk): the same
 * floats and the same key cube, so the same tree. The local build of this
 * step left the local particles packed in the staging buffer, which is
 * reused where it has room for the items too; else they are packed again
 * (the same values). The key cube is the whole set's, that of the local
 * build (hy_force_cube_for). */
static int merged_build(struct hy_force *f, const struct hy_part *p, struct hy_err *err) {
  const size_t n = p->n, m = f->remote.n, nm = n + m;
  double t0 = hy_wtime();
  const size_t need = hy_size_mul_or_die(nm, 16, "packed positions");
  const int have_local = f->packed_n == n && hy_cl_host_buffer_size(f->cl, HY_CL_HOST_POS) >= need;
  float *pos4 = hy_cl_host_buffer(f->cl, HY_CL_HOST_POS, need, err);
  float *grp = pos4 ? hy_cl_host_buffer(f->cl, HY_CL_HOST_GRP, hy_size_mul_or_die(nm, 8, "item moments"), err) : NULL;
  if (!grp) return -1;
  f->packed_n = 0; /* the staging buffer holds the merged set from here on */
  hy_pool_for(f->pool, 2 * n, 65536, zero_floats_body, grp); /* local particles: no B2, no b_max */
  if (!have_local) { /* the local particles packed again (the same values) */
    double lred[11];
    uint64_t bad = UINT64_MAX; /* checked at the local build */
    hy_force_pack_run(f, p, f->origin, pos4, NULL, lred, &bad);
  }
  double centre[3], half;
  hy_force_merged_cube(f, pos4 + 4 * n, grp + 2 * n, centre, &half);
  return hy_force_build_packed(f, 1, nm, n, pos4, grp, centre, half, hy_wtime() - t0, NULL, 0, err);
}

/* Walk job for the tree a device build left in `slot`, its n particles as
 * sinks, the results back in the order of the particle set it was built
 * from (in the engine's staging memory: *out0, *out1). */
int hy_force_device_tree_job(struct hy_force *f, struct walk_job *j, const struct hy_walk_cfg *wc, int slot, size_t n,
                             float **out0, float **out1, struct hy_err *err) {
  size_t bytes = hy_size_mul_or_die(n, 16, "walk results");
  *out0 = f->dout0 = hy_cl_host_buffer(f->cl, HY_CL_HOST_OUT0, bytes, err);
  if (!*out0) return -1;
  if (wc->mode == HY_WALK_SPLIT) {
    *out1 = f->dout1 = hy_cl_host_buffer(f->cl, HY_CL_HOST_OUT1, bytes, err);
    if (!*out1) return -1;
  }
  hy_force_resident_walk_job(f, j, wc, slot);
  j->a.out0 = *out0;
  j->a.out1 = *out1;
  return 0;
}

/* Merged walk with the local tree built on the device: the tree of local
 * particles and LET items is built on the device as well, in the second
 * tree slot (the items' B2 and b_max enter the cell moments), its local
 * particles are the sinks (hy_cl_build_result.local_sinks; else all its
 * particles, the items' results dropped), each skipping its own node. The
 * local tree stays on the device for the hard steps. */
static int merged_walk_device(struct hy_force *f, const struct hy_part *p, const struct hy_walk_cfg *wc,
                              double *acc0, double *acc1, double *pot, struct hy_err *err) {
  const size_t n = p->n;
  double frame[3];
  memcpy(frame, f->frame, sizeof frame);
  int rc = merged_build(f, p, err);
  float *out0 = NULL, *out1 = NULL;
  struct walk_job *j = &f->job[0];
  if (rc == 0) rc = hy_force_device_tree_job(f, j, wc, 1, f->m_local_sinks ? n : n + f->remote.n, &out0, &out1, err);
  if (rc == 0) {
    hy_worker_submit(f->worker, hy_force_walk_job_run, j);
    rc = hy_force_wait_job(f, j, err);
    f->st.device_busy += hy_worker_take_busy(f->worker);
  }
  hy_force_restore_frame(f, frame);
  if (rc != 0) return -1;
  hy_force_unpack_results(f, n, wc->mode == HY_WALK_SPLIT, out0, out1, NULL, NULL, acc0, acc1, pot);
  return 0;
}

int hy_force_merged_walk(struct hy_force *f, const struct hy_part *p, const struct hy_walk_cfg *wc, double *acc0,
                         double *acc1, double *pot, struct hy_err *err) {
  if (hy_force_exchange_let(f, p, wc->mode, 0, NULL, err) != 0) return -1;
  const size_t n = p->n, m = f->remote.n;
  if (n == 0) return 0;
  if (f->dev_build) return merged_walk_device(f, p, wc, acc0, acc1, pot, err);
  struct hy_part *q = merged_set(f, p);
  if (build_second_tree(f, q, 1, err) != 0) return -1;
  if (f->self_cap < n) {
    hy_free(f->self_node);
    f->self_node = hy_malloc("merged-tree self nodes", n, sizeof(int32_t));
    f->self_cap = n;
  }
  for (size_t j = 0; j < n + m; j++)
    if (q->id[j] < n) f->self_node[q->id[j]] = (int32_t)j;
  hy_force_pack_sinks(f, p);
  f->sinks_packed = 0; /* the 4th words are self nodes now; repacked before other use */
  for (size_t i = 0; i < n; i++) f->sink[4 * i + 3] = int_bits(f->self_node[i]);
  struct walk_job *j = &f->job[1];
  hy_force_second_tree_job(f, j, wc, n, 0, HY_SELF_IN_SINK, f->out0, f->out1);
  hy_worker_submit(f->worker, hy_force_walk_job_run, j);
  if (hy_force_wait_job(f, j, err) != 0) return -1;
  f->st.device_busy += hy_worker_take_busy(f->worker);
  hy_force_unpack_results(f, n, wc->mode == HY_WALK_SPLIT, f->out0, f->out1, NULL, NULL, acc0, acc1, pot);
  return 0;
}
