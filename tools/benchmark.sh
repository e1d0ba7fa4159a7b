#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
# benchmark.sh: time hytree's hybrid and tree schemes on a Plummer sphere
# with Watanabe & Nakasato's default parameters (all `auto`), and summarise timings.csv per
# dt_s = SoftStepRatio * dt_h (1 soft + n-1 hard steps for hybrid, n steps
# for tree). The first step of each run is a warm-up and the last one, which
# also writes the final snapshot (with device-resident state, a download of
# every particle), is run but not counted.
#
# usage: tools/benchmark.sh [-N N] [-s SOFT_STEPS] [-d DEVICE] [-n RANKS] [-S SCHEMES] [-o DIR] [-x HYTREE]
#                           [-P KEY=VALUE ...]
#   -N N          particles (default 1048576)
#   -S SCHEMES    hybrid,tree (default), hybrid or tree
#   -n RANKS      MPI ranks, started with ${MPIEXEC:-mpirun} (default 1: no launcher)
#   -s S          measured soft steps (default 3; two more are run: warm-up and final output)
#   -d DEVICE     OpenCLDevice value: gpu, cpu, any or P:D (default any)
#   -o DIR        work directory (default bench-N)
#   -x HYTREE     the hytree program (default ./hytree)
#   -P KEY=VALUE  a parameter for every run (repeatable), e.g. -P ParticleState=device
# Prints one Markdown table row per scheme and writes DIR/summary.md.
set -euo pipefail
N=1048576 S=3 DEV=any DIR= HY=./hytree NP=1 SCHEMES=hybrid,tree
EXTRA=()
while getopts "N:s:d:n:S:o:x:P:h" o; do
  case $o in
    N) N=$OPTARG ;; s) S=$OPTARG ;; d) DEV=$OPTARG ;; n) NP=$OPTARG ;; o) DIR=$OPTARG ;; x) HY=$OPTARG ;;
    S) SCHEMES=$OPTARG ;; P) EXTRA+=(-P "$OPTARG") ;;
    *) sed -n '3,19p' "$0"; exit 2 ;;
  esac
done
DIR=${DIR:-bench-$N}
mkdir -p "$DIR"
# dt_s of the auto parameters: eps = 0.1 N^-0.26 r_v, dt_h = eps / sigma_v,
# with r_v ~ 1 and sigma_v ~ 0.649 for the Plummer ICs; TimeEnd covers S + 2
# soft steps (hytree shortens dt_h by < 1/S so that TimeEnd is a step boundary).
tend=$(awk -v n="$N" -v s="$S" 'BEGIN { printf "%.9g", (s + 1.9) * 4 * 0.1 * n ^ -0.26 / 0.649 }')
cat >"$DIR/params.txt" <<EOP
InitCondFile      plummer:$N:1
OutputDir         $DIR/hybrid
TimeEnd           $tend
EnergyInterval    1000
OpenCLDevice      $DEV
EOP
summary() { # scheme dir
  awk -F, -v scheme="$1" -v n="$N" -v np="$NP" -v ns="$(($(wc -l <"$2/timings.csv") - 3))" '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    NR == 2 { next }   # warm-up
    NR > 2 + ns { next }   # the last step, which writes the final snapshot
    { k++; step += $col["t_step"]; soft += $col["t_soft"]; tree += $col["t_tree"]; kern += $col["t_kernel"];
      xfer += $col["t_transfer"]; inter += $col["n_pp_hard"] + $col["n_pc_hard"] + $col["n_pp_soft"] + $col["n_pc_soft"];
      dd += $col["t_dd"]; let += $col["t_let_select"] + $col["t_let_comm"]; lb += $col["load_balance"];
      nh = 0; hs = 0; for (c in col) if (c ~ /^t_hard_/) { hs += $col[c]; nh++ }
      hard += hs; nhard += nh }
    END {
      if (k == 0) { print "no measured steps" > "/dev/stderr"; exit 1 }
      mult = scheme == "tree" ? 4 : 1   # tree: 4 steps per dt_s
      per = step / k * mult
      printf "| %s | %d | %d | %.4f | %.4f | %s | %.4f | %.4f | %.4f | %.4f | %.4f | %.3f | %.3e | %s |\n", scheme, n, np,
             per, soft / k, nhard ? sprintf("%.4f", hard / nhard) : "-", dd / k * mult, tree / k * mult,
             kern / k * mult, xfer / k * mult, let / k * mult, lb / k, inter / kern,
             nhard ? sprintf("%.3f", (hard / nhard) / (soft / k)) : "-"
    }' "$2/timings.csv"
}
{
  echo "| scheme | N | ranks | T per dt_s [s] | T_soft [s] | T_hard [s] | T_DD [s] | tree build [s] | walks [s] | transfers [s] | LET [s] | load balance | interactions/s | T_hard/T_soft |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$DIR/summary.md"
launch=
[ "$NP" -gt 1 ] && launch="${MPIEXEC:-mpirun} -n $NP"
for scheme in ${SCHEMES//,/ }; do
  case $scheme in hybrid | tree) ;; *) echo "benchmark: unknown scheme $scheme" >&2; exit 2 ;; esac
  # shellcheck disable=SC2086
  $launch "$HY" run "$DIR/params.txt" -P "OutputDir=$DIR/$scheme" -P "Scheme=$scheme" \
    ${EXTRA[@]+"${EXTRA[@]}"} >"$DIR/$scheme.log" 2>&1 ||
    { echo "benchmark: $scheme run failed, see $DIR/$scheme.log" >&2; tail -n 5 "$DIR/$scheme.log" >&2; exit 1; }
  summary "$scheme" "$DIR/$scheme" >>"$DIR/summary.md"
done
first=${SCHEMES%%,*}
grep -E '^device:|^  rank [0-9]+:|^G = ' "$DIR/$first.log" | sed 's/^/    /' >>"$DIR/summary.md"
if [ "$SCHEMES" = hybrid,tree ]; then
  th=$(awk -F'|' 'NR == 3 { print $5 }' "$DIR/summary.md")
  tt=$(awk -F'|' 'NR == 4 { print $5 }' "$DIR/summary.md")
  awk -v h="$th" -v t="$tt" 'BEGIN { printf "R_hybrid = T_hybrid / T_tree = %.3f\n", h / t }' >>"$DIR/summary.md"
fi
cat "$DIR/summary.md"
