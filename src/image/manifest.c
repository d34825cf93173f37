/* SPDX-License-Identifier: Apache-2.0 */
/* Field names and media types follow the OCI image spec (image-index.md, manifest.md,
 * config.md) and Docker's manifest v2 schema 2; nothing here trusts the document. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "image/digest.h"
#include "image/manifest.h"
#include "util/error.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/str.h"

void image_desc_done(image_desc *d) {
        if (!d)
                return;
        free(d->media_type);
        free(d->digest);
        free(d->os);
        free(d->arch);
        free(d->variant);
        *d = (image_desc){};
}

void image_index_done(image_index *x) {
        for (size_t i = 0; x && i < x->n; i++)
                image_desc_done(&x->manifests[i]);
        if (x) {
                free(x->manifests);
                *x = (image_index){};
        }
}

void image_manifest_done(image_manifest *m) {
        if (!m)
                return;
        image_desc_done(&m->config);
        for (size_t i = 0; i < m->n_layers; i++)
                image_desc_done(&m->layers[i]);
        free(m->layers);
        *m = (image_manifest){};
}

void image_config_done(image_config *c) {
        if (!c)
                return;
        free(c->os);
        free(c->arch);
        free(c->variant);
        strv_free(c->env);
        strv_free(c->entrypoint);
        strv_free(c->cmd);
        free(c->workdir);
        free(c->user);
        strv_free(c->diff_ids);
        *c = (image_config){};
}

#define _cleanup_json_ _cleanup_(json_decrefp)

static int doc_load(const char *body, size_t len, const char *what, json_t **ret, nook_error *err) {
        if (len > IMAGE_DOC_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "The image %s is larger than %u bytes", what, IMAGE_DOC_MAX);
        int r = json_parse_object(body, len, ret, err);
        if (r < 0)
                return nook_err_wrap(err, "Invalid image %s", what);
        return 0;
}

bool image_layer_media_type_known(const char *mt) {
        static const char *const known[] = { MT_OCI_LAYER, MT_OCI_LAYER_GZIP, MT_OCI_LAYER_ZSTD,
                MT_DOCKER_LAYER, MT_DOCKER_FOREIGN_LAYER,
                "application/vnd.oci.image.layer.nondistributable.v1.tar",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd" };
        for (size_t i = 0; mt && i < ELEMENTSOF(known); i++)
                if (streq(mt, known[i]))
                        return true;
        return false;
}

static int kind_from_media_type(const char *mt, image_doc_kind *ret, nook_error *err) {
        if (streq(mt, MT_OCI_INDEX) || streq(mt, MT_DOCKER_LIST))
                *ret = IMAGE_DOC_INDEX;
        else if (streq(mt, MT_OCI_MANIFEST) || streq(mt, MT_DOCKER_MANIFEST))
                *ret = IMAGE_DOC_MANIFEST;
        else
                return nook_err_set(err, NOOK_E_INVALID,
                        "Unsupported manifest media type '%.200s': nook reads OCI and Docker schema 2 images",
                        mt);
        return 0;
}

int image_doc_kind_detect(
        const char *content_type, const char *body, size_t len, image_doc_kind *ret, nook_error *err) {
        _cleanup_json_ json_t *o = NULL;
        const char *mt = NULL;
        int r;

        /* registries answer generic types for documents they stored without one */
        if (!isempty(content_type) && !startswith(content_type, "application/json") &&
                !startswith(content_type, "text/plain") &&
                !startswith(content_type, "application/octet-stream")) {
                char ct[256];
                size_t n = strcspn(content_type, "; \t");
                (void)snprintf(ct, sizeof(ct), "%.*s", (int)(n < sizeof(ct) - 1 ? n : sizeof(ct) - 1),
                        content_type);
                return kind_from_media_type(ct, ret, err);
        }
        r = doc_load(body, len, "manifest", &o, err);
        if (r < 0)
                return r;
        r = json_get_string(o, "mediaType", false, &mt, err);
        if (r < 0)
                return nook_err_wrap(err, "Invalid image manifest");
        if (mt)
                return kind_from_media_type(mt, ret, err);
        if (json_object_get(o, "manifests"))
                *ret = IMAGE_DOC_INDEX;
        else if (json_object_get(o, "config") && json_object_get(o, "layers"))
                *ret = IMAGE_DOC_MANIFEST;
        else
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid image manifest: neither an index nor an image manifest");
        return 0;
}

static int desc_parse(json_t *o, const char *what, bool platform, image_desc *ret, nook_error *err) {
        _cleanup_(image_desc_done) image_desc d = {};
        const char *mt = NULL, *dg = NULL;
        int r;

        if (!json_is_object(o))
                return nook_err_set(err, NOOK_E_INVALID, "%s must be an object", what);
        r = json_get_string(o, "mediaType", false, &mt, err);
        if (r < 0)
                return nook_err_wrap(err, "%s", what);
        r = json_get_string(o, "digest", true, &dg, err);
        if (r < 0)
                return nook_err_wrap(err, "%s", what);
        r = json_get_uint64(o, "size", true, &d.size, err);
        if (r < 0)
                return nook_err_wrap(err, "%s", what);
        if (!image_digest_valid(dg))
                return nook_err_set(err, NOOK_E_INVALID,
                        "%s: digest '%.100s' is not sha256:<64 lowercase hex>", what, dg);
        if (!(d.digest = strdup(dg)) || (mt && !(d.media_type = strdup(mt))))
                return nook_err_oom(err);
        json_t *p = platform ? json_object_get(o, "platform") : NULL;
        if (json_is_object(p)) {
                const char *os = NULL, *arch = NULL, *var = NULL;
                r = json_get_string(p, "os", false, &os, err);
                if (r < 0)
                        return nook_err_wrap(err, "%s platform", what);
                r = json_get_string(p, "architecture", false, &arch, err);
                if (r < 0)
                        return nook_err_wrap(err, "%s platform", what);
                r = json_get_string(p, "variant", false, &var, err);
                if (r < 0)
                        return nook_err_wrap(err, "%s platform", what);
                if ((os && !(d.os = strdup(os))) || (arch && !(d.arch = strdup(arch))) ||
                        (var && !(d.variant = strdup(var))))
                        return nook_err_oom(err);
        }
        *ret = d;
        d = (image_desc){};
        return 0;
}

int image_index_parse(const char *body, size_t len, image_index *ret, nook_error *err) {
        _cleanup_json_ json_t *o = NULL;
        _cleanup_(image_index_done) image_index x = {};
        int r = doc_load(body, len, "index", &o, err);
        if (r < 0)
                return r;
        json_t *a = json_object_get(o, "manifests");
        if (!json_is_array(a))
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid image index: 'manifests' must be an array");
        size_t n = json_array_size(a);
        if (n > 1024)
                return nook_err_set(err, NOOK_E_INVALID, "Invalid image index: more than 1024 manifests");
        x.manifests = calloc(n ? n : 1, sizeof(image_desc));
        if (!x.manifests)
                return nook_err_oom(err);
        for (size_t i = 0; i < n; i++) {
                r = desc_parse(json_array_get(a, i), "manifest entry", true, &x.manifests[i], err);
                if (r < 0)
                        return nook_err_wrap(err, "Invalid image index");
                x.n++;
        }
        *ret = x;
        x = (image_index){};
        return 0;
}

int image_manifest_parse(const char *body, size_t len, image_manifest *ret, nook_error *err) {
        _cleanup_json_ json_t *o = NULL;
        _cleanup_(image_manifest_done) image_manifest m = {};
        int r = doc_load(body, len, "manifest", &o, err);
        if (r < 0)
                return r;
        r = desc_parse(json_object_get(o, "config"), "config", false, &m.config, err);
        if (r < 0)
                return nook_err_wrap(err, "Invalid image manifest");
        if (m.config.media_type && !streq(m.config.media_type, MT_OCI_CONFIG) &&
                !streq(m.config.media_type, MT_DOCKER_CONFIG))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Unsupported image config media type '%.200s': this is not a container image",
                        m.config.media_type);
        json_t *a = json_object_get(o, "layers");
        if (!json_is_array(a))
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid image manifest: 'layers' must be an array");
        size_t n = json_array_size(a);
        if (n > IMAGE_MAX_LAYERS)
                return nook_err_set(err, NOOK_E_INVALID, "Invalid image manifest: more than %u layers",
                        IMAGE_MAX_LAYERS);
        m.layers = calloc(n ? n : 1, sizeof(image_desc));
        if (!m.layers)
                return nook_err_oom(err);
        for (size_t i = 0; i < n; i++) {
                r = desc_parse(json_array_get(a, i), "layer", false, &m.layers[i], err);
                if (r < 0)
                        return nook_err_wrap(err, "Invalid image manifest");
                m.n_layers++;
                const char *mt = m.layers[i].media_type;
                if (!image_layer_media_type_known(mt))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Unsupported layer media type '%.200s' (layer %zu, %s)", mt ? mt : "(none)",
                                i, m.layers[i].digest);
        }
        *ret = m;
        m = (image_manifest){};
        return 0;
}

/* An optional array of strings; null and absent give an empty list. */
static int strv_field(json_t *o, const char *field, char ***ret, nook_error *err) {
        char **l = NULL;
        int r = json_get_string_array(o, field, false, &l, err);
        if (r < 0)
                return r;
        if (!l && !(l = calloc(1, sizeof(char *))))
                return nook_err_oom(err);
        *ret = l;
        return 0;
}

static int opt_string(json_t *o, const char *field, char **ret, nook_error *err) {
        const char *s = NULL;
        int r = json_get_string(o, field, false, &s, err);
        if (r < 0)
                return r;
        if (!isempty(s) && !(*ret = strdup(s)))
                return nook_err_oom(err);
        return 0;
}

/* The optional fields of a config: platform at the top, the process defaults under 'config'. */
static int config_fields(json_t *o, json_t *src, image_config *c, nook_error *err) {
        int r = opt_string(o, "os", &c->os, err);
        if (r < 0)
                return r;
        r = opt_string(o, "architecture", &c->arch, err);
        if (r < 0)
                return r;
        r = opt_string(o, "variant", &c->variant, err);
        if (r < 0)
                return r;
        r = strv_field(src, "Env", &c->env, err);
        if (r < 0)
                return r;
        r = strv_field(src, "Entrypoint", &c->entrypoint, err);
        if (r < 0)
                return r;
        r = strv_field(src, "Cmd", &c->cmd, err);
        if (r < 0)
                return r;
        r = opt_string(src, "WorkingDir", &c->workdir, err);
        if (r < 0)
                return r;
        return opt_string(src, "User", &c->user, err);
}

int image_config_parse(const char *body, size_t len, image_config *ret, nook_error *err) {
        _cleanup_json_ json_t *o = NULL;
        _cleanup_(image_config_done) image_config c = {};
        int r = doc_load(body, len, "config", &o, err);
        if (r < 0)
                return r;
        json_t *cfg = json_object_get(o, "config");
        if (cfg && !json_is_object(cfg) && !json_is_null(cfg))
                return nook_err_set(err, NOOK_E_INVALID, "Invalid image config: 'config' must be an object");
        if (!json_is_object(cfg))
                cfg = NULL;
        _cleanup_json_ json_t *empty = json_object();
        if (!empty)
                return nook_err_oom(err);
        r = config_fields(o, cfg ? cfg : empty, &c, err);
        if (r < 0)
                return nook_err_wrap(err, "Invalid image config");
        json_t *rootfs = json_object_get(o, "rootfs");
        if (!json_is_object(rootfs))
                return nook_err_set(err, NOOK_E_INVALID, "Invalid image config: 'rootfs' must be an object");
        r = strv_field(rootfs, "diff_ids", &c.diff_ids, err);
        if (r < 0)
                return nook_err_wrap(err, "Invalid image config: rootfs");
        c.n_diff_ids = strv_length(c.diff_ids);
        STRV_FOREACH (d, c.diff_ids)
                if (!image_digest_valid(*d))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid image config: diff_id '%.100s' is not sha256:<64 lowercase hex>",
                                *d);
        STRV_FOREACH (e, c.env)
                if (!strchr(*e, '='))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid image config: Env entry '%.100s' has no '='", *e);
        *ret = c;
        c = (image_config){};
        return 0;
}

void image_platform_host(image_platform *ret) {
        *ret = (image_platform){ .os = "linux" };
#if defined(__x86_64__)
        ret->arch = "amd64";
#elif defined(__aarch64__)
        ret->arch = "arm64";
        ret->variant = "v8";
#elif defined(__arm__)
        ret->arch = "arm";
        ret->variant = "v7";
#elif defined(__i386__)
        ret->arch = "386";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        ret->arch = "ppc64le";
#elif defined(__s390x__)
        ret->arch = "s390x";
#elif defined(__riscv) && __riscv_xlen == 64
        ret->arch = "riscv64";
#else
        ret->arch = "unknown";
#endif
}

static bool platform_matches(const image_desc *d, const image_platform *p) {
        if (!d->os || !d->arch || !streq(d->os, p->os) || !streq(d->arch, p->arch))
                return false;
        return !d->variant || !p->variant || streq(d->variant, p->variant);
}

int image_index_select(
        const image_index *x, const image_platform *p, const image_desc **ret, nook_error *err) {
        char offered[256] = "";
        size_t used = 0;

        for (size_t i = 0; i < x->n; i++)
                if (platform_matches(&x->manifests[i], p)) {
                        *ret = &x->manifests[i];
                        return 0;
                }
        for (size_t i = 0; i < x->n && used < sizeof(offered) - 1; i++) {
                const image_desc *d = &x->manifests[i];
                int k = snprintf(offered + used, sizeof(offered) - used, "%s%s/%s%s%s", used ? ", " : "",
                        d->os ? d->os : "?", d->arch ? d->arch : "?", d->variant ? "/" : "",
                        d->variant ? d->variant : "");
                if (k < 0)
                        break;
                used += (size_t)k;
                if (used >= sizeof(offered))
                        used = sizeof(offered) - 1;
        }
        return nook_err_set(err, NOOK_E_NOT_FOUND, "The image has no manifest for %s/%s%s%s (it offers: %s)",
                p->os, p->arch, p->variant ? "/" : "", p->variant ? p->variant : "",
                used ? offered : "nothing");
}
