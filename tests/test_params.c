/* SPDX-License-Identifier: GPL-3.0-or-later
 * test_params.c: tests of the run-parameter module (src/params.c): parsing,
 * defaults, -P overrides, every error message with its place, the collection
 * of several errors, getters, params-used.txt and its round trip. */
#include "config.h"

#include "hy_test.h"
#include "params.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The three required keys, for building small files. */
#define REQ "InitCondFile plummer:1000\nOutputDir out\nTimeEnd 1\n"

static const char *all_keys_text =
    "% every key\n"
    "InitCondFile      ics.hdf5\n"
    "InitCondFormat    hdf5\n"
    "OutputDir         out-dir      # trailing comment\n"
    "Scheme            tree\n"
    "TimeEnd           2.5\n"
    "TimeStepHard      0.001\n"
    "SoftStepRatio     8\n"
    "R1                0.05\n"
    "R2                0.1\n"
    "Softening         0.01\n"
    "AccErr            1e-4\n"
    "OpeningCriterion  relative\n"
    "ErrTolForceAcc    0.01\n"
    "NCrit             32\n"
    "NVec              2\n"
    "LETOpenFactor     1.5\n"
    "NodeSharedMemory  no\n"
    "GravityConstant   43007.1\n"
    "SnapshotInterval  0.5\n"
    "SnapshotFields    Potential,Acceleration\n"
    "NumFilesPerSnapshot 4\n"
    "EnergyInterval    0.125\n"
    "ProgressInterval  2.5\n"
    "RestartInterval   30\n"
    "RestartEverySoftSteps 100\n"
    "OpenCLDevice      1:2\n"
    "DomainGrid        4x2x2\n"
    "SampleRate        0.125\n"
    "DomainCost        walktime\n"
    "DomainSmoothing   0.5\n"
    "TreeBuild         host\n"
    "ParticleState     host\n"
    "UnitLength_in_cm  3.085678e21\n"
    "UnitMass_in_g     1.989e43\n"
    "UnitVelocity_in_cm_per_s 1e5\n";

/** Parse `text` as file "p.txt" and return the error text (NULL on success). */
static char *errors_of(const char *text, char *const *ov, int nov) {
  char *err = NULL;
  struct hy_params *p = hy_params_parse_text("p.txt", text, ov, nov, &err);
  if (p) {
    HY_CHECK(err == NULL);
    hy_params_free(p);
    return NULL;
  }
  HY_CHECK(err != NULL);
  return err;
}

static int count_lines(const char *s) {
  if (!s || !*s) return 0;
  int n = 1;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/** Expect exactly one error, containing `want`. */
static void expect_error(int line, const char *text, const char *want) {
  char *err = errors_of(text, NULL, 0);
  HY_CHECK_MSG(err != NULL, "test at line %d: no error, expected \"%s\"", line, want);
  if (err) {
    HY_CHECK_CONTAINS(err, want);
    HY_CHECK_MSG(count_lines(err) == 1, "test at line %d: expected one error, got:\n%s", line, err);
  }
  free(err);
}

static void test_all_keys(void) {
  size_t n;
  const struct hy_param_def *s = hy_params_schema(&n);
  HY_CHECK_INT(n, 35);
  char *err = NULL;
  struct hy_params *p = hy_params_parse_text("all.txt", all_keys_text, NULL, 0, &err);
  HY_CHECK(p != NULL);
  HY_CHECK(err == NULL);
  if (!p) {
    fprintf(stderr, "%s\n", err);
    free(err);
    return;
  }
  for (size_t k = 0; k < n; k++) HY_CHECK_MSG(!hy_params_is_default(p, s[k].key), "%s", s[k].key);
  HY_CHECK(strcmp(hy_params_get_str(p, "InitCondFile"), "ics.hdf5") == 0);
  HY_CHECK(strcmp(hy_params_get_str(p, "InitCondFormat"), "hdf5") == 0);
  HY_CHECK(strcmp(hy_params_get_str(p, "OutputDir"), "out-dir") == 0);
  HY_CHECK(strcmp(hy_params_get_str(p, "Scheme"), "tree") == 0);
  HY_CHECK(strcmp(hy_params_get_str(p, "TreeBuild"), "host") == 0);
  HY_CHECK(strcmp(hy_params_get_str(p, "ParticleState"), "host") == 0);
  HY_CHECK_ABS(hy_params_get_number(p, "TimeEnd"), 2.5, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "TimeStepHard"), 0.001, 0);
  HY_CHECK_INT(hy_params_get_int(p, "SoftStepRatio"), 8);
  HY_CHECK_ABS(hy_params_get_number(p, "R1"), 0.05, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "R2"), 0.1, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "Softening"), 0.01, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "AccErr"), 1e-4, 0);
  HY_CHECK_INT(hy_params_get_int(p, "NCrit"), 32);
  HY_CHECK_INT(hy_params_get_int(p, "NumFilesPerSnapshot"), 4);
  HY_CHECK_INT(hy_params_get_int(p, "NVec"), 2);
  HY_CHECK_ABS(hy_params_get_number(p, "LETOpenFactor"), 1.5, 0);
  HY_CHECK(strcmp(hy_params_get_str(p, "NodeSharedMemory"), "no") == 0);
  HY_CHECK_ABS(hy_params_get_number(p, "GravityConstant"), 43007.1, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "SnapshotInterval"), 0.5, 0);
  HY_CHECK(hy_params_list_has(p, "SnapshotFields", "Acceleration"));
  HY_CHECK(hy_params_list_has(p, "SnapshotFields", "Potential"));
  HY_CHECK_ABS(hy_params_get_number(p, "EnergyInterval"), 0.125, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "ProgressInterval"), 2.5, 0);
  int kind, plat, dev;
  hy_params_get_device(p, &kind, &plat, &dev);
  HY_CHECK_INT(kind, 3);
  HY_CHECK_INT(plat, 1);
  HY_CHECK_INT(dev, 2);
  HY_CHECK(strcmp(hy_params_get_str(p, "DomainGrid"), "4x2x2") == 0);
  HY_CHECK_ABS(hy_params_get_number(p, "SampleRate"), 0.125, 0);
  HY_CHECK(strcmp(hy_params_get_str(p, "DomainCost"), "walktime") == 0);
  HY_CHECK_ABS(hy_params_get_number(p, "DomainSmoothing"), 0.5, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "UnitLength_in_cm"), 3.085678e21, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "UnitMass_in_g"), 1.989e43, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "UnitVelocity_in_cm_per_s"), 1e5, 0);
  for (size_t k = 0; k < n; k++) HY_CHECK_MSG(!hy_params_is_auto(p, s[k].key), "%s", s[k].key);
  hy_params_free(p);
}

static void test_defaults(void) {
  char *err = NULL;
  struct hy_params *p = hy_params_parse_text("d.txt", REQ, NULL, 0, &err);
  HY_CHECK(p != NULL);
  if (!p) return;
  HY_CHECK(!hy_params_is_default(p, "InitCondFile"));
  HY_CHECK(!hy_params_is_default(p, "TimeEnd"));
  HY_CHECK(hy_params_is_default(p, "Scheme"));
  HY_CHECK(strcmp(hy_params_get_str(p, "Scheme"), "hybrid") == 0);
  HY_CHECK(strcmp(hy_params_get_str(p, "InitCondFormat"), "auto") == 0);
  HY_CHECK_INT(hy_params_get_int(p, "SoftStepRatio"), 4);
  HY_CHECK_INT(hy_params_get_int(p, "NCrit"), 16);
  HY_CHECK_INT(hy_params_get_int(p, "NumFilesPerSnapshot"), 1);
  HY_CHECK_INT(hy_params_get_int(p, "NVec"), 4);
  HY_CHECK_ABS(hy_params_get_number(p, "GravityConstant"), 1, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "SnapshotInterval"), 0, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "EnergyInterval"), 0, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "ProgressInterval"), 0, 0);
  HY_CHECK_ABS(hy_params_get_number(p, "UnitMass_in_g"), 1, 0);
  HY_CHECK(hy_params_is_auto(p, "R1"));
  HY_CHECK(hy_params_is_auto(p, "R2"));
  HY_CHECK(hy_params_is_auto(p, "Softening"));
  HY_CHECK(hy_params_is_auto(p, "AccErr"));
  HY_CHECK(hy_params_is_auto(p, "TimeStepHard"));
  HY_CHECK(!hy_params_is_auto(p, "TimeEnd"));
  HY_CHECK(!hy_params_is_auto(p, "Scheme"));
  HY_CHECK(!hy_params_list_has(p, "SnapshotFields", "Acceleration"));
  HY_CHECK(!hy_params_list_has(p, "SnapshotFields", "Potential"));
  int kind = 9, plat = 9, dev = 9;
  hy_params_get_device(p, &kind, &plat, &dev);
  HY_CHECK_INT(kind, 0);
  HY_CHECK_INT(plat, -1);
  HY_CHECK_INT(dev, -1);
  hy_params_get_device(p, NULL, NULL, NULL);
  hy_params_free(p);

  /* The other device words. */
  const char *words[] = {"gpu", "cpu", "any", "0:0"};
  const int kinds[] = {1, 2, 0, 3};
  for (int i = 0; i < 4; i++) {
    char text[256];
    snprintf(text, sizeof text, REQ "OpenCLDevice %s\n", words[i]);
    p = hy_params_parse_text("d.txt", text, NULL, 0, NULL);
    HY_CHECK(p != NULL);
    if (!p) continue;
    hy_params_get_device(p, &kind, &plat, &dev);
    HY_CHECK_INT(kind, kinds[i]);
    HY_CHECK_INT(plat, i == 3 ? 0 : -1);
    HY_CHECK_INT(dev, i == 3 ? 0 : -1);
    hy_params_free(p);
  }

  /* One list item. */
  p = hy_params_parse_text("d.txt", REQ "SnapshotFields Potential\n", NULL, 0, NULL);
  HY_CHECK(p != NULL);
  if (p) {
    HY_CHECK(hy_params_list_has(p, "SnapshotFields", "Potential"));
    HY_CHECK(!hy_params_list_has(p, "SnapshotFields", "Acceleration"));
    hy_params_free(p);
  }
}

static void test_overrides(void) {
  char *ov[] = {"TimeEnd=5", "Scheme=direct", "TimeEnd=7", "R1=0.2", "OutputDir=elsewhere"};
  char *err = NULL;
  struct hy_params *p = hy_params_parse_text("o.txt", REQ "Scheme tree\n", ov, 5, &err);
  HY_CHECK(p != NULL);
  if (!p) {
    fprintf(stderr, "%s\n", err);
    free(err);
    return;
  }
  HY_CHECK_ABS(hy_params_get_number(p, "TimeEnd"), 7, 0); /* later -P wins */
  HY_CHECK(strcmp(hy_params_get_str(p, "Scheme"), "direct") == 0);
  HY_CHECK(strcmp(hy_params_get_str(p, "OutputDir"), "elsewhere") == 0);
  HY_CHECK_ABS(hy_params_get_number(p, "R1"), 0.2, 0);
  HY_CHECK(!hy_params_is_default(p, "R1"));
  HY_CHECK(!hy_params_is_auto(p, "R1"));
  /* where each value comes from: a file line, the last override, the file for a default */
  HY_CHECK_MSG(strcmp(hy_params_where(p, "InitCondFile"), "o.txt:1") == 0, "%s", hy_params_where(p, "InitCondFile"));
  HY_CHECK_MSG(strcmp(hy_params_where(p, "TimeEnd"), "-P TimeEnd=7") == 0, "%s", hy_params_where(p, "TimeEnd"));
  HY_CHECK_MSG(strcmp(hy_params_where(p, "DomainGrid"), "o.txt") == 0, "%s", hy_params_where(p, "DomainGrid"));
  hy_params_free(p);

  /* A required key given only by -P. */
  char *ov2[] = {"TimeEnd=3"};
  p = hy_params_parse_text("o.txt", "InitCondFile a\nOutputDir b\n", ov2, 1, NULL);
  HY_CHECK(p != NULL);
  if (p) {
    HY_CHECK_ABS(hy_params_get_number(p, "TimeEnd"), 3, 0);
    hy_params_free(p);
  }

  /* Errors in overrides name the argument. */
  char *ov3[] = {"Sofening=1", "TimeEnd=abc", "NoEquals", "R1=", "Scheme=tree extra",
                 "TimeEnd=-1", "SoftStepRatio=\n5"};
  err = errors_of(REQ, ov3, 7);
  HY_CHECK_CONTAINS(err, "-P Sofening=1: unknown parameter 'Sofening' (did you mean 'Softening'?)");
  HY_CHECK_CONTAINS(err, "-P NoEquals: expected Key=Value");
  HY_CHECK_CONTAINS(err, "-P R1=: parameter 'R1' has no value");
  HY_CHECK_CONTAINS(err, "-P Scheme=tree extra: unexpected text after the value of 'Scheme': 'extra'");
  /* TimeEnd=abc is overridden by TimeEnd=-1: only the last value is checked. */
  HY_CHECK_CONTAINS(err, "-P TimeEnd=-1: parameter 'TimeEnd' = -1 is out of range (must be >= 0)");
  HY_CHECK(err == NULL || strstr(err, "'abc'") == NULL);
  /* A line break would make params-used.txt unreadable (found by the fuzz
   * harness's round trip); the message stays on one line. */
  HY_CHECK_CONTAINS(err, "-P SoftStepRatio=\\n5: a line break cannot be part of an override");
  HY_CHECK_INT(count_lines(err), 6);
  free(err);

  /* The override replaces a bad file value, so the file's value is not an error. */
  char *ov4[] = {"Scheme=tree"};
  err = errors_of(REQ "Scheme hybird\n", ov4, 1);
  HY_CHECK(err == NULL);
  free(err);

  /* R2 given by -P, smaller than R1. */
  char *ov5[] = {"R2=0.1"};
  err = errors_of(REQ "R1 0.2\n", ov5, 1);
  HY_CHECK_CONTAINS(err, "-P R2=0.1: R2 = 0.1 must be larger than R1 = 0.2");
  free(err);
}

static void test_errors(void) {
  expect_error(__LINE__, REQ "\n\n\nSofening 0.1\n",
               "p.txt:7: unknown parameter 'Sofening' (did you mean 'Softening'?)");
  expect_error(__LINE__, REQ "softening 0.1\n",
               "p.txt:4: unknown parameter 'softening' (did you mean 'Softening'?)");
  /* Nothing close: no hint. */
  char *err = errors_of(REQ "CompletelyBogusKey 1\n", NULL, 0);
  HY_CHECK_CONTAINS(err, "p.txt:4: unknown parameter 'CompletelyBogusKey'");
  HY_CHECK(err == NULL || strstr(err, "did you mean") == NULL);
  free(err);
  err = errors_of(REQ "Foo 1\n", NULL, 0);
  HY_CHECK(err == NULL || strstr(err, "did you mean") == NULL);
  free(err);

  expect_error(__LINE__, REQ "R1 0.1\n\n\n\nR1 0.2\n", "p.txt:8: parameter 'R1' already set at line 4");
  expect_error(__LINE__, "InitCondFile a\nOutputDir b\n", "p.txt: missing required parameter 'TimeEnd'");
  expect_error(__LINE__, "InitCondFile a\nTimeEnd 1\n", "p.txt: missing required parameter 'OutputDir'");
  expect_error(__LINE__, "OutputDir a\nTimeEnd 1\n", "p.txt: missing required parameter 'InitCondFile'");
  expect_error(__LINE__, REQ "R1\n", "p.txt:4: parameter 'R1' has no value");
  expect_error(__LINE__, REQ "R1   % comment only\n", "p.txt:4: parameter 'R1' has no value");
  expect_error(__LINE__, REQ "R1 0.1 foo\n", "p.txt:4: unexpected text after the value of 'R1': 'foo'");
  expect_error(__LINE__, "InitCondFile a\nOutputDir b\n\n\nTimeEnd abc\n",
               "p.txt:5: parameter 'TimeEnd': 'abc' is not a number");
  expect_error(__LINE__, REQ "Softening abc\n", "p.txt:4: parameter 'Softening': 'abc' is not a number or auto");
  expect_error(__LINE__, REQ "GravityConstant nan\n", "p.txt:4: parameter 'GravityConstant': 'nan' is not a number");
  expect_error(__LINE__, REQ "GravityConstant inf\n", "p.txt:4: parameter 'GravityConstant': 'inf' is not a number");
  expect_error(__LINE__, REQ "GravityConstant -inf\n", "p.txt:4: parameter 'GravityConstant': '-inf' is not a number");
  expect_error(__LINE__, REQ "GravityConstant 1e999\n", "p.txt:4: parameter 'GravityConstant': '1e999' is not a number");
  expect_error(__LINE__, REQ "GravityConstant 1.0x\n", "p.txt:4: parameter 'GravityConstant': '1.0x' is not a number");
  expect_error(__LINE__, REQ "NumFilesPerSnapshot 0\n",
               "p.txt:4: parameter 'NumFilesPerSnapshot' = 0 is out of range (allowed: 1 to 65536)");
  expect_error(__LINE__, REQ "NCrit 1.5\n", "p.txt:4: parameter 'NCrit': '1.5' is not an integer");
  expect_error(__LINE__, REQ "NCrit 12abc\n", "p.txt:4: parameter 'NCrit': '12abc' is not a number");
  expect_error(__LINE__, REQ "NCrit 99999999999999999999999\n",
               "p.txt:4: parameter 'NCrit' = 99999999999999999999999 is out of range (allowed: 1 to 65536)");
  expect_error(__LINE__, REQ "SoftStepRatio 0\n",
               "p.txt:4: parameter 'SoftStepRatio' = 0 is out of range (allowed: 1 to 1024)");
  expect_error(__LINE__, REQ "SoftStepRatio 1025\n",
               "p.txt:4: parameter 'SoftStepRatio' = 1025 is out of range (allowed: 1 to 1024)");
  expect_error(__LINE__, REQ "R1 0\n", "p.txt:4: parameter 'R1' = 0 is out of range (must be > 0)");
  expect_error(__LINE__, REQ "SampleRate 0\n",
               "p.txt:4: parameter 'SampleRate' = 0 is out of range (must be > 0 and <= 1)");
  expect_error(__LINE__, REQ "SampleRate 1.5\n",
               "p.txt:4: parameter 'SampleRate' = 1.5 is out of range (must be > 0 and <= 1)");
  HY_CHECK(errors_of(REQ "SampleRate 1\n", NULL, 0) == NULL);
  expect_error(__LINE__, REQ "DomainSmoothing 0\n",
               "p.txt:4: parameter 'DomainSmoothing' = 0 is out of range (must be > 0 and <= 1)");
  HY_CHECK(errors_of(REQ "DomainSmoothing 1\n", NULL, 0) == NULL);
  expect_error(__LINE__, REQ "DomainCost time\n", "p.txt:4: parameter 'DomainCost'");
  expect_error(__LINE__, REQ "LETOpenFactor 0.9\n",
               "p.txt:4: parameter 'LETOpenFactor' = 0.9 is out of range (allowed: 1 to 16)");
  HY_CHECK(errors_of(REQ "LETOpenFactor 1\n", NULL, 0) == NULL);
  expect_error(__LINE__, REQ "Softening -0.1\n",
               "p.txt:4: parameter 'Softening' = -0.1 is out of range (must be >= 0)");
  expect_error(__LINE__, "InitCondFile a\nOutputDir b\nTimeEnd -1\n",
               "p.txt:3: parameter 'TimeEnd' = -1 is out of range (must be >= 0)");
  expect_error(__LINE__, REQ "\n\nScheme hybird\n",
               "p.txt:6: parameter 'Scheme': 'hybird' is not one of hybrid, tree, direct");
  expect_error(__LINE__, REQ "InitCondFormat gadget3\n",
               "p.txt:4: parameter 'InitCondFormat': 'gadget3' is not one of auto, hdf5, gadget1, gadget2, tipsy");
  expect_error(__LINE__, REQ "SnapshotFields Velocity\n",
               "p.txt:4: parameter 'SnapshotFields': 'Velocity' is not one of Acceleration, Potential");
  expect_error(__LINE__, REQ "SnapshotFields Potential,Potential\n",
               "p.txt:4: parameter 'SnapshotFields': 'Potential' is listed more than once");
  expect_error(__LINE__, REQ "SnapshotFields none,Potential\n",
               "p.txt:4: parameter 'SnapshotFields': 'none' cannot be combined with other items");
  expect_error(__LINE__, REQ "SnapshotFields Potential,\n",
               "p.txt:4: parameter 'SnapshotFields': empty item in 'Potential,'");
  const char *bad_dev[] = {"gpux", "1:", ":2", "-1:0", "1:-2", "a:b", "1:2:3", "99999999999:0", "GPU"};
  for (size_t i = 0; i < sizeof bad_dev / sizeof bad_dev[0]; i++) {
    char text[256], want[256];
    snprintf(text, sizeof text, REQ "OpenCLDevice %s\n", bad_dev[i]);
    snprintf(want, sizeof want, "p.txt:4: parameter 'OpenCLDevice': '%s' is not gpu, cpu, any or P:D",
             bad_dev[i]);
    expect_error(__LINE__, text, want);
  }
  expect_error(__LINE__, REQ "R1 0.2\nR2 0.1\n", "p.txt:5: R2 = 0.1 must be larger than R1 = 0.2");
  expect_error(__LINE__, REQ "R2 0.2\nR1 0.2\n", "p.txt:4: R2 = 0.2 must be larger than R1 = 0.2");
  /* R1 or R2 auto: no cross-check. */
  err = errors_of(REQ "R1 0.2\n", NULL, 0);
  HY_CHECK(err == NULL);
  free(err);
  err = errors_of(REQ "R2 0.2\nR1 auto\n", NULL, 0);
  HY_CHECK(err == NULL);
  free(err);

  /* Unreadable file. */
  struct hy_params *p = hy_params_parse_file("/nonexistent/dir/p.txt", NULL, 0, &err);
  HY_CHECK(p == NULL);
  HY_CHECK_CONTAINS(err, "/nonexistent/dir/p.txt: cannot open: No such file or directory");
  free(err);
  /* errors may be NULL. */
  HY_CHECK(hy_params_parse_file("/nonexistent/dir/p.txt", NULL, 0, NULL) == NULL);
  HY_CHECK(hy_params_parse_text("x", "Bogus 1\n", NULL, 0, NULL) == NULL);
}

static void test_many_errors(void) {
  const char *text = "InitCondFile a\n"        /* 1 */
                     "Sofening 0.1\n"          /* 2: unknown */
                     "Scheme hybird\n"         /* 3: bad choice */
                     "% TimeEnd missing\n"     /* 4 */
                     "SoftStepRatio 0\n"       /* 5: out of range */
                     "OutputDir o\n";          /* 6 */
  char *err = errors_of(text, NULL, 0);
  HY_CHECK_INT(count_lines(err), 4);
  HY_CHECK(err && err[strlen(err) - 1] != '\n');
  HY_CHECK_CONTAINS(err, "p.txt:2: unknown parameter 'Sofening' (did you mean 'Softening'?)\n"
                         "p.txt:3: parameter 'Scheme': 'hybird' is not one of hybrid, tree, direct");
  HY_CHECK_CONTAINS(err, "\np.txt:5: parameter 'SoftStepRatio' = 0 is out of range (allowed: 1 to 1024)\n"
                         "p.txt: missing required parameter 'TimeEnd'");
  free(err);
}

static void test_syntax(void) {
  /* CRLF, comments with % and #, blank lines, tabs, a # inside a value. */
  const char *text = "% header comment\r\n"
                     "\r\n"
                     "   # indented comment\r\n"
                     "InitCondFile\tdir#1/ics.dat\t% the ICs\r\n"
                     "OutputDir out#x #comment\r\n"
                     "TimeEnd 1%not-a-comment-start-but-a-bad-number\r\n";
  char *err = errors_of(text, NULL, 0);
  HY_CHECK_INT(count_lines(err), 1);
  HY_CHECK_CONTAINS(err, "p.txt:6: parameter 'TimeEnd': '1%not-a-comment-start-but-a-bad-number' is not a number");
  free(err);
  text = "% header comment\r\n"
         "\r\n"
         "   # indented comment\r\n"
         "InitCondFile\tdir#1/ics.dat\t% the ICs\r\n"
         "OutputDir out#x #comment\r\n"
         "TimeEnd 1 %comment\r\n"
         "Scheme tree"; /* no final newline */
  struct hy_params *p = hy_params_parse_text("p.txt", text, NULL, 0, &err);
  HY_CHECK(p != NULL);
  if (p) {
    HY_CHECK(strcmp(hy_params_get_str(p, "InitCondFile"), "dir#1/ics.dat") == 0);
    HY_CHECK(strcmp(hy_params_get_str(p, "OutputDir"), "out#x") == 0);
    HY_CHECK(strcmp(hy_params_get_str(p, "Scheme"), "tree") == 0);
    HY_CHECK_ABS(hy_params_get_number(p, "TimeEnd"), 1, 0);
    hy_params_free(p);
  } else {
    fprintf(stderr, "%s\n", err);
    free(err);
  }
  /* Keys are case-sensitive; an empty text misses all required keys. */
  err = errors_of("", NULL, 0);
  HY_CHECK_INT(count_lines(err), 3);
  free(err);
  /* CRLF line with a missing value. */
  expect_error(__LINE__, REQ "R1 \r\n", "p.txt:4: parameter 'R1' has no value");
}

static void test_long_line(void) {
  size_t n = 10000;
  char *val = malloc(n + 1);
  HY_CHECK(val != NULL);
  if (!val) return;
  for (size_t i = 0; i < n; i++) val[i] = (char)('a' + i % 26);
  val[n] = '\0';
  size_t tl = n + 200;
  char *text = malloc(tl);
  HY_CHECK(text != NULL);
  if (!text) {
    free(val);
    return;
  }
  snprintf(text, tl, "InitCondFile %s   %% comment\nOutputDir o\nTimeEnd 1\n", val);
  char *err = NULL;
  struct hy_params *p = hy_params_parse_text("long.txt", text, NULL, 0, &err);
  HY_CHECK(p != NULL);
  if (p) {
    HY_CHECK_INT(strlen(hy_params_get_str(p, "InitCondFile")), n);
    HY_CHECK(strcmp(hy_params_get_str(p, "InitCondFile"), val) == 0);
    char *dump = hy_params_dump(p);
    HY_CHECK(strstr(dump, val) != NULL);
    struct hy_params *q = hy_params_parse_text("dump", dump, NULL, 0, &err);
    HY_CHECK(q != NULL);
    if (q) HY_CHECK(strcmp(hy_params_get_str(q, "InitCondFile"), val) == 0);
    hy_params_free(q);
    free(dump);
    hy_params_free(p);
  }
  /* A long number value in an error message is kept whole. */
  snprintf(text, tl, REQ "GravityConstant %s\n", val);
  err = errors_of(text, NULL, 0);
  HY_CHECK(err != NULL && strlen(err) > n);
  HY_CHECK_CONTAINS(err, "p.txt:4: parameter 'GravityConstant': 'abcdefghij");
  free(err);

  /* The same through a real file. */
  char path[] = "test_params_XXXXXX";
  int fd = mkstemp(path);
  HY_CHECK(fd >= 0);
  if (fd >= 0) {
    snprintf(text, tl, "InitCondFile %s\r\nOutputDir o\r\nTimeEnd 1\r\n", val);
    FILE *f = fdopen(fd, "w");
    HY_CHECK(f != NULL);
    if (f) {
      fputs(text, f);
      fclose(f);
      p = hy_params_parse_file(path, NULL, 0, &err);
      HY_CHECK(p != NULL);
      if (p) HY_CHECK(strcmp(hy_params_get_str(p, "InitCondFile"), val) == 0);
      hy_params_free(p);
    }
    unlink(path);
  }
  free(text);
  free(val);
}

static void test_dump(void) {
  size_t n;
  const struct hy_param_def *s = hy_params_schema(&n);
  char *ov[] = {"Scheme=direct", "R1=auto"};
  char *err = NULL;
  struct hy_params *p = hy_params_parse_text("p.txt", REQ "NCrit 8\nR1 0.3\nAccErr auto\n"
                                             "SnapshotFields Acceleration\nOpenCLDevice 0:1\n",
                                             ov, 2, &err);
  HY_CHECK(p != NULL);
  if (!p) return;
  hy_params_set_resolved(p, "R1", 0.0123);
  hy_params_set_resolved(p, "R2", 2 * 0.0123);
  hy_params_set_resolved(p, "AccErr", 1.0 / 3.0);
  HY_CHECK_ABS(hy_params_get_number(p, "R1"), 0.0123, 0);
  HY_CHECK(hy_params_is_auto(p, "R1"));
  HY_CHECK(!hy_params_is_default(p, "R1"));
  HY_CHECK(hy_params_is_default(p, "R2"));
  char *dump = hy_params_dump(p);
  HY_CHECK(strncmp(dump, "% hytree " PACKAGE_VERSION ": parameters used\n", 18 + strlen(PACKAGE_VERSION)) == 0);
  HY_CHECK_CONTAINS(dump, "% auto -> 0.0123\n");
  HY_CHECK_CONTAINS(dump, "% auto -> 0.333333333");
  HY_CHECK_CONTAINS(dump, "% auto -> 0.0246 (default)\n");
  HY_CHECK_CONTAINS(dump, "% default\n");
  /* One line per key in schema order, plus the header, and aligned values. */
  HY_CHECK_INT(count_lines(dump), (int)n + 2); /* final newline counts one more */
  const char *line = strchr(dump, '\n') + 1;
  long col = -1;
  for (size_t k = 0; k < n; k++) {
    HY_CHECK_MSG(strncmp(line, s[k].key, strlen(s[k].key)) == 0, "line %zu is not %s", k, s[k].key);
    const char *v = line + strlen(s[k].key);
    while (*v == ' ') v++;
    if (col < 0) col = v - line;
    HY_CHECK_INT(v - line, col);
    const char *eol = strchr(line, '\n');
    int is_def = hy_params_is_default(p, s[k].key);
    const char *m1 = strstr(line, "% default"), *m2 = strstr(line, " (default)");
    int has_default = (m1 && m1 < eol) || (m2 && m2 < eol);
    HY_CHECK_MSG(is_def == has_default, "%s: default mark", s[k].key);
    line = eol + 1;
  }
  HY_CHECK(strstr(dump, "\nNCrit ") && strstr(dump, "\nScheme "));

  /* The values used: resolved `auto` keys as numbers that read back exactly. */
  char *used = hy_params_dump_used(p);
  HY_CHECK_INT(count_lines(used), (int)n + 1);
  HY_CHECK(strncmp(used, s[0].key, strlen(s[0].key)) == 0);
  HY_CHECK_CONTAINS(used, "\nR1  0.0123\n");
  HY_CHECK_CONTAINS(used, "\nR2  0.0246\n");
  HY_CHECK_CONTAINS(used, "\nAccErr  0.3333333333333333\n");
  HY_CHECK_CONTAINS(used, "\nNCrit  8\n");
  HY_CHECK_CONTAINS(used, "\nSoftening  auto\n"); /* an `auto` not resolved stays */
  free(used);

  /* Round trip: the dump parses back into the same values. */
  struct hy_params *q = hy_params_parse_text("params-used.txt", dump, NULL, 0, &err);
  HY_CHECK(q != NULL);
  if (!q) {
    fprintf(stderr, "%s\n", err);
    free(err);
  } else {
    for (size_t k = 0; k < n; k++) {
      const char *key = s[k].key;
      HY_CHECK_MSG(strcmp(hy_params_get_str(p, key), hy_params_get_str(q, key)) == 0, "%s", key);
      HY_CHECK_INT(hy_params_is_auto(p, key), hy_params_is_auto(q, key));
      if ((s[k].type == HY_PT_NUMBER || s[k].type == HY_PT_NUMBER_AUTO) && !hy_params_is_auto(q, key))
        HY_CHECK_ABS(hy_params_get_number(p, key), hy_params_get_number(q, key), 0);
      if (s[k].type == HY_PT_INT) HY_CHECK_INT(hy_params_get_int(p, key), hy_params_get_int(q, key));
    }
    HY_CHECK(hy_params_list_has(q, "SnapshotFields", "Acceleration"));
    HY_CHECK(!hy_params_list_has(q, "SnapshotFields", "Potential"));
    int kind, plat, dev;
    hy_params_get_device(q, &kind, &plat, &dev);
    HY_CHECK(kind == 3 && plat == 0 && dev == 1);
    /* Dumping the re-read table gives the same text, less the resolved values. */
    char *dump2 = hy_params_dump(q);
    HY_CHECK(strstr(dump2, "% auto ->") == NULL);
    free(dump2);
    hy_params_free(q);
  }
  free(dump);
  hy_params_free(p);

  /* The all-keys file round-trips too. */
  p = hy_params_parse_text("all.txt", all_keys_text, NULL, 0, NULL);
  HY_CHECK(p != NULL);
  if (p) {
    dump = hy_params_dump(p);
    HY_CHECK(strstr(dump, "% default") == NULL);
    q = hy_params_parse_text("params-used.txt", dump, NULL, 0, NULL);
    HY_CHECK(q != NULL);
    if (q) {
      char *dump2 = hy_params_dump(q);
      HY_CHECK(strcmp(dump, dump2) == 0);
      free(dump2);
      hy_params_free(q);
    }
    free(dump);
    hy_params_free(p);
  }
}

static void test_help(void) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  HY_CHECK(f != NULL);
  if (!f) return;
  hy_params_print_help(f);
  fclose(f);
  size_t n;
  const struct hy_param_def *s = hy_params_schema(&n);
  for (size_t k = 0; k < n; k++) {
    char want[128];
    snprintf(want, sizeof want, "  %s ", s[k].key);
    HY_CHECK_CONTAINS(buf, want);
    HY_CHECK_CONTAINS(buf, s[k].doc);
  }
  HY_CHECK_CONTAINS(buf, "(required)");
  HY_CHECK_CONTAINS(buf, "allowed: 1 to 1024");
  HY_CHECK_CONTAINS(buf, "allowed: 0 to 1000000000"); /* integer bounds in full, not 1e+09 */
  HY_CHECK(strstr(buf, "e+0") == NULL);
  HY_CHECK_CONTAINS(buf, "must be > 0, or auto");
  HY_CHECK_CONTAINS(buf, "one of hybrid, tree, direct");
  HY_CHECK_INT(count_lines(buf), 2 * (int)n + 1);
  free(buf);
}

int main(void) {
  test_all_keys();
  test_defaults();
  test_overrides();
  test_errors();
  test_many_errors();
  test_syntax();
  test_long_line();
  test_dump();
  test_help();
  return hy_test_result();
}
