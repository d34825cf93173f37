/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nook.h"
#include "error.h"
#include "parse.h"

/* How much of a bad input a message repeats. */
#define PREVIEW_SIZE 64
/* Fraction digits kept exact: 10^18 still fits in 64 bits. */
#define MAX_FRACTION_DIGITS 18

void util_preview(const char *s, char *buf, size_t size) {
        size_t i = 0;

        if (size == 0)
                return;
        if (!s)
                s = "";
        for (; s[i] && i + 1 < size; i++) {
                unsigned char c = (unsigned char)s[i];
                buf[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
        }
        buf[i] = 0;
        if (s[i] && size >= 4)
                memcpy(buf + size - 4, "...", 4);
}

/* A non-negative decimal "123" or "123.456", kept exact as whole + frac / den. */
typedef struct decimal {
        uint64_t whole;
        uint64_t frac;
        uint64_t den; /* 10^(fraction digits), 1 without a fraction */
} decimal;

/* Parses a decimal at s and stores the first byte after it in *ret_end.  -EINVAL when there is
 * no number there or no digit on either side of '.', -ERANGE when it does not fit. */
static int decimal_parse(const char *s, decimal *ret, const char **ret_end) {
        decimal d = { .den = 1 };
        const char *p = s;

        if (*p < '0' || *p > '9')
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
                unsigned digit = (unsigned)(*p - '0');
                if (d.whole > (UINT64_MAX - digit) / 10)
                        return -ERANGE;
                d.whole = d.whole * 10 + digit;
        }
        if (*p == '.') {
                p++;
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                for (unsigned n = 0; *p >= '0' && *p <= '9'; p++, n++) {
                        if (n == MAX_FRACTION_DIGITS)
                                return -EINVAL;
                        d.frac = d.frac * 10 + (uint64_t)(*p - '0');
                        d.den *= 10;
                }
        }
        *ret = d;
        *ret_end = p;
        return 0;
}

/* d * mult, rounded up to a whole number; false on overflow. */
static bool decimal_scale(const decimal *d, uint64_t mult, uint64_t *ret) {
        unsigned __int128 v = (unsigned __int128)d->whole * mult;
        unsigned __int128 f = (unsigned __int128)d->frac * mult;
        v += f / d->den + (f % d->den != 0);
        if (v > UINT64_MAX)
                return false;
        *ret = (uint64_t)v;
        return true;
}

static bool decimal_is_zero(const decimal *d) {
        return d->whole == 0 && d->frac == 0;
}

static int invalid(nook_error *err, const char *kind, const char *s, const char *why) {
        char pv[PREVIEW_SIZE];
        util_preview(s, pv, sizeof(pv));
        return nook_err_set(err, NOOK_E_INVALID, "Invalid %s '%s': %s", kind, pv, why);
}

#define SIZE_RULE                                                                                           \
        "expected a number with an optional unit b, k, m, g, t or p (powers of 1024, e.g. 512m or 1.5g)"

static bool size_unit(const char *u, uint64_t *ret_mult) {
        static const char letters[] = "bkmgtp";
        size_t n = strlen(u);

        if (n == 0) {
                *ret_mult = 1;
                return true;
        }
        const char *l = strchr(letters, u[0] | 0x20);
        if (!l || n > 3)
                return false;
        /* "b" alone; "k", "kb", "kib" and so on for the others. */
        if (l == letters) {
                *ret_mult = 1;
                return n == 1;
        }
        if (n == 2 && (u[1] | 0x20) != 'b')
                return false;
        if (n == 3 && strcasecmp(u + 1, "ib") != 0)
                return false;
        *ret_mult = UINT64_C(1) << (10 * (unsigned)(l - letters));
        return true;
}

int parse_size(const char *s, uint64_t *ret_bytes, nook_error *err) {
        decimal d;
        uint64_t mult, v;

        if (!s || !s[0])
                return invalid(err, "size", s, "empty; " SIZE_RULE);
        if (s[0] == '-')
                return invalid(err, "size", s, "must not be negative");
        const char *u;
        int r = decimal_parse(s, &d, &u);
        if (r == -ERANGE)
                return invalid(err, "size", s, "too large (the limit is 16 EiB)");
        if (r < 0 || !size_unit(u, &mult))
                return invalid(err, "size", s, SIZE_RULE);
        if (!decimal_scale(&d, mult, &v))
                return invalid(err, "size", s, "too large (the limit is 16 EiB)");
        *ret_bytes = v;
        return 0;
}

int parse_memory_mib(const char *s, uint64_t *ret_mib, nook_error *err) {
        uint64_t bytes = 0;
        int r = parse_size(s, &bytes, err);
        if (r < 0)
                return r;
        *ret_mib = bytes / (UINT64_C(1) << 20) + (bytes % (UINT64_C(1) << 20) != 0);
        return 0;
}

#define DURATION_RULE                                                                                       \
        "expected seconds (e.g. 30) or amounts with units d, h, m, s, ms, largest first (e.g. 1h30m, "      \
        "500ms)"

typedef struct duration_unit {
        const char *name;
        uint64_t ms;
} duration_unit;

/* Largest first: a component must use a unit later in this table than the one before it. */
static const duration_unit duration_units[] = {
        { "d", UINT64_C(86400000) },
        { "h", UINT64_C(3600000) },
        { "m", UINT64_C(60000) },
        { "s", UINT64_C(1000) },
        { "ms", UINT64_C(1) },
};

/* The unit at p: its index and length, or -1.  "ms" is tried before "m". */
static int duration_unit_at(const char *p, size_t *ret_len) {
        if (p[0] == 'm' && p[1] == 's') {
                *ret_len = 2;
                return 4;
        }
        for (int i = 0; i < 4; i++)
                if (p[0] == duration_units[i].name[0]) {
                        *ret_len = 1;
                        return i;
                }
        return -1;
}

int parse_duration_ms(const char *s, uint64_t *ret_ms, nook_error *err) {
        uint64_t total = 0, v;
        int next = 0; /* the first unit still allowed */
        decimal d;

        if (!s || !s[0])
                return invalid(err, "duration", s, "empty; " DURATION_RULE);
        if (s[0] == '-')
                return invalid(err, "duration", s, "must not be negative");
        const char *p;
        int r = decimal_parse(s, &d, &p);
        if (r == -ERANGE)
                return invalid(err, "duration", s, "too large");
        if (r == 0 && !*p) {
                if (!decimal_scale(&d, 1000, &v))
                        return invalid(err, "duration", s, "too large");
                *ret_ms = v;
                return 0;
        }
        p = s;
        while (*p) {
                size_t len = 0;
                r = decimal_parse(p, &d, &p);
                if (r == -ERANGE)
                        return invalid(err, "duration", s, "too large");
                if (r < 0)
                        return invalid(err, "duration", s, DURATION_RULE);
                int u = duration_unit_at(p, &len);
                if (u < 0)
                        return invalid(err, "duration", s, DURATION_RULE);
                if (u < next)
                        return invalid(
                                err, "duration", s, "each unit may appear once, largest first (e.g. 1h30m)");
                next = u + 1;
                p += len;
                if (!decimal_scale(&d, duration_units[u].ms, &v) || v > UINT64_MAX - total)
                        return invalid(err, "duration", s, "too large");
                total += v;
        }
        *ret_ms = total;
        return 0;
}

int parse_uint64(const char *s, uint64_t *ret, nook_error *err) {
        uint64_t v = 0;

        if (!s || !s[0])
                return invalid(err, "number", s, "empty; expected a whole number");
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return invalid(err, "number", s, "expected a whole number of decimal digits");
                unsigned digit = (unsigned)(*p - '0');
                if (v > (UINT64_MAX - digit) / 10)
                        return invalid(err, "number", s, "too large (the limit is 18446744073709551615)");
                v = v * 10 + digit;
        }
        *ret = v;
        return 0;
}

int parse_cpus(const char *s, unsigned *ret, nook_error *err) {
        decimal d;
        uint64_t v;

        if (!s || !s[0])
                return invalid(err, "CPU count", s, "empty; expected a number above 0 (e.g. 2 or 0.5)");
        if (s[0] == '-')
                return invalid(err, "CPU count", s, "must be above 0");
        const char *p;
        int r = decimal_parse(s, &d, &p);
        if (r == -ERANGE)
                return invalid(err, "CPU count", s, "too large (the limit is 8192)");
        if (r < 0 || *p)
                return invalid(err, "CPU count", s, "expected a number above 0 (e.g. 2 or 0.5)");
        if (decimal_is_zero(&d))
                return invalid(err, "CPU count", s, "must be above 0");
        /* The cap keeps cpus * 100000 (the cgroup cpu.max quota per period) within 32 bits and is
         * the kernel's largest NR_CPUS. */
        if (!decimal_scale(&d, 1, &v) || v > PARSE_CPUS_MAX)
                return invalid(err, "CPU count", s, "too large (the limit is 8192)");
        *ret = (unsigned)v;
        return 0;
}

/* ---- signals ---- */

static const struct {
        const char *name;
        int sig;
} sig_names[] = {
        { "HUP", SIGHUP },
        { "INT", SIGINT },
        { "QUIT", SIGQUIT },
        { "ILL", SIGILL },
        { "TRAP", SIGTRAP },
        { "ABRT", SIGABRT },
        { "IOT", SIGIOT },
        { "BUS", SIGBUS },
        { "FPE", SIGFPE },
        { "KILL", SIGKILL },
        { "USR1", SIGUSR1 },
        { "SEGV", SIGSEGV },
        { "USR2", SIGUSR2 },
        { "PIPE", SIGPIPE },
        { "ALRM", SIGALRM },
        { "TERM", SIGTERM },
        { "STKFLT", SIGSTKFLT },
        { "CHLD", SIGCHLD },
        { "CONT", SIGCONT },
        { "STOP", SIGSTOP },
        { "TSTP", SIGTSTP },
        { "TTIN", SIGTTIN },
        { "TTOU", SIGTTOU },
        { "URG", SIGURG },
        { "XCPU", SIGXCPU },
        { "XFSZ", SIGXFSZ },
        { "VTALRM", SIGVTALRM },
        { "PROF", SIGPROF },
        { "WINCH", SIGWINCH },
        { "IO", SIGIO },
        { "POLL", SIGPOLL },
        { "PWR", SIGPWR },
        { "SYS", SIGSYS },
};

static int signal_from_text(const char *s) {
        if (!s || !*s)
                return -1;
        if (s[0] >= '0' && s[0] <= '9') {
                char *end = NULL;
                errno = 0;
                long v = strtol(s, &end, 10);
                if (errno || *end || v <= 0 || v > SIGRTMAX)
                        return -1;
                return (int)v;
        }
        const char *n = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
        for (size_t i = 0; i < ELEMENTSOF(sig_names); i++)
                if (strcasecmp(sig_names[i].name, n) == 0)
                        return sig_names[i].sig;
        if (strncasecmp(n, "RTMIN+", 6) == 0 && n[6] >= '0' && n[6] <= '9') {
                char *end = NULL;
                long v = strtol(n + 6, &end, 10);
                if (end && !*end && v >= 0 && SIGRTMIN + v <= SIGRTMAX)
                        return SIGRTMIN + (int)v;
        }
        return -1;
}

int parse_signal(const char *s, int *ret, nook_error *err) {
        char preview[PREVIEW_SIZE];
        int sig = signal_from_text(s);
        if (sig > 0) {
                *ret = sig;
                return 0;
        }
        util_preview(s ? s : "", preview, sizeof(preview));
        return nook_err_set(err, NOOK_E_INVALID,
                "'%s' is not a signal: give a name (TERM, SIGHUP, RTMIN+1) or a number from 1 to %d",
                preview, SIGRTMAX);
}
