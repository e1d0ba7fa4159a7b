#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# restart.sh: restarts are exact. A hybrid run of 4 soft steps straight, and
# the same run stopped by SIGTERM after step 1 (HYTREE_TEST_SIGNAL_AT_STEP
# raises it; the run writes a restart set and stops) then resumed with
# `hytree run --restart DIR`, give bit-identical final snapshots (h5diff) and
# energy.csv, on 1 and on 2 ranks. A run killed (SIGKILL) while writing its
# second restart set (HYTREE_TEST_KILL_IN_RESTART) resumes from the first set
# to the same result. This runs with the defaults and with the tree and the
# particle state on the device (TreeBuild device, ParticleState device), on
# 1 and on 2 ranks (where the state stays on the device for the hard steps),
# and on 2 ranks with the device-built tree alone, and on 1 rank with the
# relative opening criterion (whose sink scales come from the accelerations
# that the restart set carries), with the state on the host and on the
# device; a straight run with the
# state on the device must equal, bit for bit, the one with the
# device-built tree and the state on the host. A restart
# that changes a physics key, or runs on another rank count, is refused
# with one clear line. A 2-rank run of 3 particles with the state on the
# device (one rank on the host path) resumes to the same result.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
command -v h5diff >/dev/null 2>&1 || { echo "SKIP: h5diff (hdf5-tools) not found"; exit 77; }
tmp="$top_builddir/tests/tmp-restart-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail=0
cat >"$tmp/p.txt" <<EOP
InitCondFile  plummer:2048:4
OutputDir     $tmp/unused
TimeEnd       0.3
SnapshotFields Acceleration,Potential
EOP
. "${top_srcdir:-.}/tests/same_run.sh"
for run in 1 1dev 1rel 1reldev 2 2dev 2state; do
  np=${run%%[a-z]*}
  case $run in
    1dev | 2state) dev="-P TreeBuild=device -P ParticleState=device" ;;
    1rel) dev="-P OpeningCriterion=relative" ;;
    1reldev) dev="-P OpeningCriterion=relative -P TreeBuild=device -P ParticleState=device" ;;
    2dev) dev="-P TreeBuild=device -P ParticleState=host" ;;
    *) dev= ;;
  esac
  if [ "$np" -gt 1 ]; then
    [ -n "${MPIEXEC:-}" ] || { echo "no MPI launcher: 2-rank restarts not tested"; break; }
    # shellcheck disable=SC2086
    launch="$MPIEXEC ${MPIEXEC_PREFLAGS:-} -n $np"
  else
    launch=
  fi
  d="$tmp/np$run"
  $launch "$HYTREE" run "$tmp/p.txt" $dev -P "OutputDir=$d.straight" --quiet || { echo "FAIL: straight run ($np)"; fail=1; }
  HYTREE_TEST_SIGNAL_AT_STEP=1 $launch "$HYTREE" run "$tmp/p.txt" $dev -P "OutputDir=$d.stopped" >"$d.log" 2>&1 ||
    { echo "FAIL: stopped run ($np)"; cat "$d.log"; fail=1; }
  grep -q "stopped by SIGTERM" "$d.log" || { echo "FAIL: no stop message ($np)"; cat "$d.log"; fail=1; }
  [ ! -e "$d.stopped/snapshot_001.hdf5" ] || { echo "FAIL: the stopped run wrote the final snapshot"; fail=1; }
  $launch "$HYTREE" run --restart "$d.stopped" --quiet || { echo "FAIL: resumed run ($np)"; fail=1; }
  same_run "$d.straight" "$d.stopped" "$np rank(s), SIGTERM after step 1 and resume"
  # SIGKILL while the second restart set is written: the first one stays loadable
  HYTREE_TEST_KILL_IN_RESTART=2 $launch "$HYTREE" run "$tmp/p.txt" $dev -P "OutputDir=$d.killed" \
    -P RestartEverySoftSteps=1 >/dev/null 2>&1 && { echo "FAIL: the killed run exited 0 ($np)"; fail=1; }
  grep -q "^A $np 1\$" "$d.killed/restart/current" ||
    { echo "FAIL: after the kill the restart pointer is not the first set:"; cat "$d.killed/restart/current"; fail=1; }
  $launch "$HYTREE" run --restart "$d.killed" --quiet || { echo "FAIL: resume after SIGKILL ($np)"; fail=1; }
  same_run "$d.straight" "$d.killed" "$np rank(s), SIGKILL while writing a restart set and resume"
  if [ "$run" = 1dev ]; then
    grep -q "tree built on the device, particle state kept on the device" "$d.log" ||
      { echo "FAIL: ParticleState device did not keep the state on the device"; cat "$d.log"; fail=1; }
    "$HYTREE" run "$tmp/p.txt" -P TreeBuild=device -P ParticleState=host -P "OutputDir=$d.hoststate" --quiet ||
      { echo "FAIL: device-built tree, state on the host"; fail=1; }
    same_run "$d.straight" "$d.hoststate" "the state on the device against the state on the host" 2048
  fi
  if [ "$run" = 1reldev ]; then
    "$HYTREE" run "$tmp/p.txt" -P OpeningCriterion=relative -P TreeBuild=device -P ParticleState=host \
      -P "OutputDir=$d.hoststate" --quiet || { echo "FAIL: relative criterion, state on the host"; fail=1; }
    same_run "$d.straight" "$d.hoststate" "relative criterion: the state on the device against the host" 2048
  fi
  if [ "$run" = 2state ]; then
    grep -q "tree built on the device, particle state kept on the device (decomposed there)" "$d.log" ||
      { echo "FAIL: 2 ranks, ParticleState device did not keep the state on the device"; cat "$d.log"; fail=1; }
    same_run "$d.straight" "$tmp/np2dev.straight" "2 ranks: the state on the device against the host" 2048
  fi
done

# 2 ranks, the state on the device, 3 particles: one rank holds one and takes
# the host path, and on resuming it must join the collective of the key cube
# that the other rank's tree rebuild makes (it hung without); `timeout`
# turns a hang into a failure
if [ -n "${MPIEXEC:-}" ]; then
  cat >"$tmp/tiny.txt" <<EOP
InitCondFile  plummer:3:4
OutputDir     $tmp/unused
TimeEnd       0.2
TimeStepHard  0.01
EOP
  dev="-P TreeBuild=device -P ParticleState=device"
  # shellcheck disable=SC2086
  timeout 300 $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2 "$HYTREE" run "$tmp/tiny.txt" $dev -P "OutputDir=$tmp/tiny.straight" \
    --quiet || { echo "FAIL: 3 particles on 2 ranks, straight run"; fail=1; }
  # shellcheck disable=SC2086
  HYTREE_TEST_SIGNAL_AT_STEP=1 timeout 300 $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2 "$HYTREE" run "$tmp/tiny.txt" $dev \
    -P "OutputDir=$tmp/tiny.stopped" >"$tmp/tiny.log" 2>&1 || { echo "FAIL: 3 particles, stopped run"; fail=1; }
  # shellcheck disable=SC2086
  timeout 300 $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2 "$HYTREE" run --restart "$tmp/tiny.stopped" --quiet ||
    { echo "FAIL: 3 particles on 2 ranks, resumed run (exit status $?)"; fail=1; }
  cmp -s "$tmp/tiny.straight/energy.csv" "$tmp/tiny.stopped/energy.csv" ||
    { echo "FAIL: 3 particles on 2 ranks: the resumed run's energy.csv differs"; fail=1; }
fi

# refused restarts: a physics key changed, another rank count
if "$HYTREE" run --restart "$tmp/np1.stopped" -P R1=0.05 >"$tmp/r1.out" 2>"$tmp/r1.err"; then
  echo "FAIL: a restart with another R1 was accepted"; fail=1
fi
grep -q "R1 may not change on a restart" "$tmp/r1.err" || { echo "FAIL: no clear R1 message:"; cat "$tmp/r1.err"; fail=1; }
if [ -d "$tmp/np2.stopped" ]; then
  if "$HYTREE" run --restart "$tmp/np2.stopped" >"$tmp/np.out" 2>"$tmp/np.err"; then
    echo "FAIL: a 2-rank restart set was resumed on 1 rank"; fail=1
  fi
  grep -q "written by 2 MPI ranks" "$tmp/np.err" || { echo "FAIL: no clear rank-count message:"; cat "$tmp/np.err"; fail=1; }
fi
exit $fail
