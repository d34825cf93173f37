/* SPDX-License-Identifier: Apache-2.0 */
/* `create`: the container init, forked by clone() into the namespaces of config.json.
 *
 * Parent (nook-oci create, host root or the caller)        Child (the container init)
 *   validate everything, make ROOT/ID, exec.fifo, cgroup
 *   join namespaces given by path (user first)
 *   clone(CLONE_NEW* of the spec)  ------------------------>  waits for GO
 *   write id maps, move the child into the cgroup,
 *   io.nook.network rules in its network namespace
 *   send GO  --------------------------------------------->  cgroupns, rootfs, pivot_root, sysctl,
 *                                                            hostname, terminal, credentials
 *   <---------------------------------------------------  READY (or the error)
 *   state.json, --pid-file, prestart/createRuntime/
 *   createContainer hooks; send DONE  ------------------->  PDEATHSIG off
 *   <---------------------------------------------------  ACK; then waits on exec.fifo
 *   exit 0: the init is reparented to the engine's subreaper (conmon, containerd-shim).
 * `start` writes one byte into exec.fifo; the init runs startContainer hooks and execs. */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "isolate/net.h"
#include "isolate/userns.h"
#include "oci/container.h"
#include "oci/hooks.h"
#include "oci/internal.h"
#include "oci/mounts.h"
#include "oci/process.h"
#include "oci/seccomp.h"
#include "oci/spec.h"
#include "oci/state.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/proc.h"
#include "util/str.h"
#include "util/testhook.h"

enum { SYNC_GO = 1, SYNC_READY, SYNC_DONE, SYNC_ACK, SYNC_ERROR };

typedef struct sync_msg {
        int type;
        nook_error err;
} sync_msg;

typedef struct child_ctx {
        const oci_spec *spec;
        iso_cgroup *cg;
        int sync_fd;
        int fifo_fd;
        int mnt_ns_fd; /* join this mount namespace, or -1 */
        const int *bind_trees; /* per mount, its bind source cloned (open_tree) before the clone, or -1 */
        bool new_userns, new_cgroupns, new_uts, own_mntns, no_pivot;
        unsigned preserve_fds;
        oci_proc_ctx proc;
} child_ctx;

static int sync_send(int fd, int type, const nook_error *e) {
        sync_msg m = { .type = type };
        if (e)
                m.err = *e;
        return send(fd, &m, sizeof(m), MSG_NOSIGNAL) == (ssize_t)sizeof(m) ? 0 : -errno;
}

static int sync_expect(int fd, int type, const char *step, nook_error *err) {
        sync_msg m;
        ssize_t n;
        do
                n = recv(fd, &m, sizeof(m), 0);
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof(m) && m.type == type)
                return 0;
        if (n == (ssize_t)sizeof(m) && m.type == SYNC_ERROR) {
                *err = m.err;
                return -(int)(m.err.code ? m.err.code : NOOK_E_INTERNAL);
        }
        return nook_err_set(
                err, NOOK_E_INTERNAL, "The container init exited during %s (see its stderr)", step);
}

/* In the child: everything up to READY.  See the table at the top for the state. */
static int child_setup(child_ctx *c, nook_error *err) {
        const oci_spec *s = c->spec;
        int r;

        r = sync_expect(c->sync_fd, SYNC_GO, "setup", err);
        if (r < 0)
                return r;
        if (c->new_userns && (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0))
                return nook_err_errno(err, NOOK_E_INVALID,
                        "Cannot become root of the new user namespace (is container id 0 mapped?)");
        if (c->mnt_ns_fd >= 0 && setns(c->mnt_ns_fd, CLONE_NEWNS) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot join the mount namespace of linux.namespaces");
        if (c->new_cgroupns && unshare(CLONE_NEWCGROUP) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the cgroup namespace");
        /* A mount namespace of the spec (new, or joined by path) gets the root and the mounts.
         * Without one the container shares the caller's mounts: setting up a root there would
         * pivot (and mask paths of) the caller's.  Nothing is mounted then;
         * the process is chrooted into root.path (runc chroots too, after mounting into the
         * caller's namespace, which we do not). */
        if (c->own_mntns) {
                r = oci_rootfs_setup(s, c->cg, c->new_userns, c->no_pivot, c->bind_trees, err);
                if (r < 0)
                        return r;
        } else if (chroot(s->root) < 0 || chdir("/") < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot chroot into root.path '%s'", s->root);
        r = oci_sysctl_apply(s->sysctl, err);
        if (r < 0)
                return r;
        if (c->new_uts && s->hostname && sethostname(s->hostname, strlen(s->hostname)) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot set the hostname '%s'", s->hostname);
        if (c->own_mntns) {
                r = oci_rootfs_finalize(s, err);
                if (r < 0)
                        return r;
        }
        if (!s->has_process)
                return 0;
        if (s->process.terminal) {
                r = oci_proc_terminal(c->proc.console_fd, err);
                if (r < 0)
                        return r;
                c->proc.console_fd = safe_close(c->proc.console_fd);
        }
        return oci_proc_credentials(&c->proc, err);
}

static int wait_fifo(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        char b;
        while (poll(&p, 1, -1) < 0)
                if (errno != EINTR)
                        return -errno;
        return read(fd, &b, 1) == 1 ? 0 : -EPIPE;
}

_noreturn_ static void child_main(child_ctx *c) {
        nook_error err = { 0 };
        char path[PATH_MAX];
        int r;

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        r = child_setup(c, &err);
        if (r >= 0 && c->spec->has_process)
                r = oci_proc_lookup(&c->spec->process, path, &err);
        if (r < 0) {
                (void)sync_send(c->sync_fd, SYNC_ERROR, &err);
                _exit(1);
        }
        (void)sync_send(c->sync_fd, SYNC_READY, NULL);
        if (sync_expect(c->sync_fd, SYNC_DONE, "create", &err) < 0)
                _exit(1);
        /* the parent exits next: the death signal goes first, then the parent may go */
        (void)prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
        (void)sync_send(c->sync_fd, SYNC_ACK, NULL);
        c->sync_fd = safe_close(c->sync_fd);
        if (wait_fifo(c->fifo_fd) < 0 || !c->spec->has_process)
                _exit(1); /* deleted before start (start refuses a container without a process) */
        /* fifo_fd stays open until the fds are closed right before execve: `start` waits for
         * that, so the program runs when start returns */
        r = oci_hooks_run(c->spec->hooks, "startContainer", "{}", &err);
        if (r >= 0) {
                /* the engine's fds (conmon's sync pipe, log fds) never reach the container */
                (void)fd_close_all_except(3 + (int)c->preserve_fds, NULL, 0);
                r = oci_proc_seccomp_late(&c->proc, &err);
        }
        if (r >= 0)
                r = oci_proc_exec(&c->spec->process, path, &err);
        (void)dprintf(2, "nook-oci: %s\n", err.msg);
        _exit(r == -NOOK_E_REFUSED ? 126 : 127);
}

static int clone_flags(const oci_spec *s) {
        int f = 0;
        for (size_t i = 0; i < s->n_ns; i++)
                if (!s->ns[i].path && s->ns[i].type != CLONE_NEWCGROUP)
                        f |= s->ns[i].type;
        return f;
}

/* Namespaces given by path are joined by the parent before clone (the user namespace first: it
 * owns the others); the mount namespace by the child (the parent still needs the host's paths). */
static int join_namespaces(const oci_spec *s, int *ret_mnt_fd, nook_error *err) {
        static const int order[] = { CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS,
                CLONE_NEWCGROUP };
        for (size_t i = 0; i < ELEMENTSOF(order); i++) {
                const oci_ns *ns = oci_spec_ns(s, order[i]);
                if (!ns || !ns->path)
                        continue;
                _cleanup_close_ int fd = open(ns->path, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || setns(fd, order[i]) < 0)
                        return nook_err_errno(
                                err, NOOK_E_INVALID, "Cannot join the namespace '%s'", ns->path);
        }
        const oci_ns *mnt = oci_spec_ns(s, CLONE_NEWNS);
        if (mnt && mnt->path) {
                *ret_mnt_fd = open(mnt->path, O_RDONLY | O_CLOEXEC);
                if (*ret_mnt_fd < 0)
                        return nook_err_errno(
                                err, NOOK_E_INVALID, "Cannot open the namespace '%s'", mnt->path);
        }
        return 0;
}

static int write_map(pid_t pid, const char *file, const oci_idmap *maps, size_t n, nook_error *err) {
        char path[64], buf[512];
        size_t len = 0;
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%u %u %u\n", maps[i].container,
                        maps[i].host, maps[i].size);
        (void)snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, buf, len) < 0)
                return nook_err_errno(err, NOOK_E_INVALID, "Cannot write the %s of linux.%s", file,
                        streq(file, "uid_map") ? "uidMappings" : "gidMappings");
        return 0;
}

static int write_maps(const oci_spec *s, pid_t pid, bool rootless, nook_error *err) {
        int r;
        if (rootless) {
                char p[64];
                (void)snprintf(p, sizeof(p), "/proc/%d/setgroups", (int)pid);
                _cleanup_close_ int fd = open(p, O_WRONLY | O_CLOEXEC);
                if (fd >= 0)
                        (void)!write(fd, "deny", 4);
        }
        r = write_map(pid, "uid_map", s->uid_maps, s->n_uid_maps, err);
        if (r < 0)
                return r;
        return write_map(pid, "gid_map", s->gid_maps, s->n_gid_maps, err);
}

static bool path_has_state(const char *dir) {
        char p[PATH_MAX];
        (void)snprintf(p, sizeof(p), "%s/state.json", dir);
        return access(p, F_OK) == 0;
}

static int make_state_dir(const oci_create_opts *o, char **ret_dir, nook_error *err) {
        _cleanup_free_ char *dir = strprintf("%s/%s", o->root, o->id);
        if (!dir)
                return nook_err_oom(err);
        /* its parents too, as runc: containerd's shim names /run/containerd/runc/NAMESPACE */
        if (path_mkdir_p(o->root, 0711, err) < 0)
                return nook_err_wrap(err, "creating the --root folder '%s'", o->root);
        if (mkdir(dir, 0711) < 0) {
                if (errno != EEXIST)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", dir);
                if (path_has_state(dir))
                        return nook_err_set(
                                err, NOOK_E_EXISTS, "container with id \"%s\" already exists", o->id);
                return nook_err_set(err, NOOK_E_EXISTS,
                        "container with id \"%s\" already exists (its create has not finished or was killed: 'nook-oci delete --force %s' removes what it left)",
                        o->id, o->id);
        }
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

static int connect_console(const char *path, int *ret, nook_error *err) {
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(a.sun_path))
                return nook_err_set(err, NOOK_E_INVALID, "--console-socket path '%s' is too long", path);
        strcpy(a.sun_path, path);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
                return nook_err_errno(err, NOOK_E_INVALID, "Cannot connect to --console-socket '%s'", path);
        *ret = TAKE_FD(fd);
        return 0;
}

static void now_rfc3339(char buf[64]) {
        struct timespec ts;
        struct tm tm;
        (void)clock_gettime(CLOCK_REALTIME, &ts);
        (void)gmtime_r(&ts.tv_sec, &tm);
        size_t n = strftime(buf, 64, "%Y-%m-%dT%H:%M:%S", &tm);
        (void)snprintf(buf + n, 64 - n, ".%09ldZ", ts.tv_nsec);
}

/* ---- io.nook.network: the policy in the container's network namespace ---- */

static int host_addrs(net_cidr **ret, size_t *ret_n) {
        struct ifaddrs *ifa = NULL;
        size_t n = 0;
        if (getifaddrs(&ifa) < 0)
                return -errno;
        net_cidr *l = calloc(256, sizeof(net_cidr));
        for (struct ifaddrs *i = ifa; l && i && n < 256; i = i->ifa_next) {
                if (!i->ifa_addr ||
                        (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
                        continue;
                net_cidr *c = &l[n++];
                c->family = i->ifa_addr->sa_family;
                if (c->family == AF_INET) {
                        memcpy(c->addr, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
                        c->prefix = 32;
                } else {
                        memcpy(c->addr, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
                        c->prefix = 128;
                }
        }
        freeifaddrs(ifa);
        if (!l)
                return -ENOMEM;
        *ret = l;
        *ret_n = n;
        return 0;
}

/* The nameservers of the container's /etc/resolv.conf (the pod's, bound by the engine, or the
 * image's): DNS to them stays allowed. */
static void resolv_servers(const oci_spec *s, net_cidr *out, size_t max, size_t *ret_n) {
        char path[PATH_MAX], line[256];
        size_t n = 0;
        (void)snprintf(path, sizeof(path), "%s/etc/resolv.conf", s->root);
        for (size_t i = 0; i < s->n_mounts; i++)
                if (streq(s->mounts[i].destination, "/etc/resolv.conf") && s->mounts[i].bind)
                        (void)snprintf(path, sizeof(path), "%s", s->mounts[i].source);
        FILE *f = fopen(path, "re");
        while (f && n < max && fgets(line, sizeof(line), f)) {
                char addr[128];
                nook_error ignore;
                if (sscanf(line, "nameserver %127s", addr) == 1 &&
                        net_cidr_parse(addr, &out[n], &ignore) == 0)
                        n++;
        }
        if (f)
                fclose(f);
        *ret_n = n;
}

int oci_network_rules(const oci_spec *s, char **ret, nook_error *err) {
        const char *mode = oci_spec_annotation(s, "io.nook.network");
        const char *allow = oci_spec_annotation(s, "io.nook.allow");
        net_rule rules[NET_MAX_RULES];
        net_cidr dns[8];
        _cleanup_free_ net_cidr *hosts = NULL;
        size_t n_rules = 0, n_hosts = 0, n_dns = 0;
        if (!mode) {
                if (allow || oci_spec_annotation(s, "io.nook.domains"))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "annotation io.nook.allow/io.nook.domains needs io.nook.network=policy");
                *ret = NULL;
                return 0;
        }
        net_mode m = net_mode_from_string(mode);
        if (m != NET_MODE_PUBLIC && m != NET_MODE_POLICY)
                return nook_err_set(err, NOOK_E_INVALID,
                        "annotation io.nook.network='%s': use 'public' or 'policy' (no network at all is linux.namespaces' job)",
                        mode);
        if (oci_spec_annotation(s, "io.nook.domains"))
                return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                        "annotation io.nook.domains needs nook's DNS resolver, which nook-oci does not run; use io.nook.allow with CIDRs");
        if (!oci_spec_ns(s, CLONE_NEWNET))
                return nook_err_set(err, NOOK_E_INVALID,
                        "annotation io.nook.network needs a network namespace (linux.namespaces 'network'): it would firewall the host");
        _cleanup_free_ char *list = allow ? strdup(allow) : NULL;
        if (allow && !list)
                return nook_err_oom(err);
        for (char *save = NULL, *t = list ? strtok_r(list, ", ", &save) : NULL; t;
                t = strtok_r(NULL, ", ", &save)) {
                if (n_rules >= NET_MAX_RULES)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "annotation io.nook.allow has more than %d rules", NET_MAX_RULES);
                int r = net_rule_parse(true, t, NULL, &rules[n_rules++], err);
                if (r < 0)
                        return nook_err_wrap(err, "annotation io.nook.allow");
        }
        if (m == NET_MODE_POLICY && n_rules == 0)
                return nook_err_set(err, NOOK_E_INVALID,
                        "annotation io.nook.network=policy needs io.nook.allow (CIDR[:ports], ...)");
        if (host_addrs(&hosts, &n_hosts) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot list the host's addresses");
        resolv_servers(s, dns, ELEMENTSOF(dns), &n_dns);
        net_policy p = { .mode = m,
                .rules = rules,
                .n_rules = n_rules,
                .host_addrs = hosts,
                .n_host_addrs = n_hosts,
                .dns_servers = dns,
                .n_dns_servers = n_dns };
        return net_ruleset_build(&p, ret, err);
}

/* In a helper process: setns into the child's network namespace and load the rules there (the
 * parent must stay in its own: hooks run in the runtime's namespaces). */
static int apply_network(pid_t child, const char *rules, nook_error *err) {
        int status = 0;
        if (!rules)
                return 0;
        _cleanup_close_ int ns = proc_ns_open(child, "net");
        if (ns < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the container's network namespace");
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create a pipe");
        pid_t h = fork();
        if (h == 0) {
                nook_error e = { 0 };
                safe_close(pfd[0]);
                int r = setns(ns, CLONE_NEWNET) < 0 ? nook_err_errno(&e, NOOK_E_IO, "setns")
                                                    : net_nft_run(rules, &e);
                if (r < 0)
                        (void)!write(pfd[1], e.msg, strlen(e.msg));
                _exit(r < 0);
        }
        safe_close(pfd[1]);
        char msg[512] = "";
        ssize_t n = h > 0 ? read(pfd[0], msg, sizeof(msg) - 1) : 0;
        safe_close(pfd[0]);
        if (h < 0 || pid_wait(h, &status) < 0 || status != 0)
                return nook_err_set(err, NOOK_E_IO, "Cannot apply the io.nook.network rules: %s",
                        n > 0 ? msg : "the helper failed");
        return 0;
}

/* ---- the parent ---- */

typedef struct create_plan {
        oci_spec *spec;
        oci_seccomp *seccomp;
        iso_cgroup *cg;
        char *dir, *rules, *cgpath;
        int fifo_fd, console_fd, mnt_fd;
} create_plan;

static void create_plan_done(create_plan *p) {
        p->spec = oci_spec_free(p->spec);
        p->seccomp = oci_seccomp_free(p->seccomp);
        p->cg = iso_cgroup_free(p->cg);
        free(p->dir);
        free(p->rules);
        free(p->cgpath);
        p->fifo_fd = safe_close(p->fifo_fd);
        p->console_fd = safe_close(p->console_fd);
        p->mnt_fd = safe_close(p->mnt_fd);
}

static int plan_cgroup_path(create_plan *p, const char *id, nook_error *err) {
        const char *cp = p->spec->cgroups_path;
        if (cp && strchr(cp, ':'))
                return nook_err_set(err, NOOK_E_INVALID,
                        "linux.cgroupsPath '%s' is a systemd slice path: nook-oci manages cgroupfs paths only (use --cgroup-manager cgroupfs / SystemdCgroup = false)",
                        cp);
        p->cgpath = !cp ? strprintf("/nook-oci/%s", id) : cp[0] == '/' ? strdup(cp) : strprintf("/%s", cp);
        return p->cgpath ? 0 : nook_err_oom(err);
}

/* The state folder holds create.json (who is creating, which cgroup) before the cgroup exists:
 * a create killed from here on leaves what `delete` needs to remove it (oci/state.h). */
static int plan_cgroup(create_plan *p, nook_error *err) {
        const oci_spec *s = p->spec;
        int r = oci_create_note_save(p->dir, p->cgpath, err);
        if (r < 0)
                return r;
        r = iso_cgroup_create_path(p->cgpath, &p->cg, err);
        if (r < 0)
                return r;
        iso_cgroup_values v = { .has_memory = s->resources.has_memory,
                .memory = s->resources.memory,
                .has_swap = s->resources.has_swap,
                .swap = s->resources.swap,
                .has_cpu_quota = s->resources.has_cpu_quota,
                .cpu_quota = s->resources.cpu_quota,
                .has_cpu_period = s->resources.has_cpu_period,
                .cpu_period = s->resources.cpu_period,
                .cpu_shares = s->resources.cpu_shares,
                .has_pids = s->resources.has_pids,
                .pids = s->resources.pids,
                .cpuset_cpus = s->resources.cpuset_cpus,
                .has_reservation = s->resources.has_reservation,
                .reservation = s->resources.reservation,
                .has_swappiness = s->resources.has_swappiness,
                .swappiness = s->resources.swappiness,
                .disable_oom_killer = s->resources.disable_oom_killer };
        r = iso_cgroup_apply(p->cg, &v, err);
        if (r < 0)
                return nook_err_wrap(err, "linux.resources");
        return oci_devices_apply(p->cg, s, err);
}

/* Validates and prepares everything that can fail before a process exists. */
static int plan_prepare(const oci_create_opts *o, create_plan *p, nook_error *err) {
        char fifo[PATH_MAX];
        int r;

        r = oci_id_check(o->id, err);
        if (r < 0)
                return r;
        r = oci_spec_load(o->bundle, &p->spec, err);
        if (r < 0)
                return r;
        if (p->spec->seccomp) {
                _cleanup_free_ char *cache = strprintf("%s/.seccomp-cache", o->root);
                if (!cache)
                        return nook_err_oom(err);
                (void)path_mkdir_p(o->root, 0711, NULL);
                r = oci_seccomp_prepare(p->spec->seccomp, cache, &p->seccomp, err);
                if (r < 0)
                        return r;
        }
        r = oci_network_rules(p->spec, &p->rules, err);
        if (r < 0)
                return r;
        const char *prof = oci_spec_annotation(p->spec, "io.nook.profile");
        if (prof && iso_profile_from_string(prof) < 0)
                return nook_err_set(err, NOOK_E_INVALID,
                        "annotation io.nook.profile='%s': use 'default' or 'restricted'", prof);
        if (p->spec->process.terminal && !o->console_socket)
                return nook_err_set(err, NOOK_E_INVALID, "process.terminal is true: pass --console-socket");
        if (p->spec->process.terminal && (r = connect_console(o->console_socket, &p->console_fd, err)) < 0)
                return r;
        if (oci_spec_ns(p->spec, CLONE_NEWUSER) && !oci_spec_ns(p->spec, CLONE_NEWUSER)->path &&
                (!p->spec->n_uid_maps || !p->spec->n_gid_maps))
                return nook_err_set(err, NOOK_E_INVALID,
                        "a new user namespace needs linux.uidMappings and linux.gidMappings");
        r = plan_cgroup_path(p, o->id, err);
        if (r < 0)
                return r;
        r = make_state_dir(o, &p->dir, err);
        if (r < 0)
                return r;
        (void)snprintf(fifo, sizeof(fifo), "%s/exec.fifo", p->dir);
        if (mkfifo(fifo, 0622) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", fifo);
        p->fifo_fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (p->fifo_fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", fifo);
        r = plan_cgroup(p, err);
        if (r < 0)
                return r;
        test_kill_at("NOOK_TEST_OCI_CREATE_KILL_AT", "cgroup");
        return 0;
}

static int parent_finish(const oci_create_opts *o, create_plan *p, pid_t pid, nook_error *err) {
        char created[64];
        oci_state st = { .id = (char *)o->id,
                .dir = p->dir,
                .pid = pid,
                .start_time = proc_start_time(pid),
                .bundle = p->spec->bundle,
                .rootfs = p->spec->root,
                .no_process = !p->spec->has_process,
                .cgroup_path = p->cgpath,
                .created = created,
                .annotations = p->spec->annotations };
        now_rfc3339(created);
        int r = oci_state_save(&st, err);
        if (r < 0)
                return r;
        oci_create_note_remove(p->dir); /* the state names the cgroup now */
        if (o->pid_file && (r = oci_pid_file_write(o->pid_file, pid, err)) < 0)
                return r;
        json_t *j = oci_state_to_json(&st);
        _cleanup_free_ char *state = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!state)
                return nook_err_oom(err);
        static const char *const hooks[] = { "prestart", "createRuntime", "createContainer" };
        for (size_t i = 0; i < ELEMENTSOF(hooks); i++) {
                r = oci_hooks_run(p->spec->hooks, hooks[i], state, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int spawn_init(const oci_create_opts *o, create_plan *p, pid_t *ret_pid, nook_error *err) {
        _cleanup_close_pair_ int sp[2] = { -1, -1 };
        const oci_spec *s = p->spec;
        const oci_ns *user = oci_spec_ns(s, CLONE_NEWUSER);
        const char *prof = oci_spec_annotation(s, "io.nook.profile");
        int r;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the sync socket");
        r = join_namespaces(s, &p->mnt_fd, err);
        if (r < 0)
                return r;
        /* bind sources are cloned here, with our credentials, as detached mounts: from a new
         * user namespace the init may not reach them (podman's runroot is root's, 0700); it
         * attaches the clones (mounts.c, mount_bind).  Where open_tree fails, by path as before. */
        _cleanup_free_ int *bind_trees = calloc(s->n_mounts ? s->n_mounts : 1, sizeof(int));
        if (!bind_trees)
                return nook_err_oom(err);
        for (size_t i = 0; i < s->n_mounts; i++)
                bind_trees[i] = s->mounts[i].bind && user && !user->path
                        ? open_tree(AT_FDCWD, s->mounts[i].source,
                                  OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                          ((s->mounts[i].flags & MS_REC) ? AT_RECURSIVE : 0))
                        : -1;
        child_ctx c = { .spec = s,
                .bind_trees = bind_trees,
                .cg = p->cg,
                .sync_fd = sp[1],
                .fifo_fd = p->fifo_fd,
                .mnt_ns_fd = p->mnt_fd,
                .new_userns = user && !user->path,
                .new_cgroupns = oci_spec_ns(s, CLONE_NEWCGROUP) && !oci_spec_ns(s, CLONE_NEWCGROUP)->path,
                .new_uts = oci_spec_ns(s, CLONE_NEWUTS) && !oci_spec_ns(s, CLONE_NEWUTS)->path,
                .own_mntns = oci_spec_ns(s, CLONE_NEWNS) != NULL, /* new, or joined: set up, as runc */
                .no_pivot = o->no_pivot,
                .preserve_fds = o->preserve_fds,
                .proc = { .proc = &s->process,
                        .seccomp = p->seccomp,
                        .has_profile = prof != NULL,
                        .profile = prof ? iso_profile_from_string(prof) : ISO_PROFILE_DEFAULT,
                        .setgroups_denied = user && !user->path && geteuid() != 0,
                        .console_fd = p->console_fd } };
        _cleanup_pid_kill_ pid_t pid =
                (pid_t)syscall(SYS_clone, clone_flags(s) | SIGCHLD, NULL, NULL, NULL, NULL);
        int clone_errno = errno;
        for (size_t i = 0; pid != 0 && i < s->n_mounts; i++)
                safe_close(bind_trees[i]); /* the init has its copies */
        errno = clone_errno;
        if (pid < 0)
                return nook_err_errno(err, errno == EPERM ? NOOK_E_MISSING_FEATURE : NOOK_E_IO,
                        "Cannot clone the container init into its namespaces");
        if (pid == 0) {
                sp[0] = safe_close(sp[0]);
                child_main(&c);
        }
        sp[1] = safe_close(sp[1]);
        if (c.new_userns && (r = write_maps(s, pid, geteuid() != 0, err)) < 0)
                return r;
        r = iso_cgroup_attach_all(p->cg, pid, err);
        if (r < 0)
                return r;
        test_kill_at("NOOK_TEST_OCI_CREATE_KILL_AT", "spawned");
        r = apply_network(pid, p->rules, err);
        if (r < 0)
                return r;
        (void)sync_send(sp[0], SYNC_GO, NULL);
        r = sync_expect(sp[0], SYNC_READY, "setup", err);
        if (r < 0)
                return r;
        test_kill_at("NOOK_TEST_OCI_CREATE_KILL_AT", "ready");
        r = parent_finish(o, p, pid, err);
        if (r < 0)
                return r;
        (void)sync_send(sp[0], SYNC_DONE, NULL);
        r = sync_expect(sp[0], SYNC_ACK, "create", err);
        if (r < 0)
                return r;
        *ret_pid = TAKE_PID(pid);
        return 0;
}

int oci_create(const oci_create_opts *o, pid_t *ret_pid, nook_error *err) {
        create_plan p = { .fifo_fd = -1, .console_fd = -1, .mnt_fd = -1 };
        /* Before anything is made: as another user, or as root of a user namespace, the
         * cgroup, device rules and mknod would fail half-way with a less telling error. */
        if (!iso_rootful())
                return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                        "nook-oci is not running as host root (uid %u%s): rootless nook-oci is not implemented (it needs a delegated cgroup subtree and newuidmap); start the engine as root (podman, containerd and the kubelet do), or give rootless podman crun or runc",
                        (unsigned)geteuid(), geteuid() == 0 ? " of a user namespace" : "");
        int r = plan_prepare(o, &p, err);
        if (r >= 0)
                r = spawn_init(o, &p, ret_pid, err);
        if (r < 0 && p.cg)
                (void)iso_cgroup_destroy(p.cg);
        if (r < 0 && p.dir)
                (void)oci_state_remove(p.dir, &(nook_error){ 0 });
        create_plan_done(&p);
        return r;
}
