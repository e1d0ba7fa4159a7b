#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# bad_input_corpus.sh: every case of tests/bad-input/ ends `hytree run` with a
# non-zero status, exactly one line on stderr, "hytree: error: ..." matching
# the case's pattern (which names the file and line, the key, or the
# particle), and no output: OutputDir is never created.
#
# A case is NAME.expect (a "# why" comment, "pattern: REGEX", a basic
# regular expression matched after "hytree: error: ", and optionally "args:
# ARGS", extra arguments split on blanks, in which @CASES@ stands for the
# corpus directory and @TMP@ for a scratch directory) plus at most one data
# file NAME.EXT:
#  - NAME.par is the parameter file: hytree run NAME.par -P OutputDir=... ARGS
#  - any other NAME.EXT is the initial conditions of a small valid parameter
#    file: hytree run base.txt -P InitCondFile=NAME.EXT ARGS; the message
#    must name NAME.EXT
#  - without a data file: hytree run base.txt ARGS
# The binary cases were written by tests/bad-input/generate.py, but for
# h5-libhdf5-*, inputs on which the HDF5 fuzz target found libhdf5 to
# crash or read out of bounds (tools/fuzz.sh). Last, an
# undamaged Gadget file runs and leaves a snapshot and no temporary file.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
cases="$top_srcdir/tests/bad-input"
tmp="$top_builddir/tests/tmp-bad-input-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
n=0
# 57 one-rank runs: a singleton MPI process that starts no ORTE daemon
# starts twice as fast (OpenMPI; other MPIs ignore it)
OMPI_MCA_ess_singleton_isolated=1
export OMPI_MCA_ess_singleton_isolated
out="$tmp/out"
cat >"$tmp/base.txt" <<EOP
InitCondFile   plummer:512:1
OutputDir      $out
TimeEnd        0
SnapshotFields Acceleration,Potential
EOP

for expect in "$cases"/*.expect; do
  name=$(basename "$expect" .expect)
  data=
  for f in "$cases/$name".*; do
    case $f in *.expect) ;; *) [ -z "$data" ] || { echo "FAIL [$name]: more than one data file"; fail=1; }; data=$f ;; esac
  done
  pattern=$(sed -n 's/^pattern: //p' "$expect")
  args=$(sed -n 's/^args: //p' "$expect" | sed -e "s|@CASES@|$cases|g" -e "s|@TMP@|$tmp|g")
  [ -n "$pattern" ] || { echo "FAIL [$name]: no 'pattern:' line in $expect"; fail=1; continue; }
  rm -rf "$out"
  # shellcheck disable=SC2086
  case $data in
    *.par) "$HYTREE" run "$data" -P "OutputDir=$out" --quiet $args >"$tmp/stdout" 2>"$tmp/stderr" ;;
    "") "$HYTREE" run "$tmp/base.txt" --quiet $args >"$tmp/stdout" 2>"$tmp/stderr" ;;
    *) "$HYTREE" run "$tmp/base.txt" -P "InitCondFile=$data" --quiet $args >"$tmp/stdout" 2>"$tmp/stderr" ;;
  esac
  status=$?
  n=$((n + 1))
  bad=0
  [ "$status" -ne 0 ] || { echo "FAIL [$name]: exit status 0"; bad=1; }
  lines=$(wc -l <"$tmp/stderr")
  [ "$lines" -eq 1 ] || { echo "FAIL [$name]: $lines lines on stderr"; bad=1; }
  grep -q -e "^hytree: error: .*$pattern" "$tmp/stderr" || { echo "FAIL [$name]: no line matches '$pattern'"; bad=1; }
  case $data in
    ""|*.par) ;;
    *) grep -q -F "$(basename "$data")" "$tmp/stderr" || { echo "FAIL [$name]: the message does not name the file"; bad=1; } ;;
  esac
  [ ! -e "$out" ] || { echo "FAIL [$name]: OutputDir was created:"; ls -R "$out"; bad=1; }
  if [ $bad -ne 0 ]; then
    echo "  stderr:"; sed 's/^/    /' "$tmp/stderr"
    fail=1
  else
    echo "ok [$name]: $(sed "s|$cases/||g; s|$tmp/||g" "$tmp/stderr")"
  fi
done
# every data file belongs to a case
for f in "$cases"/*; do
  case $f in *.expect|*/generate.py) continue ;; esac
  b=$(basename "$f")
  [ -f "$cases/${b%.*}.expect" ] || { echo "FAIL: $b has no ${b%.*}.expect"; fail=1; }
done
[ "$n" -ge 50 ] || { echo "FAIL: only $n cases found in $cases"; fail=1; }

# and an undamaged file runs: snapshot_000.hdf5 written, no temporary files
"$HYTREE" ic plummer -N 100 --seed 2 -o "$tmp/good.dat" >/dev/null || { echo "FAIL: hytree ic"; exit 1; }
rm -rf "$out"
if ! "$HYTREE" run "$tmp/base.txt" -P "InitCondFile=$tmp/good.dat" >"$tmp/stdout" 2>"$tmp/stderr"; then
  echo "FAIL: the undamaged file does not run:"; cat "$tmp/stderr"; fail=1
fi
[ -f "$out/snapshot_000.hdf5" ] || { echo "FAIL: no snapshot_000.hdf5 from the good file"; fail=1; }

# libhdf5 crashing on a file (HYTREE_TEST_HDF5_CRASH: its check in a child
# process ends with SIGSEGV): one line naming the file, exit 1, no output
"$HYTREE" ic plummer -N 100 --seed 2 -o "$tmp/good.hdf5" >/dev/null || { echo "FAIL: hytree ic"; exit 1; }
rm -rf "$out"
HYTREE_TEST_HDF5_CRASH=1 "$HYTREE" run "$tmp/base.txt" -P "InitCondFile=$tmp/good.hdf5" >"$tmp/stdout" 2>"$tmp/stderr"
status=$?
if [ "$status" != 1 ] || [ "$(wc -l <"$tmp/stderr")" != 1 ] ||
   ! grep -q "^hytree: error: .*good\.hdf5 is a damaged HDF5 file: the HDF5 library crashed reading it$" "$tmp/stderr" ||
   [ -e "$out" ]; then
  echo "FAIL: a crash of libhdf5 in the file's check (exit $status):"; cat "$tmp/stderr"; fail=1
else
  echo "ok [libhdf5 crash]: $(sed "s|$tmp/||g" "$tmp/stderr")"
fi
if ls "$out" | grep -q '\.tmp\.'; then echo "FAIL: temporary file left:"; ls "$out"; fail=1; fi
echo "$n cases"
exit $fail
