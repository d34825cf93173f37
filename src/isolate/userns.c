/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/userns.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"

bool iso_rootful(void) {
        static int cached = -1;
        if (cached >= 0)
                return cached;
        /* Host root only: uid 0 inside `unshare -r` or a container's user namespace cannot map
         * an arbitrary range, so there we take the rootless path. */
        cached = 0;
        if (geteuid() == 0) {
                char buf[256] = "";
                int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
                if (fd >= 0) {
                        ssize_t n = read(fd, buf, sizeof(buf) - 1);
                        safe_close(fd);
                        unsigned long a, b, c;
                        if (n > 0 && sscanf(buf, "%lu %lu %lu", &a, &b, &c) == 3 && a == 0 && b == 0 &&
                                c == 4294967295ul)
                                cached = 1;
                }
        }
        return cached;
}

void iso_sandbox_root_ids(uid_t *ret_uid, gid_t *ret_gid) {
        if (iso_rootful()) {
                *ret_uid = ISO_ROOTFUL_ID_BASE;
                *ret_gid = ISO_ROOTFUL_ID_BASE;
        } else {
                *ret_uid = geteuid();
                *ret_gid = getegid();
        }
}

static int write_proc_file(pid_t pid, const char *file, const char *content, nook_error *err) {
        char path[64];
        (void)snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", path);
        int r = fd_write_all(fd, content, strlen(content));
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot write '%s' to '%s'", content, path);
        return 0;
}

int iso_userns_write_maps(pid_t pid, uint32_t base, nook_error *err) {
        char uid_map[64], gid_map[64];
        int r;

        if (iso_rootful()) {
                if (base == 0)
                        base = ISO_ROOTFUL_ID_BASE;
                (void)snprintf(uid_map, sizeof(uid_map), "0 %u %u\n", base, ISO_ID_RANGE);
                (void)snprintf(gid_map, sizeof(gid_map), "0 %u %u\n", base, ISO_ID_RANGE);
        } else {
                /* Unprivileged: only our own ids, and setgroups must be denied before gid_map
                 * (user_namespaces(7), "The /proc/[pid]/setgroups file"). */
                (void)snprintf(uid_map, sizeof(uid_map), "0 %u 1\n", (unsigned)geteuid());
                (void)snprintf(gid_map, sizeof(gid_map), "0 %u 1\n", (unsigned)getegid());
                r = write_proc_file(pid, "setgroups", "deny", err);
                if (r < 0)
                        return r;
        }
        r = write_proc_file(pid, "uid_map", uid_map, err);
        if (r < 0)
                return nook_err_wrap(err, "setting up the sandbox's user namespace");
        r = write_proc_file(pid, "gid_map", gid_map, err);
        if (r < 0)
                return nook_err_wrap(err, "setting up the sandbox's user namespace");
        return 0;
}
