/* SPDX-License-Identifier: Apache-2.0 */
/* A shared object loaded on first use.  libnook loads its image module (image/module.h), which
 * links libcurl, libarchive and libcrypto, this way: linked into libnook they (and the ~40
 * libraries they bring) would be mapped and relocated by every process that loads libnook, which
 * on a small VM is most of a CLI call's time.
 *
 * An object that cannot be loaded is a broken installation: the first call prints what is
 * missing and which package provides it, then aborts.  Thread-safe. */
#pragma once

typedef struct dynlib {
        const char *soname; /* a SONAME or a path, as dlopen takes it */
        const char *package; /* the Debian package that ships it, for the message */
        void *handle; /* set once, under the loader's lock */
} dynlib;

/* The address of symbol in lib, loading lib first if needed; never NULL (aborts). */
void *dynlib_sym(dynlib *lib, const char *symbol);
