#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# decomp_mpi.sh: the domain-decomposition test (tests/test_decomp) under the
# MPI launcher at 1, 2, 3 and 4 ranks (1x1x1, 2x1x1, 3x1x1, 2x2x1 grids).
set -u
: "${top_builddir:=.}"
if [ -z "${MPIEXEC:-}" ]; then echo "SKIP: no MPI launcher"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
prog="$top_builddir/tests/test_decomp"
[ -x "$prog" ] || { echo "decomp_mpi: $prog not built"; exit 99; }
fail=0
for k in 1 2 3 4; do
  # shellcheck disable=SC2086
  if ! $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n "$k" "$prog"; then
    echo "FAIL: test_decomp at $k rank(s)"
    fail=1
  fi
done
exit $fail
