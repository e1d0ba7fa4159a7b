#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# mpi_run.sh: hytree run under the MPI launcher.
#  - 1 rank: a short hybrid run gives the same energy.csv as the run without
#    the launcher (same binary, same device, deterministic).
#  - 3 ranks: the Gadget-2 galaxy ICs with TimeEnd 0 and SnapshotFields
#    Acceleration,Potential: the gathered snapshot's accelerations and
#    potentials match a double direct sum (tests/check_snapshot) and it holds
#    every particle (40000 halo, 20000 disk); with OpeningCriterion
#    relative every sampled particle's error is within 3 ErrTolForceAcc.
#  - 2 ranks: a short hybrid run completes, writes let.csv with every step
#    and the MPI columns of timings.csv, conserves the particle count, writes
#    its snapshots as 2 files each (NumFilesPerSnapshot 2), and its energy
#    error stays within 2x (+1e-6) of the 1-rank run's.
#  - 2 ranks, TreeBuild device: the same run with the trees built by the
#    OpenCL kernels completes, says so, and keeps the same bounds; its
#    domains are balanced by the walks' measured time (DomainCost walktime),
#    whose sample weights the log gives, within the clamp [1/2, 2] and
#    around 1 (their work-weighted mean is 1 before the clamp).
#  - 3 ranks, ParticleState device (the state on the device, decomposed on
#    the host at soft steps): the
#    run says so, and its energy.csv and final snapshot equal, bit for bit,
#    those of the 3-rank TreeBuild device run with the state on the host;
#    the same on 2 ranks. The device selects the LET
#    items there (the host selects them for the host state); the 3-rank run
#    does it one destination at a time from a room of one item
#    (HYTREE_TEST_LET_SMALL), so the passes and the regrowth are compared
#    too. The device-state run is traced (HYTREE_TRACE): every rank writes
#    its timeline, which tools/trace_report.py reads. Its LET items go
#    through the node's shared-memory window, which grows on the way
#    (HYTREE_TEST_LET_SMALL leaves it no room to spare); the same run with
#    them in MPI messages (NodeSharedMemory no) gives the same energy.csv
#    and snapshot.
#  - 1 and 4 ranks, a 32k Plummer sphere: on 4 ranks with the state on the
#    device each soft step's merged walk, whose sinks are the local
#    particles alone, makes at most 1.15 times one rank's interactions and
#    as many as the host state's merged walk to 5 %.
#  - 2 ranks, ParticleState device with Scheme tree: refused with one line,
#    no output.
#  - 2 ranks with an OpenCL device that does not exist: every rank stops with
#    a one-line error and a non-zero status, and no output is written.
#  - 2 ranks where only rank 1 runs out of device memory (a device memory
#    budget of 100 kB on that rank, HYTREE_TEST_DEVICE_MEM_LIMIT): the whole run
#    ends, non-zero, with rank 1's message, and no snapshot is left.
#  - 2 ranks where only rank 1 has an MPI call fail (HYTREE_TEST_MPI_FAIL: its
#    3rd LET exchange posts a send to a rank that does not exist): the whole
#    run ends, non-zero, with rank 1's message naming the MPI error.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/same_run.sh"
if [ -z "${MPIEXEC:-}" ]; then echo "SKIP: no MPI launcher"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp="$top_builddir/tests/tmp-mpi-run-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
mpirun_() { # nranks, args...
  np=$1; shift
  # shellcheck disable=SC2086
  $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n "$np" "$HYTREE" "$@"
}
cat >"$tmp/p.txt" <<EOP
InitCondFile  plummer:2048:4
OutputDir     $tmp/serial
TimeEnd       0.25
EOP
"$HYTREE" run "$tmp/p.txt" >"$tmp/out0" 2>"$tmp/err0" || { echo "FAIL: serial run"; cat "$tmp/err0"; exit 1; }
mpirun_ 1 run "$tmp/p.txt" -P "OutputDir=$tmp/mpi1" >"$tmp/out1" 2>"$tmp/err1" ||
  { echo "FAIL: run under $MPIEXEC -n 1"; cat "$tmp/err1"; exit 1; }
# the same device, or the comparison means nothing: on the GPU test machine
# the launched rank once saw only pocl while the plain run took the GPU
# (the launcher did not pass the OpenCL ICD loader's environment,
# doc/running.md)
d0=$(sed -n 's/^device: //p' "$tmp/out0") d1=$(sed -n 's/^device: //p' "$tmp/out1")
if [ -z "$d0" ]; then
  echo "FAIL: the plain run names no device"; cat "$tmp/out0"; fail=1
elif [ "$d0" != "$d1" ]; then
  echo "FAIL: the 1-rank MPI run used another OpenCL device than the plain run ($d1 against $d0):"
  echo "      $MPIEXEC does not pass the OpenCL ICD loader's environment to its ranks (see doc/running.md)"; fail=1
elif ! cmp "$tmp/serial/energy.csv" "$tmp/mpi1/energy.csv"; then
  echo "FAIL: energy.csv differs between the plain and the 1-rank MPI run (both on $d0)"; fail=1
fi
tail -n 1 "$tmp/mpi1/energy.csv"

# 3 ranks, galaxy forces in the snapshot
ics="$top_srcdir/tests/data/galaxy_littleendian.dat"
if mpirun_ 3 run "$top_srcdir/params/galaxy.txt" -P "InitCondFile=$ics" -P "OutputDir=$tmp/gal3" -P TimeEnd=0 \
     -P SnapshotFields=Acceleration,Potential >"$tmp/gal3.log" 2>&1; then
  grep -E 'rank [0-9]:|domain grid' "$tmp/gal3.log"
  "$top_builddir/tests/check_snapshot" "$tmp/gal3/snapshot_000.hdf5" 4000 || fail=1
  if command -v h5dump >/dev/null 2>&1; then
    h5dump -a /Header/NumPart_ThisFile "$tmp/gal3/snapshot_000.hdf5" | grep -q '0, 40000, 20000, 0, 0, 0' ||
      { echo "FAIL: 3-rank snapshot: NumPart_ThisFile is not (0, 40000, 20000, 0, 0, 0)"; fail=1; }
  fi
else
  echo "FAIL: 3-rank galaxy run:"; cat "$tmp/gal3.log"; fail=1
fi

# 3 ranks, the relative opening criterion (alpha 0.0025): every sampled
# particle's error stays within 3 alpha (the absolute criterion's largest
# is about 1e-2 here)
if mpirun_ 3 run "$top_srcdir/params/galaxy.txt" -P "InitCondFile=$ics" -P "OutputDir=$tmp/gal3r" -P TimeEnd=0 \
     -P SnapshotFields=Acceleration,Potential -P OpeningCriterion=relative -P ErrTolForceAcc=0.0025 \
     >"$tmp/gal3r.log" 2>&1; then
  "$top_builddir/tests/check_snapshot" "$tmp/gal3r/snapshot_000.hdf5" 4000 0.0075 || fail=1
else
  echo "FAIL: 3-rank galaxy run, relative criterion:"; cat "$tmp/gal3r.log"; fail=1
fi

# 2 ranks, a short hybrid run
if mpirun_ 2 run "$tmp/p.txt" -P "OutputDir=$tmp/mpi2" -P NumFilesPerSnapshot=2 >"$tmp/mpi2.log" 2>&1; then
  tail -n 1 "$tmp/mpi2/energy.csv"
  for f in snapshot_000.0 snapshot_000.1 snapshot_001.0 snapshot_001.1; do
    [ -f "$tmp/mpi2/$f.hdf5" ] || { echo "FAIL: 2-rank run: no $f.hdf5"; fail=1; }
  done
  [ ! -e "$tmp/mpi2/snapshot_000.hdf5" ] || { echo "FAIL: 2-rank run wrote a single-file snapshot too"; fail=1; }
  steps=$(($(wc -l <"$tmp/mpi1/timings.csv") - 1))
  [ "$(($(wc -l <"$tmp/mpi2/let.csv") - 1))" -eq "$steps" ] || { echo "FAIL: let.csv lacks rows"; fail=1; }
  head -n 1 "$tmp/mpi2/timings.csv" | grep -q 't_dd,t_let_select,t_let_comm,t_remote_tree,t_wait_device' ||
    { echo "FAIL: timings.csv lacks the MPI columns"; fail=1; }
  # particle count: n_local summed over the ranks (mean x 2) is N in every row
  awk -F, 'NR > 1 && $4 * 2 != 2048 { printf "FAIL: let.csv step %s: mean n_local %s x 2 != 2048\n", $1, $4; bad = 1 }
           END { exit bad }' "$tmp/mpi2/let.csv" || fail=1
  e1=$(tail -n 1 "$tmp/mpi1/energy.csv" | cut -d, -f5)
  e2=$(tail -n 1 "$tmp/mpi2/energy.csv" | cut -d, -f5)
  awk "BEGIN { exit !($e2 <= 2 * $e1 + 1e-6) }" ||
    { echo "FAIL: 2-rank |dE/E| $e2 is more than 2 x the 1-rank $e1 (+1e-6)"; fail=1; }
else
  echo "FAIL: 2-rank run:"; cat "$tmp/mpi2.log"; fail=1
fi

# 2 ranks, the trees built by the OpenCL kernels (TreeBuild device: the LET
# selection walks the downloaded device tree, soft steps build the merged tree
# on the device)
if mpirun_ 2 run "$tmp/p.txt" -P "OutputDir=$tmp/mpi2d" -P TreeBuild=device -P DomainCost=walktime \
     >"$tmp/mpi2d.log" 2>&1; then
  grep -q "tree built on the device" "$tmp/mpi2d.log" ||
    { echo "FAIL: 2-rank TreeBuild device run does not say it built on the device"; fail=1; }
  grep -q "samples weighted by the walks' measured time per particle (DomainCost walktime)" "$tmp/mpi2d.log" ||
    { echo "FAIL: 2-rank DomainCost walktime run does not say how it weights its samples"; fail=1; }
  w=$(sed -n "s/.*DomainCost walktime: the ranks' sample weights at the last decomposition \([0-9.]*\) to \([0-9.]*\) .*/\1 \2/p" "$tmp/mpi2d.log")
  # shellcheck disable=SC2086
  # within the clamp, and on both sides of 1: the weights' mean weighted by
  # each rank's work is 1 before the clamp, which never moves one across 1
  [ -n "$w" ] && awk -v lo="${w% *}" -v hi="${w#* }" 'BEGIN { exit !(lo >= 0.5 && hi <= 2 && lo <= 1 && hi >= 1) }' ||
    { echo "FAIL: 2-rank DomainCost walktime run: sample weights '$w' not given, outside [0.5, 2] or not around 1"; fail=1; }
  echo "2 ranks, DomainCost walktime: sample weights $w"
  tail -n 1 "$tmp/mpi2d/energy.csv"
  e1=$(tail -n 1 "$tmp/mpi1/energy.csv" | cut -d, -f5)
  e2=$(tail -n 1 "$tmp/mpi2d/energy.csv" | cut -d, -f5)
  awk "BEGIN { exit !($e2 <= 2 * $e1 + 1e-6) }" ||
    { echo "FAIL: 2-rank device-tree |dE/E| $e2 is more than 2 x the 1-rank $e1 (+1e-6)"; fail=1; }
  awk -F, 'NR > 1 && $4 * 2 != 2048 { printf "FAIL: device-tree let.csv step %s: mean n_local %s x 2 != 2048\n", $1, $4; bad = 1 }
           END { exit bad }' "$tmp/mpi2d/let.csv" || fail=1
else
  echo "FAIL: 2-rank TreeBuild device run:"; cat "$tmp/mpi2d.log"; fail=1
fi

# 3 ranks, the same with the state on the device: the same
# arithmetic on the same values (positions from the device for the LET
# selection), so the same result bit for bit
if mpirun_ 3 run "$tmp/p.txt" -P "OutputDir=$tmp/mpi3d" -P TreeBuild=device -P ParticleState=host \
     -P SnapshotFields=Acceleration \
     >"$tmp/mpi3d.log" 2>&1 &&
   $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 3 env HYTREE_TRACE="$tmp/trace" HYTREE_TEST_LET_SMALL=1 "$HYTREE" run "$tmp/p.txt" \
     -P "OutputDir=$tmp/mpi3s" -P TreeBuild=device -P SnapshotFields=Acceleration \
     -P ParticleState=device >"$tmp/mpi3s.log" 2>&1; then
  grep -q "particle state kept on the device (decomposed there)" "$tmp/mpi3s.log" ||
    { echo "FAIL: 3-rank ParticleState device run does not say where the state is"; fail=1; }
  grep -q "LET items between the 3 ranks of rank 0's node through a shared-memory window" "$tmp/mpi3s.log" ||
    { echo "FAIL: 3-rank run on one node does not say that its LET goes through shared memory"; fail=1; }
  # HYTREE_TEST_LET_SMALL leaves the window no room to spare: it is made
  # anew whenever an exchange brings more items than the last
  nw=$(grep -c "^0,let_window," "$tmp/trace.0.csv" 2>/dev/null)
  [ "${nw:-0}" -ge 2 ] || { echo "FAIL: 3 ranks: the LET window was allocated ${nw:-0} times, not grown"; fail=1; }
  # the soft steps' merged trees grafted onto the local trees (every one)
  # with the state on the device, never from the host's state
  g=$(sed -n 's/.*summary: rank 0 grafted \([0-9]*\) of its \([0-9]*\) merged trees.*/\1 \2/p' "$tmp/mpi3s.log")
  set -- $g
  [ -n "${1:-}" ] && [ "$1" -gt 0 ] && [ "$1" = "$2" ] ||
    { echo "FAIL: 3 ranks, ParticleState device: merged trees grafted: '${g}'"; fail=1; }
  grep -q "summary: rank 0 grafted 0 of its" "$tmp/mpi3d.log" ||
    { echo "FAIL: 3 ranks, ParticleState host: a merged tree was grafted"; fail=1; }
  # the same items by MPI messages (NodeSharedMemory no): the same run, bit
  # for bit
  # shellcheck disable=SC2086
  if $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 3 env HYTREE_TEST_LET_SMALL=1 "$HYTREE" run "$tmp/p.txt" \
       -P "OutputDir=$tmp/mpi3m" -P TreeBuild=device -P SnapshotFields=Acceleration -P ParticleState=device \
       -P NodeSharedMemory=no >"$tmp/mpi3m.log" 2>&1; then
    grep -q "LET items through MPI messages" "$tmp/mpi3m.log" ||
      { echo "FAIL: NodeSharedMemory no run does not say that its LET goes through MPI messages"; fail=1; }
    same_run "$tmp/mpi3s" "$tmp/mpi3m" "3 ranks, shared memory against MPI messages"
  else
    echo "FAIL: 3-rank run with NodeSharedMemory no:"; cat "$tmp/mpi3m.log"; fail=1
  fi
  same_run "$tmp/mpi3d" "$tmp/mpi3s" "3 ranks, the state on the host against the state on the device" 2048
  # its timelines (HYTREE_TRACE): one file per rank with the sub-steps and
  # the device thread's walks, which tools/trace_report.py summarises
  for r in 0 1 2; do
    for ph in 0,hard_step 0,soft_step 0,decompose 0,dd_cube 0,dd_presort 0,presort_wait 1,b_presort 1,walk_local 1,walk_merged 1,w_kernel 1,b_sort 1,rw_upload 1,rw_kernel; do
      grep -q "^$ph," "$tmp/trace.$r.csv" 2>/dev/null ||
        { echo "FAIL: 3 ranks: the trace of rank $r has no $ph phase"; fail=1; }
    done
    # the hard steps' remote tree: built where the local tree is (the
    # device here)
    grep -Eq "^0,remote_build(_side)?," "$tmp/trace.$r.csv" 2>/dev/null ||
      { echo "FAIL: 3 ranks: the trace of rank $r has no remote tree build"; fail=1; }
  done
  if command -v python3 >/dev/null 2>&1; then
    python3 "$top_srcdir/tools/trace_report.py" "$tmp/trace" --timeline 2 >"$tmp/trace.txt" 2>&1 &&
      grep -q "^rank 2: .* sub-steps" "$tmp/trace.txt" ||
      { echo "FAIL: tools/trace_report.py on the 3-rank trace:"; cat "$tmp/trace.txt"; fail=1; }
    # the sub-steps by their place: every rank's hard steps 1 .. n - 1 and its soft step
    python3 "$top_srcdir/tools/trace_report.py" "$tmp/trace" --by-substep >"$tmp/trace2.txt" 2>&1 &&
      grep -q "^rank 2 *hard 1 " "$tmp/trace2.txt" && grep -q "^rank 2 *hard 3 " "$tmp/trace2.txt" &&
      grep -q "^rank 0 *soft " "$tmp/trace2.txt" ||
      { echo "FAIL: tools/trace_report.py --by-substep on the 3-rank trace:"; cat "$tmp/trace2.txt"; fail=1; }
    # the ranks side by side, and what their unequal walks cost per sub-step
    python3 "$top_srcdir/tools/trace_report.py" "$tmp/trace" --compare >"$tmp/trace3.txt" 2>&1 &&
      grep -q "^walks per hard sub-step: the slowest rank's exceed the ranks' mean by [0-9.]* ms; the slowest: rank" \
        "$tmp/trace3.txt" &&
      grep -q "^walks per soft sub-step: " "$tmp/trace3.txt" ||
      { echo "FAIL: tools/trace_report.py --compare on the 3-rank trace:"; cat "$tmp/trace3.txt"; fail=1; }
  fi
else
  echo "FAIL: 3-rank TreeBuild / ParticleState device runs:"; cat "$tmp/mpi3d.log" "$tmp/mpi3s.log"; fail=1
fi

# 2 ranks, the state on the host and on the device: the same trees
if mpirun_ 2 run "$tmp/p.txt" -P "OutputDir=$tmp/lw-h" -P TreeBuild=device -P ParticleState=host --quiet &&
   mpirun_ 2 run "$tmp/p.txt" -P "OutputDir=$tmp/lw-d" -P TreeBuild=device -P ParticleState=device \
     >"$tmp/lw-d.log" 2>&1; then
  same_run "$tmp/lw-h" "$tmp/lw-d" "2 ranks, the state on the host against the state on the device" 2048
else
  echo "FAIL: 2-rank runs with the state on the host and on the device"; cat "$tmp/lw-d.log" 2>/dev/null; fail=1
fi

# 4 ranks, ParticleState device: the merged soft walks take the local
# particles alone as sinks. With every particle and LET item a sink, an item
# among a work-item's four sinks (which share the opening tests) opened
# cells for all of them: 1.61 times one rank's soft interactions on this
# sphere. Each soft step's interactions must stay within 1.15 times one
# rank's (the LET's own overhead: 1.04) and within 5 % of the host state's
# merged walk on 4 ranks, whose sinks were always the local particles
# (0.1 %).
cat >"$tmp/q.txt" <<EOP
InitCondFile   plummer:32768:4
TimeEnd        0.05
EnergyInterval 1000
EOP
soft_counts() { # timings.csv: n_pp_soft + n_pc_soft per step
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "n_pp_soft") a = i; if ($i == "n_pc_soft") b = i }; next }
           { printf "%.0f\n", $a + $b }' "$1/timings.csv"
}
if mpirun_ 1 run "$tmp/q.txt" -P "OutputDir=$tmp/ls1" -P ParticleState=device -P TreeBuild=device --quiet &&
   mpirun_ 4 run "$tmp/q.txt" -P "OutputDir=$tmp/ls4" -P ParticleState=device -P TreeBuild=device --quiet &&
   mpirun_ 4 run "$tmp/q.txt" -P "OutputDir=$tmp/ls4h" -P ParticleState=host -P TreeBuild=host --quiet; then
  soft_counts "$tmp/ls1" >"$tmp/ls1.n"
  soft_counts "$tmp/ls4" >"$tmp/ls4.n"
  soft_counts "$tmp/ls4h" >"$tmp/ls4h.n"
  steps=$(wc -l <"$tmp/ls4.n")
  [ "$steps" -ge 2 ] && [ "$(wc -l <"$tmp/ls1.n")" = "$steps" ] && [ "$(wc -l <"$tmp/ls4h.n")" = "$steps" ] ||
    { echo "FAIL: local-sink runs: $steps soft steps on 4 ranks"; fail=1; }
  paste -d ' ' "$tmp/ls1.n" "$tmp/ls4.n" "$tmp/ls4h.n" | awk '
    { r1 = $2 / $1; rh = $2 / $3
      printf "soft step %d: 4 ranks %.4e interactions, %.3f x one rank, %.4f x the host state\n", NR, $2, r1, rh
      if (!($1 > 0) || r1 > 1.15 || rh > 1.05 || rh < 0.95) bad = 1 }
    END { exit bad }' ||
    { echo "FAIL: 4 ranks, ParticleState device: the merged soft walks do too many interactions"; fail=1; }
else
  echo "FAIL: local-sink runs"; fail=1
fi

# 2 ranks, a device that does not exist
if mpirun_ 2 run "$tmp/p.txt" -P "OutputDir=$tmp/bad" -P OpenCLDevice=9:9 >"$tmp/bad.out" 2>"$tmp/bad.err"; then
  echo "FAIL: a run with OpenCLDevice 9:9 succeeded"; fail=1
fi
grep -q "hytree: error: \[rank [01]\] .*9" "$tmp/bad.err" || { echo "FAIL: no clear device message:"; cat "$tmp/bad.err"; fail=1; }
[ ! -e "$tmp/bad" ] || { echo "FAIL: the failed run created its output directory"; fail=1; }

# 2 ranks, rank 1 alone runs out of device memory (MPMD launch: one rank per program)
# shellcheck disable=SC2086
if timeout 300 $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 1 "$HYTREE" run "$tmp/p.txt" -P "OutputDir=$tmp/oom" : \
     -n 1 env HYTREE_TEST_DEVICE_MEM_LIMIT=100000 "$HYTREE" run "$tmp/p.txt" -P "OutputDir=$tmp/oom" \
     >"$tmp/oom.out" 2>"$tmp/oom.err"; then
  echo "FAIL: a run whose rank 1 ran out of device memory succeeded"; fail=1
fi
grep -q "hytree: error: \[rank 1\] .*out of device memory" "$tmp/oom.err" ||
  { echo "FAIL: no clear out-of-memory message from rank 1:"; cat "$tmp/oom.err"; fail=1; }
ls "$tmp/oom"/snapshot_* >/dev/null 2>&1 && { echo "FAIL: the failed run left a snapshot"; fail=1; }

# 2 ranks, an MPI call fails on rank 1 alone
# shellcheck disable=SC2086
if timeout 300 $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 1 "$HYTREE" run "$tmp/p.txt" -P "OutputDir=$tmp/mpifail" : \
     -n 1 env HYTREE_TEST_MPI_FAIL=3 "$HYTREE" run "$tmp/p.txt" -P "OutputDir=$tmp/mpifail" \
     >"$tmp/mpifail.out" 2>"$tmp/mpifail.err"; then
  echo "FAIL: a run whose rank 1 had an MPI call fail succeeded"; fail=1
fi
grep -q "hytree: error: \[rank 1\] LET: exchange of the items failed: MPI_ERR" "$tmp/mpifail.err" ||
  { echo "FAIL: no clear MPI failure message from rank 1:"; cat "$tmp/mpifail.err"; fail=1; }

# the device-resident state on several ranks needs the hybrid scheme:
# refused with one line, before any output
kv=ParticleState=device
# shellcheck disable=SC2086
if $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2 "$HYTREE" run "$tmp/p.txt" -P "OutputDir=$tmp/one" -P "$kv" -P Scheme=tree \
     >"$tmp/one.out" 2>"$tmp/one.err"; then
  echo "FAIL: $kv was accepted on 2 ranks with Scheme tree"; fail=1
fi
grep -q "hytree: error: .*-P $kv: ParticleState device needs Scheme hybrid on several MPI ranks" "$tmp/one.err" ||
  { echo "FAIL: no clear message for $kv with Scheme tree on 2 ranks:"; cat "$tmp/one.err"; fail=1; }
[ ! -e "$tmp/one" ] || { echo "FAIL: the refused $kv run created its output directory"; fail=1; }
exit $fail
