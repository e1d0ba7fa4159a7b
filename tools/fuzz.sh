#!/bin/bash
# SPDX-License-Identifier: GPL-3.0-or-later
# fuzz.sh: build the libFuzzer harnesses of tests/fuzz/ with clang
# (-fsanitize=fuzzer,address,undefined) and fuzz each target in turn, niced,
# on one core, for SECONDS seconds; print libFuzzer's final statistics
# (runs, execs/s, cov, ft, corpus) per target. Run it from a configured
# build tree (it needs config.h; the source tree is found from this script).
#
# usage: tools/fuzz.sh [-t TARGETS] [-w DIR] [-b] SECONDS [-- LIBFUZZER_FLAGS...]
#   SECONDS      fuzzing time per target (libFuzzer -max_total_time)
#   -t TARGETS   comma list of params, gadget, hdf5 (default: all three)
#   -w DIR       work directory (default fuzz-work): DIR/bin/fuzz_T, and per
#                target DIR/T/corpus (the growing corpus, seeded from
#                tests/fuzz/corpus/T), DIR/T/artifacts (crash-*, leak-*,
#                timeout-*, oom-*) and DIR/T/fuzz.log
#   -b           build only
#   CC           clang to use (default clang, else clang-14)
# Exit status: 0 when no target found anything, 1 when one did (its inputs
# are in DIR/T/artifacts; keep each in tests/fuzz/regress/T/ once fixed).
set -euo pipefail
usage() { sed -n '7,20p' "$0"; exit 2; }
TARGETS=params,gadget,hdf5 WORK=fuzz-work BUILD_ONLY=0
while getopts "t:w:bh" o; do
  case $o in
    t) TARGETS=$OPTARG ;; w) WORK=$OPTARG ;; b) BUILD_ONLY=1 ;; *) usage ;;
  esac
done
shift $((OPTIND - 1))
SECS=${1:-}
[ "$BUILD_ONLY" = 1 ] || [[ "$SECS" =~ ^[0-9]+$ ]] || usage
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
EXTRA=("$@")

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(pwd)
[ -f "$BUILD/config.h" ] || { echo "fuzz.sh: no config.h here: run it from a configured build tree" >&2; exit 2; }
CC=${CC:-}
if [ -z "$CC" ] || ! "$CC" --version 2>/dev/null | grep -q clang; then
  CC=$(command -v clang || command -v clang-14 || true)
fi
[ -n "$CC" ] || { echo "fuzz.sh: clang not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }

# Compiler and linker flags of the libraries, as configure finds them.
MPI_CFLAGS=$(mpicc --showme:compile 2>/dev/null || true)
MPI_LIBS=$(mpicc --showme:link 2>/dev/null || echo -lmpi)
if pkg-config --exists hdf5 2>/dev/null; then
  HDF5_CFLAGS=$(pkg-config --cflags hdf5) HDF5_LIBS=$(pkg-config --libs hdf5)
elif [ -d /usr/include/hdf5/serial ]; then
  HDF5_CFLAGS=-I/usr/include/hdf5/serial
  HDF5_LIBS="-L/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/hdf5/serial -lhdf5"
else
  HDF5_CFLAGS= HDF5_LIBS=-lhdf5
fi

BIN=$WORK/bin
mkdir -p "$BIN"
CFLAGS=(-std=c11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
        -fno-sanitize-recover=all -D_POSIX_C_SOURCE=200809L -DHY_PKGDATADIR='"."'
        -I"$SRC/include" -I"$SRC/src" -I"$BUILD" -I"$SRC/tests/fuzz")
IO_SRC=(src/io_common.c src/io_gadget.c src/io_hdf5.c src/part.c src/threads.c src/alloc.c src/log.c)
build() { # target sources...
  local t=$1
  shift
  local files=()
  for f in "$@"; do files+=("$SRC/$f"); done
  echo "fuzz.sh: building $BIN/fuzz_$t"
  # shellcheck disable=SC2086
  "$CC" "${CFLAGS[@]}" $MPI_CFLAGS $HDF5_CFLAGS -o "$BIN/fuzz_$t" "$SRC/tests/fuzz/fuzz_$t.c" \
    "${files[@]}" $HDF5_LIBS $MPI_LIBS -lm -pthread
}

# Dictionaries: the parameter keys and choice words from the schema; the
# block labels and HDF5 names the readers look for.
dict() { # target
  case $1 in
    params)
      sed -n 's/^ *{"\([A-Za-z0-9_]*\)", HY_PT_\([A-Z_]*\), \(NULL\|"[^"]*"\).*/\1 \3/p' "$SRC/src/param_schema.c" |
        tr ' ' '\n' | tr -d '"' | grep -v '^NULL$' | sort -u | sed 's/.*/"&"/'
      sed -n 's/.*, "\([A-Za-z0-9_]*,[A-Za-z0-9_,]*\)", "[^"]*",$/\1/p' "$SRC/src/param_schema.c" |
        tr ',' '\n' | sort -u | sed 's/.*/"&"/'
      printf '"%s"\n' auto none "%%OVERRIDES" "=" ":" "plummer:" "4x2x2" "0:0" ;;
    gadget)
      printf '"%s"\n' "HEAD" "POS " "VEL " "ID  " "MASS" "U   " '\x00\x01\x00\x00' '\x00\x00\x01\x00' \
        '\x08\x00\x00\x00' '\x00\x00\x00\x08' ;;
    hdf5)
      printf '"%s"\n' Header NumPart_ThisFile NumPart_Total NumPart_Total_HighWord MassTable Time \
        NumFilesPerSnapshot PartType0 PartType1 PartType5 Coordinates Velocities ParticleIDs Masses \
        '\x89HDF\x0d\x0a\x1a\x0a' ;;
  esac
}

IFS=, read -r -a LIST <<<"$TARGETS"
for t in "${LIST[@]}"; do
  case $t in
    params) build params src/params.c src/param_schema.c src/alloc.c src/log.c ;;
    gadget|hdf5) build "$t" "${IO_SRC[@]}" ;;
    *) echo "fuzz.sh: unknown target '$t' (params, gadget, hdf5)" >&2; exit 2 ;;
  esac
done
[ "$BUILD_ONLY" = 1 ] && exit 0

found=0
summary=()
for t in "${LIST[@]}"; do
  dir=$WORK/$t
  mkdir -p "$dir/corpus" "$dir/artifacts"
  dict "$t" >"$dir/dict"
  seeds=("$SRC/tests/fuzz/corpus/$t")
  [ -d "$SRC/tests/fuzz/regress/$t" ] && seeds+=("$SRC/tests/fuzz/regress/$t")
  echo "fuzz.sh: fuzzing $t for $SECS s (log: $dir/fuzz.log)"
  rc=0
  # One process, one core, lowest priority; a unit slower than 10 s or
  # using more than 2 GiB is a finding.
  # Leaks inside libhdf5 itself are suppressed (tests/fuzz/lsan.supp says
  # why). A malloc of an impossible size returns NULL, as glibc's does,
  # instead of stopping ASan: libhdf5 tries sizes read from a damaged file
  # and fails cleanly; hytree's hy_malloc would exit, which is a finding.
  # libFuzzer's own limit on a single malloc (by default the RSS limit) is
  # lifted for the same reason: in the HDF5 reader's check, a child process,
  # it would end the child and file the input as out of memory. The RSS
  # limit still holds for the memory the fuzzer uses.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$SRC/tests/fuzz/lsan.supp:print_suppressions=0} \
    nice -n 19 "$BIN/fuzz_$t" -max_total_time="$SECS" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=1048576 -dict="$dir/dict" -artifact_prefix="$dir/artifacts/" \
    ${EXTRA[@]+"${EXTRA[@]}"} "$dir/corpus" "${seeds[@]}" >"$dir/fuzz.log" 2>&1 || rc=$?
  # The last status line ("#N  DONE  cov: C ft: F corp: U/S ...") and the final stats.
  last=$(grep -E '^#[0-9]+' "$dir/fuzz.log" | tail -n 1 || true)
  final() { sed -n "s/^stat::$1: *//p" "$dir/fuzz.log" | tail -n 1; }
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$last")
  nart=$(find "$dir/artifacts" -type f | wc -l)
  summary+=("$(printf '%-7s %12s %9s %6s %6s %12s %6s %4s %9s' "$t" "$(final number_of_executed_units)" \
    "$(final average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$(final peak_rss_mb)" "$rc" "$nart")")
  if [ "$rc" != 0 ] || [ "$nart" != 0 ]; then
    found=1
    echo "fuzz.sh: $t: finding (exit $rc); the end of $dir/fuzz.log:" >&2
    tail -n 40 "$dir/fuzz.log" >&2
  fi
done
echo
printf '%-7s %12s %9s %6s %6s %12s %6s %4s %9s\n' target runs execs/s cov ft corp rss_mb rc artifacts
printf '%s\n' "${summary[@]}"
echo "(each target $SECS s; corp = units/bytes of the corpus in $WORK/TARGET/corpus)"
exit $found
