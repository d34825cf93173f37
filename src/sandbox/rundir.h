/* SPDX-License-Identifier: Apache-2.0 */
/* The runtime folder: per-run state that needs no durability (a sandbox's control socket, its
 * supervisor's log, slirp4netns's API socket, the name locks), on a tmpfs instead of NOOK_HOME's
 * disk, where each new inode cost 0.3-0.5 ms of CPU (bench/README.md, issue #17).
 *
 * Every caller of one NOOK_HOME must find the same folder, whatever its environment ($XDG_RUNTIME_DIR,
 * sudo, the Node binding, nook-oci): the home holds a symlink, <home>/run, to it, made by the
 * first caller; the rest follow the link.  Where no tmpfs folder is usable, <home>/run is a plain
 * folder instead.  A tmpfs is emptied at reboot: the link then dangles and the next caller makes
 * the folder again (reconcile turns the records whose supervisor is gone into stopped sandboxes).
 * docs/design/runtime.md, "The runtime folder". */
#pragma once

#include <stdbool.h>

#include "nook.h"

/* The home's runtime folder, made if missing (cached on the handle: a readlink and an lstat
 * for the first call). */
int sb_run_root(nook *n, const char **ret, nook_error *err);
/* Removes the runtime folders beside ours whose state folder is gone (deleted by hand) or points
 * elsewhere now; only folders of ours that say which state folder they serve.  Returns how many. */
int sb_run_sweep_orphans(nook *n);
/* The same for a holder that keeps no handle (a workspace handle's lock); malloc'ed. */
int sb_run_root_home(const char *home, char **ret, nook_error *err);
/* Where the home's runtime folder is (buf, size >= PATH_MAX), making nothing: the real path
 * <home>/run leads to, else the absolute target of a dangling link; false when the home has
 * none yet.  For a check (a volume must not hold it) that must leave no folder behind. */
bool sb_run_root_peek(const char *home, char *buf, size_t size);
/* <runtime folder>/<name>: sandbox name's own runtime folder (ctl.sock, supervisor.log,
 * slirp.sock).  The path only; sb_run_dir_make makes it. */
int sb_run_dir(nook *n, const char *name, char **ret, nook_error *err);
/* Makes dir, a path sb_run_dir gave: 1 when it made the folder, 0 when it was there (what a
 * killed run left: clean it). */
int sb_run_dir_make(const char *dir, nook_error *err);
/* Removes a sandbox's runtime folder; with keep_log, only its sockets and its writable layer
 * (supervisor.log stays for 'nook logs --system' after a failed create). */
void sb_run_dir_clean(const char *dir, bool keep_log);

/* The ephemeral layer (docs/design/runtime.md, "The ephemeral layer"): an ephemeral sandbox's
 * writable layer (upper, work) is made in its runtime folder, not its state folder, when that
 * folder can hold it: a tmpfs (or any filesystem) that takes the user.* xattrs overlayfs needs in
 * a user namespace, with at least SB_LAYER_MIN_FREE bytes free.  Returns 1 when it may, having
 * made <dir>/upper (the probe's folder; the caller makes upper and work its sandbox's, as in the
 * state folder), else 0 having made nothing. */
#define SB_LAYER_MIN_FREE (256ULL << 20)
int sb_run_dir_layer(const char *dir, nook_error *err);
/* Where sandbox name's writable layer is now: <runtime folder>/<name>/upper when it has one there
 * (an ephemeral layer), else <sdir>/upper.  malloc'ed; NULL: out of memory. */
char *sb_upper_path(nook *n, const char *name, const char *sdir);
