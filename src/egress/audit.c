/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "egress/audit.h"

static int audit_fd = -1;
static const char *audit_sandbox = "";
static pthread_mutex_t audit_lock = PTHREAD_MUTEX_INITIALIZER;

void egress_audit_init(int fd, const char *sandbox) {
        audit_fd = fd;
        audit_sandbox = sandbox;
}

static json_t *str_or_null(const char *s) {
        return s ? json_string(s) : json_null();
}

void egress_audit(const egress_audit_rec *r) {
        char when[64];
        struct timeval tv;
        struct tm tm;
        gettimeofday(&tv, NULL);
        gmtime_r(&tv.tv_sec, &tm);
        size_t n = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        (void)snprintf(when + n, sizeof(when) - n, ".%03ldZ", (long)(tv.tv_usec / 1000));
        /* json_string refuses invalid UTF-8 (NULL -> jansson drops the field); the values come
         * from checked request heads, which are ASCII. */
        json_t *o = json_pack("{s:s, s:s, s:o, s:o, s:o, s:i, s:s, s:o, s:o, s:I, s:I, s:s}", "time", when,
                "sandbox", audit_sandbox, "method", str_or_null(r->method), "host", str_or_null(r->host),
                "path", str_or_null(r->path), "status", r->status, "decision", r->decision, "rule",
                str_or_null(r->rule), "reason", str_or_null(r->reason), "bytesUp", (json_int_t)r->bytes_up,
                "bytesDown", (json_int_t)r->bytes_down, "proto", r->proto ? r->proto : "http/1.1");
        if (!o)
                return;
        char *line = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!line)
                return;
        size_t len = strlen(line);
        line[len] = '\n';
        pthread_mutex_lock(&audit_lock);
        if (audit_fd >= 0 && write(audit_fd, line, len + 1) < 0)
                fprintf(stderr, "nook-egress: cannot write the audit log: %m, ignoring\n");
        pthread_mutex_unlock(&audit_lock);
        free(line);
}
