/* SPDX-License-Identifier: Apache-2.0 */
/* nook_diff and nook_merge: thin wrappers over src/tree (manifest, diff, merge), which hold
 * every rule; this file finds the sandboxes' folders and takes their locks. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "tree/diff.h"
#include "tree/manifest.h"
#include "tree/merge.h"
#include "sandbox/baseline.h"
#include "sandbox/ctx.h"
#include "sandbox/rundir.h"
#include "sandbox/state.h"
#include "store/store.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/str.h"

#define JOURNAL_NAME "merge.journal" /* in the target's state folder while a merge runs */

static int open_dir(const char *path, const char *what, int *ret, nook_error *err) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return nook_err_errno(err, errno == ENOENT ? NOOK_E_NOT_FOUND : NOOK_E_IO,
                        "Cannot open %s '%s'", what, path);
        *ret = fd;
        return 0;
}

/* <file>.error: why the last capture of file failed, for diff to say (a create never fails for
 * its baseline: diff and merge are refused for that sandbox instead). */
static void note_failure(int sfd, const char *file, const nook_error *why) {
        _cleanup_free_ char *name = strprintf("%s.error", file);
        _cleanup_close_ int fd = -1;
        if (!name)
                return;
        fd = openat(sfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0)
                (void)fd_write_all(fd, why->msg, strlen(why->msg));
}

/* Opens the state folder sdir into *sfd unless open already; make: makes it first, else a
 * missing one leaves *sfd at -1. */
static int state_dir_open(const char *sdir, bool make, int *sfd, nook_error *err) {
        if (*sfd >= 0)
                return 0;
        if (make && mkdir(sdir, 0700) < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the state folder '%s'", sdir);
        int r = open_dir(sdir, "the state folder", sfd, err);
        return r == -NOOK_E_NOT_FOUND && !make ? 0 : r;
}

/* Takes tree's baseline: an empty tree's is bit in *empty and no file (one of an earlier create
 * goes), any other's the file, in the state folder made for it. */
static int capture_one(const char *sdir, int *sfd, const char *tree, const char *file, unsigned bit,
        bool durable, unsigned *empty, nook_error *err) {
        _cleanup_close_ int fd = -1;
        _cleanup_(manifest_freep) manifest *m = NULL;
        _cleanup_free_ char *ename = strprintf("%s.error", file);
        nook_error why = { 0 };
        if (!ename)
                return nook_err_oom(err);
        int r = open_dir(tree, "the tree", &fd, &why);
        if (r >= 0)
                r = manifest_capture(fd, /* hash= */ true, 0, &m, &why);
        bool is_empty = r >= 0 && m->n == 0;
        int k = state_dir_open(sdir, /* make= */ !is_empty, sfd, err);
        if (k < 0)
                return k;
        if (*sfd >= 0) {
                (void)unlinkat(*sfd, ename, 0);
                (void)unlinkat(*sfd, file, 0);
        }
        *empty = is_empty ? *empty | bit : *empty & ~bit;
        if (is_empty)
                return 0;
        if (r >= 0)
                r = manifest_save(m, *sfd, file, durable, &why);
        if (r < 0) {
                (void)nook_err_wrap(&why, "taking the baseline of '%s'", tree);
                note_failure(*sfd, file, &why);
        }
        return 0;
}

unsigned sb_baseline_guess_empty(unsigned kept, bool fresh_upper, bool new_workspace) {
        unsigned e = kept;
        if (new_workspace)
                e |= SANDBOX_EMPTY_WS_BASELINE;
        if (fresh_upper)
                e |= SANDBOX_EMPTY_LAYER_BASELINE;
        return e;
}

int sb_baseline_capture(const char *sdir, const char *wsdir, const char *upper, unsigned kept,
        bool fresh_upper, bool upper_durable, unsigned *ret_empty, nook_error *err) {
        _cleanup_close_ int sfd = -1;
        int r = state_dir_open(sdir, /* make= */ false, &sfd, err);
        if (r < 0)
                return r;
        unsigned empty = 0;
        /* kept: a file, or a bit of an earlier create of the record */
        if ((kept & SANDBOX_EMPTY_WS_BASELINE) ||
                (sfd >= 0 && faccessat(sfd, MF_FILE_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0))
                empty |= kept & SANDBOX_EMPTY_WS_BASELINE;
        else if ((r = capture_one(sdir, &sfd, wsdir, MF_FILE_NAME, SANDBOX_EMPTY_WS_BASELINE,
                          /* durable= */ true, &empty, err)) < 0)
                return r;
        if (!fresh_upper &&
                ((kept & SANDBOX_EMPTY_LAYER_BASELINE) ||
                        (sfd >= 0 && faccessat(sfd, MF_ROOT_FILE_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0)))
                empty |= kept & SANDBOX_EMPTY_LAYER_BASELINE;
        else if ((r = capture_one(sdir, &sfd, upper, MF_ROOT_FILE_NAME, SANDBOX_EMPTY_LAYER_BASELINE,
                          upper_durable, &empty, err)) < 0)
                return r;
        *ret_empty = empty;
        return 0;
}

/* The record must exist: diff and merge name sandboxes, not stray folders.  ret_empty (may be
 * NULL): its empty baselines (SANDBOX_EMPTY_*). */
static int sandbox_exists(nook *n, const char *name, unsigned *ret_empty, nook_error *err) {
        store *st;
        sandbox_rec rec = { 0 };
        int r = name_validate("sandbox", name, err);
        if (r < 0)
                return r;
        if ((r = ctx_store(n, &st, err)) < 0)
                return r;
        r = store_sandbox_get(st, name, &rec, err);
        if (r >= 0 && ret_empty)
                *ret_empty = rec.empty_baselines;
        sandbox_rec_done(&rec);
        return r;
}

/* The tree (workspace or writable layer) of name and its baseline: its file, else the empty one
 * its record's bit says (baseline.h).  The caller holds name's lock. */
static int open_tree(
        nook *n, const char *name, bool layer, int *ret_fd, manifest **ret_base, nook_error *err) {
        _cleanup_free_ char *sdir = NULL, *wsdir = NULL, *upper = NULL;
        _cleanup_close_ int sfd = -1, tfd = -1;
        unsigned empty = 0;
        int r = sandbox_exists(n, name, &empty, err);
        if (r >= 0)
                r = ctx_dirs(n, name, &sdir, &wsdir, err);
        if (r < 0)
                return r;
        if (!(upper = sb_upper_path(n, name, sdir)))
                return nook_err_oom(err);
        /* No state folder is no baseline file: the baselines are empty (the record's bits), or
         * there are none (a one-shot run's: docs/design/runtime.md, "The state folder"). */
        r = open_dir(sdir, "the state folder", &sfd, err);
        if (r < 0 && r != -NOOK_E_NOT_FOUND)
                return r;
        r = open_dir(layer ? upper : wsdir, layer ? "the writable layer" : "the workspace", &tfd, err);
        if (r < 0)
                return r;
        const char *file = layer ? MF_ROOT_FILE_NAME : MF_FILE_NAME;
        /* its file; else why its capture failed; else the empty one its bit says */
        r = sfd >= 0 ? manifest_load(sfd, file, ret_base, err) : -NOOK_E_NOT_FOUND;
        if (r == -NOOK_E_NOT_FOUND) {
                _cleanup_free_ char *ename = strprintf("%s.error", file), *why = NULL;
                _cleanup_close_ int efd =
                        ename && sfd >= 0 ? openat(sfd, ename, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
                size_t len = 0;
                nook_error ignore;
                if (efd >= 0 && fd_read_to_end(efd, 400, &why, &len, &ignore) >= 0 && why)
                        return nook_err_set(err, NOOK_E_NOT_FOUND,
                                "Sandbox '%s' has no baseline to compare with: %s", name, why);
                if (empty & (layer ? SANDBOX_EMPTY_LAYER_BASELINE : SANDBOX_EMPTY_WS_BASELINE)) {
                        if (!(*ret_base = calloc(1, sizeof(manifest))))
                                return nook_err_oom(err);
                        *ret_fd = TAKE_FD(tfd);
                        return 0;
                }
                return nook_err_set(err, NOOK_E_NOT_FOUND,
                        "Sandbox '%s' has no baseline to compare with (it was created without one: by 'nook run', "
                        "whose sandbox goes with its command, or by a nook without diff); use 'nook create', "
                        "or 'nook run --keep', to have one",
                        name);
        }
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(tfd);
        return 0;
}

/* Seconds since the epoch of a branch point ("2026-12-05T15:06:01.123Z"), or -1. */
static int64_t branch_point_secs(const char *point) {
        struct tm tm = { 0 };
        const char *rest = point ? strptime(point, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
        if (!rest)
                return -1;
        time_t t = timegm(&tm);
        return t == (time_t)-1 ? -1 : (int64_t)t;
}

/* The source a branch records (migration 005), or NULL: not a branch, or no record.
 * *ret_replaced: a sandbox of that name was made after the branch point: removed and made
 * again, it is not the one branched from, whose files a diff compares with and a merge changes. */
static char *branch_source(nook *n, const char *name, bool *ret_replaced) {
        store *st;
        sandbox_rec rec = { 0 }, src_rec = { 0 };
        nook_error ignore;
        char *src = NULL;
        if (ctx_store(n, &st, &ignore) >= 0 && store_sandbox_get(st, name, &rec, &ignore) >= 0)
                src = TAKE_PTR(rec.branch_of);
        int64_t point = branch_point_secs(rec.branch_point);
        *ret_replaced = src && point >= 0 && store_sandbox_get(st, src, &src_rec, &ignore) >= 0 &&
                src_rec.created_at > point;
        sandbox_rec_done(&src_rec);
        sandbox_rec_done(&rec);
        return src;
}

/* The tree a diff's old content comes from: for a branch, its source's workspace (whose files
 * still matching the baseline's hash are the branch point's); -1 when name is not a branch or
 * its source is gone. */
static int diff_reference_dir(nook *n, const char *name) {
        bool replaced;
        _cleanup_free_ char *src = branch_source(n, name, &replaced), *wsdir = NULL;
        nook_error ignore;
        if (!src || replaced || ctx_ws_dir(n, src, &wsdir, &ignore) < 0)
                return -1;
        return open(wsdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

/* A merge into name that was killed left its journal in name's state folder: its steps are
 * undone, or finished once it had committed (merge_recover).  The caller holds name's lock
 * exclusively. */
static int journal_recover_locked(nook *n, const char *name, nook_error *err) {
        _cleanup_free_ char *sdir = NULL, *wsdir = NULL, *text = NULL;
        _cleanup_close_ int sfd = -1, jfd = -1, tfd = -1;
        size_t len = 0;
        int r = ctx_dirs(n, name, &sdir, &wsdir, err);
        if (r < 0)
                return r;
        if ((r = open_dir(sdir, "the state folder", &sfd, err)) < 0)
                return r == -NOOK_E_NOT_FOUND ? 0 : r; /* no state folder, no journal */
        jfd = openat(sfd, JOURNAL_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (jfd < 0 && errno == ENOENT)
                return 0;
        if (jfd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s/%s'", sdir, JOURNAL_NAME);
        r = fd_read_to_end(jfd, (size_t)1 << 31, &text, &len, err);
        if (r < 0)
                return r;
        r = open_dir(wsdir, "the workspace", &tfd, err);
        if (r < 0)
                return r;
        r = merge_recover(tfd, text ? text : "", len, err);
        if (r < 0)
                return nook_err_wrap(err,
                        "recovering the interrupted merge into '%s' (its journal: '%s/%s')", name, sdir,
                        JOURNAL_NAME);
        if (unlinkat(sfd, JOURNAL_NAME, 0) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot remove '%s/%s'", sdir, JOURNAL_NAME);
        return 0;
}

/* The same for callers that hold no lock: the lock is taken exclusively only when a journal is
 * there. */
static int journal_recover(nook *n, const char *name, nook_error *err) {
        _cleanup_free_ char *sdir = NULL, *jp = NULL;
        _cleanup_close_ int lock = -1;
        int r = ctx_sandbox_dir(n, name, &sdir, err);
        if (r < 0)
                return r;
        if (!(jp = strprintf("%s/%s", sdir, JOURNAL_NAME)))
                return nook_err_oom(err);
        if (access(jp, F_OK) < 0)
                return 0;
        if ((r = sb_lock_how(n, name, LOCK_EX, &lock, err)) < 0)
                return r;
        return journal_recover_locked(n, name, err);
}

int nook_diff(nook *n, const char *name, unsigned flags, char **ret_json, nook_error *err) {
        _cleanup_close_ int lock = -1, tfd = -1, ref = -1;
        _cleanup_(json_decrefp) json_t *j = NULL;
        manifest *base = NULL;
        diff_result *d = NULL;
        bool layer = flags & NOOK_DIFF_ROOT;
        if (flags & ~(NOOK_DIFF_PATCH | NOOK_DIFF_ROOT))
                return nook_err_set(err, NOOK_E_INVALID, "Unknown diff flags 0x%x", flags);
        int r = sandbox_exists(n, name, NULL, err);
        if (r < 0)
                return r;
        if ((r = journal_recover(n, name, err)) < 0)
                return r;
        if ((r = sb_lock_how(n, name, LOCK_SH, &lock, err)) < 0)
                return r;
        if ((r = open_tree(n, name, layer, &tfd, &base, err)) < 0)
                return r;
        if ((r = diff_compute(tfd, base, &d, err)) < 0)
                return nook_err_wrap(err, "comparing '%s' with its baseline", name);
        ref = layer ? -1 : diff_reference_dir(n, name);
        r = diff_to_json(d, tfd, ref, flags & NOOK_DIFF_PATCH, layer, &j, err);
        diff_result_free(d);
        if (r < 0)
                return r;
        /* the names first, then what diff_to_json made */
        _cleanup_(json_decrefp) json_t *out =
                json_pack("{s:s, s:s}", "sandbox", name, "scope", layer ? "root" : "workspace");
        if (!out || json_object_update(out, j) < 0)
                return nook_err_oom(err);
        *ret_json = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
        return *ret_json ? 0 : nook_err_oom(err);
}

/* The target of a merge without "into": the branch's recorded source. */
static int merge_default_target(nook *n, const char *branch, char **ret, nook_error *err) {
        bool replaced;
        *ret = branch_source(n, branch, &replaced);
        if (replaced) {
                int r = nook_err_set(err, NOOK_E_STATE,
                        "Branch '%s' was made from a sandbox '%s' that is gone: the one of that name now was made "
                        "after the branch, so it is not the source; to merge into it anyway, pass --into %s "
                        "(\"into\" in the API)",
                        branch, *ret, *ret);
                free(*ret);
                *ret = NULL;
                return r;
        }
        if (!*ret)
                return nook_err_set(err, NOOK_E_INVALID,
                        "'%s' is not a branch (nook branch), so a merge needs a target: pass --into TARGET "
                        "(\"into\" in the API)",
                        branch);
        return 0;
}

typedef struct merge_opts {
        const char *into;
        merge_strategy strategy;
        bool dry_run;
} merge_opts;

static int merge_opts_parse(const char *text, json_t **ret_obj, merge_opts *ret, nook_error *err) {
        static const char *const fields[] = { "into", "strategy", "dryRun", NULL };
        _cleanup_(json_decrefp) json_t *o = NULL;
        const char *strategy = NULL;
        merge_opts m = { .strategy = MERGE_REFUSE };
        int r = json_parse_object(text ? text : "{}", text ? strlen(text) : 2, &o, err);
        if (r < 0)
                return r;
        r = json_check_fields(o, fields, "merge options", err);
        if (r < 0)
                return r;
        r = json_get_string(o, "into", false, &m.into, err);
        if (r < 0)
                return r;
        r = json_get_string(o, "strategy", false, &strategy, err);
        if (r < 0)
                return r;
        r = json_get_bool(o, "dryRun", false, &m.dry_run, err);
        if (r < 0)
                return r;
        if (strategy) {
                m.strategy = merge_strategy_from_string(strategy);
                if (m.strategy < 0)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Unknown merge strategy '%s': use refuse, ours or theirs", strategy);
        }
        *ret = m;
        *ret_obj = TAKE_PTR(o);
        return 0;
}

/* The branch's lock shared (as a workspace write holds it: never during `nook rm`), the target's
 * exclusive (no workspace write, stop, rm or other merge into it meanwhile; its guest may still
 * write), taken in name order so two merges in opposite directions cannot deadlock. */
static int lock_both(
        nook *n, const char *branch, const char *target, int *ret_b, int *ret_t, nook_error *err) {
        bool target_first = strcmp(target, branch) < 0;
        int r = target_first ? sb_lock_how(n, target, LOCK_EX, ret_t, err)
                             : sb_lock_how(n, branch, LOCK_SH, ret_b, err);
        if (r < 0)
                return r;
        return target_first ? sb_lock_how(n, branch, LOCK_SH, ret_b, err)
                            : sb_lock_how(n, target, LOCK_EX, ret_t, err);
}

int nook_merge(nook *n, const char *branch, const char *opts_json, char **ret_json, nook_error *err) {
        _cleanup_(json_decrefp) json_t *opts = NULL;
        _cleanup_free_ char *def = NULL, *text = NULL;
        _cleanup_close_ int la = -1, lb = -1, bfd = -1, tfd = -1;
        manifest *base = NULL;
        merge_opts o;
        int r = merge_opts_parse(opts_json, &opts, &o, err);
        if (r < 0)
                return r;
        if ((r = sandbox_exists(n, branch, NULL, err)) < 0)
                return r;
        if (!o.into) {
                if ((r = merge_default_target(n, branch, &def, err)) < 0)
                        return r;
                o.into = def;
        }
        if (streq(o.into, branch))
                return nook_err_set(
                        err, NOOK_E_INVALID, "Cannot merge '%s' into itself: name another sandbox", branch);
        if ((r = sandbox_exists(n, o.into, NULL, err)) < 0)
                return nook_err_wrap(err, "the merge target");
        /* either tree may hold the leftovers of a killed merge into it */
        if ((r = journal_recover(n, branch, err)) < 0)
                return r;
        if ((r = lock_both(n, branch, o.into, &la, &lb, err)) < 0)
                return r;
        if ((r = journal_recover_locked(n, o.into, err)) < 0)
                return r;
        _cleanup_free_ char *tws = NULL, *tsdir = NULL;
        _cleanup_close_ int tsfd = -1, jfd = -1;
        r = ctx_ws_dir(n, o.into, &tws, err);
        if (r < 0)
                return r;
        r = ctx_sandbox_dir(n, o.into, &tsdir, err);
        if (r < 0)
                return r;
        r = open_dir(tws, "the workspace", &tfd, err);
        if (r < 0)
                return r;
        /* the journal's folder: a one-shot run's is made when first needed */
        if (mkdir(tsdir, 0700) < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the state folder '%s'", tsdir);
        r = open_dir(tsdir, "the state folder", &tsfd, err);
        if (r < 0)
                return r;
        if (!o.dry_run) {
                jfd = openat(tsfd, JOURNAL_NAME,
                        O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (jfd < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s/%s'", tsdir, JOURNAL_NAME);
        }
        if ((r = open_tree(n, branch, false, &bfd, &base, err)) >= 0)
                r = merge_trees(bfd, base, tfd, jfd, o.strategy, o.dry_run, &text, err);
        /* done, or undone: the journal's job is over */
        if (jfd >= 0)
                (void)unlinkat(tsfd, JOURNAL_NAME, 0);
        if (r < 0 && r != -NOOK_E_CONFLICT)
                return nook_err_wrap(err, "merging '%s' into '%s'", branch, o.into);
        /* add the names to the report, keeping r (NOOK_E_CONFLICT sets ret_json too) */
        _cleanup_(json_decrefp) json_t *rep = text ? json_loads(text, 0, NULL) : NULL;
        _cleanup_(json_decrefp) json_t *out = json_pack("{s:s, s:s}", "branch", branch, "into", o.into);
        if (!rep || !out || json_object_update(out, rep) < 0)
                return nook_err_oom(err);
        *ret_json = json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!*ret_json)
                return nook_err_oom(err);
        return r;
}
