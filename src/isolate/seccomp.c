/* SPDX-License-Identifier: Apache-2.0 */
/* Seccomp deny lists (docs/design/security.md has the table and the argument for each entry).
 *
 * Shape: SCMP_ACT_ALLOW by default and a deny list answering EPERM, the inverse of docker's
 * allowlist.  A deny list stays correct when the kernel grows a harmless syscall, and caps do the
 * coarse work: neither profile keeps CAP_SYS_ADMIN, CAP_SYS_MODULE, CAP_SYS_TIME, ... so most
 * entries here are defence in depth for the day a nested user namespace hands them back. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/seccomp.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

typedef struct deny_rule {
        int nr;
        const char *name;
} deny_rule;

/* SCMP_SYS() expands to __SNR_<name>: a name libseccomp does not know fails the build instead of
 * silently leaving a hole.  Names absent on the native arch (stime, vm86 on x86_64) resolve to
 * pseudo numbers that libseccomp applies only to the arches that have them. */
#define DENY(n)                                                                                             \
        { SCMP_SYS(n), #n }

static const deny_rule deny_default[] = {
        /* kernel keyrings are not namespaced */
        DENY(add_key),
        DENY(request_key),
        DENY(keyctl),
        /* large in-kernel attack surface, not needed by build/test workloads */
        DENY(bpf),
        DENY(perf_event_open),
        DENY(userfaultfd),
        /* io_uring ops are invisible to seccomp (an IORING_OP_OPENAT bypasses this filter);
         * moby#46762, containerd#9048.  libuv and tokio fall back to threads on EPERM. */
        DENY(io_uring_setup),
        DENY(io_uring_enter),
        DENY(io_uring_register),
        /* the host kernel: modules, kexec, reboot, swap, accounting */
        DENY(kexec_load),
        DENY(kexec_file_load),
        DENY(init_module),
        DENY(finit_module),
        DENY(delete_module),
        DENY(create_module),
        DENY(get_kernel_syms),
        DENY(query_module),
        DENY(reboot),
        DENY(swapon),
        DENY(swapoff),
        DENY(acct),
        DENY(quotactl),
        DENY(quotactl_fd),
        DENY(lookup_dcookie),
        DENY(nfsservctl),
        DENY(_sysctl),
        /* the host clock is not namespaced (time_namespaces(7) covers only offsets) */
        DENY(settimeofday),
        DENY(stime),
        DENY(clock_settime),
        DENY(clock_settime64),
        DENY(clock_adjtime),
        DENY(clock_adjtime64),
        DENY(adjtimex),
        /* file handles walk around the mount namespace: the "shocker" escape */
        DENY(open_by_handle_at),
        /* the host kernel log (dmesg_restrict may be 0) */
        DENY(syslog),
        /* raw hardware and obsolete interfaces */
        DENY(iopl),
        DENY(ioperm),
        DENY(vm86),
        DENY(vm86old),
        DENY(vhangup),
        DENY(uselib),
};

static const deny_rule deny_restricted[] = {
        /* other processes' memory and descriptors */
        DENY(ptrace),
        DENY(process_vm_readv),
        DENY(process_vm_writev),
        DENY(process_madvise),
        DENY(kcmp),
        DENY(pidfd_getfd),
        DENY(move_pages),
        DENY(migrate_pages),
        /* namespaces: joining (setns); creating is filtered by flag below */
        DENY(setns),
        /* the mount table, old and new API */
        DENY(mount),
        DENY(umount),
        DENY(umount2),
        DENY(pivot_root),
        DENY(fsopen),
        DENY(fsconfig),
        DENY(fsmount),
        DENY(fspick),
        DENY(move_mount),
        DENY(open_tree),
        DENY(mount_setattr),
        DENY(name_to_handle_at),
        /* execution domains and segment tables: old bug farms */
        DENY(personality),
        DENY(modify_ldt),
};

/* CLONE_NEW* flags that clone() accepts.  CLONE_NEWTIME shares its bit with CSIGNAL in clone()'s
 * flags, so it is only meaningful (and only filtered) for unshare() (clone(2), "CLONE_NEWTIME"). */
static const unsigned long clone_ns_flags[] = {
        CLONE_NEWNS,
        CLONE_NEWUTS,
        CLONE_NEWIPC,
        CLONE_NEWUSER,
        CLONE_NEWPID,
        CLONE_NEWNET,
        CLONE_NEWCGROUP,
};

static const char *const profile_table[_ISO_PROFILE_MAX] = {
        [ISO_PROFILE_DEFAULT] = "default",
        [ISO_PROFILE_RESTRICTED] = "restricted",
};

const char *iso_profile_to_string(iso_profile p) {
        if (p < 0 || p >= _ISO_PROFILE_MAX)
                return NULL;
        return profile_table[p];
}

iso_profile iso_profile_from_string(const char *s) {
        if (!s)
                return _ISO_PROFILE_INVALID;
        for (int i = 0; i < _ISO_PROFILE_MAX; i++)
                if (streq(s, profile_table[i]))
                        return (iso_profile)i;
        return _ISO_PROFILE_INVALID;
}

static const char *profile_name(iso_profile p) {
        const char *s = iso_profile_to_string(p);
        return s ? s : "invalid";
}

static void seccomp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

static int rule_failed(nook_error *err, int r, const char *what) {
        return nook_err_errnum(err, NOOK_E_INTERNAL, -r, "Cannot add the seccomp rule for %s", what);
}

static int add_deny_list(scmp_filter_ctx ctx, const deny_rule *rules, size_t n, nook_error *err) {
        for (size_t i = 0; i < n; i++) {
                int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), rules[i].nr, 0);
                if (r < 0)
                        return rule_failed(err, r, rules[i].name);
        }
        return 0;
}

/* personality(2): allow PER_LINUX, PER_LINUX32, UNAME26 (alone or with PER_LINUX32) and the query
 * 0xffffffff, like docker; deny every other value (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE,
 * MMAP_PAGE_ZERO, foreign personas).
 *
 * libseccomp ANDs the comparisons of one rule and accepts each argument only once per rule, so
 * "arg0 not in {...}" cannot be one rule; it is a union of single-comparison rules instead.  Let
 * O be the 30 bits outside PER_LINUX32|UNAME26.  The allowed values have O all clear or (for the
 * query) everything set, so a value is denied exactly when
 *   - O is mixed: then, walking O as a cycle, some bit is set and its successor clear, which one
 *     masked comparison per adjacent pair (30 rules) catches; or
 *   - O is all set but PER_LINUX32 or UNAME26 is clear (2 rules); or
 *   - any of the upper 32 bits is set (1 rule; the kernel would truncate, we refuse).
 * The unit test checks every single-bit value and every all-ones-but-one-bit value. */
#define PERSONA_KEEP_BITS (0x0008u | 0x20000u) /* PER_LINUX32 | UNAME26 */

static int add_personality_rules(scmp_filter_ctx ctx, nook_error *err) {
        unsigned other[32] = {};
        size_t n = 0;
        int r;

        for (unsigned b = 0; b < 32; b++)
                if (!((1u << b) & PERSONA_KEEP_BITS))
                        other[n++] = b;

        for (size_t i = 0; i < n; i++) {
                uint64_t set = 1ull << other[i], clear = 1ull << other[(i + 1) % n];
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                        SCMP_A0(SCMP_CMP_MASKED_EQ, set | clear, set));
                if (r < 0)
                        return rule_failed(err, r, "personality");
        }
        for (unsigned b = 0; b < 32; b++) {
                if (!((1u << b) & PERSONA_KEEP_BITS))
                        continue;
                uint64_t set = 1ull << other[0], clear = 1ull << b;
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                        SCMP_A0(SCMP_CMP_MASKED_EQ, set | clear, set));
                if (r < 0)
                        return rule_failed(err, r, "personality");
        }
        r = seccomp_rule_add(
                ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1, SCMP_A0(SCMP_CMP_GT, 0xffffffffull));
        if (r < 0)
                return rule_failed(err, r, "personality");
        return 0;
}

/* TIOCSTI pushes bytes into a terminal's input queue: with an inherited host tty as stdin the
 * payload would type commands into the user's shell (CVE-2017-5226).  TIOCLINUX can do the same
 * on a VT.  Only the low 32 bits are compared because the kernel ignores the rest of the command
 * (CVE-2019-10063 was a filter that compared all 64). */
static int add_tty_rules(scmp_filter_ctx ctx, nook_error *err) {
        static const unsigned long cmds[] = { TIOCSTI, TIOCLINUX };

        for (size_t i = 0; i < ELEMENTSOF(cmds); i++) {
                int r = seccomp_rule_add(
                        ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1, SCMP_A1_32(SCMP_CMP_EQ, cmds[i]));
                if (r < 0)
                        return rule_failed(err, r, "ioctl(TIOCSTI/TIOCLINUX)");
        }
        return 0;
}

/* Restricted: no new namespaces.  clone() and unshare() get one rule per flag bit (any set bit
 * denies).  clone3() passes its flags in memory that seccomp cannot read, so it answers ENOSYS and
 * glibc >= 2.34 falls back to clone(), whose flags are filtered: docker's approach (moby#42681). */
static int add_namespace_rules(scmp_filter_ctx ctx, nook_error *err) {
        int r;

        for (size_t i = 0; i < ELEMENTSOF(clone_ns_flags); i++) {
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                        SCMP_A0(SCMP_CMP_MASKED_EQ, clone_ns_flags[i], clone_ns_flags[i]));
                if (r < 0)
                        return rule_failed(err, r, "clone(CLONE_NEW*)");
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                        SCMP_A0(SCMP_CMP_MASKED_EQ, clone_ns_flags[i], clone_ns_flags[i]));
                if (r < 0)
                        return rule_failed(err, r, "unshare(CLONE_NEW*)");
        }
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NEWTIME, CLONE_NEWTIME));
        if (r < 0)
                return rule_failed(err, r, "unshare(CLONE_NEWTIME)");
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        if (r < 0)
                return rule_failed(err, r, "clone3");
        return 0;
}

/* Default: x86_64 plus the i386 and x32 ABIs under the same rules, so 32-bit programs work as in
 * docker; leaving an ABI out of the filter would leave its syscall table unfiltered.  Restricted:
 * the native ABI only; the compat entry points have been a steady source of kernel bugs, and
 * libseccomp's bad-arch action (KILL_PROCESS, set below) ends a process that tries one. */
static int add_arches(scmp_filter_ctx ctx, iso_profile p, nook_error *err) {
        static const uint32_t compat[] = { SCMP_ARCH_X86, SCMP_ARCH_X32 };

        if (p != ISO_PROFILE_DEFAULT || seccomp_arch_native() != SCMP_ARCH_X86_64)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(compat); i++) {
                int r = seccomp_arch_add(ctx, compat[i]);
                if (r < 0 && r != -EEXIST)
                        return nook_err_errnum(err, NOOK_E_INTERNAL, -r,
                                "Cannot add a compat architecture to the seccomp filter");
        }
        return 0;
}

static int set_attrs(scmp_filter_ctx ctx, nook_error *err) {
        static const struct {
                enum scmp_filter_attr attr;
                uint32_t value;
                const char *name;
        } attrs[] = {
                /* no_new_privs is the caller's step (iso_set_no_new_privs), not a side effect */
                { SCMP_FLTATR_CTL_NNP, 0, "CTL_NNP" },
                /* report the kernel's errno (EACCES, EINVAL), not libseccomp's -ECANCELED */
                { SCMP_FLTATR_API_SYSRAWRC, 1, "API_SYSRAWRC" },
                { SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "ACT_BADARCH" },
                /* binary search over syscall numbers instead of a linear chain */
                { SCMP_FLTATR_CTL_OPTIMIZE, 2, "CTL_OPTIMIZE" },
        };

        for (size_t i = 0; i < ELEMENTSOF(attrs); i++) {
                int r = seccomp_attr_set(ctx, attrs[i].attr, attrs[i].value);
                if (r < 0)
                        return nook_err_errnum(err, NOOK_E_MISSING_FEATURE, -r,
                                "libseccomp does not support the filter attribute %s; "
                                "nook needs libseccomp >= 2.5",
                                attrs[i].name);
        }
        return 0;
}

static int build_filter(iso_profile p, scmp_filter_ctx *ret_ctx, nook_error *err) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        if (!iso_profile_to_string(p))
                return nook_err_set(err, NOOK_E_INVALID, "Unknown seccomp profile %d", (int)p);

        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return nook_err_oom(err);
        r = set_attrs(ctx, err);
        if (r < 0)
                return r;
        r = add_arches(ctx, p, err);
        if (r < 0)
                return r;
        r = add_deny_list(ctx, deny_default, ELEMENTSOF(deny_default), err);
        if (r < 0)
                return r;
        r = add_tty_rules(ctx, err);
        if (r < 0)
                return r;
        if (p == ISO_PROFILE_RESTRICTED) {
                r = add_deny_list(ctx, deny_restricted, ELEMENTSOF(deny_restricted), err);
                if (r < 0)
                        return r;
                r = add_namespace_rules(ctx, err);
        } else
                r = add_personality_rules(ctx, err);
        if (r < 0)
                return r;

        /* cppcheck-suppress unreadVariable ; TAKE_PTR clears ctx for its cleanup attribute */
        *ret_ctx = TAKE_PTR(ctx);
        return 0;
}

/* The program libseccomp generates for p, read back from a memfd. */
static int compile_prog(iso_profile p, iso_seccomp_prog *ret, nook_error *err) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r = build_filter(p, &ctx, err);
        if (r < 0)
                return nook_err_wrap(err, "building the seccomp profile '%s'", profile_name(p));
        return iso_seccomp_export_prog(ctx, profile_name(p), ret, err);
}

int iso_seccomp_export_prog(void *filter, const char *what, iso_seccomp_prog *ret, nook_error *err) {
        scmp_filter_ctx ctx = filter;
        _cleanup_close_ int fd = -1;
        struct stat st;
        int r;
        fd = memfd_create("nook-seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create a memfd for the seccomp profile");
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot generate the seccomp profile '%s'", what);
        if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
                st.st_size > (off_t)(BPF_MAXINSNS * sizeof(struct sock_filter)))
                return nook_err_set(
                        err, NOOK_E_INTERNAL, "libseccomp generated a malformed program for '%s'", what);
        struct sock_filter *insns = malloc((size_t)st.st_size);
        if (!insns)
                return nook_err_oom(err);
        if (pread(fd, insns, (size_t)st.st_size, 0) != st.st_size) {
                free(insns);
                return nook_err_errno(err, NOOK_E_IO, "Cannot read back the seccomp profile '%s'", what);
        }
        *ret = (iso_seccomp_prog){ .insns = insns,
                .len = (unsigned short)(st.st_size / (off_t)sizeof(*insns)) };
        return 0;
}

/* A cache file: this header, then the instructions.  The checksum catches a torn or zeroed
 * file (a crash after the rename); it is no defence against someone who can write NOOK_HOME,
 * who could replace the database and the images as well. */
typedef struct bpf_cache_header {
        char magic[8]; /* "NOOKBPF1" */
        uint32_t len; /* instructions */
        uint32_t sum; /* FNV-1a over the instructions' bytes */
} bpf_cache_header;

static uint32_t fnv1a(const void *p, size_t n) {
        uint32_t h = 2166136261u;
        for (size_t i = 0; i < n; i++)
                h = (h ^ ((const unsigned char *)p)[i]) * 16777619u;
        return h;
}

/* A regular file of ours, the header intact, whole instructions (at most the kernel's 4096), the
 * checksum right and a return last. */
static bool read_cached(const char *path, iso_seccomp_prog *ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        bpf_cache_header h;
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
                read(fd, &h, sizeof(h)) != (ssize_t)sizeof(h) || memcmp(h.magic, "NOOKBPF1", 8) != 0 ||
                h.len == 0 || h.len > BPF_MAXINSNS ||
                st.st_size != (off_t)(sizeof(h) + h.len * sizeof(struct sock_filter)))
                return false;
        size_t n = h.len * sizeof(struct sock_filter);
        struct sock_filter *insns = malloc(n);
        if (!insns)
                return false;
        if (read(fd, insns, n) != (ssize_t)n || fnv1a(insns, n) != h.sum ||
                BPF_CLASS(insns[h.len - 1].code) != BPF_RET) {
                free(insns);
                return false;
        }
        *ret = (iso_seccomp_prog){ .insns = insns, .len = (unsigned short)h.len };
        return true;
}

/* Best effort: a cache that cannot be written only costs the next create the compile. */
static void write_cached(const char *dir, const char *path, const iso_seccomp_prog *prog) {
        char tmp[PATH_MAX];
        size_t n = prog->len * sizeof(struct sock_filter);
        bpf_cache_header h = { .magic = "NOOKBPF1", .len = prog->len, .sum = fnv1a(prog->insns, n) };
        if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", path) >= sizeof(tmp) ||
                (mkdir(dir, 0700) < 0 && errno != EEXIST))
                return;
        _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return;
        if (fd_write_all(fd, &h, sizeof(h)) < 0 || fd_write_all(fd, prog->insns, n) < 0 || fsync(fd) < 0 ||
                rename(tmp, path) < 0)
                (void)unlink(tmp);
}

int iso_seccomp_prepare(iso_profile p, const char *cache_dir, iso_seccomp_prog *ret, nook_error *err) {
        char id[128];
        _cleanup_free_ char *path = NULL;

        if (!iso_profile_to_string(p))
                return nook_err_set(err, NOOK_E_INVALID, "Unknown seccomp profile %d", (int)p);
        /* The key: this binary (its rules) and the libseccomp that compiles them. */
        if (cache_dir && proc_self_build_id(id, sizeof(id)) >= 0) {
                /* libseccomp's output depends on its version and on the kernel API level it
                 * detected */
                const struct scmp_version *v = seccomp_version();
                path = strprintf("%s/seccomp-%s-%s-%u.%u.%u-api%u.bpf", cache_dir, profile_name(p), id,
                        v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0, seccomp_api_get());
                if (path && read_cached(path, ret))
                        return 0;
        }
        int r = compile_prog(p, ret, err);
        if (r >= 0 && path)
                write_cached(cache_dir, path, ret);
        return r;
}

void iso_seccomp_prog_done(iso_seccomp_prog *prog) {
        free(prog->insns);
        *prog = (iso_seccomp_prog){ 0 };
}

int iso_seccomp_load_prog(iso_profile p, const iso_seccomp_prog *prog, nook_error *err) {
        return iso_seccomp_load_bpf(prog, profile_name(p), err);
}

bool iso_seccomp_cache_read(const char *path, iso_seccomp_prog *ret) {
        return read_cached(path, ret);
}

void iso_seccomp_cache_write(const char *dir, const char *path, const iso_seccomp_prog *prog) {
        write_cached(dir, path, prog);
}

int iso_seccomp_load_bpf(const iso_seccomp_prog *prog, const char *what, nook_error *err) {
        struct sock_fprog fp = { .len = prog->len, .filter = prog->insns };
        /* No flags: what seccomp_load() does with our attributes (no TSYNC, no LOG). */
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) == 0)
                return 0;
        int e = errno;
        if (e == EACCES)
                /* seccomp(2): a filter needs no_new_privs or CAP_SYS_ADMIN in the user namespace */
                return nook_err_errnum(err, NOOK_E_INTERNAL, EACCES,
                        "Cannot load the seccomp filter '%s': no_new_privs is not set and "
                        "CAP_SYS_ADMIN is missing; call iso_set_no_new_privs() first",
                        what);
        if (e == ENOSYS)
                return nook_err_errnum(err, NOOK_E_MISSING_FEATURE, e,
                        "Cannot load the seccomp filter '%s': the kernel lacks seccomp filters "
                        "(CONFIG_SECCOMP_FILTER); `nook doctor` shows this",
                        what);
        if (e == EINVAL)
                return nook_err_errnum(err, NOOK_E_INTERNAL, e,
                        "The kernel refused the seccomp filter '%s' (an invalid program, or no "
                        "seccomp filters in this kernel: `nook doctor` checks); if it persists, delete "
                        "NOOK_HOME/cache/seccomp-*",
                        what);
        return nook_err_errnum(err, NOOK_E_IO, e, "Cannot load the seccomp filter '%s'", what);
}

int iso_seccomp_load(iso_profile p, nook_error *err) {
        iso_seccomp_prog prog = { 0 };
        int r = iso_seccomp_prepare(p, NULL, &prog, err);
        if (r >= 0)
                r = iso_seccomp_load_prog(p, &prog, err);
        iso_seccomp_prog_done(&prog);
        return r;
}

int iso_seccomp_export_bpf(iso_profile p, int fd, nook_error *err) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        r = build_filter(p, &ctx, err);
        if (r < 0)
                return nook_err_wrap(err, "building the seccomp profile '%s'", profile_name(p));
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot write the seccomp profile '%s' as BPF",
                        iso_profile_to_string(p));
        return 0;
}
