# parameter parser sources
src_libhytree_a_SOURCES += src/params.c src/params.h src/param_schema.c
