#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# let_mpi.sh: the LET exchange test (tests/test_let) under the MPI launcher
# at 1, 2, 3 and 4 ranks: through the node's shared-memory window, with MPI
# messages only (--messages, as NodeSharedMemory no), and with the window no larger than each
# exchange's items (HYTREE_TEST_LET_SMALL=1, so that it grows again and again).
set -u
: "${top_builddir:=.}"
if [ -z "${MPIEXEC:-}" ]; then echo "SKIP: no MPI launcher"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
prog="$top_builddir/tests/test_let"
[ -x "$prog" ] || { echo "let_mpi: $prog not built"; exit 99; }
fail=0
for k in 1 2 3 4; do
  for mode in window messages small; do
    env= arg=
    case $mode in
      messages) arg=--messages ;;
      small) env=HYTREE_TEST_LET_SMALL=1 ;;
    esac
    # shellcheck disable=SC2086
    if ! env $env $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n "$k" "$prog" $arg; then
      echo "FAIL: test_let at $k rank(s), $mode"
      fail=1
    fi
  done
done
exit $fail
