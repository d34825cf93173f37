/* SPDX-License-Identifier: Apache-2.0 */
/* Host paths: the state root, directory creation, tree removal that never follows symlinks. */
#pragma once

#include <sys/types.h>

#include "nook.h"

/* The default state root: $NOOK_HOME, else /var/lib/nook for root, else $XDG_DATA_HOME/nook,
 * else $HOME/.local/share/nook.  Returns a malloc'd absolute path. */
int path_home_default(char **ret, nook_error *err);
/* mkdir -p with mode for every created component; existing directories are left alone. */
int path_mkdir_p(const char *path, mode_t mode, nook_error *err);
/* Removes name under dirfd: a file, a symlink, or a whole tree.  Never follows a symlink,
 * never crosses into another filesystem's mount.  A missing name is success. */
int path_rm_rf_at(int dirfd, const char *name, nook_error *err);
/* path_rm_rf_at for an absolute path. */
int path_rm_rf(const char *path, nook_error *err);
