/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <termios.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/caps.h"
#include "isolate/seccomp.h"
#include "supervisor/init.h"
#include "supervisor/proto.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

#define MAX_EXECS 1024

typedef struct init_exec {
        uint64_t id;
        pid_t helper;
        int status_fd; /* read end: the helper writes helper_rec records here */
        int master; /* with a terminal: the pty master, sent with "started" */
        bool started, reported;
} init_exec;

/* What a helper writes on its status pipe (one write each, under PIPE_BUF: never torn): first
 * HELPER_STARTED once the command runs, then HELPER_EXITED with its wait status.  A command that
 * could not start gets only HELPER_EXITED, with why, so init reports "exited" (with the reason)
 * instead of "started": a detached exec learns it failed, as a foreground one does. */
enum { HELPER_STARTED = 1, HELPER_EXITED = 2 };
typedef struct helper_rec {
        int kind;
        int status;
        char why[200];
} helper_rec;

static init_exec execs[MAX_EXECS];
static size_t n_execs;

/* The signals whose disposition init inherited or set away from SIG_DFL (SIGPIPE ignored, ...):
 * the only ones a command's child must reset.  Noted once by init_signals_note, before any
 * helper is forked; nothing in init or a helper changes a disposition afterwards. */
static int reset_sigs[64];
static size_t n_reset_sigs;

/* The spare helper: forked while init is idle, waiting on its request socket for the next exec,
 * so that an exec does not wait for a fork (~0.3-0.75 ms on a small VM, and the copy-on-write
 * faults after it).  pid 0: none. */
static struct {
        pid_t pid;
        int sock; /* init's end: the exec request (JSON and the stdio fds) goes here, once */
        int status_fd; /* read end of the helper's status pipe (helper_rec) */
} spare = { .pid = 0, .sock = -1, .status_fd = -1 };
static bool spare_blocked; /* the last fork failed: no retry until an exec or a reap */
static int init_sfd = -1; /* init's signalfd (SIGCHLD and the stop signals) */

_Noreturn static void fail_to_supervisor(int sock, const nook_error *e) {
        json_t *m = proto_error_msg(e);
        if (m)
                (void)proto_send(sock, m, NULL, 0);
        _exit(1);
}

/* ---- user lookup inside the sandbox -------------------------------------------------------- */

/* Looks name up in the sandbox's /etc/passwd or /etc/group (field 3 is the id).  We parse the
 * files ourselves: the image's libc and NSS modules are not ours to load. */
/* The guest owns /etc/passwd and /etc/group: only a regular file is read (a FIFO there would
 * block the helper, and with it the exec's "started"). */
static FILE *open_db(const char *file) {
        struct stat st;
        int fd = open(file, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        FILE *f = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? fdopen(fd, "r") : NULL;
        if (!f)
                safe_close(fd);
        return f;
}

static int lookup_id(const char *file, const char *name, unsigned *ret_id, unsigned *ret_gid, char *home,
        size_t home_len) {
        FILE *f = open_db(file);
        char line[1024];
        if (!f)
                return -ENOENT;
        while (fgets(line, sizeof(line), f)) {
                char *fields[7] = { 0 };
                char *p = line;
                for (int i = 0; i < 7 && p; i++) {
                        fields[i] = p;
                        p = strchr(p, ':');
                        if (p)
                                *p++ = 0;
                }
                if (!fields[2] || !streq(fields[0], name))
                        continue;
                *ret_id = (unsigned)strtoul(fields[2], NULL, 10);
                if (ret_gid && fields[3])
                        *ret_gid = (unsigned)strtoul(fields[3], NULL, 10);
                if (home && fields[5]) {
                        (void)snprintf(home, home_len, "%s", fields[5]);
                        home[strcspn(home, "\n")] = 0;
                }
                fclose(f);
                return 0;
        }
        fclose(f);
        return -ENOENT;
}

static bool parse_uint(const char *s, unsigned *ret) {
        char *end;
        if (!s || !*s || *s < '0' || *s > '9')
                return false;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || *end || v > 0xFFFFFFFEul)
                return false;
        *ret = (unsigned)v;
        return true;
}

/* user: "name", "uid", "uid:gid", "name:group". */
static int resolve_user(const char *user, unsigned *uid, unsigned *gid, char *home, size_t home_len) {
        char u[256], *g;
        (void)snprintf(u, sizeof(u), "%s", user ? user : "0");
        g = strchr(u, ':');
        if (g)
                *g++ = 0;
        *gid = 0;
        (void)snprintf(home, home_len, "/");
        if (parse_uint(u, uid)) {
                char name[256];
                *gid = *uid;
                /* find the home of a numeric uid, best effort */
                FILE *f = open_db("/etc/passwd");
                if (f) {
                        char line[1024];
                        while (fgets(line, sizeof(line), f)) {
                                unsigned id, pg;
                                char h[256];
                                if (sscanf(line, "%255[^:]:%*[^:]:%u:%u:%*[^:]:%255[^:]", name, &id, &pg,
                                            h) == 4 &&
                                        id == *uid) {
                                        *gid = pg;
                                        (void)snprintf(home, home_len, "%s", h);
                                        break;
                                }
                        }
                        fclose(f);
                }
        } else if (lookup_id("/etc/passwd", u, uid, gid, home, home_len) < 0)
                return -ESRCH;
        if (g && !parse_uint(g, gid) && lookup_id("/etc/group", g, gid, NULL, NULL, 0) < 0)
                return -ESRCH;
        return 0;
}

/* ---- the per-exec helper -------------------------------------------------------------------- */

/* The helper's signals: SIGUSR1 from init means "kill the whole tree"; the others are
 * forwarded to the command.  init blocks them all before it forks the helper, so one sent
 * right after the fork waits (pending) until the helper's sigwaitinfo() instead of killing it
 * or slipping between a flag check and a wait. */
static const int helper_signals[] = { SIGCHLD, SIGUSR1, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR2,
        SIGWINCH };

static void helper_sigset(sigset_t *set) {
        sigemptyset(set);
        for (size_t i = 0; i < ELEMENTSOF(helper_signals); i++)
                sigaddset(set, helper_signals[i]);
}

/* Reaps every exited child; the command's status goes to *cmd_status. */
static void reap_children(pid_t cmd, int *cmd_status, bool *cmd_done) {
        for (;;) {
                int st;
                pid_t p = waitpid(-1, &st, WNOHANG);
                if (p <= 0)
                        return;
                if (p == cmd && !*cmd_done) {
                        *cmd_done = true;
                        *cmd_status = st;
                }
        }
}

/* Kills every descendant of the calling process.  We are a child subreaper, so orphans are
 * re-parented to us and stay findable; repeat until no descendant is left (a process forking
 * while we scan is caught on the next round). */
static void kill_descendants(pid_t cmd, int *cmd_status, bool *cmd_done) {
        for (int round = 0; round < 100; round++) {
                DIR *d = opendir("/proc");
                pid_t me = getpid();
                size_t killed = 0;
                static pid_t pids[65536], ppids[65536];
                size_t n = 0;
                struct dirent *de;
                if (!d)
                        return;
                while ((de = readdir(d)) && n < ELEMENTSOF(pids)) {
                        char path[64], buf[512];
                        char *end;
                        long pid = strtol(de->d_name, &end, 10);
                        if (*end || pid <= 1)
                                continue;
                        (void)snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
                        int fd = open(path, O_RDONLY | O_CLOEXEC);
                        if (fd < 0)
                                continue;
                        ssize_t k = read(fd, buf, sizeof(buf) - 1);
                        safe_close(fd);
                        if (k <= 0)
                                continue;
                        buf[k] = 0;
                        char *p = strrchr(buf, ')');
                        int ppid;
                        char state;
                        if (!p || sscanf(p + 2, "%c %d", &state, &ppid) != 2 || state == 'Z')
                                continue; /* a zombie is dead already: reaping is enough */
                        pids[n] = (pid_t)pid;
                        ppids[n] = (pid_t)ppid;
                        n++;
                }
                closedir(d);
                /* mark descendants: repeat the parent walk until nothing changes */
                static bool desc[65536];
                memset(desc, 0, sizeof(bool) * n);
                for (bool changed = true; changed;) {
                        changed = false;
                        for (size_t i = 0; i < n; i++) {
                                if (desc[i])
                                        continue;
                                bool parent_is_desc = ppids[i] == me;
                                for (size_t j = 0; j < n && !parent_is_desc; j++)
                                        parent_is_desc = desc[j] && pids[j] == ppids[i];
                                if (parent_is_desc) {
                                        desc[i] = true;
                                        changed = true;
                                }
                        }
                }
                for (size_t i = 0; i < n; i++)
                        if (desc[i] && kill(pids[i], SIGKILL) == 0)
                                killed++;
                reap_children(cmd, cmd_status, cmd_done);
                if (killed == 0)
                        return;
                usleep(1000);
        }
}

typedef struct exec_req {
        char **argv;
        char **env;
        const char *cwd;
        const char *user;
        bool tty;
} exec_req;

/* What the command's child does between clone and execve.  It shares the helper's memory
 * (CLONE_VM | CLONE_VFORK, as posix_spawn does: no page tables are copied, which on a small VM is
 * most of the cost of a fork), so it only makes system calls; everything that allocates or reads
 * files (the user lookup, HOME) was done by the helper before.  A failed step leaves its errno
 * and name in the shared struct for the helper to report. */
typedef struct spawn_args {
        const exec_req *req;
        int in, out, errfd;
        unsigned uid, gid;
        int err; /* written by the child: errno of the failed step */
        const char *step;
} spawn_args;

#define SPAWN_FAIL(a, what)                                                                                 \
        do {                                                                                                \
                (a)->err = errno;                                                                           \
                (a)->step = (what);                                                                         \
                _exit(errno == ENOENT && streq((what), "run") ? 127 : 126);                                 \
        } while (0)

__attribute__((no_sanitize("address"))) static int spawn_child(void *arg) {
        spawn_args *a = arg;
        const exec_req *req = a->req;
        sigset_t none;

        (void)setsid();
        /* With a terminal, the pty's slave becomes our controlling terminal (we lead a new
         * session), so ^C and job control reach the command's process group. */
        if (req->tty && ioctl(a->in, TIOCSCTTY, 0) < 0)
                SPAWN_FAIL(a, "take the terminal");
        if ((a->in >= 0 && fd_move_to(a->in, 0) < 0) || (a->out >= 0 && fd_move_to(a->out, 1) < 0) ||
                (a->errfd >= 0 && fd_move_to(a->errfd, 2) < 0))
                SPAWN_FAIL(a, "set up stdio");
        if (a->in < 0) {
                int nul = open("/dev/null", O_RDONLY);
                if (nul > 0) {
                        (void)dup2(nul, 0);
                        (void)close(nul);
                }
        }
        (void)fd_close_all_except(3, NULL, 0);
        if (a->gid != 0 || a->uid != 0) {
                if (setgroups(0, NULL) < 0 && errno != EPERM)
                        SPAWN_FAIL(a, "drop supplementary groups");
                if (setresgid(a->gid, a->gid, a->gid) < 0 || setresuid(a->uid, a->uid, a->uid) < 0)
                        SPAWN_FAIL(a, "switch user");
        }
        if (chdir(req->cwd ? req->cwd : "/") < 0)
                SPAWN_FAIL(a, "change directory");
        /* The supervisor ignores SIGPIPE and exec keeps an ignored signal: the command gets every
         * signal at its default (`yes | head -1` must end quietly).  Our handler table is our own
         * copy (no CLONE_SIGHAND); only the signals init found not at their default are reset (one
         * call each instead of ~30: init_signals_note). */
        for (size_t i = 0; i < n_reset_sigs; i++)
                (void)signal(reset_sigs[i], SIG_DFL);
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        /* execvp searches the PATH of environ, which the helper set to the command's. */
        execvp(req->argv[0], req->argv);
        SPAWN_FAIL(a, "run");
}

/* The message for a child that failed a step (a->step set). */
static void spawn_step_why(const spawn_args *a, const exec_req *req, char *why, size_t len) {
        if (streq(a->step, "switch user"))
                (void)snprintf(why, len,
                        "cannot switch to user '%s' (%u:%u): %s; rootless sandboxes without a /etc/subuid range only map root",
                        req->user, a->uid, a->gid, strerror(a->err));
        else if (streq(a->step, "change directory"))
                (void)snprintf(why, len, "cannot change to directory '%s': %s", req->cwd, strerror(a->err));
        else if (streq(a->step, "run"))
                (void)snprintf(why, len, "cannot run '%s': %s", req->argv[0], strerror(a->err));
        else
                (void)snprintf(why, len, "cannot %s for '%s': %s", a->step, req->argv[0], strerror(a->err));
}

/* spawn_command without the report on stderr. */
static pid_t spawn_command_try(exec_req *req, const int fds[3], int *ret_status, char *why, size_t len) {
        spawn_args a = { .req = req, .in = fds[0], .out = fds[1], .errfd = fds[2] };
        char home[256];

        if (resolve_user(req->user, &a.uid, &a.gid, home, sizeof(home)) < 0) {
                (void)snprintf(why, len, "no user '%s' in this sandbox's /etc/passwd", req->user);
                *ret_status = 126 << 8;
                return -1;
        }
        if (strv_env_find(req->env, "HOME", 4) < 0) {
                char h[300];
                (void)snprintf(h, sizeof(h), "HOME=%s", home);
                (void)strv_env_set(&req->env, h);
        }
        extern char **environ;
        environ = req->env;
        /* The child's stack, as posix_spawn sizes it: execvp's script fallback copies argv onto
         * it.  A guard page below: an overflow faults instead of writing into our memory. */
        size_t page = (size_t)sysconf(_SC_PAGESIZE), argc = strv_length(req->argv);
        size_t size = ((64 * 1024 + (argc + 3) * sizeof(char *) + PATH_MAX + page - 1) / page + 1) * page;
        char *stack =
                mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (stack == MAP_FAILED || mprotect(stack, page, PROT_NONE) < 0) {
                (void)snprintf(why, len, "cannot start '%s': no memory for its stack", req->argv[0]);
                *ret_status = 126 << 8;
                return -1;
        }
        pid_t pid = clone(spawn_child, stack + size, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
        (void)munmap(stack, size); /* CLONE_VFORK: the child has exec'd or exited */
        if (pid < 0) {
                (void)snprintf(why, len, "cannot start '%s': %s", req->argv[0], strerror(errno));
                *ret_status = 126 << 8;
                return -1;
        }
        /* CLONE_VFORK: the child has exec'd or exited by now; one that failed a step has exited. */
        if (a.step) {
                spawn_step_why(&a, req, why, len);
                if (pid_wait(pid, ret_status) < 0)
                        *ret_status = 126 << 8;
                return -1;
        }
        return pid;
}

/* Starts the command: its pid, or -1 with the wait status to report and why it could not start
 * (also written to its stderr, as "nook: WHY"). */
static pid_t spawn_command(exec_req *req, const int fds[3], int *ret_status, char *why, size_t len) {
        pid_t pid = spawn_command_try(req, fds, ret_status, why, len);
        if (pid < 0) {
                int errfd = fds[2] >= 0 ? fds[2] : fds[1];
                dprintf(errfd, "nook: %s\n", why);
        }
        return pid;
}

/* The helper: child subreaper between init and the command.  Reports on status_fd that the
 * command started (or why it could not), its wait status as soon as it exits, then keeps reaping
 * whatever the command left running. */
_Noreturn static void helper_main(exec_req *req, int fds[3], int status_fd) {
        sigset_t set;

        (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        helper_sigset(&set);
        (void)sigprocmask(SIG_BLOCK, &set, NULL); /* already blocked by init; keep it explicit */

        bool cmd_done = false;
        int cmd_status = 0;
        helper_rec rec = { .kind = HELPER_EXITED };
        pid_t cmd = spawn_command(
                req, fds, &rec.status, rec.why, sizeof(rec.why)); /* it unblocks every signal */
        for (int i = 0; i < 3; i++)
                fds[i] = safe_close(fds[i]);
        if (cmd < 0) {
                (void)fd_write_all(status_fd, &rec, sizeof(rec));
                _exit(0);
        }
        rec = (helper_rec){ .kind = HELPER_STARTED };
        (void)fd_write_all(status_fd, &rec, sizeof(rec));
        for (;;) {
                siginfo_t si;
                int sig = sigwaitinfo(&set, &si);
                if (sig < 0)
                        continue;
                if (sig == SIGUSR1)
                        kill_descendants(cmd, &cmd_status, &cmd_done);
                else if (sig != SIGCHLD && !cmd_done)
                        (void)kill(cmd, sig);
                reap_children(cmd, &cmd_status, &cmd_done);
                if (cmd_done && status_fd >= 0) {
                        rec = (helper_rec){ .kind = HELPER_EXITED, .status = cmd_status };
                        (void)fd_write_all(status_fd, &rec, sizeof(rec));
                        status_fd = safe_close(status_fd);
                }
                if (cmd_done && waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
                        _exit(0); /* nothing left below us */
        }
}

/* ---- init ------------------------------------------------------------------------------------ */

static int json_strv(json_t *a, char ***ret) {
        size_t i;
        json_t *v;
        char **l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        json_array_foreach(a, i, v) {
                if (!json_is_string(v) || strv_push(&l, json_string_value(v)) < 0) {
                        strv_free(l);
                        return -EINVAL;
                }
        }
        *ret = l;
        return 0;
}

static void init_report_fd(
        int sock, const char *op, uint64_t id, json_int_t key_val, const char *key, int fd) {
        json_t *m = json_pack("{s:s, s:I, s:I}", "op", op, "id", (json_int_t)id, key, key_val);
        if (m)
                (void)proto_send(sock, m, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
        json_decref(m);
}

static void init_report(int sock, const char *op, uint64_t id, json_int_t key_val, const char *key) {
        init_report_fd(sock, op, id, key_val, key, -1);
}

/* A pseudo-terminal from the sandbox's own devpts instance: the slave becomes the command's
 * stdio, the master goes back to the client (through the supervisor) as an fd. */
static int open_pty(json_t *msg, int *ret_master, int fds[3]) {
        int master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (master < 0)
                return -errno;
        int unlock = 0;
        if (ioctl(master, TIOCSPTLCK, &unlock) < 0) {
                safe_close(master);
                return -errno;
        }
        int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0) {
                safe_close(master);
                return -errno;
        }
        struct winsize ws = { .ws_row = (unsigned short)json_integer_value(json_object_get(msg, "rows")),
                .ws_col = (unsigned short)json_integer_value(json_object_get(msg, "cols")) };
        if (ws.ws_row && ws.ws_col)
                (void)ioctl(master, TIOCSWINSZ, &ws);
        for (int i = 0; i < 3; i++) {
                safe_close(fds[i]);
                fds[i] = i == 0 ? slave : fcntl(slave, F_DUPFD_CLOEXEC, 3);
        }
        *ret_master = master;
        return 0;
}

/* The exec request as the spare helper received it; false when it is malformed (init checked
 * nothing but the id: the supervisor built it). */
static bool spare_parse(json_t *msg, exec_req *req) {
        *req = (exec_req){ 0 };
        if (json_strv(json_object_get(msg, "argv"), &req->argv) < 0 ||
                json_strv(json_object_get(msg, "env"), &req->env) < 0 || !req->argv[0])
                return false;
        req->cwd = json_string_value(json_object_get(msg, "cwd"));
        req->user = json_string_value(json_object_get(msg, "user"));
        req->tty = json_is_true(json_object_get(msg, "tty"));
        return true;
}

/* A spare helper: a subreaper from birth, it waits for one exec request from init (the JSON as
 * the supervisor sent it and the command's stdio), then is that exec's helper (helper_main).
 * Init hanging up (stop, or its death) ends it. */
_Noreturn static void spare_main(int req_sock, int status_fd) {
        json_t *msg = NULL;
        int fds[PROTO_MAX_FDS];
        size_t n_fds = 0;
        exec_req req;

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
        int r = proto_recv(req_sock, &msg, fds, &n_fds);
        safe_close(req_sock);
        if (r <= 0)
                _exit(0);
        int std[3] = { -1, -1, -1 };
        for (size_t i = 0; i < 3 && i < n_fds; i++) {
                std[i] = fds[i];
                fds[i] = -1;
        }
        proto_close_fds(fds, n_fds);
        if (!spare_parse(msg, &req)) {
                helper_rec rec = { .kind = HELPER_EXITED, .status = 126 << 8 };
                (void)snprintf(rec.why, sizeof(rec.why), "malformed exec request");
                (void)fd_write_all(status_fd, &rec, sizeof(rec));
                _exit(0);
        }
        helper_main(&req, std, status_fd); /* msg stays: req points into it */
}

static void spare_forget(void) {
        spare.sock = safe_close(spare.sock);
        spare.status_fd = safe_close(spare.status_fd);
        spare.pid = 0;
}

/* Forks the spare helper.  It keeps only its request socket and status pipe (and stdio, which
 * are /dev/null); the signals it takes are blocked already (init_loop), so one sent to it before
 * its sigwaitinfo waits. */
static void spare_fork(void) {
        int sp[2], pf[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                spare_blocked = true;
                return;
        }
        if (pipe2(pf, O_CLOEXEC) < 0) {
                safe_close(sp[0]);
                safe_close(sp[1]);
                spare_blocked = true;
                return;
        }
        pid_t pid = fork();
        if (pid == 0) {
                int keep[] = { sp[1], pf[1] };
                (void)fd_close_all_except(3, keep, ELEMENTSOF(keep));
                spare_main(sp[1], pf[1]);
        }
        safe_close(sp[1]);
        safe_close(pf[1]);
        if (pid < 0) {
                safe_close(sp[0]);
                safe_close(pf[0]);
                spare_blocked = true;
                return;
        }
        spare.pid = pid;
        spare.sock = sp[0];
        spare.status_fd = pf[0];
}

/* Hands the request to the spare helper (forked now if there is none); it serves this exec only.
 * Its pid, or -1 when no helper could take it. */
static pid_t spare_take(json_t *msg, const int fds[3], int *ret_status_fd) {
        int n = 0;
        while (n < 3 && fds[n] >= 0)
                n++;
        for (int attempt = 0; attempt < 2; attempt++) {
                if (spare.pid <= 0)
                        spare_fork();
                if (spare.pid <= 0)
                        return -1;
                int r = proto_send(spare.sock, msg, fds, (size_t)n);
                pid_t pid = spare.pid;
                int status_fd = spare.status_fd;
                spare.status_fd = -1;
                spare_forget();
                if (r >= 0) {
                        *ret_status_fd = status_fd;
                        return pid;
                }
                /* it died (killed from inside the sandbox?): the next one */
                (void)kill(pid, SIGKILL);
                safe_close(status_fd);
        }
        return -1;
}

static void init_start_exec(int sock, json_t *msg, int fds[3]) {
        uint64_t id = (uint64_t)json_integer_value(json_object_get(msg, "id"));
        bool tty = json_is_true(json_object_get(msg, "tty"));
        int master = -1, status_fd = -1;

        spare_blocked = false;
        if (n_execs >= MAX_EXECS || (tty && open_pty(msg, &master, fds) < 0)) {
                init_report(sock, "exited", id, 126 << 8, "status");
                return;
        }
        pid_t helper = spare_take(msg, fds, &status_fd);
        if (helper < 0) {
                safe_close(master);
                init_report(sock, "exited", id, 126 << 8, "status");
                return;
        }
        /* "started" waits for the helper's HELPER_STARTED: a command that cannot start is
         * reported "exited" with its reason instead */
        execs[n_execs++] =
                (init_exec){ .id = id, .helper = helper, .status_fd = status_fd, .master = master };
}

static init_exec *find_exec(uint64_t id) {
        for (size_t i = 0; i < n_execs; i++)
                if (execs[i].id == id)
                        return &execs[i];
        return NULL;
}

static void remove_exec(init_exec *e) {
        e->status_fd = safe_close(e->status_fd);
        e->master = safe_close(e->master);
        *e = execs[--n_execs];
}

/* The command ended, could not start (why), or its helper died without a word (why NULL). */
static void init_exec_finished(int sock, init_exec *e, int status, const char *why) {
        if (!e->reported) {
                e->reported = true;
                json_t *m = json_pack("{s:s, s:I, s:I, s:s?}", "op", "exited", "id", (json_int_t)e->id,
                        "status", (json_int_t)status, "error", !e->started && why && *why ? why : NULL);
                if (m)
                        (void)proto_send(sock, m, NULL, 0);
                json_decref(m);
        }
        e->status_fd = safe_close(e->status_fd);
        e->master = safe_close(e->master);
}

/* Reads one record from a helper; false at EOF (or a short read: the helper died). */
static bool init_exec_read(int sock, init_exec *e) {
        helper_rec rec;
        if (e->status_fd < 0 || fd_read_all(e->status_fd, &rec, sizeof(rec)) != (ssize_t)sizeof(rec))
                return false;
        rec.why[sizeof(rec.why) - 1] = 0;
        if (rec.kind == HELPER_STARTED && !e->started) {
                e->started = true;
                init_report_fd(sock, "started", e->id, e->helper, "pid", e->master);
                e->master = safe_close(e->master);
        } else if (rec.kind == HELPER_EXITED)
                init_exec_finished(sock, e, rec.status, rec.why);
        return true;
}

_Noreturn static void init_stop(uint64_t timeout_ms) {
        /* the spare helper blocks SIGTERM while it waits: hanging up its socket ends it */
        spare_forget();
        /* From PID 1, kill(-1) reaches every other process in our pid namespace. */
        (void)kill(-1, SIGTERM);
        uint64_t deadline = now_ms() + timeout_ms;
        for (uint64_t now = now_ms(); now < deadline; now = now_ms()) {
                pid_t p = waitpid(-1, NULL, WNOHANG);
                if (p < 0 && errno == ECHILD)
                        break;
                if (p > 0)
                        continue;
                /* until the next child exits (SIGCHLD is blocked and read from init_sfd), not a
                 * fixed sleep: a spare helper ends as soon as it sees the hang-up */
                struct pollfd pfd = { .fd = init_sfd, .events = POLLIN };
                struct signalfd_siginfo si;
                if (init_sfd < 0 || poll(&pfd, 1, (int)(deadline - now)) < 0)
                        usleep(5000);
                while (init_sfd >= 0 && read(init_sfd, &si, sizeof(si)) == sizeof(si))
                        ;
        }
        /* Leaving PID 1 makes the kernel SIGKILL whatever is left in the namespace. */
        _exit(0);
}

static void init_handle_msg(int sock, json_t *msg, int *fds, size_t n_fds) {
        const char *op = proto_op(msg);
        if (streq(op, "exec")) {
                int std[3] = { -1, -1, -1 };
                for (size_t i = 0; i < 3 && i < n_fds; i++) {
                        std[i] = fds[i];
                        fds[i] = -1;
                }
                init_start_exec(sock, msg, std);
                for (int i = 0; i < 3; i++)
                        safe_close(std[i]);
        } else if (streq(op, "kill")) {
                init_exec *e = find_exec((uint64_t)json_integer_value(json_object_get(msg, "id")));
                int sig = (int)json_integer_value(json_object_get(msg, "signal"));
                if (e && sig > 0 && sig < 65)
                        (void)kill(e->helper, sig == SIGKILL ? SIGUSR1 : sig);
        } else if (streq(op, "stop"))
                init_stop((uint64_t)json_integer_value(json_object_get(msg, "timeoutMs")));
        proto_close_fds(fds, n_fds);
}

static void init_signals_note(void) {
        n_reset_sigs = 0;
        for (int sig = 1; sig < SIGRTMIN && n_reset_sigs < ELEMENTSOF(reset_sigs); sig++) {
                struct sigaction sa;
                if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) < 0)
                        continue;
                if (sa.sa_handler != SIG_DFL)
                        reset_sigs[n_reset_sigs++] = sig;
        }
}

_Noreturn static void init_loop(int sock) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        init_sfd = sfd;
        /* block the helpers' signals too: a fork inherits the mask (see helper_signals) */
        sigset_t all;
        helper_sigset(&all);
        sigorset(&all, &all, &mask);
        (void)sigprocmask(SIG_BLOCK, &all, NULL);
        init_signals_note();

        for (;;) {
                struct pollfd pfd[2 + MAX_EXECS];
                size_t n = 0;
                pfd[n++] = (struct pollfd){ .fd = sock, .events = POLLIN };
                pfd[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
                for (size_t i = 0; i < n_execs; i++)
                        pfd[n++] = (struct pollfd){ .fd = execs[i].status_fd, .events = POLLIN };
                /* Idle (nothing to read right now) and no spare helper: fork one now, so that the
                 * next exec does not wait for it. */
                int ready = poll(pfd, n, spare.pid > 0 || spare_blocked ? -1 : 0);
                if (ready < 0 && errno != EINTR)
                        _exit(1);
                if (ready == 0) {
                        spare_fork();
                        continue;
                }
                if (pfd[0].revents & (POLLHUP | POLLERR))
                        _exit(0); /* the supervisor is gone: so is the sandbox */
                if (pfd[0].revents & POLLIN) {
                        json_t *msg = NULL;
                        int fds[PROTO_MAX_FDS];
                        size_t n_fds = 0;
                        int r = proto_recv(sock, &msg, fds, &n_fds);
                        if (r == 0)
                                _exit(0);
                        if (r > 0) {
                                init_handle_msg(sock, msg, fds, n_fds);
                                json_decref(msg);
                        }
                }
                /* only the execs that were polled: one started just now has no pfd entry yet */
                for (size_t i = 0; i + 2 < n && i < n_execs; i++) {
                        if (pfd[2 + i].fd < 0 || pfd[2 + i].fd != execs[i].status_fd ||
                                !(pfd[2 + i].revents & (POLLIN | POLLHUP)))
                                continue;
                        if (!init_exec_read(sock, &execs[i]))
                                execs[i].status_fd = safe_close(execs[i].status_fd);
                }
                if (pfd[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof(si)) == sizeof(si))
                                if (si.ssi_signo != SIGCHLD)
                                        init_stop(2000); /* a signal to PID 1 from outside: stop */
                }
                /* Reap everything: helpers (ours) and orphans re-parented to PID 1. */
                for (;;) {
                        int st;
                        pid_t p = waitpid(-1, &st, WNOHANG);
                        if (p <= 0)
                                break;
                        spare_blocked = false;
                        if (p == spare.pid) {
                                spare_forget(); /* killed from inside: another one when idle */
                                continue;
                        }
                        for (size_t i = 0; i < n_execs; i++) {
                                if (execs[i].helper != p)
                                        continue;
                                /* What the helper wrote before it exited (started, the command's
                                 * status) comes first; its own status only if it said nothing.  Its
                                 * write end is closed now, so these reads cannot block. */
                                while (!execs[i].reported && init_exec_read(sock, &execs[i]))
                                        ;
                                init_exec_finished(sock, &execs[i], st, NULL);
                                remove_exec(&execs[i]);
                                break;
                        }
                }
        }
}

static int init_become_root(bool rootless, nook_error *err) {
        if (setresgid(0, 0, 0) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot become root (gid) in the sandbox's user namespace");
        /* Host root's supplementary groups would still grant host access: drop them.  Rootless,
         * setgroups is denied in the namespace and we keep the caller's (user_namespaces(7)). */
        if (!rootless && setgroups(0, NULL) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot drop supplementary groups");
        if (setresuid(0, 0, 0) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot become root (uid) in the sandbox's user namespace");
        return 0;
}

/* seccomp: the profile's program, prepared by the supervisor before the clone; the profile as
 * the config parsed it. */
static int init_security(const sup_config *c, const iso_seccomp_prog *seccomp, nook_error *err) {
        iso_profile p = c->sec_profile;
        int r = iso_caps_drop(p, err);
        if (r < 0)
                return r;
        r = iso_set_no_new_privs(err);
        if (r < 0)
                return r;
        /* Last: the filter would refuse some of the calls above. */
        return iso_seccomp_load_prog(p, seccomp, err);
}

static int open_dir_path(const char *p, int *ret, nook_error *err) {
        int fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", p);
        *ret = fd;
        return 0;
}

/* Opens every host directory the sandbox needs.  This runs right after clone(), before the id
 * maps: the fds must belong to our own mount namespace (overlayfs and bind mounts refuse mounts
 * of another namespace), and our host credentials are still the supervisor's, so a rootful
 * sandbox can still walk the 0700 state folder it could not enter as its mapped root. */
static int open_rootfs(
        const sup_config *c, bool rootless, const sup_idmaps *idm, iso_rootfs *rf, nook_error *err) {
        int r;
        *rf = (iso_rootfs){ .hostname = c->name,
                .upper_fd = -1,
                .work_fd = -1,
                .workspace_fd = -1,
                .ro_binds = c->ro_binds,
                .upper_volatile = c->ephemeral,
                .rootless = rootless };
        if (idm->on) {
                /* idmapped by the supervisor: detached mounts we attach in iso_rootfs_setup */
                for (size_t i = 0; i < idm->n_lowers; i++)
                        rf->lower_fds[rf->n_lowers++] = idm->lower_fds[i];
                rf->lowers_detached = true;
        }
        STRV_FOREACH (l, idm->on ? NULL : c->lowers) {
                if (rf->n_lowers >= ISO_MAX_LOWERS)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "Too many image layers (max %d)", ISO_MAX_LOWERS);
                r = open_dir_path(*l, &rf->lower_fds[rf->n_lowers], err);
                if (r < 0)
                        return r;
                rf->n_lowers++;
        }
        if (c->upper &&
                ((r = open_dir_path(c->upper, &rf->upper_fd, err)) < 0 ||
                        (r = open_dir_path(c->work, &rf->work_fd, err)) < 0))
                return r;
        if (c->workspace && idm->on) {
                rf->workspace_fd = idm->workspace_fd;
                rf->workspace_detached = true;
        } else if (c->workspace && (r = open_dir_path(c->workspace, &rf->workspace_fd, err)) < 0)
                return r;
        /* Volume sources were resolved by libnook at create; open them now without following
         * any symlink, so one swapped in since cannot redirect the mount. */
        for (size_t i = 0; i < c->n_mounts && rf->n_mounts < ISO_MAX_MOUNTS; i++) {
                const sup_mount *m = &c->mounts[i];
                iso_mount *im = &rf->mounts[rf->n_mounts++];
                *im = (iso_mount){ .source_fd = -1,
                        .target = m->target,
                        .readonly = m->readonly,
                        .size_mib = (unsigned long)m->size_mib };
                if (!streq(m->type, "bind"))
                        continue;
                if (idm->on && idm->mount_fds[i] >= 0) {
                        im->source_fd = idm->mount_fds[i];
                        im->detached = true;
                        continue;
                }
                struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS };
                im->source_fd = (int)syscall(SYS_openat2, AT_FDCWD, m->source, &how, sizeof(how));
                if (im->source_fd < 0)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot open the volume source '%s'", m->source);
        }
        return 0;
}

/* Our argv still names the supervisor binary and the state folder on the host; processes in the
 * sandbox can read /proc/1/cmdline, so overwrite it in place (our copy, after clone). */
static void hide_cmdline(void) {
        char buf[4096];
        int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        ssize_t n = read(fd, buf, sizeof(buf));
        safe_close(fd);
        if (n <= (ssize_t)sizeof("nook-init"))
                return;
        memset(program_invocation_name, 0, (size_t)n);
        strcpy(program_invocation_name, "nook-init");
}

_Noreturn void init_main(int sock, const sup_config *c, bool rootless, const iso_seccomp_prog *seccomp,
        const sup_idmaps *idm, const iso_cgroup_join *cgj) {
        nook_error err = { 0 };
        json_t *msg = NULL;
        iso_rootfs rfs;
        const iso_rootfs *rf = &rfs;
        int r;

        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        hide_cmdline();
        (void)prctl(PR_SET_NAME, "nook-init");
        bool opened = open_rootfs(c, rootless, idm, &rfs, &err) >= 0;
        /* Step 2: wait until the supervisor has written our id maps. */
        r = proto_recv(sock, &msg, NULL, NULL);
        if (r <= 0 || !streq(proto_op(msg), "maps"))
                _exit(1);
        json_decref(msg);
        if (!opened)
                fail_to_supervisor(sock, &err);
        /* In our cgroup (joined here with the supervisor's files on v1, else put there by the
         * supervisor before "maps"): a cgroup namespace made here is rooted there, so the sandbox
         * sees its own cgroup as "/". */
        if (iso_cgroup_join_self(cgj, &err) < 0)
                fail_to_supervisor(sock, &err);
        if (unshare(CLONE_NEWCGROUP) < 0) {
                (void)nook_err_errno(&err, NOOK_E_IO, "Cannot create the sandbox's cgroup namespace");
                fail_to_supervisor(sock, &err);
        }
        if ((r = init_become_root(rf->rootless, &err)) < 0 || (r = iso_rootfs_setup(rf, &err)) < 0 ||
                (r = iso_net_uts_setup(c->name, &err)) < 0)
                fail_to_supervisor(sock, &err);
        int keep[] = { sock };
        (void)fd_close_all_except(3, keep, 1);
        /* Our stdio were the supervisor's (its log on the host): nothing in the sandbox keeps them. */
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int i = 0; i < 3 && nul >= 0; i++)
                (void)dup2(nul, i);
        if (nul > 2)
                safe_close(nul);
        (void)prctl(PR_SET_DUMPABLE, 0);
        r = init_security(c, seccomp, &err);
        if (r < 0)
                fail_to_supervisor(sock, &err);
        /* Our root goes to the supervisor with the ready message: nook cp reaches paths outside
         * /workspace through it (the supervisor cannot open /proc/<init>/root: we are not
         * dumpable).  O_PATH: it grants no access of its own. */
        int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        msg = json_pack("{s:s}", "op", "ready");
        if (!msg || proto_send(sock, msg, &root, root >= 0 ? 1 : 0) < 0)
                _exit(1);
        json_decref(msg);
        if (root >= 0)
                safe_close(root);
        init_loop(sock);
}
