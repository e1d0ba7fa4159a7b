#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# yt_load.sh: yt loads the snapshots of a short `hytree run` with the units
# and the box the files carry (tests/yt_load.py): no "Assuming length units"
# and no "Bounding box cannot be inferred" in yt's log, the right particle
# count and total mass. With an MPI launcher, also a 2-file snapshot of a
# 2-rank run, whose files carry the box of the whole snapshot. Skips (77)
# without /usr/bin/python3 and yt (Debian: python3-yt).
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
py=/usr/bin/python3
check="$top_srcdir/tests/yt_load.py"
if ! [ -x "$py" ] || ! "$py" -c 'import yt, h5py, numpy' 2>/dev/null; then
  echo "SKIP: $py with yt, h5py and numpy is needed"
  exit 77
fi

tmp="$top_builddir/tests/tmp-yt-load-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
# yt keeps its configuration and caches under HOME
HOME="$tmp" MPLCONFIGDIR="$tmp/mpl"
export HOME MPLCONFIGDIR
fail=0
n=1500
common="-P InitCondFile=plummer:$n:3 -P TimeEnd=0.05 -P OpenCLDevice=cpu
  -P UnitLength_in_cm=3.085678e21 -P UnitMass_in_g=1.989e43 -P UnitVelocity_in_cm_per_s=1e5"

# shellcheck disable=SC2086
if ! "$HYTREE" run "$top_srcdir/params/plummer.txt" $common -P "OutputDir=$tmp/a" --quiet >"$tmp/log" 2>&1; then
  if grep -q 'no OpenCL' "$tmp/log"; then echo "SKIP: no OpenCL CPU device"; exit 77; fi
  echo "FAIL: hytree run failed:"; cat "$tmp/log"; exit 1
fi
for s in 000 001; do
  "$py" "$check" "$tmp/a/snapshot_$s.hdf5" "$n" || fail=1
done

if [ -n "${MPIEXEC:-}" ]; then
  # shellcheck disable=SC2086
  if $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2 "$HYTREE" run "$top_srcdir/params/plummer.txt" $common \
      -P NumFilesPerSnapshot=2 -P "OutputDir=$tmp/b" --quiet >"$tmp/log" 2>&1; then
    "$py" "$check" "$tmp/b/snapshot_001.0.hdf5" "$n" || fail=1
  else
    echo "FAIL: 2-rank run failed:"; cat "$tmp/log"; fail=1
  fi
else
  echo "(no MPI launcher: the 2-file snapshot is not checked)"
fi
[ $fail -eq 0 ] && echo "PASS: yt loads the snapshots with their units and box"
exit $fail
