/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox layer's shared state: a leaf under the API files (lifecycle, provision, snapshot,
 * image, exec, resources), which use it and are never used by it. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"
#include "image/image.h"
#include "store/store.h"

/* Takes the lock of sandbox name (<runtime folder>/.locks/<name>.lock: sandbox/rundir.h), as
 * every state change does. */
int sb_lock(nook *n, const char *name, int *ret_fd, nook_error *err);
/* The same with flock operation how: LOCK_SH (a shared holder such as ws write), LOCK_EX, either
 * with LOCK_NB (NOOK_E_BUSY when another holds it). */
int sb_lock_how(nook *n, const char *name, int how, int *ret_fd, nook_error *err);
/* The same by state folder, for holders that keep no nook handle (a workspace handle). */
int sb_lock_home(const char *home, const char *name, int how, int *ret_fd, nook_error *err);
/* Deletes the name's lock file; only while holding it (a later sb_lock takes the new file). */
void sb_lock_drop(nook *n, const char *name);

/* Records a supervisor this process started (a child), so it is reaped once it exits. */
void sb_children_add(pid_t pid);
/* Reaps the supervisors this process started that have exited (they are its children). */
void sb_children_reap(void);
/* Waits until pid (started at start, 0: any) is gone, and reaps it if it was ours. */
bool sb_wait_gone(pid_t pid, uint64_t start, uint64_t timeout_ms);

/* Connects to a running sandbox's control socket (SOCK_SEQPACKET). */
int sb_connect(nook *n, const char *name, int *ret_fd, nook_error *err);
/* Sends msg (consumed; NULL: out of memory) on a connected control socket and waits up to
 * timeout_ms for its one answer: 0, or the supervisor's error in err.  what names the request in
 * the error when none comes ("the pause request"). */
int sb_request(int sock, const char *name, json_t *msg, const char *what, int timeout_ms, nook_error *err);
/* The same, with the answer in *ret (the caller's to json_decref). */
int sb_request_reply(int sock, const char *name, json_t *msg, const char *what, int timeout_ms, json_t **ret,
        nook_error *err);

int sb_rec_set_state(sandbox_rec *rec, const char *state, nook_error *err);
/* Makes a record true, under the name's lock (the caller holds it): a "running" sandbox whose
 * supervisor is gone, or a "creating" one whose creator is gone, adopts a live supervisor or
 * becomes "stopped", and what the supervisor should have cleaned is cleaned (rules in state.c). */
int sb_reconcile(nook *n, sandbox_rec *rec, nook_error *err);
/* The same for a caller not holding the lock (ls, inspect): a record that needs it is reconciled
 * only if the lock is free (else an operation under way will); rec is re-read under the lock.
 * A record removed meanwhile comes back with the state "removed". */
int sb_reconcile_unlocked(nook *n, sandbox_rec *rec, nook_error *err);
/* Takes name's lock (*ret_lock) and makes its record true (sb_reconcile) for an operation on a
 * running sandbox: 0 when it runs; NOOK_E_NOT_FOUND, or NOOK_E_STATE "Sandbox 'x' is STATE, not
 * running; WHY", with no lock held. */
int sb_lock_running(nook *n, const char *name, const char *why, int *ret_lock, nook_error *err);
/* The pid of a live supervisor of sandbox name (found by its command line), or 0. */
pid_t sb_supervisor_find(nook *n, const char *name);
/* Removes the sandbox's cgroups, if any are left (a supervisor killed by SIGKILL leaves them). */
void sb_cgroup_remove(nook *n, const char *name);
/* Removes the temporary folders of killed snapshot and image operations (no live owner). */
void sb_sweep_tmp(nook *n);
/* <home>/SUB, made 0700 (with its parents) when missing. */
int sb_home_dir(nook *n, const char *sub, char **ret, nook_error *err);
/* <home>/trash (made 0700 when missing): where removals, restores, branches and copies into a
 * workspace keep what a kill must not leave under a sandbox's name; sb_sweep_tmp empties it of
 * folders no live owner holds. */
int sb_trash_dir(nook *n, char **ret, nook_error *err);
/* A new folder <home>/trash/<kind>-XXXXXX, held by this process (*ret_lock, util/tmpdir.h) until
 * it is closed. */
int sb_trash_new(nook *n, const char *kind, char **ret, int *ret_lock, nook_error *err);

/* The image store of a nook handle, for this process's mode (rootful or rootless). */
int sb_image_store(nook *n, image_store *ret, nook_error *err);

/* The record of sandbox name, reconciled; NOOK_E_STATE unless it is running (stats, update,
 * checkpoint). */
int sb_running_rec(nook *n, const char *name, sandbox_rec *rec, nook_error *err);
