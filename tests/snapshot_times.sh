#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# snapshot_times.sh: snapshots at exactly the requested times t0 + k
# SnapshotInterval, predicted from the step end at or after each time.
# A circular two-body orbit (tests/snap_orbit: G = 1, masses 1/2,
# separation 1, angular frequency 1, no softening; R1, R2 below the
# separation, so the hybrid force is all soft and the kick acceleration is
# SoftStepRatio = 4 times the true one), steps of dt_s = 0.05:
#  - SnapshotInterval 0.07 to TimeEnd 1: snapshot_001..014 have Time k 0.07
#    to 1e-12, snapshot_015 is the final one at 1 and there is no other;
#  - each predicted position and velocity is as far from the orbit as the
#    error of the step end it came from (a run with SnapshotInterval 0.05,
#    one snapshot per step end), carried over the gap d, plus the
#    prediction's Taylor remainder: jerk |d|^3 / 6 for the position and
#    jerk d^2 / 2 for the velocity (jerk = 1/2 on this orbit), with 25 %
#    to spare; leaving out the a d^2/2 term, or predicting with the kick
#    acceleration, errs by 0.25 d^2 or 0.75 d^2 (2e-4 and 7e-4 at d = 0.03)
#    against a bound near 3e-5;
#  - SnapshotInterval 0.02 (shorter than a step) to TimeEnd 0.2: one
#    snapshot per requested time, 2 or 3 in a step, none skipped (11 in all);
#  - the same on 2 MPI ranks (each predicts its own particle): the same
#    bounds;
#  - a run stopped by SIGTERM after step 3 and resumed from its restart set
#    writes the same snapshots, bit for bit (h5diff), as the run that did
#    not stop; resumed with SnapshotInterval 0.1 instead, it goes on with
#    0.2, 0.3, ..., 1 (snapshot_003..011);
#  - energy.csv does not change with snapshots off the step grid: a
#    2048-body Plummer sphere, hybrid with SnapshotFields
#    Acceleration,Potential, SnapshotInterval 0.1 (on the grid) and 0.095
#    (off it, due at the same step ends), and tree with SnapshotFields none,
#    SnapshotInterval 0 and 0.07, give the same energy.csv byte for byte.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
orbit="$top_builddir/tests/snap_orbit"
[ -x "$orbit" ] || { echo "FAIL: $orbit not built"; exit 99; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp="$top_builddir/tests/tmp-snapshot-times-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
"$orbit" ics "$tmp/kepler.hdf5" || exit 99
cat >"$tmp/k.txt" <<EOP
InitCondFile  $tmp/kepler.hdf5
OutputDir     $tmp/out
TimeEnd       1
TimeStepHard  0.0125
SoftStepRatio 4
Softening     0
R1            0.2
R2            0.4
EOP
run() { # DIR, args...: a run into DIR
  d=$1; shift
  "$HYTREE" run "$tmp/k.txt" -P "OutputDir=$d" "$@" >"$d.log" 2>&1 || { echo "FAIL: run $*"; cat "$d.log"; exit 1; }
}
snap() { printf '%s/snapshot_%03d.hdf5' "$1" "$2"; }

# the error of every step end: one snapshot per step end
run "$tmp/grid" -P SnapshotInterval=0.05
s=0
while [ $s -le 20 ]; do
  "$orbit" check "$(snap "$tmp/grid" $s)" $s 0.05 >>"$tmp/grid.err" || fail=1
  s=$((s + 1))
done

# check_orbit DIR INTERVAL LAST WHAT: snapshots 1..LAST at k INTERVAL, each
# within the bound from the step end it was predicted from
check_orbit() {
  k=1
  while [ "$k" -le "$3" ]; do
    "$orbit" check "$(snap "$1" $k)" $k "$2" >"$1.k" || { echo "FAIL: $4: snapshot $k"; fail=1; }
    read -r t dx dv <"$1.k"
    # the step end at or after t, its errors, and the bounds
    awk -v t="$t" -v dx="$dx" -v dv="$dv" -v what="$4 snapshot $k" '
      { ex[NR - 1] = $2; ev[NR - 1] = $3 }
      END {
        s = int(t / 0.05 + 1 - 1e-6); d = t - 0.05 * s; ad = d < 0 ? -d : d; j = 0.5
        bx = 1.1 * (ex[s] + ad * ev[s]) + 1.25 * j * ad ^ 3 / 6 + 1e-7
        bv = 1.1 * (ev[s] + ad * ex[s]) + 1.25 * j * ad ^ 2 / 2 + 1e-7
        printf "%s: t = %.4f from step end %d (d = %+.3f): |dx| %.3e (bound %.3e), |dv| %.3e (bound %.3e)\n",
               what, t, s, d, dx, bx, dv, bv
        if (dx > bx || dv > bv) { print "FAIL: " what ": off the orbit by more than the bound"; exit 1 }
      }' "$tmp/grid.err" || fail=1
    k=$((k + 1))
  done
}

run "$tmp/p07" -P SnapshotInterval=0.07
check_orbit "$tmp/p07" 0.07 14 "SnapshotInterval 0.07"
"$orbit" check "$(snap "$tmp/p07" 15)" 20 0.05 >/dev/null || { echo "FAIL: snapshot 15 is not the final one"; fail=1; }
[ ! -e "$(snap "$tmp/p07" 16)" ] || { echo "FAIL: SnapshotInterval 0.07: more than 16 snapshots"; fail=1; }
grep -q 'snapshot_001.hdf5 at t = 0.07 (predicted from the step end at t = 0.1)' "$tmp/p07.log" ||
  { echo "FAIL: the log does not say that snapshot 1 was predicted"; fail=1; }

run "$tmp/p02" -P SnapshotInterval=0.02 -P TimeEnd=0.2
check_orbit "$tmp/p02" 0.02 10 "SnapshotInterval 0.02"
[ ! -e "$(snap "$tmp/p02" 11)" ] || { echo "FAIL: SnapshotInterval 0.02: a snapshot beyond the requested 10"; fail=1; }

if [ -n "${MPIEXEC:-}" ]; then
  # shellcheck disable=SC2086
  $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2 "$HYTREE" run "$tmp/k.txt" -P "OutputDir=$tmp/mpi" -P SnapshotInterval=0.07 \
    >"$tmp/mpi.log" 2>&1 || { echo "FAIL: 2-rank run"; cat "$tmp/mpi.log"; fail=1; }
  check_orbit "$tmp/mpi" 0.07 14 "2 ranks"
fi

# stopped after step 3 (t = 0.15, the snapshot at 0.14 written), resumed
HYTREE_TEST_SIGNAL_AT_STEP=3 "$HYTREE" run "$tmp/k.txt" -P "OutputDir=$tmp/stop" -P SnapshotInterval=0.07 \
  >"$tmp/stop.log" 2>&1
[ -e "$(snap "$tmp/stop" 2)" ] && [ ! -e "$(snap "$tmp/stop" 3)" ] ||
  { echo "FAIL: the stopped run did not stop after snapshot 2"; cat "$tmp/stop.log"; fail=1; }
"$HYTREE" run --restart "$tmp/stop" --quiet || { echo "FAIL: resumed run"; fail=1; }
if command -v h5diff >/dev/null 2>&1; then
  k=0
  while [ $k -le 15 ]; do
    for obj in /PartType1 /Header; do
      h5diff "$(snap "$tmp/p07" $k)" "$(snap "$tmp/stop" $k)" $obj $obj >/dev/null 2>&1 ||
        { echo "FAIL: resumed run: snapshot $k differs in $obj"; fail=1; }
    done
    k=$((k + 1))
  done
fi
[ ! -e "$(snap "$tmp/stop" 16)" ] || { echo "FAIL: resumed run: more than 16 snapshots"; fail=1; }
cmp -s "$tmp/p07/energy.csv" "$tmp/stop/energy.csv" || { echo "FAIL: resumed run: energy.csv differs"; fail=1; }
# resumed with SnapshotInterval 0.1: the next ones at 0.2, 0.3, ..., 1
HYTREE_TEST_SIGNAL_AT_STEP=3 "$HYTREE" run "$tmp/k.txt" -P "OutputDir=$tmp/stop2" -P SnapshotInterval=0.07 \
  >"$tmp/stop2.log" 2>&1
"$HYTREE" run --restart "$tmp/stop2" -P SnapshotInterval=0.1 --quiet || { echo "FAIL: resumed run, 0.1"; fail=1; }
k=2
while [ $k -le 10 ]; do
  "$orbit" check "$(snap "$tmp/stop2" $((k + 1)))" $k 0.1 >/dev/null ||
    { echo "FAIL: resumed with SnapshotInterval 0.1: snapshot $((k + 1)) is not at $k x 0.1"; fail=1; }
  k=$((k + 1))
done
[ ! -e "$(snap "$tmp/stop2" 12)" ] ||
  { echo "FAIL: resumed with SnapshotInterval 0.1: more than 12 snapshots"; fail=1; }

# energy.csv with snapshots on and off the step grid
cat >"$tmp/pl.txt" <<EOP
InitCondFile  plummer:2048:5
OutputDir     $tmp/out
TimeEnd       0.5
TimeStepHard  0.0125
EOP
same_energy() { # WHAT, args A, args B (one -P each)
  "$HYTREE" run "$tmp/pl.txt" -P "OutputDir=$tmp/ea" $2 --quiet || { echo "FAIL: $1 run A"; fail=1; }
  "$HYTREE" run "$tmp/pl.txt" -P "OutputDir=$tmp/eb" $3 --quiet || { echo "FAIL: $1 run B"; fail=1; }
  if cmp -s "$tmp/ea/energy.csv" "$tmp/eb/energy.csv"; then
    echo "$1: energy.csv identical ($(md5sum <"$tmp/ea/energy.csv" | cut -c1-12))"
  else
    echo "FAIL: $1: energy.csv differs"; fail=1
  fi
  rm -rf "$tmp/ea" "$tmp/eb"
}
fields=-PSnapshotFields=Acceleration,Potential
same_energy "hybrid, SnapshotInterval 0.1 against 0.095" "-PSnapshotInterval=0.1 $fields" \
  "-PSnapshotInterval=0.095 $fields"
same_energy "tree, SnapshotInterval 0 against 0.07" "-PSnapshotInterval=0 -PScheme=tree" \
  "-PSnapshotInterval=0.07 -PScheme=tree"

[ $fail -eq 0 ] && echo "PASS: snapshots at the requested times, on the orbit within the prediction's error"
exit $fail
