/* SPDX-License-Identifier: GPL-3.0-or-later
 * driver.c: runs a libFuzzer harness without libFuzzer, for make check.
 * Every argument is a file or a directory; each file (directories: each
 * regular file in it, in name order, dot files skipped) is passed once to
 * LLVMFuzzerTestOneInput. The name is printed before the call, so a crash or
 * an abort() in the harness shows the input that caused it. A missing
 * directory is skipped (tests/fuzz/regress/<target> exists only once a
 * finding has been kept). Exit status 0, or 99 when an input cannot be read. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      fprintf(stderr, "%s: out of memory\n", path);
      fclose(f);
      return -1;
    }
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    cap *= 2;
    buf = realloc(buf, cap);
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    fprintf(stderr, "%s: cannot read\n", path);
    free(buf);
    return -1;
  }
  printf("%s (%zu bytes)\n", path, n);
  fflush(stdout);
  /* An exact-size copy, so that ASan sees reads past the end of the input. */
  uint8_t *data = malloc(n ? n : 1);
  if (!data) {
    free(buf);
    return -1;
  }
  memcpy(data, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(data, n);
  free(data);
  return 0;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, int *count) {
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) {
      printf("%s: no such directory, skipped\n", dir);
      return 0;
    }
    fprintf(stderr, "%s: cannot open: %s\n", dir, strerror(errno));
    return -1;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char **nn = realloc(names, cap * sizeof *names);
      if (!nn) break;
      names = nn;
    }
    size_t l = strlen(dir) + strlen(e->d_name) + 2;
    names[n] = malloc(l);
    if (!names[n]) break;
    snprintf(names[n], l, "%s/%s", dir, e->d_name);
    n++;
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_names);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
      if (run_file(names[i]) != 0) rc = -1;
      (*count)++;
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  int rc = 0, count = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISREG(st.st_mode)) {
      if (run_file(argv[i]) != 0) rc = 99;
      count++;
    } else if (run_dir(argv[i], &count) != 0) {
      rc = 99;
    }
  }
  printf("%d inputs run\n", count);
  return rc;
}
