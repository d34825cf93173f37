/* SPDX-License-Identifier: Apache-2.0 */
/* The image store: content-addressed blobs and unpacked layers under <home>/images, image
 * records in the state database, and pulls from registries.
 *   images/blobs/sha256/<hex>          manifests, configs and layer blobs, verified on arrival
 *   images/layers/<mode>/<diff hex>/   one unpacked copy per layer and mode (rootful|rootless),
 *                                      shared by every image that has it
 *   images/tmp/, images/locks/         downloads in progress; flock()s that make concurrent
 *                                      pulls of one blob (from separate processes) fetch it once */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nook.h"
#include "image/registry.h"
#include "image/unpack.h"
#include "store/image_rec.h"
#include "store/store.h"

typedef enum image_pull_policy {
        IMAGE_PULL_ALWAYS,
        IMAGE_PULL_IF_MISSING,
        IMAGE_PULL_NEVER,
        _IMAGE_PULL_POLICY_MAX,
        _IMAGE_PULL_POLICY_INVALID = -EINVAL,
} image_pull_policy;

const char *image_pull_policy_to_string(image_pull_policy p);
image_pull_policy image_pull_policy_from_string(const char *s);

typedef enum image_layer_state {
        IMAGE_LAYER_WAITING,
        IMAGE_LAYER_DOWNLOADING,
        IMAGE_LAYER_UNPACKING,
        IMAGE_LAYER_DONE,
        IMAGE_LAYER_CACHED,
        _IMAGE_LAYER_STATE_MAX,
} image_layer_state;

typedef struct image_layer_progress {
        const char *digest;
        uint64_t done, total;
        image_layer_state state;
} image_layer_progress;

/* Called on the pulling thread (never a worker), about every 100 ms and once at the end. */
typedef void (*image_progress_fn)(void *userdata, const image_layer_progress *layers, size_t n);

typedef struct image_pull_opts {
        registry_opts reg;
        image_progress_fn progress;
        void *userdata;
        unsigned jobs; /* parallel layer downloads; 0: 4 */
} image_pull_opts;

typedef struct image_store {
        char *root; /* <home>/images */
        char *layers; /* <home>/images/layers/<mode> */
        store *st; /* borrowed */
        unpack_opts unpack;
} image_store;

/* Fills reg options the caller left empty from the environment: NOOK_INSECURE_REGISTRIES
 * (comma-separated hosts) and NOOK_REGISTRY_CA_FILE.  *ret_insecure must be strv_free()d. */
void image_pull_opts_from_env(image_pull_opts *o, char ***ret_insecure);

int image_store_init(image_store *s, const char *home, store *st, const unpack_opts *u, nook_error *err);
void image_store_done(image_store *s);

/* Pulls ref (any reference form) for the host's platform; *ret is the stored record. */
int image_pull(image_store *s, const char *ref, const image_pull_opts *o, image_rec *ret, nook_error *err);

typedef struct image_resolved {
        char **lowers; /* unpacked layer directories, topmost first */
        char **env, **cmd; /* cmd: Entrypoint + Cmd */
        char *workdir, *user;
} image_resolved;
void image_resolved_done(image_resolved *r);

/* The image for a sandbox: pulled first per policy, every layer unpacked for this mode. */
int image_resolve(image_store *s, const char *ref, image_pull_policy policy, const image_pull_opts *o,
        image_resolved *ret, nook_error *err);
/* The record of a local image by reference or digest (no network). */
int image_lookup(image_store *s, const char *ref_or_digest, image_rec *ret, nook_error *err);
/* Canonical form of a reference ("docker.io/library/alpine:latest"); digests pass through. */
int image_canonical(const char *ref, char **ret, nook_error *err);
/* Removes files that no record references any more (after store_image_prune / remove).
 * ret_freed: bytes freed, may be NULL. */
int image_store_gc(image_store *s, uint64_t *ret_freed, nook_error *err);
/* Makes sure every layer of rec is unpacked for this mode (from blobs already in the store). */
int image_ensure_layers(image_store *s, const image_rec *rec, nook_error *err);
/* Stores a verified blob from memory (manifests, configs) if it is not there yet. */
int image_blob_put(image_store *s, const char *digest, const void *buf, size_t len, nook_error *err);
/* Path of a blob in the store (it may not exist). */
char *image_blob_path(const image_store *s, const char *digest);

/* Where the layer blobs of an image come from: a registry, or a local layout or archive.  get
 * writes the blob into fd (a new empty file), checking its size and digest; it is called from
 * several worker threads at once. */
typedef struct image_blob_source {
        int (*get)(void *userdata, const char *digest, uint64_t size, int fd, registry_progress_fn progress,
                void *progress_userdata, nook_error *err);
        void *userdata;
} image_blob_source;

/* The part of a pull after the manifest and the config are in hand, shared by registry pulls and
 * imports: the config must be the blob the manifest names (digest, size) and list one diff_id per
 * layer; manifest and config are stored as blobs; each layer blob is taken from src into the
 * store (unless there), unpacked and checked against its diff_id; the image is recorded under
 * name (may be NULL).  undo: a failure removes every blob and layer directory this call created
 * (an import changes nothing); a pull keeps them for its next try. */
int image_store_add(image_store *s, const image_blob_source *src, const char *manifest, size_t manifest_len,
        const char *config, size_t config_len, const char *name, bool undo, const image_pull_opts *o,
        nook_error *err);
/* Copies a blob of size bytes from in_fd to out_fd, hashing it as it goes: more or fewer bytes or
 * another digest fail (NOOK_E_INVALID) naming the digest and what (where it came from). */
int image_blob_copy(int in_fd, const char *digest, uint64_t size, const char *what, int out_fd,
        registry_progress_fn progress, void *userdata, nook_error *err);
/* Holds the store against `nook image prune` (a shared flock) until *ret_lock is closed. */
int image_store_hold(image_store *s, int *ret_lock, nook_error *err);
/* A new private directory under images/tmp, named prefix-XXXXXX; the caller removes it.
 * *ret_lock is an O_DIRECTORY fd of it holding its owner lock (util/tmpdir.h): keep it open
 * while working there, or image_store_sweep_tmp takes the directory for a killed process's. */
int image_store_tmpdir(image_store *s, const char *prefix, char **ret_path, int *ret_lock, nook_error *err);
/* Layers being unpacked: layers/<mode>/.tmp-<diff id tail>-XXXXXX, owner-locked. */
#define IMAGE_LAYER_TMP_PREFIX ".tmp-"
/* Removes what images/tmp holds, and the layers being unpacked, that no live process owns (a
 * killed pull or import's). */
void image_store_sweep_tmp(const image_store *s);
