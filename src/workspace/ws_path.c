/* SPDX-License-Identifier: Apache-2.0 */
/* The workspace path rule (see ws.h) and the resolver that applies it on the host.
 *
 * Normalising is pure string work and is fuzzed (tests/fuzz/fuzz_ws_path.c).  Resolution never
 * trusts the string alone: the host directory is shared with the sandbox, which can plant
 * symlinks at any time, so every lookup goes through the kernel with RESOLVE_BENEATH, or through
 * a component walk that opens each name with O_NOFOLLOW and keeps its own stack of directory
 * fds, so ".." inside a symlink target is applied to what we opened, never looked up again. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nook.h"
#include "util/error.h"
#include "util/macro.h"
#include "workspace/ws.h"
#include "workspace/ws_internal.h"

/* The kernel's own limit for symlinks followed in one lookup (MAXSYMLINKS, path_resolution(7)). */
#define WS_MAX_SYMLINKS 40
/* openat2 returns EAGAIN when a rename or mount raced with ".." handling under RESOLVE_BENEATH;
 * the lookup is then simply retried (openat2(2), "EAGAIN"). */
#define WS_OPENAT2_RETRIES 8

int ws_err_refused(nook_error *err, const char *path, size_t len) {
        return nook_err_set(err, NOOK_E_REFUSED, "Refusing a path outside the workspace: '%.*s'",
                (int)(len > 400 ? 400 : len), path);
}

int ws_err_resolve(nook_error *err, int neg_errno, const char *path) {
        return ws_err_resolve_in(err, neg_errno, path, "the workspace");
}

int ws_err_resolve_in(nook_error *err, int neg_errno, const char *path, const char *where) {
        int e = -neg_errno;

        switch (e) {
        case EXDEV:
                /* the path itself passed rule 2: a symlink on its way left the workspace */
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Refusing a path outside the workspace: '%.400s' (a symbolic link on its way is "
                        "absolute or climbs out of %s; links are followed only within it, an absolute one "
                        "never, as the host would read it)",
                        path, where);
        case ELOOP:
                return nook_err_set(err, NOOK_E_INVALID, "Too many levels of symbolic links in '%s'", path);
        case ENOENT:
                return nook_err_set(
                        err, NOOK_E_NOT_FOUND, "No such file or directory in %s: '%s'", where, path);
        case ENOTDIR:
                return nook_err_set(err, NOOK_E_INVALID, "A parent of '%s' is not a directory", path);
        case ENAMETOOLONG:
                return nook_err_set(err, NOOK_E_INVALID, "The path '%s' is too long", path);
        case EAGAIN:
                return nook_err_set(
                        err, NOOK_E_BUSY, "The files changed while resolving '%s'; try again", path);
        case ENOMEM:
                return nook_err_oom(err);
        default:
                return nook_err_errnum(err, NOOK_E_IO, e, "Cannot open '%s' in %s", path, where);
        }
}

static bool seg_is(const char *s, size_t n, const char *what) {
        return n == strlen(what) && memcmp(s, what, n) == 0;
}

/* Rule 2: a ".." segment anywhere is refused on the raw input, before "." and "//" are folded,
 * so "a/./../b" and "a//../b" cannot sneak one past. */
static bool has_dotdot(const char *p, size_t len) {
        size_t i = 0;

        while (i < len) {
                size_t j = i;
                while (j < len && p[j] != '/')
                        j++;
                if (seg_is(p + i, j - i, ".."))
                        return true;
                i = j + 1;
        }
        return false;
}

/* The rule into rel, which holds len + 1 bytes (the result is never longer than the input). */
static int ws_path_normalize_into(const char *path, size_t len, char *rel, nook_error *err) {
        if (!path || len == 0)
                return nook_err_set(err, NOOK_E_INVALID, "The workspace path is empty");
        if (memchr(path, 0, len))
                return nook_err_set(err, NOOK_E_INVALID, "The workspace path contains a NUL byte");
        if (len >= PATH_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "The workspace path is longer than %d bytes", PATH_MAX - 1);
        if (has_dotdot(path, len))
                return ws_err_refused(err, path, len);

        /* Rule 1: in the guest "/workspace/x" is "/x" seen from the mount point; only an absolute
         * path's first real segment can be that prefix ("/workspacefoo" and "workspace/x" are
         * ordinary names). */
        bool absolute = path[0] == '/', first = true;
        size_t o = 0, i = 0;
        while (i < len) {
                size_t j = i;
                while (j < len && path[j] != '/')
                        j++;
                const char *s = path + i;
                size_t n = j - i;
                i = j + 1;
                if (n == 0 || seg_is(s, n, "."))
                        continue;
                if (n > NAME_MAX)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "A name in the workspace path is longer than %d bytes: '%.40s...'", NAME_MAX,
                                s);
                if (first && absolute && seg_is(s, n, "workspace")) {
                        first = false;
                        continue;
                }
                first = false;
                if (o > 0)
                        rel[o++] = '/';
                memcpy(rel + o, s, n);
                o += n;
        }
        rel[o] = 0;

        /* Rule 3: the result is checked again, not trusted because of how it was built. */
        if (rel[0] == '/' || has_dotdot(rel, o))
                return ws_err_refused(err, path, len);
        return 0;
}

int ws_path_normalize_len(const char *path, size_t len, char **ret_rel, nook_error *err) {
        _cleanup_free_ char *rel = malloc(len + 1);
        if (!rel)
                return nook_err_oom(err);
        int r = ws_path_normalize_into(path, len, rel, err);
        if (r < 0)
                return r;
        *ret_rel = TAKE_PTR(rel);
        return 0;
}

int ws_path_normalize(const char *path, char **ret_rel, nook_error *err) {
        return ws_path_normalize_len(path, path ? strlen(path) : 0, ret_rel, err);
}

int ws_path_normalize_buf(const char *path, char ret_rel[static PATH_MAX], nook_error *err) {
        /* strnlen: a path longer than the buffer is refused without reading all of it. */
        size_t len = path ? strnlen(path, PATH_MAX) : 0;
        return ws_path_normalize_into(path, len, ret_rel, err);
}

/* ---- the fallback walk ------------------------------------------------------------------------ */

/* COMPAT(kernel < 5.6): openat2 is missing; remove this walk when the baseline is raised.
 *
 * Decision: symlinks are followed the way RESOLVE_BENEATH follows them, so both resolvers give
 * the same answers (tests run every case through both).  A relative target is spliced in front
 * of the rest of the path; its ".." pops our own fd stack and fails with EXDEV at the root; an
 * absolute target fails with EXDEV, as RESOLVE_BENEATH does.  More than WS_MAX_SYMLINKS links
 * fail with ELOOP.  A magic link (/proc/<pid>/fd/...) cannot be reached: it would need a way out
 * of the root first. */
typedef struct ws_walk {
        const ws *w;
        int *fds; /* directories entered below the root; the root itself is not on the stack */
        size_t n, cap;
        char *buf; /* the remaining path, rewritten when a symlink is spliced in */
        unsigned links;
        mode_t mode; /* for an O_CREAT at the last name */
} ws_walk;

static void ws_walk_done(ws_walk *k) {
        for (size_t i = 0; i < k->n; i++)
                safe_close(k->fds[i]);
        free(k->fds);
        free(k->buf);
}

static int walk_cur(const ws_walk *k) {
        return k->n > 0 ? k->fds[k->n - 1] : k->w->root_fd;
}

static int walk_push(ws_walk *k, int fd) {
        if (k->n == k->cap) {
                size_t ncap = k->cap ? k->cap * 2 : 16;
                int *nf = realloc(k->fds, ncap * sizeof(int));
                if (!nf) {
                        safe_close(fd);
                        return -ENOMEM;
                }
                k->fds = nf;
                k->cap = ncap;
        }
        k->fds[k->n++] = fd;
        return 0;
}

/* name (in walk_cur) is a symlink, or was one a moment ago: read it and replace the remaining
 * path by "<target>/<rest>".  Returns 0, or -ENOTDIR when it turned out not to be a link. */
static int walk_follow(ws_walk *k, const char *name, const char *rest) {
        char target[PATH_MAX];

        ssize_t t = readlinkat(walk_cur(k), name, target, sizeof(target) - 1);
        if (t < 0)
                return errno == EINVAL ? -ENOTDIR : -errno;
        if (++k->links > WS_MAX_SYMLINKS)
                return -ELOOP;
        if (t == 0)
                return -ENOENT;
        if (target[0] == '/' && !k->w->in_root)
                return -EXDEV;
        if (target[0] == '/') { /* RESOLVE_IN_ROOT: an absolute target starts again at the root */
                for (; k->n > 0; k->n--)
                        k->fds[k->n - 1] = safe_close(k->fds[k->n - 1]);
        }
        size_t rl = strlen(rest);
        char *nb = malloc((size_t)t + 1 + rl + 1);
        if (!nb)
                return -ENOMEM;
        memcpy(nb, target, (size_t)t);
        nb[t] = '/';
        memcpy(nb + t + 1, rest, rl + 1);
        free(k->buf);
        k->buf = nb;
        return 0;
}

/* Opens the last name with the caller's flags, never following a symlink by itself.  Returns 1
 * with *ret_fd set, 0 when the name was a symlink that has been spliced in (walk on), or -errno. */
static int walk_last(ws_walk *k, const char *name, int flags, int *ret_fd) {
        int fd = openat(walk_cur(k), name, flags | O_NOFOLLOW | O_CLOEXEC, k->mode);
        if (fd < 0) {
                /* O_NOFOLLOW on a symlink fails with ELOOP, or ENOTDIR when O_DIRECTORY is checked
                 * first; a real ENOTDIR shows up as readlinkat's EINVAL. */
                if (errno != ELOOP && errno != ENOTDIR)
                        return -errno;
                int saved = -errno, r = walk_follow(k, name, "");
                return r == -ENOTDIR ? saved : r;
        }
        if (flags & O_PATH) {
                /* O_PATH|O_NOFOLLOW opens the link itself instead of failing. */
                struct stat st;
                if (fstat(fd, &st) < 0) {
                        int e = -errno;
                        safe_close(fd);
                        return e;
                }
                if (S_ISLNK(st.st_mode)) {
                        safe_close(fd);
                        return walk_follow(k, name, "");
                }
        }
        *ret_fd = fd;
        return 1;
}

static int walk_open_cur(const ws_walk *k, int flags, int *ret_fd) {
        int fd = openat(walk_cur(k), ".", flags | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 1;
}

/* Consumes the first name of k->buf (which starts with one).  Same returns as walk_last. */
static int walk_step(ws_walk *k, int flags, int *ret_fd) {
        char *p = k->buf;
        char *end = strchrnul(p, '/');
        char *rest = end;
        while (*rest == '/')
                rest++;
        bool last = *rest == 0;
        *end = 0;

        if (streq(p, ".") || streq(p, "..")) {
                if (streq(p, "..")) {
                        if (k->n == 0 && !k->w->in_root)
                                return -EXDEV;
                        if (k->n == 0) { /* RESOLVE_IN_ROOT: ".." at the root stays there */
                                memmove(k->buf, rest, strlen(rest) + 1);
                                return last ? walk_open_cur(k, flags, ret_fd) : 0;
                        }
                        k->n--;
                        k->fds[k->n] = safe_close(k->fds[k->n]);
                }
                memmove(k->buf, rest, strlen(rest) + 1);
                return last ? walk_open_cur(k, flags, ret_fd) : 0;
        }
        if (last)
                return walk_last(k, p, flags, ret_fd);

        int fd = openat(walk_cur(k), p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
                int r = walk_push(k, fd);
                if (r < 0)
                        return r;
                memmove(k->buf, rest, strlen(rest) + 1);
                return 0;
        }
        if (errno != ENOTDIR)
                return -errno;
        return walk_follow(k, p, rest);
}

static int ws_walk_beneath_mode(const ws *w, const char *rel, int flags, mode_t mode) {
        _cleanup_(ws_walk_done) ws_walk k = { .w = w, .mode = mode };
        int fd = -1;

        k.buf = strdup(rel);
        if (!k.buf)
                return -ENOMEM;
        for (;;) {
                char *p = k.buf;
                while (*p == '/')
                        p++;
                if (p != k.buf)
                        memmove(k.buf, p, strlen(p) + 1);
                /* "" or a target like "d/" leaves us in a directory: that is the result */
                int r = k.buf[0] ? walk_step(&k, flags, &fd) : walk_open_cur(&k, flags, &fd);
                if (r < 0)
                        return r;
                if (r > 0)
                        return fd;
        }
}

int ws_walk_beneath(const ws *w, const char *rel, int flags) {
        return ws_walk_beneath_mode(w, rel, flags, 0);
}

int ws_openat_beneath_mode(ws *w, const char *rel, int flags, mode_t mode) {
        if (!__atomic_load_n(&w->no_openat2, __ATOMIC_RELAXED)) {
                struct open_how how = {
                        .flags = (uint64_t)(flags | O_CLOEXEC),
                        .mode = (flags & O_CREAT) ? mode : 0, /* openat2 refuses a mode it would not use */
                        .resolve = (w->in_root ? RESOLVE_IN_ROOT : RESOLVE_BENEATH) | RESOLVE_NO_MAGICLINKS,
                };
                for (int i = 0; i < WS_OPENAT2_RETRIES; i++) {
                        int fd =
                                (int)syscall(SYS_openat2, w->root_fd, rel[0] ? rel : ".", &how, sizeof(how));
                        if (fd >= 0)
                                return fd;
                        if (errno == EAGAIN)
                                continue;
                        if (errno != ENOSYS)
                                return -errno;
                        /* COMPAT(kernel < 5.6): remember, so later lookups go straight to the walk. */
                        __atomic_store_n(&w->no_openat2, true, __ATOMIC_RELAXED);
                        break;
                }
                if (!__atomic_load_n(&w->no_openat2, __ATOMIC_RELAXED))
                        return -EAGAIN;
        }
        return ws_walk_beneath_mode(w, rel, flags, mode);
}

int ws_openat_beneath(ws *w, const char *rel, int flags) {
        return ws_openat_beneath_mode(w, rel, flags, 0);
}
