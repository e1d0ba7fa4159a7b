/* SPDX-License-Identifier: GPL-3.0-or-later
 * fuzz_hdf5.c: libFuzzer harness for the HDF5 initial-conditions reader. The
 * input is written to a scratch file and read twice through hy_io_read_ic:
 * as a single file (ic.hdf5, format hdf5), then as the first file of a
 * multi-file snapshot whose files set.0.hdf5 and set.1.hdf5 both hold the
 * input, set.1's ParticleIDs shifted by 2^40 where the file lets them be
 * rewritten (IDs must be unique across a snapshot), so NumFilesPerSnapshot 1
 * and 2 can succeed and larger ones meet a missing file. A clean error (-1 and a message) is a normal outcome; the
 * result must pass fuzz_ic_check, and no HDF5 file or object may be left
 * open after a read. The reader checks a file in a child process before it
 * reads it (libhdf5 can crash on damaged files), and the rewrite of the
 * IDs runs in one too: a crash there is an outcome, not a finding. Leaks inside libhdf5 are suppressed by
 * tests/fuzz/lsan.supp. Built by tools/fuzz.sh (libFuzzer) and by
 * make check (tests/fuzz/driver.c). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#ifdef FUZZ_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#include "fuzz_file.h"
#include "fuzz_ic_check.h"
#include "io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_one(const char *path, enum hy_ic_format fmt) {
  struct hy_part p;
  struct hy_err err = {{0}};
  double time = -1.0;
  hy_part_init(&p);
  int rc = hy_io_read_ic(path, fmt, &p, &time, &err);
  fuzz_ic_check(path, rc, &p, &err);
  if (rc == 0 && !isfinite(time)) fuzz_ic_fail(path, "non-finite time", 0);
  ssize_t open_ids = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  if (open_ids != 0) fuzz_ic_fail(path, "HDF5 files or objects left open", (size_t)open_ids);
  hy_part_free(&p);
}

/* Add 2^40 to every PartTypeN/ParticleIDs of the file at path, as far as
 * the (possibly damaged) file allows; any failure leaves it as it is. */
static void shift_ids(const char *path) {
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  if (f < 0) return;
  for (int t = 0; t < 6; t++) {
    char name[32];
    snprintf(name, sizeof name, "/PartType%d/ParticleIDs", t);
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) continue;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) continue;
    hid_t s = H5Dget_space(d);
    hssize_t n = s >= 0 ? H5Sget_simple_extent_npoints(s) : -1;
    if (n > 0 && n <= 4096) { /* seeds and their mutants are small */
      unsigned long long ids[4096];
      if (H5Dread(d, H5T_NATIVE_ULLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids) >= 0) {
        for (hssize_t i = 0; i < n; i++) ids[i] += 1ull << 40;
        (void)H5Dwrite(d, H5T_NATIVE_ULLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids);
      }
    }
    if (s >= 0) H5Sclose(s);
    H5Dclose(d);
  }
  H5Fclose(f);
}

/* shift_ids in a child process, whose crash (in libhdf5) ends it alone */
static void shift_ids_contained(const char *path) {
  const pid_t pid = fork();
  if (pid < 0) {
    perror("fuzz_hdf5: fork");
    abort();
  }
  if (pid == 0) {
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) signal(sigs[k], SIG_DFL);
#ifdef FUZZ_ASAN
    __sanitizer_set_death_callback(NULL);
#endif
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO);
    shift_ids(path);
    _exit(0);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      perror("fuzz_hdf5: waitpid");
      abort();
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *one = fuzz_file_write("ic.hdf5", data, size);
  read_one(one, HY_FMT_HDF5);
  const char *first = fuzz_path("set.0.hdf5");
  unlink(first);
  if (link(one, first) != 0) {
    perror("fuzz_hdf5: link");
    abort();
  }
  shift_ids_contained(fuzz_file_write("set.1.hdf5", data, size));
  read_one(first, HY_FMT_AUTO);
  return 0;
}
