# SPDX-License-Identifier: GPL-3.0-or-later
# same_run.sh: sourced by the run tests. same_run DIR1 DIR2 WHAT checks that
# two runs ended the same bit for bit: their energy.csv, and (with h5diff)
# the particle data and header of their final snapshot_001.hdf5
# (RunParameters, which names other directories, is left out). A difference
# prints a FAIL line naming WHAT and sets fail=1.
same_run() {
  cmp -s "$1/energy.csv" "$2/energy.csv" || { echo "FAIL: $3: energy.csv differs"; fail=1; }
  command -v h5diff >/dev/null 2>&1 || return 0
  for obj in /PartType1 /Header; do
    if ! h5diff "$1/snapshot_001.hdf5" "$2/snapshot_001.hdf5" "$obj" "$obj" >"$1.h5diff.log" 2>&1; then
      echo "FAIL: $3: final snapshots differ in $obj"; head -n 20 "$1.h5diff.log"; fail=1
    fi
  done
}
