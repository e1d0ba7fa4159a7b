#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# progress_log.sh: the progress log of a run under the MPI launcher, which
# gives its ranks terminal-like standard output even when the job's output
# goes to a file.
#  - 2 ranks, standard output a pipe: with the default ProgressInterval (0)
#    the log holds a `step K/N` line for every one of the N = 10 steps;
#  - the same with standard output a pseudo-terminal (script(1), else
#    python3's pty module);
#  - ProgressInterval 1000 (seconds, far longer than the run) leaves only
#    the first and the last step's lines: fewer lines than steps, the last
#    one present.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
if [ -z "${MPIEXEC:-}" ]; then echo "SKIP: no MPI launcher"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp="$top_builddir/tests/tmp-progress-log-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
# 10 soft steps of 0.05
cat >"$tmp/p.txt" <<EOP
InitCondFile  plummer:512:3
OutputDir     $tmp/out
TimeEnd       0.5
TimeStepHard  0.0125
EOP
# shellcheck disable=SC2086
run2="$MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2 $HYTREE run $tmp/p.txt"

# every_step LOG WHAT: a `step K/10` line for K = 1..10 in LOG
every_step() {
  k=1
  while [ $k -le 10 ]; do
    tr -d '\r' <"$1" | grep -q "^step $k/10 " || { echo "FAIL: $2: no line for step $k/10"; fail=1; }
    k=$((k + 1))
  done
  echo "$2: $(tr -d '\r' <"$1" | grep -c '^step ') step lines"
}

# stdout a pipe
$run2 -P "OutputDir=$tmp/pipe" 2>"$tmp/pipe.err" | cat >"$tmp/pipe.log"
[ -f "$tmp/pipe/energy.csv" ] || { echo "FAIL: the run with stdout a pipe did not run"; cat "$tmp/pipe.err"; exit 1; }
every_step "$tmp/pipe.log" "stdout a pipe"

# stdout a pseudo-terminal
if script -qec true /dev/null >/dev/null 2>&1; then
  script -qec "$run2 -P OutputDir=$tmp/pty" /dev/null >"$tmp/pty.log" 2>&1 </dev/null
elif ${PYTHON:-python3} -c 'import pty' >/dev/null 2>&1; then
  ${PYTHON:-python3} -c 'import pty, sys; sys.exit(pty.spawn(["sh", "-c", sys.argv[1]]) != 0)' \
    "$run2 -P OutputDir=$tmp/pty" >"$tmp/pty.log" 2>&1 </dev/null
else
  echo "SKIP: neither script(1) nor python3's pty module to give the run a terminal"
  exit 77
fi
[ -f "$tmp/pty/energy.csv" ] || { echo "FAIL: the run with stdout a terminal did not run"; cat "$tmp/pty.log"; exit 1; }
every_step "$tmp/pty.log" "stdout a terminal"

# a positive ProgressInterval throttles: first and last step only
$run2 -P "OutputDir=$tmp/slow" -P ProgressInterval=1000 2>"$tmp/slow.err" | cat >"$tmp/slow.log"
n=$(grep -c '^step ' "$tmp/slow.log")
echo "ProgressInterval 1000: $n step lines"
[ "$n" -lt 10 ] || { echo "FAIL: ProgressInterval 1000 printed $n step lines for 10 steps"; fail=1; }
grep -q '^step 10/10 ' "$tmp/slow.log" || { echo "FAIL: ProgressInterval 1000: no line for the last step"; fail=1; }
grep -q '^step 1/10 ' "$tmp/slow.log" || { echo "FAIL: ProgressInterval 1000: no line for the first step"; fail=1; }

[ $fail -eq 0 ] && echo "PASS: every step logged under $MPIEXEC (pipe and terminal); ProgressInterval throttles"
exit $fail
