/* SPDX-License-Identifier: GPL-3.0-or-later
 * cl_core.c: the OpenCL engine's base layer (cl_core.h): buffers and host
 * staging memory, programs and kernels, events, launches, and the scan and
 * sort of build.cl that the device tree build, the LET selection and the
 * device state all use. Every cl* call is checked. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cl_core.h"
#include "trace.h"

extern const char hy_cl_source_build[];
extern const unsigned long hy_cl_source_build_len;

/* ----------------------------------------------------------- buffers */

void hy_cl_buf_release(struct cl_buf *b) {
  if (b->mem) clReleaseMemObject(b->mem);
  b->mem = NULL;
  b->size = 0;
}

void hy_cl_mem_lock(struct hy_cl *cl) {
  if (cl->mem_lock_ok && pthread_mutex_lock(&cl->mem_lock) != 0) hy_die("OpenCL engine: pthread_mutex_lock failed");
}

void hy_cl_mem_unlock(struct hy_cl *cl) {
  if (cl->mem_lock_ok && pthread_mutex_unlock(&cl->mem_lock) != 0)
    hy_die("OpenCL engine: pthread_mutex_unlock failed");
}

static int ensure_buf_locked(struct hy_cl *cl, struct cl_buf *b, size_t bytes, const char *label,
                             struct hy_err *err);

/* The buffer bookkeeping (in_use) under mem_lock: a build on the side queue
 * (hy_cl_tree_build_side) may grow its buffers while another thread's walk
 * grows its own. */
int hy_cl_ensure_buf(struct hy_cl *cl, struct cl_buf *b, size_t bytes, const char *label, struct hy_err *err) {
  if (bytes == 0) bytes = 16;
  if (b->mem && b->size >= bytes) return 0;
  hy_cl_mem_lock(cl);
  const int rc = ensure_buf_locked(cl, b, bytes, label, err);
  hy_cl_mem_unlock(cl);
  return rc;
}

static int ensure_buf_locked(struct hy_cl *cl, struct cl_buf *b, size_t bytes, const char *label,
                             struct hy_err *err) {
  size_t want = bytes + bytes / 4;
  if (want > cl->max_alloc) want = bytes;
  if (bytes > cl->max_alloc)
    return hy_err_set(err,
                      "OpenCL device %s: buffer '%s' needs %zu bytes but the device allows at most %llu bytes per "
                      "allocation (%llu bytes of global memory); use more ranks or a larger device",
                      cl->name, label, bytes, (unsigned long long)cl->max_alloc,
                      (unsigned long long)cl->global_mem);
  size_t others = cl->in_use - b->size;
  if (others + bytes > cl->mem_limit)
    return hy_err_set(err,
                      "OpenCL device %s: out of device memory: buffer '%s' needs %zu bytes, %zu of the %zu bytes "
                      "are free (%zu in use by other buffers); use more ranks or a device with more memory",
                      cl->name, label, bytes, others < cl->mem_limit ? cl->mem_limit - others : 0, cl->mem_limit,
                      others);
  if (others + want > cl->mem_limit) want = bytes;
  cl->in_use = others;
  hy_cl_buf_release(b);
  cl_int e;
  b->mem = clCreateBuffer(cl->ctx, CL_MEM_READ_WRITE, want, NULL, &e);
  if (e != CL_SUCCESS) {
    b->mem = NULL;
    return hy_err_set(err,
                      "OpenCL device %s: cannot allocate buffer '%s' of %zu bytes (%s); the device has %llu bytes "
                      "of global memory",
                      cl->name, label, want, hy_cl_errname(e), (unsigned long long)cl->global_mem);
  }
  b->size = want;
  cl->in_use += want;
  return 0;
}

int hy_cl_ensure_buf_keep(struct hy_cl *cl, struct cl_buf *b, size_t bytes, size_t keep, const char *label,
                       struct hy_err *err) {
  if (b->mem && b->size >= bytes) return 0;
  struct cl_buf old = *b;
  b->mem = NULL;
  b->size = 0;
  if (hy_cl_ensure_buf(cl, b, bytes, label, err) != 0) {
    *b = old;
    return -1;
  }
  cl_int e = keep ? clEnqueueCopyBuffer(hy_cl_queue(cl), old.mem, b->mem, 0, 0, keep, 0, NULL, NULL) : CL_SUCCESS;
  if (e == CL_SUCCESS) e = clFinish(hy_cl_queue(cl));
  hy_cl_mem_lock(cl);
  cl->in_use -= old.size;
  hy_cl_mem_unlock(cl);
  hy_cl_buf_release(&old);
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: copying '%s' into a larger buffer failed on %s: %s", label, cl->name,
                      hy_cl_errname(e));
  return 0;
}

int hy_cl_check_int(size_t v, const char *what, struct hy_err *err) {
  if (v > (size_t)INT_MAX) return hy_err_set(err, "OpenCL: %s = %zu exceeds the 32-bit range of the kernels", what, v);
  return 0;
}

/* Unmapped and released without a wait: the unmap follows the transfers
 * queued before it on this thread's queue, and OpenCL frees the memory only
 * when every command that uses it has finished (a wait here would hold the
 * caller until the queue's walk or build ends). */
static void pinned_release(struct hy_cl *cl, struct cl_pinned *h) {
  if (h->mem && h->ptr) (void)clEnqueueUnmapMemObject(hy_cl_queue(cl), h->mem, h->ptr, 0, NULL, NULL);
  if (h->mem) clReleaseMemObject(h->mem);
  memset(h, 0, sizeof *h);
}

void *hy_cl_host_buffer(struct hy_cl *cl, int which, size_t bytes, struct hy_err *err) {
  if (which < 0 || which >= HY_CL_HOST_N) {
    hy_err_set(err, "internal error: host buffer %d", which);
    return NULL;
  }
  struct cl_pinned *h = &cl->host[which];
  if (bytes == 0) bytes = 16;
  if (h->ptr && h->size >= bytes) return h->ptr;
  const double t0 = hy_trace_t();
  pinned_release(cl, h);
  size_t want = bytes + bytes / 8;
  if (want > cl->max_alloc) want = bytes;
  cl_int e;
  h->mem = clCreateBuffer(cl->ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, want, NULL, &e);
  if (e != CL_SUCCESS) {
    h->mem = NULL;
    hy_err_set(err, "OpenCL: cannot allocate %zu bytes of host staging memory for %s: %s", want, cl->name,
               hy_cl_errname(e));
    return NULL;
  }
  /* mapped on the engine's map queue: a new buffer needs no other command
   * first, and on the queue of the caller the map would wait for its walk */
  h->ptr = clEnqueueMapBuffer(cl->qm, h->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, want, 0, NULL, NULL, &e);
  if (e != CL_SUCCESS || !h->ptr) {
    h->ptr = NULL;
    pinned_release(cl, h);
    hy_err_set(err, "OpenCL: cannot map %zu bytes of host staging memory for %s: %s", want, cl->name,
               hy_cl_errname(e));
    return NULL;
  }
  h->size = want;
  /* on the lane of the thread that grows it: walks' counts on the device thread's */
  hy_trace(which == HY_CL_HOST_COUNTS ? HY_TRACE_DEVICE : HY_TRACE_MAIN, "pinned_grow", t0);
  return h->ptr;
}

size_t hy_cl_host_buffer_size(const struct hy_cl *cl, int which) {
  if (which < 0 || which >= HY_CL_HOST_N || !cl->host[which].ptr) return 0;
  return cl->host[which].size;
}

/* ------------------------------------------------ programs and kernels */

static char *read_kernel_file(const char *dir, const char *file, struct hy_err *err) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path) {
    hy_err_set(err, "HYTREE_KERNEL_DIR: path too long");
    return NULL;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    hy_err_set(err, "HYTREE_KERNEL_DIR: cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 65536, n = 0;
  char *buf = hy_malloc("kernel source", cap, 1);
  size_t r;
  while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (n + 1 == cap) {
      cap *= 2;
      buf = hy_realloc("kernel source", buf, cap, 1);
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    hy_free(buf);
    hy_err_set(err, "HYTREE_KERNEL_DIR: cannot read %s", path);
    return NULL;
  }
  buf[n] = '\0';
  return buf;
}

int hy_cl_build_program(struct hy_cl *cl, const char *file, const char *embedded, const char *defines,
                         cl_program *out, struct hy_err *err) {
  const char *dir = getenv("HYTREE_KERNEL_DIR");
  char *disk = NULL;
  const char *src = embedded;
  char options[8192];
  if (dir && *dir) {
    disk = read_kernel_file(dir, file, err);
    if (!disk) return -1;
    src = disk;
    snprintf(options, sizeof options, "-cl-std=CL1.2 -I %s %s", dir, defines);
  } else {
    snprintf(options, sizeof options, "-cl-std=CL1.2 %s", defines);
  }
  cl_int e;
  cl_program prog = clCreateProgramWithSource(cl->ctx, 1, &src, NULL, &e);
  hy_free(disk);
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: clCreateProgramWithSource(%s) failed on %s: %s", file, cl->name,
                      hy_cl_errname(e));
  e = clBuildProgram(prog, 1, &cl->device, options, NULL, NULL);
  if (e != CL_SUCCESS) {
    size_t log_size = 0;
    char *log = NULL;
    if (clGetProgramBuildInfo(prog, cl->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &log_size) == CL_SUCCESS &&
        log_size > 0) {
      log = hy_malloc("OpenCL build log", log_size + 1, 1);
      if (clGetProgramBuildInfo(prog, cl->device, CL_PROGRAM_BUILD_LOG, log_size, log, NULL) != CL_SUCCESS)
        log[0] = '\0';
      log[log_size] = '\0';
    }
    fflush(stdout);
    fprintf(stderr, "hytree: OpenCL build log for %s on %s (options: %s%s):\n%s\n", file, cl->name, options,
            dir && *dir ? "; source from HYTREE_KERNEL_DIR" : "; embedded source", log ? log : "(empty)");
    fflush(stderr);
    hy_free(log);
    clReleaseProgram(prog);
    return hy_err_set(err, "OpenCL: building %s for %s failed: %s (options: %s); the build log is above", file,
                      cl->name, hy_cl_errname(e), options);
  }
  *out = prog;
  return 0;
}

int hy_cl_kernel(struct hy_cl *cl, cl_program prog, const char *name, cl_kernel *k, struct hy_err *err) {
  cl_int e;
  *k = clCreateKernel(prog, name, &e);
  if (e != CL_SUCCESS) {
    *k = NULL;
    return hy_err_set(err, "OpenCL: clCreateKernel(%s) failed on %s: %s", name, cl->name, hy_cl_errname(e));
  }
  return 0;
}

int hy_cl_has_fp64(struct hy_cl *cl) {
  if (cl->has_fp64 == 0) { /* 0: not asked yet, 1: no, 2: yes */
    size_t size = 0;
    cl->has_fp64 = 1;
    if (clGetDeviceInfo(cl->device, CL_DEVICE_EXTENSIONS, 0, NULL, &size) == CL_SUCCESS && size > 0) {
      char *ext = hy_malloc("OpenCL extensions", size + 1, 1);
      if (clGetDeviceInfo(cl->device, CL_DEVICE_EXTENSIONS, size, ext, NULL) == CL_SUCCESS) {
        ext[size] = '\0';
        if (strstr(ext, "cl_khr_fp64")) cl->has_fp64 = 2;
      }
      hy_free(ext);
    }
  }
  return cl->has_fp64 == 2;
}

static int make_kernel(struct hy_cl *cl, const char *name, cl_kernel *k, struct hy_err *err) {
  return hy_cl_kernel(cl, cl->build_prog, name, k, err);
}

int hy_cl_build_kernels(struct hy_cl *cl, struct hy_err *err) {
  if (cl->build_prog) return 0;
  size_t wg = 256;
  while (wg > cl->max_wg) wg /= 2;
  if (wg < 16)
    return hy_err_set(err, "OpenCL device %s: work-groups of %zu work-items are too small for the device tree build "
                           "(16 needed); use TreeBuild host", cl->name, cl->max_wg);
  char defs[256];
  snprintf(defs, sizeof defs,
           "-D HY_WG=%zu -D HY_PER=%d -D HY_BMAX_EXACT=%d -D HY_BMAX_SERIAL=%d -D HY_GEN_FLAG=%d -D HY_BOX1=%du", wg,
           SORT_PER, HY_BMAX_EXACT, BMAX_SERIAL, GEN_TABLE - 1, BOX_SMALL);
  if (hy_cl_build_program(cl, "build.cl", hy_cl_source_build, defs, &cl->build_prog, err) != 0) return -1;
  cl->build_wg = wg;
  if (make_kernel(cl, "hy_scan_block", &cl->k_scan_block, err) ||
      make_kernel(cl, "hy_scan_add", &cl->k_scan_add, err) || make_kernel(cl, "hy_radix_count", &cl->k_count, err) ||
      make_kernel(cl, "hy_radix_scatter", &cl->k_scatter, err) ||
      make_kernel(cl, "hy_tile_sort", &cl->k_tile_sort, err) ||
      make_kernel(cl, "hy_merge_pass", &cl->k_merge_pass, err))
    return -1;
  /* the sort and scan kernels need their full work-group */
  cl_kernel need[] = {cl->k_scan_block, cl->k_count, cl->k_scatter, cl->k_tile_sort};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
    size_t kwg = 0;
    CL_CHECK(clGetKernelWorkGroupInfo(need[i], cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL),
             "clGetKernelWorkGroupInfo(build.cl)");
    if (kwg < wg)
      return hy_err_set(err, "OpenCL device %s: the device tree build needs work-groups of %zu but allows %zu; use "
                             "TreeBuild host", cl->name, wg, kwg);
  }
  return 0;
}

_Thread_local int hy_cl_on_side;

int hy_cl_side_queue(struct hy_cl *cl, struct hy_err *err) {
  if (cl->q2) return 0; /* made here, once: only distributed runs on a device need it */
  cl_int e;
  cl->q2 = clCreateCommandQueue(cl->ctx, cl->device, CL_QUEUE_PROFILING_ENABLE, &e);
  if (e != CL_SUCCESS) {
    cl->q2 = NULL;
    return hy_err_set(err, "OpenCL: clCreateCommandQueue (second queue) failed on %s: %s", cl->name,
                      hy_cl_errname(e));
  }
  return 0;
}

/* ------------------------------------------------------------- events */

double hy_cl_event_seconds(cl_event ev) {
  cl_ulong t0 = 0, t1 = 0;
  if (!ev) return 0.0;
  if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) != CL_SUCCESS) return 0.0;
  if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) != CL_SUCCESS) return 0.0;
  return t1 > t0 ? 1e-9 * (double)(t1 - t0) : 0.0;
}

void hy_cl_release_events(cl_event *ev, int n) {
  for (int i = 0; i < n; i++)
    if (ev[i]) clReleaseEvent(ev[i]);
}

void hy_cl_ev_close(struct cl_evlist *l) {
  if (!l->open) return;
  l->open = 0;
  cl_event *end = &l->ev[2 * (l->n - 1) + 1];
  if (clEnqueueMarkerWithWaitList(l->q, 0, NULL, end) != CL_SUCCESS) *end = NULL;
}

cl_event *hy_cl_ev_new(struct cl_evlist *l, int phase) {
  if (l->open && l->phase[l->n - 1] == phase) return NULL;
  hy_cl_ev_close(l);
  if (l->n == l->cap) {
    l->cap = 2 * l->cap + 16;
    l->ev = hy_realloc("OpenCL events", l->ev, l->cap, 2 * sizeof *l->ev);
    l->phase = hy_realloc("OpenCL events", l->phase, l->cap, sizeof *l->phase);
  }
  l->ev[2 * l->n] = l->ev[2 * l->n + 1] = NULL;
  l->phase[l->n] = phase;
  l->n++;
  l->open = 1;
  return &l->ev[2 * (l->n - 1)];
}

void hy_cl_ev_finish(struct cl_evlist *l, double t[PH_N]) {
  hy_cl_ev_close(l);
  for (size_t i = 0; i < l->n; i++) {
    cl_event a = l->ev[2 * i], b = l->ev[2 * i + 1];
    cl_ulong t0 = 0, t1 = 0;
    if (t && a && b && clGetEventProfilingInfo(a, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) == CL_SUCCESS &&
        clGetEventProfilingInfo(b, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) == CL_SUCCESS && t1 > t0)
      t[l->phase[i]] += 1e-9 * (double)(t1 - t0);
    if (a) clReleaseEvent(a);
    if (b) clReleaseEvent(b);
  }
  hy_free(l->ev);
  hy_free(l->phase);
  memset(l, 0, sizeof *l);
}

/* ------------------------------------------------- launch, scan, sort */

int hy_cl_set_args(struct hy_cl *cl, cl_kernel k, const char *name, struct hy_err *err, ...) {
  va_list ap;
  va_start(ap, err);
  for (cl_uint i = 0;; i++) {
    size_t size = va_arg(ap, size_t);
    if (size == 0) break;
    const void *val = va_arg(ap, const void *);
    cl_int e = clSetKernelArg(k, i, size, val);
    if (e != CL_SUCCESS) {
      va_end(ap);
      return hy_err_set(err, "OpenCL: clSetKernelArg(%s, %u) failed on %s: %s", name, (unsigned)i, cl->name,
                        hy_cl_errname(e));
    }
  }
  va_end(ap);
  return 0;
}

int hy_cl_launch(struct hy_cl *cl, cl_kernel k, const char *name, size_t items, cl_event *ev, struct hy_err *err) {
  size_t local = cl->build_wg;
  size_t global = (items + local - 1) / local * local;
  if (global == 0) global = local;
  cl_int e = clEnqueueNDRangeKernel(hy_cl_queue(cl), k, 1, NULL, &global, &local, 0, NULL, ev);
  if (e != CL_SUCCESS)
    return hy_err_set(err, "OpenCL: launching %s (%zu work-items) failed on %s: %s", name, global, cl->name,
                      hy_cl_errname(e));
  return 0;
}

struct cl_buf *hy_cl_sort_hist(struct hy_cl *cl) { return hy_cl_on_side ? &cl->hist_side : &cl->hist; }

/* Exclusive scan in place of n values of data (uint), using scan level `level`. */
static int scan(struct hy_cl *cl, cl_mem data, size_t n, int level, struct cl_evlist *ev, int phase,
                struct hy_err *err) {
  if (level >= HY_CL_SCAN_LEVELS) return hy_err_set(err, "internal error: device scan of %zu values too deep", n);
  const size_t block = 4 * cl->build_wg;
  const size_t nb = (n + block - 1) / block;
  /* the second queue's commands run beside the first's: sums of their own */
  struct cl_buf *sums = hy_cl_on_side ? &cl->scan_side[level] : &cl->scan[level];
  if (hy_cl_ensure_buf(cl, sums, nb * sizeof(cl_uint), "scan partial sums", err) != 0) return -1;
  cl_uint un = (cl_uint)n;
  if (hy_cl_set_args(cl, cl->k_scan_block, "hy_scan_block", err, sizeof(cl_mem), (const void *)&data, V(un),
               M(*sums), END) ||
      hy_cl_launch(cl, cl->k_scan_block, "hy_scan_block", nb * cl->build_wg, hy_cl_ev_new(ev, phase), err))
    return -1;
  if (nb == 1) return 0;
  if (scan(cl, sums->mem, nb, level + 1, ev, phase, err) != 0) return -1;
  if (hy_cl_set_args(cl, cl->k_scan_add, "hy_scan_add", err, sizeof(cl_mem), (const void *)&data, V(un),
               M(*sums), END) ||
      hy_cl_launch(cl, cl->k_scan_add, "hy_scan_add", n, hy_cl_ev_new(ev, phase), err))
    return -1;
  return 0;
}

/* Sort of n (key, val) pairs by merging (hy_tile_sort, hy_merge_pass in
 * build.cl): the order of (key, val), which is the stable order of the keys
 * when val grows with the position or the keys are distinct, as in every
 * caller. kb[0], ib[0] -> sorted back into kb[0], ib[0]; kb[1], ib[1] are
 * scratch. */
static int merge_sort_pairs(struct hy_cl *cl, struct cl_buf *kb[2], struct cl_buf *ib[2], size_t n,
                            struct cl_evlist *ev, int phase, struct hy_err *err) {
  const size_t tile = 4 * cl->build_wg; /* HY_MTILE */
  const cl_uint un = (cl_uint)n;
  if (hy_cl_set_args(cl, cl->k_tile_sort, "hy_tile_sort", err, M(*kb[0]), M(*ib[0]), V(un), END) ||
      hy_cl_launch(cl, cl->k_tile_sort, "hy_tile_sort", (n + tile - 1) / tile * cl->build_wg, hy_cl_ev_new(ev, phase),
                   err))
    return -1;
  int s = 0;
  for (size_t w = tile; w < n; w *= 2) {
    const cl_uint uw = (cl_uint)w;
    if (hy_cl_set_args(cl, cl->k_merge_pass, "hy_merge_pass", err, M(*kb[s]), M(*ib[s]), V(un), V(uw),
                       M(*kb[1 - s]), M(*ib[1 - s]), END) ||
        hy_cl_launch(cl, cl->k_merge_pass, "hy_merge_pass", n, hy_cl_ev_new(ev, phase), err))
      return -1;
    s = 1 - s;
  }
  if (s == 1) {
    cl_int e;
    if ((e = clEnqueueCopyBuffer(hy_cl_queue(cl), kb[1]->mem, kb[0]->mem, 0, 0, n * 8, 0, NULL,
                                 hy_cl_ev_new(ev, phase))) != CL_SUCCESS ||
        (e = clEnqueueCopyBuffer(hy_cl_queue(cl), ib[1]->mem, ib[0]->mem, 0, 0, n * 4, 0, NULL,
                                 hy_cl_ev_new(ev, phase))) != CL_SUCCESS)
      return hy_err_set(err, "OpenCL: copying %zu sorted pairs failed on %s: %s", n, cl->name, hy_cl_errname(e));
  }
  return 0;
}

/* Stable LSD radix sort of n (key, val) pairs by the key's low `bits` bits
 * (kb[0], ib[0] -> sorted back into kb[0], ib[0]; kb[1], ib[1] are scratch),
 * HY_RADIX_BITS per pass, an even number of passes. cl->hist (on the
 * second queue cl->hist_side) must hold RADIX entries per sort tile. */
int hy_cl_sort_pairs_ev(struct hy_cl *cl, struct cl_buf *kb[2], struct cl_buf *ib[2], size_t n, unsigned bits,
                        struct cl_evlist *ev, int phase, struct hy_err *err) {
  if (n <= cl->merge_sort_max) return merge_sort_pairs(cl, kb, ib, n, ev, phase, err);
  const size_t tile = cl->build_wg * SORT_PER;
  const size_t n_tiles = (n + tile - 1) / tile;
  unsigned passes = (bits + RADIX_BITS - 1) / RADIX_BITS;
  passes += passes & 1u; /* the result lands in the first pair */
  const cl_uint un = (cl_uint)n;
  const struct cl_buf *hist = hy_cl_sort_hist(cl); /* as scan's sums */
  int s = 0;
  for (cl_uint shift = 0; shift < passes * RADIX_BITS; shift += RADIX_BITS) {
    if (hy_cl_set_args(cl, cl->k_count, "hy_radix_count", err, M(*kb[s]), V(un), V(shift), M(*hist), END) ||
        hy_cl_launch(cl, cl->k_count, "hy_radix_count", n_tiles * cl->build_wg, hy_cl_ev_new(ev, phase), err) ||
        scan(cl, hist->mem, n_tiles * RADIX, 0, ev, phase, err) ||
        hy_cl_set_args(cl, cl->k_scatter, "hy_radix_scatter", err, M(*kb[s]), M(*ib[s]), V(un), V(shift),
                 M(*hist), M(*kb[1 - s]), M(*ib[1 - s]), END) ||
        hy_cl_launch(cl, cl->k_scatter, "hy_radix_scatter", n_tiles * cl->build_wg, hy_cl_ev_new(ev, phase), err))
      return -1;
    s = 1 - s;
  }
  return 0;
}

size_t hy_cl_merge_sort_default(const struct hy_cl *cl) { return (cl->type & CL_DEVICE_TYPE_GPU) ? SIZE_MAX : 0; }

void hy_cl_set_merge_sort_max(struct hy_cl *cl, size_t max) { cl->merge_sort_max = max; }

int hy_cl_scan(struct hy_cl *cl, cl_mem data, size_t n, struct hy_err *err) {
  if (n == 0) return 0;
  if (hy_cl_build_kernels(cl, err) != 0 || hy_cl_check_int(n, "scan", err)) return -1;
  struct cl_evlist ev = {.q = hy_cl_queue(cl)};
  int rc = scan(cl, data, n, 0, &ev, PH_SORT, err);
  if (rc != 0) clFinish(hy_cl_queue(cl));
  hy_cl_ev_finish(&ev, NULL);
  return rc;
}

int hy_cl_sort_pairs(struct hy_cl *cl, struct cl_buf *kb[2], struct cl_buf *ib[2], size_t n, unsigned bits,
                     struct hy_err *err) {
  if (n < 2) return 0;
  if (hy_cl_build_kernels(cl, err) != 0 || hy_cl_check_int(n, "sort pairs", err)) return -1;
  const size_t tile = cl->build_wg * SORT_PER;
  const size_t n_tiles = (n + tile - 1) / tile;
  if (hy_cl_ensure_buf(cl, hy_cl_sort_hist(cl), hy_size_mul_or_die(n_tiles, RADIX * 4, "sort histogram"),
                       "sort histogram", err) != 0)
    return -1;
  struct cl_evlist ev = {.q = hy_cl_queue(cl)};
  int rc = hy_cl_sort_pairs_ev(cl, kb, ib, n, bits, &ev, PH_SORT, err);
  if (rc != 0) clFinish(hy_cl_queue(cl));
  hy_cl_ev_finish(&ev, NULL);
  return rc;
}

/* --------------------------------------------------------------- free */

void hy_cl_core_free(struct hy_cl *cl) {
  cl_kernel ks[] = {cl->k_scan_block, cl->k_scan_add, cl->k_count, cl->k_scatter, cl->k_tile_sort, cl->k_merge_pass};
  for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
    if (ks[i]) clReleaseKernel(ks[i]);
  if (cl->build_prog) clReleaseProgram(cl->build_prog);
  struct cl_buf *bs[] = {&cl->key[0], &cl->key[1], &cl->idx_tmp, &cl->hist, &cl->hist_side};
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++) hy_cl_buf_release(bs[i]);
  for (int i = 0; i < HY_CL_SCAN_LEVELS; i++) {
    hy_cl_buf_release(&cl->scan[i]);
    hy_cl_buf_release(&cl->scan_side[i]);
  }
  for (int i = 0; i < HY_CL_HOST_N; i++) pinned_release(cl, &cl->host[i]);
}
