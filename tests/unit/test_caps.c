/* SPDX-License-Identifier: Apache-2.0 */
/* Capability sets, applied for real in forked children.  Each child first enters a new user
 * namespace (and UTS namespace), as the sandbox init does: it then holds every capability of that
 * namespace whatever the test's own uid, and a failed drop could at worst rename a throw-away
 * UTS namespace, never the host. */
#include <criterion/criterion.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/caps.h"
#include "util/macro.h"

typedef struct caps_report {
        int setup; /* 0, or the step that failed */
        uint64_t inh, prm, eff, bnd, amb;
        int nnp;
        int sethostname_errno, chroot_errno, mkfifo_errno, capset_up_errno;
        nook_error err;
} caps_report;

#define CAP(c) (1ull << (c))

static uint64_t status_hex(const char *key) {
        FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        uint64_t v = UINT64_MAX;
        size_t n = strlen(key);

        while (f && fgets(line, sizeof(line), f))
                if (strneq(line, key, n) && line[n] == ':')
                        v = strtoull(line + n + 1, NULL, 16);
        if (f)
                fclose(f);
        return v;
}

static int errno_of(int r) {
        return r < 0 ? errno : 0;
}

/* Tries to put CAP_SYS_ADMIN back into the effective and permitted sets. */
static int capset_up(void) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2] = {};
        if (syscall(SYS_capget, &hdr, data) < 0)
                return -1;
        data[0].effective |= 1u << CAP_SYS_ADMIN;
        data[0].permitted |= 1u << CAP_SYS_ADMIN;
        return (int)syscall(SYS_capset, &hdr, data);
}

static void child(iso_profile p, caps_report *rep) {
        char fifo[64];

        if (unshare(CLONE_NEWUSER | CLONE_NEWUTS) < 0) {
                rep->setup = 1;
                return;
        }
        if (iso_caps_drop(p, &rep->err) < 0) {
                rep->setup = 2;
                return;
        }
        if (iso_set_no_new_privs(&rep->err) < 0) {
                rep->setup = 3;
                return;
        }
        rep->inh = status_hex("CapInh");
        rep->prm = status_hex("CapPrm");
        rep->eff = status_hex("CapEff");
        rep->bnd = status_hex("CapBnd");
        rep->amb = status_hex("CapAmb");
        rep->nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
        rep->sethostname_errno = errno_of(sethostname("nook-test", 9));
        rep->chroot_errno = errno_of(chroot("/"));
        (void)snprintf(fifo, sizeof(fifo), "/tmp/nook-test-caps-%d", (int)getpid());
        rep->mkfifo_errno = errno_of(mkfifo(fifo, 0600));
        (void)unlink(fifo);
        rep->capset_up_errno = errno_of(capset_up());
}

static caps_report run(iso_profile p) {
        caps_report rep = {};
        int fds[2];

        cr_assert_eq(pipe(fds), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                child(p, &rep);
                _exit(write(fds[1], &rep, sizeof(rep)) == (ssize_t)sizeof(rep) ? 0 : 1);
        }
        close(fds[1]);
        cr_assert_eq(read(fds[0], &rep, sizeof(rep)), (ssize_t)sizeof(rep));
        close(fds[0]);
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (rep.setup == 1)
                cr_skip_test("user namespaces are unavailable here");
        cr_assert_eq(rep.setup, 0, "step %d failed: %s", rep.setup, rep.err.msg);
        return rep;
}

static void check_sets(iso_profile p, const caps_report *rep) {
        /* the bounding set is inherited across unshare(CLONE_NEWUSER), so it may lack bits the
         * host withheld from us; permitted in a new user namespace is complete */
        uint64_t bnd_before = status_hex("CapBnd");
        uint64_t mask = iso_caps_mask(p);

        cr_expect_eq(rep->prm, mask, "CapPrm %llx, want %llx", (unsigned long long)rep->prm,
                (unsigned long long)mask);
        cr_expect_eq(rep->eff, mask, "CapEff %llx", (unsigned long long)rep->eff);
        cr_expect_eq(rep->bnd, mask & bnd_before, "CapBnd %llx", (unsigned long long)rep->bnd);
        cr_expect_eq(rep->inh, 0);
        cr_expect_eq(rep->amb, 0);
        cr_expect_eq(rep->nnp, 1);
        cr_expect_eq(rep->sethostname_errno, EPERM, "no CAP_SYS_ADMIN: sethostname must fail");
        cr_expect_eq(rep->capset_up_errno, EPERM, "CAP_SYS_ADMIN must not come back");
        cr_expect_eq(rep->mkfifo_errno, 0, "a fifo needs no capability");
}

Test(caps, masks) {
        uint64_t def = iso_caps_mask(ISO_PROFILE_DEFAULT), res = iso_caps_mask(ISO_PROFILE_RESTRICTED);
        const int docker_minus_net_raw[] = {
                CAP_CHOWN,
                CAP_DAC_OVERRIDE,
                CAP_FSETID,
                CAP_FOWNER,
                CAP_MKNOD,
                CAP_SETGID,
                CAP_SETUID,
                CAP_SETFCAP,
                CAP_SETPCAP,
                CAP_NET_BIND_SERVICE,
                CAP_KILL,
                CAP_SYS_CHROOT,
                CAP_AUDIT_WRITE,
        };
        uint64_t want = 0;
        for (size_t i = 0; i < ELEMENTSOF(docker_minus_net_raw); i++)
                want |= CAP(docker_minus_net_raw[i]);

        cr_assert_eq(def, want);
        cr_assert_eq(res & ~def, 0, "restricted must be a subset of default");
        cr_assert_eq(res &
                        (CAP(CAP_MKNOD) | CAP(CAP_SETFCAP) | CAP(CAP_SYS_CHROOT) | CAP(CAP_SETPCAP) |
                                CAP(CAP_AUDIT_WRITE)),
                0);
        cr_assert_eq(
                def & (CAP(CAP_NET_RAW) | CAP(CAP_SYS_ADMIN) | CAP(CAP_SYS_PTRACE) | CAP(CAP_SYS_MODULE)),
                0);
        cr_assert_eq(iso_caps_mask(_ISO_PROFILE_MAX), 0);
        cr_assert_eq(iso_caps_mask(_ISO_PROFILE_INVALID), 0);
}

Test(caps, drop_default) {
        caps_report rep = run(ISO_PROFILE_DEFAULT);
        check_sets(ISO_PROFILE_DEFAULT, &rep);
        cr_expect_eq(rep.chroot_errno, 0, "default keeps CAP_SYS_CHROOT");
}

Test(caps, drop_restricted) {
        caps_report rep = run(ISO_PROFILE_RESTRICTED);
        check_sets(ISO_PROFILE_RESTRICTED, &rep);
        cr_expect_eq(rep.chroot_errno, EPERM, "restricted drops CAP_SYS_CHROOT");
}

Test(caps, invalid_profile) {
        nook_error err = {};
        cr_assert_eq(iso_caps_drop(_ISO_PROFILE_INVALID, &err), -NOOK_E_INVALID);
        cr_assert(strstr(err.msg, "Unknown capability profile"), "message: %s", err.msg);
}
