/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/2 towards an upstream that chose h2 by ALPN (h2up.c).  proxy.c speaks HTTP/1.1 to every
 * upstream; for an h2 one a bridge thread owns the TLS connection and serves the other end of a
 * socketpair, so proxy.c's checks, substitution, streaming, redaction and audit stay one code. */
#pragma once

#include <openssl/ssl.h>
#include <stddef.h>

typedef struct egress_h2up egress_h2up;

/* Takes ssl and fd (a connected upstream that selected h2) in every case.  On success *ret_fd is
 * our end of the socketpair (HTTP/1.1 requests in, answers out, one at a time; each request one
 * stream of the same h2 connection) and *ret one reference to the bridge's state. */
int egress_h2up_start(SSL *ssl, int fd, const char *host, egress_h2up **ret, int *ret_fd);
/* Why the bridge ended (a reset stream, GOAWAY, the upstream closed), "" if it did not. */
void egress_h2up_reason(egress_h2up *u, char *buf, size_t len);
egress_h2up *egress_h2up_unref(egress_h2up *u);
