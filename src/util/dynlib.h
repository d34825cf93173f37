/* SPDX-License-Identifier: Apache-2.0 */
/* Libraries loaded on first use.  libnook needs libcurl, libarchive and libcrypto only to pull,
 * unpack, pack and hash images and snapshots; linked normally they (and the ~40 libraries they
 * bring) are mapped and relocated by every process that loads libnook, which on a small VM is
 * most of a CLI call's time.  src/image/lazy_*.c define the functions nook calls from them, each
 * forwarding to the real one resolved here on its first call.
 *
 * A library that cannot be loaded is a broken installation: the first call prints what is
 * missing and which package provides it, then aborts (there is no error path in a libcurl or
 * libarchive signature to report it through).  Thread-safe. */
#pragma once

typedef struct dynlib {
        const char *soname; /* e.g. "libcurl.so.4" */
        const char *package; /* the Debian package that ships it, for the message */
        void *handle; /* set once, under the loader's lock */
} dynlib;

/* The address of symbol in lib, loading lib first if needed; never NULL (aborts). */
void *dynlib_sym(dynlib *lib, const char *symbol);

/* Resolves the function `name` of lib once and caches it in a static pointer of its own type. */
#define DYNLIB_FN(lib, name)                                                                                \
        ({                                                                                                  \
                static __typeof__(name) *fn_;                                                               \
                __typeof__(name) *f_ = __atomic_load_n(&fn_, __ATOMIC_ACQUIRE);                             \
                if (!f_) {                                                                                  \
                        f_ = (__typeof__(name) *)dynlib_sym(&(lib), #name);                                 \
                        __atomic_store_n(&fn_, f_, __ATOMIC_RELEASE);                                       \
                }                                                                                           \
                f_;                                                                                         \
        })
