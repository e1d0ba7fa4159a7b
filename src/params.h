/* SPDX-License-Identifier: GPL-3.0-or-later
 * params.h: run parameters. Owns the parameter-file format (Gadget-style
 * `Key  Value` lines with `%` or `#` comments), `-P Key=Value` overrides, the
 * validation of every value against the schema (src/param_schema.c), the
 * collection of all problems into one report, typed access to the values, and
 * the text of params-used.txt. Knows nothing of particles, devices or MPI:
 * the caller reads the ICs, computes the `auto` values and records them with
 * hy_params_set_resolved. */
#ifndef HY_PARAMS_H
#define HY_PARAMS_H

#include <stddef.h>
#include <stdio.h>

/** Parsed and validated parameter table (opaque). */
struct hy_params;

/** Value types of the schema. */
enum hy_param_type {
  HY_PT_STRING,      /**< one token, any text (paths, generator strings) */
  HY_PT_INT,         /**< integer (strtol, base 10), range-checked */
  HY_PT_NUMBER,      /**< finite floating-point number (strtod), range-checked */
  HY_PT_NUMBER_AUTO, /**< a number as HY_PT_NUMBER, or `auto` (computed by the code) */
  HY_PT_CHOICE,      /**< one of the comma-separated `choices` */
  HY_PT_LIST,        /**< comma list of distinct `choices`, or `none` */
  HY_PT_DEVICE       /**< `gpu`, `cpu`, `any`, or `P:D` (platform and device index) */
};

/** One schema entry. Unbounded ranges use -INFINITY / INFINITY. */
struct hy_param_def {
  const char *key;         /**< parameter name (case-sensitive) */
  enum hy_param_type type; /**< value type */
  const char *def;         /**< default value text, NULL when the key is required */
  double min, max;         /**< allowed range of INT, NUMBER and NUMBER_AUTO values */
  int min_open, max_open;  /**< 1: the bound itself is excluded (> rather than >=) */
  const char *choices;     /**< CHOICE, LIST, DEVICE: comma-separated words, else NULL */
  const char *unit;        /**< unit of the value ("" when dimensionless or not a quantity) */
  const char *doc;         /**< one-line description: meaning, rule, how `auto` is computed */
};

/** The schema: every known key, in the order of params-used.txt. Sets *n (if non-NULL). */
const struct hy_param_def *hy_params_schema(size_t *n);

/** Read the parameter file `path`, apply the overrides ("Key=Value", later ones
 *  win), and validate every value.
 *  @return the table, or NULL with *errors set to a malloc'd text holding every
 *  problem, one per line ('\n'-separated, no final newline), each naming the
 *  file and line or the `-P` argument. On success *errors is set to NULL.
 *  `errors` may be NULL when the caller does not want the text. The caller
 *  frees the text with free(). Never exits on a user error. */
struct hy_params *hy_params_parse_file(const char *path, char *const *overrides, int n_overrides,
                                       char **errors);

/** As hy_params_parse_file, for in-memory text; `name` stands for the file name
 *  in messages. */
struct hy_params *hy_params_parse_text(const char *name, const char *text, char *const *overrides,
                                       int n_overrides, char **errors);

/** As hy_params_parse_text, for `len` bytes of text that need not end in a
 *  NUL byte; a line holding a NUL byte is reported as an error. */
struct hy_params *hy_params_parse_buffer(const char *name, const char *text, size_t len,
                                         char *const *overrides, int n_overrides, char **errors);

/** Where the key's value comes from, as a message prefix: "FILE:LINE" for a
 *  line of the parameter file, "-P Key=Value" for an override, "FILE" for a
 *  default. Valid as long as the table. For checks made after parsing (a
 *  device that does not exist, a bad generator string) to name the place. */
const char *hy_params_where(const struct hy_params *p, const char *key);

/** Text of any key's value as given (or its default). */
const char *hy_params_get_str(const struct hy_params *p, const char *key);
/** Value of a NUMBER key, or of a NUMBER_AUTO key that is not `auto` or whose
 *  `auto` value has been resolved (then the resolved value). Ends the run on an
 *  unknown key, another type, or an unresolved `auto` (programming errors). */
double hy_params_get_number(const struct hy_params *p, const char *key);
/** Value of an INT key (ends the run on an unknown key or another type). */
long hy_params_get_int(const struct hy_params *p, const char *key);
/** 1 when a NUMBER_AUTO key is `auto` (also after it is resolved), else 0. */
int hy_params_is_auto(const struct hy_params *p, const char *key);
/** 1 when the key was given neither in the file nor by `-P` (its default is used). */
int hy_params_is_default(const struct hy_params *p, const char *key);
/** 1 when the LIST key's value contains `item` (which must be one of its choices). */
int hy_params_list_has(const struct hy_params *p, const char *key, const char *item);
/** OpenCLDevice: *kind is 0 any, 1 gpu, 2 cpu, 3 explicit; *platform and
 *  *device are the indices for kind 3, -1 otherwise. Pointers may be NULL. */
void hy_params_get_device(const struct hy_params *p, int *kind, int *platform, int *device);
/** Record the value actually used for a NUMBER_AUTO key that is `auto`
 *  (shown in params-used.txt, returned by hy_params_get_number). */
void hy_params_set_resolved(struct hy_params *p, const char *key, double value);

/** Text of params-used.txt (malloc'd; free with free()): a header comment
 *  `% hytree VERSION: parameters used`, then every key in schema order,
 *  aligned, with `% default` on defaults and `% auto -> VALUE` on resolved
 *  `auto` keys. The text parses back into the same values. */
char *hy_params_dump(const struct hy_params *p);

/** Every key in schema order as `Key  Value` lines (malloc'd; free with
 *  free()), the values the run uses: a resolved `auto` key holds its value
 *  in the fewest digits that read back exactly, where hy_params_dump keeps
 *  the word `auto`. No comments. */
char *hy_params_dump_used(const struct hy_params *p);

/** The parameter table of `hytree run --help`: per key a line with key,
 *  default and rule, and an indented line with the description. */
void hy_params_print_help(FILE *out);

/** Free the table (NULL is allowed). */
void hy_params_free(struct hy_params *p);

#endif
