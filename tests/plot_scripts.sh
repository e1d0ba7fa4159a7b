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
#  - hytree-plot-sweep on a hand-written results.csv.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${HYTREE_SCRIPTS_DIR:?HYTREE_SCRIPTS_DIR must point at the scripts directory}"
: "${top_builddir:=.}"
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
           "$S"/hytree-plot-lagrangian "$S"/hytree-sweep; do
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
plot() { # name, args... (ok expected)
  name=$1; shift
  if ! "$PY" "$S/hytree-plot-$name" "$@" >"$tmp/$name.log" 2>&1; then
    echo "FAIL: hytree-plot-$name $*:"; cat "$tmp/$name.log"; fail=1
  fi
}
bad() { # name, expected text in the message, args... (exit 1 expected)
  name=$1 want=$2; shift 2
  "$PY" "$S/hytree-plot-$name" "$@" >"$tmp/bad.log" 2>&1
  rc=$?
  if [ $rc != 1 ] || ! grep -q "^hytree-plot-$name: error: .*$want" "$tmp/bad.log"; then
    echo "FAIL: hytree-plot-$name $* gave status $rc, expected 1 and a message with '$want':"; cat "$tmp/bad.log"; fail=1
  fi
}

for name in energy timings sweep density lagrangian; do
  "$PY" "$S/hytree-plot-$name" --help >/dev/null 2>&1 || { echo "FAIL: hytree-plot-$name --help"; fail=1; }
done
plot energy "$run" "$run/energy.csv" --label a --label b -o "$tmp/energy.png"
plot timings "$run" -o "$tmp/timings.png"
plot density "$run/snapshot_002.hdf5" -o "$tmp/density.png"
plot lagrangian "$run" -o "$tmp/lagr.png" --csv "$tmp/lagr.csv"
for f in energy timings density lagr; do
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
            f.copy("Header", g)
            g["Header"].attrs["NumFilesPerSnapshot"] = 2
            this = g["Header"].attrs["NumPart_ThisFile"]
            this[1] = cut[k + 1] - cut[k]
            g["Header"].attrs["NumPart_ThisFile"] = this
            for d in ("Coordinates", "Masses", "ParticleIDs", "Velocities"):
                g[f"PartType1/{d}"] = f[f"PartType1/{d}"][cut[k]:cut[k + 1]]
EOPY
plot lagrangian "$run/snapshot_002.hdf5" -o "$tmp/l1.png" --csv "$tmp/l1.csv"
plot lagrangian "$tmp/multi/snapshot_002.0.hdf5" -o "$tmp/l2.png" --csv "$tmp/l2.csv"
plot lagrangian "$tmp/multi" -o "$tmp/l3.png" --csv "$tmp/l3.csv"
cmp -s "$tmp/l1.csv" "$tmp/l2.csv" && cmp -s "$tmp/l1.csv" "$tmp/l3.csv" ||
  { echo "FAIL: the multi-file set gives other radii:"; cat "$tmp/l1.csv" "$tmp/l2.csv" "$tmp/l3.csv"; fail=1; }
plot density "$tmp/multi/snapshot_002" -o "$tmp/dm.png"
png "$tmp/dm.png" || { echo "FAIL: density of the multi-file set"; fail=1; }
rm "$tmp/multi/snapshot_002.1.hdf5"
bad density "snapshot_002.1.hdf5: missing file" "$tmp/multi/snapshot_002.0.hdf5" -o "$tmp/x.png"

# results.csv for hytree-plot-sweep (columns as written by hytree-sweep collect)
cat >"$tmp/results.csv" <<EOR
point,R1,SoftStepRatio,max_rel_energy_error,final_rel_energy_error,time_per_dt_s,t_run,exit_status,error
a,0.03,2,2.0e-4,1.0e-4,0.02,0.3,0,
b,0.06,2,1.5e-4,1.0e-4,0.03,0.4,0,
c,0.06,4,1.2e-4,1.1e-4,0.015,0.2,0,
d,-1,4,,,,,1,exit status 1: bad R1
EOR
plot sweep "$tmp/results.csv" -o "$tmp/sweep.png"
png "$tmp/sweep.png" || { echo "FAIL: sweep.png"; fail=1; }

# bad input names the file
bad density "nothere.hdf5: no such file" "$tmp/nothere.hdf5"
bad density "energy.csv: cannot read as HDF5" "$run/energy.csv" -o "$tmp/x.png"
bad energy "params-used.txt: no column time" "$run/params-used.txt" -o "$tmp/x.png"
bad timings "energy.csv: no column t_step" "$run/energy.csv" -o "$tmp/x.png"
bad sweep "energy.csv: no column R1" "$run/energy.csv" -o "$tmp/x.png"
bad lagrangian "directory without snapshot_NNN.hdf5" "$tmp" -o "$tmp/x.png"
exit $fail
