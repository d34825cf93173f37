/* SPDX-License-Identifier: Apache-2.0 */
/* The public workspace API: thin wrappers over src/workspace/ws.h.  Every rule lives there. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
 * stages a new workspace.
 *
 * The handle keeps the lock file open and counts the changes in flight: the first takes the
 * lock shared on that one open file, the last releases it, so a change costs one flock each
 * way and two stats instead of opening, checking and closing the lock file every time (the
 * Node binding writes files one call each).  flock belongs to the open file, not the thread:
 * hence the count, under a mutex, instead of each thread locking and unlocking the same file. */
struct nook_ws {
        ws *w;
        char *home, *name;
        pthread_mutex_t mu;
        int lock_fd; /* the name's lock file, opened by the first change (a handle only read from
                      * holds no descriptor for it); locked while holders > 0 */
        unsigned holders;
        dev_t root_dev;
        ino_t root_ino;
};

static bool ws_same_file(const struct stat *st, dev_t dev, ino_t ino) {
        return st->st_dev == dev && st->st_ino == ino;
}

static int ws_flock(int fd, int how) {
        int r;
        while ((r = flock(fd, how)) < 0 && errno == EINTR)
                ;
        return r;
}

/* Takes the lock shared on the open file while it is still linked (rm deletes the lock file
 * while holding it: a lock on a deleted file guards nothing), else opens the current one.  A
 * lock file is only ever created and unlinked, never renamed over: a file still linked is the
 * one the path names, which fstat tells without walking the path.  Called with mu held and
 * holders == 0. */
static int ws_guard_lock(nook_ws *h, nook_error *err) {
        struct stat now;

        if (h->lock_fd >= 0 && ws_flock(h->lock_fd, LOCK_SH) == 0 && fstat(h->lock_fd, &now) == 0 &&
                now.st_nlink > 0)
                return 0;
        h->lock_fd = safe_close(h->lock_fd); /* releases what the flock above may have taken */
        _cleanup_close_ int fd = -1;
        int r = sb_lock_home(h->home, h->name, LOCK_SH, &fd, err);
        if (r < 0)
                return r;
        h->lock_fd = TAKE_FD(fd);
        return 0;
}

/* Holds the name's lock shared and checks the handle's folder is still the name's workspace. */
static int ws_guard_enter(nook_ws *h, nook_error *err) {
        struct stat now;
        int r = 0;

        (void)pthread_mutex_lock(&h->mu);
        if (h->holders == 0) {
                r = ws_guard_lock(h, err);
                /* The root's fd pins its inode: a folder made at the path since has another. */
                if (r >= 0 &&
                        (stat(ws_root(h->w), &now) < 0 || !ws_same_file(&now, h->root_dev, h->root_ino))) {
                        (void)ws_flock(h->lock_fd, LOCK_UN);
                        r = nook_err_set(err, NOOK_E_NOT_FOUND,
                                "The workspace of '%s' was removed ('nook rm', remove()); this handle is done with: create the sandbox again, or open a new handle (nook_ws_open) to stage a new workspace",
                                h->name);
                }
        }
        if (r >= 0)
                h->holders++;
        (void)pthread_mutex_unlock(&h->mu);
        return r;
}

static void ws_guard_leave(nook_ws *h) {
        (void)pthread_mutex_lock(&h->mu);
        if (--h->holders == 0)
                (void)ws_flock(h->lock_fd, LOCK_UN);
        (void)pthread_mutex_unlock(&h->mu);
}

int nook_ws_dir(nook *n, const char *name, char **ret_path, nook_error *err) {
        return ctx_ws_dir(n, name, ret_path, err);
}

nook_ws *nook_ws_close(nook_ws *w) {
        if (!w)
                return NULL;
        ws_free(w->w);
        safe_close(w->lock_fd);
        (void)pthread_mutex_destroy(&w->mu);
        free(w->home);
        free(w->name);
        free(w);
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(nook_ws *, nook_ws_close);

static int ws_handle_open(nook *n, const char *name, bool create, nook_ws **ret, nook_error *err) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_(ws_freep) ws *w = NULL;
        _cleanup_close_ int lock = -1;
        struct stat rst;

        int r = ctx_ws_dir(n, name, &dir, err);
        if (r < 0)
                return r;
        if ((r = sb_lock_home(n->home, name, LOCK_SH, &lock, err)) < 0)
                return r;
        /* Created on open: files may be staged before the sandbox's first create. */
        r = ws_open(dir, create, n->ws_uid, n->ws_gid, &w, err);
        if (r == -NOOK_E_NOT_FOUND && !create)
                return nook_err_set(err, NOOK_E_NOT_FOUND,
                        "No sandbox '%s' and no workspace staged for it ('nook ls -a' lists the sandboxes)",
                        name);
        if (r < 0)
                return nook_err_wrap(err, "opening the workspace of '%s'", name);
        if (fstat(ws_root_fd(w), &rst) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat the workspace of '%s'", name);

        _cleanup_(nook_ws_closep) nook_ws *h = calloc(1, sizeof(*h));
        if (!h)
                return nook_err_oom(err);
        h->lock_fd = -1;
        (void)pthread_mutex_init(&h->mu, NULL);
        h->home = strdup(n->home);
        h->name = strdup(name);
        if (!h->home || !h->name)
                return nook_err_oom(err);
        h->root_dev = rst.st_dev;
        h->root_ino = rst.st_ino;
        h->w = TAKE_PTR(w);
        *ret = TAKE_PTR(h);
        return 0;
}

int nook_ws_open(nook *n, const char *name, nook_ws **ret, nook_error *err) {
        return ws_handle_open(n, name, /* create= */ true, ret, err);
}

int nook_ws_open_existing(nook *n, const char *name, nook_ws **ret, nook_error *err) {
        return ws_handle_open(n, name, /* create= */ false, ret, err);
}

const char *nook_ws_root(const nook_ws *w) {
        return ws_root(w->w);
}

int nook_ws_host_path(nook_ws *w, const char *path, char **ret, nook_error *err) {
        return ws_host_path(w->w, path, ret, err);
}

#define NOOK_WS_WRITE_FLAGS_KNOWN NOOK_WS_WRITE_IN_PLACE

static int ws_write_flags_check(unsigned flags, nook_error *err) {
        if (flags & ~NOOK_WS_WRITE_FLAGS_KNOWN)
                return nook_err_set(err, NOOK_E_INVALID, "Unknown workspace write flags 0x%x",
                        flags & ~NOOK_WS_WRITE_FLAGS_KNOWN);
        return 0;
}

static unsigned ws_write_flags(unsigned flags) {
        return (flags & NOOK_WS_WRITE_IN_PLACE) ? WS_WRITE_IN_PLACE : 0;
}

int nook_ws_write_ex(
        nook_ws *w, const char *path, const void *data, size_t len, unsigned flags, nook_error *err) {
        int r = ws_write_flags_check(flags, err);
        if (r < 0)
                return r;
        r = ws_guard_enter(w, err);
        if (r < 0)
                return r;
        r = ws_write(w->w, path, data, len, /* a new file 0644, a replaced one keeps its mode */ 0,
                ws_write_flags(flags), err);
        ws_guard_leave(w);
        return r;
}

int nook_ws_write(nook_ws *w, const char *path, const void *data, size_t len, nook_error *err) {
        return nook_ws_write_ex(w, path, data, len, 0, err);
}

int nook_ws_write_fd_ex(nook_ws *w, const char *path, int fd, unsigned flags, nook_error *err) {
        int r = ws_write_flags_check(flags, err);
        if (r < 0)
                return r;
        /* A regular file brings its permission bits (an executable stays executable); setuid,
         * setgid and sticky never cross into a workspace.  A pipe brings none: as nook_ws_write,
         * a new file is 0644 and a replaced one keeps its own (mode 0). */
        struct stat st;
        mode_t mode = 0;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
                mode = (st.st_mode & 0777) ? (st.st_mode & 0777) : 0644;
        r = ws_guard_enter(w, err);
        if (r < 0)
                return r;
        r = ws_write_fd(w->w, path, fd, mode, ws_write_flags(flags), err);
        ws_guard_leave(w);
        return r;
}

int nook_ws_write_fd(nook_ws *w, const char *path, int fd, nook_error *err) {
        return nook_ws_write_fd_ex(w, path, fd, 0, err);
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
        int r = ws_guard_enter(w, err);
        if (r < 0)
                return r;
        r = ws_mkdir_p(w->w, path, 0755, err);
        ws_guard_leave(w);
        return r;
}

int nook_ws_list(nook_ws *w, const char *path, nook_dirent **ret, size_t *ret_n, nook_error *err) {
        return ws_list(w->w, path, ret, ret_n, err);
}

void nook_dirents_free(nook_dirent *d, size_t n) {
        ws_dirents_free(d, n);
}

int nook_ws_remove(nook_ws *w, const char *path, nook_error *err) {
        int r = ws_guard_enter(w, err);
        if (r < 0)
                return r;
        r = ws_remove(w->w, path, err);
        ws_guard_leave(w);
        return r;
}

int nook_ws_rename(nook_ws *w, const char *from, const char *to, nook_error *err) {
        int r = ws_guard_enter(w, err);
        if (r < 0)
                return r;
        r = ws_rename(w->w, from, to, err);
        ws_guard_leave(w);
        return r;
}
