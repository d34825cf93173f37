/* SPDX-License-Identifier: Apache-2.0 */
/* PID 1's loop, once the sandbox is set up (init.c): it keeps one spare helper forked while
 * idle and hands it to the supervisor, which sends it an exec straight away; it serves the execs
 * the supervisor sends it instead (no spare was at hand: a helper forked on the spot, whose
 * "started" and "exited" init reports), forwards signals ("kill") to helpers, reaps every
 * orphan, and stops the sandbox on "stop" or a signal from outside. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
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

#define MAX_EXECS 1024

typedef struct init_exec {
        uint64_t id;
        pid_t helper;
        int status_fd; /* read end: the helper writes helper_rec records here */
        int master; /* with a terminal: the pty master, sent with "started" */
        bool started, reported;
        bool told; /* the helper told the client "exited" itself (helper_rec.told) */
} init_exec;

static init_exec execs[MAX_EXECS];
static size_t n_execs;

/* The spare helper: forked while init is idle, so that an exec does not wait for a fork
 * (~0.3-0.75 ms on a small VM, and the copy-on-write faults after it), and handed at once to the
 * supervisor ({"op":"spare","pid":P} with its request socket): the supervisor sends it the next
 * exec's request and reads "started" and "exited" straight back, so init is on neither path.
 * Init keeps the read end of a pipe the spare closes once it took a request (or died): it is
 * then a direct helper (below) and init forks the next spare when idle.  pid 0: none. */
static struct {
        pid_t pid;
        int taken_fd;
} spare = { .pid = 0, .taken_fd = -1 };
static bool spare_blocked; /* the last fork failed: no retry until an exec or a reap */
static int init_sfd = -1; /* init's signalfd (SIGCHLD and the stop signals) */

/* The helpers of execs the supervisor sent straight to a spare: init reaps them and forwards
 * signals to them ("kill" by pid), nothing more. */
static pid_t direct[MAX_EXECS];
static size_t n_direct;

static void init_report_fd(
        int sock, const char *op, uint64_t id, json_int_t key_val, const char *key, int fd, bool told) {
        json_t *m = json_pack("{s:s, s:I, s:I}", "op", op, "id", (json_int_t)id, key, key_val);
        if (m && told)
                (void)json_object_set_new(m, "told", json_true());
        if (m)
                (void)proto_send(sock, m, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
        json_decref(m);
}

static void init_report(int sock, const char *op, uint64_t id, json_int_t key_val, const char *key) {
        init_report_fd(sock, op, id, key_val, key, -1, /* told= */ false);
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

static void spare_forget(void) {
        spare.taken_fd = safe_close(spare.taken_fd);
        spare.pid = 0;
}

/* A one-shot sandbox's helper (no spares: init_loop), forked once right after "ready" and kept
 * by init, not handed to the supervisor: the sandbox's one exec comes through init and finds it
 * forked, instead of waiting for a fork on its way (while the client records the sandbox and
 * sends the exec, ~0.2 ms of fork are off that path; the same one fork per run).  pid 0: none. */
static struct {
        pid_t pid;
        int req;
} kept = { .pid = 0, .req = -1 };

static void kept_forget(void) {
        kept.req = safe_close(kept.req);
        kept.pid = 0;
}

/* Forks a helper waiting for one request on *ret_sock (our end); *ret_taken hangs up once it
 * took it.  It keeps only those two fds (and stdio, which are /dev/null); the signals it takes
 * are blocked already (init_loop), so one sent to it before its sigwaitinfo waits.  for_later: a
 * spare, for a later exec: it rehearses the exec path first (init_exec.c), which a helper for
 * the exec at hand would only pay on that exec's path.  Its pid or -1. */
static pid_t helper_fork(int *ret_sock, int *ret_taken, bool for_later) {
        int sp[2], pf[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return -1;
        if (pipe2(pf, O_CLOEXEC) < 0) {
                safe_close(sp[0]);
                safe_close(sp[1]);
                return -1;
        }
        pid_t pid = fork();
        if (pid == 0) {
                int keep[] = { sp[1], pf[1] };
                (void)fd_close_all_except(3, keep, ELEMENTSOF(keep));
                init_spare_main(sp[1], pf[1], for_later);
        }
        safe_close(sp[1]);
        safe_close(pf[1]);
        if (pid < 0) {
                safe_close(sp[0]);
                safe_close(pf[0]);
                return -1;
        }
        *ret_sock = sp[0];
        *ret_taken = pf[0];
        return pid;
}

/* Forks the spare helper and hands its request socket to the supervisor (sock). */
static void spare_fork(int sock) {
        int req = -1, taken = -1;
        pid_t pid = helper_fork(&req, &taken, /* for_later= */ true);
        json_t *m = pid > 0 ? json_pack("{s:s, s:i}", "op", "spare", "pid", (int)pid) : NULL;
        int r = m ? proto_send(sock, m, &req, 1) : -ENOMEM;
        json_decref(m);
        safe_close(req); /* the supervisor's now: a stop SIGKILLs a spare still waiting */
        if (r < 0) {
                if (pid > 0)
                        (void)kill(pid, SIGKILL); /* reaped as any child */
                safe_close(taken);
                spare_blocked = true;
                return;
        }
        spare.pid = pid;
        spare.taken_fd = taken;
}

/* The spare took its request (or died: reaped later).  Its pid goes to the direct helpers. */
static void spare_taken(void) {
        if (n_direct < MAX_EXECS) /* always: no spare is forked with the table full */
                direct[n_direct++] = spare.pid;
        spare_forget();
}

/* The exec init forwards itself (the supervisor had no spare): a helper forked on the spot gets
 * the request, with the client's connection (client_fd, -1 with a terminal) after the stdio as
 * from the supervisor to a spare, so that it tells the client "started" and "exited" itself;
 * init reads its records.  Its pid, or -1 when no helper could take it. */
static pid_t helper_take(json_t *msg, const int fds[3], int client_fd, int *ret_status_fd) {
        int all[4] = { fds[0], fds[1], fds[2], client_fd };
        int n = 0;
        while (n < 3 && fds[n] >= 0)
                n++;
        if (n == 3 && client_fd >= 0)
                n = 4;
        for (int attempt = 0; attempt < 2; attempt++) {
                int req = -1, taken = -1;
                pid_t pid = kept.pid;
                if (pid > 0) {
                        req = TAKE_FD(kept.req);
                        kept.pid = 0;
                } else if ((pid = helper_fork(&req, &taken, /* for_later= */ false)) < 0)
                        return -1;
                safe_close(taken);
                if (proto_send(req, msg, all, (size_t)n) >= 0) {
                        *ret_status_fd = req;
                        return pid;
                }
                /* it died (killed from inside the sandbox?): another one */
                (void)kill(pid, SIGKILL);
                safe_close(req);
        }
        return -1;
}

static void init_start_exec(int sock, json_t *msg, int fds[3], int client_fd) {
        uint64_t id = (uint64_t)json_integer_value(json_object_get(msg, "id"));
        bool tty = json_is_true(json_object_get(msg, "tty"));
        int master = -1, status_fd = -1;

        spare_blocked = false;
        if (n_execs >= MAX_EXECS || (tty && open_pty(msg, &master, fds) < 0)) {
                init_report(sock, "exited", id, 126 << 8, "status");
                return;
        }
        pid_t helper = helper_take(msg, fds, tty ? -1 : client_fd, &status_fd);
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
                if (m && e->told)
                        (void)json_object_set_new(m, "told", json_true());
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
                init_report_fd(sock, "started", e->id, e->helper, "pid", e->master, rec.told != 0);
                e->master = safe_close(e->master);
        } else if (rec.kind == HELPER_EXITED) {
                e->told = rec.told != 0;
                init_exec_finished(sock, e, rec.status, rec.why);
        }
        return true;
}

static bool init_reap(int sock);

/* The stop: every process but us gets SIGTERM; what ends within timeout_ms is reaped as always
 * (init_reap), so an exec through init still reports its command's status to the supervisor
 * (the exit record's commandExit, its client's "exited"); then we leave. */
_Noreturn static void init_stop(int sock, uint64_t timeout_ms) {
        /* the spare blocks SIGTERM while it waits, and the supervisor holds its socket */
        if (spare.pid > 0)
                (void)kill(spare.pid, SIGKILL);
        spare_forget();
        if (kept.pid > 0)
                (void)kill(kept.pid, SIGKILL);
        kept_forget();
        /* From PID 1, kill(-1) reaches every other process in our pid namespace. */
        (void)kill(-1, SIGTERM);
        uint64_t deadline = now_ms() + timeout_ms;
        for (uint64_t now = now_ms(); now < deadline; now = now_ms()) {
                if (!init_reap(sock))
                        break;
                /* until the next child exits (SIGCHLD is blocked and read from init_sfd), not a
                 * fixed sleep: the spare ends at once (SIGKILL), and a command that obeys SIGTERM soon */
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

/* The helper a "kill" is for: by exec id (an exec init forwarded) or by pid (one the supervisor
 * sent to a spare, which may not have told us yet that it took it); only a helper of ours. */
static pid_t kill_target(json_t *msg) {
        json_t *pidv = json_object_get(msg, "pid");
        if (!pidv) {
                init_exec *e = find_exec((uint64_t)json_integer_value(json_object_get(msg, "id")));
                return e ? e->helper : 0;
        }
        json_int_t pid = json_integer_value(pidv);
        if (pid <= 1)
                return 0;
        if (pid == spare.pid)
                return spare.pid;
        for (size_t i = 0; i < n_direct; i++)
                if (direct[i] == pid)
                        return direct[i];
        return 0;
}

/* A signal for a helper's command, by sigqueue: SIGUSR1 with the signal's number in its value
 * (INIT_HELPER_SIGNAL), which the helper tells from the stop's kill(-1, SIGTERM) (SI_USER, after
 * which its command "stopped": init_exec.c) and from signals a guest sends the helper itself;
 * every signal goes so, as one the helper does not block would end the helper instead of reaching
 * its command.  SIGKILL asks for the command's whole tree (INIT_HELPER_KILL_TREE) and wakes a
 * helper the guest stopped (SIGCONT) to act on it; "hard": the supervisor's last resort for one
 * that still did not, SIGKILL to the helper itself. */
static void helper_signal(pid_t helper, int sig, bool hard) {
        if (helper <= 0 || sig <= 0 || sig > 64)
                return;
        if (sig == SIGKILL && hard) {
                (void)kill(helper, SIGKILL);
                return;
        }
        (void)sigqueue(helper, SIGUSR1,
                (union sigval){
                        .sival_int = sig == SIGKILL ? INIT_HELPER_KILL_TREE : INIT_HELPER_SIGNAL(sig) });
        if (sig == SIGKILL)
                (void)kill(helper, SIGCONT);
}

static void init_handle_msg(int sock, json_t *msg, int *fds, size_t n_fds) {
        const char *op = proto_op(msg);
        if (streq(op, "exec")) {
                int std[3] = { -1, -1, -1 };
                for (size_t i = 0; i < 3 && i < n_fds; i++) {
                        std[i] = fds[i];
                        fds[i] = -1;
                }
                /* a fourth fd: the client's connection, for the helper (proto.h) */
                init_start_exec(sock, msg, std, n_fds == 4 ? fds[3] : -1);
                for (int i = 0; i < 3; i++)
                        safe_close(std[i]);
        } else if (streq(op, "kill")) {
                int sig = (int)json_integer_value(json_object_get(msg, "signal"));
                bool hard = json_is_true(json_object_get(msg, "hard"));
                if (json_is_true(json_object_get(msg, "all"))) {
                        /* nook kill: every command running (a spare holds none yet) */
                        for (size_t i = 0; i < n_execs; i++)
                                helper_signal(execs[i].helper, sig, false);
                        for (size_t i = 0; i < n_direct; i++)
                                helper_signal(direct[i], sig, false);
                } else
                        helper_signal(kill_target(msg), sig, hard);
        } else if (streq(op, "stop"))
                init_stop(sock, (uint64_t)json_integer_value(json_object_get(msg, "timeoutMs")));
        proto_close_fds(fds, n_fds);
}

/* One request from the supervisor; its hang-up ends init, and the sandbox with it. */
static void init_read_request(int sock) {
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

/* Reaps everything: helpers (ours) and orphans re-parented to PID 1.  Returns false once no
 * child is left. */
static bool init_reap(int sock) {
        for (;;) {
                int st;
                pid_t p = waitpid(-1, &st, WNOHANG);
                if (p < 0 && errno == ECHILD)
                        return false;
                if (p <= 0)
                        return true;
                spare_blocked = false;
                if (p == spare.pid) {
                        spare_forget(); /* killed from inside: another one when idle */
                        continue;
                }
                if (p == kept.pid) {
                        kept_forget(); /* killed from inside: the exec forks its helper */
                        continue;
                }
                bool was_direct = false;
                for (size_t i = 0; i < n_direct && !was_direct; i++) {
                        if (direct[i] != p)
                                continue;
                        direct[i] = direct[--n_direct];
                        was_direct = true; /* the supervisor reads its records */
                }
                if (was_direct)
                        continue;
                for (size_t i = 0; i < n_execs; i++) {
                        if (execs[i].helper != p)
                                continue;
                        /* What the helper wrote before it exited (started, the command's status)
                         * comes first; its own status only if it said nothing.  Its write end is
                         * closed now, so these reads cannot block. */
                        while (!execs[i].reported && init_exec_read(sock, &execs[i]))
                                ;
                        init_exec_finished(sock, &execs[i], st, NULL);
                        remove_exec(&execs[i]);
                        break;
                }
        }
}

/* SIGCHLD and the stop signals are read from a signalfd (init_sfd, returned); the helpers'
 * signals are blocked too, since a fork inherits the mask (see init_exec.c, helper_signals). */
static int init_signals_setup(void) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        init_sfd = sfd;
        sigset_t all;
        init_helper_sigset(&all);
        sigorset(&all, &all, &mask);
        (void)sigprocmask(SIG_BLOCK, &all, NULL);
        init_signals_note();
        return sfd;
}

/* Init's quiet period (docs/design/runtime.md, "Idle memory"): the last poll that returned an
 * event, and whether init gave its pages back since. */
static uint64_t last_event_ms;
static bool idle_released;

static int idle_timeout(void) {
        if (idle_released)
                return -1;
        uint64_t now = now_ms(), at = last_event_ms + IDLE_RELEASE_MS;
        return at <= now ? 0 : (int)(at - now);
}

/* After a poll: true when it timed out (nothing else to do).  Quiet for IDLE_RELEASE_MS, init
 * gives back the pages setup and the last execs touched, once per quiet period; its heap is
 * mostly the supervisor's (copy-on-write since the clone), so the trim frees little. */
static bool idle_check(int ready) {
        uint64_t now = now_ms();
        if (ready != 0) {
                last_event_ms = now;
                idle_released = false;
                return false;
        }
        if (!idle_released && now >= last_event_ms + IDLE_RELEASE_MS) {
                idle_release(IDLE_RELEASE_FILE | IDLE_RELEASE_HEAP | IDLE_RELEASE_STACK);
                idle_released = true;
        }
        return true;
}

/* PID 1 after "ready": poll the supervisor's socket, init's signalfd, the spare's "taken" pipe
 * and the status socket of every exec init forwarded; fork a spare helper whenever idle, unless
 * spares is false (a one-shot sandbox, NOOK_CREATE_ONE_SHOT: its one exec comes before a spare
 * forked at "ready" reaches the supervisor, so both the spare and the next one after the command
 * started would be forked, rehearsed and killed unused; its exec's helper is forked here, right
 * after "ready", and kept for that exec: "kept" above). */
_Noreturn void init_loop(int sock, bool spares) {
        int sfd = init_signals_setup();
        last_event_ms = now_ms();
        if (!spares) {
                int taken = -1;
                pid_t pid = helper_fork(&kept.req, &taken, /* for_later= */ false);
                safe_close(taken);
                kept.pid = pid > 0 ? pid : 0;
        }

        for (;;) {
                struct pollfd pfd[3 + MAX_EXECS];
                size_t n = 0;
                pfd[n++] = (struct pollfd){ .fd = sock, .events = POLLIN };
                pfd[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
                pfd[n++] = (struct pollfd){ .fd = spare.taken_fd, .events = POLLIN }; /* -1: none */
                for (size_t i = 0; i < n_execs; i++)
                        pfd[n++] = (struct pollfd){ .fd = execs[i].status_fd, .events = POLLIN };
                /* Idle (nothing to read right now) and no spare helper: fork one now, so that the
                 * next exec does not wait for it. */
                bool want_spare = spares && spare.pid <= 0 && !spare_blocked && n_direct < MAX_EXECS;
                int ready = poll(pfd, n, want_spare ? 0 : idle_timeout());
                if (ready < 0 && errno != EINTR)
                        _exit(1);
                if (ready == 0 && want_spare) {
                        spare_fork(sock);
                        continue;
                }
                if (idle_check(ready))
                        continue;
                if (pfd[0].revents & (POLLHUP | POLLERR))
                        _exit(0); /* the supervisor is gone: so is the sandbox */
                if (pfd[0].revents & POLLIN)
                        init_read_request(sock);
                if (pfd[2].fd >= 0 && pfd[2].fd == spare.taken_fd && pfd[2].revents)
                        spare_taken();
                /* only the execs that were polled: one started just now has no pfd entry yet */
                for (size_t i = 0; i + 3 < n && i < n_execs; i++) {
                        if (pfd[3 + i].fd < 0 || pfd[3 + i].fd != execs[i].status_fd ||
                                !(pfd[3 + i].revents & (POLLIN | POLLHUP)))
                                continue;
                        if (!init_exec_read(sock, &execs[i]))
                                execs[i].status_fd = safe_close(execs[i].status_fd);
                }
                if (pfd[1].revents & POLLIN) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof(si)) == sizeof(si))
                                if (si.ssi_signo != SIGCHLD)
                                        init_stop(sock, 2000); /* a signal to PID 1 from outside: stop */
                }
                (void)init_reap(sock);
        }
}
