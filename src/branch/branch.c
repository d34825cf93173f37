/* SPDX-License-Identifier: Apache-2.0 */
/* nook branch.  The sequence, under the locks of SRC and of every new name (so nothing else
 * changes either, and no API write reaches SRC's workspace meanwhile):
 *   1. check everything: names valid, none taken, SRC a sandbox, count 1..100
 *   2. SRC running: pause it (the cgroup freezer), so its tree is one instant (no torn file)
 *   3. copy SRC's writable layer (upper), its ids moved from SRC's range to the canonical one
 *      (create moves them on into the branch's own range, as for any kept layer: ctx.c
 *      shift_kept_upper), and SRC's workspace, for each new name into a staging folder of the
 *      trash (an owned temporary: a copy killed part way is swept, never found under the name)
 *   4. resume SRC, whatever failed (a cleanup attribute)
 *   5. for each branch, rename its staged folders into place and create it through the ordinary
 *      create path (sb_create_locked), its workspace already populated, so whatever create records
 *      of it (diff's baseline) is the branch point
 *   6. any failure: every branch made so far is removed (all or nothing)
 * Ownership: a workspace holds host-canonical ids (the idmapped mount shows them to every
 * sandbox as its own), so it is copied as it is; an upper dir holds the sandbox's own range. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "branch/branch.h"
#include "branch/copytree.h"
#include "isolate/checkpoint.h"
#include "isolate/userns.h"
#include "sandbox/ctx.h"
#include "sandbox/lifecycle.h"
#include "sandbox/pause.h"
#include "sandbox/rundir.h"
#include "sandbox/spec.h"
#include "sandbox/state.h"
#include "store/store.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/path.h"
#include "util/str.h"
#include "util/testhook.h"

#define BRANCH_MAX_COUNT 100

int branch_point_now(char *buf, size_t len) {
        struct timespec ts;
        struct tm tm;
        if (clock_gettime(CLOCK_REALTIME, &ts) < 0 || !gmtime_r(&ts.tv_sec, &tm))
                return -errno;
        char day[32];
        (void)strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
        (void)snprintf(buf, len, "%s.%03dZ", day, (int)(ts.tv_nsec / 1000000 % 1000));
        return 0;
}

typedef struct branch_job {
        nook *n;
        const char *src;
        sandbox_rec rec; /* SRC's */
        char **names; /* the new names */
        size_t count;
        int *locks; /* one per new name */
        int src_lock;
        int hold; /* the control connection holding SRC's pause during the copy, or -1 */
        bool running;
        size_t made; /* branches created so far */
        char point[40];
        char *stage; /* <home>/trash/branch-XXXXXX: the copies until each is renamed into place */
        int stage_lock; /* held while we work there (util/tmpdir.h) */
} branch_job;

static void job_done(branch_job *j) {
        for (size_t i = 0; i < j->count; i++)
                safe_close(j->locks ? j->locks[i] : -1);
        free(j->locks);
        strv_free(j->names);
        safe_close(j->src_lock);
        safe_close(j->hold);
        sandbox_rec_done(&j->rec);
        if (j->stage) {
                nook_error ignore;
                (void)path_rm_rf(j->stage, &ignore); /* what was not placed: a failed branch's */
                free(j->stage);
        }
        safe_close(j->stage_lock);
}

/* Step 1 for the new names: "name" or name-1 .. name-N, each valid and free. */
static int job_names(branch_job *j, const char *name, unsigned count, nook_error *err) {
        if (count > BRANCH_MAX_COUNT)
                return nook_err_set(err, NOOK_E_INVALID, "count %u: a branch makes 1 to %d sandboxes", count,
                        BRANCH_MAX_COUNT);
        j->count = count ? count : 1;
        j->names = calloc(j->count + 1, sizeof(char *));
        j->locks = malloc(j->count * sizeof(int));
        if (!j->names || !j->locks)
                return nook_err_oom(err);
        for (size_t i = 0; i < j->count; i++)
                j->locks[i] = -1;
        for (size_t i = 0; i < j->count; i++) {
                j->names[i] = count ? strprintf("%s-%zu", name, i + 1) : strdup(name);
                if (!j->names[i])
                        return nook_err_oom(err);
                int r = name_validate("sandbox", j->names[i], err);
                if (r < 0)
                        return r;
                if (streq(j->names[i], j->src))
                        return nook_err_set(
                                err, NOOK_E_EXISTS, "Sandbox '%s' is the source of the branch", j->src);
        }
        return 0;
}

/* Step 1 for each new name: locked, no record, no state folder or workspace left. */
static int job_claim(branch_job *j, nook_error *err) {
        store *st;
        int r = ctx_store(j->n, &st, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < j->count; i++) {
                const char *nm = j->names[i];
                sandbox_rec rec = { 0 };
                _cleanup_free_ char *sdir = NULL, *wsdir = NULL;
                if ((r = sb_lock(j->n, nm, &j->locks[i], err)) < 0)
                        return r;
                r = store_sandbox_get(st, nm, &rec, err);
                sandbox_rec_done(&rec);
                if (r >= 0)
                        return nook_err_set(err, NOOK_E_EXISTS,
                                "Sandbox '%s' already exists; pick another name, or remove it with 'nook rm %s'",
                                nm, nm);
                if (r != -NOOK_E_NOT_FOUND)
                        return r;
                r = ctx_dirs(j->n, nm, &sdir, &wsdir, err);
                if (r < 0)
                        return r;
                if (access(sdir, F_OK) == 0 || access(wsdir, F_OK) == 0)
                        return nook_err_set(err, NOOK_E_EXISTS,
                                "The name '%s' has a workspace or state folder left ('%s'); remove it with 'nook rm %s'",
                                nm, access(wsdir, F_OK) == 0 ? wsdir : sdir, nm);
        }
        return 0;
}

/* Step 1 for SRC: it exists, and is running or stopped (reconciled under its lock). */
static int job_source(branch_job *j, nook_error *err) {
        store *st;
        int r = name_validate("sandbox", j->src, err);
        if (r < 0)
                return r;
        r = sb_lock(j->n, j->src, &j->src_lock, err);
        if (r < 0)
                return r;
        r = ctx_store(j->n, &st, err);
        if (r < 0)
                return r;
        r = store_sandbox_get(st, j->src, &j->rec, err);
        if (r == -NOOK_E_NOT_FOUND)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox '%s' to branch from", j->src);
        if (r < 0)
                return r;
        r = sb_reconcile(j->n, &j->rec, err);
        if (r < 0)
                return r;
        if (!streq(j->rec.state, "running") && !streq(j->rec.state, "stopped"))
                return nook_err_set(err, NOOK_E_STATE,
                        "Sandbox '%s' is %s; branch it once it is running or stopped", j->src, j->rec.state);
        j->running = streq(j->rec.state, "running");
        return 0;
}

/* Where branch i's copies are staged: <stage>/<i>/sd (its state folder) and <stage>/<i>/ws. */
static char *stage_path(const branch_job *j, size_t i, const char *what) {
        return strprintf("%s/%zu%s%s", j->stage, i, what ? "/" : "", what ? what : "");
}

/* Step 3 for branch i: SRC's upper (when it has one) and workspace into its staging folder. */
static int copy_one(branch_job *j, size_t i, uid_t src_base, nook_error *err) {
        _cleanup_free_ char *ssdir = NULL, *swsdir = NULL, *supper = NULL;
        _cleanup_free_ char *dir = stage_path(j, i, NULL), *sdir = stage_path(j, i, "sd"),
                            *wsdir = stage_path(j, i, "ws"), *upper = stage_path(j, i, "sd/upper");
        int r = ctx_dirs(j->n, j->src, &ssdir, &swsdir, err);
        if (r < 0)
                return r;
        supper = sb_upper_path(j->n, j->src, ssdir); /* an ephemeral one may be in its runtime folder */
        if (!supper || !dir || !sdir || !wsdir || !upper)
                return nook_err_oom(err);
        if (mkdir(dir, 0700) < 0 || mkdir(sdir, 0700) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", sdir);
        /* to the canonical range: create moves a kept layer found there into the branch's own */
        copytree_opts up = { .from = src_base, .to = j->n->img_uid, .range = ISO_ID_RANGE };
        if (src_base == j->n->img_uid)
                up.range = 0;
        if (access(supper, F_OK) == 0 && (r = copytree(supper, upper, &up, NULL, err)) < 0)
                return nook_err_wrap(err, "copying the root layer of '%s'", j->src);
        copytree_opts ws = { 0 };
        if (access(swsdir, F_OK) == 0 && (r = copytree(swsdir, wsdir, &ws, NULL, err)) < 0)
                return nook_err_wrap(err, "copying the workspace of '%s'", j->src);
        return 0;
}

/* Step 5 for branch i: its staged folders renamed to the new name's (job_claim saw them free). */
static int place_one(branch_job *j, size_t i, nook_error *err) {
        _cleanup_free_ char *sdir = NULL, *wsdir = NULL, *sdirs = strprintf("%s/sandboxes", j->n->home),
                            *wsdirs = strprintf("%s/workspaces", j->n->home), *ssd = stage_path(j, i, "sd"),
                            *sws = stage_path(j, i, "ws");
        int r = ctx_dirs(j->n, j->names[i], &sdir, &wsdir, err);
        if (r < 0)
                return r;
        if (!sdirs || !wsdirs || !ssd || !sws)
                return nook_err_oom(err);
        if ((r = path_mkdir_p(sdirs, 0700, err)) < 0 || (r = path_mkdir_p(wsdirs, 0711, err)) < 0)
                return r;
        if (rename(ssd, sdir) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot move the branch's state folder to '%s'", sdir);
        if (access(sws, F_OK) == 0 && rename(sws, wsdir) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot move the branch's workspace to '%s'", wsdir);
        return 0;
}

/* Removes what place_one put under a name that never got a record. */
static void uncopy_one(branch_job *j, const char *nm) {
        _cleanup_free_ char *sdir = NULL, *wsdir = NULL;
        nook_error ignore;
        if (ctx_sandbox_dir(j->n, nm, &sdir, &ignore) >= 0)
                (void)path_rm_rf(sdir, &ignore);
        if (ctx_ws_dir(j->n, nm, &wsdir, &ignore) >= 0)
                (void)path_rm_rf(wsdir, &ignore);
}

/* The staging folder: in the trash, swept there once no live owner holds it. */
static int stage_new(branch_job *j, nook_error *err) {
        return sb_trash_new(j->n, "branch", &j->stage, &j->stage_lock, err);
}

/* Steps 2-4: the copies of one instant of SRC. */
static int job_copy(branch_job *j, nook_error *err) {
        uid_t src_base = j->n->img_uid;
        gid_t src_gid;
        int r = ctx_sandbox_root(j->n, j->src, /* acquire= */ false, &src_base, &src_gid, err);
        if (r >= 0)
                r = stage_new(j, err);
        if (r < 0)
                return r;
        /* Held on a connection: if this process dies mid-copy, SRC's supervisor thaws it. */
        if (j->running && !sb_is_paused(j->n, j->src)) {
                r = sb_pause_hold(j->n, j->src, &j->hold, err);
                if (r == -NOOK_E_MISSING_FEATURE)
                        return nook_err_wrap(err,
                                "a running sandbox is paused for the instant of the copy (stop '%s' first to branch it here)",
                                j->src);
                if (r < 0)
                        return r;
        }
        (void)branch_point_now(j->point, sizeof(j->point));
        for (size_t i = 0; i < j->count && r >= 0; i++)
                r = copy_one(j, i, src_base, err);
        if (j->hold >= 0) {
                nook_error e2;
                int r2 = sb_pause_release(j->hold, j->src, &e2);
                j->hold = safe_close(j->hold); /* thaws, should the release have failed */
                if (r2 < 0 && r >= 0) {
                        *err = e2;
                        r = r2;
                }
        }
        return r; /* a failure's copies go with the staging folder (job_done) */
}

/* Step 5: SRC's spec for the branches.  Published host ports stay SRC's (two sandboxes cannot
 * hold one host port); setup files are in the copied layers already (writing them again would
 * undo what SRC changed in them since). */
static int branch_spec(branch_job *j, sb_spec *ret, nook_error *err) {
        int r = sb_spec_parse(j->rec.spec_json, ret, err);
        if (r < 0)
                return nook_err_wrap(err, "reading the spec of '%s'", j->src);
        strv_free(ret->ports);
        ret->ports = NULL;
        json_decref(ret->setup_files);
        ret->setup_files = NULL;
        return 0;
}

static int job_create(branch_job *j, nook_error *err) {
        sb_spec spec = { 0 };
        int r = branch_spec(j, &spec, err);
        if (r < 0)
                return r;
        sb_create_extra x = { .keep_upper = true,
                .image_digest = j->rec.image_digest,
                .branch_of = j->src,
                .branch_point = j->point };
        for (; j->made < j->count && r >= 0; j->made++) {
                /* branch_created(j->names[j->made]): the workspace holds the branch point now */
                r = place_one(j, j->made, err);
                if (r >= 0)
                        r = sb_create_locked(j->n, j->names[j->made], &spec, 0, &x, err);
                if (r < 0)
                        uncopy_one(j, j->names[j->made]);
        }
        sb_spec_done(&spec);
        return r;
}

/* Step 6: every branch made so far goes (their locks are dropped first: remove takes them). */
static void job_undo(branch_job *j) {
        for (size_t i = 0; i < j->count; i++) {
                nook_error ignore;
                j->locks[i] = safe_close(j->locks[i]);
                if (i < j->made)
                        (void)nook_sandbox_remove(j->n, j->names[i], &ignore);
        }
}

/* A branch of a stopped sandbox stays stopped: it went through create (one code path, one
 * baseline), and is stopped once every branch exists. */
static int job_stop_all(branch_job *j, nook_error *err) {
        for (size_t i = 0; i < j->count; i++) {
                j->locks[i] = safe_close(j->locks[i]);
                /* at once: a branch just made runs nothing but its init */
                int r = nook_sandbox_stop(j->n, j->names[i], 0, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static char *names_json(branch_job *j) {
        json_t *a = json_array();
        for (size_t i = 0; a && i < j->count; i++)
                json_array_append_new(a, json_string(j->names[i]));
        char *t = a ? json_dumps(a, JSON_COMPACT) : NULL;
        json_decref(a);
        return t;
}

int nook_branch(nook *n, const char *src, const char *name, unsigned count, unsigned flags, char **ret_json,
        nook_error *err) {
        _cleanup_(job_done)
                branch_job j = { .n = n, .src = src, .src_lock = -1, .hold = -1, .stage_lock = -1 };
        int r;
        if (flags & NOOK_BRANCH_MEMORY) {
                /* the same cause nook checkpoint and nook doctor name (docs/design/checkpoint.md) */
                char why[400];
                if (!iso_checkpoint_supported(why, sizeof(why), NULL))
                        return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                                "Cannot branch with memory: %s; see 'nook doctor'", why);
                return nook_err_set(err, NOOK_E_MISSING_FEATURE, "Memory branches are not in nook yet");
        }
        if (flags)
                return nook_err_set(err, NOOK_E_INVALID, "Unknown branch flags 0x%x", flags);
        if (!src || !name)
                return nook_err_set(err, NOOK_E_INVALID, "A branch needs a source and a new name");
        r = job_names(&j, name, count, err);
        if (r >= 0)
                r = job_source(&j, err);
        if (r >= 0)
                r = job_claim(&j, err);
        if (r >= 0)
                r = job_copy(&j, err);
        test_kill_at("NOOK_TEST_BRANCH_KILL_AT", "copied"); /* the copies staged, none in place */
        if (r >= 0) {
                j.src_lock = safe_close(j.src_lock); /* SRC is free again: the copies are made */
                r = job_create(&j, err);
        }
        if (r >= 0 && !j.running)
                r = job_stop_all(&j, err);
        if (r < 0) {
                job_undo(&j);
                return nook_err_wrap(err, "branching '%s' to '%s'", src, name);
        }
        if (ret_json) {
                char *t = names_json(&j);
                if (!t) {
                        job_undo(&j);
                        return nook_err_oom(err);
                }
                *ret_json = t;
        }
        return 0;
}
