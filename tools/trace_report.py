#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""trace_report.py: summarise the timelines of a run made with HYTREE_TRACE=PREFIX.

usage: tools/trace_report.py PREFIX [--skip K] [--timeline STEP] [--compare] [--by-substep]

Reads PREFIX.R.csv of every rank R. For the hard and the soft sub-steps
(their windows are the "hard_step" and "soft_step" phases; the first K
steps are skipped, default 1, as they hold one-time start-up costs) it
prints, per rank, the mean time per sub-step of every phase inside the
window on the main thread (lane 0), the device thread (lane 1) and a
helper of the main thread (lane 2, "aux": the decomposition's cut made
ahead), and what share of the window the first two were busy; phases nest (a "decompose"
holds its "dd_*" parts), so the rows need not add up to the window.
--timeline STEP also prints every phase of that step, per rank, with its
start and end relative to the step's start, to show which part waits for
which. --compare prints instead, per phase of at least 0.3 ms, every
rank's mean time and mean start (from the earliest rank's start of the
same sub-step) side by side, to show which rank the others wait for,
and by how much the slowest rank's device walks per sub-step exceed the
ranks' mean (what unequal walks cost).
--by-substep prints instead, per rank, the sub-steps by their place in
the step (hard 1, hard 2, ..., soft): the median time of each place and of
its build and walks (medians: a step that also computes the
energies or writes a snapshot does not shift them), to show how the hard
steps change from one to the next.
"""
import argparse
import collections
import statistics
import csv
import glob
import re
import sys

LANE_NAMES = {0: "main", 1: "device", 2: "aux"}
WALKS = ("walk_local", "walk_remote", "walk_merged")  # the device thread's walks (lane 1)


def load(prefix):
    files = sorted(glob.glob(prefix + ".*.csv"), key=lambda f: int(re.search(r"\.(\d+)\.csv$", f).group(1)))
    if not files:
        sys.exit("trace_report: no files %s.*.csv" % prefix)
    ranks = []
    for f in files:
        with open(f, newline="") as fh:
            ev = [(int(r["lane"]), r["phase"], float(r["t0"]), float(r["t1"])) for r in csv.DictReader(fh)]
        ranks.append(ev)
    return ranks


def windows(ev, name):
    return sorted((t0, t1) for lane, ph, t0, t1 in ev if lane == 0 and ph == name)


def inside(ev, w):
    t0, t1 = w
    return [e for e in ev if e[2] >= t0 - 1e-7 and e[3] <= t1 + 1e-7]


def busy(intervals):
    """Length of the union of intervals."""
    tot, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            tot += b - a
            end = b
        elif b > end:
            tot += b - end
            end = b
    return tot


def summarise(ranks, kind, skip_steps):
    print("## %s sub-steps (mean per sub-step, seconds)" % kind)
    for r, ev in enumerate(ranks):
        steps = windows(ev, "step")
        if len(steps) <= skip_steps:
            print("rank %d: only %d steps" % (r, len(steps)))
            continue
        t_from = steps[skip_steps][0]
        ws = [w for w in windows(ev, kind + "_step") if w[0] >= t_from]
        if not ws:
            continue
        acc = collections.defaultdict(float)
        b = [0.0, 0.0]
        for w in ws:
            evw = inside(ev, w)
            for lane, ph, t0, t1 in evw:
                if ph not in ("hard_step", "soft_step", "step"):
                    acc[(lane, ph)] += t1 - t0
            for lane in (0, 1):
                b[lane] += busy([(t0, t1) for ln, ph, t0, t1 in evw
                                 if ln == lane and ph not in ("hard_step", "soft_step", "step", "wait_device")])
        n = len(ws)
        mean = sum(w[1] - w[0] for w in ws) / n
        print("rank %d: %d sub-steps, %.4f s each; main thread busy %.0f %%, device thread %.0f %%"
              % (r, n, mean, 100 * b[0] / n / mean, 100 * b[1] / n / mean))
        for (lane, ph), t in sorted(acc.items(), key=lambda kv: -kv[1]):
            print("  %-6s %-18s %.4f" % (LANE_NAMES.get(lane, str(lane)), ph, t / n))
    print()


def compare(ranks, kind, skip_steps, min_ms=0.3):
    """The ranks side by side: per phase its mean time per sub-step on each
    rank, and when each rank began it, measured from the earliest rank's
    start of the same sub-step (the ranks' clocks are rank 0's, so on one
    node the starts compare): a rank that starts the exchanges late is the
    one the others wait for."""
    per = []
    for ev in ranks:
        steps = windows(ev, "step")
        if len(steps) <= skip_steps:
            return
        t_from = steps[skip_steps][0]
        per.append([w for w in windows(ev, kind + "_step") if w[0] >= t_from])
    n = min(len(ws) for ws in per)
    if n == 0:
        return
    dur = [collections.defaultdict(float) for _ in ranks]
    start = [collections.defaultdict(float) for _ in ranks]
    seen = [collections.defaultdict(int) for _ in ranks]
    excess, slowest = 0.0, collections.Counter()  # the walks' balance (below)
    for k in range(n):
        t_first = min(ws[k][0] for ws in per)
        walked = []
        for r, ev in enumerate(ranks):
            first = {}
            walked.append(0.0)
            for lane, ph, t0, t1 in inside(ev, per[r][k]):
                if ph in ("hard_step", "soft_step", "step"):
                    continue
                if lane == 1 and ph in WALKS:
                    walked[r] += t1 - t0
                dur[r][(lane, ph)] += t1 - t0
                if (lane, ph) not in first or t0 < first[(lane, ph)]:
                    first[(lane, ph)] = t0
            for key, t0 in first.items():
                start[r][key] += t0 - t_first
                seen[r][key] += 1
        excess += max(walked) - sum(walked) / len(walked)
        slowest[walked.index(max(walked))] += 1
    keys = {key for d in dur for key, t in d.items() if 1e3 * t / n >= min_ms}
    order = sorted(keys, key=lambda key: sum(start[r][key] / max(seen[r][key], 1) for r in range(len(ranks))))
    print("## %s sub-steps, ranks side by side (%d sub-steps): mean time [ms] / mean start [ms] after the "
          "earliest rank's sub-step start" % (kind, n))
    print("%-26s" % "phase" + "".join("%18s" % ("rank %d" % r) for r in range(len(ranks))))
    for key in order:
        cells = []
        for r in range(len(ranks)):
            if seen[r][key]:
                cells.append("%8.2f /%7.2f" % (1e3 * dur[r][key] / n, 1e3 * start[r][key] / seen[r][key]))
            else:
                cells.append("%16s" % "-")
        print("%-26s" % ("%s %s" % (LANE_NAMES.get(key[0], str(key[0])), key[1])) + "".join("%18s" % c for c in cells))
    # what the ranks' unequal walks cost: each sub-step waits for the rank
    # whose device walks took longest
    print("walks per %s sub-step: the slowest rank's exceed the ranks' mean by %.2f ms; the slowest: %s" %
          (kind, 1e3 * excess / n, ", ".join("rank %d in %d of %d" % (r, c, n) for r, c in sorted(slowest.items()))))
    print()


SUBSTEP_PHASES = [(0, "build"), (1, "walk_local"), (1, "w_kernel"), (1, "walk_remote"),
                  (1, "walk_merged")]


def by_substep(ranks, skip_steps):
    """Per rank, the sub-steps by their place in the step (hard 1, 2, ...,
    then soft): the median time of each place and of some of its phases over
    the steps, to show what changes from one hard step to the next.
    Medians, not means: a step that also
    computes the energies or writes a snapshot would otherwise weigh on
    its place's numbers."""
    print("## sub-steps by their place in the step: median time [ms] over the steps")
    print("%-8s %-8s %8s" % ("rank", "place", "total") + "".join("%13s" % ph for _, ph in SUBSTEP_PHASES))
    for r, ev in enumerate(ranks):
        steps = windows(ev, "step")[skip_steps:]
        acc = collections.defaultdict(lambda: collections.defaultdict(list))
        for w in steps:
            evw = inside(ev, w)
            hard = sorted((t0, t1) for lane, ph, t0, t1 in evw if lane == 0 and ph == "hard_step")
            soft = sorted((t0, t1) for lane, ph, t0, t1 in evw if lane == 0 and ph == "soft_step")
            places = [("hard %d" % (k + 1), sw) for k, sw in enumerate(hard)] + [("soft", sw) for sw in soft]
            for place, sw in places:
                parts = collections.defaultdict(float)
                for lane, ph, t0, t1 in inside(ev, sw):
                    if (lane, ph) in SUBSTEP_PHASES:
                        parts[(lane, ph)] += t1 - t0
                acc[place]["total"].append(sw[1] - sw[0])
                for key in SUBSTEP_PHASES:
                    acc[place][key].append(parts[key])
        for place in sorted(acc, key=lambda pl: (pl == "soft", int(pl.split()[1]) if pl != "soft" else 0)):
            cells = "".join("%13.2f" % (1e3 * statistics.median(acc[place][key])) for key in SUBSTEP_PHASES)
            print("%-8s %-8s %8.2f" % ("rank %d" % r, place, 1e3 * statistics.median(acc[place]["total"])) + cells)
    print()


def timeline(ranks, step_no):
    print("## step %d, phases from the step's start [ms]" % step_no)
    for r, ev in enumerate(ranks):
        steps = windows(ev, "step")
        if step_no - 1 >= len(steps):
            continue
        w = steps[step_no - 1]
        print("rank %d (step %.1f ms)" % (r, 1e3 * (w[1] - w[0])))
        for lane, ph, t0, t1 in sorted(inside(ev, w), key=lambda e: (e[2], -e[3])):
            if ph == "step":
                continue
            print("  %s %8.2f %8.2f %7.2f  %s" % (LANE_NAMES.get(lane, str(lane))[0].upper(), 1e3 * (t0 - w[0]), 1e3 * (t1 - w[0]),
                                                  1e3 * (t1 - t0), ph))
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefix")
    ap.add_argument("--skip", type=int, default=1)
    ap.add_argument("--timeline", type=int, default=0)
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("--by-substep", action="store_true")
    a = ap.parse_args()
    ranks = load(a.prefix)
    if a.by_substep:
        by_substep(ranks, a.skip)
        return
    if a.compare:
        compare(ranks, "hard", a.skip)
        compare(ranks, "soft", a.skip)
        return
    summarise(ranks, "hard", a.skip)
    summarise(ranks, "soft", a.skip)
    if a.timeline:
        timeline(ranks, a.timeline)


if __name__ == "__main__":
    main()
