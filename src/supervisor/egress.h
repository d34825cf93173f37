/* SPDX-License-Identifier: Apache-2.0 */
/* The supervisor's side of the egress gateway (issue #14; the contract between the supervisor
 * and nook-egress is docs/design/network.md, "The egress gateway").  In create:
 *   1. before init is cloned: start nook-egress (fork + exec: we are single-threaded) with fd 3
 *      a SOCK_SEQPACKET pair end, a clean environment, no argument (rootful it runs as nobody
 *      with no_new_privs), and send its config (with the secrets' values) and the audit log's
 *      fd.  It makes its CA while init sets the sandbox up;
 *   2. once init is ready and the sandbox's network namespace has the two listeners made inside
 *      it (supervisor/network.c): receive the CA and append it to the CA bundle libnook put in
 *      the writable layer, send the listeners (ports 80 and 443 redirect there), and wait for
 *      {"ready":true}.  All before create returns, so before any exec.
 * If the gateway dies later, that is logged; the redirect stays, so the sandbox's HTTP(S)
 * fails closed (connection refused) instead of bypassing it. */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <sys/types.h>

#include "nook.h"
#include "supervisor/config.h"

typedef struct sup_egress {
        pid_t pid; /* 0: not started */
        int sock; /* our end of fd 3; -1 when closed */
} sup_egress;

#define SUP_EGRESS_INIT ((sup_egress){ .pid = 0, .sock = -1 })

/* Step 1; nothing when c->egress is NULL.  values: {"NAME": "value"} or NULL (a restart:
 * each secret goes with "value": null, so the gateway blocks its placeholder and says why). */
int sup_egress_start(
        sup_egress *e, const sup_config *c, const char *state_dir, const char *values, nook_error *err);
/* Step 2: the CA into the bundle, then fds[0] (port 80's listener) and fds[1] (443's), which stay
 * the caller's. */
int sup_egress_listen(sup_egress *e, const sup_config *c, const int fds[2], nook_error *err);
/* The gateway's socket for the event loop: 1 if *p was filled. */
size_t sup_egress_pollfd(const sup_egress *e, struct pollfd *p);
/* The gateway hung up (it died): logs it once and closes our end. */
void sup_egress_dispatch(sup_egress *e, short revents);
/* reap() saw pid p exit: true if it was the gateway (logged). */
bool sup_egress_reaped(sup_egress *e, pid_t p, int status);
/* Closes our end (the gateway exits on EOF), then SIGKILL and reap after a short grace. */
void sup_egress_stop(sup_egress *e);
