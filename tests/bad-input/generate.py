#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later
"""Writes the binary cases of tests/bad-input/ (Gadget-1/2, tipsy and HDF5
initial conditions, each damaged in one way) into the directory given (default: the
directory of this script). Not run by make check: the files it wrote are kept
in the repository, and this script documents how each was made. Run it again
(python3 with numpy and h5py) after changing a case, and check the .expect
files with tests/bad_input_corpus.sh.

Every file holds 8 particles of type 1 (IDs 1..8, mass 1/8, positions and
velocities from a fixed pattern), in double precision unless said otherwise
(tipsy: float32 dark-matter records). The tipsy cases need no numpy:
python3 -c 'import generate; generate.tipsy_cases(".")' writes only them.
"""
import os
import struct
import sys

N = 8


def particles():
    pos = [[0.1 * i - 0.35, 0.05 * ((3 * i) % 8) - 0.2, 0.02 * ((5 * i) % 8) - 0.07] for i in range(N)]
    vel = [[0.01 * ((7 * i) % 8) - 0.03, -0.01 * i + 0.04, 0.005 * i] for i in range(N)]
    ids = list(range(1, N + 1))
    mass = [1.0 / N] * N
    return pos, vel, ids, mass


def header(npart, masstab, time=0.0, num_files=1):
    h = struct.pack('<6i', *npart) + struct.pack('<6d', *masstab) + struct.pack('<dd', time, 0.0)
    h += struct.pack('<ii', 0, 0) + struct.pack('<6I', *[max(n, 0) for n in npart])
    h += struct.pack('<ii', 0, num_files) + struct.pack('<4d', 0.0, 0.0, 0.0, 1.0)
    return h + b'\0' * (256 - len(h))


def record(payload, start=None, end=None):
    n = len(payload)
    return struct.pack('<I', n if start is None else start) + payload + struct.pack('<I', n if end is None else end)


def label(name, nbytes, size=8):
    return struct.pack('<I', size) + name.ljust(4).encode() + struct.pack('<I', nbytes + 8) + struct.pack('<I', size)


def gadget(path, pos=None, vel=None, ids=None, mass=None, masstab=None, time=0.0, npart=None, num_files=1,
           fmt=1, pos_payload=None, pos_end=None, cut=None, head_payload=None):
    p, v, i, m = particles()
    pos = p if pos is None else pos
    vel = v if vel is None else vel
    ids = i if ids is None else ids
    npart = [0, N, 0, 0, 0, 0] if npart is None else npart
    if masstab is None:
        masstab = [0.0] * 6
        if mass is None:
            masstab[1] = 1.0 / N
    blocks = [('HEAD', head_payload if head_payload is not None else header(npart, masstab, time, num_files)),
              ('POS', pos_payload if pos_payload is not None else b''.join(struct.pack('<3d', *x) for x in pos)),
              ('VEL', b''.join(struct.pack('<3d', *x) for x in vel)),
              ('ID', b''.join(struct.pack('<I', x) for x in ids))]
    if mass is not None:
        blocks.append(('MASS', b''.join(struct.pack('<d', x) for x in mass)))
    out = b''
    for name, payload in blocks:
        if fmt == 2:
            out += label(name, len(payload))
        out += record(payload, end=pos_end if name == 'POS' else None)
    if cut is not None:
        out = out[:cut]
    with open(path, 'wb') as f:
        f.write(out)


def tipsy(path, big=True, ndim=3, nbodies=N, pos=None, cut=None):
    """Tipsy file of N dark-matter records (mass, pos, vel, eps, phi)."""
    p, v, i, m = particles()
    pos = p if pos is None else pos
    e = '>' if big else '<'
    out = struct.pack(e + 'd6i', 0.0, nbodies, ndim, 0, N, 0, 0)
    for k in range(N):
        out += struct.pack(e + '9f', m[k], *pos[k], *v[k], 0.01, 0.0)
    if cut is not None:
        out = out[:cut]
    with open(path, 'wb') as f:
        f.write(out)


def tipsy_cases(out):
    o = lambda name: os.path.join(out, name)
    p, v, i, m = particles()
    tipsy(o('tipsy-truncated.tipsy'), cut=220)  # 100 bytes short of 32 + 8 * 36
    tipsy(o('tipsy-ndim.tipsy'), ndim=2)
    tipsy(o('tipsy-counts.std'), big=False, nbodies=9)  # native little-endian
    tipsy(o('tipsy-nan-position.tipsy'), pos=p[:2] + [[float('nan'), 0.0, 0.0]] + p[3:])


def hdf5(path, drop=(), header_over=None, shapes=None, data_over=None, mass_dataset=True):
    import h5py
    import numpy as np
    p, v, i, m = particles()
    d = {'Coordinates': np.array(p), 'Velocities': np.array(v), 'ParticleIDs': np.array(i, dtype=np.uint64),
         'Masses': np.array(m)}
    if not mass_dataset:
        del d['Masses']
    for k, val in (data_over or {}).items():
        d[k] = val
    hdr = {'NumPart_ThisFile': np.array([0, N, 0, 0, 0, 0], dtype=np.uint64),
           'NumPart_Total': np.array([0, N, 0, 0, 0, 0], dtype=np.uint64),
           'MassTable': np.zeros(6), 'Time': 0.0, 'NumFilesPerSnapshot': np.int32(1)}
    hdr.update(header_over or {})
    with h5py.File(path, 'w', libver='latest', track_order=False) as f:
        if 'Header' not in drop:
            h = f.create_group('Header')
            for k, val in hdr.items():
                h.attrs[k] = val
        if 'PartType1' not in drop:
            g = f.create_group('PartType1')
            for k, val in d.items():
                if k not in drop:
                    g.create_dataset(k, data=val, track_times=False)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    o = lambda name: os.path.join(out, name)
    p, v, i, m = particles()
    nan, inf = float('nan'), float('inf')
    # Gadget format 1
    gadget(o('g1-truncated.dat'), cut=4 + 256 + 4 + 4 + 100)  # in the middle of the POS block
    gadget(o('g1-block-size.dat'), pos_payload=b''.join(struct.pack('<3d', *x) for x in p[:7]))  # 7 positions
    gadget(o('g1-record-markers.dat'), pos_end=100)  # POS block: start marker 192, end marker 100
    gadget(o('g1-nan-position.dat'), pos=[[nan, 0.0, 0.0]] + p[1:])
    gadget(o('g1-inf-velocity.dat'), vel=v[:3] + [[0.0, inf, 0.0]] + v[4:])
    gadget(o('g1-nan-mass.dat'), mass=m[:5] + [nan] + m[6:])
    gadget(o('g1-negative-mass.dat'), masstab=[0.0, -1.0, 0.0, 0.0, 0.0, 0.0])
    gadget(o('g1-zero-mass.dat'), mass=m[:2] + [0.0] + m[3:])
    gadget(o('g1-duplicate-ids.dat'), ids=[1, 2, 3, 4, 5, 6, 5, 8])
    gadget(o('g1-no-particles.dat'), npart=[0] * 6, pos=[], vel=[], ids=[])
    gadget(o('g1-negative-count.dat'), npart=[0, -8, 0, 0, 0, 0])
    gadget(o('g1-multi-file.dat'), num_files=2)
    gadget(o('g1-nan-time.dat'), time=nan)
    gadget(o('g1-header-size.dat'), head_payload=header([0, N, 0, 0, 0, 0], [0.0, 1.0 / N, 0, 0, 0, 0])[:200])
    # Gadget format 2
    gadget(o('g2-truncated.g2'), fmt=2, cut=16 + 4 + 256 + 4)  # HEAD only
    with open(o('g2-bad-label.g2'), 'wb') as f:  # POS label record of 12 bytes instead of 8
        f.write(label('HEAD', 256) + record(header([0, N, 0, 0, 0, 0], [0.0, 1.0 / N, 0, 0, 0, 0])))
        f.write(struct.pack('<I', 12) + b'POS ' + struct.pack('<II', 200, 0) + struct.pack('<I', 12))
    tipsy_cases(out)
    # HDF5
    import numpy as np
    hdf5(o('h5-no-header.hdf5'), drop=('Header',))
    hdf5(o('h5-no-parttype1.hdf5'), drop=('PartType1',))
    hdf5(o('h5-no-coordinates.hdf5'), drop=('Coordinates',))
    hdf5(o('h5-velocities-length.hdf5'), data_over={'Velocities': np.array(v[:7])})
    hdf5(o('h5-masses-length.hdf5'), data_over={'Masses': np.array(m + [0.125])})
    hdf5(o('h5-coordinates-columns.hdf5'), data_over={'Coordinates': np.array([x[:2] for x in p])})
    hdf5(o('h5-no-masses.hdf5'), mass_dataset=False)
    hdf5(o('h5-nan-mass.hdf5'), data_over={'Masses': np.array(m[:3] + [nan] + m[4:])})
    hdf5(o('h5-duplicate-ids.hdf5'), data_over={'ParticleIDs': np.array([1, 2, 3, 4, 5, 6, 7, 3], dtype=np.uint64)})
    hdf5(o('h5-multi-file-part.hdf5'), header_over={'NumFilesPerSnapshot': np.int32(2)})
    hdf5(o('h5-header-elements.hdf5'), header_over={'NumPart_ThisFile': np.array([0, N, 0, 0, 0], dtype=np.uint64)})
    hdf5(o('h5-negative-velocity-inf.hdf5'), data_over={'Velocities': np.array(v[:6] + [[-inf, 0.0, 0.0]] + v[7:])})


if __name__ == '__main__':
    main()
