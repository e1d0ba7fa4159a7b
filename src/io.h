/* SPDX-License-Identifier: GPL-3.0-or-later
 * io.h: initial conditions in, snapshots out.
 * Owns the file formats: Gadget-style HDF5 (layout of doc/output.md), Gadget
 * binary format 1 and 2 (either endianness, float or double, 32- or 64-bit
 * IDs), tipsy (standard big-endian or native little-endian). Writers are atomic: temporary name, fsync, rename, fsync of the
 * directory; a failed write leaves no partial file and any earlier file with
 * the same name untouched. Knows nothing of trees, devices or MPI. */
#ifndef HY_IO_H
#define HY_IO_H

#include <stdint.h>

#include "log.h"
#include "part.h"

enum hy_ic_format {
  HY_FMT_AUTO = 0,
  HY_FMT_HDF5,
  HY_FMT_GADGET1,
  HY_FMT_GADGET2,
  HY_FMT_TIPSY,
};

/** Optional snapshot fields (bit mask). */
#define HY_FIELD_ACC 1u /**< Acceleration (total = hard + soft) */
#define HY_FIELD_POT 2u /**< Potential (softened, per unit mass) */

/** Unit metadata written to /Units (cgs values of one code unit). */
struct hy_units {
  double length_cm;
  double mass_g;
  double velocity_cm_per_s;
};

/** What a snapshot records besides the particles. */
struct hy_snap_info {
  double time;                /**< simulation time [code units] */
  unsigned fields;            /**< HY_FIELD_* mask of optional fields to write */
  struct hy_units units;      /**< unit metadata */
  double gravity_constant;    /**< G in code units (written as an attribute) */
  double softening;           /**< Plummer softening used (attribute) */
  const char *params_text;    /**< optional: the run parameters used (`auto` resolved), stored as
                                   /RunParameters attributes; may be NULL */
  const char *params_given;   /**< optional: the run parameters as given (`auto` kept), stored as
                                   /RunParametersGiven attributes; may be NULL */
  int num_files;              /**< files in this snapshot (NumFilesPerSnapshot); 0 = 1, a single file */
  int has_extent;             /**< 1: extent is that of the whole snapshot (all files); 0: the writer
                                   takes the extent of its own particles */
  double extent[6];           /**< lowest x, y, z, then highest x, y, z of the finite coordinates
                                   (hy_io_extent); written as Header/BoundingBox */
  uint64_t npart_total[6];    /**< particles per type in the whole snapshot (NumPart_Total); used only
                                   when num_files > 1, otherwise the counts of this file */
};

/** The extent of p's particles whose coordinates are all finite: ext[0..2]
 *  the lowest x, y, z, ext[3..5] the highest. Returns the number of such
 *  particles (with 0, ext is +inf .. -inf). */
size_t hy_io_extent(const struct hy_part *p, double ext[6]);

/** Parse a format name ("auto", "hdf5", "gadget1", "gadget2", "tipsy"); -1 if unknown. */
int hy_io_format_parse(const char *name, enum hy_ic_format *out);
const char *hy_io_format_name(enum hy_ic_format f);

/** Detect the format of a file from its first bytes (HDF5 signature, Gadget-1
 *  record marker 256 in either byte order, Gadget-2 "HEAD" block, tipsy
 *  header with ndim 3 in either byte order, counts that add up and a file
 *  size that matches them exactly). A file that both starts like a Gadget
 *  file and is a consistent tipsy file is Gadget only when its first Gadget
 *  record is closed by a matching end marker. A file that matches nothing
 *  else but has ndim 3 is taken as a damaged tipsy file, so that the tipsy
 *  reader names what is wrong with it.
 *  Returns 0 and sets *out, or -1 with a message naming the file. */
int hy_io_detect_format(const char *path, enum hy_ic_format *out, struct hy_err *err);

/** Read initial conditions into p (p must be initialised; it is resized).
 *  A multi-file HDF5 snapshot is read whole when path names its first file
 *  (BASE.0.hdf5) or, when no file path exists, its base (BASE with
 *  BASE.0.hdf5 present): files BASE.0 .. BASE.K-1.hdf5 (K =
 *  NumFilesPerSnapshot of file 0) are concatenated; each must agree on K and
 *  Time, and the NumPart_ThisFile sums must equal NumPart_Total.
 *  Particles are stored type by type (0..5) in file order; IDs are kept
 *  (HDF5 files without ParticleIDs get 1..N). Masses come from the mass table
 *  or the per-particle mass block/dataset. *time is the header time.
 *  Validates: N > 0, finite positions, velocities and masses, masses > 0,
 *  no ID used twice; the message names the file and, for bad particles, the
 *  particle ID and index.
 *  Returns 0, or -1 with err set (p is then left empty). */
int hy_io_read_ic(const char *path, enum hy_ic_format fmt, struct hy_part *p, double *time,
                  struct hy_err *err);

/** Write a Gadget-style HDF5 snapshot file atomically.
 *  Groups PartType0..5 hold the particles of that type, in the order of p.
 *  With info->num_files > 1 the file is one of a multi-file set: the header
 *  gets NumFilesPerSnapshot = num_files, NumPart_ThisFile = the counts of p and
 *  NumPart_Total (+HighWord) = info->npart_total, which must be >= them. */
int hy_io_write_hdf5(const char *path, const struct hy_part *p, const struct hy_snap_info *info,
                     struct hy_err *err);

/** Write a Gadget binary file (format 1 or 2) atomically: used by tests and by
 *  `hytree ic -o FILE` with a .gadget/.dat name. double_prec selects 8-byte
 *  positions/velocities/masses, big_endian the byte order, id64 64-bit IDs.
 *  use_mass_table: put a type's mass into the header when all its particles
 *  share it (then no MASS entries for that type). */
struct hy_gadget_opts {
  int format;         /**< 1 or 2 */
  int double_prec;
  int big_endian;
  int id64;
  int use_mass_table;
};
int hy_io_write_gadget(const char *path, const struct hy_part *p, double time,
                       const struct hy_gadget_opts *opts, struct hy_err *err);

/** Write a standard (big-endian, XDR) tipsy file atomically: gas records for
 *  type 0, star records for type 4, dark-matter records for the other types,
 *  in that order (gas, dark, star), each kind in the order of p (dark: types
 *  1, 2, 3, 5 one after the other). Mass, position and velocity become
 *  float32; a value that float32 cannot hold (not finite, beyond FLT_MAX, a
 *  positive mass that rounds to 0) is refused with a message naming the
 *  particle. Every record's softening is `softening` (>= 0; 0 when unknown),
 *  its potential and the gas/star fields 0. At most INT32_MAX particles.
 *  native: Bonsai's variant instead, little-endian with each particle's ID
 *  as a 32-bit int in the potential's place (an ID above INT32_MAX is
 *  refused). */
int hy_io_write_tipsy(const char *path, const struct hy_part *p, double time, double softening, int native,
                      struct hy_err *err);

/** Call hy_io_hdf5_init first thing in main (before any HDF5 call) and
 *  hy_io_hdf5_close at the end instead of HDF5's own atexit handler, which
 *  HDF5 1.10 crashes in after a file failed to close (a full disk). */
void hy_io_hdf5_init(void);
void hy_io_hdf5_close(void);

/** Durable atomic publication helpers (also used for params-used.txt):
 *  hy_io_tmpname builds "<path>.tmp.<pid>"; hy_io_publish fsyncs the temporary
 *  file, renames it over path and fsyncs the directory. */
int hy_io_tmpname(const char *path, char *buf, size_t size);
int hy_io_publish(const char *tmp, const char *path, struct hy_err *err);
/** Write a whole text buffer atomically to path. */
int hy_io_write_text_atomic(const char *path, const char *text, struct hy_err *err);

#endif
