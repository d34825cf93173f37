/* SPDX-License-Identifier: Apache-2.0 */
/* nook-egress's configuration: the first message on fd 3 (docs/design/egress.md).  Secret
 * values live here and only here; config_free wipes them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "nook.h"
#include "egress/rules.h"

#define EGRESS_SECRET_MAX ((size_t)64 * 1024)
#define EGRESS_CONFIG_MAX ((size_t)1024 * 1024)

typedef struct egress_secret {
        char *name;
        char placeholder[EGRESS_PH_LEN + 1];
        char *value; /* NULL: not kept across a restart ("value": null); never substituted */
        size_t value_len;
        char **hosts; /* patterns, see egress_host_match */
        size_t n_hosts;
        bool body;
} egress_secret;

typedef struct egress_config {
        char *sandbox;
        bool policy; /* mode "policy" (else "public") */
        egress_secret *secrets;
        size_t n_secrets;
        egress_rule **rules; /* empty: every request allowed */
        size_t n_rules;
        char *extra_ca_pem; /* NULL if none */
} egress_config;

/* Parses and checks the JSON text (n bytes, may hold NULs: refused). */
int egress_config_parse(const char *text, size_t n, egress_config **ret, nook_error *err);
egress_config *egress_config_free(egress_config *c);
/* Zeroes every secret value in place, freeing nothing (threads may still hold pointers). */
void egress_config_wipe(egress_config *c);
/* True when s[0..] starts with a syntactically valid placeholder. */
bool egress_is_placeholder(const char *s, size_t n);
bool egress_secret_allows_host(const egress_secret *s, const char *host);
