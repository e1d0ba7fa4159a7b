#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# fuzz_regress.sh: every fuzz harness (tests/fuzz/fuzz_T.c, linked with
# tests/fuzz/driver.c as tests/fuzz/regress_T) over its seed corpus
# tests/fuzz/corpus/T and over tests/fuzz/regress/T, the inputs of earlier
# crashes, leaks and out-of-memory findings. A harness aborts on a broken
# property; the reader must neither crash nor exit on any of them.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
tmp="$top_builddir/tests/tmp-fuzz-regress-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
for t in params gadget hdf5; do
  prog="$top_builddir/tests/fuzz/regress_$t"
  [ -x "$prog" ] || { echo "FAIL [$t]: $prog not built"; fail=1; continue; }
  # (Leaks inside libhdf5 are not hytree's: tests/fuzz/lsan.supp, for a
  # build with --enable-sanitizer=address. libhdf5 asks malloc for sizes
  # read from damaged files and handles a NULL answer, so ASan must give
  # one instead of aborting, whatever options make check set before.)
  if ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1" LSAN_OPTIONS="suppressions=$top_srcdir/tests/fuzz/lsan.supp:print_suppressions=0" \
       HY_FUZZ_VERBOSE=1 TMPDIR="$tmp" "$prog" "$top_srcdir/tests/fuzz/corpus/$t" "$top_srcdir/tests/fuzz/regress/$t" \
       >"$tmp/$t.out" 2>&1; then
    echo "ok [$t]: $(tail -n 1 "$tmp/$t.out")"
    cat "$tmp/$t.out"
  else
    echo "FAIL [$t]: exit status $?; the last input named is the one that failed:"
    tail -n 20 "$tmp/$t.out"
    fail=1
  fi
done
# The initial conditions of the seed corpus are real, readable files: each
# is accepted (by at least one of the reads of its harness).
for t in gadget hdf5; do
  bad=$(awk -v dir="corpus/$t/" '
    / \([0-9]+ bytes\)$/ { if (f != "" && !ok) print f; f = index($0, dir) ? $1 : ""; ok = 0; next }
    /^  accepted/ { ok = 1 }
    END { if (f != "" && !ok) print f }' "$tmp/$t.out")
  if [ -n "$bad" ]; then
    echo "FAIL [$t]: seeds rejected: $bad"
    fail=1
  fi
done
# The scratch directories of the harnesses are gone.
left=$(find "$tmp" -mindepth 1 -name 'hytree-fuzz-*' | wc -l)
[ "$left" -eq 0 ] || { echo "FAIL: $left scratch directories left behind"; fail=1; }
exit $fail
