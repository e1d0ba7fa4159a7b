# The hytree library (static, no libtool) and the hytree program.
noinst_LIBRARIES += src/libhytree.a
src_libhytree_a_SOURCES = \
	src/alloc.c src/alloc.h src/stream.h \
	src/log.c src/log.h \
	src/part.c src/part.h \
	src/io.h src/ic.h \
	src/threads.c src/threads.h src/worker.c src/worker.h \
	src/tree.c src/tree.h src/tree_internal.h src/tree_sort.c src/tree_points.c src/split.h \
	src/force_cpu.c src/force_cpu.h src/force.c src/force.h src/force_internal.h src/force_state.c src/force_let.c \
	src/diag.c src/diag.h src/sim.c src/sim.h src/let.c src/let.h src/shm.c src/shm.h \
	src/cl_engine.c src/cl_engine.h src/cl_internal.h src/cl_core.c src/cl_core.h src/cl_build.c src/cl_state.c \
	src/cl_let.c src/cl_check.c src/cl_check.h \
	src/decomp.c src/decomp.h src/decomp_internal.h src/decomp_cut.c src/decomp_cost.c \
	src/decomp_exchange.c src/restart.c src/restart.h src/lsan.h \
	src/trace.c src/trace.h src/bench_ref.c src/bench_ref.h
nodist_src_libhytree_a_SOURCES = src/cl_sources.c

bin_PROGRAMS += hytree
hytree_SOURCES = src/main.c src/run.c src/run.h src/run_internal.h src/run_output.c src/bench.c src/bench.h \
	src/bench_internal.h src/bench_time.c
hytree_LDADD = src/libhytree.a $(HY_LIBS)

include src/io.mk
include src/params.mk
