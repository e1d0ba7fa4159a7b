#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""check_layout.py: a hytree snapshot has the Gadget-HDF5 layout that yt's
GadgetHDF5 frontend, pynbody's GadgetHDFSnap, Pylians' readgadget and SWIFT's
IC reader need (doc/formats.md).

usage: check_layout.py [--units L,M,V] [--params-used TXT] [--same-as OTHER] FILE [FILE ...]

FILE...      one snapshot file, or every file of a multi-file snapshot
--units      expected UnitLength_in_cm, UnitMass_in_g, UnitVelocity_in_cm_per_s
--params-used  the run's params-used.txt: /RunParameters must hold its values with the `auto`
             ones resolved (to its 9 digits), /RunParametersGiven its values as written (`auto` kept)
--same-as    another snapshot (a multi-file one by its .0.hdf5 file) whose particles must be the
             same: IDs, positions, velocities, masses bit for bit, same Time

Exit status: 0 all checks pass, 1 a check failed, 77 h5py or numpy missing.
"""
import sys

try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}")


def attr(group, name, fname):
    if name not in group.attrs:
        fail(f"{fname}: /{group.name.strip('/')} has no attribute {name}")
        return None
    return group.attrs[name]


def scalar(group, name, fname, kind):
    """A SCALAR attribute (shape ()) of numpy kind 'f' (float) or 'i' (integer)."""
    v = attr(group, name, fname)
    if v is None:
        return None
    a = np.asarray(v)
    if a.shape != ():
        fail(f"{fname}: {group.name}/{name} has shape {a.shape}, readers need a scalar")
    if kind == "f" and a.dtype.kind != "f":
        fail(f"{fname}: {group.name}/{name} has type {a.dtype}, expected a float")
    if kind == "i" and a.dtype.kind not in "iu":
        fail(f"{fname}: {group.name}/{name} has type {a.dtype}, expected an integer")
    return a.reshape(-1)[0] if a.size else None


def vector6(group, name, fname, kinds, dtype=None):
    v = attr(group, name, fname)
    if v is None:
        return None
    a = np.asarray(v)
    if a.shape != (6,):
        fail(f"{fname}: {group.name}/{name} has shape {a.shape}, expected (6,)")
        return None
    if a.dtype.kind not in kinds:
        fail(f"{fname}: {group.name}/{name} has type {a.dtype}")
    if dtype is not None and a.dtype != np.dtype(dtype):
        fail(f"{fname}: {group.name}/{name} has type {a.dtype}, expected {dtype}")
    return a


def read_particles(files):
    """IDs, positions, velocities, masses of all files, sorted by ID; and Time."""
    ids, pos, vel, mass, time = [], [], [], [], None
    for fname in files:
        with h5py.File(fname, "r") as f:
            time = float(f["Header"].attrs["Time"])
            for g in sorted(k for k in f if k.startswith("PartType")):
                ids.append(f[g]["ParticleIDs"][...])
                pos.append(f[g]["Coordinates"][...])
                vel.append(f[g]["Velocities"][...])
                mass.append(f[g]["Masses"][...])
    ids, pos, vel, mass = (np.concatenate(x) for x in (ids, pos, vel, mass))
    o = np.argsort(ids, kind="stable")
    return time, ids[o], pos[o], vel[o], mass[o]


def read_params_used(path):
    """{key: (value as written, resolved value or None)} of a params-used.txt."""
    out = {}
    with open(path) as f:
        for line in f:
            text, _, comment = line.partition("%")
            words = text.split()
            if len(words) != 2:
                continue
            resolved = None
            c = comment.split()
            if len(c) >= 3 and c[0] == "auto" and c[1] == "->":
                resolved = float(c[2])
            out[words[0]] = (words[1], resolved)
    return out


def check_run_params(f, fname, used):
    """/RunParameters: the values used; /RunParametersGiven: the values as given."""
    for grp in ("RunParameters", "RunParametersGiven"):
        if grp not in f:
            fail(f"{fname}: no /{grp} group")
            return
    rp, given = f["RunParameters"].attrs, f["RunParametersGiven"].attrs
    def text(a, k):
        v = a[k]
        return v.decode() if isinstance(v, bytes) else str(v)
    for key, (written, resolved) in used.items():
        if key not in rp or key not in given:
            fail(f"{fname}: {key} missing from /RunParameters or /RunParametersGiven")
            continue
        if text(given, key) != written:
            fail(f"{fname}: /RunParametersGiven/{key} = {text(given, key)!r}, params-used.txt has {written!r}")
        v = text(rp, key)
        if resolved is None:
            if v != written:
                fail(f"{fname}: /RunParameters/{key} = {v!r}, params-used.txt has {written!r}")
        elif v == "auto" or not np.isclose(float(v), resolved, rtol=1e-8, atol=0):
            fail(f"{fname}: /RunParameters/{key} = {v!r}, params-used.txt resolves auto to {resolved}")
    if len(rp) != len(used) or len(given) != len(used):
        fail(f"{fname}: {len(rp)} and {len(given)} run parameters, params-used.txt has {len(used)}")


def check_file(fname, nfiles_given, units, used=None):
    """Checks one file; returns (NumPart_ThisFile, NumPart_Total + HighWord << 32, Time, ids,
    Header/BoundingBox, the lowest and highest coordinates)."""
    with h5py.File(fname, "r") as f:
        # Groups that would route the file to another yt/pynbody frontend, or
        # whose attributes yt/Pylians would merge over the Header.
        for bad in ("FOF", "Group", "Subhalo", "Constants", "Config", "Policy", "Cosmology",
                    "Parameters"):
            if bad in f:
                fail(f"{fname}: has a /{bad} group (another reader's frontend would claim the file)")
        if "Header" not in f:
            fail(f"{fname}: no /Header group")
            return None
        h = f["Header"]
        this_file = vector6(h, "NumPart_ThisFile", fname, "iu")
        total = vector6(h, "NumPart_Total", fname, "iu")
        high = vector6(h, "NumPart_Total_HighWord", fname, "iu", "uint32")
        mtab = vector6(h, "MassTable", fname, "f", "float64")
        time = scalar(h, "Time", fname, "f")
        z = scalar(h, "Redshift", fname, "f")
        box = scalar(h, "BoxSize", fname, "f")
        nfiles = scalar(h, "NumFilesPerSnapshot", fname, "i")
        for k in ("Omega0", "OmegaLambda", "HubbleParam"):
            scalar(h, k, fname, "f")
        scalar(h, "Flag_Entropy_ICs", fname, "i")
        dim = scalar(h, "Dimension", fname, "i")
        code = attr(h, "Code", fname)
        if isinstance(code, bytes):
            code = code.decode()
        if code == "SWIFT":
            fail(f"{fname}: Header/Code is 'SWIFT' (yt would use its SWIFT frontend)")
        if z is not None and z != 0.0:
            fail(f"{fname}: Redshift = {z}, expected 0 for an isolated run")
        if box is not None and box != 0.0:
            fail(f"{fname}: BoxSize = {box}, expected 0 (isolated, no periodic box)")
        if "OmegaLambda" in h.attrs and float(h.attrs["OmegaLambda"]) != 0.0:
            fail(f"{fname}: OmegaLambda != 0 turns cosmology on in yt")
        if dim is not None and dim != 3:
            fail(f"{fname}: Dimension = {dim}")
        if nfiles is not None and nfiles != nfiles_given:
            fail(f"{fname}: NumFilesPerSnapshot = {nfiles}, but {nfiles_given} file(s) were given")
        if total is not None and np.any(total >= 2**32):
            fail(f"{fname}: NumPart_Total {total} is not the low 32-bit word (Gadget, SWIFT add HighWord << 32)")
        if total is not None and high is not None:
            total = total.astype(np.uint64) + (high.astype(np.uint64) << np.uint64(32))
        # The box yt takes as bounding_box= (BoxSize would make it periodic).
        bbox = attr(h, "BoundingBox", fname)
        if bbox is not None:
            bbox = np.asarray(bbox)
            if bbox.shape != (2, 3) or bbox.dtype != np.float64 or not np.all(np.isfinite(bbox)) \
                    or not np.all(bbox[0] < bbox[1]):
                fail(f"{fname}: Header/BoundingBox {bbox!r} is not a [2, 3] box, lower then upper corner")
                bbox = None

        # Units: pynbody's Gadget names and SWIFT's names, all scalars.
        if "Units" not in f:
            fail(f"{fname}: no /Units group")
        else:
            u = f["Units"]
            vals = {k: scalar(u, k, fname, "f") for k in
                    ("UnitLength_in_cm", "UnitMass_in_g", "UnitVelocity_in_cm_per_s", "UnitTime_in_s",
                     "Unit length in cgs (U_L)", "Unit mass in cgs (U_M)", "Unit time in cgs (U_t)",
                     "Unit current in cgs (U_I)", "Unit temperature in cgs (U_T)")}
            L, M, V, T = (vals[k] for k in ("UnitLength_in_cm", "UnitMass_in_g",
                                            "UnitVelocity_in_cm_per_s", "UnitTime_in_s"))
            if None not in (L, M, V, T):
                if not np.isclose(T, L / V, rtol=1e-12):
                    fail(f"{fname}: UnitTime_in_s = {T}, expected L/V = {L / V}")
                if (vals["Unit length in cgs (U_L)"], vals["Unit mass in cgs (U_M)"],
                        vals["Unit time in cgs (U_t)"]) != (L, M, T):
                    fail(f"{fname}: SWIFT-named units differ from the Gadget-named ones")
                if units and not np.allclose((L, M, V), units, rtol=1e-12):
                    fail(f"{fname}: units (L, M, V) = {(L, M, V)}, expected {tuple(units)}")

        if used is not None:
            check_run_params(f, fname, used)

        # Particle groups.
        ids_all = []
        lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
        for t in range(6):
            g = f"PartType{t}"
            n = int(this_file[t]) if this_file is not None else None
            if g not in f:
                if n:
                    fail(f"{fname}: NumPart_ThisFile[{t}] = {n} but there is no /{g}")
                continue
            if n == 0:
                fail(f"{fname}: /{g} exists but NumPart_ThisFile[{t}] = 0")
                continue
            grp = f[g]
            shapes = {"Coordinates": (n, 3), "Velocities": (n, 3), "ParticleIDs": (n,), "Masses": (n,)}
            for k in ("Acceleration", "Potential"):
                if k in grp:
                    shapes[k] = (n, 3) if k == "Acceleration" else (n,)
            for k, shape in shapes.items():
                if k not in grp:
                    if k != "Masses" or (mtab is not None and mtab[t] == 0.0):
                        fail(f"{fname}: /{g} has no {k}")
                    continue
                d = grp[k]
                if d.shape != shape:
                    fail(f"{fname}: /{g}/{k} has shape {d.shape}, expected {shape}")
                if k == "ParticleIDs":
                    if d.dtype.kind not in "iu":
                        fail(f"{fname}: /{g}/ParticleIDs has type {d.dtype}")
                elif d.dtype.kind != "f":
                    fail(f"{fname}: /{g}/{k} has type {d.dtype}, expected float")
                elif not np.all(np.isfinite(d[...])):
                    fail(f"{fname}: /{g}/{k} holds non-finite values")
            if "ParticleIDs" in grp:
                ids_all.append(grp["ParticleIDs"][...])
            if "Coordinates" in grp and grp["Coordinates"].shape == (n, 3):
                x = grp["Coordinates"][...]
                lo, hi = np.minimum(lo, x.min(axis=0)), np.maximum(hi, x.max(axis=0))
            if "Masses" in grp:
                if mtab is not None and mtab[t] != 0.0:
                    fail(f"{fname}: MassTable[{t}] = {mtab[t]} != 0 although /{g}/Masses exists")
                if np.any(grp["Masses"][...] <= 0):
                    fail(f"{fname}: /{g}/Masses has non-positive masses")
        ids = np.concatenate(ids_all) if ids_all else np.zeros(0, np.uint64)
        if ids.size and ids.dtype.kind == "i" and np.any(ids < 0):
            fail(f"{fname}: negative ParticleIDs (SWIFT rejects them)")
        return this_file, total, time, ids, bbox, lo, hi


def main(argv):
    units, same_as, used, files = None, None, None, []
    i = 0
    while i < len(argv):
        if argv[i] == "--units":
            units = [float(x) for x in argv[i + 1].split(",")]
            i += 2
        elif argv[i] == "--params-used":
            used = read_params_used(argv[i + 1])
            i += 2
        elif argv[i] == "--same-as":
            same_as = argv[i + 1]
            i += 2
        else:
            files.append(argv[i])
            i += 1
    if not files:
        print(__doc__)
        return 2
    results = [check_file(fn, len(files), units, used) for fn in files]
    if any(r is None for r in results):
        return 1
    counts = sum(r[0] for r in results if r[0] is not None)
    for fn, r in zip(files, results):
        if r[1] is not None and np.any(r[1] != counts):
            fail(f"{fn}: NumPart_Total (+ HighWord << 32) {r[1]} != sum of NumPart_ThisFile over the files {counts}")
        if r[2] != results[0][2]:
            fail(f"{fn}: Time {r[2]} differs from {files[0]}'s {results[0][2]}")
        if r[4] is not None and results[0][4] is not None and not np.array_equal(r[4], results[0][4]):
            fail(f"{fn}: Header/BoundingBox differs from {files[0]}'s")
    lo = np.min([r[5] for r in results], axis=0)
    hi = np.max([r[6] for r in results], axis=0)
    bbox = results[0][4]
    if bbox is not None and int(counts.sum()) and not (np.all(bbox[0] < lo) and np.all(hi < bbox[1])):
        fail(f"Header/BoundingBox {bbox.tolist()} does not hold every particle (extent {lo} to {hi})")
    ids = np.concatenate([r[3] for r in results])
    if ids.size != int(counts.sum()):
        fail(f"{len(ids)} ParticleIDs for {int(counts.sum())} particles")
    if np.unique(ids).size != ids.size:
        fail(f"ParticleIDs are not unique ({ids.size - np.unique(ids).size} duplicates)")

    if same_as:
        t0, i0, x0, v0, m0 = read_particles(files)
        others = [same_as]
        if same_as.endswith(".0.hdf5"):  # the first file of a set names the set
            with h5py.File(same_as, "r") as f:
                k = int(f["Header"].attrs["NumFilesPerSnapshot"])
            others = [same_as[:-len("0.hdf5")] + f"{j}.hdf5" for j in range(k)]
        t1, i1, x1, v1, m1 = read_particles(others)
        if t0 != t1:
            fail(f"Time {t0} != {t1} of {same_as}")
        if not np.array_equal(i0, i1):
            fail(f"ParticleIDs differ from {same_as}")
        else:
            for name, a, b in (("Coordinates", x0, x1), ("Velocities", v0, v1), ("Masses", m0, m1)):
                if not np.array_equal(a, b):
                    fail(f"{name} differ from {same_as} (max |diff| {np.max(np.abs(a - b))})")

    if failures:
        return 1
    print(f"PASS: {' '.join(files)}: {int(counts.sum())} particles, layout as yt/pynbody/SWIFT need"
          + (f", same particles as {same_as}" if same_as else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
