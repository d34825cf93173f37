/* SPDX-License-Identifier: Apache-2.0 */
/* What the container init and an exec'd process share: the terminal, credentials, capabilities,
 * rlimits, no_new_privs, seccomp (the spec's, and nook's profile when io.nook.profile asks), the
 * executable lookup and execve. */
#pragma once

#include <limits.h>
#include <stdbool.h>

#include "nook.h"
#include "isolate/seccomp.h"
#include "oci/seccomp.h"
#include "oci/spec.h"

typedef struct oci_proc_ctx {
        const oci_process *proc;
        oci_seccomp *seccomp; /* linux.seccomp compiled, or NULL */
        bool has_profile; /* io.nook.profile */
        iso_profile profile;
        bool setgroups_denied; /* a user namespace made without host root: setgroups(2) is off */
        int console_fd; /* --console-socket, connected; -1 without a terminal */
} oci_proc_ctx;

/* Opens a pty in the container's /dev/pts, sends the master over console_fd (SCM_RIGHTS, with
 * the pty's name as the message, as runc does), makes the slave our controlling terminal and
 * stdio. */
int oci_proc_terminal(int console_fd, nook_error *err);
/* rlimits, oomScoreAdj, cwd, groups, gid, uid, capabilities, no_new_privs; seccomp too when
 * noNewPrivileges is false (it must be loaded while we still hold CAP_SYS_ADMIN, as runc does). */
int oci_proc_credentials(const oci_proc_ctx *c, nook_error *err);
/* Seccomp when noNewPrivileges is true: right before execve. */
int oci_proc_seccomp_late(const oci_proc_ctx *c, nook_error *err);
/* args[0] in the process' PATH (or as a path); the error message is the one engines match
 * ("executable file not found in $PATH" -> exit 127). */
int oci_proc_lookup(const oci_process *p, char ret[PATH_MAX], nook_error *err);
/* execve with the process' environment; returns only on failure. */
int oci_proc_exec(const oci_process *p, const char *path, nook_error *err);
