# Build-time helper: turns OpenCL sources into C byte arrays.
noinst_PROGRAMS += tools/hy-embed
tools_hy_embed_SOURCES = tools/embed.c
