/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "supervisor/slirp.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

#define SLIRP_READY_MS 10000
#define SLIRP_API_MS 5000

static char *find_slirp(void) {
        const char *path = getenv("PATH");
        _cleanup_free_ char *copy = strdup(path ? path : "/usr/bin:/bin");
        if (!copy)
                return NULL;
        for (char *save = NULL, *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                char *p = strprintf("%s/slirp4netns", d);
                if (p && access(p, X_OK) == 0)
                        return p;
                free(p);
        }
        return NULL;
}

/* In the forked child: fd 3 is --ready-fd, fd 4 is --exit-fd; everything else closed.  stdout
 * (its progress chatter) goes nowhere, stderr to err_w (slirp_drain_stderr). */
_Noreturn static void exec_slirp(
        const char *bin, pid_t target, const char *api_path, int ready_w, int exit_r, int err_w) {
        char pid_s[32];
        sigset_t none;
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (err_w >= 0 && err_w != 2 && dup2(err_w, 2) < 0)
                _exit(127);
        if (fd_move_to(ready_w, 3) < 0 || fd_move_to(exit_r, 4) < 0)
                _exit(127);
        int keep[] = { 3, 4 };
        (void)fd_close_all_except(3, keep, ELEMENTSOF(keep));
        int nul = open("/dev/null", O_RDWR);
        if (nul > 0) {
                (void)dup2(nul, 0);
                (void)dup2(nul, 1);
                (void)close(nul);
        }
        /* slirp4netns --enable-sandbox makes a mount namespace of its own, pivots into a tmpfs
         * and detaches the old root: as root (no user namespace of its own), that namespace is a
         * plain copy of ours, whose shared mounts (ip netns's /run/netns, a systemd host's whole
         * tree) stay peers of the host's, so the detach unmounted them on the host as well.  It
         * starts in a private copy instead; rootless, unshare fails and needs not succeed: its
         * user namespace makes the copy a slave that never propagates back. */
        if (unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                _exit(127);
        /* The supervisor blocks these for its signalfd and ignores SIGPIPE: exec keeps both. */
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        (void)signal(SIGPIPE, SIG_DFL);
        (void)snprintf(pid_s, sizeof(pid_s), "%d", (int)target);
        /* --disable-host-loopback: 10.0.2.2 must not reach the host's 127.0.0.1 (the firewall
         * inside blocks it too).  --enable-sandbox: slirp4netns drops its capabilities and sees
         * only /etc and /run; --enable-seccomp narrows its system calls. */
        const char *argv[] = { bin, "--configure", "--mtu=65520", "--disable-host-loopback", "--ready-fd=3",
                "--exit-fd=4", "--api-socket", api_path, "--enable-sandbox", "--enable-seccomp", pid_s,
                NET_TAP, NULL };
        execv(bin, (char **)argv);
        _exit(127);
}

int slirp_start(pid_t target, const char *api_path, slirp *ret, nook_error *err) {
        _cleanup_free_ char *bin = find_slirp();
        _cleanup_close_pair_ int ready[2] = { -1, -1 };
        int exitp[2] = { -1, -1 };
        char c;
        if (!bin)
                return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                        "The network needs slirp4netns, which is not installed (Debian: apt install slirp4netns)");
        /* slirp4netns opens the tap device with our host credentials (rootless: the caller's uid) */
        if (access("/dev/net/tun", R_OK | W_OK) < 0)
                return nook_err_errno(err, NOOK_E_MISSING_FEATURE,
                        "The network needs read and write access to /dev/net/tun (Debian's default is mode 0666)");
        if (strlen(api_path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
                return nook_err_set(err, NOOK_E_INVALID,
                        "The state folder '%s' is too deep for slirp4netns's API socket; use a shorter NOOK_HOME",
                        api_path);
        _cleanup_close_pair_ int errp[2] = { -1, -1 };
        if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(exitp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
                safe_close(exitp[0]);
                safe_close(exitp[1]);
                return nook_err_errno(err, NOOK_E_IO, "Cannot create pipes for slirp4netns");
        }
        (void)unlink(api_path);
        pid_t pid = fork();
        if (pid < 0) {
                safe_close(exitp[0]);
                safe_close(exitp[1]);
                return nook_err_errno(err, NOOK_E_IO, "Cannot start slirp4netns");
        }
        if (pid == 0)
                exec_slirp(bin, target, api_path, ready[1], exitp[0], errp[1]);
        ready[1] = safe_close(ready[1]);
        errp[1] = safe_close(errp[1]);
        safe_close(exitp[0]);
        (void)fcntl(errp[0], F_SETFL, O_NONBLOCK);
        *ret = (slirp){
                .pid = pid, .exit_fd = exitp[1], .err_fd = TAKE_FD(errp[0]), .api_path = strdup(api_path)
        };
        struct pollfd p = { .fd = ready[0], .events = POLLIN };
        int r = poll(&p, 1, SLIRP_READY_MS);
        if (r <= 0 || read(ready[0], &c, 1) != 1 || !ret->api_path) {
                char why[sizeof(ret->last_error)];
                slirp_stop(ret); /* its errors reach our log and last_error first */
                (void)snprintf(why, sizeof(why), "%s", ret->last_error);
                if (r == 0)
                        return nook_err_set(err, NOOK_E_TIMEOUT,
                                "slirp4netns did not configure the network within %d s",
                                SLIRP_READY_MS / 1000);
                return nook_err_set(err, NOOK_E_IO, "slirp4netns failed to configure the network%s%s",
                        why[0] ? ": " : "", why);
        }
        return 0;
}

/* One request on the API socket: the client shuts down its write side after the request. */
static int api_call(const slirp *s, json_t *req, json_t **ret, nook_error *err) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_free_ char *text = json_dumps(req, JSON_COMPACT);
        _cleanup_free_ char *reply = NULL;
        size_t len = 0;
        if (!text)
                return nook_err_oom(err);
        (void)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s->api_path);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot reach slirp4netns's API socket");
        struct timeval tv = { .tv_sec = SLIRP_API_MS / 1000 };
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (fd_write_all(fd, text, strlen(text)) < 0 || shutdown(fd, SHUT_WR) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot talk to slirp4netns");
        int r = fd_read_to_end(fd, 64 * 1024, &reply, &len, err);
        if (r < 0)
                return r;
        json_t *m = json_loads(reply, 0, NULL);
        if (!json_is_object(m)) {
                json_decref(m);
                return nook_err_set(err, NOOK_E_INTERNAL, "slirp4netns answered '%.200s'", reply);
        }
        *ret = m;
        return 0;
}

int slirp_add_hostfwd(const slirp *s, const net_port *p, nook_error *err) {
        json_t *reply = NULL;
        json_t *req = json_pack("{s:s, s:{s:s, s:s, s:i, s:s, s:i}}", "execute", "add_hostfwd", "arguments",
                "proto", "tcp", "host_addr", p->host_addr, "host_port", (int)p->host_port, "guest_addr",
                NET_SLIRP_GUEST, "guest_port", (int)p->guest_port);
        if (!req)
                return nook_err_oom(err);
        int r = api_call(s, req, &reply, err);
        json_decref(req);
        if (r < 0)
                return r;
        json_t *e = json_object_get(reply, "error");
        if (e) {
                const char *desc = json_string_value(json_object_get(e, "desc"));
                r = nook_err_set(err, NOOK_E_BUSY,
                        "Cannot publish %s:%u to the sandbox's port %u: %s (is the host port in use?)",
                        p->host_addr, p->host_port, p->guest_port, desc ? desc : "refused by slirp4netns");
        }
        json_decref(reply);
        return r;
}

/* What slirp4netns 1.x says on stderr that is not an error: progress, its settings, API
 * requests, and its warnings ("WARNING: Support for seccomp is experimental"). */
static bool stderr_noise(const char *line) {
        static const char *const noise[] = { "WARNING:", "sent tapfd=", "received tapfd=", "apifd event",
                "api_handler:", "Starting slirp", "* ", "slirp4netns " };
        if (line[0] == 0)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(noise); i++)
                if (strncmp(line, noise[i], strlen(noise[i])) == 0)
                        return true;
        return false;
}

void slirp_drain_stderr(slirp *s) {
        char buf[4096];
        ssize_t k;
        while (s->err_fd >= 0 && (k = read(s->err_fd, buf, sizeof(buf) - 1)) != 0) {
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                s->err_fd = safe_close(s->err_fd);
                        return;
                }
                buf[k] = 0;
                for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
                        if (!stderr_noise(l)) {
                                log_debug("slirp4netns: %s", l);
                                (void)snprintf(s->last_error, sizeof(s->last_error), "%s", l);
                        }
        }
        s->err_fd = safe_close(s->err_fd); /* it exited */
}

void slirp_stop(slirp *s) {
        if (s->pid > 0) {
                s->exit_fd = safe_close(s->exit_fd);
                /* slirp4netns exits when --exit-fd closes; it is our child, so waitpid cannot
                 * reach anyone else's process (ECHILD once the loop has reaped it). */
                uint64_t deadline = now_ms() + 2000;
                _cleanup_close_ int pidfd = pidfd_open_(s->pid);
                while (waitpid(s->pid, NULL, WNOHANG) == 0) {
                        if (now_ms() >= deadline) {
                                if (pidfd >= 0)
                                        (void)pidfd_send_signal_(pidfd, SIGKILL);
                                (void)waitpid(s->pid, NULL, 0);
                                break;
                        }
                        usleep(2000);
                }
        }
        s->exit_fd = safe_close(s->exit_fd);
        if (s->err_fd >= 0) {
                (void)fcntl(s->err_fd, F_SETFL, O_NONBLOCK);
                slirp_drain_stderr(s);
                s->err_fd = safe_close(s->err_fd);
        }
        if (s->api_path)
                (void)unlink(s->api_path);
        free(s->api_path);
        char last[sizeof(s->last_error)];
        memcpy(last, s->last_error, sizeof(last));
        *s = (slirp){ .exit_fd = -1, .err_fd = -1 };
        memcpy(s->last_error, last, sizeof(last));
}
