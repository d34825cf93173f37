/* SPDX-License-Identifier: Apache-2.0 */
/* See layout.h.  Field names follow the OCI image-layout spec and Docker's image/tarexport
 * (manifest.json); nothing here trusts the document. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "image/layout.h"
#include "image/manifest.h"
#include "util/error.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/str.h"

#define MAX_ENTRIES 1024u
#define MAX_PATH_LEN 4096u

static const char *const format_table[_IMAGE_FORMAT_MAX] = {
        [IMAGE_FORMAT_OCI] = "oci",
        [IMAGE_FORMAT_OCI_ARCHIVE] = "oci-archive",
        [IMAGE_FORMAT_DOCKER_ARCHIVE] = "docker-archive",
};

const char *image_archive_format_to_string(image_archive_format f) {
        return f >= 0 && f < _IMAGE_FORMAT_MAX ? format_table[f] : NULL;
}

image_archive_format image_archive_format_from_string(const char *s) {
        for (int i = 0; s && i < _IMAGE_FORMAT_MAX; i++)
                if (streq(s, format_table[i]))
                        return (image_archive_format)i;
        return _IMAGE_FORMAT_INVALID;
}

void layout_index_done(layout_index *x) {
        for (size_t i = 0; x && i < x->n; i++) {
                image_desc_done(&x->entries[i].desc);
                free(x->entries[i].ref_name);
                free(x->entries[i].image_name);
        }
        if (x) {
                free(x->entries);
                *x = (layout_index){};
        }
}

void docker_manifest_done(docker_manifest *m) {
        for (size_t i = 0; m && i < m->n; i++) {
                free(m->entries[i].config);
                strv_free(m->entries[i].repo_tags);
                strv_free(m->entries[i].layers);
        }
        if (m) {
                free(m->entries);
                *m = (docker_manifest){};
        }
}

bool archive_path_valid(const char *p) {
        if (isempty(p) || p[0] == '/' || strlen(p) > MAX_PATH_LEN)
                return false;
        for (const char *c = p; *c;) {
                size_t n = strcspn(c, "/");
                if (n == 2 && strneq(c, "..", 2))
                        return false;
                c += n;
                c += *c == '/';
        }
        return true;
}

static int annotation(json_t *entry, const char *key, char **ret, nook_error *err) {
        json_t *a = json_object_get(entry, "annotations"), *v;
        if (!a || json_is_null(a))
                return 0;
        if (!json_is_object(a))
                return nook_err_set(err, NOOK_E_INVALID, "field 'annotations' must be an object");
        if (!(v = json_object_get(a, key)))
                return 0;
        if (!json_is_string(v) || isempty(json_string_value(v)))
                return nook_err_set(err, NOOK_E_INVALID, "annotation '%s' must be a non-empty string", key);
        return (*ret = strdup(json_string_value(v))) ? 0 : nook_err_oom(err);
}

/* The two names an index entry may carry. */
static int entry_annotations(json_t *entry, layout_entry *e, nook_error *err) {
        int r = annotation(entry, ANNOTATION_REF_NAME, &e->ref_name, err);
        if (r < 0)
                return r;
        return annotation(entry, ANNOTATION_IMAGE_NAME, &e->image_name, err);
}

int layout_index_parse(const char *body, size_t len, layout_index *ret, nook_error *err) {
        _cleanup_(image_index_done) image_index descs = {};
        _cleanup_(layout_index_done) layout_index x = {};
        json_t *o = NULL;
        int r = image_index_parse(body, len, &descs, err);
        if (r < 0)
                return nook_err_wrap(err, "Invalid index.json");
        r = json_parse_object(body, len, &o, err);
        if (r < 0)
                return nook_err_wrap(err, "Invalid index.json");
        json_t *a = json_object_get(o, "manifests");
        if (!(x.entries = calloc(descs.n ? descs.n : 1, sizeof(layout_entry)))) {
                json_decref(o);
                return nook_err_oom(err);
        }
        for (size_t i = 0; r >= 0 && i < descs.n; i++) {
                layout_entry *e = &x.entries[x.n++];
                e->desc = descs.manifests[i];
                descs.manifests[i] = (image_desc){};
                const char *mt = e->desc.media_type;
                if (!mt ||
                        !(streq(mt, MT_OCI_MANIFEST) || streq(mt, MT_DOCKER_MANIFEST) ||
                                streq(mt, MT_OCI_INDEX) || streq(mt, MT_DOCKER_LIST)))
                        r = nook_err_set(err, NOOK_E_INVALID,
                                "Invalid index.json: entry %zu (%s) has media type '%.200s', neither an image manifest nor an index",
                                i, e->desc.digest, mt ? mt : "(none)");
                else if ((r = entry_annotations(json_array_get(a, i), e, err)) < 0)
                        (void)nook_err_wrap(err, "Invalid index.json: entry %zu", i);
        }
        json_decref(o);
        if (r < 0)
                return r;
        *ret = x;
        x = (layout_index){};
        return 0;
}

/* A path in entry i's field: a string that stays inside the archive. */
static int path_value(json_t *v, size_t i, const char *field, char **ret, nook_error *err) {
        if (!json_is_string(v))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid manifest.json: entry %zu: field '%s' must be a string", i, field);
        if (!archive_path_valid(json_string_value(v)))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Invalid manifest.json: entry %zu: path '%.200s' in '%s' leaves the archive (absolute, empty or with '..')",
                        i, json_string_value(v), field);
        return (*ret = strdup(json_string_value(v))) ? 0 : nook_err_oom(err);
}

static int docker_entry_parse(json_t *o, size_t i, docker_entry *e, nook_error *err) {
        json_t *layers = json_object_get(o, "Layers"), *tags = json_object_get(o, "RepoTags"), *v;
        size_t k;
        int r;
        if (!json_is_object(o))
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid manifest.json: entry %zu must be an object", i);
        if ((r = path_value(json_object_get(o, "Config"), i, "Config", &e->config, err)) < 0)
                return r;
        if (!json_is_array(layers) || json_array_size(layers) > IMAGE_MAX_LAYERS)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid manifest.json: entry %zu: field 'Layers' must be an array of at most %u paths",
                        i, IMAGE_MAX_LAYERS);
        if (tags && !json_is_null(tags) && !json_is_array(tags))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid manifest.json: entry %zu: field 'RepoTags' must be an array", i);
        if (!(e->repo_tags = calloc(1, sizeof(char *))) || !(e->layers = calloc(1, sizeof(char *))))
                return nook_err_oom(err);
        json_array_foreach(json_is_array(tags) ? tags : NULL, k, v) {
                if (!json_is_string(v) || isempty(json_string_value(v)))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid manifest.json: entry %zu: RepoTags[%zu] must be a non-empty string",
                                i, k);
                if (strv_push(&e->repo_tags, json_string_value(v)) < 0)
                        return nook_err_oom(err);
        }
        json_array_foreach(layers, k, v) {
                _cleanup_free_ char *p = NULL;
                if ((r = path_value(v, i, "Layers", &p, err)) < 0)
                        return r;
                if (strv_push(&e->layers, p) < 0)
                        return nook_err_oom(err);
                e->n_layers++;
        }
        return 0;
}

int docker_manifest_parse(const char *body, size_t len, docker_manifest *ret, nook_error *err) {
        _cleanup_(docker_manifest_done) docker_manifest m = {};
        json_error_t je;
        if (len > (size_t)IMAGE_DOC_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "manifest.json is larger than %u bytes", IMAGE_DOC_MAX);
        json_t *a = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
        if (!a)
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid manifest.json: %s (line %d)", je.text, je.line);
        int r = 0;
        size_t n = json_array_size(a);
        if (!json_is_array(a) || n == 0 || n > MAX_ENTRIES)
                r = nook_err_set(err, NOOK_E_INVALID,
                        "Invalid manifest.json: it must be an array of 1 to %u images", MAX_ENTRIES);
        else if (!(m.entries = calloc(n, sizeof(docker_entry))))
                r = nook_err_oom(err);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = docker_entry_parse(json_array_get(a, i), i, &m.entries[m.n++], err);
        json_decref(a);
        if (r < 0)
                return r;
        *ret = m;
        m = (docker_manifest){};
        return 0;
}
