/* SPDX-License-Identifier: Apache-2.0 */
/* The image archive documents on arbitrary bytes: an OCI layout's index.json and docker save's
 * manifest.json.  No crash, no leak; every digest accepted is a valid sha256 digest and every
 * path accepted stays inside the archive (both become file names under the layout's root). */
#include <stdint.h>
#include <stdlib.h>

#include "nook.h"
#include "image/digest.h"
#include "image/layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *s = (const char *)data;
        nook_error err = {};
        layout_index x = {};
        docker_manifest m = {};
        if (layout_index_parse(s, size, &x, &err) == 0)
                for (size_t i = 0; i < x.n; i++)
                        if (!image_digest_valid(x.entries[i].desc.digest))
                                abort();
        if (docker_manifest_parse(s, size, &m, &err) == 0)
                for (size_t i = 0; i < m.n; i++) {
                        if (!archive_path_valid(m.entries[i].config))
                                abort();
                        for (size_t k = 0; k < m.entries[i].n_layers; k++)
                                if (!archive_path_valid(m.entries[i].layers[k]))
                                        abort();
                }
        layout_index_done(&x);
        docker_manifest_done(&m);
        return 0;
}
