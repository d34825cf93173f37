/* SPDX-License-Identifier: Apache-2.0 */
/* Messages between a client and the supervisor (the control socket) and between the supervisor
 * and the sandbox init: one JSON object per SOCK_SEQPACKET record, with up to 8 fds attached
 * (SCM_RIGHTS).  A client's stdio travels as fds, so output never takes an extra copy.
 *
 * Client -> supervisor:  {"op":"exec", "argv":[..], "env":[..], "cwd":"/workspace", "user":"0",
 *                         "timeoutMs":0, "detach":false, "reportStarted":true}  + fds stdin,
 *                         stdout, stderr ("reportStarted": false: no "started" unless detached
 *                         or with a terminal; any other value counts as true; "removeSandbox":
 *                         true, not detached: the command's end, its client still there, begins
 *                         the sandbox's stop, and the client sends the removal's "stop" with
 *                         "remove" on the same connection, which the supervisor awaits before it
 *                         decides on the exit record; any other value counts as false)
 *                        {"op":"cancel"} {"op":"signal","signal":15}
 *                        {"op":"stop","timeoutMs":N,"remove":false} {"op":"status"}
 *                        {"op":"kill","signal":S} (to every command running: nook kill;
 *                        answered {"op":"killed"} or an error)
 * Supervisor -> client:  {"op":"started","id":N,"pid":P} {"op":"exited","id":N,"status":W,
 *                         "reason":"exited|timeout|cancelled|lost"} {"op":"error","code":"..","message":".."}
 *                        {"op":"status","state","pid","initPid","execsRunning","uptimeMs",
 *                         "egress"? (the gateway's: supervisor/egress.h, sup_egress_status)}
 *                        {"op":"stopped","reason":"..","cgroupGone":B}
 *                        (cgroupGone true: the supervisor removed every cgroup folder of its own;
 *                        a remover need not look for them, and waits for its exit at the end)
 *                        For an exec sent to a spare, "started" and "exited" come from its helper
 *                        instead, in the same words, on the same connection (docs/design/
 *                        runtime.md, Exec); "exited" again from the supervisor when it ended the
 *                        exec itself (timeout, cancel, stop), which a client ignores after the first
 * Supervisor -> init:    {"op":"exec","id":N,...} + fds (no spare at hand, or a terminal), the
 *                        client's connection a fourth fd without a terminal, for the helper init
 *                        forks (as to a spare, below),
 *                        {"op":"kill","id":N,"signal":S} or {"op":"kill","pid":P,"signal":S}
 *                        (a direct exec's helper), {"op":"kill","all":true,"signal":S} (every
 *                        helper's command), {"op":"stop","timeoutMs":N}
 * Init -> supervisor:    {"op":"ready"} {"op":"error",...} {"op":"started","id":N,"pid":P}
 *                        {"op":"exited","id":N,"status":W} ("told": true on either: its helper
 *                        told the client itself; only JSON true counts) {"op":"spare","pid":P}
 *                        + the spare helper's request socket (none in a one-shot sandbox)
 * Supervisor -> spare:   {"op":"exec",...} + fds, as to init, and a fourth fd: the client's
 *                        connection, for the helper's "started"/"exited"; the helper answers the
 *                        supervisor on the request socket with helper_rec records (init.h)
 * Every field that reaches the supervisor from init or a client is checked before use: init runs
 * inside the sandbox and is as trusted as the code it hosts. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "nook.h"

#define PROTO_MAX_MSG (256 * 1024)
#define PROTO_MAX_FDS 8

/* Sends msg (not consumed) with fds.  Returns 0 or -errno. */
int proto_send(int sock, json_t *msg, const int *fds, size_t n_fds);
/* Receives one message.  Returns 1 with *ret set, 0 on orderly EOF, or -errno; a message that is
 * not a JSON object is -EBADMSG.  Received fds are CLOEXEC; unused ones must be closed. */
int proto_recv(int sock, json_t **ret, int *ret_fds, size_t *ret_n_fds);
/* An {"op":"error"} message from a nook_error. */
json_t *proto_error_msg(const nook_error *e);
/* The {"op":"exited"} message of exec id (error: NULL or the reason its command could not
 * start).  Sent by the supervisor and by a helper that answers its client itself: one wording.
 * An error that is no valid UTF-8 (it comes from inside the sandbox) makes no JSON string: the
 * end still goes out, with a fixed error instead.  NULL: out of memory. */
json_t *proto_exited_msg(uint64_t id, json_int_t status, const char *reason, const char *error);
/* The reason of an end the sandbox did not ask for by name (timeout, cancel): "stopped" when a
 * signal ended the command while the sandbox stops (its SIGTERM, the SIGKILL after the grace),
 * else "exited" (a command that trapped the SIGTERM and exited keeps it).  One rule for the
 * helper's own reports (init_exec.c) and the supervisor's (sup.c). */
const char *proto_end_reason(bool stopping, int status);
/* An end the OOM killer may have caused: the command was SIGKILLed, or it exited 137, as a shell
 * (`exec("node app.js")`, `sh -c`) reports a child the kernel SIGKILLed.  The supervisor words
 * those ends: "oom" when the cgroup counted an OOM kill meanwhile. */
bool proto_end_maybe_oom(int status);
/* Fills err from an {"op":"error"} message. Returns -code. */
int proto_error_from_msg(json_t *msg, nook_error *err);
const char *proto_op(json_t *msg);
void proto_close_fds(int *fds, size_t n);
