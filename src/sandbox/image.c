/* SPDX-License-Identifier: Apache-2.0 */
/* From a spec's image field to what the supervisor mounts: "host" and root filesystem
 * directories are local (image_local.c); anything else is a reference into the image store,
 * pulled when missing (the default policy, if-missing). */
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "image/digest.h"
#include "image/module.h"
#include "image/image.h"
#include "sandbox/state.h"
#include "sandbox/ctx.h"
#include "sandbox/image.h"
#include "sandbox/image_local.h"
#include "store/image_rec.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/str.h"

void sb_image_done(sb_image *img) {
        strv_free(img->lowers);
        strv_free(img->ro_binds);
        strv_free(img->env);
        strv_free(img->cmd);
        free(img->workdir);
        free(img->user);
        free(img->digest);
        memset(img, 0, sizeof(*img));
}

static int registry_image(
        nook *n, const char *image, image_pull_policy policy, sb_image *ret, nook_error *err) {
        _cleanup_(image_store_done) image_store s = {};
        _cleanup_(image_resolved_done) image_resolved res = {};
        _cleanup_strv_free_ char **insecure = NULL;
        _cleanup_(image_rec_done) image_rec rec = {};
        image_pull_opts po = {};
        image_pull_opts_from_env(&po, &insecure);
        int r = sb_image_store(n, &s, err);
        if (r < 0)
                return r;
        /* Which image the reference names (pulled first per the policy), then that image by its
         * digest: the digest recorded for the sandbox is the one its layers come from, even if
         * another pull moves the tag in between. */
        r = policy == IMAGE_PULL_ALWAYS && !image_digest_valid(image)
                ? -NOOK_E_NOT_FOUND
                : IMG(image_lookup)(&s, image, &rec, err);
        if (r == -NOOK_E_NOT_FOUND && policy != IMAGE_PULL_NEVER && !image_digest_valid(image)) {
                image_rec_done(&rec);
                r = IMG(image_pull)(&s, image, &po, &rec, err);
        }
        if (r < 0)
                return r;
        r = IMG(image_resolve)(&s, rec.digest, IMAGE_PULL_NEVER, &po, &res, err);
        if (r < 0)
                return r;
        sb_image img = { .digest = strdup(rec.digest) };
        if (!img.digest)
                return nook_err_oom(err);
        img.lowers = TAKE_PTR(res.lowers);
        img.env = TAKE_PTR(res.env);
        img.cmd = TAKE_PTR(res.cmd);
        img.workdir = TAKE_PTR(res.workdir);
        img.user = TAKE_PTR(res.user);
        *ret = img;
        if (!(ret->ro_binds = calloc(1, sizeof(char *)))) {
                sb_image_done(ret);
                return nook_err_oom(err);
        }
        return 0;
}

int sb_image_resolve(nook *n, const char *image, const char *pull_policy, sb_image *ret, nook_error *err) {
        sb_image img = { 0 };
        if (!streq(image, "host") && image[0] != '/') {
                image_pull_policy p =
                        image_pull_policy_from_string(pull_policy ? pull_policy : "if-missing");
                if (p < 0)
                        return nook_err_set(err, NOOK_E_INVALID, "Unknown pull policy '%s'", pull_policy);
                return registry_image(n, image, p, ret, err);
        }
        int r = sb_image_local(n->home, image, n->img_uid, n->img_gid, &img.lowers, &img.ro_binds, err);
        if (r < 0)
                return r;
        *ret = img;
        return 0;
}
