/* SPDX-License-Identifier: Apache-2.0 */
/* nook-egress's TLS: the per-sandbox CA (EC P-256; its key in the gateway's processes only, and
 * sealed in a memfd the supervisor holds for a successor), leaf certificates made per SNI and
 * cached, the server context facing the guest (TLS 1.2+) and the client context facing upstreams
 * (host CA store + extraCaPem, hostname verification). */
#pragma once

#include <openssl/ssl.h>
#include <stdbool.h>

#include "nook.h"

typedef struct egress_tls egress_tls;

/* A new CA (made by a short-lived child), or, with seed_fd >= 0, a predecessor's (a memfd from
 * egress_tls_seed_memfd: a restarted gateway keeps the CA the guest trusts). */
int egress_tls_new(
        const char *sandbox, const char *extra_ca_pem, int seed_fd, egress_tls **ret, nook_error *err);
egress_tls *egress_tls_free(egress_tls *t);
/* The CA certificate as PEM (malloc'd). */
int egress_tls_ca_pem(egress_tls *t, char **ret, nook_error *err);
/* The CA and its keys in a sealed memfd (*ret_fd), for the supervisor to hand to a successor;
 * only before the first connection (which decodes and wipes them). */
int egress_tls_seed_memfd(const egress_tls *t, int *ret_fd, nook_error *err);
/* A server SSL for an accepted guest socket; the SNI callback installs the leaf. */
SSL *egress_tls_guest_ssl(egress_tls *t, int fd);
/* A client SSL for an upstream socket, verifying host; ALPN offers h2 first when offer_h2,
 * else http/1.1 only (a WebSocket upgrade needs HTTP/1.1). */
SSL *egress_tls_upstream_ssl(egress_tls *t, int fd, const char *host, bool offer_h2);
/* The peer chose h2 by ALPN (guest side: offered first; upstream side: when offered). */
bool egress_tls_alpn_is_h2(SSL *ssl);
/* The SNI the guest sent (NULL if none), after the handshake. */
const char *egress_tls_sni(SSL *ssl);
/* The last OpenSSL error plus the verify result, for a person. */
void egress_tls_describe_error(SSL *ssl, char *buf, size_t len);
