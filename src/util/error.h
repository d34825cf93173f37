/* SPDX-License-Identifier: Apache-2.0 */
/* Failures are made, wrapped and rendered in one place each (STYLE.md R1, R2).  All of these
 * fill a caller-owned nook_error without allocating, so they are safe in a post-clone child. */
#pragma once

#include "nook.h"
#include "macro.h"

/* Fills err and returns -code. */
int nook_err_set(nook_error *err, nook_errc code, const char *fmt, ...) _printf_(3, 4);
/* Like nook_err_set, with errno appended as ": <strerror>" and kept in err->sys_errno.
 * Uses the current errno; call it right after the failing call. */
int nook_err_errno(nook_error *err, nook_errc code, const char *fmt, ...) _printf_(3, 4);
/* Same with an explicit errno value (positive). */
int nook_err_errnum(nook_error *err, nook_errc code, int errnum, const char *fmt, ...) _printf_(4, 5);
/* Prefixes context: "pulling 'x': <old message>".  Returns -err->code. */
int nook_err_wrap(nook_error *err, const char *fmt, ...) _printf_(2, 3);
/* NOOK_E_NOMEM with a fixed message. */
int nook_err_oom(nook_error *err);
/* Maps an errno to the closest code (ENOENT -> NOT_FOUND, EEXIST -> EXISTS, ...). */
nook_errc nook_errc_from_errno(int errnum);
nook_errc nook_errc_from_string(const char *s);
