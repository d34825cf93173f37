/* SPDX-License-Identifier: Apache-2.0 */
/* The nook handle (open, close) and public wrappers over the util parsers and the host
 * capability probe. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "config.h"
#include "isolate/host_caps.h"
#include "isolate/userns.h"
#include "sandbox/ctx.h"
#include "sandbox/state.h"
#include "util/error.h"
#include "util/parse.h"
#include "util/path.h"
#include "util/str.h"

const char *nook_version(void) {
        return NOOK_VERSION;
}

void nook_free(void *p) {
        free(p);
}

int nook_open(const char *home, nook **ret, nook_error *err) {
        _cleanup_free_ char *h = NULL;
        int r;

        if (home) {
                if (home[0] != '/')
                        return nook_err_set(err, NOOK_E_INVALID,
                                "The state folder must be an absolute path, got '%s'", home);
                h = strdup(home);
                if (!h)
                        return nook_err_oom(err);
        } else {
                r = path_home_default(&h, err);
                if (r < 0)
                        return r;
        }
        /* The state root holds every sandbox's data: nobody else may look in. */
        r = path_mkdir_p(h, 0700, err);
        if (r < 0)
                return nook_err_wrap(err, "opening the state folder");
        nook *n = calloc(1, sizeof(*n));
        if (!n)
                return nook_err_oom(err);
        n->home = TAKE_PTR(h);
        iso_sandbox_root_ids(&n->ws_uid, &n->ws_gid);
        *ret = n;
        return 0;
}

nook *nook_close(nook *n) {
        sb_children_reap();
        if (!n)
                return NULL;
        n->st = store_free(n->st);
        free(n->home);
        free(n);
        return NULL;
}

const char *nook_home(const nook *n) {
        return n->home;
}

int nook_parse_duration_ms(const char *s, uint64_t *ret_ms, nook_error *err) {
        return parse_duration_ms(s, ret_ms, err);
}

int nook_parse_size(const char *s, uint64_t *ret_bytes, nook_error *err) {
        return parse_size(s, ret_bytes, err);
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
        json_t *o = json_pack("{s:b, s:s, s:b, s:o}", "ok", ok, "kernel", c.kernel, "rootless", c.rootless,
                "checks", checks);
        char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!t)
                return nook_err_oom(err);
        *ret_json = t;
        return ok ? 1 : 0;
}
