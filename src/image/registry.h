/* SPDX-License-Identifier: Apache-2.0 */
/* A Docker Registry HTTP API v2 client (the OCI distribution spec) on libcurl: anonymous and
 * Bearer token auth from the WWW-Authenticate challenge, Basic auth from explicit credentials or
 * the docker auth file, TLS with the system CAs plus an optional CA file, plain HTTP only for
 * hosts named insecure, retries with backoff on 429/5xx/resets, a stall timeout.
 * Credentials are kept in memory only: never in the database, a log or an error message. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nook.h"
#include "image/ref.h"

typedef struct registry_opts {
        const char *username, *password; /* explicit credentials, or NULL */
        const char *auth_file; /* NULL: $REGISTRY_AUTH_FILE, else ~/.docker/config.json */
        const char *ca_file; /* trusted in addition to the system store, or NULL */
        const char *const *insecure; /* "host[:port]" reached over plain HTTP, NULL-terminated */
        uint64_t stall_timeout_ms; /* no byte for this long fails the request; 0: 30 s */
        unsigned retries; /* after the first try; 0: 3 */
} registry_opts;

typedef struct registry registry;

/* Called from any thread with the bytes received so far of one blob. */
typedef void (*registry_progress_fn)(void *userdata, uint64_t done);

int registry_new(const image_ref *ref, const registry_opts *o, registry **ret, nook_error *err);
registry *registry_free(registry *reg);
/* GET /v2/<repository>/manifests/<reference> with every manifest media type nook reads.
 * ret_content_type may be NULL in the answer.  When reference is a digest, the body is
 * checked against it. */
int registry_get_manifest(registry *reg, const char *reference, char **ret_body, size_t *ret_len,
        char **ret_content_type, nook_error *err);
/* GET /v2/<repository>/blobs/<digest> into fd (truncated first, and again on a retry), checking
 * size and digest as the bytes arrive: too many bytes stop the transfer; a mismatch fails
 * naming the digest.  Safe to call from several threads at once on one registry. */
int registry_get_blob(registry *reg, const char *digest, uint64_t size, int fd,
        registry_progress_fn progress, void *userdata, nook_error *err);
/* A small blob (a config) into memory, verified the same way. */
int registry_get_blob_mem(registry *reg, const char *digest, uint64_t size, char **ret, nook_error *err);
