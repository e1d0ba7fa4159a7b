/* SPDX-License-Identifier: GPL-3.0-or-later
 * cl_let.c: the LET selection on the device (opencl/let.cl); see
 * cl_engine.h. Uses only the core (cl_core.h). Every cl* call is checked. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cl_internal.h"
#include "let.h"
#include "trace.h"

extern const char hy_cl_source_let[];
extern const unsigned long hy_cl_source_let_len;

#define LET_MAXB 32 /* destinations per pass: the bits of the visibility masks (HY_LET_MAXB) */
#define ITEM_BYTES (HY_LET_ITEM * sizeof(float)) /* an item (hy_let_gather) */

static int let_kernel(struct hy_cl *cl, const char *name, cl_kernel *k, struct hy_err *err) {
  return hy_cl_kernel(cl, cl->let_prog, name, k, err);
}

static int get_let_kernels(struct hy_cl *cl, struct hy_err *err) {
  if (cl->let_prog) return 0;
  if (!hy_cl_has_fp64(cl))
    return hy_err_set(err, "OpenCL device %s has no double precision (cl_khr_fp64): no LET selection there",
                      cl->name);
  if (hy_cl_build_kernels(cl, err) != 0) return -1; /* the sort, and the work-group size */
  char defs[64];
  snprintf(defs, sizeof defs, "-D HY_WG=%zu", cl->build_wg);
  if (hy_cl_build_program(cl, "let.cl", hy_cl_source_let, defs, &cl->let_prog, err) != 0) return -1;
  return let_kernel(cl, "hy_let_vis", &cl->k_let_vis, err) || let_kernel(cl, "hy_let_emit", &cl->k_let_emit, err) ||
         let_kernel(cl, "hy_let_gather", &cl->k_let_gather, err);
}

void hy_cl_let_free(struct hy_cl *cl) {
  cl_kernel ks[] = {cl->k_let_vis, cl->k_let_emit, cl->k_let_gather};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    if (ks[i]) clReleaseKernel(ks[i]);
  if (cl->let_prog) clReleaseProgram(cl->let_prog);
  struct cl_buf *bs[] = {&cl->l_vis, &cl->l_boxes, &cl->l_frames, &cl->l_cnt, &cl->l_key[0], &cl->l_key[1],
                         &cl->l_val[0], &cl->l_val[1], &cl->l_items};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) hy_cl_buf_release(bs[i]);
}

static unsigned bits_for(size_t v) { /* bits to hold 0 .. v */
  unsigned b = 0;
  while (b < 64 && (v >> b) != 0) b++;
  return b;
}

/* One pass for up to LET_MAXB destinations (boxes already uploaded): the
 * visibility masks from the root down, the sent nodes, their order, their
 * items appended to cl->l_items at item offset `at`. */
static int select_pass(struct hy_cl *cl, size_t nb, const double frame[3], double r2, double fopen, int hard,
                       int count_hard, size_t at, size_t *count, uint64_t *hcount, size_t *made,
                       struct hy_err *err) {
  struct cl_tree *T = &cl->tree[0];
  const size_t n = T->sorted_n, nn = n + T->n_cell;
  const cl_int n_part = (cl_int)n, hd = hard ? 1 : 0;
  const cl_uint unb = (cl_uint)nb, unn = (cl_uint)nn;
  const cl_double fx = frame[0], fy = frame[1], fz = frame[2], dr2 = r2, dfo = fopen;
  cl_int e;
  /* the root: reached for every destination by the selected walk, and by the hard walk when it is counted */
  const cl_uint all = nb == LET_MAXB ? 0xffffffffu : ((cl_uint)1 << nb) - 1u;
  const cl_uint root[2] = {all, count_hard && !hard ? all : 0u};
  double tt = hy_trace_t(); /* the parts in the trace (the host waits for each) */
  const cl_uint zero2[2] = {0u, 0u};
  if ((e = clEnqueueFillBuffer(cl->q, cl->l_vis.mem, zero2, sizeof zero2, 0, nn * 8, 0, NULL, NULL)) != CL_SUCCESS ||
      (e = clEnqueueWriteBuffer(cl->q, cl->l_vis.mem, CL_FALSE, n * 8, 8, root, 0, NULL, NULL)) != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: LET selection: writing the root mask failed on %s: %s", cl->name,
                      hy_cl_errname(e));
  for (int g = 0; g < T->n_gen; g++) {
    const cl_uint g0 = T->gen_first[g], gc = T->gen_count[g];
    if (hy_cl_set_args(cl, cl->k_let_vis, "hy_let_vis", err, V(g0), V(gc), V(n_part), M(cl->node[0]), M(cl->l_boxes), V(unb),
             V(fx), V(fy), V(fz), V(dr2), V(dfo), V(hd), M(cl->l_vis), END) ||
        hy_cl_launch(cl, cl->k_let_vis, "hy_let_vis", gc, NULL, err))
      return -1;
  }
  /* the sent nodes; with too little room for them, once more with enough */
  const unsigned pshift = bits_for(n);
  const cl_uint ushift = pshift; /* the destination's bits above it in a sort key (hy_let_emit, hy_let_gather) */
  for (int attempt = 0;; attempt++) {
    /* room: the smallest of the four buffers (an allocation may hold more than asked) */
    size_t room = cl->l_val[0].size / 4;
    for (int k = 0; k < 2; k++) {
      if (cl->l_key[k].size / 8 < room) room = cl->l_key[k].size / 8;
      if (cl->l_val[k].size / 4 < room) room = cl->l_val[k].size / 4;
    }
    const cl_uint zero = 0, cap = room > UINT32_MAX ? UINT32_MAX : (cl_uint)room;
    if ((e = clEnqueueFillBuffer(cl->q, cl->l_cnt.mem, &zero, sizeof zero, 0, (1 + 2 * LET_MAXB) * 4, 0, NULL,
                                 NULL)) != CL_SUCCESS)
      return hy_err_set(err, "OpenCL: LET selection: clearing the counters failed on %s: %s", cl->name,
                        hy_cl_errname(e));
    if (hy_cl_set_args(cl, cl->k_let_emit, "hy_let_emit", err, V(unn), V(n_part), M(cl->node[0]), M(T->c_lo), M(T->idx),
             M(cl->s_pos), M(cl->l_boxes), V(unb), V(fx), V(fy), V(fz), V(dr2), V(dfo), V(hd), M(cl->l_vis), M(cl->l_cnt),
             V(cap), M(cl->l_key[0]), M(cl->l_val[0]), V(ushift), END) ||
        hy_cl_launch(cl, cl->k_let_emit, "hy_let_emit", nn, NULL, err))
      return -1;
    cl_uint c[1 + 2 * LET_MAXB];
    if ((e = clEnqueueReadBuffer(cl->q, cl->l_cnt.mem, CL_TRUE, 0, sizeof c, c, 0, NULL, NULL)) != CL_SUCCESS)
      return hy_err_set(err, "OpenCL: LET selection failed on %s: %s (a kernel fault?)", cl->name, hy_cl_errname(e));
    const size_t total = c[0];
    if (total > cap) { /* more room, and once more */
      if (attempt > 0) return hy_err_set(err, "internal error: LET selection: %zu items after growing to %u", total, cap);
      const size_t want = total + total / 4 + 1024;
      for (int k = 0; k < 2; k++)
        if (hy_cl_ensure_buf(cl, &cl->l_key[k], hy_size_mul_or_die(want, 8, "LET selection"), "LET selection keys",
                             err) ||
            hy_cl_ensure_buf(cl, &cl->l_val[k], hy_size_mul_or_die(want, 4, "LET selection"), "LET selection nodes",
                             err))
          return -1;
      continue;
    }
    for (size_t j = 0; j < nb; j++) {
      count[j] = c[1 + j];
      hcount[j] = c[1 + LET_MAXB + j];
    }
    *made = total;
    break;
  }
  hy_trace(HY_TRACE_MAIN, "ls_visit", tt); /* the visibility masks and the sent nodes, counted */
  if (*made == 0) return 0;
  tt = hy_trace_t();
  /* destination-major, each in the host walk's order */
  struct cl_buf *kb[2] = {&cl->l_key[0], &cl->l_key[1]}, *vb[2] = {&cl->l_val[0], &cl->l_val[1]};
  if (hy_cl_sort_pairs(cl, kb, vb, *made, pshift + bits_for(nb - 1), err) != 0) return -1;
  const size_t need = hy_size_mul_or_die(at + *made, ITEM_BYTES, "LET items");
  if (hy_cl_ensure_buf_keep(cl, &cl->l_items, need, at * ITEM_BYTES, "LET items", err) != 0) return -1;
  const cl_uint um = (cl_uint)*made;
  const cl_ulong uat = at; /* the items of this pass behind those of earlier passes */
  if (hy_cl_set_args(cl, cl->k_let_gather, "hy_let_gather", err, V(um), M(cl->l_val[0]), M(cl->l_key[0]),
           V(ushift), M(cl->l_frames), V(n_part), M(cl->node[0]),
           M(T->c_b2), M(T->idx), M(cl->s_pos), M(cl->s_mass), V(fx), V(fy), V(fz), M(cl->l_items), V(uat), END) ||
      hy_cl_launch(cl, cl->k_let_gather, "hy_let_gather", *made, NULL, err))
    return -1;
  if ((e = clFinish(cl->q)) != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: gathering the LET items failed on %s: %s", cl->name, hy_cl_errname(e));
  hy_trace(HY_TRACE_MAIN, "ls_sort_gather", tt);
  return 0;
}


int hy_cl_let_select(struct hy_cl *cl, const double *boxes, const double *frames, size_t nb, const double frame[3],
                     double r2, double fopen, int hard, int count_hard, int async, float **items, size_t *count,
                     uint64_t *hcount, double *seconds, struct hy_err *err) {
  double t0 = hy_wtime();
  if (hy_cl_let_wait(cl, err) != 0) return -1; /* the last selection's items are read before l_items changes */
  const size_t per_pass = hy_let_test_small() ? 1 : LET_MAXB;
  struct cl_tree *T = &cl->tree[0];
  *items = NULL;
  if (nb == 0) return 0;
  if (cl->state_n < 2 || T->sorted_n != cl->state_n || T->n_gen == 0)
    return hy_err_set(err, "internal error: LET selection without a device-built tree of the state's particles");
  if (get_let_kernels(cl, err) != 0) return -1;
  const size_t n = T->sorted_n, nn = n + T->n_cell;
  size_t guess = cl->l_val[0].size / 4 > n / 16 + 1024 ? cl->l_val[0].size / 4 : n / 16 + 1024;
  if (hy_let_test_small()) {
    guess = 1;
    for (int k = 0; k < 2; k++) { /* start small again (the engine counts its bytes in use) */
      hy_cl_mem_lock(cl);
      cl->in_use -= cl->l_key[k].size + cl->l_val[k].size;
      hy_cl_mem_unlock(cl);
      hy_cl_buf_release(&cl->l_key[k]);
      hy_cl_buf_release(&cl->l_val[k]);
    }
  }
  if (hy_cl_check_int(nn, "tree nodes", err) ||
      hy_cl_ensure_buf(cl, &cl->l_vis, hy_size_mul_or_die(nn, 8, "LET masks"), "LET visibility masks", err) ||
      hy_cl_ensure_buf(cl, &cl->l_boxes, hy_size_mul_or_die(nb < per_pass ? nb : per_pass, 56, "boxes"),
                       "LET boxes", err) ||
      hy_cl_ensure_buf(cl, &cl->l_frames, hy_size_mul_or_die(nb < per_pass ? nb : per_pass, 24, "frames"),
                       "LET frames", err) ||
      hy_cl_ensure_buf(cl, &cl->l_cnt, (1 + 2 * LET_MAXB) * 4, "LET counters", err))
    return -1;
  for (int k = 0; k < 2; k++)
    if (hy_cl_ensure_buf(cl, &cl->l_key[k], hy_size_mul_or_die(guess, 8, "LET selection"), "LET selection keys", err) ||
        hy_cl_ensure_buf(cl, &cl->l_val[k], hy_size_mul_or_die(guess, 4, "LET selection"), "LET selection nodes", err))
      return -1;
  size_t at = 0;
  for (size_t j0 = 0; j0 < nb; j0 += per_pass) {
    const size_t b = nb - j0 < per_pass ? nb - j0 : per_pass;
    cl_int e = clEnqueueWriteBuffer(cl->q, cl->l_boxes.mem, CL_FALSE, 0, b * 56, boxes + 7 * j0, 0, NULL, NULL);
    if (e == CL_SUCCESS)
      e = clEnqueueWriteBuffer(cl->q, cl->l_frames.mem, CL_FALSE, 0, b * 24, frames + 3 * j0, 0, NULL, NULL);
    if (e != CL_SUCCESS) {
      clFinish(cl->q);
      return hy_err_set(err, "OpenCL: uploading the LET boxes failed on %s: %s", cl->name, hy_cl_errname(e));
    }
    size_t made = 0;
    if (select_pass(cl, b, frame, r2, fopen, hard, count_hard, at, count + j0, hcount + j0, &made, err) != 0) {
      clFinish(cl->q);
      return -1;
    }
    at += made;
  }
  float *host = hy_cl_host_buffer(cl, HY_CL_HOST_LET, hy_size_mul_or_die(at ? at : 1, ITEM_BYTES, "LET items"), err);
  if (!host) return -1;
  if (at && async) { /* the gather is done (select_pass ends with clFinish) */
    if (hy_cl_side_queue(cl, err) != 0) return -1;
    cl_int e = clEnqueueReadBuffer(cl->q2, cl->l_items.mem, CL_FALSE, 0, at * ITEM_BYTES, host, 0, NULL, &cl->l_read);
    if (e == CL_SUCCESS) e = clFlush(cl->q2);
    if (e != CL_SUCCESS) {
      if (cl->l_read) clFinish(cl->q2);
      return hy_err_set(err, "OpenCL: reading the LET items failed on %s: %s", cl->name, hy_cl_errname(e));
    }
  } else if (at) {
    const double tt = hy_trace_t();
    cl_int e = clEnqueueReadBuffer(cl->q, cl->l_items.mem, CL_TRUE, 0, at * ITEM_BYTES, host, 0, NULL, NULL);
    if (e != CL_SUCCESS)
      return hy_err_set(err, "OpenCL: reading the LET items failed on %s: %s", cl->name, hy_cl_errname(e));
    hy_trace(HY_TRACE_MAIN, "ls_read", tt);
  }
  *items = host;
  if (seconds) *seconds += hy_wtime() - t0;
  return 0;
}

int hy_cl_let_wait(struct hy_cl *cl, struct hy_err *err) {
  if (!cl->l_read) return 0;
  const double tt = hy_trace_t();
  cl_event ev = cl->l_read;
  cl->l_read = NULL;
  cl_int st = CL_COMPLETE;
  cl_int e = clWaitForEvents(1, &ev);
  if (e == CL_SUCCESS) e = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
  clReleaseEvent(ev);
  hy_trace(HY_TRACE_MAIN, "ls_read_wait", tt);
  if (e != CL_SUCCESS || st < 0)
    return hy_err_set(err, "OpenCL: reading the LET items failed on %s: %s", cl->name,
                      hy_cl_errname(e != CL_SUCCESS ? e : st));
  return 0;
}
