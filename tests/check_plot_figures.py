#!/usr/bin/python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""check_plot_figures.py: the figures of the hytree-plot-* scripts meet the
conventions of doc/sweeps.md, checked on the matplotlib Figure objects (not
on pixels). Each script is loaded as a module from SCRIPTS_DIR
(importlib.machinery.SourceFileLoader) and its figure built with
make_figure(parse_args(ARGS)), for every invocation listed in LIST.

usage: check_plot_figures.py SCRIPTS_DIR LIST

LIST holds one record per figure: a line '@@@ NAME' (hytree-plot-NAME), a
line 'want: ITEM|ITEM|...' and one argument per line. An ITEM is
  TEXT        the title contains TEXT (e.g. 'N = 2048', 'hybrid', 't = 0.2')
  x=TEXT      the x label contains TEXT (y=, c= for the y label, colour bar)
  L=A;B;...   the legend's texts are exactly A, B, ...
  xmax=V      the largest x of the plotted lines is V (relative 1e-3)
  rate=V;...  timings: the bars' totals are V, ... (relative 1e-6)

Every figure: a non-empty title inside the figure; each axis with tick
labels (a colour bar's too) has a label inside the figure, one with a
unit in square brackets unless its ticks are fixed texts, not numbers
(the runs of the timing bars: then texts that do not overlap); each
legend lies inside the figure and overlaps no axes' data area, and its
texts are short (at most 40 characters). Timings: the y label is a time
per unit of simulated time, the bars' totals (in N-body or code units)
are the t_step sums after the first step over the simulated time they
cover (equal where the 'other' part is above 0, else at least that), and
the data area is at most 1 inch per bar.

Exit status: 0 all checks pass, 1 a check failed, 77 matplotlib missing.
"""
import csv
import importlib.machinery
import importlib.util
import math
import os
import re
import sys

try:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.ticker import FixedLocator
except ImportError:
    print("SKIP: no matplotlib")
    sys.exit(77)

UNIT = re.compile(r"\[[^\]]+\]")
FAIL = []


def fail(where, msg):
    FAIL.append(f"{where}: {msg}")


def number(text):
    try:
        float(text.replace("\N{MINUS SIGN}", "-").strip("$"))
        return True
    except ValueError:
        return False


def load(scripts, name):
    path = os.path.join(scripts, f"hytree-plot-{name}")
    loader = importlib.machinery.SourceFileLoader(f"hytree_plot_{name}", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def records(path):
    out = []
    for line in open(path).read().split("\n"):
        if line.startswith("@@@ "):
            out.append([line[4:], None, []])
        elif out and out[-1][1] is None and line.startswith("want: "):
            out[-1][1] = [w for w in line[6:].split("|") if w]
        elif out and line:
            out[-1][2].append(line)
    return out


def fig_bbox(artist, fig, r):
    return artist.get_window_extent(r).transformed(fig.transFigure.inverted())


def inside(b, tol=2e-3):
    return b.x0 >= -tol and b.y0 >= -tol and b.x1 <= 1 + tol and b.y1 <= 1 + tol


def overlap(a, b):
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 1e-4 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1e-4


def apart(ax, axis, xy, fig, r):
    """Do the tick labels of AXIS not overlap? Upright texts: their boxes
    do not; slanted ones (rotation θ): the ticks are at least one em (the
    font size) / sin θ apart, so that the parallel texts clear each other."""
    labels = [t for t in axis.get_ticklabels() if t.get_text()]
    rot = math.radians(labels[0].get_rotation() % 180) if labels else 0.0
    if not rot:
        bb = [fig_bbox(t, fig, r) for t in labels]
        return not any(overlap(b1, b2) for k, b1 in enumerate(bb) for b2 in bb[k + 1:])
    locs = sorted(axis.get_ticklocs())
    pts = [ax.transData.transform((v, 0) if xy == "x" else (0, v))[0 if xy == "x" else 1] for v in locs]
    gap = min((b - a for a, b in zip(pts, pts[1:])), default=float("inf"))
    return gap * math.sin(rot) >= labels[0].get_fontsize() * fig.dpi / 72


def timings_expected(mod, run):
    """Sum of t_step over the steps after the first over the simulated time
    they cover (code units), from timings.csv as read here."""
    path = mod.resolve(run, "timings.csv")
    rows = list(csv.DictReader(open(path)))
    t = [float(r["time"]) for r in rows]
    s = [float(r["t_step"]) for r in rows]
    return sum(s[1:]) / (t[-1] - t[0])


def check(mod, name, want, args):
    where = f"hytree-plot-{name} {' '.join(args)}"
    n0 = len(FAIL)
    a = mod.parse_args(args)
    fig = mod.make_figure(a)
    if type(fig).__name__ != "Figure":
        fail(where, f"make_figure returned {type(fig)}, not a Figure")
        return
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    # title
    titles = [fig._suptitle] if fig._suptitle is not None and fig._suptitle.get_text() else []
    titles += [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]
    text = " ".join(t.get_text() for t in titles)
    if not text.strip():
        fail(where, "no title")
    for t in titles:
        if not inside(fig_bbox(t, fig, r)):
            fail(where, f"title {t.get_text()!r} reaches outside the figure")
    # axis labels and units
    data_axes = []
    for ax in fig.axes:
        cbar = hasattr(ax, "_colorbar")
        if not cbar:
            data_axes.append(ax)
        for axis, xy in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            ticks = [t.get_text() for t in axis.get_ticklabels() + axis.get_ticklabels(minor=True) if t.get_text()]
            label = axis.get_label_text()
            kind = "colour bar" if cbar else f"{xy} axis"
            if not ticks and not (not cbar and label):
                continue        # e.g. the short side of a colour bar
            if not label.strip():
                fail(where, f"{kind} without a label")
            elif not inside(fig_bbox(axis.label, fig, r)):
                fail(where, f"{kind} label {label!r} reaches outside the figure")
            elif isinstance(axis.get_major_locator(), FixedLocator) and not all(map(number, ticks)):
                # categories (the runs of the timing bars): a label, no unit; texts apart
                if not apart(ax, axis, xy, fig, r):
                    fail(where, f"{kind}: tick labels overlap ({ticks})")
            elif not UNIT.search(label):
                fail(where, f"{kind} label {label!r} has no [unit]")
    if not data_axes:
        fail(where, "no axes")
    boxes = [ax.get_position(original=False) for ax in fig.axes]
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    for leg in legends:
        b = fig_bbox(leg, fig, r)
        if not inside(b):
            fail(where, f"the legend {b} reaches outside the figure")
        if any(overlap(b, ab) for ab in boxes):
            fail(where, f"the legend {b} overlaps an axes' data area {boxes}")
        for t in leg.get_texts():
            if len(t.get_text()) > 40:
                fail(where, f"long legend text {t.get_text()!r}")
    ax = data_axes[0] if data_axes else None
    for w in want:
        if w.startswith(("x=", "y=", "c=")):
            if w[0] == "c":
                labels = [a2.yaxis.get_label_text() + a2.xaxis.get_label_text()
                          for a2 in fig.axes if hasattr(a2, "_colorbar")]
                got = " ".join(labels)
            else:
                got = (ax.xaxis if w[0] == "x" else ax.yaxis).get_label_text()
            if w[2:] not in got:
                fail(where, f"{w[0]} label {got!r} lacks {w[2:]!r}")
        elif w.startswith("L="):
            got = [t.get_text() for leg in legends for t in leg.get_texts()]
            if got != w[2:].split(";"):
                fail(where, f"legend texts {got}, expected {w[2:].split(';')}")
        elif w.startswith("xmax="):
            xs = [x for line in ax.get_lines() for x in line.get_xdata()]
            v = float(w[5:])
            if not xs or abs(max(xs) - v) > 1e-3 * abs(v):
                fail(where, f"largest x {max(xs) if xs else None}, expected {v}")
        elif w.startswith("rate="):
            pass        # below
        elif w not in text:
            fail(where, f"title {text!r} lacks {w!r}")
    if name == "timings":
        label = ax.yaxis.get_label_text().replace("\n", " ")
        if not re.search(r"per unit of simulated time \[s per [^\]]+\]", label):
            fail(where, f"y label {label!r} is not a time per unit of simulated time [s per ...]")
        parts = {c.get_label(): [p.get_height() for p in c.patches] for c in ax.containers}
        nbar = len(next(iter(parts.values())))
        totals = [sum(v[i] for v in parts.values()) for i in range(nbar)]
        rates = [w[5:].split(";") for w in want if w.startswith("rate=")]
        runs = a.runs
        if len(runs) != nbar:
            fail(where, f"{nbar} bars for {len(runs)} runs")
        code = "N-body time unit" in label or "code time unit" in label
        for i, run in enumerate(runs[:nbar]):
            exp = timings_expected(mod, run)
            if code and (exp <= 0 or totals[i] < exp * (1 - 1e-9) or
                         (parts["other"][i] > 0 and abs(totals[i] - exp) > 1e-9 * exp)):
                fail(where, f"bar {i}: total {totals[i]}, t_step per unit simulated time {exp}")
            if rates and abs(totals[i] - float(rates[0][i])) > 1e-6 * float(rates[0][i]):
                fail(where, f"bar {i}: total {totals[i]}, expected {rates[0][i]}")
        w_in = ax.get_position().width * fig.get_figwidth()
        if not 0.3 < w_in / nbar <= 1.0:
            fail(where, f"data area {w_in:.2f} in wide for {nbar} bars (figure {fig.get_figwidth():.2f} in)")
    if len(FAIL) > n0:
        return
    print(f"ok: {where}: title {text!r}; " +
          "; ".join(f"{xy}: {(ax.xaxis if xy == 'x' else ax.yaxis).get_label_text()!r}" for xy in "xy") +
          "".join(f"; colour bar: {a2.yaxis.get_label_text()!r}" for a2 in fig.axes if hasattr(a2, "_colorbar")) +
          f"; size {fig.get_figwidth():.2f} x {fig.get_figheight():.2f} in")


def main():
    scripts, listing = sys.argv[1], sys.argv[2]
    mods = {}
    recs = records(listing)
    if not recs:
        fail(listing, "no figures listed")
    for name, want, args in recs:
        try:
            mod = mods.get(name) or mods.setdefault(name, load(scripts, name))
            check(mod, name, want or [], args)
        except Exception as e:  # noqa: BLE001
            fail(f"hytree-plot-{name} {' '.join(args)}", f"{type(e).__name__}: {e}")
    for f in FAIL:
        print("FAIL:", f)
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
