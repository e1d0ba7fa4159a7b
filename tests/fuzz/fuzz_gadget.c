/* SPDX-License-Identifier: GPL-3.0-or-later
 * fuzz_gadget.c: libFuzzer harness for the Gadget format-1/2 reader. The
 * input is written to a scratch file and read with hy_io_read_ic (format
 * detection, io_gadget.c, validation); inputs that start with the HDF5
 * signature are left to fuzz_hdf5. A clean error (-1 and a message) is a
 * normal outcome; the result must pass fuzz_ic_check. Built by tools/fuzz.sh
 * (libFuzzer) and by make check (tests/fuzz/driver.c). */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "fuzz_file.h"
#include "fuzz_ic_check.h"
#include "io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const unsigned char hdf5_sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (size >= sizeof hdf5_sig && memcmp(data, hdf5_sig, sizeof hdf5_sig) == 0) return 0;
  const char *path = fuzz_file_write("ic.gadget", data, size);
  struct hy_part p;
  struct hy_err err = {{0}};
  double time = -1.0;
  hy_part_init(&p);
  int rc = hy_io_read_ic(path, HY_FMT_AUTO, &p, &time, &err);
  fuzz_ic_check(path, rc, &p, &err);
  if (rc == 0 && !isfinite(time)) fuzz_ic_fail(path, "non-finite time", 0);
  hy_part_free(&p);
  return 0;
}
