#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# nan_fault.sh: a NaN in the state stops the run at the end of that step.
# HYTREE_TEST_NAN_AT_STEP=2 makes one velocity NaN before step 2; the run must
# exit non-zero with one line naming the step, the time and the particle whose
# position first went bad, write the state to OutputDir/emergency/, write no
# NaN to energy.csv and no later snapshot, and leave the initial snapshot
# exactly as a clean run writes it. On 1 rank (with the defaults, and with the
# tree and the state on the device, where the check runs as a kernel), and on
# 2 when a launcher exists (with the defaults, and with the state on the
# device, where the NaN on rank 0 must stop rank 1 too).
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
tmp="$top_builddir/tests/tmp-nan-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail=0
cat >"$tmp/p.txt" <<EOP
InitCondFile  plummer:2048:4
OutputDir     $tmp/unused
TimeEnd       0.25
EOP
for run in 1 1dev 2 2dev; do
  np=${run%dev}
  dev=
  [ "$run" != "$np" ] && dev="-P TreeBuild=device -P ParticleState=device"
  launch=
  if [ "$np" -gt 1 ]; then
    [ -n "${MPIEXEC:-}" ] || break
    launch="$MPIEXEC ${MPIEXEC_PREFLAGS:-} -n $np"
  fi
  d="$tmp/nan$run"
  # shellcheck disable=SC2086
  $launch "$HYTREE" run "$tmp/p.txt" $dev -P "OutputDir=$tmp/clean$run" --quiet || { echo "FAIL: clean run ($run)"; exit 1; }
  # shellcheck disable=SC2086
  if HYTREE_TEST_NAN_AT_STEP=2 $launch "$HYTREE" run "$tmp/p.txt" $dev -P "OutputDir=$d" --quiet 2>"$d.err"; then
    echo "FAIL: $run rank(s): a run with a NaN velocity succeeded"; fail=1
  fi
  grep -q "hytree: error: .*step 2, t = .*non-finite position, velocity or acceleration.*first non-finite position: particle ID [0-9]*); emergency snapshot" "$d.err" ||
    { echo "FAIL: $run rank(s): no clear message:"; cat "$d.err"; fail=1; }
  ls "$d"/emergency/snapshot_002*.hdf5 >/dev/null 2>&1 || { echo "FAIL: $run rank(s): no emergency snapshot"; fail=1; }
  [ ! -e "$d/snapshot_001.hdf5" ] || { echo "FAIL: $run rank(s): a regular snapshot after the fault"; fail=1; }
  if grep -qi nan "$d/energy.csv"; then echo "FAIL: $run rank(s): NaN written to energy.csv"; fail=1; fi
  [ "$(wc -l <"$d/energy.csv")" -eq 3 ] || { echo "FAIL: $run rank(s): energy.csv should hold t = 0 and step 1"; fail=1; }
  if command -v h5diff >/dev/null 2>&1; then
    h5diff "$tmp/clean$run/snapshot_000.hdf5" "$d/snapshot_000.hdf5" /PartType1 /PartType1 >/dev/null ||
      { echo "FAIL: $run rank(s): the initial snapshot differs from a clean run's"; fail=1; }
  fi
done
exit $fail
