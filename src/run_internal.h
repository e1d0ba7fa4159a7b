/* SPDX-License-Identifier: GPL-3.0-or-later
 * run_internal.h: the state of one `hytree run`, shared by run.c (set-up and
 * main loop) and run_output.c (its records, snapshots, restart sets and
 * summary) only. Not part of the run interface: other modules include run.h. */
#ifndef HY_RUN_INTERNAL_H
#define HY_RUN_INTERNAL_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "decomp.h"
#include "diag.h"
#include "force.h"
#include "io.h"
#include "log.h"
#include "params.h"
#include "part.h"
#include "restart.h"
#include "run.h"
#include "sim.h"
#include "threads.h"

/* the summary's split of rank 0's costs */
enum hy_run_sum_part {
  SP_SORT, SP_BUILD, SP_EXPORT, SP_REMOTE, SP_UPLOAD, SP_DOWNLOAD, SP_LET, SP_BOXES, SP_DD, SP_WALK, SP_N
};

/* Totals over the steps of a run, for its summary. */
struct hy_run_totals {
  long steps, n_hard;
  double wall, soft, hard, kernel, inter, max_de, merged, whole;
  double part[SP_N]; /* rank 0's costs, enum hy_run_sum_part */
  /* the decomposition figures of struct hy_run when the loop began */
  double dd_wait0, dd_sent0, dd_recv0, dd_before0;
  long dd_count0;
};

struct hy_run {
  struct hy_params *par;
  const char *pfile;
  const char *outdir;
  enum hy_scheme scheme;
  int n_ratio;
  double G, eps, r1, r2, a_err, dt_h, t_end, snap_dt, energy_dt;
  double mac_alpha; /* OpeningCriterion relative or both: ErrTolForceAcc; absolute: 0 */
  int mac_both;     /* OpeningCriterion both */
  double progress_dt; /* ProgressInterval: wall seconds between progress lines, 0 every step */
  unsigned snap_fields;
  int snap_files;   /* NumFilesPerSnapshot */
  struct hy_units units;
  struct hy_part p; /* this rank's particles */
  double t0;
  char *params_text;  /* params-used.txt: as given, with the resolved `auto` values as comments */
  char *params_used;  /* the values used (`auto` resolved), for the snapshots */
  int snap_count;
  FILE *energy, *timings, *let;
  /* MPI */
  MPI_Comm comm; /* MPI_COMM_WORLD's (embedded: MPI_COMM_SELF's) duplicate with MPI_ERRORS_RETURN */
  int rank, size, local_rank, local_size;
  struct hy_decomp *dd;
  struct hy_decomp_stats dd_st;
  double dd_wait; /* seconds spent in the barrier before each decomposition */
  double dd_sent, dd_recv, dd_before; /* sums over the decompositions: particles sent, received, held before */
  long dd_count;                      /* decompositions made */
  int dd_cost_walk;                   /* DomainCost walktime */
  double walk_mark[2];                /* hy_force_walk_seconds at the last decomposition */
  struct hy_force *force;
  /* restarts */
  const char *restart_dir;          /* --restart DIR, or NULL */
  struct hy_restart_state rs;       /* the state read from it */
  double restart_minutes;           /* RestartInterval */
  long restart_every;               /* RestartEverySoftSteps */
  long test_signal_step;            /* HYTREE_TEST_SIGNAL_AT_STEP (tests) */
  long test_nan_step;               /* HYTREE_TEST_NAN_AT_STEP (tests) */
  int test_kill_write;              /* HYTREE_TEST_KILL_IN_RESTART (tests) */
  int restarts_written;
  struct hy_run_embed *embed;  /* a run inside hytree bench (hy_run_embedded), or NULL */
  struct hy_run_totals totals; /* of the loop, when it ended */
};

/* run.c */

/** Broadcast rank 0's status and message; returns the status. */
int hy_run_bcast_status(struct hy_run *r, int rc, struct hy_err *err);

/* run_output.c */

/** Rank 0: create OutputDir, write params-used.txt and open energy.csv,
 *  timings.csv and (several ranks) let.csv, new or, on a restart, trimmed to
 *  the restart set and continued. Returns 0 or -1 with err set. */
int hy_run_open_files(struct hy_run *r, struct hy_err *err);

/** Close the CSV records; a failure turns a status of 0 into 1. Returns the
 *  status. */
int hy_run_close_files(struct hy_run *r, int status);

/** Write the next snapshot (collective). */
int hy_run_write_snapshot(struct hy_run *r, double t, struct hy_err *err);

/** Whether a step ending at t_next (of length len) reaches a requested
 *  snapshot time t0 + k SnapshotInterval, k >= next_snap, and (*off) whether
 *  one of them lies off that step end: its snapshot is predicted and needs
 *  the total acceleration p->acc (HY_WANT_ACC). */
int hy_run_snaps_due(const struct hy_run *r, long next_snap, double len, double t_next, int *off);

/** The first requested snapshot time t0 + k SnapshotInterval (k >= 1) after
 *  the step end t of a step of length len: where a resumed run goes on. */
long hy_run_snap_next(const struct hy_run *r, double len, double t);

/** After the step ending at t (t_next on the step grid), p current on the
 *  host: one snapshot per requested time it reached, *next_snap moved past
 *  them, and after the last step (final) one at t unless a requested time
 *  fell there (collective). */
int hy_run_snapshots(struct hy_run *r, long *next_snap, double len, double t_next, double t, int final,
                     struct hy_err *err);

/** The energy diagnostics at time t against the initial energy e0 into d,
 *  and rank 0's row of energy.csv (collective). */
int hy_run_energy_row(struct hy_run *r, struct hy_sim *sim, double t, double e0, struct hy_diag *d,
                      struct hy_err *err);

/** The rows of timings.csv and let.csv of step `step`, reduced over the
 *  ranks (collective). */
int hy_run_step_records(struct hy_run *r, long step, double t, const struct hy_step_times *tm, struct hy_err *err);

/** Write a restart set after step s (collective). */
int hy_run_write_restart(struct hy_run *r, long s, long next_snap, long next_energy, double e0, struct hy_err *err);

/** After step s found n_bad non-finite particles (lowest ID low; first, the
 *  first whose position went bad, or UINT64_MAX): an emergency snapshot to
 *  OutputDir/emergency/ and err naming the step, the time and the particles
 *  (collective). Returns -1. */
int hy_run_emergency_snapshot(struct hy_run *r, long s, double t, uint64_t n_bad, uint64_t low, uint64_t first,
                              struct hy_err *err);

/** Start the totals of a run's loop. */
void hy_run_totals_begin(const struct hy_run *r, struct hy_run_totals *sum);

/** Add one step's times and counts to the totals. */
void hy_run_totals_add(struct hy_run_totals *sum, const struct hy_step_times *tm);

/** The summary lines at the end of the loop (t the time reached). */
void hy_run_summary(const struct hy_run *r, const struct hy_run_totals *sum, double t, int stopped);

#endif
