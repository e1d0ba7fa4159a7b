#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# galaxy_snapshot.sh: the Gadget-2 galaxy-collision ICs (Gadget format 1,
# 60000 particles, Gadget units with G = 43007.1) load; TimeEnd 0 with
# SnapshotFields Acceleration,Potential writes snapshot_000.hdf5 whose
# accelerations (hard + soft) and potentials match a double-precision direct
# sum (tests/check_snapshot), and whose particles and IDs are the file's.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
tmp="$top_builddir/tests/tmp-galaxy-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
ics="$top_srcdir/tests/data/galaxy_littleendian.dat"
[ -f "$ics" ] || { echo "missing $ics"; exit 99; }

if ! "$HYTREE" run "$top_srcdir/params/galaxy.txt" -P "InitCondFile=$ics" -P "OutputDir=$tmp/out" -P TimeEnd=0 \
     -P SnapshotFields=Acceleration,Potential >"$tmp/log" 2>&1; then
  echo "FAIL: run failed:"; cat "$tmp/log"; exit 1
fi
grep -E 'loaded|G = ' "$tmp/log"
fail=0
[ -f "$tmp/out/snapshot_000.hdf5" ] || { echo "FAIL: no snapshot_000.hdf5"; exit 1; }
[ ! -f "$tmp/out/snapshot_001.hdf5" ] || { echo "FAIL: TimeEnd 0 wrote more than one snapshot"; fail=1; }
"$top_builddir/tests/check_snapshot" "$tmp/out/snapshot_000.hdf5" 4000 || fail=1
# particle counts per type as in the Gadget header: 40000 halo, 20000 disk
if command -v h5dump >/dev/null 2>&1; then
  h5dump -a /Header/NumPart_ThisFile "$tmp/out/snapshot_000.hdf5" | grep -q '0, 40000, 20000, 0, 0, 0' ||
    { echo "FAIL: NumPart_ThisFile is not (0, 40000, 20000, 0, 0, 0)"; fail=1; }
fi
exit $fail
