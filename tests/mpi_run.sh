#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# mpi_run.sh: hytree under the MPI launcher. One rank: a short hybrid run
# gives the same energies as the run without the launcher (same binary,
# same device, deterministic). Two ranks: this version refuses them with
# one clear line (the domain decomposition is not there yet).
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
if [ -z "${MPIEXEC:-}" ]; then echo "SKIP: no MPI launcher"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp="$top_builddir/tests/tmp-mpi-run-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
cat >"$tmp/p.txt" <<EOP
InitCondFile  plummer:2048:4
OutputDir     $tmp/serial
TimeEnd       0.25
EOP
"$HYTREE" run "$tmp/p.txt" --quiet 2>"$tmp/err0" || { echo "FAIL: serial run"; cat "$tmp/err0"; exit 1; }
# shellcheck disable=SC2086
$MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 1 "$HYTREE" run "$tmp/p.txt" -P "OutputDir=$tmp/mpi1" --quiet 2>"$tmp/err1" ||
  { echo "FAIL: run under $MPIEXEC -n 1"; cat "$tmp/err1"; exit 1; }
if ! cmp "$tmp/serial/energy.csv" "$tmp/mpi1/energy.csv"; then
  echo "FAIL: energy.csv differs between the plain and the 1-rank MPI run"; fail=1
fi
tail -n 1 "$tmp/mpi1/energy.csv"
# shellcheck disable=SC2086
if $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2 "$HYTREE" run "$tmp/p.txt" -P "OutputDir=$tmp/mpi2" >"$tmp/out2" 2>"$tmp/err2"; then
  echo "FAIL: 2 ranks accepted"; fail=1
fi
grep -q "hytree: error: run: 2 MPI ranks requested" "$tmp/err2" || { echo "FAIL: no clear 2-rank message:"; cat "$tmp/err2"; fail=1; }
[ ! -e "$tmp/mpi2" ] || { echo "FAIL: the refused run created its output directory"; fail=1; }
exit $fail
