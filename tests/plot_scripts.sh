#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# plot_scripts.sh: the hytree-plot-* scripts on the output of one small run
# (2k Plummer sphere, pocl CPU, 3 snapshots: t = 0, the step end at or after
# 0.1, and 0.2).
#  - each script's --help exits 0; each writes a non-empty PNG with -o;
#  - hytree-plot-lagrangian --csv: 3 rows in time order, and the
#    half-mass radius at t = 0 within 10 % of the Plummer value 1.305 a,
#    a = 3 pi / 16 in Henon units;
#  - a multi-file set (the last snapshot split into 2 files) gives the same
#    Lagrangian radii as the single file, and hytree-plot-density reads it;
#  - bad input (a missing file, a CSV file given as a snapshot, a file
#    without the expected columns) exits 1 with a message naming the file;
#  - hytree-plot-sweep on a hand-written results.csv;
#  - hytree-plot-bench on a hand-written `hytree bench --time` CSV whose
#    Pareto front is known: its pareto_front() finds exactly those points
#    (two dominated ones left out: one slower at the same error, one slower
#    and less accurate), and the figure has both panels;
#  - every figure the script calls above make is built again through the
#    script's make_figure() and checked on the Figure object by
#    tests/check_plot_figures.py: a title with N, the scheme (and the time
#    for snapshots), labelled axes with [units] (colour bars too), legends
#    outside the data area with short texts; timings per unit of simulated
#    time. Hand-made runs add: two runs of other SoftStepRatio and scheme
#    (hybrid n = 2, tree n = 8) that take the same wall time per unit of
#    simulated time and so get bars of the same height (10 s), legends
#    "hybrid, n = 2" and "tree, n = 8"; Gadget units (kpc, 1e10 Msun, km/s)
#    shown in Gyr, kpc and Msun kpc^-2.
# With PLOT_FIGURES_DIR set, the figures of the run (one per script) are
# also copied there, to be looked at.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${HYTREE_SCRIPTS_DIR:?HYTREE_SCRIPTS_DIR must point at the scripts directory}"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
PY=${PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import numpy, h5py, matplotlib' 2>/dev/null; then
  echo "SKIP: $PY cannot import numpy, h5py and matplotlib"; exit 77
fi
tmp="$top_builddir/tests/tmp-plot-scripts-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
S=$HYTREE_SCRIPTS_DIR
# each script's first line names the Python configure found (PYTHON), not
# whichever python3 comes first on PATH
if [ -n "${PYTHON:-}" ]; then
  for f in "$S"/hytree-plot-energy "$S"/hytree-plot-timings "$S"/hytree-plot-sweep "$S"/hytree-plot-density \
           "$S"/hytree-plot-lagrangian "$S"/hytree-plot-bench "$S"/hytree-sweep; do
    [ "$(head -n 1 "$f")" = "#!$PYTHON" ] || { echo "FAIL: $f starts with $(head -n 1 "$f"), not #!$PYTHON"; fail=1; }
  done
fi
run=$tmp/run
if ! "$HYTREE" run /dev/null -P InitCondFile=plummer:2048:3 -P "OutputDir=$run" -P TimeEnd=0.2 \
     -P SnapshotInterval=0.1 -P OpenCLDevice=cpu >"$tmp/run.log" 2>&1; then
  echo "FAIL: hytree run failed:"; cat "$tmp/run.log"; exit 1
fi

png() { # file: non-empty PNG?
  "$PY" -c 'import sys; d = open(sys.argv[1], "rb").read(); sys.exit(not (len(d) > 1000 and d[:8] == b"\x89PNG\r\n\x1a\n"))' "$1"
}
plot() { # name, what the figure must show (check_plot_figures.py's ITEMs), args... (ok expected)
  name=$1 want=$2; shift 2
  if ! "$PY" "$S/hytree-plot-$name" "$@" >"$tmp/$name.log" 2>&1; then
    echo "FAIL: hytree-plot-$name $*:"; cat "$tmp/$name.log"; fail=1
  fi
  { echo "@@@ $name"; echo "want: $want"; for x in "$@"; do echo "$x"; done; } >>"$tmp/figures.list"
}
bad() { # name, expected text in the message, args... (exit 1 expected)
  name=$1 want=$2; shift 2
  "$PY" "$S/hytree-plot-$name" "$@" >"$tmp/bad.log" 2>&1
  rc=$?
  if [ $rc != 1 ] || ! grep -q "^hytree-plot-$name: error: .*$want" "$tmp/bad.log"; then
    echo "FAIL: hytree-plot-$name $* gave status $rc, expected 1 and a message with '$want':"; cat "$tmp/bad.log"; fail=1
  fi
}

for name in energy timings sweep density lagrangian bench; do
  "$PY" "$S/hytree-plot-$name" --help >/dev/null 2>&1 || { echo "FAIL: hytree-plot-$name --help"; fail=1; }
done
nb="N = 2048|hybrid scheme"
plot energy "$nb|x=t [N-body units]|L=a;b" "$run" "$run/energy.csv" --label a --label b -o "$tmp/energy2.png"
plot energy "$nb|x=t [N-body units]" "$run" -o "$tmp/energy.png"
plot timings "$nb|y=[s per N-body time unit]" "$run" -o "$tmp/timings.png"
plot density "$nb|t = 0.2 (N-body units)|x=[N-body units]|c=[N-body units]" "$run/snapshot_002.hdf5" \
  -o "$tmp/density.png"
plot lagrangian "$nb|t = 0 to 0.2 (N-body units)|x=t [N-body units]|y=[N-body units]|L=10 %;50 %;90 %" \
  "$run" -o "$tmp/lagr.png" --csv "$tmp/lagr.csv"
for f in energy energy2 timings density lagr; do
  png "$tmp/$f.png" || { echo "FAIL: $f.png is missing, small or not a PNG"; fail=1; }
done

# Lagrangian radii
"$PY" - "$tmp/lagr.csv" <<'EOPY' || fail=1
import math, sys
rows = [l.strip().split(",") for l in open(sys.argv[1])]
head, body = rows[0], [[float(x) for x in r] for r in rows[1:]]
t = [r[0] for r in body]
if head != ["time", "r_0.1", "r_0.5", "r_0.9"] or len(t) != 3 or t[0] != 0 or not 0 < t[1] < 0.2 or t[2] != 0.2:
    sys.exit(f"FAIL: lagrangian CSV {rows}")
rh = 1.305 * 3 * math.pi / 16
r = body[0]
if not (r[1] < r[2] < r[3] and abs(r[2] - rh) < 0.1 * rh):
    sys.exit(f"FAIL: radii at t = 0 {r[1:]}, half-mass radius should be near {rh:.4f}")
print(f"Lagrangian radii at t = 0: {r[1:]} (Plummer half-mass radius {rh:.4f})")
EOPY

# a multi-file set made from the last snapshot
"$PY" - "$run/snapshot_002.hdf5" "$tmp/multi/snapshot_002" <<'EOPY' || fail=1
import os, sys, h5py
src, base = sys.argv[1], sys.argv[2]
os.makedirs(os.path.dirname(base))
with h5py.File(src, "r") as f:
    n = f["PartType1/Coordinates"].shape[0]
    cut = [0, n // 3, n]
    for k in range(2):
        with h5py.File(f"{base}.{k}.hdf5", "w") as g:
            for grp in ("Header", "Units", "RunParameters"):     # every file has the full layout
                f.copy(grp, g)
            g["Header"].attrs["NumFilesPerSnapshot"] = 2
            this = g["Header"].attrs["NumPart_ThisFile"]
            this[1] = cut[k + 1] - cut[k]
            g["Header"].attrs["NumPart_ThisFile"] = this
            for d in ("Coordinates", "Masses", "ParticleIDs", "Velocities"):
                g[f"PartType1/{d}"] = f[f"PartType1/{d}"][cut[k]:cut[k + 1]]
EOPY
plot lagrangian "$nb|t = 0.2 (N" "$run/snapshot_002.hdf5" -o "$tmp/l1.png" --csv "$tmp/l1.csv"
plot lagrangian "$nb|t = 0.2 (N" "$tmp/multi/snapshot_002.0.hdf5" -o "$tmp/l2.png" --csv "$tmp/l2.csv"
plot lagrangian "$nb|t = 0.2 (N" "$tmp/multi" -o "$tmp/l3.png" --csv "$tmp/l3.csv"
cmp -s "$tmp/l1.csv" "$tmp/l2.csv" && cmp -s "$tmp/l1.csv" "$tmp/l3.csv" ||
  { echo "FAIL: the multi-file set gives other radii:"; cat "$tmp/l1.csv" "$tmp/l2.csv" "$tmp/l3.csv"; fail=1; }
plot density "$nb|t = 0.2 (N" "$tmp/multi/snapshot_002" -o "$tmp/dm.png"
png "$tmp/dm.png" || { echo "FAIL: density of the multi-file set"; fail=1; }
mv "$tmp/multi/snapshot_002.1.hdf5" "$tmp/" || fail=1
bad density "snapshot_002.1.hdf5: missing file" "$tmp/multi/snapshot_002.0.hdf5" -o "$tmp/x.png"
mv "$tmp/snapshot_002.1.hdf5" "$tmp/multi/" || fail=1     # for check_plot_figures.py

# results.csv for hytree-plot-sweep (columns as written by hytree-sweep collect),
# its points' params-used.txt (for the units) those of the run
cat >"$tmp/results.csv" <<EOR
point,R1,SoftStepRatio,Scheme,R2,N,ranks,device,steps,max_rel_energy_error,final_rel_energy_error,time_per_dt_s,t_run,t_hard_over_t_soft,interactions,exit_status,error
a,0.03,2,hybrid,0.06,2048,1,cpu,5,2.0e-4,1.0e-4,0.02,0.3,0.2,1000,0,
b,0.06,2,hybrid,0.12,2048,1,cpu,5,1.5e-4,1.0e-4,0.03,0.4,0.2,1000,0,
c,0.06,4,hybrid,0.12,2048,1,cpu,5,1.2e-4,1.1e-4,0.015,0.2,0.2,1000,0,
d,-1,4,hybrid,,2048,1,cpu,,,,,,,,1,exit status 1: bad R1
EOR
for p in a b c; do mkdir -p "$tmp/$p/output" && cp "$run/params-used.txt" "$tmp/$p/output/" || fail=1; done
plot sweep "$nb|c=R1 [N-body units]|x=[s]|L=n = 2;n = 4" "$tmp/results.csv" -o "$tmp/sweep.png"
png "$tmp/sweep.png" || { echo "FAIL: sweep.png"; fail=1; }

# a bench table (columns as hytree bench --time --grid SoftStepRatio=... --grid NCrit=... --csv writes);
# (time, max |dE/E|): the front is rows 4, 1, 2, 5 (0-based 3, 0, 1, 4); row 3 is slower and less
# accurate than row 2, row 6 as fast as row 2 at row 1's error
cat >"$tmp/bench.csv" <<EOR
ic,N,SoftStepRatio,NCrit,wall_time_s,steps,max_rel_energy_error,force_err_median,force_err_p99,force_err_max,interactions_per_s
plummer,4096,2,8,1.0,8,1.0e-5,1e-3,4e-3,2e-2,1e8
plummer,4096,2,16,2.0,8,5.0e-6,9e-4,3e-3,2e-2,1e8
plummer,4096,4,8,3.0,4,8.0e-6,1e-3,5e-3,2e-2,1e8
plummer,4096,4,16,0.5,4,4.0e-5,1e-3,6e-3,2e-2,1e8
plummer,4096,1,8,4.0,16,1.0e-6,1e-3,2e-3,2e-2,1e8
plummer,4096,1,16,2.0,16,1.0e-5,1e-3,7e-3,2e-2,1e8
EOR
"$PY" - "$S/hytree-plot-bench" "$tmp/bench.csv" <<'EOPY' || fail=1
import importlib.machinery, importlib.util, sys
loader = importlib.machinery.SourceFileLoader("hytree_plot_bench", sys.argv[1])
spec = importlib.util.spec_from_loader(loader.name, loader)
mod = importlib.util.module_from_spec(spec)
loader.exec_module(mod)
rows, keys = mod.read_table(sys.argv[2])
front = mod.pareto_front([(r["wall_time_s"], r["max_rel_energy_error"]) for r in rows])
if keys != ["SoftStepRatio", "NCrit"] or front != [3, 0, 1, 4]:
    sys.exit(f"FAIL: hytree-plot-bench: grid keys {keys}, front {front}; expected [SoftStepRatio, NCrit], [3, 0, 1, 4]")
print(f"bench front: rows {front}")
EOPY
plot bench "Accuracy per time: plummer, N = 4096|x=wall time of the steps [s]|y=max|L=configuration;Pareto front" \
  "$tmp/bench.csv" -o "$tmp/bench.png"
plot bench "N = 4096" "$tmp/bench.csv" --labels all -o "$tmp/bench-all.png"
for f in bench bench-all; do
  png "$tmp/$f.png" || { echo "FAIL: $f.png is missing, small or not a PNG"; fail=1; }
done

# hand-made runs: hybrid n = 2 (dt_s = 0.1, 4 steps of 1 s) and tree n = 8
# (dt_h = 0.025, 16 steps of 0.25 s), both 10 s per unit of simulated time
# (per dt_s they would differ: 1 s and 2 s); a run in Gadget units
"$PY" - "$tmp/synth" <<'EOPY' || fail=1
import os, sys
top = sys.argv[1]
GADGET = {"UnitLength_in_cm": "3.085678e21", "UnitMass_in_g": "1.989e43", "UnitVelocity_in_cm_per_s": "1e5",
          "GravityConstant": "43007.1"}
def run(name, scheme, n, dt, t_step, units=None):
    d = os.path.join(top, name)
    os.makedirs(d)
    with open(os.path.join(d, "params-used.txt"), "w") as f:
        f.write("% hytree 0.1.0: parameters used\n")
        f.write(f"InitCondFile              plummer:4096:1\nOutputDir                 {d}\n")
        f.write(f"Scheme                    {scheme}\nTimeEnd                   0.4\n")
        f.write(f"TimeStepHard              auto                 % auto -> {dt / (n if scheme == 'hybrid' else 1)} (default)\n")
        f.write(f"SoftStepRatio             {n}\n")
        for k in ("GravityConstant", "UnitLength_in_cm", "UnitMass_in_g", "UnitVelocity_in_cm_per_s"):
            if units:
                f.write(f"{k:25s} {units[k]}\n")
            else:
                f.write(f"{k:25s} 1                    % default\n")
    steps = round(0.4 / dt)
    with open(os.path.join(d, "timings.csv"), "w") as f:
        f.write("step,time,t_step,t_tree,t_transfer,t_walk_wall,t_dd,t_let_select,t_let_comm\n")
        for s in range(1, steps + 1):
            f.write(f"{s},{s * dt:.9g},{t_step},{0.2 * t_step},{0.05 * t_step},{0.6 * t_step},0,0,0\n")
    with open(os.path.join(d, "energy.csv"), "w") as f:
        f.write("time,rel_energy_error\n0,0\n")
        for s in range(1, steps + 1):
            f.write(f"{s * dt:.9g},{1e-5 * s}\n")
run("hybrid-n2", "hybrid", 2, 0.1, 1.0)
run("tree-n8", "tree", 8, 0.025, 0.25)
run("gadget", "hybrid", 2, 0.1, 1.0, GADGET)
EOPY
sy=$tmp/synth
plot timings "N = 4096|hybrid/tree scheme|rate=10;10|y=[s per N-body time unit]" "$sy/hybrid-n2" "$sy/tree-n8" \
  -o "$tmp/t2.png"
plot energy "N = 4096|hybrid/tree scheme|L=hybrid, n = 2;tree, n = 8|xmax=0.4" "$sy/hybrid-n2" "$sy/tree-n8" \
  -o "$tmp/e2.png"
# Gadget units: code time unit 3.085678e16 s = 0.977792 Gyr
plot energy "N = 4096|x=t [Gyr]|xmax=0.391117" "$sy/gadget" -o "$tmp/eg.png"
plot timings "N = 4096|rate=10.22713|y=[s per Gyr]" "$sy/gadget" -o "$tmp/tg.png"
mkdir "$tmp/phys" && cp "$run/snapshot_002.hdf5" "$tmp/phys/" && "$PY" - "$tmp/phys/snapshot_002.hdf5" <<'EOPY' || fail=1
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    u = f["Units"].attrs
    u["UnitLength_in_cm"], u["UnitMass_in_g"], u["UnitVelocity_in_cm_per_s"] = 3.085678e21, 1.989e43, 1e5
    f["Header"].attrs["GravityConstant"] = 43007.1
EOPY
plot density "$nb|t = 0.1956 Gyr|x=[kpc]|c=[M\$_\\odot\$ kpc\$^{-2}\$]" "$tmp/phys/snapshot_002.hdf5" -o "$tmp/dp.png"
for f in t2 e2 eg tg dp; do
  png "$tmp/$f.png" || { echo "FAIL: $f.png is missing, small or not a PNG"; fail=1; }
done

# every figure above, checked on its Figure object
"$PY" "$top_srcdir/tests/check_plot_figures.py" "$S" "$tmp/figures.list" || fail=1
if [ -n "${PLOT_FIGURES_DIR:-}" ]; then
  mkdir -p "$PLOT_FIGURES_DIR" &&
  for f in energy timings sweep density bench; do cp "$tmp/$f.png" "$PLOT_FIGURES_DIR/$f.png" || fail=1; done &&
  cp "$tmp/lagr.png" "$PLOT_FIGURES_DIR/lagrangian.png" || fail=1
fi

# bad input names the file
bad density "nothere.hdf5: no such file" "$tmp/nothere.hdf5"
bad density "energy.csv: cannot read as HDF5" "$run/energy.csv" -o "$tmp/x.png"
bad energy "params-used.txt: no column time" "$run/params-used.txt" -o "$tmp/x.png"
bad timings "energy.csv: no column t_step" "$run/energy.csv" -o "$tmp/x.png"
bad sweep "energy.csv: no column R1" "$run/energy.csv" -o "$tmp/x.png"
bad lagrangian "directory without snapshot_NNN.hdf5" "$tmp" -o "$tmp/x.png"
bad bench "energy.csv: no column ic" "$run/energy.csv" -o "$tmp/x.png"
bad bench "nothere.csv: cannot read" "$tmp/nothere.csv" -o "$tmp/x.png"
exit $fail
