#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# disk_full.sh: a full disk while a snapshot or a restart set is written.
# A run of 4 soft steps writes snapshot_000, snapshot_001 and restart sets
# after steps 1, 2 and 3 (slots A, B, A). Copies of its OutputDir are then
# resumed with every file limited to a size (HYTREE_TEST_FILE_SIZE_LIMIT:
# RLIMIT_FSIZE once MPI and the OpenCL compiler are set up; a write beyond it
# fails with EFBIG, as on a full disk) that the old snapshots fit but
#  - a final snapshot_001 with Acceleration and Potential does not;
#  - a restart set (positions, velocities and kick accelerations) does not.
# Each run must exit non-zero with one line naming the file and the cause,
# leave every snapshot and restart file bitwise as it was (the old
# snapshot_001 is not replaced by a partial one), leave no temporary file,
# and the restart set must still resume.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
tmp="$top_builddir/tests/tmp-disk-full-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
# a write past the limit raises SIGXFSZ: ignored here (and by hytree), so it fails with EFBIG
trap '' XFSZ
fail=0
cat >"$tmp/p.txt" <<EOP
InitCondFile  plummer:2048:4
OutputDir     $tmp/unused
TimeEnd       0.3
RestartEverySoftSteps 1
EOP
d="$tmp/orig"
"$HYTREE" run "$tmp/p.txt" -P "OutputDir=$d" --quiet || { echo "FAIL: the run without a limit"; exit 1; }
grep -q '^A 1 3$' "$d/restart/current" || { echo "FAIL: expected restart sets A, B, A:"; cat "$d/restart/current"; exit 1; }
kept="snapshot_000.hdf5 snapshot_001.hdf5 restart/A/rank_00000.bin restart/B/rank_00000.bin restart/current"
snap=$(wc -c <"$d/snapshot_001.hdf5")
rs=$(wc -c <"$d/restart/A/rank_00000.bin")
limit=$((snap + 16384)) # the old snapshots fit; + 2048 x 32 bytes of fields or a restart file do not
[ "$limit" -lt "$rs" ] || { echo "ERROR: restart file ($rs bytes) is not larger than $limit"; exit 99; }
echo "snapshot $snap bytes, restart file $rs bytes, file size limit $limit bytes"

# expect_full NAME PATTERN ARGS...: resume a copy of orig under the limit
expect_full() {
  name=$1 pattern=$2; shift 2
  c="$tmp/$name"
  cp -R "$d" "$c"
  if HYTREE_TEST_FILE_SIZE_LIMIT=$limit "$HYTREE" run --restart "$c" --quiet "$@" >"$c.out" 2>"$c.err"; then
    echo "FAIL [$name]: exit status 0"; fail=1
  fi
  lines=$(wc -l <"$c.err")
  [ "$lines" -eq 1 ] || { echo "FAIL [$name]: $lines lines on stderr:"; cat "$c.err"; fail=1; }
  grep -q "^hytree: error: .*$pattern.*File too large" "$c.err" ||
    { echo "FAIL [$name]: message does not match '$pattern ... File too large':"; cat "$c.err"; fail=1; }
  for f in $kept; do
    cmp -s "$d/$f" "$c/$f" || { echo "FAIL [$name]: $f changed"; fail=1; }
  done
  left=$(find "$c" -name '*.tmp.*')
  [ -z "$left" ] || { echo "FAIL [$name]: temporary files left: $left"; fail=1; }
  echo "ok [$name]: $(cat "$c.err")"
}
expect_full snapshot "$tmp/snapshot/snapshot_001\\.hdf5" -P SnapshotFields=Acceleration,Potential
expect_full restart "$tmp/restart/restart/B/rank_00000\\.bin" -P TimeEnd=0.5

# the restart sets are still whole: both copies resume without the limit
for name in snapshot restart; do
  "$HYTREE" run --restart "$tmp/$name" --quiet 2>"$tmp/$name.resume" ||
    { echo "FAIL [$name]: resuming after the failure:"; cat "$tmp/$name.resume"; fail=1; }
done
exit $fail
