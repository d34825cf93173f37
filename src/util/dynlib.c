/* SPDX-License-Identifier: Apache-2.0 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/dynlib.h"

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
                         * not bind to them).  Its own references still resolve against the
                         * program's exported symbols first, as they did when linked (Node
                         * exports its OpenSSL): the same as before lazy loading. */
                        h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
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
