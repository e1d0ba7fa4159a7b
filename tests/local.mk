# Tests: run by `make check` through automake's parallel harness.
# Exit codes: 0 pass, 77 skip, 99 hard error.
TEST_EXTENSIONS = .sh
SH_LOG_COMPILER = $(SHELL)
AM_TESTS_ENVIRONMENT = \
	top_builddir='$(abs_top_builddir)'; top_srcdir='$(abs_top_srcdir)'; \
	HYTREE='$(abs_top_builddir)/hytree$(EXEEXT)'; \
	MPIEXEC='$(MPIEXEC)'; MPIEXEC_PREFLAGS='$(MPIEXEC_PREFLAGS)'; \
	POCL_CACHE_DIR='$(abs_top_builddir)/tests/pocl-cache'; \
	POCL_CPU_MAX_CU_COUNT=2; POCL_MAX_PTHREAD_COUNT=2; \
	OMPI_MCA_rmaps_base_oversubscribe=1; \
	HYTREE_SWEEP='$(abs_top_builddir)/scripts/hytree-sweep'; \
	HYTREE_SCRIPTS_DIR='$(abs_top_builddir)/scripts'; PYTHON='$(PYTHON3)'; \
	MAKE='$(MAKE)'; HY_BINDIR='$(bindir)'; HY_PKGDATADIR='$(pkgdatadir)'; \
	HY_MANDIR='$(mandir)'; HY_DOCDIR='$(docdir)'; \
	export top_builddir top_srcdir HYTREE MPIEXEC MPIEXEC_PREFLAGS POCL_CACHE_DIR \
	  POCL_CPU_MAX_CU_COUNT POCL_MAX_PTHREAD_COUNT OMPI_MCA_rmaps_base_oversubscribe \
	  HYTREE_SWEEP HYTREE_SCRIPTS_DIR PYTHON MAKE HY_BINDIR HY_PKGDATADIR HY_MANDIR HY_DOCDIR;
EXTRA_DIST += tests/hy_test.h tests/hy_test_mpi.h tests/readme_command.sh
# --enable-sanitizer (CI: address,undefined in build-asan/): every test runs
# with leak detection (before MPI_Finalize, src/lsan.h) and the LeakSanitizer
# suppressions of tests/lsan.supp (the MPI library stack only), and with
# UndefinedBehaviorSanitizer findings fatal (halt_on_error=1, with a stack).
# The leak check does not scan thread-local storage (use_tls=0): now and then
# LeakSanitizer's own tracer thread crashed reading a bogus dynamic-TLS range
# of the main thread ("Tracer caught signal 11", a crash of the sanitizer
# runtime, not a finding), first in tests/bench.sh, then in a 1-rank run of
# tests/plummer_energy.sh. hytree keeps nothing in thread-local storage; what
# that leaves unreachable is third-party (tests/lsan.supp: libhdf5).
# HYTREE_SANITIZER_BUILD=1 tells the long physics runs that this build only
# looks for memory and undefined-behaviour errors (tests/plummer_energy.sh
# then runs a shorter stretch of the same code; the plain build keeps the
# full physics checks).
# Options already in the environment come after ours, so they win.
if HY_SANITIZER
AM_TESTS_ENVIRONMENT += \
	ASAN_OPTIONS="detect_leaks=1:abort_on_error=0$${ASAN_OPTIONS:+:$$ASAN_OPTIONS}"; \
	LSAN_OPTIONS="suppressions=$(abs_top_srcdir)/tests/lsan.supp:print_suppressions=0:use_tls=0$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}"; \
	UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1$${UBSAN_OPTIONS:+:$$UBSAN_OPTIONS}"; \
	HYTREE_SANITIZER_BUILD=1; \
	export ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS HYTREE_SANITIZER_BUILD;
endif
EXTRA_DIST += tests/lsan.supp
HY_TESTLIBS = src/libhytree.a $(HY_LIBS)

include tests/io.mk
include tests/params.mk
include tests/fuzz.mk

check_PROGRAMS += tests/test_tree tests/test_dll
TESTS += tests/test_tree tests/test_dll
tests_test_tree_LDADD = $(HY_TESTLIBS)
tests_test_dll_LDADD = $(HY_TESTLIBS)

check_PROGRAMS += tests/test_forces
TESTS += tests/test_forces
tests_test_forces_LDADD = $(HY_TESTLIBS)

check_PROGRAMS += tests/test_kepler
TESTS += tests/test_kepler
tests_test_kepler_LDADD = $(HY_TESTLIBS)

TESTS += tests/plummer_energy.sh
EXTRA_DIST += tests/plummer_energy.sh
# every combination of Scheme, ParticleState, TreeBuild and SnapshotFields
# on 1 and 2 ranks against a direct sum and the host path
TESTS += tests/config_matrix.sh
EXTRA_DIST += tests/config_matrix.sh tests/config_matrix.py

check_PROGRAMS += tests/check_snapshot
tests_check_snapshot_LDADD = $(HY_TESTLIBS)
check_PROGRAMS += tests/snap_orbit
tests_snap_orbit_LDADD = $(HY_TESTLIBS)
TESTS += tests/snapshot_times.sh
EXTRA_DIST += tests/snapshot_times.sh
TESTS += tests/galaxy_snapshot.sh
EXTRA_DIST += tests/galaxy_snapshot.sh
# Bad input: every file of the corpus tests/bad-input/ (parameter files and
# damaged IC files, each with NAME.expect) fails with one clear line and no
# output. The directory is distributed whole.
TESTS += tests/bad_input_corpus.sh
EXTRA_DIST += tests/bad_input_corpus.sh tests/bad-input
TESTS += tests/cl_layers.sh
EXTRA_DIST += tests/cl_layers.sh
TESTS += tests/mpi_run.sh
EXTRA_DIST += tests/mpi_run.sh tests/same_run.sh
# every step in the log of a run under the MPI launcher (pipe and terminal)
TESTS += tests/progress_log.sh
EXTRA_DIST += tests/progress_log.sh
# tools/scaling.sh's strong and weak tables
TESTS += tests/scaling_tool.sh
EXTRA_DIST += tests/scaling_tool.sh

check_PROGRAMS += tests/test_decomp
tests_test_decomp_LDADD = $(HY_TESTLIBS)
TESTS += tests/decomp_mpi.sh
EXTRA_DIST += tests/decomp_mpi.sh

check_PROGRAMS += tests/test_let
tests_test_let_LDADD = $(HY_TESTLIBS)
TESTS += tests/let_mpi.sh
EXTRA_DIST += tests/let_mpi.sh

check_PROGRAMS += tests/test_mpi_forces
tests_test_mpi_forces_LDADD = $(HY_TESTLIBS)
TESTS += tests/mpi_forces.sh
EXTRA_DIST += tests/mpi_forces.sh

# ThreadSanitizer check of the overlap path (device thread + MPI main thread):
# `make check-tsan` builds the rank-invariance test and the library with
# -fsanitize=thread and runs the separate-LET walk (local walk overlapped with
# the LET exchange) on 2 ranks. Reports from inside the MPI and OpenCL
# libraries, which are not instrumented, are suppressed (tests/tsan.supp);
# any report in hytree's code fails the target.
EXTRA_PROGRAMS = tests/tsan_mpi_forces
tests_tsan_mpi_forces_SOURCES = tests/test_mpi_forces.c $(src_libhytree_a_SOURCES)
nodist_tests_tsan_mpi_forces_SOURCES = src/cl_sources.c
tests_tsan_mpi_forces_CFLAGS = $(AM_CFLAGS) -fsanitize=thread -fno-omit-frame-pointer -g -O1
tests_tsan_mpi_forces_LDFLAGS = $(AM_LDFLAGS) -fsanitize=thread
tests_tsan_mpi_forces_LDADD = $(HY_LIBS)
EXTRA_DIST += tests/tsan.supp tests/tsan_overlap.sh
CLEANFILES += tests/tsan_mpi_forces

check-tsan: tests/tsan_mpi_forces$(EXEEXT)
	top_builddir='$(abs_top_builddir)' top_srcdir='$(abs_top_srcdir)' MPIEXEC='$(MPIEXEC)' \
	MPIEXEC_PREFLAGS='$(MPIEXEC_PREFLAGS)' POCL_CACHE_DIR='$(abs_top_builddir)/tests/pocl-cache' \
	$(SHELL) $(srcdir)/tests/tsan_overlap.sh
.PHONY: check-tsan

TESTS += tests/restart.sh
EXTRA_DIST += tests/restart.sh

TESTS += tests/bench.sh
EXTRA_DIST += tests/bench.sh

# The man page renders without warnings and documents every subcommand and
# environment variable.
TESTS += tests/man_page.sh
EXTRA_DIST += tests/man_page.sh

# make install DESTDIR=... from the build tree; the installed binary runs
# from another directory.
TESTS += tests/install.sh
EXTRA_DIST += tests/install.sh

# Test byproducts in the build tree (the pocl kernel cache, temporary
# directories of interrupted tests), so that distclean leaves nothing.
clean-local:
	-rm -rf tests/pocl-cache tests/tmp-*

# Snapshot layout for yt/pynbody (tests/check_layout.py, /usr/bin/python3 with
# h5py and numpy) and snapshots read back as initial conditions.
TESTS += tests/snapshot_layout.sh
EXTRA_DIST += tests/snapshot_layout.sh tests/check_layout.py
# yt loads a snapshot with the units and the box stored in it (skips without yt)
TESTS += tests/yt_load.sh
EXTRA_DIST += tests/yt_load.sh tests/yt_load.py

TESTS += tests/nan_fault.sh
EXTRA_DIST += tests/nan_fault.sh

# A particle 1e12 away from a Plummer sphere: keys and the float frame follow
# the bulk (hy_tree_robust_cube); forces match a direct sum.
TESTS += tests/escaper.sh
EXTRA_DIST += tests/escaper.sh

# A full disk (a file-size limit) while a snapshot or a restart set is written:
# one clear line, earlier snapshots and restart sets bitwise intact.
TESTS += tests/disk_full.sh
EXTRA_DIST += tests/disk_full.sh

# OpenCL failures on one rank: a kernel that does not compile shows its build
# log; too little device memory names the bytes needed and free.
TESTS += tests/device_faults.sh
EXTRA_DIST += tests/device_faults.sh
