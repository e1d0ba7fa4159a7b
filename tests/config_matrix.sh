#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# config_matrix.sh: every combination of the run parameters that choose how
# the force is computed: Scheme (hybrid, tree, direct) x ParticleState (host,
# device) x TreeBuild (host, device) x SnapshotFields (none, Acceleration,
# Potential, both), on 1 and 2 MPI ranks, on a 1024-particle Plummer sphere
# for one soft step (the tree scheme: four steps). On a CPU device
# (pocl in CI) ParticleState and TreeBuild device run the paths that auto
# takes on a GPU (the state, the trees, the LET selection and the hard
# steps' remote trees on the device).
#  - A refused combination ends with exit status 1, one line on stderr that
#    names the parameter, and no output.
#  - Every other run ends normally; tests/config_matrix.py then checks its
#    initial and final snapshots' fields and energy.csv's potential energy
#    at t = 0 against a float64 direct sum, and its energy error against
#    the run of the same scheme and rank count on the host path
#    (ParticleState host, TreeBuild host).
# The sanitizer build (HYTREE_SANITIZER_BUILD=1), there to find memory and
# undefined-behaviour errors, runs SnapshotFields Acceleration,Potential
# only (the paths of the other three values are a subset of its).
set -u
: "${HYTREE:?HYTREE must point at the hytree program}"
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
py=${PYTHON:-python3}
"$py" -c 'import numpy, h5py' 2>/dev/null ||
  { echo "SKIP: python3 with numpy and h5py is needed for the checks"; exit 77; }
tmp="$top_builddir/tests/tmp-config-matrix-$$"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cat >"$tmp/p.txt" <<EOP
InitCondFile      plummer:1024:3
OutputDir         $tmp/unused
TimeEnd           0.09
TimeStepHard      0.0225
SnapshotInterval  0
EnergyInterval    0
OpenCLDevice      any
EOP
fields_list="none Acceleration Potential Acceleration,Potential"
[ "${HYTREE_SANITIZER_BUILD:-0}" = 1 ] && fields_list="Acceleration,Potential"
ranks="1"
[ -n "${MPIEXEC:-}" ] && ranks="1 2"
fail=0
n_run=0 n_refused=0
for np in $ranks; do
  for scheme in hybrid tree direct; do
    for state in host device; do
      for build in host device; do
        for fields in $fields_list; do
          name="np$np-$scheme-$state-$build-$(echo "$fields" | tr , +)"
          dir="$tmp/$name"
          set -- run "$tmp/p.txt" -P "OutputDir=$dir" -P "Scheme=$scheme" -P "ParticleState=$state" \
            -P "TreeBuild=$build" -P "SnapshotFields=$fields" --quiet
          refused=
          [ "$state" = device ] && [ "$build" = host ] && refused="TreeBuild device or auto"
          [ "$state" = device ] && [ "$scheme" = direct ] && [ -z "$refused" ] && refused="Scheme hybrid or tree"
          [ "$state" = device ] && [ "$np" = 2 ] && [ "$scheme" != hybrid ] && refused="Scheme hybrid on several MPI ranks"
          if [ "$np" = 1 ]; then
            "$HYTREE" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
          else
            # shellcheck disable=SC2086
            $MPIEXEC ${MPIEXEC_PREFLAGS:-} -n 2 "$HYTREE" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
          fi
          rc=$?
          if [ -n "$refused" ]; then
            n_refused=$((n_refused + 1))
            # mpirun adds its own lines about the failed job: count hytree's
            lines=$(grep -c "^hytree: " "$tmp/$name.err")
            if [ "$rc" = 0 ] || [ "$lines" != 1 ] ||
               ! grep -q "^hytree: error: -P ParticleState=device: ParticleState device needs $refused; use auto or host$" \
                 "$tmp/$name.err" || [ -e "$dir" ]; then
              echo "FAIL: $name: not refused with one line naming the parameter (exit $rc):"
              cat "$tmp/$name.err"; fail=1
            fi
          elif [ "$rc" != 0 ]; then
            echo "FAIL: $name: exit $rc:"; cat "$tmp/$name.err"; fail=1
          else
            n_run=$((n_run + 1))
            echo "$name" >>"$tmp/runs.txt"
          fi
        done
      done
    done
  done
done
echo "$n_run runs, $n_refused refused combinations"
if [ -f "$tmp/runs.txt" ]; then
  "$py" "$top_srcdir/tests/config_matrix.py" "$tmp" "$tmp/runs.txt" || fail=1
fi
exit $fail
