/* SPDX-License-Identifier: Apache-2.0 */
/* Sandbox lifecycle, exec and memory against bubblewrap and plain host spawns, side by side in
 * one run (DESIGN.md "Performance budget").  Timings are printed, never asserted.
 *
 *   [create]  create + first `exec true` + remove through libnook, in process, vs a one-shot
 *             `bwrap --unshare-all ... true` (posix_spawn + waitpid), rounds interleaved; also
 *             both on a plain root filesystem directory.  Budget: nook <= 1.5x bwrap (brief
 *             args), <= 2x from a plain rootfs directory.
 *   [exec]    `exec true` in a running sandbox (nook_exec_run), vs posix_spawn("/bin/true") on
 *             the host (the machine's fork/exec floor) and a bwrap one-shot.  Budget: <= 1.5x
 *             the host's spawn.
 *   [memory]  an idle sandbox's supervisor, init and spare exec helper: VmRSS, Pss and Private,
 *             1 s after create and once idle (past the 5 s quiet period after which they give
 *             pages back), and the first exec after that; vs an idle `bwrap ... sleep` tree.
 *             Budget (idle): <= 4 MiB (RSS, every process of the sandbox) and <= 1x the bwrap
 *             processes.
 *   [many]    N concurrent idle sandboxes (default 200): create all, `exec true` in each, count
 *             failures, total time and memory, remove all.  Budget: all up, all answer, no error.
 *
 * State lives in a private NOOK_HOME (mkdtemp under /var/tmp), removed at the end, also after a
 * failure or SIGINT/SIGTERM: every sandbox of that home is removed first.
 *
 * usage: bench-sandbox [--rounds N] [--execs N] [--sandboxes N] [--jobs N]
 *                      [--only create|exec|memory|many] */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"

extern char **environ;

#define MIB (1024.0 * 1024.0)

static struct {
        int rounds, execs, sandboxes, jobs;
        const char *only;
} opt = { .rounds = 20, .execs = 200, .sandboxes = 200, .jobs = 1, .only = NULL };

static nook *g_nook;
static char g_home[PATH_MAX]; /* the private NOOK_HOME */
static char g_ws[PATH_MAX]; /* a scratch workspace for bwrap */
static char g_rootfs[PATH_MAX];
static char g_cli[PATH_MAX]; /* build-bench/src/cli/nook, if found */
static pid_t g_main_pid;
static volatile sig_atomic_t g_stop;
static volatile pid_t g_child; /* a bwrap we spawned and still wait for */
static bool g_have_rootfs;

/* ---- small helpers ------------------------------------------------------------------------- */

/* snprintf that refuses to truncate (paths): a bench with a cut path would measure nonsense. */
__attribute__((format(printf, 3, 4))) static void xsnprintf(char *buf, size_t size, const char *f, ...) {
        va_list ap;
        va_start(ap, f);
        int k = vsnprintf(buf, size, f, ap);
        va_end(ap);
        if (k < 0 || (size_t)k >= size) {
                fprintf(stderr, "bench-sandbox: a path or name is too long\n");
                exit(1);
        }
}

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

/* Sorts v in place. */
static double median(double *v, size_t n) {
        if (n == 0)
                return 0;
        qsort(v, n, sizeof(double), cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The nearest-rank percentile (p in 0..100); sorts v in place. */
static double pctl(double *v, size_t n, double p) {
        if (n == 0)
                return 0;
        qsort(v, n, sizeof(double), cmp_double);
        size_t k = (size_t)((p / 100.0) * (double)n + 0.999999);
        return v[k == 0 ? 0 : k - 1];
}

/* Same-round ratios a[i] / b[i] (rounds where both ran): their median, and a 90 % bootstrap
 * interval of that median (2000 resamples; a fixed seed, so the same data prints the same
 * interval).  Each pair ran within the same few milliseconds, so a VM whose speed drifts between
 * rounds moves both sides of a pair alike: the interval says how sure the verdict is. */
typedef struct {
        double med, lo, hi;
        size_t n;
} paired;

static paired paired_ratio(const double *a, const double *b, size_t n) {
        paired p = { 0 };
        double *r = calloc(n ? n : 1, sizeof(double)), *s = calloc(n ? n : 1, sizeof(double)),
               *meds = calloc(2000, sizeof(double));
        if (!r || !s || !meds) {
                free(r), free(s), free(meds);
                return p;
        }
        for (size_t i = 0; i < n; i++)
                if (a[i] > 0 && b[i] > 0)
                        r[p.n++] = a[i] / b[i];
        if (p.n > 0) {
                uint64_t x = 0x9e3779b97f4a7c15ull;
                for (size_t k = 0; k < 2000; k++) {
                        for (size_t i = 0; i < p.n; i++) {
                                x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
                                s[i] = r[x % p.n];
                        }
                        meds[k] = median(s, p.n);
                }
                p.med = median(r, p.n);
                p.lo = pctl(meds, 2000, 5);
                p.hi = pctl(meds, 2000, 95);
        }
        free(r), free(s), free(meds);
        return p;
}

static const char *paired_verdict(const paired *p, double budget) {
        if (p->n == 0)
                return "no pair ran";
        return p->hi <= budget   ? "within budget"
                : p->lo > budget ? "OVER budget"
                                 : "at the line (the interval spans it)";
}

static void paired_print(const char *what, const paired *p, double budget) {
        printf("  %-36s %5.2fx (90%% interval %.2f-%.2fx, %zu pairs)   budget <= %gx %s\n", what, p->med,
                p->lo, p->hi, p->n, budget, paired_verdict(p, budget));
}

static void *xcalloc(size_t n, size_t sz) {
        void *p = calloc(n ? n : 1, sz);
        if (!p) {
                fprintf(stderr, "bench-sandbox: out of memory\n");
                exit(1);
        }
        return p;
}

static const char *verdict(bool ok) {
        return ok ? "within budget" : "OVER budget";
}

static void on_signal(int sig) {
        if (g_stop) { /* a second signal: give up at once (cleanup may be incomplete) */
                signal(sig, SIG_DFL);
                raise(sig);
        }
        g_stop = sig;
        if (g_child > 0)
                (void)kill(g_child, SIGKILL);
}

static bool stopped(void) {
        if (g_stop)
                fprintf(stderr, "bench-sandbox: interrupted, cleaning up\n");
        return g_stop != 0;
}

/* posix_spawn + waitpid; stdout to /dev/null, stderr kept.  Returns the wait status, -1 if it
 * could not start. */
static int run_cmd(char *const argv[], bool quiet_stderr) {
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int st;

        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        if (quiet_stderr)
                posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0) {
                errno = r;
                return -1;
        }
        g_child = pid;
        while (waitpid(pid, &st, 0) < 0) {
                if (errno != EINTR) {
                        st = -1;
                        break;
                }
        }
        g_child = 0;
        return st;
}

static bool status_ok(int st) {
        return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* ---- cleanup --------------------------------------------------------------------------------- */

static int rm_entry(const char *p, const struct stat *sb, int type, struct FTW *f) {
        (void)sb;
        (void)f;
        if (type == FTW_DP || type == FTW_D)
                (void)rmdir(p);
        else
                (void)unlink(p);
        return 0;
}

static void rm_rf(const char *dir) {
        /* the overlay's work/work is mode 000: open it up first (we are its owner or root) */
        char cmd[PATH_MAX + 32];
        (void)nftw(dir, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        if (access(dir, F_OK) == 0) {
                xsnprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s' 2>/dev/null", dir);
                if (system(cmd) != -1)
                        (void)nftw(dir, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
        }
}

/* Removes every sandbox of the private home (whatever section made it), then the home. */
static void remove_all_sandboxes(void) {
        nook_error err = { 0 };
        char *list = NULL;
        if (!g_nook || nook_sandbox_list(g_nook, NULL, &list, &err) < 0) {
                if (g_nook)
                        fprintf(stderr, "bench-sandbox: cleanup: listing sandboxes: %s\n", err.msg);
                return;
        }
        json_t *a = json_loads(list, 0, NULL);
        nook_free(list);
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v) {
                const char *name = json_string_value(json_object_get(v, "name"));
                if (name && nook_sandbox_remove(g_nook, name, &err) < 0)
                        fprintf(stderr, "bench-sandbox: cleanup: %s\n", err.msg);
        }
        json_decref(a);
}

static void cleanup(void) {
        if (getpid() != g_main_pid)
                return;
        if (g_child > 0)
                (void)kill(g_child, SIGKILL);
        remove_all_sandboxes();
        g_nook = nook_close(g_nook);
        if (g_home[0]) {
                /* the home's runtime folder (on a tmpfs, which $NOOK_HOME/run links to): its
                 * sandboxes' folders went with them, the folder itself goes here */
                char link[PATH_MAX + 8], rt[PATH_MAX];
                xsnprintf(link, sizeof(link), "%s/run", g_home);
                ssize_t k = readlink(link, rt, sizeof(rt) - 1);
                if (k > 0) {
                        rt[k] = 0;
                        rm_rf(rt);
                }
                rm_rf(g_home);
                if (access(g_home, F_OK) == 0)
                        fprintf(stderr, "bench-sandbox: could not remove %s entirely\n", g_home);
                g_home[0] = 0;
        }
}

/* ---- nook helpers ---------------------------------------------------------------------------- */

static void die_nook(const char *what, const nook_error *err) {
        fprintf(stderr, "bench-sandbox: %s: %s\n", what, err->msg);
        exit(1);
}

static int exec_true(nook *n, const char *name, nook_error *err) {
        static const char *const argv[] = { "true", NULL };
        nook_exec_opts o;
        nook_exec_result res;
        nook_exec_opts_init(&o);
        o.argv = argv;
        int r = nook_exec_run(n, name, &o, &res, err);
        if (r < 0)
                return r;
        if (res.exit_code != 0) {
                xsnprintf(err->msg, sizeof(err->msg), "exec true in '%s' exited with %d (%s)", name,
                        res.exit_code, res.reason);
                return -1;
        }
        return 0;
}

static pid_t supervisor_pid(nook *n, const char *name) {
        nook_error err = { 0 };
        char *j = NULL;
        if (nook_sandbox_inspect(n, name, &j, &err) < 0)
                return -1;
        json_t *o = json_loads(j, 0, NULL);
        nook_free(j);
        pid_t pid = (pid_t)json_integer_value(json_object_get(o, "supervisorPid"));
        json_decref(o);
        return pid > 0 ? pid : -1;
}

/* ---- /proc memory ---------------------------------------------------------------------------- */

typedef struct mem {
        double rss, pss, uss; /* bytes: VmRSS, Pss, Private_Clean + Private_Dirty */
} mem;

static long long field_kb(const char *text, const char *key) {
        const char *p = strstr(text, key);
        return p ? atoll(p + strlen(key)) : 0;
}

static bool read_text(const char *path, char *buf, size_t size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        size_t len = 0;
        ssize_t k;
        while (len < size - 1 && (k = read(fd, buf + len, size - 1 - len)) > 0)
                len += (size_t)k;
        close(fd);
        buf[len] = 0;
        return len > 0;
}

static bool proc_mem(pid_t pid, mem *m) {
        char path[64], buf[8192];
        *m = (mem){ 0 };
        xsnprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        if (!read_text(path, buf, sizeof(buf)))
                return false;
        m->rss = (double)field_kb(buf, "\nVmRSS:") * 1024;
        xsnprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
        if (!read_text(path, buf, sizeof(buf)))
                return false;
        m->pss = (double)field_kb(buf, "\nPss:") * 1024;
        m->uss = (double)(field_kb(buf, "\nPrivate_Clean:") + field_kb(buf, "\nPrivate_Dirty:")) * 1024;
        return true;
}

static void proc_comm(pid_t pid, char *buf, size_t size) {
        char path[64];
        xsnprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
        if (!read_text(path, buf, size))
                xsnprintf(buf, size, "?");
        buf[strcspn(buf, "\n")] = 0;
}

/* The children of pid (all its threads' children); returns how many were stored. */
static size_t proc_children(pid_t pid, pid_t *out, size_t max) {
        char path[64], buf[4096];
        size_t n = 0;
        xsnprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
        if (!read_text(path, buf, sizeof(buf)))
                return 0;
        for (char *s = strtok(buf, " \n"); s && n < max; s = strtok(NULL, " \n"))
                out[n++] = (pid_t)atoi(s);
        return n;
}

/* pid and all its descendants, breadth first. */
static size_t proc_tree(pid_t pid, pid_t *out, size_t max) {
        size_t n = 0;
        if (max == 0)
                return 0;
        out[n++] = pid;
        for (size_t i = 0; i < n && n < max; i++)
                n += proc_children(out[i], out + n, max - n);
        return n;
}

static long long meminfo_kb(const char *key) {
        char buf[8192];
        if (!read_text("/proc/meminfo", buf, sizeof(buf)))
                return 0;
        char k[64];
        xsnprintf(k, sizeof(k), "\n%s", key);
        return strncmp(buf, key, strlen(key)) == 0 ? atoll(buf + strlen(key)) : field_kb(buf, k);
}

/* ---- bwrap command lines ----------------------------------------------------------------------- */

typedef struct argvec {
        char *v[160];
        size_t n;
} argvec;

static void av_add(argvec *a, const char *s) {
        if (a->n + 2 < sizeof(a->v) / sizeof(a->v[0]))
                a->v[a->n++] = (char *)s;
        a->v[a->n] = NULL;
}

/* The command line DESIGN.md names, as given in the brief. */
static void bwrap_brief(argvec *a, const char *cmd, const char *arg) {
        a->n = 0;
        static const char *const fixed[] = { "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind",
                "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink",
                "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--bind", NULL };
        for (size_t i = 0; fixed[i]; i++)
                av_add(a, fixed[i]);
        av_add(a, g_ws);
        av_add(a, "/workspace");
        av_add(a, cmd);
        if (arg)
                av_add(a, arg);
}

/* What nook's host image mounts, as far as bwrap can say it: /usr read-only, the host's
 * top-level symlinks, the same /etc entries, /proc, read-only /sys, /dev, tmpfs /tmp, the
 * workspace as cwd, a hostname, no capabilities. */
static void bwrap_mirror(argvec *a) {
        static const char *const tops[] = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };
        static const char *const etc[] = { "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf",
                "/etc/ld.so.conf.d", "/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates.conf",
                "/etc/localtime", "/etc/os-release", "/etc/mime.types", "/etc/protocols", "/etc/services",
                "/etc/debian_version" };
        static char targets[6][PATH_MAX];
        a->n = 0;
        static const char *const head[] = { "bwrap", "--unshare-all", "--die-with-parent", "--hostname",
                "nook", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr", NULL };
        for (size_t i = 0; head[i]; i++)
                av_add(a, head[i]);
        for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++) {
                struct stat st;
                if (lstat(tops[i], &st) < 0)
                        continue;
                if (S_ISLNK(st.st_mode)) {
                        ssize_t k = readlink(tops[i], targets[i], sizeof(targets[i]) - 1);
                        if (k <= 0)
                                continue;
                        targets[i][k] = 0;
                        av_add(a, "--symlink");
                        av_add(a, targets[i]);
                } else {
                        av_add(a, "--ro-bind");
                        av_add(a, tops[i]);
                }
                av_add(a, tops[i]);
        }
        for (size_t i = 0; i < sizeof(etc) / sizeof(etc[0]); i++) {
                av_add(a, "--ro-bind-try");
                av_add(a, etc[i]);
                av_add(a, etc[i]);
        }
        static const char *const tail[] = { "--proc", "/proc", "--ro-bind", "/sys", "/sys", "--dev", "/dev",
                "--tmpfs", "/tmp", "--bind", NULL };
        for (size_t i = 0; tail[i]; i++)
                av_add(a, tail[i]);
        av_add(a, g_ws);
        av_add(a, "/workspace");
        av_add(a, "--chdir");
        av_add(a, "/workspace");
        av_add(a, "true");
}

static void bwrap_rootfs(argvec *a) {
        a->n = 0;
        static const char *const fixed[] = { "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind",
                NULL };
        for (size_t i = 0; fixed[i]; i++)
                av_add(a, fixed[i]);
        av_add(a, g_rootfs);
        av_add(a, "/");
        static const char *const tail[] = { "--proc", "/proc", "--dev", "/dev", "--bind", NULL };
        for (size_t i = 0; tail[i]; i++)
                av_add(a, tail[i]);
        av_add(a, g_ws);
        av_add(a, "/workspace");
        av_add(a, "true");
}

/* ---- a plain root filesystem directory: /usr/bin/true and the libraries it loads ------------- */

static bool copy_file(const char *src, const char *dst) {
        char buf[65536];
        int in = open(src, O_RDONLY | O_CLOEXEC), out = -1;
        bool ok = false;
        struct stat st;
        if (in < 0 || fstat(in, &st) < 0)
                goto done;
        out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, st.st_mode & 07777);
        if (out < 0)
                goto done;
        for (;;) {
                ssize_t k = read(in, buf, sizeof(buf));
                if (k == 0)
                        break;
                if (k < 0 || write(out, buf, (size_t)k) != k)
                        goto done;
        }
        ok = true;
done:
        if (in >= 0)
                close(in);
        if (out >= 0)
                close(out);
        return ok;
}

static bool mkdirs(const char *path) {
        char buf[PATH_MAX];
        xsnprintf(buf, sizeof(buf), "%s", path);
        for (char *s = buf + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = 0;
                (void)mkdir(buf, 0755);
                *s = '/';
        }
        return mkdir(buf, 0755) == 0 || errno == EEXIST;
}

/* rootfs/usr/{bin/true, lib/<multiarch>/libc.so.6, lib64/ld-linux...} with bin, lib, lib64 as
 * symlinks into usr, and empty proc, dev, tmp, workspace: enough to run `true`. */
static bool make_rootfs(void) {
        static const char *const dirs[] = { "usr/bin", "proc", "dev", "tmp", "workspace", "etc", "sys" };
        static const char *const links[][2] = { { "usr/bin", "bin" }, { "usr/lib", "lib" },
                { "usr/lib64", "lib64" } };
        const char *files[] = { "/usr/bin/true", NULL, NULL, NULL };
        char p[PATH_MAX], real[PATH_MAX];
        size_t nf = 1;

        /* the libraries /usr/bin/true needs, from its dynamic section via ldd's list */
        FILE *f = popen("ldd /usr/bin/true 2>/dev/null", "re");
        static char libs[2][PATH_MAX];
        size_t nl = 0;
        if (!f)
                return false;
        char line[PATH_MAX + 64];
        while (fgets(line, sizeof(line), f) && nl < 2) {
                char *s = strchr(line, '/');
                if (!s || strstr(line, "vdso"))
                        continue;
                s[strcspn(s, " \n")] = 0;
                xsnprintf(libs[nl], sizeof(libs[nl]), "%s", s);
                files[nf++] = libs[nl++];
        }
        pclose(f);
        xsnprintf(g_rootfs, sizeof(g_rootfs), "%s/rootfs", g_home);
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                xsnprintf(p, sizeof(p), "%s/%s", g_rootfs, dirs[i]);
                if (!mkdirs(p))
                        return false;
        }
        for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
                xsnprintf(p, sizeof(p), "%s/%s", g_rootfs, links[i][1]);
                if (symlink(links[i][0], p) < 0 && errno != EEXIST)
                        return false;
        }
        xsnprintf(p, sizeof(p), "%s/etc/passwd", g_rootfs);
        FILE *pw = fopen(p, "we");
        if (!pw)
                return false;
        fputs("root:x:0:0:root:/:/bin/true\n", pw);
        fclose(pw);
        for (size_t i = 0; i < nf; i++) {
                /* /lib/x86_64-linux-gnu/libc.so.6 lands in usr/lib/...: the same path inside */
                const char *rel = files[i];
                if (strncmp(rel, "/usr/", 5) != 0) {
                        xsnprintf(real, sizeof(real), "/usr%s", rel);
                        rel = real;
                }
                xsnprintf(p, sizeof(p), "%s%s", g_rootfs, rel);
                char *slash = strrchr(p, '/');
                *slash = 0;
                if (!mkdirs(p))
                        return false;
                *slash = '/';
                if (!copy_file(files[i], p))
                        return false;
        }
        return true;
}

/* ---- [create] -------------------------------------------------------------------------------- */

typedef struct cycle_times {
        double create, exec, remove, total;
} cycle_times;

static bool nook_cycle(const char *name, const char *spec, cycle_times *t, nook_error *err) {
        double t0 = now_ms();
        if (nook_sandbox_create(g_nook, name, spec, 0, err) < 0)
                return false;
        double t1 = now_ms();
        if (exec_true(g_nook, name, err) < 0) {
                nook_error ignore;
                (void)nook_sandbox_remove(g_nook, name, &ignore);
                return false;
        }
        double t2 = now_ms();
        if (nook_sandbox_remove(g_nook, name, err) < 0)
                return false;
        double t3 = now_ms();
        *t = (cycle_times){ .create = t1 - t0, .exec = t2 - t1, .remove = t3 - t2, .total = t3 - t0 };
        return true;
}

static double time_cmd(char *const argv[], int *failures) {
        double t0 = now_ms();
        int st = run_cmd(argv, false);
        double t = now_ms() - t0;
        if (!status_ok(st))
                (*failures)++;
        return t;
}

static void row(const char *what, double *v, size_t n, const char *note) {
        double p90 = pctl(v, n, 90);
        double med = median(v, n);
        printf("  %-50s %9.2f %9.2f  %s\n", what, med, p90, note ? note : "");
}

static int bench_create(void) {
        int n = opt.rounds, fail_nook = 0, fail_bw = 0, fail_mirror = 0, fail_rootfs = 0,
            fail_nook_rootfs = 0;
        double *c = xcalloc((size_t)n, sizeof(double)), *e = xcalloc((size_t)n, sizeof(double));
        double *rm = xcalloc((size_t)n, sizeof(double)), *tot = xcalloc((size_t)n, sizeof(double));
        double *bw = xcalloc((size_t)n, sizeof(double)), *mir = xcalloc((size_t)n, sizeof(double));
        double *rf = xcalloc((size_t)n, sizeof(double)), *nrf = xcalloc((size_t)n, sizeof(double));
        double *nrf_c = xcalloc((size_t)n, sizeof(double));
        argvec a_bw, a_mir, a_rf;
        char rootfs_spec[PATH_MAX + 32];
        nook_error err = { 0 };
        cycle_times t;
        int done = 0;

        bwrap_brief(&a_bw, "true", NULL);
        bwrap_mirror(&a_mir);
        if (g_have_rootfs) {
                bwrap_rootfs(&a_rf);
                xsnprintf(rootfs_spec, sizeof(rootfs_spec), "{\"image\": \"%s\"}", g_rootfs);
        }
        printf("\n[create] create + first `exec true` + remove, vs a one-shot bwrap (N=%d, interleaved)\n",
                n);

        /* warm-up: the host image skeleton is built on first use ("from a cached image"), and
         * the page cache learns bwrap and the supervisor */
        if (!nook_cycle("bench-create", NULL, &t, &err))
                die_nook("warm-up create/exec/remove", &err);
        if (g_have_rootfs && !nook_cycle("bench-create", rootfs_spec, &t, &err)) {
                fprintf(stderr,
                        "bench-sandbox: nook on a plain rootfs dir fails, skipping that variant: %s\n",
                        err.msg);
                g_have_rootfs = false;
        }
        if (!status_ok(run_cmd(a_bw.v, false))) {
                fprintf(stderr,
                        "bench-sandbox: bwrap does not run here (is it installed? user namespaces?)\n");
                return 1;
        }
        (void)run_cmd(a_mir.v, false);
        if (g_have_rootfs)
                (void)run_cmd(a_rf.v, false);

        for (int i = 0; i < n && !stopped(); i++, done++) {
                /* rotate which side goes first, so neither always runs on a warmer cache */
                for (int k = 0; k < 5; k++) {
                        switch ((i + k) % 5) {
                        case 0:
                                if (nook_cycle("bench-create", NULL, &t, &err)) {
                                        c[i] = t.create, e[i] = t.exec, rm[i] = t.remove, tot[i] = t.total;
                                } else {
                                        fprintf(stderr, "bench-sandbox: round %d: %s\n", i, err.msg);
                                        fail_nook++;
                                }
                                break;
                        case 1:
                                bw[i] = time_cmd(a_bw.v, &fail_bw);
                                break;
                        case 2:
                                mir[i] = time_cmd(a_mir.v, &fail_mirror);
                                break;
                        case 3:
                                if (g_have_rootfs)
                                        rf[i] = time_cmd(a_rf.v, &fail_rootfs);
                                break;
                        case 4:
                                if (!g_have_rootfs)
                                        break;
                                if (nook_cycle("bench-create-rootfs", rootfs_spec, &t, &err)) {
                                        nrf[i] = t.total;
                                        nrf_c[i] = t.create;
                                } else {
                                        fprintf(stderr, "bench-sandbox: round %d (rootfs): %s\n", i,
                                                err.msg);
                                        fail_nook_rootfs++;
                                }
                                break;
                        default:
                                break;
                        }
                }
        }
        n = done;
        /* before any row sorts the arrays in place */
        paired p_tot = paired_ratio(tot, bw, (size_t)n), p_rf = paired_ratio(nrf, rf, (size_t)n);
        printf("  %-50s %9s %9s\n", "what (ms)", "median", "p90");
        row("nook host image: create", c, (size_t)n, NULL);
        row("nook host image: first exec true", e, (size_t)n, NULL);
        row("nook host image: remove", rm, (size_t)n, NULL);
        row("nook host image: create + exec + remove", tot, (size_t)n, NULL);
        row("bwrap --unshare-all (DESIGN.md/brief args) true", bw, (size_t)n, NULL);
        row("bwrap mirroring nook's mounts (+/etc, /tmp, /sys)", mir, (size_t)n, NULL);
        double med_tot = median(tot, (size_t)n), med_bw = median(bw, (size_t)n),
               med_mir = median(mir, (size_t)n);
        double med_nrf = 0, med_rf = 0;
        if (g_have_rootfs) {
                row("nook plain rootfs dir: create", nrf_c, (size_t)n, NULL);
                row("nook plain rootfs dir: create + exec + remove", nrf, (size_t)n, NULL);
                row("bwrap --ro-bind ROOTFS / ... true", rf, (size_t)n, NULL);
                med_nrf = median(nrf, (size_t)n);
                med_rf = median(rf, (size_t)n);
        }
        printf("  ratio nook / bwrap (brief args):    %5.2fx   budget <= 1.5x %s\n", med_tot / med_bw,
                verdict(med_tot <= 1.5 * med_bw));
        printf("  ratio nook / bwrap (mirrored):      %5.2fx\n", med_tot / med_mir);
        if (g_have_rootfs)
                printf("  ratio nook / bwrap (rootfs dir):    %5.2fx   budget <= 2x   %s\n",
                        med_nrf / med_rf, verdict(med_nrf <= 2 * med_rf));
        paired_print("same-round ratio (brief args):", &p_tot, 1.5);
        if (g_have_rootfs)
                paired_print("same-round ratio (rootfs dir):", &p_rf, 2);
        int fails = fail_nook + fail_bw + fail_mirror + fail_rootfs + fail_nook_rootfs;
        if (fails)
                printf("  failures: nook %d, nook rootfs %d, bwrap %d, bwrap mirrored %d, bwrap rootfs %d\n",
                        fail_nook, fail_nook_rootfs, fail_bw, fail_mirror, fail_rootfs);
        free(c), free(e), free(rm), free(tot), free(bw), free(mir), free(rf), free(nrf), free(nrf_c);
        return fails ? 1 : 0;
}

/* ---- [exec] ------------------------------------------------------------------------------------ */

/* What init does for one exec, without the sockets: fork a helper, which forks the command, which
 * execvp()s "true" along nook's PATH; the status comes back through a pipe.  The floor of nook's
 * process model on this machine (2 forks + 1 exec, against posix_spawn's vfork + exec). */
static double time_model(int *failures) {
        int pf[2], st = -1;
        double t0 = now_ms();
        if (pipe2(pf, O_CLOEXEC) < 0) {
                (*failures)++;
                return 0;
        }
        pid_t h = fork();
        if (h == 0) {
                pid_t c = fork();
                if (c == 0) {
                        static char *env[] = {
                                (char *)"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                NULL
                        };
                        static char *argv[] = { (char *)"true", NULL };
                        environ = env;
                        execvp(argv[0], argv);
                        _exit(127);
                }
                if (c > 0)
                        while (waitpid(c, &st, 0) < 0 && errno == EINTR)
                                ;
                if (write(pf[1], &st, sizeof(st)) != sizeof(st))
                        _exit(1);
                _exit(0);
        }
        close(pf[1]);
        if (h < 0 || read(pf[0], &st, sizeof(st)) != sizeof(st) || !status_ok(st))
                (*failures)++;
        double t = now_ms() - t0;
        close(pf[0]);
        if (h > 0)
                while (waitpid(h, NULL, 0) < 0 && errno == EINTR)
                        ;
        return t;
}

static int bench_exec(void) {
        int n = opt.execs, fails = 0, host_fail = 0, bw_fail = 0, cli_fail = 0;
        int n_bw = n / 10 < 10 ? 10 : n / 10;
        double *ne = xcalloc((size_t)n, sizeof(double)), *hs = xcalloc((size_t)n, sizeof(double));
        double *mo = xcalloc((size_t)n, sizeof(double));
        int model_fail = 0;
        double *bw = xcalloc((size_t)n_bw, sizeof(double)), *cli = xcalloc((size_t)n_bw, sizeof(double));
        char *const host_true[] = { (char *)"/bin/true", NULL };
        char *cli_argv[] = { g_cli, (char *)"--home", g_home, (char *)"exec", (char *)"bench-exec",
                (char *)"true", NULL };
        argvec a_bw;
        nook_error err = { 0 };
        int done = 0, done_bw = 0;

        bwrap_brief(&a_bw, "true", NULL);
        printf("\n[exec] `exec true` in a running sandbox (N=%d), vs the host's own spawn\n", n);
        if (nook_sandbox_create(g_nook, "bench-exec", NULL, 0, &err) < 0)
                die_nook("create bench-exec", &err);
        for (int i = 0; i < 5; i++) /* warm-up */
                if (exec_true(g_nook, "bench-exec", &err) < 0)
                        die_nook("warm-up exec", &err);
        for (int i = 0; i < n && !stopped(); i++, done++) {
                double t0, t1;
                for (int k = 0; k < 3; k++) {
                        if ((i + k) % 3 == 2) {
                                mo[i] = time_model(&model_fail);
                                continue;
                        }
                        if ((i + k) % 3 == 0) {
                                t0 = now_ms();
                                int r = exec_true(g_nook, "bench-exec", &err);
                                t1 = now_ms();
                                if (r < 0) {
                                        if (fails++ < 3)
                                                fprintf(stderr, "bench-sandbox: exec %d: %s\n", i, err.msg);
                                }
                                ne[i] = t1 - t0;
                        } else
                                hs[i] = time_cmd(host_true, &host_fail);
                }
                if (i % (n / n_bw ? n / n_bw : 1) == 0 && done_bw < n_bw) {
                        bw[done_bw] = time_cmd(a_bw.v, &bw_fail);
                        if (g_cli[0])
                                cli[done_bw] = time_cmd(cli_argv, &cli_fail);
                        done_bw++;
                }
        }
        n = done;
        paired p_exec = paired_ratio(ne, hs, (size_t)n); /* before the rows sort them */
        double ne_med, hs_med, bw_med;
        printf("  %-50s %9s %9s\n", "what (ms)", "median", "p90");
        row("nook_exec_run(true), in process", ne, (size_t)n, "budget <= 1.5x host spawn");
        ne_med = median(ne, (size_t)n);
        row("host posix_spawn(/bin/true) + waitpid", hs, (size_t)n, "the machine's floor");
        hs_med = median(hs, (size_t)n);
        row("model: fork + fork/execvp + pipe (init's work)", mo, (size_t)n, "nook's process floor");
        double mo_med = median(mo, (size_t)n);
        row("bwrap one-shot (brief args) true", bw, (size_t)done_bw, NULL);
        bw_med = median(bw, (size_t)done_bw);
        if (g_cli[0])
                row("CLI: nook exec NAME true (a new process)", cli, (size_t)done_bw, NULL);
        printf("  nook overhead over a host spawn: %+.2f ms (%.2fx the host spawn): %s (budget <= 1.5x)\n",
                ne_med - hs_med, ne_med / hs_med, verdict(ne_med <= 1.5 * hs_med));
        paired_print("same-round ratio nook / host spawn:", &p_exec, 1.5);
        printf("  nook overhead over its process model (sockets, JSON, 3 hops): %+.2f ms\n",
                ne_med - mo_med);
        printf("  nook exec / bwrap one-shot: %.2fx\n", ne_med / bw_med);
        if (fails || host_fail || bw_fail || cli_fail)
                printf("  failures: nook %d, host %d, bwrap %d, cli %d\n", fails, host_fail, bw_fail,
                        cli_fail);
        if (nook_sandbox_remove(g_nook, "bench-exec", &err) < 0)
                fprintf(stderr, "bench-sandbox: remove bench-exec: %s\n", err.msg);
        free(ne), free(hs), free(mo), free(bw), free(cli);
        return fails ? 1 : 0;
}

/* ---- [memory] ---------------------------------------------------------------------------------- */

static void mem_row(const char *what, pid_t pid, const mem *m) {
        char label[128];
        if (pid > 0)
                xsnprintf(label, sizeof(label), "%s (pid %d)", what, (int)pid);
        else
                xsnprintf(label, sizeof(label), "%s", what);
        printf("  %-50s %9.2f %9.2f %9.2f\n", label, m->rss / MIB, m->pss / MIB, m->uss / MIB);
}

static void mem_add(mem *sum, const mem *m) {
        sum->rss += m->rss, sum->pss += m->pss, sum->uss += m->uss;
}

/* The supervisor, init and the spare exec helper give their pages back after 5 s without an event
 * (IDLE_RELEASE_MS in src/util/idlemem.h; docs/design/runtime.md, "Idle memory"): the idle
 * sample is taken well past that. */
#define MEM_IDLE_SAMPLE_S 8

/* One sample of the sandbox's process tree (supervisor first), rows printed; the sum in *sum. */
static size_t nook_tree_mem(pid_t sup, const char *when, mem *sum) {
        pid_t tree[64];
        mem m;
        *sum = (mem){ 0 };
        printf("  %-50s %9s %9s %9s\n", when, "VmRSS", "Pss", "Private");
        size_t nt = proc_tree(sup, tree, 64);
        for (size_t i = 0; i < nt; i++) {
                char comm[64], what[96];
                if (!proc_mem(tree[i], &m))
                        continue;
                proc_comm(tree[i], comm, sizeof(comm));
                xsnprintf(what, sizeof(what), "nook %s %s",
                        i == 0           ? "supervisor"
                                : i == 1 ? "init"
                                : i == 2 ? "spare exec helper"
                                         : "child",
                        comm);
                mem_row(what, tree[i], &m);
                mem_add(sum, &m);
        }
        mem_row("nook sandbox: sum", 0, sum);
        if (nt != 3)
                printf("  (expected 3 processes, supervisor, init and its spare exec helper; found %zu)\n",
                        nt);
        return nt;
}

/* The cost of the first exec after the idle release (its pages fault back in), against the
 * next ones; then the sandbox is removed. */
static void exec_after_release(void) {
        nook_error err = { 0 };
        double t0 = now_ms();
        int r = exec_true(g_nook, "bench-mem", &err);
        double first = now_ms() - t0, warm[5];
        for (size_t i = 0; i < 5 && r >= 0; i++) {
                t0 = now_ms();
                r = exec_true(g_nook, "bench-mem", &err);
                warm[i] = now_ms() - t0;
        }
        if (r < 0)
                printf("  exec after the idle release FAILED: %s\n", err.msg);
        else
                printf("  first exec true after the idle release %.2f ms; the next ones (median of 5) %.2f ms\n",
                        first, median(warm, 5));
}

static int bench_memory(void) {
        nook_error err = { 0 };
        pid_t tree[64];
        mem m, sum = { 0 }, fresh = { 0 }, bw_sum = { 0 }, bw_all = { 0 };
        argvec a;
        int rc = 0;

        printf("\n[memory] an idle sandbox: 1 s after create, and %d s after (idle)\n", MEM_IDLE_SAMPLE_S);
        if (nook_sandbox_create(g_nook, "bench-mem", NULL, 0, &err) < 0)
                die_nook("create bench-mem", &err);
        sleep(1);
        pid_t sup = supervisor_pid(g_nook, "bench-mem");
        if (sup <= 0) {
                fprintf(stderr, "bench-sandbox: no supervisorPid in inspect\n");
                return 1;
        }
        (void)nook_tree_mem(sup, "1 s after create (MiB)", &fresh);
        sleep(MEM_IDLE_SAMPLE_S - 1);
        char when[64];
        xsnprintf(when, sizeof(when), "idle, %d s after create (MiB)", MEM_IDLE_SAMPLE_S);
        (void)nook_tree_mem(sup, when, &sum);
        exec_after_release();
        (void)nook_sandbox_remove(g_nook, "bench-mem", &err);

        /* bwrap: the outer bwrap (monitor), its pid-1 bwrap, and the payload `sleep` */
        bwrap_brief(&a, "sleep", "30");
        posix_spawn_file_actions_t fa;
        pid_t pid;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        int r = posix_spawnp(&pid, "bwrap", &fa, NULL, a.v, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0) {
                fprintf(stderr, "bench-sandbox: cannot run bwrap: %s\n", strerror(r));
                return 1;
        }
        g_child = pid;
        sleep(1);
        size_t nt = proc_tree(pid, tree, 64);
        for (size_t i = 0; i < nt; i++) {
                char comm[64], what[96];
                if (!proc_mem(tree[i], &m))
                        continue;
                proc_comm(tree[i], comm, sizeof(comm));
                xsnprintf(what, sizeof(what), "bwrap tree: %s", comm);
                mem_row(what, tree[i], &m);
                mem_add(&bw_all, &m);
                if (strcmp(comm, "bwrap") == 0)
                        mem_add(&bw_sum, &m);
        }
        (void)kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        g_child = 0;
        mem_row("bwrap processes only (no payload): sum", 0, &bw_sum);
        mem_row("bwrap tree incl. the payload `sleep`: sum", 0, &bw_all);
        printf("  nook 1 s after create: RSS %.2f MiB, Pss %.2f MiB, %.2fx the bwrap processes\n",
                fresh.rss / MIB, fresh.pss / MIB, fresh.rss / bw_sum.rss);
        printf("  nook idle RSS %.2f MiB: %s (budget <= 4 MiB); Pss %.2f MiB\n", sum.rss / MIB,
                verdict(sum.rss <= 4 * MIB), sum.pss / MIB);
        printf("  nook idle / bwrap (RSS, bwrap processes only): %.2fx: %s (budget <= 1x)\n",
                sum.rss / bw_sum.rss, verdict(sum.rss <= bw_sum.rss));
        if (sum.rss > 4 * MIB)
                rc = 0; /* a miss is reported, not an error */
        return rc;
}

/* ---- [many] ---------------------------------------------------------------------------------- */

static long read_long(const char *path) {
        char buf[64];
        return read_text(path, buf, sizeof(buf)) ? atol(buf) : -1;
}

static size_t count_processes(void) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        size_t n = 0;
        if (!d)
                return 0;
        while ((de = readdir(d)))
                if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
                        n++;
        closedir(d);
        return n;
}

/* Can this host hold n more sandboxes (2 processes, one of each namespace, a few MiB each)? */
static bool check_limits(int n) {
        struct rlimit rl;
        bool ok = true;
        long need_procs = 2L * n + 64;
        size_t procs = count_processes();
        long pid_max = read_long("/proc/sys/kernel/pid_max"),
             threads = read_long("/proc/sys/kernel/threads-max");

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                if (rl.rlim_cur < rl.rlim_max && rl.rlim_cur < 4096) {
                        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
                        (void)setrlimit(RLIMIT_NOFILE, &rl);
                }
                printf("  limits: ulimit -n %llu", (unsigned long long)rl.rlim_cur);
                if (rl.rlim_cur < 64) {
                        printf("\n  this host cannot run the test: ulimit -n is below 64\n");
                        ok = false;
                }
        }
        if (getrlimit(RLIMIT_NPROC, &rl) == 0) {
                if (rl.rlim_cur == RLIM_INFINITY)
                        printf(", ulimit -u unlimited");
                else
                        printf(", ulimit -u %llu", (unsigned long long)rl.rlim_cur);
                if (geteuid() != 0 && rl.rlim_cur != RLIM_INFINITY &&
                        (long)rl.rlim_cur < need_procs + (long)procs) {
                        printf("\n  this host cannot run %d sandboxes: ulimit -u %llu < %ld processes needed\n",
                                n, (unsigned long long)rl.rlim_cur, need_procs + (long)procs);
                        ok = false;
                }
        }
        printf(", pid_max %ld, threads-max %ld, %zu processes running\n", pid_max, threads, procs);
        if ((pid_max > 0 && pid_max < need_procs + (long)procs) ||
                (threads > 0 && threads < need_procs + (long)procs)) {
                printf("  this host cannot run %d sandboxes: %ld more processes needed (pid_max %ld, threads-max %ld)\n",
                        n, need_procs, pid_max, threads);
                ok = false;
        }
        static const char *const ns[] = { "user", "mnt", "pid", "net", "uts", "ipc", "cgroup" };
        for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
                char p[96];
                xsnprintf(p, sizeof(p), "/proc/sys/user/max_%s_namespaces", ns[i]);
                long v = read_long(p);
                if (v >= 0 && v < n + 16) {
                        printf("  this host cannot run %d sandboxes: %s = %ld\n", n, p, v);
                        ok = false;
                }
        }
        long long avail = meminfo_kb("MemAvailable:");
        /* a generous 16 MiB per sandbox, kernel objects included */
        if (avail > 0 && avail / 1024 < 16LL * n) {
                printf("  this host cannot run %d sandboxes: MemAvailable %lld MiB < %d MiB (16 MiB each)\n",
                        n, avail / 1024, 16 * n);
                ok = false;
        }
        return ok;
}

static void many_name(char *buf, size_t size, int i) {
        xsnprintf(buf, size, "many-%04d", i);
}

/* Runs fn(i) for i in [0, n) on opt.jobs processes (each with its own nook handle); returns the
 * number of failures.  Children only exit with _exit: the cleanup belongs to the parent. */
typedef int (*many_fn)(nook *n, int i, nook_error *err);

static int run_jobs(many_fn fn, int n, const char *what) {
        int jobs = opt.jobs < 1 ? 1 : opt.jobs, fails = 0;
        if (jobs == 1) {
                nook_error err = { 0 };
                for (int i = 0; i < n && !g_stop; i++)
                        if (fn(g_nook, i, &err) < 0 && fails++ < 3)
                                fprintf(stderr, "bench-sandbox: %s %d: %s\n", what, i, err.msg);
                return fails + (g_stop ? 1 : 0);
        }
        pid_t *pids = xcalloc((size_t)jobs, sizeof(pid_t));
        fflush(NULL);
        for (int j = 0; j < jobs; j++) {
                pids[j] = fork();
                if (pids[j] < 0) {
                        fails++;
                        continue;
                }
                if (pids[j] == 0) {
                        nook *nh = NULL;
                        nook_error err = { 0 };
                        int f = 0;
                        if (nook_open(g_home, &nh, &err) < 0)
                                _exit(255);
                        for (int i = j; i < n && !g_stop; i += jobs)
                                if (fn(nh, i, &err) < 0 && f++ < 3)
                                        fprintf(stderr, "bench-sandbox: %s %d: %s\n", what, i, err.msg);
                        nook_close(nh);
                        _exit(f > 254 ? 254 : f);
                }
        }
        for (int j = 0; j < jobs; j++) {
                int st;
                if (pids[j] <= 0)
                        continue;
                while (waitpid(pids[j], &st, 0) < 0 && errno == EINTR)
                        ;
                fails += WIFEXITED(st) ? WEXITSTATUS(st) : 1;
        }
        free(pids);
        return fails;
}

static int many_create(nook *n, int i, nook_error *err) {
        char name[32];
        many_name(name, sizeof(name), i);
        return nook_sandbox_create(n, name, NULL, 0, err);
}

static int many_exec(nook *n, int i, nook_error *err) {
        char name[32];
        many_name(name, sizeof(name), i);
        return exec_true(n, name, err);
}

static int many_remove(nook *n, int i, nook_error *err) {
        char name[32];
        many_name(name, sizeof(name), i);
        return nook_sandbox_remove(n, name, err);
}

/* The memory of every running sandbox's processes, summed; how many sandboxes and processes. */
static void many_mem(int n, mem *sum, size_t *ret_up, size_t *ret_procs) {
        mem m;
        *sum = (mem){ 0 };
        *ret_up = *ret_procs = 0;
        for (int i = 0; i < n; i++) {
                char name[32];
                pid_t tree[16];
                many_name(name, sizeof(name), i);
                pid_t sup = supervisor_pid(g_nook, name);
                if (sup <= 0)
                        continue;
                (*ret_up)++;
                size_t nt = proc_tree(sup, tree, 16);
                for (size_t k = 0; k < nt; k++)
                        if (proc_mem(tree[k], &m)) {
                                mem_add(sum, &m);
                                (*ret_procs)++;
                        }
        }
}

static void many_mem_rows(const char *when, const mem *sum, size_t up, long long avail_drop_kb, int n) {
        char what[96];
        xsnprintf(what, sizeof(what), "sum of Pss, %s", when);
        printf("  %-50s %9.1f MiB  (%.2f MiB each)\n", what, sum->pss / MIB,
                up ? sum->pss / MIB / (double)up : 0);
        xsnprintf(what, sizeof(what), "sum of VmRSS (shared pages N times), %s", when);
        printf("  %-50s %9.1f MiB  (%.2f MiB each)\n", what, sum->rss / MIB,
                up ? sum->rss / MIB / (double)up : 0);
        if (avail_drop_kb == LLONG_MIN)
                return;
        xsnprintf(what, sizeof(what), "MemAvailable drop (incl. kernel), %s", when);
        printf("  %-50s %9.1f MiB  (%.2f MiB each)\n", what, (double)avail_drop_kb / 1024,
                (double)avail_drop_kb / 1024 / n);
}

static int bench_many(void) {
        int n = opt.sandboxes, rc = 0;
        mem sum, idle;
        size_t procs = 0, up = 0, idle_up = 0, idle_procs = 0;

        printf("\n[many] %d concurrent idle sandboxes (%d job%s)\n", n, opt.jobs, opt.jobs == 1 ? "" : "s");
        if (!check_limits(n)) {
                printf("  SKIPPED: lower --sandboxes, or raise the limits above\n");
                return 1;
        }
        long long avail0 = meminfo_kb("MemAvailable:");
        double t0 = now_ms();
        int create_fail = run_jobs(many_create, n, "create");
        double t1 = now_ms();
        sleep(1); /* let them settle */
        long long avail1 = meminfo_kb("MemAvailable:");
        /* idle: past the quiet period after which each process gives pages back */
        sleep(MEM_IDLE_SAMPLE_S - 1);
        long long avail2 = meminfo_kb("MemAvailable:");
        many_mem(n, &idle, &idle_up, &idle_procs);
        double t2 = now_ms();
        int exec_fail = run_jobs(many_exec, n, "exec");
        double t3 = now_ms();
        many_mem(n, &sum, &up, &procs);
        double t4 = now_ms();
        int rm_fail = run_jobs(many_remove, n, "remove");
        double t5 = now_ms();

        printf("  %-50s %12s\n", "what", "value");
        printf("  %-50s %9.0f ms  (%.1f ms each)\n", "create all", t1 - t0, (t1 - t0) / n);
        printf("  %-50s %9.0f ms  (%.2f ms each)\n", "exec true in every one", t3 - t2, (t3 - t2) / n);
        printf("  %-50s %9.0f ms  (%.1f ms each)\n", "remove all", t5 - t4, (t5 - t4) / n);
        printf("  %-50s %9zu / %d  (%zu processes)\n", "running after create (have a supervisor)", up, n,
                procs);
        printf("  %-50s %9d / %d / %d\n", "failures: create / exec / remove", create_fail, exec_fail,
                rm_fail);
        printf("  %-50s %9.1f MiB  (%.2f MiB each)\n", "MemAvailable drop (incl. kernel: mounts, ns), 1 s",
                (double)(avail0 - avail1) / 1024, (double)(avail0 - avail1) / 1024 / n);
        char when[64];
        xsnprintf(when, sizeof(when), "idle (%d s)", MEM_IDLE_SAMPLE_S);
        many_mem_rows(when, &idle, idle_up, avail0 - avail2, n);
        many_mem_rows("after the execs", &sum, up, LLONG_MIN, n);
        bool ok = create_fail == 0 && exec_fail == 0 && rm_fail == 0 && up == (size_t)n;
        printf("  all %d up, all answering exec, no error: %s\n", n,
                ok ? "yes (within budget)" : "NO (OVER budget)");
        if (!ok)
                rc = 1;
        return rc;
}

/* ---- main -------------------------------------------------------------------------------------- */

static int usage(void) {
        fprintf(stderr,
                "usage: bench-sandbox [--rounds N] [--execs N] [--sandboxes N] [--jobs N]\n"
                "                     [--only create|exec|memory|many]\n");
        return 2;
}

static bool parse_int(const char *s, int *ret) {
        char *end;
        long v = s ? strtol(s, &end, 10) : 0;
        if (!s || *end || v < 1 || v > 100000)
                return false;
        *ret = (int)v;
        return true;
}

static void find_cli(void) {
        char self[PATH_MAX];
        ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (k <= 0)
                return;
        self[k] = 0;
        char *slash = strrchr(self, '/');
        if (!slash)
                return;
        *slash = 0;
        xsnprintf(g_cli, sizeof(g_cli), "%s/../src/cli/nook", self);
        if (access(g_cli, X_OK) < 0)
                g_cli[0] = 0;
}

int main(int argc, char **argv) {
        nook_error err = { 0 };
        struct utsname u;
        int rc = 0;

        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (strcmp(a, "--rounds") == 0 && parse_int(v, &opt.rounds))
                        i++;
                else if (strcmp(a, "--execs") == 0 && parse_int(v, &opt.execs))
                        i++;
                else if (strcmp(a, "--sandboxes") == 0 && parse_int(v, &opt.sandboxes))
                        i++;
                else if (strcmp(a, "--jobs") == 0 && parse_int(v, &opt.jobs))
                        i++;
                else if (strcmp(a, "--only") == 0 && v &&
                        (strcmp(v, "create") == 0 || strcmp(v, "exec") == 0 || strcmp(v, "memory") == 0 ||
                                strcmp(v, "many") == 0)) {
                        opt.only = v;
                        i++;
                } else
                        return usage();
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        g_main_pid = getpid();
        struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: waits see EINTR */
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);

        xsnprintf(g_home, sizeof(g_home), "/var/tmp/nook-bench.XXXXXX");
        if (!mkdtemp(g_home)) {
                perror("bench-sandbox: mkdtemp under /var/tmp");
                return 1;
        }
        atexit(cleanup);
        xsnprintf(g_ws, sizeof(g_ws), "%s/bwrap-ws", g_home);
        if (mkdir(g_ws, 0755) < 0) {
                perror("bench-sandbox: mkdir");
                return 1;
        }
        if (nook_open(g_home, &g_nook, &err) < 0)
                die_nook("nook_open", &err);
        g_have_rootfs = make_rootfs();
        find_cli();

        time_t now = time(NULL);
        char date[64];
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M", localtime(&now));
        uname(&u);
        printf("bench-sandbox: nook %s, %s, Linux %s, %d CPUs, %s (uid %d), NOOK_HOME %s\n", nook_version(),
                date, u.release, get_nprocs(), geteuid() == 0 ? "rootful" : "rootless", (int)geteuid(),
                g_home);

        bool all = !opt.only;
        if ((all || strcmp(opt.only, "create") == 0) && !g_stop)
                rc |= bench_create();
        if ((all || strcmp(opt.only, "exec") == 0) && !g_stop)
                rc |= bench_exec();
        if ((all || strcmp(opt.only, "memory") == 0) && !g_stop)
                rc |= bench_memory();
        if ((all || strcmp(opt.only, "many") == 0) && !g_stop)
                rc |= bench_many();
        if (g_stop)
                rc = 130;
        return rc; /* cleanup() runs at exit */
}
