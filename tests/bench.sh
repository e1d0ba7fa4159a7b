#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# bench.sh: `hytree bench` on a small Plummer sphere (the CPU device in CI):
# a table and a CSV with one row per scheme, the force errors of the final
# configuration within the tree's accuracy at the default a_err (median
# <= 3e-3, 99th percentile <= 2e-2, as tests/test_forces requires), positive
# times, and R_hybrid in the hybrid row. No speed is asserted.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
tmp="$top_builddir/tests/tmp-bench-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
"$HYTREE" bench --N 4096 --schemes hybrid,tree --device any --soft-steps 1 --sinks 1024 --csv "$tmp/b.csv" \
  >"$tmp/out" 2>&1 || { echo "FAIL: hytree bench failed:"; cat "$tmp/out"; exit 1; }
cat "$tmp/out"
fail=0
[ "$(wc -l <"$tmp/b.csv")" -eq 3 ] || { echo "FAIL: the CSV has not one header and two rows"; fail=1; }
head -n 1 "$tmp/b.csv" | grep -q '^N,scheme,ranks,device,t_per_dts,' || { echo "FAIL: CSV header"; fail=1; }
awk -F, 'NR > 1 {
    if (!($5 > 0 && $11 > 0)) { print "FAIL: non-positive time in row " NR; bad = 1 }
    if (!($14 <= 3e-3 && $15 <= 2e-2)) { print "FAIL: force errors " $14 ", " $15 " in row " NR; bad = 1 }
    if ($2 == "hybrid" && !($17 > 0)) { print "FAIL: no R_hybrid in the hybrid row"; bad = 1 }
  } END { exit bad }' "$tmp/b.csv" || fail=1
"$HYTREE" bench --N 0 >"$tmp/bad.out" 2>&1 && { echo "FAIL: --N 0 accepted"; fail=1; }
grep -q "hytree: error: bench: --N value '0'" "$tmp/bad.out" || { echo "FAIL: no clear --N message"; cat "$tmp/bad.out"; fail=1; }
exit $fail
