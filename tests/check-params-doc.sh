#!/bin/sh
# SPDX-License-Identifier: GPL-3.0-or-later
# check-params-doc.sh: every key of the parameter schema (src/param_schema.c)
# is documented in doc/parameters.md and set in params/plummer.txt, and the
# example parameter files parse. Run by `make check`.
set -u

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
keys_prog="$top_builddir/tests/print_param_keys"
doc="$top_srcdir/doc/parameters.md"
plummer="$top_srcdir/params/plummer.txt"
galaxy="$top_srcdir/params/galaxy.txt"

if [ ! -x "$keys_prog" ]; then
  echo "check-params-doc: $keys_prog not built" >&2
  exit 99
fi
keys=$("$keys_prog") || { echo "check-params-doc: $keys_prog failed" >&2; exit 99; }
if [ -z "$keys" ]; then
  echo "check-params-doc: the schema lists no keys" >&2
  exit 99
fi

status=0
missing_doc=
missing_plummer=
for key in $keys; do
  # documented: a heading of its own in doc/parameters.md
  grep -q "^### $key\$" "$doc" || missing_doc="$missing_doc $key"
  # set on a (non-comment) line of its own in params/plummer.txt
  grep -Eq "^[[:space:]]*$key[[:space:]]+[^[:space:]%#]" "$plummer" || \
    missing_plummer="$missing_plummer $key"
done
if [ -n "$missing_doc" ]; then
  echo "check-params-doc: keys not documented in doc/parameters.md:$missing_doc" >&2
  status=1
fi
if [ -n "$missing_plummer" ]; then
  echo "check-params-doc: keys not set in params/plummer.txt:$missing_plummer" >&2
  status=1
fi

for f in "$plummer" "$galaxy"; do
  if ! "$keys_prog" --parse "$f" >/dev/null; then
    echo "check-params-doc: $f does not parse (errors above)" >&2
    status=1
  fi
done
exit $status
