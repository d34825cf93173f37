/* SPDX-License-Identifier: Apache-2.0 */
/* egress_rule_parse on arbitrary bytes (first line), then the matcher on the rest as a request
 * target: no crash, no leak, and a parsed rule is self-consistent. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "egress/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = strndup((const char *)data, size);
        nook_error err = {};
        egress_rule *r = NULL;

        if (!s)
                return 0;
        char *nl = strchr(s, '\n');
        const char *target = "/";
        if (nl) {
                *nl = 0;
                target = nl + 1;
        }
        if (egress_rule_parse(s, &r, &err) == 0) {
                if (!r || !r->text || !r->host || !r->path_glob || r->path_glob[0] != '/' || r->port == 0 ||
                        r->port > 65535 || strstr(r->path_glob, "**"))
                        abort();
                (void)egress_rule_match(
                        r, r->method ? r->method : "GET", r->https, r->host, r->port, target);
                egress_rule_free(r);
        } else if (r || err.code != NOOK_E_INVALID || !err.msg[0])
                abort();
        (void)egress_target_is_normal(target);
        (void)egress_glob_match(s, target);
        (void)egress_host_match(s, target);
        free(s);
        return 0;
}
