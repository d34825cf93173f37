/* SPDX-License-Identifier: Apache-2.0 */
/* --format templates (src/cli/template.c) on arbitrary bytes: the first line is the template,
 * the rest a JSON row.  No crash, and a template is refused over a row iff it is refused over
 * the empty object (syntax never depends on the data). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "cli/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *nl = memchr(data, '\n', size);
        size_t tlen = nl ? (size_t)(nl - data) : size;
        char *tmpl = strndup((const char *)data, tlen);
        json_t *row = nl ? json_loadb((const char *)nl + 1, size - tlen - 1, JSON_DECODE_ANY, NULL) : NULL;
        nook_error err = {};
        char *out = NULL;

        if (!tmpl)
                return 0;
        if (!row)
                row = json_pack("{s:s, s:{s:s}}", "name", "w\n\x1b", "spec", "image", "host");
        int checked = template_check(tmpl, &err);
        int rendered = template_render(tmpl, row, &out, &err);
        if ((checked < 0) != (rendered < 0))
                abort();
        if (rendered == 0 && !out)
                abort();
        free(out);
        json_decref(row);
        free(tmpl);
        return 0;
}
