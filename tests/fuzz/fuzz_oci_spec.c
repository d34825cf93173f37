/* SPDX-License-Identifier: Apache-2.0 */
/* nook-oci's config.json parser (src/oci/spec.c) and the linux.seccomp compiler on arbitrary
 * JSON: no crash, no leak; an accepted spec's process (when it has one) has args and an absolute
 * cwd, and its mount destinations are absolute without "..". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "oci/seccomp.h"
#include "oci/spec.h"
#include "util/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        nook_error err;
        json_t *j = NULL;
        oci_spec *s = NULL;
        if (json_parse_object((const char *)data, size, &j, &err) < 0)
                return 0;
        if (oci_spec_from_json(j, "/nonexistent-bundle", &s, &err) < 0)
                return 0;
        if (s->has_process && (!s->process.args || !s->process.args[0] || s->process.cwd[0] != '/'))
                abort();
        for (size_t i = 0; i < s->n_mounts; i++)
                if (s->mounts[i].destination[0] != '/' || strstr(s->mounts[i].destination, "/../"))
                        abort();
        if (s->seccomp) {
                oci_seccomp *f = NULL;
                if (oci_seccomp_prepare(s->seccomp, NULL, &f, &err) == 0)
                        oci_seccomp_free(f);
        }
        oci_spec_free(s);
        return 0;
}
