/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's network, run by the supervisor once init reports ready (and so before any
 * exec):
 *   1. the firewall (isolate/net.c) goes into the sandbox's network namespace, from a forked
 *      helper that joins the sandbox's user and network namespaces: it has CAP_NET_ADMIN there,
 *      the workload never does;
 *   2. slirp4netns gives the namespace tap0 and a route out (supervisor/slirp.c);
 *   3. published ports go through slirp4netns's API;
 *   4. policy mode with domains: a resolver in the supervisor's event loop listens on
 *      127.0.0.53:53 inside the sandbox (a socket made by the same helper), answers only allowed
 *      names, forwards them to the host's resolver and, before the answer reaches the workload,
 *      opens the firewall for the returned addresses for their TTL.
 * Off: nothing here; init brought up loopback, the only interface. */
#pragma once

#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nook.h"
#include "isolate/net.h"
#include "supervisor/config.h"
#include "supervisor/slirp.h"

#define SUP_NET_MAX_FDS 3
#define SUP_NET_PENDING 64

typedef struct dns_pending {
        uint16_t upstream_id, client_id; /* upstream_id 0: free slot */
        struct sockaddr_storage client;
        socklen_t client_len;
        uint64_t deadline;
} dns_pending;

typedef struct sup_net {
        bool started; /* false in a zeroed sup_net: no fd is ours yet */
        bool have_ns; /* userns_fd and netns_fd are ours */
        net_mode mode;
        int userns_fd, netns_fd; /* the sandbox's namespaces, for the helper */
        slirp slirp;
        char **domains;
        int dns_fd; /* UDP, bound in the sandbox's namespace */
        int upstream_fd; /* UDP, in ours, connected to the host's resolver (-1: none) */
        dns_pending pending[SUP_NET_PENDING];
} sup_net;

/* Right after clone, before init is released: opens init's user and network namespaces while
 * init is still dumpable (it stops being so during setup, and a rootless supervisor could then no
 * longer open /proc/PID/ns/...).  Nothing when the network is off; errors surface in start. */
void sup_net_open_ns(sup_net *n, const sup_config *c, pid_t init_pid);
/* Sets up the network of config c for the sandbox whose init is init_pid.  egress_fds (or NULL):
 * two listeners for the egress gateway are made in the sandbox (127.0.0.1, ports 80 and 443 of
 * non-loopback destinations redirect there) and returned in egress_fds[0], [1] (the caller's to
 * close; {-1, -1} before the call). */
int sup_net_start(sup_net *n, const sup_config *c, pid_t init_pid, const char *run_dir, int *egress_fds,
        nook_error *err);
/* Fills up to SUP_NET_MAX_FDS pollfds; returns how many. */
size_t sup_net_pollfds(const sup_net *n, struct pollfd *pfd);
/* Handles what poll reported on those fds. */
void sup_net_dispatch(sup_net *n, const struct pollfd *pfd, size_t n_pfd);
/* Stops slirp4netns and closes everything; safe on a zeroed or half-started sup_net. */
void sup_net_stop(sup_net *n);
