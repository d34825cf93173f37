/* SPDX-License-Identifier: Apache-2.0 */
/* The audit log: one JSON object per line per request or refused connection.  Never a secret
 * value and never a placeholder: only the fields below, built here. */
#pragma once

#include <stdint.h>

typedef struct egress_audit_rec {
        const char *method, *host, *path; /* path: without the query string */
        int status; /* 0: none sent */
        const char *decision; /* allow, deny, block, error */
        const char *rule, *reason; /* NULL -> null */
        uint64_t bytes_up, bytes_down;
        const char *proto;
} egress_audit_rec;

void egress_audit_init(int fd, const char *sandbox);
void egress_audit(const egress_audit_rec *r);
