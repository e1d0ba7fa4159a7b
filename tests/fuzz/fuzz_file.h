/* SPDX-License-Identifier: GPL-3.0-or-later
 * fuzz_file.h: scratch files for the harnesses of readers that take a path
 * (Gadget, HDF5). One private directory per process under $TMPDIR (default
 * /tmp), removed at exit; fuzz_file_write puts an input there under a name. */
#ifndef HY_FUZZ_FILE_H
#define HY_FUZZ_FILE_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char fuzz_dir[4096];

static void fuzz_dir_remove(void) {
  DIR *d = opendir(fuzz_dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[8300];
    snprintf(p, sizeof p, "%s/%s", fuzz_dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(fuzz_dir);
}

/* Path of `name` in the scratch directory (created on the first call). */
static const char *fuzz_path(const char *name) {
  static char buf[4][8300];
  static int slot;
  if (!fuzz_dir[0]) {
    const char *t = getenv("TMPDIR");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/hytree-fuzz-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(fuzz_dir)) {
      perror(fuzz_dir);
      abort();
    }
    atexit(fuzz_dir_remove);
  }
  slot = (slot + 1) % 4;
  snprintf(buf[slot], sizeof buf[slot], "%s/%s", fuzz_dir, name);
  return buf[slot];
}

/* Write data to the scratch file `name`; returns its path. */
static const char *fuzz_file_write(const char *name, const uint8_t *data, size_t size) {
  const char *path = fuzz_path(name);
  FILE *f = fopen(path, "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
    perror(path);
    abort();
  }
  return path;
}

#endif
