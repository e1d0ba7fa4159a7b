#!/bin/sh
# Regenerate the build system (needs autoconf and automake; no libtool).
set -e
cd "$(dirname "$0")"
autoreconf -fi
