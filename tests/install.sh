#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# install.sh: `make install DESTDIR=...` from the build tree installs the
# binary, the man page, the example parameter files, the kernel sources and
# the docs; the installed binary runs from another directory (the kernels
# are embedded), and also with HYTREE_KERNEL_DIR pointing at the installed
# kernel sources.
set -u
: "${top_builddir:=.}"
: "${MAKE:=make}"
: "${HY_BINDIR:?}" "${HY_PKGDATADIR:?}" "${HY_MANDIR:?}" "${HY_DOCDIR:?}"

tmp="$top_builddir/tests/tmp-install-$$"
mkdir -p "$tmp/elsewhere" || exit 99
tmp=$(cd "$tmp" && pwd) || exit 99
trap 'rm -rf "$tmp"' EXIT
stage="$tmp/stage"
fail=0

# A make of its own (not the jobserver of the make running the tests).
if ! (unset MAKEFLAGS MFLAGS MAKELEVEL; $MAKE -C "$top_builddir" install DESTDIR="$stage") \
    >"$tmp/install.log" 2>&1; then
  echo "FAIL: make install DESTDIR=$stage failed:"; tail -n 30 "$tmp/install.log"; exit 1
fi

bin="$stage$HY_BINDIR/hytree"
for f in "$bin" "$stage$HY_MANDIR/man1/hytree.1" \
         "$stage$HY_PKGDATADIR/plummer.txt" "$stage$HY_PKGDATADIR/galaxy.txt" \
         "$stage$HY_PKGDATADIR/walk.cl" "$stage$HY_PKGDATADIR/direct.cl" "$stage$HY_PKGDATADIR/hy_shared.h" \
         "$stage$HY_DOCDIR/README.md" "$stage$HY_DOCDIR/install.md" "$stage$HY_DOCDIR/running.md" \
         "$stage$HY_DOCDIR/parameters.md" "$stage$HY_DOCDIR/output.md" "$stage$HY_DOCDIR/formats.md"; do
  [ -f "$f" ] || { echo "FAIL: not installed: $f"; fail=1; }
done
[ -x "$bin" ] || { echo "FAIL: $bin is not executable"; exit 1; }

# The installed docs stand on their own: every image they show is
# installed beside them, and they point at nothing outside the package.
for d in "$stage$HY_DOCDIR"/*.md; do
  for img in $(sed -n 's/.*](\(figures\/[^)]*\)).*/\1/p' "$d"); do
    [ -f "$stage$HY_DOCDIR/$img" ] || { echo "FAIL: $(basename "$d") shows $img, which is not installed"; fail=1; }
  done
  if grep -n -e 'peers\.md' -e 'shared/design' "$d"; then
    echo "FAIL: $(basename "$d") points at a file outside the package"; fail=1
  fi
done

# Run from a directory that holds nothing of the build.
cd "$tmp/elsewhere" || exit 99
if ! "$bin" run "$stage$HY_PKGDATADIR/plummer.txt" -P OutputDir="$tmp/out" -P InitCondFile=plummer:1024 \
    -P TimeEnd=0.05 -P OpenCLDevice=cpu --quiet >"$tmp/run.log" 2>&1; then
  if grep -q 'no OpenCL' "$tmp/run.log"; then echo "SKIP: no OpenCL CPU device"; exit 77; fi
  echo "FAIL: the installed hytree failed:"; cat "$tmp/run.log"; exit 1
fi
for f in energy.csv timings.csv params-used.txt snapshot_000.hdf5 snapshot_001.hdf5; do
  [ -s "$tmp/out/$f" ] || { echo "FAIL: the installed hytree wrote no $f"; fail=1; }
done

# The installed kernel sources build on their own.
if ! HYTREE_KERNEL_DIR="$stage$HY_PKGDATADIR" "$bin" run "$stage$HY_PKGDATADIR/plummer.txt" \
    -P OutputDir="$tmp/out2" -P InitCondFile=plummer:512 -P TimeEnd=0 -P OpenCLDevice=cpu --quiet \
    >"$tmp/run2.log" 2>&1; then
  echo "FAIL: HYTREE_KERNEL_DIR=<installed kernels> failed:"; cat "$tmp/run2.log"; fail=1
fi

[ $fail -eq 0 ] && echo "PASS: installed under $stage; the installed hytree runs from another directory"
exit $fail
