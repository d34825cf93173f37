/* SPDX-License-Identifier: Apache-2.0 */
/* Capability sets with raw capget/capset and prctl (capabilities(7)); libcap is not a
 * dependency for four system calls. */
#include <errno.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/caps.h"
#include "util/error.h"
#include "util/macro.h"

#define CAP(c) (1ull << (c))

/* docker's default set minus CAP_NET_RAW (raw sockets: ARP/ICMP spoofing on the sandbox's
 * network, and a long CVE history in packet sockets). */
#define CAPS_DEFAULT                                                                                        \
        (CAP(CAP_CHOWN) | CAP(CAP_DAC_OVERRIDE) | CAP(CAP_FOWNER) | CAP(CAP_FSETID) | CAP(CAP_KILL) |       \
                CAP(CAP_SETGID) | CAP(CAP_SETUID) | CAP(CAP_SETPCAP) | CAP(CAP_NET_BIND_SERVICE) |          \
                CAP(CAP_SYS_CHROOT) | CAP(CAP_MKNOD) | CAP(CAP_AUDIT_WRITE) | CAP(CAP_SETFCAP))

/* Restricted keeps what package managers and build tools use as root (chown, reading and
 * writing any file of the sandbox, switching users, binding ports < 1024) and drops:
 *   MKNOD        device nodes are useless in a userns (the kernel wants CAP_MKNOD in the initial
 *                namespace for them); fifos and sockets need no capability
 *   SETFCAP      writes file capabilities, which only matter to a later privileged execve
 *   SYS_CHROOT   chroot() is a building block of several escapes (with an fd to outside the root)
 *   SETPCAP      only lets a process shape capability sets, and ours are final
 *   AUDIT_WRITE  the audit socket answers only to the initial user namespace */
#define CAPS_RESTRICTED                                                                                     \
        (CAP(CAP_CHOWN) | CAP(CAP_DAC_OVERRIDE) | CAP(CAP_FOWNER) | CAP(CAP_FSETID) | CAP(CAP_KILL) |       \
                CAP(CAP_SETGID) | CAP(CAP_SETUID) | CAP(CAP_NET_BIND_SERVICE))

uint64_t iso_caps_mask(iso_profile p) {
        switch (p) {
        case ISO_PROFILE_DEFAULT:
                return CAPS_DEFAULT;
        case ISO_PROFILE_RESTRICTED:
                return CAPS_RESTRICTED;
        case _ISO_PROFILE_MAX:
        case _ISO_PROFILE_INVALID:
        default:
                return 0;
        }
}

/* The bounding set limits what any later execve() can gain, including root's "all caps" rule
 * (capabilities(7), "Capabilities and execution of programs by root").  PR_CAPBSET_READ answers
 * EINVAL past the kernel's last capability, which ends the walk without reading
 * /proc/sys/kernel/cap_last_cap (the new /proc may not be mounted yet). */
static int drop_bounding(uint64_t keep, nook_error *err) {
        for (unsigned long c = 0; c < 64; c++) {
                int r = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
                if (r < 0 && errno == EINVAL)
                        break;
                if (r < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot read capability %lu of the bounding set", c);
                if (r == 0 || (keep & CAP(c)))
                        continue;
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
                        return nook_err_errno(err, NOOK_E_IO,
                                "Cannot drop capability %lu from the bounding set (this needs "
                                "CAP_SETPCAP; drop capabilities before switching to another user)",
                                c);
        }
        return 0;
}

static int clear_ambient(nook_error *err) {
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) >= 0)
                return 0;
        /* COMPAT(kernel < 4.3): no ambient set, so nothing to clear */
        if (errno == EINVAL)
                return 0;
        return nook_err_errno(err, NOOK_E_IO, "Cannot clear the ambient capability set");
}

/* Permitted and effective become the profile's set, intersected with what the process holds
 * (capset(2) can only shrink permitted).  Inheritable is cleared rather than set: with a
 * non-empty inheritable set a non-root payload could exec a file with inheritable file
 * capabilities and gain them (CVE-2022-24769, fixed the same way in moby and runc). */
static int set_process_caps(uint64_t keep, uint64_t inheritable, nook_error *err) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
        uint64_t have, want;

        if (syscall(SYS_capget, &hdr, data) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot read the capability sets");
        have = (uint64_t)data[0].permitted | ((uint64_t)data[1].permitted << 32);
        want = have & keep;

        for (size_t i = 0; i < ELEMENTSOF(data); i++) {
                data[i].permitted = data[i].effective = (uint32_t)(want >> (32 * i));
                data[i].inheritable = (uint32_t)((inheritable & have) >> (32 * i));
        }
        if (syscall(SYS_capset, &hdr, data) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the capability sets to 0x%llx",
                        (unsigned long long)want);
        return 0;
}

/* Order: the bounding set first, because dropping from it needs CAP_SETPCAP in the effective set
 * and the restricted profile removes CAP_SETPCAP in the capset that follows. */
int iso_caps_drop(iso_profile p, nook_error *err) {
        uint64_t keep = iso_caps_mask(p);
        int r;

        if (keep == 0)
                return nook_err_set(err, NOOK_E_INVALID, "Unknown capability profile %d", (int)p);

        r = drop_bounding(keep, err);
        if (r < 0)
                return r;
        r = clear_ambient(err);
        if (r < 0)
                return r;
        return set_process_caps(keep, 0, err);
}

/* The five sets of an OCI process (runtime-spec "capabilities"); the same order rules. */
int iso_caps_set(const iso_capsets *s, nook_error *err) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
        struct __user_cap_data_struct cur[_LINUX_CAPABILITY_U32S_3] = {};
        int r;

        /* After setuid() with PR_SET_KEEPCAPS the effective set is empty: raise it to the
         * permitted set, the bounding-set drops need CAP_SETPCAP effective. */
        if (syscall(SYS_capget, &hdr, cur) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot read the capability sets");
        for (size_t i = 0; i < ELEMENTSOF(cur); i++)
                cur[i].effective = cur[i].permitted;
        if (syscall(SYS_capset, &hdr, cur) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot raise the effective capability set");

        r = drop_bounding(s->bounding, err);
        if (r < 0)
                return r;
        r = clear_ambient(err);
        if (r < 0)
                return r;
        r = set_process_caps(s->permitted, s->inheritable, err);
        if (r < 0)
                return r;
        if (s->effective != s->permitted) {
                struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
                if (syscall(SYS_capget, &hdr, data) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read the capability sets");
                for (size_t i = 0; i < ELEMENTSOF(data); i++)
                        data[i].effective &= (uint32_t)(s->effective >> (32 * i));
                if (syscall(SYS_capset, &hdr, data) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot set the effective capability set");
        }
        /* An ambient capability must be permitted and inheritable (capabilities(7)). */
        for (unsigned long c = 0; c < 64; c++)
                if ((s->ambient & CAP(c)) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0 &&
                        errno != EINVAL && errno != EPERM)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot raise ambient capability %lu", c);
        return 0;
}

int iso_set_no_new_privs(nook_error *err) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return nook_err_errno(err, NOOK_E_MISSING_FEATURE,
                        "Cannot set no_new_privs (PR_SET_NO_NEW_PRIVS needs Linux 3.5)");
        return 0;
}
