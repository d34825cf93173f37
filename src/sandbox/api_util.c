/* SPDX-License-Identifier: Apache-2.0 */
/* Public wrappers over the util parsers and the host capability probe. */
#include <jansson.h>
#include <stdlib.h>

#include "nook.h"
#include "isolate/host_caps.h"
#include "util/error.h"
#include "util/parse.h"

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
