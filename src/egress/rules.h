/* SPDX-License-Identifier: Apache-2.0 */
/* The --allow-http rule language ("METHOD URL-GLOB"), parsed once here for both libnook (which
 * validates rules at create) and nook-egress (which enforces them).  Grammar:
 *   rule     = METHOD SP URL-GLOB
 *   METHOD   = "*" | an upper-case HTTP token ("GET", "POST", "PROPFIND", ...)
 *   URL-GLOB = ("http" | "https") "://" HOST [":" PORT] PATH-GLOB
 *   HOST     = ["*."] label *("." label)     (letters, digits, '-', '_'; matched case-insensitively)
 *   PATH-GLOB starts with '/'; '*' matches any run of characters, '/' included.  With a '?' in
 *   the glob the query string is matched too, else it is ignored.
 * A rule without a port matches the scheme's default port only. */
#pragma once

#include <stdbool.h>

#include "nook.h"

/* A secret's placeholder (config.c makes them): no host name may hold one. */
#define EGRESS_PH_PREFIX "nook-ph-"
#define EGRESS_PH_LEN 40 /* "nook-ph-" + 32 hex */

#define EGRESS_RULE_MAX 4096 /* bytes in one rule */
#define EGRESS_HOST_MAX 253

typedef struct egress_rule {
        char *text; /* the rule as written, for the audit log and 403 bodies */
        char *method; /* NULL: any method */
        bool https;
        bool host_wildcard; /* "*.example.com": host holds "example.com", matches sub-domains only */
        char *host; /* lower case, no trailing dot */
        unsigned port; /* 443 or 80 when the rule names none */
        char *path_glob; /* consecutive '*' collapsed into one */
        bool match_query; /* the glob has a '?' */
} egress_rule;

int egress_rule_parse(const char *text, egress_rule **ret, nook_error *err);
void egress_rule_free(egress_rule *r);
static inline void egress_rule_freep(egress_rule **r) {
        egress_rule_free(*r);
        *r = NULL;
}

/* A secret's host pattern or a rule's HOST: "api.github.com" or "*.example.com". */
int egress_host_pattern_check(const char *pattern, nook_error *err);
/* A secret's host, on top of egress_host_pattern_check: a name with a dot below a top-level one.
 * A bare or wildcard top-level name ('com', '*.com') would send the value to any host anyone can
 * get a certificate for; an address or a single label ('localhost') could never match (the
 * gateway takes TLS with a server name only, to public destinations only). */
int egress_secret_host_check(const char *pattern, nook_error *err);
/* pattern as above against a concrete host name (any case, an optional trailing dot). */
bool egress_host_match(const char *pattern, const char *host);

/* 1 when the request matches the rule.  target is the request-target's origin form
 * ("/path?query").  A target that is not in normal form (see egress_target_is_normal) never
 * matches. */
bool egress_rule_match(const egress_rule *r, const char *method, bool https, const char *host, unsigned port,
        const char *target);
/* A target a rule can judge: starts with '/', printable ASCII, no "." or ".." segment, no
 * backslash, no encoded '.', '/' or '\' (%2e %2f %5c) in the path, no '#'.  Anything else could
 * be read differently by the upstream than by the glob, so rules refuse it. */
bool egress_target_is_normal(const char *target);
/* '*'-glob over a whole string ('*' matches any run, '/' included); iterative, O(len*len). */
bool egress_glob_match(const char *glob, const char *s);
