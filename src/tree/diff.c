/* SPDX-License-Identifier: Apache-2.0 */
/* A tree against its baseline manifest (rules in diff.h), and its JSON form. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "nook.h"
#include "tree/diff.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/str.h"

#define PATCH_MAX ((size_t)16 << 20)

extern char **environ;

static const char *const kind_names[_DIFF_KIND_MAX] = {
        [DIFF_ADDED] = "added",
        [DIFF_DELETED] = "deleted",
        [DIFF_MODIFIED] = "modified",
        [DIFF_TYPE] = "type",
        [DIFF_MODE] = "mode",
};

const char *diff_kind_to_string(diff_kind k) {
        if ((int)k < 0 || k >= _DIFF_KIND_MAX)
                return NULL;
        return kind_names[k];
}

diff_result *diff_result_free(diff_result *d) {
        if (!d)
                return NULL;
        manifest_free(d->base);
        manifest_free(d->cur);
        free(d->c);
        free(d);
        return NULL;
}

bool mf_entry_same(const mf_entry *a, const mf_entry *b) {
        if (!a || !b)
                return a == b;
        if (a->type != b->type || a->mode != b->mode)
                return false;
        switch (a->type) {
        case MF_TYPE_FILE:
                return a->has_hash && b->has_hash && memcmp(a->hash, b->hash, MF_HASH_LEN) == 0;
        case MF_TYPE_SYMLINK:
                return a->target && b->target && streq(a->target, b->target);
        case MF_TYPE_DIR:
        case MF_TYPE_OTHER:
                return true;
        case _MF_TYPE_MAX:
        case _MF_TYPE_INVALID:
        default:
                return false;
        }
}

int mf_entry_hash(int dirfd, mf_entry *e, nook_error *err) {
        if (e->type != MF_TYPE_FILE || e->has_hash)
                return 0;
        _cleanup_close_ int fd = mf_open_beneath(dirfd, e->path, O_RDONLY | O_NONBLOCK);
        struct stat st;
        if (fd == -EACCES || fd == -ENOENT || fd == -ELOOP || fd == -ENOTDIR)
                return 0; /* unreadable or gone meanwhile: no hash, so never "the same" */
        if (fd < 0)
                return nook_err_errnum(err, NOOK_E_IO, -fd, "Cannot open '%s'", e->path);
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return 0;
        int r = mf_hash_fd(fd, e->hash, err);
        if (r < 0)
                return nook_err_wrap(err, "hashing '%s'", e->path);
        e->has_hash = true;
        return 0;
}

/* Whether the file cur (stat only) has the content base recorded. */
static int file_same_content(int dirfd, const mf_entry *base, mf_entry *cur, bool *ret, nook_error *err) {
        if (base->size == cur->size && base->mtime_ns == cur->mtime_ns && base->ctime_ns == cur->ctime_ns &&
                base->ino == cur->ino) {
                *ret = true;
                return 0;
        }
        if (base->size != cur->size || !base->has_hash) {
                *ret = false;
                return 0;
        }
        int r = mf_entry_hash(dirfd, cur, err);
        if (r < 0)
                return r;
        *ret = cur->has_hash && memcmp(cur->hash, base->hash, MF_HASH_LEN) == 0;
        return 0;
}

/* The change of one path present on both sides, or -1 (as *ret_kind) for none. */
static int compare_entry(int dirfd, const mf_entry *b, mf_entry *c, int *ret_kind, nook_error *err) {
        bool same = true;
        int r;
        if (b->type != c->type) {
                *ret_kind = DIFF_TYPE;
                return 0;
        }
        if (b->type == MF_TYPE_FILE) {
                if ((r = file_same_content(dirfd, b, c, &same, err)) < 0)
                        return r;
        } else if (b->type == MF_TYPE_SYMLINK)
                same = b->target && c->target && streq(b->target, c->target);
        if (!same)
                *ret_kind = DIFF_MODIFIED;
        else
                *ret_kind = b->mode != c->mode ? DIFF_MODE : -1;
        return 0;
}

static int push_change(
        diff_result *d, diff_kind k, const mf_entry *o, const mf_entry *c, size_t *cap, nook_error *err) {
        if (d->n == *cap) {
                size_t ncap = *cap ? *cap * 2 : 32;
                diff_change *nc = reallocarray(d->c, ncap, sizeof(*nc));
                if (!nc)
                        return nook_err_oom(err);
                d->c = nc;
                *cap = ncap;
        }
        d->c[d->n++] = (diff_change){ .kind = k, .old = o, .cur = c };
        return 0;
}

int diff_compute(int dirfd, manifest *base, diff_result **ret, nook_error *err) {
        _cleanup_(diff_result_freep) diff_result *d = calloc(1, sizeof(*d));
        size_t cap = 0, i = 0, j = 0;
        int r;
        if (!d) {
                manifest_free(base);
                return nook_err_oom(err);
        }
        d->base = base;
        if ((r = manifest_capture(dirfd, /* hash= */ false, 0, &d->cur, err)) < 0)
                return r;
        /* what is in it would read as deleted, and what was added there would not show */
        if (d->cur->unreadable)
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Cannot read the directory '%s': the changes in it cannot be seen (they would read "
                        "as deletions); make it readable again inside the sandbox (chmod u+rx)",
                        d->cur->unreadable);
        /* a merge-join of two lists sorted by strcmp */
        const manifest *b = d->base;
        manifest *c = d->cur;
        while (i < b->n || j < c->n) {
                int cmp = i == b->n ? 1 : j == c->n ? -1 : strcmp(b->e[i].path, c->e[j].path);
                if (cmp < 0) {
                        r = push_change(d, DIFF_DELETED, &b->e[i++], NULL, &cap, err);
                } else if (cmp > 0) {
                        r = mf_entry_hash(dirfd, &c->e[j], err);
                        if (r >= 0)
                                r = push_change(d, DIFF_ADDED, NULL, &c->e[j++], &cap, err);
                } else {
                        int k = -1;
                        r = compare_entry(dirfd, &b->e[i], &c->e[j], &k, err);
                        if (r >= 0 && k >= 0)
                                r = push_change(d, (diff_kind)k, &b->e[i], &c->e[j], &cap, err);
                        i++;
                        j++;
                }
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(d);
        return 0;
}

/* ---- unified diff through diffutils ---- */

static int spawn_diff(
        int old_fd, int new_fd, const char *path, int out_fd, pid_t *ret_pid, nook_error *err) {
        _cleanup_free_ char *la = old_fd >= 0 ? strprintf("a/%s", path) : strdup("/dev/null");
        _cleanup_free_ char *lb = new_fd >= 0 ? strprintf("b/%s", path) : strdup("/dev/null");
        char *argv[] = { (char *)"diff", (char *)"-u", (char *)"--label", la, (char *)"--label", lb,
                (char *)(old_fd >= 0 ? "/dev/fd/3" : "/dev/null"),
                (char *)(new_fd >= 0 ? "/dev/fd/4" : "/dev/null"), NULL };
        posix_spawn_file_actions_t fa;
        pid_t pid;
        if (!la || !lb)
                return nook_err_oom(err);
        if (posix_spawn_file_actions_init(&fa) != 0)
                return nook_err_oom(err);
        (void)posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        (void)posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
        (void)posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        if (old_fd >= 0)
                (void)posix_spawn_file_actions_adddup2(&fa, old_fd, 3);
        if (new_fd >= 0)
                (void)posix_spawn_file_actions_adddup2(&fa, new_fd, 4);
        int e = posix_spawnp(&pid, "diff", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (e != 0)
                return nook_err_errnum(err, NOOK_E_MISSING_FEATURE, e,
                        "Cannot run 'diff' for a patch (install the Debian package diffutils)");
        *ret_pid = pid;
        return 0;
}

/* Whether fd (-1: none) is a file diffutils should not be given: GNU diff reads both sides whole
 * into memory, so a guest's 30 GB sparse file with a text start would take the host's memory. */
static bool too_large_for_patch(int fd) {
        struct stat st;
        return fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size > PATCH_MAX;
}

int diff_unified(int old_fd, int new_fd, const char *path, char **ret, nook_error *err) {
        int p[2];
        pid_t pid = 0;
        _cleanup_free_ char *out = NULL;
        size_t len = 0;
        if (too_large_for_patch(old_fd) || too_large_for_patch(new_fd)) {
                *ret = strdup("(a side is larger than 16 MiB: no patch shown)\n");
                return *ret ? 0 : nook_err_oom(err);
        }
        /* fds 3 and 4 in the child must not be the inputs' own numbers swapped: dup them high. */
        _cleanup_close_ int o = old_fd >= 0 ? fcntl(old_fd, F_DUPFD_CLOEXEC, 10) : -1;
        _cleanup_close_ int n = new_fd >= 0 ? fcntl(new_fd, F_DUPFD_CLOEXEC, 10) : -1;
        if ((old_fd >= 0 && o < 0) || (new_fd >= 0 && n < 0))
                return nook_err_errno(err, NOOK_E_IO, "Cannot duplicate a file descriptor");
        if (pipe2(p, O_CLOEXEC) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create a pipe");
        int r = spawn_diff(o, n, path, p[1], &pid, err);
        safe_close(p[1]);
        if (r < 0) {
                safe_close(p[0]);
                return r;
        }
        nook_error ignore;
        r = fd_read_to_end(p[0], PATCH_MAX, &out, &len, &ignore);
        safe_close(p[0]);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (r < 0) {
                *ret = strdup("(patch larger than 16 MiB, not shown)\n");
                return *ret ? 0 : nook_err_oom(err);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) > 1)
                return nook_err_set(err, NOOK_E_IO, "'diff -u' failed on '%s'", path);
        *ret = TAKE_PTR(out);
        if (!*ret && !(*ret = strdup("")))
                return nook_err_oom(err);
        return 0;
}

/* ---- JSON ---- */

json_t *diff_json_bytes(const char *s, bool *ret_escaped) {
        json_t *j = json_string(s);
        if (j)
                return j;
        size_t len = strlen(s);
        _cleanup_free_ char *e = malloc(3 * len + 1);
        size_t o = 0;
        if (!e)
                return NULL;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p >= 0x80 || *p == '%') {
                        (void)snprintf(e + o, 4, "%%%02X", *p);
                        o += 3;
                } else
                        e[o++] = (char)*p;
        }
        e[o] = '\0';
        *ret_escaped = true;
        return json_string(e);
}

int diff_json_set_path(json_t *o, const char *path) {
        bool escaped = false;
        json_t *j = diff_json_bytes(path, &escaped);
        if (!j || json_object_set_new(o, "path", j) < 0)
                return -1;
        if (escaped && json_object_set_new(o, "pathEscaped", json_true()) < 0)
                return -1;
        return 0;
}

static char *mode_str(uint32_t m) {
        return strprintf("%04o", m);
}

static int set_new(json_t *o, const char *k, json_t *v) {
        return v ? json_object_set_new(o, k, v) : -1;
}

#define UNAVAILABLE                                                                                         \
        "(old content unavailable: the baseline keeps each file's hash, not its content, and no copy\n"     \
        " of the baseline's version was found)\n"

/* The old version of c's file: in old_dir when its content still has the baseline's hash. */
static int open_old(int old_dir, const diff_change *c, nook_error *err) {
        if (old_dir < 0 || !c->old || c->old->type != MF_TYPE_FILE || !c->old->has_hash)
                return -1;
        mf_entry e = { .path = c->old->path, .type = MF_TYPE_FILE };
        if (mf_entry_hash(old_dir, &e, err) < 0 || !e.has_hash ||
                memcmp(e.hash, c->old->hash, MF_HASH_LEN) != 0)
                return -1;
        return mf_open_beneath(old_dir, c->old->path, O_RDONLY | O_NONBLOCK);
}

static int change_patch(const diff_change *c, int dirfd, int old_dir, char **ret, nook_error *err) {
        bool old_file = c->old && c->old->type == MF_TYPE_FILE,
             new_file = c->cur && c->cur->type == MF_TYPE_FILE;
        *ret = NULL;
        if (c->kind == DIFF_MODE || c->kind == DIFF_TYPE || (!old_file && !new_file))
                return 0;
        _cleanup_close_ int nfd =
                new_file ? mf_open_beneath(dirfd, c->cur->path, O_RDONLY | O_NONBLOCK) : -1;
        _cleanup_close_ int ofd = old_file ? open_old(old_dir, c, err) : -1;
        if (old_file && ofd < 0) {
                const char *p = c->old->path;
                *ret = strprintf("--- a/%s\n+++ %s%s\n" UNAVAILABLE, p, new_file ? "b/" : "/dev/null",
                        new_file ? p : "");
                return *ret ? 0 : nook_err_oom(err);
        }
        if (new_file && nfd < 0)
                return 0; /* gone since the comparison */
        return diff_unified(ofd, nfd, c->cur ? c->cur->path : c->old->path, ret, err);
}

static int change_fill(json_t *o, const diff_change *c) {
        const mf_entry *now = c->cur ? c->cur : c->old;
        _cleanup_free_ char *mode = mode_str(now->mode);
        bool escaped = false;
        int r = 0;
        if (!mode)
                return -1;
        r |= diff_json_set_path(o, now->path);
        r |= set_new(o, "kind", json_string(diff_kind_to_string(c->kind)));
        r |= set_new(o, "type", json_string(mf_type_to_string(now->type)));
        r |= set_new(o, "mode", json_string(mode));
        if (now->type == MF_TYPE_FILE)
                r |= set_new(o, "size", json_integer((json_int_t)now->size));
        if (now->type == MF_TYPE_SYMLINK)
                r |= set_new(o, "target", diff_json_bytes(now->target, &escaped));
        if (escaped)
                r |= json_object_set_new(o, "targetEscaped", json_true());
        if (c->old && c->cur) {
                if (c->kind == DIFF_TYPE)
                        r |= set_new(o, "oldType", json_string(mf_type_to_string(c->old->type)));
                if (c->old->mode != c->cur->mode && c->kind != DIFF_TYPE) {
                        _cleanup_free_ char *om = mode_str(c->old->mode);
                        r |= om ? set_new(o, "oldMode", json_string(om)) : -1;
                }
                if (c->old->type == MF_TYPE_SYMLINK && c->kind != DIFF_MODE)
                        r |= set_new(o, "oldTarget", diff_json_bytes(c->old->target, &escaped));
        }
        return r;
}

/* Overlay marks in an upper layer (Documentation/filesystems/overlayfs.rst): a whiteout is a
 * character device 0/0; an opaque directory has the xattr trusted.overlay.opaque (or
 * user.overlay.opaque for an overlay mounted in a user namespace with "userxattr") set to "y". */
static int layer_marks(json_t *o, int dirfd, diff_change *c) {
        const mf_entry *e = c->cur;
        const char *name;
        struct stat st;
        char v[4], proc[64];
        if (!e || (e->type != MF_TYPE_OTHER && e->type != MF_TYPE_DIR))
                return 0;
        _cleanup_close_ int pfd = mf_open_parent(dirfd, e->path, &name);
        if (pfd < 0 || fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        if (S_ISCHR(st.st_mode) && st.st_rdev == 0) {
                c->kind = DIFF_DELETED;
                (void)json_object_del(o, "oldType");
                (void)json_object_del(o, "oldMode");
                (void)json_object_del(o, "mode");
                return json_object_set_new(o, "kind", json_string("deleted")) |
                        json_object_set_new(o, "type", json_string("whiteout")) |
                        json_object_set_new(o, "whiteout", json_true());
        }
        if (!S_ISDIR(st.st_mode))
                return 0;
        _cleanup_close_ int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return 0;
        (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        ssize_t k = getxattr(proc, "trusted.overlay.opaque", v, sizeof(v));
        if (k < 0)
                k = getxattr(proc, "user.overlay.opaque", v, sizeof(v));
        if (k == 1 && v[0] == 'y')
                return json_object_set_new(o, "opaque", json_true());
        return 0;
}

int diff_to_json(const diff_result *d, int dirfd, int old_dir, bool patch, bool layer, json_t **ret,
        nook_error *err) {
        json_t *root = json_object(), *arr = json_array();
        _cleanup_(json_decrefp) json_t *guard = root;
        size_t counts[_DIFF_KIND_MAX] = { 0 };
        if (!root || !arr || json_object_set_new(root, "changes", arr) < 0)
                return nook_err_oom(err);
        for (size_t i = 0; i < d->n; i++) {
                diff_change *c = &d->c[i];
                json_t *o = json_object();
                if (!o || json_array_append_new(arr, o) < 0 || change_fill(o, c) < 0)
                        return nook_err_oom(err);
                if (layer && layer_marks(o, dirfd, c) < 0)
                        return nook_err_oom(err);
                counts[c->kind]++;
                if (!patch)
                        continue;
                _cleanup_free_ char *p = NULL;
                int r = change_patch(c, dirfd, old_dir, &p, err);
                if (r < 0)
                        return r;
                if (!p)
                        continue;
                json_t *ps = json_string(p);
                if (!ps)
                        ps = json_string("(binary or non-UTF-8 content, not shown)\n");
                if (set_new(o, "patch", ps) < 0)
                        return nook_err_oom(err);
        }
        json_t *sum = json_object();
        if (!sum || json_object_set_new(root, "summary", sum) < 0)
                return nook_err_oom(err);
        for (int k = 0; k < _DIFF_KIND_MAX; k++)
                if (json_object_set_new(sum, kind_names[k], json_integer((json_int_t)counts[k])) < 0)
                        return nook_err_oom(err);
        *ret = TAKE_PTR(guard);
        return 0;
}
