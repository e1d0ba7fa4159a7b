#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# plummer_energy.sh: a 16k Plummer sphere (Henon units, Watanabe & Nakasato's auto parameters)
# run for 10 crossing times (t_cr = 2 sqrt(2)) with Scheme hybrid and with
# Scheme tree at the same dt_h, and the hybrid run again on 4 MPI ranks
# (oversubscribed) when a launcher is there. Checks, from energy.csv:
#  - hybrid: max |dE/E| <= 1e-3 and within a factor 3 of the tree run's;
#  - 4 ranks, against the 1-rank hybrid run (the issue's "within 2x of the
#    1-rank run"). Its trees (local and LET) differ from the 1-rank run's,
#    so its force errors are another realisation with the same a_err
#    (tests/mpi_forces.sh compares them with a direct sum), and the two runs
#    follow the same trajectory only for a while: the system is chaotic.
#    The largest |dE/E| over 10 t_cr of one run is one draw from a broad
#    distribution: over IC seeds 5-12 (pocl, 2 cores) 2.9e-4 to 1.02e-3 on
#    1 rank, mean 6.69e-4, and
#    4.8e-4 to 1.08e-3 on 4 ranks, mean 7.55e-4 (ratio of the means 1.13;
#    of single seeds 0.80 to 2.56, so a single ratio is no bound). Hence:
#    (a) while the runs share their trajectory (every output up to t_w with
#    kinetic energies equal to 1e-3 relative) the 4-rank max |dE/E| must be
#    within 2x the 1-rank's, plus 1e-4 for the two runs' different estimates
#    of the potential (3.9e-5 apart at t = 0); t_w must reach 2 t_cr, since
#    a distributed force that differs by more than the tree's errors (a
#    missed neighbour, a wrong kick) parts the trajectories sooner (seeds
#    5-12: t_w = 10.0-13.5, windowed ratios 0.92-1.61);
#    (b) over all 10 t_cr, max |dE/E| <= 1.34e-3, twice the 1-rank
#    ensemble mean above (the runs of CI's machine are other draws: its
#    floating point parts the trajectories differently);
#    and the virial and momentum bounds below;
#  - both: virial ratio 2K/|W| within 1 +- 0.05 at every output;
#  - both: momentum stays small. Tree forces are not pairwise antisymmetric,
#    so |p| drifts with the force errors (observed ~6e-4 here); the bound
#    3.2e-3 (0.5% of M sigma_v) is a sanity check against gross errors such as
#    a missed self-pair or a wrong kick, not a derived tolerance.
# In a sanitizer build (HYTREE_SANITIZER_BUILD=1, tests/local.mk), which is
# there to find memory and undefined-behaviour errors, the hybrid runs cover
# 1 t_cr (the same code paths: decompositions, both LETs, snapshots) and are
# held to the bounds that hold over any stretch of the 10 t_cr (1e-3 and
# 1.34e-3, virial ratio, momentum); the comparisons with the tree run and
# between 1 and 4 ranks, which need the whole 10 t_cr, run in the plain build.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
tmp="$top_builddir/tests/tmp-plummer-energy-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
tend=28.2842712474619   # 10 t_cr
short=0
if [ "${HYTREE_SANITIZER_BUILD:-0}" = 1 ]; then
  short=1; tend=2.82842712474619
  echo "sanitizer build: 1 t_cr, absolute bounds only (the plain build runs the comparisons over 10 t_cr)"
fi

cat >"$tmp/params.txt" <<EOP
InitCondFile      plummer:16384:5
OutputDir         $tmp/hybrid
TimeEnd           $tend
Scheme            hybrid
EnergyInterval    0.5
OpenCLDevice      any
EOP

run() { # name, extra -P args...
  name=$1; shift
  if ! "$HYTREE" run "$tmp/params.txt" -P "OutputDir=$tmp/$name" "$@" >"$tmp/$name.log" 2>&1; then
    echo "FAIL: $name run failed:"; cat "$tmp/$name.log"; exit 1
  fi
  tail -n 3 "$tmp/$name.log"
}

run hybrid
# the tree run uses the hybrid run's resolved dt_h
dt=$(sed -n 's/^TimeStepHard *auto *% auto -> \([0-9.eE+-]*\).*/\1/p' "$tmp/hybrid/params-used.txt")
[ -n "$dt" ] || { echo "FAIL: no resolved TimeStepHard in params-used.txt"; cat "$tmp/hybrid/params-used.txt"; exit 1; }
echo "dt_h = $dt"
[ $short = 1 ] || run tree -P Scheme=tree -P "TimeStepHard=$dt"
if [ -n "${MPIEXEC:-}" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # shellcheck disable=SC2086
  if ! $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 4 "$HYTREE" run "$tmp/params.txt" -P "OutputDir=$tmp/mpi4" \
       >"$tmp/mpi4.log" 2>&1; then
    echo "FAIL: 4-rank hybrid run failed:"; cat "$tmp/mpi4.log"; exit 1
  fi
  tail -n 2 "$tmp/mpi4.log"
fi

stats() { # energy.csv -> "max_dE min_Q max_Q max_p last_t"
  awk -F, 'NR > 1 { e = $5 + 0; if (e > m) m = e; q = $12 + 0; if (NR == 2 || q < lo) lo = q; if (q > hi) hi = q;
                    p = sqrt($6 * $6 + $7 * $7 + $8 * $8); if (p > pm) pm = p; t = $1 }
           END { printf "%.6e %.6f %.6f %.3e %.9g\n", m, lo, hi, pm, t }' "$1"
}
check() { # awk condition, message
  if ! awk "BEGIN { exit !($1) }"; then echo "FAIL: $2"; fail=1; fi
}
set -- $(stats "$tmp/hybrid/energy.csv"); h_de=$1 h_qlo=$2 h_qhi=$3 h_p=$4 h_t=$5
echo "hybrid: max |dE/E| $h_de, 2K/|W| in [$h_qlo, $h_qhi], max |p| $h_p, t_end $h_t"
check "$h_t > $tend - 1e-6" "hybrid run did not reach t = $tend"
check "$h_de <= 1e-3" "hybrid max |dE/E| = $h_de > 1e-3"
check "$h_qlo >= 0.95 && $h_qhi <= 1.05" "hybrid virial ratio outside 1 +- 0.05: [$h_qlo, $h_qhi]"
check "$h_p <= 3.2e-3" "hybrid momentum not conserved: $h_p"
if [ $short = 0 ]; then
  set -- $(stats "$tmp/tree/energy.csv"); t_de=$1 t_qlo=$2 t_qhi=$3 t_p=$4 t_t=$5
  echo "tree:   max |dE/E| $t_de, 2K/|W| in [$t_qlo, $t_qhi], max |p| $t_p, t_end $t_t"
  check "$t_t > $tend - 1e-6" "tree run did not reach t = $tend"
  check "$h_de <= 3 * $t_de" "hybrid max |dE/E| = $h_de is more than 3 x the tree's $t_de"
  check "$t_qlo >= 0.95 && $t_qhi <= 1.05" "tree virial ratio outside 1 +- 0.05: [$t_qlo, $t_qhi]"
  check "$t_p <= 3.2e-3" "tree momentum not conserved: $t_p"
fi
if [ -f "$tmp/mpi4/energy.csv" ]; then
  set -- $(stats "$tmp/mpi4/energy.csv"); m_de=$1 m_qlo=$2 m_qhi=$3 m_p=$4 m_t=$5
  echo "4 ranks: max |dE/E| $m_de, 2K/|W| in [$m_qlo, $m_qhi], max |p| $m_p, t_end $m_t"
  check "$m_t > $tend - 1e-6" "4-rank run did not reach t = $tend"
  check "$m_de <= 1.34e-3" "4-rank max |dE/E| = $m_de > 1.34e-3 (twice the 1-rank ensemble mean)"
  # (a): the shared stretch of the two trajectories and both runs' largest |dE/E| in it
  set -- $(paste -d, "$tmp/hybrid/energy.csv" "$tmp/mpi4/energy.csv" | awk -F, '
    NR > 1 { if (!stop && $1 - $13 < 1e-9 && $13 - $1 < 1e-9 && ($2 - $14) / $2 < 1e-3 && ($14 - $2) / $2 < 1e-3) { tw = $1; if ($5 > a) a = $5; if ($17 > b) b = $17 }
             else stop = 1 }
    END { printf "%.9g %.6e %.6e\n", tw, a, b }'); w_t=$1 w_1=$2 w_4=$3
  echo "shared trajectory up to t = $w_t: max |dE/E| 1 rank $w_1, 4 ranks $w_4"
  [ $short = 1 ] || check "$w_t >= 2 * 2.82842712474619" "the 4-rank trajectory parted from the 1-rank one at t = $w_t < 2 t_cr"
  [ $short = 1 ] || check "$w_4 <= 2 * $w_1 + 1e-4" "4-rank max |dE/E| = $w_4 up to t = $w_t is more than 2 x the 1-rank run's $w_1 + 1e-4"
  check "$m_qlo >= 0.95 && $m_qhi <= 1.05" "4-rank virial ratio outside 1 +- 0.05: [$m_qlo, $m_qhi]"
  check "$m_p <= 3.2e-3" "4-rank momentum not conserved: $m_p"
fi
# a snapshot at the start and at the end, nothing else (SnapshotInterval 0)
for s in snapshot_000.hdf5 snapshot_001.hdf5; do
  [ -f "$tmp/hybrid/$s" ] || { echo "FAIL: $s missing"; fail=1; }
done
[ ! -f "$tmp/hybrid/snapshot_002.hdf5" ] || { echo "FAIL: unexpected snapshot_002.hdf5"; fail=1; }
exit $fail
