/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox spec parser (what the CLI, the Node binding and Smithers hand to libnook) on
 * arbitrary bytes: no crash, no leak, and an accepted spec round-trips through its JSON form. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "sandbox/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = strndup((const char *)data, size);
        nook_error err = {};
        sb_spec spec = {};

        if (!text)
                return 0;
        if (sb_spec_parse(text, &spec, &err) == 0) {
                char *again = sb_spec_to_json(&spec);
                sb_spec back = {};
                /* what we store must parse again: a record must never become unreadable */
                if (!again || sb_spec_parse(again, &back, &err) < 0)
                        abort();
                sb_spec_done(&back);
                free(again);
        } else if (err.code == NOOK_E_OK || !err.msg[0])
                abort(); /* a refusal always says why */
        sb_spec_done(&spec);
        free(text);
        return 0;
}
