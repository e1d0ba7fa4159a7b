#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# cl_layers.sh: the OpenCL engine's files call each other without a cycle
# (tools/cl_deps.py: cl_core.c at the bottom, cl_engine.c on top), so each
# layer can be read, changed and tested on the ones below it alone.
set -u
: "${top_srcdir:=.}"
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys' 2>/dev/null; then
  echo "SKIP: no Python ($PY)"; exit 77
fi
"$PY" "$top_srcdir/tools/cl_deps.py" "$top_srcdir/src"
case $? in
  0) exit 0 ;;
  1) echo "FAIL: the cl_*.c files call each other in a cycle (above)"; exit 1 ;;
  *) exit 99 ;;
esac
