/* SPDX-License-Identifier: Apache-2.0 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nook.h"
#include "egress/rules.h"
#include "util/error.h"
#include "util/macro.h"

#define METHOD_MAX 32

void egress_rule_free(egress_rule *r) {
        if (!r)
                return;
        free(r->text);
        free(r->method);
        free(r->host);
        free(r->path_glob);
        free(r);
}

/* RFC 9110 tchar */
static bool is_tchar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_label_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                c == '_';
}

static int check_method(const char *m, size_t n, nook_error *err) {
        if (n == 0)
                return nook_err_set(
                        err, NOOK_E_INVALID, "the method is missing: write 'GET https://host/path'");
        if (n == 1 && m[0] == '*')
                return 0;
        if (n > METHOD_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "the method is longer than %d characters", METHOD_MAX);
        for (size_t i = 0; i < n; i++) {
                if (m[i] == '*')
                        return nook_err_set(err, NOOK_E_INVALID,
                                "'*' in the method '%.*s': write '*' alone for any method", (int)n, m);
                if (!is_tchar(m[i]))
                        return nook_err_set(
                                err, NOOK_E_INVALID, "the method '%.*s' is not an HTTP token", (int)n, m);
                if (m[i] >= 'a' && m[i] <= 'z')
                        return nook_err_set(err, NOOK_E_INVALID,
                                "the method '%.*s' has lower-case letters: HTTP methods are case-sensitive, "
                                "write them in upper case (e.g. 'GET')",
                                (int)n, m);
        }
        return 0;
}

/* host: n bytes, optional "*." prefix already stripped by the caller when wildcard. */
static int check_host_labels(const char *h, size_t n, nook_error *err) {
        if (n == 0)
                return nook_err_set(err, NOOK_E_INVALID, "the host name is empty");
        if (n > EGRESS_HOST_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "the host name is longer than %d characters", EGRESS_HOST_MAX);
        size_t label = 0;
        for (size_t i = 0; i < n; i++) {
                char c = h[i];
                if (c == '.') {
                        if (label == 0)
                                return nook_err_set(err, NOOK_E_INVALID,
                                        "the host '%.*s' has an empty label", (int)n, h);
                        label = 0;
                        continue;
                }
                if (c == '*')
                        return nook_err_set(err, NOOK_E_INVALID,
                                "'*' inside the host '%.*s': only a leading '*.' is allowed (e.g. '*.example.com')",
                                (int)n, h);
                if (!is_label_char(c))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "the host '%.*s' has a character that is not a letter, digit, '-', '_' or '.'",
                                (int)n, h);
                if (++label > 63)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "a label of the host '%.*s' is longer than 63 characters", (int)n, h);
        }
        if (label == 0)
                return nook_err_set(err, NOOK_E_INVALID, "the host '%.*s' ends with '.'", (int)n, h);
        return 0;
}

int egress_host_pattern_check(const char *pattern, nook_error *err) {
        if (!pattern || !*pattern)
                return nook_err_set(err, NOOK_E_INVALID, "the host name is empty");
        size_t n = strlen(pattern);
        if (n > EGRESS_HOST_MAX + 2)
                return nook_err_set(
                        err, NOOK_E_INVALID, "the host name is longer than %d characters", EGRESS_HOST_MAX);
        /* a guest's SNI or Host made of a placeholder would carry it into the audit log, which
         * names secrets, never their placeholders */
        if (strcasestr(pattern, EGRESS_PH_PREFIX))
                return nook_err_set(err, NOOK_E_INVALID, "a host name never holds a placeholder");
        if (pattern[0] == '*') {
                if (n == 1 || pattern[1] != '.')
                        return nook_err_set(err, NOOK_E_INVALID,
                                "the host '%s' starts with '*' but not '*.': write '*.example.com' for its sub-domains",
                                pattern);
                return check_host_labels(pattern + 2, n - 2, err);
        }
        return check_host_labels(pattern, n, err);
}

/* Compares host names ignoring case and one trailing dot on the concrete name. */
bool egress_host_match(const char *pattern, const char *host) {
        if (!pattern || !host)
                return false;
        size_t hn = strlen(host);
        if (hn > 0 && host[hn - 1] == '.')
                hn--;
        if (hn == 0)
                return false;
        if (pattern[0] == '*' && pattern[1] == '.') {
                const char *suffix = pattern + 1; /* ".example.com" */
                size_t sn = strlen(suffix);
                return hn > sn && strncasecmp(host + hn - sn, suffix, sn) == 0;
        }
        return strlen(pattern) == hn && strncasecmp(pattern, host, hn) == 0;
}

int egress_secret_host_check(const char *pattern, nook_error *err) {
        int r = egress_host_pattern_check(pattern, err);
        if (r < 0)
                return r;
        bool wild = pattern[0] == '*';
        const char *name = wild ? pattern + 2 : pattern;
        if (strspn(name, "0123456789.") == strlen(name))
                return nook_err_set(err, NOOK_E_INVALID,
                        "'%s' is an address: a secret goes only to a host named over HTTPS (name it)",
                        pattern);
        if (!strchr(name, '.'))
                return nook_err_set(err, NOOK_E_INVALID,
                        wild ? "'%s' covers every name under a top-level domain: anyone can get a certificate "
                               "for one of them; name the service's own hosts"
                             : "'%s' is a single label: a secret goes only to a public host named over HTTPS "
                               "(name it in full, e.g. api.example.com)",
                        pattern);
        return 0;
}

static int parse_port(const char *p, size_t n, unsigned *ret, nook_error *err) {
        unsigned v = 0;
        if (n == 0 || n > 5)
                return nook_err_set(
                        err, NOOK_E_INVALID, "the port '%.*s' is not a number from 1 to 65535", (int)n, p);
        for (size_t i = 0; i < n; i++) {
                if (p[i] < '0' || p[i] > '9')
                        return nook_err_set(err, NOOK_E_INVALID,
                                "the port '%.*s' is not a number from 1 to 65535", (int)n, p);
                v = v * 10 + (unsigned)(p[i] - '0');
        }
        if (v == 0 || v > 65535)
                return nook_err_set(
                        err, NOOK_E_INVALID, "the port '%.*s' is not a number from 1 to 65535", (int)n, p);
        *ret = v;
        return 0;
}

/* The path glob: '/' first, visible ASCII, no '#'; runs of '*' collapse into one. */
static int parse_path_glob(const char *p, egress_rule *r, nook_error *err) {
        if (*p != '/')
                return nook_err_set(err, NOOK_E_INVALID,
                        "the URL has no path: write at least '/' or '/*' after the host");
        size_t n = strlen(p);
        char *g = malloc(n + 1);
        if (!g)
                return nook_err_oom(err);
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
                if (p[i] == '#') {
                        free(g);
                        return nook_err_set(err, NOOK_E_INVALID,
                                "the path has a '#': a fragment is never sent to a server");
                }
                if (p[i] == '*' && o > 0 && g[o - 1] == '*')
                        continue;
                g[o++] = p[i];
        }
        g[o] = 0;
        r->match_query = strchr(g, '?') != NULL;
        r->path_glob = g;
        return 0;
}

static int parse_scheme(const char **p, egress_rule *r, nook_error *err) {
        if (strncasecmp(*p, "https://", 8) == 0) {
                r->https = true;
                r->port = 443;
                *p += 8;
                return 0;
        }
        if (strncasecmp(*p, "http://", 7) == 0) {
                r->https = false;
                r->port = 80;
                *p += 7;
                return 0;
        }
        return nook_err_set(err, NOOK_E_INVALID, "the URL must start with 'https://' or 'http://'");
}

static int parse_url(const char *url, egress_rule *r, nook_error *err) {
        const char *p = url;
        int q = parse_scheme(&p, r, err);
        if (q < 0)
                return q;
        size_t authority = strcspn(p, "/");
        const char *colon = memchr(p, ':', authority);
        if (memchr(p, '@', authority))
                return nook_err_set(
                        err, NOOK_E_INVALID, "the URL has user information ('@'): name the host only");
        if (memchr(p, '[', authority))
                return nook_err_set(
                        err, NOOK_E_INVALID, "IPv6 literal hosts are not supported: name the host");
        size_t hn = colon ? (size_t)(colon - p) : authority;
        _cleanup_free_ char *host = strndup(p, hn);
        if (!host)
                return nook_err_oom(err);
        q = egress_host_pattern_check(host, err);
        if (q < 0)
                return q;
        if (colon) {
                q = parse_port(colon + 1, authority - hn - 1, &r->port, err);
                if (q < 0)
                        return q;
                /* the sandbox sends the gateway ports 80 and 443 alone: a rule for another could
                 * never match, and read as if that port were judged */
                if (r->port != 80 && r->port != 443)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "the port %u is never judged by rules: the gateway sees ports 80 and 443 only "
                                "(other ports follow the network policy, --allow ADDR:PORT)",
                                r->port);
        }
        r->host_wildcard = host[0] == '*';
        for (char *c = host; *c; c++)
                if (*c >= 'A' && *c <= 'Z')
                        *c = (char)(*c - 'A' + 'a');
        r->host = strdup(r->host_wildcard ? host + 2 : host);
        if (!r->host)
                return nook_err_oom(err);
        return parse_path_glob(p + authority, r, err);
}

static int rule_parse_into(const char *text, egress_rule *r, nook_error *err) {
        size_t n = strlen(text);
        if (n == 0)
                return nook_err_set(
                        err, NOOK_E_INVALID, "the rule is empty: write 'METHOD https://host/path-glob'");
        if (n > EGRESS_RULE_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "the rule is longer than %d bytes", EGRESS_RULE_MAX);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)text[i] <= 0x20 && text[i] != ' ')
                        return nook_err_set(
                                err, NOOK_E_INVALID, "the rule has a control character at byte %zu", i);
                else if ((unsigned char)text[i] >= 0x7f)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "the rule has a non-ASCII byte at byte %zu: percent-encode it as the request will",
                                i);
        const char *sp = strchr(text, ' ');
        if (!sp)
                return nook_err_set(err, NOOK_E_INVALID, "the method is missing: write 'GET %s'",
                        n < 200 ? text : "https://host/path");
        if (strchr(sp + 1, ' '))
                return nook_err_set(err, NOOK_E_INVALID,
                        "the rule has more than one space: write exactly 'METHOD URL' (percent-encode spaces as %%20)");
        int q = check_method(text, (size_t)(sp - text), err);
        if (q < 0)
                return q;
        if (!(sp - text == 1 && text[0] == '*')) {
                r->method = strndup(text, (size_t)(sp - text));
                if (!r->method)
                        return nook_err_oom(err);
        }
        q = parse_url(sp + 1, r, err);
        if (q < 0)
                return q;
        r->text = strdup(text);
        if (!r->text)
                return nook_err_oom(err);
        return 0;
}

int egress_rule_parse(const char *text, egress_rule **ret, nook_error *err) {
        if (!text)
                return nook_err_set(err, NOOK_E_INVALID, "Invalid HTTP rule: the rule is missing");
        _cleanup_(egress_rule_freep) egress_rule *r = calloc(1, sizeof(*r));
        if (!r)
                return nook_err_oom(err);
        int q = rule_parse_into(text, r, err);
        if (q < 0) {
                if (err && err->code != NOOK_E_NOMEM)
                        return nook_err_wrap(err,
                                "Invalid HTTP rule '%.100s%s' (want 'METHOD https://host/path-glob')", text,
                                strlen(text) > 100 ? "…" : "");
                return q;
        }
        *ret = TAKE_PTR(r);
        return 0;
}

bool egress_glob_match(const char *glob, const char *s) {
        const char *star = NULL, *resume = NULL;
        while (*s) {
                if (*glob == '*') {
                        star = glob++;
                        resume = s;
                } else if (*glob == *s) {
                        glob++;
                        s++;
                } else if (star) {
                        glob = star + 1;
                        s = ++resume;
                } else
                        return false;
        }
        while (*glob == '*')
                glob++;
        return *glob == 0;
}

static bool segment_is_dots(const char *seg, size_t n) {
        return (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.');
}

bool egress_target_is_normal(const char *target) {
        if (!target || target[0] != '/')
                return false;
        size_t path_len = strcspn(target, "?");
        for (const char *c = target; *c; c++)
                if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f || *c == '#')
                        return false;
        for (size_t i = 0; i < path_len; i++) {
                if (target[i] == '\\')
                        return false;
                if (target[i] == '%' && i + 2 < path_len) {
                        char a = target[i + 1], b = (char)(target[i + 2] | 0x20);
                        if ((a == '2' && (b == 'e' || b == 'f')) || (a == '5' && b == 'c'))
                                return false;
                }
                if (target[i] == '/') {
                        /* "..;x" too: servers that take ';' as a parameter (Tomcat, Spring) walk
                         * up on it, where a rule's glob saw a plain name */
                        size_t seg = strcspn(target + i + 1, ";/?");
                        if (segment_is_dots(target + i + 1, seg))
                                return false;
                }
        }
        return true;
}

bool egress_rule_match(const egress_rule *r, const char *method, bool https, const char *host, unsigned port,
        const char *target) {
        if (!r || !method || !host || !egress_target_is_normal(target))
                return false;
        if (r->method && strcmp(r->method, method) != 0)
                return false;
        if (r->https != https || r->port != port)
                return false;
        char pattern[EGRESS_HOST_MAX + 3];
        (void)snprintf(pattern, sizeof(pattern), "%s%s", r->host_wildcard ? "*." : "", r->host);
        if (!egress_host_match(pattern, host))
                return false;
        if (r->match_query)
                return egress_glob_match(r->path_glob, target);
        size_t n = strcspn(target, "?");
        _cleanup_free_ char *path = strndup(target, n);
        return path && egress_glob_match(r->path_glob, path);
}
