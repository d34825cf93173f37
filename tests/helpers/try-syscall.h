/* SPDX-License-Identifier: Apache-2.0 */
/* Harmless invocations of the system calls that nook's seccomp profiles and capability sets deny,
 * shared by tests/helpers/nook-probe.c (inside sandboxes) and tests/unit/test_seccomp.c.
 *
 * Every call must be safe when made as real root on the host: arguments are chosen so the kernel
 * rejects them *after* its permission check (so a denial shows up as EPERM) but before it changes
 * anything.  Each entry names the check that stops it.  Calls that change the calling process
 * (unshare, personality, chroot) are fine because try_syscall_run() makes every call in a
 * throw-away child.  Plain libc and raw syscalls only: the probe is linked statically. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TRY_BAD_PATH "/nonexistent/nook-probe"

/* clone() without a new stack behaves like fork(); the new process leaves at once. */
static inline long try_raw_clone(unsigned long flags) {
        long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
        if (pid == 0)
                _exit(0);
        if (pid > 0)
                (void)waitpid((pid_t)pid, NULL, 0);
        return pid < 0 ? -1 : 0;
}

/* ---- the calls; each returns >= 0 or -1 with errno --------------------------------------------- */
static inline long try_getpid(void) {
        return syscall(SYS_getpid);
}
static inline long try_clone(void) {
        return try_raw_clone(0);
}
static inline long try_clone_newuser(void) {
        return try_raw_clone(CLONE_NEWUSER);
}
static inline long try_unshare_user(void) {
        return unshare(CLONE_NEWUSER);
}
/* size 0 < CLONE_ARGS_SIZE_VER0: EINVAL, no process */
static inline long try_clone3(void) {
        return syscall(SYS_clone3, NULL, 0);
}
static inline long try_setns(void) {
        return setns(-1, 0);
}
/* unknown operation: EOPNOTSUPP */
static inline long try_keyctl(void) {
        return syscall(SYS_keyctl, 0x7fff, 0, 0, 0, 0);
}
/* NULL key type: EFAULT; never creates a key */
static inline long try_add_key(void) {
        return syscall(SYS_add_key, NULL, NULL, NULL, 0, 0);
}
/* unknown command: EINVAL */
static inline long try_bpf(void) {
        return syscall(SYS_bpf, -1, NULL, 0);
}
/* NULL attr: EFAULT */
static inline long try_perf_event_open(void) {
        return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
}
/* we are not tracing ourselves: ESRCH */
static inline long try_ptrace(void) {
        return ptrace(PTRACE_PEEKUSER, getpid(), NULL, NULL);
}
/* flags must be 0: EINVAL */
static inline long try_process_vm_readv(void) {
        return syscall(SYS_process_vm_readv, getpid(), NULL, 0, NULL, 0, 1);
}
/* MS_MOVE without a source: EINVAL after may_mount(), mounts nothing */
static inline long try_mount(void) {
        return mount(NULL, "/", NULL, MS_MOVE, NULL);
}
static inline long try_umount2(void) {
        return umount2(TRY_BAD_PATH, 0);
}
/* may_mount() first (EPERM), then the lookup: ENOENT */
static inline long try_pivot_root(void) {
        return syscall(SYS_pivot_root, TRY_BAD_PATH, TRY_BAD_PATH);
}
/* unknown flag: EINVAL after the capability check; never looks up (or modprobes) a filesystem */
static inline long try_fsopen(void) {
        return syscall(SYS_fsopen, "tmpfs", 0x2);
}
/* no such file: ENOENT */
static inline long try_swapon(void) {
        return syscall(SYS_swapon, TRY_BAD_PATH, 0);
}
/* wrong magic numbers: EINVAL, checked right after CAP_SYS_BOOT; never reboots */
static inline long try_reboot(void) {
        return syscall(SYS_reboot, 0, 0, 0, NULL);
}
/* 17 > KEXEC_SEGMENT_MAX and a foreign arch (KEXEC_ARCH_ARM): EINVAL; with 0 segments it would
 * unload the loaded kernel, so never 0 */
static inline long try_kexec_load(void) {
        return syscall(SYS_kexec_load, 0, 17, NULL, 40ul << 16);
}
/* an image of 0 bytes: ENOEXEC */
static inline long try_init_module(void) {
        return syscall(SYS_init_module, NULL, 0, "");
}
/* bad mount fd: EBADF (or EPERM without CAP_DAC_READ_SEARCH) */
static inline long try_open_by_handle_at(void) {
        return syscall(SYS_open_by_handle_at, -1, NULL, 0);
}
/* NULL handle: EFAULT */
static inline long try_name_to_handle_at(void) {
        return syscall(SYS_name_to_handle_at, AT_FDCWD, "/", NULL, NULL, 0);
}
/* unknown flag: EINVAL (EPERM first if unprivileged userfaultfd is off) */
static inline long try_userfaultfd(void) {
        return syscall(SYS_userfaultfd, 0x2);
}
/* no such clock: EINVAL */
static inline long try_clock_settime(void) {
        struct timespec ts = { 0, 0 };
        return syscall(SYS_clock_settime, 0x7fffff, &ts);
}
/* the query value: changes nothing */
static inline long try_personality(void) {
        return personality(0xffffffff);
}
/* a flag docker's profile and ours refuse; affects only this child */
static inline long try_personality_unsafe(void) {
        return personality(ADDR_NO_RANDOMIZE);
}
/* NULL params: EFAULT */
static inline long try_io_uring_setup(void) {
        return syscall(SYS_io_uring_setup, 1, NULL);
}
/* SYSLOG_ACTION_SIZE_BUFFER: reads a number */
static inline long try_syslog(void) {
        return syscall(SYS_syslog, 10, NULL, 0);
}
/* no such file: ENOENT after CAP_SYS_PACCT; never acct(NULL), which would switch accounting off */
static inline long try_acct(void) {
        return acct(TRY_BAD_PATH);
}
/* level > 3: EINVAL */
static inline long try_iopl(void) {
        return syscall(SYS_iopl, 4);
}
/* no special device and not Q_SYNC: ENODEV */
static inline long try_quotactl(void) {
        return syscall(SYS_quotactl, 0, NULL, 0, NULL);
}
/* bad fd: EBADF */
static inline long try_ioctl_tiocsti(void) {
        return ioctl(-1, TIOCSTI, "x");
}
/* needs CAP_SYS_CHROOT; "/" changes nothing */
static inline long try_chroot(void) {
        return chroot("/");
}

typedef struct try_syscall {
        const char *name;
        long (*fn)(void);
} try_syscall;

static const try_syscall try_syscalls[] = {
        { "getpid", try_getpid },
        { "clone", try_clone },
        { "clone-newuser", try_clone_newuser },
        { "unshare-user", try_unshare_user },
        { "clone3", try_clone3 },
        { "setns", try_setns },
        { "keyctl", try_keyctl },
        { "add_key", try_add_key },
        { "bpf", try_bpf },
        { "perf_event_open", try_perf_event_open },
        { "ptrace", try_ptrace },
        { "process_vm_readv", try_process_vm_readv },
        { "mount", try_mount },
        { "umount2", try_umount2 },
        { "pivot_root", try_pivot_root },
        { "fsopen", try_fsopen },
        { "swapon", try_swapon },
        { "reboot", try_reboot },
        { "kexec_load", try_kexec_load },
        { "init_module", try_init_module },
        { "open_by_handle_at", try_open_by_handle_at },
        { "name_to_handle_at", try_name_to_handle_at },
        { "userfaultfd", try_userfaultfd },
        { "clock_settime", try_clock_settime },
        { "personality", try_personality },
        { "personality-unsafe", try_personality_unsafe },
        { "io_uring_setup", try_io_uring_setup },
        { "syslog", try_syslog },
        { "acct", try_acct },
        { "iopl", try_iopl },
        { "quotactl", try_quotactl },
        { "ioctl-tiocsti", try_ioctl_tiocsti },
        { "chroot", try_chroot },
};

static inline const try_syscall *try_syscall_find(const char *name) {
        for (size_t i = 0; i < sizeof(try_syscalls) / sizeof(try_syscalls[0]); i++)
                if (strcmp(try_syscalls[i].name, name) == 0)
                        return &try_syscalls[i];
        return NULL;
}

/* Makes the call in a child.  Returns 0 on success, the errno (> 0) on failure, or -signal if the
 * child died (a seccomp kill, say). */
static inline int try_syscall_run(const try_syscall *t) {
        int status;
        pid_t pid = fork();

        if (pid < 0)
                return errno;
        if (pid == 0) {
                errno = 0;
                long r = t->fn();
                _exit(r >= 0 ? 0 : (errno > 0 && errno < 256 ? errno : 255));
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return errno;
        if (WIFSIGNALED(status))
                return -WTERMSIG(status);
        return WEXITSTATUS(status);
}
