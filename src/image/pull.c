/* SPDX-License-Identifier: Apache-2.0 */
/* Pulls and the on-disk store (see image.h).  Order of a pull, each step idempotent so that a
 * crash or a concurrent pull leaves nothing half-visible:
 *   1. manifest (index -> our platform's manifest), stored as a blob under its digest;
 *   2. config blob, verified, stored; its diff_ids must match the manifest's layer count;
 *   3. each layer, in parallel: skipped when its unpacked directory exists for this mode, else
 *      under an flock on the layer: the blob is downloaded to tmp/ (digest and size checked as
 *      it arrives) and renamed into blobs/, then unpacked to a temporary directory whose stream
 *      digest must equal the config's diff_id, then renamed into layers/<mode>/;
 *   4. the records (image, layers, name) in one transaction.
 * Blobs and layers are only ever renamed into place complete, so their presence means done. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/manifest.h"
#include "image/ref.h"
#include "image/registry.h"
#include "image/unpack.h"
#include "store/image_rec.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"
#include "util/tmpdir.h"

#define DEFAULT_JOBS 4u
#define MAX_JOBS 16u
#define COPY_BUF ((size_t)256 * 1024)

static bool in_list(char *const *l, const char *s) {
        STRV_FOREACH (i, (char **)l)
                if (streq(*i, s))
                        return true;
        return false;
}

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

/* ---- store layout ----------------------------------------------------------------------------- */

int image_store_init(image_store *s, const char *home, store *st, const unpack_opts *u, nook_error *err) {
        image_store n = { .st = st, .unpack = *u };
        n.root = strprintf("%s/images", home);
        n.layers = strprintf("%s/images/layers/%s", home, u->rootless ? "rootless" : "rootful");
        if (!n.root || !n.layers) {
                image_store_done(&n);
                return nook_err_oom(err);
        }
        static const char *const subdirs[] = { "blobs/sha256", "tmp", "locks" };
        int r = path_mkdir_p(n.layers, 0700, err);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(subdirs); i++) {
                _cleanup_free_ char *d = strprintf("%s/%s", n.root, subdirs[i]);
                r = d ? path_mkdir_p(d, 0700, err) : nook_err_oom(err);
        }
        if (r < 0) {
                image_store_done(&n);
                return r;
        }
        *s = n;
        return 0;
}

char *image_blob_path(const image_store *s, const char *digest) {
        return strprintf("%s/blobs/sha256/%s", s->root, image_digest_hex(digest));
}

static char *layer_path(const image_store *s, const char *diff_id) {
        return strprintf("%s/%s", s->layers, image_digest_hex(diff_id));
}

/* An exclusive flock on locks/<name>.lock; the fd is the lock. */
static int lock_take(const image_store *s, const char *name, int how, int *ret, nook_error *err) {
        _cleanup_free_ char *p = strprintf("%s/locks/%s.lock", s->root, name);
        if (!p)
                return nook_err_oom(err);
        _cleanup_close_ int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the lock '%s'", p);
        while (flock(fd, how) < 0)
                if (errno != EINTR)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot lock '%s'", p);
        *ret = TAKE_FD(fd);
        return 0;
}

/* A new file in tmp/ for a download; ret_path to rename or unlink. */
static int tmp_file(const image_store *s, char **ret_path, int *ret_fd, nook_error *err) {
        _cleanup_free_ char *p = strprintf("%s/tmp/blob-XXXXXX", s->root);
        if (!p)
                return nook_err_oom(err);
        /* locked while we write it: a sweep (image prune, reconcile) removes only unlocked ones */
        int fd = -1;
        int r = tmpfile_owned_new(p, &fd, err);
        if (r < 0)
                return nook_err_wrap(err, "making a download file in '%s/tmp'", s->root);
        *ret_path = TAKE_PTR(p);
        *ret_fd = fd;
        return 0;
}

int image_blob_put(image_store *s, const char *digest, const void *buf, size_t len, nook_error *err) {
        _cleanup_free_ char *dst = image_blob_path(s, digest), *tmp = NULL;
        _cleanup_close_ int fd = -1;
        char got[IMAGE_DIGEST_LEN + 1];
        int r;
        if (!dst)
                return nook_err_oom(err);
        if (access(dst, F_OK) == 0)
                return 0;
        if ((r = image_digest_buf(buf, len, got, err)) < 0)
                return r;
        if (!streq(got, digest))
                return nook_err_set(err, NOOK_E_INVALID, "Digest mismatch for %s (got %s)", digest, got);
        if ((r = tmp_file(s, &tmp, &fd, err)) < 0)
                return r;
        r = fd_write_all(fd, buf, len);
        if (r >= 0 && rename(tmp, dst) < 0)
                r = -errno;
        if (r < 0) {
                (void)unlink(tmp);
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot store blob %s", digest);
        }
        return 0;
}

/* ---- one layer ---------------------------------------------------------------------------------- */

typedef struct layer_job {
        const image_desc *desc;
        const char *diff_id;
        _Atomic uint64_t done;
        _Atomic int state;
} layer_job;

typedef struct pull_ctx {
        image_store *s;
        const image_blob_source *src; /* NULL for local-only work (ensure) */
        layer_job *jobs;
        size_t n, next;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        unsigned running;
        bool failed;
        nook_error err; /* the first failure */
} pull_ctx;

static void on_progress(void *userdata, uint64_t done) {
        layer_job *j = userdata;
        atomic_store(&j->done, done);
}

static int fetch_blob(pull_ctx *c, layer_job *j, const char *dst, nook_error *err) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -1;
        if (!c->src)
                return nook_err_set(err, NOOK_E_NOT_FOUND,
                        "Layer blob %s is missing from the store: pull the image again", j->desc->digest);
        int r = tmp_file(c->s, &tmp, &fd, err);
        if (r < 0)
                return r;
        atomic_store(&j->state, IMAGE_LAYER_DOWNLOADING);
        r = c->src->get(c->src->userdata, j->desc->digest, j->desc->size, fd, on_progress, j, err);
        if (r >= 0 && (fsync(fd) < 0 || rename(tmp, dst) < 0))
                r = nook_err_errno(err, NOOK_E_IO, "Cannot store blob %s", j->desc->digest);
        if (r < 0)
                (void)unlink(tmp); /* a mismatching or partial blob is never kept */
        return r;
}

static int unpack_layer(pull_ctx *c, layer_job *j, const char *blob, const char *dst, nook_error *err) {
        _cleanup_free_ char *tmp = strprintf(
                "%s/" IMAGE_LAYER_TMP_PREFIX "%s-XXXXXX", c->s->layers, image_digest_hex(j->diff_id) + 56);
        char diff_id[IMAGE_DIGEST_LEN + 1];
        _cleanup_close_ int tmp_lock = -1;
        if (!tmp)
                return nook_err_oom(err);
        /* locked while we unpack: a sweep (reconcile, image prune) removes only a killed pull's */
        int r0 = tmpdir_owned_new(tmp, &tmp_lock, err);
        if (r0 < 0)
                return nook_err_wrap(err, "unpacking into '%s'", c->s->layers);
        atomic_store(&j->state, IMAGE_LAYER_UNPACKING);
        _cleanup_close_ int bfd = open(blob, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_close_ int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        int r;
        if (bfd < 0 || dfd < 0)
                r = nook_err_errno(err, NOOK_E_IO, "Cannot open layer %s for unpacking", j->desc->digest);
        else if ((r = image_layer_compression_check(bfd, j->desc->media_type, err)) >= 0)
                r = image_unpack_fd(bfd, dfd, &c->s->unpack, diff_id, err);
        if (r < 0)
                (void)nook_err_wrap(err, "unpacking layer %s", j->desc->digest);
        else if (!streq(diff_id, j->diff_id))
                r = nook_err_set(err, NOOK_E_INVALID,
                        "Layer %s unpacks to %s, but the image config says %s: refusing the image",
                        j->desc->digest, diff_id, j->diff_id);
        else if (rename(tmp, dst) < 0)
                r = nook_err_errno(err, NOOK_E_IO, "Cannot move the unpacked layer to '%s'", dst);
        if (r < 0) {
                nook_error ignored;
                (void)path_rm_rf_at(AT_FDCWD, tmp, &ignored);
                if (err->code == NOOK_E_INVALID || err->code == NOOK_E_REFUSED)
                        (void)unlink(blob); /* a bad blob must not be reused */
        }
        return r;
}

static int layer_ensure(pull_ctx *c, layer_job *j, nook_error *err) {
        _cleanup_free_ char *dst = layer_path(c->s, j->diff_id),
                            *blob = image_blob_path(c->s, j->desc->digest);
        _cleanup_free_ char *lock_name = strprintf("layer-%s", image_digest_hex(j->diff_id));
        _cleanup_close_ int lock = -1;
        int r;
        if (!dst || !blob || !lock_name)
                return nook_err_oom(err);
        if (access(dst, F_OK) == 0 && access(blob, F_OK) == 0) {
                atomic_store(&j->state, IMAGE_LAYER_CACHED);
                return 0;
        }
        /* another process may be on the same layer: wait for it, then look again */
        if ((r = lock_take(c->s, lock_name, LOCK_EX, &lock, err)) < 0)
                return r;
        if (access(dst, F_OK) == 0) {
                /* unpacked from another image's blob (same diff_id, other compression): keep this
                 * image's own blob too, as given, so that `nook image export` can write it */
                if (c->src && access(blob, F_OK) < 0 && (r = fetch_blob(c, j, blob, err)) < 0)
                        return r;
                atomic_store(&j->state, IMAGE_LAYER_CACHED);
                return 0;
        }
        if (access(blob, F_OK) < 0 && (r = fetch_blob(c, j, blob, err)) < 0)
                return r;
        atomic_store(&j->done, j->desc->size);
        if ((r = unpack_layer(c, j, blob, dst, err)) < 0)
                return r;
        atomic_store(&j->state, IMAGE_LAYER_DONE);
        return 0;
}

static void *worker(void *userdata) {
        pull_ctx *c = userdata;
        for (;;) {
                pthread_mutex_lock(&c->lock);
                if (c->failed || c->next >= c->n) {
                        c->running--;
                        pthread_cond_broadcast(&c->cond);
                        pthread_mutex_unlock(&c->lock);
                        return NULL;
                }
                layer_job *j = &c->jobs[c->next++];
                pthread_mutex_unlock(&c->lock);
                nook_error e = {};
                int r = layer_ensure(c, j, &e);
                pthread_mutex_lock(&c->lock);
                if (r < 0 && !c->failed) {
                        c->failed = true;
                        c->err = e;
                }
                pthread_cond_broadcast(&c->cond);
                pthread_mutex_unlock(&c->lock);
        }
}

static void report(const pull_ctx *c, const image_pull_opts *o) {
        image_layer_progress p[IMAGE_MAX_LAYERS];
        if (!o || !o->progress)
                return;
        for (size_t i = 0; i < c->n && i < IMAGE_MAX_LAYERS; i++)
                p[i] = (image_layer_progress){ .digest = c->jobs[i].desc->digest,
                        .done = atomic_load(&c->jobs[i].done),
                        .total = c->jobs[i].desc->size,
                        .state = (image_layer_state)atomic_load(&c->jobs[i].state) };
        o->progress(o->userdata, p, c->n);
}

/* Runs layer_ensure for every job on up to o->jobs threads; progress is reported from here. */
static int run_jobs(pull_ctx *c, const image_pull_opts *o, nook_error *err) {
        unsigned want = o && o->jobs ? o->jobs : DEFAULT_JOBS;
        if (want > MAX_JOBS)
                want = MAX_JOBS;
        if (want > c->n)
                want = (unsigned)c->n;
        pthread_t tids[MAX_JOBS];
        unsigned started = 0;
        pthread_mutex_lock(&c->lock);
        for (; started < want; started++) {
                c->running++;
                if (pthread_create(&tids[started], NULL, worker, c) != 0) {
                        c->running--;
                        break;
                }
        }
        pthread_mutex_unlock(&c->lock);
        if (started == 0 && c->n > 0) {
                /* no thread could start: do the work here */
                c->running = 1;
                worker(c);
        }
        pthread_mutex_lock(&c->lock);
        while (c->running > 0) {
                struct timespec ts;
                (void)clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 100 * 1000000L;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                (void)pthread_cond_timedwait(&c->cond, &c->lock, &ts);
                pthread_mutex_unlock(&c->lock);
                report(c, o);
                pthread_mutex_lock(&c->lock);
        }
        pthread_mutex_unlock(&c->lock);
        for (unsigned i = 0; i < started; i++)
                (void)pthread_join(tids[i], NULL);
        report(c, o);
        if (c->failed) {
                *err = c->err;
                return -c->err.code;
        }
        return 0;
}

/* ---- adding an image from any source ------------------------------------------------------------ */

int image_store_hold(image_store *s, int *ret_lock, nook_error *err) {
        return lock_take(s, "gc", LOCK_SH, ret_lock, err);
}

int image_store_tmpdir(image_store *s, const char *prefix, char **ret_path, int *ret_lock, nook_error *err) {
        _cleanup_free_ char *p = strprintf("%s/tmp/%s-XXXXXX", s->root, prefix);
        if (!p)
                return nook_err_oom(err);
        int r = tmpdir_owned_new(p, ret_lock, err);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(p);
        return 0;
}

void image_store_sweep_tmp(const image_store *s) {
        _cleanup_free_ char *dir = strprintf("%s/tmp", s->root);
        if (dir)
                (void)tmp_sweep(dir, path_rm_rf_at);
        /* layers a killed pull was unpacking (unpack_layer) */
        (void)tmp_sweep_prefix(s->layers, IMAGE_LAYER_TMP_PREFIX, path_rm_rf_at);
}

int image_blob_copy(int in_fd, const char *digest, uint64_t size, const char *what, int out_fd,
        registry_progress_fn progress, void *userdata, nook_error *err) {
        _cleanup_(image_hasher_freep) image_hasher *h = image_hasher_new();
        _cleanup_free_ char *buf = malloc(COPY_BUF);
        char got[IMAGE_DIGEST_LEN + 1];
        uint64_t done = 0;
        if (!h || !buf)
                return nook_err_oom(err);
        for (;;) {
                /* one byte more than declared is enough to know the blob is too long */
                size_t want = size - done + 1 < COPY_BUF ? (size_t)(size - done + 1) : COPY_BUF;
                ssize_t k = read(in_fd, buf, want);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read blob %s from %s", digest, what);
                if (k == 0)
                        break;
                done += (uint64_t)k;
                if (done > size)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Blob %s in %s is larger than the %llu bytes its descriptor says: refused",
                                digest, what, (unsigned long long)size);
                image_hasher_update(h, buf, (size_t)k);
                int r = fd_write_all(out_fd, buf, (size_t)k);
                if (r < 0)
                        return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot store blob %s", digest);
                if (progress)
                        progress(userdata, done);
        }
        if (done != size)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Blob %s in %s is %llu bytes, its descriptor says %llu (truncated or wrong): refused",
                        digest, what, (unsigned long long)done, (unsigned long long)size);
        image_hasher_final(h, got);
        if (!streq(got, digest))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Digest mismatch for blob %s in %s (got %s): refused", digest, what, got);
        return 0;
}

typedef struct fetched {
        char digest[IMAGE_DIGEST_LEN + 1];
        const char *manifest, *config;
        size_t manifest_len;
        image_manifest m;
        image_config cfg;
} fetched;

static void fetched_done(fetched *f) {
        image_manifest_done(&f->m);
        image_config_done(&f->cfg);
}

static int record_fill(const fetched *f, image_rec *rec, nook_error *err) {
        *rec = (image_rec){ .digest = strdup(f->digest),
                .config_digest = strdup(f->m.config.digest),
                .config_json = strndup(f->config, f->m.config.size),
                .platform = strprintf("%s/%s%s%s", f->cfg.os ? f->cfg.os : "linux",
                        f->cfg.arch ? f->cfg.arch : "unknown", f->cfg.variant ? "/" : "",
                        f->cfg.variant ? f->cfg.variant : ""),
                .size = f->manifest_len + f->m.config.size };
        rec->layers = calloc(f->m.n_layers ? f->m.n_layers : 1, sizeof(image_layer_rec));
        if (!rec->digest || !rec->config_digest || !rec->config_json || !rec->platform || !rec->layers)
                return nook_err_oom(err);
        for (size_t i = 0; i < f->m.n_layers; i++) {
                const image_desc *d = &f->m.layers[i];
                image_layer_rec *l = &rec->layers[rec->n_layers++];
                *l = (image_layer_rec){ .digest = strdup(d->digest),
                        .diff_id = strdup(f->cfg.diff_ids[i]),
                        .media_type = d->media_type ? strdup(d->media_type) : NULL,
                        .size = d->size };
                if (!l->digest || !l->diff_id)
                        return nook_err_oom(err);
                rec->size += d->size;
        }
        return 0;
}

static int run_layers(image_store *s, const image_blob_source *src, const image_desc *descs,
        char *const *diff_ids, size_t n, const image_pull_opts *o, nook_error *err) {
        pull_ctx c = { .s = s, .src = src, .n = n };
        c.jobs = calloc(c.n ? c.n : 1, sizeof(layer_job));
        if (!c.jobs)
                return nook_err_oom(err);
        for (size_t i = 0; i < c.n; i++) {
                c.jobs[i].desc = &descs[i];
                c.jobs[i].diff_id = diff_ids[i];
        }
        pthread_mutex_init(&c.lock, NULL);
        pthread_cond_init(&c.cond, NULL);
        int r = run_jobs(&c, o, err);
        pthread_cond_destroy(&c.cond);
        pthread_mutex_destroy(&c.lock);
        free(c.jobs);
        return r;
}

/* Parses and cross-checks what a source handed us: the config must be the blob the manifest
 * names, and list one diff_id per layer. */
static int fetched_parse(fetched *f, const char *config, size_t config_len, nook_error *err) {
        char got[IMAGE_DIGEST_LEN + 1];
        int r;
        r = image_digest_buf(f->manifest, f->manifest_len, f->digest, err);
        if (r < 0)
                return r;
        r = image_manifest_parse(f->manifest, f->manifest_len, &f->m, err);
        if (r < 0)
                return r;
        r = image_digest_buf(config, config_len, got, err);
        if (r < 0)
                return r;
        if (config_len != f->m.config.size || !streq(got, f->m.config.digest))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Digest mismatch for the image config %s (got %s, %zu bytes): refusing the image",
                        f->m.config.digest, got, config_len);
        f->config = config;
        if ((r = image_config_parse(config, config_len, &f->cfg, err)) < 0)
                return r;
        if (f->cfg.n_diff_ids != f->m.n_layers)
                return nook_err_set(err, NOOK_E_INVALID,
                        "The image config lists %zu layers (diff_ids) but the manifest %zu: refusing the image",
                        f->cfg.n_diff_ids, f->m.n_layers);
        return 0;
}

/* Paths this add may create, for a rollback: blobs first, then layer directories. */
static int new_paths(image_store *s, const fetched *f, char ***ret, nook_error *err) {
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));
        if (!l)
                return nook_err_oom(err);
        size_t n = 2 + 2 * f->m.n_layers;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *p = i == 0 ? image_blob_path(s, f->digest)
                        : i == 1                ? image_blob_path(s, f->m.config.digest)
                        : i < 2 + f->m.n_layers ? image_blob_path(s, f->m.layers[i - 2].digest)
                                                : layer_path(s, f->cfg.diff_ids[i - 2 - f->m.n_layers]);
                if (!p)
                        return nook_err_oom(err);
                if (access(p, F_OK) < 0 && !in_list(l, p) && strv_push(&l, p) < 0)
                        return nook_err_oom(err);
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static void rollback(char *const *paths) {
        nook_error ignored;
        STRV_FOREACH (p, (char **)paths)
                (void)path_rm_rf_at(AT_FDCWD, *p, &ignored);
}

/* The manifest and config blobs, the layers, then the record that makes the image visible. */
static int add_parsed(image_store *s, const image_blob_source *src, const fetched *f, const char *name,
        const image_pull_opts *o, nook_error *err) {
        _cleanup_(image_rec_done) image_rec rec = {};
        int r = image_blob_put(s, f->digest, f->manifest, f->manifest_len, err);
        if (r < 0)
                return r;
        r = image_blob_put(s, f->m.config.digest, f->config, f->m.config.size, err);
        if (r < 0)
                return r;
        r = run_layers(s, src, f->m.layers, f->cfg.diff_ids, f->m.n_layers, o, err);
        if (r < 0)
                return r;
        r = record_fill(f, &rec, err);
        if (r < 0)
                return r;
        r = store_image_put(s->st, &rec, name, err);
        if (r < 0)
                return r;
        return 0;
}

int image_store_add(image_store *s, const image_blob_source *src, const char *manifest, size_t manifest_len,
        const char *config, size_t config_len, const char *name, bool undo, const image_pull_opts *o,
        nook_error *err) {
        _cleanup_(fetched_done) fetched f = { .manifest = manifest, .manifest_len = manifest_len };
        _cleanup_strv_free_ char **created = NULL;
        int r = fetched_parse(&f, config, config_len, err);
        if (r < 0)
                return r;
        if (undo) {
                r = new_paths(s, &f, &created, err);
                if (r < 0)
                        return r;
        }
        r = add_parsed(s, src, &f, name, o, err);
        if (r < 0 && undo)
                rollback(created);
        return r;
}

/* ---- pull ------------------------------------------------------------------------------------- */

static int registry_source_get(void *userdata, const char *digest, uint64_t size, int fd,
        registry_progress_fn progress, void *progress_userdata, nook_error *err) {
        return registry_get_blob(userdata, digest, size, fd, progress, progress_userdata, err);
}

/* Fetches the manifest for the reference, going through an index to our platform. */
static int fetch_manifest(
        registry *reg, const image_ref *ref, char **ret, size_t *ret_len, nook_error *err) {
        _cleanup_free_ char *ct = NULL, *dg = NULL, *body = NULL;
        size_t len = 0;
        image_doc_kind kind;
        int r;
        r = registry_get_manifest(reg, ref->digest ? ref->digest : ref->tag, &body, &len, &ct, err);
        if (r < 0)
                return r;
        r = image_doc_kind_detect(ct, body, len, &kind, err);
        if (r < 0)
                return r;
        if (kind == IMAGE_DOC_INDEX) {
                _cleanup_(image_index_done) image_index x = {};
                image_platform p;
                const image_desc *d;
                image_platform_host(&p);
                r = image_index_parse(body, len, &x, err);
                if (r < 0)
                        return r;
                r = image_index_select(&x, &p, &d, err);
                if (r < 0)
                        return r;
                if (!(dg = strdup(d->digest)))
                        return nook_err_oom(err);
                body = mfree(body);
                ct = mfree(ct);
                /* fetched by digest: registry_get_manifest checks the answer against it */
                r = registry_get_manifest(reg, dg, &body, &len, &ct, err);
                if (r < 0)
                        return r;
                r = image_doc_kind_detect(ct, body, len, &kind, err);
                if (r < 0)
                        return r;
                if (kind != IMAGE_DOC_MANIFEST)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "The image index points at another index (%s): nook follows one level", dg);
        }
        *ret = TAKE_PTR(body);
        *ret_len = len;
        return 0;
}

/* The stored copy of a small blob when it is there whole and matches its digest (1), else 0. */
static int blob_read_stored(image_store *s, const image_desc *d, char **ret, nook_error *err) {
        _cleanup_free_ char *p = image_blob_path(s, d->digest), *buf = NULL;
        char got[IMAGE_DIGEST_LEN + 1];
        size_t len = 0;
        if (!p)
                return nook_err_oom(err);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        nook_error ignored;
        if (fd < 0 || fd_read_to_end(fd, d->size + 1, &buf, &len, &ignored) < 0 || len != d->size ||
                image_digest_buf(buf, len, got, &ignored) < 0 || !streq(got, d->digest))
                return 0;
        *ret = TAKE_PTR(buf);
        return 1;
}

/* The config blob: the stored copy, else fetched and stored under flock(locks/blob-<hex>.lock),
 * looking again once the lock is ours, so that concurrent pulls from separate processes fetch
 * it once (as layer_ensure does for layers). */
static int config_get(image_store *s, registry *reg, const image_desc *d, char **ret, nook_error *err) {
        _cleanup_free_ char *lock_name = strprintf("blob-%s", image_digest_hex(d->digest));
        _cleanup_close_ int lock = -1;
        int r;
        if (!lock_name)
                return nook_err_oom(err);
        if ((r = blob_read_stored(s, d, ret, err)) != 0)
                return r < 0 ? r : 0;
        if ((r = lock_take(s, lock_name, LOCK_EX, &lock, err)) < 0)
                return r;
        if ((r = blob_read_stored(s, d, ret, err)) != 0)
                return r < 0 ? r : 0;
        if ((r = registry_get_blob_mem(reg, d->digest, d->size, ret, err)) < 0)
                return r;
        return image_blob_put(s, d->digest, *ret, d->size, err);
}

static int pull_from(
        image_store *s, registry *reg, const image_ref *ref, const image_pull_opts *o, nook_error *err) {
        _cleanup_(image_manifest_done) image_manifest m = {};
        _cleanup_free_ char *manifest = NULL, *config = NULL, *name = image_ref_to_string(ref);
        size_t len = 0;
        image_blob_source src = { .get = registry_source_get, .userdata = reg };
        int r;
        if (!name)
                return nook_err_oom(err);
        r = fetch_manifest(reg, ref, &manifest, &len, err);
        if (r < 0)
                return r;
        r = image_manifest_parse(manifest, len, &m, err);
        if (r < 0)
                return r;
        r = config_get(s, reg, &m.config, &config, err);
        if (r < 0)
                return r;
        return image_store_add(
                s, &src, manifest, len, config, m.config.size, name, /* undo= */ false, o, err);
}

int image_pull(
        image_store *s, const char *refstr, const image_pull_opts *o, image_rec *ret, nook_error *err) {
        _cleanup_(image_ref_done) image_ref ref = {};
        registry *reg = NULL;
        image_pull_opts defaults = {};
        int r;
        if (!o)
                o = &defaults;
        _cleanup_close_ int gc_lock = -1;
        r = image_ref_parse(refstr, &ref, err);
        if (r < 0)
                return r;
        r = image_store_hold(s, &gc_lock, err);
        if (r < 0)
                return r;
        if ((r = registry_new(&ref, &o->reg, &reg, err)) < 0)
                return nook_err_wrap(err, "pulling '%s'", refstr);
        r = pull_from(s, reg, &ref, o, err);
        registry_free(reg);
        if (r < 0)
                return nook_err_wrap(err, "pulling '%s'", refstr);
        _cleanup_free_ char *name = image_ref_to_string(&ref);
        if (!name)
                return nook_err_oom(err);
        return store_image_get(s->st, name, ret, err);
}

/* ---- local use -------------------------------------------------------------------------------- */

int image_canonical(const char *refstr, char **ret, nook_error *err) {
        if (image_digest_valid(refstr)) {
                *ret = strdup(refstr);
                return *ret ? 0 : nook_err_oom(err);
        }
        _cleanup_(image_ref_done) image_ref ref = {};
        int r = image_ref_parse(refstr, &ref, err);
        if (r < 0)
                return r;
        *ret = image_ref_to_string(&ref);
        return *ret ? 0 : nook_err_oom(err);
}

int image_lookup(image_store *s, const char *refstr, image_rec *ret, nook_error *err) {
        _cleanup_free_ char *name = NULL;
        int r = image_canonical(refstr, &name, err);
        if (r < 0)
                return r;
        r = store_image_get(s->st, name, ret, err);
        if (r == -NOOK_E_NOT_FOUND && image_digest_valid(refstr) == false) {
                /* a short digest prefix is not supported: say what was looked for */
                return nook_err_set(err, NOOK_E_NOT_FOUND,
                        "No image '%s' in the local store (looked for '%s'): pull it first", refstr, name);
        }
        return r;
}

int image_ensure_layers(image_store *s, const image_rec *rec, nook_error *err) {
        _cleanup_free_ image_desc *descs = calloc(rec->n_layers ? rec->n_layers : 1, sizeof(image_desc));
        _cleanup_free_ char **diff_ids = calloc(rec->n_layers ? rec->n_layers : 1, sizeof(char *));
        if (!descs || !diff_ids)
                return nook_err_oom(err);
        for (size_t i = 0; i < rec->n_layers; i++) {
                descs[i] = (image_desc){ .digest = rec->layers[i].digest, .size = rec->layers[i].size };
                diff_ids[i] = rec->layers[i].diff_id;
        }
        return run_layers(s, /* src= */ NULL, descs, diff_ids, rec->n_layers, NULL, err);
}

static int resolved_fill(image_store *s, const image_rec *rec, image_resolved *ret, nook_error *err) {
        _cleanup_(image_config_done) image_config cfg = {};
        _cleanup_(image_resolved_done) image_resolved res = {};
        int r = image_config_parse(rec->config_json, strlen(rec->config_json), &cfg, err);
        if (r < 0)
                return r;
        if (!(res.lowers = calloc(1, sizeof(char *))))
                return nook_err_oom(err);
        for (size_t i = rec->n_layers; i > 0; i--) {
                _cleanup_free_ char *p = layer_path(s, rec->layers[i - 1].diff_id);
                if (!p || strv_push(&res.lowers, p) < 0)
                        return nook_err_oom(err);
        }
        res.env = TAKE_PTR(cfg.env);
        if (!(res.cmd = strv_copy((const char *const *)cfg.entrypoint)))
                return nook_err_oom(err);
        STRV_FOREACH (a, cfg.cmd)
                if (strv_push(&res.cmd, *a) < 0)
                        return nook_err_oom(err);
        res.workdir = TAKE_PTR(cfg.workdir);
        res.user = TAKE_PTR(cfg.user);
        *ret = res;
        res = (image_resolved){};
        return 0;
}

int image_resolve(image_store *s, const char *refstr, image_pull_policy policy, const image_pull_opts *o,
        image_resolved *ret, nook_error *err) {
        _cleanup_(image_rec_done) image_rec rec = {};
        int r = policy == IMAGE_PULL_ALWAYS ? -NOOK_E_NOT_FOUND : image_lookup(s, refstr, &rec, err);
        if (r == -NOOK_E_NOT_FOUND && policy != IMAGE_PULL_NEVER && !image_digest_valid(refstr)) {
                image_rec_done(&rec);
                r = image_pull(s, refstr, o, &rec, err);
        }
        if (r < 0)
                return r;
        _cleanup_close_ int gc_lock = -1;
        if ((r = lock_take(s, "gc", LOCK_SH, &gc_lock, err)) < 0)
                return r;
        if ((r = image_ensure_layers(s, &rec, err)) < 0)
                return nook_err_wrap(err, "preparing image '%s'", refstr);
        return resolved_fill(s, &rec, ret, err);
}

/* ---- garbage collection ------------------------------------------------------------------------ */

/* Removes entries of dir whose names (hex) are not in keep (digests); skips dot files. */
static int gc_dir(const char *dir, char *const *keep, bool layers, uint64_t *freed, nook_error *err) {
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dfd < 0)
                return errno == ENOENT ? 0 : nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", dir);
        DIR *d = fdopendir(fcntl(dfd, F_DUPFD_CLOEXEC, 3));
        if (!d)
                return nook_err_errno(err, NOOK_E_IO, "Cannot read '%s'", dir);
        struct dirent *de;
        int r = 0;
        while (r >= 0 && (de = readdir(d))) {
                if (de->d_name[0] == '.' || strlen(de->d_name) != 64)
                        continue;
                char dg[IMAGE_DIGEST_LEN + 1];
                (void)snprintf(dg, sizeof(dg), "sha256:%s", de->d_name);
                if (in_list(keep, dg))
                        continue;
                struct stat st;
                if (!layers && fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && freed)
                        *freed += (uint64_t)st.st_size;
                r = path_rm_rf_at(dfd, de->d_name, err);
        }
        closedir(d);
        return r;
}

/* The per-blob and per-layer lock files (one per blob ever fetched).  Only under the "gc" lock
 * held exclusively: a pull takes it shared before any of those, so none is held or being
 * opened now, and a later pull creates the file again. */
static void gc_locks(const image_store *s) {
        _cleanup_free_ char *dir = strprintf("%s/locks", s->root);
        _cleanup_close_ int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW) : -1;
        DIR *d = dfd >= 0 ? fdopendir(fcntl(dfd, F_DUPFD_CLOEXEC, 3)) : NULL;
        struct dirent *de;
        if (!d)
                return;
        while ((de = readdir(d)))
                if ((startswith(de->d_name, "layer-") || startswith(de->d_name, "blob-")) &&
                        endswith(de->d_name, ".lock"))
                        (void)unlinkat(dfd, de->d_name, 0);
        closedir(d);
}

int image_store_gc(image_store *s, uint64_t *ret_freed, nook_error *err) {
        _cleanup_strv_free_ char **keep = NULL, **keep_diff = NULL;
        _cleanup_close_ int lock = -1;
        uint64_t freed = 0;
        /* pulls hold this lock shared from their first blob to their records: files they wrote
         * but have not recorded yet are never collected */
        int r = lock_take(s, "gc", LOCK_EX, &lock, err);
        if (r < 0)
                return r;
        r = store_image_prune(s->st, &keep, &keep_diff, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *blobs = strprintf("%s/blobs/sha256", s->root);
        _cleanup_free_ char *rf = strprintf("%s/layers/rootful", s->root),
                            *rl = strprintf("%s/layers/rootless", s->root);
        if (!blobs || !rf || !rl)
                return nook_err_oom(err);
        r = gc_dir(blobs, keep, false, &freed, err);
        if (r < 0)
                return r;
        r = gc_dir(rf, keep_diff, true, &freed, err);
        if (r < 0)
                return r;
        r = gc_dir(rl, keep_diff, true, &freed, err);
        if (r < 0)
                return r;
        gc_locks(s);
        image_store_sweep_tmp(s);
        if (ret_freed)
                *ret_freed = freed;
        return 0;
}
