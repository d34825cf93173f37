/* SPDX-License-Identifier: Apache-2.0 */
/* What the sandbox init's own files share (init.c: setup, init_loop.c: PID 1's loop,
 * init_exec.c: the per-exec helper, init_passwd.c: user lookup).  Not for other modules: they
 * use init.h. */
#pragma once

#include <signal.h>
#include <stddef.h>

/* What a helper writes on its status pipe (one write each, under PIPE_BUF: never torn): first
 * HELPER_STARTED once the command runs, then HELPER_EXITED with its wait status.  A command that
 * could not start gets only HELPER_EXITED, with why, so init reports "exited" (with the reason)
 * instead of "started": a detached exec learns it failed, as a foreground one does. */
enum { HELPER_STARTED = 1, HELPER_EXITED = 2 };
typedef struct helper_rec {
        int kind;
        int status;
        char why[200];
} helper_rec;

/* init_passwd.c */
int init_resolve_user(const char *user, unsigned *uid, unsigned *gid, char *home, size_t home_len);

/* init_exec.c */
void init_helper_sigset(sigset_t *set);
void init_signals_note(void);
_Noreturn void init_spare_main(int req_sock, int status_fd);

/* init_loop.c */
_Noreturn void init_loop(int sock);
