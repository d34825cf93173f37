/* SPDX-License-Identifier: Apache-2.0 */
/* What this host can do (STYLE.md R13): probed once per `nook doctor` and per create, then
 * passed down; branches test a field here, never geteuid() or a kernel version elsewhere. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "nook.h"

typedef struct host_caps {
        bool rootless; /* euid != 0 */
        bool userns; /* unshare(CLONE_NEWUSER) works for us, tried in a child */
        bool newuidmap; /* newuidmap and newgidmap are in PATH or /usr/bin */
        bool subuid_range; /* /etc/subuid and /etc/subgid list a range for this user */
        bool cgroup_v2; /* a cgroup2 hierarchy holds cpu, memory or pids */
        bool cgroup_v1_cpu; /* v1 hierarchies with these controllers are mounted */
        bool cgroup_v1_memory;
        bool cgroup_v1_pids;
        bool cgroup_delegated; /* we can create child cgroups next to our own cgroup */
        bool overlay_in_userns; /* overlayfs mounted in a fresh user+mount namespace, tried */
        bool openat2; /* openat2(2), Linux 5.6 */
        bool clone3; /* clone3(2), Linux 5.3 */
        bool idmapped_mounts; /* mount_setattr(MOUNT_ATTR_IDMAP), Linux 5.12, and we are root */
        bool seccomp; /* seccomp filters with SECCOMP_RET_ERRNO */
        bool slirp4netns; /* the slirp4netns binary */
        bool tun; /* /dev/net/tun readable and writable by us (slirp4netns opens it as us) */
        bool nftables; /* the nft binary */
        bool kvm; /* /dev/kvm is readable and writable */
        char kernel[64]; /* uname -r */
} host_caps;

/* Cheap (a few ms: one fork for the user namespace and overlay try, a few files and syscalls).
 * Fails only if nothing could be probed at all (uname); a feature that cannot be determined is
 * reported false.  Safe in a multi-threaded caller: the child only makes raw system calls on
 * memory prepared before fork(), then _exit()s (signal-safety(7)). */
int host_caps_probe(host_caps *ret, nook_error *err);

/* One line of `nook doctor`.  fix is NULL when ok; required means sandboxes cannot start
 * without it. */
typedef struct host_cap_row {
        const char *name;
        bool ok;
        bool required;
        char detail[160];
        const char *fix;
} host_cap_row;

#define HOST_CAPS_ROWS_MAX 16

/* Fills up to max rows (HOST_CAPS_ROWS_MAX is always enough) and returns how many it wrote. */
size_t host_caps_rows(const host_caps *c, host_cap_row *rows, size_t max);
/* True when every required row is ok. */
bool host_caps_usable(const host_caps *c);
