# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright (C) the hytree authors
"""Shared helpers of the hytree-plot-* scripts: reading hytree's CSV files,
params-used.txt and (multi-file) HDF5 snapshots, and writing a figure with
the Agg backend. It owns no plot layout. Every read error is raised as
PlotError with the name of the offending file."""

import csv
import glob
import os
import re
import sys


class PlotError(Exception):
    """A user error; main() prints it as 'PROG: error: ...' and exits 1."""


def run_main(prog, fn):
    """Call fn() and turn PlotError/OSError into a message and exit status 1."""
    try:
        rc = fn()
    except PlotError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        rc = 1
    except OSError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        rc = 1
    sys.exit(rc or 0)


def pyplot():
    """matplotlib.pyplot with the Agg backend (no display needed)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise PlotError(f"matplotlib is needed (Debian: python3-matplotlib): {e}")
    return plt


def numpy():
    try:
        import numpy as np
    except ImportError as e:
        raise PlotError(f"numpy is needed (Debian: python3-numpy): {e}")
    return np


def save(fig, out):
    d = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(d):
        raise PlotError(f"{out}: directory {d} does not exist")
    try:
        fig.savefig(out, dpi=120)
    except (OSError, ValueError) as e:
        raise PlotError(f"{out}: cannot write the figure: {e}")


def resolve(arg, name):
    """ARG itself, or ARG/NAME when ARG is a directory (a run's OutputDir),
    or ARG/output/NAME (a hytree-sweep point directory)."""
    if os.path.isdir(arg):
        for p in (os.path.join(arg, name), os.path.join(arg, "output", name)):
            if os.path.isfile(p):
                return p
        raise PlotError(f"{arg}: directory without {name}")
    if not os.path.exists(arg):
        raise PlotError(f"{arg}: no such file")
    return arg


def run_label(path):
    """A short label for a run: its directory name (the point name for a
    hytree-sweep point)."""
    d = os.path.dirname(os.path.abspath(path))
    if os.path.basename(d) == "output":
        d = os.path.dirname(d)
    return os.path.basename(d) or d


def read_csv(path, need):
    """{column: numpy array} of a hytree CSV file; every column in `need`
    must exist and hold numbers."""
    np = numpy()
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError) as e:
        raise PlotError(f"{path}: cannot read: {e}")
    except csv.Error as e:
        raise PlotError(f"{path}: not a CSV file: {e}")
    if not rows:
        raise PlotError(f"{path}: empty file (no header line)")
    head = rows[0]
    missing = [c for c in need if c not in head]
    if missing:
        raise PlotError(f"{path}: no column {', '.join(missing)} (header: {','.join(head)[:120]})")
    body = [r for r in rows[1:] if r]
    out = {}
    for j, c in enumerate(head):
        vals = []
        for n, r in enumerate(body, 2):
            if len(r) != len(head):
                raise PlotError(f"{path}:{n}: {len(r)} fields, the header has {len(head)}")
            try:
                vals.append(float(r[j]))
            except ValueError:
                if c in need:
                    raise PlotError(f"{path}:{n}: column {c}: {r[j]!r} is not a number")
                vals.append(float("nan"))
        out[c] = np.array(vals)
    return out


def params_used(run_dir):
    """{key: value} of RUN_DIR/params-used.txt (auto values resolved), or {}
    when there is no such file."""
    path = os.path.join(run_dir, "params-used.txt")
    if not os.path.exists(path):
        return {}
    used = {}
    try:
        with open(path) as f:
            for line in f:
                body = re.split(r"(?:^|(?<=\s))[%#]", line, maxsplit=1)[0].split()
                if len(body) != 2:
                    continue
                key, val = body
                m = re.search(r"%\s*auto\s*->\s*(\S+)", line)
                used[key] = m.group(1) if val == "auto" and m else val
    except OSError as e:
        raise PlotError(f"{path}: cannot read: {e}")
    return used


def snapshot_files(path):
    """The files of one snapshot: PATH, or for a multi-file set (PATH ending
    in .0.hdf5, or PATH missing while PATH.0.hdf5 exists) BASE.0.hdf5 ..
    BASE.(K-1).hdf5 with K = NumFilesPerSnapshot of file 0."""
    h5py = _h5py()
    if path.endswith(".0.hdf5"):
        first, base = path, path[:-len(".0.hdf5")]
    elif not os.path.exists(path) and os.path.exists(path + ".0.hdf5"):
        first, base = path + ".0.hdf5", path
    elif not os.path.exists(path):
        raise PlotError(f"{path}: no such file (nor {path}.0.hdf5)")
    else:
        return [path]
    try:
        with h5py.File(first, "r") as f:
            k = int(f["Header"].attrs["NumFilesPerSnapshot"])
    except (OSError, KeyError) as e:
        raise PlotError(f"{first}: not a snapshot with Header/NumFilesPerSnapshot: {e}")
    files = [f"{base}.{i}.hdf5" for i in range(k)]
    for p in files:
        if not os.path.exists(p):
            raise PlotError(f"{p}: missing file of the {k}-file snapshot {first}")
    return files


def _h5py():
    try:
        import h5py
    except ImportError as e:
        raise PlotError(f"h5py is needed (Debian: python3-h5py): {e}")
    return h5py


def read_snapshot(path):
    """(time, positions (N, 3), masses (N)) of all particle types of a
    snapshot (one file or a multi-file set)."""
    np = numpy()
    h5py = _h5py()
    pos, mass = [], []
    time = None
    for p in snapshot_files(path):
        try:
            with h5py.File(p, "r") as f:
                if "Header" not in f:
                    raise PlotError(f"{p}: no /Header group (not a Gadget-style snapshot)")
                hdr = f["Header"].attrs
                t = float(hdr["Time"])
                if time is None:
                    time = t
                elif t != time:
                    raise PlotError(f"{p}: Time {t} differs from {time} of the first file")
                table = hdr["MassTable"] if "MassTable" in hdr else np.zeros(6)
                for ty in range(6):
                    g = f.get(f"PartType{ty}")
                    if g is None or "Coordinates" not in g:
                        continue
                    x = np.asarray(g["Coordinates"][...], dtype=float)
                    if x.ndim != 2 or x.shape[1] != 3:
                        raise PlotError(f"{p}: PartType{ty}/Coordinates has shape {x.shape}, not (N, 3)")
                    if "Masses" in g:
                        m = np.asarray(g["Masses"][...], dtype=float)
                    else:
                        m = np.full(len(x), float(table[ty]))
                    if m.shape != (len(x),):
                        raise PlotError(f"{p}: PartType{ty}/Masses does not match Coordinates")
                    pos.append(x)
                    mass.append(m)
        except OSError as e:
            raise PlotError(f"{p}: cannot read as HDF5: {e}")
        except KeyError as e:
            raise PlotError(f"{p}: missing {e} (not a hytree/Gadget snapshot?)")
    if not pos:
        raise PlotError(f"{path}: no particles (no PartTypeN/Coordinates)")
    return time, np.concatenate(pos), np.concatenate(mass)


def snapshot_series(args):
    """Snapshot names from files and directories: a directory stands for its
    snapshot_*.hdf5 files (a multi-file set counted once), in number order."""
    out = []
    for a in args:
        if os.path.isdir(a):
            names = set()
            for p in glob.glob(os.path.join(a, "snapshot_*.hdf5")):
                m = re.match(r"^(snapshot_\d+)(\.\d+)?\.hdf5$", os.path.basename(p))
                if m:
                    names.add((int(m.group(1)[len("snapshot_"):]),
                               os.path.join(a, m.group(1) + (".0.hdf5" if m.group(2) else ".hdf5"))))
            if not names:
                raise PlotError(f"{a}: directory without snapshot_NNN.hdf5 files")
            out += [p for _, p in sorted(names)]
        else:
            out.append(a)
    return out
