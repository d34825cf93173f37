/* SPDX-License-Identifier: Apache-2.0 */
/* What the workspace's own files share: the handle's layout and the resolver.  Not for other
 * modules: they use ws.h. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "nook.h"
#include "workspace/ws.h"

struct ws {
        char *root; /* absolute host path, no trailing '/' */
        int root_fd; /* O_PATH|O_DIRECTORY on root; every lookup starts here */
        uid_t owner_uid; /* owner of what we create (the sandbox's root on the host) */
        gid_t owner_gid;
        bool chown; /* owner differs from our euid/egid: fchown what we create */
        bool no_openat2; /* the kernel lacks openat2 (ENOSYS seen), or a test forces the fallback */
        bool in_root; /* a sandbox's root filesystem (ws_open_root): RESOLVE_IN_ROOT, not BENEATH */
};

/* Opens rel (a normalised relative path, "" = the root) beneath the root, with the semantics of
 * openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS): symlinks that stay inside are followed, an
 * absolute symlink or one that climbs out fails with EXDEV.  O_CLOEXEC is added.  Returns the
 * fd or -errno. */
int ws_openat_beneath(ws *w, const char *rel, int flags);
/* The same with the mode an O_CREAT gives a new file (the umask applies, as with openat). */
int ws_openat_beneath_mode(ws *w, const char *rel, int flags, mode_t mode);
/* The same by walking one component at a time with O_NOFOLLOW (the fallback, exposed so the
 * resolver's two halves can be compared in tests). */
int ws_walk_beneath(const ws *w, const char *rel, int flags);

/* Fills err for the user's path after a failed resolution (-errno from the calls above). */
int ws_err_resolve(nook_error *err, int neg_errno, const char *path);
/* The same, naming where ("the workspace", "the sandbox's root filesystem"). */
int ws_err_resolve_in(nook_error *err, int neg_errno, const char *path, const char *where);
/* NOOK_E_REFUSED, "Refusing a path outside the workspace: '<path>'". */
int ws_err_refused(nook_error *err, const char *path, size_t len);
