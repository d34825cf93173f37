/* SPDX-License-Identifier: Apache-2.0 */
/* The per-exec helper: what runs between init and an exec's command.  A spare helper is forked
 * by init ahead of time (init_loop.c) and waits here for one request (init_spare_main), sent
 * straight by the supervisor or, when the supervisor had no spare, by init; it then resolves the
 * user, starts the command (clone(CLONE_VM|CLONE_VFORK), as posix_spawn does), reports "started"
 * and the exit status to the client itself (a direct exec: its connection came with the request)
 * and back on its request socket (helper_rec), forwards signals (from init), and as a child
 * subreaper kills the command's whole tree on a cancel or timeout. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "supervisor/init_internal.h"
#include "supervisor/proto.h"
#include "util/fd.h"
#include "util/idlemem.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

/* The signals whose disposition init inherited or set away from SIG_DFL (SIGPIPE ignored, ...):
 * the only ones a command's child must reset.  Noted once by init_signals_note, before any
 * helper is forked; nothing in init or a helper changes a disposition afterwards. */
static int reset_sigs[64];
static size_t n_reset_sigs;

/* The helper's signals: SIGUSR1 queued with INIT_HELPER_KILL_TREE means "kill the whole tree",
 * queued with INIT_HELPER_SIGNAL(N) "pass N on" (how init forwards every client's signal); the
 * others, sent to the helper itself, are forwarded to the command as they came.  init blocks
 * them all before it forks the helper, so one sent right after the fork waits (pending) until
 * the helper's sigwaitinfo() instead of killing it or slipping between a flag check and a wait. */
static const int helper_signals[] = { SIGCHLD, SIGUSR1, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR2,
        SIGWINCH };

void init_helper_sigset(sigset_t *set) {
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

/* One process of the sandbox as /proc shows it. */
typedef struct proc_ent {
        pid_t pid, ppid;
        int desc; /* -1 unknown, 0 no, 1 a descendant of the helper */
} proc_ent;

static int proc_ent_cmp(const void *a, const void *b) {
        pid_t x = ((const proc_ent *)a)->pid, y = ((const proc_ent *)b)->pid;
        return (x > y) - (x < y);
}

/* The parent of a live process from /proc/PID/stat; -1 for a zombie (dead already: reaping is
 * enough) or a process gone. */
static pid_t proc_ppid(pid_t pid) {
        char buf[512];
        const char *f = proc_stat_fields(pid, buf, sizeof(buf));
        /* "S PPID ...": a zombie or dead process has no parent worth killing through */
        if (!f || f[1] != ' ' || *f == 'Z' || *f == 'X')
                return -1;
        char *end;
        errno = 0;
        long ppid = strtol(f + 2, &end, 10);
        if (errno || end == f + 2 || *end != ' ' || ppid < 0 || ppid > INT_MAX)
                return -1;
        return (pid_t)ppid;
}

/* Every live process of the sandbox but init, sorted by pid (the array grows as needed). */
static int proc_scan(proc_ent **ret, size_t *ret_n) {
        DIR *d = opendir("/proc");
        _cleanup_free_ proc_ent *l = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                char *end;
                long pid = strtol(de->d_name, &end, 10);
                if (*end || pid <= 1)
                        continue;
                pid_t ppid = proc_ppid((pid_t)pid);
                if (ppid < 0)
                        continue;
                if (n == cap) {
                        size_t ncap = cap ? cap * 2 : 256;
                        proc_ent *nl = reallocarray(l, ncap, sizeof(*l));
                        if (!nl) {
                                closedir(d);
                                return -ENOMEM;
                        }
                        l = nl;
                        cap = ncap;
                }
                l[n++] = (proc_ent){ .pid = (pid_t)pid, .ppid = ppid, .desc = -1 };
        }
        closedir(d);
        if (n > 0)
                qsort(l, n, sizeof(*l), proc_ent_cmp);
        *ret = TAKE_PTR(l);
        *ret_n = n;
        return 0;
}

/* Whether e descends from me: walk up its parents, remembering each answer on the way. */
static bool proc_is_desc(proc_ent *l, size_t n, proc_ent *e, pid_t me) {
        proc_ent *path[64];
        size_t depth = 0;
        int answer = 0;
        for (proc_ent *c = e; c; depth++) {
                if (c->desc >= 0) {
                        answer = c->desc;
                        break;
                }
                if (c->ppid == me) {
                        answer = 1;
                        c->desc = 1;
                        break;
                }
                if (depth == ELEMENTSOF(path)) {
                        /* deeper than our memo: answer this chain afresh from its tail */
                        answer = proc_is_desc(l, n, c, me);
                        break;
                }
                path[depth] = c;
                c->desc = 0; /* until answered: a parent loop (pids reused mid-scan) ends here */
                proc_ent key = { .pid = c->ppid };
                c = bsearch(&key, l, n, sizeof(*l), proc_ent_cmp); /* NULL: init, or gone */
        }
        for (size_t i = 0; i < depth && i < ELEMENTSOF(path); i++)
                path[i]->desc = answer;
        return answer == 1;
}

/* At most this many pidfds are held per round: a larger tree is signalled by pid beyond it and
 * waited for on the next round. */
#define KILL_PIDFDS_MAX 256

/* SIGKILLs every process of l that descends from me; returns how many it signalled and the
 * pidfds of those it can wait for.  Each pidfd is opened first and the process's parent read
 * again after the open: a pid reused since the scan is never signalled. */
static size_t kill_round(proc_ent *l, size_t n, pid_t me, struct pollfd *pfds, size_t *ret_npfds) {
        size_t killed = 0, npfds = 0;
        for (size_t i = 0; i < n; i++) {
                if (!proc_is_desc(l, n, &l[i], me))
                        continue;
                int fd = npfds < KILL_PIDFDS_MAX ? pidfd_open_(l[i].pid) : -1;
                if (fd >= 0 && proc_ppid(l[i].pid) != l[i].ppid) {
                        safe_close(fd);
                        continue;
                }
                if (fd >= 0 ? pidfd_send_signal_(fd, SIGKILL) < 0 : kill(l[i].pid, SIGKILL) < 0) {
                        safe_close(fd);
                        continue;
                }
                killed++;
                if (fd >= 0)
                        pfds[npfds++] = (struct pollfd){ .fd = fd, .events = POLLIN };
        }
        *ret_npfds = npfds;
        return killed;
}

/* Kills every descendant of the calling process.  We are a child subreaper, so orphans are
 * re-parented to us and stay findable.  There is no cgroup to kill through: the sandbox's v2
 * cgroup, where there is one, is not delegated to its init (docs/design/runtime.md, "Killing an
 * exec's tree").  So each round scans /proc, SIGKILLs the descendants and waits on their pidfds
 * until they have exited (a pidfd polls readable at exit); a process forked while we scan is
 * caught on the next round, and a round that finds none ends the walk. */
static void kill_descendants(pid_t cmd, int *cmd_status, bool *cmd_done) {
        pid_t me = getpid();
        for (int round = 0; round < 100; round++) {
                _cleanup_free_ proc_ent *l = NULL;
                struct pollfd pfds[KILL_PIDFDS_MAX];
                size_t n = 0, npfds = 0;
                if (proc_scan(&l, &n) < 0)
                        return;
                size_t killed = kill_round(l, n, me, pfds, &npfds);
                /* 5 s for the round, generous: a SIGKILLed process only waits for its own exit
                 * path; one stuck in the kernel past that is looked at again next round */
                uint64_t deadline = now_ms() + 5000;
                for (size_t i = 0; i < npfds; i++) {
                        uint64_t now = now_ms();
                        (void)poll(&pfds[i], 1, now < deadline ? (int)(deadline - now) : 0);
                        safe_close(pfds[i].fd);
                }
                reap_children(cmd, cmd_status, cmd_done);
                if (killed == 0)
                        return;
        }
}

typedef struct exec_req {
        uint64_t id; /* the supervisor's exec id, for the client's "started"/"exited" */
        char **argv;
        char **env;
        const char *cwd;
        const char *user;
        bool tty;
        bool report_started; /* false: the client wants no "started" ("reportStarted") */
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

/* The command's stack, mapped (and its top pages touched) by a spare before its request comes
 * (spare_rehearse), so the exec's path has no mmap, no mprotect and no zero-fill faults for it;
 * NULL in a helper init forked on the spot, or when the command's argv needs more. */
#define PRE_STACK_SIZE ((size_t)96 * 1024)
#define PRE_STACK_TOUCH ((size_t)16 * 1024)
static char *pre_stack;

/* The child's stack, as posix_spawn sizes it: execvp's script fallback copies argv onto it.  A
 * guard page below: an overflow faults instead of writing into our memory.  NULL: no memory. */
static char *stack_map(size_t size) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        char *stack =
                mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (stack == MAP_FAILED)
                return NULL;
        if (mprotect(stack, page, PROT_NONE) < 0) {
                (void)munmap(stack, size);
                return NULL;
        }
        return stack;
}

/* Cuts a UTF-8 sequence that a truncating snprintf left incomplete at the end of s: why names
 * the command, its folder or user, and goes out as a JSON string, which must be valid UTF-8 (a
 * message that cannot be encoded is no message: its client would wait for ever).  What the
 * request carried is valid already (the supervisor parsed it as JSON); only the cut is not. */
static void utf8_trim_tail(char *s) {
        size_t n = strlen(s), i = n, cont = 0;
        while (i > 0 && cont < 4 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) {
                i--;
                cont++;
        }
        if (i == 0)
                return;
        unsigned char lead = (unsigned char)s[i - 1];
        size_t want = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
        if (lead >= 0x80 && cont < want)
                s[i - 1] = 0;
}

/* spawn_command without the report on stderr. */
static pid_t spawn_command_try(exec_req *req, const int fds[3], int *ret_status, char *why, size_t len) {
        spawn_args a = { .req = req, .in = fds[0], .out = fds[1], .errfd = fds[2] };
        char home[256];

        if (init_resolve_user(req->user, &a.uid, &a.gid, home, sizeof(home)) < 0) {
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
        size_t page = (size_t)sysconf(_SC_PAGESIZE), argc = strv_length(req->argv);
        size_t size =
                (((size_t)64 * 1024 + (argc + 3) * sizeof(char *) + PATH_MAX + page - 1) / page + 1) * page;
        bool own = !pre_stack || size > PRE_STACK_SIZE;
        char *stack = own ? stack_map(size) : pre_stack;
        if (!stack) {
                (void)snprintf(why, len, "cannot start '%s': no memory for its stack", req->argv[0]);
                *ret_status = 126 << 8;
                return -1;
        }
        if (!own)
                size = PRE_STACK_SIZE;
        pid_t pid = clone(spawn_child, stack + size, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
        if (own)
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
                utf8_trim_tail(why);
                int errfd = fds[2] >= 0 ? fds[2] : fds[1];
                dprintf(errfd, "nook: %s\n", why);
        }
        return pid;
}

/* Sends m (consumed) to the exec's client itself, worded as the supervisor words it
 * (proto.h): a direct exec's request came with the client's connection (client_fd), so the
 * client hears "started" and "exited" without a wake-up of the supervisor in between.  Whether
 * it went: a client gone or not reading (the socket is non-blocking) is told by nobody, or by
 * the supervisor (helper_rec.told = 0).  Nothing is ever read from client_fd: the client's
 * requests (cancel, signal) are the supervisor's. */
static bool client_tell(int client_fd, json_t *m) {
        bool told = client_fd >= 0 && m && proto_send(client_fd, m, NULL, 0) >= 0;
        json_decref(m);
        return told;
}

/* reason: "exited", or "stopped" when the sandbox's stop ended the command (its SIGTERM) */
static bool client_tell_exited(int client_fd, uint64_t id, int status, const char *reason, const char *why) {
        if (client_fd < 0)
                return false;
        return client_tell(client_fd, proto_exited_msg(id, status, reason, why && why[0] ? why : NULL));
}

/* One record to whoever sent the request (init or the supervisor).  A reader that is gone (a
 * client's exec cancelled, the supervisor dying) is no error: the helper goes on reaping. */
static void helper_report(int sock, const helper_rec *rec) {
        ssize_t n;
        do
                n = send(sock, rec, sizeof(*rec), MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
}

/* The helper: child subreaper between init and the command.  Reports on status_fd (its request
 * socket) that the command started (or why it could not), its wait status as soon as it exits,
 * then keeps reaping whatever the command left running.  client_fd (a direct exec; else -1): the
 * client's connection, told first (client_tell) except of an end the supervisor words: a
 * command killed by SIGKILL or exiting 137 (its reason may be "oom") or one killed on request
 * ("timeout", "cancelled", a vanished client).  A kill request (SIGUSR1, INIT_HELPER_KILL_TREE)
 * after the exit was reported is ignored: what the command left running keeps running, as when it
 * arrives after the supervisor heard of the exit (a client that hung up on "exited" before the
 * supervisor read this helper's record must not take the command's background along). */
_Noreturn static void helper_main(exec_req *req, int fds[3], int status_fd, int client_fd, int taken_fd) {
        sigset_t set;

        init_helper_sigset(&set); /* blocked since the fork (init_spare_main) */

        bool cmd_done = false, kill_asked = false, stopping = false;
        int cmd_status = 0;
        helper_rec rec = { .kind = HELPER_EXITED };
        pid_t cmd = spawn_command(
                req, fds, &rec.status, rec.why, sizeof(rec.why)); /* it unblocks every signal */
        for (int i = 0; i < 3; i++)
                fds[i] = safe_close(fds[i]);
        /* init forks the next spare now: not earlier, while we prepare the command on the CPUs
         * its fork would take */
        safe_close(taken_fd);
        if (cmd < 0) {
                rec.told = client_tell_exited(client_fd, req->id, rec.status, "exited", rec.why);
                helper_report(status_fd, &rec);
                _exit(0);
        }
        rec = (helper_rec){ .kind = HELPER_STARTED, .told = client_fd >= 0 && !req->report_started };
        if (client_fd >= 0 && req->report_started)
                rec.told = client_tell(client_fd,
                        json_pack("{s:s, s:I, s:i}", "op", "started", "id", (json_int_t)req->id, "pid",
                                (int)getpid()));
        helper_report(status_fd, &rec);
        for (;;) {
                siginfo_t si;
                int sig = sigwaitinfo(&set, &si);
                if (sig < 0)
                        continue;
                /* the sandbox's stop: init's kill(-1, SIGTERM), a plain kill from pid 1 (what init
                 * forwards for a client comes by sigqueue, SI_QUEUE: init_loop.c) */
                if (sig == SIGTERM && si.si_code == SI_USER && si.si_pid == 1)
                        stopping = true;
                bool queued = sig == SIGUSR1 && si.si_code == SI_QUEUE;
                bool kill_tree = queued && si.si_value.sival_int == INIT_HELPER_KILL_TREE;
                int pass = sig; /* what the command gets: init's request names it (init_loop.c) */
                if (queued && (si.si_value.sival_int & ~0xff) == INIT_HELPER_SIGNAL_BASE)
                        pass = si.si_value.sival_int & 0xff;
                if (kill_tree && status_fd >= 0) {
                        kill_asked = true;
                        kill_descendants(cmd, &cmd_status, &cmd_done);
                } else if (sig != SIGCHLD && !kill_tree && !cmd_done && pass > 0 && pass < 65)
                        (void)kill(cmd, pass);
                reap_children(cmd, &cmd_status, &cmd_done);
                if (cmd_done && status_fd >= 0) {
                        rec = (helper_rec){ .kind = HELPER_EXITED, .status = cmd_status };
                        if (!kill_asked && !proto_end_maybe_oom(cmd_status))
                                rec.told = client_tell_exited(client_fd, req->id, cmd_status,
                                        proto_end_reason(stopping, cmd_status), NULL);
                        client_fd = safe_close(client_fd);
                        helper_report(status_fd, &rec);
                        status_fd = safe_close(status_fd);
                }
                if (cmd_done && waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
                        _exit(0); /* nothing left below us */
        }
}

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

/* The exec request as the spare helper received it; false when it is malformed (init checked
 * nothing but the id: the supervisor built it). */
static bool spare_parse(json_t *msg, exec_req *req) {
        *req = (exec_req){ 0 };
        if (json_strv(json_object_get(msg, "argv"), &req->argv) < 0 ||
                json_strv(json_object_get(msg, "env"), &req->env) < 0 || !req->argv[0])
                return false;
        req->id = (uint64_t)json_integer_value(json_object_get(msg, "id"));
        req->cwd = json_string_value(json_object_get(msg, "cwd"));
        req->user = json_string_value(json_object_get(msg, "user"));
        req->tty = json_is_true(json_object_get(msg, "tty"));
        req->report_started = !json_is_false(json_object_get(msg, "reportStarted"));
        return true;
}

/* A request of the shape the supervisor sends (sup.c, build_exec), for spare_rehearse. */
static const char rehearsal_req[] =
        "{\"op\":\"exec\",\"id\":1,\"argv\":[\"true\"],\"env\":[\"PATH=/usr/local/sbin:/usr/local/bin:"
        "/usr/sbin:/usr/bin:/sbin:/bin\",\"HOSTNAME=rehearsal\"],\"cwd\":\"/\","
        "\"user\":\"0\",\"tty\":false,\"rows\":0,\"cols\":0,\"reportStarted\":false}";

/* Off the exec's path, before the spare waits: once through what taking a request does (parse
 * a request of the usual shape, resolve the user, set HOME; the receive buffer; the command's
 * stack mapped and its top touched), so that the page faults of a fresh fork are taken now and
 * not between the request and the command's start: init's heap and stack pages are copied on
 * first write, and a fork copies no page-table entries of file mappings, so each libc and
 * jansson page the exec path runs faults once (bench/README.md, issue #17, branch execfast). */
static void spare_rehearse(void) {
        json_error_t jerr;
        exec_req req;
        json_t *m = json_loadb(rehearsal_req, sizeof(rehearsal_req) - 1, JSON_REJECT_DUPLICATES, &jerr);
        if (m && spare_parse(m, &req)) {
                unsigned uid, gid;
                char home[256], h[300];
                if (init_resolve_user(req.user, &uid, &gid, home, sizeof(home)) >= 0) {
                        (void)snprintf(h, sizeof(h), "HOME=%s", home);
                        (void)strv_env_set(&req.env, h);
                }
                strv_free(req.argv);
                strv_free(req.env);
        }
        json_decref(m);
        char *buf = malloc(PROTO_MAX_MSG + 1); /* proto_recv's, the same chunk once freed */
        if (buf)
                explicit_bzero(buf, 4096);
        free(buf);
        pre_stack = stack_map(PRE_STACK_SIZE);
        if (pre_stack)
                explicit_bzero(pre_stack + PRE_STACK_SIZE - PRE_STACK_TOUCH, PRE_STACK_TOUCH);
}

/* Waits for the spare's request; when none came for IDLE_RELEASE_MS, gives back the pages it
 * touched since the fork and its free heap pages (copies of init's, which init and the
 * supervisor trim at the same time: the spare would otherwise be their last holder), then waits
 * on (docs/design/runtime.md, "Idle memory"). */
static void spare_wait(int req_sock) {
        struct pollfd p = { .fd = req_sock, .events = POLLIN };
        int r;
        do
                r = poll(&p, 1, IDLE_RELEASE_MS);
        while (r < 0 && errno == EINTR);
        if (r != 0)
                return;
        idle_release(IDLE_RELEASE_FILE | IDLE_RELEASE_HEAP | IDLE_RELEASE_STACK);
        if (pre_stack) /* zero-fill faults again when used */
                (void)madvise(pre_stack, PRE_STACK_SIZE, MADV_DONTNEED);
}

/* A spare helper: a subreaper from birth, it waits on req_sock for one exec request (the JSON
 * as the supervisor built it and the command's stdio), from the supervisor (which init handed
 * req_sock's other end) or from init itself (no spare was at hand); closing taken_fd (once the
 * command started) tells init it took one, so init forks the next spare.  It then is that
 * exec's helper (helper_main) and reports on req_sock.  rehearse: a spare, which has time to go
 * through the exec path once before its request comes (spare_rehearse); not a helper init forked
 * for the exec at hand.  A stop SIGKILLs a spare still waiting (it blocks SIGTERM). */
_Noreturn void init_spare_main(int req_sock, int taken_fd, bool rehearse) {
        json_t *msg = NULL;
        int fds[PROTO_MAX_FDS];
        size_t n_fds = 0;
        exec_req req;

        /* all before the request comes, off the exec's path */
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
        sigset_t set;
        init_helper_sigset(&set);
        (void)sigprocmask(SIG_BLOCK, &set, NULL); /* already blocked by init; keep it explicit */
        if (rehearse)
                spare_rehearse();
        spare_wait(req_sock);
        int r;
        do
                r = proto_recv(req_sock, &msg, fds, &n_fds);
        while (r == -EINTR);
        if (r <= 0)
                _exit(0);
        int std[3] = { -1, -1, -1 };
        for (size_t i = 0; i < 3 && i < n_fds; i++) {
                std[i] = fds[i];
                fds[i] = -1;
        }
        /* a fourth fd: the client's connection (a direct exec from the supervisor; init sends 3) */
        int client_fd = n_fds == 4 ? fds[3] : -1;
        if (n_fds == 4)
                fds[3] = -1;
        proto_close_fds(fds, n_fds);
        if (!spare_parse(msg, &req)) {
                helper_rec rec = { .kind = HELPER_EXITED, .status = 126 << 8 };
                (void)snprintf(rec.why, sizeof(rec.why), "malformed exec request");
                helper_report(req_sock, &rec);
                _exit(0);
        }
        helper_main(&req, std, req_sock, client_fd, taken_fd); /* msg stays: req points into it */
}

void init_signals_note(void) {
        n_reset_sigs = 0;
        for (int sig = 1; sig < SIGRTMIN && n_reset_sigs < ELEMENTSOF(reset_sigs); sig++) {
                struct sigaction sa;
                if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) < 0)
                        continue;
                if (sa.sa_handler != SIG_DFL)
                        reset_sigs[n_reset_sigs++] = sig;
        }
}
