/* SPDX-License-Identifier: Apache-2.0 */
/* The baseline manifest parser (src/tree/manifest.c): whatever the bytes, an accepted manifest
 * holds only valid relative paths in strict order, and formats back to exactly its input. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "image/module.h"
#include "tree/manifest.h"

/* manifest.c hashes files through the image module; parsing and formatting never do, so the
 * harness has no module to load: reaching this is a bug in the parser's isolation. */
const image_module *image_mod(void) {
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        nook_error err = {};
        manifest *m = NULL;
        char *out = NULL;
        size_t len = 0;

        int r = manifest_parse((const char *)data, size, &m, &err);
        if (r < 0) {
                assert(r == -NOOK_E_INVALID || r == -NOOK_E_NOMEM);
                return 0;
        }
        for (size_t i = 0; i < m->n; i++) {
                assert(mf_path_valid(m->e[i].path, strlen(m->e[i].path)));
                assert(i == 0 || strcmp(m->e[i - 1].path, m->e[i].path) < 0);
        }
        assert(manifest_format(m, &out, &len, &err) == 0);
        assert(len == size && memcmp(out, data, size) == 0);
        free(out);
        manifest_free(m);
        return 0;
}
