/* SPDX-License-Identifier: Apache-2.0 */
/* Import and export of image files (see transport.h).
 *
 * Import: a tar (oci-archive or docker save) is first unpacked into a private directory under
 * images/tmp, holding only directories, regular files and symlinks (any other member type, an
 * absolute name or a ".." component refuses the archive); a layout directory is read in place.  From
 * there both shapes are read the same way, every path opened component by component with
 * O_NOFOLLOW from the layout's root, so a symlink never leads a read out of it.  The chosen
 * manifest and config go to image_store_add with a blob source that copies each layer blob from
 * its file, hashing it; the store verifies, unpacks and records exactly as for a pull.
 *
 * A docker save tar of the old shape has no manifest: one is made (OCI, config and layers as the
 * archive holds them, media types from the layers' compression), deterministic, so the same
 * archive always gives the same image digest.  When a tar has both an OCI layout and
 * manifest.json (docker save since 25, and nook's own docker-archive export), the layout wins:
 * it keeps the manifest, so export then import gives back the same digest.
 *
 * Export: the stored manifest, config and layer blobs (the store keeps every blob as pulled)
 * as an OCI layout, in a directory or a tar; docker-archive adds manifest.json naming the same
 * blob files, which `docker load` and skopeo read.  Written under a temporary name beside the
 * target, then renamed: without --force with RENAME_NOREPLACE, with it by RENAME_EXCHANGE and
 * removing what was there, so a symlink at the target is replaced, never followed. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/archive_util.h"
#include "nook.h"
#include "image/transport.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/layout.h"
#include "image/manifest.h"
#include "image/unpack.h"
#include "store/image_rec.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"

#define IO_BUF ((size_t)256 * 1024)
#define MAX_MEMBERS 100000u
#define OCI_LAYOUT_JSON "{\"imageLayoutVersion\":\"1.0.0\"}"

static const char *aerr(struct archive *a) {
        return archive_error_or(a, "libarchive error");
}

/* ---- reading inside a layout ------------------------------------------------------------------------ */

/* Opens rel (archive_path_valid) under root_fd without following any symlink; it must be a
 * regular file.  ret_size may be NULL. */
static int open_member(int root_fd, const char *rel, int *ret_fd, uint64_t *ret_size, nook_error *err) {
        _cleanup_free_ char *copy = strdup(rel);
        _cleanup_close_ int cur = -1;
        struct stat st;
        if (!copy)
                return nook_err_oom(err);
        if (!archive_path_valid(rel))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Path '%.200s' leaves the image (absolute, empty or with '..')", rel);
        char *save = NULL, *comp = strtok_r(copy, "/", &save), *next;
        for (; comp && (next = strtok_r(NULL, "/", &save)); comp = next) {
                if (streq(comp, "."))
                        continue;
                int fd = openat(
                        cur >= 0 ? cur : root_fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return errno == ENOENT
                                ? nook_err_set(
                                          err, NOOK_E_NOT_FOUND, "'%.200s' is missing from the image", rel)
                                : nook_err_errno(err, NOOK_E_REFUSED,
                                          "Cannot open '%.200s' in the image (a directory on the way is a symlink or a file)",
                                          rel);
                safe_close(cur);
                cur = fd;
        }
        int dfd = cur >= 0 ? cur : root_fd;
        if (!comp || fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "'%.200s' is missing from the image", rel);
        if (S_ISLNK(st.st_mode))
                return nook_err_set(
                        err, NOOK_E_REFUSED, "'%.200s' in the image is a symlink: refusing it", rel);
        if (!S_ISREG(st.st_mode))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "'%.200s' in the image is not a regular file: refusing it", rel);
        _cleanup_close_ int fd = openat(dfd, comp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return nook_err_errno(
                        err, NOOK_E_REFUSED, "Cannot open '%.200s' in the image as a regular file", rel);
        if (ret_size)
                *ret_size = (uint64_t)st.st_size;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int read_member(int root_fd, const char *rel, char **ret, size_t *ret_len, nook_error *err) {
        _cleanup_close_ int fd = -1;
        uint64_t size;
        int r = open_member(root_fd, rel, &fd, &size, err);
        if (r < 0)
                return r;
        if (size > (uint64_t)IMAGE_DOC_MAX)
                return nook_err_set(err, NOOK_E_INVALID,
                        "'%.200s' in the image is larger than %u bytes: refusing it", rel, IMAGE_DOC_MAX);
        r = fd_read_to_end(fd, (size_t)IMAGE_DOC_MAX, ret, ret_len, err);
        return r < 0 ? nook_err_wrap(err, "Cannot read '%.200s' in the image", rel) : 0;
}

static char *blob_rel(const char *digest) {
        return strprintf("blobs/sha256/%s", image_digest_hex(digest));
}

/* A document blob (index, manifest, config) of an OCI layout, checked against its descriptor. */
static int read_blob_doc(int root_fd, const image_desc *d, char **ret, size_t *ret_len, nook_error *err) {
        _cleanup_free_ char *rel = blob_rel(d->digest), *body = NULL;
        char got[IMAGE_DIGEST_LEN + 1];
        size_t len = 0;
        int r;
        if (!rel)
                return nook_err_oom(err);
        if (d->size > (uint64_t)IMAGE_DOC_MAX)
                return nook_err_set(err, NOOK_E_INVALID, "Blob %s is larger than %u bytes: refusing it",
                        d->digest, IMAGE_DOC_MAX);
        r = read_member(root_fd, rel, &body, &len, err);
        if (r < 0)
                return r;
        r = image_digest_buf(body, len, got, err);
        if (r < 0)
                return r;
        if (len != d->size || !streq(got, d->digest))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Digest mismatch for blob %s in the image (got %s, %zu bytes; the descriptor says %llu)",
                        d->digest, got, len, (unsigned long long)d->size);
        *ret = TAKE_PTR(body);
        *ret_len = len;
        return 0;
}

/* Layer blobs for image_store_add: digest -> file under the layout, copied with a hash check. */
typedef struct local_source {
        int root_fd;
        char **digests, **paths; /* docker save: the layer files by digest; NULL for a layout */
} local_source;

static int local_get(void *userdata, const char *digest, uint64_t size, int fd,
        registry_progress_fn progress, void *progress_userdata, nook_error *err) {
        const local_source *ls = userdata;
        _cleanup_free_ char *rel = NULL;
        _cleanup_close_ int in = -1;
        for (size_t i = 0; ls->digests && ls->digests[i] && !rel; i++)
                if (streq(ls->digests[i], digest))
                        rel = strdup(ls->paths[i]);
        if (!rel && !(rel = blob_rel(digest)))
                return nook_err_oom(err);
        int r = open_member(ls->root_fd, rel, &in, NULL, err);
        if (r < 0)
                return nook_err_wrap(err, "layer %s", digest);
        return image_blob_copy(in, digest, size, "the image", fd, progress, progress_userdata, err);
}

/* ---- choosing the image ---------------------------------------------------------------------------- */

/* A name the user would write: the full reference, not a bare tag ("v1", "latest"). */
static bool full_name(const char *s) {
        return s && (strchr(s, '/') || strchr(s, ':') || strchr(s, '@'));
}

static char *names_of(const layout_index *x) {
        char *l = strdup("");
        for (size_t i = 0; l && i < x->n; i++) {
                const char *nm =
                        x->entries[i].image_name ? x->entries[i].image_name : x->entries[i].ref_name;
                char *n = strprintf("%s%s'%s'", l, i ? ", " : "", nm ? nm : x->entries[i].desc.digest);
                free(l);
                l = n;
        }
        return l;
}

static int oci_pick(const layout_index *x, const char *ref, const layout_entry **ret, nook_error *err) {
        for (size_t i = 0; ref && i < x->n; i++)
                if ((x->entries[i].ref_name && streq(x->entries[i].ref_name, ref)) ||
                        (x->entries[i].image_name && streq(x->entries[i].image_name, ref))) {
                        *ret = &x->entries[i];
                        return 0;
                }
        if (!ref && x->n == 1) {
                *ret = &x->entries[0];
                return 0;
        }
        _cleanup_free_ char *names = names_of(x);
        if (!names)
                return nook_err_oom(err);
        if (x->n == 0)
                return nook_err_set(err, NOOK_E_INVALID, "index.json lists no image");
        if (ref)
                return nook_err_set(err, NOOK_E_NOT_FOUND,
                        "No image named '%s' in index.json (it has %.300s)", ref, names);
        return nook_err_set(err, NOOK_E_INVALID,
                "index.json lists %zu images (%.300s): choose one with oci:DIR:NAME or oci-archive:FILE:NAME",
                x->n, names);
}

typedef struct picked {
        char *manifest, *config;
        size_t manifest_len, config_len;
        char *name; /* from the archive, or NULL */
        char *bare_tag; /* a ref.name that is only a tag, for the error asking for --name */
        local_source src;
} picked;

static void picked_done(picked *p) {
        free(p->manifest);
        free(p->config);
        free(p->name);
        free(p->bare_tag);
        strv_free(p->src.digests);
        strv_free(p->src.paths);
        *p = (picked){};
}

/* The manifest for this host behind an index entry (one level, as a pull follows). */
static int oci_manifest(int root_fd, const layout_entry *e, picked *p, nook_error *err) {
        image_doc_kind kind;
        int r = read_blob_doc(root_fd, &e->desc, &p->manifest, &p->manifest_len, err);
        if (r < 0)
                return r;
        r = image_doc_kind_detect(e->desc.media_type, p->manifest, p->manifest_len, &kind, err);
        if (r < 0)
                return r;
        if (kind == IMAGE_DOC_INDEX) {
                _cleanup_(image_index_done) image_index x = {};
                const image_desc *d;
                image_platform plat;
                image_platform_host(&plat);
                r = image_index_parse(p->manifest, p->manifest_len, &x, err);
                if (r < 0)
                        return r;
                r = image_index_select(&x, &plat, &d, err);
                if (r < 0)
                        return r;
                free(p->manifest);
                p->manifest = NULL;
                r = read_blob_doc(root_fd, d, &p->manifest, &p->manifest_len, err);
                if (r < 0)
                        return r;
                r = image_doc_kind_detect(d->media_type, p->manifest, p->manifest_len, &kind, err);
                if (r < 0)
                        return r;
                if (kind != IMAGE_DOC_MANIFEST)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "The image index points at another index (%s): nook follows one level",
                                d->digest);
        }
        return 0;
}

static int oci_read(int root_fd, const char *ref, picked *p, nook_error *err) {
        _cleanup_(layout_index_done) layout_index x = {};
        _cleanup_(image_manifest_done) image_manifest m = {};
        _cleanup_free_ char *layout = NULL, *index = NULL;
        _cleanup_(json_decrefp) json_t *lo = NULL;
        json_error_t je;
        const layout_entry *e;
        size_t len = 0;
        int r;
        if ((r = read_member(root_fd, "oci-layout", &layout, &len, err)) < 0)
                return r;
        lo = json_loadb(layout, len, 0, &je);
        if (!json_is_string(json_object_get(lo, "imageLayoutVersion")))
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid oci-layout file: it needs an 'imageLayoutVersion'");
        r = read_member(root_fd, "index.json", &index, &len, err);
        if (r < 0)
                return r;
        r = layout_index_parse(index, len, &x, err);
        if (r < 0)
                return r;
        r = oci_pick(&x, ref, &e, err);
        if (r < 0)
                return r;
        r = oci_manifest(root_fd, e, p, err);
        if (r < 0)
                return r;
        r = image_manifest_parse(p->manifest, p->manifest_len, &m, err);
        if (r < 0)
                return r;
        r = read_blob_doc(root_fd, &m.config, &p->config, &p->config_len, err);
        if (r < 0)
                return r;
        const char *nm = e->image_name ? e->image_name : full_name(e->ref_name) ? e->ref_name : NULL;
        if ((nm && !(p->name = strdup(nm))) || (!nm && e->ref_name && !(p->bare_tag = strdup(e->ref_name))))
                return nook_err_oom(err);
        p->src.root_fd = root_fd;
        return 0;
}

/* docker save: the media type of a layer file from its first bytes. */
static const char *sniff_layer(const unsigned char *b, size_t n) {
        if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
                return MT_OCI_LAYER_GZIP;
        if (n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd)
                return MT_OCI_LAYER_ZSTD;
        return MT_OCI_LAYER;
}

/* Digest, size and media type of a layer file. */
static int layer_desc(
        int root_fd, const char *rel, json_t **ret, char digest[IMAGE_DIGEST_LEN + 1], nook_error *err) {
        _cleanup_(image_hasher_freep) image_hasher *h = image_hasher_new();
        _cleanup_free_ unsigned char *buf = malloc(IO_BUF);
        _cleanup_close_ int fd = -1;
        unsigned char head[4] = {};
        uint64_t size = 0;
        size_t nhead = 0;
        if (!h || !buf)
                return nook_err_oom(err);
        int r = open_member(root_fd, rel, &fd, NULL, err);
        if (r < 0)
                return r;
        for (;;) {
                ssize_t k = read(fd, buf, IO_BUF);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read '%.200s' in the image", rel);
                if (k == 0)
                        break;
                for (ssize_t i = 0; i < k && nhead < sizeof(head); i++)
                        head[nhead++] = buf[i];
                image_hasher_update(h, buf, (size_t)k);
                size += (uint64_t)k;
        }
        image_hasher_final(h, digest);
        *ret = json_pack("{s:s, s:s, s:I}", "mediaType", sniff_layer(head, nhead), "digest", digest, "size",
                (json_int_t)size);
        return *ret ? 0 : nook_err_oom(err);
}

static int docker_pick(
        const docker_manifest *m, const char *ref, const docker_entry **ret, nook_error *err) {
        for (size_t i = 0; ref && i < m->n; i++)
                STRV_FOREACH (t, m->entries[i].repo_tags) {
                        _cleanup_free_ char *a = NULL, *b = NULL;
                        nook_error ignored;
                        if (streq(*t, ref) ||
                                (image_canonical(*t, &a, &ignored) >= 0 &&
                                        image_canonical(ref, &b, &ignored) >= 0 && streq(a, b))) {
                                *ret = &m->entries[i];
                                return 0;
                        }
                }
        if (!ref && m->n == 1) {
                *ret = &m->entries[0];
                return 0;
        }
        if (ref)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No image tagged '%s' in manifest.json", ref);
        return nook_err_set(err, NOOK_E_INVALID,
                "manifest.json lists %zu images: choose one with docker-archive:FILE:NAME (a RepoTag)",
                m->n);
}

/* The manifest docker save does not write, made from what manifest.json names. */
static int docker_read(int root_fd, const char *ref, picked *p, nook_error *err) {
        _cleanup_(docker_manifest_done) docker_manifest dm = {};
        _cleanup_free_ char *body = NULL;
        _cleanup_(json_decrefp) json_t *layers = json_array(), *man = NULL;
        char cdg[IMAGE_DIGEST_LEN + 1];
        const docker_entry *e;
        size_t len = 0;
        int r;
        if (!layers || !(p->src.digests = calloc(1, sizeof(char *))) ||
                !(p->src.paths = calloc(1, sizeof(char *))))
                return nook_err_oom(err);
        r = read_member(root_fd, "manifest.json", &body, &len, err);
        if (r < 0)
                return r;
        r = docker_manifest_parse(body, len, &dm, err);
        if (r < 0)
                return r;
        r = docker_pick(&dm, ref, &e, err);
        if (r < 0)
                return r;
        r = read_member(root_fd, e->config, &p->config, &p->config_len, err);
        if (r < 0)
                return r;
        r = image_digest_buf(p->config, p->config_len, cdg, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < e->n_layers; i++) {
                char dg[IMAGE_DIGEST_LEN + 1];
                json_t *d = NULL;
                if ((r = layer_desc(root_fd, e->layers[i], &d, dg, err)) < 0)
                        return r;
                if (json_array_append_new(layers, d) < 0 || strv_push(&p->src.digests, dg) < 0 ||
                        strv_push(&p->src.paths, e->layers[i]) < 0)
                        return nook_err_oom(err);
        }
        man = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:O}", "schemaVersion", 2, "mediaType",
                MT_OCI_MANIFEST, "config", "mediaType", MT_OCI_CONFIG, "digest", cdg, "size",
                (json_int_t)p->config_len, "layers", layers);
        if (!man || !(p->manifest = json_dumps(man, JSON_COMPACT)))
                return nook_err_oom(err);
        p->manifest_len = strlen(p->manifest);
        if (e->repo_tags[0] && !(p->name = strdup(ref ? ref : e->repo_tags[0])))
                return nook_err_oom(err);
        p->src.root_fd = root_fd;
        return 0;
}

/* ---- unpacking a tar into a private directory --------------------------------------------------------- */

/* The parent directory of rel under root_fd, created as needed; *ret_base points into rel. */
static int member_parent(int root_fd, char *rel, int *ret_fd, const char **ret_base, nook_error *err) {
        _cleanup_close_ int cur = fcntl(root_fd, F_DUPFD_CLOEXEC, 3);
        char *slash;
        while ((slash = strchr(rel, '/'))) {
                *slash = 0;
                if (mkdirat(cur, rel, 0700) < 0 && errno != EEXIST)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create directory '%.200s'", rel);
                int fd = openat(cur, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return nook_err_errno(
                                err, NOOK_E_REFUSED, "Archive member '%.200s' is under a file", rel);
                safe_close(cur);
                cur = fd;
                rel = slash + 1;
        }
        *ret_fd = TAKE_FD(cur);
        *ret_base = rel;
        return 0;
}

/* budget: bytes the archive may still expand to (extract() sets it from the archive's size). */
static int extract_file(
        struct archive *a, int dfd, const char *name, const char *base, uint64_t *budget, nook_error *err) {
        _cleanup_free_ char *buf = malloc(IO_BUF);
        _cleanup_close_ int fd =
                openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (!buf)
                return nook_err_oom(err);
        if (fd < 0)
                return errno == EEXIST
                        ? nook_err_set(err, NOOK_E_REFUSED, "Archive member '%.200s' appears twice", name)
                        : nook_err_errno(err, NOOK_E_IO, "Cannot create '%.200s'", name);
        for (;;) {
                la_ssize_t k = archive_read_data(a, buf, IO_BUF);
                if (k < 0)
                        return nook_err_set(err, NOOK_E_INVALID, "Cannot read archive member '%.200s': %s",
                                name, aerr(a));
                if (k == 0)
                        return 0;
                if ((uint64_t)k > *budget)
                        return nook_err_set(err, NOOK_E_REFUSED,
                                "Archive member '%.200s' expands the archive far beyond its own size: refused",
                                name);
                *budget -= (uint64_t)k;
                int r = fd_write_all(fd, buf, (size_t)k);
                if (r < 0)
                        return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot write '%.200s'", name);
        }
}

static int extract_entry(
        struct archive *a, struct archive_entry *e, int root_fd, uint64_t *budget, nook_error *err) {
        const char *raw = archive_entry_pathname(e);
        _cleanup_free_ char *name = NULL;
        _cleanup_close_ int dfd = -1;
        const char *base;
        mode_t type = archive_entry_filetype(e);
        int r;
        if (!raw)
                return nook_err_set(err, NOOK_E_INVALID, "An archive member has no name");
        while (startswith(raw, "./"))
                raw += 2;
        size_t len = strlen(raw);
        while (len > 0 && raw[len - 1] == '/')
                len--;
        if (!(name = strndup(raw, len)))
                return nook_err_oom(err);
        if (isempty(name) || streq(name, "."))
                return 0;
        if (!archive_path_valid(name))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Archive member '%.200s' leaves the archive (absolute or with '..')", raw);
        if (archive_entry_sparse_count(e) > 0)
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Archive member '%.200s' is a sparse file: an image archive holds none", raw);
        if (archive_entry_hardlink(e) || (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Archive member '%.200s' is a %s: an image archive holds files, directories and symlinks",
                        raw, archive_entry_hardlink(e) ? "hard link" : "special file");
        if (type == AE_IFLNK) {
                /* skopeo's docker-archive links <id>/layer.tar to the layer file.  Kept as a
                 * symlink: nothing here follows one (open_member refuses it by name). */
                const char *target = archive_entry_symlink(e);
                if ((r = member_parent(root_fd, name, &dfd, &base, err)) < 0)
                        return r;
                if (symlinkat(target ? target : "", dfd, base) < 0)
                        return errno == EEXIST
                                ? nook_err_set(
                                          err, NOOK_E_REFUSED, "Archive member '%.200s' appears twice", raw)
                                : nook_err_errno(err, NOOK_E_IO, "Cannot create '%.200s'", raw);
                return 0;
        }
        if (type == AE_IFDIR) {
                char *slashed = strprintf("%s/", name);
                r = slashed ? member_parent(root_fd, slashed, &dfd, &base, err) : nook_err_oom(err);
                free(slashed);
                return r;
        }
        if ((r = member_parent(root_fd, name, &dfd, &base, err)) < 0)
                return r;
        return extract_file(a, dfd, raw, base, budget, err);
}

static int extract(const char *path, int root_fd, nook_error *err) {
        _cleanup_(archive_read_freep) struct archive *a = archive_read_new();
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct archive_entry *e;
        struct stat st;
        unsigned n = 0;
        int r = 0, rc;
        if (!a)
                return nook_err_oom(err);
        if (fd < 0 || fstat(fd, &st) < 0)
                return nook_err_errno(err, NOOK_E_NOT_FOUND, "Cannot open '%s'", path);
        /* A plain tar holds its members' bytes; a compressed one (the filters read those too) may
         * expand some: 4x plus 64 MiB, and no more, so a bomb cannot fill NOOK_HOME's disk. */
        uint64_t budget = 4 * (uint64_t)st.st_size + (64u << 20);
        if (archive_read_support_format_tar(a) != ARCHIVE_OK ||
                archive_read_support_filter_all(a) != ARCHIVE_OK ||
                archive_read_open_fd(a, fd, IO_BUF) != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_INVALID, "'%s' is not a tar archive: %s", path, aerr(a));
        while (r >= 0 && (rc = archive_read_next_header(a, &e)) != ARCHIVE_EOF) {
                if (rc < ARCHIVE_WARN)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "'%s' is not a valid tar archive: %s", path, aerr(a));
                if (++n > MAX_MEMBERS)
                        return nook_err_set(
                                err, NOOK_E_REFUSED, "'%s' has more than %u members", path, MAX_MEMBERS);
                r = extract_entry(a, e, root_fd, &budget, err);
        }
        return r;
}

/* ---- import --------------------------------------------------------------------------------------- */

typedef struct source {
        image_archive_format format; /* from a transport prefix or --format; _INVALID: detect */
        char *path, *ref;
} source;

static void source_done(source *s) {
        free(s->path);
        free(s->ref);
}

static int source_parse(const char *spec, image_archive_format forced, source *ret, nook_error *err) {
        static const char *const prefixes[_IMAGE_FORMAT_MAX] = { "oci:", "oci-archive:", "docker-archive:" };
        source s = { .format = forced };
        for (int i = 0; i < _IMAGE_FORMAT_MAX; i++) {
                if (!startswith(spec, prefixes[i]))
                        continue;
                if (forced >= 0 && forced != i)
                        return nook_err_set(err, NOOK_E_INVALID, "'%s' says %s, but --format says %s", spec,
                                image_archive_format_to_string(i), image_archive_format_to_string(forced));
                s.format = i;
                spec += strlen(prefixes[i]);
                const char *colon = strchr(spec, ':');
                if (colon && colon[1] && !(s.ref = strdup(colon + 1)))
                        return nook_err_oom(err);
                if (!(s.path = strndup(spec, colon ? (size_t)(colon - spec) : strlen(spec)))) {
                        source_done(&s);
                        return nook_err_oom(err);
                }
                break;
        }
        if (!s.path && !(s.path = strdup(spec)))
                return nook_err_oom(err);
        if (isempty(s.path)) {
                source_done(&s);
                return nook_err_set(
                        err, NOOK_E_INVALID, "Import needs a path: a layout directory or an archive");
        }
        *ret = s;
        return 0;
}

static bool has_file(int dfd, const char *name) {
        struct stat st;
        return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* What a directory (given or unpacked from the tar) holds, read into p. */
static int read_layout(int dfd, const source *src, picked *p, nook_error *err) {
        if (src->format == IMAGE_FORMAT_DOCKER_ARCHIVE ||
                (src->format < 0 && !has_file(dfd, "index.json") && has_file(dfd, "manifest.json")))
                return docker_read(dfd, src->ref, p, err);
        if (src->format < 0 && !has_file(dfd, "index.json"))
                return nook_err_set(err, NOOK_E_INVALID,
                        "'%s' is neither an OCI image layout (no index.json) nor a docker save archive (no manifest.json)"
                        "; a plain root filesystem directory is used with --image PATH as it is",
                        src->path);
        return oci_read(dfd, src->ref, p, err);
}

/* The layout's root: the directory itself, or tmp (created here) with the tar unpacked in it. */
static int open_source(image_store *s, const source *src, char **ret_tmp, int *ret_fd, nook_error *err) {
        struct stat st;
        int r;
        if (stat(src->path, &st) < 0)
                return nook_err_errno(err, NOOK_E_NOT_FOUND, "Cannot find '%s'", src->path);
        bool dir = S_ISDIR(st.st_mode);
        if (dir && (src->format == IMAGE_FORMAT_OCI_ARCHIVE || src->format == IMAGE_FORMAT_DOCKER_ARCHIVE))
                return nook_err_set(err, NOOK_E_INVALID, "'%s' is a directory, not a %s tar", src->path,
                        image_archive_format_to_string(src->format));
        if (!dir && src->format == IMAGE_FORMAT_OCI)
                return nook_err_set(err, NOOK_E_INVALID,
                        "'%s' is not a directory: an OCI layout is one (a tar of one is --format oci-archive)",
                        src->path);
        if (!dir && !S_ISREG(st.st_mode))
                return nook_err_set(
                        err, NOOK_E_INVALID, "'%s' is neither a directory nor a file", src->path);
        if (dir) {
                *ret_fd = open(src->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                return *ret_fd >= 0 ? 0 : nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", src->path);
        }
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -1; /* the directory, and its owner lock while the import runs */
        if ((r = image_store_tmpdir(s, "import", &tmp, &fd, err)) < 0)
                return r;
        r = extract(src->path, fd, err);
        if (r < 0) {
                (void)path_rm_rf(tmp, &(nook_error){});
                return r;
        }
        *ret_tmp = TAKE_PTR(tmp);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int import_name(const char *opt, const picked *p, char **ret, nook_error *err) {
        const char *n = opt ? opt : p->name;
        if (!n && p->bare_tag)
                return nook_err_set(err, NOOK_E_INVALID,
                        "The image is named only by the tag '%s' in the layout: give it a full name with --name",
                        p->bare_tag);
        if (!n)
                return nook_err_set(err, NOOK_E_INVALID,
                        "The archive does not name the image: give it a name with --name");
        if (image_digest_valid(n) || strchr(n, '@'))
                return nook_err_set(
                        err, NOOK_E_INVALID, "'%s' is not a name for an image (a digest is not a name)", n);
        return image_canonical(n, ret, err);
}

/* Reads the layout open at dfd and adds its image to the store, undone on failure. */
static int import_at(image_store *s, int dfd, const source *src, const image_import_opts *o, char **ret_name,
        nook_error *err) {
        _cleanup_(picked_done) picked p = {};
        _cleanup_free_ char *name = NULL;
        image_blob_source bs = { .get = local_get, .userdata = &p.src };
        int r = read_layout(dfd, src, &p, err);
        if (r < 0)
                return r;
        r = import_name(o->name, &p, &name, err);
        if (r < 0)
                return r;
        r = image_store_add(s, &bs, p.manifest, p.manifest_len, p.config, p.config_len, name,
                /* undo= */ true, &o->pull, err);
        if (r < 0)
                return r;
        *ret_name = TAKE_PTR(name);
        return 0;
}

static int import_from(
        image_store *s, const source *src, const image_import_opts *o, char **ret_name, nook_error *err) {
        _cleanup_free_ char *tmp = NULL, *name = NULL;
        _cleanup_close_ int dfd = -1;
        int r = open_source(s, src, &tmp, &dfd, err);
        if (r < 0)
                return r;
        r = import_at(s, dfd, src, o, &name, err);
        if (tmp)
                (void)path_rm_rf(tmp, &(nook_error){});
        if (r < 0)
                return r;
        *ret_name = TAKE_PTR(name);
        return 0;
}

int image_import(
        image_store *s, const char *spec, const image_import_opts *o, image_rec *ret, nook_error *err) {
        _cleanup_(source_done) source src = {};
        _cleanup_free_ char *name = NULL;
        _cleanup_close_ int lock = -1;
        image_import_opts defaults = { .format = _IMAGE_FORMAT_INVALID };
        int r;
        if (!o)
                o = &defaults;
        r = source_parse(spec, o->format, &src, err);
        if (r < 0)
                return r;
        r = image_store_hold(s, &lock, err);
        if (r < 0)
                return r;
        if ((r = import_from(s, &src, o, &name, err)) < 0)
                return nook_err_wrap(err, "importing '%s'", spec);
        return store_image_get(s->st, name, ret, err);
}

/* ---- export --------------------------------------------------------------------------------------- */

/* Where the files go: a directory (dir_fd) or a tar (a). */
typedef struct out {
        int dir_fd;
        struct archive *a;
} out;

static int out_add(out *o, const char *name, int in_fd, const void *mem, uint64_t size, nook_error *err) {
        _cleanup_free_ char *buf = malloc(IO_BUF), *copy = strdup(name);
        _cleanup_close_ int fd = -1, dfd = -1;
        const char *base;
        int r;
        if (!buf || !copy)
                return nook_err_oom(err);
        if (o->a) {
                struct archive_entry *e = archive_entry_new();
                if (!e)
                        return nook_err_oom(err);
                /* owned by us, as tar(1) writes: an unprivileged reader that restores owners
                 * (skopeo untars an oci-archive with chown) can then chown to itself */
                bool dir = !mem && in_fd < 0; /* a directory entry (tar only) */
                archive_entry_set_pathname(e, name);
                archive_entry_set_filetype(e, dir ? AE_IFDIR : AE_IFREG);
                archive_entry_set_perm(e, dir ? 0755 : 0644);
                archive_entry_set_size(e, (la_int64_t)size);
                archive_entry_set_uid(e, geteuid());
                archive_entry_set_gid(e, getegid());
                r = archive_write_header(o->a, e);
                archive_entry_free(e);
                if (r != ARCHIVE_OK)
                        return nook_err_set(err, NOOK_E_IO, "Cannot write '%s': %s", name, aerr(o->a));
        } else {
                if ((r = member_parent(o->dir_fd, copy, &dfd, &base, err)) < 0)
                        return r;
                if ((fd = openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", name);
        }
        for (uint64_t left = size; left > 0;) {
                ssize_t k = mem ? (ssize_t)size : read(in_fd, buf, left < IO_BUF ? (size_t)left : IO_BUF);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot read blob for '%s' from the store", name);
                const void *p = mem ? mem : buf;
                if (o->a && archive_write_data(o->a, p, (size_t)k) != k)
                        return nook_err_set(err, NOOK_E_IO, "Cannot write '%s': %s", name, aerr(o->a));
                if (!o->a && (r = fd_write_all(fd, p, (size_t)k)) < 0)
                        return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot write '%s'", name);
                left -= (uint64_t)k;
        }
        if (fd >= 0 && fsync(fd) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot write '%s'", name);
        return 0;
}

static int out_add_text(out *o, const char *name, const char *text, nook_error *err) {
        return out_add(o, name, -1, text, strlen(text), err);
}

static int out_add_blob(out *o, image_store *s, const char *digest, nook_error *err) {
        _cleanup_free_ char *path = image_blob_path(s, digest), *name = blob_rel(digest);
        struct stat st;
        if (!path || !name)
                return nook_err_oom(err);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return nook_err_errno(err, NOOK_E_NOT_FOUND,
                        "Blob %s is not in the store (removed by a prune while another image shared its layer?): pull the image again",
                        digest);
        return out_add(o, name, fd, NULL, (uint64_t)st.st_size, err);
}

typedef struct export_doc {
        image_rec rec;
        image_manifest m;
        char *index, *docker; /* index.json, manifest.json */
} export_doc;

static void export_doc_done(export_doc *d) {
        image_rec_done(&d->rec);
        image_manifest_done(&d->m);
        free(d->index);
        free(d->docker);
}

/* index.json (and manifest.json for docker) for the stored image; name may be NULL. */
static int export_docs(
        image_store *s, const char *name, image_archive_format f, export_doc *d, nook_error *err) {
        _cleanup_free_ char *path = image_blob_path(s, d->rec.digest), *body = NULL, *cfg = NULL;
        _cleanup_(json_decrefp) json_t *idx = NULL, *dm = NULL, *man = NULL;
        size_t len = 0;
        json_error_t je;
        if (!path || !(cfg = blob_rel(d->rec.config_digest)))
                return nook_err_oom(err);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(
                        err, NOOK_E_NOT_FOUND, "The manifest %s is not in the store", d->rec.digest);
        int r = fd_read_to_end(fd, (size_t)IMAGE_DOC_MAX, &body, &len, err);
        if (r < 0)
                return r;
        r = image_manifest_parse(body, len, &d->m, err);
        if (r < 0)
                return r;
        man = json_loadb(body, len, 0, &je);
        const char *mt = json_string_value(json_object_get(man, "mediaType"));
        idx = json_pack("{s:i, s:s, s:[{s:s, s:s, s:I}]}", "schemaVersion", 2, "mediaType", MT_OCI_INDEX,
                "manifests", "mediaType", mt ? mt : MT_OCI_MANIFEST, "digest", d->rec.digest, "size",
                (json_int_t)len);
        if (!idx)
                return nook_err_oom(err);
        if (name &&
                json_object_set_new(json_array_get(json_object_get(idx, "manifests"), 0), "annotations",
                        json_pack("{s:s, s:s}", ANNOTATION_REF_NAME, name, ANNOTATION_IMAGE_NAME, name)) < 0)
                return nook_err_oom(err);
        if (!(d->index = json_dumps(idx, JSON_COMPACT)))
                return nook_err_oom(err);
        if (f != IMAGE_FORMAT_DOCKER_ARCHIVE)
                return 0;
        _cleanup_(json_decrefp) json_t *layers = json_array();
        for (size_t i = 0; layers && i < d->m.n_layers; i++) {
                _cleanup_free_ char *l = blob_rel(d->m.layers[i].digest);
                if (!l || json_array_append_new(layers, json_string(l)) < 0)
                        return nook_err_oom(err);
        }
        dm = json_pack("[{s:s, s:[s*], s:O}]", "Config", cfg, "RepoTags",
                name && !strchr(name, '@') ? name : NULL, "Layers", layers);
        return dm && (d->docker = json_dumps(dm, JSON_COMPACT)) ? 0 : nook_err_oom(err);
}

static int write_all(out *o, image_store *s, const export_doc *d, nook_error *err) {
        int r;
        if (o->a) {
                /* a tar names the directories; a directory export made them already */
                r = out_add(o, "blobs/", -1, NULL, 0, err);
                if (r < 0)
                        return r;
                r = out_add(o, "blobs/sha256/", -1, NULL, 0, err);
                if (r < 0)
                        return r;
        }
        r = out_add_text(o, "oci-layout", OCI_LAYOUT_JSON, err);
        if (r < 0)
                return r;
        r = out_add_text(o, "index.json", d->index, err);
        if (r < 0)
                return r;
        if (d->docker) {
                r = out_add_text(o, "manifest.json", d->docker, err);
                if (r < 0)
                        return r;
        }
        r = out_add_blob(o, s, d->rec.digest, err);
        if (r < 0)
                return r;
        r = out_add_blob(o, s, d->m.config.digest, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < d->m.n_layers; i++) {
                bool dup = false;
                for (size_t k = 0; k < i; k++)
                        dup = dup || streq(d->m.layers[k].digest, d->m.layers[i].digest);
                if (dup)
                        continue;
                r = out_add_blob(o, s, d->m.layers[i].digest, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Builds the export at tmp: a directory or a tar file. */
static int write_tmp(
        image_store *s, const export_doc *d, image_archive_format f, const char *tmp, nook_error *err) {
        _cleanup_(archive_write_freep) struct archive *a = NULL;
        _cleanup_close_ int fd = -1;
        out o = { .dir_fd = -1 };
        int r;
        if (f == IMAGE_FORMAT_OCI) {
                if ((fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", tmp);
                /* readable by others, as a directory written by cp or skopeo would be */
                if (fchmod(fd, 0755) < 0 || mkdirat(fd, "blobs", 0755) < 0 ||
                        mkdirat(fd, "blobs/sha256", 0755) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create directories in '%s'", tmp);
                o.dir_fd = fd;
                return write_all(&o, s, d, err);
        }
        if ((fd = open(tmp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", tmp);
        if (!(a = archive_write_new()))
                return nook_err_oom(err);
        if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
                archive_write_open_fd(a, fd) != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_IO, "Cannot write a tar to '%s': %s", tmp, aerr(a));
        o.a = a;
        if ((r = write_all(&o, s, d, err)) < 0)
                return r;
        if (archive_write_close(a) != ARCHIVE_OK)
                return nook_err_set(err, NOOK_E_IO, "Cannot finish '%s': %s", tmp, aerr(a));
        return fsync(fd) < 0 ? nook_err_errno(err, NOOK_E_IO, "Cannot write '%s'", tmp) : 0;
}

/* Moves tmp to path: never over an existing path unless force, and then by exchanging the two
 * (rename does not follow a symlink at path) and removing the old one. */
static int place(const char *tmp, const char *path, bool force, nook_error *err) {
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
                return 0;
        if (errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot rename '%s' to '%s'", tmp, path);
        if (!force)
                return nook_err_set(err, NOOK_E_EXISTS, "'%s' exists: use --force to replace it", path);
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot replace '%s'", path);
        return path_rm_rf(tmp, err); /* now the old content */
}

int image_export(
        image_store *s, const char *ref, const char *path, const image_export_opts *o, nook_error *err) {
        _cleanup_(export_doc_done) export_doc d = {};
        _cleanup_free_ char *name = NULL, *target = NULL, *tmp = NULL;
        _cleanup_close_ int lock = -1;
        image_archive_format f = o && o->format >= 0 ? o->format : IMAGE_FORMAT_OCI_ARCHIVE;
        struct stat st;
        int r;
        if (isempty(path))
                return nook_err_set(err, NOOK_E_INVALID, "Export needs a destination path (-o PATH)");
        /* Absolute: the temporary beside it is removed with path_rm_rf, which takes only those. */
        if (path[0] == '/')
                target = strdup(path);
        else {
                _cleanup_free_ char *cwd = getcwd(NULL, 0);
                target = cwd ? strprintf("%s/%s", cwd, path) : NULL;
        }
        if (!target)
                return nook_err_errno(err, NOOK_E_IO, "Cannot make '%s' an absolute path", path);
        for (size_t n = strlen(target); n > 1 && target[n - 1] == '/'; n--)
                target[n - 1] = 0;
        if (lstat(target, &st) == 0) {
                if (!(o && o->force))
                        return nook_err_set(
                                err, NOOK_E_EXISTS, "'%s' exists: use --force to replace it", target);
                /* --force replaces an earlier export, never a directory that is not one */
                _cleanup_free_ char *marker = strprintf("%s/oci-layout", target);
                if (S_ISDIR(st.st_mode) && (f != IMAGE_FORMAT_OCI || !marker || access(marker, F_OK) < 0))
                        return nook_err_set(err, NOOK_E_EXISTS,
                                "'%s' is a directory that is not an OCI image layout: --force replaces "
                                "only an earlier export; remove it yourself or choose another path",
                                target);
        }
        r = image_store_hold(s, &lock, err);
        if (r < 0)
                return r;
        r = image_lookup(s, ref, &d.rec, err);
        if (r < 0)
                return r;
        if (!image_digest_valid(ref) && (r = image_canonical(ref, &name, err)) < 0)
                return r;
        if (!name && d.rec.refs && d.rec.refs[0] && !(name = strdup(d.rec.refs[0])))
                return nook_err_oom(err);
        if ((r = export_docs(s, name, f, &d, err)) < 0)
                return nook_err_wrap(err, "exporting '%s'", ref);
        if (!(tmp = strprintf("%s.nook-tmp-XXXXXX", target)))
                return nook_err_oom(err);
        /* named by the user's path: the temporary one beside it is ours */
        if (f == IMAGE_FORMAT_OCI ? !mkdtemp(tmp) : (r = mkostemp(tmp, O_CLOEXEC)) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot write '%s' (a temporary file beside it first)", target);
        if (f != IMAGE_FORMAT_OCI)
                safe_close(r);
        if ((r = write_tmp(s, &d, f, tmp, err)) >= 0)
                r = place(tmp, target, o && o->force, err);
        if (r < 0) {
                (void)path_rm_rf(tmp, &(nook_error){});
                return nook_err_wrap(err, "exporting '%s' to '%s'", ref, target);
        }
        return 0;
}
