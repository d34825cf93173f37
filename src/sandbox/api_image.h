/* SPDX-License-Identifier: Apache-2.0 */
/* The image store of a nook handle, for this process's mode (rootful or rootless). */
#pragma once

#include "nook.h"
#include "image/image.h"

int sb_image_store(nook *n, image_store *ret, nook_error *err);
