/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "sandbox/ctx.h"
#include "sandbox/image.h"
#include "sandbox/image_local.h"
#include "util/error.h"
#include "util/macro.h"

void sb_image_done(sb_image *img) {
        strv_free(img->lowers);
        strv_free(img->ro_binds);
        strv_free(img->env);
        strv_free(img->cmd);
        free(img->workdir);
        free(img->user);
        memset(img, 0, sizeof(*img));
}

int sb_image_resolve(nook *n, const char *image, sb_image *ret, nook_error *err) {
        sb_image img = { 0 };
        int r = sb_image_local(n->home, image, n->ws_uid, n->ws_gid, &img.lowers, &img.ro_binds, err);
        if (r < 0)
                return r;
        *ret = img;
        return 0;
}
