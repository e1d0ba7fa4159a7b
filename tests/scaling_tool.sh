#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# scaling_tool.sh: tools/scaling.sh on CPU ranks, tiny N: the strong series
# (8192 particles on 1 and 2 ranks) and the weak one (4096 per rank) each
# print their table; the weak series reuses the strong series' run of 8192
# particles on 2 ranks instead of running it again; every efficiency is
# the ratio of the table's own times (strong T(1) / (P T(P)), weak
# T(1) / T(P)).
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
if [ -z "${MPIEXEC:-}" ]; then echo "SKIP: no MPI launcher"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp="$top_builddir/tests/tmp-scaling-tool-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
# benchmark.sh runs ./hytree: from the build directory
cd "$top_builddir" || exit 99
MPIEXEC="$MPIEXEC ${MPIEXEC_PREFLAGS:-}" "$top_srcdir/tools/scaling.sh" -N 8192 -p 1,2 -w 4096 -s 1 -d cpu -o "$tmp/sc" >"$tmp/out" 2>&1 ||
  { echo "FAIL: tools/scaling.sh:"; cat "$tmp/out"; exit 1; }
cat "$tmp/out"
n_logs=$(ls "$tmp/sc"/*.txt 2>/dev/null | wc -l)
[ "$n_logs" -eq 3 ] || { echo "FAIL: $n_logs runs, expected 3 (8192 on 1 and 2 ranks, 4096 on 1)"; fail=1; }
awk -F'|' '
  /^\| N \|/ { tab = "strong"; next }
  /^\| N per rank/ { tab = "weak"; next }
  /^\|---/ || !/^\|/ { next }
  { for (i = 2; i <= NF; i++) gsub(/ /, "", $i) }
  tab == "strong" { if ($3 == 1) t1 = $4; e = t1 / ($3 * $4); if (e - $10 > 1e-3 || $10 - e > 1e-3) bad++; ns++ }
  tab == "weak" { if ($3 == 1) w1 = $5; e = w1 / $5; if (e - $10 > 1e-3 || $10 - e > 1e-3) bad++; nw++
                  if ($4 != $2 * $3) bad++ }
  END { if (ns != 2 || nw != 2 || bad) { printf "strong rows %d, weak rows %d, %d wrong\n", ns, nw, bad; exit 1 } }
' "$tmp/out" || { echo "FAIL: the tables' rows or efficiencies"; fail=1; }
exit $fail
