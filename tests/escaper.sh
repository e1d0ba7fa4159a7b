#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# escaper.sh: one particle 1e12 length units from a Plummer sphere of 4096
# (Gadget-1 ICs from `hytree ic`, particle ID 1 moved to x = 1e12) does not
# break the keys or the device's float frame: the snapshot's accelerations
# and potentials of the hybrid scheme (1 rank with the tree on the host and
# with the tree and the state on the device, and 2 ranks when a launcher
# exists, also after a step with the state on the device, which must equal
# the same step with the state on the host bit for bit) and of the direct
# scheme match a double direct sum (tests/check_snapshot),
# and a short run completes with the escaper still at about 1e12.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
. "${top_srcdir:-.}/tests/same_run.sh"
check="$top_builddir/tests/check_snapshot"
tmp="$top_builddir/tests/tmp-escaper-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail=0

"$HYTREE" ic plummer -N 4096 --seed 5 -o "$tmp/ics.dat" >/dev/null || { echo "FAIL: hytree ic"; exit 1; }
# double-precision little-endian Gadget-1: the first position (ID 1) at byte
# 4 + 256 + 4 + 4; 1e12 = 0x426d1a94a2000000
printf '\000\000\000\242\224\032\155\102' | dd of="$tmp/ics.dat" bs=1 seek=268 conv=notrunc 2>/dev/null
cat >"$tmp/p.txt" <<EOP
InitCondFile   $tmp/ics.dat
OutputDir      $tmp/unused
TimeEnd        0
SnapshotFields Acceleration,Potential
EOP

forces() { # name "launcher" run-args...: a run whose last snapshot must pass check_snapshot
  name=$1 launch=$2; shift 2
  # shellcheck disable=SC2086
  if ! $launch "$HYTREE" run "$tmp/p.txt" -P "OutputDir=$tmp/$name" --quiet "$@" 2>"$tmp/$name.err"; then
    echo "FAIL [$name]: the run failed:"; cat "$tmp/$name.err"; fail=1; return
  fi
  echo "[$name]"
  snap=$(ls "$tmp/$name"/snapshot_*.hdf5 | tail -n 1)
  "$check" "$snap" 4096 || { echo "FAIL [$name]: forces"; fail=1; }
}
forces hybrid1 "" -P TreeBuild=host -P ParticleState=host
forces hybrid1dev "" -P TreeBuild=device -P ParticleState=device
forces direct1 "" -P Scheme=direct
if [ -n "${MPIEXEC:-}" ]; then
  forces hybrid2 "$MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2"
  # one step with the state on the device: the soft step's merged tree
  # built on the device in the bulk's frame
  forces hybrid2dev "$MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2" -P TreeBuild=device -P ParticleState=device \
    -P TimeEnd=0.005
  # the same with the state on the host: its merged tree, packed in the
  # bulk's frame on the host, must be the device state's, bit for bit
  forces hybrid2host "$MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2" -P TreeBuild=device -P ParticleState=host \
    -P TimeEnd=0.005
  same_run "$tmp/hybrid2dev" "$tmp/hybrid2host" "2 ranks with an escaper, ParticleState device against host" 4096
else
  echo "no MPI launcher: the 2-rank case is not tested"
fi

# a short run: completes, finite energies, the escaper stays out there
if "$HYTREE" run "$tmp/p.txt" -P "OutputDir=$tmp/run" -P TimeEnd=0.05 -P SnapshotFields=none --quiet 2>"$tmp/run.err"; then
  if grep -qi nan "$tmp/run/energy.csv"; then echo "FAIL: NaN in energy.csv"; fail=1; fi
  if command -v h5dump >/dev/null 2>&1; then
    # the largest coordinate of the final snapshot (particles are in key order there)
    x=$(h5dump -y -w 0 -d /PartType1/Coordinates "$tmp/run/snapshot_001.hdf5" | sed -n '/DATA {/,/}/p' |
        tr ', ' '\n\n' | awk '$1 ~ /^-?[0-9]/ && (m == "" || $1 + 0 > m + 0) { m = $1 } END { print m }')
    awk "BEGIN { exit !(${x:-0} > 0.99e12 && ${x:-0} < 1.01e12) }" ||
      { echo "FAIL: largest coordinate '$x' after the run: the escaper should be near 1e12"; fail=1; }
  fi
else
  echo "FAIL: the short run with an escaper failed:"; cat "$tmp/run.err"; fail=1
fi
exit $fail
