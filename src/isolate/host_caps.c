/* SPDX-License-Identifier: Apache-2.0 */
/* Host capability probe (STYLE.md R13).  Every answer comes from trying the thing or reading the
 * kernel's own files, never from a kernel version table: distributions backport and disable
 * features, and seccomp policies (docker's clone3 -> ENOSYS) hide them. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/seccomp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/host_caps.h"
#include "isolate/userns.h"
#include "util/error.h"
#include "util/macro.h"

static void fclosep(FILE **f) {
        if (*f)
                (void)fclose(*f);
}

/* ---- binaries and files --------------------------------------------------------------------- */

static bool is_executable_file(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* PATH first, then the sbin/bin directories that an unprivileged user's PATH often lacks (nft
 * lives in /usr/sbin). */
static bool find_binary(const char *name) {
        static const char fallback[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        const char *lists[] = { secure_getenv("PATH"), fallback };

        for (size_t l = 0; l < ELEMENTSOF(lists); l++) {
                const char *p = lists[l];
                while (!isempty(p)) {
                        size_t len = strcspn(p, ":");
                        char path[PATH_MAX];
                        if (len > 0 && p[0] == '/' &&
                                snprintf(path, sizeof(path), "%.*s/%s", (int)len, p, name) <
                                        (int)sizeof(path) &&
                                is_executable_file(path))
                                return true;
                        p += len + (p[len] == ':');
                }
        }
        return false;
}

/* subuid(5): "name_or_uid:first:count" lines; a range with count > 0 for us counts. */
static bool has_subid_range(const char *file, const char *user, uid_t uid) {
        _cleanup_(fclosep) FILE *f = fopen(file, "re");
        char line[256], uid_str[32];

        if (!f)
                return false;
        (void)snprintf(uid_str, sizeof(uid_str), "%u", (unsigned)uid);
        while (fgets(line, sizeof(line), f)) {
                char *owner = line, *first, *count;
                if (!(first = strchr(owner, ':')))
                        continue;
                *first++ = '\0';
                if (!(count = strchr(first, ':')))
                        continue;
                *count++ = '\0';
                if (!(streq(owner, uid_str) || (user && streq(owner, user))))
                        continue;
                if (strtoul(count, NULL, 10) > 0)
                        return true;
        }
        return false;
}

static bool probe_subuid_range(void) {
        char buf[1024];
        struct passwd pw, *res = NULL;
        const char *user = NULL;

        if (getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &res) == 0 && res)
                user = res->pw_name;
        return has_subid_range("/etc/subuid", user, geteuid()) &&
                has_subid_range("/etc/subgid", user, getegid());
}

/* ---- cgroups ------------------------------------------------------------------------------- */

enum { CG_CPU, CG_MEMORY, CG_PIDS, _CG_MAX };
static const char *const cg_names[_CG_MAX] = { "cpu", "memory", "pids" };

typedef struct cgroup_layout {
        char v2_mount[PATH_MAX]; /* "" if no cgroup2 mount */
        char v2_path[PATH_MAX]; /* our cgroup in it, from /proc/self/cgroup */
        char v1_mount[_CG_MAX][PATH_MAX]; /* per controller, "" if not mounted */
        char v1_path[_CG_MAX][PATH_MAX];
} cgroup_layout;

/* True when the comma-separated list has the token (so "cpu" does not match "cpuset"). */
static bool has_token(const char *list, const char *token, const char *seps) {
        size_t n = strlen(token);
        for (const char *p = list; *p;) {
                size_t len = strcspn(p, seps);
                if (len == n && strneq(p, token, n))
                        return true;
                p += len + (p[len] != '\0');
        }
        return false;
}

/* proc_pid_mountinfo(5): "... mount_point options [optional...] - fstype source super_options".
 * Mount points with spaces are escaped as \040, which never matches /sys/fs/cgroup paths anyway. */
static void read_cgroup_mounts(cgroup_layout *l) {
        _cleanup_(fclosep) FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[4096];

        while (f && fgets(line, sizeof(line), f)) {
                char mnt[PATH_MAX], fstype[64], super[1024];
                const char *sep = strstr(line, " - ");
                if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
                        sscanf(sep + 3, "%63s %*s %1023s", fstype, super) != 2)
                        continue;
                if (streq(fstype, "cgroup2") && !l->v2_mount[0])
                        (void)snprintf(l->v2_mount, sizeof(l->v2_mount), "%s", mnt);
                else if (streq(fstype, "cgroup"))
                        for (int c = 0; c < _CG_MAX; c++)
                                if (!l->v1_mount[c][0] && has_token(super, cg_names[c], ","))
                                        (void)snprintf(l->v1_mount[c], sizeof(l->v1_mount[c]), "%s", mnt);
        }
}

/* cgroups(7), /proc/[pid]/cgroup: "0::/path" for v2, "N:ctrl,ctrl:/path" for v1. */
static void read_own_cgroups(cgroup_layout *l) {
        _cleanup_(fclosep) FILE *f = fopen("/proc/self/cgroup", "re");
        char line[PATH_MAX + 128];

        while (f && fgets(line, sizeof(line), f)) {
                char *ctrls = strchr(line, ':'), *path;
                if (!ctrls || !(path = strchr(++ctrls, ':')))
                        continue;
                *path++ = '\0';
                path[strcspn(path, "\n")] = '\0';
                if (streq(ctrls, ""))
                        (void)snprintf(l->v2_path, sizeof(l->v2_path), "%s", path);
                for (int c = 0; c < _CG_MAX; c++)
                        if (has_token(ctrls, cg_names[c], ","))
                                (void)snprintf(l->v1_path[c], sizeof(l->v1_path[c]), "%s", path);
        }
}

static bool cgroup_dir_writable(const char *mnt, const char *rel) {
        char dir[PATH_MAX], procs[PATH_MAX];

        if (snprintf(dir, sizeof(dir), "%s%s", mnt, streq(rel, "/") ? "" : rel) >= (int)sizeof(dir) ||
                snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir) >= (int)sizeof(procs))
                return false;
        return faccessat(AT_FDCWD, dir, W_OK, AT_EACCESS) == 0 &&
                faccessat(AT_FDCWD, procs, W_OK, AT_EACCESS) == 0;
}

/* cgroup v2 counts when a cgroup2 hierarchy offers at least one of the controllers nook limits:
 * on a hybrid host (systemd's "unified" at /sys/fs/cgroup/unified) it usually has none, and
 * limits go through v1. */
static bool v2_has_controllers(const cgroup_layout *l) {
        char path[PATH_MAX + 32];
        char buf[512] = "";

        if (!l->v2_mount[0])
                return false;
        (void)snprintf(path, sizeof(path), "%s/cgroup.controllers", l->v2_mount);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return false;
        buf[n] = '\0';
        for (int c = 0; c < _CG_MAX; c++)
                if (has_token(buf, cg_names[c], " \n"))
                        return true;
        return false;
}

static void probe_cgroups(host_caps *c) {
        _cleanup_free_ cgroup_layout *l = calloc(1, sizeof(*l));

        if (!l)
                return;
        read_cgroup_mounts(l);
        read_own_cgroups(l);

        c->cgroup_v2 = v2_has_controllers(l);
        c->cgroup_v1_cpu = l->v1_mount[CG_CPU][0] != '\0';
        c->cgroup_v1_memory = l->v1_mount[CG_MEMORY][0] != '\0';
        c->cgroup_v1_pids = l->v1_mount[CG_PIDS][0] != '\0';

        if (c->cgroup_v2) {
                c->cgroup_delegated = l->v2_path[0] && cgroup_dir_writable(l->v2_mount, l->v2_path);
                return;
        }
        /* v1: every mounted limit controller must be ours to write */
        bool any = false, all = true;
        for (int i = 0; i < _CG_MAX; i++) {
                if (!l->v1_mount[i][0])
                        continue;
                any = true;
                all = all && l->v1_path[i][0] && cgroup_dir_writable(l->v1_mount[i], l->v1_path[i]);
        }
        c->cgroup_delegated = any && all;
}

/* ---- user namespace and overlayfs, tried in a child ------------------------------------------ */

enum {
        TRY_OK = 0,
        TRY_NO_USERNS = 10,
        TRY_NO_OVERLAY = 11,
};

static bool write_file(const char *path, const char *s) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        bool ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
        (void)close(fd);
        return ok;
}

/* Runs in the forked child: new user namespace (root in it maps to our ids, user_namespaces(7)),
 * new mount namespace made private so nothing propagates back, a tmpfs over /tmp, and an overlay
 * of three directories in it, with and without userxattr as isolate/rootfs.c mounts it.  Only
 * system calls on prepared buffers: the parent may have threads.  Everything vanishes with the
 * child's namespaces. */
_noreturn_ static void try_userns_overlay_child(const char *uid_map, const char *gid_map) {
        static const char *const opts[] = {
                "lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w,userxattr",
                "lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w",
        };

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        if (unshare(CLONE_NEWUSER) < 0)
                _exit(TRY_NO_USERNS);
        /* setgroups must be denied before an unprivileged gid_map write; as root it is harmless */
        (void)write_file("/proc/self/setgroups", "deny");
        if (!write_file("/proc/self/uid_map", uid_map) || !write_file("/proc/self/gid_map", gid_map))
                _exit(TRY_NO_USERNS);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0700") < 0 ||
                mkdir("/tmp/l", 0700) < 0 || mkdir("/tmp/u", 0700) < 0 || mkdir("/tmp/w", 0700) < 0 ||
                mkdir("/tmp/m", 0700) < 0)
                _exit(TRY_NO_OVERLAY);
        for (size_t i = 0; i < ELEMENTSOF(opts); i++)
                if (mount("overlay", "/tmp/m", "overlay", MS_NOSUID | MS_NODEV, opts[i]) == 0)
                        _exit(TRY_OK);
        _exit(TRY_NO_OVERLAY);
}

static void probe_userns_overlay(host_caps *c) {
        char uid_map[32], gid_map[32];
        int status;

        (void)snprintf(uid_map, sizeof(uid_map), "0 %u 1\n", (unsigned)geteuid());
        (void)snprintf(gid_map, sizeof(gid_map), "0 %u 1\n", (unsigned)getegid());

        pid_t pid = fork();
        if (pid < 0)
                return;
        if (pid == 0)
                try_userns_overlay_child(uid_map, gid_map);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return;
        if (!WIFEXITED(status))
                return;
        c->userns = WEXITSTATUS(status) != TRY_NO_USERNS;
        c->overlay_in_userns = WEXITSTATUS(status) == TRY_OK;
}

/* ---- system calls -------------------------------------------------------------------------- */

/* Each call is made with arguments the kernel rejects before doing anything (a zero size, a bad
 * fd), so only ENOSYS (absent, or hidden by a seccomp policy) means "no". */
static bool syscall_exists(long r) {
        return r >= 0 || errno != ENOSYS;
}

static bool probe_openat2(void) {
#ifdef NOOK_TEST_HOOKS
        /* lets tests cover the O_NOFOLLOW fallback on kernels that have openat2 */
        if (!isempty(secure_getenv("NOOK_TEST_NO_OPENAT2")))
                return false;
#endif
        /* size 0 < OPEN_HOW_SIZE_VER0: EINVAL before any lookup */
        return syscall_exists(syscall(SYS_openat2, -1, NULL, NULL, 0));
}

static bool probe_clone3(void) {
        /* size 0 < CLONE_ARGS_SIZE_VER0: EINVAL, no process is created */
        return syscall_exists(syscall(SYS_clone3, NULL, 0));
}

/* mount_setattr(2) on fd -1: EBADF (or EINVAL for the NULL attr) when the kernel has it.
 * Idmapping a host filesystem (the workspace) needs CAP_SYS_ADMIN in the initial user namespace,
 * so rootless never has it. */
static bool probe_idmapped_mounts(bool rootless) {
        return !rootless && syscall_exists(syscall(SYS_mount_setattr, -1, "", 0, NULL, 0));
}

/* PR_GET_SECCOMP fails with EINVAL without CONFIG_SECCOMP; SECCOMP_GET_ACTION_AVAIL (Linux 4.14)
 * confirms the filter mode and the action our profiles use. */
static bool probe_seccomp(void) {
        uint32_t action = SECCOMP_RET_ERRNO;

        if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0)
                return false;
        return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

int host_caps_probe(host_caps *ret, nook_error *err) {
        host_caps c = {};
        struct utsname u;

        if (uname(&u) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot read the kernel version (uname)");
        (void)snprintf(c.kernel, sizeof(c.kernel), "%.63s", u.release);

        c.rootless = !iso_rootful(); /* root inside `unshare -r` takes the rootless path too */
        probe_userns_overlay(&c);
        c.newuidmap = find_binary("newuidmap") && find_binary("newgidmap");
        c.subuid_range = probe_subuid_range();
        probe_cgroups(&c);
        c.openat2 = probe_openat2();
        c.clone3 = probe_clone3();
        c.idmapped_mounts = probe_idmapped_mounts(c.rootless);
        c.seccomp = probe_seccomp();
        c.slirp4netns = find_binary("slirp4netns");
        c.tun = access("/dev/net/tun", R_OK | W_OK) == 0;
        c.nftables = find_binary("nft");
        c.kvm = access("/dev/kvm", R_OK | W_OK) == 0;

        *ret = c;
        return 0;
}

/* ---- doctor rows --------------------------------------------------------------------------- */

static host_cap_row *row_add(host_cap_row *rows, size_t max, size_t *n, const char *name, bool ok,
        bool required, const char *fix) {
        if (*n >= max)
                return NULL;
        host_cap_row *r = &rows[(*n)++];
        *r = (host_cap_row){ .name = name, .ok = ok, .required = required, .fix = ok ? NULL : fix };
        return r;
}

#define ROW(name, ok, required, fix, ...)                                                                   \
        do {                                                                                                \
                host_cap_row *_r = row_add(rows, max, &n, (name), (ok), (required), (fix));                 \
                if (_r)                                                                                     \
                        (void)snprintf(_r->detail, sizeof(_r->detail), __VA_ARGS__);                        \
        } while (0)

static const char *yes_no(bool b) {
        return b ? "yes" : "no";
}

static size_t rows_identity(const host_caps *c, host_cap_row *rows, size_t max, size_t n) {
        ROW("kernel", true, false, NULL, "Linux %s", c->kernel);
        ROW("mode", true, false, NULL, "%s",
                c->rootless ? "rootless: sandbox root is your uid"
                            : "root: sandbox ids map to host uids 100000000+");
        ROW("user namespaces", c->userns, true,
                "enable unprivileged user namespaces: sysctl user.max_user_namespaces=15000 (and "
                "kernel.unprivileged_userns_clone=1 or kernel.apparmor_restrict_unprivileged_userns=0 where "
                "present)",
                "%s", c->userns ? "unshare(CLONE_NEWUSER) works" : "unshare(CLONE_NEWUSER) failed");
        ROW("overlayfs in user namespaces", c->overlay_in_userns, true,
                "needs Linux >= 5.11 with CONFIG_OVERLAY_FS", "%s",
                c->overlay_in_userns ? "mounted an overlay in a new user namespace"
                                     : "overlay mount refused");
        ROW("seccomp", c->seccomp, true, "needs a kernel built with CONFIG_SECCOMP_FILTER", "%s",
                c->seccomp ? "filters with SECCOMP_RET_ERRNO available" : "no seccomp filter support");
        if (c->rootless) {
                ROW("newuidmap", c->newuidmap, false,
                        "install the 'uidmap' package for more than one id in the sandbox", "%s",
                        c->newuidmap ? "newuidmap and newgidmap found"
                                     : "not found: sandboxes get a single uid");
                ROW("subuid range", c->subuid_range, false,
                        "add a range: usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $USER",
                        "%s",
                        c->subuid_range ? "/etc/subuid and /etc/subgid list a range"
                                        : "no range for this user");
        }
        return n;
}

static size_t rows_cgroups(const host_caps *c, host_cap_row *rows, size_t max, size_t n) {
        bool v1_all = c->cgroup_v1_cpu && c->cgroup_v1_memory && c->cgroup_v1_pids;

        ROW("cgroup v2", c->cgroup_v2, false,
                "boot with systemd.unified_cgroup_hierarchy=1 for cgroup v2; v1 is used meanwhile", "%s",
                c->cgroup_v2 ? "unified hierarchy with cpu/memory/pids"
                             : "no cpu/memory/pids in a cgroup2 hierarchy");
        if (!c->cgroup_v2)
                ROW("cgroup v1 controllers", v1_all, false,
                        "mount the cpu, memory and pids cgroup v1 controllers to enforce --cpus, --memory, "
                        "--pids",
                        "cpu: %s, memory: %s, pids: %s", yes_no(c->cgroup_v1_cpu),
                        yes_no(c->cgroup_v1_memory), yes_no(c->cgroup_v1_pids));
        ROW("cgroup delegation", c->cgroup_delegated, false,
                c->rootless
                        ? "run nook in a delegated cgroup, e.g. systemd-run --user --scope -p Delegate=yes"
                        : "make the cgroup filesystem writable",
                "%s",
                c->cgroup_delegated ? "own cgroup is writable: resource limits work"
                                    : "own cgroup is not writable: resource limits are unavailable");
        return n;
}

static size_t rows_optional(const host_caps *c, host_cap_row *rows, size_t max, size_t n) {
        ROW("openat2", c->openat2, false, "Linux >= 5.6 resolves workspace paths faster", "%s",
                c->openat2 ? "RESOLVE_BENEATH path resolution" : "absent: component-by-component fallback");
        ROW("clone3", c->clone3, false, "Linux >= 5.7 starts sandboxes directly in their cgroup", "%s",
                c->clone3 ? "available" : "absent: clone() fallback");
        ROW("idmapped mounts", c->idmapped_mounts, false,
                c->rootless ? "needs root" : "Linux >= 5.12 lets workspaces keep host ownership", "%s",
                c->idmapped_mounts ? "mount_setattr(MOUNT_ATTR_IDMAP) available"
                                   : (c->rootless ? "unavailable rootless" : "absent"));
        ROW("slirp4netns", c->slirp4netns && c->tun, false,
                !c->slirp4netns
                        ? "install 'slirp4netns' for --network public"
                        : "let this user read and write /dev/net/tun (Debian's default is mode 0666)",
                "%s",
                !c->slirp4netns ? "not found: networking is off only"
                        : c->tun
                        ? "found, /dev/net/tun usable"
                        : "found, but /dev/net/tun is not readable and writable here: networking is off only");
        ROW("nftables", c->nftables, false, "install 'nftables' for network policies", "%s",
                c->nftables ? "nft found" : "nft not found: no network policy");
        ROW("kvm", c->kvm, false, "not needed by nook today", "%s",
                c->kvm ? "/dev/kvm usable" : "/dev/kvm absent or not writable");
        return n;
}

size_t host_caps_rows(const host_caps *c, host_cap_row *rows, size_t max) {
        size_t n = 0;

        n = rows_identity(c, rows, max, n);
        n = rows_cgroups(c, rows, max, n);
        return rows_optional(c, rows, max, n);
}

bool host_caps_usable(const host_caps *c) {
        host_cap_row rows[HOST_CAPS_ROWS_MAX];
        size_t n = host_caps_rows(c, rows, ELEMENTSOF(rows));

        for (size_t i = 0; i < n; i++)
                if (rows[i].required && !rows[i].ok)
                        return false;
        return true;
}
