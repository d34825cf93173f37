/* SPDX-License-Identifier: Apache-2.0 */
/* The image code libnook runs itself, without loading the image module (module.h): names of
 * pull policies, registry options from the environment, removing an unpacked tree, and the
 * syntax of a digest.  A create from the host image or a plain directory and a remove need
 * these and nothing of libcurl, libarchive or libcrypto. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/unpack.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/str.h"

static const char *const pull_policy_table[_IMAGE_PULL_POLICY_MAX] = {
        [IMAGE_PULL_ALWAYS] = "always",
        [IMAGE_PULL_IF_MISSING] = "if-missing",
        [IMAGE_PULL_NEVER] = "never",
};

const char *image_pull_policy_to_string(image_pull_policy p) {
        return p >= 0 && p < _IMAGE_PULL_POLICY_MAX ? pull_policy_table[p] : NULL;
}

image_pull_policy image_pull_policy_from_string(const char *s) {
        for (int i = 0; s && i < _IMAGE_PULL_POLICY_MAX; i++)
                if (streq(s, pull_policy_table[i]))
                        return (image_pull_policy)i;
        return _IMAGE_PULL_POLICY_INVALID;
}

void image_pull_opts_from_env(image_pull_opts *o, char ***ret_insecure) {
        char **l = NULL;
        const char *e = secure_getenv("NOOK_INSECURE_REGISTRIES");
        if (!o->reg.insecure && !isempty(e)) {
                _cleanup_free_ char *copy = strdup(e);
                char *save = NULL;
                for (char *t = copy ? strtok_r(copy, ", ", &save) : NULL; t; t = strtok_r(NULL, ", ", &save))
                        (void)strv_push(&l, t);
                o->reg.insecure = (const char *const *)l;
        }
        const char *ca = secure_getenv("NOOK_REGISTRY_CA_FILE");
        if (!o->reg.ca_file && !isempty(ca))
                o->reg.ca_file = ca;
        *ret_insecure = l;
}

void image_resolved_done(image_resolved *r) {
        strv_free(r->lowers);
        strv_free(r->env);
        strv_free(r->cmd);
        free(r->workdir);
        free(r->user);
        *r = (image_resolved){};
}

void image_store_done(image_store *s) {
        free(s->root);
        free(s->layers);
        *s = (image_store){};
}

/* ---- digests ------------------------------------------------------------------------------ */

bool image_digest_valid(const char *d) {
        if (!d || !startswith(d, "sha256:") || strlen(d) != IMAGE_DIGEST_LEN)
                return false;
        for (const char *p = d + 7; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

const char *image_digest_hex(const char *d) {
        return d + 7;
}
