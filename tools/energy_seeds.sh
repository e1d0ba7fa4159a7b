#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
# energy_seeds.sh: the energy error of tests/plummer_energy.sh's run (a 16k
# Plummer sphere, Scheme hybrid, P4's auto parameters, 10 crossing times)
# for several IC seeds, on one rank and on P ranks. A single run's largest
# |dE/E| is one draw from a broad distribution (the runs of one seed on 1
# and on P ranks follow the same trajectory for a few crossing times, then
# part: an N-body system is chaotic), so rank counts are compared by the
# ensemble: prints one row per seed and the means and extremes per rank count.
#
# usage: tools/energy_seeds.sh [-s SEEDS] [-n P] [-N N] [-o DIR] [-x HYTREE]
#   -s  IC seeds, comma-separated (default 5,6,7,8,9,10,11,12)
#   -n  ranks of the second run of each seed (default 4; started with
#       ${MPIEXEC:-mpirun} ${MPIEXEC_PREFLAGS:-})
#   -N  particles (default 16384)
#   -o  work directory (default energy-seeds)
#   -x  the hytree program (default ./hytree)
set -euo pipefail
SEEDS=5,6,7,8,9,10,11,12 NP=4 N=16384 DIR=energy-seeds HY=./hytree
while getopts "s:n:N:o:x:h" o; do
  case $o in
    s) SEEDS=$OPTARG ;; n) NP=$OPTARG ;; N) N=$OPTARG ;; o) DIR=$OPTARG ;; x) HY=$OPTARG ;;
    *) sed -n '3,17p' "$0"; exit 2 ;;
  esac
done
mkdir -p "$DIR"
cat >"$DIR/params.txt" <<EOP
InitCondFile      plummer:$N:1
TimeEnd           28.2842712474619
Scheme            hybrid
EnergyInterval    0.5
OpenCLDevice      any
EOP
maxde() { awk -F, 'NR > 1 { e = $5 + 0; if (e > m) m = e } END { printf "%.3e", m }' "$1"; }
echo "| seed | max dE/E, 1 rank | max dE/E, $NP ranks |"
echo "|---|---|---|"
rows=()
for s in ${SEEDS//,/ }; do
  "$HY" run "$DIR/params.txt" -P "InitCondFile=plummer:$N:$s" -P "OutputDir=$DIR/s$s-1" >"$DIR/s$s-1.log" 2>&1 ||
    { echo "energy_seeds: seed $s on 1 rank failed, see $DIR/s$s-1.log" >&2; exit 1; }
  # shellcheck disable=SC2086
  ${MPIEXEC:-mpirun} ${MPIEXEC_PREFLAGS:-} -n "$NP" "$HY" run "$DIR/params.txt" -P "InitCondFile=plummer:$N:$s" \
    -P "OutputDir=$DIR/s$s-$NP" >"$DIR/s$s-$NP.log" 2>&1 ||
    { echo "energy_seeds: seed $s on $NP ranks failed, see $DIR/s$s-$NP.log" >&2; exit 1; }
  a=$(maxde "$DIR/s$s-1/energy.csv") b=$(maxde "$DIR/s$s-$NP/energy.csv")
  echo "| $s | $a | $b |"
  rows+=("$a $b")
done
printf '%s\n' "${rows[@]}" | awk -v np="$NP" '
  { a[NR] = $1; b[NR] = $2; sa += $1; sb += $2 }
  END {
    n = NR; mina = maxa = a[1]; minb = maxb = b[1]
    for (i = 1; i <= n; i++) {
      if (a[i] < mina) mina = a[i]; if (a[i] > maxa) maxa = a[i]
      if (b[i] < minb) minb = b[i]; if (b[i] > maxb) maxb = b[i]
    }
    printf "| mean (min-max) | %.3e (%.3e-%.3e) | %.3e (%.3e-%.3e) |\n", sa / n, mina, maxa, sb / n, minb, maxb
    printf "ratio of the means, %d ranks / 1 rank: %.2f\n", np, sb / sa
  }'
