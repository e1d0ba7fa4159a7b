# Build-time helper: turns OpenCL sources into C byte arrays.
noinst_PROGRAMS += tools/hy-embed
tools_hy_embed_SOURCES = tools/embed.c

# Benchmark helper: LET sizes against the rank count (Watanabe & Nakasato's Fig. 4), no device.
noinst_PROGRAMS += tools/let_counts
tools_let_counts_SOURCES = tools/let_counts.c
tools_let_counts_LDADD = src/libhytree.a $(HY_LIBS)

# Benchmark driver (not installed): tools/benchmark.sh -N N -d gpu
EXTRA_DIST += tools/benchmark.sh tools/scaling.sh tools/trace_report.py tools/plot_vs_bonsai.py
# The cl_*.c files' calls between each other, checked for cycles (tests/cl_layers.sh)
EXTRA_DIST += tools/cl_deps.py
