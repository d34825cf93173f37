/* SPDX-License-Identifier: Apache-2.0 */
/* Public nook_image_* functions over src/image and the image records. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "image/image.h"
#include "image/module.h"
#include "image/manifest.h"
#include "image/transport.h"
#include "isolate/userns.h"
#include "sandbox/state.h"
#include "sandbox/ctx.h"
#include "store/image_rec.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/str.h"

void nook_pull_opts_init(nook_pull_opts *o) {
        *o = (nook_pull_opts){};
}

static const char *layer_state_name(image_layer_state s) {
        switch (s) {
        case IMAGE_LAYER_WAITING:
                return "waiting";
        case IMAGE_LAYER_DOWNLOADING:
                return "downloading";
        case IMAGE_LAYER_UNPACKING:
                return "unpacking";
        case IMAGE_LAYER_DONE:
                return "done";
        case IMAGE_LAYER_CACHED:
                return "cached";
        case _IMAGE_LAYER_STATE_MAX:
        default:
                return "unknown";
        }
}

typedef struct progress_relay {
        const nook_pull_opts *o;
} progress_relay;

static void relay(void *userdata, const image_layer_progress *l, size_t n) {
        const progress_relay *p = userdata;
        nook_pull_layer out[IMAGE_MAX_LAYERS];
        for (size_t i = 0; i < n && i < IMAGE_MAX_LAYERS; i++)
                out[i] = (nook_pull_layer){ .digest = l[i].digest,
                        .done = l[i].done,
                        .total = l[i].total,
                        .state = layer_state_name(l[i].state) };
        p->o->progress(p->o->userdata, out, n);
}

static json_t *strv_json(char **l) {
        json_t *a = json_array();
        STRV_FOREACH (s, l)
                json_array_append_new(a, json_string(*s));
        return a;
}

static json_t *image_json(const image_rec *rec) {
        image_config c = {};
        nook_error ignored;
        json_t *cfg = NULL, *cmd = NULL;
        if (image_config_parse(rec->config_json, strlen(rec->config_json), &c, &ignored) >= 0) {
                cfg = json_pack("{s:o, s:o, s:o, s:s?, s:s?}", "env", strv_json(c.env), "entrypoint",
                        strv_json(c.entrypoint), "cmd", strv_json(c.cmd), "workdir", c.workdir, "user",
                        c.user);
                cmd = strv_json(c.entrypoint);
                STRV_FOREACH (a, c.cmd)
                        json_array_append_new(cmd, json_string(*a));
        }
        image_config_done(&c);
        json_t *layers = json_array();
        for (size_t i = 0; i < rec->n_layers; i++)
                json_array_append_new(layers,
                        json_pack("{s:s, s:s, s:I, s:s?}", "digest", rec->layers[i].digest, "diffId",
                                rec->layers[i].diff_id, "size", (json_int_t)rec->layers[i].size, "mediaType",
                                rec->layers[i].media_type));
        return json_pack("{s:s, s:o, s:s?, s:I, s:I, s:o, s:o, s:o}", "digest", rec->digest, "names",
                strv_json(rec->refs), "platform", rec->platform, "size", (json_int_t)rec->size, "pulledAt",
                (json_int_t)rec->pulled_at, "config", cfg ? cfg : json_object(), "defaultCommand",
                cmd ? cmd : json_array(), "layers", layers);
}

static int dump(json_t *j, char **ret, nook_error *err) {
        char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!t)
                return nook_err_oom(err);
        *ret = t;
        return 0;
}

int nook_image_pull(nook *n, const char *ref, const nook_pull_opts *o, char **ret_json, nook_error *err) {
        _cleanup_(image_store_done) image_store s = {};
        _cleanup_(image_rec_done) image_rec rec = {};
        _cleanup_strv_free_ char **insecure = NULL;
        nook_pull_opts none = {};
        if (!o)
                o = &none;
        progress_relay pr = { .o = o };
        image_pull_opts po = { .reg = { .username = o->username,
                                       .password = o->password,
                                       .auth_file = o->auth_file,
                                       .ca_file = o->ca_file,
                                       .insecure = o->insecure_registries,
                                       .stall_timeout_ms = o->stall_timeout_ms },
                .progress = o->progress ? relay : NULL,
                .userdata = &pr,
                .jobs = o->jobs };
        image_pull_opts_from_env(&po, &insecure);
        int r = sb_image_store(n, &s, err);
        if (r < 0)
                return r;
        r = IMG(image_pull)(&s, ref, &po, &rec, err);
        if (r < 0)
                return r;
        return ret_json ? dump(image_json(&rec), ret_json, err) : 0;
}

int nook_image_list(nook *n, char **ret_json, nook_error *err) {
        store *st;
        image_rec *a = NULL;
        size_t k = 0;
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        r = store_image_list(st, &a, &k, err);
        if (r < 0)
                return r;
        json_t *arr = json_array();
        for (size_t i = 0; i < k; i++)
                json_array_append_new(arr, image_json(&a[i]));
        image_rec_array_free(a, k);
        return dump(arr, ret_json, err);
}

/* "host" names nook's built-in image everywhere an image is given: not a stored one, so not
 * "docker.io/library/host:latest, pull it first" (which no pull would help). */
static int not_builtin(const char *ref, const char *what, nook_error *err) {
        if (ref && streq(ref, "host"))
                return nook_err_set(err, NOOK_E_INVALID,
                        "'host' is nook's built-in image (the host's /usr, read-only, and a generated /etc), "
                        "not a stored one: there is nothing to %s",
                        what);
        return 0;
}

int nook_image_inspect(nook *n, const char *ref, char **ret_json, nook_error *err) {
        _cleanup_(image_store_done) image_store s = {};
        _cleanup_(image_rec_done) image_rec rec = {};
        int r = not_builtin(ref, "inspect", err);
        if (r < 0)
                return r;
        r = sb_image_store(n, &s, err);
        if (r < 0)
                return r;
        r = IMG(image_lookup)(&s, ref, &rec, err);
        if (r < 0)
                return r;
        return dump(image_json(&rec), ret_json, err);
}

int nook_image_remove(nook *n, const char *ref, nook_error *err) {
        _cleanup_free_ char *name = NULL;
        store *st;
        int r = not_builtin(ref, "remove", err);
        if (r < 0)
                return r;
        r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        r = IMG(image_canonical)(ref, &name, err);
        if (r < 0)
                return r;
        r = store_image_remove(st, name, err);
        return r < 0 ? r : 0;
}

int nook_image_prune(nook *n, uint64_t *ret_freed, nook_error *err) {
        _cleanup_(image_store_done) image_store s = {};
        int r = sb_image_store(n, &s, err);
        if (r < 0)
                return r;
        sb_sweep_tmp(n); /* snapshots' too: a killed snapshot create leaves its folder there */
        return IMG(image_store_gc)(&s, ret_freed, err);
}

void nook_image_import_opts_init(nook_image_import_opts *o) {
        *o = (nook_image_import_opts){};
}

void nook_image_export_opts_init(nook_image_export_opts *o) {
        *o = (nook_image_export_opts){};
}

static int format_parse(const char *s, image_archive_format *ret, nook_error *err) {
        *ret = s ? image_archive_format_from_string(s) : _IMAGE_FORMAT_INVALID;
        if (s && *ret < 0)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Unknown image format '%s': expected oci, oci-archive or docker-archive", s);
        return 0;
}

int nook_image_import(
        nook *n, const char *source, const nook_image_import_opts *o, char **ret_json, nook_error *err) {
        _cleanup_(image_store_done) image_store s = {};
        _cleanup_(image_rec_done) image_rec rec = {};
        nook_image_import_opts none = {};
        if (!o)
                o = &none;
        nook_pull_opts relayed = { .progress = o->progress, .userdata = o->userdata };
        progress_relay pr = { .o = &relayed };
        image_import_opts io = { .name = o->name,
                .pull = { .progress = o->progress ? relay : NULL, .userdata = &pr, .jobs = o->jobs } };
        int r = format_parse(o->format, &io.format, err);
        if (r < 0)
                return r;
        r = sb_image_store(n, &s, err);
        if (r < 0)
                return r;
        r = IMG(image_import)(&s, source, &io, &rec, err);
        if (r < 0)
                return r;
        return ret_json ? dump(image_json(&rec), ret_json, err) : 0;
}

int nook_image_export(
        nook *n, const char *ref, const char *path, const nook_image_export_opts *o, nook_error *err) {
        _cleanup_(image_store_done) image_store s = {};
        image_export_opts eo = { .force = o && o->force };
        int r = not_builtin(ref, "export", err);
        if (r < 0)
                return r;
        r = format_parse(o ? o->format : NULL, &eo.format, err);
        if (r < 0)
                return r;
        r = sb_image_store(n, &s, err);
        if (r < 0)
                return r;
        return IMG(image_export)(&s, ref, path, &eo, err);
}
