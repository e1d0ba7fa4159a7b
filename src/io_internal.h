/* SPDX-License-Identifier: GPL-3.0-or-later
 * io_internal.h: declarations shared by the io_*.c files only (format readers
 * behind hy_io_read_ic, small byte-order helpers). Not part of the io
 * interface: other modules include io.h, never this file. */
#ifndef HY_IO_INTERNAL_H
#define HY_IO_INTERNAL_H

#include <stdint.h>

#include "log.h"
#include "part.h"

/** Read a single-file Gadget-style HDF5 file into p (resized; particles type by
 *  type, file order). No physical validation (hy_io_read_ic does that).
 *  Returns 0, or -1 with err set (p may then hold partial data). */
int hy_io_read_hdf5(const char *path, struct hy_part *p, double *time, struct hy_err *err);

/** Read a Gadget binary file of format 1 or 2 into p, as hy_io_read_hdf5. */
int hy_io_read_gadget(const char *path, int format, struct hy_part *p, double *time,
                      struct hy_err *err);

/** hy_io_tmpname into a freshly allocated buffer (free with hy_free). */
char *hy_io_tmpname_alloc(const char *path);

/** Remove a temporary file after a failed write; a missing file is fine.
 *  Failures are ignored on purpose: the write has already failed and its
 *  message is the one the caller reports. */
void hy_io_discard_tmp(const char *tmp);

/** Index array that lists p's particles type by type (0..5), keeping the
 *  order of p within a type; counts[t] receives the number of type t.
 *  Returns NULL with err set if a particle has a type >= HY_NTYPES. */
size_t *hy_io_type_order(const char *path, const struct hy_part *p, uint64_t counts[6],
                         struct hy_err *err);

#endif
