/* SPDX-License-Identifier: Apache-2.0 */
/* Can this host checkpoint a sandbox's memory with CRIU?  The causes, in the order they are
 * tested, each found on a real host (docs/design/checkpoint.md):
 *   1. no criu binary;
 *   2. a CRIU older than 4.1 on an x86 kernel >= 6.13: the kernel split the [vvar] mapping and
 *      added [vvar_vclock] (kernel commit e93d2521b27f), and CRIU's start-up probe of its own
 *      vDSO fails ("vdso: Unexpected rt vDSO area bounds") before it looks at any process:
 *      every dump, restore and check fails (criu issue #2532, fixed by criu PR #2539 in 4.1);
 *   3. rootless: CRIU needs CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE) in the host's user
 *      namespace to ptrace, read and rebuild another user's namespaces;
 *   4. otherwise nook's own limit: CRIU 4.2 dumps a plain runc container here, but not a nook
 *      sandbox, whose init is not exec'd inside it and talks to the supervisor over a socket of
 *      the host's network namespace.  `criu check` is not run: it takes ~150 ms, and whatever it
 *      finds, cause 4 stands. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate/checkpoint.h"
#include "isolate/userns.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

#define CRIU_RUN_TIMEOUT_MS 5000

extern char **environ;

static bool is_executable_file(const char *p) {
        struct stat st;
        return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

bool iso_criu_find(char *out, size_t len) {
        const char *e = secure_getenv("NOOK_CRIU");
        if (e && *e) {
                if (!is_executable_file(e))
                        return false;
                (void)snprintf(out, len, "%s", e);
                return true;
        }
        /* criu lives in sbin, which an unprivileged user's PATH often lacks */
        const char *dirs[] = { "/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/local/bin", "/usr/bin" };
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                char p[256];
                (void)snprintf(p, sizeof(p), "%s/criu", dirs[i]);
                if (is_executable_file(p)) {
                        (void)snprintf(out, len, "%s", p);
                        return true;
                }
        }
        return false;
}

/* Reads what the child writes until EOF or the deadline; returns false on timeout. */
static bool read_until_eof(int fd, char *out, size_t len, uint64_t deadline) {
        size_t n = 0;
        for (;;) {
                uint64_t now = now_ms();
                if (now >= deadline)
                        return false;
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int r = poll(&p, 1, (int)(deadline - now));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return false;
                char buf[1024];
                ssize_t k = read(fd, buf, sizeof(buf));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return true;
                size_t take = (size_t)k < len - 1 - n ? (size_t)k : len - 1 - n;
                memcpy(out + n, buf, take);
                n += take;
                out[n] = 0;
        }
}

/* Runs `criu ARG` with stdout and stderr into out (NUL-terminated, cut to len); returns its exit
 * status, or -errno when it could not run or did not finish within CRIU_RUN_TIMEOUT_MS. */
static int criu_run(const char *criu, const char *arg, char *out, size_t len) {
        int pfd[2];
        out[0] = 0;
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
        char *argv[] = { (char *)criu, (char *)arg, NULL };
        pid_t pid;
        int r = posix_spawn(&pid, criu, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        safe_close(pfd[1]);
        _cleanup_close_ int rfd = pfd[0];
        if (r != 0)
                return -r;
        _cleanup_pid_kill_ pid_t child = pid;
        uint64_t deadline = now_ms() + CRIU_RUN_TIMEOUT_MS;
        if (!read_until_eof(rfd, out, len, deadline))
                return -ETIMEDOUT; /* killed and reaped by the cleanup */
        /* EOF: it has exited, or closed its output and runs on (then it is killed at the
         * deadline, by the cleanup) */
        int status;
        for (;;) {
                pid_t p = waitpid(child, &status, WNOHANG);
                if (p == child)
                        break;
                if (p < 0 && errno != EINTR)
                        return -errno;
                if (now_ms() >= deadline)
                        return -ETIMEDOUT;
                (void)usleep(2000);
        }
        TAKE_PID(child);
        return proc_status_code(status);
}

/* x86 Linux >= 6.13 maps the virtual clock pages apart from [vvar]. */
static bool kernel_has_vvar_vclock(void) {
        FILE *f = fopen("/proc/self/maps", "re");
        char line[512];
        bool found = false;
        if (!f)
                return false;
        while (!found && fgets(line, sizeof(line), f))
                found = strstr(line, "[vvar_vclock]") != NULL;
        (void)fclose(f);
        return found;
}

/* Parses "Version: 3.17.1" from `criu --version`. */
static bool criu_version(const char *out, unsigned *ret_major, unsigned *ret_minor) {
        const char *v = strstr(out, "Version: ");
        return v && sscanf(v, "Version: %u.%u", ret_major, ret_minor) == 2;
}

#define FIX_INSTALL "install the 'criu' package, or set NOOK_CRIU to a criu binary"
#define FIX_NOOK                                                                                            \
        "none yet: nook's init would have to be exec'd inside the sandbox and reach the supervisor "        \
        "through a socket CRIU can dump (docs/design/checkpoint.md)"

/* Fills why with the first cause that applies and returns what would remove it. */
static const char *checkpoint_probe(char *why, size_t len) {
        char criu[256], out[4096];
        unsigned major, minor;

        const char *env = secure_getenv("NOOK_CRIU");
        if (env && *env && !is_executable_file(env)) {
                (void)snprintf(why, len, "NOOK_CRIU names '%s', which is not an executable file", env);
                return "point NOOK_CRIU at a criu binary, or unset it";
        }
        if (!iso_criu_find(criu, sizeof(criu))) {
                (void)snprintf(why, len, "CRIU is not installed");
                return FIX_INSTALL;
        }
        int r = criu_run(criu, "--version", out, sizeof(out));
        if (r != 0 || !criu_version(out, &major, &minor)) {
                (void)snprintf(why, len, "'%s --version' did not report a version", criu);
                return FIX_INSTALL;
        }
        if (kernel_has_vvar_vclock() && (major < 4 || (major == 4 && minor < 1))) {
                (void)snprintf(why, len,
                        "CRIU %u.%u cannot run on this kernel: Linux 6.13+ splits the vDSO's data into [vvar] "
                        "and [vvar_vclock], and CRIU before 4.1 fails its start-up probe ('vdso: Unexpected rt "
                        "vDSO area bounds') before any dump or restore",
                        major, minor);
                return "CRIU >= 4.1 (not in Debian 12) gets past this step; then nook's own limit applies "
                       "(docs/design/checkpoint.md)";
        }
        if (!iso_rootful()) {
                (void)snprintf(why, len,
                        "rootless: CRIU needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE in the host's user "
                        "namespace to dump another user namespace");
                return "run nook as root";
        }
        (void)snprintf(why, len,
                "CRIU %u.%u cannot dump a nook sandbox: its init is a clone of the host's nook-supervisor "
                "(not exec'd, not dumpable from the sandbox's user namespace) and holds its control socket in "
                "the host's network namespace",
                major, minor);
        return FIX_NOOK;
}

bool iso_checkpoint_supported(char *why, size_t len, const char **ret_fix) {
        const char *fix = checkpoint_probe(why, len);
        if (ret_fix)
                *ret_fix = fix;
        return false;
}
