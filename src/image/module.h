/* SPDX-License-Identifier: Apache-2.0 */
/* The image module, libnook-image.so: the image code that needs libcurl, libarchive or libcrypto
 * (pulls, registry, unpack, pack, import/export, SHA-256), linked normally against them.  libnook
 * is not: linked in, those libraries (and the ~40 they bring) are mapped and relocated by every
 * process that loads libnook, which on a small VM was most of a CLI call's time.  libnook loads
 * the module on the first call through it (dlopen, RTLD_LOCAL), once per process.
 *
 * The module exports one symbol, a table of the entry points libnook calls, listed once below:
 * each by name, its type taken from the function's own declaration.  libnook calls them as
 * IMG(image_pull)(...); calling image_pull(...) directly from libnook is a link error (libnook
 * does not contain it), never a silent eager load.  A new entry point is one line here.
 *
 * The libarchive functions sandbox/copy.c and sandbox/snapshot_io.c call are in the table too:
 * those files write and read tars themselves.
 *
 * Where the module is found: $NOOK_IMAGE_MODULE; for an installed libnook (in the libdir it was
 * configured with) <libdir>/nook/; else beside libnook.so (the npm package), under
 * src/image/ (a build tree), ../src/image (a test program in the build tree) or nook/ (a
 * relocated install).  A module that cannot be loaded is a broken installation: the first call
 * prints what is missing and aborts (callers have no error path for it, as for a missing
 * libcurl). */
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include "image/digest.h"
#include "image/image.h"
#include "image/pack.h"
#include "image/transport.h"
#include "image/unpack.h"

/* Changes whenever the table changes: libnook refuses a module of another build. */
#define IMAGE_MODULE_ABI 1u

#define IMAGE_MODULE_FUNCS(X)                                                                               \
        /* image store and pulls (image.h) */                                                               \
        X(image_store_init)                                                                                 \
        X(image_store_gc)                                                                                   \
        X(image_lookup)                                                                                     \
        X(image_canonical)                                                                                  \
        X(image_pull)                                                                                       \
        X(image_resolve)                                                                                    \
        /* import/export (transport.h), pack (pack.h), unpack (unpack.h) */                                 \
        X(image_import)                                                                                     \
        X(image_export)                                                                                     \
        X(image_pack_dir)                                                                                   \
        X(image_unpack_fd)                                                                                  \
        /* SHA-256 (digest.h) */                                                                            \
        X(image_digest_buf)                                                                                 \
        X(image_hasher_new)                                                                                 \
        X(image_hasher_free)                                                                                \
        X(image_hasher_update)                                                                              \
        X(image_hasher_final)                                                                               \
        /* libarchive, for sandbox/copy.c and sandbox/snapshot_io.c */                                      \
        X(archive_read_new)                                                                                 \
        X(archive_read_free)                                                                                \
        X(archive_read_support_filter_all)                                                                  \
        X(archive_read_support_filter_zstd)                                                                 \
        X(archive_read_support_format_tar)                                                                  \
        X(archive_read_open)                                                                                \
        X(archive_read_open_fd)                                                                             \
        X(archive_read_next_header)                                                                         \
        X(archive_read_data)                                                                                \
        X(archive_filter_code)                                                                              \
        X(archive_write_new)                                                                                \
        X(archive_write_free)                                                                               \
        X(archive_write_add_filter_zstd)                                                                    \
        X(archive_write_set_format_pax_restricted)                                                          \
        X(archive_write_open_fd)                                                                            \
        X(archive_write_header)                                                                             \
        X(archive_write_data)                                                                               \
        X(archive_write_close)                                                                              \
        X(archive_error_string)                                                                             \
        X(archive_set_error)                                                                                \
        X(archive_entry_new)                                                                                \
        X(archive_entry_free)                                                                               \
        X(archive_entry_pathname)                                                                           \
        X(archive_entry_filetype)                                                                           \
        X(archive_entry_perm)                                                                               \
        X(archive_entry_size)                                                                               \
        X(archive_entry_mtime)                                                                              \
        X(archive_entry_mtime_nsec)                                                                         \
        X(archive_entry_hardlink)                                                                           \
        X(archive_entry_symlink)                                                                            \
        X(archive_entry_set_pathname)                                                                       \
        X(archive_entry_set_filetype)                                                                       \
        X(archive_entry_set_perm)                                                                           \
        X(archive_entry_set_uid)                                                                            \
        X(archive_entry_set_gid)                                                                            \
        X(archive_entry_set_size)                                                                           \
        X(archive_entry_set_mtime)                                                                          \
        X(archive_entry_set_symlink)

#define IMAGE_MODULE_FIELD_(f) __typeof__(f) *f;
typedef struct image_module {
        unsigned abi; /* IMAGE_MODULE_ABI */
        unsigned size; /* sizeof(image_module) */
        IMAGE_MODULE_FUNCS(IMAGE_MODULE_FIELD_)
} image_module;
#undef IMAGE_MODULE_FIELD_

/* The symbol the module exports. */
#define IMAGE_MODULE_SYMBOL "nook_image_module"

/* The module's table, loading it on the first call; never NULL (aborts).  Thread-safe. */
const image_module *image_mod(void);

#define IMG(f) (image_mod()->f)

/* archive_util.h's and digest.h's cleanup helpers, through the table. */
static inline void img_archive_read_freep(struct archive **a) {
        if (*a)
                (void)IMG(archive_read_free)(*a);
}

static inline void img_archive_write_freep(struct archive **a) {
        if (*a)
                (void)IMG(archive_write_free)(*a);
}

static inline const char *img_archive_error_or(struct archive *a, const char *def) {
        const char *s = IMG(archive_error_string)(a);
        return s ? s : def;
}

static inline void img_image_hasher_freep(image_hasher **h) {
        if (*h)
                *h = IMG(image_hasher_free)(*h);
}
