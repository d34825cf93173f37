/* SPDX-License-Identifier: Apache-2.0 */
/* The seccomp profiles, loaded for real in forked children.  Every denied call is checked twice:
 * EPERM under the filter, and (as real root, where no capability check interferes) not EPERM
 * without it, which proves the filter is what denies it. */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "helpers/try-syscall.h"
#include "isolate/caps.h"
#include "isolate/seccomp.h"
#include "isolate/userns.h"
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

static void check_profile(iso_profile p) {
        int base[N_TRY], filtered[N_TRY];
        /* real root: under `unshare -r` uid 0 holds no capability over the host's kernel objects */
        bool prove = iso_rootful();

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

/* ---- the program cache (iso_seccomp_prepare with a cache folder) ----------------------------- */

static size_t exported_bytes(iso_profile p, void **ret) {
        nook_error err = {};
        int fd = memfd_create("bpf", MFD_CLOEXEC);
        cr_assert_geq(fd, 0);
        cr_assert_eq(iso_seccomp_export_bpf(p, fd, &err), 0, "%s", err.msg);
        off_t size = lseek(fd, 0, SEEK_CUR);
        *ret = malloc((size_t)size);
        cr_assert_eq(pread(fd, *ret, (size_t)size, 0), size);
        close(fd);
        return (size_t)size;
}

/* The only file in dir (the cache entry), as a path. */
static void cache_entry(const char *dir, char *out, size_t len) {
        char cmd[512];
        (void)snprintf(cmd, sizeof(cmd), "ls -1 %s | grep '^seccomp-default-.*\\.bpf$'", dir);
        FILE *f = popen(cmd, "r");
        char name[300] = "";
        cr_assert(f && fgets(name, sizeof(name), f), "no cache entry in %s", dir);
        pclose(f);
        name[strcspn(name, "\n")] = 0;
        (void)snprintf(out, len, "%s/%s", dir, name);
}

static uint32_t fnv1a(const void *p, size_t n) {
        uint32_t h = 2166136261u;
        for (size_t i = 0; i < n; i++)
                h = (h ^ ((const unsigned char *)p)[i]) * 16777619u;
        return h;
}

/* Writes a cache entry of n instructions; good_sum false writes a wrong checksum. */
static void plant(const char *path, const void *insns, uint32_t n, bool good_sum) {
        struct {
                char magic[8];
                uint32_t len, sum;
        } h = { .magic = "NOOKBPF1", .len = n, .sum = fnv1a(insns, n * 8) ^ (good_sum ? 0 : 1) };
        FILE *f = fopen(path, "w");
        cr_assert(f && fwrite(&h, sizeof(h), 1, f) == 1 && fwrite(insns, 8, n, f) == n);
        fclose(f);
}

Test(seccomp, cache_is_written_then_used) {
        char tmpl[] = "/tmp/nook-seccomp-cache.XXXXXX", dir[300], entry[700];
        cr_assert(mkdtemp(tmpl));
        (void)snprintf(dir, sizeof(dir), "%s/cache", tmpl); /* made by prepare */
        void *want;
        size_t want_len = exported_bytes(ISO_PROFILE_DEFAULT, &want);
        nook_error err = {};
        iso_seccomp_prog prog = {};

        cr_assert_eq(iso_seccomp_prepare(ISO_PROFILE_DEFAULT, dir, &prog, &err), 0, "%s", err.msg);
        cr_assert_eq(prog.len * 8, want_len, "the program is libseccomp's");
        cr_assert_eq(memcmp(prog.insns, want, want_len), 0);
        iso_seccomp_prog_done(&prog);
        cache_entry(dir, entry, sizeof(entry));
        struct stat st;
        cr_assert_eq(stat(entry, &st), 0);
        cr_assert_eq(
                (size_t)st.st_size, 16 + want_len, "the cache holds the same program, after its header");
        cr_assert_eq(st.st_mode & 0777, 0600);

        /* Proof that the second call reads the cache: plant a different (one-instruction) program
         * with a right header (magic, count, FNV-1a of the instruction bytes). */
        static const unsigned char ret_allow[8] = { 0x06, 0, 0, 0, 0, 0, 0xff, 0x7f };
        plant(entry, ret_allow, 1, true);
        cr_assert_eq(iso_seccomp_prepare(ISO_PROFILE_DEFAULT, dir, &prog, &err), 0, "%s", err.msg);
        cr_assert_eq(prog.len, 1, "the cached program was used");
        iso_seccomp_prog_done(&prog);
        free(want);
        char cmd[400];
        (void)snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
        cr_assert_eq(system(cmd), 0);
}

/* A cache entry that is not whole instructions, too long, or a symlink is compiled afresh. */
Test(seccomp, cache_bad_entries_are_not_used) {
        char tmpl[] = "/tmp/nook-seccomp-cache.XXXXXX", entry[700];
        cr_assert(mkdtemp(tmpl));
        void *want;
        size_t want_len = exported_bytes(ISO_PROFILE_DEFAULT, &want);
        nook_error err = {};
        iso_seccomp_prog prog = {};
        cr_assert_eq(iso_seccomp_prepare(ISO_PROFILE_DEFAULT, tmpl, &prog, &err), 0, "%s", err.msg);
        iso_seccomp_prog_done(&prog);
        cache_entry(tmpl, entry, sizeof(entry));

        for (int shape = 0; shape < 7; shape++) {
                char target[800];
                (void)unlink(entry);
                if (shape == 0) { /* 7 bytes: not a whole instruction */
                        FILE *f = fopen(entry, "w");
                        cr_assert(f && fwrite("1234567", 1, 7, f) == 7);
                        fclose(f);
                } else if (shape == 1) { /* longer than the kernel's 4096 instructions */
                        FILE *f = fopen(entry, "w");
                        cr_assert(f);
                        cr_assert_eq(ftruncate(fileno(f), 4097 * 8), 0);
                        fclose(f);
                } else if (shape == 2) { /* a symlink to a valid-looking program elsewhere */
                        (void)snprintf(target, sizeof(target), "%s/elsewhere", tmpl);
                        FILE *f = fopen(target, "w");
                        cr_assert(f && fwrite("\x06\0\0\0\0\0\xff\x7f", 1, 8, f) == 8);
                        fclose(f);
                        cr_assert_eq(symlink(target, entry), 0);
                } else if (shape == 3) { /* empty */
                        FILE *f = fopen(entry, "w");
                        cr_assert(f);
                        fclose(f);
                } else if (shape == 4) { /* a wrong checksum (a torn or zeroed write) */
                        plant(entry, want, (uint32_t)(want_len / 8), false);
                } else if (shape == 5) { /* zeros where a program was */
                        void *zeros = calloc(1, 16 + want_len);
                        FILE *f = fopen(entry, "w");
                        cr_assert(f && zeros && fwrite(zeros, 1, 16 + want_len, f) == 16 + want_len);
                        fclose(f);
                        free(zeros);
                } else { /* a right checksum, but the last instruction is no return */
                        static const unsigned char ld[8] = { 0x20, 0, 0, 0, 0, 0, 0, 0 };
                        plant(entry, ld, 1, true);
                }
                cr_assert_eq(iso_seccomp_prepare(ISO_PROFILE_DEFAULT, tmpl, &prog, &err), 0, "%s", err.msg);
                cr_assert_eq(prog.len * 8, want_len, "shape %d: compiled afresh, not read", shape);
                cr_assert_eq(memcmp(prog.insns, want, want_len), 0, "shape %d", shape);
                iso_seccomp_prog_done(&prog);
        }
        free(want);
        char cmd[400];
        (void)snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
        cr_assert_eq(system(cmd), 0);
}
