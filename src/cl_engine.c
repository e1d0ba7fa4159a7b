/* SPDX-License-Identifier: GPL-3.0-or-later
 * cl_engine.c: see cl_engine.h. The top layer of the OpenCL engine
 * (cl_internal.h): device choice, creation and free, the walk and direct
 * programs, walks and direct sums. Every cl* call is checked; failures
 * become an error message naming the call, the status and the device. */
#include "config.h"

#include "cl_engine.h"

#include <CL/cl.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cl_check.h"
#include "cl_internal.h"
#include "hy_shared.h"

extern const char hy_cl_source_walk[];
extern const unsigned long hy_cl_source_walk_len;
extern const char hy_cl_source_direct[];
extern const unsigned long hy_cl_source_direct_len;

/* ------------------------------------------------------- enumeration */

struct dev_entry {
  int p, d;
  cl_platform_id pid;
  cl_device_id did;
  cl_device_type type;
};

static int list_devices(struct dev_entry **out, size_t *n_out, struct hy_err *err) {
  const struct hy_cl *cl = NULL;
  cl_uint np = 0;
  cl_int e = clGetPlatformIDs(0, NULL, &np);
  if (e == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (e == CL_SUCCESS && np == 0))
    return hy_err_set(err, "no OpenCL platform found (install an OpenCL driver, e.g. Debian's pocl-opencl-icd, "
                           "or check OCL_ICD_VENDORS)");
  CL_CHECK(e, "clGetPlatformIDs");
  cl_platform_id *pids = hy_malloc("OpenCL platforms", np, sizeof *pids);
  e = clGetPlatformIDs(np, pids, NULL);
  if (e != CL_SUCCESS) {
    hy_free(pids);
    CL_CHECK(e, "clGetPlatformIDs");
  }
  size_t n = 0, cap = 8;
  struct dev_entry *list = hy_malloc("OpenCL devices", cap, sizeof *list);
  for (cl_uint p = 0; p < np; p++) {
    cl_uint nd = 0;
    e = clGetDeviceIDs(pids[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
    if (e == CL_DEVICE_NOT_FOUND || nd == 0) continue; /* a platform without devices is skipped */
    if (e != CL_SUCCESS) {
      hy_free(pids);
      hy_free(list);
      CL_CHECK(e, "clGetDeviceIDs");
    }
    cl_device_id *dids = hy_malloc("OpenCL devices", nd, sizeof *dids);
    e = clGetDeviceIDs(pids[p], CL_DEVICE_TYPE_ALL, nd, dids, NULL);
    for (cl_uint d = 0; e == CL_SUCCESS && d < nd; d++) {
      cl_device_type t = 0;
      e = clGetDeviceInfo(dids[d], CL_DEVICE_TYPE, sizeof t, &t, NULL);
      if (e != CL_SUCCESS) break;
      if (n == cap) {
        cap *= 2;
        list = hy_realloc("OpenCL devices", list, cap, sizeof *list);
      }
      list[n++] = (struct dev_entry){(int)p, (int)d, pids[p], dids[d], t};
    }
    hy_free(dids);
    if (e != CL_SUCCESS) {
      hy_free(pids);
      hy_free(list);
      CL_CHECK(e, "clGetDeviceInfo(CL_DEVICE_TYPE)");
    }
  }
  hy_free(pids);
  *out = list;
  *n_out = n;
  return 0;
}

static void info_str(cl_device_id d, cl_device_info what, char *buf, size_t size) {
  if (clGetDeviceInfo(d, what, size, buf, NULL) != CL_SUCCESS) snprintf(buf, size, "?");
  buf[size - 1] = '\0';
}

static const char *type_name(cl_device_type t) {
  if (t & CL_DEVICE_TYPE_GPU) return "GPU";
  if (t & CL_DEVICE_TYPE_CPU) return "CPU";
  if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  return "other";
}

void hy_cl_print_devices(FILE *out, const struct hy_cl *chosen) {
  struct dev_entry *list = NULL;
  size_t n = 0;
  struct hy_err err;
  if (list_devices(&list, &n, &err) != 0) {
    fprintf(out, "OpenCL devices: none (%s)\n", err.msg);
    return;
  }
  fprintf(out, "OpenCL devices (platform:device):\n");
  for (size_t i = 0; i < n; i++) {
    char name[256], pname[256], ver[256];
    cl_uint cu = 0;
    cl_ulong mem = 0;
    info_str(list[i].did, CL_DEVICE_NAME, name, sizeof name);
    info_str(list[i].did, CL_DEVICE_VERSION, ver, sizeof ver);
    if (clGetPlatformInfo(list[i].pid, CL_PLATFORM_NAME, sizeof pname, pname, NULL) != CL_SUCCESS)
      snprintf(pname, sizeof pname, "?");
    pname[sizeof pname - 1] = '\0';
    if (clGetDeviceInfo(list[i].did, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL) != CL_SUCCESS) cu = 0;
    if (clGetDeviceInfo(list[i].did, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, NULL) != CL_SUCCESS) mem = 0;
    int mine = chosen && chosen->device == list[i].did;
    fprintf(out, "  %d:%d  %-3s %s | %s | %u compute units, %.1f GiB | %s%s\n", list[i].p, list[i].d,
            type_name(list[i].type), name, pname, cu, (double)mem / 1073741824.0, ver, mine ? "  <- used" : "");
  }
  hy_free(list);
}

/* ---------------------------------------------------------- creation */

int hy_cl_create(struct hy_cl **out, const struct hy_cl_opts *o, struct hy_err *err) {
  *out = NULL;
  struct hy_cl *cl = NULL;
  struct dev_entry *list = NULL;
  size_t n = 0;
  if (list_devices(&list, &n, err) != 0) return -1;
  if (n == 0) {
    hy_free(list);
    return hy_err_set(err, "no OpenCL device found on any platform");
  }
  /* candidates */
  size_t *cand = hy_malloc("OpenCL candidates", n, sizeof *cand);
  size_t nc = 0;
  const char *want = "any";
  if (o->kind == HY_CL_EXPLICIT) {
    want = "explicit";
    for (size_t i = 0; i < n; i++)
      if (list[i].p == o->platform && list[i].d == o->device) cand[nc++] = i;
    if (nc == 0) {
      hy_free(cand);
      hy_free(list);
      return hy_err_set(err,
                        "%s%sOpenCLDevice %d:%d: no such OpenCL device (%zu device(s) found; `hytree devices` lists "
                        "them)",
                        o->origin ? o->origin : "", o->origin ? ": " : "", o->platform, o->device, n);
    }
  } else {
    cl_device_type t = o->kind == HY_CL_GPU ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_CPU;
    want = o->kind == HY_CL_GPU ? "gpu" : o->kind == HY_CL_CPU ? "cpu" : "any";
    for (size_t i = 0; i < n; i++)
      if (list[i].type & (o->kind == HY_CL_ANY ? CL_DEVICE_TYPE_GPU : t)) cand[nc++] = i;
    if (nc == 0 && o->kind == HY_CL_ANY) {
      for (size_t i = 0; i < n; i++)
        if (list[i].type & CL_DEVICE_TYPE_CPU) cand[nc++] = i;
      if (nc == 0)
        for (size_t i = 0; i < n; i++) cand[nc++] = i;
    }
    if (nc == 0) {
      hy_free(cand);
      hy_free(list);
      return hy_err_set(err,
                        "%s%sOpenCLDevice %s: no OpenCL %s device found (%zu other device(s); `hytree devices` lists "
                        "them)",
                        o->origin ? o->origin : "", o->origin ? ": " : "", want, want, n);
    }
  }
  size_t pick = cand[(size_t)(o->local_rank < 0 ? 0 : o->local_rank) % nc];
  cl = hy_calloc("OpenCL engine", 1, sizeof *cl);
  const int pe = pthread_mutex_init(&cl->mem_lock, NULL);
  if (pe != 0) {
    hy_free(cand);
    hy_free(list);
    hy_free(cl);
    return hy_err_set(err, "OpenCL engine: pthread_mutex_init failed: %s", strerror(pe));
  }
  cl->mem_lock_ok = 1;
  cl->platform = list[pick].pid;
  cl->device = list[pick].did;
  cl->type = list[pick].type;
  cl->plat_index = list[pick].p;
  cl->dev_index = list[pick].d;
  cl->nvec = o->nvec;
  cl->mac_rel = o->mac_rel != 0;
  cl->merge_sort_max = hy_cl_merge_sort_default(cl);
  hy_free(cand);
  hy_free(list);
  info_str(cl->device, CL_DEVICE_NAME, cl->name, sizeof cl->name);
  info_str(cl->device, CL_DEVICE_VENDOR, cl->vendor, sizeof cl->vendor);
  info_str(cl->device, CL_DEVICE_VERSION, cl->version, sizeof cl->version);
  if (clGetPlatformInfo(cl->platform, CL_PLATFORM_NAME, sizeof cl->platform_name, cl->platform_name, NULL) !=
      CL_SUCCESS)
    snprintf(cl->platform_name, sizeof cl->platform_name, "?");
  cl->platform_name[sizeof cl->platform_name - 1] = '\0';
  snprintf(cl->desc, sizeof cl->desc, "%s (%s, %s, %s)", cl->name, type_name(cl->type), cl->platform_name,
           cl->version);
  cl_int e;
  e = clGetDeviceInfo(cl->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof cl->max_alloc, &cl->max_alloc, NULL);
  if (e == CL_SUCCESS)
    e = clGetDeviceInfo(cl->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof cl->global_mem, &cl->global_mem, NULL);
  if (e == CL_SUCCESS)
    e = clGetDeviceInfo(cl->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof cl->max_wg, &cl->max_wg, NULL);
  if (e != CL_SUCCESS) {
    hy_cl_free(cl);
    return hy_err_set(err, "OpenCL: clGetDeviceInfo failed: %s", hy_cl_errname(e));
  }
  cl->mem_limit = cl->global_mem > (cl_ulong)SIZE_MAX ? SIZE_MAX : (size_t)cl->global_mem;
  const char *lim = getenv("HYTREE_TEST_DEVICE_MEM_LIMIT");
  if (lim && *lim) { /* rehearse running out of device memory with a smaller budget */
    char *end;
    unsigned long long v = strtoull(lim, &end, 10);
    if (*end != '\0' || v == 0) {
      hy_cl_free(cl);
      return hy_err_set(err, "HYTREE_TEST_DEVICE_MEM_LIMIT='%s': must be a positive number of bytes", lim);
    }
    if (v < cl->mem_limit) cl->mem_limit = (size_t)v;
  }
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)cl->platform, 0};
  cl->ctx = clCreateContext(props, 1, &cl->device, NULL, NULL, &e);
  if (e != CL_SUCCESS) {
    int r = hy_err_set(err, "OpenCL: clCreateContext failed on %s: %s", cl->name, hy_cl_errname(e));
    cl->ctx = NULL;
    hy_cl_free(cl);
    return r;
  }
  /* clCreateCommandQueue is deprecated in OpenCL 2.0 but is the 1.2 API we target */
  cl->q = clCreateCommandQueue(cl->ctx, cl->device, CL_QUEUE_PROFILING_ENABLE, &e);
  if (e != CL_SUCCESS) {
    int r = hy_err_set(err, "OpenCL: clCreateCommandQueue failed on %s: %s", cl->name, hy_cl_errname(e));
    cl->q = NULL;
    hy_cl_free(cl);
    return r;
  }
  cl->qm = clCreateCommandQueue(cl->ctx, cl->device, 0, &e);
  if (e != CL_SUCCESS) {
    int r = hy_err_set(err, "OpenCL: clCreateCommandQueue (staging maps) failed on %s: %s", cl->name, hy_cl_errname(e));
    cl->qm = NULL;
    hy_cl_free(cl);
    return r;
  }
  *out = cl;
  return 0;
}

void hy_cl_free(struct hy_cl *cl) {
  if (!cl) return;
  if (cl->q2) clFinish(cl->q2);
  if (cl->q) clFinish(cl->q);
  if (cl->qm) clFinish(cl->qm);
  if (cl->l_read) clReleaseEvent(cl->l_read);
  for (int m = 0; m < HY_WALK_NMODES; m++)
    for (int p = 0; p < 2; p++) {
      if (cl->walk_k[m][p]) clReleaseKernel(cl->walk_k[m][p]);
      if (cl->walk_prog[m][p]) clReleaseProgram(cl->walk_prog[m][p]);
    }
  if (cl->direct_k) clReleaseKernel(cl->direct_k);
  if (cl->direct_prog) clReleaseProgram(cl->direct_prog);
  if (cl->direct_ref_k) clReleaseKernel(cl->direct_ref_k);
  if (cl->direct_ref_prog) clReleaseProgram(cl->direct_ref_prog);
  hy_cl_let_free(cl);
  hy_cl_build_free(cl);
  hy_cl_state_free(cl);
  hy_cl_core_free(cl);
  hy_cl_buf_release(&cl->node[0]);
  hy_cl_buf_release(&cl->node[1]);
  hy_cl_buf_release(&cl->sink);
  hy_cl_buf_release(&cl->out0);
  hy_cl_buf_release(&cl->out1);
  hy_cl_buf_release(&cl->counts);
  hy_cl_buf_release(&cl->dsrc);
  if (cl->q2) clReleaseCommandQueue(cl->q2);
  if (cl->qm) clReleaseCommandQueue(cl->qm);
  if (cl->q) clReleaseCommandQueue(cl->q);
  if (cl->ctx) clReleaseContext(cl->ctx);
  if (cl->mem_lock_ok) pthread_mutex_destroy(&cl->mem_lock);
  hy_free(cl);
}

const char *hy_cl_description(const struct hy_cl *cl) { return cl->desc; }
const char *hy_cl_device_name(const struct hy_cl *cl) { return cl->name; }
int hy_cl_is_gpu(const struct hy_cl *cl) { return (cl->type & CL_DEVICE_TYPE_GPU) != 0; }
int hy_cl_is_cpu(const struct hy_cl *cl) { return (cl->type & CL_DEVICE_TYPE_CPU) != 0; }

/* ------------------------------------------------------------ kernels */

static int get_walk_kernel(struct hy_cl *cl, int mode, int pot, cl_kernel *k, struct hy_err *err) {
  if (mode < 0 || mode >= HY_WALK_NMODES) return hy_err_set(err, "walk: bad mode %d", mode);
  pot = pot ? 1 : 0;
  if (!cl->walk_k[mode][pot]) {
    char defs[256];
    snprintf(defs, sizeof defs, "-D HY_WALK_MODE=%d -D HY_WALK_POT=%d -D HY_NVEC=%d -D HY_MAC_REL=%d", mode, pot,
             cl->nvec, cl->mac_rel);
    if (hy_cl_build_program(cl, "walk.cl", hy_cl_source_walk, defs, &cl->walk_prog[mode][pot], err) != 0) return -1;
    cl_int e;
    cl->walk_k[mode][pot] = clCreateKernel(cl->walk_prog[mode][pot], "hy_walk", &e);
    if (e != CL_SUCCESS) {
      cl->walk_k[mode][pot] = NULL;
      CL_CHECK(e, "clCreateKernel(hy_walk)");
    }
  }
  *k = cl->walk_k[mode][pot];
  return 0;
}

static int get_direct_kernel(struct hy_cl *cl, struct hy_err *err) {
  if (cl->direct_k) return 0;
  if (hy_cl_build_program(cl, "direct.cl", hy_cl_source_direct, "", &cl->direct_prog, err) != 0) return -1;
  cl_int e;
  cl->direct_k = clCreateKernel(cl->direct_prog, "hy_direct", &e);
  if (e != CL_SUCCESS) {
    cl->direct_k = NULL;
    CL_CHECK(e, "clCreateKernel(hy_direct)");
  }
  return 0;
}

int hy_cl_build_all(struct hy_cl *cl, struct hy_err *err) {
  cl_kernel k;
  for (int m = 0; m < HY_WALK_NMODES; m++)
    for (int p = 0; p < 2; p++)
      if (get_walk_kernel(cl, m, p, &k, err) != 0) return -1;
  if (hy_cl_tree_kernels(cl, err) != 0) return -1;
  return get_direct_kernel(cl, err);
}

/* -------------------------------------------------------------- walks */

/* The device time from the first of the events' starts to the last one's end. */
static double events_span(const cl_event *ev, int n) {
  cl_ulong lo = 0, hi = 0;
  int any = 0;
  for (int i = 0; i < n; i++) {
    cl_ulong t0 = 0, t1 = 0;
    if (!ev[i] || clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) != CL_SUCCESS)
      continue;
    if (!any || t0 < lo) lo = t0;
    if (!any || t1 > hi) hi = t1;
    any = 1;
  }
  return any && hi > lo ? 1e-9 * (double)(hi - lo) : 0.0;
}

enum { EV_NODE, EV_SINK, EV_MARK, EV_KERNEL, EV_UNSORT0, EV_UNSORT1, EV_OUT0, EV_OUT1, EV_COUNTS, EV_N };

/* One walk on the device: its kernel, sizes, buffers and events. */
struct walk {
  cl_kernel k;
  int split;             /* HY_WALK_SPLIT: two results per sink */
  size_t node_bytes, sink_bytes, count_bytes;
  size_t local, n_wg;    /* work-group size and count */
  struct cl_buf *nodes;  /* the tree's node records */
  uint64_t *counts_host; /* the interaction counters, per work-group */
  cl_mem sink_mem;
  cl_int sink_stride;    /* float4 from one sink to the next */
  cl_int use_blocks;     /* 1: blocks of sinks marked to skip; 2: their zeros not even written */
  cl_event ev[EV_N];
};

/* The combinations of resident trees and sinks a walk may ask for, and
 * that they are there. */
static int walk_check_resident(const struct hy_cl *cl, const struct hy_cl_walk_args *a, const struct hy_walk_cfg *cfg,
                               struct hy_err *err) {
  if (a->graft && (!a->local_sinks || cl->graft_id != a->tree_id))
    return hy_err_set(err, "internal error: walk of a grafted merged tree that is not resident");
  if (a->local_sinks &&
      (a->slot != 1 || !a->unsort || a->self_base != HY_SELF_IN_SINK || a->sinks_resident || a->skip_items ||
       a->tree_id == 0 || a->sink_id != a->tree_id || cl->sink_id != a->tree_id ||
       a->n_sink != cl->tree[0].sorted_n || (!a->graft && cl->node_id[1] != a->tree_id)))
    return hy_err_set(err, "internal error: walk of a merged tree's local particles that are not resident");
  if (a->unsort && !a->graft && !a->local_sinks &&
      (a->self_base != 0 || a->n_sink != cl->tree[a->slot].sorted_n || a->tree_id == 0 ||
       cl->node_id[a->slot] != a->tree_id))
    return hy_err_set(err, "internal error: walk of a device-built tree that is not resident");
  if (!a->out0 && !a->unsort && !a->add_unsorted) return hy_err_set(err, "internal error: walk results with nowhere to go");
  if (a->skip_far && (cfg->mode != HY_WALK_HARD || a->self_base >= 0 || a->self_base == HY_SELF_IN_SINK))
    return hy_err_set(err, "internal error: a walk that skips far sink blocks is a hard walk of sinks in the sink buffer");
  if (a->skip_items && (a->skip_far || (a->graft ? a->self_base != HY_SELF_IN_SINK : a->self_base != 0) ||
                        a->sinks_resident || a->add_unsorted || a->tree_id == 0 ||
                        (!a->graft && cl->node_id[a->slot] != a->tree_id) || a->n_sink != cl->tree[a->slot].sorted_n))
    return hy_err_set(err, "internal error: a walk that skips the LET items' blocks is a walk of a resident "
                           "device-built tree's own particles");
  if ((a->sinks_resident || a->add_unsorted) &&
      (a->n_sink != cl->tree[0].sorted_n || a->self_base >= 0 || a->unsort || (a->add_unsorted && !a->sinks_resident) ||
       (a->add_unsorted && (cl->unsorted_slot != 0 || cl->unsorted_n != a->n_sink))))
    return hy_err_set(err, "internal error: walk with resident sinks that do not match the last device build");
  return 0;
}

/* The kernel, the sizes and the buffers of the walk. */
static int walk_prepare(struct hy_cl *cl, const struct hy_cl_walk_args *a, const struct hy_walk_cfg *cfg,
                        struct walk *w, struct hy_err *err) {
  if (get_walk_kernel(cl, cfg->mode, cfg->want_pot, &w->k, err) != 0) return -1;
  const int split = w->split = cfg->mode == HY_WALK_SPLIT;
  w->node_bytes = hy_size_mul_or_die(a->n_nodes, 8 * sizeof(float), "tree nodes");
  const size_t sink_bytes = w->sink_bytes = hy_size_mul_or_die(a->n_sink, 4 * sizeof(float), "sinks");
  size_t n_groups = (a->n_sink + (size_t)cl->nvec - 1) / (size_t)cl->nvec;
  /* a fixed work-group size on CPUs too: implementations such as pocl
   * compile a work-group function per local size, and leaving it to them
   * ties it to the sink count, which changes with every decomposition */
  w->local = hy_cl_is_gpu(cl) ? 64 : 16;
  if (w->local > cl->max_wg) w->local = cl->max_wg;
  w->n_wg = (n_groups + w->local - 1) / w->local;
  w->count_bytes = hy_size_mul_or_die(w->n_wg, HY_COUNT_N * sizeof(uint64_t), "counters");
  /* a grafted merged tree's records follow the slot-0 tree's (its build made the room) */
  w->nodes = &cl->node[a->graft ? 0 : a->slot];
  if (a->graft && w->nodes->size < w->node_bytes)
    return hy_err_set(err, "internal error: grafted tree beyond its buffer");
  if (hy_cl_ensure_buf(cl, w->nodes, w->node_bytes, "tree nodes", err) ||
      (!a->sinks_resident && hy_cl_ensure_buf(cl, &cl->sink, sink_bytes, "sinks", err)) ||
      hy_cl_ensure_buf(cl, &cl->out0, sink_bytes, "forces", err) ||
      (split && hy_cl_ensure_buf(cl, &cl->out1, sink_bytes, "soft forces", err)) ||
      (a->unsort && hy_cl_ensure_buf(cl, &cl->uout0, sink_bytes, "forces in particle order", err)) ||
      (a->unsort && split && hy_cl_ensure_buf(cl, &cl->uout1, sink_bytes, "soft forces in particle order", err)) ||
      hy_cl_ensure_buf(cl, &cl->counts, w->count_bytes, "interaction counters", err))
    return -1;
  /* page-locked: a read into pageable memory ends with a copy on the host
   * after the device's part */
  w->counts_host = hy_cl_host_buffer(cl, HY_CL_HOST_COUNTS, w->count_bytes, err);
  if (!w->counts_host) return -1;
  /* with self_base >= 0 the kernel reads the sink positions from the node
   * records: nothing to upload; resident sinks are the particle records of
   * the slot-0 build (every second float4 of its node buffer, key order) */
  w->sink_mem = a->sinks_resident ? cl->node[0].mem : cl->sink.mem;
  w->sink_stride = a->sinks_resident ? 2 : 1;
  /* 2: the skipped sinks' zeros are not even written, hy_add_unsort skips them too */
  w->use_blocks = a->skip_far ? (a->add_unsorted ? 2 : 1) : a->skip_items ? 1 : 0;
  return 0;
}

/* The node records and the sinks, unless they are resident. */
static int walk_upload(struct hy_cl *cl, const struct hy_cl_walk_args *a, struct walk *w, struct hy_err *err) {
  cl_int e = CL_SUCCESS;
  if (!a->graft && (a->tree_id == 0 || cl->node_id[a->slot] != a->tree_id)) {
    cl->node_id[a->slot] = 0;
    e = clEnqueueWriteBuffer(cl->q, cl->node[a->slot].mem, CL_FALSE, 0, w->node_bytes, a->node, 0, NULL,
                             &w->ev[EV_NODE]);
    if (e != CL_SUCCESS) goto fail;
    cl->node_id[a->slot] = a->tree_id;
  }
  if (!a->sinks_resident && a->self_base < 0 && (a->sink_id == 0 || cl->sink_id != a->sink_id)) {
    cl->sink_id = 0;
    e = clEnqueueWriteBuffer(cl->q, cl->sink.mem, CL_FALSE, 0, w->sink_bytes, a->sink, 0, NULL, &w->ev[EV_SINK]);
    if (e != CL_SUCCESS) goto fail;
    cl->sink_id = a->sink_id;
  }
  return 0;
fail:
  clFinish(cl->q);
  hy_cl_release_events(w->ev, EV_N);
  return hy_err_set(err, "OpenCL: uploading the walk inputs failed on %s: %s", cl->name, hy_cl_errname(e));
}

/* The walk kernel's arguments (opencl/walk.cl, hy_walk). */
static cl_int walk_set_args(struct hy_cl *cl, const struct hy_cl_walk_args *a, const struct hy_walk_cfg *cfg,
                            const struct walk *w) {
  const cl_kernel k = w->k;
  cl_int n_part = (cl_int)a->n_part, root = (cl_int)a->root, n_sink = (cl_int)a->n_sink;
  cl_int self_base = a->self_base >= 0 || a->self_base == HY_SELF_IN_SINK ? (cl_int)a->self_base : -1;
  cl_float eps2 = (cl_float)(cfg->eps * cfg->eps), r1 = (cl_float)cfg->r1, r2 = (cl_float)cfg->r2;
  cl_float inv_dr = cfg->r2 > cfg->r1 ? (cl_float)(1.0 / (cfg->r2 - cfg->r1)) : 0.0f;
  cl_float n_ratio = (cl_float)cfg->n_ratio;
  cl_mem out1 = w->split ? cl->out1.mem : cl->out0.mem;
  cl_mem blocks = w->use_blocks ? cl->blocks.mem : cl->counts.mem; /* not read without use_blocks */
  cl_uint i = 0;
  cl_int e;
  if ((e = clSetKernelArg(k, i++, sizeof(cl_mem), &w->nodes->mem)) ||
      (e = clSetKernelArg(k, i++, sizeof n_part, &n_part)) || (e = clSetKernelArg(k, i++, sizeof root, &root)) ||
      (e = clSetKernelArg(k, i++, sizeof(cl_mem), &w->sink_mem)) ||
      (e = clSetKernelArg(k, i++, sizeof n_sink, &n_sink)) ||
      (e = clSetKernelArg(k, i++, sizeof self_base, &self_base)) ||
      (e = clSetKernelArg(k, i++, sizeof eps2, &eps2)) || (e = clSetKernelArg(k, i++, sizeof r1, &r1)) ||
      (e = clSetKernelArg(k, i++, sizeof r2, &r2)) || (e = clSetKernelArg(k, i++, sizeof inv_dr, &inv_dr)) ||
      (e = clSetKernelArg(k, i++, sizeof n_ratio, &n_ratio)) ||
      (e = clSetKernelArg(k, i++, sizeof(cl_mem), &cl->out0.mem)) ||
      (e = clSetKernelArg(k, i++, sizeof(cl_mem), &out1)) ||
      (e = clSetKernelArg(k, i++, sizeof(cl_mem), &cl->counts.mem)) ||
      (e = clSetKernelArg(k, i++, w->local * HY_COUNT_N * sizeof(cl_ulong), NULL)) ||
      (e = clSetKernelArg(k, i++, sizeof(cl_mem), &blocks)) ||
      (e = clSetKernelArg(k, i++, sizeof w->use_blocks, &w->use_blocks)) ||
      (e = clSetKernelArg(k, i++, sizeof w->sink_stride, &w->sink_stride)))
    return e;
  return CL_SUCCESS;
}

/* The marks of the sink blocks to skip, then the walk kernel, submitted at
 * once; *t_enq: the host time from t_call to its enqueue returning. */
static int walk_launch(struct hy_cl *cl, const struct hy_cl_walk_args *a, const struct hy_walk_cfg *cfg,
                       struct walk *w, double t_call, double *t_enq, struct hy_err *err) {
  if (w->use_blocks &&
      (a->skip_items ? hy_cl_item_blocks(cl, a->slot, a->n_sink, a->skip_items, &w->ev[EV_MARK], err)
                     : hy_cl_block_mark(cl, a->slot, (cl_int)a->n_part, (cl_int)a->root, w->sink_mem, w->sink_stride,
                                        a->n_sink, cfg->r2, a->has_box ? a->box : NULL, &w->ev[EV_MARK], err)) != 0) {
    clFinish(cl->q);
    hy_cl_release_events(w->ev, EV_N);
    return -1;
  }
  cl_int e = walk_set_args(cl, a, cfg, w);
  if (e != CL_SUCCESS) {
    hy_cl_release_events(w->ev, EV_N);
    CL_CHECK(e, "clSetKernelArg(hy_walk)");
  }
  size_t global = w->n_wg * w->local;
  e = clEnqueueNDRangeKernel(cl->q, w->k, 1, NULL, &global, &w->local, 0, NULL, &w->ev[EV_KERNEL]);
  /* submitted now, not when the results are asked for (an implementation
   * may hold commands back until a flush) */
  if (e == CL_SUCCESS) e = clFlush(cl->q);
  *t_enq = hy_wtime() - t_call;
  if (e != CL_SUCCESS) {
    hy_cl_release_events(w->ev, EV_N);
    return hy_err_set(err, "OpenCL: launching hy_walk (%zu work-items) failed on %s: %s", global, cl->name,
                      hy_cl_errname(e));
  }
  return 0;
}

/* unsort: the results into the host's particle order (local sinks: in the
 * slot-0 build's key order); add_unsorted: onto those an unsort walk left
 * there (already in that order). res0, res1: where the results are then. */
static int walk_unsort(struct hy_cl *cl, const struct hy_cl_walk_args *a, struct walk *w, cl_mem *res0, cl_mem *res1,
                       struct hy_err *err) {
  *res0 = cl->out0.mem;
  *res1 = cl->out1.mem;
  if (!a->unsort && !a->add_unsorted) return 0;
  const int u_slot = a->local_sinks ? 0 : a->slot;
  if (a->unsort) cl->unsorted_n = 0; /* until this walk's results are there */
  int rc = a->unsort ? hy_cl_unsort(cl, u_slot, cl->out0.mem, cl->uout0.mem, a->n_sink, &w->ev[EV_UNSORT0], err)
                     : hy_cl_add_unsort(cl, cl->uout0.mem, cl->out0.mem, a->n_sink, w->use_blocks == 2,
                                        &w->ev[EV_UNSORT0], err);
  if (rc == 0 && w->split)
    rc = a->unsort ? hy_cl_unsort(cl, u_slot, cl->out1.mem, cl->uout1.mem, a->n_sink, &w->ev[EV_UNSORT1], err)
                   : hy_cl_add_unsort(cl, cl->uout1.mem, cl->out1.mem, a->n_sink, w->use_blocks == 2,
                                      &w->ev[EV_UNSORT1], err);
  if (rc != 0) {
    clFinish(cl->q);
    hy_cl_release_events(w->ev, EV_N);
    return -1;
  }
  *res0 = cl->uout0.mem;
  *res1 = cl->uout1.mem;
  return 0;
}

/* The results (unless they stay on the device) and the counters to the
 * host, and the wait for the walk. */
static int walk_read(struct hy_cl *cl, const struct hy_cl_walk_args *a, struct walk *w, cl_mem res0, cl_mem res1,
                     struct hy_err *err) {
  cl_int e;
  if ((a->out0 &&
       (e = clEnqueueReadBuffer(cl->q, res0, CL_FALSE, 0, w->sink_bytes, a->out0, 0, NULL, &w->ev[EV_OUT0]))) ||
      (w->split && a->out0 &&
       (e = clEnqueueReadBuffer(cl->q, res1, CL_FALSE, 0, w->sink_bytes, a->out1, 0, NULL, &w->ev[EV_OUT1]))) ||
      (e = clEnqueueReadBuffer(cl->q, cl->counts.mem, CL_FALSE, 0, w->count_bytes, w->counts_host, 0, NULL,
                               &w->ev[EV_COUNTS]))) {
    clFinish(cl->q);
    hy_cl_release_events(w->ev, EV_N);
    return hy_err_set(err, "OpenCL: reading walk results failed on %s: %s", cl->name, hy_cl_errname(e));
  }
  e = clFinish(cl->q);
  if (e != CL_SUCCESS) {
    hy_cl_release_events(w->ev, EV_N);
    return hy_err_set(err, "OpenCL: tree walk failed on %s: %s (a kernel fault or too little device memory)",
                      cl->name, hy_cl_errname(e));
  }
  return 0;
}

/* The device times of the walk's commands (profiling events). */
static void walk_times(const cl_event ev[EV_N], double t_enq, struct hy_cl_times *times) {
  times->upload = hy_cl_event_seconds(ev[EV_NODE]) + hy_cl_event_seconds(ev[EV_SINK]);
  times->kernel = hy_cl_event_seconds(ev[EV_MARK]) + hy_cl_event_seconds(ev[EV_KERNEL]) +
                  hy_cl_event_seconds(ev[EV_UNSORT0]) +
                  hy_cl_event_seconds(ev[EV_UNSORT1]);
  times->download = hy_cl_event_seconds(ev[EV_OUT0]) + hy_cl_event_seconds(ev[EV_OUT1]) + hy_cl_event_seconds(ev[EV_COUNTS]);
  times->mark = hy_cl_event_seconds(ev[EV_MARK]);
  times->unsort = hy_cl_event_seconds(ev[EV_UNSORT0]) + hy_cl_event_seconds(ev[EV_UNSORT1]);
  times->enqueue = t_enq;
  times->span = events_span(ev, EV_N);
  cl_ulong tq = 0, ts = 0, t0 = 0;
  if (clGetEventProfilingInfo(ev[EV_KERNEL], CL_PROFILING_COMMAND_QUEUED, sizeof tq, &tq, NULL) == CL_SUCCESS &&
      clGetEventProfilingInfo(ev[EV_KERNEL], CL_PROFILING_COMMAND_SUBMIT, sizeof ts, &ts, NULL) == CL_SUCCESS &&
      clGetEventProfilingInfo(ev[EV_KERNEL], CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
      tq <= ts && ts <= t0) {
    times->submit = 1e-9 * (double)(ts - tq);
    times->start = 1e-9 * (double)(t0 - ts);
  }
}

/* The interaction counts summed over the work-groups. */
static void walk_counts(const struct walk *w, uint64_t counts[2]) {
  uint64_t pp = 0, pc = 0;
  for (size_t g = 0; g < w->n_wg; g++) {
    pp += w->counts_host[HY_COUNT_N * g + HY_COUNT_PP];
    pc += w->counts_host[HY_COUNT_N * g + HY_COUNT_PC];
  }
  counts[HY_COUNT_PP] = pp;
  counts[HY_COUNT_PC] = pc;
}

int hy_cl_walk(struct hy_cl *cl, const struct hy_cl_walk_args *a, const struct hy_walk_cfg *cfg, uint64_t counts[2],
               struct hy_cl_times *times, struct hy_err *err) {
  if (cfg->nvec != cl->nvec) return hy_err_set(err, "walk: nvec %d differs from the engine's %d", cfg->nvec, cl->nvec);
  if (a->slot < 0 || a->slot > 1) return hy_err_set(err, "walk: bad tree slot %d", a->slot);
  if (hy_cl_check_int(a->n_nodes, "tree nodes", err) || hy_cl_check_int(a->n_sink, "sinks", err)) return -1;
  const double t_call = hy_wtime();
  double t_enq = 0.0;
  if (times) memset(times, 0, sizeof *times);
  if (counts) counts[0] = counts[1] = 0;
  if (a->n_sink == 0) return 0;
  struct walk w = {0};
  cl_mem res0, res1;
  if (walk_check_resident(cl, a, cfg, err) != 0 || walk_prepare(cl, a, cfg, &w, err) != 0 ||
      walk_upload(cl, a, &w, err) != 0 || walk_launch(cl, a, cfg, &w, t_call, &t_enq, err) != 0 ||
      walk_unsort(cl, a, &w, &res0, &res1, err) != 0 || walk_read(cl, a, &w, res0, res1, err) != 0)
    return -1;
  if (a->unsort) {
    cl->unsorted_slot = a->local_sinks ? 0 : a->slot;
    cl->unsorted_n = a->n_sink;
  }
  if (times) walk_times(w.ev, t_enq, times);
  hy_cl_release_events(w.ev, EV_N);
  if (counts) walk_counts(&w, counts);
  return 0;
}

/* ------------------------------------------------------------- direct */

int hy_cl_direct(struct hy_cl *cl, const float *src, size_t n_src, const float *sink, size_t n_sink, long self_base,
                 double eps, float *out, struct hy_cl_times *times, struct hy_err *err) {
  if (hy_cl_check_int(n_src, "direct sources", err) || hy_cl_check_int(n_sink, "direct sinks", err)) return -1;
  if (times) memset(times, 0, sizeof *times);
  if (n_sink == 0) return 0;
  if (get_direct_kernel(cl, err) != 0) return -1;
  size_t src_bytes = hy_size_mul_or_die(n_src ? n_src : 1, 4 * sizeof(float), "direct sources");
  size_t sink_bytes = hy_size_mul_or_die(n_sink, 4 * sizeof(float), "direct sinks");
  cl->sink_id = 0; /* the direct sum overwrites the sink buffer */
  if (hy_cl_ensure_buf(cl, &cl->dsrc, src_bytes, "direct sources", err) ||
      hy_cl_ensure_buf(cl, &cl->sink, sink_bytes, "sinks", err) || hy_cl_ensure_buf(cl, &cl->out0, sink_bytes, "forces", err))
    return -1;
  size_t kwg = 0;
  CL_CHECK(clGetKernelWorkGroupInfo(cl->direct_k, cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL),
           "clGetKernelWorkGroupInfo");
  size_t local = 128;
  if (local > kwg) local = kwg;
  if (local < 1) local = 1;
  size_t global = (n_sink + local - 1) / local * local;
  cl_event ev[4] = {0};
  cl_int e;
  if (n_src > 0) {
    e = clEnqueueWriteBuffer(cl->q, cl->dsrc.mem, CL_FALSE, 0, n_src * 4 * sizeof(float), src, 0, NULL, &ev[0]);
    if (e != CL_SUCCESS) {
      clFinish(cl->q);
      hy_cl_release_events(ev, 4);
      CL_CHECK(e, "clEnqueueWriteBuffer(direct sources)");
    }
  }
  e = clEnqueueWriteBuffer(cl->q, cl->sink.mem, CL_FALSE, 0, sink_bytes, sink, 0, NULL, &ev[1]);
  if (e != CL_SUCCESS) {
    clFinish(cl->q);
    hy_cl_release_events(ev, 4);
    CL_CHECK(e, "clEnqueueWriteBuffer(direct sinks)");
  }
  cl_int ns = (cl_int)n_src, nk = (cl_int)n_sink, sb = self_base >= 0 ? (cl_int)self_base : -1;
  cl_float eps2 = (cl_float)(eps * eps);
  cl_uint i = 0;
  if ((e = clSetKernelArg(cl->direct_k, i++, sizeof(cl_mem), &cl->dsrc.mem)) ||
      (e = clSetKernelArg(cl->direct_k, i++, sizeof ns, &ns)) ||
      (e = clSetKernelArg(cl->direct_k, i++, sizeof(cl_mem), &cl->sink.mem)) ||
      (e = clSetKernelArg(cl->direct_k, i++, sizeof nk, &nk)) ||
      (e = clSetKernelArg(cl->direct_k, i++, sizeof sb, &sb)) ||
      (e = clSetKernelArg(cl->direct_k, i++, sizeof eps2, &eps2)) ||
      (e = clSetKernelArg(cl->direct_k, i++, sizeof(cl_mem), &cl->out0.mem)) ||
      (e = clSetKernelArg(cl->direct_k, i++, local * 4 * sizeof(float), NULL))) {
    clFinish(cl->q);
    hy_cl_release_events(ev, 4);
    CL_CHECK(e, "clSetKernelArg(hy_direct)");
  }
  e = clEnqueueNDRangeKernel(cl->q, cl->direct_k, 1, NULL, &global, &local, 0, NULL, &ev[2]);
  if (e != CL_SUCCESS) {
    clFinish(cl->q);
    hy_cl_release_events(ev, 4);
    CL_CHECK(e, "clEnqueueNDRangeKernel(hy_direct)");
  }
  e = clEnqueueReadBuffer(cl->q, cl->out0.mem, CL_FALSE, 0, sink_bytes, out, 0, NULL, &ev[3]);
  if (e == CL_SUCCESS) e = clFinish(cl->q);
  if (e != CL_SUCCESS) {
    clFinish(cl->q);
    hy_cl_release_events(ev, 4);
    CL_CHECK(e, "direct sum");
  }
  if (times) {
    times->upload = hy_cl_event_seconds(ev[0]) + hy_cl_event_seconds(ev[1]);
    times->kernel = hy_cl_event_seconds(ev[2]);
    times->download = hy_cl_event_seconds(ev[3]);
  }
  hy_cl_release_events(ev, 4);
  return 0;
}

/* The double-precision reference kernel, built on first use: a device
 * without cl_khr_fp64 could not build it, so hy_cl_build_all does not. */
static int get_direct_ref_kernel(struct hy_cl *cl, struct hy_err *err) {
  if (cl->direct_ref_k) return 0;
  if (!hy_cl_has_fp64(cl))
    return hy_err_set(err, "OpenCL device %s has no double precision (cl_khr_fp64): no reference direct sum there",
                      hy_cl_dev_label(cl));
  if (!cl->direct_ref_prog &&
      hy_cl_build_program(cl, "direct.cl", hy_cl_source_direct, "-D HY_DIRECT_REF", &cl->direct_ref_prog, err) != 0)
    return -1;
  return hy_cl_kernel(cl, cl->direct_ref_prog, "hy_direct_ref", &cl->direct_ref_k, err);
}

/* The work-group size of hy_direct_ref: its tile is local memory. */
static int direct_ref_local(struct hy_cl *cl, size_t *local, struct hy_err *err) {
  size_t kwg = 0;
  CL_CHECK(clGetKernelWorkGroupInfo(cl->direct_ref_k, cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL),
           "clGetKernelWorkGroupInfo(hy_direct_ref)");
  *local = kwg < 64 ? kwg : 64;
  if (*local < 1) *local = 1;
  return 0;
}

int hy_cl_direct_ref(struct hy_cl *cl, const double *src, size_t n_src, const double *sink, size_t n_sink, double eps,
                     double *out, struct hy_err *err) {
  if (hy_cl_check_int(n_src, "reference sources", err) || hy_cl_check_int(n_sink, "reference sinks", err)) return -1;
  if (n_sink == 0) return 0;
  size_t local;
  if (get_direct_ref_kernel(cl, err) != 0 || direct_ref_local(cl, &local, err) != 0) return -1;
  const size_t src_bytes = hy_size_mul_or_die(n_src ? n_src : 1, 4 * sizeof(double), "reference sources");
  const size_t sink_bytes = hy_size_mul_or_die(n_sink, 4 * sizeof(double), "reference sinks");
  cl->sink_id = 0; /* the sink buffer is overwritten */
  if (hy_cl_ensure_buf(cl, &cl->dsrc, src_bytes, "direct sources", err) ||
      hy_cl_ensure_buf(cl, &cl->sink, sink_bytes, "sinks", err) ||
      hy_cl_ensure_buf(cl, &cl->out0, sink_bytes, "forces", err))
    return -1;
  const cl_int ns = (cl_int)n_src, nk = (cl_int)n_sink;
  const cl_double eps2 = eps * eps;
  if (hy_cl_set_args(cl, cl->direct_ref_k, "hy_direct_ref", err, M(cl->dsrc), V(ns), M(cl->sink), V(nk), V(eps2),
                     M(cl->out0), local * 4 * sizeof(double), (const void *)NULL, END) != 0)
    return -1;
  const size_t global = (n_sink + local - 1) / local * local;
  cl_int e = CL_SUCCESS;
  if (n_src > 0) e = clEnqueueWriteBuffer(cl->q, cl->dsrc.mem, CL_FALSE, 0, src_bytes, src, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clEnqueueWriteBuffer(cl->q, cl->sink.mem, CL_FALSE, 0, sink_bytes, sink, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clEnqueueNDRangeKernel(cl->q, cl->direct_ref_k, 1, NULL, &global, &local, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clEnqueueReadBuffer(cl->q, cl->out0.mem, CL_TRUE, 0, sink_bytes, out, 0, NULL, NULL);
  if (e != CL_SUCCESS) clFinish(cl->q); /* nothing queued may still read the host arrays */
  CL_CHECK(e, "the reference direct sum");
  return 0;
}

int hy_cl_unsorted_read(struct hy_cl *cl, size_t n, int split, float *out0, float *out1, struct hy_cl_times *times,
                        struct hy_err *err) {
  if (times) memset(times, 0, sizeof *times);
  if (n == 0) return 0;
  size_t bytes = hy_size_mul_or_die(n, 4 * sizeof(float), "walk results");
  if (n != cl->unsorted_n || cl->uout0.size < bytes || (split && cl->uout1.size < bytes))
    return hy_err_set(err, "internal error: reading %zu walk results that are not on the device", n);
  cl_event ev[2] = {0};
  cl_int e;
  if ((e = clEnqueueReadBuffer(cl->q, cl->uout0.mem, CL_FALSE, 0, bytes, out0, 0, NULL, &ev[0])) != CL_SUCCESS ||
      (split && (e = clEnqueueReadBuffer(cl->q, cl->uout1.mem, CL_FALSE, 0, bytes, out1, 0, NULL, &ev[1])) !=
                    CL_SUCCESS) ||
      (e = clFinish(cl->q)) != CL_SUCCESS) {
    clFinish(cl->q);
    hy_cl_release_events(ev, 2);
    return hy_err_set(err, "OpenCL: reading walk results failed on %s: %s", cl->name, hy_cl_errname(e));
  }
  if (times) times->download = hy_cl_event_seconds(ev[0]) + hy_cl_event_seconds(ev[1]);
  hy_cl_release_events(ev, 2);
  return 0;
}
