/* SPDX-License-Identifier: Apache-2.0 */
/* The nook handle's database and the paths of a sandbox's folders: below state.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "sandbox/ctx.h"
#include "util/error.h"
#include "util/name.h"
#include "util/str.h"

int ctx_store(nook *n, store **ret, nook_error *err) {
        if (!n->st) {
                int r = store_open(n->home, &n->st, err);
                if (r < 0)
                        return r;
        }
        *ret = n->st;
        return 0;
}

static int ctx_child_dir(const nook *n, const char *kind, const char *name, char **ret, nook_error *err) {
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        char *p = strprintf("%s/%s/%s", n->home, kind, name);
        if (!p)
                return nook_err_oom(err);
        *ret = p;
        return 0;
}

int ctx_ws_dir(const nook *n, const char *name, char **ret, nook_error *err) {
        return ctx_child_dir(n, "workspaces", name, ret, err);
}

int ctx_sandbox_dir(const nook *n, const char *name, char **ret, nook_error *err) {
        return ctx_child_dir(n, "sandboxes", name, ret, err);
}
