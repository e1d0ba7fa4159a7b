/* SPDX-License-Identifier: GPL-3.0-or-later
 * run.c: the `hytree run` subcommand. Owns the order of a run: parse the
 * parameters, load and check the initial conditions, resolve the `auto`
 * parameters from the ICs (virial radius, mean speed), choose the OpenCL
 * device and build its kernels -- all before anything is written, so bad
 * input leaves no output behind -- then write params-used.txt, the initial
 * snapshot and diagnostics, and step to TimeEnd writing energy.csv,
 * timings.csv, the progress log and snapshots at soft-step boundaries. What
 * is written, and how, is run_output.c's.
 *
 * On several MPI ranks: rank 0 reads (or generates) the ICs and resolves
 * the `auto` values from the whole set, so they do not depend on the rank
 * count; the particles are then scattered and the domain decomposition
 * (decomp.h) runs before the first force and at every soft step. Decisions
 * that one rank makes are broadcast; a failure on one rank during the run
 * ends all ranks (hy_die, MPI_Abort) with its message. Rank 0 writes the
 * text outputs; snapshots are gathered or written per group (io_mpi.h).
 *
 * `hytree bench --time` runs the same set-up and loop in its own process
 * (hy_run_embedded): one rank, no snapshots, and the last step's particles
 * and total accelerations handed to the bench. */
#include "config.h"

#include "run.h"

#include <errno.h>
#include <signal.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "alloc.h"
#include "cl_engine.h"
#include "decomp.h"
#include "diag.h"
#include "force.h"
#include "force_cpu.h"
#include "ic.h"
#include "io.h"
#include "io_mpi.h"
#include "log.h"
#include "params.h"
#include "part.h"
#include "restart.h"
#include "run_internal.h"
#include "shm.h"
#include "sim.h"
#include "threads.h"
#include "trace.h"

/* Particles used to estimate the potential energy W of the ICs for r_v. */
#define HY_RV_SAMPLE 8192

void hy_run_usage(FILE *out, int full) {
  fputs("usage: hytree run PARAMFILE [-P Key=Value ...] [--quiet]\n"
        "       hytree run --restart OUTPUTDIR [PARAMFILE] [-P Key=Value ...] [--quiet]\n"
        "  Run a simulation described by PARAMFILE (Gadget-style `Key  Value` lines,\n"
        "  `%` or `#` comments). -P overrides a key (repeatable; later ones win).\n"
        "  Outputs go to OutputDir: params-used.txt, energy.csv, timings.csv,\n"
        "  snapshot_NNN.hdf5 (see doc/output.md).\n"
        "  --restart DIR  resume the run whose OutputDir is DIR from its last restart set\n"
        "                 (RestartInterval, RestartEverySoftSteps, SIGUSR1; SIGTERM writes one and stops)\n"
        "  --quiet   only warnings and errors\n"
        "  -h, --help  this help with the table of parameters\n",
        out);
  if (full) {
    fputs("\nparameters:\n", out);
    hy_params_print_help(out);
  }
}

/* ------------------------------------------------------------ helpers */

/* Virial radius r_v = G M^2 / (2 |W|) from the unsoftened potential energy,
 * exact for N <= HY_RV_SAMPLE, else estimated from a random subset: each pair
 * is in the subset with probability s(s-1)/(N(N-1)), so scaling the subset's
 * pair sum by the inverse is unbiased for any mass spectrum. Independent of G. */
static double virial_radius(const struct hy_part *p, struct hy_pool *pool) {
  size_t n = p->n, s = n <= HY_RV_SAMPLE ? n : HY_RV_SAMPLE;
  double *pos = hy_malloc("r_v sample", 3 * s, sizeof(double)), *m = hy_malloc("r_v sample", s, sizeof(double));
  double *pot = hy_malloc("r_v sample", s, sizeof(double)), *acc = hy_malloc("r_v sample", 3 * s, sizeof(double));
  if (s == n) {
    memcpy(pos, p->pos, 3 * n * sizeof(double));
    memcpy(m, p->mass, n * sizeof(double));
  } else {
    /* partial Fisher-Yates with a fixed 64-bit LCG: reproducible, no state */
    size_t *idx = hy_malloc("r_v sample", n, sizeof(size_t));
    for (size_t i = 0; i < n; i++) idx[i] = i;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < s; i++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      size_t j = i + (size_t)((r >> 11) % (uint64_t)(n - i));
      size_t tmp = idx[i];
      idx[i] = idx[j];
      idx[j] = tmp;
      memcpy(pos + 3 * i, p->pos + 3 * idx[i], 3 * sizeof(double));
      m[i] = p->mass[idx[i]];
    }
    hy_free(idx);
  }
  hy_cpu_direct(pos, m, s, pos, s, 0, 0.0, 0.0, 0.0, acc, NULL, pot, pool);
  double w = 0.0;
  for (size_t i = 0; i < s; i++) w += 0.5 * m[i] * pot[i];
  if (s < n) w *= ((double)n * (double)(n - 1)) / ((double)s * (double)(s - 1));
  double mt = hy_part_total_mass(p);
  hy_free(pos);
  hy_free(m);
  hy_free(pot);
  hy_free(acc);
  return w < 0.0 ? mt * mt / (2.0 * fabs(w)) : 0.0;
}

/* Mass-weighted mean speed of the ICs. */
static double mean_speed(const struct hy_part *p) {
  double s = 0.0, m = 0.0;
  for (size_t i = 0; i < p->n; i++) {
    const double *v = p->vel + 3 * i;
    s += p->mass[i] * sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    m += p->mass[i];
  }
  return s / m;
}

/* Signals: SIGUSR1 asks for a restart set, SIGTERM for a set and a stop, at
 * the next step boundary (the ranks agree on it there). */
static volatile sig_atomic_t got_usr1 = 0, got_term = 0;
static void on_signal(int sig) {
  if (sig == SIGTERM) got_term = 1;
  else got_usr1 = 1;
}

/* A failure that every rank sees the same way (or that rank 0 saw and
 * broadcast): print once, return. */
static void report(const struct hy_run *r, const struct hy_err *err) {
  if (r->rank == 0) fprintf(stderr, "hytree: error: %s\n", err->msg);
}

int hy_run_bcast_status(struct hy_run *r, int rc, struct hy_err *err) {
  int v = rc;
  if (MPI_Bcast(&v, 1, MPI_INT, 0, r->comm) != MPI_SUCCESS) hy_die("MPI_Bcast of a status failed");
  if (v != 0 && MPI_Bcast(err->msg, (int)sizeof err->msg, MPI_CHAR, 0, r->comm) != MPI_SUCCESS)
    hy_die("MPI_Bcast of an error message failed");
  return v;
}

/* Any rank failed? A failing rank prints its own message. */
static int any_failed(struct hy_run *r, int rc, const struct hy_err *err) {
  if (rc != 0 && r->size > 1) fprintf(stderr, "hytree: error: [rank %d] %s\n", r->rank, err->msg);
  if (rc != 0 && r->size == 1) fprintf(stderr, "hytree: error: %s\n", err->msg);
  int v = rc != 0, g = 0;
  if (MPI_Allreduce(&v, &g, 1, MPI_INT, MPI_MAX, r->comm) != MPI_SUCCESS) hy_die("MPI_Allreduce of a status failed");
  return g;
}

/* err := PREFIX + ": " + err; returns -1. */
static int err_prefix(struct hy_err *err, const char *prefix) {
  char msg[sizeof err->msg];
  snprintf(msg, sizeof msg, "%s", err->msg);
  return hy_err_set(err, "%s: %s", prefix, msg);
}

/* err := "FILE:LINE: KEY: " + err, or "-P KEY=VALUE: " + err for an
 * override, which names the key already (a value that passed the parameter
 * checks but not a later one); returns -1. */
static int err_at_key(const struct hy_run *r, const char *key, struct hy_err *err) {
  const char *where = hy_params_where(r->par, key);
  if (strncmp(where, "-P ", 3) != 0) err_prefix(err, key);
  return err_prefix(err, where);
}

static int load_ics(struct hy_run *r, struct hy_err *err) {
  const char *spec = hy_params_get_str(r->par, "InitCondFile");
  struct hy_ic_spec gen;
  int g = hy_ic_parse_spec(spec, &gen, err);
  if (g < 0) return err_at_key(r, "InitCondFile", err);
  r->t0 = 0.0;
  if (g == 1) return hy_ic_generate(&gen, &r->p, NULL, err) != 0 ? err_at_key(r, "InitCondFile", err) : 0;
  enum hy_ic_format fmt;
  if (hy_io_format_parse(hy_params_get_str(r->par, "InitCondFormat"), &fmt) != 0)
    return hy_err_set(err, "%s: bad InitCondFormat", r->pfile);
  return hy_io_read_ic(spec, fmt, &r->p, &r->t0, err) != 0 ? err_at_key(r, "InitCondFile", err) : 0;
}

/* Resolve the `auto` parameters from the ICs and check the results. */
static int resolve(struct hy_run *r, struct hy_pool *pool, struct hy_err *err) {
  struct hy_params *par = r->par;
  const size_t n = r->p.n;
  const double nn = (double)n, mt = hy_part_total_mass(&r->p);
  r->G = hy_params_get_number(par, "GravityConstant");
  double rv = 0.0, sv = 0.0;
  int need_rv = hy_params_is_auto(par, "R1") || hy_params_is_auto(par, "Softening") ||
                hy_params_is_auto(par, "AccErr") || hy_params_is_auto(par, "TimeStepHard");
  if (need_rv) {
    rv = virial_radius(&r->p, pool);
    if (!(rv > 0.0) || !isfinite(rv))
      return hy_err_set(err, "cannot compute the virial radius of the ICs (all particles coincide?); set R1, R2, "
                             "Softening, AccErr and TimeStepHard explicitly");
    hy_msg("ICs: N = %zu, total mass %.9g, virial radius r_v = G M^2/(2|W|) = %.6g%s", n, mt, rv,
           n > HY_RV_SAMPLE ? " (W from a random sample of 8192)" : "");
  }
  if (hy_params_is_auto(par, "R1")) hy_params_set_resolved(par, "R1", 1.03 * pow(nn, -1.0 / 3.0) * rv);
  r->r1 = hy_params_get_number(par, "R1");
  if (hy_params_is_auto(par, "R2")) hy_params_set_resolved(par, "R2", 2.0 * r->r1);
  r->r2 = hy_params_get_number(par, "R2");
  if (!(r->r2 > r->r1)) { /* R1 auto (an auto R2 is 2 R1): the R2 given is too small */
    hy_err_set(err, "R2 = %g must be larger than R1 = %g (R1 auto)", r->r2, r->r1);
    return err_prefix(err, hy_params_where(par, "R2"));
  }
  if (hy_params_is_auto(par, "Softening")) hy_params_set_resolved(par, "Softening", 0.1 * pow(nn, -0.26) * rv);
  r->eps = hy_params_get_number(par, "Softening");
  if (hy_params_is_auto(par, "AccErr")) hy_params_set_resolved(par, "AccErr", ldexp(1.0, -8) * r->G * mt / (rv * rv));
  r->a_err = hy_params_get_number(par, "AccErr");
  if (hy_params_is_auto(par, "TimeStepHard")) {
    sv = mean_speed(&r->p);
    if (!(sv > 0.0) || !(r->eps > 0.0)) {
      hy_err_set(err, "TimeStepHard auto = Softening / sigma_v needs Softening > 0 and moving particles "
                      "(Softening %g, sigma_v %g); set TimeStepHard explicitly", r->eps, sv);
      return err_prefix(err, hy_params_where(par, r->eps > 0.0 ? "TimeStepHard" : "Softening"));
    }
    hy_params_set_resolved(par, "TimeStepHard", r->eps / sv);
  }
  r->dt_h = hy_params_get_number(par, "TimeStepHard");
  /* shorten the step slightly so that TimeEnd falls on a step boundary */
  double span = r->t_end - r->t0, len = r->dt_h * (double)r->n_ratio;
  if (span > 0.0) {
    double steps = ceil(span / len - 1e-9);
    if (steps > 1e15) {
      hy_err_set(err, "TimeEnd / TimeStepHard = %.3g steps is too many", steps);
      return err_prefix(err, hy_params_where(par, hy_params_is_auto(par, "TimeStepHard") ? "TimeEnd" : "TimeStepHard"));
    }
    double dt = span / (steps * (double)r->n_ratio);
    if (fabs(dt - r->dt_h) > 1e-12 * r->dt_h)
      hy_msg("time step shortened from %.9g to %.9g so that TimeEnd = %.9g is reached in %.0f steps", r->dt_h, dt,
             r->t_end, steps);
    r->dt_h = dt;
  }
  return 0;
}

/* Domain decomposition hook of the integrator: N_hard of eq 13 from the
 * force's last hard LET. */
static int decompose_cb(void *ctx, struct hy_part *p, const struct hy_decomp_dev *dev, struct hy_moved *moved,
                        struct hy_err *err) {
  struct hy_run *r = ctx;
  /* the ranks arrive at different times (unequal walks); the barrier makes
   * that wait visible apart from the decomposition's own work */
  double t0 = hy_wtime();
  const double extra = (double)hy_force_last_hard_items(r->force);
  if (r->size > 1 && r->dd_cost_walk) {
    /* DomainCost walktime: the walks' time since the last decomposition, for
     * the work this domain held, weights the next samples (and the
     * exchange of these figures is the barrier) */
    double walk[2], since[2];
    hy_force_walk_seconds(r->force, walk);
    for (int k = 0; k < 2; k++) since[k] = walk[k] - r->walk_mark[k];
    if (hy_decomp_cost_update(r->dd, since, (double)p->n + extra, err) != 0) return -1;
    memcpy(r->walk_mark, walk, sizeof walk);
  } else if (r->size > 1 && MPI_Barrier(r->comm) != MPI_SUCCESS) {
    return hy_err_set(err, "domain decomposition: MPI_Barrier failed");
  }
  r->dd_wait += hy_wtime() - t0;
  hy_trace(HY_TRACE_MAIN, "dd_barrier", t0);
  int rc = dev ? hy_decomp_exchange_dev(r->dd, p, extra, dev, &r->dd_st, err)
               : hy_decomp_exchange(r->dd, p, extra, &r->dd_st, err);
  if (rc == 0) {
    r->dd_sent += (double)r->dd_st.n_sent;
    r->dd_recv += (double)r->dd_st.n_recv;
    r->dd_before += (double)r->dd_st.n_before;
    r->dd_count++;
  }
  moved->known = hy_decomp_moved(r->dd, &moved->holes, &moved->srcs, &moved->n_holes, &moved->n_keep) == 0;
  /* a non-finite position has no domain: every rank keeps its particles, so
   * that the step ends and the check after it stops the run with an
   * emergency snapshot */
  return rc == HY_DECOMP_NONFINITE ? 0 : rc;
}

/* ----------------------------------------------------- non-finite state */

struct finite_job {
  const struct hy_part *p;
  uint64_t *bad;  /* per thread: count */
  uint64_t *low;  /* per thread: lowest bad ID */
};

static void finite_body(void *arg, size_t b, size_t e, int tid) {
  struct finite_job *j = arg;
  const struct hy_part *p = j->p;
  uint64_t bad = 0, low = UINT64_MAX;
  for (size_t i = b; i < e; i++) {
    int ok = 1;
    for (int d = 0; d < 3; d++)
      ok &= isfinite(p->pos[3 * i + d]) && isfinite(p->vel[3 * i + d]) && isfinite(p->acc_w[3 * i + d]);
    if (!ok) {
      bad++;
      if (p->id[i] < low) low = p->id[i];
    }
  }
  j->bad[tid] += bad;
  if (low < j->low[tid]) j->low[tid] = low;
}

/* This rank's particles with a non-finite position, velocity or kick
 * acceleration on the host: v[0] their count, v[1] their lowest ID. */
static void count_nonfinite(const struct hy_run *r, struct hy_pool *pool, uint64_t v[2]) {
  int nt = hy_pool_size(pool);
  uint64_t *bad = hy_calloc("finite check", (size_t)nt, sizeof(uint64_t));
  uint64_t *low = hy_malloc("finite check", (size_t)nt, sizeof(uint64_t));
  for (int k = 0; k < nt; k++) low[k] = UINT64_MAX;
  struct finite_job j = {.p = &r->p, .bad = bad, .low = low};
  hy_pool_for(pool, r->p.n, 65536, finite_body, &j);
  v[0] = 0;
  v[1] = UINT64_MAX;
  for (int k = 0; k < nt; k++) {
    v[0] += bad[k];
    if (low[k] < v[1]) v[1] = low[k];
  }
  hy_free(bad);
  hy_free(low);
}

/* After step s: a non-finite position, velocity or kick acceleration on any
 * rank stops the run. An emergency snapshot of the state goes to
 * OutputDir/emergency/ (the regular snapshots stay as they are) and err names
 * the step, the time, the count and the lowest particle ID. Collective.
 * Returns 0 when every value is finite. */
static int check_finite(struct hy_run *r, struct hy_sim *sim, struct hy_pool *pool, long s, double t,
                        struct hy_err *err) {
  /* the state on the device: count there, bring it over only if some rank found one */
  if (hy_sim_state_on_device(sim)) {
    size_t n_bad = 0;
    if (hy_sim_count_nonfinite(sim, &n_bad, err) != 0) return -1;
    uint64_t all = n_bad;
    if (r->size > 1 && MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_UINT64_T, MPI_SUM, r->comm) != MPI_SUCCESS)
      return hy_err_set(err, "step %ld: MPI_Allreduce of the finite check failed", s);
    if (all == 0) return 0;
    if (hy_sim_sync(sim, err) != 0) return -1;
  }
  uint64_t v[2];
  count_nonfinite(r, pool, v);
  if (r->size > 1 && (MPI_Allreduce(MPI_IN_PLACE, &v[0], 1, MPI_UINT64_T, MPI_SUM, r->comm) != MPI_SUCCESS ||
                      MPI_Allreduce(MPI_IN_PLACE, &v[1], 1, MPI_UINT64_T, MPI_MIN, r->comm) != MPI_SUCCESS))
    return hy_err_set(err, "step %ld: MPI_Allreduce of the finite check failed", s);
  if (v[0] == 0) return 0;
  /* the particle whose position went bad first, as seen by the force evaluations */
  uint64_t first = hy_force_first_bad_id(r->force);
  if (r->size > 1 && MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_UINT64_T, MPI_MIN, r->comm) != MPI_SUCCESS)
    return hy_err_set(err, "step %ld: MPI_Allreduce of the finite check failed", s);
  return hy_run_emergency_snapshot(r, s, t, v[0], v[1], first, err);
}

/* ------------------------------------------------------------ main loop */

/* The state of the main loop. */
struct loop {
  struct hy_force *f;
  struct hy_sim *sim;
  struct hy_pool *pool;
  unsigned snap_want;   /* what a snapshot needs from a step's forces */
  unsigned final_want;  /* and the last step's for an embedded run's caller */
  struct hy_diag d0, d; /* the initial and the latest energy diagnostics */
  long first_step, n_steps, next_snap, next_energy;
  double len;           /* a (soft) step's length */
  double wall0, last_log, last_restart;
  int have_energy, stopped;
  struct hy_run_totals sum;
};

static int device_choice_of(const struct hy_run *r, const char *key) {
  const char *v = hy_params_get_str(r->par, key);
  return strcmp(v, "host") == 0 ? 1 : strcmp(v, "device") == 0 ? 2 : 0;
}

static struct hy_force *create_force(struct hy_run *r, struct hy_cl *cl, struct hy_pool *pool) {
  struct hy_force_cfg fc = {.G = r->G,
                            .eps = r->eps,
                            .r1 = r->r1,
                            .r2 = r->r2,
                            .a_err = r->a_err,
                            .mac_alpha = r->mac_alpha,
                            .mac_both = r->mac_both,
                            .n_crit = (int)hy_params_get_int(r->par, "NCrit"),
                            .nvec = (int)hy_params_get_int(r->par, "NVec"),
                            .n_ratio = r->n_ratio,
                            /* ParticleState device needs the tree built there */
                            .tree_build = device_choice_of(r, "ParticleState") == 2 ? HY_TREE_BUILD_DEVICE
                                                                                    : device_choice_of(r, "TreeBuild")};
  struct hy_force *f = hy_force_create(cl, pool, &fc);
  r->force = f;
  hy_force_set_comm(f, r->comm, r->size > 1, HY_LET_AUTO);
  hy_force_set_let_open(f, hy_params_get_number(r->par, "LETOpenFactor"));
  return f;
}

static struct hy_sim *create_sim(struct hy_run *r, struct hy_force *f, struct hy_pool *pool) {
  struct hy_sim_cfg sc = {.scheme = r->scheme,
                          .dt_h = r->dt_h,
                          .n_ratio = r->n_ratio,
                          .decompose = r->size > 1 ? decompose_cb : NULL,
                          .decompose_ctx = r,
                          .dd_ahead = r->size > 1 ? r->dd : NULL,
                          .dd_every = 4,
                          .state = device_choice_of(r, "ParticleState")};
  struct hy_sim *sim = hy_sim_create(&r->p, f, pool, &sc, r->t0);
  hy_sim_set_lazy_sync(sim, 1); /* p is read only after steps with a `want`, and synced before other reads */
  return sim;
}

/* Where the tree is built, where the particle state lives and how the LET
 * items travel. Fails when ParticleState device cannot keep the state on the
 * device. */
static int report_placement(struct hy_run *r, const struct hy_cl *cl, const struct loop *L, struct hy_err *err) {
  if (device_choice_of(r, "ParticleState") == HY_STATE_DEVICE && !hy_sim_state_on_device(L->sim))
    return hy_err_set(err, "%s: ParticleState device: %s has no double precision (cl_khr_fp64); use auto or host",
                      hy_params_where(r->par, "ParticleState"), hy_cl_device_name(cl));
  if (r->rank == 0 && r->scheme != HY_SCHEME_DIRECT)
    hy_msg("tree built on the %s, particle state kept on the %s",
           hy_force_config(L->f)->tree_build == HY_TREE_BUILD_DEVICE ? "device" : "host",
           !hy_sim_state_on_device(L->sim) ? "host"
           : r->size > 1                    ? "device (decomposed there)"
                                            : "device");
  if (r->rank == 0 && r->size > 1) {
    const int ns = hy_force_let_node_ranks(L->f);
    if (ns > 1)
      hy_msg("LET items between the %d ranks of rank 0's node through a shared-memory window, MPI messages otherwise",
             ns);
    else
      hy_msg("LET items through MPI messages");
  }
  return 0;
}

/* A fresh run: the initial forces, energies and snapshot. */
static int start(struct hy_run *r, struct loop *L, struct hy_err *err) {
  double tw = hy_wtime();
  if (hy_sim_start(L->sim, L->snap_want, err) != 0) return -1;
  hy_msg("initial forces: %.3f s", hy_wtime() - tw);
  if (hy_run_energy_row(r, L->sim, r->t0, 0.0, &L->d0, err) != 0) return -1;
  const struct hy_diag *d0 = &L->d0;
  hy_msg("t = %.6g  E = %.9g  K = %.6g  W = %.6g  2K/|W| = %.4f", r->t0, d0->etot, d0->kin, d0->pot, d0->virial);
  return hy_run_write_snapshot(r, r->t0, err);
}

/* A restart: the kick acceleration, the decomposition and N_hard come from
 * the set, and so do the step and the output schedule. */
static void resume(struct hy_run *r, struct loop *L) {
  hy_sim_resume(L->sim, (long)r->rs.step);
  hy_force_set_last_hard_items(L->f, r->rs.last_hard);
  L->d0.etot = r->rs.e0;
  L->first_step = (long)r->rs.step + 1;
  /* from the interval now in force: SnapshotInterval may change on a restart */
  L->next_snap = hy_run_snap_next(r, hy_sim_step_length(L->sim), hy_sim_time(L->sim));
  L->next_energy = (long)r->rs.next_energy;
  r->snap_count = r->rs.snap_count;
  hy_msg("resumed from %s/restart at t = %.9g (step %lld)", r->restart_dir, hy_sim_time(L->sim),
         (long long)r->rs.step);
}

/* The number of steps to TimeEnd, and the clocks and totals of the loop. */
static void plan_steps(struct hy_run *r, struct loop *L, double span) {
  L->len = hy_sim_step_length(L->sim);
  L->n_steps = (long)ceil(span / L->len - 1e-9);
  hy_msg("integrating to t = %.6g: %ld %ssteps of %.6g%s", r->t_end, L->n_steps,
         r->scheme == HY_SCHEME_HYBRID ? "soft " : "", L->len,
         r->scheme == HY_SCHEME_HYBRID ? " (each with SoftStepRatio hard steps)" : "");
  L->wall0 = hy_wtime();
  L->last_log = 0.0;
  L->last_restart = L->wall0;
  hy_run_totals_begin(r, &L->sum);
  if (L->first_step > L->n_steps) hy_msg("the restart set is already at or past TimeEnd: nothing to integrate");
}

/* Whether a step ending at t_next reaches output time t0 + k dt (within
 * rounding of the step length len). */
static int reaches(double t_next, double t0, double dt, long k, double len) {
  return t_next >= t0 + (double)k * dt - 1e-9 * len;
}

/* The first output count k, from k on, whose time t0 + k dt lies after t. */
static long next_due(double t0, double dt, long k, double t, double len) {
  while (dt > 0.0 && t0 + (double)k * dt <= t + 1e-9 * len) k++;
  return k;
}

/* Tests: a NaN velocity on rank 0 before step HYTREE_TEST_NAN_AT_STEP. */
static int inject_test_nan(struct hy_run *r, struct loop *L, long s, struct hy_err *err) {
  if (!(r->test_nan_step == s && r->rank == 0 && r->p.n > 0)) return 0;
  if (hy_sim_sync(L->sim, err) != 0) return -1;
  r->p.vel[0] = NAN;
  hy_sim_host_changed(L->sim);
  return 0;
}

/* Step s and the check of its result. */
static int advance(struct hy_run *r, struct loop *L, long s, unsigned want, struct hy_step_times *tm,
                   struct hy_err *err) {
  const double t_step = hy_trace_t();
  if (hy_sim_step(L->sim, want, tm, err) != 0) return -1;
  hy_trace(HY_TRACE_MAIN, "step", t_step);
  const double t_check = hy_trace_t();
  if (check_finite(r, L->sim, L->pool, s, hy_sim_time(L->sim), err) != 0) return -1;
  hy_trace(HY_TRACE_MAIN, "check_finite", t_check);
  return 0;
}

static int energy_output(struct hy_run *r, struct loop *L, double t, struct hy_err *err) {
  L->next_energy = next_due(r->t0, r->energy_dt, L->next_energy, t, L->len);
  if (hy_run_energy_row(r, L->sim, t, L->d0.etot, &L->d, err) != 0) return -1;
  if (L->d.de_rel > L->sum.max_de) L->sum.max_de = L->d.de_rel;
  L->have_energy = 1;
  return 0;
}

/* Progress: the first and the last step, and the others at most once per
 * ProgressInterval (0: every step). Whether stdout is a terminal does not
 * matter: MPI launchers give the ranks terminal-like output even when the
 * job's output goes to a file. */
static void log_progress(const struct hy_run *r, struct loop *L, long s, double t, int final) {
  double el = hy_wtime() - L->wall0;
  if (!(final || s == L->first_step || el - L->last_log >= r->progress_dt)) return;
  L->last_log = el;
  double per = el / (double)(s - L->first_step + 1);
  if (L->have_energy)
    hy_msg("step %ld/%ld  t = %.6g  dE/E = %.3e  2K/|W| = %.4f  %.3f s/step  elapsed %.1f s  ETA %.1f s", s,
           L->n_steps, t, L->d.de_rel, L->d.virial, per, el, per * (double)(L->n_steps - s));
  else
    hy_msg("step %ld/%ld  t = %.6g  %.3f s/step  elapsed %.1f s  ETA %.1f s", s, L->n_steps, t, per, el,
           per * (double)(L->n_steps - s));
}

static int snapshot_output(struct hy_run *r, struct loop *L, double t_next, double t, int final,
                           struct hy_err *err) {
  if (hy_sim_sync(L->sim, err) != 0) return -1;
  return hy_run_snapshots(r, &L->next_snap, L->len, t_next, t, final, err);
}

/* Whether a restart set is due after step s: by step count, wall clock
 * (rank 0's), or signal; all ranks agree. Returns 0 (none), bit 1 (a set)
 * with bit 2 (and a stop), or -1 with err set. */
static int restart_request(struct hy_run *r, const struct loop *L, long s, int final, struct hy_err *err) {
  if (r->test_signal_step == s) raise(SIGTERM);
  int want_rs = 0;
  if (!final) {
    if (r->restart_every > 0 && s % r->restart_every == 0) want_rs |= 1;
    if (r->restart_minutes > 0 && r->rank == 0 && hy_wtime() - L->last_restart >= 60.0 * r->restart_minutes)
      want_rs |= 1;
    if (got_usr1) want_rs |= 1;
    if (got_term) want_rs |= 3;
    got_usr1 = 0;
  }
  if (r->size > 1 && MPI_Allreduce(MPI_IN_PLACE, &want_rs, 1, MPI_INT, MPI_BOR, r->comm) != MPI_SUCCESS)
    return hy_err_set(err, "MPI_Allreduce of the restart request failed");
  return want_rs;
}

/* A restart set after step s when one is due, and the stop SIGTERM asked for. */
static int restart_point(struct hy_run *r, struct loop *L, long s, double t, int final, struct hy_err *err) {
  const int want_rs = restart_request(r, L, s, final, err);
  if (want_rs <= 0) return want_rs;
  if (hy_sim_sync(L->sim, err) != 0 || hy_run_write_restart(r, s, L->next_snap, L->next_energy, L->d0.etot, err) != 0)
    return -1;
  L->last_restart = hy_wtime();
  if (want_rs & 2) {
    hy_msg("stopped by SIGTERM at t = %.9g after writing the restart set; resume with: hytree run --restart %s", t,
           r->outdir);
    L->stopped = 1;
  }
  return 0;
}

/* Step s of the loop: the step and its check, its records, and the outputs
 * that fall due after it. */
static int one_step(struct hy_run *r, struct loop *L, long s, struct hy_err *err) {
  const double t_next = r->t0 + (double)s * L->len;
  const int final = s == L->n_steps;
  int off;
  const int snap = hy_run_snaps_due(r, L->next_snap, L->len, t_next, &off) || final;
  const int energy = final || r->energy_dt == 0.0 || reaches(t_next, r->t0, r->energy_dt, L->next_energy, L->len);
  const unsigned want = (snap ? L->snap_want : 0u) | (off ? HY_WANT_ACC : 0u) | (energy ? HY_WANT_POT : 0u) |
                        (final ? L->final_want : 0u);
  struct hy_step_times tm;
  if (inject_test_nan(r, L, s, err) != 0 || advance(r, L, s, want, &tm, err) != 0) return -1;
  const double t = hy_sim_time(L->sim);
  if (hy_run_step_records(r, s, t, &tm, err) != 0) return -1;
  if (energy && energy_output(r, L, t, err) != 0) return -1;
  hy_run_totals_add(&L->sum, &tm);
  log_progress(r, L, s, t, final);
  if (snap && snapshot_output(r, L, t_next, t, final, err) != 0) return -1;
  return restart_point(r, L, s, t, final, err);
}

/* The steps from the start (or the restart set) to TimeEnd, and the
 * summary. */
static int integrate(struct hy_run *r, struct loop *L, struct hy_err *err) {
  double span = r->t_end - r->t0;
  if (span <= 0.0) {
    if (span < 0.0 && r->rank == 0) hy_warn("TimeEnd %g is before the ICs' time %g: nothing to integrate", r->t_end, r->t0);
    return 0;
  }
  plan_steps(r, L, span);
  for (long s = L->first_step; s <= L->n_steps && !L->stopped; s++)
    if (one_step(r, L, s, err) != 0) return -1;
  double wall = hy_wtime() - L->wall0;
  const long done = L->n_steps - L->first_step + 1;
  if (!L->stopped && done > 0)
    hy_msg("done: %ld steps in %.2f s (%.4f s per %sstep), final |dE/E| = %.3e", done, wall, wall / (double)done,
           r->scheme == HY_SCHEME_HYBRID ? "soft " : "", L->d.de_rel);
  hy_run_summary(r, &L->sum, hy_sim_time(L->sim), L->stopped);
  r->totals = L->sum;
  return 0;
}

/* The main loop; returns 0 or -1 with err set. On several ranks a failure
 * of any rank ends the run on all ranks (hy_die). */
static int simulate(struct hy_run *r, struct hy_cl *cl, struct hy_pool *pool, struct hy_err *err) {
  struct loop L;
  memset(&L, 0, sizeof L);
  L.pool = pool;
  L.f = create_force(r, cl, pool);
  L.sim = create_sim(r, L.f, pool);
  L.snap_want = HY_WANT_HOST | HY_WANT_POT | ((r->snap_fields & HY_FIELD_ACC) ? HY_WANT_ACC : 0u);
  L.final_want = r->embed ? HY_WANT_HOST | HY_WANT_ACC : 0u;
  L.first_step = L.next_snap = L.next_energy = 1;
  int rc = report_placement(r, cl, &L, err);
  if (rc == 0 && r->restart_dir)
    resume(r, &L);
  else if (rc == 0)
    rc = start(r, &L, err);
  if (rc == 0) rc = integrate(r, &L, err);
  /* a rank-local failure cannot be reported collectively: end every rank */
  if (rc != 0 && r->size > 1) hy_die("%s", err->msg); /* hy_die names the rank */
  hy_sim_free(L.sim);
  hy_force_free(L.f);
  r->force = NULL;
  return rc;
}

/* Keys a restart may change; every other key must keep its value. */
static int restart_may_change(const char *key) {
  static const char *ok[] = {"InitCondFile",       "InitCondFormat",   "TimeEnd",          "SnapshotInterval",
                             "SnapshotFields",     "NumFilesPerSnapshot", "EnergyInterval", "OpenCLDevice",
                             "RestartInterval",    "RestartEverySoftSteps", "ProgressInterval"};
  for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++)
    if (strcmp(key, ok[k]) == 0) return 1;
  return 0;
}

/* The parameters of a restart against those stored in the set: one line per
 * key that changed but may not (rank 0 reports); OutputDir must name the
 * directory being resumed. Returns 0 or -1. */
static int check_restart_params(struct hy_run *r, const char *stored, const char *name) {
  char *errors = NULL;
  struct hy_params *old = hy_params_parse_text(name, stored, NULL, 0, &errors);
  if (!old) {
    if (r->rank == 0) fprintf(stderr, "hytree: error: %s: unreadable: %s\n", name, errors ? errors : "");
    free(errors);
    return -1;
  }
  size_t n;
  const struct hy_param_def *s = hy_params_schema(&n);
  int bad = 0;
  for (size_t k = 0; k < n; k++) {
    const char *key = s[k].key;
    if (restart_may_change(key)) continue;
    const char *a = hy_params_get_str(old, key), *b = hy_params_get_str(r->par, key);
    if (strcmp(key, "OutputDir") == 0) continue; /* checked below as a directory */
    if (strcmp(a, b) != 0) {
      if (r->rank == 0)
        fprintf(stderr, "hytree: error: %s: %s may not change on a restart (the set has '%s', now '%s')\n",
                hy_params_where(r->par, key), key, a, b);
      bad = 1;
    }
  }
  struct stat s1, s2;
  const char *od = hy_params_get_str(r->par, "OutputDir");
  if (r->pfile != name && /* a parameter file was given: its OutputDir must be the resumed one */
      (stat(od, &s1) != 0 || stat(r->restart_dir, &s2) != 0 || s1.st_dev != s2.st_dev || s1.st_ino != s2.st_ino)) {
    if (r->rank == 0)
      fprintf(stderr, "hytree: error: %s: OutputDir '%s' is not the directory being resumed (%s)\n", r->pfile, od,
              r->restart_dir);
    bad = 1;
  }
  hy_params_free(old);
  return bad ? -1 : 0;
}

/* ------------------------------------------------------------- MPI setup */

/* Duplicate base (MPI_COMM_WORLD; an embedded run's MPI_COMM_SELF) with
 * MPI_ERRORS_RETURN (so MPI failures come back as codes with messages) and
 * find the node-local rank. */
static int setup_mpi(struct hy_run *r, MPI_Comm base) {
  MPI_Comm node;
  if (MPI_Comm_dup(base, &r->comm) != MPI_SUCCESS ||
      MPI_Comm_set_errhandler(r->comm, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
      MPI_Comm_rank(r->comm, &r->rank) != MPI_SUCCESS || MPI_Comm_size(r->comm, &r->size) != MPI_SUCCESS ||
      MPI_Comm_split_type(r->comm, MPI_COMM_TYPE_SHARED, r->rank, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    fputs("hytree: error: run: setting up the MPI communicators failed\n", stderr);
    return -1;
  }
  int ok = MPI_Comm_rank(node, &r->local_rank) == MPI_SUCCESS && MPI_Comm_size(node, &r->local_size) == MPI_SUCCESS;
  MPI_Comm_free(&node);
  if (!ok) {
    fputs("hytree: error: run: MPI_Comm_rank/size of the node communicator failed\n", stderr);
    return -1;
  }
  return 0;
}

/* Host threads per rank: HYTREE_NUM_THREADS, else the node's cores shared
 * by the ranks on the node. */
static int pool_threads(const struct hy_run *r) {
  int n = hy_pool_default_threads();
  const char *e = getenv("HYTREE_NUM_THREADS");
  if (e && *e) return n; /* set (an empty value counts as unset, as in hy_pool_default_threads) */
  n /= r->local_size > 0 ? r->local_size : 1;
  return n < 1 ? 1 : n;
}

/* Record the force parameters in use as the resolved values of `auto` keys
 * (ranks other than 0, and restarts, get them from elsewhere). */
static void record_resolved(struct hy_run *r) {
  static const char *keys[] = {"Softening", "R1", "R2", "AccErr"};
  const double vals[] = {r->eps, r->r1, r->r2, r->a_err};
  for (int k = 0; k < 4; k++)
    if (hy_params_is_auto(r->par, keys[k])) hy_params_set_resolved(r->par, keys[k], vals[k]);
}

/* Rank 0 resolved the `auto` values and the step from the whole IC set:
 * broadcast them so every rank runs with the same numbers. */
static int share_resolved(struct hy_run *r) {
  double v[8] = {r->G, r->eps, r->r1, r->r2, r->a_err, r->dt_h, r->t0, 0};
  if (r->size == 1) return 0;
  if (MPI_Bcast(v, 8, MPI_DOUBLE, 0, r->comm) != MPI_SUCCESS) hy_die("MPI_Bcast of the run parameters failed");
  r->G = v[0];
  r->eps = v[1];
  r->r1 = v[2];
  r->r2 = v[3];
  r->a_err = v[4];
  r->dt_h = v[5];
  r->t0 = v[6];
  record_resolved(r);
  double dt0 = 0.0;
  if (r->rank == 0 && hy_params_is_auto(r->par, "TimeStepHard")) dt0 = hy_params_get_number(r->par, "TimeStepHard");
  if (MPI_Bcast(&dt0, 1, MPI_DOUBLE, 0, r->comm) != MPI_SUCCESS) hy_die("MPI_Bcast of the run parameters failed");
  if (hy_params_is_auto(r->par, "TimeStepHard")) hy_params_set_resolved(r->par, "TimeStepHard", dt0);
  return 0;
}

/* Which rank took which device on which host (rank 0 prints the table). */
static int device_table(struct hy_run *r, const struct hy_cl *cl) {
  enum { W = 256 };
  char line[W];
  char host[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  if (MPI_Get_processor_name(host, &len) != MPI_SUCCESS) snprintf(host, sizeof host, "?");
  snprintf(line, sizeof line, "%.64s (local rank %d): %.160s", host, r->local_rank, hy_cl_description(cl));
  if (r->size == 1) {
    hy_msg("device: %s", hy_cl_description(cl));
    return 0;
  }
  char *all = r->rank == 0 ? hy_malloc("device table", (size_t)r->size, W) : NULL;
  if (MPI_Gather(line, W, MPI_CHAR, all, W, MPI_CHAR, 0, r->comm) != MPI_SUCCESS)
    hy_die("MPI_Gather of the device table failed");
  if (r->rank == 0) {
    hy_msg("devices of the %d ranks:", r->size);
    for (int k = 0; k < r->size; k++) hy_msg("  rank %d: %.*s", k, W, all + (size_t)k * W);
  }
  hy_free(all);
  return 0;
}

/* Tests: HYTREE_TEST_FILE_SIZE_LIMIT=BYTES limits every file written from
 * here on to BYTES (RLIMIT_FSIZE), so that writing a snapshot or restart set
 * fails as on a full disk (EFBIG; main ignores SIGXFSZ). Set only now, after
 * MPI and the OpenCL compiler have written their own files. */
static int test_file_size_limit(struct hy_err *err) {
  const char *e = getenv("HYTREE_TEST_FILE_SIZE_LIMIT");
  if (!e || !*e) return 0;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(e, &end, 10);
  if (errno != 0 || *end != '\0' || v == 0)
    return hy_err_set(err, "HYTREE_TEST_FILE_SIZE_LIMIT='%s': must be a positive number of bytes", e);
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0)
    return hy_err_set(err, "HYTREE_TEST_FILE_SIZE_LIMIT: getrlimit failed: %s", strerror(errno));
  rl.rlim_cur = (rlim_t)v;
  if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max) rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
    return hy_err_set(err, "HYTREE_TEST_FILE_SIZE_LIMIT: setrlimit failed: %s", strerror(errno));
  return 0;
}

/* ---------------------------------------------------------------- main */

/* The command line of `hytree run`. */
struct cmdline {
  const char *pfile, *restart_dir;
  char **ov; /* the -P overrides */
  int n_ov;
};

/* One argument, argv[*i] (an option's value moves *i on). Returns -1 to go
 * on, else the exit status. */
static int parse_arg(int argc, char **argv, int *i, struct cmdline *c) {
  const char *a = argv[*i];
  if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
    hy_run_usage(stdout, 1);
    return 0;
  } else if (strcmp(a, "--quiet") == 0) {
    hy_log_set_quiet(1);
  } else if (strcmp(a, "--restart") == 0 || strncmp(a, "--restart=", 10) == 0) {
    if (a[9] == '=') {
      c->restart_dir = a + 10;
    } else if (*i + 1 < argc) {
      c->restart_dir = argv[++*i];
    } else {
      fputs("hytree: error: run: --restart needs the output directory of the run to resume\n", stderr);
      return 2;
    }
  } else if (strcmp(a, "-P") == 0) {
    if (*i + 1 >= argc) {
      fputs("hytree: error: run: -P needs an argument Key=Value\n", stderr);
      return 2;
    }
    c->ov[c->n_ov++] = argv[++*i];
  } else if (strncmp(a, "-P", 2) == 0) {
    c->ov[c->n_ov++] = argv[*i] + 2;
  } else if (a[0] == '-' && a[1] != '\0') {
    fprintf(stderr, "hytree: error: run: unknown option '%s' (see hytree run --help)\n", a);
    return 2;
  } else if (!c->pfile) {
    c->pfile = a;
  } else {
    fprintf(stderr, "hytree: error: run: more than one parameter file ('%s' and '%s')\n", c->pfile, a);
    return 2;
  }
  return -1;
}

/* Returns -1 to go on with the run, else the exit status (0 after --help,
 * 2 on a usage error), c->ov then freed. */
static int parse_cmdline(int argc, char **argv, struct cmdline *c) {
  memset(c, 0, sizeof *c);
  c->ov = hy_malloc("overrides", (size_t)argc + 1, sizeof(char *));
  int status = -1;
  for (int i = 1; i < argc && status < 0; i++) status = parse_arg(argc, argv, &i, c);
  if (status < 0 && !c->pfile && !c->restart_dir) {
    fputs("hytree: error: run: no parameter file given\n", stderr);
    hy_run_usage(stderr, 0);
    status = 2;
  }
  if (status >= 0) hy_free(c->ov);
  return status;
}

void hy_run_print_errors(const char *errors) {
  for (const char *line = errors; line && *line;) {
    const char *nl = strchr(line, '\n');
    const int len = nl ? (int)(nl - line) : (int)strlen(line);
    fprintf(stderr, "hytree: error: %.*s\n", len, line);
    line = nl ? nl + 1 : NULL;
  }
}

/* What a restart set holds besides its state and the particles. */
struct stored {
  char *text;        /* its parameters */
  void *blob;        /* its decomposition state */
  size_t blob_bytes;
  char name[256];    /* what its parameters are called in messages */
};

/* The restart set of --restart DIR. Rank 0 reports a failure. */
static int read_restart_set(struct hy_run *r, struct stored *st) {
  struct hy_err rerr;
  if (hy_restart_read(r->comm, r->restart_dir, &r->rs, &st->text, &st->blob, &st->blob_bytes, &r->p, &rerr) != 0) {
    report(r, &rerr);
    return -1;
  }
  snprintf(st->name, sizeof st->name, "%.200s/restart (stored parameters)", r->restart_dir);
  return 0;
}

/* The parameters: the file's with the overrides or, without a file, the
 * restart set's; on a restart only some keys may differ from the set's.
 * Rank 0 reports every problem, one per line (every rank parsed the same
 * text). */
static int load_params(struct hy_run *r, const struct cmdline *c, struct stored *st) {
  r->restart_dir = c->restart_dir;
  if (c->restart_dir && read_restart_set(r, st) != 0) return -1;
  char *errors = NULL;
  if (c->pfile)
    r->par = hy_params_parse_file(c->pfile, c->ov, c->n_ov, &errors);
  else
    r->par = hy_params_parse_text(st->name, st->text, c->ov, c->n_ov, &errors);
  r->pfile = c->pfile ? c->pfile : st->name;
  if (r->par && c->restart_dir && check_restart_params(r, st->text, st->name) != 0) {
    hy_params_free(r->par);
    r->par = NULL;
  }
  if (r->par) return 0;
  if (r->rank == 0) hy_run_print_errors(errors);
  free(errors);
  return -1;
}

/* The keys read once: scheme, times, snapshot contents and units. */
static int read_run_keys(struct hy_run *r, struct hy_err *err) {
  r->outdir = r->restart_dir ? r->restart_dir : hy_params_get_str(r->par, "OutputDir");
  if (hy_scheme_parse(hy_params_get_str(r->par, "Scheme"), &r->scheme) != 0)
    return hy_err_set(err, "%s: bad Scheme", r->pfile);
  r->n_ratio = r->scheme == HY_SCHEME_HYBRID ? (int)hy_params_get_int(r->par, "SoftStepRatio") : 1;
  r->t_end = hy_params_get_number(r->par, "TimeEnd");
  r->snap_dt = hy_params_get_number(r->par, "SnapshotInterval");
  r->energy_dt = hy_params_get_number(r->par, "EnergyInterval");
  r->progress_dt = hy_params_get_number(r->par, "ProgressInterval");
  r->snap_fields = (hy_params_list_has(r->par, "SnapshotFields", "Acceleration") ? HY_FIELD_ACC : 0u) |
                   (hy_params_list_has(r->par, "SnapshotFields", "Potential") ? HY_FIELD_POT : 0u);
  r->snap_files = (int)hy_params_get_int(r->par, "NumFilesPerSnapshot");
  r->units.length_cm = hy_params_get_number(r->par, "UnitLength_in_cm");
  r->units.mass_g = hy_params_get_number(r->par, "UnitMass_in_g");
  r->units.velocity_cm_per_s = hy_params_get_number(r->par, "UnitVelocity_in_cm_per_s");
  if (r->snap_files > r->size)
    return hy_err_set(err, "%s: NumFilesPerSnapshot %d is larger than the number of MPI ranks (%d)",
                      hy_params_where(r->par, "NumFilesPerSnapshot"), r->snap_files, r->size);
  return 0;
}

/* The opening criterion: r->mac_alpha (0: the absolute one). */
static void read_criterion(struct hy_run *r) {
  const char *c = hy_params_get_str(r->par, "OpeningCriterion");
  const int rel = strcmp(c, "relative") == 0 || strcmp(c, "both") == 0;
  r->mac_both = strcmp(c, "both") == 0;
  r->mac_alpha = rel && r->scheme != HY_SCHEME_DIRECT ? hy_params_get_number(r->par, "ErrTolForceAcc") : 0.0;
}

/* ParticleState device needs the device paths that keep the state there. */
static int check_particle_state(const struct hy_run *r, struct hy_err *err) {
  if (strcmp(hy_params_get_str(r->par, "ParticleState"), "device") != 0) return 0;
  const char *why = r->size > 1 && r->scheme != HY_SCHEME_HYBRID ? "Scheme hybrid on several MPI ranks"
                    : strcmp(hy_params_get_str(r->par, "TreeBuild"), "host") == 0 ? "TreeBuild device or auto"
                    : r->scheme == HY_SCHEME_DIRECT                                 ? "Scheme hybrid or tree"
                                                                                    : NULL;
  if (why)
    return hy_err_set(err, "%s: ParticleState device needs %s; use auto or host",
                      hy_params_where(r->par, "ParticleState"), why);
  return 0;
}

static int read_domain_grid(const struct hy_run *r, int grid[3], struct hy_err *err) {
  if (hy_decomp_parse_grid(hy_params_get_str(r->par, "DomainGrid"), r->size, grid, err) != 0)
    return err_prefix(err, hy_params_where(r->par, "DomainGrid"));
  return 0;
}

/* When to write restart sets, and the test hooks of the loop. */
static void read_restart_keys(struct hy_run *r) {
  r->restart_minutes = hy_params_get_number(r->par, "RestartInterval");
  r->restart_every = hy_params_get_int(r->par, "RestartEverySoftSteps");
  const char *e = getenv("HYTREE_TEST_SIGNAL_AT_STEP"); /* tests: raise SIGTERM after this step */
  r->test_signal_step = e ? atol(e) : 0;
  e = getenv("HYTREE_TEST_NAN_AT_STEP"); /* tests: a NaN velocity on rank 0 before this step */
  r->test_nan_step = e ? atol(e) : 0;
  e = getenv("HYTREE_TEST_KILL_IN_RESTART"); /* tests: SIGKILL while writing the K-th restart set */
  r->test_kill_write = e ? atoi(e) : 0;
}

static int install_signal_handlers(struct hy_err *err) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  if (sigemptyset(&sa.sa_mask) != 0 || sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0)
    return hy_err_set(err, "run: cannot install the SIGTERM/SIGUSR1 handlers: %s", strerror(errno));
  return 0;
}

/* The settings of the run from its parameters; reports a failure. */
static int read_settings(struct hy_run *r, int grid[3], struct hy_err *err) {
  int rc = read_run_keys(r, err);
  if (rc == 0) rc = check_particle_state(r, err);
  if (rc == 0) read_criterion(r);
  if (rc == 0) {
    hy_shm_set_use(strcmp(hy_params_get_str(r->par, "NodeSharedMemory"), "yes") == 0);
    rc = read_domain_grid(r, grid, err);
  }
  if (rc == 0) {
    hy_msg("%s: %s run on %d MPI rank%s, parameters from %s", PACKAGE_STRING, hy_scheme_name(r->scheme), r->size,
           r->size > 1 ? "s" : "", r->pfile);
    read_restart_keys(r);
    if (!r->embed) rc = install_signal_handlers(err); /* a bench's SIGTERM ends it */
  }
  if (rc != 0) report(r, err);
  return rc;
}

/* Rank 0: the ICs and the `auto` values resolved from them. */
static int load_and_resolve(struct hy_run *r, struct hy_pool *pool, struct hy_err *err) {
  double t0 = hy_wtime();
  int rc = load_ics(r, err);
  if (rc == 0)
    hy_msg("loaded %zu particles from %s in %.2f s (t = %g)", r->p.n, hy_params_get_str(r->par, "InitCondFile"),
           hy_wtime() - t0, r->t0);
  if (rc == 0) rc = resolve(r, pool, err);
  return rc;
}

/* A restart runs with the force parameters and the step of its set. */
static void restore_resolved(struct hy_run *r) {
  r->t0 = r->rs.t0;
  r->G = r->rs.G;
  r->eps = r->rs.eps;
  r->r1 = r->rs.r1;
  r->r2 = r->rs.r2;
  r->a_err = r->rs.a_err;
  r->dt_h = r->rs.dt_h;
  record_resolved(r);
  if (hy_params_is_auto(r->par, "TimeStepHard")) hy_params_set_resolved(r->par, "TimeStepHard", r->dt_h);
}

/* 1. initial conditions (rank 0) and 2. auto parameters from the whole set,
 * or, on a restart, the state of the restart set */
static int initial_state(struct hy_run *r, struct hy_pool *pool, struct hy_err *err) {
  int rc = 0;
  if (r->restart_dir)
    restore_resolved(r);
  else if (r->rank == 0)
    rc = load_and_resolve(r, pool, err);
  if (hy_run_bcast_status(r, rc, err) != 0) {
    report(r, err);
    return -1;
  }
  if (!r->restart_dir && share_resolved(r) != 0) return -1;
  if (r->scheme == HY_SCHEME_HYBRID)
    hy_msg("G = %.9g  eps = %.6g  R1 = %.6g  R2 = %.6g  a_err = %.6g  dt_h = %.6g  n = %d  dt_s = %.6g", r->G,
           r->eps, r->r1, r->r2, r->a_err, r->dt_h, r->n_ratio, r->dt_h * r->n_ratio);
  else
    hy_msg("G = %.9g  eps = %.6g  a_err = %.6g  dt = %.6g", r->G, r->eps, r->a_err, r->dt_h);
  return 0;
}

/* Several ranks: rank 0's ICs scattered (a restart's particles are on their
 * ranks already) and the domain decomposition set up. */
static int distribute(struct hy_run *r, const int grid[3], struct hy_pool *pool, const struct stored *st,
                      struct hy_err *err) {
  if (!r->restart_dir) {
    struct hy_part full = r->p; /* rank 0: every particle; others: none */
    hy_part_init(&r->p);
    int rc = hy_io_scatter_mpi(r->comm, &full, &r->p, err);
    hy_part_free(&full);
    if (rc != 0) {
      report(r, err);
      return -1;
    }
  }
  r->dd = hy_decomp_create(r->comm, grid, hy_params_get_number(r->par, "SampleRate"),
                           hy_params_get_number(r->par, "DomainSmoothing"), 12345, err);
  if (!r->dd) {
    report(r, err);
    return -1;
  }
  hy_decomp_set_pool(r->dd, pool);
  if (r->restart_dir && any_failed(r, hy_decomp_state_load(r->dd, st->blob, st->blob_bytes, err), err)) return -1;
  r->dd_cost_walk = strcmp(hy_params_get_str(r->par, "DomainCost"), "walktime") == 0;
  hy_msg("domain grid %dx%dx%d, sample rate %g, boundary smoothing %g, samples weighted by %s", grid[0], grid[1],
         grid[2], hy_params_get_number(r->par, "SampleRate"), hy_params_get_number(r->par, "DomainSmoothing"),
         r->dd_cost_walk ? "the walks' measured time per particle (DomainCost walktime)"
                         : "particle count (DomainCost particles)");
  return 0;
}

/* 3. device and kernels (every rank; one GPU per rank by node-local rank) */
static int open_device(struct hy_run *r, struct hy_cl **cl, struct hy_err *err) {
  struct hy_cl_opts o = {.kind = HY_CL_ANY, .platform = -1, .device = -1, .local_rank = r->local_rank,
                         .nvec = (int)hy_params_get_int(r->par, "NVec"), .mac_rel = r->mac_alpha > 0};
  int kind, pl, dv;
  hy_params_get_device(r->par, &kind, &pl, &dv);
  o.kind = kind == 1 ? HY_CL_GPU : kind == 2 ? HY_CL_CPU : kind == 3 ? HY_CL_EXPLICIT : HY_CL_ANY;
  o.platform = pl;
  o.device = dv;
  o.origin = hy_params_where(r->par, "OpenCLDevice");
  int rc = hy_cl_create(cl, &o, err);
  if (any_failed(r, rc, err)) return -1;
  if (!hy_log_quiet() && r->rank == 0) hy_cl_print_devices(stdout, *cl);
  if (device_table(r, *cl) != 0) return -1;
  double t0 = hy_wtime();
  rc = hy_cl_build_all(*cl, err);
  if (any_failed(r, rc, err)) return -1;
  hy_msg("kernels built in %.2f s", hy_wtime() - t0);
  return 0;
}

/* 4. outputs (nothing was written before this point) */
static int open_outputs(struct hy_run *r, struct hy_err *err) {
  int rc = test_file_size_limit(err);
  if (any_failed(r, rc, err)) return -1;
  rc = hy_trace_open(r->comm, err); /* HYTREE_TRACE */
  if (any_failed(r, rc, err)) return -1;
  r->params_text = hy_params_dump(r->par);
  r->params_used = hy_params_dump_used(r->par);
  rc = r->rank == 0 ? hy_run_open_files(r, err) : 0;
  if (hy_run_bcast_status(r, rc, err) != 0) {
    report(r, err);
    return -1;
  }
  return 0;
}

/* Close the outputs, those of a failed run too; returns the exit status. */
static int close_outputs(struct hy_run *r, int status, struct hy_err *err) {
  if (hy_trace_close(err) != 0) { /* HYTREE_TRACE: the timeline, also of a failed run */
    fprintf(stderr, "hytree: error: [rank %d] %s\n", r->rank, err->msg);
    status = 1;
  }
  return hy_run_close_files(r, status);
}

/* An embedded run after its last step: its figures and the caller's look
 * at the final particles. */
static int embedded_end(struct hy_run *r, struct hy_cl *cl, struct hy_pool *pool, struct hy_err *err) {
  struct hy_run_embed *e = r->embed;
  e->n = r->p.n;
  e->t0 = r->t0;
  e->steps = r->totals.steps;
  e->wall = r->totals.wall;
  e->max_de = r->totals.max_de;
  e->inter = r->totals.inter;
  e->kernel = r->totals.kernel;
  return e->at_end ? e->at_end(e->ctx, cl, pool, &r->p, r->G, r->eps, err) : 0;
}

/* The run from its parameters on: set-up, outputs, the main loop. Returns
 * the exit status. */
static int set_up_and_run(struct hy_run *r, const struct stored *st, struct hy_pool *pool, struct hy_cl **cl) {
  struct hy_err err;
  int grid[3];
  int rc = read_settings(r, grid, &err);
  if (rc == 0) rc = initial_state(r, pool, &err);
  if (rc == 0 && r->size > 1) rc = distribute(r, grid, pool, st, &err);
  if (rc == 0) rc = open_device(r, cl, &err);
  if (rc == 0) rc = open_outputs(r, &err);
  if (rc == 0 && simulate(r, *cl, pool, &err) != 0) {
    report(r, &err);
    rc = -1;
  }
  if (rc == 0 && r->embed && embedded_end(r, *cl, pool, &err) != 0) {
    report(r, &err);
    rc = -1;
  }
  return close_outputs(r, rc == 0 ? 0 : 1, &err);
}

static void release(struct hy_run *r, struct stored *st, struct hy_pool *pool, struct hy_cl *cl) {
  hy_decomp_free(r->dd);
  hy_free(st->text);
  hy_free(st->blob);
  MPI_Comm_free(&r->comm);
  free(r->params_text);
  free(r->params_used);
  hy_cl_free(cl);
  hy_pool_free(pool);
  hy_part_free(&r->p);
  hy_params_free(r->par);
}

int hy_cmd_run(int argc, char **argv) {
  struct cmdline c;
  const int usage_status = parse_cmdline(argc, argv, &c);
  if (usage_status >= 0) return usage_status;
  struct hy_run r;
  memset(&r, 0, sizeof r);
  hy_part_init(&r.p);
  r.pfile = c.pfile;
  if (setup_mpi(&r, MPI_COMM_WORLD) != 0) {
    hy_free(c.ov);
    return 1;
  }
  struct stored st;
  memset(&st, 0, sizeof st);
  const int loaded = load_params(&r, &c, &st);
  hy_free(c.ov);
  struct hy_pool *pool = NULL;
  struct hy_cl *cl = NULL;
  int status = 1;
  if (loaded == 0) {
    pool = hy_pool_create(pool_threads(&r));
    status = set_up_and_run(&r, &st, pool, &cl);
  }
  release(&r, &st, pool, cl);
  return status;
}

int hy_run_embedded(struct hy_params *par, const char *name, struct hy_run_embed *e) {
  struct hy_run r;
  memset(&r, 0, sizeof r);
  hy_part_init(&r.p);
  r.pfile = name;
  r.embed = e;
  if (setup_mpi(&r, MPI_COMM_SELF) != 0) return 1;
  r.par = par;
  struct stored st;
  memset(&st, 0, sizeof st);
  struct hy_pool *pool = hy_pool_create(pool_threads(&r));
  struct hy_cl *cl = NULL;
  const int status = set_up_and_run(&r, &st, pool, &cl);
  r.par = NULL; /* the caller's */
  release(&r, &st, pool, cl);
  return status;
}
