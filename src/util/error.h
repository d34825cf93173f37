/* SPDX-License-Identifier: Apache-2.0 */
/* Failures are made, wrapped and rendered in one place each (STYLE.md R1, R2).  All of these
 * fill a caller-owned nook_error without allocating, so they are safe in a post-clone child. */
#pragma once

#include "nook.h"
#include "macro.h"

/* The functions behind the macros below.  The macros make "returns a negative number" visible
 * at every call site, so static analysers follow error paths instead of guessing. */
int nook_err_set_(nook_error *err, nook_errc code, const char *fmt, ...) _printf_(3, 4);
int nook_err_errno_(nook_error *err, nook_errc code, const char *fmt, ...) _printf_(3, 4);
int nook_err_errnum_(nook_error *err, nook_errc code, int errnum, const char *fmt, ...) _printf_(4, 5);
int nook_err_oom_(nook_error *err);

/* What the macros return: -code for a valid code, -NOOK_E_INTERNAL otherwise (as the functions
 * store it), written so that both outcomes are visibly negative. */
#define NOOK_ERRC_RET_(c) ((c) > NOOK_E_OK && (c) < _NOOK_E_MAX ? -(int)(c) : -(int)NOOK_E_INTERNAL)
/* Fills err and returns -code. */
#define nook_err_set(err, code, ...)                                                                        \
        ({                                                                                                  \
                nook_errc c_ = (code);                                                                      \
                (void)nook_err_set_((err), c_, __VA_ARGS__);                                                \
                NOOK_ERRC_RET_(c_);                                                                         \
        })
/* Like nook_err_set, with errno appended as ": <strerror>" and kept in err->sys_errno.
 * Uses the current errno; call it right after the failing call. */
#define nook_err_errno(err, code, ...)                                                                      \
        ({                                                                                                  \
                nook_errc c_ = (code);                                                                      \
                (void)nook_err_errno_((err), c_, __VA_ARGS__);                                              \
                NOOK_ERRC_RET_(c_);                                                                         \
        })
/* Same with an explicit errno value (positive). */
#define nook_err_errnum(err, code, errnum, ...)                                                             \
        ({                                                                                                  \
                nook_errc c_ = (code);                                                                      \
                (void)nook_err_errnum_((err), c_, (errnum), __VA_ARGS__);                                   \
                NOOK_ERRC_RET_(c_);                                                                         \
        })
/* Prefixes context: "pulling 'x': <old message>".  Returns -err->code. */
int nook_err_wrap(nook_error *err, const char *fmt, ...) _printf_(2, 3);
/* NOOK_E_NOMEM with a fixed message. */
#define nook_err_oom(err)                                                                                   \
        ({                                                                                                  \
                (void)nook_err_oom_(err);                                                                   \
                -(int)NOOK_E_NOMEM;                                                                         \
        })
/* Maps an errno to the closest code (ENOENT -> NOT_FOUND, EEXIST -> EXISTS, ...). */
nook_errc nook_errc_from_errno(int errnum);
nook_errc nook_errc_from_string(const char *s);
