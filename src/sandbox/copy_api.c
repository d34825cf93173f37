/* SPDX-License-Identifier: Apache-2.0 */
/* nook_cp_in / nook_cp_out: which side a guest path is on (the workspace, or the sandbox's root
 * filesystem through its running init), then the engine in copy.c. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "sandbox/copy.h"
#include "sandbox/ctx.h"
#include "sandbox/lifecycle.h"
#include "sandbox/state.h"
#include "store/store.h"
#include "supervisor/proto.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/str.h"
#include "workspace/ws.h"

/* The sandbox must exist: a copy never creates an orphan workspace for a mistyped name.
 * *ret_sticky: it keeps its root layer when stopped. */
static int cp_sandbox_exists(nook *n, const char *name, bool *ret_sticky, nook_error *err) {
        store *st;
        sandbox_rec rec = { 0 };
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        r = store_sandbox_get(st, name, &rec, err);
        *ret_sticky = r >= 0 && rec.sticky;
        sandbox_rec_done(&rec);
        if (r == -NOOK_E_NOT_FOUND)
                return nook_err_set(err, NOOK_E_NOT_FOUND,
                        "No sandbox '%s'; create it first, or stage files for it before its first create "
                        "with 'nook ws write %s PATH'",
                        name, name);
        return r;
}

/* "/workspace", "/workspace/..." and relative paths are in the workspace. */
static bool cp_in_workspace(const char *path) {
        if (path[0] != '/')
                return true;
        while (*path == '/')
                path++;
        return strncmp(path, "workspace", 9) == 0 && (path[9] == 0 || path[9] == '/');
}

/* The sandbox's root, an O_PATH fd its init sent its supervisor (sup.c, op "root"). */
static int cp_root_fd(nook *n, const char *name, int *ret, nook_error *err) {
        _cleanup_close_ int sock = -1;
        int fds[PROTO_MAX_FDS];
        size_t n_fds = 0;
        json_t *reply = NULL;
        int r = sb_connect(n, name, &sock, err);
        if (r == -NOOK_E_STATE)
                return nook_err_set(err, NOOK_E_STATE,
                        "Sandbox '%s' is not running, and it is not sticky, so it has no root filesystem to copy "
                        "to or from (paths outside /workspace); start it with 'nook start %s', or copy into "
                        "/workspace",
                        name, name);
        if (r < 0)
                return r;
        json_t *m = json_pack("{s:s}", "op", "root");
        r = m ? proto_send(sock, m, NULL, 0) : -ENOMEM;
        json_decref(m);
        if (r >= 0)
                r = proto_recv(sock, &reply, fds, &n_fds);
        if (r <= 0)
                return nook_err_errnum(
                        err, NOOK_E_IO, r < 0 ? -r : EPIPE, "Cannot reach sandbox '%s'", name);
        if (streq(proto_op(reply), "error")) {
                proto_close_fds(fds, n_fds);
                r = proto_error_from_msg(reply, err);
                json_decref(reply);
                return r;
        }
        json_decref(reply);
        struct stat st;
        if (n_fds != 1 || fstat(fds[0], &st) < 0 || !S_ISDIR(st.st_mode)) {
                proto_close_fds(fds, n_fds);
                return nook_err_set(
                        err, NOOK_E_INTERNAL, "Sandbox '%s' did not hand over its root filesystem", name);
        }
        *ret = fds[0];
        return 0;
}

/* A copy's guest side: the handle, and whether the copy started the sandbox (a stopped sticky
 * one) and must stop it again. */
typedef struct cp_guest {
        nook *n;
        const char *name;
        bool sticky;
        bool started;
        ws *w;
} cp_guest;

/* Closes the handle, then stops a sandbox the copy started; returns r, or the stop's failure. */
static int cp_guest_done(cp_guest *g, int r, nook_error *err) {
        g->w = ws_free(g->w);
        if (!g->started)
                return r;
        g->started = false;
        nook_error e2 = { 0 };
        int s = nook_sandbox_stop(g->n, g->name, /* timeout_ms= */ 10000, &e2);
        /* stopped (or its supervisor sees the tie go and stops it): no descriptor stays */
        sb_lifeline_drop(g->n, g->name);
        if (s < 0 && r >= 0) {
                *err = e2;
                return nook_err_wrap(err, "stopping sticky sandbox '%s' again after the copy", g->name);
        }
        return r;
}

/* A stopped sticky sandbox keeps its root layer: the copy starts it for its duration (its init
 * runs, no command does), so the root is seen exactly as the guest sees it, overlay and uid
 * mapping included.  Tied to this handle (SB_CREATE_TIED_STOP): a copier killed part way leaves
 * it stopped, as it found it, not running. */
static int cp_root_fd_any(cp_guest *g, int *ret, nook_error *err) {
        int r = cp_root_fd(g->n, g->name, ret, err);
        if (r != -NOOK_E_STATE || !g->sticky)
                return r;
        nook_error e2 = { 0 };
        r = sb_start(g->n, g->name, SB_CREATE_TIED_STOP, &e2);
        if (r < 0) {
                *err = e2;
                return nook_err_wrap(
                        err, "starting sticky sandbox '%s' to reach its root filesystem", g->name);
        }
        g->started = true;
        return cp_root_fd(g->n, g->name, ret, err);
}

/* Opens the side that holds path in sandbox name. */
static int cp_open_guest(cp_guest *g, const char *path, nook_error *err) {
        nook *n = g->n;
        const char *name = g->name;
        ws **ret = &g->w;
        _cleanup_free_ char *rel = NULL;
        /* the path rule first (NUL, length, ".." anywhere), before anything is opened */
        int r = ws_path_normalize(path, &rel, err);
        if (r == -NOOK_E_REFUSED && !cp_in_workspace(path))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Refusing a path with '..' in sandbox '%s': '%.400s'", name, path);
        if (r < 0)
                return r;
        if (cp_in_workspace(path)) {
                _cleanup_free_ char *dir = NULL;
                r = ctx_ws_dir(n, name, &dir, err);
                if (r < 0)
                        return r;
                return ws_open(dir, /* create= */ true, n->ws_uid, n->ws_gid, ret, err);
        }
        int fd = -1;
        r = cp_root_fd_any(g, &fd, err);
        if (r < 0)
                return r;
        /* the root filesystem's files belong to the sandbox's own id range (not the workspace's
         * owner, which idmapped mounts make the home's owner) */
        uid_t ruid;
        gid_t rgid;
        r = ctx_sandbox_root(n, name, /* acquire= */ false, &ruid, &rgid, err);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        return ws_open_root(fd, ruid, rgid, ret, err);
}

/* Where a copy into a workspace stages: the state folder's trash (swept of a killed copy's
 * stage by the next list), not the workspace, where a killed copy's stage showed in its diff and
 * went along with a merge.  NULL (next to the target) for the root filesystem. */
static char *cp_stage_dir(const cp_guest *g) {
        char *t = NULL;
        nook_error ignore;
        if (!g->w || ws_is_root(g->w) || sb_trash_dir(g->n, &t, &ignore) < 0)
                return NULL;
        return t;
}

static int cp_guest_label(const char *name, char **ret, nook_error *err) {
        *ret = strprintf("%s:", name);
        return *ret ? 0 : nook_err_oom(err);
}

int nook_cp_in(nook *n, const char *name, const char *host_src, int fd, const char *dst, nook_error *err) {
        _cleanup_free_ char *label = NULL;
        cp_guest g = { .n = n, .name = name };
        if (!dst || (!host_src && fd < 0))
                return nook_err_set(err, NOOK_E_INVALID, "nook_cp_in needs a destination and a source");
        int r = cp_sandbox_exists(n, name, &g.sticky, err);
        if (r >= 0)
                r = cp_guest_label(name, &label, err);
        if (r >= 0)
                r = cp_open_guest(&g, dst, err);
        if (r >= 0) {
                _cleanup_free_ char *stage_dir = cp_stage_dir(&g);
                cp_side src = { .path = host_src, .fd = fd, .label = "" };
                cp_side to = { .w = g.w, .path = dst, .fd = -1, .label = label, .stage_dir = stage_dir };
                r = cp_copy(&src, &to, err);
        }
        r = cp_guest_done(&g, r, err);
        if (r < 0)
                return nook_err_wrap(err, "copying %s%s to '%s:%s'", host_src ? "" : "a tar stream",
                        host_src ? host_src : "", name, dst);
        return 0;
}

int nook_cp_out(nook *n, const char *name, const char *src, const char *host_dst, int fd, nook_error *err) {
        _cleanup_free_ char *label = NULL;
        cp_guest g = { .n = n, .name = name };
        if (!src || (!host_dst && fd < 0))
                return nook_err_set(err, NOOK_E_INVALID, "nook_cp_out needs a source and a destination");
        int r = cp_sandbox_exists(n, name, &g.sticky, err);
        if (r >= 0)
                r = cp_guest_label(name, &label, err);
        if (r >= 0)
                r = cp_open_guest(&g, src, err);
        if (r >= 0) {
                cp_side from = { .w = g.w, .path = src, .fd = -1, .label = label };
                cp_side to = { .path = host_dst, .fd = fd, .label = "" };
                r = cp_copy(&from, &to, err);
        }
        r = cp_guest_done(&g, r, err);
        if (r < 0)
                return nook_err_wrap(
                        err, "copying '%s:%s' to %s", name, src, host_dst ? host_dst : "a tar stream");
        return 0;
}
