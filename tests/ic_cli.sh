#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# ic_cli.sh: `hytree ic plummer` end to end. Skips (77) while the hytree
# driver does not dispatch the ic subcommand yet.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"

if ! "$HYTREE" ic --help 2>/dev/null | grep -q plummer; then
  echo "SKIP: $HYTREE does not provide 'ic' yet"
  exit 77
fi

tmp="$top_builddir/tests/tmp-ic-cli-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0

if ! "$HYTREE" ic plummer -N 1000 --seed 3 -o "$tmp/p.hdf5" >"$tmp/out" 2>"$tmp/err"; then
  echo "FAIL: hytree ic plummer failed:"; cat "$tmp/err"; exit 1
fi
cat "$tmp/out"
grep -q 'N = 1000' "$tmp/out" || { echo "FAIL: summary lacks N = 1000"; fail=1; }

if command -v python3 >/dev/null 2>&1 && python3 -c 'import h5py' 2>/dev/null; then
  rows=$(python3 -c 'import sys, h5py; print(h5py.File(sys.argv[1], "r")["/PartType1/Coordinates"].shape[0])' "$tmp/p.hdf5")
elif command -v h5dump >/dev/null 2>&1; then
  rows=$(h5dump -H -d /PartType1/Coordinates "$tmp/p.hdf5" | sed -n 's/.*SIMPLE { ( \([0-9]*\), 3 ).*/\1/p')
else
  echo "SKIP: neither h5py nor h5dump available"; exit 77
fi
[ "$rows" = 1000 ] || { echo "FAIL: /PartType1/Coordinates has '$rows' rows, expected 1000"; fail=1; }

# A bad invocation: non-zero status, exactly one line on stderr.
if "$HYTREE" ic plummer -N abc -o "$tmp/q.hdf5" >/dev/null 2>"$tmp/err"; then
  echo "FAIL: -N abc accepted"; fail=1
fi
lines=$(wc -l <"$tmp/err")
[ "$lines" -eq 1 ] || { echo "FAIL: expected one stderr line, got $lines:"; cat "$tmp/err"; fail=1; }
grep -q '^hytree: error:' "$tmp/err" || { echo "FAIL: stderr lacks 'hytree: error:'"; fail=1; }
[ ! -e "$tmp/q.hdf5" ] || { echo "FAIL: output written despite the error"; fail=1; }
exit $fail
