/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox init: PID 1 inside the sandbox.  It finishes the sandbox setup (rootfs, hostname,
 * capabilities, no_new_privs, seccomp), then reaps orphans and keeps a spare per-exec helper
 * forked, whose request socket it hands to the supervisor: the supervisor sends an exec straight
 * to it (or to init, which then forks a helper on the spot).  The helper is a child subreaper:
 * every process the command starts stays below it, so a timeout or cancellation can kill the
 * whole tree (a double fork or setsid() does not escape it). */
#pragma once

#include <sched.h>

#include "isolate/rootfs.h"
#include "isolate/cgroup.h"
#include "isolate/seccomp.h"
#include "supervisor/config.h"
#include "supervisor/idmaps.h"

/* Runs in the child of clone(); never returns.  rootless: the supervisor is not host root (the
 * child cannot tell: before its id maps exist every id reads as the overflow id).  cpus: the
 * supervisor's CPU mask, which init takes back after sync 1 (the supervisor may have started it
 * on fewer CPUs: sup.c:start_init); NULL leaves init's mask as it is. */
_Noreturn void init_main(int sock, const sup_config *c, bool rootless, const iso_seccomp_prog *seccomp,
        const sup_idmaps *idm, const cpu_set_t *cpus);
/* Whether init makes its network namespace itself (a sandbox without a network: the supervisor
 * clones it without CLONE_NEWNET and makes the cgroup meanwhile), not the clone. */
bool init_own_netns(const sup_config *c);

/* What an exec's helper sends back on its request socket (one SOCK_SEQPACKET record each; a
 * direct exec's helper tells its client first, on the client's own connection: told below):
 * first HELPER_STARTED once the command runs, then HELPER_EXITED with its wait status.  A
 * command that could not start gets only HELPER_EXITED, with why, so it is reported "exited"
 * (with the reason) instead of "started": a detached exec learns it failed, as a foreground one
 * does.  The reader is init for an exec it forwarded, the supervisor for one it sent straight to
 * a spare helper (docs/design/runtime.md, Exec); both check the record's size and kind, and end
 * why with a NUL: the helper runs inside the sandbox. */
enum { HELPER_STARTED = 1, HELPER_EXITED = 2 };
typedef struct helper_rec {
        int kind;
        int status;
        /* 1: the helper sent this one to the client itself ("started"/"exited" JSON on the
         * client's own connection, which the supervisor passed along with the request, to a
         * spare or through init), before this record: the supervisor only takes note (init
         * forwards it as "told": true).  0: the supervisor tells the client, as for an exec
         * with a terminal (init relays its "started" with the pty), a command killed by SIGKILL (its
         * reason, "timeout", "cancelled" or "oom", is the supervisor's to give) or one killed
         * on request.  From a helper inside the sandbox: a lie only misleads that exec's own
         * client, whose command's status the guest decides anyway. */
        int told;
        char why[200];
} helper_rec;
