/* SPDX-License-Identifier: Apache-2.0 */
/* parse_size and parse_memory_mib on arbitrary bytes: no crash, and success means a sane value. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "util/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = strndup((const char *)data, size);
        nook_error err = {};
        uint64_t bytes, mib;
        unsigned cpus;

        if (!s)
                return 0;
        if (parse_size(s, &bytes, &err) == 0 && parse_memory_mib(s, &mib, &err) == 0 &&
                (mib < bytes / (1u << 20) || mib > bytes / (1u << 20) + 1))
                abort();
        if (parse_cpus(s, &cpus, &err) == 0 && (cpus == 0 || cpus > PARSE_CPUS_MAX))
                abort();
        (void)parse_uint64(s, &bytes, &err);
        free(s);
        return 0;
}
