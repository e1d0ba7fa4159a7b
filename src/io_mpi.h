/* SPDX-License-Identifier: GPL-3.0-or-later
 * io_mpi.h: parallel initial conditions and snapshots over an MPI
 * communicator. Owns how particles travel between ranks for I/O (scatter of
 * the ICs from rank 0, gather of snapshot files to one writer per file) and
 * the multi-file snapshot naming; the file formats themselves stay in io.h.
 * The only io file that uses MPI. Every function is collective over comm and
 * returns the same status, with the same one-line message, on every rank. */
#ifndef HY_IO_MPI_H
#define HY_IO_MPI_H

#include <stddef.h>

#include <mpi.h>

#include "io.h"
#include "log.h"
#include "part.h"

/** @brief Read initial conditions on rank 0 and scatter them.
 *
 *  Rank 0 reads path with hy_io_read_ic (any format it reads, including a
 *  multi-file HDF5 set named BASE.0.hdf5 or BASE: rank 0 reads the files one
 *  by one) and sends rank r the contiguous chunk r of near-equal size
 *  (N / P, the first N % P ranks one more) of the type-ordered set.
 *  Collective over comm.
 *  @param[in]  comm  communicator (not modified: a duplicate is used)
 *  @param[in]  path  IC file name (significant on rank 0 only)
 *  @param[in]  fmt   format, or HY_FMT_AUTO (significant on rank 0 only)
 *  @param[out] p     initialised set; resized to this rank's chunk, acc,
 *                    acc_w and pot zeroed
 *  @param[out] time  header time, the same on every rank (may be NULL)
 *  @param[out] err   message on failure, the same on every rank
 *  @return 0, or -1 on every rank (p then empty) */
int hy_io_read_ic_mpi(MPI_Comm comm, const char *path, enum hy_ic_format fmt, struct hy_part *p,
                      double *time, struct hy_err *err);

/** @brief Scatter a particle set held by rank 0.
 *
 *  As hy_io_read_ic_mpi after the read: rank r receives the contiguous chunk
 *  r of near-equal size of `all` (significant on rank 0 only; `all` is not
 *  changed and may be the caller's full set). Collective over comm.
 *  @param[out] p   initialised set (not `all`); resized to this rank's chunk
 *  @return 0, or -1 on every rank with the same message */
int hy_io_scatter_mpi(MPI_Comm comm, struct hy_part *all, struct hy_part *p, struct hy_err *err);

/** @brief Write snapshot snapnum of the distributed set p.
 *
 *  nfiles == 1: DIR/snapshot_NNN.hdf5, gathered to rank 0 of comm.
 *  nfiles > 1: DIR/snapshot_NNN.K.hdf5, K = 0 .. nfiles-1; the ranks are
 *  split into nfiles contiguous groups (rank r in group r * nfiles / P), the
 *  lowest rank of group K gathers its group and writes file K with
 *  NumFilesPerSnapshot = nfiles, NumPart_ThisFile = the file's counts and
 *  NumPart_Total (+HighWord) = the global counts. Particles are grouped by
 *  type within a file, in rank order within a type. Gathers go in rounds so
 *  that no MPI count or displacement exceeds INT_MAX.
 *  Every file is written atomically (hy_io_write_hdf5). Success only when
 *  every file was written; otherwise the files of this call that were
 *  already published are removed, no temporary is left, and every rank
 *  returns -1 with the message of the lowest failing rank.
 *  Collective over comm; nfiles must be the same on every rank.
 *  @param[in] comm    communicator (not modified: a duplicate is used)
 *  @param[in] dir     existing output directory
 *  @param[in] snapnum snapshot number >= 0 (printed as %03d)
 *  @param[in] p       this rank's particles (types 0..5)
 *  @param[in] info    time, fields, units, ...; num_files and npart_total
 *                     are ignored (set here)
 *  @param[in] nfiles  files per snapshot, 1 <= nfiles <= size of comm
 *  @param[out] err    message on failure, the same on every rank
 *  @return 0, or -1 on every rank */
int hy_io_write_snapshot_mpi(MPI_Comm comm, const char *dir, int snapnum, const struct hy_part *p,
                             const struct hy_snap_info *info, int nfiles, struct hy_err *err);

/** @brief Name of a snapshot file: DIR/snapshot_NNN.hdf5 when nfiles == 1,
 *  else DIR/snapshot_NNN.K.hdf5 (K = file). For messages and readers.
 *  @return 0, or -1 if buf is too small */
int hy_io_snapshot_name(char *buf, size_t size, const char *dir, int snapnum, int nfiles,
                        int file);

#endif
