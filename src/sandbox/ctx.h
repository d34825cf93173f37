/* SPDX-License-Identifier: Apache-2.0 */
/* The nook handle: one state root, its database (opened lazily), and the host's identity. */
#pragma once

#include <sys/types.h>

#include "nook.h"
#include "store/store.h"

struct nook {
        char *home;
        store *st; /* NULL until first needed */
        uid_t ws_uid; /* owner of what nook creates in workspaces: the sandbox root on the host */
        gid_t ws_gid;
        int *lifelines; /* write ends of the pipes tied sandboxes' supervisors watch (NOOK_CREATE_TIED) */
        size_t n_lifelines;
};

/* The database, opened on first use. */
int ctx_store(nook *n, store **ret, nook_error *err);
/* <home>/workspaces/<name>, after validating name. */
int ctx_ws_dir(const nook *n, const char *name, char **ret, nook_error *err);
/* <home>/sandboxes/<name>, after validating name. */
int ctx_sandbox_dir(const nook *n, const char *name, char **ret, nook_error *err);
