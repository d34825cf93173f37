/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "nook.h"
#include "store/store.h"

/* Makes a record true: a "running" sandbox whose supervisor is gone becomes "stopped" with the
 * reason from its exit record, and what the supervisor should have cleaned is cleaned. */
int sb_reconcile(nook *n, sandbox_rec *rec, nook_error *err);
/* Reaps the supervisors this process started that have exited (they are its children). */
void sb_children_reap(void);
/* Takes the lock of sandbox name (<home>/locks/<name>.lock), as every state change does. */
int sb_lock(nook *n, const char *name, int *ret_fd, nook_error *err);
/* Connects to a running sandbox's control socket (SOCK_SEQPACKET). */
int sb_connect(nook *n, const char *name, int *ret_fd, nook_error *err);
