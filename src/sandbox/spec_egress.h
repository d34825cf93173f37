/* SPDX-License-Identifier: Apache-2.0 */
/* The egress part of the sandbox spec: "secrets" and "egress" (issue #14, docs/design/network.md).
 *
 *   "secrets": {"NAME": {"value": "...", "hosts": ["api.example.com", "*.example.com"],
 *                        "body": false}}
 *   "egress":  {"allowHttp": ["GET https://api.example.com/repos/..."], "caPem": "-----BEGIN...",
 *               "audit": false}
 *
 * A secret's value is taken from the spec given to create and kept in memory only: the canonical
 * (stored) form never holds it, and it travels to the supervisor over an inherited socket. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "nook.h"
#include "sandbox/spec.h"

#define SB_SECRETS_MAX 16
#define SB_SECRET_HOSTS_MAX 32
#define SB_SECRET_VALUE_MAX 8192
#define SB_ALLOW_HTTP_MAX 256
#define SB_ALLOW_HTTP_LEN 2048
#define SB_EGRESS_CA_MAX ((size_t)64 * 1024)

/* Checks "secrets" and "egress" of spec object o and fills s->secrets, s->n_secrets,
 * s->allow_http, s->egress_ca_pem, s->egress_audit.  Needs s->network and s->env filled. */
int sb_spec_parse_egress(json_t *o, sb_spec *s, nook_error *err);
/* Adds "secrets" (names, hosts, body: never a value) and "egress" to the canonical JSON o. */
void sb_spec_egress_to_json(const sb_spec *s, json_t *o);
void sb_spec_egress_done(sb_spec *s);
/* True when the sandbox needs the gateway: a secret, an HTTP rule or the audit flag. */
bool sb_spec_wants_egress(const sb_spec *s);
/* Create (not start) needs every secret's value: an error naming the first without one. */
int sb_spec_check_secret_values(const sb_spec *s, nook_error *err);
