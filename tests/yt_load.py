#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""yt_load.py: yt (its GadgetHDF5 frontend) loads a hytree snapshot from the
file's own metadata, as doc/output.md shows: the units from /Units
(unit_base=) and the box from Header/BoundingBox (bounding_box=), so that
yt neither assumes its default units nor reads the coordinates to find a
box. Checks yt's log for either message, the particle count and the total
mass against the file, and that every particle lies inside the box.

usage: yt_load.py FILE N     (FILE: a snapshot, or the .0.hdf5 file of a set)

Exit status: 0 pass, 1 a check failed, 77 yt, h5py or numpy missing.
"""
import io
import logging
import sys

try:
    import h5py
    import numpy as np
    import yt
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)


def load(fn):
    """The loading recipe of doc/output.md."""
    with h5py.File(fn, "r") as f:
        u = f["Units"].attrs
        unit_base = {k: float(u[k]) for k in ("UnitLength_in_cm", "UnitMass_in_g", "UnitVelocity_in_cm_per_s")}
        bbox = f["Header"].attrs["BoundingBox"]
    return yt.load(fn, unit_base=unit_base, bounding_box=bbox)


def file_totals(fn):
    """(particles, total mass in code units, UnitMass_in_g) of the snapshot, by h5py."""
    with h5py.File(fn, "r") as f:
        k = int(f["Header"].attrs["NumFilesPerSnapshot"])
        m_g = float(f["Units"].attrs["UnitMass_in_g"])
    files = [fn] if k == 1 else [fn[:-len("0.hdf5")] + f"{j}.hdf5" for j in range(k)]
    n, m = 0, 0.0
    for name in files:
        with h5py.File(name, "r") as f:
            for g in (g for g in f if g.startswith("PartType")):
                n += f[g]["Masses"].shape[0]
                m += float(np.sum(f[g]["Masses"][...]))
    return n, m, m_g


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    fn, n_want = argv[0], int(argv[1])
    failures = []
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    handler.setLevel(logging.DEBUG)
    yt.funcs.mylog.addHandler(handler)
    try:
        ds = load(fn)
        ad = ds.all_data()
        n = len(ad["all", "particle_ones"])
        mass = float(ad["all", "particle_mass"].sum().to("code_mass"))
        mass_g = float(ad["all", "particle_mass"].sum().to("g"))
        pos = ad["all", "particle_position"].to("code_length").d
        lo, hi = ds.domain_left_edge.to("code_length").d, ds.domain_right_edge.to("code_length").d
    finally:
        yt.funcs.mylog.removeHandler(handler)
    text = log.getvalue()
    for bad in ("Assuming", "cannot be inferred", "bounding_box="):
        if bad in text:
            failures.append(f"yt's log says '{bad}':\n{text}")
    n_file, m_file, m_g = file_totals(fn)
    if n != n_want or n != n_file:
        failures.append(f"yt sees {n} particles, the file has {n_file}, expected {n_want}")
    if not np.isclose(mass, m_file, rtol=1e-12, atol=0):
        failures.append(f"yt's total mass {mass} code_mass, the file's {m_file}")
    if not np.isclose(mass_g, m_file * m_g, rtol=1e-12, atol=0):
        failures.append(f"yt's total mass {mass_g} g, the file's {m_file} x UnitMass_in_g = {m_file * m_g}")
    if pos.shape != (n_want, 3) or np.any(pos <= lo) or np.any(pos >= hi):
        failures.append(f"particles outside yt's domain [{lo}, {hi}]")
    for msg in failures:
        print(f"FAIL: {fn}: {msg}")
    if not failures:
        print(f"PASS: {fn}: yt loads {n} particles of total mass {mass} code_mass = {mass_g:.6e} g, "
              f"units and box from the file")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
