/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "nook.h"
#include "isolate/net.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/str.h"

static const char *const mode_names[_NET_MODE_MAX] = {
        [NET_MODE_OFF] = "off",
        [NET_MODE_PUBLIC] = "public",
        [NET_MODE_POLICY] = "policy",
};

const char *net_mode_to_string(net_mode m) {
        return m >= 0 && m < _NET_MODE_MAX ? mode_names[m] : NULL;
}

net_mode net_mode_from_string(const char *s) {
        for (int i = 0; s && i < _NET_MODE_MAX; i++)
                if (streq(s, mode_names[i]))
                        return (net_mode)i;
        return _NET_MODE_INVALID;
}

/* ---- addresses ------------------------------------------------------------------------------- */

static bool prefix_bits_clear(const net_cidr *c) {
        size_t len = c->family == AF_INET ? 4 : 16;
        for (size_t i = 0; i < len; i++) {
                unsigned first = i * 8;
                uint8_t mask = c->prefix >= first + 8 ? 0xff
                        : c->prefix <= first          ? 0
                                                      : (uint8_t)(0xff << (8 - (c->prefix - first)));
                if (c->addr[i] & (uint8_t)~mask)
                        return false;
        }
        return true;
}

int net_cidr_parse(const char *s, net_cidr *ret, nook_error *err) {
        char buf[INET6_ADDRSTRLEN + 8];
        net_cidr c = { 0 };
        if (isempty(s) || strlen(s) >= sizeof(buf))
                return nook_err_set(err, NOOK_E_INVALID, "'%s' is not an address or CIDR", s ? s : "");
        strcpy(buf, s);
        char *slash = strchr(buf, '/');
        if (slash)
                *slash++ = 0;
        if (inet_pton(AF_INET, buf, c.addr) == 1)
                c.family = AF_INET;
        else if (inet_pton(AF_INET6, buf, c.addr) == 1)
                c.family = AF_INET6;
        else
                return nook_err_set(err, NOOK_E_INVALID, "'%s' is not an IPv4 or IPv6 address or CIDR", s);
        unsigned max = c.family == AF_INET ? 32 : 128;
        c.prefix = max;
        if (slash) {
                char *end;
                errno = 0;
                unsigned long p = strtoul(slash, &end, 10);
                if (!isdigit((unsigned char)*slash) || *end || errno || p > max)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "'%s': the prefix length must be 0-%u", s, max);
                c.prefix = (unsigned)p;
        }
        if (!prefix_bits_clear(&c))
                return nook_err_set(err, NOOK_E_INVALID,
                        "'%s': the address has bits set beyond the /%u prefix (did you mean the network address?)",
                        s, c.prefix);
        *ret = c;
        return 0;
}

void net_cidr_format(const net_cidr *c, char *buf, size_t len) {
        char a[INET6_ADDRSTRLEN];
        unsigned max = c->family == AF_INET ? 32 : 128;
        if (!inet_ntop(c->family, c->addr, a, sizeof(a)))
                a[0] = 0;
        if (c->prefix == max)
                (void)snprintf(buf, len, "%s", a);
        else
                (void)snprintf(buf, len, "%s/%u", a, c->prefix);
}

bool net_cidr_contains(const net_cidr *outer, const net_cidr *inner) {
        if (outer->family != inner->family || inner->prefix < outer->prefix)
                return false;
        unsigned full = outer->prefix / 8, rest = outer->prefix % 8;
        if (memcmp(outer->addr, inner->addr, full) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t)(0xff << (8 - rest));
        return (outer->addr[full] & mask) == (inner->addr[full] & mask);
}

/* ---- ports ----------------------------------------------------------------------------------- */

static int parse_port(const char *s, size_t len, unsigned *ret) {
        unsigned v = 0;
        if (len == 0 || len > 5)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (!isdigit((unsigned char)s[i]))
                        return -EINVAL;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        if (v == 0 || v > 65535)
                return -ERANGE;
        *ret = v;
        return 0;
}

int net_ports_parse(const char *s, char ret[NET_PORTS_LEN], nook_error *err) {
        char out[NET_PORTS_LEN] = "";
        size_t n = 0, used = 0;
        if (isempty(s))
                return nook_err_set(err, NOOK_E_INVALID, "empty port list");
        for (const char *p = s; *p;) {
                size_t len = strcspn(p, ",");
                const char *dash = memchr(p, '-', len);
                unsigned lo, hi;
                if (dash ? parse_port(p, (size_t)(dash - p), &lo) < 0 ||
                                        parse_port(dash + 1, len - (size_t)(dash - p) - 1, &hi) < 0 ||
                                        hi < lo
                         : parse_port(p, len, &lo) < 0)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "port list '%s': '%.*s' is not a port (1-65535) or a range LOW-HIGH", s,
                                (int)len, p);
                if (++n > NET_MAX_PORTS)
                        return nook_err_set(err, NOOK_E_INVALID, "port list '%s': more than %d entries", s,
                                NET_MAX_PORTS);
                int k = dash ? snprintf(out + used, sizeof(out) - used, "%s%u-%u", used ? "," : "", lo, hi)
                             : snprintf(out + used, sizeof(out) - used, "%s%u", used ? "," : "", lo);
                if (k < 0 || (size_t)k >= sizeof(out) - used)
                        return nook_err_set(err, NOOK_E_INVALID, "port list '%s' is too long", s);
                used += (size_t)k;
                p += len;
                if (*p == ',' && *++p == 0)
                        return nook_err_set(err, NOOK_E_INVALID, "port list '%s' ends with ','", s);
        }
        memcpy(ret, out, NET_PORTS_LEN);
        return 0;
}

/* ---- rules ----------------------------------------------------------------------------------- */

/* Splits "CIDR:PORTS" / "[V6]:PORTS" / "V6/P:PORTS"; the suffix is the text after the colon that
 * ends the address part, or NULL. */
static int split_rule(const char *s, char *addr, size_t len, const char **ret_ports) {
        const char *end, *ports = NULL;
        if (s[0] == '[') {
                end = strchr(s, ']');
                if (!end || (end[1] != 0 && end[1] != ':'))
                        return -EINVAL;
                ports = end[1] ? end + 2 : NULL;
                s++;
        } else {
                const char *slash = strchr(s, '/');
                const char *colon = slash ? strchr(slash, ':') : NULL;
                size_t colons = 0;
                for (const char *p = s; *p; p++)
                        colons += *p == ':';
                if (!slash && colons == 1)
                        colon = strchr(s, ':'); /* "1.2.3.4:443" */
                end = colon ? colon : s + strlen(s);
                ports = colon ? colon + 1 : NULL;
        }
        if ((size_t)(end - s) >= len)
                return -EINVAL;
        memcpy(addr, s, (size_t)(end - s));
        addr[end - s] = 0;
        *ret_ports = ports;
        return 0;
}

int net_rule_parse(bool allow, const char *cidr, const char *ports, net_rule *ret, nook_error *err) {
        char addr[INET6_ADDRSTRLEN + 8];
        const char *suffix = NULL;
        net_rule r = { .allow = allow };
        int k;
        if (isempty(cidr) || split_rule(cidr, addr, sizeof(addr), &suffix) < 0)
                return nook_err_set(err, NOOK_E_INVALID, "'%s' is not CIDR[:PORTS]", cidr ? cidr : "");
        if (suffix && ports)
                return nook_err_set(
                        err, NOOK_E_INVALID, "'%s' has ports twice (in the CIDR and in 'ports')", cidr);
        if ((k = net_cidr_parse(addr, &r.cidr, err)) < 0)
                return k;
        if ((suffix || ports) && (k = net_ports_parse(suffix ? suffix : ports, r.ports, err)) < 0)
                return k;
        *ret = r;
        return 0;
}

int net_rule_to_string(const net_rule *r, char *buf, size_t len) {
        char c[INET6_ADDRSTRLEN + 8];
        net_cidr_format(&r->cidr, c, sizeof(c));
        bool v6 = r->cidr.family == AF_INET6 && r->ports[0];
        int k = snprintf(buf, len, "%s %s%s%s%s%s", r->allow ? "allow" : "deny", v6 ? "[" : "", c,
                v6 ? "]" : "", r->ports[0] ? ":" : "", r->ports);
        return k < 0 || (size_t)k >= len ? -ENOSPC : 0;
}

int net_rule_from_string(const char *s, net_rule *ret, nook_error *err) {
        if (startswith(s, "allow "))
                return net_rule_parse(true, s + 6, NULL, ret, err);
        if (startswith(s, "deny "))
                return net_rule_parse(false, s + 5, NULL, ret, err);
        return nook_err_set(err, NOOK_E_INVALID, "'%s' is not 'allow|deny CIDR[:PORTS]'", s);
}

/* ---- domains --------------------------------------------------------------------------------- */

int net_domain_parse(const char *s, char **ret, nook_error *err) {
        const char *name = s && startswith(s, "*.") ? s + 2 : s;
        size_t len = name ? strlen(name) : 0;
        if (len && name[len - 1] == '.')
                len--;
        if (len == 0 || len > 253)
                return nook_err_set(err, NOOK_E_INVALID, "'%s' is not a domain name", s ? s : "");
        for (size_t i = 0, label = 0; i <= len; i++) {
                char ch = i < len ? name[i] : '.';
                if (ch == '.') {
                        if (label == 0 || label > 63)
                                return nook_err_set(err, NOOK_E_INVALID,
                                        "'%s' is not a domain name (empty or over-long label)", s);
                        /* RFC 1123: a label neither starts nor ends with '-' */
                        if (name[i - label] == '-' || name[i - 1] == '-')
                                return nook_err_set(err, NOOK_E_INVALID,
                                        "'%s' is not a domain name (a label starts or ends with '-')", s);
                        label = 0;
                } else if (isalnum((unsigned char)ch) || ch == '-' || ch == '_')
                        label++;
                else
                        return nook_err_set(err, NOOK_E_INVALID,
                                "'%s' is not a domain name: use letters, digits, '-', and '*.' only as a prefix",
                                s);
        }
        char *c = strprintf("%s%.*s", name != s ? "*." : "", (int)len, name);
        if (!c)
                return nook_err_oom(err);
        for (char *p = c; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        *ret = c;
        return 0;
}

bool net_domain_allowed(char *const *patterns, const char *name) {
        size_t len = strlen(name);
        if (len && name[len - 1] == '.')
                len--;
        STRV_FOREACH (p, (char **)patterns) {
                const char *pat = *p;
                if (startswith(pat, "*.")) {
                        size_t pl = strlen(pat + 1); /* ".example.com" */
                        if (len > pl && strncasecmp(name + len - pl, pat + 1, pl) == 0)
                                return true;
                } else if (strlen(pat) == len && strncasecmp(name, pat, len) == 0)
                        return true;
        }
        return false;
}

/* ---- published ports ------------------------------------------------------------------------- */

int net_port_parse(const char *s, net_port *ret, nook_error *err) {
        char buf[128];
        net_port p = { 0 };
        unsigned hp, gp;
        if (isempty(s) || strlen(s) >= sizeof(buf))
                return nook_err_set(err, NOOK_E_INVALID, "'%s' is not [ADDR:]HOSTPORT:PORT", s ? s : "");
        strcpy(buf, s);
        char *proto = strchr(buf, '/');
        if (proto) {
                if (!streq(proto, "/tcp"))
                        return nook_err_set(err, NOOK_E_INVALID, "'%s': only TCP ports can be published", s);
                *proto = 0;
        }
        char *last = strrchr(buf, ':');
        if (!last)
                return nook_err_set(err, NOOK_E_INVALID, "'%s' is not [ADDR:]HOSTPORT:PORT", s);
        *last = 0;
        char *mid = strrchr(buf, ':');
        const char *host = mid ? mid + 1 : buf;
        if (mid)
                *mid = 0;
        if (parse_port(host, strlen(host), &hp) < 0 || parse_port(last + 1, strlen(last + 1), &gp) < 0)
                return nook_err_set(err, NOOK_E_INVALID, "'%s': ports must be 1-65535", s);
        struct in_addr a;
        const char *addr = mid ? buf : "127.0.0.1";
        if (inet_pton(AF_INET, addr, &a) != 1)
                return nook_err_set(
                        err, NOOK_E_INVALID, "'%s': the host address must be IPv4, e.g. 127.0.0.1", s);
        (void)snprintf(p.host_addr, sizeof(p.host_addr), "%s", addr);
        p.host_port = (uint16_t)hp;
        p.guest_port = (uint16_t)gp;
        *ret = p;
        return 0;
}

/* ---- the ruleset ----------------------------------------------------------------------------- */

/* Never reachable, whatever the rules say: "this network", the slirp network (its gateway is
 * the host's loopback, its DNS forwarder only for public mode, allowed before this), cloud
 * metadata, multicast, reserved and broadcast. */
static const char *const always4[] = { "0.0.0.0/8", NET_SLIRP_CIDR, "169.254.169.254", "224.0.0.0/4",
        "240.0.0.0/4" };
static const char *const always6[] = { "::/128", "fd00:ec2::254", "ff00::/8" };
/* Not public: blocked unless a rule allows a range inside one of these by name.  TEST-NETs
 * (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24) and 2001:db8::/32 are left alone: the
 * internet never routes them, so allowing them costs nothing, and tests use them as "public". */
static const char *const private4[] = { "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
        "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15" };
static const char *const private6[] = { "::1/128", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48",
        "100::/64", "2001::/32", "2002::/16", "fc00::/7", "fe80::/10", "fec0::/10" };

static bool in_fixed(const char *const *l, size_t n, const net_cidr *c) {
        for (size_t i = 0; i < n; i++) {
                net_cidr o;
                nook_error e;
                if (net_cidr_parse(l[i], &o, &e) >= 0 && net_cidr_contains(&o, c))
                        return true;
        }
        return false;
}

static void emit_set(FILE *f, const char *name, int family, const char *const *fixed, size_t n,
        const net_cidr *extra, size_t n_extra) {
        bool first = true;
        fprintf(f,
                "        set %s {\n                type %s; flags interval;\n                elements = { ",
                name, family == AF_INET ? "ipv4_addr" : "ipv6_addr");
        for (size_t i = 0; i < n; i++) {
                fprintf(f, "%s%s", first ? "" : ", ", fixed[i]);
                first = false;
        }
        for (size_t i = 0; i < n_extra; i++) {
                char buf[INET6_ADDRSTRLEN + 8];
                bool dup = extra[i].family != family || in_fixed(fixed, n, &extra[i]);
                for (size_t j = 0; j < i && !dup; j++)
                        dup = net_cidr_contains(&extra[j], &extra[i]) ||
                                net_cidr_contains(&extra[i], &extra[j]);
                if (dup)
                        continue; /* interval sets refuse overlapping elements */
                net_cidr_format(&extra[i], buf, sizeof(buf));
                fprintf(f, "%s%s", first ? "" : ", ", buf);
                first = false;
        }
        fprintf(f, " }\n        }\n");
}

static void emit_rule(FILE *f, const net_rule *r) {
        const char *ip = r->cidr.family == AF_INET ? "ip" : "ip6";
        char c[INET6_ADDRSTRLEN + 8];
        net_cidr_format(&r->cidr, c, sizeof(c));
        bool named = in_fixed(r->cidr.family == AF_INET ? private4 : private6,
                r->cidr.family == AF_INET ? ELEMENTSOF(private4) : ELEMENTSOF(private6), &r->cidr);
        fprintf(f, "                %s daddr %s", ip, c);
        /* A broad allow (0.0.0.0/0) never opens the private ranges: only a rule that names a
         * range inside one of them does. */
        if (r->allow && !named)
                fprintf(f, " %s daddr != @private%s", ip, r->cidr.family == AF_INET ? "4" : "6");
        if (r->ports[0])
                fprintf(f, " meta l4proto { tcp, udp } th dport { %s }", r->ports);
        fprintf(f, " %s\n", r->allow ? "accept" : "reject with icmpx type admin-prohibited");
}

int net_ruleset_build(const net_policy *p, char **ret_text, nook_error *err) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return nook_err_oom(err);
        /* "destroy"-free idempotence: add then delete the table, so a re-run starts clean. */
        fprintf(f, "add table inet nook\ndelete table inet nook\ntable inet nook {\n");
        emit_set(f, "always4", AF_INET, always4, ELEMENTSOF(always4), p->host_addrs, p->n_host_addrs);
        emit_set(f, "always6", AF_INET6, always6, ELEMENTSOF(always6), p->host_addrs, p->n_host_addrs);
        emit_set(f, "private4", AF_INET, private4, ELEMENTSOF(private4), NULL, 0);
        emit_set(f, "private6", AF_INET6, private6, ELEMENTSOF(private6), NULL, 0);
        if (p->domains)
                fprintf(f,
                        "        set dns4 { type ipv4_addr; flags timeout; }\n"
                        "        set dns6 { type ipv6_addr; flags timeout; }\n");
        /* Output: everything the sandbox sends.  Replies of connections into the sandbox (published
         * ports, whose peer is the slirp gateway) pass as established. */
        fprintf(f,
                "        chain output {\n"
                "                type filter hook output priority filter; policy drop;\n"
                "                oif \"lo\" accept\n"
                "                ct state established,related accept\n");
        if (p->mode == NET_MODE_PUBLIC)
                fprintf(f,
                        "                ip daddr " NET_SLIRP_DNS
                        " meta l4proto { tcp, udp } th dport 53 accept\n");
        /* The cluster's resolvers (nook-oci in a pod: DNS is the cluster's, not slirp's). */
        for (size_t i = 0; i < p->n_dns_servers; i++) {
                char c[INET6_ADDRSTRLEN + 8];
                net_cidr_format(&p->dns_servers[i], c, sizeof(c));
                fprintf(f, "                %s daddr %s meta l4proto { tcp, udp } th dport 53 accept\n",
                        p->dns_servers[i].family == AF_INET ? "ip" : "ip6", c);
        }
        /* DNS (and DNS over TLS) only to nook's resolver: nothing else learns or answers names. */
        fprintf(f,
                "                meta l4proto { tcp, udp } th dport { 53, 853 } reject with icmpx type "
                "admin-prohibited\n");
        fprintf(f,
                "                ip daddr @always4 reject with icmpx type admin-prohibited\n"
                "                ip6 daddr @always6 reject with icmpx type admin-prohibited\n");
        /* Rules, in order, before the private floor: in policy mode they are what is allowed; in
         * public mode they are exceptions to it (e.g. an egress proxy at a private host:port). */
        for (size_t i = 0; p->mode != NET_MODE_OFF && i < p->n_rules; i++)
                emit_rule(f, &p->rules[i]);
        /* A name that resolves to a private address (DNS rebinding) stops here. */
        fprintf(f,
                "                ip daddr @private4 reject with icmpx type admin-prohibited\n"
                "                ip6 daddr @private6 reject with icmpx type admin-prohibited\n");
        if (p->mode == NET_MODE_PUBLIC)
                fprintf(f, "                accept\n");
        if (p->domains)
                fprintf(f,
                        "                ip daddr @dns4 accept\n                ip6 daddr @dns6 accept\n");
        fprintf(f, "                reject with icmpx type admin-prohibited\n        }\n");
        /* Nothing is routed through the sandbox. */
        fprintf(f,
                "        chain forward {\n"
                "                type filter hook forward priority filter; policy drop;\n        }\n}\n");
        if (fclose(f) != 0 || !text) {
                free(text);
                return nook_err_oom(err);
        }
        *ret_text = text;
        return 0;
}

int net_ruleset_allow_addr(const net_cidr *addr, uint32_t ttl_secs, char **ret_text, nook_error *err) {
        char a[INET6_ADDRSTRLEN + 8];
        const char *set = addr->family == AF_INET ? "dns4" : "dns6";
        net_cidr_format(addr, a, sizeof(a));
        /* add (no-op if present), delete, add: one transaction that refreshes the timeout. */
        char *t = strprintf("add element inet nook %s { %s }\ndelete element inet nook %s { %s }\n"
                            "add element inet nook %s { %s timeout %us }\n",
                set, a, set, a, set, a, ttl_secs);
        if (!t)
                return nook_err_oom(err);
        *ret_text = t;
        return 0;
}

/* ---- libnftables ----------------------------------------------------------------------------- */

typedef struct nft_api {
        struct nft_ctx *(*ctx_new)(uint32_t flags);
        void (*ctx_free)(struct nft_ctx *ctx);
        int (*buffer_error)(struct nft_ctx *ctx);
        const char *(*get_error_buffer)(struct nft_ctx *ctx);
        int (*run_cmd_from_buffer)(struct nft_ctx *nft, const char *buf);
} nft_api;

/* dlopen rather than a link: every supervisor would otherwise map libnftables and its
 * dependencies, and most sandboxes have no network. */
static int nft_load(nft_api *api, nook_error *err) {
        void *h = dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h)
                return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                        "Cannot load libnftables (install the 'libnftables1' package): %s", dlerror());
        api->ctx_new = (struct nft_ctx * (*)(uint32_t)) dlsym(h, "nft_ctx_new");
        api->ctx_free = (void (*)(struct nft_ctx *))dlsym(h, "nft_ctx_free");
        api->buffer_error = (int (*)(struct nft_ctx *))dlsym(h, "nft_ctx_buffer_error");
        api->get_error_buffer = (const char *(*)(struct nft_ctx *))dlsym(h, "nft_ctx_get_error_buffer");
        api->run_cmd_from_buffer =
                (int (*)(struct nft_ctx *, const char *))dlsym(h, "nft_run_cmd_from_buffer");
        if (!api->ctx_new || !api->ctx_free || !api->buffer_error || !api->get_error_buffer ||
                !api->run_cmd_from_buffer)
                return nook_err_set(
                        err, NOOK_E_MISSING_FEATURE, "libnftables lacks the functions nook needs");
        return 0;
}

int net_nft_run(const char *cmds, nook_error *err) {
        nft_api api = { 0 };
        int r = nft_load(&api, err);
        if (r < 0)
                return r;
        struct nft_ctx *ctx = api.ctx_new(NFT_CTX_DEFAULT);
        if (!ctx)
                return nook_err_oom(err);
        (void)api.buffer_error(ctx);
        r = api.run_cmd_from_buffer(ctx, cmds);
        if (r != 0) {
                const char *e = api.get_error_buffer(ctx);
                char first[400];
                (void)snprintf(first, sizeof(first), "%s", e ? e : "");
                first[strcspn(first, "\n")] = 0;
                api.ctx_free(ctx);
                return nook_err_set(
                        err, NOOK_E_IO, "Cannot install the sandbox's firewall rules: %s", first);
        }
        api.ctx_free(ctx);
        return 0;
}
