#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# sweep.sh: hytree-sweep run/collect on a 4k Plummer sphere (pocl CPU).
#  - a 3 x 2 x 2 grid: R1 = 0.5x,1x,2x and R2 = 1.5x,2x of their auto values,
#    SoftStepRatio = 2,4, run 2 at a time; collect --plot writes results.csv
#    with 12 rows, exit status 0, finite max/final |dE/E| < 1e-2, swept
#    values equal to factor x the probe's auto values (and to the values in
#    each point's params-used.txt), and non-empty PNG figures. (R2 = 1x of
#    its auto value 2 R1_auto would not exceed R1 = 2x; hytree refuses that.)
#  - running it again skips all 12 points (the skip lines, no new logs);
#  - a sweep with a point R1 = -1 (refused by hytree): run and collect exit
#    non-zero, collect names the point, results.csv still holds both points,
#    the failed one with its exit status and empty numbers;
#  - --slurm writes sweep.slurm (array 0-3, syntax-checked with bash -n) and
#    points.txt and runs nothing;
#  - with an MPI launcher: one point on 2 ranks, ranks = 2 in results.csv.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${HYTREE_SWEEP:?HYTREE_SWEEP must point at scripts/hytree-sweep}"
: "${top_builddir:=.}"
PY=${PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import numpy, h5py, matplotlib' 2>/dev/null; then
  echo "SKIP: $PY cannot import numpy, h5py and matplotlib"; exit 77
fi
tmp="$top_builddir/tests/tmp-sweep-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
sweep() { "$PY" "$HYTREE_SWEEP" "$@"; }

cat >"$tmp/base.txt" <<EOP
% base file of the sweep test
InitCondFile      plummer:4096:1
OutputDir         unused-by-the-sweep
TimeEnd           0.25
OpenCLDevice      cpu
EOP

# ---- the 12-point sweep
start=$(date +%s)
if ! sweep run "$tmp/base.txt" --grid R1=0.5x,1x,2x --grid R2=1.5x,2x --grid SoftStepRatio=2,4 \
     --out "$tmp/s" --jobs 2 --hytree "$HYTREE" >"$tmp/run1.log" 2>&1; then
  echo "FAIL: sweep run failed:"; cat "$tmp/run1.log"; exit 1
fi
echo "12 points in $(($(date +%s) - start)) s"
tail -n 2 "$tmp/run1.log"
if ! sweep collect "$tmp/s" --plot >"$tmp/collect1.log" 2>&1; then
  echo "FAIL: collect --plot failed:"; cat "$tmp/collect1.log"; exit 1
fi
cat "$tmp/collect1.log"
"$PY" - "$tmp/s" <<'EOPY' || fail=1
import csv, math, os, re, sys
d = sys.argv[1]
bad = []
auto = {}
for line in open(os.path.join(d, "_auto", "params-used.txt")):
    m = re.match(r"^(R1|R2)\s+auto\s+% auto -> (\S+)", line)
    if m:
        auto[m.group(1)] = float(m.group(2))
if set(auto) != {"R1", "R2"}:
    sys.exit(f"FAIL: no resolved R1/R2 in the probe's params-used.txt: {auto}")
rows = list(csv.DictReader(open(os.path.join(d, "results.csv"))))
if len(rows) != 12:
    bad.append(f"{len(rows)} rows in results.csv, expected 12")
seen = set()
for r in rows:
    p = r["point"]
    if r["exit_status"] != "0" or r["error"]:
        bad.append(f"{p}: exit_status {r['exit_status']!r}, error {r['error']!r}")
        continue
    for c in ("max_rel_energy_error", "final_rel_energy_error"):
        v = float(r[c])
        if not (math.isfinite(v) and 0 < v < 1e-2):
            bad.append(f"{p}: {c} = {v}, expected finite and in (0, 1e-2)")
    if float(r["final_rel_energy_error"]) > float(r["max_rel_energy_error"]):
        bad.append(f"{p}: final |dE/E| above the max")
    for c in ("time_per_dt_s", "t_run", "t_hard_over_t_soft"):
        if not float(r[c]) > 0:
            bad.append(f"{p}: {c} = {r[c]!r}, expected > 0")
    if not int(r["interactions"]) > 0:
        bad.append(f"{p}: interactions = {r['interactions']!r}")
    if r["N"] != "4096" or r["ranks"] != "1" or "Portable Computing Language" not in r["device"]:
        bad.append(f"{p}: N {r['N']!r}, ranks {r['ranks']!r}, device {r['device']!r}")
    r1, r2, n = float(r["R1"]), float(r["R2"]), r["SoftStepRatio"]
    f1 = [f for f in (0.5, 1, 2) if abs(r1 - f * auto["R1"]) <= 1e-9 * r1]
    f2 = [f for f in (1.5, 2) if abs(r2 - f * auto["R2"]) <= 1e-9 * r2]
    if len(f1) != 1 or len(f2) != 1 or n not in ("2", "4"):
        bad.append(f"{p}: R1 {r1}, R2 {r2}, SoftStepRatio {n} are not grid values "
                   f"(auto R1 {auto['R1']}, R2 {auto['R2']})")
        continue
    seen.add((f1[0], f2[0], n))
    used = {}
    for line in open(os.path.join(d, p, "output", "params-used.txt")):
        t = line.split()
        if len(t) >= 2 and t[0] in ("R1", "R2", "SoftStepRatio"):
            used[t[0]] = float(t[1])
    if used != {"R1": r1, "R2": r2, "SoftStepRatio": float(n)}:
        bad.append(f"{p}: params-used.txt has {used}")
    for f in ("params.txt", "stdout.log", "stderr.log", "exit_status"):
        if not os.path.isfile(os.path.join(d, p, f)):
            bad.append(f"{p}: no {f}")
if len(seen) != 12:
    bad.append(f"{len(seen)} distinct grid points, expected 12")
for fig in ("sweep.png", "energy.png", "timings.png"):
    path = os.path.join(d, fig)
    if not os.path.isfile(path) or os.path.getsize(path) < 1000 or open(path, "rb").read(8) != b"\x89PNG\r\n\x1a\n":
        bad.append(f"{fig}: missing, small or not a PNG")
for b in bad:
    print("FAIL:", b)
if not bad:
    e = sorted(float(r["max_rel_energy_error"]) for r in rows)
    print(f"results.csv: 12 points, max |dE/E| from {e[0]:.3e} to {e[-1]:.3e}")
sys.exit(1 if bad else 0)
EOPY

# ---- running it again skips every point
pt=$(head -n 1 "$tmp/s/points.txt")
case $pt in
  R1=0.0322823_R2=*_SoftStepRatio=2) ;;
  *) echo "FAIL: first point of points.txt is '$pt', expected R1=0.0322823_R2=..._SoftStepRatio=2"; fail=1 ;;
esac
cp "$tmp/s/$pt/stdout.log" "$tmp/stdout.before" || fail=1
if ! sweep run "$tmp/base.txt" --grid R1=0.5x,1x,2x --grid R2=1.5x,2x --grid SoftStepRatio=2,4 \
     --out "$tmp/s" --jobs 2 --hytree "$HYTREE" >"$tmp/run2.log" 2>&1; then
  echo "FAIL: second sweep run failed:"; cat "$tmp/run2.log"; fail=1
fi
n=$(grep -c ': skip .*: done (exit_status 0)$' "$tmp/run2.log")
if [ "$n" != 12 ] || ! grep -q '12 points: 0 run, 12 skipped, 0 failed' "$tmp/run2.log"; then
  echo "FAIL: the second run skipped $n points, expected 12:"; cat "$tmp/run2.log"; fail=1
fi
cmp -s "$tmp/stdout.before" "$tmp/s/$pt/stdout.log" ||
  { echo "FAIL: a skipped point's stdout.log changed"; fail=1; }

# ---- without --hytree, run from the build tree with hytree not on PATH:
# the sweep finds the build tree's hytree (beside the scripts directory)
if [ "$(cd "$(dirname "$HYTREE_SWEEP")/.." && pwd)/hytree" = "$(cd "$(dirname "$HYTREE")" && pwd)/hytree" ]; then
  if env PATH=/usr/bin:/bin "$PY" "$HYTREE_SWEEP" run "$tmp/base.txt" --grid SoftStepRatio=2 --out "$tmp/b" \
       >"$tmp/runb.log" 2>&1 && grep -q "1 points: 1 run, 0 skipped, 0 failed" "$tmp/runb.log"; then
    echo "ok: the build tree's hytree found without --hytree"
  else
    echo "FAIL: hytree-sweep from the build tree without --hytree:"; cat "$tmp/runb.log"; fail=1
  fi
fi

# ---- a failing point
if sweep run "$tmp/base.txt" --grid R1=-1,1x --out "$tmp/f" --hytree "$HYTREE" >"$tmp/runf.log" 2>&1; then
  echo "FAIL: a sweep with a failing point exited 0:"; cat "$tmp/runf.log"; fail=1
fi
grep -q 'R1=-1: FAILED with exit status 1' "$tmp/runf.log" ||
  { echo "FAIL: run did not report the point R1=-1 as failed:"; cat "$tmp/runf.log"; fail=1; }
if sweep collect "$tmp/f" >"$tmp/collectf.log" 2>&1; then
  echo "FAIL: collect exited 0 with a failed point:"; cat "$tmp/collectf.log"; fail=1
fi
grep -q "^hytree-sweep: failed point R1=-1: exit status 1: .*out of range" "$tmp/collectf.log" ||
  { echo "FAIL: collect did not name the failed point:"; cat "$tmp/collectf.log"; fail=1; }
"$PY" - "$tmp/f/results.csv" <<'EOPY' || fail=1
import csv, sys
rows = {r["point"]: r for r in csv.DictReader(open(sys.argv[1]))}
bad = []
if sorted(rows) != ["R1=-1", "R1=0.0645645"]:
    bad.append(f"points {sorted(rows)}")
else:
    f, ok = rows["R1=-1"], rows["R1=0.0645645"]
    if f["exit_status"] != "1" or f["max_rel_energy_error"] or f["time_per_dt_s"] or f["interactions"]:
        bad.append(f"failed row {f}")
    if ok["exit_status"] != "0" or not ok["max_rel_energy_error"]:
        bad.append(f"good row {ok}")
for b in bad:
    print("FAIL: failing-point results.csv:", b)
sys.exit(1 if bad else 0)
EOPY

# ---- SLURM mode: writes the array script, runs nothing
if ! sweep run "$tmp/base.txt" --grid R1=0.05,0.06 --grid SoftStepRatio=2,4 --out "$tmp/slurm" --slurm \
     --ranks 4 --jobs 3 --hytree "$HYTREE" --sbatch=--time=00:10:00 >"$tmp/slurm.log" 2>&1; then
  echo "FAIL: --slurm failed:"; cat "$tmp/slurm.log"; fail=1
fi
if [ ! -f "$tmp/slurm/sweep.slurm" ] || [ "$(wc -l <"$tmp/slurm/points.txt")" != 4 ]; then
  echo "FAIL: --slurm did not write sweep.slurm and a 4-line points.txt"; fail=1
else
  bash -n "$tmp/slurm/sweep.slurm" || { echo "FAIL: sweep.slurm is not valid bash"; fail=1; }
  for pat in '^#SBATCH --array=0-3%3$' '^#SBATCH --ntasks=4$' '^#SBATCH --time=00:10:00$' '^srun -n 4 '; do
    grep -q -e "$pat" "$tmp/slurm/sweep.slurm" || { echo "FAIL: sweep.slurm lacks $pat"; fail=1; }
  done
  if ls "$tmp"/slurm/*/exit_status >/dev/null 2>&1 || ls "$tmp"/slurm/*/output >/dev/null 2>&1; then
    echo "FAIL: --slurm ran points"; fail=1
  fi
fi

# ---- 2 ranks through the launcher
if [ -n "${MPIEXEC:-}" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  if ! sweep run "$tmp/base.txt" --grid SoftStepRatio=4 --out "$tmp/m" --ranks 2 \
       --mpiexec "$MPIEXEC ${MPIEXEC_PREFLAGS:-}" --hytree "$HYTREE" >"$tmp/mpi.log" 2>&1 ||
     ! sweep collect "$tmp/m" >>"$tmp/mpi.log" 2>&1; then
    echo "FAIL: 2-rank sweep failed:"; cat "$tmp/mpi.log"; cat "$tmp"/m/*/stderr.log; fail=1
  else
    r=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i } NR == 2 { print $c["ranks"] }' "$tmp/m/results.csv")
    [ "$r" = 2 ] || { echo "FAIL: 2-rank point has ranks = '$r' in results.csv"; cat "$tmp/m/results.csv"; fail=1; }
  fi
fi
exit $fail
