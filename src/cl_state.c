/* SPDX-License-Identifier: GPL-3.0-or-later
 * cl_state.c: the device-resident particle state (opencl/state.cl) and
 * the presort of its keys for the next tree build; see cl_engine.h. Uses
 * only the core (cl_core.h). Every cl* call is checked. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "alloc.h"
#include "cl_internal.h"
#include "trace.h"
#include "tree.h"

extern const char hy_cl_source_state[];
extern const unsigned long hy_cl_source_state_len;

#define STATE_GROUPS 1024 /* work-groups of the state kernels (grid-stride loops) */
#define PACK_RED 11
#define RED_DOUBLES (STATE_GROUPS * PACK_RED + 3 * HY_TREE_SAMPLE) /* the pack's results and sample */

static int state_kernel(struct hy_cl *cl, const char *name, cl_kernel *k, struct hy_err *err) {
  return hy_cl_kernel(cl, cl->state_prog, name, k, err);
}

static int get_state_kernels(struct hy_cl *cl, struct hy_err *err) {
  if (cl->state_prog) return 0;
  if (!hy_cl_has_fp64(cl))
    return hy_err_set(err, "OpenCL device %s has no double precision (cl_khr_fp64): the particle state cannot "
                           "stay on the device", cl->name);
  if (hy_cl_build_kernels(cl, err) != 0) return -1; /* sets the work-group size */
  char defs[64];
  snprintf(defs, sizeof defs, "-D HY_WG=%zu", cl->build_wg);
  if (hy_cl_build_program(cl, "state.cl", hy_cl_source_state, defs, &cl->state_prog, err) != 0) return -1;
  if (state_kernel(cl, "hy_st_axpy", &cl->k_axpy, err) || state_kernel(cl, "hy_st_pack", &cl->k_pack, err) ||
      state_kernel(cl, "hy_st_unpack", &cl->k_unpack, err) || state_kernel(cl, "hy_st_finite", &cl->k_finite, err) ||
      state_kernel(cl, "hy_st_owner", &cl->k_owner, err) || state_kernel(cl, "hy_st_flag", &cl->k_flag, err) ||
      state_kernel(cl, "hy_st_list", &cl->k_list, err) || state_kernel(cl, "hy_st_gather", &cl->k_gather_state, err) ||
      state_kernel(cl, "hy_st_move", &cl->k_move, err) || state_kernel(cl, "hy_st_keys", &cl->k_st_keys, err) ||
      state_kernel(cl, "hy_st_keys_fix", &cl->k_st_keys_fix, err) ||
      state_kernel(cl, "hy_st_energy", &cl->k_energy, err) || state_kernel(cl, "hy_st_scales", &cl->k_scales, err))
    return -1;
  return 0;
}

void hy_cl_state_free(struct hy_cl *cl) {
  hy_cl_presort_drop(cl, NULL); /* a queued presort may still read the state */
  if (cl->gather_ev) { /* a gather begun and never ended (a failed step): its read into staging memory first */
    clWaitForEvents(1, &cl->gather_ev);
    clReleaseEvent(cl->gather_ev);
    cl->gather_ev = NULL;
  }
  cl_kernel ks[] = {cl->k_axpy, cl->k_pack, cl->k_unpack, cl->k_finite, cl->k_owner,
                    cl->k_flag, cl->k_list, cl->k_gather_state, cl->k_move, cl->k_st_keys,
                    cl->k_st_keys_fix, cl->k_energy, cl->k_scales};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    if (ks[i]) clReleaseKernel(ks[i]);
  if (cl->state_prog) clReleaseProgram(cl->state_prog);
  struct cl_buf *bs[] = {&cl->s_pos,  &cl->s_vel,   &cl->s_mass,  &cl->s_accw,   &cl->s_acc,
                         &cl->s_pot,  &cl->s_red,   &cl->s_dest,  &cl->s_flag,   &cl->s_idx,
                         &cl->s_rank, &cl->s_out,   &cl->s_bounds, &cl->s_count, &cl->s_patch_i, &cl->s_gidx,
                         &cl->pkey,   &cl->pidx,    &cl->pfix,    &cl->s_sc,   &cl->s_scmax};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) hy_cl_buf_release(bs[i]);
}

static int set_arg(struct hy_cl *cl, cl_kernel k, cl_uint i, size_t size, const void *v, const char *name,
                   struct hy_err *err) {
  cl_int e = clSetKernelArg(k, i, size, v);
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: clSetKernelArg(%s, %u) failed on %s: %s", name, (unsigned)i, cl->name,
                      hy_cl_errname(e));
  return 0;
}

/* Kernel k over the state kernels' fixed grid (STATE_GROUPS work-groups
 * that stride over the particles) on queue q, not waited for. */
static cl_int grid_enqueue(struct hy_cl *cl, cl_command_queue q, cl_kernel k, cl_event *ev) {
  size_t local = cl->build_wg, global = STATE_GROUPS * local;
  return clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, ev);
}

/* Launch k on the fixed grid; wait for it; its kernel time into *seconds. */
static int run_grid(struct hy_cl *cl, cl_kernel k, const char *name, double *seconds, struct hy_err *err) {
  cl_event ev = NULL;
  cl_int e = grid_enqueue(cl, cl->q, k, seconds ? &ev : NULL);
  if (e == CL_SUCCESS) e = clFinish(cl->q);
  if (seconds) *seconds += e == CL_SUCCESS ? hy_cl_event_seconds(ev) : 0.0;
  if (ev) clReleaseEvent(ev);
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: %s failed on %s: %s (a kernel fault or too little device memory)", name,
                      cl->name, hy_cl_errname(e));
  return 0;
}

static int need_state(struct hy_cl *cl, const char *what, struct hy_err *err) {
  if (cl->state_n == 0) return hy_err_set(err, "internal error: %s without a particle state on the device", what);
  return 0;
}

int hy_cl_state_upload(struct hy_cl *cl, const double *pos, const double *vel, const double *mass,
                       const double *acc_w, const double *acc, size_t n, struct hy_err *err) {
  if (n == 0 || n > (size_t)UINT32_MAX / 3)
    return hy_err_set(err, "internal error: device particle state of %zu particles", n);
  if (get_state_kernels(cl, err) != 0) return -1;
  size_t b3 = hy_size_mul_or_die(n, 3 * sizeof(double), "particle state");
  if (hy_cl_ensure_buf(cl, &cl->s_pos, b3, "positions (double)", err) ||
      hy_cl_ensure_buf(cl, &cl->s_vel, b3, "velocities (double)", err) ||
      hy_cl_ensure_buf(cl, &cl->s_mass, n * sizeof(double), "masses (double)", err) ||
      hy_cl_ensure_buf(cl, &cl->s_accw, b3, "kick accelerations (double)", err) ||
      hy_cl_ensure_buf(cl, &cl->s_red, RED_DOUBLES * sizeof(double), "reductions", err) ||
      (acc && hy_cl_ensure_buf(cl, &cl->s_acc, b3, "accelerations (double)", err)))
    return -1;
  cl->state_n = 0;
  cl->s_sc_n = 0;
  cl->appended = 0;
  cl->appended_copy = 0;
  cl->presort_n = 0; /* new positions: the kept particles' keys are not theirs */
  cl_int e;
  if ((e = clEnqueueWriteBuffer(cl->q, cl->s_pos.mem, CL_FALSE, 0, b3, pos, 0, NULL, NULL)) != CL_SUCCESS ||
      (e = clEnqueueWriteBuffer(cl->q, cl->s_vel.mem, CL_FALSE, 0, b3, vel, 0, NULL, NULL)) != CL_SUCCESS ||
      (e = clEnqueueWriteBuffer(cl->q, cl->s_mass.mem, CL_FALSE, 0, n * sizeof(double), mass, 0, NULL, NULL)) !=
          CL_SUCCESS ||
      (acc_w && (e = clEnqueueWriteBuffer(cl->q, cl->s_accw.mem, CL_FALSE, 0, b3, acc_w, 0, NULL, NULL)) !=
                    CL_SUCCESS) ||
      (acc && (e = clEnqueueWriteBuffer(cl->q, cl->s_acc.mem, CL_FALSE, 0, b3, acc, 0, NULL, NULL)) != CL_SUCCESS) ||
      (e = clFinish(cl->q)) != CL_SUCCESS) {
    clFinish(cl->q);
    return hy_err_set(err, "OpenCL: uploading the particle state failed on %s: %s", cl->name, hy_cl_errname(e));
  }
  cl->state_n = n;
  return 0;
}

int hy_cl_state_download(struct hy_cl *cl, double *pos, double *vel, double *acc_w, double *acc, double *pot,
                         size_t n, double *seconds, struct hy_err *err) {
  if (need_state(cl, "download", err)) return -1;
  if (n != cl->state_n) return hy_err_set(err, "internal error: state of %zu particles, %zu asked", cl->state_n, n);
  double t0 = hy_wtime();
  size_t b3 = n * 3 * sizeof(double);
  struct {
    cl_mem mem;
    size_t bytes;
    void *dst;
  } part[] = {{cl->s_pos.mem, b3, pos},   {cl->s_vel.mem, b3, vel}, {cl->s_accw.mem, b3, acc_w},
              {cl->s_acc.mem, b3, acc},   {cl->s_pot.mem, n * sizeof(double), pot}};
  cl_int e = CL_SUCCESS;
  for (size_t k = 0; k < sizeof part / sizeof part[0] && e == CL_SUCCESS; k++)
    if (part[k].dst) e = clEnqueueReadBuffer(cl->q, part[k].mem, CL_FALSE, 0, part[k].bytes, part[k].dst, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clFinish(cl->q);
  if (e != CL_SUCCESS) {
    clFinish(cl->q);
    return hy_err_set(err, "OpenCL: downloading the particle state failed on %s: %s", cl->name, hy_cl_errname(e));
  }
  if (seconds) *seconds += hy_wtime() - t0;
  return 0;
}

int hy_cl_state_step(struct hy_cl *cl, int kick, double dt, struct hy_err *err) {
  if (need_state(cl, kick ? "kick" : "drift", err)) return -1;
  cl_uint n3 = (cl_uint)(3 * cl->state_n);
  cl_mem x = kick ? cl->s_vel.mem : cl->s_pos.mem, v = kick ? cl->s_accw.mem : cl->s_vel.mem;
  if (set_arg(cl, cl->k_axpy, 0, sizeof x, &x, "hy_st_axpy", err) ||
      set_arg(cl, cl->k_axpy, 1, sizeof v, &v, "hy_st_axpy", err) ||
      set_arg(cl, cl->k_axpy, 2, sizeof n3, &n3, "hy_st_axpy", err) ||
      set_arg(cl, cl->k_axpy, 3, sizeof dt, &dt, "hy_st_axpy", err))
    return -1;
  return run_grid(cl, cl->k_axpy, kick ? "the device kick" : "the device drift", NULL, err);
}

/* hy_cl_state_pack, or (write 0) its reductions only. */
static int state_pack(struct hy_cl *cl, const double origin[3], int write, double red[11], size_t s, double *sample,
                      double *seconds, struct hy_err *err) {
  if (need_state(cl, "pack", err)) return -1;
  size_t n = cl->state_n;
  if (write) { /* the packed positions that LET items were appended to */
    cl->appended = 0;
    cl->appended_copy = 0;
  }
  if (s > n || s > HY_TREE_SAMPLE)
    return hy_err_set(err, "internal error: a sample of %zu of %zu positions", s, n);
  cl_uint us = (cl_uint)s;
  if (write &&
      hy_cl_ensure_buf(cl, &cl->tree[0].pos, hy_size_mul_or_die(n, 16, "positions"), "particle positions", err))
    return -1;
  const cl_mem out = write ? cl->tree[0].pos.mem : cl->s_pos.mem; /* without write: not written */
  cl_uint un = (cl_uint)n;
  const char *nm = "hy_st_pack";
  if (set_arg(cl, cl->k_pack, 0, sizeof(cl_mem), &cl->s_pos.mem, nm, err) ||
      set_arg(cl, cl->k_pack, 1, sizeof(cl_mem), &cl->s_mass.mem, nm, err) ||
      set_arg(cl, cl->k_pack, 2, sizeof un, &un, nm, err) ||
      set_arg(cl, cl->k_pack, 3, sizeof(double), &origin[0], nm, err) ||
      set_arg(cl, cl->k_pack, 4, sizeof(double), &origin[1], nm, err) ||
      set_arg(cl, cl->k_pack, 5, sizeof(double), &origin[2], nm, err) ||
      set_arg(cl, cl->k_pack, 6, sizeof(cl_mem), &out, nm, err) ||
      set_arg(cl, cl->k_pack, 7, sizeof(cl_mem), &cl->s_red.mem, nm, err) ||
      set_arg(cl, cl->k_pack, 8, sizeof us, &us, nm, err) || set_arg(cl, cl->k_pack, 9, sizeof write, &write, nm, err) ||
      run_grid(cl, cl->k_pack, "packing the positions on the device", seconds, err))
    return -1;
  double part[RED_DOUBLES]; /* one read for the reductions and the sample */
  cl_int e = clEnqueueReadBuffer(cl->q, cl->s_red.mem, CL_TRUE, 0, (STATE_GROUPS * PACK_RED + 3 * s) * sizeof(double),
                                 part, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: reading the pack reductions failed on %s: %s", cl->name, hy_cl_errname(e));
  if (s) memcpy(sample, part + STATE_GROUPS * PACK_RED, 3 * s * sizeof(double));
  for (int d = 0; d < 3; d++) {
    red[d] = INFINITY;
    red[3 + d] = -INFINITY;
    red[7 + d] = 0.0;
  }
  red[6] = 0.0;
  red[10] = -1.0;
  for (int g = 0; g < STATE_GROUPS; g++) {
    const double *q = part + PACK_RED * g;
    for (int d = 0; d < 3; d++) {
      red[d] = fmin(red[d], q[d]);
      red[3 + d] = fmax(red[3 + d], q[3 + d]);
      red[7 + d] += q[7 + d];
    }
    red[6] += q[6];
    if (q[10] >= 0.0 && (red[10] < 0.0 || q[10] < red[10])) red[10] = q[10];
  }
  return 0;
}

int hy_cl_state_pack(struct hy_cl *cl, const double origin[3], double red[11], size_t s, double *sample,
                     double *seconds, struct hy_err *err) {
  return state_pack(cl, origin, 1, red, s, sample, seconds, err);
}

int hy_cl_state_ranges(struct hy_cl *cl, double red[11], size_t s, double *sample, double *seconds,
                       struct hy_err *err) {
  const double zero[3] = {0.0, 0.0, 0.0};
  return state_pack(cl, zero, 0, red, s, sample, seconds, err);
}

int hy_cl_state_unpack(struct hy_cl *cl, double G, double n_ratio, int split, int want_pot, double acc_scale,
                       double *seconds, struct hy_err *err) {
  if (need_state(cl, "unpack", err)) return -1;
  size_t n = cl->state_n;
  /* the last unsort walk: the state's tree (slot 0), or the merged tree of
   * its particles and the LET items behind them (slot 1) */
  if (cl->unsorted_n != n + (cl->unsorted_slot == 1 ? cl->appended : 0))
    return hy_err_set(err, "internal error: unpacking walk results of another particle set");
  if (((split || acc_scale > 0) && hy_cl_ensure_buf(cl, &cl->s_acc, n * 3 * sizeof(double), "accelerations (double)",
                                                    err)) ||
      (want_pot && hy_cl_ensure_buf(cl, &cl->s_pot, n * sizeof(double), "potentials (double)", err)))
    return -1;
  cl_uint un = (cl_uint)n;
  cl_int sp = split ? 1 : 0, wp = want_pot ? 1 : 0;
  /* unused outputs get a valid buffer */
  cl_mem o1 = split ? cl->uout1.mem : cl->uout0.mem;
  cl_mem acc = split || acc_scale > 0 ? cl->s_acc.mem : cl->s_accw.mem;
  if (split || acc_scale > 0) cl->s_sc_n = 0; /* new accelerations: the sink scales are made again */
  cl_mem pot = want_pot ? cl->s_pot.mem : cl->s_accw.mem;
  const char *nm = "hy_st_unpack";
  if (set_arg(cl, cl->k_unpack, 0, sizeof(cl_mem), &cl->uout0.mem, nm, err) ||
      set_arg(cl, cl->k_unpack, 1, sizeof(cl_mem), &o1, nm, err) ||
      set_arg(cl, cl->k_unpack, 2, sizeof un, &un, nm, err) ||
      set_arg(cl, cl->k_unpack, 3, sizeof G, &G, nm, err) ||
      set_arg(cl, cl->k_unpack, 4, sizeof n_ratio, &n_ratio, nm, err) ||
      set_arg(cl, cl->k_unpack, 5, sizeof sp, &sp, nm, err) || set_arg(cl, cl->k_unpack, 6, sizeof wp, &wp, nm, err) ||
      set_arg(cl, cl->k_unpack, 7, sizeof(cl_mem), &cl->s_accw.mem, nm, err) ||
      set_arg(cl, cl->k_unpack, 8, sizeof(cl_mem), &acc, nm, err) ||
      set_arg(cl, cl->k_unpack, 9, sizeof(cl_mem), &pot, nm, err) ||
      set_arg(cl, cl->k_unpack, 10, sizeof acc_scale, &acc_scale, nm, err))
    return -1;
  return run_grid(cl, cl->k_unpack, "unpacking the walk results on the device", seconds, err);
}

int hy_cl_state_scales(struct hy_cl *cl, double alpha_g, double aerr_g, int capped, double *largest,
                       struct hy_err *err) {
  if (need_state(cl, "sink scales", err)) return -1;
  const size_t n = cl->state_n;
  if (cl->s_sc_n == n) { /* the accelerations are those they were made from (the hard steps' builds) */
    *largest = cl->s_sc_max;
    return 0;
  }
  if (cl->s_acc.size < n * 3 * sizeof(double))
    return hy_err_set(err, "internal error: sink scales without the state's accelerations");
  if (hy_cl_ensure_buf(cl, &cl->s_sc, hy_size_mul_or_die(n, sizeof(float), "sink scales"), "sink scales", err) ||
      hy_cl_ensure_buf(cl, &cl->s_scmax, STATE_GROUPS * sizeof(float), "sink scales", err))
    return -1;
  cl_uint un = (cl_uint)n;
  const cl_int cap = capped != 0;
  const char *nm = "hy_st_scales";
  if (set_arg(cl, cl->k_scales, 0, sizeof(cl_mem), &cl->s_acc.mem, nm, err) ||
      set_arg(cl, cl->k_scales, 1, sizeof un, &un, nm, err) ||
      set_arg(cl, cl->k_scales, 2, sizeof alpha_g, &alpha_g, nm, err) ||
      set_arg(cl, cl->k_scales, 3, sizeof aerr_g, &aerr_g, nm, err) ||
      set_arg(cl, cl->k_scales, 4, sizeof cap, &cap, nm, err) ||
      set_arg(cl, cl->k_scales, 5, sizeof(cl_mem), &cl->s_sc.mem, nm, err) ||
      set_arg(cl, cl->k_scales, 6, sizeof(cl_mem), &cl->s_scmax.mem, nm, err) ||
      run_grid(cl, cl->k_scales, "the sink scales on the device", NULL, err))
    return -1;
  float gm[STATE_GROUPS];
  const cl_int e = clEnqueueReadBuffer(cl->q, cl->s_scmax.mem, CL_TRUE, 0, sizeof gm, gm, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: reading the largest sink scale failed on %s: %s", cl->name, hy_cl_errname(e));
  double m = 0.0;
  for (size_t g = 0; g < STATE_GROUPS; g++) m = gm[g] > m ? gm[g] : m;
  *largest = cl->s_sc_max = m;
  cl->s_sc_n = n;
  return 0;
}

int hy_cl_state_append_begin(struct hy_cl *cl, size_t m, struct hy_err *err) {
  if (need_state(cl, "append", err)) return -1;
  const size_t nm = cl->state_n + m;
  struct cl_tree *M = &cl->tree[1]; /* the merged tree's slot; the state's packing stays in slot 0 */
  cl->appended = 0; /* until hy_cl_state_append_end */
  if (hy_cl_check_int(nm, "particles and LET items", err) ||
      hy_cl_ensure_buf(cl, &M->pos, hy_size_mul_or_die(nm, 16, "positions"), "merged positions", err) ||
      hy_cl_ensure_buf(cl, &M->grp, hy_size_mul_or_die(nm, 8, "particle groups"), "LET item moments", err))
    return -1;
  return 0;
}

int hy_cl_state_append_part(struct hy_cl *cl, const float *items, const float *grp, size_t first, size_t count,
                            struct hy_err *err) {
  if (count == 0) return 0;
  const size_t at = cl->state_n + first;
  struct cl_tree *M = &cl->tree[1];
  if (hy_size_mul_or_die(at + count, 16, "positions") > M->pos.size)
    return hy_err_set(err, "internal error: LET items %zu .. %zu beyond the room made for them", first, first + count);
  /* the state's positions in front of them: copied by the merged build
   * when it needs them (hy_cl_state_append_copy) */
  cl_int e = clEnqueueWriteBuffer(cl->q, M->pos.mem, CL_FALSE, at * 16, count * 16, items + 4 * first, 0, NULL, NULL);
  if (e == CL_SUCCESS)
    e = clEnqueueWriteBuffer(cl->q, M->grp.mem, CL_FALSE, at * 8, count * 8, grp + 2 * first, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clFlush(cl->q);
  if (e != CL_SUCCESS) {
    clFinish(cl->q);
    return hy_err_set(err, "OpenCL: uploading %zu LET items failed on %s: %s", count, cl->name, hy_cl_errname(e));
  }
  return 0;
}

int hy_cl_state_append_end(struct hy_cl *cl, size_t m, double *seconds, struct hy_err *err) {
  double t0 = hy_wtime();
  cl_int e = clFinish(cl->q);
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: uploading %zu LET items failed on %s: %s", m, cl->name, hy_cl_errname(e));
  cl->appended = m;
  cl->appended_copy = 1;
  if (seconds) *seconds += hy_wtime() - t0;
  return 0;
}

int hy_cl_state_append_copy(struct hy_cl *cl, struct hy_err *err) {
  if (!cl->appended_copy) return 0;
  struct cl_tree *M = &cl->tree[1];
  const size_t n = cl->state_n;
  const cl_float zero = 0.0f;
  cl_int e = clEnqueueCopyBuffer(cl->q, cl->tree[0].pos.mem, M->pos.mem, 0, 0, n * 16, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clEnqueueFillBuffer(cl->q, M->grp.mem, &zero, sizeof zero, 0, n * 8, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    clFinish(cl->q);
    return hy_err_set(err, "OpenCL: copying %zu positions in front of the LET items failed on %s: %s", n, cl->name,
                      hy_cl_errname(e));
  }
  cl->appended_copy = 0;
  return 0;
}

/* The keys of the state's positions first .. first + n - 1 (hy_st_keys:
 * double, absolute) into key, idx. */
int hy_cl_state_keys(struct hy_cl *cl, size_t first, size_t n, const double lo[3], double scale, struct cl_buf *key,
                     struct cl_buf *idx, struct cl_evlist *ev, int phase, struct hy_err *err) {
  if (!cl->k_st_keys) return hy_err_set(err, "internal error: keys of a device state without its kernels");
  const cl_uint uf = (cl_uint)first, un = (cl_uint)n;
  return hy_cl_set_args(cl, cl->k_st_keys, "hy_st_keys", err, M(cl->s_pos), V(uf), V(un), V(lo[0]), V(lo[1]),
                        V(lo[2]), V(scale), M(*key), M(*idx), END) ||
                 hy_cl_launch(cl, cl->k_st_keys, "hy_st_keys", n, hy_cl_ev_new(ev, phase), err)
             ? -1
             : 0;
}

void hy_cl_presort_drop(struct hy_cl *cl, double *seconds) {
  struct cl_evlist *l = cl->presort_ev;
  if (!l) return;
  clFinish(l->q);
  double t[PH_N] = {0};
  hy_cl_ev_finish(l, seconds ? t : NULL);
  if (seconds) *seconds += t[PH_SORT];
  hy_free(l);
  cl->presort_ev = NULL;
}

int hy_cl_presort_wait(struct hy_cl *cl) {
  struct cl_evlist *l = cl->presort_ev;
  if (!l || l->n == 0 || l->open) return 0;
  cl_event end = l->ev[2 * (l->n - 1) + 1];
  if (end) (void)clWaitForEvents(1, &end); /* a failure shows in the caller's next clFinish */
  return 1;
}

/* The presort's keys and their sort, on the queue in use (hy_cl_queue):
 * the keys of the state's first n positions into (pkey, pidx), those of
 * the m holes from their sources' positions (pfix, uploaded before), and
 * the sort; its events in a new list (cl->presort_ev), flushed. */
static int presort_enqueue(struct hy_cl *cl, size_t n, size_t m, const double lo[3], double scale,
                           struct hy_err *err) {
  const size_t tile = cl->build_wg * SORT_PER, n_tiles = (n + tile - 1) / tile;
  if (hy_cl_ensure_buf(cl, &cl->pkey, hy_size_mul_or_die(n, 8, "keys"), "presorted keys", err) ||
      hy_cl_ensure_buf(cl, &cl->pidx, hy_size_mul_or_die(n, 4, "keys"), "presorted indices", err) ||
      hy_cl_ensure_buf(cl, &cl->key[1], hy_size_mul_or_die(n, 8, "keys"), "sort keys", err) ||
      hy_cl_ensure_buf(cl, &cl->idx_tmp, hy_size_mul_or_die(n, 4, "keys"), "sort indices", err) ||
      hy_cl_ensure_buf(cl, hy_cl_sort_hist(cl), hy_size_mul_or_die(n_tiles, RADIX * 4, "sort histogram"),
                       "sort histogram", err))
    return -1;
  struct cl_evlist *ev = hy_calloc("OpenCL events", 1, sizeof *ev);
  ev->q = hy_cl_queue(cl);
  cl->presort_ev = ev;
  struct cl_buf *kb[2] = {&cl->pkey, &cl->key[1]}, *ib[2] = {&cl->pidx, &cl->idx_tmp};
  const cl_uint um = (cl_uint)m;
  if (hy_cl_state_keys(cl, 0, n, lo, scale, &cl->pkey, &cl->pidx, ev, PH_SORT, err) != 0 ||
      (m && (hy_cl_set_args(cl, cl->k_st_keys_fix, "hy_st_keys_fix", err, M(cl->s_pos), M(cl->pfix), V(um), V(lo[0]),
                            V(lo[1]), V(lo[2]), V(scale), M(cl->pkey), END) ||
             hy_cl_launch(cl, cl->k_st_keys_fix, "hy_st_keys_fix", m, hy_cl_ev_new(ev, PH_SORT), err))) ||
      hy_cl_sort_pairs_ev(cl, kb, ib, n, 3 * HY_KEY_BITS, ev, PH_SORT, err) != 0)
    return -1;
  hy_cl_ev_close(ev);
  const cl_int e = clFlush(ev->q); /* started now, beside the host's work */
  if (e != CL_SUCCESS) return hy_err_set(err, "OpenCL: clFlush failed on %s: %s", cl->name, hy_cl_errname(e));
  return 0;
}

int hy_cl_state_presort(struct hy_cl *cl, size_t n_keep, const uint32_t *hole, const uint32_t *src, size_t m,
                        const double lo[3], double scale, struct hy_err *err) {
  hy_cl_presort_drop(cl, NULL);
  cl->presort_n = 0;
  if (n_keep < 1 || n_keep > cl->state_n || m > n_keep)
    return hy_err_set(err, "internal error: presort of %zu of %zu particles (%zu moves)", n_keep, cl->state_n, m);
  if (hy_cl_build_kernels(cl, err) != 0 ||
      (m && hy_cl_ensure_buf(cl, &cl->pfix, hy_size_mul_or_die(m, 8, "moves"), "presort moves", err)))
    return -1;
  cl_int e;
  if (m && ((e = clEnqueueWriteBuffer(cl->q, cl->pfix.mem, CL_FALSE, 0, m * 4, hole, 0, NULL, NULL)) != CL_SUCCESS ||
            (e = clEnqueueWriteBuffer(cl->q, cl->pfix.mem, CL_TRUE, m * 4, m * 4, src, 0, NULL, NULL)) != CL_SUCCESS)) {
    clFinish(cl->q);
    return hy_err_set(err, "OpenCL: uploading the moves failed on %s: %s", cl->name, hy_cl_errname(e));
  }
  if (presort_enqueue(cl, n_keep, m, lo, scale, err) != 0) {
    hy_cl_presort_drop(cl, NULL); /* nothing left queued */
    return -1;
  }
  memcpy(cl->presort_lo, lo, sizeof cl->presort_lo);
  cl->presort_scale = scale;
  cl->presort_n = n_keep;
  return 0;
}

int hy_cl_state_patch(struct hy_cl *cl, size_t n_new, size_t n_keep, const double *tail_pos,
                      const double *tail_vel, const double *tail_mass, const uint32_t *hole, const uint32_t *src,
                      size_t m, struct hy_err *err) {
  if (need_state(cl, "patch", err)) return -1;
  if (n_keep > cl->state_n || n_keep > n_new || n_new < 2 || n_new > (size_t)UINT32_MAX / 3 || m > n_keep)
    return hy_err_set(err, "internal error: patching a state of %zu particles to %zu (%zu kept, %zu moved)",
                      cl->state_n, n_new, n_keep, m);
  if (cl->presort_n != n_keep) cl->presort_n = 0; /* the presort's keys are those of the kept particles */
  const size_t b3 = hy_size_mul_or_die(n_new, 3 * sizeof(double), "particle state"), nt = n_new - n_keep;
  /* the total accelerations (the relative criterion's) move with the kept
   * particles; the received ones have none (their first walk takes the
   * absolute criterion's scale) */
  const cl_int with_acc = cl->s_acc.size >= cl->state_n * 24 && cl->s_acc.size > 0;
  cl_int e = CL_SUCCESS;
  /* the moves first: their sources lie beyond the kept count, where the
   * received particles go */
  if (m) {
    if (hy_cl_ensure_buf(cl, &cl->s_patch_i, m * 4, "moved particles", err) ||
        hy_cl_ensure_buf(cl, &cl->s_idx, m * 4, "moved particles", err))
      return -1;
    if ((e = clEnqueueWriteBuffer(cl->q, cl->s_patch_i.mem, CL_FALSE, 0, m * 4, hole, 0, NULL, NULL)) != CL_SUCCESS ||
        (e = clEnqueueWriteBuffer(cl->q, cl->s_idx.mem, CL_FALSE, 0, m * 4, src, 0, NULL, NULL)) != CL_SUCCESS) {
      clFinish(cl->q);
      return hy_err_set(err, "OpenCL: uploading the moved particles' indices failed on %s: %s", cl->name,
                        hy_cl_errname(e));
    }
    const cl_uint um = (cl_uint)m;
    const char *nm = "hy_st_move";
    cl_kernel k = cl->k_move;
    if (set_arg(cl, k, 0, sizeof(cl_mem), &cl->s_patch_i.mem, nm, err) ||
        set_arg(cl, k, 1, sizeof(cl_mem), &cl->s_idx.mem, nm, err) || set_arg(cl, k, 2, sizeof um, &um, nm, err) ||
        set_arg(cl, k, 3, sizeof(cl_mem), &cl->s_pos.mem, nm, err) ||
        set_arg(cl, k, 4, sizeof(cl_mem), &cl->s_vel.mem, nm, err) ||
        set_arg(cl, k, 5, sizeof(cl_mem), &cl->s_mass.mem, nm, err) ||
        set_arg(cl, k, 6, sizeof(cl_mem), with_acc ? &cl->s_acc.mem : &cl->s_mass.mem, nm, err) ||
        set_arg(cl, k, 7, sizeof with_acc, &with_acc, nm, err) || run_grid(cl, k, "moving the kept particles", NULL, err))
      return -1;
  }
  if (hy_cl_ensure_buf_keep(cl, &cl->s_pos, b3, n_keep * 24, "positions (double)", err) ||
      hy_cl_ensure_buf_keep(cl, &cl->s_vel, b3, n_keep * 24, "velocities (double)", err) ||
      hy_cl_ensure_buf_keep(cl, &cl->s_mass, n_new * sizeof(double), n_keep * 8, "masses (double)", err) ||
      hy_cl_ensure_buf(cl, &cl->s_accw, b3, "kick accelerations (double)", err) ||
      (with_acc && hy_cl_ensure_buf_keep(cl, &cl->s_acc, b3, n_keep * 24, "accelerations (double)", err)))
    return -1;
  cl->state_n = 0;
  cl->s_sc_n = 0;
  cl->appended = 0;
  cl->appended_copy = 0;
  if (nt && with_acc) {
    const cl_double zero = 0.0;
    e = clEnqueueFillBuffer(cl->q, cl->s_acc.mem, &zero, sizeof zero, n_keep * 24, nt * 24, 0, NULL, NULL);
  }
  if (nt && e == CL_SUCCESS) {
    if ((e = clEnqueueWriteBuffer(cl->q, cl->s_pos.mem, CL_FALSE, n_keep * 24, nt * 24, tail_pos, 0, NULL, NULL)) ==
            CL_SUCCESS &&
        (e = clEnqueueWriteBuffer(cl->q, cl->s_vel.mem, CL_FALSE, n_keep * 24, nt * 24, tail_vel, 0, NULL, NULL)) ==
            CL_SUCCESS)
      e = clEnqueueWriteBuffer(cl->q, cl->s_mass.mem, CL_FALSE, n_keep * 8, nt * 8, tail_mass, 0, NULL, NULL);
  }
  if (e == CL_SUCCESS) e = clFinish(cl->q);
  if (e != CL_SUCCESS) {
    clFinish(cl->q);
    return hy_err_set(err, "OpenCL: uploading the decomposed particles failed on %s: %s", cl->name,
                      hy_cl_errname(e));
  }
  cl->state_n = n_new;
  return 0;
}

/* The owners kernel on hy_cl_queue (the counts cleared first), not waited
 * for: the boundaries are copied to the device from `bounds`, which must
 * stay as they are until the queue has run the copy. */
static int owners_enqueue(struct hy_cl *cl, const double *bounds, size_t n_bounds, const int grid[3],
                          struct hy_err *err) {
  if (need_state(cl, "decomposition", err)) return -1;
  const size_t P = (size_t)grid[0] * (size_t)grid[1] * (size_t)grid[2];
  cl_ulong lmem = 0;
  CL_CHECK(clGetDeviceInfo(cl->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof lmem, &lmem, NULL),
           "clGetDeviceInfo(CL_DEVICE_LOCAL_MEM_SIZE)");
  if (P * 4 > lmem / 2)
    return hy_err_set(err, "OpenCL device %s: %zu ranks need %zu bytes of local memory for the decomposition's "
                           "counts, more than half of its %llu; use ParticleState host",
                      cl->name, P, P * 4, (unsigned long long)lmem);
  const size_t n = cl->state_n;
  if (hy_cl_ensure_buf(cl, &cl->s_dest, hy_size_mul_or_die(n, 4, "owners"), "owners", err) ||
      hy_cl_ensure_buf(cl, &cl->s_bounds, hy_size_mul_or_die(n_bounds, 8, "boundaries"), "boundaries", err) ||
      hy_cl_ensure_buf(cl, &cl->s_count, hy_size_mul_or_die(P, 4, "owner counts"), "owner counts", err))
    return -1;
  const cl_uint zero = 0;
  cl_command_queue q = hy_cl_queue(cl);
  cl_int e;
  if ((e = clEnqueueWriteBuffer(q, cl->s_bounds.mem, CL_FALSE, 0, n_bounds * 8, bounds, 0, NULL, NULL)) !=
          CL_SUCCESS ||
      (e = clEnqueueFillBuffer(q, cl->s_count.mem, &zero, sizeof zero, 0, P * 4, 0, NULL, NULL)) != CL_SUCCESS) {
    clFinish(q);
    return hy_err_set(err, "OpenCL: uploading the decomposition's boundaries failed on %s: %s", cl->name,
                      hy_cl_errname(e));
  }
  const cl_uint un = (cl_uint)n, up = (cl_uint)P;
  const cl_int px = grid[0], py = grid[1], pz = grid[2];
  const char *nm = "hy_st_owner";
  cl_kernel k = cl->k_owner;
  if (set_arg(cl, k, 0, sizeof(cl_mem), &cl->s_pos.mem, nm, err) || set_arg(cl, k, 1, sizeof un, &un, nm, err) ||
      set_arg(cl, k, 2, sizeof(cl_mem), &cl->s_bounds.mem, nm, err) || set_arg(cl, k, 3, sizeof px, &px, nm, err) ||
      set_arg(cl, k, 4, sizeof py, &py, nm, err) || set_arg(cl, k, 5, sizeof pz, &pz, nm, err) ||
      set_arg(cl, k, 6, sizeof(cl_mem), &cl->s_dest.mem, nm, err) ||
      set_arg(cl, k, 7, sizeof(cl_mem), &cl->s_count.mem, nm, err) || set_arg(cl, k, 8, sizeof up, &up, nm, err) ||
      set_arg(cl, k, 9, P * 4, NULL, nm, err))
    return -1;
  if ((e = grid_enqueue(cl, q, k, NULL)) != CL_SUCCESS) {
    clFinish(q);
    return hy_err_set(err, "OpenCL: the decomposition's owners failed on %s: %s", cl->name, hy_cl_errname(e));
  }
  return 0;
}

int hy_cl_state_owners(struct hy_cl *cl, const double *bounds, size_t n_bounds, const int grid[3], uint64_t *count,
                       struct hy_err *err) {
  if (owners_enqueue(cl, bounds, n_bounds, grid, err) != 0) return -1;
  const size_t P = (size_t)grid[0] * (size_t)grid[1] * (size_t)grid[2];
  uint32_t *c = hy_malloc("owner counts", P, sizeof(uint32_t));
  cl_int e = clEnqueueReadBuffer(cl->q, cl->s_count.mem, CL_TRUE, 0, P * 4, c, 0, NULL, NULL);
  for (size_t r = 0; r < P; r++) count[r] = c[r];
  hy_free(c);
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: the decomposition's owners failed on %s: %s (a kernel fault?)", cl->name,
                      hy_cl_errname(e));
  return 0;
}

/* The flags of `mode` into *flag and their exclusive scan, on hy_cl_queue,
 * not waited for. */
static int flags_enqueue(struct hy_cl *cl, int mode, unsigned me, size_t n_keep, struct cl_buf *flag,
                         struct hy_err *err) {
  const size_t n = cl->state_n;
  if (cl->s_dest.size < n * 4) return hy_err_set(err, "internal error: decomposition lists without owners");
  if (hy_cl_ensure_buf(cl, flag, hy_size_mul_or_die(n + 1, 4, "flags"), "decomposition flags", err)) return -1;
  const cl_uint un = (cl_uint)n, ume = (cl_uint)me, uk = (cl_uint)n_keep;
  const cl_int md = mode;
  const char *nf = "hy_st_flag";
  if (set_arg(cl, cl->k_flag, 0, sizeof(cl_mem), &cl->s_dest.mem, nf, err) ||
      set_arg(cl, cl->k_flag, 1, sizeof un, &un, nf, err) || set_arg(cl, cl->k_flag, 2, sizeof ume, &ume, nf, err) ||
      set_arg(cl, cl->k_flag, 3, sizeof uk, &uk, nf, err) || set_arg(cl, cl->k_flag, 4, sizeof md, &md, nf, err) ||
      set_arg(cl, cl->k_flag, 5, sizeof(cl_mem), &flag->mem, nf, err))
    return -1;
  if (hy_cl_launch(cl, cl->k_flag, nf, n + 1, NULL, err) != 0) return -1;
  return hy_cl_scan(cl, flag->mem, n + 1, err);
}

/* After flags_enqueue: the list kernel into idx (and, mode 0, s_rank),
 * each of room for at least the list, on hy_cl_queue, not waited for. */
static int list_enqueue(struct hy_cl *cl, int mode, unsigned me, size_t n_keep, struct cl_buf *flag,
                        struct cl_buf *idx, struct hy_err *err) {
  const size_t n = cl->state_n;
  const cl_uint un = (cl_uint)n, ume = (cl_uint)me, uk = (cl_uint)n_keep;
  const cl_int md = mode;
  const char *nl = "hy_st_list";
  if (set_arg(cl, cl->k_list, 0, sizeof(cl_mem), &cl->s_dest.mem, nl, err) ||
      set_arg(cl, cl->k_list, 1, sizeof(cl_mem), &flag->mem, nl, err) ||
      set_arg(cl, cl->k_list, 2, sizeof un, &un, nl, err) || set_arg(cl, cl->k_list, 3, sizeof ume, &ume, nl, err) ||
      set_arg(cl, cl->k_list, 4, sizeof uk, &uk, nl, err) || set_arg(cl, cl->k_list, 5, sizeof md, &md, nl, err) ||
      set_arg(cl, cl->k_list, 6, sizeof(cl_mem), &idx->mem, nl, err) ||
      set_arg(cl, cl->k_list, 7, sizeof(cl_mem), &cl->s_rank.mem, nl, err))
    return -1;
  return hy_cl_launch(cl, cl->k_list, nl, n, NULL, err);
}

/* Read list idx_buf (total entries; mode 0 with the ranks of s_rank) into
 * the host buffer of `mode`, on the first queue, waited for. */
static int list_read(struct hy_cl *cl, int mode, const struct cl_buf *idx_buf, size_t total, uint32_t **idx,
                     uint32_t **rank, struct hy_err *err) {
  uint32_t *h = hy_cl_host_buffer(cl, mode == 0 ? HY_CL_HOST_DD0 : HY_CL_HOST_DD1,
                                  hy_size_mul_or_die(total + 1, 8, "decomposition lists"), err);
  if (!h) return -1;
  *idx = h;
  *rank = h + total;
  if (total == 0) return 0;
  cl_int e;
  if ((e = clEnqueueReadBuffer(cl->q, idx_buf->mem, CL_FALSE, 0, total * 4, *idx, 0, NULL, NULL)) != CL_SUCCESS ||
      (mode == 0 &&
       (e = clEnqueueReadBuffer(cl->q, cl->s_rank.mem, CL_FALSE, 0, total * 4, *rank, 0, NULL, NULL)) != CL_SUCCESS) ||
      (e = clFinish(cl->q)) != CL_SUCCESS) {
    clFinish(cl->q);
    return hy_err_set(err, "OpenCL: listing the decomposition's particles failed on %s: %s", cl->name,
                      hy_cl_errname(e));
  }
  return 0;
}

int hy_cl_state_list(struct hy_cl *cl, int mode, unsigned me, size_t n_keep, uint32_t **idx, uint32_t **rank,
                     size_t *m, struct hy_err *err) {
  if (need_state(cl, "decomposition", err)) return -1;
  const size_t n = cl->state_n;
  if (flags_enqueue(cl, mode, me, n_keep, &cl->s_flag, err) != 0) return -1;
  cl_uint total = 0;
  cl_int e;
  if ((e = clEnqueueReadBuffer(cl->q, cl->s_flag.mem, CL_TRUE, n * 4, 4, &total, 0, NULL, NULL)) != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: reading a decomposition count failed on %s: %s", cl->name, hy_cl_errname(e));
  *m = total;
  if (total > 0 &&
      (hy_cl_ensure_buf(cl, &cl->s_idx, (size_t)total * 4, "decomposition lists", err) ||
       hy_cl_ensure_buf(cl, &cl->s_rank, (size_t)total * 4, "decomposition lists", err) ||
       list_enqueue(cl, mode, me, n_keep, &cl->s_flag, &cl->s_idx, err)))
    return -1;
  return list_read(cl, mode, &cl->s_idx, total, idx, rank, err);
}

/* The gather kernel of m particles idx[j] (positions, then velocities when
 * with_vel) into s_out, enqueued behind the queue's earlier commands (the
 * indices uploaded first). */
static int gather_enqueue(struct hy_cl *cl, const uint32_t *idx, size_t m, int with_vel, struct hy_err *err) {
  const double t0 = hy_trace_t();
  for (size_t j = 0; j < m; j++)
    if (idx[j] >= cl->state_n)
      return hy_err_set(err, "internal error: gathering particle %u of %zu", (unsigned)idx[j], cl->state_n);
  const size_t b3 = hy_size_mul_or_die(m, 24, "gathered particles");
  /* the indices through page-locked memory, not waited for: the caller
   * waits for the gather's read, behind this write on the same queue, before
   * the next gather reuses the staging memory */
  uint32_t *stage = hy_cl_host_buffer(cl, HY_CL_HOST_GIDX, m * 4, err);
  if (!stage || hy_cl_ensure_buf(cl, &cl->s_gidx, m * 4, "gathered particles", err) ||
      hy_cl_ensure_buf(cl, &cl->s_out, 2 * b3, "gathered particles", err))
    return -1;
  memcpy(stage, idx, m * 4);
  cl_int e = clEnqueueWriteBuffer(hy_cl_queue(cl), cl->s_gidx.mem, CL_FALSE, 0, m * 4, stage, 0, NULL, NULL);
  if (e != CL_SUCCESS) {
    clFinish(hy_cl_queue(cl));
    return hy_err_set(err, "OpenCL: uploading particle indices failed on %s: %s", cl->name, hy_cl_errname(e));
  }
  hy_trace(HY_TRACE_MAIN, "gather_upload", t0);
  const cl_uint um = (cl_uint)m;
  const cl_int wv = with_vel != 0;
  const char *nm = "hy_st_gather";
  cl_kernel k = cl->k_gather_state;
  cl_mem out = cl->s_out.mem; /* positions, then velocities */
  if (set_arg(cl, k, 0, sizeof(cl_mem), &cl->s_pos.mem, nm, err) ||
      set_arg(cl, k, 1, sizeof(cl_mem), &cl->s_vel.mem, nm, err) ||
      set_arg(cl, k, 2, sizeof(cl_mem), &cl->s_gidx.mem, nm, err) || set_arg(cl, k, 3, sizeof um, &um, nm, err) ||
      set_arg(cl, k, 4, sizeof wv, &wv, nm, err) || set_arg(cl, k, 5, sizeof(cl_mem), &out, nm, err))
    return -1;
  const double tk = hy_trace_t();
  if ((e = grid_enqueue(cl, hy_cl_queue(cl), k, NULL)) != CL_SUCCESS) {
    clFinish(hy_cl_queue(cl));
    return hy_err_set(err, "OpenCL: gathering particles failed on %s: %s", cl->name, hy_cl_errname(e));
  }
  hy_trace(HY_TRACE_MAIN, "gather_kernel", tk);
  return 0;
}

int hy_cl_state_gather(struct hy_cl *cl, const uint32_t *idx, size_t m, double *pos, double *vel,
                       struct hy_err *err) {
  if (need_state(cl, "gather", err)) return -1;
  if (m == 0) return 0;
  if (cl->gather_ev) return hy_err_set(err, "internal error: a gather while another is under way");
  if (gather_enqueue(cl, idx, m, vel != NULL, err) != 0) return -1;
  const size_t b3 = m * 24;
  cl_mem out = cl->s_out.mem;
  cl_int e;
  if ((e = clEnqueueReadBuffer(hy_cl_queue(cl), out, CL_FALSE, 0, b3, pos, 0, NULL, NULL)) != CL_SUCCESS ||
      (vel && (e = clEnqueueReadBuffer(hy_cl_queue(cl), out, CL_FALSE, b3, b3, vel, 0, NULL, NULL)) != CL_SUCCESS) ||
      (e = clFinish(hy_cl_queue(cl))) != CL_SUCCESS) {
    clFinish(hy_cl_queue(cl));
    return hy_err_set(err, "OpenCL: reading gathered particles failed on %s: %s", cl->name, hy_cl_errname(e));
  }
  return 0;
}

int hy_cl_state_gather_on(struct hy_cl *cl, int side, const uint32_t *idx, size_t m, double *pos, double *vel,
                          struct hy_err *err) {
  if (!side) return hy_cl_state_gather(cl, idx, m, pos, vel, err);
  if (hy_cl_side_queue(cl, err) != 0) return -1;
  hy_cl_on_side = 1;
  const int rc = hy_cl_state_gather(cl, idx, m, pos, vel, err);
  hy_cl_on_side = 0;
  return rc;
}

/* hy_cl_state_gather_begin on the queue of hy_cl_queue. */
static int gather_begin_on(struct hy_cl *cl, const uint32_t *idx, size_t m, int with_vel, struct hy_err *err) {
  const size_t b = hy_size_mul_or_die(m, with_vel ? 48 : 24, "gathered particles");
  /* the staging memory first (a new one is mapped on the engine's map queue) */
  if (!hy_cl_host_buffer(cl, HY_CL_HOST_GATHER, b, err) || gather_enqueue(cl, idx, m, with_vel, err) != 0) return -1;
  cl_command_queue q = hy_cl_queue(cl);
  const double tr = hy_trace_t();
  cl_int e = clEnqueueReadBuffer(q, cl->s_out.mem, CL_FALSE, 0, b, cl->host[HY_CL_HOST_GATHER].ptr, 0, NULL,
                                 &cl->gather_ev);
  if (e == CL_SUCCESS) e = clFlush(q);
  hy_trace(HY_TRACE_MAIN, "gather_read", tr);
  if (e != CL_SUCCESS) {
    clFinish(q);
    if (cl->gather_ev) clReleaseEvent(cl->gather_ev);
    cl->gather_ev = NULL;
    return hy_err_set(err, "OpenCL: reading gathered particles failed on %s: %s", cl->name, hy_cl_errname(e));
  }
  return 0;
}

int hy_cl_state_gather_begin(struct hy_cl *cl, int side, const uint32_t *idx, size_t m, int with_vel,
                             struct hy_err *err) {
  if (need_state(cl, "gather", err)) return -1;
  if (cl->gather_ev) return hy_err_set(err, "internal error: a gather while another is under way");
  cl->gather_m = m;
  if (m == 0) return 0;
  if (side && hy_cl_side_queue(cl, err) != 0) return -1;
  hy_cl_on_side = side != 0;
  const int rc = gather_begin_on(cl, idx, m, with_vel, err);
  hy_cl_on_side = 0;
  return rc;
}

int hy_cl_state_gather_end(struct hy_cl *cl, size_t m, const double **data, struct hy_err *err) {
  if (m != cl->gather_m || (m > 0 && !cl->gather_ev))
    return hy_err_set(err, "internal error: the end of a gather of %zu particles that was not begun", m);
  *data = NULL;
  if (m == 0) return 0;
  cl_int e = clWaitForEvents(1, &cl->gather_ev);
  cl_int st = CL_COMPLETE;
  if (e == CL_SUCCESS)
    e = clGetEventInfo(cl->gather_ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
  clReleaseEvent(cl->gather_ev);
  cl->gather_ev = NULL;
  cl->gather_m = 0;
  if (e == CL_SUCCESS && st < 0) e = st;
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: reading gathered particles failed on %s: %s", cl->name, hy_cl_errname(e));
  *data = cl->host[HY_CL_HOST_GATHER].ptr;
  return 0;
}

int hy_cl_state_finite(struct hy_cl *cl, int pos_only, size_t *n_bad, long *first, struct hy_err *err) {
  if (need_state(cl, "finite check", err)) return -1;
  cl_uint un = (cl_uint)cl->state_n;
  const cl_int po = pos_only ? 1 : 0;
  const char *nm = "hy_st_finite";
  if (set_arg(cl, cl->k_finite, 0, sizeof(cl_mem), &cl->s_pos.mem, nm, err) ||
      set_arg(cl, cl->k_finite, 1, sizeof(cl_mem), &cl->s_vel.mem, nm, err) ||
      set_arg(cl, cl->k_finite, 2, sizeof(cl_mem), &cl->s_accw.mem, nm, err) ||
      set_arg(cl, cl->k_finite, 3, sizeof un, &un, nm, err) || set_arg(cl, cl->k_finite, 4, sizeof po, &po, nm, err) ||
      set_arg(cl, cl->k_finite, 5, sizeof(cl_mem), &cl->s_red.mem, nm, err) ||
      run_grid(cl, cl->k_finite, "the device finite check", NULL, err))
    return -1;
  double part[2 * STATE_GROUPS];
  cl_int e = clEnqueueReadBuffer(cl->q, cl->s_red.mem, CL_TRUE, 0, sizeof part, part, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: reading the finite check failed on %s: %s", cl->name, hy_cl_errname(e));
  double cnt = 0.0, low = -1.0;
  for (int g = 0; g < STATE_GROUPS; g++) {
    cnt += part[2 * g];
    if (part[2 * g + 1] >= 0.0 && (low < 0.0 || part[2 * g + 1] < low)) low = part[2 * g + 1];
  }
  *n_bad = (size_t)cnt;
  *first = (long)low;
  return 0;
}

int hy_cl_state_energy(struct hy_cl *cl, double sums[HY_ENERGY_SUMS], struct hy_err *err) {
  if (need_state(cl, "energy sums", err)) return -1;
  if (cl->s_pot.size < cl->state_n * sizeof(double))
    return hy_err_set(err, "internal error: energy sums without the potentials on the device");
  cl_uint un = (cl_uint)cl->state_n;
  const char *nm = "hy_st_energy";
  if (set_arg(cl, cl->k_energy, 0, sizeof(cl_mem), &cl->s_pos.mem, nm, err) ||
      set_arg(cl, cl->k_energy, 1, sizeof(cl_mem), &cl->s_vel.mem, nm, err) ||
      set_arg(cl, cl->k_energy, 2, sizeof(cl_mem), &cl->s_mass.mem, nm, err) ||
      set_arg(cl, cl->k_energy, 3, sizeof(cl_mem), &cl->s_pot.mem, nm, err) ||
      set_arg(cl, cl->k_energy, 4, sizeof un, &un, nm, err) ||
      set_arg(cl, cl->k_energy, 5, sizeof(cl_mem), &cl->s_red.mem, nm, err) ||
      run_grid(cl, cl->k_energy, "the device energy sums", NULL, err))
    return -1;
  double part[HY_ENERGY_SUMS * STATE_GROUPS];
  cl_int e = clEnqueueReadBuffer(cl->q, cl->s_red.mem, CL_TRUE, 0, sizeof part, part, 0, NULL, NULL);
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: reading the energy sums failed on %s: %s", cl->name, hy_cl_errname(e));
  for (int k = 0; k < HY_ENERGY_SUMS; k++) sums[k] = 0.0;
  for (int g = 0; g < STATE_GROUPS; g++)
    for (int k = 0; k < HY_ENERGY_SUMS; k++) sums[k] += part[HY_ENERGY_SUMS * g + k];
  return 0;
}
