/* SPDX-License-Identifier: Apache-2.0 */
/* The OCI operations over a container's state folder (oci/state.h).  No daemon: `create` forks
 * the container init, which waits on ROOT/ID/exec.fifo until `start`; create then exits and the
 * init is reparented to the engine's subreaper (conmon, containerd-shim), which reaps it and reads
 * its exit status, as with runc. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "nook.h"

typedef struct oci_create_opts {
        const char *root, *id, *bundle;
        const char *pid_file; /* may be NULL */
        const char *console_socket; /* may be NULL */
        bool no_pivot;
        unsigned preserve_fds; /* fds 3 .. 3+N-1 stay open in the container; the rest are closed */
} oci_create_opts;

/* Creates the container; *ret_pid is its init (a child of the caller until the caller exits). */
int oci_create(const oci_create_opts *o, pid_t *ret_pid, nook_error *err);
int oci_start(const char *root, const char *id, nook_error *err);
int oci_kill(const char *root, const char *id, int sig, bool all, nook_error *err);
int oci_delete(const char *root, const char *id, bool force, nook_error *err);
int oci_pause(const char *root, const char *id, bool pause, nook_error *err);
/* Prints the state JSON on stdout. */
int oci_state_print(const char *root, const char *id, nook_error *err);
int oci_list(const char *root, bool json, bool quiet, nook_error *err);
/* json: the host pids of the container's processes as a JSON array.  Else runc's table: `ps`
 * run on the host with ps_args (NULL or empty: -ef), its header and the lines whose PID column
 * is one of the container's. */
int oci_ps(const char *root, const char *id, bool json, char *const *ps_args, nook_error *err);

typedef struct oci_update_opts {
        const char *resources_file; /* "-" for stdin */
        const char *memory, *memory_swap, *cpu_quota, *cpu_period, *cpu_shares, *pids_limit, *cpuset_cpus;
} oci_update_opts;
int oci_update(const char *root, const char *id, const oci_update_opts *o, nook_error *err);

typedef struct oci_exec_opts {
        const char *root, *id;
        const char *process_file; /* --process */
        char **args; /* when no --process */
        char **env; /* --env, added */
        const char *cwd, *user;
        bool tty, detach;
        const char *pid_file, *console_socket;
        unsigned preserve_fds;
} oci_exec_opts;
/* Foreground: returns the process' exit status (128+signal when killed) in *ret_status. */
int oci_exec(const oci_exec_opts *o, int *ret_status, nook_error *err);
