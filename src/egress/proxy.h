/* SPDX-License-Identifier: Apache-2.0 */
/* One guest connection, from accept to close, on its own thread: TLS termination (port 443),
 * HTTP/1.1 requests checked (Host/SNI/original destination, rules, placeholders), forwarded
 * upstream with the real secret where allowed, responses relayed, audit lines written. */
#pragma once

#include <stdbool.h>

#include "egress/config.h"
#include "egress/tls.h"

typedef struct egress_ctx {
        const egress_config *cfg;
        egress_tls *tls;
} egress_ctx;

/* Takes fd.  https: the port-443 listener's connection. */
void egress_conn_run(const egress_ctx *ctx, int fd, bool https);
/* Closes pooled upstream connections idle for 30 s (the main loop calls it). */
void egress_pool_prune(void);
