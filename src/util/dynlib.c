/* SPDX-License-Identifier: Apache-2.0 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/dynlib.h"

#if defined(__SANITIZE_ADDRESS__)
#define DYNLIB_DEEPBIND 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define DYNLIB_DEEPBIND 0
#endif
#endif
#ifndef DYNLIB_DEEPBIND
#define DYNLIB_DEEPBIND RTLD_DEEPBIND
#endif

static pthread_mutex_t dynlib_lock = PTHREAD_MUTEX_INITIALIZER;

_Noreturn static void dynlib_die(const dynlib *lib, const char *what, const char *why) {
        fprintf(stderr, "libnook: cannot load %s from %s: %s; install the '%s' package\n", what, lib->soname,
                why ? why : "unknown error", lib->package);
        abort();
}

void *dynlib_sym(dynlib *lib, const char *symbol) {
        void *h = __atomic_load_n(&lib->handle, __ATOMIC_ACQUIRE);
        if (!h) {
                (void)pthread_mutex_lock(&dynlib_lock);
                h = lib->handle;
                if (!h) {
                        /* RTLD_LOCAL: its symbols stay out of the global scope (later loads do
                         * not bind to them).  RTLD_DEEPBIND: its own references resolve within
                         * itself and its dependencies before the program's exported symbols.
                         * Node's own builds (nodejs.org, node 22 from npm) link OpenSSL 3
                         * statically and export it: without DEEPBIND, Debian's libcrypto called
                         * node's SHA256_Init from inside EVP_DigestInit_ex and crashed.  The
                         * sanitizers refuse DEEPBIND (their interceptors must come first); ASan
                         * builds never load into a foreign runtime, so they go without. */
                        h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL | DYNLIB_DEEPBIND);
                        if (h)
                                __atomic_store_n(&lib->handle, h, __ATOMIC_RELEASE);
                }
                (void)pthread_mutex_unlock(&dynlib_lock);
                if (!h)
                        dynlib_die(lib, lib->soname, dlerror());
        }
        void *p = dlsym(h, symbol);
        if (!p)
                dynlib_die(lib, symbol, dlerror());
        return p;
}
