/* SPDX-License-Identifier: Apache-2.0 */
/* Public wrappers over the util parsers and the host capability probe. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "isolate/host_caps.h"
#include "isolate/idmap.h"
#include "isolate/userns.h"
#include "sandbox/ctx.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/parse.h"
#include "util/path.h"

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
        json_t *o = json_pack("{s:b, s:s, s:b, s:o}", "ok", ok, "kernel", c.kernel, "rootless", c.rootless,
                "checks", checks);
        char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!t)
                return nook_err_oom(err);
        *ret_json = t;
        return ok ? 1 : 0;
}
