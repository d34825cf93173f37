/* SPDX-License-Identifier: Apache-2.0 */
/* Just enough of the DNS wire format (RFC 1035) for the policy resolver: the question of a query,
 * the A/AAAA records of an answer, and a REFUSED reply.  Every input is untrusted: queries come
 * from the workload, answers from the network. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "isolate/net.h"

#define DNS_NAME_MAX 256
#define DNS_MAX_ADDRS 32
#define DNS_HEADER 12

typedef struct dns_addrs {
        net_cidr addr[DNS_MAX_ADDRS]; /* host addresses (/32, /128) */
        uint32_t ttl[DNS_MAX_ADDRS];
        size_t n;
} dns_addrs;

/* The one question of a standard query: its name (lower case, no trailing dot) and type.
 * Returns 0 or -EINVAL (not exactly one question, a response, a malformed name). */
int dns_parse_query(const uint8_t *msg, size_t len, char name[DNS_NAME_MAX], uint16_t *ret_qtype);
/* The A and AAAA records of a response's answer section (owner names are not checked: the
 * upstream resolver followed CNAMEs for a name we allowed).  Returns 0 or -EINVAL. */
int dns_parse_answer(const uint8_t *msg, size_t len, dns_addrs *ret);
/* Turns the query in msg into a REFUSED response with no records, in place; returns its length. */
size_t dns_make_refused(uint8_t *msg, size_t len);
