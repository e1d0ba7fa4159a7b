# parameter parser tests
check_PROGRAMS += tests/test_params tests/print_param_keys
TESTS += tests/test_params tests/check-params-doc.sh
tests_test_params_SOURCES = tests/test_params.c
tests_test_params_LDADD = $(HY_TESTLIBS)
tests_print_param_keys_SOURCES = tests/print_param_keys.c
tests_print_param_keys_LDADD = $(HY_TESTLIBS)
EXTRA_DIST += tests/check-params-doc.sh
