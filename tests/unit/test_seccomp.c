/* SPDX-License-Identifier: Apache-2.0 */
/* The seccomp profiles, loaded for real in forked children.  Every denied call is checked twice:
 * EPERM under the filter, and (as real root, where no capability check interferes) not EPERM
 * without it, which proves the filter is what denies it. */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "helpers/try-syscall.h"
#include "isolate/caps.h"
#include "isolate/seccomp.h"
#include "util/macro.h"

#define N_TRY (sizeof(try_syscalls) / sizeof(try_syscalls[0]))
#define NO_FILTER ((iso_profile)-1)

/* Each profile's denials; every other name in try_syscalls must behave as without a filter. */
static const char *const denied_default[] = {
        "keyctl",
        "add_key",
        "bpf",
        "perf_event_open",
        "swapon",
        "reboot",
        "kexec_load",
        "init_module",
        "open_by_handle_at",
        "userfaultfd",
        "clock_settime",
        "personality-unsafe",
        "io_uring_setup",
        "syslog",
        "acct",
        "iopl",
        "quotactl",
        "ioctl-tiocsti",
};
static const char *const denied_restricted_extra[] = {
        "ptrace",
        "process_vm_readv",
        "clone-newuser",
        "unshare-user",
        "setns",
        "mount",
        "umount2",
        "pivot_root",
        "fsopen",
        "name_to_handle_at",
        "personality",
};

static bool in_list(const char *name, const char *const *list, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (streq(name, list[i]))
                        return true;
        return false;
}

static int expected_errno(iso_profile p, const char *name) {
        if (in_list(name, denied_default, ELEMENTSOF(denied_default)))
                return EPERM;
        if (p == ISO_PROFILE_RESTRICTED) {
                if (streq(name, "clone3"))
                        return ENOSYS;
                if (in_list(name, denied_restricted_extra, ELEMENTSOF(denied_restricted_extra)))
                        return EPERM;
        }
        return 0; /* as without a filter */
}

/* Runs every try_syscalls entry in a child that first loaded the profile (or nothing). */
static void run_all(iso_profile p, int ret[N_TRY]) {
        int fds[2];
        cr_assert_eq(pipe(fds), 0);

        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                nook_error err = {};
                int res[N_TRY];
                if (p != NO_FILTER && (iso_set_no_new_privs(&err) < 0 || iso_seccomp_load(p, &err) < 0)) {
                        fprintf(stderr, "child: %s\n", err.msg);
                        _exit(99);
                }
                for (size_t i = 0; i < N_TRY; i++)
                        res[i] = try_syscall_run(&try_syscalls[i]);
                _exit(write(fds[1], res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 98);
        }
        close(fds[1]);
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status 0x%x)", status);
        cr_assert_eq(read(fds[0], ret, sizeof(int) * N_TRY), (ssize_t)(sizeof(int) * N_TRY));
        close(fds[0]);
}

/* Real root: uid 0 in the initial user namespace, whose uid_map is the identity over all ids
 * (under `unshare -r` uid 0 holds no capability over the host's kernel objects). */
static bool real_root(void) {
        FILE *f = fopen("/proc/self/uid_map", "re");
        unsigned long inside = 1, outside = 1, count = 0;
        bool ok = f && fscanf(f, "%lu %lu %lu", &inside, &outside, &count) == 3;
        if (f)
                fclose(f);
        return geteuid() == 0 && ok && inside == 0 && outside == 0 && count == 4294967295ul;
}

static void check_profile(iso_profile p) {
        int base[N_TRY], filtered[N_TRY];
        bool prove = real_root();

        run_all(NO_FILTER, base);
        run_all(p, filtered);
        for (size_t i = 0; i < N_TRY; i++) {
                const char *name = try_syscalls[i].name;
                int want = expected_errno(p, name);
                if (want == 0) {
                        cr_expect_eq(filtered[i], base[i], "%s: %s allowed, got %d, without filter %d",
                                iso_profile_to_string(p), name, filtered[i], base[i]);
                        continue;
                }
                cr_expect_eq(filtered[i], want, "%s: %s should fail with %d, got %d",
                        iso_profile_to_string(p), name, want, filtered[i]);
                if (prove)
                        cr_expect_neq(base[i], want,
                                "%s: without a filter %s already fails with %d; the test "
                                "does not prove the filter",
                                iso_profile_to_string(p), name, want);
        }
}

Test(seccomp, profile_strings) {
        cr_assert_str_eq(iso_profile_to_string(ISO_PROFILE_DEFAULT), "default");
        cr_assert_str_eq(iso_profile_to_string(ISO_PROFILE_RESTRICTED), "restricted");
        cr_assert_null(iso_profile_to_string(_ISO_PROFILE_MAX));
        cr_assert_null(iso_profile_to_string(_ISO_PROFILE_INVALID));
        cr_assert_eq(iso_profile_from_string("default"), ISO_PROFILE_DEFAULT);
        cr_assert_eq(iso_profile_from_string("restricted"), ISO_PROFILE_RESTRICTED);
        cr_assert_eq(iso_profile_from_string("Default"), _ISO_PROFILE_INVALID);
        cr_assert_eq(iso_profile_from_string(""), _ISO_PROFILE_INVALID);
        cr_assert_eq(iso_profile_from_string(NULL), _ISO_PROFILE_INVALID);
}

Test(seccomp, default_profile) {
        check_profile(ISO_PROFILE_DEFAULT);
}

Test(seccomp, restricted_profile) {
        check_profile(ISO_PROFILE_RESTRICTED);
}

/* personality(): the allowed values pass, and the values at the edges of each of the 33 deny rules
 * (every single bit, every all-ones-but-one-bit value) are decided correctly. */
Test(seccomp, default_personality_values) {
        static const unsigned long allowed[] = { 0, PER_LINUX32, UNAME26, UNAME26 | PER_LINUX32,
                0xffffffff };
        unsigned long values[5 + 64 + 4];
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(allowed); i++)
                values[n++] = allowed[i];
        for (unsigned b = 0; b < 32; b++) {
                values[n++] = 1ul << b;
                values[n++] = 0xfffffffful & ~(1ul << b);
        }
        values[n++] = 0x20009;
        values[n++] = 0x7fffffff;
        values[n++] = PER_SVR4;
        values[n++] = 0x100000000ul;

        for (size_t i = 0; i < n; i++) {
                unsigned long v = values[i];
                bool want_ok = v == 0 || v == PER_LINUX32 || v == UNAME26 || v == (UNAME26 | PER_LINUX32) ||
                        v == 0xffffffff;
                pid_t pid = fork();
                cr_assert_geq(pid, 0);
                if (pid == 0) {
                        nook_error err = {};
                        if (iso_set_no_new_privs(&err) < 0 ||
                                iso_seccomp_load(ISO_PROFILE_DEFAULT, &err) < 0)
                                _exit(99);
                        long r = syscall(SYS_personality, v);
                        _exit(r >= 0 ? 0 : errno == EPERM ? 1 : 2);
                }
                int status;
                cr_assert_eq(waitpid(pid, &status, 0), pid);
                cr_assert(WIFEXITED(status));
                cr_expect_eq(WEXITSTATUS(status), want_ok ? 0 : 1, "personality(0x%lx): want %s, exit %d", v,
                        want_ok ? "allowed" : "EPERM", WEXITSTATUS(status));
        }
}

/* The supervisor's order: drop caps (no CAP_SYS_ADMIN left) -> no_new_privs -> seccomp.  Without
 * no_new_privs the load must fail and say what to do. */
Test(seccomp, needs_no_new_privs) {
        int fds[2];
        cr_assert_eq(pipe(fds), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                nook_error err = {};
                /* as the sandbox init: in a user namespace, where we hold CAP_SETPCAP to drop */
                if (unshare(CLONE_NEWUSER) < 0)
                        _exit(3);
                int r = iso_caps_drop(ISO_PROFILE_RESTRICTED, &err);
                if (r >= 0)
                        r = iso_seccomp_load(ISO_PROFILE_DEFAULT, &err);
                (void)!write(fds[1], &err, sizeof(err));
                if (r >= 0)
                        _exit(1);
                memset(&err, 0, sizeof(err));
                if (iso_set_no_new_privs(&err) < 0 || iso_seccomp_load(ISO_PROFILE_DEFAULT, &err) < 0)
                        _exit(2);
                _exit(0);
        }
        close(fds[1]);
        nook_error err = {};
        ssize_t n = read(fds[0], &err, sizeof(err));
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status));
        if (WEXITSTATUS(status) == 3)
                cr_skip_test("user namespaces are unavailable here");
        cr_assert_eq(n, (ssize_t)sizeof(err));
        cr_assert_eq(WEXITSTATUS(status), 0, "exit %d, message: %s", WEXITSTATUS(status), err.msg);
        cr_assert_eq(err.sys_errno, EACCES);
        cr_assert(strstr(err.msg, "no_new_privs"), "message: %s", err.msg);
        close(fds[0]);
}

Test(seccomp, invalid_profile) {
        nook_error err = {};
        cr_assert_eq(iso_seccomp_load(_ISO_PROFILE_MAX, &err), -NOOK_E_INVALID);
        cr_assert(strstr(err.msg, "Unknown seccomp profile"), "message: %s", err.msg);
}

Test(seccomp, export_bpf) {
        for (int p = 0; p < _ISO_PROFILE_MAX; p++) {
                nook_error err = {};
                int fd = memfd_create("bpf", MFD_CLOEXEC);
                cr_assert_geq(fd, 0);
                cr_assert_eq(iso_seccomp_export_bpf((iso_profile)p, fd, &err), 0, "%s", err.msg);
                off_t size = lseek(fd, 0, SEEK_CUR);
                /* struct sock_filter is 8 bytes; a deny list of ~80 rules is far beyond 10 */
                cr_assert_gt(size, 80, "profile %d: %lld bytes", p, (long long)size);
                close(fd);
        }
}

/* The filter survives execve and the static probe reports it: the path the integration tests use. */
Test(seccomp, probe_sees_filter) {
        const char *build = getenv("NOOK_BUILD_DIR");
        char probe[4096], out[4096] = "";
        if (!build)
                cr_skip_test("NOOK_BUILD_DIR is not set (run through meson test)");
        (void)snprintf(probe, sizeof(probe), "%s/tests/helpers/nook-probe", build);
        if (access(probe, X_OK) < 0)
                cr_skip_test("%s is not built", probe);

        int fds[2];
        cr_assert_eq(pipe(fds), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                nook_error err = {};
                if (dup2(fds[1], STDOUT_FILENO) < 0 || iso_set_no_new_privs(&err) < 0 ||
                        iso_seccomp_load(ISO_PROFILE_RESTRICTED, &err) < 0)
                        _exit(99);
                execl(probe, probe, "try-syscall", "keyctl", "mount", "clone3", "getpid", "bogus",
                        (char *)NULL);
                _exit(98);
        }
        close(fds[1]);
        ssize_t n = read(fds[0], out, sizeof(out) - 1);
        close(fds[0]);
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
        cr_assert_gt(n, 0);
        cr_assert_str_eq(out,
                "{\"keyctl\":\"EPERM\",\"mount\":\"EPERM\",\"clone3\":\"ENOSYS\",\"getpid\":\"ok\","
                "\"bogus\":\"unknown\"}\n");
}
