# SPDX-License-Identifier: GPL-3.0-or-later
# Copyright (C) the hytree authors
"""Shared helpers of the hytree-plot-* scripts: reading hytree's CSV files,
params-used.txt and (multi-file) HDF5 snapshots, writing a figure with the
Agg backend, and the conventions every figure follows (doc/sweeps.md):

* units: values are shown in the units the run records (params-used.txt's
  or the snapshot's UnitLength_in_cm, UnitMass_in_g,
  UnitVelocity_in_cm_per_s and G): Unit* all 1 with G = 1 are Henon
  N-body units, labelled "[N-body units]"; other cgs values are converted
  to the astronomical unit nearest (in log) to the code unit (time: s, yr,
  Myr, Gyr; length: cm, km, AU, pc, kpc, Mpc; mass: g, M_sun); without
  that information (or Unit* 1 with G != 1) "[code time]", "[code length]";
* the title names N, the scheme and, for snapshots, the time;
* legends sit outside the data area and name runs by the parameters in
  which they differ ("R1 = 0.032, n = 2").

Every read error is raised as PlotError with the name of the offending
file."""

import csv
import glob
import math
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
    return read_params_used(run_dir)[0]


def read_params_used(run_dir):
    """({key: value}, {keys given a value}) of RUN_DIR/params-used.txt:
    the values with auto resolved, and the keys that were set to a value
    (not left at their default and not auto); ({}, set()) when there is
    no such file."""
    path = os.path.join(run_dir, "params-used.txt")
    if not os.path.exists(path):
        return {}, set()
    used, given = {}, set()
    try:
        with open(path) as f:
            for line in f:
                body = re.split(r"(?:^|(?<=\s))[%#]", line, maxsplit=1)[0].split()
                if len(body) != 2:
                    continue
                key, val = body
                m = re.search(r"%\s*auto\s*->\s*(\S+)", line)
                used[key] = m.group(1) if val == "auto" and m else val
                if val != "auto" and not re.search(r"%\s*default\s*$", line):
                    given.add(key)
    except (OSError, UnicodeDecodeError) as e:
        raise PlotError(f"{path}: cannot read: {e}")
    return used, given


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


def snapshot_meta(path):
    """(Units, scheme or None) of a snapshot (its first file): /Units and
    Header/GravityConstant, and /RunParameters/Scheme (else the Scheme of a
    params-used.txt beside it)."""
    h5py = _h5py()
    first = snapshot_files(path)[0]
    units, scheme = Units(source=first), None
    try:
        with h5py.File(first, "r") as f:
            hdr = f["Header"].attrs if "Header" in f else {}
            g = float(hdr["GravityConstant"]) if "GravityConstant" in hdr else None
            if "Units" in f:
                u = f["Units"].attrs
                if all(k in u for k in ("UnitLength_in_cm", "UnitMass_in_g", "UnitVelocity_in_cm_per_s")):
                    units = Units(float(u["UnitLength_in_cm"]), float(u["UnitMass_in_g"]),
                                  float(u["UnitVelocity_in_cm_per_s"]), g, source=first)
            rp = f["RunParameters"].attrs if "RunParameters" in f else {}
            if "Scheme" in rp:
                v = rp["Scheme"]
                scheme = (v.decode() if isinstance(v, bytes) else str(v)).strip() or None
    except OSError as e:
        raise PlotError(f"{first}: cannot read as HDF5: {e}")
    if scheme is None:
        scheme = params_used(os.path.dirname(os.path.abspath(first))).get("Scheme")
    return units, scheme


# ---------------------------------------------------------------- units

YEAR_S = 3.15576e7          # Julian year
PC_CM = 3.085678e18         # the parsec of Gadget and SWIFT
MSUN_G = 1.989e33           # the solar mass of Gadget and SWIFT
LADDER = {
    "time": [("s", 1.0), ("yr", YEAR_S), ("Myr", 1e6 * YEAR_S), ("Gyr", 1e9 * YEAR_S)],
    "length": [("cm", 1.0), ("km", 1e5), ("AU", 1.495978707e13), ("pc", PC_CM), ("kpc", 1e3 * PC_CM),
               ("Mpc", 1e6 * PC_CM)],
    "mass": [("g", 1.0), (r"M$_\odot$", MSUN_G)],
}
CODE_NAMES = {"time": "code time", "length": "code length", "mass": "code mass",
              "surface density": "code mass / code length$^2$"}


class Units:
    """How the code units of a run are shown (the module docstring gives the
    convention). kind: 'nbody', 'phys' or 'code'. factor(q) converts code
    values of quantity q ('time', 'length', 'mass', 'surface density') to
    the unit that unit(q) names."""

    def __init__(self, length_cm=None, mass_g=None, velocity_cm_s=None, G=None, source=""):
        self.source = source
        self.cgs = None
        vals = (length_cm, mass_g, velocity_cm_s)
        if None in vals or not all(v > 0 for v in vals):
            self.kind = "code"
        elif vals == (1.0, 1.0, 1.0):
            self.kind = "nbody" if G is None or G == 1.0 else "code"
        else:
            self.kind = "phys"
            self.cgs = {"length": length_cm, "mass": mass_g, "time": length_cm / velocity_cm_s}
            self.show = {}
            for q in ("time", "length", "mass"):
                self.show[q] = min(LADDER[q], key=lambda u: abs(math.log10(self.cgs[q] / u[1])))
            self.cgs["surface density"] = mass_g / length_cm ** 2
            self.show["surface density"] = (f"{self.show['mass'][0]} {self.show['length'][0]}$^{{-2}}$",
                                            self.show["mass"][1] / self.show["length"][1] ** 2)
        self.key = (self.kind, tuple(sorted(self.cgs.items())) if self.cgs else None)

    @classmethod
    def from_params(cls, used, source=""):
        """The units of a params-used.txt ({key: value}; code units if {})."""
        def num(k, default):
            try:
                return float(used.get(k, default))
            except ValueError:
                return None
        if not used:
            return cls(source=source)
        return cls(num("UnitLength_in_cm", 1), num("UnitMass_in_g", 1), num("UnitVelocity_in_cm_per_s", 1),
                   num("GravityConstant", 1), source=source)

    def unit(self, q):
        if self.kind == "nbody":
            return "N-body units"
        if self.kind == "code":
            return CODE_NAMES[q]
        return self.show[q][0]

    def factor_from(self, run, q):
        """Factor from the code units of RUN (a Units) to the units shown by
        this one (1 unless both are physical)."""
        if self.kind == "phys" and run.kind == "phys":
            return run.cgs[q] / self.show[q][1]
        return 1.0

    def factor(self, q):
        return self.factor_from(self, q)

    def axis(self, name, q):
        """An axis label: NAME [unit]."""
        return f"{name} [{self.unit(q)}]"

    def per_time(self):
        """The unit of a wall-clock time per unit of simulated time."""
        if self.kind == "phys":
            return f"s per {self.show['time'][0]}"
        return "s per N-body time unit" if self.kind == "nbody" else "s per code time unit"

    def time_text(self, t, t2=None):
        """'t = 0.2 (N-body units)', 't = 1.23 Gyr', 't = 0 to 0.2 (code units)'."""
        f = self.factor("time")
        v = f"{t * f:.4g}" + ("" if t2 is None else f" to {t2 * f:.4g}")
        if self.kind == "phys":
            return f"t = {v} {self.show['time'][0]}"
        return f"t = {v} ({'N-body' if self.kind == 'nbody' else 'code'} units)"


def common_units(units, what):
    """The Units to show several runs in: theirs when they agree (or all are
    physical: converted to the first one's units), else code units, with a
    warning."""
    if all(u.key == units[0].key for u in units) or all(u.kind == "phys" for u in units):
        return units[0]
    print(f"{os.path.basename(sys.argv[0])}: warning: {what} record different unit systems "
          f"({', '.join(u.source or '?' for u in units)}); showing code units", file=sys.stderr)
    return Units()


# ---------------------------------------------------------------- runs

GENERATOR = re.compile(r"^(plummer|hernquist|king|uniform):(\d+)(:|$)")


def _count_hdf5(path):
    """Total particle count of an HDF5 snapshot's header, or None."""
    try:
        import h5py
        with h5py.File(path, "r") as f:
            h = f["Header"].attrs
            n = [int(x) for x in h["NumPart_Total"]]
            hw = [int(x) for x in h["NumPart_Total_HighWord"]] if "NumPart_Total_HighWord" in h else [0] * 6
            return sum(a + (b << 32) for a, b in zip(n, hw))
    except Exception:  # noqa: BLE001 - only a hint for the title
        return None


def particle_count(run_dir, used):
    """N of a run: from the generator string in InitCondFile, a sweep
    point's stdout.log, the first snapshot, or the initial conditions'
    HDF5 header; None when none of these tells."""
    ic = used.get("InitCondFile", "")
    m = GENERATOR.match(ic)
    if m:
        return int(m.group(2))
    logs = [os.path.join(run_dir, "stdout.log")]
    if os.path.basename(run_dir) == "output":
        logs.append(os.path.join(os.path.dirname(run_dir), "stdout.log"))
    for log in logs:
        try:
            with open(log, errors="replace") as f:
                for line in f:
                    m = re.match(r"loaded (\d+) particles", line)
                    if m:
                        return int(m.group(1))
        except OSError:
            pass
    for p in sorted(glob.glob(os.path.join(run_dir, "snapshot_*.hdf5")))[:1] + [ic]:
        if p and os.path.isfile(p) and (p.endswith(".hdf5") or p.endswith(".h5")):
            n = _count_hdf5(p)
            if n:
                return n
    return None


class Run:
    """One run, from a file of its OutputDir: its parameters (params-used.txt
    beside the file), N, scheme and units."""

    def __init__(self, path):
        self.path = path
        self.dir = os.path.dirname(os.path.abspath(path))
        self.used, self.given = read_params_used(self.dir)
        self.n = particle_count(self.dir, self.used)
        self.scheme = self.used.get("Scheme")
        self.units = Units.from_params(self.used, source=os.path.join(self.dir, "params-used.txt")
                                       if self.used else f"{self.dir} (no params-used.txt)")
        self.name = run_label(path)


def _joined(vals, fmt=str):
    out = []
    for v in vals:
        if v not in out:
            out.append(v)
    return "/".join(fmt(v) for v in out)


def title_text(ns, schemes, time=None):
    """'N = 2048, hybrid scheme[, TIME]' for the N and schemes of the runs
    shown (several values joined by '/'; None: unknown)."""
    n = "N unknown" if None in ns else f"N = {_joined(ns)}"
    s = "scheme unknown" if None in schemes else f"{_joined(schemes)} scheme"
    return ", ".join([n, s] + ([time] if time else []))


SHORT = {"SoftStepRatio": "n", "TimeStepHard": "dt_h", "Softening": "ε", "GravityConstant": "G",
         "OpenCLDevice": "device", "InitCondFile": "ICs"}
NOT_LABELS = {"OutputDir"}


def _numbers(vals):
    try:
        return [float(v) for v in vals]
    except ValueError:
        return None


def short_values(vals):
    """Values as text, numbers with the fewest significant digits (2 at
    least) that keep different values different."""
    nums = _numbers(vals)
    if nums is None:
        return [os.path.basename(v) if "/" in v else v for v in vals]
    want = len(set(nums))
    for p in range(2, 10):
        txt = [f"{x:.{p}g}" for x in nums]
        if len(set(txt)) == want:
            return txt
    return list(vals)


def run_labels(runs, given=None):
    """Legend texts of runs: GIVEN (--label), else the parameters in which
    the runs differ ("R1 = 0.032, n = 2": keys that some run set to a value,
    N rather than InitCondFile when N differs), else the directory names,
    else 'run 1', 'run 2', ..."""
    if given:
        return list(given)
    if len(runs) < 2:
        return [r.name for r in runs]
    parts = [[] for _ in runs]
    if len({r.n for r in runs}) > 1:
        for i, t in enumerate(short_values([str(r.n) for r in runs])):
            parts[i].append(f"N = {t}")
    keys = []
    for r in runs:
        keys += [k for k in r.used if k not in keys]
    # keys named in a sweep point's name (R1=0.0322823_SoftStepRatio=2) first, in that order
    named = [m.group(1) for m in re.finditer(r"(?:^|_)([A-Za-z]\w*?)=", runs[0].name)]
    keys.sort(key=lambda k: named.index(k) if k in named else len(named))
    for k in keys:
        if k in NOT_LABELS or (k == "InitCondFile" and len({r.n for r in runs}) > 1):
            continue
        vals = [r.used.get(k, "?") for r in runs]
        if len(set(vals)) < 2 or not any(k in r.given for r in runs):
            continue
        for i, t in enumerate(short_values(vals)):
            parts[i].append(t if k == "Scheme" else f"{SHORT.get(k, k)} = {t}")
    labels = [", ".join(p) for p in parts]
    if all(labels) and len(set(labels)) == len(labels):
        return labels
    names = [r.name for r in runs]
    if len(set(names)) == len(names):
        return names
    return [f"run {i + 1}" for i in range(len(runs))]


# ---------------------------------------------------------------- layout

def figure(width, height):
    """A matplotlib Figure (no pyplot state) with constrained layout, which
    keeps the title, labels, colour bars and outside legends in the
    figure."""
    pyplot()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def legend_beside(ax, handles=None, **kw):
    """A legend right of the axes, top-aligned, outside the data area."""
    kw.setdefault("fontsize", "small")
    if handles is not None:
        kw["handles"] = handles
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kw)


def legend_above(ax, handles=None, **kw):
    """A legend in one row (up to 6 entries a row) above the axes, outside
    the data area (the title then goes on the figure: set_title)."""
    kw.setdefault("fontsize", "small")
    n = len(handles) if handles is not None else len(ax.get_legend_handles_labels()[0])
    if handles is not None:
        kw["handles"] = handles
    return ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.02), borderaxespad=0.0,
                     ncol=max(1, min(n, 6)), **kw)


def set_title(fig, text):
    """The figure's title (a suptitle: above the axes and any legend)."""
    fig.suptitle(text, fontsize="medium")


def fit_axes(fig, ax, width, height):
    """Resize FIG so that the data area of AX is about WIDTH x HEIGHT inches
    after the layout has made room for labels, legends and colour bars (and
    at least as tall as a legend beside it)."""
    for _ in range(4):
        fig.draw_without_rendering()
        pos = ax.get_position()
        fw, fh = fig.get_size_inches()
        leg = ax.get_legend()
        h = height
        if leg is not None and leg.get_bbox_to_anchor().x0 > ax.get_window_extent().x1:
            h = max(height, leg.get_window_extent().height / fig.dpi)
        dw, dh = width - pos.width * fw, h - pos.height * fh
        if abs(dw) < 0.02 and abs(dh) < 0.02:
            break
        fig.set_size_inches(max(fw + dw, 1.0), max(fh + dh, 1.0))


def plain_log_labels(axis):
    """Tick labels of a log AXIS as plain numbers (0.3, 2) rather than
    3 x 10^-1, on the ticks matplotlib would label."""
    from matplotlib.ticker import LogFormatterSciNotation

    class Plain(LogFormatterSciNotation):
        def __call__(self, x, pos=None):
            return f"{x:g}" if super().__call__(x, pos) else ""
    axis.set_major_formatter(Plain())
    axis.set_minor_formatter(Plain(labelOnlyBase=False, minor_thresholds=(2, 0.4)))
