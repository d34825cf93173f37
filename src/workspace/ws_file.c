/* SPDX-License-Identifier: Apache-2.0 */
/* File operations on the workspace, each one: normalise the guest path (ws_path.c), resolve the
 * directory it lives in beneath the root, then act on the last name with an *at() call.
 *
 * Which operations follow a symlink at the last name (one that stays inside; one that leads out
 * is refused): read, open_read, exists, stat, list, mkdir, host_path.  Which act on the link
 * itself: write (the rename replaces the link), remove, rename.
 *
 * Syscalls per operation are counted because the workspace is nook's speed argument (DESIGN.md,
 * "place 200 files ≤ 1.1× plain host writes"): a new file is openat2(parent) + openat(O_TMPFILE)
 * + write + linkat(AT_EMPTY_PATH) + close (+ close of the parent), an existing one is replaced
 * by a linkat to a temporary name + renameat, mkdir -p only after the parent lookup said ENOENT;
 * a read is openat2 (O_NOATIME) + fstat + read + close. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nook.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"
#include "workspace/ws.h"
#include "workspace/ws_internal.h"

#define WS_READ_MAX_DEFAULT ((size_t)1 << 30)
#define WS_TMP_PREFIX ".nook-tmp-"
#define WS_TMP_ATTEMPTS 64
#define WS_COPY_CHUNK ((size_t)128 * 1024)

/* Temp names are "<prefix><pid>-<counter>": the pid keeps processes apart, the atomic counter
 * threads, and O_EXCL plus a retry covers a pid reused after a crash left a temp file behind.
 * glibc no longer caches getpid() (2.25), so we do, and a forked child refreshes it. */
static uint64_t ws_tmp_counter;
static pid_t ws_tmp_pid;
static pthread_once_t ws_tmp_once = PTHREAD_ONCE_INIT;

static void ws_tmp_pid_refresh(void) {
        __atomic_store_n(&ws_tmp_pid, getpid(), __ATOMIC_RELAXED);
}

static bool ws_tmp_proc; /* /proc/self/fd is there: unnamed temporaries can be linked */

static void ws_tmp_init(void) {
        ws_tmp_proc = access("/proc/self/fd", X_OK) == 0;
        ws_tmp_pid_refresh();
        (void)pthread_atfork(NULL, NULL, ws_tmp_pid_refresh);
}

static int ws_root_itself(const char *path, nook_error *err) {
        return nook_err_set(err, NOOK_E_INVALID, "'%s' is the workspace root itself", path);
}

/* A path that ends in '/' names a directory (path_resolution(7)): it is never written as a file,
 * and a file is never read through it. */
static bool ws_names_dir(const char *path) {
        size_t n = strlen(path);
        return n > 0 && path[n - 1] == '/';
}

static int ws_names_dir_error(const char *path, const char *what, nook_error *err) {
        return nook_err_set(err, NOOK_E_INVALID,
                "Cannot %s '%s': a path that ends in '/' names a directory; leave out the trailing '/' to "
                "name a file",
                what, path);
}

/* The path a write names, normalised into rel: never the root itself, never a name that ends in
 * '/' (a directory). */
static int ws_write_rel(const char *path, char rel[static PATH_MAX], nook_error *err) {
        int r = ws_path_normalize_buf(path, rel, err);
        if (r < 0)
                return r;
        if (!rel[0])
                return ws_root_itself(path, err);
        if (ws_names_dir(path))
                return ws_names_dir_error(path, "write", err);
        return 0;
}

static int ws_normalize_nonroot(const char *path, char **ret_rel, nook_error *err) {
        _cleanup_free_ char *rel = NULL;
        int r = ws_path_normalize(path, &rel, err);
        if (r < 0)
                return r;
        if (!rel[0])
                return ws_root_itself(path, err);
        *ret_rel = TAKE_PTR(rel);
        return 0;
}

static int ws_chown_fd(const ws *w, int fd) {
        if (!w->chown)
                return 0;
        /* AT_EMPTY_PATH works on O_PATH fds too (fchown does not). */
        return fchownat(fd, "", w->owner_uid, w->owner_gid, AT_EMPTY_PATH) < 0 ? -errno : 0;
}

/* The same for a file we opened for writing: fchown takes no path, not even an empty one. */
static int ws_chown_file(const ws *w, int fd) {
        if (!w->chown)
                return 0;
        return fchown(fd, w->owner_uid, w->owner_gid) < 0 ? -errno : 0;
}

/* mkdir -p of rel (normalised, not "") beneath the root; returns an O_PATH fd on the last
 * directory or -errno.  Existing prefixes are opened with O_NOFOLLOW; a symlink among them is
 * resolved under the rule from the root (so it may lead elsewhere inside, never out), and no
 * directory is created through a link. */
static int ws_mkdir_rel(ws *w, char *rel, mode_t mode) {
        int fd = ws_openat_beneath(w, rel, O_PATH | O_DIRECTORY);
        if (fd != -ENOENT)
                return fd;

        _cleanup_close_ int cur = -1;
        for (char *p = rel;;) {
                char *end = strchrnul(p, '/');
                char saved = *end;
                int dfd = cur >= 0 ? cur : w->root_fd;

                *end = 0;
                fd = openat(dfd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 && errno == ENOENT) {
                        bool made = mkdirat(dfd, p, mode) == 0;
                        if (!made && errno != EEXIST) {
                                *end = saved;
                                return -errno;
                        }
                        fd = openat(dfd, p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd >= 0 && made) {
                                int r = ws_chown_fd(w, fd);
                                if (r < 0) {
                                        safe_close(fd);
                                        *end = saved;
                                        return r;
                                }
                        }
                }
                if (fd < 0 && errno == ENOTDIR)
                        fd = ws_openat_beneath(w, rel, O_PATH | O_DIRECTORY); /* rel ends at p */
                else if (fd < 0)
                        fd = -errno;
                *end = saved;
                if (fd < 0)
                        return fd;
                safe_close(cur);
                cur = fd;
                if (!saved)
                        return TAKE_FD(cur);
                p = end + 1;
        }
}

/* The directory that holds a path's last name. */
typedef struct ws_parent_dir {
        int fd; /* the directory: owned, or the root's fd */
        int owned; /* what ws_parent_dir_done closes; -1 when fd is the root's */
        const char *base; /* the last name, inside the caller's rel */
} ws_parent_dir;

static void ws_parent_dir_done(ws_parent_dir *d) {
        d->owned = safe_close(d->owned);
}

#define WS_PARENT_DIR_NULL                                                                                  \
        { .fd = -1, .owned = -1 }

/* Resolves the directory that holds rel's last name; rel is split in place. */
static int ws_parent(ws *w, char *rel, const char *path, bool create, ws_parent_dir *ret, nook_error *err) {
        char *slash = strrchr(rel, '/');
        if (!slash) {
                *ret = (ws_parent_dir){ .fd = w->root_fd, .owned = -1, .base = rel };
                return 0;
        }
        *slash = 0;
        /* The common case first: the parent exists, one openat2.  mkdir -p only on ENOENT. */
        int fd = ws_openat_beneath(w, rel, O_PATH | O_DIRECTORY);
        if (fd == -ENOENT && create)
                fd = ws_mkdir_rel(w, rel, 0755);
        if (fd < 0)
                return ws_err_resolve(err, fd, path);
        *ret = (ws_parent_dir){ .fd = fd, .owned = fd, .base = slash + 1 };
        return 0;
}

static void ws_tmp_name(char *ret_name, size_t name_size) {
        uint64_t c = __atomic_fetch_add(&ws_tmp_counter, 1, __ATOMIC_RELAXED);
        (void)snprintf(ret_name, name_size, WS_TMP_PREFIX "%d-%" PRIu64,
                (int)__atomic_load_n(&ws_tmp_pid, __ATOMIC_RELAXED), c);
}

/* An unnamed file (O_TMPFILE) in dfd: a write killed half-way leaves nothing behind, where a
 * named temporary would stay in the workspace.  -1 where the filesystem has no O_TMPFILE or
 * /proc is not mounted (ws_tmp_link names the file through /proc/self/fd). */
static int ws_tmp_unnamed(ws *w, int dfd, mode_t mode) {
        if (!ws_tmp_proc)
                return -1;
        int fd = openat(dfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
        if (fd >= 0 && ws_chown_file(w, fd) < 0)
                fd = safe_close(fd);
        return fd;
}

static bool ws_flink_refused; /* the kernel refused linkat(AT_EMPTY_PATH) once: /proc from then on */

/* Gives the unnamed file fd the name name in dfd (linkat fails with EEXIST if it is taken).
 * linkat(fd, "", AT_EMPTY_PATH) first: since Linux 6.10 ("vfs: relax linkat() AT_EMPTY_PATH -
 * aka flink() - requirements") a caller may link a file it opened itself without
 * CAP_DAC_READ_SEARCH, which saves the lookup of /proc/self/fd/N (about a tenth of a 1 KiB
 * write).  COMPAT(kernel < 6.10): without the capability the kernel says ENOENT, and the file is
 * linked through /proc.  The component-walk mode (a kernel without openat2, or
 * NOOK_TEST_NO_OPENAT2=1) always takes /proc, so the tests cover both ways. */
static int ws_tmp_link(const ws *w, int fd, int dfd, const char *name) {
        bool flink = !__atomic_load_n(&w->no_openat2, __ATOMIC_RELAXED) &&
                !__atomic_load_n(&ws_flink_refused, __ATOMIC_RELAXED);
        if (flink && linkat(fd, "", dfd, name, AT_EMPTY_PATH) == 0)
                return 0;
        if (flink && errno != ENOENT && errno != EPERM)
                return -errno;
        char p[64];
        (void)snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
        if (linkat(AT_FDCWD, p, dfd, name, AT_SYMLINK_FOLLOW) < 0)
                return -errno;
        if (flink)
                __atomic_store_n(&ws_flink_refused, true, __ATOMIC_RELAXED);
        return 0;
}

/* The temporary a write goes to: unnamed (*ret_name "") where it can be, else named. */
static int ws_tmp_create(
        ws *w, int dfd, mode_t mode, char *ret_name, size_t name_size, int *ret_fd, nook_error *err) {
        (void)pthread_once(&ws_tmp_once, ws_tmp_init);
        int ufd = ws_tmp_unnamed(w, dfd, mode);
        if (ufd >= 0) {
                ret_name[0] = 0;
                *ret_fd = ufd;
                return 0;
        }
        for (int i = 0; i < WS_TMP_ATTEMPTS; i++) {
                ws_tmp_name(ret_name, name_size);
                int fd = openat(dfd, ret_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
                if (fd < 0 && errno == EEXIST)
                        continue;
                if (fd < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot create a temporary file in the workspace");
                int r = ws_chown_file(w, fd);
                if (r < 0) {
                        safe_close(fd);
                        (void)unlinkat(dfd, ret_name, 0);
                        return nook_err_errnum(err, NOOK_E_IO, r, "Cannot hand a new file to uid %u",
                                (unsigned)w->owner_uid);
                }
                *ret_fd = fd;
                return 0;
        }
        return nook_err_set(err, NOOK_E_BUSY, "Cannot find a free temporary name in the workspace");
}

static int ws_copy_fd(int out, int in) {
        _cleanup_free_ char *buf = malloc(WS_COPY_CHUNK);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n = read(in, buf, WS_COPY_CHUNK);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                int r = fd_write_all(out, buf, (size_t)n);
                if (r < 0)
                        return r;
        }
}

/* Puts a written unnamed file in place: a new name is linked directly (nothing else ever shows
 * up); an existing one is replaced through a named temporary (tmp, for the rename that follows),
 * which a kill can leave only between these two calls. */
static int ws_tmp_place(const ws *w, int fd, int dfd, const char *base, char *tmp, size_t tmp_size) {
        int r = ws_tmp_link(w, fd, dfd, base);
        if (r != -EEXIST)
                return r;
        for (int i = 0; i < WS_TMP_ATTEMPTS; i++) {
                ws_tmp_name(tmp, tmp_size);
                r = ws_tmp_link(w, fd, dfd, tmp);
                if (r != -EEXIST)
                        break;
        }
        if (r < 0)
                tmp[0] = 0;
        return r;
}

/* Atomic replace: a reader sees the old file or the new one, never half of one (no fsync: this
 * is about concurrent readers, not power loss).  renameat over an existing symlink replaces the
 * link; nothing is ever written through it.  mode 0: a new file is 0644, a replaced one keeps
 * its permission bits. */
static int ws_write_common(
        ws *w, const char *path, const void *data, size_t len, int src_fd, mode_t mode, nook_error *err) {
        _cleanup_(ws_parent_dir_done) ws_parent_dir d = WS_PARENT_DIR_NULL;
        char rel[PATH_MAX], tmp[64];
        int tfd = -1, r;

        r = ws_write_rel(path, rel, err);
        if (r < 0)
                return r;
        r = ws_parent(w, rel, path, /* create= */ true, &d, err);
        if (r < 0)
                return r;
        r = ws_tmp_create(w, d.fd, (mode & 07777) ? (mode & 07777) : 0644, tmp, sizeof(tmp), &tfd, err);
        if (r < 0)
                return nook_err_wrap(err, "writing '%s'", path);

        r = src_fd >= 0 ? ws_copy_fd(tfd, src_fd) : fd_write_all(tfd, data, len);
        if (r == 0 && !tmp[0])
                r = ws_tmp_place(w, tfd, d.fd, d.base, tmp, sizeof(tmp));
        /* replacing a file (a temporary name is then set): its permission bits stay, as with a
         * write into it (an agent rewriting a script keeps it executable); a new file, or a
         * symlink replaced, gets the mode asked for.  Set-id bits never carry over. */
        struct stat old;
        if (r == 0 && tmp[0] && !(mode & 07777) && fstatat(d.fd, d.base, &old, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISREG(old.st_mode) && (old.st_mode & 0777) != 0644 && fchmod(tfd, old.st_mode & 0777) < 0)
                r = -errno;
        if (close(tfd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && tmp[0] && renameat(d.fd, tmp, d.fd, d.base) < 0)
                r = -errno;
        if (r == 0)
                return 0;
        if (tmp[0])
                (void)unlinkat(d.fd, tmp, 0);
        if (r == -EISDIR || r == -ENOTEMPTY || r == -EEXIST)
                return nook_err_set(err, NOOK_E_INVALID, "Cannot write '%s': it is a directory", path);
        if (r == -ENOMEM)
                return nook_err_oom(err);
        return nook_err_errnum(err, NOOK_E_IO, r, "Cannot write '%s' in the workspace", path);
}

static const char *ws_special_kind(mode_t m) {
        if (S_ISFIFO(m))
                return "a FIFO";
        if (S_ISCHR(m) || S_ISBLK(m))
                return "a device";
        if (S_ISSOCK(m))
                return "a socket";
        return "a special file";
}

#define WS_IN_PLACE_ATTEMPTS 8

static int ws_in_place_refuse(const char *path, const char *what, nook_error *err) {
        return nook_err_set(err, NOOK_E_INVALID,
                "Cannot write '%s' in place: it is %s; only a regular file is written in place", path, what);
}

/* The file an in-place write goes to: created (O_EXCL, *ret_new) or opened as it is, following
 * a symlink that stays inside.  An existing file must be regular (O_NONBLOCK: a FIFO planted by
 * the guest never blocks the open); it is truncated, keeps its inode, owner and permission bits
 * (mode, when asked for, replaces them; set-id bits are dropped as on the atomic path). */
static int ws_in_place_open(
        ws *w, char *rel, const char *path, mode_t mode, bool *ret_new, int *ret_fd, nook_error *err) {
        bool parents_made = false;
        mode_t create_mode = mode ? mode : 0644;

        for (int i = 0; i < WS_IN_PLACE_ATTEMPTS; i++) {
                int fd = ws_openat_beneath_mode(w, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOCTTY, create_mode);
                if (fd >= 0) {
                        int r = ws_chown_file(w, fd);
                        if (r < 0) {
                                safe_close(fd);
                                return nook_err_errnum(err, NOOK_E_IO, r, "Cannot hand '%s' to uid %u", path,
                                        (unsigned)w->owner_uid);
                        }
                        *ret_new = true;
                        *ret_fd = fd;
                        return 0;
                }
                if (fd == -ENOENT && !parents_made) {
                        /* The common case costs one openat2; mkdir -p only now. */
                        _cleanup_(ws_parent_dir_done) ws_parent_dir d = WS_PARENT_DIR_NULL;
                        char parent[PATH_MAX];
                        memcpy(parent, rel, strlen(rel) + 1);
                        int r = ws_parent(w, parent, path, /* create= */ true, &d, err);
                        if (r < 0)
                                return r;
                        parents_made = true;
                        continue;
                }
                if (fd == -EISDIR)
                        return ws_in_place_refuse(path, "a directory", err);
                if (fd != -EEXIST)
                        return ws_err_resolve(err, fd, path);

                fd = ws_openat_beneath(w, rel, O_WRONLY | O_NONBLOCK | O_NOCTTY);
                if (fd == -ENOENT)
                        continue; /* removed in between, or a symlink to nothing: create again */
                if (fd == -EISDIR)
                        return ws_in_place_refuse(path, "a directory", err);
                if (fd == -ENXIO)
                        return ws_in_place_refuse(path, "a FIFO", err);
                if (fd == -ETXTBSY)
                        return nook_err_set(err, NOOK_E_BUSY,
                                "Cannot write '%s' in place: a program is running from it; write it without "
                                "in place to replace it",
                                path);
                if (fd < 0)
                        return ws_err_resolve(err, fd, path);
                _cleanup_close_ int ofd = fd;
                struct stat st;
                if (fstat(ofd, &st) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot stat '%s'", path);
                if (!S_ISREG(st.st_mode))
                        return ws_in_place_refuse(path, ws_special_kind(st.st_mode), err);
                mode_t keep = mode ? mode : (st.st_mode & 0777);
                if ((st.st_mode & 07777) != keep && fchmod(ofd, keep) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot set the mode of '%s'", path);
                if (ftruncate(ofd, 0) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot truncate '%s'", path);
                *ret_new = false;
                *ret_fd = TAKE_FD(ofd);
                return 0;
        }
        return nook_err_set(err, NOOK_E_BUSY,
                "Cannot write '%s' in place: it is a symbolic link to a file that does not exist, or it kept "
                "changing; write it without in place to replace it",
                path);
}

/* A new file an in-place write failed to fill goes again, if the name still holds it. */
static void ws_in_place_undo(ws *w, char *rel, int fd) {
        _cleanup_(ws_parent_dir_done) ws_parent_dir d = WS_PARENT_DIR_NULL;
        nook_error ignored;
        struct stat ours, now;
        if (fstat(fd, &ours) < 0 || ws_parent(w, rel, rel, /* create= */ false, &d, &ignored) < 0)
                return;
        if (fstatat(d.fd, d.base, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == ours.st_dev &&
                now.st_ino == ours.st_ino)
                (void)unlinkat(d.fd, d.base, 0);
}

/* In place: the file itself is written, as a host program's open(O_CREAT|O_TRUNC) + write does.
 * One openat2 for a new file (the DESIGN.md budget's case); an existing file keeps its inode,
 * so its hard links, owner and extended attributes, and a program holding it open sees the new
 * bytes.  Not atomic: a reader may see part of the file, and a writer killed part way leaves
 * part of it (a failed write of a new file removes it). */
static int ws_write_in_place(
        ws *w, const char *path, const void *data, size_t len, int src_fd, mode_t mode, nook_error *err) {
        char rel[PATH_MAX];
        int r = ws_write_rel(path, rel, err);
        if (r < 0)
                return r;

        _cleanup_close_ int fd = -1;
        bool made = false;
        r = ws_in_place_open(w, rel, path, mode & 0777, &made, &fd, err);
        if (r < 0)
                return r;
        r = src_fd >= 0 ? ws_copy_fd(fd, src_fd) : fd_write_all(fd, data, len);
        if (r < 0 && made)
                ws_in_place_undo(w, rel, fd);
        if (close(TAKE_FD(fd)) < 0 && r == 0)
                r = -errno;
        if (r == -ENOMEM)
                return nook_err_oom(err);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, r, "Cannot write '%s' in the workspace", path);
        return 0;
}

int ws_write(ws *w, const char *path, const void *data, size_t len, mode_t mode, unsigned flags,
        nook_error *err) {
        if (!data && len > 0)
                return nook_err_set(err, NOOK_E_INVALID, "No data to write to '%s'", path);
        if (flags & WS_WRITE_IN_PLACE)
                return ws_write_in_place(w, path, data, len, -1, mode, err);
        return ws_write_common(w, path, data, len, -1, mode, err);
}

int ws_write_fd(ws *w, const char *path, int fd, mode_t mode, unsigned flags, nook_error *err) {
        if (fd < 0)
                return nook_err_set(err, NOOK_E_INVALID, "No file descriptor to copy to '%s'", path);
        if (flags & WS_WRITE_IN_PLACE)
                return ws_write_in_place(w, path, NULL, 0, fd, mode, err);
        return ws_write_common(w, path, NULL, 0, fd, mode, err);
}

/* fstat(2) of an open file.  glibc (2.33+) turns fstat into newfstatat(fd, "", AT_EMPTY_PATH),
 * which checks the empty path it is given before it gets to the file: the plain fstat syscall,
 * on x86_64, whose kernel struct stat is glibc's, is 0.05 µs (a seventh of the difference to a plain
 * read) cheaper per read (bench/README.md, "workspace write and read, round 2").  Elsewhere the
 * layouts differ (i386, arm) or there is no fstat syscall (aarch64, riscv64): glibc's call. */
static int ws_fstat(int fd, struct stat *ret) {
#if defined(__x86_64__) && !defined(__ILP32__) && defined(SYS_fstat)
        return (int)syscall(SYS_fstat, fd, ret);
#else
        return fstat(fd, ret);
#endif
}

/* Opens a regular file for reading.  O_NONBLOCK keeps a FIFO planted by the sandbox from
 * blocking the open (fifo(7)); O_NOCTTY keeps a tty from becoming ours.  Anything but a regular
 * file is refused after fstat, before a single byte is read.
 *
 * Decision: nook's reads leave a file's access time as it was (O_NOATIME, as backup tools read).
 * The workspace's times tell what the sandbox's programs did, and an orchestrator reading results
 * back is not one of them; under relatime the first read after a write would otherwise stamp the
 * inode (a journal write on a disk filesystem: 0.9 µs of a 4.4 µs read on ext4, bench/README.md).
 * The kernel allows O_NOATIME only to a file's owner or a holder of CAP_FOWNER: EPERM for a file
 * someone else owns (a rootless caller reading what a guest user mapped to a subordinate id
 * wrote) is retried without it. */
static int ws_open_regular(ws *w, const char *path, int *ret_fd, struct stat *ret_st, nook_error *err) {
        char rel[PATH_MAX];
        int r = ws_path_normalize_buf(path, rel, err);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = ws_openat_beneath(w, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOATIME);
        if (fd == -EPERM)
                fd = ws_openat_beneath(w, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return ws_err_resolve(err, TAKE_FD(fd), path);
        if (ws_fstat(fd, ret_st) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat '%s'", path);
        if (S_ISDIR(ret_st->st_mode))
                return nook_err_set(err, NOOK_E_INVALID, "'%s' is a directory, not a file", path);
        if (ws_names_dir(path))
                return ws_names_dir_error(path, "read", err);
        if (!S_ISREG(ret_st->st_mode))
                return nook_err_set(err, NOOK_E_INVALID,
                        "'%s' is not a regular file (%s); refusing to read it", path,
                        ws_special_kind(ret_st->st_mode));
        /* cppcheck-suppress unreadVariable ; TAKE_FD clears fd for its cleanup attribute */
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int ws_open_read(ws *w, const char *path, int *ret_fd, nook_error *err) {
        _cleanup_close_ int fd = -1;
        struct stat st;
        int r = ws_open_regular(w, path, &fd, &st, err);
        if (r < 0)
                return r;
        /* The fd leaves us: give the caller ordinary blocking semantics. */
        r = fd_set_nonblock(fd, false);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, r, "Cannot open '%s'", path);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* O_NONBLOCK stays set here: it has no effect on regular files (open(2)), and EAGAIN from an
 * odd filesystem clears it and retries. */
static int ws_read_fd(int fd, const struct stat *st, size_t max, const char *path, char **ret,
        size_t *ret_len, nook_error *err) {
        if ((uint64_t)st->st_size > max)
                return nook_err_set(
                        err, NOOK_E_INVALID, "'%s' is larger than the limit of %zu bytes", path, max);
        size_t cap = (size_t)st->st_size + 1, len = 0; /* +1: EOF is seen without growing */
        _cleanup_free_ char *buf = malloc(cap + 1);
        if (!buf)
                return nook_err_oom(err);
        for (;;) {
                if (len == cap) {
                        if (len > max)
                                return nook_err_set(err, NOOK_E_INVALID,
                                        "'%s' is larger than the limit of %zu bytes", path, max);
                        char *nb = realloc(buf, cap * 2 + 1);
                        if (!nb)
                                return nook_err_oom(err);
                        buf = nb;
                        cap *= 2;
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN && fd_set_nonblock(fd, false) == 0)
                        continue;
                if (n < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read '%s'", path);
                if (n == 0)
                        break;
                len += (size_t)n;
                /* We asked for one byte more than fstat reported and got exactly the reported
                 * size: that is EOF for a regular file (read(2) returns less than asked only at
                 * the end), which saves the read that would return 0.  A file that shrank or
                 * grew meanwhile is read on to a real EOF. */
                if (len == (size_t)st->st_size && len < cap)
                        break;
        }
        if (len > max)
                return nook_err_set(
                        err, NOOK_E_INVALID, "'%s' is larger than the limit of %zu bytes", path, max);
        buf[len] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

int ws_read(ws *w, const char *path, size_t max, void **ret_data, size_t *ret_len, nook_error *err) {
        _cleanup_close_ int fd = -1;
        struct stat st;
        char *data = NULL;
        size_t len = 0;

        int r = ws_open_regular(w, path, &fd, &st, err);
        if (r < 0)
                return r;
        r = ws_read_fd(fd, &st, max ? max : WS_READ_MAX_DEFAULT, path, &data, &len, err);
        if (r < 0)
                return r;
        *ret_data = data;
        if (ret_len)
                *ret_len = len;
        return 0;
}

int ws_exists(ws *w, const char *path, nook_error *err) {
        _cleanup_free_ char *rel = NULL;
        int r = ws_path_normalize(path, &rel, err);
        if (r < 0)
                return r;
        /* O_PATH: no permission to read is needed, and nothing is read. */
        int fd = ws_openat_beneath(w, rel, O_PATH);
        if (fd >= 0) {
                safe_close(fd);
                return 1;
        }
        if (fd == -ENOENT || fd == -ENOTDIR)
                return 0;
        return ws_err_resolve(err, fd, path);
}

static nook_file_type ws_file_type(mode_t m) {
        return S_ISREG(m)    ? NOOK_FILE_REGULAR
                : S_ISDIR(m) ? NOOK_FILE_DIRECTORY
                : S_ISLNK(m) ? NOOK_FILE_SYMLINK
                             : NOOK_FILE_OTHER;
}

int ws_stat(ws *w, const char *path, nook_stat *ret, nook_error *err) {
        _cleanup_free_ char *rel = NULL;
        struct stat st;

        int r = ws_path_normalize(path, &rel, err);
        if (r < 0)
                return r;
        _cleanup_close_ int fd = ws_openat_beneath(w, rel, O_PATH);
        if (fd < 0)
                return ws_err_resolve(err, TAKE_FD(fd), path);
        if (fstat(fd, &st) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat '%s'", path);
        *ret = (nook_stat){
                .type = ws_file_type(st.st_mode),
                .size = (uint64_t)st.st_size,
                .mode = st.st_mode & 07777,
                .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
        };
        return 0;
}

int ws_open_path(ws *w, const char *path, int flags, int *ret_fd, nook_error *err) {
        _cleanup_free_ char *rel = NULL;
        int r = ws_path_normalize(path, &rel, err);
        if (r < 0)
                return r;
        int fd = ws_openat_beneath(w, rel, flags);
        if (fd < 0)
                return ws_err_resolve_in(
                        err, fd, path, w->in_root ? "the sandbox's root filesystem" : "the workspace");
        *ret_fd = fd;
        return 0;
}

int ws_mkdir_p(ws *w, const char *path, mode_t mode, nook_error *err) {
        _cleanup_free_ char *rel = NULL;
        int r = ws_path_normalize(path, &rel, err);
        if (r < 0)
                return r;
        if (!rel[0])
                return 0; /* the root exists by construction */
        int fd = ws_mkdir_rel(w, rel, (mode & 07777) ? (mode & 07777) : 0755);
        if (fd == -ENOTDIR || fd == -EEXIST)
                return nook_err_set(err, NOOK_E_INVALID,
                        "'%s' or one of its parents exists and is not a directory", path);
        if (fd < 0)
                return ws_err_resolve(err, fd, path);
        safe_close(fd);
        return 0;
}

void ws_dirents_free(nook_dirent *d, size_t n) {
        if (!d)
                return;
        for (size_t i = 0; i < n; i++)
                free(d[i].name);
        free(d);
}

static int dirent_cmp(const void *a, const void *b) {
        return strcmp(((const nook_dirent *)a)->name, ((const nook_dirent *)b)->name);
}

static void closedirp(DIR **d) {
        if (*d)
                (void)closedir(*d);
}

typedef struct dirent_vec {
        nook_dirent *v;
        size_t n, cap;
} dirent_vec;

static void dirent_vec_done(dirent_vec *v) {
        ws_dirents_free(v->v, v->n);
}

static int dirent_vec_add(dirent_vec *v, int dfd, const char *name) {
        struct stat st;

        /* The entry may vanish between readdir and fstatat: the sandbox is live. */
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (v->n == v->cap) {
                size_t ncap = v->cap ? v->cap * 2 : 32;
                nook_dirent *nv = realloc(v->v, ncap * sizeof(*nv));
                if (!nv)
                        return -ENOMEM;
                v->v = nv;
                v->cap = ncap;
        }
        char *copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        v->v[v->n++] = (nook_dirent){
                .name = copy, .type = ws_file_type(st.st_mode), .size = (uint64_t)st.st_size
        };
        return 0;
}

int ws_list(ws *w, const char *path, nook_dirent **ret, size_t *ret_n, nook_error *err) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_(dirent_vec_done) dirent_vec v = {};
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;

        int r = ws_path_normalize(path, &rel, err);
        if (r < 0)
                return r;
        int fd = ws_openat_beneath(w, rel, O_RDONLY | O_DIRECTORY);
        if (fd == -ENOTDIR)
                return nook_err_set(err, NOOK_E_INVALID, "'%s' is not a directory", path);
        if (fd < 0)
                return ws_err_resolve(err, fd, path);
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return nook_err_errno(err, NOOK_E_IO, "Cannot list '%s'", path);
        }
        while ((errno = 0, de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                r = dirent_vec_add(&v, dirfd(d), de->d_name);
                if (r < 0)
                        return r == -ENOMEM ? nook_err_oom(err)
                                            : nook_err_errnum(err, NOOK_E_IO, r, "Cannot list '%s'", path);
        }
        if (errno != 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot list '%s'", path);
        if (v.n > 1)
                qsort(v.v, v.n, sizeof(*v.v), dirent_cmp);
        *ret = TAKE_PTR(v.v);
        *ret_n = v.n;
        v.n = 0;
        return 0;
}

int ws_remove(ws *w, const char *path, nook_error *err) {
        _cleanup_free_ char *rel = NULL;
        _cleanup_(ws_parent_dir_done) ws_parent_dir d = WS_PARENT_DIR_NULL;
        struct stat st;

        int r = ws_path_normalize(path, &rel, err);
        if (r < 0)
                return r;
        if (!rel[0])
                return nook_err_set(
                        err, NOOK_E_INVALID, "Refusing to remove the workspace root ('%s')", path);
        r = ws_parent(w, rel, path, /* create= */ false, &d, err);
        if (r < 0)
                return r;
        if (fstatat(d.fd, d.base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return ws_err_resolve(err, -errno, path);
        r = path_rm_rf_at(d.fd, d.base, err);
        if (r < 0)
                return nook_err_wrap(err, "removing '%s' from the workspace", path);
        return 0;
}

int ws_rename(ws *w, const char *from, const char *to, nook_error *err) {
        _cleanup_free_ char *rfrom = NULL, *rto = NULL;
        _cleanup_(ws_parent_dir_done) ws_parent_dir df = WS_PARENT_DIR_NULL, dt = WS_PARENT_DIR_NULL;
        struct stat st;

        int r = ws_normalize_nonroot(from, &rfrom, err);
        if (r < 0)
                return r;
        r = ws_normalize_nonroot(to, &rto, err);
        if (r < 0)
                return r;
        r = ws_parent(w, rfrom, from, /* create= */ false, &df, err);
        if (r < 0)
                return r;
        /* Checked before the destination's parents are made, so a failed rename leaves nothing. */
        if (fstatat(df.fd, df.base, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return ws_err_resolve(err, -errno, from);
        r = ws_parent(w, rto, to, /* create= */ true, &dt, err);
        if (r < 0)
                return r;
        if (renameat(df.fd, df.base, dt.fd, dt.base) < 0) {
                if (errno == ENOENT)
                        return ws_err_resolve(err, -errno, from);
                return nook_err_errno(err,
                        errno == EISDIR || errno == ENOTDIR || errno == ENOTEMPTY || errno == EEXIST ||
                                        errno == EINVAL
                                ? NOOK_E_INVALID
                                : NOOK_E_IO,
                        "Cannot rename '%s' to '%s'", from, to);
        }
        return 0;
}

/* The path is only as good as the moment it was checked: the sandbox can swap a name for a
 * symlink right after.  Callers that open it again on the host should prefer the ws_* calls. */
int ws_host_path(ws *w, const char *path, char **ret, nook_error *err) {
        _cleanup_free_ char *rel = NULL;
        int r = ws_path_normalize(path, &rel, err);
        if (r < 0)
                return r;
        /* The full path is resolved, not just its parent: a dangling link "x -> /etc/y" must not
         * come back as "<root>/x", which a host writer would follow out. */
        int fd = ws_openat_beneath(w, rel, O_PATH);
        char *slash = strrchr(rel, '/');
        if (fd == -ENOENT && slash) { /* a new name: its parent must exist and resolve inside */
                *slash = 0;
                fd = ws_openat_beneath(w, rel, O_PATH | O_DIRECTORY);
                *slash = '/';
        } else if (fd == -ENOENT)
                fd = INT_MAX; /* a new name right under the root */
        if (fd < 0)
                return ws_err_resolve(err, fd, path);
        if (fd != INT_MAX)
                safe_close(fd);
        char *p = rel[0] ? strprintf("%s/%s", w->root, rel) : strdup(w->root);
        if (!p)
                return nook_err_oom(err);
        if (strlen(p) >= PATH_MAX) {
                free(p);
                return nook_err_set(err, NOOK_E_INVALID, "The host path of '%s' is too long", path);
        }
        *ret = p;
        return 0;
}
