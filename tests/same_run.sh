# SPDX-License-Identifier: GPL-3.0-or-later
# same_run.sh: sourced by the run tests. same_run DIR1 DIR2 WHAT [N] checks
# that two runs ended the same bit for bit: their energy.csv, and (with
# h5diff) the particle data and header of their final snapshot_001.hdf5
# (RunParameters, which names other directories, is left out). With N (the
# particle count), one run's state lived on the device, whose energy sums
# add the same terms in another order: energy.csv's times must be equal and
# K, W and E within the rounding of N-term sums, 2 (N + 4) u of |K| + |W|
# (the momentum sums are checked against the host's in tests/test_forces).
# A difference prints a FAIL line naming WHAT and sets fail=1.
same_run() {
  if [ -z "${4:-}" ]; then
    cmp -s "$1/energy.csv" "$2/energy.csv" || { echo "FAIL: $3: energy.csv differs"; fail=1; }
  else
    awk -F, -v n="$4" 'NR == FNR { row[FNR] = $0; rows = FNR; next }
      { split(row[FNR], a, ",")
        if (FNR == 1) { if (a[1] != $1) bad = 1; next }
        tol = 2 * (n + 4) * 2^-53 * ((a[2] < 0 ? -a[2] : a[2]) + (a[3] < 0 ? -a[3] : a[3]))
        if (a[1] != $1) bad = 1
        for (k = 2; k <= 4; k++) { d = a[k] - $k; if (d < 0) d = -d; if (d > tol) bad = 1 } }
      END { exit bad || rows != FNR }' "$1/energy.csv" "$2/energy.csv" ||
      { echo "FAIL: $3: energy.csv differs beyond the sums' rounding"; fail=1; }
  fi
  command -v h5diff >/dev/null 2>&1 || return 0
  for obj in /PartType1 /Header; do
    if ! h5diff "$1/snapshot_001.hdf5" "$2/snapshot_001.hdf5" "$obj" "$obj" >"$1.h5diff.log" 2>&1; then
      echo "FAIL: $3: final snapshots differ in $obj"; head -n 20 "$1.h5diff.log"; fail=1
    fi
  done
}
