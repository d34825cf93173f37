/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "isolate/idmap.h"
#include "isolate/userns.h"
#include "supervisor/idmaps.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/str.h"

void sup_idmaps_done(sup_idmaps *m) {
        for (size_t i = 0; i < m->n_lowers; i++)
                m->lower_fds[i] = safe_close(m->lower_fds[i]);
        m->n_lowers = 0;
        m->workspace_fd = safe_close(m->workspace_fd);
        for (size_t i = 0; i < ISO_MAX_MOUNTS; i++)
                if (m->on)
                        m->mount_fds[i] = safe_close(m->mount_fds[i]);
        m->on = false;
}

static int open_path(const char *p, bool dir, int *ret, nook_error *err) {
        struct open_how how = { .flags = O_PATH | O_CLOEXEC | (dir ? O_DIRECTORY : 0),
                .resolve = RESOLVE_NO_SYMLINKS };
        int fd = (int)syscall(SYS_openat2, AT_FDCWD, p, &how, sizeof(how));
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", p);
        *ret = fd;
        return 0;
}

/* Layers: canonical ids c + x (unpack's base) show as base + x. */
static int prepare_lowers(const sup_config *c, int ns, sup_idmaps *m, nook_error *err) {
        int r;
        STRV_FOREACH (l, c->lowers) {
                if (m->n_lowers >= ISO_MAX_LOWERS)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "Too many image layers (max %d)", ISO_MAX_LOWERS);
                _cleanup_close_ int fd = -1;
                if ((r = open_path(*l, true, &fd, err)) < 0)
                        return r;
                r = iso_idmap_clone(fd, ns, /* readonly= */ true, /* recursive= */ false,
                        &m->lower_fds[m->n_lowers], err);
                if (r < 0)
                        return nook_err_wrap(err, "idmapping image layer '%s' (Linux >= 5.19 needed)", *l);
                m->n_lowers++;
        }
        return 0;
}

/* Workspace and host volumes: host id x shows as base + x (root's files are the guest root's,
 * and the guest root writes as root).  A workspace owner other than root is mapped alone. */
static int prepare_binds(const sup_config *c, int vns, int ns, sup_idmaps *m, nook_error *err) {
        int r;
        if (c->workspace) {
                _cleanup_close_ int fd = -1;
                if ((r = open_path(c->workspace, true, &fd, err)) < 0)
                        return r;
                r = iso_idmap_clone(fd, ns >= 0 ? ns : vns, false, false, &m->workspace_fd, err);
                if (r < 0)
                        return nook_err_wrap(err, "idmapping the workspace '%s'", c->workspace);
        }
        for (size_t i = 0; i < c->n_mounts && i < ISO_MAX_MOUNTS; i++) {
                const sup_mount *sm = &c->mounts[i];
                nook_error ignore;
                _cleanup_close_ int fd = -1;
                if (!streq(sm->type, "bind"))
                        continue;
                if ((r = open_path(sm->source, false, &fd, err)) < 0)
                        return r;
                /* A filesystem without idmapping (nfs, fuse, ...) keeps today's plain bind. */
                if (iso_idmap_clone(fd, vns, sm->readonly, true, &m->mount_fds[i], &ignore) < 0)
                        log_debug("volume '%s' is not idmapped: %s, ignoring", sm->source, ignore.msg);
        }
        return 0;
}

int sup_idmaps_prepare(const sup_config *c, sup_idmaps *m, nook_error *err) {
        *m = (sup_idmaps)SUP_IDMAPS_INIT;
        for (size_t i = 0; i < ISO_MAX_MOUNTS; i++)
                m->mount_fds[i] = -1;
        if (c->id_base == 0)
                return 0;
        m->on = true;
        /* [0] layers, [1] workspace and volumes, [2] a workspace owner other than root alone */
        iso_idmap_spec specs[3] = {
                { ISO_ROOTFUL_ID_BASE, ISO_ROOTFUL_ID_BASE, c->id_base, ISO_ID_RANGE },
                { 0, 0, c->id_base, ISO_ID_RANGE },
                { c->ws_uid, c->ws_gid, c->id_base, 1 },
        };
        bool owner = c->ws_uid != 0 || c->ws_gid != 0;
        int ns[3] = { -1, -1, -1 };
        int r = iso_idmap_userns(specs, owner ? 3 : 2, ns, err);
        if (r >= 0)
                r = prepare_lowers(c, ns[0], m, err);
        if (r >= 0)
                r = prepare_binds(c, ns[1], ns[2], m, err);
        for (size_t i = 0; i < ELEMENTSOF(ns); i++)
                safe_close(ns[i]);
        if (r < 0)
                sup_idmaps_done(m);
        return r;
}
