#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# snapshot_layout.sh: the snapshots of a short `hytree run` have the
# Gadget-HDF5 layout that yt and pynbody read (tests/check_layout.py: Header
# attribute types and shapes, Units, PartTypeN datasets, unique IDs; the run
# parameters used, `auto` resolved, and as given, against params-used.txt), and a
# snapshot read back as initial conditions (TimeEnd 0) is written out again
# with the same IDs, positions, velocities and masses. With an MPI launcher,
# the same for a 2-file snapshot of a 2-rank run, read back by its first
# file. Skips (77) without /usr/bin/python3, h5py or numpy.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
py=/usr/bin/python3
check="$top_srcdir/tests/check_layout.py"
if ! [ -x "$py" ] || ! "$py" -c 'import h5py, numpy' 2>/dev/null; then
  echo "SKIP: $py with h5py and numpy is needed"
  exit 77
fi

tmp="$top_builddir/tests/tmp-snapshot-layout-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
units=3.085678e21,1.989e43,1e5
common="-P InitCondFile=plummer:2000:7 -P TimeEnd=0.05 -P OpenCLDevice=cpu -P SnapshotFields=Acceleration,Potential
  -P UnitLength_in_cm=3.085678e21 -P UnitMass_in_g=1.989e43 -P UnitVelocity_in_cm_per_s=1e5"

# shellcheck disable=SC2086
if ! "$HYTREE" run "$top_srcdir/params/plummer.txt" $common -P "OutputDir=$tmp/a" --quiet >"$tmp/log" 2>&1; then
  if grep -q 'no OpenCL' "$tmp/log"; then echo "SKIP: no OpenCL CPU device"; exit 77; fi
  echo "FAIL: hytree run failed:"; cat "$tmp/log"; exit 1
fi
for s in 000 001; do
  "$py" "$check" --units "$units" --params-used "$tmp/a/params-used.txt" "$tmp/a/snapshot_$s.hdf5" || fail=1
done

# The last snapshot as initial conditions: TimeEnd 0 writes them back out.
if "$HYTREE" run "$top_srcdir/params/plummer.txt" -P "InitCondFile=$tmp/a/snapshot_001.hdf5" -P TimeEnd=0 \
    -P OpenCLDevice=cpu -P "OutputDir=$tmp/b" --quiet >"$tmp/log" 2>&1; then
  "$py" "$check" --same-as "$tmp/a/snapshot_001.hdf5" "$tmp/b/snapshot_000.hdf5" || fail=1
else
  echo "FAIL: hytree run with the snapshot as ICs failed:"; cat "$tmp/log"; fail=1
fi

# A 2-file snapshot of a 2-rank run.
if [ -n "${MPIEXEC:-}" ]; then
  # shellcheck disable=SC2086
  if $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2 "$HYTREE" run "$top_srcdir/params/plummer.txt" $common \
      -P NumFilesPerSnapshot=2 -P "OutputDir=$tmp/c" --quiet >"$tmp/log" 2>&1; then
    "$py" "$check" --units "$units" --params-used "$tmp/c/params-used.txt" \
      "$tmp/c/snapshot_001.0.hdf5" "$tmp/c/snapshot_001.1.hdf5" || fail=1
    if "$HYTREE" run "$top_srcdir/params/plummer.txt" -P "InitCondFile=$tmp/c/snapshot_001.0.hdf5" -P TimeEnd=0 \
        -P OpenCLDevice=cpu -P "OutputDir=$tmp/d" --quiet >"$tmp/log" 2>&1; then
      "$py" "$check" --same-as "$tmp/c/snapshot_001.0.hdf5" "$tmp/d/snapshot_000.hdf5" || fail=1
    else
      echo "FAIL: hytree run with the 2-file snapshot as ICs failed:"; cat "$tmp/log"; fail=1
    fi
  else
    echo "FAIL: 2-rank run failed:"; cat "$tmp/log"; fail=1
  fi
else
  echo "(no MPI launcher: the 2-file snapshot is not checked)"
fi
[ $fail -eq 0 ] && echo "PASS: snapshot layout and read-back"
exit $fail
