#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# bench.sh: `hytree bench` on a small Plummer sphere (the CPU device in CI):
# a table and a CSV with one row per scheme, the force errors of the final
# configuration within the tree's accuracy at the default a_err (median
# <= 3e-3, 99th percentile <= 2e-2, as tests/test_forces requires), positive
# times, and R_hybrid in the hybrid row. No speed is asserted.
#
# --time (accuracy per time): a 2x2 grid (Scheme hybrid/direct x
# SoftStepRatio 2/4) on the same sphere with TimeStepHard 0.005 to t = 0.04:
#  - 4 rows; steps = T / (n dt_h) = 4 and 2 (hybrid), T / dt_h = 8 (direct,
#    which has no sub-steps);
#  - the force error against the double-precision direct sum: the direct
#    scheme's is float rounding (median <= 1e-5, p99 <= 1e-4, as
#    tests/test_forces bounds the float direct sum), the hybrid's the tree's
#    at the default a_err (median <= 3e-3, p99 <= 2e-2); all positive,
#    finite, median <= p99 <= max;
#  - max |dE/E| positive and below 1e-3 (leapfrog at dt_h 0.005 on a
#    Plummer sphere: ~1e-5);
#  - from the outputs kept with --keep: max |dE/E| is the largest
#    |E - E0| / |E0| of energy.csv's total column, the wall time the sum of
#    t_step and the steps the rows of timings.csv, the interaction rate
#    sum(n_pp + n_pc) / sum(t_kernel) (within the CSVs' 7 digits);
#  - without --keep no directory of the bench is left in TMPDIR;
#  - -P with an unknown key: hytree run's message and exit status; keys the
#    bench sets and unknown --grid keys: a usage error (2) naming the option.
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

# --time
mkdir "$tmp/t" || exit 99
tmpdir=$(cd "$tmp/t" && pwd) || exit 99
"$HYTREE" bench --time 0.04 --N 4096 -P TimeStepHard=0.005 --grid Scheme=hybrid,direct \
  --grid SoftStepRatio=2,4 --sinks 1024 --device any --csv "$tmp/t.csv" --keep "$tmp/keep" >"$tmp/t.out" 2>&1 ||
  { echo "FAIL: hytree bench --time failed:"; cat "$tmp/t.out"; exit 1; }
cat "$tmp/t.out" "$tmp/t.csv"
[ "$(wc -l <"$tmp/t.csv")" -eq 5 ] || { echo "FAIL: the --time CSV has not one header and four rows"; fail=1; }
head="ic,N,Scheme,SoftStepRatio,wall_time_s,steps,max_rel_energy_error"
head="$head,force_err_median,force_err_p99,force_err_max,interactions_per_s"
head -n 1 "$tmp/t.csv" | grep -qx "$head" || { echo "FAIL: --time CSV header"; fail=1; }
awk -F, 'NR > 1 {
    ok = $1 == "plummer" && $2 == 4096 && $5 > 0 && $11 > 0
    if (!ok) { print "FAIL: row " NR ": ic, N, time or rate"; bad = 1 }
    want = $3 == "direct" ? 8 : 0.04 / (0.005 * $4)
    if ($6 != want) { print "FAIL: row " NR ": " $6 " steps, expected " want; bad = 1 }
    if (!($7 > 0 && $7 < 1e-3)) { print "FAIL: row " NR ": max |dE/E| " $7; bad = 1 }
    errs = $8 ", " $9 ", " $10
    if (!($8 > 0 && $8 <= $9 && $9 <= $10 && $10 < 1)) { print "FAIL: row " NR ": force errors " errs; bad = 1 }
    if ($3 == "direct" && !($8 <= 1e-5 && $9 <= 1e-4)) { print "FAIL: row " NR ": direct force errors " errs; bad = 1 }
    if ($3 == "hybrid" && !($8 <= 3e-3 && $9 <= 2e-2)) { print "FAIL: row " NR ": hybrid force errors " errs; bad = 1 }
  } END { exit bad }' "$tmp/t.csv" || fail=1
# without --keep (the MPI library may keep files of its own in TMPDIR)
TMPDIR=$tmpdir "$HYTREE" bench --time 0.01 --N 1024 --sinks 64 --quiet >"$tmp/t2.out" 2>&1 ||
  { echo "FAIL: hytree bench --time without --keep failed:"; cat "$tmp/t2.out"; fail=1; }
! ls "$tmp/t" | grep -q hytree-bench || { echo "FAIL: hytree bench left files in TMPDIR:"; ls -R "$tmp/t"; fail=1; }
k=0
tail -n +2 "$tmp/t.csv" | while IFS=, read -r ic n scheme ratio wall steps maxde med p99 max rate; do
  k=$((k + 1))
  d=$(printf '%s/keep/run-%03d' "$tmp" $k)
  awk -F, -v maxde="$maxde" -v wall="$wall" -v steps="$steps" -v rate="$rate" -v d="$d" '
    function abs(x) { return x < 0 ? -x : x }
    FNR == 1 { for (i = 1; i <= NF; i++) col[FILENAME, $i] = i; next }
    function v(name) { return $col[FILENAME, name] }
    FILENAME ~ /energy.csv$/ { e = v("total"); if (FNR == 2) e0 = e; de = abs(e - e0) / abs(e0); if (de > m) m = de }
    FILENAME ~ /timings.csv$/ {
      t += v("t_step"); n++; kt += v("t_kernel")
      it += v("n_pp_hard") + v("n_pc_hard") + v("n_pp_soft") + v("n_pc_soft")
    }
    END {
      if (abs(m - maxde) > 1e-6 * m) { print "FAIL: " d ": max |dE/E| " maxde ", energy.csv gives " m; bad = 1 }
      if (abs(t - wall) > 1e-5 * t || n != steps) {
        print "FAIL: " d ": " wall " s in " steps " steps, timings.csv " t " s in " n; bad = 1
      }
      if (abs(it / kt - rate) > 1e-5 * rate) { print "FAIL: " d ": " rate " interactions/s, timings.csv " it / kt; bad = 1 }
      exit bad
    }' "$d/energy.csv" "$d/timings.csv" || exit 1
done || fail=1

# -P and --grid errors
run_args="-P InitCondFile=plummer:64 -P OutputDir=$tmp/never -P TimeEnd=0.01"
"$HYTREE" run /dev/null $run_args -P NoSuchKey=1 >/dev/null 2>"$tmp/run.err"; run_rc=$?
"$HYTREE" bench --time 0.01 --N 64 -P NoSuchKey=1 >/dev/null 2>"$tmp/bench.err"; bench_rc=$?
if [ $run_rc -eq 0 ] || [ $bench_rc -ne $run_rc ] || ! grep -q "NoSuchKey" "$tmp/run.err" ||
   ! cmp -s "$tmp/run.err" "$tmp/bench.err"; then
  echo "FAIL: -P NoSuchKey=1: hytree run exit $run_rc, hytree bench exit $bench_rc, messages:"
  cat "$tmp/run.err" "$tmp/bench.err"; fail=1
fi
usage_fails() { # expected text, args...
  want=$1; shift
  "$HYTREE" bench "$@" >"$tmp/u.out" 2>&1
  rc=$?
  if [ $rc -ne 2 ] || ! grep -q "hytree: error: bench: $want" "$tmp/u.out"; then
    echo "FAIL: hytree bench $*: exit $rc, expected 2 and '$want':"; cat "$tmp/u.out"; fail=1
  fi
}
usage_fails "-P InitCondFile=x: InitCondFile is set by --ic" --time 0.01 -P InitCondFile=x
usage_fails "--grid NoSuchKey=1,2: unknown parameter 'NoSuchKey'" --time 0.01 --grid NoSuchKey=1,2
usage_fails "--grid needs --time" --grid NCrit=8,16
"$HYTREE" bench --time 0.01 --N 64 --grid NCrit=0,8 >"$tmp/g.out" 2>&1 && { echo "FAIL: NCrit=0 accepted"; fail=1; }
grep -q "hytree: error: bench: --grid NCrit=0: parameter 'NCrit' = 0 is out of range" "$tmp/g.out" ||
  { echo "FAIL: no clear --grid NCrit=0 message"; cat "$tmp/g.out"; fail=1; }
exit $fail
