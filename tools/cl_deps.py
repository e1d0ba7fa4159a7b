#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""cl_deps.py: the calls between the OpenCL engine's source files, and any cycle.

usage: tools/cl_deps.py [--quiet] [SRCDIR]

Reads SRCDIR/cl_*.c (default: src next to this script's directory; not
the generated cl_sources.c, which holds only the kernels' text). A
function defined (not static) in one file and called from another is an
edge from the caller's file to the definer's. Prints every edge with the
functions it carries, then the files in layers (a file depends only on the
layers below it). Exits 1 when the edges make a cycle, which it prints:
the files are meant to stack, cl_core.c at the bottom and cl_engine.c on
top (doc/developing.md). Comments and string literals are not scanned, so
a comment that names another file's function makes no edge.
"""
import glob
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# A definition starts at column 0 with its return type and ends its
# parameter list with "{" (on the same or a later line), never with ";".
DEF_RE = re.compile(r"^(?!static\b)(?:[A-Za-z_][\w ]*[\s*]+)(" + IDENT + r")\s*\(", re.M)
CALL_RE = re.compile(r"\b(" + IDENT + r")\s*\(")


def strip(text):
    """The source with comments, string and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def definitions(text):
    """The non-static functions defined in text (a declaration ends with ';' first)."""
    names = []
    for m in DEF_RE.finditer(text):
        rest = text[m.end():]
        depth, k = 1, 0
        while k < len(rest) and depth:
            depth += {"(": 1, ")": -1}.get(rest[k], 0)
            k += 1
        after = rest[k:].lstrip()
        if after.startswith("{"):
            names.append(m.group(1))
    return names


def layers(files, edges):
    """Files in layers from the bottom, or (None, cycle) when the edges loop."""
    deps = {f: {b for (a, b) in edges if a == f} for f in files}
    done, order = set(), []
    while len(done) < len(files):
        layer = sorted(f for f in files if f not in done and deps[f] <= done)
        if not layer:
            return None, find_cycle({f: deps[f] - done for f in files if f not in done})
        order.append(layer)
        done.update(layer)
    return order, None


def find_cycle(deps):
    """One cycle of the graph deps (every node of it has an edge)."""
    start = next(iter(deps))
    path, seen = [start], {start: 0}
    while True:
        nxt = sorted(deps[path[-1]])[0]
        if nxt in seen:
            return path[seen[nxt]:] + [nxt]
        seen[nxt] = len(path)
        path.append(nxt)


def main(argv):
    quiet = "--quiet" in argv
    args = [a for a in argv if a != "--quiet"]
    srcdir = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    paths = sorted(p for p in glob.glob(os.path.join(srcdir, "cl_*.c")) if os.path.basename(p) != "cl_sources.c")
    if not paths:
        print("cl_deps.py: no cl_*.c in %s" % srcdir, file=sys.stderr)
        return 2
    text = {}
    for p in paths:
        with open(p, encoding="utf-8") as f:
            text[os.path.basename(p)[:-2]] = strip(f.read())
    owner = {}
    for name, t in text.items():
        for fn in definitions(t):
            owner[fn] = name
    edges = {}
    for name, t in text.items():
        for m in CALL_RE.finditer(t):
            fn = m.group(1)
            if fn in owner and owner[fn] != name:
                edges.setdefault((name, owner[fn]), set()).add(fn)
    files = sorted(text)
    if not quiet:
        for (a, b) in sorted(edges):
            print("%s -> %s: %s" % (a, b, " ".join(sorted(edges[(a, b)]))))
    order, cycle = layers(files, edges)
    if cycle:
        print("cycle: " + " -> ".join(cycle))
        return 1
    if not quiet:
        for i, layer in enumerate(order):
            print("layer %d: %s" % (i, " ".join(layer)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
