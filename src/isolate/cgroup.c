/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "isolate/devfilter.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/str.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CPU_PERIOD_US 100000ull

/* A sandbox uses the first five; a cgroup made by path for the OCI runtime all of them. */
enum {
        V1_CPU,
        V1_CPUACCT,
        V1_MEMORY,
        V1_PIDS,
        V1_FREEZER,
        _V1_SANDBOX_MAX,
        V1_DEVICES = _V1_SANDBOX_MAX,
        V1_CPUSET,
        _V1_MAX
};
static const char *const v1_names[_V1_MAX] = { "cpu", "cpuacct", "memory", "pids", "freezer", "devices",
        "cpuset" };
_Static_assert(_V1_MAX <= ISO_CGROUP_JOIN_MAX, "iso_cgroup_join holds one fd per v1 controller");

struct iso_cgroup {
        bool v2;
        char *path; /* v2 */
        char *v1[_V1_MAX]; /* v1, NULL where the controller is missing */
        iso_dev_rule *dev_rules; /* v2: iso_cgroup_devices' rules until iso_cgroup_devices_commit */
        size_t n_dev_rules;
};

static int write_file(const char *dir, const char *file, const char *value, nook_error *err) {
        char p[PATH_MAX];
        (void)snprintf(p, sizeof(p), "%s/%s", dir, file);
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", p);
        int r = fd_write_all(fd, value, strlen(value));
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot write '%s' to '%s'", value, p);
        return 0;
}

static int read_u64(const char *dir, const char *file, const char *key, uint64_t *ret) {
        char p[PATH_MAX], buf[4096];
        (void)snprintf(p, sizeof(p), "%s/%s", dir, file);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        safe_close(fd);
        if (n <= 0)
                return -EIO;
        buf[n] = 0;
        const char *v = buf;
        if (key) {
                size_t kl = strlen(key);
                v = NULL;
                for (char *line = buf; line && *line;
                        line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
                                v = line + kl + 1;
                                break;
                        }
                if (!v)
                        return -ENOENT;
        }
        if (strncmp(v, "max", 3) == 0) {
                *ret = UINT64_MAX;
                return 0;
        }
        *ret = strtoull(v, NULL, 10);
        return 0;
}

static bool is_cgroup2(const char *path) {
        struct statfs sf;
        return statfs(path, &sf) == 0 && (unsigned long)sf.f_type == CGROUP2_SUPER_MAGIC;
}

/* The v2 root when it holds the controllers we need (not on a hybrid host's empty tree). */
static const char *v2_root(void) {
        static const char *const cands[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
        for (size_t i = 0; i < ELEMENTSOF(cands); i++) {
                if (!is_cgroup2(cands[i]))
                        continue;
                char p[PATH_MAX], buf[512] = "";
                (void)snprintf(p, sizeof(p), "%s/cgroup.controllers", cands[i]);
                int fd = open(p, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                safe_close(fd);
                if (n > 0 && strstr(buf, "memory") && strstr(buf, "pids"))
                        return cands[i];
        }
        return NULL;
}

/* /proc/self/cgroup, read whole into buf (NUL-terminated): one read for every hierarchy, not one
 * file walk per controller (the kernel formats every hierarchy's line at each read). */
static int self_cgroups(char *buf, size_t size) {
        int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t n = 0;
        for (;;) {
                ssize_t k = read(fd, buf + n, size - 1 - n);
                if (k <= 0)
                        break;
                n += (size_t)k;
        }
        safe_close(fd);
        buf[n] = 0;
        return 0;
}

/* Our own cgroup path in a v1 hierarchy, from the text of /proc/self/cgroup ("4:memory:/a/b"). */
static int v1_own_path_in(const char *text, const char *controller, char *ret, size_t len) {
        for (const char *line = text; *line;) {
                const char *end = strchrnul(line, '\n');
                const char *a = memchr(line, ':', (size_t)(end - line));
                const char *b = a ? memchr(a + 1, ':', (size_t)(end - a - 1)) : NULL;
                for (const char *c = a ? a + 1 : b; b && c < b;) {
                        const char *e = memchr(c, ',', (size_t)(b - c));
                        if (!e)
                                e = b;
                        if ((size_t)(e - c) == strlen(controller) &&
                                strneq(c, controller, (size_t)(e - c))) {
                                (void)snprintf(ret, len, "%.*s", (int)(end - b - 1), b + 1);
                                return 0;
                        }
                        c = e + 1;
                }
                line = *end ? end + 1 : end;
        }
        return -ENOENT;
}

static int v1_own_path(const char *controller, char *ret, size_t len) {
        char text[8192] = ""; /* zeroed: the analyzer does not see read() fill it */
        int r = self_cgroups(text, sizeof(text));
        return r < 0 ? r : v1_own_path_in(text, controller, ret, len);
}

/* The host's cgroup layout, read once per operation (a create asked for it three times: ~25
 * syscalls on the way to init's mappings): the v2 root that holds the controllers (NULL on a v1
 * or hybrid host) and, without it, our own place in each v1 hierarchy (/proc/self/cgroup). */
typedef struct cg_host {
        const char *v2;
        char self[8192];
} cg_host;

static void cg_host_probe(cg_host *h) {
        h->v2 = v2_root();
        h->self[0] = 0;
        if (!h->v2 && self_cgroups(h->self, sizeof(h->self)) < 0)
                h->self[0] = 0;
}

static uint32_t hash_home(const char *home) {
        uint32_t h = 2166136261u; /* FNV-1a: a stable short tag, not a security boundary */
        for (const char *p = home; *p; p++)
                h = (h ^ (uint8_t)*p) * 16777619u;
        return h;
}

static char *leaf_name(const char *home, const char *name) {
        return strprintf("nook-%s-%08x", name, hash_home(home));
}

/* How v1_dir picks a sandbox's folder in a hierarchy. */
typedef enum {
        V1_FOR_CREATE, /* the shared place where we may write its root, else beneath our own */
        V1_FOR_OPEN, /* the shared place where the folder is there, else beneath our own */
} v1_want;

/* A sandbox's folder in v1 hierarchy ctl.  Its place is <hierarchy>/nook/<leaf>, the same for
 * every caller, as v2's <root>/nook/<leaf>: a later command run from another cgroup (another
 * login session, a service, a CI job's own cgroup) finds it to read stats, pause it or remove it,
 * where a place beneath the creator's own cgroup was found by no one else, and its cgroups
 * outlived the sandbox.  Beneath our own place only where the hierarchy's root is not ours to
 * write (a delegated subtree), and for a sandbox an older nook made there. */
static int v1_dir(const char *self, int ctl, const char *leaf, v1_want want, char **ret) {
        char own[PATH_MAX], mnt[64];
        (void)snprintf(mnt, sizeof(mnt), "/sys/fs/cgroup/%s", v1_names[ctl]);
        if (access(mnt, F_OK) < 0 || is_cgroup2(mnt))
                return -ENOENT;
        _cleanup_free_ char *shared = strprintf("%s/nook/%s", mnt, leaf);
        if (!shared)
                return -ENOMEM;
        bool use_shared = want == V1_FOR_CREATE ? access(mnt, W_OK) == 0 : access(shared, F_OK) == 0;
        if (use_shared) {
                *ret = TAKE_PTR(shared);
                return 0;
        }
        if (v1_own_path_in(self, v1_names[ctl], own, sizeof(own)) < 0)
                return -ENOENT;
        *ret = strprintf("%s%s/%s", mnt, streq(own, "/") ? "" : own, leaf);
        return *ret ? 0 : -ENOMEM;
}

static bool available(const cg_host *h, char *reason, size_t len) {
        const char *v2 = h->v2;
        char p[PATH_MAX];
        if (v2) {
                (void)snprintf(p, sizeof(p), "%s/cgroup.subtree_control", v2);
                if (access(p, W_OK) == 0)
                        return true;
                (void)snprintf(
                        reason, len, "the cgroup v2 tree is not writable (not delegated to this user)");
                return false;
        }
        char own[PATH_MAX - 64];
        if (v1_own_path_in(h->self, "memory", own, sizeof(own)) < 0) {
                (void)snprintf(reason, len, "no cgroup v2 controllers and no cgroup v1 memory hierarchy");
                return false;
        }
        (void)snprintf(p, sizeof(p), "/sys/fs/cgroup/memory%s", own);
        if (access("/sys/fs/cgroup/memory", W_OK) < 0 && access(p, W_OK) < 0) {
                (void)snprintf(reason, len,
                        "the cgroup v1 hierarchies are not writable by this user (not delegated)");
                return false;
        }
        return true;
}

bool iso_cgroup_available(char *reason, size_t len) {
        cg_host h;
        cg_host_probe(&h);
        return available(&h, reason, len);
}

/* fresh: cg was made just now, so each limit not asked for is already the kernel's default
 * (none: v2 "max", v1 -1 and a period of CPU_PERIOD_US) and is not written again. */
static int apply_limits(iso_cgroup *cg, const iso_limits *l, bool fresh, nook_error *err) {
        char v[64];
        int r;
        if (cg->v2) {
                if (l->cpus || !fresh) {
                        if (l->cpus)
                                (void)snprintf(v, sizeof(v), "%llu %llu",
                                        (unsigned long long)l->cpus * CPU_PERIOD_US, CPU_PERIOD_US);
                        else
                                (void)snprintf(v, sizeof(v), "max %llu", CPU_PERIOD_US);
                        if ((r = write_file(cg->path, "cpu.max", v, err)) < 0)
                                return r;
                }
                if (l->memory_bytes || !fresh) {
                        (void)snprintf(v, sizeof(v), l->memory_bytes ? "%" PRIu64 : "max", l->memory_bytes);
                        if ((r = write_file(cg->path, "memory.max", v, err)) < 0)
                                return r;
                }
                /* no swap beyond the limit: an OOM is an OOM, not a slow crawl */
                if (l->memory_bytes)
                        (void)write_file(cg->path, "memory.swap.max", "0", err);
                if (!l->pids_max && fresh)
                        return 0;
                (void)snprintf(v, sizeof(v), l->pids_max ? "%" PRIu64 : "max", l->pids_max);
                nook_error optional;
                r = write_file(cg->path, "pids.max", v, l->pids_optional ? &optional : err);
                return l->pids_optional ? 0 : r;
        }
        if (l->cpus && !cg->v1[V1_CPU])
                return nook_err_set(
                        err, NOOK_E_MISSING_FEATURE, "Cannot limit cpus: no cgroup v1 cpu hierarchy");
        if (l->memory_bytes && !cg->v1[V1_MEMORY])
                return nook_err_set(
                        err, NOOK_E_MISSING_FEATURE, "Cannot limit memory: no cgroup v1 memory hierarchy");
        if (l->pids_max && !l->pids_optional && !cg->v1[V1_PIDS])
                return nook_err_set(
                        err, NOOK_E_MISSING_FEATURE, "Cannot limit pids: no cgroup v1 pids hierarchy");
        if (cg->v1[V1_CPU] && (l->cpus || !fresh)) {
                (void)snprintf(v, sizeof(v), "%llu", CPU_PERIOD_US);
                if ((r = write_file(cg->v1[V1_CPU], "cpu.cfs_period_us", v, err)) < 0)
                        return r;
                (void)snprintf(v, sizeof(v), "%lld", l->cpus ? (long long)(l->cpus * CPU_PERIOD_US) : -1ll);
                if ((r = write_file(cg->v1[V1_CPU], "cpu.cfs_quota_us", v, err)) < 0)
                        return r;
        }
        if (cg->v1[V1_MEMORY] && (l->memory_bytes || !fresh)) {
                /* memsw (memory+swap) must stay >= the memory limit at every step: raise it first
                 * when growing, lower it last when shrinking; writing it on both sides does both. */
                nook_error ignore;
                (void)snprintf(v, sizeof(v), "%lld", l->memory_bytes ? (long long)l->memory_bytes : -1ll);
                (void)write_file(cg->v1[V1_MEMORY], "memory.memsw.limit_in_bytes", v, &ignore);
                if ((r = write_file(cg->v1[V1_MEMORY], "memory.limit_in_bytes", v, err)) < 0)
                        return r;
                (void)write_file(cg->v1[V1_MEMORY], "memory.memsw.limit_in_bytes", v, &ignore);
        }
        if (cg->v1[V1_PIDS] && (l->pids_max || !fresh)) {
                (void)snprintf(v, sizeof(v), l->pids_max ? "%" PRIu64 : "max", l->pids_max);
                if ((r = write_file(cg->v1[V1_PIDS], "pids.max", v, err)) < 0)
                        return r;
        }
        return 0;
}

static int cg_paths(const cg_host *h, const char *home, const char *name, v1_want want, iso_cgroup **ret,
        nook_error *err) {
        _cleanup_free_ char *leaf = leaf_name(home, name);
        iso_cgroup *cg = calloc(1, sizeof(*cg));
        if (!leaf || !cg) {
                free(cg);
                return nook_err_oom(err);
        }
        const char *v2 = h->v2;
        if (v2) {
                cg->v2 = true;
                cg->path = strprintf("%s/nook/%s", v2, leaf);
                if (!cg->path) {
                        free(cg);
                        return nook_err_oom(err);
                }
        } else
                for (int i = 0; i < _V1_SANDBOX_MAX; i++)
                        (void)v1_dir(h->self, i, leaf, want, &cg->v1[i]);
        *ret = cg;
        return 0;
}

int iso_cgroup_create(
        const char *home, const char *name, const iso_limits *l, iso_cgroup **ret, nook_error *err) {
        char reason[160];
        cg_host h;
        cg_host_probe(&h);
        if (!available(&h, reason, sizeof(reason)))
                return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                        "Cannot enforce resource limits: %s; run 'nook doctor'", reason);
        iso_cgroup *cg = NULL;
        bool left = false; /* a cgroup of this name was there already */
        int r = cg_paths(&h, home, name, V1_FOR_CREATE, &cg, err);
        if (r < 0)
                return r;
        if (cg->v2) {
                const char *v2 = h.v2;
                char parent[PATH_MAX];
                (void)snprintf(parent, sizeof(parent), "%s/nook", v2);
                (void)write_file(v2, "cgroup.subtree_control", "+cpu +memory +pids", err);
                if (mkdir(parent, 0755) < 0 && errno != EEXIST)
                        r = nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", parent);
                else
                        (void)write_file(parent, "cgroup.subtree_control", "+cpu +memory +pids", err);
                if (r >= 0 && mkdir(cg->path, 0755) < 0) {
                        if (errno == EEXIST)
                                left = true;
                        else
                                r = nook_err_errno(
                                        err, NOOK_E_IO, "Cannot create the cgroup '%s'", cg->path);
                }
        } else
                for (int i = 0; i < _V1_MAX && r >= 0; i++) {
                        if (!cg->v1[i])
                                continue;
                        char *slash = strrchr(cg->v1[i], '/');
                        *slash = 0; /* its parent: <hierarchy>/nook, made once */
                        if (endswith(cg->v1[i], "/nook"))
                                (void)mkdir(cg->v1[i], 0755);
                        *slash = '/';
                        if (mkdir(cg->v1[i], 0755) == 0)
                                continue;
                        if (errno == EEXIST) {
                                left = true;
                                continue;
                        }
                        if (i == V1_FREEZER) {
                                /* pause is optional: without a writable freezer it is refused,
                                 * saying why (iso_cgroup_freezer_available), not the sandbox */
                                free(cg->v1[i]);
                                cg->v1[i] = NULL;
                                continue;
                        }
                        r = nook_err_errno(err, NOOK_E_IO, "Cannot create the cgroup '%s'", cg->v1[i]);
                }
        if (r >= 0)
                r = apply_limits(cg, l, !left, err);
        /* a cgroup of this name left frozen (its removal failed) would freeze the new init; one
         * made just now is not frozen (v1 and v2 both start a new cgroup thawed) */
        if (r >= 0 && left)
                (void)iso_cgroup_freeze(cg, false, NULL);
        if (r < 0) {
                iso_cgroup_destroy(cg);
                iso_cgroup_free(cg);
                return r;
        }
        *ret = cg;
        return 0;
}

int iso_cgroup_open(const char *home, const char *name, iso_cgroup **ret, nook_error *err) {
        iso_cgroup *cg = NULL;
        cg_host h;
        cg_host_probe(&h);
        int r = cg_paths(&h, home, name, V1_FOR_OPEN, &cg, err);
        if (r < 0)
                return r;
        const char *probe = cg->v2 ? cg->path : cg->v1[V1_MEMORY] ? cg->v1[V1_MEMORY] : cg->v1[V1_PIDS];
        if (!probe || access(probe, F_OK) < 0) {
                iso_cgroup_free(cg);
                return nook_err_set(err, NOOK_E_NOT_FOUND,
                        "Sandbox '%s' has no cgroup (not running, or rootless without delegation)", name);
        }
        *ret = cg;
        return 0;
}

/* Writes pid into cgroup.procs of every hierarchy of cg; skip_missing: those whose folder does
 * not exist are left out (a cgroup by path for the OCI runtime), else they fail. */
static int attach(iso_cgroup *cg, pid_t pid, bool skip_missing, nook_error *err) {
        char v[32];
        (void)snprintf(v, sizeof(v), "%d", (int)pid);
        if (cg->v2)
                return write_file(cg->path, "cgroup.procs", v, err);
        for (int i = 0; i < _V1_MAX; i++) {
                if (!cg->v1[i] || (skip_missing && access(cg->v1[i], F_OK) < 0))
                        continue;
                int r = write_file(cg->v1[i], "cgroup.procs", v, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int iso_cgroup_attach(iso_cgroup *cg, pid_t pid, nook_error *err) {
        return attach(cg, pid, false, err);
}

int iso_cgroup_set_limits(iso_cgroup *cg, const iso_limits *l, nook_error *err) {
        return apply_limits(cg, l, /* fresh= */ false, err);
}

int iso_cgroup_read_stats(iso_cgroup *cg, iso_cgroup_stats *ret, nook_error *err) {
        iso_cgroup_stats s = { 0 };
        uint64_t v = 0;
        if (cg->v2) {
                if (read_u64(cg->path, "cpu.stat", "usage_usec", &v) == 0)
                        s.cpu_usage_ns = v * 1000;
                (void)read_u64(cg->path, "memory.current", NULL, &s.memory_current);
                (void)read_u64(cg->path, "memory.peak", NULL, &s.memory_peak);
                (void)read_u64(cg->path, "pids.current", NULL, &s.pids_current);
                (void)read_u64(cg->path, "memory.max", NULL, &s.memory_limit);
                (void)read_u64(cg->path, "pids.max", NULL, &s.pids_limit);
                uint64_t q = 0;
                if (read_u64(cg->path, "cpu.max", NULL, &q) == 0 && q != UINT64_MAX)
                        s.cpus_limit = (unsigned)(q / CPU_PERIOD_US);
        } else {
                if (cg->v1[V1_CPUACCT])
                        (void)read_u64(cg->v1[V1_CPUACCT], "cpuacct.usage", NULL, &s.cpu_usage_ns);
                if (cg->v1[V1_CPU]) {
                        long long q = 0;
                        uint64_t uq = 0;
                        if (read_u64(cg->v1[V1_CPU], "cpu.cfs_quota_us", NULL, &uq) == 0) {
                                q = (long long)uq;
                                if (q > 0)
                                        s.cpus_limit = (unsigned)((uint64_t)q / CPU_PERIOD_US);
                        }
                }
                if (cg->v1[V1_MEMORY]) {
                        (void)read_u64(cg->v1[V1_MEMORY], "memory.usage_in_bytes", NULL, &s.memory_current);
                        (void)read_u64(cg->v1[V1_MEMORY], "memory.max_usage_in_bytes", NULL, &s.memory_peak);
                        (void)read_u64(cg->v1[V1_MEMORY], "memory.limit_in_bytes", NULL, &s.memory_limit);
                }
                if (cg->v1[V1_PIDS]) {
                        (void)read_u64(cg->v1[V1_PIDS], "pids.current", NULL, &s.pids_current);
                        (void)read_u64(cg->v1[V1_PIDS], "pids.max", NULL, &s.pids_limit);
                }
        }
        s.oom_kills = iso_cgroup_oom_kills(cg);
        (void)err;
        *ret = s;
        return 0;
}

uint64_t iso_cgroup_oom_kills(iso_cgroup *cg) {
        uint64_t n = 0;
        if (cg->v2)
                (void)read_u64(cg->path, "memory.events", "oom_kill", &n);
        else if (cg->v1[V1_MEMORY])
                (void)read_u64(cg->v1[V1_MEMORY], "memory.oom_control", "oom_kill", &n);
        return n;
}

/* True when the folder is gone. */
static bool rmdir_gone(const char *dir) {
        return rmdir(dir) == 0 || errno == ENOENT;
}

static bool kill_and_rmdir(const char *dir) {
        if (rmdir_gone(dir))
                return true;
        for (int round = 0; round < 50; round++) {
                char p[PATH_MAX], buf[4096];
                (void)snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
                int fd = open(p, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        return access(dir, F_OK) < 0;
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                safe_close(fd);
                buf[n > 0 ? n : 0] = 0;
                for (char *s = buf; *s;) {
                        long pid = strtol(s, &s, 10);
                        if (pid > 0)
                                (void)kill((pid_t)pid, SIGKILL);
                        while (*s == '\n')
                                s++;
                }
                if (rmdir_gone(dir))
                        return true;
                usleep(10000);
        }
        return false;
}

bool iso_cgroup_destroy(iso_cgroup *cg) {
        if (!cg)
                return true;
        /* The common case, a sandbox whose processes are gone (its init reaped): one rmdir per
         * hierarchy, nothing to thaw or kill. */
        bool busy = cg->v2 && cg->path && !rmdir_gone(cg->path);
        for (int i = 0; i < _V1_MAX; i++)
                if (cg->v1[i] && !rmdir_gone(cg->v1[i]))
                        busy = true;
        if (!busy)
                return true;
        /* A frozen task takes no signal (v1) or only a fatal one (v2): thaw first, so the kill
         * below and the supervisor's SIGTERM to init take effect. */
        (void)iso_cgroup_freeze(cg, false, NULL);
        bool gone = true;
        if (cg->v2 && cg->path)
                gone = kill_and_rmdir(cg->path);
        for (int i = 0; i < _V1_MAX; i++)
                if (cg->v1[i] && !kill_and_rmdir(cg->v1[i]))
                        gone = false;
        return gone;
}

iso_cgroup *iso_cgroup_free(iso_cgroup *cg) {
        if (!cg)
                return NULL;
        free(cg->path);
        for (int i = 0; i < _V1_MAX; i++)
                free(cg->v1[i]);
        free(cg->dev_rules);
        free(cg);
        return NULL;
}

/* ---- freezer ------------------------------------------------------------------------------------ */

/* The freezer's folder and file: v2 "cgroup.freeze" in the sandbox's cgroup, v1 "freezer.state"
 * in its freezer hierarchy.  NULL when this cgroup has none. */
static const char *freezer_dir(const iso_cgroup *cg) {
        return cg->v2 ? cg->path : cg->v1[V1_FREEZER];
}

bool iso_cgroup_freezer_available(char *reason, size_t len) {
        const char *v2 = v2_root();
        char p[PATH_MAX];
        if (v2) {
                (void)snprintf(p, sizeof(p), "%s/cgroup.subtree_control", v2);
                if (access(p, W_OK) == 0)
                        return true;
                (void)snprintf(reason, len,
                        "the cgroup v2 tree (cgroup.freeze) is not writable by this user (not delegated)");
                return false;
        }
        char own[PATH_MAX - 64];
        if (access("/sys/fs/cgroup/freezer", F_OK) < 0 || v1_own_path("freezer", own, sizeof(own)) < 0) {
                (void)snprintf(reason, len, "no cgroup v2 controllers and no cgroup v1 freezer hierarchy");
                return false;
        }
        (void)snprintf(p, sizeof(p), "/sys/fs/cgroup/freezer%s", own);
        if (access(p, W_OK) < 0) {
                (void)snprintf(reason, len,
                        "the cgroup v1 freezer hierarchy ('%s') is not writable by this user (not delegated)",
                        p);
                return false;
        }
        return true;
}

static int freezer_read(const char *dir, const char *file, char *buf, size_t len) {
        char p[PATH_MAX];
        (void)snprintf(p, sizeof(p), "%s/%s", dir, file);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, len - 1);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        return 0;
}

int iso_cgroup_frozen(const iso_cgroup *cg) {
        const char *dir = freezer_dir(cg);
        char buf[512];
        if (!dir)
                return 0;
        if (cg->v2) {
                /* cgroup.events "frozen 1": every task has stopped, not only asked to */
                if (freezer_read(dir, "cgroup.events", buf, sizeof(buf)) < 0)
                        return 0;
                return strstr(buf, "frozen 1") ? 1 : 0;
        }
        if (freezer_read(dir, "freezer.state", buf, sizeof(buf)) < 0)
                return 0;
        return startswith(buf, "FROZEN") ? 1 : startswith(buf, "FREEZING") ? 2 : 0;
}

/* Freezing is asynchronous in both versions: the write asks, the state file says when every task
 * has stopped (v1: FREEZING -> FROZEN; v2: cgroup.events "frozen 1").  A task in an
 * uninterruptible sleep (D state) can hold it a while; after 2 s we give up and thaw, so a pause
 * never leaves a half-frozen sandbox. */
int iso_cgroup_freeze(iso_cgroup *cg, bool freeze, nook_error *err) {
        nook_error ignore = { 0 };
        nook_error *e = err ? err : &ignore;
        const char *dir = freezer_dir(cg);
        if (!dir) {
                char reason[PATH_MAX];
                if (!freeze)
                        return 0;
                if (iso_cgroup_freezer_available(reason, sizeof(reason)))
                        (void)snprintf(reason, sizeof(reason), "the sandbox's cgroup has no freezer");
                return nook_err_set(
                        e, NOOK_E_MISSING_FEATURE, "Cannot pause: %s; run 'nook doctor'", reason);
        }
        int r = cg->v2 ? write_file(dir, "cgroup.freeze", freeze ? "1" : "0", e)
                       : write_file(dir, "freezer.state", freeze ? "FROZEN" : "THAWED", e);
        if (r < 0 || !freeze)
                return r;
        for (int i = 0; i < 2000; i++) {
                if (iso_cgroup_frozen(cg) == 1)
                        return 0;
                if (!cg->v2) /* v1 retries the freeze only when asked again */
                        (void)write_file(dir, "freezer.state", "FROZEN", &ignore);
                usleep(i < 100 ? 100 : 1000);
        }
        (void)iso_cgroup_freeze(cg, false, NULL);
        return nook_err_set(e, NOOK_E_TIMEOUT,
                "Cannot pause: the sandbox's processes did not all stop within 2 s (one may be in an uninterruptible wait); it keeps running");
}

/* ---- joining without the global lock (cgroup.h) ------------------------------------------------ */

int iso_cgroup_join_open(iso_cgroup *cg, iso_cgroup_join *ret, nook_error *err) {
        *ret = (iso_cgroup_join)ISO_CGROUP_JOIN_INIT;
        if (cg->v2)
                return 0;
        for (int i = 0; i < _V1_MAX; i++) {
                if (!cg->v1[i])
                        continue;
                char p[PATH_MAX];
                (void)snprintf(p, sizeof(p), "%s/tasks", cg->v1[i]);
                int fd = open(p, O_WRONLY | O_CLOEXEC);
                if (fd < 0) {
                        int e = errno;
                        iso_cgroup_join_done(ret);
                        return nook_err_errnum(err, NOOK_E_IO, e, "Cannot open '%s'", p);
                }
                ret->fds[ret->n++] = fd;
        }
        return 0;
}

int iso_cgroup_join_self(const iso_cgroup_join *j, nook_error *err) {
        for (size_t i = 0; i < j->n; i++)
                if (write(j->fds[i], "0", 1) != 1)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot join the sandbox's cgroup");
        return 0;
}

void iso_cgroup_join_done(iso_cgroup_join *j) {
        for (size_t i = 0; i < j->n; i++)
                safe_close(j->fds[i]);
        j->n = 0;
}

/* ---- cgroups named by path, for the OCI runtime (runtime-spec linux.cgroupsPath) ---- */

/* path is relative to each hierarchy's root ("/a/b"); v1 controllers missing here stay NULL. */
static int cg_by_path(const char *path, iso_cgroup **ret, nook_error *err) {
        iso_cgroup *cg = calloc(1, sizeof(*cg));
        const char *v2 = v2_root();
        if (!cg)
                return nook_err_oom(err);
        if (v2) {
                cg->v2 = true;
                cg->path = strprintf("%s%s", v2, path);
                if (!cg->path) {
                        free(cg);
                        return nook_err_oom(err);
                }
        } else
                for (int i = 0; i < _V1_MAX; i++) {
                        char mnt[64];
                        (void)snprintf(mnt, sizeof(mnt), "/sys/fs/cgroup/%s", v1_names[i]);
                        if (access(mnt, F_OK) < 0 || is_cgroup2(mnt))
                                continue;
                        cg->v1[i] = strprintf("%s%s", mnt, path);
                        if (!cg->v1[i]) {
                                iso_cgroup_free(cg);
                                return nook_err_oom(err);
                        }
                }
        *ret = cg;
        return 0;
}

/* v1 cpuset: a new cgroup starts with empty cpus and mems, and a task cannot join it until both
 * are set; copy them down from the nearest parent that has them. */
static void cpuset_inherit(const char *dir) {
        char parent[PATH_MAX], buf[256];
        (void)snprintf(parent, sizeof(parent), "%s", dir);
        char *slash = strrchr(parent, '/');
        if (!slash)
                return;
        *slash = 0;
        static const char *const files[] = { "cpuset.cpus", "cpuset.mems" };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                char p[PATH_MAX + 32];
                (void)snprintf(p, sizeof(p), "%s/%s", parent, files[i]);
                int fd = open(p, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                safe_close(fd);
                if (n <= 1) {
                        cpuset_inherit(parent);
                        fd = open(p, O_RDONLY | O_CLOEXEC);
                        n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
                        safe_close(fd);
                }
                if (n <= 0)
                        continue;
                buf[n] = 0;
                nook_error ignore;
                (void)write_file(dir, files[i], buf, &ignore);
        }
}

static int mkdir_parents(const char *dir, nook_error *err) {
        char buf[PATH_MAX];
        (void)snprintf(buf, sizeof(buf), "%s", dir);
        for (char *s = buf + strlen("/sys/fs/cgroup/") + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = 0;
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create the cgroup '%s'", buf);
                if (strstr(buf, "/cpuset/"))
                        cpuset_inherit(buf);
                *s = '/';
        }
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the cgroup '%s'", buf);
        if (strstr(buf, "/cpuset/"))
                cpuset_inherit(buf);
        return 0;
}

int iso_cgroup_create_path(const char *path, iso_cgroup **ret, nook_error *err) {
        char reason[160];
        iso_cgroup *cg = NULL;
        int r;
        if (path[0] != '/' || strstr(path, "/../") || endswith(path, "/.."))
                return nook_err_set(
                        err, NOOK_E_INVALID, "cgroup path '%s' must be absolute without '..'", path);
        if (!iso_cgroup_available(reason, sizeof(reason)))
                return nook_err_set(
                        err, NOOK_E_MISSING_FEATURE, "Cannot create the cgroup '%s': %s", path, reason);
        r = cg_by_path(path, &cg, err);
        if (r < 0)
                return r;
        if (cg->v2) {
                nook_error ignore;
                (void)write_file(v2_root(), "cgroup.subtree_control", "+cpu +memory +pids", &ignore);
                r = mkdir_parents(cg->path, err);
        } else
                for (int i = 0; i < _V1_MAX && r >= 0; i++)
                        if (cg->v1[i])
                                r = mkdir_parents(cg->v1[i], err);
        if (r < 0) {
                iso_cgroup_destroy(cg);
                iso_cgroup_free(cg);
                return r;
        }
        *ret = cg;
        return 0;
}

int iso_cgroup_open_path(const char *path, iso_cgroup **ret, nook_error *err) {
        iso_cgroup *cg = NULL;
        int r = cg_by_path(path, &cg, err);
        if (r < 0)
                return r;
        *ret = cg;
        return 0;
}

static int write_u64_or_max(const char *dir, const char *file, int64_t v, const char *max, nook_error *err) {
        char buf[32];
        if (v < 0)
                (void)snprintf(buf, sizeof(buf), "%s", max);
        else
                (void)snprintf(buf, sizeof(buf), "%lld", (long long)v);
        return write_file(dir, file, buf, err);
}

static int apply_v2(iso_cgroup *cg, const iso_cgroup_values *v, nook_error *err) {
        char buf[64];
        int r;
        if (v->has_memory) {
                r = write_u64_or_max(cg->path, "memory.max", v->memory, "max", err);
                if (r < 0)
                        return r;
        }
        /* v2 limits swap alone (memory.swap.max), v1 memory+swap: runc's conversion
         * (ConvertMemorySwapToCgroupV2Value).  Lifting the memory limit without naming swap lifts
         * swap too, as on v1.  Not every kernel has swap accounting: ignored when it fails. */
        if ((v->has_swap && v->swap < 0) || (v->has_memory && v->memory < 0 && !v->has_swap)) {
                nook_error ignore;
                (void)write_file(cg->path, "memory.swap.max", "max", &ignore);
        } else if (v->has_swap && v->has_memory && v->memory >= 0) {
                nook_error ignore;
                (void)write_u64_or_max(cg->path, "memory.swap.max", v->swap - v->memory, "max", &ignore);
        }
        if (v->has_cpu_quota || v->has_cpu_period) {
                if (v->cpu_quota > 0)
                        (void)snprintf(buf, sizeof(buf), "%lld %llu", (long long)v->cpu_quota,
                                (unsigned long long)(v->cpu_period ? v->cpu_period : CPU_PERIOD_US));
                else
                        (void)snprintf(buf, sizeof(buf), "max %llu",
                                (unsigned long long)(v->cpu_period ? v->cpu_period : CPU_PERIOD_US));
                r = write_file(cg->path, "cpu.max", buf, err);
                if (r < 0)
                        return r;
        }
        if (v->cpu_shares) {
                /* cgroup v2 weight from v1 shares, the conversion runc and crun use */
                uint64_t w = 1 + ((v->cpu_shares - 2) * 9999) / 262142;
                (void)snprintf(buf, sizeof(buf), "%llu", (unsigned long long)w);
                r = write_file(cg->path, "cpu.weight", buf, err);
                if (r < 0)
                        return r;
        }
        if (v->has_pids) {
                r = write_u64_or_max(cg->path, "pids.max", v->pids > 0 ? v->pids : -1, "max", err);
                if (r < 0)
                        return r;
        }
        if (v->cpuset_cpus) {
                r = write_file(cg->path, "cpuset.cpus", v->cpuset_cpus, err);
                if (r < 0)
                        return r;
        }
        if (v->has_reservation) {
                r = write_u64_or_max(cg->path, "memory.low", v->reservation, "max", err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int need_v1(iso_cgroup *cg, int ctl, const char *what, nook_error *err) {
        if (cg->v1[ctl])
                return 0;
        return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                "Cannot set %s: this host has no cgroup v1 %s hierarchy", what, v1_names[ctl]);
}

/* memory.soft_limit_in_bytes, memory.swappiness, memory.oom_control (v1). */
static int apply_v1_memory_extras(iso_cgroup *cg, const iso_cgroup_values *v, nook_error *err) {
        char buf[32];
        int r;
        if (!v->has_reservation && !v->has_swappiness && !v->disable_oom_killer)
                return 0;
        r = need_v1(cg, V1_MEMORY, "memory reservation, swappiness or the OOM killer", err);
        if (r < 0)
                return r;
        if (v->has_reservation) {
                r = write_u64_or_max(
                        cg->v1[V1_MEMORY], "memory.soft_limit_in_bytes", v->reservation, "-1", err);
                if (r < 0)
                        return r;
        }
        if (v->has_swappiness) {
                (void)snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v->swappiness);
                r = write_file(cg->v1[V1_MEMORY], "memory.swappiness", buf, err);
                if (r < 0)
                        return r;
        }
        if (v->disable_oom_killer) {
                r = write_file(cg->v1[V1_MEMORY], "memory.oom_control", "1", err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* memory.limit_in_bytes and memory.memsw.limit_in_bytes (v1). */
static int apply_v1_memory(iso_cgroup *cg, const iso_cgroup_values *v, nook_error *err) {
        nook_error ignore;
        bool has_swap = v->has_swap;
        int64_t swap = v->swap;
        char memsw[PATH_MAX];
        int r;
        if (!v->has_memory && !v->has_swap)
                return 0;
        r = need_v1(cg, V1_MEMORY, "a memory limit", err);
        if (r < 0)
                return r;
        /* The kernel keeps memsw >= the memory limit, so lifting the memory limit alone fails with
         * EINVAL while memsw is set.  Lifting memory without naming swap lifts memsw too, where
         * the kernel accounts swap (runc: fs/memory.go, setMemoryAndSwap). */
        (void)snprintf(memsw, sizeof(memsw), "%s/memory.memsw.limit_in_bytes", cg->v1[V1_MEMORY]);
        if (v->has_memory && v->memory < 0 && !has_swap && access(memsw, F_OK) == 0)
                has_swap = true, swap = -1;
        if (v->has_memory) {
                /* memsw must stay >= the limit at every step: write it on both sides */
                if (has_swap)
                        (void)write_u64_or_max(
                                cg->v1[V1_MEMORY], "memory.memsw.limit_in_bytes", swap, "-1", &ignore);
                r = write_u64_or_max(cg->v1[V1_MEMORY], "memory.limit_in_bytes", v->memory, "-1", err);
                if (r < 0)
                        return r;
        }
        if (has_swap) {
                r = write_u64_or_max(cg->v1[V1_MEMORY], "memory.memsw.limit_in_bytes", swap, "-1", err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* cpu.cfs_period_us, cpu.cfs_quota_us and cpu.shares (v1). */
static int apply_v1_cpu(iso_cgroup *cg, const iso_cgroup_values *v, nook_error *err) {
        char buf[64];
        int r;
        if (!v->has_cpu_quota && !v->has_cpu_period && !v->cpu_shares)
                return 0;
        r = need_v1(cg, V1_CPU, "a cpu limit", err);
        if (r < 0)
                return r;
        if (v->has_cpu_period && v->cpu_period) {
                r = write_u64_or_max(cg->v1[V1_CPU], "cpu.cfs_period_us", (int64_t)v->cpu_period, "-1", err);
                if (r < 0)
                        return r;
        }
        if (v->has_cpu_quota) {
                r = write_u64_or_max(
                        cg->v1[V1_CPU], "cpu.cfs_quota_us", v->cpu_quota > 0 ? v->cpu_quota : -1, "-1", err);
                if (r < 0)
                        return r;
        }
        if (v->cpu_shares) {
                (void)snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v->cpu_shares);
                r = write_file(cg->v1[V1_CPU], "cpu.shares", buf, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int iso_cgroup_apply(iso_cgroup *cg, const iso_cgroup_values *v, nook_error *err) {
        int r;
        if (cg->v2)
                return apply_v2(cg, v, err);
        r = apply_v1_memory(cg, v, err);
        if (r < 0)
                return r;
        r = apply_v1_cpu(cg, v, err);
        if (r < 0)
                return r;
        r = apply_v1_memory_extras(cg, v, err);
        if (r < 0)
                return r;
        if (v->has_pids) {
                r = need_v1(cg, V1_PIDS, "a pids limit", err);
                if (r < 0)
                        return r;
                r = write_u64_or_max(cg->v1[V1_PIDS], "pids.max", v->pids > 0 ? v->pids : -1, "max", err);
                if (r < 0)
                        return r;
        }
        if (v->cpuset_cpus) {
                r = need_v1(cg, V1_CPUSET, "cpuset.cpus", err);
                if (r < 0)
                        return r;
                r = write_file(cg->v1[V1_CPUSET], "cpuset.cpus", v->cpuset_cpus, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

int iso_cgroup_attach_all(iso_cgroup *cg, pid_t pid, nook_error *err) {
        return attach(cg, pid, true, err);
}

int iso_cgroup_pids(iso_cgroup *cg, pid_t **ret, size_t *ret_n, nook_error *err) {
        const char *dir = cg->v2 ? cg->path : cg->v1[V1_PIDS] ? cg->v1[V1_PIDS] : cg->v1[V1_MEMORY];
        char p[PATH_MAX];
        _cleanup_free_ char *text = NULL;
        size_t len = 0, n = 0;
        if (!dir)
                return nook_err_set(
                        err, NOOK_E_MISSING_FEATURE, "No cgroup hierarchy to list processes from");
        (void)snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_NOT_FOUND, "Cannot open '%s'", p);
        int r = fd_read_to_end(fd, 4u << 20, &text, &len, err);
        if (r < 0)
                return r;
        pid_t *pids = calloc(len / 2 + 1, sizeof(pid_t));
        if (!pids)
                return nook_err_oom(err);
        for (char *s = text ? text : (char *)""; *s;) {
                long v = strtol(s, &s, 10);
                if (v > 0)
                        pids[n++] = (pid_t)v;
                while (*s == '\n')
                        s++;
        }
        *ret = pids;
        *ret_n = n;
        return 0;
}

const char *iso_cgroup_dir(iso_cgroup *cg, const char *controller) {
        if (cg->v2)
                return cg->path;
        for (int i = 0; i < _V1_MAX; i++)
                if (streq(v1_names[i], controller))
                        return cg->v1[i];
        return NULL;
}

int iso_cgroup_devices(iso_cgroup *cg, bool allow, const char *rule, nook_error *err) {
        if (cg->v2) {
                /* v2: an eBPF program made of the whole list (iso_cgroup_devices_commit) */
                iso_dev_rule r;
                int k = iso_dev_rule_parse(rule, allow, &r, err);
                if (k < 0)
                        return k;
                iso_dev_rule *n = reallocarray(cg->dev_rules, cg->n_dev_rules + 1, sizeof(*n));
                if (!n)
                        return nook_err_oom(err);
                cg->dev_rules = n;
                cg->dev_rules[cg->n_dev_rules++] = r;
                return 0;
        }
        if (!cg->v1[V1_DEVICES])
                return 0;
        return write_file(cg->v1[V1_DEVICES], allow ? "devices.allow" : "devices.deny", rule, err);
}

int iso_cgroup_devices_commit(iso_cgroup *cg, nook_error *err) {
        if (!cg->v2 || cg->n_dev_rules == 0)
                return 0;
        int r = iso_devfilter_apply(cg->path, cg->dev_rules, cg->n_dev_rules, err);
        free(cg->dev_rules);
        cg->dev_rules = NULL;
        cg->n_dev_rules = 0;
        return r;
}
