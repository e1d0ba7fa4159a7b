/* SPDX-License-Identifier: GPL-3.0-or-later
 * io_internal.h: declarations shared by the io_*.c files only (format readers
 * behind hy_io_read_ic, small byte-order helpers). Not part of the io
 * interface: other modules include io.h, never this file. */
#ifndef HY_IO_INTERNAL_H
#define HY_IO_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "log.h"
#include "part.h"

/** Read a single-file Gadget-style HDF5 file into p (resized; particles type by
 *  type, file order). No physical validation (hy_io_read_ic does that).
 *  Returns 0, or -1 with err set (p may then hold partial data). */
int hy_io_read_hdf5(const char *path, struct hy_part *p, double *time, struct hy_err *err);

/** Read a multi-file HDF5 snapshot base.0.hdf5 .. base.K-1.hdf5 (K from the
 *  NumFilesPerSnapshot of file 0; every file must agree on it, on Time and on
 *  NumPart_Total, which must equal the sum of the NumPart_ThisFile counts)
 *  into p, type by type, file order within a type. IDs missing from a file
 *  continue the numbering of the files before it. Errors name the file.
 *  Returns 0, or -1 with err set (p may then hold partial data). */
int hy_io_read_hdf5_set(const char *base, struct hy_part *p, double *time, struct hy_err *err);

/** If path names a multi-file HDF5 snapshot, return its base (allocated, free
 *  with hy_free): path ends in ".0.hdf5", or path does not exist and
 *  path.0.hdf5 does. Otherwise NULL. */
char *hy_io_multifile_base(const char *path);

/** Read a Gadget binary file of format 1 or 2 into p, as hy_io_read_hdf5. */
int hy_io_read_gadget(const char *path, int format, struct hy_part *p, double *time,
                      struct hy_err *err);

/** Read a tipsy file (either byte order) into p, as hy_io_read_hdf5: gas as
 *  type 0, dark matter as type 1, stars as type 4, in file order, IDs 1..N.
 *  The file size must equal what the header's counts need. */
int hy_io_read_tipsy(const char *path, struct hy_part *p, double *time, struct hy_err *err);

/** 2 if head (the first `got` bytes of a file of file_size bytes) is a tipsy
 *  header with ndim 3 in either byte order, non-negative counts that add up
 *  to nbodies, and file_size exactly what those counts need; 1 if only ndim
 *  is 3 (a damaged tipsy file, for the reader to explain); else 0. */
int hy_io_tipsy_probe(const unsigned char *head, size_t got, long long file_size);

/** hy_io_tmpname into a freshly allocated buffer (free with hy_free). */
char *hy_io_tmpname_alloc(const char *path);

/** Remove a temporary file after a failed write; a missing file is fine.
 *  Failures are ignored on purpose: the write has already failed and its
 *  message is the one the caller reports. */
void hy_io_discard_tmp(const char *tmp);

/** The end of a write to the temporary tmp (an open stream f) of path:
 *  close f, then publish tmp as path (hy_io_publish), or, when the write
 *  failed (failed nonzero, err already set) or the close fails, remove
 *  tmp. Returns 0, or -1 with err set. */
int hy_io_finish_tmp(FILE *f, const char *path, const char *tmp, int failed, struct hy_err *err);

/** Index array that lists p's particles type by type (0..5), keeping the
 *  order of p within a type; counts[t] receives the number of type t.
 *  Returns NULL with err set if a particle has a type >= HY_NTYPES. */
size_t *hy_io_type_order(const char *path, const struct hy_part *p, uint64_t counts[6],
                         struct hy_err *err);

#endif
