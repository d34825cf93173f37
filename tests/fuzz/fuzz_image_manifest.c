/* SPDX-License-Identifier: Apache-2.0 */
/* The index, manifest and config parsers on arbitrary bytes: no crash, no leak, and every
 * digest they accept is a valid sha256 digest (it becomes a file name). */
#include <stdint.h>
#include <stdlib.h>

#include "nook.h"
#include "image/digest.h"
#include "image/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *s = (const char *)data;
        nook_error err = {};
        image_doc_kind k;
        image_index x = {};
        image_manifest m = {};
        image_config c = {};
        (void)image_doc_kind_detect(NULL, s, size, &k, &err);
        if (image_index_parse(s, size, &x, &err) == 0)
                for (size_t i = 0; i < x.n; i++)
                        if (!image_digest_valid(x.manifests[i].digest))
                                abort();
        if (image_manifest_parse(s, size, &m, &err) == 0)
                for (size_t i = 0; i < m.n_layers; i++)
                        if (!image_digest_valid(m.layers[i].digest))
                                abort();
        (void)image_config_parse(s, size, &c, &err);
        image_index_done(&x);
        image_manifest_done(&m);
        image_config_done(&c);
        return 0;
}
