/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
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

int iso_userns_owner_begin(uint32_t base, iso_userns_owner *o, nook_error *err) {
        *o = (iso_userns_owner){ .changed = false };
        if (!iso_rootful())
                return 0;
        uid_t id = base ? base : ISO_ROOTFUL_ID_BASE;
        o->securebits = prctl(PR_GET_SECUREBITS);
        o->dumpable = prctl(PR_GET_DUMPABLE);
        if (o->securebits < 0 || o->dumpable < 0 ||
                prctl(PR_SET_SECUREBITS, (unsigned long)o->securebits | SECBIT_NO_SETUID_FIXUP) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot keep capabilities across a uid change");
        if (setresgid((gid_t)-1, id, (gid_t)-1) < 0 || setresuid((uid_t)-1, id, (uid_t)-1) < 0) {
                int e = errno;
                o->changed = true;
                (void)iso_userns_owner_end(o, NULL);
                return nook_err_errnum(
                        err, NOOK_E_IO, e, "Cannot take the sandbox's host uid %u", (unsigned)id);
        }
        o->changed = true;
        /* files are still opened as root (the fsuid, which the clone passes on): the child opens
         * the sandbox's folders, root's, before its own ids exist */
        (void)setfsgid(0);
        (void)setfsuid(0);
        if (setfsuid((uid_t)-1) != 0 || setfsgid((gid_t)-1) != 0) {
                (void)iso_userns_owner_end(o, NULL);
                return nook_err_set(err, NOOK_E_IO, "Cannot keep root's file access across a uid change");
        }
        return 0;
}

int iso_userns_owner_end(const iso_userns_owner *o, nook_error *err) {
        if (!o->changed)
                return 0;
        /* back to root; the uid change made us undumpable, which /proc then shows as root-owned */
        if (setresuid((uid_t)-1, 0, (uid_t)-1) < 0 || setresgid((gid_t)-1, 0, (gid_t)-1) < 0 ||
                prctl(PR_SET_SECUREBITS, (unsigned long)o->securebits) < 0 ||
                prctl(PR_SET_DUMPABLE, (unsigned long)o->dumpable) < 0)
                return err
                        ? nook_err_errno(err, NOOK_E_IO, "Cannot return to root after the sandbox's clone")
                        : -1;
        return 0;
}

void iso_userns_owner_child(const iso_userns_owner *o) {
        /* full capabilities in the new namespace: the securebits are ours to restore, so a later
         * change to a guest user drops capabilities as it should */
        if (o->changed && prctl(PR_SET_SECUREBITS, (unsigned long)o->securebits) < 0)
                _exit(127);
}
