/* SPDX-License-Identifier: Apache-2.0 */
/* Host paths: the state root, directory creation, tree removal that never follows symlinks. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "nook.h"

/* The default state root: $NOOK_HOME, else /var/lib/nook for root, else $XDG_DATA_HOME/nook,
 * else $HOME/.local/share/nook.  Returns a malloc'd absolute path. */
int path_home_default(char **ret, nook_error *err);
/* mkdir -p with mode for every created component; existing directories are left alone. */
int path_mkdir_p(const char *path, mode_t mode, nook_error *err);
/* Whether a and b name the same file or folder (device and inode, not spelling): on a merged-/usr
 * system the loader may name /usr/lib/x86_64-linux-gnu as /lib/x86_64-linux-gnu.  false when
 * either cannot be looked at. */
bool path_same(const char *a, const char *b);
/* Removes name under dirfd: a file, a symlink, or a whole tree.  Never follows a symlink, never
 * descends into a mount point (another filesystem or a bind mount: BUSY, naming it).  Folders a
 * sandbox left read-only or at mode 0 go too; a tree of any depth goes with a bounded stack and
 * at most 65 descriptors (a guest can make one far deeper than PATH_MAX).  A missing name is
 * success. */
int path_rm_rf_at(int dirfd, const char *name, nook_error *err);
/* path_rm_rf_at for an absolute path. */
int path_rm_rf(const char *path, nook_error *err);
/* Opens path (absolute or relative, taken inside root_fd) as an O_PATH fd, creating what is
 * missing: directories 0755, the last component a directory or, with last_dir false, an empty
 * 0644 file.  Every lookup is openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) from root_fd, so
 * "..", absolute symlinks and symlinks to "/" resolve inside the root, never above it; a
 * missing name is made with mkdirat/mknodat in its resolved parent's fd, one component at a
 * time, so nothing is created outside the root either.  An existing last component is opened as
 * it is (never for writing: no copy-up on an overlay).  Empty and "." components are skipped.
 * INVALID for a path of PATH_MAX bytes or more; IO (with errno) when a component cannot be
 * resolved or made (ENOTDIR, ENAMETOOLONG, ELOOP, a dangling symlink: ENOENT). */
int path_open_in_root(int root_fd, const char *path, bool last_dir, int *ret_fd, nook_error *err);
