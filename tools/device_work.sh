#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
# device_work.sh: the device work per dt_s of P ranks that share one NVIDIA
# GPU, against one rank's. Runs tools/benchmark.sh (hybrid) for 1 and for P
# ranks while `nvidia-smi pmon -s u -d 1` samples every process's SM
# activity once a second. Per sample the ranks' activities are summed; the
# mean over the samples of the stepping phase (at least 80 % of the largest
# sum) times the time per dt_s is the device work per dt_s of all ranks.
# Divided by P it bounds what one rank needs on a GPU of its own, and
# E_max = T(1) / (P * work per rank) bounds the strong-scaling efficiency on
# P separate GPUs before any communication cost. The work still holds the
# cost of switching between the ranks' contexts (about 10 % on an H100:
# doc/performance.md), so the bound is conservative.
#
# usage: tools/device_work.sh -N N -n P [-s SOFT_STEPS] [-o DIR] [-P KEY=VALUE ...]
#   -N   particles
#   -n   ranks sharing the GPU (started with ${MPIEXEC:-mpirun})
#   -s   measured soft steps per run (default 10; long enough for a few samples)
#   -o   work directory (default device-work)
#   -P   a parameter for every run (repeatable; passed to benchmark.sh)
# HYTREE_NUM_THREADS: the host threads of the one-rank run; the P-rank run
# gets it divided by P.
# Prints a Markdown table: ranks, T per dt_s, summed SM activity, device work
# per dt_s, its ratio to one rank's, E_max.
set -euo pipefail
N='' NP='' S=10 DIR=device-work
EXTRA=()
while getopts "N:n:s:o:P:h" o; do
  case $o in
    N) N=$OPTARG ;; n) NP=$OPTARG ;; s) S=$OPTARG ;; o) DIR=$OPTARG ;; P) EXTRA+=(-P "$OPTARG") ;;
    *) sed -n '3,24p' "$0"; exit 2 ;;
  esac
done
if [ -z "$N" ] || [ -z "$NP" ]; then sed -n '3,24p' "$0"; exit 2; fi
command -v nvidia-smi >/dev/null || { echo "device_work.sh: nvidia-smi not found (an NVIDIA GPU is needed)" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR"
threads=${HYTREE_NUM_THREADS:-$(nproc)}

# mean summed SM activity over the stepping samples of a pmon log
busy() {
  awk '
    function flush() { if (open) { sums[n++] = s }; s = 0; open = 0; delete cur }
    /^#/ { next }
    $2 == "-" { next }
    { if ($2 in cur) flush(); cur[$2] = 1; open = 1; if ($4 != "-") s += $4 }
    END {
      flush(); max = 0
      for (i = 0; i < n; i++) if (sums[i] > max) max = sums[i]
      for (i = 0; i < n; i++) if (max > 0 && sums[i] >= 0.8 * max) { t += sums[i]; k++ }
      if (k == 0) { print "device_work.sh: no SM activity sampled" > "/dev/stderr"; exit 1 }
      printf "%.1f\n", t / k
    }' "$1"
}

row() { # ranks -> "T busy"
  local np=$1 tag=p$1
  nvidia-smi pmon -s u -d 1 >"$DIR/pmon-$tag.txt" 2>&1 &
  local pm=$!
  HYTREE_NUM_THREADS=$((threads / np > 0 ? threads / np : 1)) \
    "$here/benchmark.sh" -N "$N" -s "$S" -d gpu -n "$np" -S hybrid -o "$DIR/$tag" ${EXTRA[@]+"${EXTRA[@]}"} \
    >"$DIR/$tag.txt" 2>&1 || { kill "$pm"; echo "device_work.sh: the $np-rank run failed, see $DIR/$tag.txt" >&2; exit 1; }
  kill "$pm"
  wait "$pm" 2>/dev/null || true
  local t
  t=$(awk -F'|' '/^\| hybrid/ { gsub(/ /, "", $5); print $5; exit }' "$DIR/$tag.txt")
  echo "$t $(busy "$DIR/pmon-$tag.txt")"
}

row 1 >"$DIR/row1"
row "$NP" >"$DIR/rowp"
read -r t1 b1 <"$DIR/row1"
read -r tp bp <"$DIR/rowp"
awk -v n="$N" -v p="$NP" -v t1="$t1" -v b1="$b1" -v tp="$tp" -v bp="$bp" 'BEGIN {
  w1 = t1 * b1 / 100; wp = tp * bp / 100
  print "| N | ranks | T per dt_s [s] | SM activity (sum) | device work per dt_s [s] | against 1 rank | E_max on separate GPUs |"
  print "|---|---|---|---|---|---|---|"
  printf "| %d | 1 | %.4f | %.1f %% | %.4f | 1 | |\n", n, t1, b1, w1
  printf "| %d | %d | %.4f | %.1f %% | %.4f | %.2f | %.2f |\n", n, p, tp, bp, wp, wp / w1, t1 / (wp)
}' | tee "$DIR/device-work.md"
