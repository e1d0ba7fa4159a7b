# IO and IC tests (owned by the io/ic modules).
check_PROGRAMS += tests/test_io_gadget
TESTS += tests/test_io_gadget
tests_test_io_gadget_SOURCES = tests/test_io_gadget.c tests/io_test_util.h
tests_test_io_gadget_LDADD = $(HY_TESTLIBS)
EXTRA_DIST += tests/data/galaxy_littleendian.dat
check_PROGRAMS += tests/test_io_hdf5
TESTS += tests/test_io_hdf5
tests_test_io_hdf5_SOURCES = tests/test_io_hdf5.c tests/io_test_util.h
tests_test_io_hdf5_LDADD = $(HY_TESTLIBS)
check_PROGRAMS += tests/test_ic
TESTS += tests/test_ic
tests_test_ic_SOURCES = tests/test_ic.c tests/io_test_util.h
tests_test_ic_LDADD = $(HY_TESTLIBS)
TESTS += tests/ic_cli.sh
EXTRA_DIST += tests/ic_cli.sh
