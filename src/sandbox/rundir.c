/* SPDX-License-Identifier: Apache-2.0 */
/* The runtime folder of a state folder (rundir.h).  Where it is made, the first time a home is
 * used (or again when the folder it names is gone and cannot be made at the same place):
 *   $NOOK_RUNTIME_DIR/nook-<uid>/<key> when set (the tests: a folder of their own each)
 *   root:      /run/nook/<key>          when /run is a tmpfs
 *   a user:    $XDG_RUNTIME_DIR/nook/<key>, else /run/user/<uid>/nook/<key>
 *   either:    /dev/shm/nook-<uid>/<key> (a tmpfs on every Linux; the name is checked as ours)
 *   else:      <home>/run, a plain folder on the home's own disk
 * <key> is a 64-bit FNV-1a of the home's path (two homes of one user never share a folder).
 * Every folder is 0700 and must be its owner's (lstat, never through a symlink); a name in a
 * world-writable place that another user took first is passed over for the next. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "nook.h"
#include "sandbox/ctx.h"
#include "sandbox/rundir.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/path.h"
#include "util/str.h"

#define RUN_LINK "run"
/* In each runtime folder nook makes: the path of its state folder, so that a prune can tell the
 * folders of state folders deleted by hand (rm -rf ~/.local/share/nook) from live ones. */
#define HOME_MARK ".home"
#define DENIED                                                                                              \
        "Cannot use the runtime folder '%s': permission denied (the state belongs to another user: run nook as that user, or use a home of your own with --home or NOOK_HOME)"

static bool on_tmpfs(const char *path) {
        struct statfs sf;
        return statfs(path, &sf) == 0 && (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
}

/* A folder only uid can use: a directory (not a symlink) of uid's, no access for anyone else. */
static bool private_dir(const char *p, uid_t uid) {
        struct stat st;
        return lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid && (st.st_mode & 077) == 0;
}

/* Makes folder p (0700) unless it exists; either way it must then be a private folder of uid. */
static int private_mkdir(const char *p, uid_t uid, nook_error *err) {
        if (mkdir(p, 0700) == 0)
                (void)chmod(p, 0700); /* a umask may have taken the owner's bits */
        else if (errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO,
                        "Cannot create the runtime folder '%s' (its parent must be writable by uid %u; or set NOOK_RUNTIME_DIR to a folder that is)",
                        p, (unsigned)uid);
        if (!private_dir(p, uid))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "The runtime folder '%s' is not a folder of uid %u that only it can enter (mode 0700); remove it, or set NOOK_RUNTIME_DIR to another folder",
                        p, (unsigned)uid);
        return 0;
}

/* The first candidate folder that is (or can be made) private; NULL when none is. */
static char *try_roots(uid_t uid) {
        char cand[4][PATH_MAX];
        size_t n = 0;
        const char *xdg = uid != 0 ? secure_getenv("XDG_RUNTIME_DIR") : NULL;
        if (uid == 0 && on_tmpfs("/run"))
                (void)snprintf(cand[n++], PATH_MAX, "/run/nook");
        if (xdg && xdg[0] == '/' && strlen(xdg) < PATH_MAX - 8 && private_dir(xdg, uid))
                (void)snprintf(cand[n++], PATH_MAX, "%s/nook", xdg);
        char user[64];
        (void)snprintf(user, sizeof(user), "/run/user/%u", (unsigned)uid);
        if (private_dir(user, uid))
                (void)snprintf(cand[n++], PATH_MAX, "%s/nook", user);
        if (on_tmpfs("/dev/shm"))
                (void)snprintf(cand[n++], PATH_MAX, "/dev/shm/nook-%u", (unsigned)uid);
        for (size_t i = 0; i < n; i++) {
                nook_error ignore;
                if (private_mkdir(cand[i], uid, &ignore) >= 0)
                        return strdup(cand[i]);
        }
        return NULL;
}

/* Where a new runtime folder goes (*ret NULL: nowhere but the home itself).  NOOK_RUNTIME_DIR
 * names a folder to use instead of /run or /dev/shm (the tests give each file its own): nook
 * makes its nook-<uid> in it, as in /dev/shm. */
static int choose_root(uid_t uid, char **ret, nook_error *err) {
        const char *env = secure_getenv("NOOK_RUNTIME_DIR");
        struct stat st;
        if (!env || !env[0]) {
                *ret = try_roots(uid);
                return 0;
        }
        if (env[0] != '/')
                return nook_err_set(
                        err, NOOK_E_INVALID, "NOOK_RUNTIME_DIR must be an absolute path, got '%s'", env);
        if (stat(env, &st) < 0 || !S_ISDIR(st.st_mode))
                return nook_err_set(err, NOOK_E_INVALID,
                        "NOOK_RUNTIME_DIR '%s' is not a folder; make it, or unset NOOK_RUNTIME_DIR", env);
        _cleanup_free_ char *root = strprintf("%s/nook-%u", env, (unsigned)uid);
        if (!root)
                return nook_err_oom(err);
        int r = private_mkdir(root, uid, err);
        if (r < 0)
                return nook_err_wrap(err, "NOOK_RUNTIME_DIR");
        *ret = TAKE_PTR(root);
        return 0;
}

/* Records home in runtime folder rt (HOME_MARK); best effort: without it the folder is never
 * taken for an orphan. */
static void mark_home(const char *rt, const char *home) {
        _cleanup_free_ char *p = strprintf("%s/" HOME_MARK, rt);
        _cleanup_close_ int fd =
                p ? open(p, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
        if (fd >= 0)
                (void)fd_write_all(fd, home, strlen(home));
}

/* Makes the home's runtime folder and points link at it (replace: over a link whose folder is
 * gone for good); with no tmpfs folder to use, link becomes a plain folder.  The caller reads
 * link again: of two processes racing here, the first link made wins. */
static int make_link(const char *home, const char *link, bool replace, nook_error *err) {
        _cleanup_free_ char *root = NULL;
        int r = choose_root(geteuid(), &root, err);
        if (r < 0)
                return r;
        if (replace)
                (void)unlink(link);
        if (!root) {
                if (mkdir(link, 0700) < 0 && errno != EEXIST)
                        return nook_err_errno(err, NOOK_E_IO,
                                "Cannot create the runtime folder '%s' (the state folder must be writable by its owner)",
                                link);
                return 0;
        }
        _cleanup_free_ char *rt = strprintf("%s/%016llx", root, (unsigned long long)str_fnv1a64(home));
        if (!rt)
                return nook_err_oom(err);
        r = private_mkdir(rt, geteuid(), err);
        if (r < 0)
                return r;
        mark_home(rt, home);
        if (symlink(rt, link) < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO,
                        "Cannot create the link '%s' to the runtime folder (the state folder must be writable by its owner)",
                        link);
        return 0;
}

/* A target nook could have made: absolute, normalised (no "//", "/./", "/../", trailing "/"). */
static bool target_plausible(const char *t) {
        size_t l = strlen(t);
        return t[0] == '/' && l > 1 && t[l - 1] != '/' && !strstr(t, "//") && !strstr(t, "/./") &&
                !strstr(t, "/../") && !endswith(t, "/.") && !endswith(t, "/..");
}

/* Follows <home>/run to target.  1: the folder is gone and cannot be made there again (its
 * parent's parent is gone too: /run/user/UID after a logout): the link is to be replaced. */
static int follow_link(
        const char *home, const char *link, const char *target, uid_t owner, char **ret, nook_error *err) {
        if (!target_plausible(target))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "'%s' points to '%s', which is not a runtime folder nook made; remove the link (nook makes a new one)",
                        link, target);
        if (!private_dir(target, owner)) {
                struct stat st;
                int lr = lstat(target, &st);
                if (lr < 0 && (errno == EACCES || errno == EPERM))
                        return nook_err_set(err, NOOK_E_REFUSED, DENIED, link);
                if (lr == 0)
                        return nook_err_set(err, NOOK_E_REFUSED,
                                "'%s' points to '%s', which is not a folder of uid %u that only it can enter (mode 0700); remove the link (nook makes a new one)",
                                link, target, (unsigned)owner);
                /* emptied (a reboot): made again at the same place, parent first; by the home's
                 * owner only (root following a user's link makes nothing where it points) */
                if (owner != geteuid())
                        return nook_err_set(err, NOOK_E_STATE,
                                "The runtime folder '%s' that '%s' points to is gone (a reboot?); run nook once as the state folder's owner (uid %u) to make it again",
                                target, link, (unsigned)owner);
                const char *slash = strrchr(target, '/'); /* target_plausible: there is one */
                _cleanup_free_ char *parent = strndup(target, (size_t)(slash - target));
                if (!parent)
                        return nook_err_oom(err);
                nook_error ignore;
                if (parent[0] && private_mkdir(parent, owner, &ignore) < 0)
                        return 1; /* /run/user/UID is gone (a logout), or another user took the name */
                int r = private_mkdir(target, owner, err);
                if (r < 0)
                        return nook_err_wrap(err, "making the runtime folder '%s' again", target);
                mark_home(target, home);
        }
        *ret = strdup(target);
        return *ret ? 0 : nook_err_oom(err);
}

int sb_run_root_home(const char *home, char **ret, nook_error *err) {
        struct stat hst;
        if (stat(home, &hst) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat the state folder '%s'", home);
        _cleanup_free_ char *link = strprintf("%s/" RUN_LINK, home);
        if (!link)
                return nook_err_oom(err);
        bool replace = false;
        for (int i = 0; i < 4; i++) {
                char buf[PATH_MAX];
                ssize_t k = readlink(link, buf, sizeof(buf) - 1);
                if (k > 0) {
                        buf[k] = 0;
                        int r = follow_link(home, link, buf, hst.st_uid, ret, err);
                        if (r <= 0)
                                return r;
                        replace = true;
                } else if (k < 0 && errno == EINVAL) {
                        /* a plain folder: no tmpfs was usable when the home was first used */
                        if (!private_dir(link, hst.st_uid))
                                return nook_err_set(err, NOOK_E_REFUSED,
                                        "'%s' is not a folder of uid %u that only it can enter (mode 0700); remove it (nook makes a new one)",
                                        link, (unsigned)hst.st_uid);
                        *ret = TAKE_PTR(link);
                        return 0;
                } else if (k < 0 && (errno == EACCES || errno == EPERM))
                        return nook_err_set(err, NOOK_E_REFUSED, DENIED, link);
                else if (k < 0 && errno != ENOENT)
                        return nook_err_errno(err, NOOK_E_IO,
                                "Cannot read the link '%s' (remove it: nook makes a new one)", link);
                /* root on a user's home (sudo) follows the user's link but makes none: a folder
                 * of root's would fail the owner check of every later caller, root's included */
                if (hst.st_uid != geteuid())
                        return nook_err_set(err, NOOK_E_STATE,
                                "The state folder '%s' (uid %u's) has no runtime folder yet; run nook once as its owner (uid %u) to make it",
                                home, (unsigned)hst.st_uid, (unsigned)hst.st_uid);
                int r = make_link(home, link, replace, err);
                if (r < 0)
                        return r;
                replace = false;
        }
        return nook_err_set(err, NOOK_E_BUSY,
                "The runtime folder link '%s' keeps changing; is another nook replacing it?", link);
}

bool sb_run_root_peek(const char *home, char *buf, size_t size) {
        char link[PATH_MAX];
        int l = snprintf(link, sizeof(link), "%s/" RUN_LINK, home);
        if (l < 0 || (size_t)l >= sizeof(link) || size < PATH_MAX)
                return false;
        if (realpath(link, buf))
                return true;
        ssize_t k = readlink(link, buf, size - 1);
        if (k <= 0 || buf[0] != '/')
                return false;
        buf[k] = 0;
        return true;
}

int sb_run_root(nook *n, const char **ret, nook_error *err) {
        if (!n->run_root) {
                int r = sb_run_root_home(n->home, &n->run_root, err);
                if (r < 0)
                        return r;
        }
        *ret = n->run_root;
        return 0;
}

int sb_run_dir(nook *n, const char *name, char **ret, nook_error *err) {
        const char *root;
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        r = sb_run_root(n, &root, err);
        if (r < 0)
                return r;
        char *p = strprintf("%s/%s", root, name);
        if (!p)
                return nook_err_oom(err);
        *ret = p;
        return 0;
}

int sb_run_dir_make(const char *dir, nook_error *err) {
        if (mkdir(dir, 0700) == 0)
                return 1;
        if (errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO,
                        "Cannot create the sandbox's runtime folder '%s' (the folder above it must be writable by its owner: see 'readlink NOOK_HOME/run')",
                        dir);
        return 0;
}

void sb_run_dir_clean(const char *dir, bool keep_log) {
        nook_error ignore;
        if (!keep_log) {
                (void)path_rm_rf(dir, &ignore);
                return;
        }
        static const char *const sockets[] = { "ctl.sock", "slirp.sock" };
        _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        for (size_t i = 0; dfd >= 0 && i < ELEMENTSOF(sockets); i++)
                (void)unlinkat(dfd, sockets[i], 0);
        /* an ephemeral layer (sb_run_dir_layer) goes with the sandbox's run */
        static const char *const layer[] = { "upper", "work" };
        for (size_t i = 0; dfd >= 0 && i < ELEMENTSOF(layer); i++) {
                _cleanup_free_ char *p = strprintf("%s/%s", dir, layer[i]);
                if (p)
                        (void)path_rm_rf(p, &ignore);
        }
}

/* The probe: overlayfs in a user namespace keeps its whiteouts and opaque folders in user.*
 * xattrs of the upper layer (userxattr); a tmpfs takes them since Linux 6.6. */
static bool takes_user_xattrs(int fd) {
        if (fsetxattr(fd, "user.nook-probe", "1", 1, 0) < 0)
                return false;
        (void)fremovexattr(fd, "user.nook-probe");
        return true;
}

int sb_run_dir_layer(const char *dir, nook_error *err) {
        _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct statfs sf;
        if (dfd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the runtime folder '%s'", dir);
        if (fstatfs(dfd, &sf) < 0 ||
                (unsigned long long)sf.f_bavail * (unsigned long long)sf.f_bsize < SB_LAYER_MIN_FREE)
                return 0;
        if (mkdirat(dfd, "upper", 0755) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the writable layer in '%s'", dir);
        _cleanup_close_ int ufd = openat(dfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ufd < 0 || !takes_user_xattrs(ufd)) {
                (void)unlinkat(dfd, "upper", AT_REMOVEDIR);
                return 0;
        }
        return 1;
}

char *sb_upper_path(nook *n, const char *name, const char *sdir) {
        _cleanup_free_ char *rd = NULL;
        nook_error ignore;
        struct stat st;
        if (sb_run_dir(n, name, &rd, &ignore) >= 0) {
                char *p = strprintf("%s/upper", rd);
                if (!p || (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)))
                        return p;
                free(p);
        }
        return strprintf("%s/upper", sdir);
}

/* Whether runtime folder dir (a child of our runtime root) belongs to a state folder that is
 * gone: its HOME_MARK names a path that is not there, or whose link points elsewhere now.  A
 * folder without the mark (an older nook's) is never taken for an orphan. */
static bool run_folder_orphaned(const char *dir) {
        char home[PATH_MAX], real[PATH_MAX];
        _cleanup_free_ char *mark = strprintf("%s/" HOME_MARK, dir);
        _cleanup_close_ int fd = mark ? open(mark, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
        ssize_t k = fd >= 0 ? fd_read_all(fd, home, sizeof(home) - 1) : -1;
        if (k <= 0)
                return false;
        home[k] = 0;
        struct stat st;
        if (stat(home, &st) < 0)
                return errno == ENOENT;
        return !sb_run_root_peek(home, real, sizeof(real)) || !path_same(real, dir);
}

int sb_run_sweep_orphans(nook *n) {
        const char *root;
        nook_error ignore;
        if (sb_run_root(n, &root, &ignore) < 0)
                return 0;
        _cleanup_free_ char *parent = strdup(root);
        char *slash = parent ? strrchr(parent, '/') : NULL;
        if (!slash || slash == parent)
                return 0;
        *slash = 0;
        _cleanup_free_ char *link = strprintf("%s/" RUN_LINK, n->home);
        if (!link || streq(root, link))
                return 0; /* a plain folder in the home: no shared root to look in */
        DIR *d = opendir(parent);
        if (!d)
                return 0;
        int removed = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (strlen(de->d_name) != 16 || strspn(de->d_name, "0123456789abcdef") != 16)
                        continue;
                _cleanup_free_ char *dir = strprintf("%s/%s", parent, de->d_name);
                if (!dir || streq(dir, root) || !private_dir(dir, geteuid()) || !run_folder_orphaned(dir))
                        continue;
                if (path_rm_rf(dir, &ignore) >= 0)
                        removed++;
        }
        closedir(d);
        return removed;
}
