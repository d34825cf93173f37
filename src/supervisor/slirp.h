/* SPDX-License-Identifier: Apache-2.0 */
/* slirp4netns: user-mode networking for the sandbox's network namespace.  It runs as a child of
 * the supervisor, in the supervisor's (the host's) network namespace, and gives the sandbox a
 * tap0 with 10.0.2.100/24, gateway 10.0.2.2 and a DNS forwarder at 10.0.2.3.  No host routing
 * or interface changes, the same as root and rootless.  Host ports are published through its
 * API socket (add_hostfwd). */
#pragma once

#include <sys/types.h>

#include "nook.h"
#include "isolate/net.h"

typedef struct slirp {
        pid_t pid; /* 0: not running */
        int exit_fd; /* write end of --exit-fd: closing it stops slirp4netns */
        int err_fd; /* read end of its stderr (non-blocking); -1 when none */
        char last_error[256]; /* the last error line it wrote, for a setup failure's message */
        char *api_path;
} slirp;

/* Starts slirp4netns for the network namespace of target (a child of ours) and waits until the
 * interface is configured. */
int slirp_start(pid_t target, const char *api_path, slirp *ret, nook_error *err);
/* Publishes host_addr:host_port to the sandbox's guest_port.  A port in use is NOOK_E_BUSY. */
int slirp_add_hostfwd(const slirp *s, const net_port *p, nook_error *err);
/* Puts what slirp4netns wrote on stderr into the supervisor's log, but its warnings (noise such
 * as "WARNING: Support for seccomp is experimental"); its stdout goes nowhere. */
void slirp_drain_stderr(slirp *s);
/* Stops it and waits (briefly) for it to exit; safe on a half-started or zeroed slirp. */
void slirp_stop(slirp *s);
