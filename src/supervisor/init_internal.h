/* SPDX-License-Identifier: Apache-2.0 */
/* What the sandbox init's own files share (init.c: setup, init_loop.c: PID 1's loop,
 * init_exec.c: the per-exec helper, init_passwd.c: user lookup).  Not for other modules: they
 * use init.h. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "supervisor/init.h"

/* init_passwd.c */
int init_resolve_user(const char *user, unsigned *uid, unsigned *gid, char *home, size_t home_len);

/* init_exec.c */
/* init asks a helper to kill its command's whole tree with SIGUSR1 queued with this value
 * (sigqueue), and to pass signal N on to its command with INIT_HELPER_SIGNAL(N); a signal sent
 * to the helper any other way (a guest's own kill) is passed on as it came. */
#define INIT_HELPER_KILL_TREE 0x6b696c6c
#define INIT_HELPER_SIGNAL_BASE 0x73690000
#define INIT_HELPER_SIGNAL(n) (INIT_HELPER_SIGNAL_BASE | (n))
void init_helper_sigset(sigset_t *set);
void init_signals_note(void);
_Noreturn void init_spare_main(int req_sock, int taken_fd, bool rehearse);

/* init_loop.c */
_Noreturn void init_loop(int sock, bool spares);
