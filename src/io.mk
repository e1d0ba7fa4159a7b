# IO and IC sources (owned by the io/ic modules).
src_libhytree_a_SOURCES += src/io_internal.h src/io_common.c src/io_hdf5.c src/io_gadget.c src/io_tipsy.c \
	src/io_mpi.c src/io_mpi.h \
	src/ic_internal.h src/ic_common.c src/ic_plummer.c src/ic_hernquist.c src/ic_king.c \
	src/ic_uniform.c src/cmd_ic.c
dist_doc_DATA += doc/formats.md doc/ic.md
