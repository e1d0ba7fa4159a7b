#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# tsan_overlap.sh (make check-tsan): the distributed force with the separate
# LET walk, whose local walk runs on the device thread while the main thread
# selects, exchanges and builds the remote tree, under ThreadSanitizer on 2
# ranks; then the merged walk, and the separate walk with the particle state
# on the device (-S, trees built on the device), and with -H its hard remote
# trees built on the device's second queue. Fails on any TSan report
# (exit code 66) or a wrong result.
set -u
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
if [ -z "${MPIEXEC:-}" ]; then echo "SKIP: no MPI launcher"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TSAN_OPTIONS="exitcode=66 halt_on_error=1 second_deadlock_stack=1 suppressions=$top_srcdir/tests/tsan.supp"
prog="$top_builddir/tests/tsan_mpi_forces"
tmp="$top_builddir/tests/tmp-tsan-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
for walk in separate merged separate-state separate-stateH; do
  extra=
  [ "$walk" = separate-state ] && extra="-b device -S"
  # the hard steps' remote trees built on the device's second queue beside the local walk
  [ "$walk" = separate-stateH ] && extra="-b device -S -H"
  # shellcheck disable=SC2086
  if $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2 "$prog" -w "${walk%-state*}" $extra -s 512 -i plummer:4096:2 -G 1 \
       -e 0.0115 -1 0.0644 -2 0.129 -a 0.00390625 -d 0.053 -o "$tmp/out.$walk" >"$tmp/log.$walk" 2>&1; then
    grep ranks "$tmp/log.$walk"
  else
    echo "FAIL: TSan run with the $walk LET walk:"; cat "$tmp/log.$walk"; fail=1
  fi
done
[ $fail -eq 0 ] && echo "check-tsan: no data races reported"
exit $fail
