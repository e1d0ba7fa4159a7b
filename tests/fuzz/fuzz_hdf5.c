/* SPDX-License-Identifier: GPL-3.0-or-later
 * fuzz_hdf5.c: libFuzzer harness for the HDF5 initial-conditions reader. The
 * input is written to a scratch file and read twice through hy_io_read_ic:
 * as a single file (ic.hdf5, format hdf5), then as the first file of a
 * multi-file snapshot whose files set.0.hdf5 and set.1.hdf5 both hold the
 * input (so NumFilesPerSnapshot 1 and 2 can succeed, larger ones meet a
 * missing file). A clean error (-1 and a message) is a normal outcome; the
 * result must pass fuzz_ic_check, and no HDF5 file or object may be left
 * open after a read. Leaks inside libhdf5 are suppressed by
 * tests/fuzz/lsan.supp. Built by tools/fuzz.sh (libFuzzer) and by
 * make check (tests/fuzz/driver.c). */
#include "config.h"

#include <stdint.h>
#include <unistd.h>

#include <hdf5.h>

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *one = fuzz_file_write("ic.hdf5", data, size);
  read_one(one, HY_FMT_HDF5);
  const char *first = fuzz_path("set.0.hdf5"), *second = fuzz_path("set.1.hdf5");
  unlink(first);
  unlink(second);
  if (link(one, first) != 0 || link(one, second) != 0) {
    perror("fuzz_hdf5: link");
    abort();
  }
  read_one(first, HY_FMT_AUTO);
  return 0;
}
