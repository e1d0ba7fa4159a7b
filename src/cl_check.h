/* SPDX-License-Identifier: GPL-3.0-or-later
 * cl_check.h: OpenCL status codes as names, for error messages. */
#ifndef HY_CL_CHECK_H
#define HY_CL_CHECK_H

/** Name of an OpenCL status code ("CL_OUT_OF_RESOURCES"), or "unknown". */
const char *hy_cl_errname(int code);

#endif
