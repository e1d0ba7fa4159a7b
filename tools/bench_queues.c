/* SPDX-License-Identifier: GPL-3.0-or-later */
/* bench_queues: what a second in-order command queue of the same context can
 * do while a long kernel runs on the first (not a test; doc/performance.md,
 * nineteenth session). hytree's distributed steps put the remote tree's build,
 * the decomposition's reads and the presort on a second queue beside the
 * walks; this measures, on the device of the given type, how long such work
 * waits:
 *   - small blocking transfers (a 4-byte read, a 256 KiB write) from pageable
 *     and from page-locked host memory;
 *   - one tiny kernel, then a finish of the second queue;
 *   - a chain of 30 kernels of 300 000 work-items each: queued at once, or
 *     with a blocking 4-byte read after every third (as a build that reads a
 *     count between its kernels).
 * The long kernel takes about 12 ms alone and is launched with 1/4, 1/2, 1,
 * 8 and 64 times the work-items the device holds at once. Times are wall-clock from
 * the second queue's first command (0.5 ms after the long kernel's launch).
 *
 * usage: tools/bench_queues [-d gpu|cpu|any]   (OCL_ICD_FILENAMES picks the
 * implementation where several are installed) */
#include "config.h"

#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  if (clock_gettime(CLOCK_MONOTONIC, &t) != 0) {
    perror("bench_queues: clock_gettime");
    exit(1);
  }
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void check(cl_int e, const char *what) {
  if (e != CL_SUCCESS) {
    fprintf(stderr, "bench_queues: %s failed: OpenCL error %d\n", what, (int)e);
    exit(1);
  }
}

static void pause_ms(double ms) {
  const double t_end = now() + 1e-3 * ms;
  while (now() < t_end) {
  }
}

static const char *src =
    "__kernel void bq_spin(__global float *a, int iters) {\n"
    "  size_t i = get_global_id(0); float x = a[i];\n"
    "  for (int k = 0; k < iters; k++) x = x * 0.9999f + 0.0001f;\n"
    "  a[i] = x; }\n"
    "__kernel void bq_bump(__global float *a, int n) {\n"
    "  size_t i = get_global_id(0); if (i < (size_t)n) a[i] = a[i] * 0.5f + 1.0f; }\n";

struct ctx {
  cl_command_queue qa, qb;
  cl_kernel spin, step;
  cl_mem small;
  size_t g_spin, l_spin;
  void *pageable, *locked;
};

enum { T_READ_PAGEABLE, T_READ_LOCKED, T_WRITE_PAGEABLE, T_WRITE_LOCKED, T_TINY, T_CHAIN, T_CHAIN_READS, T_N };
static const char *const t_name[T_N] = {"4-byte blocking read, pageable",   "4-byte blocking read, page-locked",
                                        "256 KiB blocking write, pageable", "256 KiB blocking write, page-locked",
                                        "one tiny kernel, finish",          "30 kernels queued at once, finish",
                                        "30 kernels, a blocking read after every third"};

/* The second queue's work of test t; returns its wall time. */
static double second_queue(struct ctx *c, int t) {
  const size_t g_step = 300032, g_tiny = 64;
  const double t0 = now();
  switch (t) {
  case T_READ_PAGEABLE:
  case T_READ_LOCKED:
    check(clEnqueueReadBuffer(c->qb, c->small, CL_TRUE, 0, 4, t == T_READ_LOCKED ? c->locked : c->pageable, 0, NULL,
                              NULL),
          "clEnqueueReadBuffer");
    break;
  case T_WRITE_PAGEABLE:
  case T_WRITE_LOCKED:
    check(clEnqueueWriteBuffer(c->qb, c->small, CL_TRUE, 0, 1 << 18, t == T_WRITE_LOCKED ? c->locked : c->pageable, 0,
                               NULL, NULL),
          "clEnqueueWriteBuffer");
    break;
  case T_TINY:
    check(clEnqueueNDRangeKernel(c->qb, c->step, 1, NULL, &g_tiny, NULL, 0, NULL, NULL), "launching step");
    check(clFinish(c->qb), "clFinish");
    break;
  default:
    for (int k = 0; k < 30; k++) {
      check(clEnqueueNDRangeKernel(c->qb, c->step, 1, NULL, &g_step, NULL, 0, NULL, NULL), "launching step");
      if (t == T_CHAIN_READS && k % 3 == 2)
        check(clEnqueueReadBuffer(c->qb, c->small, CL_TRUE, 0, 4, c->locked, 0, NULL, NULL), "clEnqueueReadBuffer");
    }
    check(clFinish(c->qb), "clFinish");
  }
  return now() - t0;
}

static double spin_alone(struct ctx *c) {
  const double t0 = now();
  check(clEnqueueNDRangeKernel(c->qa, c->spin, 1, NULL, &c->g_spin, &c->l_spin, 0, NULL, NULL), "launching spin");
  check(clFinish(c->qa), "clFinish");
  return now() - t0;
}

int main(int argc, char **argv) {
  cl_device_type type = CL_DEVICE_TYPE_GPU;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-d") == 0 && i + 1 < argc) {
      const char *v = argv[++i];
      type = strcmp(v, "gpu") == 0   ? CL_DEVICE_TYPE_GPU
             : strcmp(v, "cpu") == 0 ? CL_DEVICE_TYPE_CPU
             : strcmp(v, "any") == 0 ? CL_DEVICE_TYPE_ALL
                                     : 0;
      if (!type) {
        fprintf(stderr, "bench_queues: -d takes gpu, cpu or any, not '%s'\n", v);
        return 2;
      }
    } else {
      fprintf(stderr, "usage: %s [-d gpu|cpu|any]\n", argv[0]);
      return 2;
    }
  }
  cl_uint np = 0;
  check(clGetPlatformIDs(0, NULL, &np), "clGetPlatformIDs");
  cl_platform_id *pl = malloc((np ? np : 1) * sizeof *pl);
  if (!pl) {
    fprintf(stderr, "bench_queues: out of memory\n");
    return 1;
  }
  check(clGetPlatformIDs(np, pl, NULL), "clGetPlatformIDs");
  cl_device_id dev = NULL;
  for (cl_uint p = 0; p < np && !dev; p++)
    if (clGetDeviceIDs(pl[p], type, 1, &dev, NULL) != CL_SUCCESS) dev = NULL;
  free(pl);
  if (!dev) {
    fprintf(stderr, "bench_queues: no OpenCL device of the requested type\n");
    return 1;
  }
  char name[256] = "";
  cl_uint cu = 0;
  size_t wg_max = 0;
  check(clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name - 1, name, NULL), "clGetDeviceInfo");
  check(clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL), "clGetDeviceInfo");
  check(clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg_max, &wg_max, NULL), "clGetDeviceInfo");
  cl_int e;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
  check(e, "clCreateContext");
  struct ctx c = {0};
  c.qa = clCreateCommandQueue(ctx, dev, 0, &e);
  check(e, "clCreateCommandQueue");
  c.qb = clCreateCommandQueue(ctx, dev, 0, &e);
  check(e, "clCreateCommandQueue");
  cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
  check(e, "clCreateProgramWithSource");
  check(clBuildProgram(prog, 1, &dev, "", NULL, NULL), "clBuildProgram");
  c.spin = clCreateKernel(prog, "bq_spin", &e);
  check(e, "clCreateKernel(spin)");
  c.step = clCreateKernel(prog, "bq_bump", &e);
  check(e, "clCreateKernel(step)");
  const int n_step = 300000;
  cl_mem buf_step = clCreateBuffer(ctx, CL_MEM_READ_WRITE, (size_t)n_step * 4, NULL, &e);
  check(e, "clCreateBuffer");
  c.small = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 1 << 18, NULL, &e);
  check(e, "clCreateBuffer");
  cl_mem pin = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, 1 << 18, NULL, &e);
  check(e, "clCreateBuffer(page-locked)");
  c.locked = clEnqueueMapBuffer(c.qb, pin, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, 1 << 18, 0, NULL, NULL, &e);
  check(e, "clEnqueueMapBuffer");
  c.pageable = calloc(1, 1 << 18);
  if (!c.pageable) {
    fprintf(stderr, "bench_queues: out of memory\n");
    return 1;
  }
  memset(c.locked, 0, 1 << 18);
  check(clSetKernelArg(c.step, 0, sizeof buf_step, &buf_step), "clSetKernelArg");
  check(clSetKernelArg(c.step, 1, sizeof n_step, &n_step), "clSetKernelArg");
  c.l_spin = wg_max < 256 ? wg_max : 256;
  printf("device: %s, %u compute units\n", name, cu);
  char ext[8192] = "";
  if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, NULL) != CL_SUCCESS) ext[0] = '\0';
  printf("cl_khr_priority_hints: %s\n", strstr(ext, "cl_khr_priority_hints") ? "yes" : "no");
  /* the long kernel's size in waves of 2048 resident work-items per compute
   * unit (an NVIDIA SM's limit): a quarter and a half of one wave leave
   * room on every compute unit, as a walk launched narrower would (tried and
   * dropped, doc/performance.md, twentieth session) */
  static const double fills[] = {0.25, 0.5, 1.0, 8.0, 64.0};
  for (size_t fi = 0; fi < sizeof fills / sizeof fills[0]; fi++) {
    const double waves = fills[fi];
    c.g_spin = (size_t)((double)cu * 2048.0 * waves) / c.l_spin * c.l_spin;
    cl_mem big = clCreateBuffer(ctx, CL_MEM_READ_WRITE, c.g_spin * 4, NULL, &e);
    check(e, "clCreateBuffer");
    check(clSetKernelArg(c.spin, 0, sizeof big, &big), "clSetKernelArg");
    int iters = 256;
    check(clSetKernelArg(c.spin, 1, sizeof iters, &iters), "clSetKernelArg");
    (void)spin_alone(&c); /* a first launch may compile */
    double t = 0.0;
    for (;;) { /* calibrate to about 12 ms */
      check(clSetKernelArg(c.spin, 1, sizeof iters, &iters), "clSetKernelArg");
      t = spin_alone(&c);
      if (t > 0.004 || iters > (1 << 28)) break;
      iters *= 2;
    }
    iters = (int)((double)iters * 0.012 / t) + 1;
    check(clSetKernelArg(c.spin, 1, sizeof iters, &iters), "clSetKernelArg");
    const double t_spin = spin_alone(&c);
    double alone[T_N];
    for (int k = 0; k < T_N; k++) (void)second_queue(&c, k); /* first launches */
    for (int k = 0; k < T_N; k++) alone[k] = second_queue(&c, k);
    printf("long kernel: %g wave(s), %zu work-items, %.2f ms alone\n", waves, c.g_spin, 1e3 * t_spin);
    printf("  %-48s %14s %16s %16s\n", "second queue", "alone [ms]", "beside it [ms]", "long kernel [ms]");
    for (int k = 0; k < T_N; k++) {
      double sum = 0.0, sum_a = 0.0;
      const int reps = 3;
      for (int r = 0; r < reps; r++) {
        const double t0 = now();
        check(clEnqueueNDRangeKernel(c.qa, c.spin, 1, NULL, &c.g_spin, &c.l_spin, 0, NULL, NULL), "launching spin");
        check(clFlush(c.qa), "clFlush");
        pause_ms(0.5);
        sum += second_queue(&c, k);
        check(clFinish(c.qa), "clFinish");
        sum_a += now() - t0;
      }
      printf("  %-48s %14.3f %16.3f %16.2f\n", t_name[k], 1e3 * alone[k], 1e3 * sum / reps, 1e3 * sum_a / reps);
    }
    check(clReleaseMemObject(big), "clReleaseMemObject");
  }
  check(clEnqueueUnmapMemObject(c.qb, pin, c.locked, 0, NULL, NULL), "clEnqueueUnmapMemObject");
  check(clFinish(c.qb), "clFinish");
  free(c.pageable);
  check(clReleaseMemObject(pin), "clReleaseMemObject");
  check(clReleaseMemObject(c.small), "clReleaseMemObject");
  check(clReleaseMemObject(buf_step), "clReleaseMemObject");
  check(clReleaseKernel(c.spin), "clReleaseKernel");
  check(clReleaseKernel(c.step), "clReleaseKernel");
  check(clReleaseProgram(prog), "clReleaseProgram");
  check(clReleaseCommandQueue(c.qa), "clReleaseCommandQueue");
  check(clReleaseCommandQueue(c.qb), "clReleaseCommandQueue");
  check(clReleaseContext(ctx), "clReleaseContext");
  return 0;
}
