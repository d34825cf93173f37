/* SPDX-License-Identifier: Apache-2.0 */
/* json_parse_object and every getter on a spec-shaped document. */
#include <stdint.h>
#include <stdlib.h>

#include "nook.h"
#include "util/json.h"
#include "util/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const fields[] = { "image", "memoryMib", "sticky", "args", "env", "network",
                NULL };
        nook_error err = {};
        json_t *j = NULL, *net = NULL;
        const char *s;
        uint64_t u;
        bool b;
        char **l = NULL;

        if (json_parse_object((const char *)data, size, &j, &err) < 0)
                return 0;
        (void)json_check_fields(j, fields, "spec", &err);
        (void)json_get_string(j, "image", false, &s, &err);
        (void)json_get_uint64(j, "memoryMib", false, &u, &err);
        (void)json_get_bool(j, "sticky", false, &b, &err);
        if (json_get_string_array(j, "args", false, &l, &err) > 0)
                l = strv_free(l);
        if (json_get_string_map(j, "env", false, &l, &err) > 0)
                l = strv_free(l);
        if (json_get_object(j, "network", false, &net, &err) > 0 &&
                json_get_string_array(net, "allow", false, &l, &err) > 0)
                l = strv_free(l);
        json_decref(j);
        return 0;
}
