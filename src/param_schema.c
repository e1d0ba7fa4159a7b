/* SPDX-License-Identifier: GPL-3.0-or-later
 * param_schema.c: the one table of every run parameter (key, type, default or
 * required, allowed range, choices, unit, one-line description). It drives
 * validation (params.c), params-used.txt, `hytree run --help`, and the check
 * that doc/parameters.md and params/plummer.txt mention every key. Adding a
 * parameter means adding a row here and documenting it there. */
#include "config.h"

#include "params.h"

#include <math.h>

#define NOMIN (-INFINITY)
#define NOMAX INFINITY

/* key, type, default (NULL = required), min, max, min_open, max_open, choices, unit, doc */
static const struct hy_param_def schema[] = {
  {"InitCondFile", HY_PT_STRING, NULL, NOMIN, NOMAX, 0, 0, NULL, "",
   "Initial conditions: a file path (HDF5, Gadget format 1 or 2, tipsy), or a built-in generator: plummer:N[:seed], "
   "hernquist:N[:seed], king:N[:seed[:W0]] or uniform:N[:seed[:Q]] (doc/ic.md)"},
  {"InitCondFormat", HY_PT_CHOICE, "auto", NOMIN, NOMAX, 0, 0, "auto,hdf5,gadget1,gadget2,tipsy", "",
   "Format of InitCondFile; auto detects it from the file contents"},
  {"OutputDir", HY_PT_STRING, NULL, NOMIN, NOMAX, 0, 0, NULL, "",
   "Directory for all outputs (snapshots, energy.csv, timings, params-used.txt, restart files)"},
  {"Scheme", HY_PT_CHOICE, "hybrid", NOMIN, NOMAX, 0, 0, "hybrid,tree,direct", "",
   "Force scheme: hybrid (hard/soft split, SoftStepRatio hard steps per soft step), tree (full tree "
   "force every step), direct (O(N^2) reference)"},
  {"TimeEnd", HY_PT_NUMBER, NULL, 0.0, NOMAX, 0, 0, NULL, "code time",
   "End time of the run, >= 0; 0 writes the initial snapshot and stops"},
  {"TimeStepHard", HY_PT_NUMBER_AUTO, "auto", 0.0, NOMAX, 1, 0, NULL, "code time",
   "Hard time step dt_h, > 0; auto = eps/sigma_v (sigma_v = mass-weighted mean speed of the ICs)"},
  {"SoftStepRatio", HY_PT_INT, "4", 1.0, 1024.0, 0, 0, NULL, "",
   "n: hard steps per soft step (dt_s = n dt_h), between 1 and 1024"},
  {"R1", HY_PT_NUMBER_AUTO, "auto", 0.0, NOMAX, 1, 0, NULL, "code length",
   "Inner radius of the hard/soft force split, > 0; auto = 1.03 N^(-1/3) r_v"},
  {"R2", HY_PT_NUMBER_AUTO, "auto", 0.0, NOMAX, 1, 0, NULL, "code length",
   "Outer radius of the hard/soft force split, > 0 and larger than R1; auto = 2 R1"},
  {"Softening", HY_PT_NUMBER_AUTO, "auto", 0.0, NOMAX, 0, 0, NULL, "code length",
   "Plummer softening length eps, >= 0; auto = 0.1 N^(-0.26) r_v"},
  {"AccErr", HY_PT_NUMBER_AUTO, "auto", 0.0, NOMAX, 1, 0, NULL, "code acceleration",
   "Absolute acceleration error a_err of the cell-opening criterion, > 0; auto = 2^-8 G M / r_v^2"},
  {"OpeningCriterion", HY_PT_CHOICE, "absolute", NOMIN, NOMAX, 0, 0, "absolute,relative,both", "",
   "Cell-opening criterion: absolute (a cell's monopole error estimate 3 G B2 / (d^2 (d - b_max)^2) below "
   "AccErr), relative (below ErrTolForceAcc times the particle's acceleration of the previous step, as "
   "Gadget's relative criterion; the first force of a run uses AccErr) or both (below the smaller of the two)"},
  {"ErrTolForceAcc", HY_PT_NUMBER, "0.005", 0.0, 1.0, 1, 0, NULL, "",
   "alpha of OpeningCriterion relative: a cell's error estimate must be below alpha |a|, > 0 and <= 1"},
  {"NCrit", HY_PT_INT, "16", 1.0, 65536.0, 0, 0, NULL, "",
   "Leaf size: a cell with at least NCrit particles is split, so leaves hold fewer (more only when particles "
   "share a key), between 1 and 65536"},
  {"NVec", HY_PT_INT, "4", 1.0, 16.0, 0, 0, NULL, "",
   "Sinks per OpenCL work-item in the tree walks, between 1 and 16"},
  {"TreeBuild", HY_PT_CHOICE, "auto", NOMIN, NOMAX, 0, 0, "auto,host,device", "",
   "Where the local tree is built: device (keys, sort, cells and moments in OpenCL kernels; on several MPI "
   "ranks the remote tree and the soft step's merged tree of local particles and LET items are built on the "
   "device too, and the LET is selected there with ParticleState device, else the tree is copied to the host "
   "for it), host (threads; node records uploaded), auto (device unless the OpenCL device is a CPU)"},
  {"ParticleState", HY_PT_CHOICE, "auto", NOMIN, NOMAX, 0, 0, "auto,host,device", "",
   "Where positions and velocities live between outputs: device (in double precision; kicks, drifts and forces "
   "then move no particle data between host and device; on several MPI ranks Scheme hybrid only, decomposed and "
   "LET selected there; tree built on the device, a device with double precision), host (always on the host), "
   "auto (device where possible unless the OpenCL device is a CPU)"},
  /* default: HY_LET_FULL_OPEN (let.h), the library's own default */
  {"LETOpenFactor", HY_PT_NUMBER, "1", 1.0, 16.0, 0, 0, NULL, "",
   "Several MPI ranks: a soft-step (full) LET opens a local cell whose distance to the receiving box is below "
   "this factor times its MAC radius r_b (1 = Watanabe & Nakasato eq 14; larger sends finer items, which the "
   "merged tree groups again, for a slightly more accurate soft force); hard LETs use 1"},
  {"NodeSharedMemory", HY_PT_CHOICE, "yes", NOMIN, NOMAX, 0, 0, "yes,no", "",
   "Several MPI ranks on one node: pass the LET items and the decomposition's particles through an MPI "
   "shared-memory window (yes) or in MPI messages, as between nodes (no; e.g. where /dev/shm is too small for "
   "the window); the same results either way"},
  {"GravityConstant", HY_PT_NUMBER, "1", 0.0, NOMAX, 1, 0, NULL, "code units",
   "Gravitational constant G in code units, > 0; 43007.1 for kpc, 1e10 Msun, km/s"},
  {"SnapshotInterval", HY_PT_NUMBER, "0", 0.0, NOMAX, 0, 0, NULL, "code time",
   "Time between snapshots, >= 0; 0 = initial and final snapshots only"},
  {"SnapshotFields", HY_PT_LIST, "none", NOMIN, NOMAX, 0, 0, "Acceleration,Potential", "",
   "Optional snapshot fields: comma list of Acceleration, Potential (no repeats), or none"},
  {"NumFilesPerSnapshot", HY_PT_INT, "1", 1.0, 65536.0, 0, 0, NULL, "",
   "Files per snapshot: 1 = one file gathered on rank 0; K > 1 = snapshot_NNN.0..K-1.hdf5 written by K groups "
   "of ranks (K <= number of ranks)"},
  {"EnergyInterval", HY_PT_NUMBER, "0", 0.0, NOMAX, 0, 0, NULL, "code time",
   "Time between energy diagnostics (energy.csv), >= 0; 0 = every soft step"},
  {"ProgressInterval", HY_PT_NUMBER, "0", 0.0, NOMAX, 0, 0, NULL, "seconds",
   "Wall-clock seconds between progress lines, >= 0; 0 = a line after every step (the first and the last "
   "step always get one)"},
  {"RestartInterval", HY_PT_NUMBER, "0", 0.0, NOMAX, 0, 0, NULL, "minutes",
   "Wall-clock minutes between restart sets (OutputDir/restart), >= 0; 0 = none by time"},
  {"RestartEverySoftSteps", HY_PT_INT, "0", 0.0, 1e9, 0, 0, NULL, "",
   "Write a restart set every this many (soft) steps, >= 0; 0 = none by step count. SIGUSR1 also writes one; "
   "SIGTERM writes one and stops"},
  {"OpenCLDevice", HY_PT_DEVICE, "any", NOMIN, NOMAX, 0, 0, "gpu,cpu,any", "",
   "OpenCL device: gpu, cpu, any, or P:D (platform index P, device index D, both >= 0)"},
  {"DomainGrid", HY_PT_STRING, "auto", NOMIN, NOMAX, 0, 0, NULL, "",
   "MPI domain grid PxxPyxPz (e.g. 4x2x2; the product must equal the number of MPI ranks); auto = near-cubic "
   "factorisation of the rank count"},
  {"SampleRate", HY_PT_NUMBER, "0.00390625", 0.0, 1.0, 1, 0, NULL, "",
   "R_samp: fraction of (local + hard-LET) particles each rank sends to rank 0 for the domain decomposition "
   "(Watanabe & Nakasato eq 12-13)"},
  {"DomainSmoothing", HY_PT_NUMBER, "1", 0.0, 1.0, 1, 0, NULL, "",
   "c in (0, 1]: each decomposition's boundaries = c x the cut of its samples + (1 - c) x the previous ones, to "
   "damp the sampling noise that moves particles back and forth (GreeM, FDPS coef_ema); 1 = off"},
  {"DomainCost", HY_PT_CHOICE, "particles", NOMIN, NOMAX, 0, 0, "particles,walktime", "",
   "What the domain decomposition balances: particles = N_local + N_hard (Watanabe & Nakasato eq 12-13, "
   "reproducible); walktime = the ranks' measured walk time (samples weighted by each rank's walk seconds per "
   "particle, as GreeM and Bonsai do; runs are then not reproducible bit for bit)"},
  {"UnitLength_in_cm", HY_PT_NUMBER, "1", 0.0, NOMAX, 1, 0, NULL, "cm",
   "Code length unit in cm, > 0 (metadata written to snapshots)"},
  {"UnitMass_in_g", HY_PT_NUMBER, "1", 0.0, NOMAX, 1, 0, NULL, "g",
   "Code mass unit in g, > 0 (metadata written to snapshots)"},
  {"UnitVelocity_in_cm_per_s", HY_PT_NUMBER, "1", 0.0, NOMAX, 1, 0, NULL, "cm/s",
   "Code velocity unit in cm/s, > 0 (metadata written to snapshots)"},
};

const struct hy_param_def *hy_params_schema(size_t *n) {
  if (n) *n = sizeof schema / sizeof schema[0];
  return schema;
}
