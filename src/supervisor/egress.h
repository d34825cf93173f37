/* SPDX-License-Identifier: Apache-2.0 */
/* The supervisor's side of the egress gateway (issue #14; the contract between the supervisor
 * and nook-egress is docs/design/network.md, "The egress gateway").  In create:
 *   1. before init is cloned: start nook-egress (fork + exec: we are single-threaded) with fd 3
 *      a SOCK_SEQPACKET pair end, a clean environment, no argument (rootful it runs as nobody
 *      with no_new_privs), and send its config (with the secrets' values) and the audit log's
 *      fd.  It makes its CA while init sets the sandbox up;
 *   2. once init is ready and the sandbox's network namespace has the two listeners made inside
 *      it (supervisor/network.c): receive the CA (and a sealed memfd of it, kept for a successor)
 *      and append it to the CA bundle libnook put in the writable layer, send the listeners
 *      (ports 80 and 443 redirect there) and, on cgroup v1, the sandbox's cgroup files the
 *      gateway joins, and wait for {"ready":true}.  All before create returns, so before any exec.
 * The gateway runs in the sandbox's cgroup: its memory, CPU and threads count against the
 * sandbox's limits (docs/design/network.md, "The gateway's cgroup", says why that is safe).
 *
 * A gateway that dies later is started again, the same way but without a pause in create's
 * path: the same config with the values (this process keeps them for its life), the CA the guest
 * trusts (the memfd), the same two listeners (kept here: the guest's redirect does not change,
 * and what it connects meanwhile waits in their backlog) and the same cgroup.  After a back-off
 * of 100 ms doubled per restart in the window; a death after SUP_EGRESS_RESTARTS_MAX restarts
 * within SUP_EGRESS_RESTART_WINDOW_MS gives it up ("failed"): the listeners are closed, so the
 * guest's HTTP and HTTPS are refused at once (the redirect stays: nothing goes direct).  The
 * state, the restarts and the last end are in the "status" answer (nook inspect: "egress"). */
#pragma once

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "supervisor/config.h"

#define SUP_EGRESS_RESTARTS_MAX 5
#define SUP_EGRESS_RESTART_WINDOW_MS 60000

typedef enum sup_egress_state {
        SUP_EGRESS_NONE, /* the sandbox has no gateway (or it is not started yet) */
        SUP_EGRESS_RUNNING,
        SUP_EGRESS_RESTARTING, /* it died: a new one starts after the back-off, or is starting */
        SUP_EGRESS_FAILED, /* given up: the listeners are closed, the guest's HTTP(S) is refused */
        _SUP_EGRESS_STATE_MAX,
        _SUP_EGRESS_STATE_INVALID = -EINVAL,
} sup_egress_state;

const char *sup_egress_state_to_string(sup_egress_state s);

/* Where a restart is (SUP_EGRESS_RESTARTING). */
typedef enum sup_egress_step {
        SUP_EGRESS_STEP_WAIT, /* the back-off: a new gateway at due_ms */
        SUP_EGRESS_STEP_CA, /* its config sent: its CA by due_ms */
        SUP_EGRESS_STEP_READY, /* the listeners sent: its "ready" by due_ms */
        _SUP_EGRESS_STEP_MAX,
        _SUP_EGRESS_STEP_INVALID = -EINVAL,
} sup_egress_step;

typedef struct sup_egress {
        sup_egress_state state;
        sup_egress_step step;
        pid_t pid; /* 0: none */
        int sock; /* our end of its fd 3; -1 when closed */
        bool killed; /* we killed it: last_exit says why already */
        bool in_cgroup; /* it is in cg, or joins it with the listeners */
        const sup_config *cfg; /* the supervisor's, as are state_dir, values and cg */
        const char *state_dir;
        const char *values; /* the secrets' values ({"NAME": "value"}) or NULL */
        iso_cgroup *cg; /* the sandbox's cgroup; NULL: none */
        int listeners[2]; /* ports 80's and 443's, for a successor; closed when given up */
        int ca_seed; /* the first gateway's CA and keys (a sealed memfd), for a successor */
        char *ca_pem; /* that CA, as the guest's bundle has it */
        uint64_t due_ms; /* the restart step's time: its start, or its reply's deadline */
        uint64_t oom_kills; /* the cgroup's OOM kill count when this gateway joined it */
        unsigned restarts; /* since the sandbox started */
        uint64_t recent[SUP_EGRESS_RESTARTS_MAX]; /* when the last restarts began (a ring) */
        char last_exit[160]; /* how the last gateway ended: "killed by signal 9" */
        char reason[400]; /* failed: why it was given up */
} sup_egress;

#define SUP_EGRESS_INIT ((sup_egress){ .sock = -1, .listeners = { -1, -1 }, .ca_seed = -1 })

/* Step 1; nothing when c->egress is NULL.  values: {"NAME": "value"} or NULL (a restart of a
 * sticky sandbox: each secret goes with "value": null, so the gateway blocks its placeholder and
 * says why).  c, state_dir and values must outlive e: its successors get the same. */
int sup_egress_start(
        sup_egress *e, const sup_config *c, const char *state_dir, const char *values, nook_error *err);
/* Moves the gateway into the sandbox's cgroup cg now: where the supervisor moves init by pid too
 * (cgroup v2, rootless), right after it, which makes the second move cheap.  Nothing without a
 * gateway. */
int sup_egress_attach(sup_egress *e, iso_cgroup *cg, nook_error *err);
/* Step 2: the CA into the bundle, then fds[0] (port 80's listener) and fds[1] (443's), which e
 * takes (set to -1, closed on failure too).  cg: the sandbox's cgroup (NULL: none), which the
 * gateway joins itself unless sup_egress_attach moved it. */
int sup_egress_listen(sup_egress *e, int fds[2], iso_cgroup *cg, nook_error *err);
/* The gateway's socket for the event loop: 1 if *p was filled. */
size_t sup_egress_pollfd(const sup_egress *e, struct pollfd *p);
/* Its socket's events: a restart's replies, or the hang-up of a running gateway (it died). */
void sup_egress_dispatch(sup_egress *e, short revents);
/* reap() saw pid p exit: true if it was the gateway (logged; the restart is scheduled). */
bool sup_egress_reaped(sup_egress *e, pid_t p, int status);
/* When sup_egress_tick has something to do (monotonic ms), UINT64_MAX: nothing. */
uint64_t sup_egress_deadline(const sup_egress *e);
/* Starts the next restart step that is due, or kills a successor too slow to start.  Not while
 * the sandbox is paused (a successor in its frozen cgroup could not answer) or stopping. */
void sup_egress_tick(sup_egress *e, uint64_t now);
/* The sandbox was thawed: a successor's reply deadline counts from now. */
void sup_egress_resumed(sup_egress *e, uint64_t now);
/* {"state", "restarts", "pid"?, "lastExit"?, "reason"?} for the "status" answer; NULL without a
 * gateway. */
json_t *sup_egress_status(const sup_egress *e);
/* Closes our end (the gateway exits on EOF), then SIGKILL and reap after a short grace; closes
 * the listeners and the CA's memfd. */
void sup_egress_stop(sup_egress *e);
