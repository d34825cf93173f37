/* SPDX-License-Identifier: Apache-2.0 */
/* nook_egress_log, nook_egress_log_entries: the egress gateway's audit log (<state>/egress.log,
 * one JSON object per line, written by nook-egress through the fd the supervisor gave it).  Its
 * fields come from the guest's requests (host, path, method): hostile text, only ever printed
 * re-encoded (--json: JSON with \u escapes) or with control characters as \xNN. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nook.h"
#include "sandbox/ctx.h"
#include "sandbox/spec.h"
#include "sandbox/spec_egress.h"
#include "store/store.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/proc.h"
#include "util/str.h"

#define EGRESS_LOG_MAX ((size_t)64 * 1024 * 1024)
#define LINE_MAX_BYTES ((size_t)64 * 1024)
#define FOLLOW_POLL_MS 200

typedef struct reader {
        int fd;
        char *carry; /* an unfinished last line */
        size_t carry_len;
} reader;

static void put_safe(FILE *f, const char *s) {
        for (const unsigned char *p = (const unsigned char *)(s ? s : "-"); *p; p++) {
                if (*p < 0x20 || *p == 0x7f)
                        fprintf(f, "\\x%02x", *p);
                else
                        fputc(*p, f);
        }
}

static const char *str_field(json_t *o, const char *k) {
        return json_string_value(json_object_get(o, k));
}

/* TIME DECISION STATUS METHOD HOST PATH, then the rule or the reason. */
static void print_text(FILE *f, json_t *e) {
        json_t *status = json_object_get(e, "status");
        const char *why = str_field(e, "rule") ? str_field(e, "rule") : str_field(e, "reason");
        put_safe(f, str_field(e, "time"));
        fputc(' ', f);
        put_safe(f, str_field(e, "decision"));
        if (json_is_integer(status))
                fprintf(f, " %lld ", (long long)json_integer_value(status));
        else
                fputs(" - ", f);
        put_safe(f, str_field(e, "method"));
        fputc(' ', f);
        put_safe(f, str_field(e, "host"));
        put_safe(f, str_field(e, "path") ? str_field(e, "path") : "");
        if (why) {
                fputs(" (", f);
                put_safe(f, why);
                fputc(')', f);
        }
        fputc('\n', f);
}

/* Each whole line of buf: handled by emit (a line that is not a JSON object is skipped: a torn
 * write of a killed gateway).  Returns the bytes used. */
static size_t each_line(const char *buf, size_t len, void (*emit)(json_t *, void *), void *data) {
        size_t used = 0;
        for (;;) {
                const char *nl = memchr(buf + used, '\n', len - used);
                if (!nl)
                        return used;
                size_t ll = (size_t)(nl - (buf + used));
                json_t *e = ll < LINE_MAX_BYTES ? json_loadb(buf + used, ll, 0, NULL) : NULL;
                if (json_is_object(e))
                        emit(e, data);
                json_decref(e);
                used += ll + 1;
        }
}

typedef struct sink {
        FILE *f;
        bool json;
        json_t *array; /* nook_egress_log_entries */
} sink;

static void emit_entry(json_t *e, void *data) {
        sink *s = data;
        if (s->array) {
                json_array_append(s->array, e);
                return;
        }
        if (!s->json) {
                print_text(s->f, e);
                return;
        }
        char *t = json_dumps(e, JSON_COMPACT | JSON_ENSURE_ASCII);
        if (t)
                fprintf(s->f, "%s\n", t);
        free(t);
}

/* Reads what is new in the file and emits its whole lines. */
static int read_step(reader *r, sink *s, nook_error *err) {
        for (;;) {
                char *nb = realloc(r->carry, r->carry_len + 65536 + 1);
                if (!nb)
                        return nook_err_oom(err);
                r->carry = nb;
                ssize_t k = read(r->fd, r->carry + r->carry_len, 65536);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read the egress log");
                if (k == 0)
                        break;
                r->carry_len += (size_t)k;
                size_t used = each_line(r->carry, r->carry_len, emit_entry, s);
                memmove(r->carry, r->carry + used, r->carry_len - used);
                r->carry_len -= used;
                if (r->carry_len > LINE_MAX_BYTES)
                        r->carry_len = 0; /* no line is that long: drop it */
        }
        if (s->f)
                (void)fflush(s->f);
        return 0;
}

/* Whether name's spec starts an egress gateway (a record that cannot be read: yes, the log's
 * absence then says nothing wrong). */
static bool has_gateway(nook *n, const char *name) {
        sandbox_rec rec = { 0 };
        store *st;
        nook_error ignore;
        if (ctx_store(n, &st, &ignore) < 0 || store_sandbox_get(st, name, &rec, &ignore) < 0)
                return true;
        sb_spec spec = { 0 };
        bool wants = sb_spec_parse(rec.spec_json, &spec, &ignore) < 0 || sb_spec_wants_egress(&spec);
        sb_spec_done(&spec);
        sandbox_rec_done(&rec);
        return wants;
}

/* need_gateway: a sandbox without a gateway is an error, not an empty log (its traffic, with a
 * network, went unaudited: an empty log would say there was none). */
static int open_egress_log(nook *n, const char *name, bool need_gateway, int *ret_fd, nook_error *err) {
        _cleanup_free_ char *sdir = NULL;
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        if ((r = ctx_sandbox_dir(n, name, &sdir, err)) < 0)
                return r;
        if (access(sdir, F_OK) < 0 && !ctx_sandbox_recorded(n, name))
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox '%s'", name);
        _cleanup_free_ char *p = strprintf("%s/egress.log", sdir);
        if (!p)
                return nook_err_oom(err);
        int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno != ENOENT)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", p);
        if (fd < 0 && need_gateway && !has_gateway(n, name))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Sandbox '%s' has no egress gateway, so no audit log: create it with --secret, --allow-http or --egress-audit to have one",
                        name);
        *ret_fd = fd;
        return 0;
}

/* Follows until the sandbox's supervisor is gone (it ends the gateway). */
static int follow(nook *n, const char *name, reader *r, sink *s, nook_error *err) {
        sandbox_rec rec = { 0 };
        store *st;
        nook_error ignore;
        if (ctx_store(n, &st, &ignore) < 0 || store_sandbox_get(st, name, &rec, &ignore) < 0)
                return 0;
        pid_t pid = streq(rec.state, "running") ? rec.supervisor_pid : 0;
        uint64_t start = rec.supervisor_start;
        sandbox_rec_done(&rec);
        _cleanup_close_ int pfd = pid > 0 ? pidfd_open_(pid) : -1;
        if (pfd < 0 || !proc_alive(pid, start))
                return 0;
        for (;;) {
                if (r->fd < 0 && open_egress_log(n, name, false, &r->fd, err) < 0)
                        return -err->code;
                int k = r->fd >= 0 ? read_step(r, s, err) : 0;
                if (k < 0)
                        return k;
                struct pollfd p = { .fd = pfd, .events = POLLIN };
                if (poll(&p, 1, FOLLOW_POLL_MS) > 0)
                        return r->fd >= 0 ? read_step(r, s, err) : 0;
        }
}

int nook_egress_log(nook *n, const char *name, const nook_egress_log_opts *o, int out_fd, nook_error *err) {
        reader rd = { .fd = -1 };
        int dfd = fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
        FILE *f = dfd >= 0 ? fdopen(dfd, "w") : NULL;
        if (!f) {
                safe_close(dfd);
                return nook_err_errno(err, NOOK_E_IO, "Cannot write the egress log out");
        }
        sink s = { .f = f, .json = o && o->json };
        int r = open_egress_log(n, name, true, &rd.fd, err);
        if (r >= 0 && rd.fd >= 0)
                r = read_step(&rd, &s, err);
        if (r >= 0 && o && o->follow)
                r = follow(n, name, &rd, &s, err);
        safe_close(rd.fd);
        free(rd.carry);
        if (fclose(f) != 0 && r >= 0)
                r = nook_err_errno(err, NOOK_E_IO, "Cannot write the egress log out");
        return r < 0 ? nook_err_wrap(err, "reading the egress log of sandbox '%s'", name) : 0;
}

int nook_egress_log_entries(nook *n, const char *name, char **ret_json, nook_error *err) {
        reader rd = { .fd = -1 };
        sink s = { .array = json_array() };
        if (!s.array)
                return nook_err_oom(err);
        int r = open_egress_log(n, name, false, &rd.fd, err);
        if (r >= 0 && rd.fd >= 0)
                r = read_step(&rd, &s, err);
        safe_close(rd.fd);
        free(rd.carry);
        char *t = r >= 0 ? json_dumps(s.array, JSON_COMPACT) : NULL;
        json_decref(s.array);
        if (r < 0)
                return nook_err_wrap(err, "reading the egress log of sandbox '%s'", name);
        if (!t)
                return nook_err_oom(err);
        *ret_json = t;
        return 0;
}
