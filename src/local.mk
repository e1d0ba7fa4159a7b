# The hytree library (static, no libtool) and the hytree program.
noinst_LIBRARIES += src/libhytree.a
src_libhytree_a_SOURCES = \
	src/alloc.c src/alloc.h \
	src/log.c src/log.h \
	src/part.c src/part.h \
	src/io.h src/ic.h
nodist_src_libhytree_a_SOURCES =

bin_PROGRAMS += hytree
hytree_SOURCES = src/main.c
hytree_LDADD = src/libhytree.a $(HY_LIBS)

include src/io.mk
include src/params.mk
