/* SPDX-License-Identifier: Apache-2.0 */
/* The public workspace API: thin wrappers over src/workspace/ws.h.  Every rule lives there. */
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "nook.h"
#include "sandbox/ctx.h"
#include "sandbox/state.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "workspace/ws.h"

/* A change to a workspace holds the name's lock shared, so it never interleaves with `nook rm`
 * (which holds it exclusively): a write racing rm lands before it, and goes with the
 * workspace, or finds the workspace gone and fails.  Only a handle opened after rm returned
 * stages a new workspace. */
struct nook_ws {
        ws *w;
        char *home, *name;
};

/* Takes the shared lock and checks the handle's folder is still the name's workspace. */
static int ws_guard(nook_ws *h, int *ret_lock, nook_error *err) {
        _cleanup_close_ int lock = -1;
        struct stat held, now;
        int r = sb_lock_home(h->home, h->name, LOCK_SH, &lock, err);
        if (r < 0)
                return r;
        if (fstat(ws_root_fd(h->w), &held) < 0 || stat(ws_root(h->w), &now) < 0 ||
                held.st_ino != now.st_ino || held.st_dev != now.st_dev)
                return nook_err_set(err, NOOK_E_NOT_FOUND,
                        "The workspace of '%s' was removed ('nook rm'); open it again to stage a new one",
                        h->name);
        *ret_lock = TAKE_FD(lock);
        return 0;
}

int nook_ws_dir(nook *n, const char *name, char **ret_path, nook_error *err) {
        return ctx_ws_dir(n, name, ret_path, err);
}

int nook_ws_open(nook *n, const char *name, nook_ws **ret, nook_error *err) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_(ws_freep) ws *w = NULL;

        _cleanup_close_ int lock = -1;

        int r = ctx_ws_dir(n, name, &dir, err);
        if (r < 0)
                return r;
        if ((r = sb_lock_home(n->home, name, LOCK_SH, &lock, err)) < 0)
                return r;
        /* Created on open: files may be staged before the sandbox's first create. */
        r = ws_open(dir, /* create= */ true, n->ws_uid, n->ws_gid, &w, err);
        if (r < 0)
                return nook_err_wrap(err, "opening the workspace of '%s'", name);
        nook_ws *h = calloc(1, sizeof(*h));
        if (!h)
                return nook_err_oom(err);
        h->home = strdup(n->home);
        h->name = strdup(name);
        if (!h->home || !h->name) {
                free(h->home);
                free(h->name);
                free(h);
                return nook_err_oom(err);
        }
        h->w = TAKE_PTR(w);
        *ret = h;
        return 0;
}

nook_ws *nook_ws_close(nook_ws *w) {
        if (!w)
                return NULL;
        ws_free(w->w);
        free(w->home);
        free(w->name);
        free(w);
        return NULL;
}

const char *nook_ws_root(const nook_ws *w) {
        return ws_root(w->w);
}

int nook_ws_host_path(nook_ws *w, const char *path, char **ret, nook_error *err) {
        return ws_host_path(w->w, path, ret, err);
}

int nook_ws_write(nook_ws *w, const char *path, const void *data, size_t len, nook_error *err) {
        _cleanup_close_ int lock = -1;
        int r = ws_guard(w, &lock, err);
        return r < 0 ? r : ws_write(w->w, path, data, len, 0644, err);
}

int nook_ws_write_fd(nook_ws *w, const char *path, int fd, nook_error *err) {
        /* A regular file keeps its permission bits (an executable stays executable); setuid,
         * setgid and sticky never cross into a workspace. */
        struct stat st;
        mode_t mode = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (st.st_mode & 0777) : 0644;
        _cleanup_close_ int lock = -1;
        int r = ws_guard(w, &lock, err);
        return r < 0 ? r : ws_write_fd(w->w, path, fd, mode ? mode : 0644, err);
}

int nook_ws_read(
        nook_ws *w, const char *path, size_t max, void **ret_data, size_t *ret_len, nook_error *err) {
        return ws_read(w->w, path, max, ret_data, ret_len, err);
}

int nook_ws_open_read(nook_ws *w, const char *path, int *ret_fd, nook_error *err) {
        return ws_open_read(w->w, path, ret_fd, err);
}

int nook_ws_exists(nook_ws *w, const char *path, nook_error *err) {
        return ws_exists(w->w, path, err);
}

int nook_ws_stat(nook_ws *w, const char *path, nook_stat *ret, nook_error *err) {
        return ws_stat(w->w, path, ret, err);
}

int nook_ws_mkdir(nook_ws *w, const char *path, nook_error *err) {
        _cleanup_close_ int lock = -1;
        int r = ws_guard(w, &lock, err);
        return r < 0 ? r : ws_mkdir_p(w->w, path, 0755, err);
}

int nook_ws_list(nook_ws *w, const char *path, nook_dirent **ret, size_t *ret_n, nook_error *err) {
        return ws_list(w->w, path, ret, ret_n, err);
}

void nook_dirents_free(nook_dirent *d, size_t n) {
        ws_dirents_free(d, n);
}

int nook_ws_remove(nook_ws *w, const char *path, nook_error *err) {
        _cleanup_close_ int lock = -1;
        int r = ws_guard(w, &lock, err);
        return r < 0 ? r : ws_remove(w->w, path, err);
}

int nook_ws_rename(nook_ws *w, const char *from, const char *to, nook_error *err) {
        _cleanup_close_ int lock = -1;
        int r = ws_guard(w, &lock, err);
        return r < 0 ? r : ws_rename(w->w, from, to, err);
}
