/* SPDX-License-Identifier: Apache-2.0 */
/* The per-sandbox supervisor: creates the sandbox, owns its lifetime (stop, maximum duration,
 * idle timeout), and serves the control socket.  Single-threaded: only it calls clone(). */
#pragma once

#include "supervisor/config.h"

/* Runs the sandbox described by c in state_dir until it stops; its control socket (and
 * slirp4netns's API socket) go in run_dir, the runtime folder (sandbox/rundir.h).  ready_fd receives one JSON
 * line: {"ok":true,...} once the sandbox answers execs, or {"ok":false,"code":..,"message":..}.
 * lifeline_fd (or -1): the read end of a pipe whose write end the creating client holds
 * (NOOK_CREATE_TIED); when it hangs up, the sandbox stops with the reason "client_gone", which
 * its next list removes; with lifeline_stops "starter_gone", and it is kept (a stopped sticky
 * sandbox started for a copy, whose copier was killed: SB_CREATE_TIED_STOP).
 * client_fd (or -1): the creator's connection with an exec request already queued on it
 * (nook_sandbox_create_exec), served as soon as the sandbox is ready, before "ready" is said.
 * values: the secrets' values as JSON {"NAME": "value"} (NULL: none, e.g. a restarted sandbox),
 * handed to the egress gateway and never written anywhere.  Returns the process exit status. */
int sup_run(const sup_config *c, const char *state_dir, const char *run_dir, int ready_fd, int lifeline_fd,
        bool lifeline_stops, int client_fd, const char *values);
