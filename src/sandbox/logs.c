/* SPDX-License-Identifier: Apache-2.0 */
/* nook_sandbox_logs: reads the output log the supervisor keeps (src/supervisor/outlog.h: CRI
 * format records, output.log.1 then output.log) or its own supervisor.log, filters by time and
 * count, and follows the file until the supervisor is gone.  The records' content is the
 * guest's: it is hostile, and only ever written out as bytes (escaped on request). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "sandbox/ctx.h"
#include "sandbox/rundir.h"
#include "store/store.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/proc.h"
#include "util/str.h"

#define READ_CAP ((size_t)8 * 1024 * 1024) /* a log file is at most ~1 MiB; more is not ours to trust */
#define FOLLOW_POLL_MS 200

typedef struct logs_ctx {
        const nook_logs_opts *o;
        int out_fd, err_fd;
        bool escape_out, escape_err;
        int64_t since_ns; /* INT64_MIN: no filter */
} logs_ctx;

/* "2026-12-03T03:39:44.123456789Z", "2026-12-03T03:39:44Z", "2026-12-03T05:39:44.5+02:00".
 * Returns 0 with *ret_ns (epoch ns), or -1. */
static int parse_rfc3339(const char *s, size_t len, int64_t *ret_ns) {
        struct tm tm = { 0 };
        char buf[64];
        if (len >= sizeof(buf))
                return -1;
        memcpy(buf, s, len);
        buf[len] = 0;
        const char *p = strptime(buf, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!p)
                return -1;
        int64_t frac = 0;
        if (*p == '.') {
                int digits = 0;
                for (p++; *p >= '0' && *p <= '9'; p++, digits++)
                        if (digits < 9)
                                frac = frac * 10 + (*p - '0');
                if (digits == 0)
                        return -1;
                for (; digits < 9; digits++)
                        frac *= 10;
        }
        int64_t off = 0;
        if (*p == 'Z' || *p == 'z')
                p++;
        else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
                const char *d = p + 1;
                for (int i = 0; i < 5; i++)
                        if (i != 2 && (d[i] < '0' || d[i] > '9'))
                                return -1;
                int64_t hh = (d[0] - '0') * 10 + (d[1] - '0'), mm = (d[3] - '0') * 10 + (d[4] - '0');
                if (hh > 23 || mm > 59)
                        return -1;
                off = (hh * 3600 + mm * 60) * (*p == '+' ? 1 : -1);
                p += 6;
        } else
                return -1;
        if (*p)
                return -1;
        time_t t = timegm(&tm);
        if (t == (time_t)-1)
                return -1;
        *ret_ns = ((int64_t)t - off) * 1000000000 + frac;
        return 0;
}

/* A Unix time as docker takes it: "1700000000" or "1700000000.5" (a duration needs a unit). */
static int parse_unix_time(const char *s, int64_t *ret_ns) {
        int64_t sec = 0, frac = 0;
        int digits = 0, fdigits = 0;
        for (; *s >= '0' && *s <= '9'; s++, digits++)
                if (digits < 12)
                        sec = sec * 10 + (*s - '0');
        if (digits == 0 || digits > 12)
                return -1;
        if (*s == '.')
                for (s++; *s >= '0' && *s <= '9'; s++, fdigits++)
                        if (fdigits < 9)
                                frac = frac * 10 + (*s - '0');
        if (*s)
                return -1;
        for (; fdigits < 9; fdigits++)
                frac *= 10;
        *ret_ns = sec * 1000000000 + frac;
        return 0;
}

static int parse_since(const char *s, int64_t *ret_ns, nook_error *err) {
        uint64_t ms;
        nook_error ignore;
        if (!s) {
                *ret_ns = INT64_MIN;
                return 0;
        }
        if (parse_rfc3339(s, strlen(s), ret_ns) == 0 || parse_unix_time(s, ret_ns) == 0)
                return 0;
        if (nook_parse_duration_ms(s, &ms, &ignore) == 0 && ms < (uint64_t)100 * 365 * 86400 * 1000) {
                struct timespec ts;
                (void)clock_gettime(CLOCK_REALTIME, &ts);
                *ret_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - (int64_t)ms * 1000000;
                return 0;
        }
        return nook_err_set(err, NOOK_E_INVALID,
                "Invalid since '%s': give a duration back from now (10m, 1h30m), an RFC 3339 time (2026-01-02T15:04:05Z) or a Unix time (1767366245)",
                s);
}

static int parse_tail(const char *s, int64_t *ret, nook_error *err) {
        if (!s || streq(s, "all")) {
                *ret = -1;
                return 0;
        }
        char *end = NULL;
        errno = 0;
        long long v = s[0] >= '0' && s[0] <= '9' ? strtoll(s, &end, 10) : -1;
        if (v < 0 || errno || !end || *end || v > 1000000000)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid tail '%s': give a number of lines (0 or more) or 'all'", s);
        *ret = v;
        return 0;
}

/* Writes data, control characters escaped if asked (the guest may send terminal sequences). */
static int put(const logs_ctx *c, int fd, const char *data, size_t len) {
        if (!(fd == c->out_fd ? c->escape_out : c->escape_err))
                return fd_write_all(fd, data, len);
        char buf[4096];
        size_t k = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned char ch = (unsigned char)data[i];
                if (k + 5 > sizeof(buf)) { /* room for "\xNN" and snprintf's NUL */
                        if (fd_write_all(fd, buf, k) < 0)
                                return -1;
                        k = 0;
                }
                if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
                        k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\\x%02x", ch);
                else
                        buf[k++] = (char)ch;
        }
        return fd_write_all(fd, buf, k);
}

/* One record of output.log; returns 1 if printed, 0 if skipped, -1 on a write error.  A line
 * that is not a record (a torn or foreign file) is skipped. */
static int emit_record(const logs_ctx *c, const char *line, size_t len, bool print) {
        const char *sp1 = memchr(line, ' ', len);
        if (!sp1)
                return 0;
        const char *sp2 = memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - line));
        if (!sp2 || (size_t)(sp2 + 3 - line) > len || sp2[2] != ' ' || (sp2[1] != 'F' && sp2[1] != 'P'))
                return 0;
        int64_t ts;
        if (parse_rfc3339(line, (size_t)(sp1 - line), &ts) < 0 || ts < c->since_ns)
                return 0;
        bool is_err = (size_t)(sp2 - sp1 - 1) == 6 && memcmp(sp1 + 1, "stderr", 6) == 0;
        if (!is_err && !((size_t)(sp2 - sp1 - 1) == 6 && memcmp(sp1 + 1, "stdout", 6) == 0))
                return 0;
        if (!print)
                return 1;
        int fd = is_err ? c->err_fd : c->out_fd;
        const char *data = sp2 + 3;
        if (c->o->timestamps &&
                (fd_write_all(fd, line, (size_t)(sp1 - line)) < 0 || fd_write_all(fd, " ", 1) < 0))
                return -1;
        if (put(c, fd, data, len - (size_t)(data - line)) < 0)
                return -1;
        if (sp2[1] == 'F' && fd_write_all(fd, "\n", 1) < 0)
                return -1;
        return 1;
}

/* Handles one line of either log: a record, or (system) a plain line. */
static int emit_line(const logs_ctx *c, const char *line, size_t len, bool print) {
        if (!c->o->system)
                return emit_record(c, line, len, print);
        if (!print)
                return 1;
        if (put(c, c->out_fd, line, len) < 0 || fd_write_all(c->out_fd, "\n", 1) < 0)
                return -1;
        return 1;
}

/* Reads all of fd from its position into *buf (appending), at most READ_CAP. */
static int slurp(int fd, char **buf, size_t *len) {
        for (;;) {
                if (*len >= READ_CAP)
                        return 0;
                char *nb = realloc(*buf, *len + 65536 + 1);
                if (!nb)
                        return -ENOMEM;
                *buf = nb;
                ssize_t k = read(fd, *buf + *len, 65536);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return 0;
                *len += (size_t)k;
        }
}

/* Prints the complete lines in buf[0..len) (the last N matching ones when tail >= 0); returns
 * the length consumed (an unfinished last line stays), or -1 on a write error. */
static ssize_t emit_lines(const logs_ctx *c, const char *buf, size_t len, int64_t tail) {
        int64_t matching = 0, skip = 0;
        if (tail >= 0) {
                for (const char *p = buf, *nl; (nl = memchr(p, '\n', len - (size_t)(p - buf))); p = nl + 1)
                        matching += emit_line(c, p, (size_t)(nl - p), false);
                skip = matching > tail ? matching - tail : 0;
        }
        const char *p = buf, *nl;
        for (; (nl = memchr(p, '\n', len - (size_t)(p - buf))); p = nl + 1) {
                bool print = skip == 0;
                int r = emit_line(c, p, (size_t)(nl - p), print);
                if (r < 0)
                        return -1;
                if (r > 0 && !print)
                        skip--;
        }
        return p - buf;
}

typedef struct follower {
        char *path;
        int fd;
        char *carry; /* an unfinished line */
        size_t carry_len;
} follower;

static void follower_done(follower *f) {
        f->fd = safe_close(f->fd);
        free(f->carry);
        f->carry = NULL;
}

/* Prints what was appended to the followed file; after a rotation, the rest of the old file
 * then the new one from its start. */
static int follow_step(const logs_ctx *c, follower *f, nook_error *err) {
        for (int round = 0; round < 2; round++) {
                int r = slurp(f->fd, &f->carry, &f->carry_len);
                if (r < 0)
                        return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot read '%s'", f->path);
                ssize_t used = emit_lines(c, f->carry, f->carry_len, -1);
                if (used < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot write the log out");
                memmove(f->carry, f->carry + used, f->carry_len - (size_t)used);
                f->carry_len -= (size_t)used;
                struct stat a, b;
                if (stat(f->path, &a) < 0 || fstat(f->fd, &b) < 0 ||
                        (a.st_ino == b.st_ino && a.st_dev == b.st_dev))
                        return 0;
                int nfd = open(f->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                if (nfd < 0)
                        return 0;
                safe_close(f->fd);
                f->fd = nfd;
                f->carry_len = 0; /* a torn last record of the old file is dropped */
        }
        return 0;
}

/* Follows until the supervisor (pid, start) is gone. */
static int follow(const logs_ctx *c, follower *f, pid_t pid, uint64_t start, nook_error *err) {
        _cleanup_close_ int pfd = pidfd_open_(pid);
        if (pfd < 0 || !proc_alive(pid, start))
                return follow_step(c, f, err);
        for (;;) {
                if (f->fd < 0)
                        f->fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                int r = f->fd >= 0 ? follow_step(c, f, err) : 0;
                if (r < 0)
                        return r;
                struct pollfd p = { .fd = pfd, .events = POLLIN };
                if (poll(&p, 1, FOLLOW_POLL_MS) > 0) /* gone: what it wrote last */
                        return f->fd >= 0 ? follow_step(c, f, err) : 0;
        }
}

static int open_log(const char *path, int *ret_fd, nook_error *err) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno != ENOENT)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", path);
        *ret_fd = fd;
        return 0;
}

static int logs_print(
        nook *n, const char *name, const logs_ctx *c, const char *sdir, int64_t tail, nook_error *err) {
        _cleanup_free_ char *cur = strprintf("%s/%s", sdir, c->o->system ? "supervisor.log" : "output.log");
        _cleanup_free_ char *old = c->o->system ? NULL : strprintf("%s/output.log.1", sdir);
        _cleanup_close_ int ofd = -1;
        _cleanup_(follower_done) follower f = { .path = cur, .fd = -1 };
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        if (!cur || (!c->o->system && !old))
                return nook_err_oom(err);
        /* the current file first (a rotation between the two opens then loses nothing) */
        int r = open_log(cur, &f.fd, err);
        if (r < 0)
                return r;
        if (old) {
                r = open_log(old, &ofd, err);
                if (r < 0)
                        return r;
        }
        r = ofd >= 0 ? slurp(ofd, &buf, &len) : 0;
        if (r >= 0 && f.fd >= 0)
                r = slurp(f.fd, &buf, &len);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot read the log of sandbox '%s'", name);
        ssize_t used = len ? emit_lines(c, buf, len, tail) : 0;
        if (used < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot write the log out");
        if (!c->o->follow)
                return 0;
        sandbox_rec rec = { 0 };
        store *st;
        nook_error ignore;
        r = 0;
        if (ctx_store(n, &st, &ignore) >= 0 && store_sandbox_get(st, name, &rec, &ignore) >= 0 &&
                streq(rec.state, "running") && rec.supervisor_pid > 0) {
                f.carry_len = len - (size_t)used;
                if (f.carry_len > 0) {
                        f.carry = TAKE_PTR(buf);
                        memmove(f.carry, f.carry + used, f.carry_len);
                }
                r = follow(c, &f, rec.supervisor_pid, rec.supervisor_start, err);
        }
        sandbox_rec_done(&rec);
        return r;
}

/* The supervisor's log is in the sandbox's runtime folder (sandbox/rundir.h), or in the state
 * folder of a sandbox an older nook ran.  A tmpfs is emptied at reboot: then say so. */
static int system_log_dir(const char *name, const char *sdir, const char *rdir, bool have_rdir,
        const char **ret, nook_error *err) {
        _cleanup_free_ char *in_state = strprintf("%s/supervisor.log", sdir);
        _cleanup_free_ char *in_run = strprintf("%s/supervisor.log", rdir);
        if (!in_state || !in_run)
                return nook_err_oom(err);
        if (access(in_run, F_OK) == 0) {
                *ret = rdir;
                return 0;
        }
        if (access(in_state, F_OK) == 0) {
                *ret = sdir;
                return 0;
        }
        return nook_err_set(err, NOOK_E_NOT_FOUND,
                "Sandbox '%s' has no supervisor log: it is kept in the runtime folder '%s'%s, which the host emptied since its supervisor last ran (a reboot, or a logout that removed $XDG_RUNTIME_DIR); the sandbox itself is intact: 'nook start %s' runs it again with a new log",
                name, rdir, have_rdir ? "" : " (gone)", name);
}

static int logs_opts_parse(
        const nook_logs_opts *o, int64_t *ret_tail, int64_t *ret_since_ns, nook_error *err) {
        int r = parse_tail(o->tail, ret_tail, err);
        if (r < 0)
                return r;
        r = parse_since(o->since, ret_since_ns, err);
        if (r < 0)
                return r;
        if (o->system && (o->since || o->timestamps))
                return nook_err_set(err, NOOK_E_INVALID,
                        "The supervisor's log has no per-line times: since and timestamps apply to the commands' output only");
        return 0;
}

int nook_logs_opts_check(const nook_logs_opts *o, nook_error *err) {
        int64_t tail, since_ns;
        return logs_opts_parse(o, &tail, &since_ns, err);
}

int nook_sandbox_logs(
        nook *n, const char *name, const nook_logs_opts *o, int out_fd, int err_fd, nook_error *err) {
        _cleanup_free_ char *sdir = NULL, *rdir = NULL;
        logs_ctx c = { .o = o,
                .out_fd = out_fd,
                .err_fd = err_fd,
                .escape_out = o->escape_terminals && isatty(out_fd),
                .escape_err = o->escape_terminals && isatty(err_fd) };
        int64_t tail;
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        r = logs_opts_parse(o, &tail, &c.since_ns, err);
        if (r < 0)
                return r;
        if ((r = ctx_sandbox_dir(n, name, &sdir, err)) < 0)
                return r;
        if ((r = sb_run_dir(n, name, &rdir, err)) < 0)
                return r;
        bool have_sdir = access(sdir, F_OK) == 0, have_rdir = access(rdir, F_OK) == 0;
        if (!have_sdir && !have_rdir && !ctx_sandbox_recorded(n, name))
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox '%s'", name);
        const char *dir = sdir;
        if (o->system) {
                r = system_log_dir(name, sdir, rdir, have_rdir, &dir, err);
                if (r < 0)
                        return r;
        }
        r = logs_print(n, name, &c, dir, tail, err);
        if (r < 0)
                return nook_err_wrap(err, "reading the log of sandbox '%s'", name);
        return 0;
}
