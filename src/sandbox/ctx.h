/* SPDX-License-Identifier: Apache-2.0 */
/* The nook handle: one state root, its database (opened lazily), and the host's identity. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "nook.h"
#include "store/store.h"

struct nook {
        char *home;
        char *run_root; /* the home's runtime folder (sandbox/rundir.h); NULL until first needed */
        store *st; /* NULL until first needed */
        uid_t ws_uid; /* owner of what nook creates in workspaces: the sandbox root on the host,
                         * or with idmapped mounts the state folder's owner */
        gid_t ws_gid;
        uid_t img_uid; /* base of image layers and snapshots on the host (canonical range) */
        gid_t img_gid;
        bool idmap; /* each sandbox has its own id range; workspace and volumes are idmapped */
        const char *idmap_why; /* when !idmap: why not (static) */
        /* the write ends of the pipes tied sandboxes' supervisors watch (NOOK_CREATE_TIED), by name */
        struct ctx_lifeline {
                char *name;
                int fd;
        } * lifelines;
        size_t n_lifelines;
        pid_t spawning; /* a supervisor this handle's create started, still waiting for its config:
                         * not an orphan to reconcile (lifecycle.c:supervisor_spawn) */
        /* The connections of ended execs with remove_sandbox_when_done: their supervisor is
         * stopping for the removal and answers "stopped" there (nook_sandbox_remove waits on
         * it); closed by nook_close. */
        struct ctx_stop_conn {
                char *name;
                int fd;
        } * stop_conns;
        size_t n_stop_conns;
};

/* Keeps fd, an ended exec's connection to sandbox name whose supervisor is stopping for its
 * removal (remove_sandbox_when_done); takes fd, closed when it cannot be kept. */
void ctx_stop_conn_keep(nook *n, const char *name, int fd);
/* That connection of sandbox name (the caller's now), or -1. */
int ctx_stop_conn_take(nook *n, const char *name);

/* The host uid of the sandbox's root: with idmapped mounts its own range's base (acquired from
 * the pool when acquire; the sandbox record must exist), else, or for a sandbox that holds no
 * range, the shared img_uid. */
int ctx_sandbox_root(
        nook *n, const char *name, bool acquire, uid_t *ret_uid, gid_t *ret_gid, nook_error *err);
/* Refuses (NOOK_E_REFUSED, saying the risk and the chmod) a state folder other users can enter:
 * o+x, or g+x for a group that is not the owner's alone; *ret_shared tells, allow accepts it. */
int ctx_home_check(const char *home, bool allow, bool *ret_shared, nook_error *err);
/* The database, opened on first use. */
int ctx_store(nook *n, store **ret, nook_error *err);
/* True when sandbox name has a record: its state folder may not exist (a create makes it only
 * when something goes in it: docs/design/runtime.md, "The state folder"). */
bool ctx_sandbox_recorded(nook *n, const char *name);
/* <home>/workspaces/<name>, after validating name. */
int ctx_ws_dir(const nook *n, const char *name, char **ret, nook_error *err);
/* <home>/sandboxes/<name>, after validating name. */
int ctx_sandbox_dir(const nook *n, const char *name, char **ret, nook_error *err);
/* Both of the above for one sandbox: its state folder and its workspace (set only on success). */
int ctx_dirs(const nook *n, const char *name, char **ret_sdir, char **ret_wsdir, nook_error *err);
