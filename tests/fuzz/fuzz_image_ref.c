/* SPDX-License-Identifier: Apache-2.0 */
/* image_ref_parse on arbitrary bytes: no crash, and an accepted reference re-parses to itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "image/ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = strndup((const char *)data, size);
        image_ref r = {}, again = {};
        nook_error err = {};
        if (s && image_ref_parse(s, &r, &err) == 0) {
                char *c = image_ref_to_string(&r);
                if (!c || image_ref_parse(c, &again, &err) != 0 ||
                        strcmp(r.repository, again.repository) != 0)
                        abort();
                free(c);
        }
        image_ref_done(&r);
        image_ref_done(&again);
        free(s);
        return 0;
}
