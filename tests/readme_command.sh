#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# readme_command.sh (CI, as root): the README's first command, as printed,
# in a fresh clone of this repository: it installs the dependencies (already
# there in CI, so apt-get finds nothing to do), builds, runs the default
# Plummer simulation and shows the end of its energy.csv. Run from the top
# of a git checkout; needs apt-get and network access, hence not part of
# make check.
set -eu
top=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone -q "$top" "$tmp/clone"
cd "$tmp/clone"
cmd=$(sed -n '/^## Two commands/,/^## /{/^    .*apt-get update/{s/^    //;p;q}}' README.md)
[ -n "$cmd" ] || { echo "FAIL: no first command found in README.md"; exit 1; }
if command -v sudo >/dev/null 2>&1; then
  echo "note: sudo is installed here; the command uses it"
fi
echo "README's first command: $cmd"
if ! sh -c "$cmd" >"$tmp/out.log" 2>&1; then
  echo "FAIL: the README's first command failed:"; tail -n 40 "$tmp/out.log"; exit 1
fi
tail -n 4 "$tmp/out.log"
# the last lines are energy.csv's: a header or rows of numbers, the error small
last=$(tail -n 1 "$tmp/out.log")
err=$(echo "$last" | cut -d, -f5)
awk -v e="$err" 'BEGIN { exit !(e + 0 >= 0 && e + 0 < 1e-3) }' ||
  { echo "FAIL: the run's last energy row looks wrong: $last"; exit 1; }
echo "PASS: the README's first command ran in a fresh clone"
