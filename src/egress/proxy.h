/* SPDX-License-Identifier: Apache-2.0 */
/* One guest connection, from accept to close, on its own thread: TLS termination (port 443),
 * HTTP/1.1 requests checked (Host/SNI/original destination, rules, placeholders), forwarded
 * upstream with the real secret where allowed, responses relayed, audit lines written. */
#pragma once

#include <stdbool.h>
#include <sys/socket.h>

#include "egress/config.h"
#include "egress/io.h"
#include "egress/tls.h"

typedef struct egress_ctx {
        const egress_config *cfg;
        egress_tls *tls;
} egress_ctx;

/* Takes fd.  https: the port-443 listener's connection. */
void egress_conn_run(const egress_ctx *ctx, int fd, bool https);
/* One HTTP/2 stream's requests, written as HTTP/1.1 into fd by h2.c, served as if they came
 * over TLS with server name sni to dst (already the connection's checked original
 * destination); audit proto "h2".  Takes fd; sni must stay valid until it returns. */
void egress_conn_run_bridged(const egress_ctx *ctx, int fd, const char *sni,
        const struct sockaddr_storage *dst, socklen_t dst_len);
/* The HTTP/2 front (h2.c): serves a guest TLS connection that chose h2 by ALPN; guest is its
 * TLS stream, bulk (egress_io_bulk) when it could be made so. */
void egress_h2_serve(const egress_ctx *ctx, egress_io *guest, const char *sni,
        const struct sockaddr_storage *dst, socklen_t dst_len);
/* Closes pooled upstream connections idle for 30 s (the main loop calls it); how many. */
size_t egress_pool_prune(void);
