# scripts: hytree-sweep (bindir) and the plot scripts ($(pkgdatadir)/scripts).
# Each is made from its .in file at make time: its first line names the
# Python that configure found (PYTHON3; else the first python3 on PATH),
# so that it runs with the interpreter that has numpy, h5py and
# matplotlib, and hytree-sweep knows $(pkgdatadir) (where collect --plot
# finds the plot scripts).
HY_PLOTS = scripts/hytree-plot-energy scripts/hytree-plot-timings \
	scripts/hytree-plot-sweep scripts/hytree-plot-density scripts/hytree-plot-lagrangian \
	scripts/hytree-plot-bench
bin_SCRIPTS += scripts/hytree-sweep
hytreescriptsdir = $(pkgdatadir)/scripts
hytreescripts_SCRIPTS = $(HY_PLOTS)
dist_hytreescripts_DATA = scripts/hytree_plot_common.py
CLEANFILES += scripts/hytree-sweep $(HY_PLOTS) scripts/common-stamp
EXTRA_DIST += scripts/hytree-sweep.in scripts/hytree-plot-energy.in scripts/hytree-plot-timings.in \
	scripts/hytree-plot-sweep.in scripts/hytree-plot-density.in scripts/hytree-plot-lagrangian.in \
	scripts/hytree-plot-bench.in
scripts/hytree-sweep: $(srcdir)/scripts/hytree-sweep.in Makefile
	$(AM_V_GEN)$(MKDIR_P) scripts && rm -f $@ $@.tmp && \
	sed -e 's|@pkgdatadir[@]|$(pkgdatadir)|g' -e '1s|@PYTHON[@]|$(HY_PYTHON)|' \
	  $(srcdir)/scripts/hytree-sweep.in >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@
hy_plot_script = $(AM_V_GEN)$(MKDIR_P) scripts && rm -f $@ $@.tmp && \
	sed -e '1s|@PYTHON[@]|$(HY_PYTHON)|' $(srcdir)/$@.in >$@.tmp && chmod +x $@.tmp && mv $@.tmp $@
scripts/hytree-plot-energy: $(srcdir)/scripts/hytree-plot-energy.in Makefile scripts/common-stamp
	$(hy_plot_script)
scripts/hytree-plot-timings: $(srcdir)/scripts/hytree-plot-timings.in Makefile scripts/common-stamp
	$(hy_plot_script)
scripts/hytree-plot-sweep: $(srcdir)/scripts/hytree-plot-sweep.in Makefile scripts/common-stamp
	$(hy_plot_script)
scripts/hytree-plot-density: $(srcdir)/scripts/hytree-plot-density.in Makefile scripts/common-stamp
	$(hy_plot_script)
scripts/hytree-plot-lagrangian: $(srcdir)/scripts/hytree-plot-lagrangian.in Makefile scripts/common-stamp
	$(hy_plot_script)
scripts/hytree-plot-bench: $(srcdir)/scripts/hytree-plot-bench.in Makefile scripts/common-stamp
	$(hy_plot_script)
# the plot scripts import hytree_plot_common from their own directory: in a
# build outside the source tree, a copy beside them
scripts/common-stamp: $(srcdir)/scripts/hytree_plot_common.py
	$(AM_V_GEN)$(MKDIR_P) scripts && \
	{ test scripts/hytree_plot_common.py -ef $(srcdir)/scripts/hytree_plot_common.py || \
	  cp $(srcdir)/scripts/hytree_plot_common.py scripts/; } && touch $@

# tests of hytree-sweep and the plot scripts (tests/local.mk sets the
# environment: HYTREE, HYTREE_SWEEP, HYTREE_SCRIPTS_DIR, PYTHON)
TESTS += tests/plot_scripts.sh tests/sweep.sh
EXTRA_DIST += tests/plot_scripts.sh tests/sweep.sh tests/check_plot_figures.py
