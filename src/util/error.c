/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nook.h"
#include "error.h"

static const char *const errc_table[_NOOK_E_MAX] = {
        [NOOK_E_OK] = "ok",
        [NOOK_E_INVALID] = "invalid",
        [NOOK_E_REFUSED] = "refused",
        [NOOK_E_NOT_FOUND] = "not_found",
        [NOOK_E_EXISTS] = "exists",
        [NOOK_E_STATE] = "state",
        [NOOK_E_MISSING_FEATURE] = "missing_feature",
        [NOOK_E_TIMEOUT] = "timeout",
        [NOOK_E_IO] = "io",
        [NOOK_E_NOMEM] = "nomem",
        [NOOK_E_BUSY] = "busy",
        [NOOK_E_INTERNAL] = "internal",
        [NOOK_E_CONFLICT] = "conflict",
};

const char *nook_errc_to_string(nook_errc code) {
        if ((int)code < 0 || code >= _NOOK_E_MAX)
                return "internal";
        return errc_table[code];
}

nook_errc nook_errc_from_string(const char *s) {
        for (int i = 0; i < _NOOK_E_MAX; i++)
                if (s && strcmp(errc_table[i], s) == 0)
                        return (nook_errc)i;
        return NOOK_E_INTERNAL;
}

_printf_(4, 0) static int err_vset(
        nook_error *err, nook_errc code, int errnum, const char *fmt, va_list ap) {
        if (code <= NOOK_E_OK || code >= _NOOK_E_MAX)
                code = NOOK_E_INTERNAL;
        if (!err)
                return -(int)code;
        err->code = code;
        err->sys_errno = errnum;
        int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        if (n < 0)
                n = 0;
        if (errnum > 0 && (size_t)n < sizeof(err->msg)) {
                char buf[128];
                const char *s = strerror_r(errnum, buf, sizeof(buf));
                (void)snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s", s);
        }
        return -(int)code;
}

int nook_err_set_(nook_error *err, nook_errc code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = err_vset(err, code, 0, fmt, ap);
        va_end(ap);
        return r;
}

int nook_err_errno_(nook_error *err, nook_errc code, const char *fmt, ...) {
        int errnum = errno;
        va_list ap;
        va_start(ap, fmt);
        int r = err_vset(err, code, errnum > 0 ? errnum : EIO, fmt, ap);
        va_end(ap);
        errno = errnum;
        return r;
}

int nook_err_errnum_(nook_error *err, nook_errc code, int errnum, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = err_vset(err, code, errnum < 0 ? -errnum : errnum, fmt, ap);
        va_end(ap);
        return r;
}

int nook_err_wrap(nook_error *err, const char *fmt, ...) {
        if (!err)
                return -NOOK_E_INTERNAL;
        char prefix[256];
        char old[sizeof(err->msg)];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(prefix, sizeof(prefix), fmt, ap);
        va_end(ap);
        memcpy(old, err->msg, sizeof(old));
        old[sizeof(old) - 1] = 0;
        /* Truncation is fine here: the message stays NUL-terminated and the prefix comes first. */
        size_t p = strnlen(prefix, sizeof(prefix));
        if (p > sizeof(err->msg) - 3)
                p = sizeof(err->msg) - 3;
        memcpy(err->msg, prefix, p);
        memcpy(err->msg + p, ": ", 2);
        size_t room = sizeof(err->msg) - p - 3;
        size_t o = strnlen(old, room);
        memcpy(err->msg + p + 2, old, o);
        err->msg[p + 2 + o] = 0;
        if (err->code <= NOOK_E_OK || err->code >= _NOOK_E_MAX)
                err->code = NOOK_E_INTERNAL;
        return -(int)err->code;
}

int nook_err_oom_(nook_error *err) {
        return nook_err_set_(err, NOOK_E_NOMEM, "Out of memory");
}

nook_errc nook_errc_from_errno(int errnum) {
        switch (errnum < 0 ? -errnum : errnum) {
        case ENOENT:
        case ESRCH:
                return NOOK_E_NOT_FOUND;
        case EEXIST:
        case ENOTEMPTY:
                return NOOK_E_EXISTS;
        case ENOMEM:
                return NOOK_E_NOMEM;
        case EINVAL:
        case ENAMETOOLONG:
        case ENOTDIR:
        case EISDIR:
                return NOOK_E_INVALID;
        case EXDEV:
        case ELOOP:
                return NOOK_E_REFUSED;
        case EBUSY:
        case EAGAIN:
                return NOOK_E_BUSY;
        case ETIMEDOUT:
                return NOOK_E_TIMEOUT;
        case ENOSYS:
        case EOPNOTSUPP:
                return NOOK_E_MISSING_FEATURE;
        default:
                return NOOK_E_IO;
        }
}
