#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""config_matrix.py TMPDIR RUNS: the checks of tests/config_matrix.sh.

For every run named in RUNS (np<ranks>-<scheme>-<state>-<build>-<fields>):
 - the initial and the final snapshot hold exactly the requested fields, and
   those fields agree with a float64 direct sum over the snapshot's own
   particles (G = 1, Plummer softening eps from params-used.txt): the
   relative acceleration error |a - a_ref| / |a_ref| and the potential
   error |phi - phi_ref| / |phi_ref| have a median below 3e-3 and a 99th
   percentile below 2e-2 for the tree schemes (the bounds test_forces holds
   the tree walk to at the default a_err = 2^-8; a few 1e-4 and 1e-3 are
   usual here) and below 1e-5 and 1e-4 for the direct sum (float rounding);
 - energy.csv's potential energy at t = 0 equals W = 1/2 sum m phi_ref to
   1e-3 (tree) or 1e-6 (direct);
 - the energy error at the end, |dE/E|, is within 1.5x, plus 2e-6, that of
   the host path of the same scheme and rank count: the same integrator
   with forces of the same accuracy (on the device in the same double
   arithmetic, or from a device-built tree whose float keys round a few
   particles into other cells).
"""
import csv
import os
import sys

import h5py
import numpy as np


def direct(pos, mass, eps):
    """float64 direct-sum accelerations and potentials (G = 1)."""
    n = len(mass)
    acc = np.zeros((n, 3))
    pot = np.zeros(n)
    for b in range(0, n, 256):
        d = pos[None, :, :] - pos[b:b + 256, None, :]
        r2 = (d * d).sum(axis=2) + eps * eps
        rinv = 1.0 / np.sqrt(r2)
        for k in range(min(256, n - b)):
            rinv[k, b + k] = 0.0  # no self pair
        mr = mass[None, :] * rinv
        pot[b:b + 256] = -mr.sum(axis=1)
        acc[b:b + 256] = ((mr * rinv * rinv)[:, :, None] * d).sum(axis=1)
    return acc, pot


def resolved(params_used, key):
    with open(params_used) as f:
        for line in f:
            w = line.split()
            if w and w[0] == key:
                if w[1] == "auto":
                    return float(line.split("auto ->")[1].split()[0])
                return float(w[1])
    raise KeyError(key)


def main():
    tmp, runs_file = sys.argv[1], sys.argv[2]
    runs = [r.strip() for r in open(runs_file) if r.strip()]
    fails = []
    ends = {}
    worst = {}
    for name in runs:
        np_, scheme, state, build, fields = name.split("-")
        d = os.path.join(tmp, name)
        want = set() if fields == "none" else set(fields.split("+"))
        eps = resolved(os.path.join(d, "params-used.txt"), "Softening")
        tree = scheme != "direct"
        med_b, p99_b, w_b = (3e-3, 2e-2, 1e-3) if tree else (1e-5, 1e-4, 1e-6)
        snaps = sorted(f for f in os.listdir(d) if f.startswith("snapshot_") and f.endswith(".hdf5"))
        if len(snaps) != 2:
            fails.append("%s: snapshots %s, expected the initial and the final one" % (name, snaps))
            continue
        for snap in snaps:
            with h5py.File(os.path.join(d, snap), "r") as h:
                g = h["PartType1"]
                have = set(k for k in g.keys() if k in ("Acceleration", "Potential"))
                if have != want:
                    fails.append("%s/%s: fields %s, expected %s" % (name, snap, sorted(have), sorted(want)))
                    continue
                pos = g["Coordinates"][...]
                mass = g["Masses"][...]
                acc_ref, pot_ref = direct(pos, mass, eps)
                if snap == snaps[0]:
                    w_ref = 0.5 * (mass * pot_ref).sum()
                for key, ref in (("Acceleration", acc_ref), ("Potential", pot_ref)):
                    if key not in want:
                        continue
                    val = g[key][...]
                    if key == "Acceleration":
                        e = np.linalg.norm(val - ref, axis=1) / np.linalg.norm(ref, axis=1)
                    else:
                        e = np.abs(val - ref) / np.abs(ref)
                    med, p99 = np.median(e), np.percentile(e, 99)
                    worst[(scheme, key)] = max(worst.get((scheme, key), (0, 0)), (med, p99))
                    if not (med <= med_b and p99 <= p99_b):
                        fails.append("%s/%s: %s error median %.3e, p99 %.3e (bounds %.0e, %.0e)"
                                     % (name, snap, key, med, p99, med_b, p99_b))
        rows = list(csv.DictReader(open(os.path.join(d, "energy.csv"))))
        w0 = float(rows[0]["potential"])
        if not abs(w0 - w_ref) <= w_b * abs(w_ref):
            fails.append("%s: potential energy at t = 0 %.9g, direct sum %.9g" % (name, w0, w_ref))
        ends[name] = abs(float(rows[-1]["rel_energy_error"]))
    for name, e in ends.items():
        np_, scheme, state, build, fields = name.split("-")
        ref = "-".join((np_, scheme, "host", "host", fields))
        if ref not in ends:
            fails.append("%s: no host-path run %s to compare with" % (name, ref))
        elif not e <= 1.5 * ends[ref] + 2e-6:
            fails.append("%s: |dE/E| %.3e against %.3e on the host path" % (name, e, ends[ref]))
    for (scheme, key), (med, p99) in sorted(worst.items()):
        print("%-6s %-12s worst median %.2e, worst p99 %.2e" % (scheme, key, med, p99))
    print("energy errors at the end: %.2e to %.2e" % (min(ends.values()), max(ends.values())))
    for f in fails:
        print("FAIL: " + f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
