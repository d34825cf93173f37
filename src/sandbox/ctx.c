/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "config.h"
#include "isolate/userns.h"
#include "sandbox/ctx.h"
#include "sandbox/lifecycle.h"
#include "util/error.h"
#include "util/name.h"
#include "util/path.h"
#include "util/str.h"

const char *nook_version(void) {
        return NOOK_VERSION;
}

void nook_free(void *p) {
        free(p);
}

int nook_home_resolve(const char *home, char **ret_path, nook_error *err) {
        char *h;

        if (!home)
                return path_home_default(ret_path, err);
        if (home[0] != '/')
                return nook_err_set(
                        err, NOOK_E_INVALID, "The state folder must be an absolute path, got '%s'", home);
        h = strdup(home);
        if (!h)
                return nook_err_oom(err);
        *ret_path = h;
        return 0;
}

int nook_open(const char *home, nook **ret, nook_error *err) {
        _cleanup_free_ char *h = NULL;
        int r;

        r = nook_home_resolve(home, &h, err);
        if (r < 0)
                return r;
        /* The state root holds every sandbox's data: nobody else may look in. */
        r = path_mkdir_p(h, 0700, err);
        if (r < 0)
                return nook_err_wrap(err, "opening the state folder");
        nook *n = calloc(1, sizeof(*n));
        if (!n)
                return nook_err_oom(err);
        n->home = TAKE_PTR(h);
        iso_sandbox_root_ids(&n->ws_uid, &n->ws_gid);
        *ret = n;
        return 0;
}

nook *nook_close(nook *n) {
        sb_children_reap();
        if (!n)
                return NULL;
        n->st = store_free(n->st);
        free(n->home);
        free(n);
        return NULL;
}

const char *nook_home(const nook *n) {
        return n->home;
}

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
