/* SPDX-License-Identifier: GPL-3.0-or-later
 * main.c: the hytree command line. Owns MPI start-up and shutdown
 * (MPI_Init_thread with MPI_THREAD_FUNNELED: only the main thread calls MPI)
 * and the dispatch to the subcommands run, ic and devices. */
#include "config.h"

#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cl_engine.h"
#include "ic.h"
#include "io.h"
#include "log.h"
#include "lsan.h"
#include "bench.h"
#include "run.h"

static void usage(FILE *out) {
  fputs("usage: hytree COMMAND [ARGS]\n"
        "  hytree run PARAMFILE [-P Key=Value ...]   run a simulation (hytree run --help)\n"
        "  hytree ic MODEL -N N [--seed S] -o FILE    write initial conditions of a plummer, hernquist,\n"
        "                                             king or uniform model (hytree ic --help)\n"
        "  hytree devices                             list the OpenCL platforms and devices\n"
        "  hytree bench [--N N,...] [--device gpu]    time the schemes on Plummer spheres (hytree bench --help)\n"
        "  hytree bench --time T [--grid K=v,...]     accuracy per time of run parameters (hytree bench --help)\n"
        "  hytree --version                           print the version\n"
        "  hytree --help                              this help\n"
        "A GPU-accelerated hybrid tree N-body code: Barnes-Hut octree with the pair force split\n"
        "into hard and soft parts, OpenCL tree walks, and a multi-rate leapfrog.\n"
        "Documentation: man hytree, README.md and doc/ (install.md, running.md, parameters.md,\n"
        "output.md, algorithm.md, ic.md, sweeps.md, performance.md).\n",
        out);
}

int main(int argc, char **argv) {
  int provided = 0, rank = 0, size = 1;
  hy_io_hdf5_init();
  /* a file-size limit (ulimit -f) fails a write with EFBIG, reported like a
   * full disk, instead of killing the process in the middle of a file */
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  if (sigemptyset(&ign.sa_mask) != 0 || sigaction(SIGXFSZ, &ign, NULL) != 0) {
    fputs("hytree: error: cannot ignore SIGXFSZ\n", stderr);
    return 1;
  }
  HY_LSAN_DISABLE(); /* what MPI_Init allocates is MPI's (lsan.h) */
  int mpi_rc = MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  HY_LSAN_ENABLE();
  if (mpi_rc != MPI_SUCCESS) {
    fputs("hytree: error: MPI_Init_thread failed\n", stderr);
    return 1;
  }
  if (MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS) {
    fputs("hytree: error: MPI_Comm_rank/size failed\n", stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  hy_log_init(rank, size);
  if (provided < MPI_THREAD_FUNNELED) hy_die("the MPI library does not provide MPI_THREAD_FUNNELED");
  int status;
  const char *cmd = argc > 1 ? argv[1] : NULL;
  if (!cmd) {
    usage(stderr);
    status = 2;
  } else if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    status = 0;
  } else if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    puts(PACKAGE_STRING);
    status = 0;
  } else if (strcmp(cmd, "run") == 0) {
    status = hy_cmd_run(argc - 1, argv + 1);
  } else if (strcmp(cmd, "bench") == 0) {
    status = rank == 0 ? hy_cmd_bench(argc - 1, argv + 1) : 0;
  } else if (strcmp(cmd, "ic") == 0) {
    status = rank == 0 ? hy_cmd_ic(argc - 1, argv + 1) : 0;
  } else if (strcmp(cmd, "devices") == 0 || strcmp(cmd, "--devices") == 0) {
    if (rank == 0) hy_cl_print_devices(stdout, NULL);
    status = 0;
  } else {
    fprintf(stderr, "hytree: error: unknown command '%s' (see hytree --help)\n", cmd);
    status = 2;
  }
  fflush(stdout);
  hy_io_hdf5_close();
  HY_LSAN_CHECK(); /* before MPI unloads its plugins (lsan.h) */
  MPI_Finalize();
  return status;
}
