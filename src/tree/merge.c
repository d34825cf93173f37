/* SPDX-License-Identifier: Apache-2.0 */
/* Merge of a branch tree into a target tree (rules in merge.h).  Phases:
 *   1. diff the branch against its baseline;
 *   2. classify each change against the target's current entry (apply, skip, conflict);
 *   3. refuse: stop here when there is any conflict; dry run: stop here;
 *   4. stage the new content of every change whose directory exists in the target;
 *   5. in path order (parents first): make directories, stage what lives in new ones, rename
 *      staged content into place (RENAME_NOREPLACE, or RENAME_EXCHANGE over an old version, which
 *      then holds the old version for the undo), set modes;
 *   6. deletions, deepest first: renamed aside;
 *   7. commit: remove what was set aside; or, on any failure, undo 5-6 in reverse. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "tree/diff.h"
#include "tree/merge.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"

static const char *const strategy_names[_MERGE_STRATEGY_MAX] = {
        [MERGE_REFUSE] = "refuse",
        [MERGE_OURS] = "ours",
        [MERGE_THEIRS] = "theirs",
};

const char *merge_strategy_to_string(merge_strategy s) {
        if ((int)s < 0 || s >= _MERGE_STRATEGY_MAX)
                return NULL;
        return strategy_names[s];
}

merge_strategy merge_strategy_from_string(const char *s) {
        for (int i = 0; s && i < _MERGE_STRATEGY_MAX; i++)
                if (streq(s, strategy_names[i]))
                        return (merge_strategy)i;
        return _MERGE_STRATEGY_INVALID;
}

/* One change to apply and the steps taken for it (what the undo reverses). */
typedef struct op {
        const diff_change *c;
        char tmp[64]; /* staging name in the same directory */
        char aside[64]; /* the target's old entry, renamed aside (deleted, or replaced by a dir) */
        bool has_tmp; /* tmp exists: the new content, or after an exchange the old one */
        bool has_aside;
        bool made; /* a new directory was made at path */
        bool placed; /* tmp was renamed onto path, which was absent */
        bool exchanged; /* tmp and path were exchanged */
        bool chmodded; /* mode set; old_mode restores it */
        bool deleted;
        uint32_t old_mode;
} op;

typedef struct merge_ctx {
        int bfd, tfd;
        merge_strategy strategy;
        op *ops;
        size_t n_ops;
        unsigned long counter;
        unsigned long steps; /* for the test hooks */
        int jfd; /* the journal (-1: none) */
        json_t *applied, *conflicts;
} merge_ctx;

/* The target's current entry at path (hashed if a regular file); *ret_exists false when absent.
 * *ret_parent_ok false when a parent component is missing, not a directory, or a symlink. */
static int target_entry(merge_ctx *m, const char *path, mf_entry *ret, bool *ret_exists, bool *ret_parent_ok,
        nook_error *err) {
        const char *name;
        _cleanup_close_ int pfd = mf_open_parent(m->tfd, path, &name);
        struct stat st;
        *ret_exists = false;
        *ret_parent_ok = pfd >= 0;
        if (pfd < 0) {
                if (pfd == -ENOENT || pfd == -ENOTDIR || pfd == -ELOOP)
                        return 0;
                return nook_err_errnum(
                        err, NOOK_E_IO, -pfd, "Cannot open the directory of '%s' in the target", path);
        }
        if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        return 0;
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat '%s' in the target", path);
        }
        *ret = (mf_entry){ .path = (char *)path,
                .mode = st.st_mode & 07777,
                .size = (uint64_t)st.st_size,
                .type = S_ISREG(st.st_mode)   ? MF_TYPE_FILE
                        : S_ISDIR(st.st_mode) ? MF_TYPE_DIR
                        : S_ISLNK(st.st_mode) ? MF_TYPE_SYMLINK
                                              : MF_TYPE_OTHER };
        *ret_exists = true;
        if (ret->type == MF_TYPE_SYMLINK) {
                char buf[PATH_MAX + 1];
                ssize_t k = readlinkat(pfd, name, buf, PATH_MAX);
                if (k < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot read the symlink '%s' in the target", path);
                ret->target = strndup(buf, (size_t)k);
                if (!ret->target)
                        return nook_err_oom(err);
        }
        return mf_entry_hash(m->tfd, ret, err);
}

static const char *target_kind(const mf_entry *b, const mf_entry *t) {
        if (!t)
                return "deleted";
        if (!b)
                return "added";
        if (b->type != t->type)
                return "type";
        mf_entry same_mode = *t;
        same_mode.mode = b->mode;
        if (b->mode != t->mode && mf_entry_same(b, &same_mode))
                return "mode";
        return "modified";
}

static int add_conflict(merge_ctx *m, const diff_change *c, const char *target, nook_error *err) {
        const mf_entry *e = c->cur ? c->cur : c->old;
        /* a path whose directory the target removed cannot take the branch's version: skipped */
        const char *res = m->strategy == MERGE_REFUSE ? "refused"
                : streq(target, "parent")             ? "skipped"
                                                      : strategy_names[m->strategy];
        json_t *o = json_object();
        if (!o || json_array_append_new(m->conflicts, o) < 0 || diff_json_set_path(o, e->path) < 0 ||
                json_object_set_new(o, "branch", json_string(diff_kind_to_string(c->kind))) < 0 ||
                json_object_set_new(o, "target", json_string(target)) < 0 ||
                json_object_set_new(o, "resolution", json_string(res)) < 0)
                return nook_err_oom(err);
        return 0;
}

/* Whether the target directory path holds only names the branch deletes too. */
static int dir_only_deleted(
        merge_ctx *m, const diff_result *d, const char *path, bool *ret, nook_error *err) {
        _cleanup_close_ int fd = mf_open_beneath(m->tfd, path, O_RDONLY | O_DIRECTORY);
        *ret = true;
        if (fd < 0)
                return 0;
        DIR *dir = fdopendir(fd);
        if (!dir)
                return nook_err_errno(err, NOOK_E_IO, "Cannot list '%s' in the target", path);
        TAKE_FD(fd);
        struct dirent *de;
        while ((de = readdir(dir))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                _cleanup_free_ char *p = strprintf("%s/%s", path, de->d_name);
                if (!p) {
                        closedir(dir);
                        return nook_err_oom(err);
                }
                const mf_entry *b = manifest_find(d->base, p);
                if (!b || manifest_find(d->cur, p)) {
                        *ret = false;
                        break;
                }
        }
        closedir(dir);
        return 0;
}

static int op_cmp(const void *key, const void *elem) {
        const op *o = elem;
        return strcmp(key, o->c->cur ? o->c->cur->path : o->c->old->path);
}

/* Whether an op already planned (ops are planned in path order) makes a directory at path. */
static bool op_makes_dir(const merge_ctx *m, const char *path) {
        const op *o = m->n_ops ? bsearch(path, m->ops, m->n_ops, sizeof(*m->ops), op_cmp) : NULL;
        return o && o->c->cur && o->c->cur->type == MF_TYPE_DIR;
}

/* Decides one change: *ret_apply. */
static int classify(
        merge_ctx *m, const diff_result *d, const diff_change *c, bool *ret_apply, nook_error *err) {
        const mf_entry *e = c->cur ? c->cur : c->old;
        mf_entry t = { 0 };
        bool exists, parent_ok;
        const char *why = NULL;
        *ret_apply = false;
        if (c->cur && c->cur->type == MF_TYPE_OTHER)
                return nook_err_set(err, NOOK_E_REFUSED,
                        "'%s' in the branch is a special file (fifo, socket or device); merge copies only files, "
                        "directories and symlinks: remove it from the branch first",
                        e->path);
        if (c->cur) {
                int r = mf_entry_hash(m->bfd, (mf_entry *)c->cur, err);
                if (r < 0)
                        return r;
        }
        int r = target_entry(m, e->path, &t, &exists, &parent_ok, err);
        if (r < 0) {
                free(t.target);
                return r;
        }
        const mf_entry *tp = exists ? &t : NULL;
        bool parent_new = false;
        if (!parent_ok && !c->cur)
                return 0; /* deleted in both: its directory is gone from the target too */
        if (!parent_ok) {
                /* a directory an earlier step of this merge makes (added, or a file that became one) */
                const char *slash = strrchr(e->path, '/');
                _cleanup_free_ char *parent = slash ? strndup(e->path, (size_t)(slash - e->path)) : NULL;
                parent_new = parent && op_makes_dir(m, parent);
                if (!parent_new)
                        why = "parent";
        }
        if (!why && mf_entry_same(tp, c->cur)) {
                free(t.target);
                return 0; /* already the branch's version */
        }
        if (!why && !mf_entry_same(tp, c->old))
                why = target_kind(c->old, tp);
        /* a directory the branch deletes or replaces must hold nothing else in the target */
        if (!why && c->old && c->old->type == MF_TYPE_DIR && (!c->cur || c->cur->type != MF_TYPE_DIR) &&
                tp && tp->type == MF_TYPE_DIR) {
                bool only = true;
                if ((r = dir_only_deleted(m, d, e->path, &only, err)) < 0) {
                        free(t.target);
                        return r;
                }
                if (!only)
                        why = "entries";
        }
        free(t.target);
        if (why) {
                if ((r = add_conflict(m, c, why, err)) < 0)
                        return r;
                *ret_apply = m->strategy == MERGE_THEIRS && !streq(why, "parent");
                return 0;
        }
        *ret_apply = true;
        return 0;
}

static const mf_entry *op_entry(const op *o) {
        return o->c->cur ? o->c->cur : o->c->old;
}

static void next_name(merge_ctx *m, char buf[64]) {
        (void)snprintf(buf, 64, ".nook-merge-%ld-%lu", (long)getpid(), m->counter++);
}

/* A name this merge made (staged or set aside). */
static bool is_ours(const merge_ctx *m, const char *name) {
        char prefix[64];
        (void)snprintf(prefix, sizeof(prefix), ".nook-merge-%ld-", (long)getpid());
        return m && startswith(name, prefix);
}

/* Appends a journal record before the step it names (format in docs/design/diff-merge.md), so
 * a merge killed part way is undone (or, once "commit" is written, finished) by merge_recover.
 * No fsync: the journal is for a killed process, whose writes the page cache keeps. */
static int jrec(merge_ctx *m, const char *verb, uint64_t ino, uint32_t mode, const char *path,
        const char *name, nook_error *err) {
        if (m->jfd < 0)
                return 0;
        _cleanup_free_ char *ep = mf_escape(path), *en = name ? mf_escape(name) : strdup("-");
        _cleanup_free_ char *line =
                ep && en ? strprintf("%s %" PRIu64 " %o %s %s\n", verb, ino, mode, ep, en) : NULL;
        if (!line)
                return nook_err_oom(err);
        if (fd_write_all(m->jfd, line, strlen(line)) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot write the merge journal");
        return 0;
}

/* Sets mode on name in pfd without following a symlink (fchmod needs an fd that is not
 * O_PATH; /proc/self/fd of an O_PATH fd reaches the inode itself, as systemd's fchmod_opath). */
static int chmod_nofollow(int pfd, const char *name, uint32_t mode) {
        _cleanup_close_ int fd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        char proc[64];
        if (fd < 0)
                return -errno;
        (void)snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        return chmod(proc, mode) < 0 ? -errno : 0;
}

/* Holes stay holes (a branch's sparse file must not become gigabytes of zeros in the target). */
static int copy_content(int src, int dst) {
        return fd_copy_sparse(src, dst, NULL);
}

/* The branch's file e, copied to pfd/tmp with its mode and mtime. */
static int stage_file(merge_ctx *m, int pfd, const char *tmp, const mf_entry *e, nook_error *err) {
        _cleanup_close_ int src = mf_open_beneath(m->bfd, e->path, O_RDONLY | O_NONBLOCK);
        struct stat st;
        if (src < 0)
                return nook_err_errnum(err, NOOK_E_IO, -src, "Cannot open '%s' in the branch", e->path);
        if (fstat(src, &st) < 0 || !S_ISREG(st.st_mode))
                return nook_err_set(err, NOOK_E_STATE,
                        "'%s' in the branch changed during the merge; merge again", e->path);
        _cleanup_close_ int dst =
                openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (dst < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stage '%s' in the target", e->path);
        int r = copy_content(src, dst);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot copy '%s' into the target", e->path);
        (void)!fchown(dst, st.st_uid, st.st_gid); /* kept where we may (root); else ours */
        if (fchmod(dst, e->mode) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the mode of '%s' in the target", e->path);
        (void)futimens(dst, (struct timespec[2]){ st.st_atim, st.st_mtim });
        return 0;
}

/* Stages op's new content (a file or a symlink) next to its target; -ENOENT when its directory
 * does not exist yet (made by an earlier step of phase 5). */
static int stage(merge_ctx *m, op *o, nook_error *err) {
        const mf_entry *e = o->c->cur;
        const char *name;
        if (o->has_tmp || !e || e->type == MF_TYPE_DIR)
                return 0;
        _cleanup_close_ int pfd = mf_open_parent(m->tfd, e->path, &name);
        if (pfd == -ENOENT || pfd == -ENOTDIR || pfd == -ELOOP)
                return -ENOENT; /* a directory phase 5 makes (new, or in place of a file) */
        if (pfd < 0)
                return nook_err_errnum(
                        err, NOOK_E_IO, -pfd, "Cannot open the directory of '%s' in the target", e->path);
        next_name(m, o->tmp);
        int r = jrec(m, "tmp", 0, 0, e->path, o->tmp, err);
        if (r < 0)
                return r;
        if (e->type == MF_TYPE_SYMLINK) {
                if (symlinkat(e->target, pfd, o->tmp) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot stage the symlink '%s'", e->path);
                o->has_tmp = true;
                return 0;
        }
        o->has_tmp = true; /* also when the copy fails part way: the undo removes it */
        return stage_file(m, pfd, o->tmp, e, err);
}

static int set_aside(merge_ctx *m, op *o, int pfd, const char *name, nook_error *err) {
        next_name(m, o->aside);
        int r = jrec(m, "aside", 0, 0, op_entry(o)->path, o->aside, err);
        if (r < 0)
                return r;
        if (renameat2(pfd, name, pfd, o->aside, RENAME_NOREPLACE) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot move '%s' aside in the target", op_entry(o)->path);
        o->has_aside = true;
        return 0;
}

static int place_dir(
        merge_ctx *m, op *o, int pfd, const char *name, const struct stat *t, bool exists, nook_error *err) {
        const mf_entry *e = o->c->cur;
        int r;
        if (exists && S_ISDIR(t->st_mode)) {
                o->old_mode = t->st_mode & 07777;
                if ((r = jrec(m, "chmod", 0, o->old_mode, e->path, NULL, err)) < 0)
                        return r;
                r = chmod_nofollow(pfd, name, e->mode);
                if (r < 0)
                        return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot set the mode of '%s'", e->path);
                o->chmodded = true;
                return 0;
        }
        if (exists && (r = set_aside(m, o, pfd, name, err)) < 0)
                return r;
        if ((r = jrec(m, "made", 0, 0, e->path, NULL, err)) < 0)
                return r;
        if (mkdirat(pfd, name, 0700) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot make the directory '%s' in the target", e->path);
        o->made = true;
        r = chmod_nofollow(pfd, name, e->mode);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot set the mode of '%s'", e->path);
        return 0;
}

/* Phase 5 for one op: the new entry into place. */
static int place(merge_ctx *m, op *o, nook_error *err) {
        const mf_entry *e = o->c->cur;
        const char *name;
        struct stat t;
        int r = stage(m, o, err);
        if (r < 0)
                return r == -ENOENT
                        ? nook_err_set(err, NOOK_E_STATE,
                                  "The directory of '%s' left the target during the merge", e->path)
                        : r;
        _cleanup_close_ int pfd = mf_open_parent(m->tfd, e->path, &name);
        if (pfd < 0)
                return nook_err_errnum(
                        err, NOOK_E_IO, -pfd, "Cannot open the directory of '%s' in the target", e->path);
        bool exists = fstatat(pfd, name, &t, AT_SYMLINK_NOFOLLOW) == 0;
        if (e->type == MF_TYPE_DIR)
                return place_dir(m, o, pfd, name, &t, exists, err);
        if (o->c->kind == DIFF_MODE && exists && !S_ISDIR(t.st_mode)) {
                /* the content is the same: the mode alone, not a copy */
                o->old_mode = t.st_mode & 07777;
                if (e->type == MF_TYPE_SYMLINK)
                        return 0; /* a symlink's mode means nothing on Linux */
                if ((r = jrec(m, "chmod", 0, o->old_mode, e->path, NULL, err)) < 0)
                        return r;
                if ((r = chmod_nofollow(pfd, name, e->mode)) < 0)
                        return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot set the mode of '%s'", e->path);
                o->chmodded = true;
                return 0;
        }
        if (exists && S_ISDIR(t.st_mode)) {
                if ((r = set_aside(m, o, pfd, name, err)) < 0)
                        return r;
                exists = false;
        }
        struct stat staged;
        if (fstatat(pfd, o->tmp, &staged, AT_SYMLINK_NOFOLLOW) < 0)
                return nook_err_errno(err, NOOK_E_IO, "The staged copy of '%s' is gone", e->path);
        if ((r = jrec(m, exists ? "exchanged" : "placed", staged.st_ino, 0, e->path, o->tmp, err)) < 0)
                return r;
        if (renameat2(pfd, o->tmp, pfd, name, exists ? RENAME_EXCHANGE : RENAME_NOREPLACE) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot move '%s' into place in the target", e->path);
        if (exists)
                o->exchanged = true;
        else
                o->placed = true;
        return 0;
}

/* Phase 6 for one op: the target's entry set aside.  A directory that still holds entries the
 * target kept (ours) stays. */
static int delete_one(merge_ctx *m, op *o, nook_error *err) {
        const mf_entry *e = o->c->old;
        const char *name;
        _cleanup_close_ int pfd = mf_open_parent(m->tfd, e->path, &name);
        struct stat t;
        if (pfd < 0 || fstatat(pfd, name, &t, AT_SYMLINK_NOFOLLOW) < 0)
                return 0; /* already gone */
        if (S_ISDIR(t.st_mode) && m->strategy != MERGE_THEIRS) {
                _cleanup_close_ int dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
                struct dirent *de;
                bool empty = true;
                if (d) {
                        TAKE_FD(dfd);
                        /* its entries deleted before it were set aside inside it: those go with it */
                        while ((de = readdir(d)))
                                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") &&
                                        !is_ours(m, de->d_name))
                                        empty = false;
                        closedir(d);
                }
                if (!empty)
                        return 0;
        }
        int r = set_aside(m, o, pfd, name, err);
        if (r >= 0)
                o->deleted = true;
        return r;
}

static void undo_one(merge_ctx *m, op *o) {
        const mf_entry *e = op_entry(o);
        const char *name;
        _cleanup_close_ int pfd = mf_open_parent(m->tfd, e->path, &name);
        if (pfd < 0)
                return;
        if (o->chmodded)
                (void)chmod_nofollow(pfd, name, o->old_mode);
        if (o->exchanged)
                (void)renameat2(pfd, o->tmp, pfd, name, RENAME_EXCHANGE);
        if (o->placed)
                (void)unlinkat(pfd, name, 0);
        if (o->made)
                (void)unlinkat(pfd, name, AT_REMOVEDIR);
        if (o->has_aside)
                (void)renameat2(pfd, o->aside, pfd, name, RENAME_NOREPLACE);
        if (o->has_tmp)
                (void)unlinkat(pfd, o->tmp, 0);
        o->chmodded = o->exchanged = o->placed = o->made = o->has_aside = o->has_tmp = false;
}

static void commit_one(merge_ctx *m, op *o) {
        const mf_entry *e = op_entry(o);
        const char *name;
        nook_error ignore;
        _cleanup_close_ int pfd = mf_open_parent(m->tfd, e->path, &name);
        if (pfd < 0)
                return;
        if (o->has_tmp && (o->exchanged || !o->placed))
                (void)unlinkat(pfd, o->tmp, 0); /* the old version, or an unused stage */
        if (o->has_aside)
                (void)path_rm_rf_at(pfd, o->aside, &ignore);
}

/* NOOK_TEST_MERGE_FAIL_AT=N makes the Nth step of phases 5-6 (from 1) fail, so tests see the
 * undo; NOOK_TEST_MERGE_KILL_AT=N kills the process there (SIGKILL), so tests see the journal's
 * recovery.  Only compiled into builds with test hooks. */
static int test_fail_step(merge_ctx *m, nook_error *err) {
#ifdef NOOK_TEST_HOOKS
        const char *e = secure_getenv("NOOK_TEST_MERGE_FAIL_AT");
        const char *k = secure_getenv("NOOK_TEST_MERGE_KILL_AT");
        ++m->steps;
        if (k && strtoul(k, NULL, 10) == m->steps)
                (void)raise(SIGKILL);
        if (e && strtoul(e, NULL, 10) == m->steps)
                return nook_err_set(err, NOOK_E_IO, "Test hook: step %lu of the merge fails", m->steps);
#endif
        return 0;
}

/* NOOK_TEST_MERGE_KILL_AT=commit: killed right after the journal says "commit". */
static void test_kill_at_commit(void) {
#ifdef NOOK_TEST_HOOKS
        const char *k = secure_getenv("NOOK_TEST_MERGE_KILL_AT");
        if (k && streq(k, "commit"))
                (void)raise(SIGKILL);
#endif
}

/* Undoes every step taken, in reverse: the deletions (made deepest first) from the shallowest,
 * then the placements from the deepest. */
static void undo_all(merge_ctx *m) {
        for (size_t i = 0; i < m->n_ops; i++)
                if (!m->ops[i].c->cur)
                        undo_one(m, &m->ops[i]);
        for (size_t i = m->n_ops; i > 0; i--)
                if (m->ops[i - 1].c->cur)
                        undo_one(m, &m->ops[i - 1]);
}

/* Phases 4-7 over the ops to apply; on failure everything done is undone. */
static int apply(merge_ctx *m, nook_error *err) {
        int r = 0;
        for (size_t i = 0; r >= 0 && i < m->n_ops; i++) {
                r = stage(m, &m->ops[i], err);
                if (r == -ENOENT)
                        r = 0; /* in a directory phase 5 makes */
        }
        for (size_t i = 0; r >= 0 && i < m->n_ops; i++)
                if (m->ops[i].c->cur && (r = test_fail_step(m, err)) >= 0)
                        r = place(m, &m->ops[i], err);
        for (size_t i = m->n_ops; r >= 0 && i > 0; i--)
                if (!m->ops[i - 1].c->cur && (r = test_fail_step(m, err)) >= 0)
                        r = delete_one(m, &m->ops[i - 1], err);
        if (r >= 0)
                r = jrec(m, "commit", 0, 0, ".", NULL, err);
        if (r < 0) {
                undo_all(m);
                return r;
        }
        test_kill_at_commit();
        for (size_t i = m->n_ops; i > 0; i--)
                commit_one(m, &m->ops[i - 1]);
        return 0;
}

static int report(merge_ctx *m, bool dry_run, bool merged, char **ret_json, nook_error *err) {
        json_t *root = json_pack("{s:s, s:b, s:b, s:O, s:O}", "strategy", strategy_names[m->strategy],
                "dryRun", dry_run, "merged", merged, "applied", m->applied, "conflicts", m->conflicts);
        if (!root)
                return nook_err_oom(err);
        *ret_json = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(root);
        return *ret_json ? 0 : nook_err_oom(err);
}

static int add_applied(merge_ctx *m, const diff_change *c, nook_error *err) {
        const mf_entry *e = c->cur ? c->cur : c->old;
        json_t *o = json_object();
        if (!o || json_array_append_new(m->applied, o) < 0 || diff_json_set_path(o, e->path) < 0 ||
                json_object_set_new(o, "kind", json_string(diff_kind_to_string(c->kind))) < 0)
                return nook_err_oom(err);
        return 0;
}

int merge_trees(int branch_fd, manifest *base, int target_fd, int journal_fd, merge_strategy s, bool dry_run,
        char **ret_json, nook_error *err) {
        _cleanup_(diff_result_freep) diff_result *d = NULL;
        _cleanup_(json_decrefp) json_t *applied = json_array();
        _cleanup_(json_decrefp) json_t *conflicts = json_array();
        _cleanup_free_ op *ops = NULL;
        merge_ctx m = { .bfd = branch_fd, .tfd = target_fd, .strategy = s, .jfd = journal_fd };
        int r = diff_compute(branch_fd, base, &d, err);
        if (r < 0)
                return nook_err_wrap(err, "comparing the branch with its baseline");
        if (!applied || !conflicts)
                return nook_err_oom(err);
        m.applied = applied;
        m.conflicts = conflicts;
        ops = calloc(d->n ? d->n : 1, sizeof(*ops));
        if (!ops)
                return nook_err_oom(err);
        m.ops = ops;
        for (size_t i = 0; i < d->n; i++) {
                bool doit = false;
                if ((r = classify(&m, d, &d->c[i], &doit, err)) < 0)
                        return r;
                if (!doit)
                        continue;
                m.ops[m.n_ops++].c = &d->c[i];
                if ((r = add_applied(&m, &d->c[i], err)) < 0)
                        return r;
        }
        if (s == MERGE_REFUSE && json_array_size(conflicts) > 0) {
                json_array_clear(applied);
                r = report(&m, dry_run, false, ret_json, err);
                if (r < 0)
                        return r;
                return nook_err_set(err, NOOK_E_CONFLICT,
                        "%zu path(s) changed in both the branch and the target since the branch point; nothing "
                        "was merged (see the conflicts, or merge with --strategy ours or theirs: strategy in the API)",
                        json_array_size(conflicts));
        }
        if (!dry_run && (r = apply(&m, err)) < 0)
                return nook_err_wrap(err, "merging (every step taken was undone)");
        return report(&m, dry_run, !dry_run, ret_json, err);
}

/* ---- recovery from the journal of a killed merge ---- */

typedef struct jline {
        char verb[16];
        uint64_t ino;
        uint32_t mode;
        char *path, *name; /* name NULL for "-" */
} jline;

static void jlines_free(jline *l, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(l[i].path);
                free(l[i].name);
        }
        free(l);
}

/* A decimal (base 10) or octal (base 8) number filling the whole field. */
static bool jnum(const char *f, size_t len, int base, uint64_t max, uint64_t *ret) {
        char buf[24];
        char *end = NULL;
        if (len == 0 || len >= sizeof(buf) || f[0] == '-' || f[0] == '+' || f[0] == ' ')
                return false;
        memcpy(buf, f, len);
        buf[len] = '\0';
        errno = 0;
        unsigned long long v = strtoull(buf, &end, base);
        if (errno != 0 || !end || *end != '\0' || v > max)
                return false;
        *ret = v;
        return true;
}

/* One journal line (without '\n'): "<verb> <ino> <mode octal> <path> <name|->"; false when
 * malformed. */
static bool jline_parse(const char *s, size_t len, jline *ret) {
        const char *f[5];
        size_t fl[5], nf = 0;
        const char *p = s, *end = s + len;
        while (nf < 5) {
                const char *sp = memchr(p, ' ', (size_t)(end - p));
                f[nf] = p;
                fl[nf++] = (size_t)((sp ? sp : end) - p);
                if (!sp)
                        break;
                p = sp + 1;
        }
        uint64_t ino, mode;
        if (nf != 5 || f[4] + fl[4] != end || fl[0] == 0 || fl[0] >= sizeof(ret->verb) ||
                !jnum(f[1], fl[1], 10, UINT64_MAX, &ino) || !jnum(f[2], fl[2], 8, 07777, &mode))
                return false;
        memcpy(ret->verb, f[0], fl[0]);
        ret->verb[fl[0]] = '\0';
        ret->ino = ino;
        ret->mode = (uint32_t)mode;
        bool dash = fl[4] == 1 && f[4][0] == '-';
        ret->path = mf_unescape(f[3], fl[3]);
        ret->name = dash ? NULL : mf_unescape(f[4], fl[4]);
        if (!ret->path || (!dash && !ret->name))
                return false;
        /* names are only ever our own staging names, one component */
        return (streq(ret->path, ".") || mf_path_valid(ret->path, strlen(ret->path))) &&
                (!ret->name || (startswith(ret->name, ".nook-merge-") && !strchr(ret->name, '/')));
}

/* Undoes one step (tolerant: a step recorded but not taken changes nothing). */
static void recover_undo(int tfd, const jline *l) {
        const char *base;
        struct stat st;
        _cleanup_close_ int pfd = mf_open_parent(tfd, l->path, &base);
        if (pfd < 0)
                return;
        bool at_ino = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == l->ino;
        if (streq(l->verb, "chmod"))
                (void)chmod_nofollow(pfd, base, l->mode);
        else if (streq(l->verb, "exchanged") && at_ino && l->name)
                (void)renameat2(pfd, l->name, pfd, base, RENAME_EXCHANGE);
        else if (streq(l->verb, "placed") && at_ino)
                (void)unlinkat(pfd, base, 0);
        else if (streq(l->verb, "made"))
                (void)unlinkat(pfd, base, AT_REMOVEDIR);
        else if (streq(l->verb, "aside") && l->name)
                (void)renameat2(pfd, l->name, pfd, base, RENAME_NOREPLACE);
        else if (streq(l->verb, "tmp") && l->name)
                (void)unlinkat(pfd, l->name, 0);
}

/* Finishes one step of a committed merge: what was set aside or replaced goes. */
static void recover_finish(int tfd, const jline *l) {
        const char *base;
        nook_error ignore;
        _cleanup_close_ int pfd = mf_open_parent(tfd, l->path, &base);
        if (pfd < 0 || !l->name)
                return;
        if (streq(l->verb, "aside"))
                (void)path_rm_rf_at(pfd, l->name, &ignore);
        else if (streq(l->verb, "tmp") || streq(l->verb, "exchanged"))
                (void)unlinkat(pfd, l->name, 0);
}

int merge_recover(int target_fd, const char *text, size_t len, nook_error *err) {
        jline *l = NULL;
        size_t n = 0, cap = 0;
        bool committed = false;
        for (const char *p = text, *end = text + len; p < end;) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                if (!nl)
                        break; /* a line cut by the kill: its step was not taken */
                if (n == cap) {
                        size_t ncap = cap ? cap * 2 : 64;
                        jline *nl2 = reallocarray(l, ncap, sizeof(*l));
                        if (!nl2) {
                                jlines_free(l, n);
                                return nook_err_oom(err);
                        }
                        l = nl2;
                        cap = ncap;
                }
                l[n] = (jline){ 0 };
                if (!jline_parse(p, (size_t)(nl - p), &l[n])) {
                        free(l[n].path);
                        free(l[n].name);
                        jlines_free(l, n);
                        return nook_err_set(err, NOOK_E_INVALID,
                                "The journal of an interrupted merge is damaged at line %zu; nothing was undone",
                                n + 1);
                }
                committed |= streq(l[n].verb, "commit");
                n++;
                p = nl + 1;
        }
        if (committed)
                for (size_t i = 0; i < n; i++)
                        recover_finish(target_fd, &l[i]);
        else
                for (size_t i = n; i > 0; i--)
                        recover_undo(target_fd, &l[i - 1]);
        jlines_free(l, n);
        return committed ? 1 : 0;
}
