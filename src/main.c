/* SPDX-License-Identifier: GPL-3.0-or-later
 * main.c: command-line entry point (placeholder until the driver lands). */
#include "config.h"

#include <stdio.h>

int main(void) {
  puts(PACKAGE_STRING);
  return 0;
}
