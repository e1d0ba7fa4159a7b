#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# bad_input.sh: every kind of bad input ends `hytree run` with a non-zero
# status and exactly one "hytree: error: ..." line that names the problem,
# and leaves no snapshot (nor a temporary file) in OutputDir.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
tmp="$top_builddir/tests/tmp-bad-input-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0

cat >"$tmp/base.txt" <<EOP
InitCondFile   plummer:512:1
OutputDir      $tmp/out
TimeEnd        0
SnapshotFields Acceleration,Potential
EOP

# expect_error NAME PATTERN ARGS...: run, check status, one line, pattern, no snapshot
expect_error() {
  name=$1 pattern=$2; shift 2
  rm -rf "$tmp/out"
  if "$HYTREE" run "$tmp/base.txt" "$@" >"$tmp/stdout" 2>"$tmp/stderr"; then
    echo "FAIL [$name]: exit status 0"; fail=1; return
  fi
  lines=$(wc -l <"$tmp/stderr")
  if [ "$lines" -ne 1 ]; then echo "FAIL [$name]: $lines lines on stderr:"; cat "$tmp/stderr"; fail=1; fi
  if ! grep -q "^hytree: error: .*$pattern" "$tmp/stderr"; then
    echo "FAIL [$name]: message does not match '$pattern':"; cat "$tmp/stderr"; fail=1
  fi
  if ls "$tmp/out" 2>/dev/null | grep -q -e '^snapshot' -e '\.tmp\.'; then
    echo "FAIL [$name]: output left behind:"; ls "$tmp/out"; fail=1
  fi
  echo "ok [$name]: $(cat "$tmp/stderr")"
}

# Gadget-1 ICs to damage (double precision, little endian, masses in the header table)
"$HYTREE" ic plummer -N 100 --seed 2 -o "$tmp/good.dat" >/dev/null || { echo "FAIL: hytree ic"; exit 1; }
# byte offsets: header record 4 + 256 + 4; POS block starts after its 4-byte marker
cp "$tmp/good.dat" "$tmp/nan.dat"
printf '\000\000\000\000\000\000\370\177' | dd of="$tmp/nan.dat" bs=1 seek=268 conv=notrunc 2>/dev/null
cp "$tmp/good.dat" "$tmp/negmass.dat"
# MassTable[1] (header offset 4 + 6*4 + 8) = -1.0: equal masses are in the table
printf '\000\000\000\000\000\000\360\277' | dd of="$tmp/negmass.dat" bs=1 seek=36 conv=notrunc 2>/dev/null
size=$(wc -c <"$tmp/good.dat")
head -c 1000 "$tmp/good.dat" >"$tmp/truncated.dat"
# a Gadget-1 file with a valid header and no particles
{ printf '\000\001\000\000'; head -c 256 /dev/zero; printf '\000\001\000\000'; } >"$tmp/empty.dat"
printf 'this is not a snapshot\n' >"$tmp/text.dat"

expect_error "missing IC file" "cannot open" -P "InitCondFile=$tmp/nonexistent.hdf5"
expect_error "truncated IC file" "truncated" -P "InitCondFile=$tmp/truncated.dat"
expect_error "unknown format" "text.dat: unrecognised file format" -P "InitCondFile=$tmp/text.dat"
expect_error "wrong format" "not an HDF5\|HDF5" -P "InitCondFile=$tmp/good.dat" -P InitCondFormat=hdf5
expect_error "NaN position" "particle ID 1 .*position" -P "InitCondFile=$tmp/nan.dat"
expect_error "N = 0 (file)" "no particles" -P "InitCondFile=$tmp/empty.dat"
expect_error "N = 0 (generator)" "plummer:0" -P "InitCondFile=plummer:0"
expect_error "negative mass" "negative mass" -P "InitCondFile=$tmp/negmass.dat"
expect_error "unknown OpenCL device" "OpenCLDevice 7:7" -P OpenCLDevice=7:7
[ "$size" -gt 1000 ] || { echo "FAIL: good.dat is only $size bytes"; fail=1; }

# and the good file runs: snapshot_000.hdf5 written, no temporary files
rm -rf "$tmp/out"
if ! "$HYTREE" run "$tmp/base.txt" -P "InitCondFile=$tmp/good.dat" >"$tmp/stdout" 2>"$tmp/stderr"; then
  echo "FAIL: the undamaged file does not run:"; cat "$tmp/stderr"; fail=1
fi
[ -f "$tmp/out/snapshot_000.hdf5" ] || { echo "FAIL: no snapshot_000.hdf5 from the good file"; fail=1; }
if ls "$tmp/out" | grep -q '\.tmp\.'; then echo "FAIL: temporary file left:"; ls "$tmp/out"; fail=1; fi
exit $fail
