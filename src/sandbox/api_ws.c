/* SPDX-License-Identifier: Apache-2.0 */
/* The public workspace API: thin wrappers over src/workspace/ws.h.  Every rule lives there. */
#include <stdlib.h>

#include <sys/stat.h>

#include "nook.h"
#include "sandbox/ctx.h"
#include "util/error.h"
#include "util/macro.h"
#include "workspace/ws.h"

struct nook_ws {
        ws *w;
};

int nook_ws_dir(nook *n, const char *name, char **ret_path, nook_error *err) {
        return ctx_ws_dir(n, name, ret_path, err);
}

int nook_ws_open(nook *n, const char *name, nook_ws **ret, nook_error *err) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_(ws_freep) ws *w = NULL;

        int r = ctx_ws_dir(n, name, &dir, err);
        if (r < 0)
                return r;
        /* Created on open: files may be staged before the sandbox's first create. */
        r = ws_open(dir, /* create= */ true, n->ws_uid, n->ws_gid, &w, err);
        if (r < 0)
                return nook_err_wrap(err, "opening the workspace of '%s'", name);
        nook_ws *h = malloc(sizeof(*h));
        if (!h)
                return nook_err_oom(err);
        h->w = TAKE_PTR(w);
        *ret = h;
        return 0;
}

nook_ws *nook_ws_close(nook_ws *w) {
        if (!w)
                return NULL;
        ws_free(w->w);
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
        return ws_write(w->w, path, data, len, 0644, err);
}

int nook_ws_write_fd(nook_ws *w, const char *path, int fd, nook_error *err) {
        /* A regular file keeps its permission bits (an executable stays executable); setuid,
         * setgid and sticky never cross into a workspace. */
        struct stat st;
        mode_t mode = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (st.st_mode & 0777) : 0644;
        return ws_write_fd(w->w, path, fd, mode ? mode : 0644, err);
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
        return ws_mkdir_p(w->w, path, 0755, err);
}

int nook_ws_list(nook_ws *w, const char *path, nook_dirent **ret, size_t *ret_n, nook_error *err) {
        return ws_list(w->w, path, ret, ret_n, err);
}

void nook_dirents_free(nook_dirent *d, size_t n) {
        ws_dirents_free(d, n);
}

int nook_ws_remove(nook_ws *w, const char *path, nook_error *err) {
        return ws_remove(w->w, path, err);
}

int nook_ws_rename(nook_ws *w, const char *from, const char *to, nook_error *err) {
        return ws_rename(w->w, from, to, err);
}
