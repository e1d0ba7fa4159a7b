# scripts: hytree-sweep (bindir) and the plot scripts ($(pkgdatadir)/scripts).
# hytree-sweep is made from hytree-sweep.in at make time so that it knows
# $(pkgdatadir) (where collect --plot finds the plot scripts).
bin_SCRIPTS += scripts/hytree-sweep
CLEANFILES += scripts/hytree-sweep
EXTRA_DIST += scripts/hytree-sweep.in
scripts/hytree-sweep: $(srcdir)/scripts/hytree-sweep.in Makefile
	$(AM_V_GEN)$(MKDIR_P) scripts && rm -f $@ $@.tmp && \
	sed -e 's|@pkgdatadir[@]|$(pkgdatadir)|g' $(srcdir)/scripts/hytree-sweep.in >$@.tmp && \
	chmod +x $@.tmp && mv $@.tmp $@

hytreescriptsdir = $(pkgdatadir)/scripts
dist_hytreescripts_SCRIPTS = scripts/hytree-plot-energy scripts/hytree-plot-timings \
	scripts/hytree-plot-sweep scripts/hytree-plot-density scripts/hytree-plot-lagrangian
dist_hytreescripts_DATA = scripts/hytree_plot_common.py

# tests of hytree-sweep and the plot scripts (tests/local.mk sets the
# environment: HYTREE, HYTREE_SWEEP, HYTREE_SCRIPTS_DIR, PYTHON)
TESTS += tests/plot_scripts.sh tests/sweep.sh
EXTRA_DIST += tests/plot_scripts.sh tests/sweep.sh
