/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshots: the disk state of a stopped sticky sandbox (its writable root layer, optionally its
 * workspace) on top of the image it was booted from.  Never memory, processes, sockets or
 * devices.  Stored once per content under <home>/snapshots/<hex>/:
 *   snapshot.json   what it holds: {"digest", "content": {...}, "createdAt", ...}
 *   rootfs.tar      the writable layer as a deterministic OCI-style layer tar (export copies it)
 *   rootfs/         the same, unpacked with the image unpacker's rules: an overlay lower layer
 *   workspace.tar   with --with-workspace: the workspace, unpacked into an empty one at create
 * The digest is sha256 of the canonical JSON of "content": the format, the base image, the
 * parent snapshot (a snapshot of a sandbox that was itself booted from one) and the sha256 of
 * each tar.  So the same layer on another base is another snapshot. */
#pragma once

#include <jansson.h>

#include "nook.h"
#include "sandbox/image.h"
#include "sandbox/spec.h"

#define SNAPSHOT_FORMAT "nook.snapshot.v1"

/* Resolves spec->snapshot (a name or digest) to its digest, and spec->image to the snapshot's
 * base image (an image given explicitly must be that base). */
int sb_snapshot_fill_spec(nook *n, sb_spec *spec, nook_error *err);
/* The overlay lowers for a spec with a snapshot: its layers (and its parents'), then the base
 * image's.  When the snapshot holds a workspace and wsdir is empty, the workspace is restored. */
int sb_snapshot_image(nook *n, const sb_spec *spec, const char *wsdir, sb_image *ret, nook_error *err);

/* Shared with snapshot_io.c. */
/* <home>/snapshots, created on demand. */
int sb_snapshot_root(nook *n, char **ret, nook_error *err);
/* A fresh private directory under <home>/snapshots/.tmp for a snapshot being built; *ret_lock
 * holds its owner lock (util/tmpdir.h): keep it open until the directory is committed or
 * removed, or a sweep (sb_sweep_tmp) takes it for a killed process's. */
int sb_snapshot_tmpdir(nook *n, const char *what, char **ret, int *ret_lock, nook_error *err);
/* Removes a tmp dir (and .tmp when it is empty); never fails the caller. */
void sb_snapshot_tmpdir_remove(nook *n, const char *dir);
/* The digest of a content object (canonical JSON). */
int sb_snapshot_digest(json_t *content, char **ret, nook_error *err);
/* Reads <home>/snapshots/<hex>/snapshot.json of a recorded snapshot (name or digest). */
int sb_snapshot_load(
        nook *n, const char *name_or_digest, char **ret_name, json_t **ret_meta, nook_error *err);
/* Unpacks a layer tar (fd) into the empty directory dir with this home's unpack rules. */
int sb_snapshot_unpack(nook *n, int fd, const char *dir, char ret_diff[72], nook_error *err);
/* Moves a finished tmp dir into place as <home>/snapshots/<hex>, writes its snapshot.json and
 * records it under name: 0.  With present_ok, content a snapshot holds already is 1, *ret_json
 * being that snapshot with "alreadyPresent": true (nothing of tmp is used); without, it is
 * NOOK_E_EXISTS, as a name that is taken is.  On failure nothing of it stays.  One commit or
 * remove at a time per home (a lock on <home>/snapshots), so the look and the record are one. */
int sb_snapshot_commit(nook *n, const char *tmp, json_t *meta, const char *name, bool present_ok,
        char **ret_json, nook_error *err);
