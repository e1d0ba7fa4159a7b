#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# ic_cli.sh: `hytree ic MODEL` end to end for every model and option, the
# one-line errors of bad invocations (each names the bad token), the
# generator strings in `hytree run` (a good one read, bad ones refused), and
# a tipsy file from `hytree ic` (Bonsai's native variant little-endian with
# the IDs in phi; the standard one written the same twice, by name or by
# --format) as the initial conditions of a short run.
# Skips (77) while the hytree driver does not dispatch the ic subcommand yet.
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
# the total mass to 12 digits: the sum of 1000 masses 1/1000 is 1 to rounding
grep -q 'total mass = 1,' "$tmp/out" || { echo "FAIL: summary's total mass is not 1:"; cat "$tmp/out"; fail=1; }
# hytree --help names every model
for m in plummer hernquist king uniform; do
  "$HYTREE" --help | grep -q "$m" || { echo "FAIL: hytree --help does not name the model $m"; fail=1; }
done

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

# Every model and its option; the summary names them.
for args in "hernquist" "king --W0 3.5" "king" "uniform --virial 0" "uniform"; do
  # shellcheck disable=SC2086
  if ! "$HYTREE" ic $args -N 500 --seed 4 -o "$tmp/m.dat" >"$tmp/out" 2>"$tmp/err"; then
    echo "FAIL: hytree ic $args failed:"; cat "$tmp/err"; fail=1; continue
  fi
  cat "$tmp/out"
  model=${args%% *}
  grep -q "^hytree ic: $model N = 500, seed = 4" "$tmp/out" || { echo "FAIL: summary of '$args'"; fail=1; }
  case $args in
    "king --W0 3.5") grep -q 'W0 = 3.5,' "$tmp/out" || { echo "FAIL: W0 not in summary"; fail=1; } ;;
    king) grep -q 'W0 = 6,' "$tmp/out" || { echo "FAIL: default W0 not 6"; fail=1; } ;;
    "uniform --virial 0") grep -q 'Q = 0,' "$tmp/out" || { echo "FAIL: Q not in summary"; fail=1; } ;;
    uniform) grep -q 'Q = 0.5,' "$tmp/out" || { echo "FAIL: default Q not 0.5"; fail=1; } ;;
  esac
  [ "$(wc -c <"$tmp/m.dat")" -gt 500 ] || { echo "FAIL: $tmp/m.dat too small"; fail=1; }
done
"$HYTREE" ic --help | grep -q -e '--W0' || { echo "FAIL: --help lacks --W0"; fail=1; }
for m in plummer hernquist king uniform virial; do
  "$HYTREE" ic --help | grep -q -e "$m" || { echo "FAIL: --help lacks $m"; fail=1; }
done

# expect_error PATTERN ARGS...: non-zero status, one "hytree: error:" line matching PATTERN, no output
expect_error() {
  pattern=$1; shift
  rm -f "$tmp/bad.hdf5"
  if "$HYTREE" "$@" >/dev/null 2>"$tmp/err"; then
    echo "FAIL: accepted: $*"; fail=1; return
  fi
  lines=$(wc -l <"$tmp/err")
  [ "$lines" -eq 1 ] || { echo "FAIL: $*: $lines stderr lines:"; cat "$tmp/err"; fail=1; }
  grep -q "^hytree: error: .*$pattern" "$tmp/err" || { echo "FAIL: $*: no '$pattern' in:"; cat "$tmp/err"; fail=1; }
  [ ! -e "$tmp/bad.hdf5" ] || { echo "FAIL: $*: output written"; fail=1; }
  echo "ok: $(cat "$tmp/err")"
}
o="$tmp/bad.hdf5"
expect_error 'unknown model.*isochrone' ic isochrone -N 10 -o "$o"
expect_error 'positive integer: 0' ic king -N 0 -o "$o"
expect_error 'W0.*: 20' ic king -N 10 --W0 20 -o "$o"
expect_error 'W0.*: 0' ic king -N 10 --W0 0 -o "$o"
expect_error 'W0.*: abc' ic king -N 10 --W0 abc -o "$o"
expect_error 'virial.*: -0.5' ic uniform -N 10 --virial -0.5 -o "$o"
expect_error 'virial.*: nan' ic uniform -N 10 --virial nan -o "$o"
expect_error 'W0 applies only to the king model: 3' ic hernquist -N 10 --W0 3 -o "$o"
expect_error 'virial applies only to the uniform model: 1' ic king -N 10 --virial 1 -o "$o"

# Generator strings in `hytree run`: bad ones end the run with one line
# naming the token (before any device work); a good one is loaded.
cat >"$tmp/run.txt" <<EOP
InitCondFile   king:256:3:7
OutputDir      $tmp/runout
TimeEnd        0
EOP
expect_error '"king:64:1:20": W0 "20"' run "$tmp/run.txt" -P InitCondFile=king:64:1:20
expect_error '"king:0": particle number' run "$tmp/run.txt" -P InitCondFile=king:0
expect_error '"uniform:64:1:-1": virial ratio Q "-1"' run "$tmp/run.txt" -P InitCondFile=uniform:64:1:-1
expect_error '"hernquist:64:1:2": unexpected "2"' run "$tmp/run.txt" -P InitCondFile=hernquist:64:1:2
expect_error '"uniform:6x": particle number "6x"' run "$tmp/run.txt" -P InitCondFile=uniform:6x
if "$HYTREE" run "$tmp/run.txt" --quiet >"$tmp/out.log" 2>&1; then
  [ -f "$tmp/runout/snapshot_000.hdf5" ] || { echo "FAIL: run with king:256:3:7 wrote no snapshot"; fail=1; }
elif grep -qi 'opencl\|device\|platform' "$tmp/out.log"; then
  echo "note: no OpenCL device for the king:256:3:7 run; skipped it"
else
  echo "FAIL: hytree run with InitCondFile king:256:3:7:"; cat "$tmp/out.log"; fail=1
fi

# Tipsy: chosen by the .tipsy and .std names and by --format; the same
# bytes each time (standard big-endian: 32-byte header with ndim 3, then one
# 36-byte dark-matter record per particle).
"$HYTREE" ic plummer -N 1000 --seed 5 -o "$tmp/x.tipsy" >"$tmp/out" 2>"$tmp/err" ||
  { echo "FAIL: hytree ic -o x.tipsy:"; cat "$tmp/err"; fail=1; }
grep -q 'wrote .*x\.tipsy (tipsy)$' "$tmp/out" || { echo "FAIL: summary of the tipsy write:"; cat "$tmp/out"; fail=1; }
size=$(wc -c <"$tmp/x.tipsy")
[ "$size" -eq $((32 + 36 * 1000)) ] || { echo "FAIL: x.tipsy has $size bytes, expected 36032"; fail=1; }
ndim=$(od -An -tx1 -j12 -N4 "$tmp/x.tipsy" | tr -d ' \n')
[ "$ndim" = 00000003 ] || { echo "FAIL: x.tipsy: ndim bytes are $ndim, expected big-endian 3"; fail=1; }
"$HYTREE" ic plummer -N 1000 --seed 5 -o "$tmp/y.std" >/dev/null 2>&1 || { echo "FAIL: hytree ic -o y.std"; fail=1; }
"$HYTREE" ic plummer -N 1000 --seed 5 -o "$tmp/z.dat" --format tipsy >/dev/null 2>&1 ||
  { echo "FAIL: hytree ic --format tipsy"; fail=1; }
for f in y.std z.dat; do
  cmp "$tmp/x.tipsy" "$tmp/$f" || { echo "FAIL: $f differs from x.tipsy"; fail=1; }
done
# Bonsai's variant: little-endian, the IDs (1..N) in each record's last word
"$HYTREE" ic plummer -N 1000 --seed 5 -o "$tmp/n.tipsy" --format tipsy-native >/dev/null 2>&1 ||
  { echo "FAIL: hytree ic --format tipsy-native"; fail=1; }
ndim=$(od -An -tx1 -j12 -N4 "$tmp/n.tipsy" | tr -d ' \n')
[ "$ndim" = 03000000 ] || { echo "FAIL: n.tipsy: ndim bytes are $ndim, expected little-endian 3"; fail=1; }
id_last=$(od -An -tx1 -j$((32 + 36 * 999 + 32)) -N4 "$tmp/n.tipsy" | tr -d ' \n')
[ "$id_last" = e8030000 ] || { echo "FAIL: n.tipsy: the last record's phi is $id_last, expected ID 1000"; fail=1; }
expect_error 'unknown --format (hdf5, gadget1, gadget2, tipsy, tipsy-native): tipsy2' ic plummer -N 10 -o "$o" --format tipsy2

cat >"$tmp/tipsy.txt" <<EOP
InitCondFile   $tmp/x.tipsy
OutputDir      $tmp/tipsyout
TimeEnd        0.05
EOP
if "$HYTREE" run "$tmp/tipsy.txt" >"$tmp/out.log" 2>&1; then
  for s in 000 001; do
    [ -f "$tmp/tipsyout/snapshot_$s.hdf5" ] || { echo "FAIL: run from x.tipsy wrote no snapshot_$s.hdf5"; fail=1; }
  done
  # masses 1/1000 as float32 (1.0000000475e-3) sum to 1.00000005
  grep -q 'ICs: N = 1000, total mass 1.00000005,' "$tmp/out.log" || { echo "FAIL: run from x.tipsy: no 'ICs: N = 1000' line:"; cat "$tmp/out.log"; fail=1; }
  # the first snapshot holds the tipsy file's particles (IDs 1..N in file order)
  py=
  for c in python3 /usr/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import h5py, numpy' 2>/dev/null; then py=$c; break; fi
  done
  if [ -z "$py" ]; then
    echo "note: no python3 with h5py and numpy; the snapshot's particles are not compared with x.tipsy"
  else
    "$py" - "$tmp/x.tipsy" "$tmp/tipsyout/snapshot_000.hdf5" <<'EOPY' || fail=1
import sys, h5py, numpy as np
rec = np.fromfile(sys.argv[1], dtype='>f4', offset=32).reshape(-1, 9)
with h5py.File(sys.argv[2], 'r') as f:
    g = f['PartType1']
    k = np.argsort(g['ParticleIDs'][:])
    ids, pos, vel, m = g['ParticleIDs'][:][k], g['Coordinates'][:][k], g['Velocities'][:][k], g['Masses'][:][k]
ok = (np.array_equal(ids, np.arange(1, len(rec) + 1)) and np.array_equal(m, rec[:, 0].astype(float))
      and np.array_equal(pos, rec[:, 1:4].astype(float)) and np.array_equal(vel, rec[:, 4:7].astype(float)))
print('snapshot_000 holds the tipsy particles:', ok)
sys.exit(0 if ok else 1)
EOPY
  fi
  # named explicitly as well
  if ! "$HYTREE" run "$tmp/tipsy.txt" -P InitCondFormat=tipsy -P TimeEnd=0 -P "OutputDir=$tmp/tipsyout2" --quiet \
      >"$tmp/out.log" 2>&1 || [ ! -f "$tmp/tipsyout2/snapshot_000.hdf5" ]; then
    echo "FAIL: run with InitCondFormat tipsy:"; cat "$tmp/out.log"; fail=1
  fi
elif grep -qi 'opencl\|device\|platform' "$tmp/out.log"; then
  echo "note: no OpenCL device for the run from x.tipsy; skipped it"
else
  echo "FAIL: hytree run with InitCondFile x.tipsy:"; cat "$tmp/out.log"; fail=1
fi
exit $fail
