#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
# scaling.sh: strong scaling of hytree over MPI ranks, one GPU per rank, with
# Watanabe & Nakasato's breakdown T_total = (n-1) T_hard + T_soft + T_DD per
# dt_s. Runs tools/benchmark.sh for every rank count and N, then prints one
# Markdown table with the time per dt_s, its parts and the strong-scaling
# efficiency E(P) = T(1) / (P T(P)) of the hybrid scheme.
#
# With -w, a weak-scaling series follows: n particles per rank on each of
# the rank counts (N = n P; a run the strong series made already is reused),
# and a second table gives its efficiency E_w(P) = T(1) / T(P).
#
# usage: tools/scaling.sh [-N N[,N...]] [-p P[,P...]] [-w n] [-s SOFT_STEPS] [-d DEVICE] [-o DIR]
#                         [-P KEY=VALUE ...]
#   -N   particle counts (default 16777216,67108864; -N none: no strong series)
#   -p   rank counts (default 1,2,4); each rank takes the GPU of its node-local rank
#   -w   particles per rank of the weak series (default: none)
#   -s   measured soft steps per run (default 6: the decomposition's time varies by a
#        factor of 2-3 between soft steps on a shared GPU, doc/performance.md)
#   -d   OpenCLDevice (default gpu)
#   -o   work directory (default scaling)
#   -P   a parameter for every run (repeatable; passed to benchmark.sh)
# MPIEXEC (default mpirun) launches the ranks; set HYTREE_NUM_THREADS to the
# cores per rank and give MPIEXEC the binding you want (e.g. "mpirun --bind-to none").
# With HYTREE_TRACE=PREFIX each run writes its own timelines,
# PREFIX-N<N>-P<P>.<rank>.csv, and DIR/N<N>-P<P>.trace.txt summarises them
# (tools/trace_report.py; MPIEXEC must pass HYTREE_TRACE on, e.g. -x HYTREE_TRACE).
set -euo pipefail
NS=16777216,67108864 PS=1,2,4 S=6 DEV=gpu DIR=scaling WN=
EXTRA=()
while getopts "N:p:w:s:d:o:P:h" o; do
  case $o in
    N) NS=$OPTARG ;; p) PS=$OPTARG ;; w) WN=$OPTARG ;; s) S=$OPTARG ;; d) DEV=$OPTARG ;; o) DIR=$OPTARG ;;
    P) EXTRA+=(-P "$OPTARG") ;;
    *) sed -n '3,26p' "$0"; exit 2 ;;
  esac
done
[ "$NS" = none ] && NS=""
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR"
out="$DIR/scaling.md"
{
  echo "| N | ranks | T per dt_s [s] | T_soft [s] | T_hard [s] | T_DD [s] | LET [s] | load balance | efficiency |"
  echo "|---|---|---|---|---|---|---|---|---|"
} >"$out"
# one run of N particles on P ranks (skipped when DIR holds it already);
# prints the hybrid row of benchmark.sh's summary
one_run() {
  local n=$1 p=$2 d="$DIR/N$1-P$2"
  if [ ! -s "$d/summary.md" ]; then
    local trace=${HYTREE_TRACE:+$HYTREE_TRACE-N$n-P$p}
    HYTREE_TRACE=$trace "$here/benchmark.sh" -N "$n" -s "$S" -d "$DEV" -n "$p" -S hybrid -o "$d" \
      ${EXTRA[@]+"${EXTRA[@]}"} >"$d.txt" 2>&1 ||
      { echo "scaling: N = $n, P = $p failed, see $d.txt" >&2; tail -n 5 "$d.txt" >&2; exit 1; }
    if [ -n "$trace" ]; then
      python3 "$here/trace_report.py" "$trace" --timeline 3 >"$d.trace.txt" 2>&1 ||
        echo "scaling: no trace summary for N = $n, P = $p (see $d.trace.txt)" >&2
    fi
  fi
  awk -F'|' '$2 ~ /hybrid/ { print; exit }' "$d/summary.md"
}
for n in ${NS//,/ }; do
  t1=
  for p in ${PS//,/ }; do
    row=$(one_run "$n" "$p") || exit 1
    t=$(echo "$row" | awk -F'|' '{ gsub(/ /, "", $5); print $5 }')
    [ -n "$t1" ] || t1=$t
    echo "$row" | awk -F'|' -v t1="$t1" -v p="$p" -v n="$n" '{
      for (i = 2; i <= NF; i++) gsub(/ /, "", $i)
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %.3f |\n", n, p, $5, $6, $7, $8, $12, $13, t1 / (p * $5) }' >>"$out"
  done
done
if [ -n "$WN" ]; then
  {
    echo
    echo "| N per rank | ranks | N | T per dt_s [s] | T_soft [s] | T_hard [s] | T_DD [s] | LET [s] | weak efficiency |"
    echo "|---|---|---|---|---|---|---|---|---|"
  } >>"$out"
  t1=
  for p in ${PS//,/ }; do
    n=$((WN * p))
    row=$(one_run "$n" "$p") || exit 1
    t=$(echo "$row" | awk -F'|' '{ gsub(/ /, "", $5); print $5 }')
    [ -n "$t1" ] || t1=$t
    echo "$row" | awk -F'|' -v t1="$t1" -v p="$p" -v n="$n" -v w="$WN" '{
      for (i = 2; i <= NF; i++) gsub(/ /, "", $i)
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %.3f |\n", w, p, n, $5, $6, $7, $8, $12, t1 / $5 }' >>"$out"
  done
fi
cat "$out"
