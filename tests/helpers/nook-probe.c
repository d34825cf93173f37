/* SPDX-License-Identifier: Apache-2.0 */
/* nook-probe: a small static binary the integration tests run inside sandboxes.  Each subcommand
 * prints one JSON object on one line to stdout and exits 0, or prints {"error": ...} and exits 1
 * (2 for a usage error).  No nook code is linked: the probe must report what the kernel does, not
 * what nook believes.
 *
 * It must stay harmless when run on the host, even as root: try-syscall only makes the calls in
 * tests/helpers/try-syscall.h (arguments the kernel rejects before acting), fork-bomb is bounded,
 * and nothing writes outside the path given to `write`. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "try-syscall.h"

extern char **environ;

/* ---- output -------------------------------------------------------------------------------- */

static void json_str(const char *s) {
        putchar('"');
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        printf("\\%c", *p);
                else if (*p < 0x20)
                        printf("\\u%04x", *p);
                else
                        putchar(*p);
        }
        putchar('"');
}

static void json_kv_str(const char *key, const char *value, bool comma) {
        if (comma)
                putchar(',');
        json_str(key);
        putchar(':');
        json_str(value);
}

static const char *errno_name(int e) {
        const char *n = strerrorname_np(e);
        return n ? n : "E?";
}

static int fail(const char *what, int e) {
        printf("{\"error\":");
        json_str(errno_name(e));
        printf(",\"what\":");
        json_str(what);
        printf("}\n");
        return 1;
}

static int usage(void) {
        fprintf(stderr,
                "usage: nook-probe id | caps | mounts | cgroup | try-syscall [NAME...] | write PATH "
                "CONTENT\n"
                "                  | read PATH | sleep-tree SECONDS | spin SECONDS | spin-cpu SECONDS | alloc MIB\n"
                "                  | fork-bomb [MAX] | net | env | fds | exit CODE\n");
        return 2;
}

static bool parse_long(const char *s, long min, long max, long *ret) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < min || v > max)
                return false;
        *ret = v;
        return true;
}

/* ---- id, caps, cgroup ---------------------------------------------------------------------- */

static int cmd_id(void) {
        gid_t groups[256];
        char host[256] = "";
        int n = getgroups((int)(sizeof(groups) / sizeof(groups[0])), groups);

        (void)gethostname(host, sizeof(host) - 1);
        printf("{\"uid\":%u,\"gid\":%u,\"euid\":%u,\"egid\":%u,\"groups\":[", (unsigned)getuid(),
                (unsigned)getgid(), (unsigned)geteuid(), (unsigned)getegid());
        for (int i = 0; i < n; i++)
                printf("%s%u", i ? "," : "", (unsigned)groups[i]);
        printf("],\"pid\":%d,\"ppid\":%d,", (int)getpid(), (int)getppid());
        json_kv_str("hostname", host, false);
        printf("}\n");
        return 0;
}

/* proc_pid_status(5): the capability sets as hex masks, NoNewPrivs 0/1, Seccomp 0/1/2. */
static int cmd_caps(void) {
        static const char *const keys[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs",
                "Seccomp" };
        FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        bool first = true;

        if (!f)
                return fail("/proc/self/status", errno);
        putchar('{');
        while (fgets(line, sizeof(line), f)) {
                char *colon = strchr(line, ':');
                if (!colon)
                        continue;
                *colon = '\0';
                for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                        if (strcmp(line, keys[i]) != 0)
                                continue;
                        char *v = colon + 1 + strspn(colon + 1, " \t");
                        v[strcspn(v, "\n")] = '\0';
                        if (i >= 5)
                                printf("%s\"%s\":%ld", first ? "" : ",", keys[i], strtol(v, NULL, 10));
                        else
                                json_kv_str(keys[i], v, !first);
                        first = false;
                }
        }
        fclose(f);
        printf("}\n");
        return 0;
}

static int cmd_cgroup(void) {
        FILE *f = fopen("/proc/self/cgroup", "re");
        char line[PATH_MAX + 128];
        bool first = true;

        if (!f)
                return fail("/proc/self/cgroup", errno);
        printf("{\"cgroups\":[");
        while (fgets(line, sizeof(line), f)) {
                char *ctrls = strchr(line, ':'), *path;
                if (!ctrls || !(path = strchr(ctrls + 1, ':')))
                        continue;
                *ctrls++ = '\0';
                *path++ = '\0';
                path[strcspn(path, "\n")] = '\0';
                printf("%s{\"id\":%ld,", first ? "" : ",", strtol(line, NULL, 10));
                json_kv_str("controllers", ctrls, false);
                json_kv_str("path", path, true);
                putchar('}');
                first = false;
        }
        fclose(f);
        printf("]}\n");
        return 0;
}

/* ---- mounts -------------------------------------------------------------------------------- */

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape_octal(char *s) {
        char *w = s;
        for (char *r = s; *r; r++) {
                if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' &&
                        r[3] >= '0' && r[3] <= '7') {
                        *w++ = (char)(((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
                        r += 3;
                } else
                        *w++ = *r;
        }
        *w = '\0';
}

static bool has_opt(const char *opts, const char *opt) {
        size_t n = strlen(opt);
        for (const char *p = opts; *p;) {
                size_t len = strcspn(p, ",");
                if (len == n && strncmp(p, opt, n) == 0)
                        return true;
                p += len + (p[len] == ',');
        }
        return false;
}

/* proc_pid_mountinfo(5): "id parent maj:min root mount_point mount_options [optional...] - fstype
 * source super_options".  ro/nosuid/nodev/noexec are per-mount options (field 6). */
static int cmd_mounts(void) {
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[8192];
        bool first = true;

        if (!f)
                return fail("/proc/self/mountinfo", errno);
        printf("{\"mounts\":[");
        while (fgets(line, sizeof(line), f)) {
                char target[4096], opts[1024], fstype[256], source[4096];
                char *sep = strstr(line, " - ");
                if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s %1023s", target, opts) != 2 ||
                        sscanf(sep + 3, "%255s %4095s", fstype, source) != 2)
                        continue;
                unescape_octal(target);
                unescape_octal(source);
                printf("%s{", first ? "" : ",");
                json_kv_str("target", target, false);
                json_kv_str("fstype", fstype, true);
                json_kv_str("source", source, true);
                json_kv_str("options", opts, true);
                printf(",\"ro\":%s,\"nosuid\":%s,\"nodev\":%s,\"noexec\":%s}",
                        has_opt(opts, "ro") ? "true" : "false", has_opt(opts, "nosuid") ? "true" : "false",
                        has_opt(opts, "nodev") ? "true" : "false",
                        has_opt(opts, "noexec") ? "true" : "false");
                first = false;
        }
        fclose(f);
        printf("]}\n");
        return 0;
}

/* ---- try-syscall --------------------------------------------------------------------------- */

static void print_try(const char *name, bool comma) {
        const try_syscall *t = try_syscall_find(name);
        char buf[32];
        const char *result;

        if (!t)
                result = "unknown";
        else {
                int r = try_syscall_run(t);
                if (r == 0)
                        result = "ok";
                else if (r < 0) {
                        (void)snprintf(buf, sizeof(buf), "signal:%d", -r);
                        result = buf;
                } else
                        result = errno_name(r);
        }
        json_kv_str(name, result, comma);
}

/* Prints {"NAME":"ok"|"EPERM"|"EINVAL"|...|"signal:31"|"unknown"}; no names: every known call. */
static int cmd_try_syscall(int argc, char **argv) {
        size_t n = sizeof(try_syscalls) / sizeof(try_syscalls[0]);

        putchar('{');
        if (argc == 0)
                for (size_t i = 0; i < n; i++)
                        print_try(try_syscalls[i].name, i > 0);
        for (int i = 0; i < argc; i++)
                print_try(argv[i], i > 0);
        printf("}\n");
        return 0;
}

/* ---- files, env, fds ----------------------------------------------------------------------- */

static int cmd_write(const char *path, const char *content) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
        size_t len = strlen(content), done = 0;

        if (fd < 0)
                return fail(path, errno);
        while (done < len) {
                ssize_t w = write(fd, content + done, len - done);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0) {
                        int e = errno;
                        close(fd);
                        return fail(path, e);
                }
                done += (size_t)w;
        }
        if (close(fd) < 0)
                return fail(path, errno);
        putchar('{');
        json_kv_str("path", path, false);
        printf(",\"bytes\":%zu}\n", len);
        return 0;
}

static int cmd_read(const char *path) {
        char buf[65536];
        size_t len = 0;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

        if (fd < 0)
                return fail(path, errno);
        while (len < sizeof(buf) - 1) {
                ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        break;
                len += (size_t)r;
        }
        close(fd);
        buf[len] = '\0';
        putchar('{');
        json_kv_str("path", path, false);
        json_kv_str("content", buf, true);
        printf("}\n");
        return 0;
}

static int cmd_env(void) {
        printf("{\"env\":[");
        for (char **e = environ; e && *e; e++) {
                if (e != environ)
                        putchar(',');
                json_str(*e);
        }
        printf("]}\n");
        return 0;
}

static int cmd_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        bool first = true;

        if (!d)
                return fail("/proc/self/fd", errno);
        printf("{\"fds\":[");
        while ((de = readdir(d))) {
                char path[64], target[PATH_MAX];
                long fd;
                if (!parse_long(de->d_name, 0, INT_MAX, &fd) || fd == dirfd(d))
                        continue;
                (void)snprintf(path, sizeof(path), "/proc/self/fd/%ld", fd);
                ssize_t n = readlink(path, target, sizeof(target) - 1);
                target[n < 0 ? 0 : n] = '\0';
                printf("%s{\"fd\":%ld,", first ? "" : ",", fd);
                json_kv_str("target", target, false);
                putchar('}');
                first = false;
        }
        closedir(d);
        printf("]}\n");
        return 0;
}

/* ---- processes and resources --------------------------------------------------------------- */

static void sleep_seconds(long seconds) {
        struct timespec ts = { .tv_sec = seconds, .tv_nsec = 0 };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* A three-level tree for the "a timeout kills the whole tree" tests: the grandchild ignores
 * SIGTERM, so only a SIGKILL of the tree (or of its cgroup / pid namespace) ends it early. */
static int cmd_sleep_tree(long seconds) {
        int p[2];
        pid_t grandchild = 0;

        if (pipe2(p, O_CLOEXEC) < 0)
                return fail("pipe", errno);
        pid_t child = fork();
        if (child < 0)
                return fail("fork", errno);
        if (child == 0) {
                pid_t gc = fork();
                if (gc == 0) {
                        (void)signal(SIGTERM, SIG_IGN);
                        sleep_seconds(seconds);
                        _exit(0);
                }
                (void)!write(p[1], &gc, sizeof(gc));
                if (gc > 0)
                        (void)waitpid(gc, NULL, 0);
                _exit(gc > 0 ? 0 : 1);
        }
        close(p[1]);
        if (read(p[0], &grandchild, sizeof(grandchild)) != sizeof(grandchild) || grandchild <= 0)
                return fail("fork grandchild", EAGAIN);
        printf("{\"pid\":%d,\"child\":%d,\"grandchild\":%d}\n", (int)getpid(), (int)child, (int)grandchild);
        fflush(stdout);
        (void)waitpid(child, NULL, 0);
        return 0;
}

static int cmd_spin(long seconds) {
        struct timespec start, now;
        volatile uint64_t n = 0;

        clock_gettime(CLOCK_MONOTONIC, &start);
        do {
                for (int i = 0; i < 1000000; i++)
                        n++;
                clock_gettime(CLOCK_MONOTONIC, &now);
        } while (now.tv_sec - start.tv_sec < seconds);
        printf("{\"spun_seconds\":%ld}\n", (long)(now.tv_sec - start.tv_sec));
        return 0;
}

/* Spins until this process has used SECONDS of CPU (not of wall time: a loaded machine then
 * still gets the same amount of work), or 60 s of wall time passed. */
static int cmd_spin_cpu(long seconds) {
        struct timespec start, now, cpu;
        volatile uint64_t n = 0;

        clock_gettime(CLOCK_MONOTONIC, &start);
        do {
                for (int i = 0; i < 1000000; i++)
                        n++;
                clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
                clock_gettime(CLOCK_MONOTONIC, &now);
        } while (cpu.tv_sec < seconds && now.tv_sec - start.tv_sec < 60);
        printf("{\"cpu_seconds\":%ld}\n", (long)cpu.tv_sec);
        return 0;
}

/* Touches every page so the memory is charged to the cgroup, not just reserved. */
static int cmd_alloc(long mib) {
        size_t len = (size_t)mib << 20;
        long page = sysconf(_SC_PAGESIZE);
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        if (p == MAP_FAILED)
                return fail("mmap", errno);
        for (size_t off = 0; off < len; off += (size_t)page)
                p[off] = 1;
        printf("{\"alloc_mib\":%ld}\n", mib);
        return 0;
}

/* Forks children that sleep until it has MAX of them or fork() fails (a pids limit answers
 * EAGAIN), reports, then kills and reaps them all.  Bounded, so harmless on the host. */
static int cmd_fork_bomb(long max) {
        pid_t *pids = calloc((size_t)max, sizeof(pid_t));
        long n = 0;
        int e = 0;

        if (!pids)
                return fail("calloc", ENOMEM);
        for (; n < max; n++) {
                pid_t pid = fork();
                if (pid < 0) {
                        e = errno;
                        break;
                }
                if (pid == 0) {
                        (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
                        pause();
                        _exit(0);
                }
                pids[n] = pid;
        }
        for (long i = 0; i < n; i++)
                (void)kill(pids[i], SIGKILL);
        for (long i = 0; i < n; i++)
                (void)waitpid(pids[i], NULL, 0);
        free(pids);
        printf("{\"forked\":%ld,", n);
        json_kv_str("stopped_by", e ? errno_name(e) : "max", false);
        printf("}\n");
        return 0;
}

static void print_addrs(const struct ifaddrs *all, const char *name) {
        bool first = true;
        printf(",\"addrs\":[");
        for (const struct ifaddrs *a = all; a; a = a->ifa_next) {
                char buf[INET6_ADDRSTRLEN];
                const void *src;
                if (!a->ifa_addr || strcmp(a->ifa_name, name) != 0)
                        continue;
                if (a->ifa_addr->sa_family == AF_INET)
                        src = &((const struct sockaddr_in *)(const void *)a->ifa_addr)->sin_addr;
                else if (a->ifa_addr->sa_family == AF_INET6)
                        src = &((const struct sockaddr_in6 *)(const void *)a->ifa_addr)->sin6_addr;
                else
                        continue;
                if (!inet_ntop(a->ifa_addr->sa_family, src, buf, sizeof(buf)))
                        continue;
                if (!first)
                        putchar(',');
                json_str(buf);
                first = false;
        }
        putchar(']');
}

static int cmd_net(void) {
        struct if_nameindex *ifs = if_nameindex();
        struct ifaddrs *addrs = NULL;

        if (!ifs)
                return fail("if_nameindex", errno);
        (void)getifaddrs(&addrs);
        printf("{\"interfaces\":[");
        for (struct if_nameindex *i = ifs; i->if_index; i++) {
                bool up = false;
                for (struct ifaddrs *a = addrs; a; a = a->ifa_next)
                        if (strcmp(a->ifa_name, i->if_name) == 0)
                                up = up || (a->ifa_flags & IFF_UP);
                printf("%s{\"index\":%u,", i == ifs ? "" : ",", i->if_index);
                json_kv_str("name", i->if_name, false);
                printf(",\"up\":%s", up ? "true" : "false");
                print_addrs(addrs, i->if_name);
                putchar('}');
        }
        printf("]}\n");
        if (addrs)
                freeifaddrs(addrs);
        if_freenameindex(ifs);
        return 0;
}

/* ---- main ---------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
        long v;

        if (argc < 2)
                return usage();
        const char *cmd = argv[1];
        int nargs = argc - 2;
        char **args = argv + 2;

        if (strcmp(cmd, "id") == 0)
                return cmd_id();
        if (strcmp(cmd, "caps") == 0)
                return cmd_caps();
        if (strcmp(cmd, "mounts") == 0)
                return cmd_mounts();
        if (strcmp(cmd, "cgroup") == 0)
                return cmd_cgroup();
        if (strcmp(cmd, "try-syscall") == 0)
                return cmd_try_syscall(nargs, args);
        if (strcmp(cmd, "write") == 0 && nargs == 2)
                return cmd_write(args[0], args[1]);
        if (strcmp(cmd, "read") == 0 && nargs == 1)
                return cmd_read(args[0]);
        if (strcmp(cmd, "env") == 0)
                return cmd_env();
        if (strcmp(cmd, "fds") == 0)
                return cmd_fds();
        if (strcmp(cmd, "net") == 0)
                return cmd_net();
        if (strcmp(cmd, "sleep-tree") == 0 && nargs == 1 && parse_long(args[0], 0, 86400, &v))
                return cmd_sleep_tree(v);
        if (strcmp(cmd, "spin") == 0 && nargs == 1 && parse_long(args[0], 0, 86400, &v))
                return cmd_spin(v);
        if (strcmp(cmd, "spin-cpu") == 0 && nargs == 1 && parse_long(args[0], 0, 3600, &v))
                return cmd_spin_cpu(v);
        if (strcmp(cmd, "alloc") == 0 && nargs == 1 && parse_long(args[0], 1, 1 << 20, &v))
                return cmd_alloc(v);
        if (strcmp(cmd, "fork-bomb") == 0 && nargs <= 1) {
                v = 2000;
                if (nargs == 1 && !parse_long(args[0], 1, 100000, &v))
                        return usage();
                return cmd_fork_bomb(v);
        }
        if (strcmp(cmd, "exit") == 0 && nargs == 1 && parse_long(args[0], 0, 255, &v))
                return (int)v;
        return usage();
}
