/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's root filesystem and mount plan, applied by the sandbox init right after
 * clone() into new user, mount, pid, uts, ipc, net and cgroup namespaces.
 *
 * Setup order (a synthesis of crun, bubblewrap and systemd-nspawn; each step is one function):
 *   1. the supervisor validates the config and opens every host directory as an O_PATH fd
 *      *before* clone, so bad input changes nothing and the child never has to walk the
 *      (0700) state folder by path: in a rootful sandbox its root is an unprivileged host uid;
 *   2. clone with CLONE_NEWUSER and the rest; the supervisor writes the id maps, then syncs;
 *   3. the child makes "/" MS_SLAVE|MS_REC (host mount events still reach us, ours never leak);
 *   4. it mounts a private tmpfs as scratch and the overlay (image layers read-only under a
 *      layer of /etc/hosts, /etc/hostname and /etc/resolv.conf made on the scratch, the
 *      sandbox's upper layer writable) inside it, through /proc/self/fd/N paths;
 *   5. it applies the plan under the new root: read-only host binds (the built-in host image),
 *      /proc, a minimal /dev, /tmp, /sys (read-only), /workspace, masked /proc paths;
 *   6. pivot_root(".", "."), then detaches the old root;
 *   7. hostname, loopback up; the caller then drops caps, sets no_new_privs, loads seccomp. */
#pragma once

#include <stdbool.h>

#include "nook.h"

#define ISO_MAX_LOWERS 64

/* A user volume: a host directory or file bound (source_fd), or a tmpfs (source_fd -1). */
typedef struct iso_mount {
        int source_fd; /* O_PATH, opened without following symlinks; -1 for tmpfs */
        const char *target;
        bool readonly;
        bool detached; /* source_fd is a detached idmapped mount (isolate/idmap.h): attach it */
        unsigned long size_mib; /* tmpfs */
} iso_mount;

#define ISO_MAX_MOUNTS 72

typedef struct iso_rootfs {
        /* NULL: the image's /etc/hosts and /etc/hostname stay.  Else both are made from it on the
         * scratch tmpfs, the overlay's topmost read-only layer (rootfs.c:make_etc_layer). */
        const char *hostname;
        const char *resolv_conf; /* the same for /etc/resolv.conf (a network); NULL: the image's */
        int lower_fds[ISO_MAX_LOWERS]; /* image layers, topmost first */
        size_t n_lowers;
        int upper_fd, work_fd; /* per-sandbox writable layer; -1 with n_lowers == 1: read-only root */
        bool upper_volatile; /* the upper layer is deleted at stop (ephemeral): overlayfs need
                              * not sync it (the volatile option, Linux 5.10+; else ignored) */
        bool lowers_detached; /* lower_fds are detached idmapped mounts: attached under scratch */
        int workspace_fd;
        bool workspace_detached; /* workspace_fd is a detached idmapped mount (nosuid,nodev set) */
        char **ro_binds; /* host paths bound read-only at the same place (built-in host image) */
        bool rootless; /* setgroups is denied in the user namespace */
        iso_mount mounts[ISO_MAX_MOUNTS]; /* volumes, then the scripts folder; nosuid,nodev always */
        size_t n_mounts;
} iso_rootfs;

/* Steps 3-6.  Runs in the child, as root of the new user namespace.  Leaves cwd at "/". */
int iso_rootfs_setup(const iso_rootfs *rf, nook_error *err);
/* Step 7: hostname and loopback. */
int iso_net_uts_setup(const char *hostname, nook_error *err);

/* pivot_root(".", ".") into newroot (a mount point), then detaches the old root; cwd "/".  The
 * OCI runtime (src/oci/) shares it. */
int iso_pivot_root(const char *newroot, nook_error *err);
/* The locked flags (nosuid, nodev, noexec, atime) of the mount at path, which a read-only
 * bind remount in a user namespace must repeat (mount(2), EPERM). */
unsigned long iso_locked_flags(const char *path);
