/* SPDX-License-Identifier: Apache-2.0 */
/* The nook handle (open, close) and public wrappers over the util parsers and the host
 * capability probe. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "config.h"
#include "isolate/checkpoint.h"
#include "isolate/host_caps.h"
#include "isolate/idmap.h"
#include "isolate/userns.h"
#include "sandbox/ctx.h"
#include "sandbox/egress.h"
#include "sandbox/state.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/parse.h"
#include "util/path.h"
#include "util/str.h"

const char *nook_version(void) {
        return NOOK_VERSION;
}

void nook_free(void *p) {
        free(p);
}

int nook_home_resolve(const char *home, char **ret_path, nook_error *err) {
        char *h;

        if (!home)
                return path_home_default(ret_path, err);
        if (home[0] != '/')
                return nook_err_set(
                        err, NOOK_E_INVALID, "The state folder must be an absolute path, got '%s'", home);
        h = strdup(home);
        if (!h)
                return nook_err_oom(err);
        *ret_path = h;
        return 0;
}

int nook_open(const char *home, nook **ret, nook_error *err) {
        _cleanup_free_ char *h = NULL;
        int r;

        r = nook_home_resolve(home, &h, err);
        if (r < 0)
                return r;
        /* The state root holds every sandbox's data: nobody else may look in. */
        r = path_mkdir_p(h, 0700, err);
        if (r < 0)
                return nook_err_wrap(err, "opening the state folder");
        bool shared = false;
        const char *allow = getenv("NOOK_ALLOW_SHARED_HOME");
        r = ctx_home_check(h, allow && streq(allow, "1"), &shared, err);
        if (r < 0)
                return r;
        struct stat hst;
        if (stat(h, &hst) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat the state folder '%s'", h);
        nook *n = calloc(1, sizeof(*n));
        if (!n)
                return nook_err_oom(err);
        n->home = TAKE_PTR(h);
        iso_sandbox_root_ids(&n->img_uid, &n->img_gid);
        n->ws_uid = n->img_uid;
        n->ws_gid = n->img_gid;
        /* A shared state folder keeps the shared range: idmapped, the guest root's setuid files in
         * a workspace would be the host owner's, and others could run them. */
        n->idmap = !shared && iso_idmap_supported(n->home, &n->idmap_why);
        if (shared && iso_rootful())
                n->idmap_why = "the state folder is shared (NOOK_ALLOW_SHARED_HOME=1)";
        if (n->idmap) {
                n->ws_uid = hst.st_uid;
                n->ws_gid = hst.st_gid;
        }
        *ret = n;
        return 0;
}

nook *nook_close(nook *n) {
        sb_children_reap();
        if (!n)
                return NULL;
        n->st = store_free(n->st);
        /* A tied sandbox's supervisor sees its lifeline close and stops it. */
        for (size_t i = 0; i < n->n_lifelines; i++) {
                (void)close(n->lifelines[i].fd);
                free(n->lifelines[i].name);
        }
        free(n->lifelines);
        /* a removal nobody waited for: the supervisor sees its client gone (sup.c, finish) */
        for (size_t i = 0; i < n->n_stop_conns; i++) {
                (void)close(n->stop_conns[i].fd);
                free(n->stop_conns[i].name);
        }
        free(n->stop_conns);
        free(n->home);
        free(n->run_root);
        free(n);
        return NULL;
}

const char *nook_home(const nook *n) {
        return n->home;
}

bool nook_text_is_utf8(const char *s, size_t *ret_off) {
        return str_is_utf8(s, ret_off);
}

int nook_parse_signal(const char *s, int *ret_sig, nook_error *err) {
        return parse_signal(s, ret_sig, err);
}

int nook_parse_duration_ms(const char *s, uint64_t *ret_ms, nook_error *err) {
        return parse_duration_ms(s, ret_ms, err);
}

int nook_parse_size(const char *s, uint64_t *ret_bytes, nook_error *err) {
        return parse_size(s, ret_bytes, err);
}

/* Rows about the state folder ($NOOK_HOME or the default): whether others can enter it, and
 * whether its sandboxes each get their own host id range (docs/design/security.md). */
static void identity_rows(json_t *checks) {
        _cleanup_free_ char *home = NULL;
        const char *env = getenv("NOOK_HOME");
        nook_error e;
        if (env && *env)
                home = strdup(env);
        else
                (void)path_home_default(&home, &e);
        if (!home)
                return;
        bool shared = false;
        const char *why = NULL;
        int r = ctx_home_check(home, /* allow= */ true, &shared, &e);
        if (r >= 0)
                json_array_append_new(checks,
                        json_pack("{s:s, s:b, s:b, s:s, s:s?}", "name", "private state folder", "ok",
                                !shared, "required", false, "detail",
                                shared ? "other users can enter the state folder (refused unless --allow-shared-home)"
                                       : "only its owner can enter the state folder",
                                "fix", shared ? "chmod 0700 the state folder" : NULL));
        bool per = r >= 0 && !shared && iso_idmap_supported(home, &why);
        if (r >= 0 && shared && iso_rootful())
                why = "the state folder is shared";
        char detail[300];
        if (per)
                (void)snprintf(detail, sizeof(detail),
                        "each sandbox gets its own host id range (65536 ids from %u up); workspace and volumes are idmapped",
                        ISO_IDPOOL_FIRST);
        else if (!iso_rootful())
                (void)snprintf(detail, sizeof(detail),
                        "rootless: every sandbox's root is your own uid (one id mapped), as before");
        else
                (void)snprintf(detail, sizeof(detail),
                        "shared: every sandbox's root is host uid %u, workspace and volumes are plain binds (%s)",
                        ISO_ROOTFUL_ID_BASE, why ? why : "state folder not found");
        json_array_append_new(checks,
                json_pack("{s:s, s:b, s:b, s:s, s:s?}", "name", "sandbox identity", "ok", per, "required",
                        false, "detail", detail, "fix",
                        per ? NULL
                                : !iso_rootful()
                                ? "run as root for per-sandbox identities and idmapped mounts"
                                : "Linux >= 5.19 with a state folder on ext4, xfs, btrfs or tmpfs (6.3+), not shared"));
}

/* nook pause (and branching a running sandbox, which pauses it for the copy) needs a freezer. */
static void pause_row(json_t *checks) {
        char reason[4200] = "";
        bool ok = iso_cgroup_freezer_available(reason, sizeof(reason));
        json_array_append_new(checks,
                json_pack("{s:s, s:b, s:b, s:s, s:s?}", "name", "pause (cgroup freezer)", "ok", ok,
                        "required", false, "detail",
                        ok ? "nook pause, and nook branch of a running sandbox, can freeze sandboxes"
                           : reason,
                        "fix",
                        ok ? NULL
                           : "run as root, or delegate a cgroup v2 subtree to this user (systemd: Delegate=yes); a stopped sandbox can still be branched"));
}

/* Memory checkpoints (nook checkpoint): never ok today; the detail is the cause on this host,
 * the same sentence nook_checkpoint's refusal carries. */
static void checkpoint_row(json_t *checks) {
        char why[400];
        const char *fix = NULL;
        bool ok = iso_checkpoint_supported(why, sizeof(why), &fix);
        json_array_append_new(checks,
                json_pack("{s:s, s:b, s:b, s:s, s:s?}", "name", "memory checkpoints", "ok", ok, "required",
                        false, "detail", why, "fix", ok ? NULL : fix));
}

/* --secret, --allow-http and --egress-audit start nook-egress: is it where create will look? */
static void egress_row(json_t *checks) {
        _cleanup_free_ char *program = sb_libexec_find("nook-egress", "egress", "NOOK_EGRESS");
        bool ok = program && access(program, X_OK) == 0;
        _cleanup_free_ char *detail = ok
                ? strprintf("%s: --secret, --allow-http and --egress-audit work", program)
                : strprintf("no nook-egress at %s: --secret, --allow-http and "
                            "--egress-audit are refused",
                          program ? program : "(unknown)");
        json_array_append_new(checks,
                json_pack("{s:s, s:b, s:b, s:s, s:s?}", "name", "egress gateway", "ok", ok, "required",
                        false, "detail", detail ? detail : "out of memory", "fix",
                        ok ? NULL
                           : "install nook's nook-egress beside nook-supervisor, or point NOOK_EGRESS at it"));
}

int nook_doctor(char **ret_json, nook_error *err) {
        host_caps c;
        host_cap_row rows[HOST_CAPS_ROWS_MAX];
        int r = host_caps_probe(&c, err);
        if (r < 0)
                return r;
        size_t n = host_caps_rows(&c, rows, HOST_CAPS_ROWS_MAX);
        bool ok = true;
        json_t *checks = json_array();
        for (size_t i = 0; i < n; i++) {
                if (rows[i].required && !rows[i].ok)
                        ok = false;
                json_array_append_new(checks,
                        json_pack("{s:s, s:b, s:b, s:s, s:s?}", "name", rows[i].name, "ok", rows[i].ok,
                                "required", rows[i].required, "detail", rows[i].detail, "fix",
                                rows[i].ok ? NULL : rows[i].fix));
        }
        identity_rows(checks);
        pause_row(checks);
        checkpoint_row(checks);
        egress_row(checks);
        json_t *o = json_pack("{s:b, s:s, s:b, s:o}", "ok", ok, "kernel", c.kernel, "rootless", c.rootless,
                "checks", checks);
        char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!t)
                return nook_err_oom(err);
        *ret_json = t;
        return ok ? 1 : 0;
}
