/* SPDX-License-Identifier: Apache-2.0 */
/* libarchive handles freed on scope exit, for every file that reads or writes tars (layers,
 * image archives, snapshots).  Not named archive.h: -Isrc/image would hide libarchive's. */
#pragma once

#include <archive.h>

static inline void archive_read_freep(struct archive **a) {
        if (*a)
                (void)archive_read_free(*a);
}

static inline void archive_write_freep(struct archive **a) {
        if (*a)
                (void)archive_write_free(*a);
}

/* libarchive's message for its last error, or def when it has none. */
static inline const char *archive_error_or(struct archive *a, const char *def) {
        return archive_error_string(a) ? archive_error_string(a) : def;
}
