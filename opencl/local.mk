# OpenCL kernels: plain OpenCL C 1.2, embedded into the binary at build time,
# and installed for reference (HYTREE_KERNEL_DIR can load edited copies).
HY_CL_SOURCES = opencl/walk.cl opencl/direct.cl opencl/build.cl opencl/state.cl opencl/let.cl
dist_pkgdata_DATA += $(HY_CL_SOURCES) include/hy_shared.h

src/cl_sources.c: tools/hy-embed$(EXEEXT) $(HY_CL_SOURCES) $(top_srcdir)/include/hy_shared.h
	$(AM_V_GEN)$(MKDIR_P) src && tools/hy-embed$(EXEEXT) $@ \
	  hy_cl_source_walk=$(top_srcdir)/include/hy_shared.h+$(top_srcdir)/opencl/walk.cl \
	  hy_cl_source_direct=$(top_srcdir)/include/hy_shared.h+$(top_srcdir)/opencl/direct.cl \
	  hy_cl_source_build=$(top_srcdir)/include/hy_shared.h+$(top_srcdir)/opencl/build.cl \
	  hy_cl_source_state=$(top_srcdir)/include/hy_shared.h+$(top_srcdir)/opencl/state.cl \
	  hy_cl_source_let=$(top_srcdir)/include/hy_shared.h+$(top_srcdir)/opencl/let.cl
CLEANFILES += src/cl_sources.c
