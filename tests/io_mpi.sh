#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# io_mpi.sh: tests/test_io_mpi (parallel ICs and snapshots, io_mpi.h) under
# the MPI launcher at 1, 2, 3 and 4 ranks.
set -u
: "${top_builddir:=.}"
if [ -z "${MPIEXEC:-}" ]; then echo "SKIP: no MPI launcher"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
prog="$top_builddir/tests/test_io_mpi"
[ -x "$prog" ] || { echo "io_mpi: $prog not built"; exit 99; }
fail=0
for n in 1 2 3 4; do
  # shellcheck disable=SC2086
  $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n "$n" "$prog" || { echo "FAIL: $n rank(s)"; fail=1; }
done
exit $fail
