#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""make_corpus.py: writes the Gadget and HDF5 seeds of tests/fuzz/corpus/
that are not written by `hytree ic` (see doc/testing.md). The particles are
the first 8 of type 1 and 4 of type 2 of the real Gadget-2 galaxy ICs
(tests/data/galaxy_littleendian.dat), stored the ways other codes store
them: Gadget format 1 and 2 in either byte order, float or double, 32- or
64-bit IDs, mass table or MASS block, extra gas blocks; HDF5 as SWIFT,
Gadget-4 and multi-file snapshots lay them out (float coordinates, 32-bit
IDs, MassTable only, chunked and compressed datasets, NumPart_Total with
HighWord). Usage: make_corpus.py SRCDIR OUTDIR (needs numpy and h5py)."""
import os
import struct
import sys

import h5py
import numpy as np

src, out = sys.argv[1], sys.argv[2]
raw = open(os.path.join(src, "tests/data/galaxy_littleendian.dat"), "rb").read()
head = bytearray(raw[4:260])
npart = struct.unpack("<6i", head[:24])
mtab = struct.unpack("<6d", head[24:72])
ntot = sum(npart)
take = [0, 8, 4, 0, 0, 0]


def block(off, width):
    n = struct.unpack("<i", raw[off:off + 4])[0]
    return raw[off + 4:off + 4 + n], off + n + 8


pos_b, off = block(264, 12)
vel_b, off = block(off, 12)
id_b, off = block(off, 4)
pos = np.frombuffer(pos_b, "<f4").reshape(ntot, 3)
vel = np.frombuffer(vel_b, "<f4").reshape(ntot, 3)
ids = np.frombuffer(id_b, "<u4")
sel = np.concatenate([np.arange(npart[1])[:8], npart[1] + np.arange(4)])
pos, vel, ids = pos[sel], vel[sel], ids[sel]
types = np.array([1] * 8 + [2] * 4)
masses = np.array([mtab[t] for t in types])


def gadget(name, fmt=1, big=False, dbl=False, id64=False, masstab=True, extra=False,
           mass_first=False):
    e = ">" if big else "<"
    f = "f8" if dbl else "f4"
    h = bytearray(head)
    struct.pack_into(e + "6i", h, 0, *take)
    struct.pack_into(e + "6d", h, 24, *(mtab if masstab else [0.0] * 6))
    struct.pack_into(e + "2d", h, 72, *struct.unpack("<2d", head[72:88]))
    struct.pack_into(e + "6i", h, 96, *take)
    struct.pack_into(e + "i", h, 124, 1)
    blocks = [("HEAD", bytes(h)),
              ("POS ", pos.astype(e + f).tobytes()),
              ("VEL ", vel.astype(e + f).tobytes()),
              ("ID  ", ids.astype(e + ("u8" if id64 else "u4")).tobytes())]
    if extra:
        blocks.insert(3, ("U   ", np.zeros(0, e + f).tobytes()))
    if not masstab:
        blocks.append(("MASS", masses.astype(e + f).tobytes()))
    if extra:
        blocks.append(("RHO ", np.zeros(0, e + f).tobytes()))
    if mass_first:
        blocks.insert(1, blocks.pop())
    with open(os.path.join(out, "gadget", name), "wb") as fh:
        for lab, b in blocks:
            if fmt == 2:
                fh.write(struct.pack(e + "i", 8) + lab.encode() + struct.pack(e + "ii", len(b) + 8, 8))
            fh.write(struct.pack(e + "i", len(b)) + b + struct.pack(e + "i", len(b)))


os.makedirs(os.path.join(out, "gadget"), exist_ok=True)
os.makedirs(os.path.join(out, "hdf5"), exist_ok=True)
gadget("galaxy12_f1_le_float.dat")
gadget("galaxy12_f1_be_double_id64_massblock.dat", big=True, dbl=True, id64=True, masstab=False)
gadget("galaxy12_f2_le_double_extra.g2", fmt=2, dbl=True, extra=True)
gadget("galaxy12_f2_be_float_massblock.g2", fmt=2, big=True, masstab=False)
gadget("galaxy12_f2_le_float_mass_first.g2", fmt=2, masstab=False, mass_first=True)


def header(g, counts, total=None, nfiles=1, mass=None, this_dtype="u4"):
    g.attrs["NumPart_ThisFile"] = np.array(counts, this_dtype)
    t = counts if total is None else total
    g.attrs["NumPart_Total"] = np.array([x & 0xFFFFFFFF for x in t], "u4")
    g.attrs["NumPart_Total_HighWord"] = np.array([x >> 32 for x in t], "u4")
    g.attrs["MassTable"] = np.array(mass if mass is not None else [0.0] * 6, "f8")
    g.attrs["Time"] = 0.0
    g.attrs["Redshift"] = 0.0
    g.attrs["BoxSize"] = 0.0
    g.attrs["NumFilesPerSnapshot"] = np.int32(nfiles)


# SWIFT-like: float coordinates, 32-bit IDs, masses only in the MassTable.
with h5py.File(os.path.join(out, "hdf5", "galaxy12_swift_float_masstable.hdf5"), "w") as f:
    header(f.create_group("Header"), take, mass=list(mtab))
    for t, s in ((1, slice(0, 8)), (2, slice(8, 12))):
        g = f.create_group("PartType%d" % t)
        g["Coordinates"] = pos[s].astype("f4")
        g["Velocities"] = vel[s].astype("f4")
        g["ParticleIDs"] = ids[s].astype("u4")

# Gadget-4-like: chunked, shuffled and compressed datasets, 64-bit IDs,
# a Masses dataset for one type and no ParticleIDs for the other.
with h5py.File(os.path.join(out, "hdf5", "galaxy12_gadget4_chunked_gzip.hdf5"), "w") as f:
    header(f.create_group("Header"), take, mass=[0, 0, mtab[2], 0, 0, 0], this_dtype="i4")
    kw = dict(chunks=True, compression="gzip", shuffle=True)
    g = f.create_group("PartType1")
    g.create_dataset("Coordinates", data=pos[:8].astype("f8"), **kw)
    g.create_dataset("Velocities", data=vel[:8].astype("f8"), **kw)
    g.create_dataset("ParticleIDs", data=ids[:8].astype("i8"), **kw)
    g.create_dataset("Masses", data=masses[:8].astype("f4"), **kw)
    g = f.create_group("PartType2")
    g.create_dataset("Coordinates", data=pos[8:].astype("f4"), **kw)
    g.create_dataset("Velocities", data=vel[8:].astype("f4"), **kw)

# One file of a 2-file snapshot: the fuzz harness reads it as both files.
with h5py.File(os.path.join(out, "hdf5", "galaxy12_multifile_part.hdf5"), "w") as f:
    header(f.create_group("Header"), [0, 8, 0, 0, 0, 0], total=[0, 16, 0, 0, 0, 0], nfiles=2,
           mass=list(mtab))
    g = f.create_group("PartType1")
    g["Coordinates"] = pos[:8].astype("f8")
    g["Velocities"] = vel[:8].astype("f8")
    g["ParticleIDs"] = ids[:8].astype("u8")
