/* SPDX-License-Identifier: Apache-2.0 */
/* The nook handle's database, the paths of a sandbox's folders, the state folder's privacy check
 * and a sandbox's id range: below state.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/idmap.h"
#include "isolate/userns.h"
#include "store/idrange.h"
#include "sandbox/ctx.h"
#include "sandbox/idclaim.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/path.h"
#include "util/str.h"

/* A group only the owner is in: its primary group, with no other listed member.  The _r calls:
 * nook_open may run on any thread of an embedding program (the Node addon). */
static bool group_is_private(gid_t gid, uid_t owner) {
        char pbuf[4096], gbuf[16384];
        struct passwd pw, *pwp = NULL;
        struct group gr, *grp = NULL;
        if (getpwuid_r(owner, &pw, pbuf, sizeof(pbuf), &pwp) != 0 || !pwp || pw.pw_gid != gid)
                return false;
        if (getgrgid_r(gid, &gr, gbuf, sizeof(gbuf), &grp) != 0 || !grp)
                return false;
        for (char **m = gr.gr_mem; m && *m; m++)
                if (!streq(*m, pw.pw_name))
                        return false;
        return true;
}

/* Other users must not enter the state folder: a sandbox's root makes files (setuid programs
 * among them) in its workspace, and with idmapped mounts those are the host owner's.  See
 * docs/design/security.md, "Setuid files in the workspace". */
int ctx_home_check(const char *home, bool allow, bool *ret_shared, nook_error *err) {
        struct stat st;
        if (stat(home, &st) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat the state folder '%s'", home);
        bool shared = (st.st_mode & S_IXOTH) ||
                ((st.st_mode & S_IXGRP) && !group_is_private(st.st_gid, st.st_uid));
        if (shared && !allow)
                return nook_err_set(err, NOOK_E_REFUSED,
                        "The state folder '%s' (mode %04o) can be entered by other users: they could run programs a sandbox made in its workspace, setuid ones included, and read its files; run 'chmod 0700 %s', or set NOOK_ALLOW_SHARED_HOME=1 (nook --allow-shared-home) to accept that risk",
                        home, (unsigned)(st.st_mode & 07777), home);
        *ret_shared = shared;
        return 0;
}

/* Moves every id in [from, from + ISO_ID_RANGE) under dfd to the same offset from to, without
 * following symlinks or leaving the filesystem; setuid/setgid bits (chown clears them) are put
 * back.  depth bounds the walk, as path_rm_rf does. */
static int shift_tree(int dfd, uid_t from, uid_t to, unsigned depth, nook_error *err) {
        if (depth > 4096)
                return nook_err_set(err, NOOK_E_INVALID, "A writable layer nests deeper than 4096 folders");
        int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        if (dup < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot walk a writable layer");
        DIR *d = fdopendir(dup);
        if (!d) {
                safe_close(dup);
                return nook_err_errno(err, NOOK_E_IO, "Cannot walk a writable layer");
        }
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                struct stat st;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                uid_t u = st.st_uid - from < ISO_ID_RANGE ? st.st_uid - from + to : st.st_uid;
                gid_t g = st.st_gid - from < ISO_ID_RANGE ? st.st_gid - from + to : st.st_gid;
                if ((u != st.st_uid || g != st.st_gid) &&
                        fchownat(dfd, de->d_name, u, g, AT_SYMLINK_NOFOLLOW) < 0)
                        r = nook_err_errno(err, NOOK_E_IO,
                                "Cannot move '%s' of a writable layer to its id range", de->d_name);
                else if (S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)))
                        (void)!fchmodat(dfd, de->d_name, st.st_mode & 07777, 0);
                if (r >= 0 && S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub =
                                openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0)
                                r = shift_tree(sub, from, to, depth + 1, err);
                }
        }
        closedir(d);
        return r;
}

/* A kept writable layer made before its sandbox had a range sits in the shared range: moved to
 * the new one once, when the range is recorded. */
static int shift_kept_upper(nook *n, const char *name, uid_t to, nook_error *err) {
        _cleanup_free_ char *sdir = NULL, *upper = NULL;
        int r = ctx_sandbox_dir(n, name, &sdir, err);
        if (r < 0)
                return r;
        if (!(upper = strprintf("%s/upper", sdir)))
                return nook_err_oom(err);
        _cleanup_close_ int fd = open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", upper);
        struct stat st;
        if (fstat(fd, &st) < 0 || st.st_uid != n->img_uid)
                return 0;
        if (fchown(fd, to, to) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot move '%s' to its id range", upper);
        return shift_tree(fd, n->img_uid, to, 0, err);
}

int ctx_sandbox_root(
        nook *n, const char *name, bool acquire, uid_t *ret_uid, gid_t *ret_gid, nook_error *err) {
        if (!n->idmap) {
                *ret_uid = n->img_uid;
                *ret_gid = n->img_gid;
                return 0;
        }
        static const idrange_pool pool = {
                .first = ISO_IDPOOL_FIRST, .size = ISO_ID_RANGE, .count = ISO_IDPOOL_COUNT
        };
        store *st;
        uint32_t base = 0;
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        nook_error ignore;
        bool had = store_idrange_get(st, name, &base, &ignore) >= 0;
        if (acquire) {
                /* the slot is also claimed host-wide, against other state folders (idclaim.h) */
                idclaims c;
                idclaims_open(&c, n->home, name);
                r = store_idrange_acquire(st, name, &pool, idclaims_usable, &c, &base, err);
                if (r < 0)
                        idclaims_undo(&c);
                idclaims_close(&c);
        } else
                r = store_idrange_get(st, name, &base, err);
        if (r >= 0 && acquire && !had && (r = shift_kept_upper(n, name, base, err)) < 0)
                return nook_err_wrap(err, "moving sandbox '%s' to its own id range", name);
        if (r == -NOOK_E_NOT_FOUND) {
                /* made before ranges existed: its files are in the shared range */
                *ret_uid = n->img_uid;
                *ret_gid = n->img_gid;
                return 0;
        }
        if (r < 0)
                return r;
        *ret_uid = base;
        *ret_gid = base;
        return 0;
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

bool ctx_sandbox_recorded(nook *n, const char *name) {
        store *st;
        sandbox_rec rec = { 0 };
        nook_error ignore;
        bool found = ctx_store(n, &st, &ignore) >= 0 && store_sandbox_get(st, name, &rec, &ignore) >= 0;
        sandbox_rec_done(&rec);
        return found;
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

int ctx_dirs(const nook *n, const char *name, char **ret_sdir, char **ret_wsdir, nook_error *err) {
        _cleanup_free_ char *sdir = NULL, *wsdir = NULL;
        int r = ctx_sandbox_dir(n, name, &sdir, err);
        if (r < 0)
                return r;
        r = ctx_ws_dir(n, name, &wsdir, err);
        if (r < 0)
                return r;
        *ret_sdir = TAKE_PTR(sdir);
        *ret_wsdir = TAKE_PTR(wsdir);
        return 0;
}

void ctx_stop_conn_keep(nook *n, const char *name, int fd) {
        char *copy = strdup(name);
        struct ctx_stop_conn *l = copy ? reallocarray(n->stop_conns, n->n_stop_conns + 1, sizeof(*l)) : NULL;
        if (!l) {
                /* the supervisor stops all the same; nook_sandbox_remove connects anew */
                free(copy);
                safe_close(fd);
                return;
        }
        l[n->n_stop_conns++] = (struct ctx_stop_conn){ .name = copy, .fd = fd };
        n->stop_conns = l;
}

int ctx_stop_conn_take(nook *n, const char *name) {
        for (size_t i = 0; i < n->n_stop_conns; i++) {
                if (!streq(n->stop_conns[i].name, name))
                        continue;
                int fd = n->stop_conns[i].fd;
                free(n->stop_conns[i].name);
                n->stop_conns[i] = n->stop_conns[--n->n_stop_conns];
                return fd;
        }
        return -1;
}
