/* SPDX-License-Identifier: Apache-2.0 */
/* Pause and resume: the supervisor freezes and thaws the sandbox's cgroup (cgroup v2
 * cgroup.freeze, v1 the freezer hierarchy).  See docs/design/branch.md for what the lifetimes do
 * while a sandbox is paused. */
#pragma once

#include <stdbool.h>

#include "nook.h"

/* Asks the running sandbox's supervisor to freeze (pause) or thaw it; the caller holds the name's
 * lock.  NOOK_E_STATE when it is not running, NOOK_E_MISSING_FEATURE (naming why) when the host
 * gives it no writable freezer. */
int sb_pause_locked(nook *n, const char *name, bool pause, nook_error *err);
/* Pauses for the caller's own use (a branch's copy): the pause lasts while *ret_sock (a control
 * connection) is open, and ends when it closes, however the caller ends (even SIGKILL): the
 * supervisor thaws when its holder goes.  sb_pause_release resumes on it (then close it). */
int sb_pause_hold(nook *n, const char *name, int *ret_sock, nook_error *err);
int sb_pause_release(int sock, const char *name, nook_error *err);
/* Whether the sandbox's cgroup is frozen (the cgroup is the truth: it outlives any client). */
bool sb_is_paused(nook *n, const char *name);
