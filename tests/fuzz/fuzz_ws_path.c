/* SPDX-License-Identifier: Apache-2.0 */
/* Workspace paths (src/workspace/ws_path.c): whatever the bytes, an accepted path is relative and
 * has no ".." segment, and a refusal is one of the two documented codes. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "util/macro.h"
#include "workspace/ws.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        nook_error err = {};
        char *rel = NULL;

        int r = ws_path_normalize_len((const char *)data, size, &rel, &err);
        if (r < 0) {
                assert(r == -NOOK_E_INVALID || r == -NOOK_E_REFUSED);
                return 0;
        }
        assert(rel[0] != '/');
        assert(!strstr(rel, "//") && !streq(rel, "..") && strncmp(rel, "../", 3) != 0);
        assert(!strstr(rel, "/../") && (strlen(rel) < 3 || strcmp(rel + strlen(rel) - 3, "/..") != 0));
        free(rel);
        return 0;
}
