# Build-time helper: turns OpenCL sources into C byte arrays.
noinst_PROGRAMS += tools/hy-embed
tools_hy_embed_SOURCES = tools/embed.c

# Benchmark helper: LET sizes against the rank count (P4 Fig. 4), no device.
noinst_PROGRAMS += tools/let_counts
tools_let_counts_SOURCES = tools/let_counts.c
tools_let_counts_LDADD = src/libhytree.a $(HY_LIBS)

# Host tree build timing (not a test): tools/bench_tree -N N -t THREADS -r REPS
noinst_PROGRAMS += tools/bench_tree
tools_bench_tree_SOURCES = tools/bench_tree.c tools/tool_args.h
tools_bench_tree_LDADD = src/libhytree.a $(HY_LIBS)

# Decomposition cut timing (not a test): mpirun -n 4 tools/bench_cut -n 262144 -t 16
noinst_PROGRAMS += tools/bench_cut
tools_bench_cut_SOURCES = tools/bench_cut.c tools/tool_args.h
tools_bench_cut_LDADD = src/libhytree.a $(HY_LIBS)

# Device tree build timing (not a test): tools/bench_devbuild -d gpu -s merge 190000
noinst_PROGRAMS += tools/bench_devbuild
tools_bench_devbuild_SOURCES = tools/bench_devbuild.c
tools_bench_devbuild_LDADD = src/libhytree.a $(HY_LIBS)

# Benchmark driver (not installed): tools/benchmark.sh -N N -d gpu
EXTRA_DIST += tools/benchmark.sh tools/scaling.sh tools/device_work.sh tools/trace_report.py tools/energy_seeds.sh

# A second command queue beside a long kernel (not a test): tools/bench_queues -d gpu
noinst_PROGRAMS += tools/bench_queues
tools_bench_queues_SOURCES = tools/bench_queues.c
tools_bench_queues_LDADD = $(OPENCL_LIBS)
