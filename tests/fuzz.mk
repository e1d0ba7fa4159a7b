# Fuzz harnesses (tests/fuzz/fuzz_*.c). tools/fuzz.sh builds them with
# libFuzzer; here each is linked with tests/fuzz/driver.c instead, and
# tests/fuzz_regress.sh runs it over its seed corpus (tests/fuzz/corpus/T)
# and the inputs of earlier findings (tests/fuzz/regress/T): no clang needed.
check_PROGRAMS += tests/fuzz/regress_params tests/fuzz/regress_gadget tests/fuzz/regress_hdf5
tests_fuzz_regress_params_SOURCES = tests/fuzz/fuzz_params.c tests/fuzz/driver.c
tests_fuzz_regress_params_LDADD = $(HY_TESTLIBS)
tests_fuzz_regress_gadget_SOURCES = tests/fuzz/fuzz_gadget.c tests/fuzz/driver.c \
	tests/fuzz/fuzz_file.h tests/fuzz/fuzz_ic_check.h
tests_fuzz_regress_gadget_LDADD = $(HY_TESTLIBS)
tests_fuzz_regress_hdf5_SOURCES = tests/fuzz/fuzz_hdf5.c tests/fuzz/driver.c \
	tests/fuzz/fuzz_file.h tests/fuzz/fuzz_ic_check.h
tests_fuzz_regress_hdf5_LDADD = $(HY_TESTLIBS)
TESTS += tests/fuzz_regress.sh
# Whole directories: a new input in corpus/T or regress/T needs no edit here.
EXTRA_DIST += tests/fuzz_regress.sh tests/fuzz/corpus tests/fuzz/regress \
	tests/fuzz/make_corpus.py tests/fuzz/lsan.supp tools/fuzz.sh
