/* SPDX-License-Identifier: Apache-2.0 */
/* parse_duration_ms on arbitrary bytes: no crash, and an error always has a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "util/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = strndup((const char *)data, size);
        nook_error err = {};
        uint64_t ms;

        if (!s)
                return 0;
        if (parse_duration_ms(s, &ms, &err) < 0 && (err.code != NOOK_E_INVALID || !err.msg[0]))
                abort();
        free(s);
        return 0;
}
