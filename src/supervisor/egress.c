/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/userns.h"
#include "supervisor/egress.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

#define EGRESS_REPLY_MS 15000
#define EGRESS_MSG_MAX ((size_t)200 * 1024) /* one datagram: below the default unix socket buffer */
#define EGRESS_REPLY_MAX ((size_t)64 * 1024)
#define NOBODY 65534

/* A secret whose value this start does not have (a sticky sandbox started again: values are
 * never stored) goes with "value": null: the gateway never substitutes it and blocks its
 * placeholder wherever it is sent, with a 403 and an audit reason saying to create the sandbox
 * again with the value. */
static json_t *secret_entry(json_t *x, json_t *vals) {
        json_t *s = json_deep_copy(x);
        json_t *v = json_object_get(vals, json_string_value(json_object_get(x, "name")));
        if (!s)
                return NULL;
        json_object_set_new(s, "value", json_is_string(v) ? json_string(json_string_value(v)) : json_null());
        return s;
}

/* The gateway's config message: contract message 1.  Values join the stored secret entries
 * here, in memory only. */
static json_t *config_msg(const sup_config *c, const char *values, nook_error *err) {
        json_t *vals = values ? json_loads(values, 0, NULL) : NULL;
        json_t *secrets = json_array(), *x;
        size_t i;
        if (values && !json_is_object(vals)) {
                json_decref(vals);
                json_decref(secrets);
                (void)nook_err_set(
                        err, NOOK_E_INVALID, "The secrets handed to the supervisor are not a JSON object");
                return NULL;
        }
        json_array_foreach(json_object_get(c->egress, "secrets"), i, x)
                json_array_append_new(secrets, secret_entry(x, vals));
        json_decref(vals);
        json_t *m = json_pack("{s:s, s:s, s:o, s:O}", "sandbox", c->name, "mode",
                c->network ? c->network : "off", "secrets", secrets, "allowHttp",
                json_object_get(c->egress, "allowHttp"));
        json_t *ca = json_object_get(c->egress, "extraCaPem");
        if (m && json_is_string(ca))
                json_object_set(m, "extraCaPem", ca);
        if (!m)
                (void)nook_err_oom(err);
        return m;
}

/* In the forked child: becomes nook-egress.  Only async-signal-safe calls and exec. */
_noreturn_ static void exec_gateway(const char *program, int sock, bool rootful) {
        sigset_t none;
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* our signalfd's blocked signals and ignored SIGPIPE would outlive the exec */
        sigemptyset(&none);
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        (void)signal(SIGPIPE, SIG_DFL);
        if (fd_move_to(sock, 3) < 0)
                _exit(127);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (nul >= 0)
                (void)dup2(nul, 0);
        (void)fd_close_all_except(4, NULL, 0);
        /* Rootful, the gateway needs no privilege at all: it holds the sockets it is given and
         * connects out.  Its pdeath signal survives only if set again after the id change. */
        if (rootful && (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0))
                _exit(126);
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        (void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        char *argv[] = { (char *)"nook-egress", NULL };
        char *envp[] = { (char *)"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL };
        execve(program, argv, envp);
        _exit(127);
}

static int send_msg(int sock, json_t *m, const int *fds, size_t n_fds, nook_error *err) {
        char *text = json_dumps(m, JSON_COMPACT);
        if (!text)
                return nook_err_oom(err);
        size_t len = strlen(text);
        int r = len > EGRESS_MSG_MAX ? -EMSGSIZE : fd_send_with_fds(sock, text, len, fds, n_fds);
        explicit_bzero(text, len);
        free(text);
        if (r == -EMSGSIZE)
                return nook_err_set(err, NOOK_E_INVALID,
                        "The egress gateway's config is larger than %zu bytes (fewer or shorter secrets, rules or CA)",
                        EGRESS_MSG_MAX);
        if (r < 0)
                return nook_err_errnum(
                        err, NOOK_E_INTERNAL, -r, "Cannot talk to the egress gateway (it died?)");
        return 0;
}

/* One reply within EGRESS_REPLY_MS; {"error": "..."} becomes the error. */
static int recv_reply(int sock, json_t **ret, nook_error *err) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        int k = poll(&p, 1, EGRESS_REPLY_MS);
        if (k == 0)
                return nook_err_set(err, NOOK_E_TIMEOUT, "The egress gateway did not answer within %d s",
                        EGRESS_REPLY_MS / 1000);
        _cleanup_free_ char *buf = malloc(EGRESS_REPLY_MAX + 1);
        if (!buf)
                return nook_err_oom(err);
        int fds[1];
        size_t n_fds = 0;
        ssize_t n = fd_recv_with_fds(sock, buf, EGRESS_REPLY_MAX, fds, 1, &n_fds);
        if (n_fds)
                safe_close(fds[0]);
        if (n <= 0)
                return nook_err_set(err, NOOK_E_INTERNAL,
                        "The egress gateway exited during setup; see 'nook logs --system NAME'");
        buf[n] = 0;
        json_t *m = json_loads(buf, 0, NULL);
        if (!json_is_object(m)) {
                json_decref(m);
                return nook_err_set(
                        err, NOOK_E_INTERNAL, "The egress gateway sent a message that is not a JSON object");
        }
        const char *e = json_string_value(json_object_get(m, "error"));
        if (e) {
                (void)nook_err_set(err, NOOK_E_INVALID, "egress gateway: %.400s", e);
                json_decref(m);
                return -NOOK_E_INVALID;
        }
        *ret = m;
        return 0;
}

static int append_ca(const sup_config *c, const char *pem, nook_error *err) {
        const char *path = json_string_value(json_object_get(c->egress, "caBundle"));
        if (!path)
                return nook_err_set(err, NOOK_E_INVALID, "config: egress.caBundle is missing");
        if (!startswith(pem, "-----BEGIN CERTIFICATE-----") || strlen(pem) > 16384)
                return nook_err_set(
                        err, NOOK_E_INTERNAL, "The egress gateway's CA is not one PEM certificate");
        _cleanup_close_ int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the sandbox's CA bundle '%s'", path);
        size_t len = strlen(pem);
        int r = fd_write_all(fd, pem, len);
        if (r >= 0 && (len == 0 || pem[len - 1] != '\n'))
                r = fd_write_all(fd, "\n", 1);
        return r < 0 ? nook_err_errnum(err, NOOK_E_IO, -r, "Cannot write the sandbox's CA bundle '%s'", path)
                     : 0;
}

static int spawn_gateway(sup_egress *e, const char *program, nook_error *err) {
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the egress gateway's socket");
        bool rootful = iso_rootful();
        pid_t pid = fork();
        if (pid < 0) {
                safe_close(sp[0]);
                safe_close(sp[1]);
                return nook_err_errno(err, NOOK_E_IO, "Cannot fork the egress gateway");
        }
        if (pid == 0)
                exec_gateway(program, sp[1], rootful);
        /* its exec and its loading (OpenSSL, nghttp2) beside our setup of the init, not after it;
         * it takes our whole mask back once it has its config, which we send after this */
        proc_start_off_our_cpu(pid, NULL);
        safe_close(sp[1]);
        e->pid = pid;
        e->sock = sp[0];
        log_debug("egress gateway '%s' started, pid %d", program, (int)pid);
        return 0;
}

int sup_egress_start(
        sup_egress *e, const sup_config *c, const char *state_dir, const char *values, nook_error *err) {
        if (!c->egress)
                return 0;
        const char *program = json_string_value(json_object_get(c->egress, "program"));
        if (!program || program[0] != '/')
                return nook_err_set(err, NOOK_E_INVALID, "config: egress.program must be an absolute path");
        _cleanup_free_ char *logp = strprintf("%s/egress.log", state_dir);
        if (!logp)
                return nook_err_oom(err);
        _cleanup_close_ int logfd = open(logp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (logfd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the egress audit log '%s'", logp);
        json_t *m = config_msg(c, values, err);
        if (!m)
                return -NOOK_E_INVALID;
        int r = spawn_gateway(e, program, err);
        if (r >= 0)
                r = send_msg(e->sock, m, &logfd, 1, err);
        json_decref(m);
        return r < 0 ? nook_err_wrap(err, "starting the egress gateway") : 0;
}

/* Message 2: the CA, appended to the bundle libnook already made in the writable layer.  The
 * overlay is mounted by now; the file exists in the upper layer, so this changes only the data
 * of the inode the overlay already points at (no name appears or goes under it). */
static int recv_ca(sup_egress *e, const sup_config *c, nook_error *err) {
        json_t *reply = NULL;
        int r = recv_reply(e->sock, &reply, err);
        if (r >= 0) {
                const char *pem = json_string_value(json_object_get(reply, "caCertPem"));
                r = pem ? append_ca(c, pem, err)
                        : nook_err_set(err, NOOK_E_INTERNAL, "The egress gateway sent no CA certificate");
        }
        json_decref(reply);
        return r;
}

int sup_egress_listen(sup_egress *e, const sup_config *c, const int fds[2], nook_error *err) {
        int r = recv_ca(e, c, err);
        if (r < 0)
                return nook_err_wrap(err, "starting the egress gateway");
        json_t *m = json_pack("{s:[i,i]}", "listen", 80, 443);
        if (!m)
                return nook_err_oom(err);
        r = send_msg(e->sock, m, fds, 2, err);
        json_decref(m);
        json_t *reply = NULL;
        if (r >= 0)
                r = recv_reply(e->sock, &reply, err);
        if (r >= 0 && !json_is_true(json_object_get(reply, "ready")))
                r = nook_err_set(err, NOOK_E_INTERNAL, "The egress gateway did not report ready");
        json_decref(reply);
        if (r >= 0)
                log_debug("egress gateway ready");
        return r < 0 ? nook_err_wrap(err, "starting the egress gateway") : 0;
}

size_t sup_egress_pollfd(const sup_egress *e, struct pollfd *p) {
        if (e->sock < 0)
                return 0;
        *p = (struct pollfd){ .fd = e->sock, .events = POLLIN };
        return 1;
}

void sup_egress_dispatch(sup_egress *e, short revents) {
        char buf[256];
        if (!revents || e->sock < 0)
                return;
        /* nothing more is expected after "ready": anything else, or EOF, means it is gone */
        if ((revents & POLLIN) && recv(e->sock, buf, sizeof(buf), MSG_DONTWAIT) > 0)
                return;
        fprintf(stderr,
                "nook-supervisor: the egress gateway is gone; the sandbox's HTTP and HTTPS egress now fails (the redirect stays)\n");
        e->sock = safe_close(e->sock);
}

bool sup_egress_reaped(sup_egress *e, pid_t p, int status) {
        if (e->pid <= 0 || p != e->pid)
                return false;
        if (WIFSIGNALED(status))
                fprintf(stderr, "nook-supervisor: the egress gateway (pid %d) was killed by signal %d\n",
                        (int)p, WTERMSIG(status));
        else
                fprintf(stderr, "nook-supervisor: the egress gateway (pid %d) exited with status %d\n",
                        (int)p, WEXITSTATUS(status));
        e->pid = 0;
        return true;
}

void sup_egress_stop(sup_egress *e) {
        e->sock = safe_close(e->sock);
        if (e->pid <= 0)
                return;
        /* EOF on fd 3 ends it; a gateway that does not go within 200 ms is killed.  A pidfd turns
         * readable the moment it exits (no polling interval added to every stop). */
        _cleanup_close_ int pfd = pidfd_open_(e->pid);
        struct pollfd p = { .fd = pfd, .events = POLLIN };
        if (pfd < 0 || poll(&p, 1, 200) <= 0)
                (void)kill(e->pid, SIGKILL);
        (void)pid_wait(e->pid, NULL);
        e->pid = 0;
}
