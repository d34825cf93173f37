/* SPDX-License-Identifier: Apache-2.0 */
/* The host-side workspace: a plain directory bind-mounted at /workspace in the sandbox.
 * Every operation takes a guest-style path and applies the one path rule (DESIGN.md):
 *   1. "/src/x", "/workspace/src/x" and "src/x" name the same file;
 *   2. any ".." segment is refused before normalising;
 *   3. the normalised path is checked for containment again;
 *   4. resolution goes through openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS), or a component
 *      walk with O_NOFOLLOW where openat2 is missing, so no symlink leads out.
 * Refusal: NOOK_E_REFUSED, "Refusing a path outside the workspace: '<path>'".
 * NUL bytes (len-checked APIs), empty and over-long paths: NOOK_E_INVALID. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"
#include "util/macro.h"

typedef struct ws ws;

/* Opens the workspace directory dir (absolute).  create: make it (mode 0755) if missing.
 * Files and directories the ws layer creates are chowned to owner_uid/owner_gid when those
 * differ from the caller's (rootful: the sandbox's mapped root; rootless: ourselves). */
int ws_open(const char *dir, bool create, uid_t owner_uid, gid_t owner_gid, ws **ret, nook_error *err);
/* The same rule over a sandbox's root filesystem (root_fd: O_PATH on its "/", taken even on
 * failure).  Lookups resolve as the guest would, with RESOLVE_IN_ROOT: an absolute symlink or a
 * ".." inside a link target stays inside the root instead of failing; nothing leads out.  The
 * "/workspace" prefix has no special meaning for callers that route such paths here (nook cp
 * sends /workspace paths to the workspace handle instead). */
int ws_open_root(int root_fd, uid_t owner_uid, gid_t owner_gid, ws **ret, nook_error *err);
ws *ws_free(ws *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(ws *, ws_free);
const char *ws_root(const ws *w);
int ws_root_fd(const ws *w);
/* false when lookups use the O_NOFOLLOW component walk (no openat2, or NOOK_TEST_NO_OPENAT2=1
 * in a build with test hooks). */
bool ws_uses_openat2(const ws *w);

/* Resolves path under the rule, following a symlink at the last name when it stays inside, and
 * opens it with flags (O_CLOEXEC added).  Errors name the path. */
int ws_open_path(ws *w, const char *path, int flags, int *ret_fd, nook_error *err);
/* Who owns what the ws layer creates; true when that differs from us (fchown needed). */
bool ws_owner(const ws *w, uid_t *ret_uid, gid_t *ret_gid);
bool ws_is_root(const ws *w);

/* The path rule alone: the normalised relative path ("" = the workspace root). */
int ws_path_normalize(const char *path, char **ret_rel, nook_error *err);
/* The same for a byte string with a length: a NUL byte inside is NOOK_E_INVALID. */
int ws_path_normalize_len(const char *path, size_t len, char **ret_rel, nook_error *err);
/* The same into the caller's buffer (no allocation: the per-file reads and writes use it). */
int ws_path_normalize_buf(const char *path, char ret_rel[static PATH_MAX], nook_error *err);
/* Absolute host path for a guest path, resolved under the rule (the target need not exist,
 * its parent must resolve inside). */
int ws_host_path(ws *w, const char *path, char **ret, nook_error *err);
/* Writes path: atomically for readers (a temporary put in place), or with WS_WRITE_IN_PLACE into
 * the file itself (its inode kept; not atomic).  mode 0: a new file is 0644, an existing one
 * keeps its permission bits. */
#define WS_WRITE_IN_PLACE (1u << 0)
int ws_write(
        ws *w, const char *path, const void *data, size_t len, mode_t mode, unsigned flags, nook_error *err);
/* Writes the contents of fd (read to EOF). */
int ws_write_fd(ws *w, const char *path, int fd, mode_t mode, unsigned flags, nook_error *err);
/* Reads a regular file; refuses FIFOs, devices, directories; max bytes cap (0 = 1 GiB). */
int ws_read(ws *w, const char *path, size_t max, void **ret_data, size_t *ret_len, nook_error *err);
/* Opens a regular file for reading (O_RDONLY|O_CLOEXEC), same checks as ws_read. */
int ws_open_read(ws *w, const char *path, int *ret_fd, nook_error *err);
/* 1 when it exists, 0 when not (refusals still fail). Never reads the file. */
int ws_exists(ws *w, const char *path, nook_error *err);
int ws_stat(ws *w, const char *path, nook_stat *ret, nook_error *err);
int ws_mkdir_p(ws *w, const char *path, mode_t mode, nook_error *err);
/* Entries sorted by name, symlinks reported as NOOK_FILE_SYMLINK (not followed). */
int ws_list(ws *w, const char *path, nook_dirent **ret, size_t *ret_n, nook_error *err);
void ws_dirents_free(nook_dirent *d, size_t n);
/* Removes a file, a symlink (not its target) or a whole tree.  Missing: NOOK_E_NOT_FOUND. */
int ws_remove(ws *w, const char *path, nook_error *err);
int ws_rename(ws *w, const char *from, const char *to, nook_error *err);
