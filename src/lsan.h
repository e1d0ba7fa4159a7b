/* SPDX-License-Identifier: GPL-3.0-or-later
 * lsan.h: LeakSanitizer hooks for builds with --enable-sanitizer=address;
 * elsewhere every macro expands to nothing. OpenMPI loads and unloads
 * plugins in MPI_Init and MPI_Finalize: what an unloaded plugin held becomes
 * unreachable, and its allocation stacks cannot be told apart (no symbols
 * once unloaded; fast unwinding stops in libraries built without frame
 * pointers). So allocations made inside MPI_Init are not leak candidates
 * (HY_LSAN_DISABLE / HY_LSAN_ENABLE around it), and the leak check runs just
 * before MPI_Finalize (HY_LSAN_CHECK, which also cancels the check at exit):
 * by then everything of hytree's is freed and the libraries still hold
 * theirs. A leak found ends the process with the report and a non-zero
 * status. tests/lsan.supp covers what MPI allocates and drops in between. */
#ifndef HY_LSAN_H
#define HY_LSAN_H

#if defined(__SANITIZE_ADDRESS__)
#define HY_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HY_LSAN 1
#endif
#endif

#ifdef HY_LSAN
#include <sanitizer/lsan_interface.h>
#define HY_LSAN_DISABLE() __lsan_disable()
#define HY_LSAN_ENABLE() __lsan_enable()
#define HY_LSAN_CHECK() __lsan_do_leak_check()
#else
#define HY_LSAN_DISABLE() ((void)0)
#define HY_LSAN_ENABLE() ((void)0)
#define HY_LSAN_CHECK() ((void)0)
#endif

#endif
