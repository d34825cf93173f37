/* SPDX-License-Identifier: Apache-2.0 */
/* The reference grammar is the one of github.com/distribution/reference (read, not copied):
 *   reference  := name [ ":" tag ] [ "@" digest ]
 *   name       := [ domain "/" ] path-component [ "/" path-component ]*
 *   domain     := host [ ":" port ]     (the first component is a domain only when it holds a
 *                                         '.' or ':' or is "localhost", as docker decides)
 *   component  := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
 *   tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
 *   digest     := "sha256:" 64 lowercase hex   (the only algorithm nook verifies)
 * Everything is checked here, once, so the registry client can paste the parts into URLs. */
#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "image/ref.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/str.h"

#define REF_MAX 4096
#define NAME_MAX_LEN 255
#define TAG_MAX_LEN 128

void image_ref_done(image_ref *r) {
        if (!r)
                return;
        free(r->registry);
        free(r->repository);
        free(r->tag);
        free(r->digest);
        *r = (image_ref){};
}

static bool is_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One path component of len bytes; separators may only sit between alphanumerics. */
static bool component_valid(const char *s, size_t len) {
        if (len == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[len - 1]))
                return false;
        for (size_t i = 1; i < len; i++) {
                char c = s[i];
                if (is_lower_alnum(c))
                        continue;
                if (c == '.' || c == '_') {
                        /* "." and "_" once, or exactly "__" */
                        size_t run = 1;
                        while (i + run < len && (s[i + run] == '.' || s[i + run] == '_'))
                                run++;
                        if (run == 2 && c == '_' && s[i + 1] == '_') {
                                i++;
                                continue;
                        }
                        if (run != 1)
                                return false;
                        continue;
                }
                if (c == '-') {
                        while (i + 1 < len && s[i + 1] == '-')
                                i++;
                        continue;
                }
                return false;
        }
        return true;
}

/* host := label ( "." label )*, labels of [A-Za-z0-9-] not starting or ending in '-', or an
 * IPv6 literal in brackets; then an optional ":port". */
static bool domain_valid(const char *s, size_t len) {
        size_t hlen = len;
        const char *colon = NULL;
        if (len == 0)
                return false;
        if (s[0] == '[') {
                const char *end = memchr(s, ']', len);
                if (!end || end == s + 1)
                        return false;
                for (const char *p = s + 1; p < end; p++)
                        if (!isxdigit((unsigned char)*p) && *p != ':')
                                return false;
                hlen = (size_t)(end - s) + 1;
                if (hlen < len && s[hlen] != ':')
                        return false;
                colon = hlen < len ? s + hlen : NULL;
        } else {
                colon = memchr(s, ':', len);
                if (colon)
                        hlen = (size_t)(colon - s);
                size_t lab = 0;
                for (size_t i = 0; i <= hlen; i++) {
                        char c = i < hlen ? s[i] : '.';
                        if (c == '.') {
                                if (lab == 0 || s[i - 1] == '-')
                                        return false;
                                lab = 0;
                                continue;
                        }
                        if (!isalnum((unsigned char)c) && c != '-')
                                return false;
                        if (lab == 0 && c == '-')
                                return false;
                        lab++;
                }
        }
        if (colon) {
                size_t plen = len - (size_t)(colon - s) - 1;
                if (plen == 0 || plen > 5)
                        return false;
                for (size_t i = 1; i <= plen; i++)
                        if (!isdigit((unsigned char)colon[i]))
                                return false;
        }
        return true;
}

static bool tag_valid(const char *s) {
        size_t len = strlen(s);
        if (len == 0 || len > TAG_MAX_LEN)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                if (isalnum((unsigned char)c) || c == '_' || (i > 0 && (c == '.' || c == '-')))
                        continue;
                return false;
        }
        return true;
}

static bool digest_valid(const char *s) {
        if (!startswith(s, "sha256:") || strlen(s) != 7 + 64)
                return false;
        for (const char *p = s + 7; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

static int invalid(nook_error *err, const char *s, const char *why) {
        return nook_err_set(err, NOOK_E_INVALID, "Invalid image reference '%s': %s", s, why);
}

/* Splits name into domain and path; a first component counts as a domain the way docker
 * decides it, so "alpine" and "library/alpine" stay on docker.io. */
static int split_domain(const char *s, const char *name, size_t nlen, image_ref *r, nook_error *err) {
        const char *slash = memchr(name, '/', nlen);
        const char *path = name;
        size_t plen = nlen;

        if (slash) {
                size_t dlen = (size_t)(slash - name);
                bool is_domain = memchr(name, '.', dlen) || memchr(name, ':', dlen) ||
                        (dlen == 9 && strneq(name, "localhost", 9));
                /* an uppercase first component can only be a host name */
                for (size_t i = 0; !is_domain && i < dlen; i++)
                        if (isupper((unsigned char)name[i]))
                                is_domain = true;
                if (is_domain) {
                        if (!domain_valid(name, dlen))
                                return invalid(err, s, "the registry host is malformed");
                        r->registry = strndup(name, dlen);
                        path = slash + 1;
                        plen = nlen - dlen - 1;
                }
        }
        if (!r->registry)
                r->registry = strdup(IMAGE_DEFAULT_REGISTRY);
        if (!r->registry)
                return nook_err_oom(err);
        if (plen == 0)
                return invalid(err, s, "the repository name is empty");
        if (plen > NAME_MAX_LEN)
                return invalid(err, s, "the repository name is longer than 255 characters");
        for (const char *c = path; c < path + plen;) {
                const char *e = memchr(c, '/', (size_t)(path + plen - c));
                size_t clen = e ? (size_t)(e - c) : (size_t)(path + plen - c);
                if (!component_valid(c, clen))
                        return invalid(err, s,
                                "repository components are lowercase letters and digits, separated by '.', '_', '__' or '-'");
                c += clen + (e ? 1 : 0);
                if (e && c == path + plen)
                        return invalid(err, s, "the repository name ends in '/'");
        }
        bool hub = streq(r->registry, IMAGE_DEFAULT_REGISTRY);
        r->repository = hub && !memchr(path, '/', plen) ? strprintf("library/%.*s", (int)plen, path)
                                                        : strndup(path, plen);
        if (!r->repository)
                return nook_err_oom(err);
        /* counted with the implied "library/": the canonical name must parse again */
        if (strlen(r->repository) > NAME_MAX_LEN)
                return invalid(err, s, "the repository name is longer than 255 characters");
        return 0;
}

int image_ref_parse(const char *s, image_ref *ret, nook_error *err) {
        _cleanup_(image_ref_done) image_ref r = {};
        int rr;

        if (isempty(s))
                return nook_err_set(err, NOOK_E_INVALID, "Invalid image reference: it is empty");
        size_t len = strnlen(s, REF_MAX + 1);
        if (len > REF_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid image reference: longer than %d bytes", REF_MAX);
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
                        return invalid(err, s, "it contains a space, a control or a non-ASCII character");

        const char *at = strchr(s, '@');
        size_t nlen = at ? (size_t)(at - s) : len;
        if (at) {
                if (!digest_valid(at + 1))
                        return invalid(err, s, "the digest must be 'sha256:' and 64 lowercase hex digits");
                if (!(r.digest = strdup(at + 1)))
                        return nook_err_oom(err);
        }
        /* a ':' after the last '/' starts the tag; one before it is a registry port */
        const char *last_slash = memrchr(s, '/', nlen);
        const char *from = last_slash ? last_slash : s;
        const char *colon = memrchr(from, ':', nlen - (size_t)(from - s));
        if (colon) {
                if (!(r.tag = strndup(colon + 1, nlen - (size_t)(colon + 1 - s))))
                        return nook_err_oom(err);
                if (!tag_valid(r.tag))
                        return invalid(err, s,
                                "a tag is 1-128 of [A-Za-z0-9_.-] and does not start with '.' or '-'");
                nlen = (size_t)(colon - s);
        }
        rr = split_domain(s, s, nlen, &r, err);
        if (rr < 0)
                return rr;
        if (!r.tag && !r.digest && !(r.tag = strdup("latest")))
                return nook_err_oom(err);
        *ret = r;
        r = (image_ref){};
        return 0;
}

char *image_ref_to_string(const image_ref *r) {
        return strprintf("%s/%s%s%s%s%s", r->registry, r->repository, r->tag ? ":" : "",
                r->tag ? r->tag : "", r->digest ? "@" : "", r->digest ? r->digest : "");
}

const char *image_ref_api_host(const image_ref *r) {
        return streq(r->registry, IMAGE_DEFAULT_REGISTRY) ? IMAGE_DOCKER_HUB_API_HOST : r->registry;
}

int image_ref_valid(const char *s, nook_error *err) {
        image_ref r = {};
        int rr = image_ref_parse(s, &r, err);
        image_ref_done(&r);
        return rr;
}
