/* SPDX-License-Identifier: GPL-3.0-or-later
 * io_test_util.h: scratch directories for the io/ic tests. Each test writes
 * under $top_builddir/tests/tmp-<name>-<pid> and removes it at the end. */
#ifndef HY_IO_TEST_UTIL_H
#define HY_IO_TEST_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char hy_tmpdir[4096];

/* Create the scratch directory; exits 99 (hard error) if that fails. */
static inline const char *hy_tmp_setup(const char *name) {
  const char *b = getenv("top_builddir");
  snprintf(hy_tmpdir, sizeof hy_tmpdir, "%s/tests/tmp-%s-%ld", b ? b : ".", name, (long)getpid());
  if (mkdir(hy_tmpdir, 0777) != 0) {
    perror(hy_tmpdir);
    exit(99);
  }
  return hy_tmpdir;
}

/* Path of a file inside the scratch directory (static buffer per slot). */
static inline const char *hy_tmp_path(int slot, const char *file) {
  static char buf[8][4200];
  snprintf(buf[slot], sizeof buf[slot], "%s/%s", hy_tmpdir, file);
  return buf[slot];
}

/* Number of directory entries (besides . and ..) in the scratch directory. */
static inline int hy_tmp_count(void) {
  DIR *d = opendir(hy_tmpdir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

/* Remove the scratch directory and the plain files in it. */
static inline void hy_tmp_cleanup(void) {
  DIR *d = opendir(hy_tmpdir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[8300];
    snprintf(p, sizeof p, "%s/%s", hy_tmpdir, e->d_name);
    if (unlink(p) != 0) perror(p);
  }
  closedir(d);
  if (rmdir(hy_tmpdir) != 0) perror(hy_tmpdir);
}

/* Deterministic uniform deviate in [0, 1) (xorshift64*). */
static inline double hy_urand(unsigned long long *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return (double)((*s * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

#endif
