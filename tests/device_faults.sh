#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# device_faults.sh: OpenCL failures on one rank (tests/mpi_run.sh covers a
# rank running out of device memory among two).
#  - A kernel that does not compile (HYTREE_KERNEL_DIR with a walk.cl that
#    uses an undeclared identifier): stderr holds the OpenCL build log with
#    the compiler's error, then exactly one "hytree: error:" line naming
#    walk.cl; the status is non-zero and no output directory is created (the
#    kernels are built before anything is written).
#  - Device memory too small (HYTREE_TEST_DEVICE_MEM_LIMIT = 100000 bytes for
#    2048 particles): one line giving the buffer, the bytes it needs and the
#    bytes free of the budget; non-zero status, no snapshot.
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
tmp="$top_builddir/tests/tmp-device-faults-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
cat >"$tmp/p.txt" <<EOP
InitCondFile  plummer:2048:1
OutputDir     $tmp/out
TimeEnd       0
EOP

# one "hytree: error:" line matching $2 in file $1
one_error() {
  n=$(grep -c '^hytree: error:' "$1")
  [ "$n" -eq 1 ] || { echo "FAIL: $n 'hytree: error:' lines:"; cat "$1"; fail=1; }
  grep -q "^hytree: error: .*$2" "$1" || { echo "FAIL: no error line matching '$2':"; cat "$1"; fail=1; }
}

# a broken kernel
mkdir "$tmp/kernels"
cp "$top_srcdir/opencl/walk.cl" "$top_srcdir/opencl/direct.cl" "$top_srcdir/include/hy_shared.h" "$tmp/kernels/"
printf '\n__kernel void hy_broken(__global float *x) { x[0] = hy_deliberately_undeclared; }\n' >>"$tmp/kernels/walk.cl"
if HYTREE_KERNEL_DIR="$tmp/kernels" "$HYTREE" run "$tmp/p.txt" --quiet >"$tmp/k.out" 2>"$tmp/k.err"; then
  echo "FAIL: a run with a broken walk.cl succeeded"; fail=1
fi
grep -q "OpenCL build log for walk.cl" "$tmp/k.err" || { echo "FAIL: no build log header:"; cat "$tmp/k.err"; fail=1; }
grep -q "hy_deliberately_undeclared" "$tmp/k.err" ||
  { echo "FAIL: the build log does not show the compiler's error:"; cat "$tmp/k.err"; fail=1; }
one_error "$tmp/k.err" "building walk\\.cl .*failed: CL_BUILD_PROGRAM_FAILURE"
[ ! -e "$tmp/out" ] || { echo "FAIL: the failed build created the output directory"; fail=1; }
echo "--- broken kernel:"; cat "$tmp/k.err"

# too little device memory
if HYTREE_TEST_DEVICE_MEM_LIMIT=100000 "$HYTREE" run "$tmp/p.txt" --quiet >"$tmp/m.out" 2>"$tmp/m.err"; then
  echo "FAIL: a run with a 100000-byte device budget succeeded"; fail=1
fi
[ "$(wc -l <"$tmp/m.err")" -eq 1 ] || { echo "FAIL: more than one line on stderr:"; cat "$tmp/m.err"; fail=1; }
one_error "$tmp/m.err" "out of device memory: buffer '[^']*' needs [0-9][0-9]* bytes, [0-9][0-9]* of the 100000 bytes are free"
ls "$tmp/out"/snapshot_* >/dev/null 2>&1 && { echo "FAIL: the failed run left a snapshot"; fail=1; }
echo "--- device memory:"; cat "$tmp/m.err"
exit $fail
