/* SPDX-License-Identifier: GPL-3.0-or-later
 * print_param_keys.c: helper of tests/check-params-doc.sh. Without arguments
 * prints every schema key, one per line; `--parse FILE` parses a parameter
 * file and prints its problems (exit 1) or its params-used.txt (exit 0);
 * `--help` prints the parameter table of `hytree run --help`. */
#include "config.h"

#include "params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc == 1) {
    size_t n;
    const struct hy_param_def *s = hy_params_schema(&n);
    for (size_t k = 0; k < n; k++) printf("%s\n", s[k].key);
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--help") == 0) {
    hy_params_print_help(stdout);
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "--parse") == 0) {
    char *err = NULL;
    struct hy_params *p = hy_params_parse_file(argv[2], argv + 3, argc - 3, &err);
    if (!p) {
      fprintf(stderr, "%s\n", err);
      free(err);
      return 1;
    }
    char *dump = hy_params_dump(p);
    fputs(dump, stdout);
    free(dump);
    hy_params_free(p);
    return 0;
  }
  fprintf(stderr, "usage: %s [--help | --parse FILE [Key=Value...]]\n", argv[0]);
  return 2;
}
