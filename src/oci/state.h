/* SPDX-License-Identifier: Apache-2.0 */
/* A container's state under --root (not in nook's SQLite store: engines give each runtime its
 * own --root and expect it to hold everything, as runc's does):
 *   ROOT/ID/state.json   ours: pid, its start time, bundle, cgroup path, annotations, created
 *   ROOT/ID/exec.fifo    exists from create until start (status "created")
 * The status is computed, never stored: the process alive or not, the fifo, the freezer. */
#pragma once

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"
#include "util/macro.h"

#define OCI_ID_MAX 256

typedef enum oci_status {
        OCI_STATUS_CREATING,
        OCI_STATUS_CREATED,
        OCI_STATUS_RUNNING,
        OCI_STATUS_STOPPED,
        OCI_STATUS_PAUSED,
        _OCI_STATUS_MAX,
        _OCI_STATUS_INVALID = -EINVAL,
} oci_status;
const char *oci_status_to_string(oci_status s);

typedef struct oci_state {
        char *id;
        char *dir; /* ROOT/ID */
        pid_t pid;
        uint64_t start_time;
        char *bundle;
        char *rootfs; /* absolute; NULL in a state.json written before nook-oci kept it */
        char *cgroup_path;
        char *created; /* RFC 3339 */
        json_t *annotations; /* owned; may be NULL */
        bool no_process; /* config.json had no "process": start refuses */
        json_t *json; /* the file as read */
} oci_state;

/* "abc_1.x-y+z": letters, digits and _ . + -, not "." or "..", at most OCI_ID_MAX bytes. */
int oci_id_check(const char *id, nook_error *err);
/* The default --root: /run/nook-oci for root, $XDG_RUNTIME_DIR/nook-oci otherwise. */
int oci_root_default(char **ret, nook_error *err);
int oci_state_load(const char *root, const char *id, oci_state **ret, nook_error *err);
/* Writes state.json atomically (a temporary file renamed over it). */
int oci_state_save(const oci_state *st, nook_error *err);
oci_state *oci_state_free(oci_state *st);
DEFINE_TRIVIAL_CLEANUP_FUNC(oci_state *, oci_state_free);
oci_status oci_state_status(const oci_state *st);
/* The runtime-spec state object, which hooks get on stdin: ociVersion, id, status, pid, bundle,
 * annotations. */
json_t *oci_state_to_json(const oci_state *st);
/* What `state` and `list` print: runc's containerState (ociVersion, id, pid, status, bundle,
 * rootfs, created, annotations when there are any, owner), in runc's order.  runc's `state`
 * prints owner "" and its `list` the user owning ROOT/ID: owner NULL means "". */
json_t *oci_state_to_runc_json(const oci_state *st, const char *owner);
/* ROOT/ID/create.json: what a create in progress is making and who makes it.  Written before the
 * cgroup exists, removed once state.json is written: a create killed in between (SIGKILL, the
 * OOM killer, an engine's timeout) leaves it, so that `delete` finds the cgroup to remove.
 * runc leaves such a cgroup behind. */
typedef struct oci_create_note {
        pid_t pid; /* the nook-oci create (or run) process */
        uint64_t start_time; /* its start time: pid reuse is not "still creating" */
        char *cgroup_path;
} oci_create_note;
int oci_create_note_save(const char *dir, const char *cgroup_path, nook_error *err);
/* NOT_FOUND when there is none. */
int oci_create_note_load(const char *dir, oci_create_note *ret, nook_error *err);
void oci_create_note_done(oci_create_note *n);
/* Once state.json is written (a failure to remove it is harmless: state.json wins). */
void oci_create_note_remove(const char *dir);
/* Removes ROOT/ID and everything in it. */
int oci_state_remove(const char *dir, nook_error *err);
/* --pid-file: pid written to a temporary file beside path, then renamed over it (create, exec). */
int oci_pid_file_write(const char *path, pid_t pid, nook_error *err);
