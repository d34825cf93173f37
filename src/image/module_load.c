/* SPDX-License-Identifier: Apache-2.0 */
/* Finds and loads libnook-image.so once (module.h says where and why). */
#include <dlfcn.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "image/module.h"
#include "util/dynlib.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"

#define MODULE_NAME "libnook-image.so"

static dynlib module_lib = { .package = "nook" };
static pthread_once_t module_once = PTHREAD_ONCE_INIT;
static const image_module *module_table;

static char *module_path(void) {
        const char *e = secure_getenv("NOOK_IMAGE_MODULE");
        if (!isempty(e))
                return strdup(e);
        Dl_info info;
        if (dladdr((void *)module_path, &info) && info.dli_fname) {
                _cleanup_free_ char *copy = strdup(info.dli_fname);
                if (!copy)
                        return NULL;
                const char *d = dirname(copy);
                if (path_same(d, NOOK_LIBDIR))
                        return strdup(NOOK_LIBDIR "/nook/" MODULE_NAME);
                const char *cands[] = { MODULE_NAME, "src/image/" MODULE_NAME, "../src/image/" MODULE_NAME,
                        "nook/" MODULE_NAME };
                for (size_t i = 0; i < ELEMENTSOF(cands); i++) {
                        char *p = strprintf("%s/%s", d, cands[i]);
                        if (p && access(p, R_OK) == 0)
                                return p;
                        free(p);
                }
        }
        return strdup(NOOK_LIBDIR "/nook/" MODULE_NAME);
}

static void module_load(void) {
        char *path = module_path(); /* kept: dynlib's messages name it */
        if (!path) {
                fputs("libnook: out of memory loading the image module\n", stderr);
                abort();
        }
        module_lib.soname = path;
        const image_module *t = dynlib_sym(&module_lib, IMAGE_MODULE_SYMBOL);
        if (t->abi != IMAGE_MODULE_ABI || t->size != sizeof(image_module)) {
                fprintf(stderr,
                        "libnook: the image module %s is of another nook build (table version %u, size %u; "
                        "this libnook needs %u, %zu): reinstall nook\n",
                        path, t->abi, t->size, IMAGE_MODULE_ABI, sizeof(image_module));
                abort();
        }
        module_table = t;
}

const image_module *image_mod(void) {
        (void)pthread_once(&module_once, module_load);
        return module_table;
}
