/* SPDX-License-Identifier: Apache-2.0 */
/* nook-oci: the OCI runtime command line, as runc implements it, over libnook's isolation code
 * (src/isolate/).  Global options come before the command: --root, --log, --log-format,
 * --debug, --systemd-cgroup (refused), --rootless. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "nook.h"
#include "oci/container.h"
#include "oci/seccomp.h"
#include "oci/spec.h"
#include "oci/state.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/parse.h"
#include "util/proc.h"
#include "util/str.h"

static const char *arg_root;
static const char *arg_log;
static bool arg_log_json;
static bool arg_debug;

typedef int (*cmd_fn)(int argc, char **argv, nook_error *err);

static void log_line(const char *level, const char *msg) {
        if (!arg_log)
                return;
        FILE *f = fopen(arg_log, "ae");
        if (!f)
                return;
        char t[64];
        struct timespec ts;
        struct tm tm;
        (void)clock_gettime(CLOCK_REALTIME, &ts);
        (void)gmtime_r(&ts.tv_sec, &tm);
        (void)strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (arg_log_json) {
                json_t *j = json_pack("{s:s, s:s, s:s}", "level", level, "msg", msg, "time", t);
                char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
                if (s)
                        (void)fprintf(f, "%s\n", s);
                free(s);
                json_decref(j);
        } else
                (void)fprintf(f, "time=\"%s\" level=%s msg=\"%s\"\n", t, level, msg);
        fclose(f);
}

static int fail(const nook_error *err) {
        (void)fprintf(stderr, "nook-oci: %s\n", err->msg);
        log_line("error", err->msg);
        return 1;
}

static int usage_error(nook_error *err, const char *cmd, const char *what) {
        return nook_err_set(err, NOOK_E_INVALID, "%s: %s (see 'nook-oci %s --help')", cmd, what, cmd);
}

static int need_args(int argc, int want, const char *cmd, const char *usage, nook_error *err) {
        if (argc - optind == want)
                return 0;
        return nook_err_set(
                err, NOOK_E_INVALID, "'%s' takes %s, got %d argument(s)", cmd, usage, argc - optind);
}

/* ---- create, run, start ---- */

enum {
        OPT_BUNDLE = 1000,
        OPT_PID_FILE,
        OPT_CONSOLE,
        OPT_NO_PIVOT,
        OPT_NO_KEYRING,
        OPT_DETACH,
        OPT_PRESERVE_FDS,
        OPT_NO_SUBREAPER
};

static const struct option create_opts[] = {
        { "bundle", required_argument, NULL, 'b' },
        { "pid-file", required_argument, NULL, OPT_PID_FILE },
        { "console-socket", required_argument, NULL, OPT_CONSOLE },
        { "no-pivot", no_argument, NULL, OPT_NO_PIVOT },
        { "no-new-keyring", no_argument, NULL, OPT_NO_KEYRING },
        { "detach", no_argument, NULL, 'd' },
        { "preserve-fds", required_argument, NULL, OPT_PRESERVE_FDS },
        { "no-subreaper", no_argument, NULL, OPT_NO_SUBREAPER },
        { "help", no_argument, NULL, 'h' },
        {},
};

static int parse_preserve(const char *s, unsigned *ret, nook_error *err) {
        char *end = NULL;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || !end || *end || v > 1024)
                return nook_err_set(
                        err, NOOK_E_INVALID, "--preserve-fds '%s' is not a number of fds (0..1024)", s);
        *ret = (unsigned)v;
        return 0;
}

static int parse_create(
        int argc, char **argv, const char *cmd, oci_create_opts *o, bool *detach, nook_error *err) {
        int c;
        o->bundle = ".";
        while ((c = getopt_long(argc, argv, "b:dh", create_opts, NULL)) >= 0)
                switch (c) {
                case 'b':
                        o->bundle = optarg;
                        break;
                case OPT_PID_FILE:
                        o->pid_file = optarg;
                        break;
                case OPT_CONSOLE:
                        o->console_socket = optarg;
                        break;
                case OPT_NO_PIVOT:
                        o->no_pivot = true;
                        break;
                case 'd':
                        *detach = true;
                        break;
                case OPT_PRESERVE_FDS:
                        if (parse_preserve(optarg, &o->preserve_fds, err) < 0)
                                return -NOOK_E_INVALID;
                        break;
                case OPT_NO_KEYRING:
                case OPT_NO_SUBREAPER:
                        break; /* no session keyring is joined anyway; nook-oci is never a subreaper */
                case 'h':
                        (void)printf(
                                "Usage: nook-oci %s [--bundle DIR] [--pid-file F] [--console-socket S] [--no-pivot]\n"
                                "       [--preserve-fds N] ID\n",
                                cmd);
                        exit(0);
                default:
                        return usage_error(err, cmd, "unknown option");
                }
        int r = need_args(argc, 1, cmd, "one container id", err);
        if (r < 0)
                return r;
        o->id = argv[optind];
        o->root = arg_root;
        return 0;
}

static int cmd_create(int argc, char **argv, nook_error *err) {
        oci_create_opts o = { 0 };
        bool detach = false;
        pid_t pid = 0;
        int r = parse_create(argc, argv, "create", &o, &detach, err);
        if (r < 0)
                return r;
        return oci_create(&o, &pid, err);
}

/* run in the foreground: the signals a terminal or a supervisor sends (kill, ^C) go to the
 * container's process, as runc's run forwards them; the container decides whether to exit.
 * Returns once that process has exited (it is then reaped by the caller). */
static void forward_until_exit(pid_t pid) {
        static const int fwd[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH };
        sigset_t set;
        sigemptyset(&set);
        for (size_t i = 0; i < ELEMENTSOF(fwd); i++)
                sigaddset(&set, fwd[i]);
        (void)sigprocmask(SIG_BLOCK, &set, NULL);
        _cleanup_close_ int sfd = signalfd(-1, &set, SFD_CLOEXEC);
        _cleanup_close_ int pfd = pidfd_open_(pid);
        if (sfd < 0 || pfd < 0)
                return; /* they stay blocked: the container decides, as before */
        for (;;) {
                struct pollfd p[2] = { { .fd = pfd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
                if (poll(p, 2, -1) < 0 && errno != EINTR)
                        return;
                if (p[0].revents)
                        return;
                struct signalfd_siginfo si;
                if ((p[1].revents & POLLIN) && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                        (void)pidfd_send_signal_(pfd, (int)si.ssi_signo);
        }
}

static int cmd_run(int argc, char **argv, nook_error *err) {
        oci_create_opts o = { 0 };
        bool detach = false;
        pid_t pid = 0;
        int status = 0;
        int r = parse_create(argc, argv, "run", &o, &detach, err);
        if (r < 0)
                return r;
        r = oci_create(&o, &pid, err);
        if (r < 0)
                return r;
        r = oci_start(arg_root, o.id, err);
        if (r < 0 || detach) {
                if (r < 0)
                        (void)oci_delete(arg_root, o.id, true, &(nook_error){ 0 });
                return r;
        }
        forward_until_exit(pid);
        r = pid_wait(pid, &status);
        (void)oci_delete(arg_root, o.id, true, &(nook_error){ 0 });
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot wait for the container");
        return proc_status_code(status);
}

static int simple_opts(int argc, char **argv, const char *cmd, const char *usage, nook_error *err) {
        static const struct option o[] = { { "help", no_argument, NULL, 'h' }, {} };
        int c;
        while ((c = getopt_long(argc, argv, "h", o, NULL)) >= 0) {
                if (c == 'h') {
                        (void)printf("Usage: nook-oci %s %s\n", cmd, usage);
                        exit(0);
                }
                return usage_error(err, cmd, "unknown option");
        }
        return need_args(argc, 1, cmd, usage, err);
}

static int cmd_start(int argc, char **argv, nook_error *err) {
        int r = simple_opts(argc, argv, "start", "ID", err);
        return r < 0 ? r : oci_start(arg_root, argv[optind], err);
}

static int cmd_state(int argc, char **argv, nook_error *err) {
        int r = simple_opts(argc, argv, "state", "ID", err);
        return r < 0 ? r : oci_state_print(arg_root, argv[optind], err);
}

static int cmd_pause(int argc, char **argv, nook_error *err) {
        int r = simple_opts(argc, argv, "pause", "ID", err);
        return r < 0 ? r : oci_pause(arg_root, argv[optind], true, err);
}

static int cmd_resume(int argc, char **argv, nook_error *err) {
        int r = simple_opts(argc, argv, "resume", "ID", err);
        return r < 0 ? r : oci_pause(arg_root, argv[optind], false, err);
}

static int cmd_kill(int argc, char **argv, nook_error *err) {
        static const struct option o[] = { { "all", no_argument, NULL, 'a' },
                { "help", no_argument, NULL, 'h' }, {} };
        bool all = false;
        int c, sig = SIGTERM;
        while ((c = getopt_long(argc, argv, "ah", o, NULL)) >= 0) {
                if (c == 'a')
                        all = true;
                else if (c == 'h') {
                        (void)printf("Usage: nook-oci kill [--all] ID [SIGNAL]\n");
                        exit(0);
                } else
                        return usage_error(err, "kill", "unknown option");
        }
        if (argc - optind < 1 || argc - optind > 2)
                return usage_error(err, "kill", "give ID [SIGNAL]");
        if (argc - optind == 2 && parse_signal(argv[optind + 1], &sig, err) < 0)
                return nook_err_wrap(err, "kill");
        return oci_kill(arg_root, argv[optind], sig, all, err);
}

static int cmd_delete(int argc, char **argv, nook_error *err) {
        static const struct option o[] = { { "force", no_argument, NULL, 'f' },
                { "help", no_argument, NULL, 'h' }, {} };
        bool force = false;
        int c;
        while ((c = getopt_long(argc, argv, "fh", o, NULL)) >= 0) {
                if (c == 'f')
                        force = true;
                else if (c == 'h') {
                        (void)printf("Usage: nook-oci delete [--force] ID\n");
                        exit(0);
                } else
                        return usage_error(err, "delete", "unknown option");
        }
        int r = need_args(argc, 1, "delete", "one container id", err);
        return r < 0 ? r : oci_delete(arg_root, argv[optind], force, err);
}

static int cmd_list(int argc, char **argv, nook_error *err) {
        static const struct option o[] = { { "format", required_argument, NULL, 'f' },
                { "quiet", no_argument, NULL, 'q' }, { "help", no_argument, NULL, 'h' }, {} };
        bool json = false, quiet = false;
        int c;
        while ((c = getopt_long(argc, argv, "f:qh", o, NULL)) >= 0) {
                if (c == 'f' && (streq(optarg, "json") || streq(optarg, "table")))
                        json = streq(optarg, "json");
                else if (c == 'q')
                        quiet = true;
                else if (c == 'h') {
                        (void)printf("Usage: nook-oci list [--format table|json] [--quiet]\n");
                        exit(0);
                } else
                        return usage_error(err, "list", "unknown option or --format (table or json)");
        }
        return oci_list(arg_root, json, quiet, err);
}

static int cmd_ps(int argc, char **argv, nook_error *err) {
        static const struct option o[] = { { "format", required_argument, NULL, 'f' },
                { "help", no_argument, NULL, 'h' }, {} };
        bool json = false;
        int c;
        while ((c = getopt_long(argc, argv, "+f:h", o, NULL)) >= 0) {
                if (c == 'f' && (streq(optarg, "json") || streq(optarg, "table")))
                        json = streq(optarg, "json");
                else if (c == 'h') {
                        (void)printf("Usage: nook-oci ps [--format table|json] ID [PS-OPTION...]\n");
                        exit(0);
                } else
                        return usage_error(err, "ps", "unknown option or --format (table or json)");
        }
        if (argc - optind < 1)
                return usage_error(err, "ps", "give the container id");
        /* what follows the id goes to ps(1), as with runc; a "--" first is dropped (runc 1.1.5
         * hands it to ps, which refuses it) */
        char **ps_args = argv + optind + 1;
        if (ps_args[0] && streq(ps_args[0], "--"))
                ps_args++;
        return oci_ps(arg_root, argv[optind], json, ps_args, err);
}

static int cmd_update(int argc, char **argv, nook_error *err) {
        enum { O_MEM = 2000, O_SWAP, O_QUOTA, O_PERIOD, O_SHARES, O_PIDS, O_CPUS, O_IGNORED };
        static const struct option o[] = {
                { "resources", required_argument, NULL, 'r' },
                { "memory", required_argument, NULL, O_MEM },
                { "memory-swap", required_argument, NULL, O_SWAP },
                { "cpu-quota", required_argument, NULL, O_QUOTA },
                { "cpu-period", required_argument, NULL, O_PERIOD },
                { "cpu-share", required_argument, NULL, O_SHARES },
                { "pids-limit", required_argument, NULL, O_PIDS },
                { "cpuset-cpus", required_argument, NULL, O_CPUS },
                { "memory-reservation", required_argument, NULL, O_IGNORED },
                { "blkio-weight", required_argument, NULL, O_IGNORED },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        oci_update_opts u = { 0 };
        int c;
        while ((c = getopt_long(argc, argv, "r:h", o, NULL)) >= 0)
                switch (c) {
                case 'r':
                        u.resources_file = optarg;
                        break;
                case O_MEM:
                        u.memory = optarg;
                        break;
                case O_SWAP:
                        u.memory_swap = optarg;
                        break;
                case O_QUOTA:
                        u.cpu_quota = optarg;
                        break;
                case O_PERIOD:
                        u.cpu_period = optarg;
                        break;
                case O_SHARES:
                        u.cpu_shares = optarg;
                        break;
                case O_PIDS:
                        u.pids_limit = optarg;
                        break;
                case O_CPUS:
                        u.cpuset_cpus = optarg;
                        break;
                case O_IGNORED:
                        break;
                case 'h':
                        (void)printf(
                                "Usage: nook-oci update [--resources FILE|-] [--memory N] [--memory-swap N] [--cpu-quota N]\n"
                                "       [--cpu-period N] [--cpu-share N] [--pids-limit N] [--cpuset-cpus LIST] ID\n");
                        exit(0);
                default:
                        return usage_error(err, "update", "unknown option");
                }
        int r = need_args(argc, 1, "update", "one container id", err);
        return r < 0 ? r : oci_update(arg_root, argv[optind], &u, err);
}

static int cmd_exec(int argc, char **argv, nook_error *err) {
        enum { O_PROCESS = 3000, O_PIDFILE, O_CONSOLE, O_CWD, O_IGNORED, O_IGNORED_ARG, O_PRESERVE };
        static const struct option o[] = {
                { "process", required_argument, NULL, 'p' },
                { "detach", no_argument, NULL, 'd' },
                { "pid-file", required_argument, NULL, O_PIDFILE },
                { "console-socket", required_argument, NULL, O_CONSOLE },
                { "tty", no_argument, NULL, 't' },
                { "cwd", required_argument, NULL, O_CWD },
                { "env", required_argument, NULL, 'e' },
                { "user", required_argument, NULL, 'u' },
                { "preserve-fds", required_argument, NULL, O_PRESERVE },
                { "no-subreaper", no_argument, NULL, O_IGNORED },
                { "process-label", required_argument, NULL, O_IGNORED_ARG },
                { "apparmor", required_argument, NULL, O_IGNORED_ARG },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        oci_exec_opts x = { .root = arg_root };
        _cleanup_strv_free_ char **env = NULL;
        int c, status = 0;
        while ((c = getopt_long(argc, argv, "+p:dte:u:h", o, NULL)) >= 0)
                switch (c) {
                case 'p':
                        x.process_file = optarg;
                        break;
                case 'd':
                        x.detach = true;
                        break;
                case O_PIDFILE:
                        x.pid_file = optarg;
                        break;
                case O_CONSOLE:
                        x.console_socket = optarg;
                        break;
                case 't':
                        x.tty = true;
                        break;
                case O_CWD:
                        x.cwd = optarg;
                        break;
                case 'e':
                        if (strv_push(&env, optarg) < 0)
                                return nook_err_oom(err);
                        break;
                case 'u':
                        x.user = optarg;
                        break;
                case O_IGNORED:
                case O_IGNORED_ARG:
                        break;
                case O_PRESERVE:
                        if (parse_preserve(optarg, &x.preserve_fds, err) < 0)
                                return -NOOK_E_INVALID;
                        break;
                case 'h':
                        (void)printf(
                                "Usage: nook-oci exec [--process FILE] [--detach] [--pid-file F] [--console-socket S]\n"
                                "       [--tty] [--cwd DIR] [--env K=V]... [--user UID[:GID]] [--preserve-fds N]\n"
                                "       ID [COMMAND [ARG...]]\n");
                        exit(0);
                default:
                        return usage_error(err, "exec", "unknown option");
                }
        if (argc - optind < 1)
                return usage_error(err, "exec", "give the container id");
        x.id = argv[optind];
        x.args = argv + optind + 1;
        x.env = env;
        int r = oci_exec(&x, &status, err);
        return r < 0 ? r : status;
}

/* ---- spec, features ---- */

static const char default_spec[] =
        "{\n"
        "  \"ociVersion\": \"1.0.2\",\n"
        "  \"process\": {\n"
        "    \"terminal\": true,\n"
        "    \"user\": { \"uid\": 0, \"gid\": 0 },\n"
        "    \"args\": [ \"sh\" ],\n"
        "    \"env\": [ \"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\", \"TERM=xterm\" ],\n"
        "    \"cwd\": \"/\",\n"
        "    \"capabilities\": {\n"
        "      \"bounding\": [ \"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\" ],\n"
        "      \"effective\": [ \"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\" ],\n"
        "      \"permitted\": [ \"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\" ],\n"
        "      \"ambient\": [ \"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\" ]\n"
        "    },\n"
        "    \"rlimits\": [ { \"type\": \"RLIMIT_NOFILE\", \"hard\": 1024, \"soft\": 1024 } ],\n"
        "    \"noNewPrivileges\": true\n"
        "  },\n"
        "  \"root\": { \"path\": \"rootfs\", \"readonly\": true },\n"
        "  \"hostname\": \"nook\",\n"
        "  \"mounts\": [\n"
        "    { \"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\" },\n"
        "    { \"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\", \"options\": [ \"nosuid\", \"strictatime\", \"mode=755\", \"size=65536k\" ] },\n"
        "    { \"destination\": \"/dev/pts\", \"type\": \"devpts\", \"source\": \"devpts\", \"options\": [ \"nosuid\", \"noexec\", \"newinstance\", \"ptmxmode=0666\", \"mode=0620\" ] },\n"
        "    { \"destination\": \"/dev/shm\", \"type\": \"tmpfs\", \"source\": \"shm\", \"options\": [ \"nosuid\", \"noexec\", \"nodev\", \"mode=1777\", \"size=65536k\" ] },\n"
        "    { \"destination\": \"/dev/mqueue\", \"type\": \"mqueue\", \"source\": \"mqueue\", \"options\": [ \"nosuid\", \"noexec\", \"nodev\" ] },\n"
        "    { \"destination\": \"/sys\", \"type\": \"sysfs\", \"source\": \"sysfs\", \"options\": [ \"nosuid\", \"noexec\", \"nodev\", \"ro\" ] },\n"
        "    { \"destination\": \"/sys/fs/cgroup\", \"type\": \"cgroup\", \"source\": \"cgroup\", \"options\": [ \"nosuid\", \"noexec\", \"nodev\", \"relatime\", \"ro\" ] }\n"
        "  ],\n"
        "  \"linux\": {\n"
        "    \"resources\": { \"devices\": [ { \"allow\": false, \"access\": \"rwm\" } ] },\n"
        "    \"namespaces\": [ { \"type\": \"pid\" }, { \"type\": \"network\" }, { \"type\": \"ipc\" }, { \"type\": \"uts\" }, { \"type\": \"mount\" }, { \"type\": \"cgroup\" } ],\n"
        "    \"maskedPaths\": [ \"/proc/acpi\", \"/proc/asound\", \"/proc/kcore\", \"/proc/keys\", \"/proc/latency_stats\", \"/proc/timer_list\", \"/proc/timer_stats\", \"/proc/sched_debug\", \"/sys/firmware\", \"/proc/scsi\" ],\n"
        "    \"readonlyPaths\": [ \"/proc/bus\", \"/proc/fs\", \"/proc/irq\", \"/proc/sys\", \"/proc/sysrq-trigger\" ]\n"
        "  }\n"
        "}\n";

static int cmd_spec(int argc, char **argv, nook_error *err) {
        static const struct option o[] = { { "bundle", required_argument, NULL, 'b' },
                { "rootless", no_argument, NULL, 'r' }, { "help", no_argument, NULL, 'h' }, {} };
        const char *bundle = ".";
        int c;
        while ((c = getopt_long(argc, argv, "b:h", o, NULL)) >= 0) {
                if (c == 'b')
                        bundle = optarg;
                else if (c == 'r')
                        continue;
                else if (c == 'h') {
                        (void)printf("Usage: nook-oci spec [--bundle DIR]   (writes DIR/config.json)\n");
                        exit(0);
                } else
                        return usage_error(err, "spec", "unknown option");
        }
        _cleanup_free_ char *path = strprintf("%s/config.json", bundle);
        if (!path)
                return nook_err_oom(err);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
                return nook_err_errno(err, errno == EEXIST ? NOOK_E_EXISTS : NOOK_E_IO,
                        "Cannot create '%s'%s", path, errno == EEXIST ? ": it exists already" : "");
        ssize_t n = write(fd, default_spec, strlen(default_spec));
        safe_close(fd);
        if (n != (ssize_t)strlen(default_spec))
                return nook_err_errno(err, NOOK_E_IO, "Cannot write '%s'", path);
        return 0;
}

/* What does not depend on this host; capabilities, seccomp architectures and libseccomp's
 * version are filled in by cmd_features. */
static const char features_base[] =
        "{\"ociVersionMin\":\"1.0.0\",\"ociVersionMax\":\"1.1.0\","
        "\"hooks\":[\"prestart\",\"createRuntime\",\"createContainer\",\"startContainer\",\"poststart\",\"poststop\"],"
        "\"mountOptions\":[\"async\",\"atime\",\"bind\",\"dev\",\"diratime\",\"dirsync\",\"exec\",\"mand\",\"noatime\","
        "\"nodev\",\"nodiratime\",\"noexec\",\"nomand\",\"norelatime\",\"nostrictatime\",\"nosuid\",\"private\",\"rbind\","
        "\"relatime\",\"remount\",\"ro\",\"rprivate\",\"rshared\",\"rslave\",\"runbindable\",\"rw\",\"shared\",\"slave\","
        "\"strictatime\",\"suid\",\"sync\",\"unbindable\"],"
        "\"linux\":{\"namespaces\":[\"cgroup\",\"ipc\",\"mount\",\"network\",\"pid\",\"user\",\"uts\"],"
        "\"capabilities\":[],\"cgroup\":{\"v1\":true,\"v2\":true,\"systemd\":false,\"systemdUser\":false},"
        "\"seccomp\":{\"enabled\":true,\"actions\":[\"SCMP_ACT_ALLOW\",\"SCMP_ACT_ERRNO\",\"SCMP_ACT_KILL\","
        "\"SCMP_ACT_KILL_PROCESS\",\"SCMP_ACT_KILL_THREAD\",\"SCMP_ACT_LOG\",\"SCMP_ACT_TRAP\",\"SCMP_ACT_TRACE\"],"
        "\"operators\":[\"SCMP_CMP_EQ\",\"SCMP_CMP_GE\",\"SCMP_CMP_GT\",\"SCMP_CMP_LE\",\"SCMP_CMP_LT\","
        "\"SCMP_CMP_MASKED_EQ\",\"SCMP_CMP_NE\"],\"archs\":[]},\"apparmor\":{\"enabled\":false},\"selinux\":{\"enabled\":false}},"
        "\"annotations\":{\"io.nook.profile\":\"default|restricted\",\"io.nook.network\":\"public|policy\","
        "\"io.nook.allow\":\"CIDR[:PORTS],...\"}}";

/* The capability names process.capabilities accepts that this kernel has: PR_CAPBSET_READ
 * answers EINVAL past the kernel's last one (runc lists its known names up to it too). */
static int features_caps(json_t *list) {
        const char *name;
        for (int c = 0; (name = oci_cap_name(c)) && prctl(PR_CAPBSET_READ, (unsigned long)c, 0, 0, 0) >= 0;
                c++)
                if (json_array_append_new(list, json_string(name)) < 0)
                        return -ENOMEM;
        return 0;
}

static int cmd_features(int argc, char **argv, nook_error *err) {
        (void)argc;
        (void)argv;
        _cleanup_(json_decrefp) json_t *f = json_loads(features_base, 0, NULL);
        char version[32];
        if (!f)
                return nook_err_oom(err);
        json_t *linux_ = json_object_get(f, "linux");
        json_t *sc = json_object_get(linux_, "seccomp");
        oci_seccomp_version(version, sizeof(version));
        if (features_caps(json_object_get(linux_, "capabilities")) < 0 ||
                json_object_set_new(sc, "archs", oci_seccomp_arch_names()) < 0 ||
                json_object_set_new(json_object_get(f, "annotations"),
                        "io.github.seccomp.libseccomp.version", json_string(version)) < 0)
                return nook_err_oom(err);
        (void)json_dumpf(f, stdout, JSON_COMPACT);
        (void)fputc('\n', stdout);
        return 0;
}

static const struct {
        const char *name;
        cmd_fn fn;
        const char *summary;
        bool stateless; /* needs no --root: runs for any user without XDG_RUNTIME_DIR */
} commands[] = {
        { "create", cmd_create, "create a container (its process waits for 'start')" },
        { "start", cmd_start, "run the process of a created container" },
        { "run", cmd_run, "create and start a container, wait for it, delete it" },
        { "state", cmd_state, "print a container's state (runtime-spec JSON)" },
        { "kill", cmd_kill, "send a signal (default TERM) to the container's init, or --all" },
        { "delete", cmd_delete, "delete a stopped container (--force: any)" },
        { "exec", cmd_exec, "run a new process in a running container" },
        { "ps", cmd_ps, "list the container's processes (ps(1) lines, or --format json)" },
        { "pause", cmd_pause, "freeze every process of the container" },
        { "resume", cmd_resume, "thaw a paused container" },
        { "update", cmd_update, "change the container's resource limits" },
        { "list", cmd_list, "list containers under --root" },
        { "spec", cmd_spec, "write a default config.json", true },
        { "features", cmd_features, "print what this runtime supports (JSON)", true },
};

static void help(void) {
        (void)printf(
                "Usage: nook-oci [--root DIR] [--log FILE] [--log-format text|json] [--debug] COMMAND [ARGS...]\n\n"
                "nook's OCI runtime (runc's command line) for podman, containerd and Kubernetes.\n\nCommands:\n");
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                (void)printf("  %-9s %s\n", commands[i].name, commands[i].summary);
        (void)printf(
                "\nOptions:\n"
                "  --root DIR          state folder (default /run/nook-oci as root, $XDG_RUNTIME_DIR/nook-oci)\n"
                "  --log FILE          append errors there (--log-format json: JSON lines, as runc)\n"
                "  --systemd-cgroup    refused: nook-oci manages cgroupfs paths\n"
                "  --rootless auto|true|false  accepted; rootless follows the effective uid\n\n"
                "Annotations: io.nook.profile=default|restricted, io.nook.network=public|policy,\n"
                "io.nook.allow=CIDR[:PORTS],... (nftables in the container's network namespace).\n");
}

enum { G_ROOT = 4000, G_LOG, G_LOG_FORMAT, G_DEBUG, G_SYSTEMD, G_ROOTLESS, G_CRIU, G_VERSION };

static int parse_globals(int argc, char **argv, nook_error *err) {
        static const struct option o[] = {
                { "root", required_argument, NULL, G_ROOT },
                { "log", required_argument, NULL, G_LOG },
                { "log-format", required_argument, NULL, G_LOG_FORMAT },
                { "debug", no_argument, NULL, G_DEBUG },
                { "systemd-cgroup", no_argument, NULL, G_SYSTEMD },
                { "rootless", required_argument, NULL, G_ROOTLESS },
                { "criu", required_argument, NULL, G_CRIU },
                { "version", no_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int c;
        while ((c = getopt_long(argc, argv, "+hv", o, NULL)) >= 0)
                switch (c) {
                case G_ROOT:
                        arg_root = optarg;
                        break;
                case G_LOG:
                        arg_log = optarg;
                        break;
                case G_LOG_FORMAT:
                        if (!streq(optarg, "json") && !streq(optarg, "text"))
                                return nook_err_set(
                                        err, NOOK_E_INVALID, "--log-format '%s': use text or json", optarg);
                        arg_log_json = streq(optarg, "json");
                        break;
                case G_DEBUG:
                        arg_debug = true;
                        break;
                case G_SYSTEMD:
                        return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                                "--systemd-cgroup is not supported: nook-oci manages cgroupfs paths (podman: --cgroup-manager cgroupfs; containerd: SystemdCgroup = false)");
                case G_ROOTLESS:
                case G_CRIU:
                        break;
                case 'v':
                        (void)printf("nook-oci version %s\nspec: 1.0.2\n", NOOK_VERSION);
                        exit(0);
                case 'h':
                        help();
                        exit(0);
                default:
                        return nook_err_set(
                                err, NOOK_E_INVALID, "unknown global option (see 'nook-oci --help')");
                }
        return 0;
}

int main(int argc, char **argv) {
        nook_error err = { 0 };
        _cleanup_free_ char *root = NULL;
        int r = parse_globals(argc, argv, &err);
        if (r < 0)
                return fail(&err);
        if (optind >= argc) {
                help();
                return 1;
        }
        const char *cmd = argv[optind];
        argc -= optind;
        argv += optind;
        optind = 1;
        for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
                if (!streq(commands[i].name, cmd))
                        continue;
                bool help_only = argc > 1 && (streq(argv[1], "--help") || streq(argv[1], "-h"));
                if (!arg_root && !commands[i].stateless && !help_only) {
                        r = oci_root_default(&root, &err);
                        if (r < 0)
                                return fail(&err);
                        arg_root = root;
                }
                if (arg_debug)
                        log_line("debug", cmd);
                r = commands[i].fn(argc, argv, &err);
                return r < 0 ? fail(&err) : r;
        }
        (void)nook_err_set(&err, NOOK_E_INVALID, "unknown command '%s' (see 'nook-oci --help')", cmd);
        return fail(&err);
}
