/* SPDX-License-Identifier: Apache-2.0 */
/* The workspace handle: the root directory, held open so every lookup is relative to it and a
 * rename of the path above it cannot redirect us. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/path.h"
#include "workspace/ws.h"
#include "workspace/ws_internal.h"

/* NOOK_TEST_NO_OPENAT2=1 forces the component walk, so tests cover the fallback on kernels that
 * have openat2.  Only compiled into builds with test hooks; read once per handle. */
static bool ws_test_no_openat2(void) {
#ifdef NOOK_TEST_HOOKS
        const char *e = secure_getenv("NOOK_TEST_NO_OPENAT2");
        return e && streq(e, "1");
#else
        return false;
#endif
}

/* Creates dir (and its parents) for ws_open.  Returns 1 when dir itself was made by us, so the
 * caller hands it to the owner; 0 when it was already there. */
static int ws_make_root(const char *dir, nook_error *err) {
        if (mkdir(dir, 0755) == 0)
                return 1;
        if (errno == EEXIST)
                return 0;
        if (errno != ENOENT)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the workspace '%s'", dir);
        _cleanup_free_ char *parent = strdup(dir);
        if (!parent)
                return nook_err_oom(err);
        *strrchr(parent, '/') = 0;
        if (parent[0]) {
                int r = path_mkdir_p(parent, 0755, err);
                if (r < 0)
                        return r;
        }
        if (mkdir(dir, 0755) == 0)
                return 1;
        if (errno == EEXIST)
                return 0;
        return nook_err_errno(err, NOOK_E_IO, "Cannot create the workspace '%s'", dir);
}

int ws_open(const char *dir, bool create, uid_t owner_uid, gid_t owner_gid, ws **ret, nook_error *err) {
        _cleanup_(ws_freep) ws *w = NULL;
        int made = 0;

        if (isempty(dir) || dir[0] != '/')
                return nook_err_set(err, NOOK_E_INVALID,
                        "The workspace folder must be an absolute path, got '%s'", dir ? dir : "");
        if (strlen(dir) >= PATH_MAX)
                return nook_err_set(err, NOOK_E_INVALID, "The workspace folder path is too long");

        w = calloc(1, sizeof(*w));
        if (!w)
                return nook_err_oom(err);
        w->root_fd = -1;
        w->root = strdup(dir);
        /* cppcheck does not see the cleanup attribute on w: this report is false. */
        if (!w->root)
                return nook_err_oom(err); /* cppcheck-suppress memleak */
        for (size_t n = strlen(w->root); n > 1 && w->root[n - 1] == '/'; n--)
                w->root[n - 1] = 0;
        w->owner_uid = owner_uid;
        w->owner_gid = owner_gid;
        w->chown = owner_uid != geteuid() || owner_gid != getegid();
        w->no_openat2 = ws_test_no_openat2();

        if (create) {
                made = ws_make_root(w->root, err);
                if (made < 0)
                        return made;
        }
        /* O_NOFOLLOW: the root itself is ours, never a link planted by someone else. */
        w->root_fd = open(w->root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (w->root_fd < 0) {
                if (errno == ENOENT)
                        return nook_err_set(
                                err, NOOK_E_NOT_FOUND, "The workspace '%s' does not exist", w->root);
                return nook_err_errno(err, errno == ENOTDIR || errno == ELOOP ? NOOK_E_INVALID : NOOK_E_IO,
                        "Cannot open the workspace '%s'", w->root);
        }
        if (made && w->chown && fchownat(w->root_fd, "", owner_uid, owner_gid, AT_EMPTY_PATH) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot hand the workspace '%s' to uid %u", w->root,
                        (unsigned)owner_uid);
        *ret = TAKE_PTR(w);
        return 0;
}

int ws_open_root(int root_fd, uid_t owner_uid, gid_t owner_gid, ws **ret, nook_error *err) {
        _cleanup_close_ int fd = root_fd;
        ws *w = calloc(1, sizeof(*w));
        if (!w)
                return nook_err_oom(err);
        w->root = strdup("/");
        if (!w->root) {
                free(w);
                return nook_err_oom(err);
        }
        w->root_fd = TAKE_FD(fd);
        w->owner_uid = owner_uid;
        w->owner_gid = owner_gid;
        w->chown = owner_uid != geteuid() || owner_gid != getegid();
        w->no_openat2 = ws_test_no_openat2();
        w->in_root = true;
        *ret = w;
        return 0;
}

bool ws_owner(const ws *w, uid_t *ret_uid, gid_t *ret_gid) {
        *ret_uid = w->owner_uid;
        *ret_gid = w->owner_gid;
        return w->chown;
}

bool ws_is_root(const ws *w) {
        return w->in_root;
}

ws *ws_free(ws *w) {
        if (!w)
                return NULL;
        safe_close(w->root_fd);
        free(w->root);
        free(w);
        return NULL;
}

const char *ws_root(const ws *w) {
        return w->root;
}

int ws_root_fd(const ws *w) {
        return w->root_fd;
}

bool ws_uses_openat2(const ws *w) {
        return !__atomic_load_n(&w->no_openat2, __ATOMIC_RELAXED);
}
