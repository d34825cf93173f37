/* SPDX-License-Identifier: Apache-2.0 */
/* The one symbol libnook-image.so exports (module.h). */
#include "image/module.h"

#define IMAGE_MODULE_ENTRY_(f) .f = f,
__attribute__((visibility("default"))) extern const image_module nook_image_module;
const image_module nook_image_module = {
        .abi = IMAGE_MODULE_ABI, .size = sizeof(image_module), IMAGE_MODULE_FUNCS(IMAGE_MODULE_ENTRY_)
};
