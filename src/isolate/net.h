/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's network policy: parsing of modes, CIDR rules, port lists, domain patterns and
 * published ports, the nftables ruleset that enforces a policy inside the sandbox's network
 * namespace (a pure function, unit-tested), and applying a ruleset through libnftables.
 *
 * The ruleset lives in the sandbox's own network namespace.  It is installed before the
 * workload starts, by a process that holds CAP_NET_ADMIN over that namespace; the workload
 * never does (capabilities are dropped), so it can neither flush nor change it. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nook.h"

typedef enum net_mode {
        NET_MODE_OFF,
        NET_MODE_PUBLIC,
        NET_MODE_POLICY,
        _NET_MODE_MAX,
        _NET_MODE_INVALID = -EINVAL,
} net_mode;
const char *net_mode_to_string(net_mode m);
net_mode net_mode_from_string(const char *s); /* _NET_MODE_INVALID on bad input */

#define NET_MAX_RULES 256
#define NET_MAX_DOMAINS 256
#define NET_MAX_PORTS 64
#define NET_PORTS_LEN 256

/* The network slirp4netns gives the sandbox (its defaults with --configure). */
#define NET_SLIRP_GUEST "10.0.2.100"
#define NET_SLIRP_GATEWAY "10.0.2.2"
#define NET_SLIRP_DNS "10.0.2.3"
#define NET_SLIRP_CIDR "10.0.2.0/24"
#define NET_TAP "tap0"
/* Where the policy-mode resolver listens inside the sandbox. */
#define NET_RESOLVER "127.0.0.53"

typedef struct net_cidr {
        int family; /* AF_INET or AF_INET6 */
        uint8_t addr[16]; /* network byte order; host bits cleared */
        unsigned prefix;
} net_cidr;

typedef struct net_rule {
        bool allow;
        net_cidr cidr;
        char ports[NET_PORTS_LEN]; /* canonical "80,443,8000-8080"; "" = every port */
} net_rule;

typedef struct net_port {
        char host_addr[64]; /* IPv4; "127.0.0.1" unless given */
        uint16_t host_port, guest_port;
} net_port;

/* "10.0.0.0/8", "1.2.3.4" (= /32), "2001:db8::/32".  Host bits set is an error. */
int net_cidr_parse(const char *s, net_cidr *ret, nook_error *err);
/* Formats as "a.b.c.d/p" or "x::/p" (no "/p" for a single address). */
void net_cidr_format(const net_cidr *c, char *buf, size_t len);
/* True when inner lies entirely within outer (same family). */
bool net_cidr_contains(const net_cidr *outer, const net_cidr *inner);
/* "80", "80,443", "8000-8080": canonical form into ret (NET_PORTS_LEN). */
int net_ports_parse(const char *s, char ret[NET_PORTS_LEN], nook_error *err);
/* A rule: cidr "CIDR", "CIDR:PORTS", "[IPV6]:PORTS"; ports (may be NULL) overrides any suffix. */
int net_rule_parse(bool allow, const char *cidr, const char *ports, net_rule *ret, nook_error *err);
/* The rule as one string, "allow 10.0.0.0/8:80,443", read back by net_rule_from_string. */
int net_rule_to_string(const net_rule *r, char *buf, size_t len);
int net_rule_from_string(const char *s, net_rule *ret, nook_error *err);
/* "example.com" (exactly) or "*.example.com" (any name below it); canonical lower case. */
int net_domain_parse(const char *s, char **ret, nook_error *err);
/* True when name (a DNS name, any case, optional trailing dot) matches a pattern. */
bool net_domain_allowed(char *const *patterns, const char *name);
/* "8080:80", "127.0.0.1:8080:80", optional "/tcp". */
int net_port_parse(const char *s, net_port *ret, nook_error *err);

typedef struct net_policy {
        net_mode mode;
        const net_rule *rules;
        size_t n_rules;
        bool domains; /* policy mode with a domain allowlist: sets fed by the resolver */
        const net_cidr *host_addrs; /* every address of the host: never reachable */
        size_t n_host_addrs;
        const net_cidr *dns_servers; /* DNS (port 53) to these is allowed, before any floor */
        size_t n_dns_servers;
} net_policy;

/* The nftables ruleset (nft syntax) for p: table "inet nook".  Pure; *ret_text is malloc'd. */
int net_ruleset_build(const net_policy *p, char **ret_text, nook_error *err);
/* The command that opens the firewall for one address the resolver returned, for ttl seconds
 * (re-adding an address refreshes its timeout). */
int net_ruleset_allow_addr(const net_cidr *addr, uint32_t ttl_secs, char **ret_text, nook_error *err);
/* Runs nft commands in the calling process's network namespace through libnftables (loaded on
 * first use, so sandboxes without a network never map it).  Needs CAP_NET_ADMIN there. */
int net_nft_run(const char *cmds, nook_error *err);
