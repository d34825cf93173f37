/* SPDX-License-Identifier: Apache-2.0 */
/* nook-egress: a sandbox's egress gateway (docs/design/egress.md).  Started by the supervisor
 * with fd 3 a SOCK_SEQPACKET socket to it; speaks the protocol below, then serves the two
 * listeners (guest port 80 and 443) until fd 3 closes.
 *   supervisor -> gateway: config JSON + the audit log fd [+ a predecessor's CA: a restart]
 *   gateway -> supervisor: {"caCertPem": "..."} [+ the CA's memfd, when it made it] or {"error": "..."}
 *   supervisor -> gateway: {"listen":[80,443]} + two listening sockets [+ cgroup v1 tasks files]
 *   gateway -> supervisor: {"ready":true}
 * One thread per guest connection: blocking TLS and HTTP code reads top to bottom, and an idle
 * gateway is one thread in poll(). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nook.h"
#include "egress/audit.h"
#include "egress/config.h"
#include "egress/proxy.h"
#include "egress/tls.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/idlemem.h"
#include "util/macro.h"
#include "util/proc.h"

#define SUP_FD 3
#define MAX_CONNS 512
#define MAX_JOIN_FDS 6 /* with the two listeners, what one message carries (util/fd.c: 8) */
#define THREAD_STACK ((size_t)256 * 1024)

static atomic_int active_conns;

typedef struct conn_arg {
        const egress_ctx *ctx;
        int fd;
        bool https;
} conn_arg;

static int send_json_fd(json_t *o, int fd) {
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!s)
                return -ENOMEM;
        int r = fd_send_with_fds(SUP_FD, s, strlen(s), fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
        free(s);
        return r;
}

static int send_json(json_t *o) {
        return send_json_fd(o, -1);
}

static int send_error(const char *msg) {
        fprintf(stderr, "nook-egress: %s\n", msg);
        return send_json(json_pack("{s:s}", "error", msg));
}

/* Message 1: the config and the audit log fd, and when the supervisor restarts a gateway that
 * died, its predecessor's CA (*ret_seed, else -1). */
static int recv_config(egress_config **ret_cfg, int *ret_audit, int *ret_seed, nook_error *err) {
        char *buf = malloc(EGRESS_CONFIG_MAX + 1);
        int fds[2];
        size_t n_fds = 0;
        if (!buf)
                return nook_err_set(err, NOOK_E_NOMEM, "Out of memory");
        ssize_t n = fd_recv_with_fds(SUP_FD, buf, EGRESS_CONFIG_MAX + 1, fds, 2, &n_fds);
        int r = 0;
        if (n <= 0 || n_fds < 1)
                r = nook_err_set(err, NOOK_E_INVALID,
                        "the first message on fd 3 must be the configuration with the audit log fd");
        else
                r = egress_config_parse(buf, (size_t)n, ret_cfg, err);
        explicit_bzero(buf, n > 0 ? (size_t)n : 0);
        free(buf);
        if (r < 0) {
                for (size_t i = 0; i < n_fds; i++)
                        close(fds[i]);
                return r;
        }
        *ret_audit = fds[0];
        *ret_seed = n_fds > 1 ? fds[1] : -1;
        return 0;
}

/* The supervisor's cgroup v1 `tasks` files of the sandbox (supervisor/egress.c): "0" moves the
 * writing thread, which is all of us (no connection thread exists yet), into the sandbox's
 * cgroup without the kernel's global lock that a pid written by another process takes. */
static int join_cgroup(const int *fds, size_t n, nook_error *err) {
        for (size_t i = 0; i < n; i++)
                if (write(fds[i], "0", 1) != 1)
                        return nook_err_errno(err, NOOK_E_IO, "cannot join the sandbox's cgroup");
        return 0;
}

/* Message 3: the two listeners, port 80's first, then the cgroup files to join, if any. */
static int recv_listeners(int ret_fds[2], nook_error *err) {
        char buf[256];
        int fds[2 + MAX_JOIN_FDS];
        size_t n_fds = 0;
        ssize_t n = fd_recv_with_fds(SUP_FD, buf, sizeof(buf) - 1, fds, ELEMENTSOF(fds), &n_fds);
        int r;
        if (n <= 0 || n_fds < 2)
                r = nook_err_set(err, NOOK_E_INVALID,
                        "the third message on fd 3 must be {\"listen\":[80,443]} with two listening sockets");
        else
                r = join_cgroup(fds + 2, n_fds - 2, err);
        /* the cgroup files are done with; the listeners too, after an error */
        for (size_t i = r < 0 ? 0 : 2; i < n_fds; i++)
                close(fds[i]);
        if (r < 0)
                return r;
        ret_fds[0] = fds[0];
        ret_fds[1] = fds[1];
        /* poll() said ready but the connection may be gone by accept(): never block there. */
        for (int i = 0; i < 2; i++) {
                int fl = fcntl(ret_fds[i], F_GETFL);
                if (fl < 0 || fcntl(ret_fds[i], F_SETFL, fl | O_NONBLOCK) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "cannot make listener %d non-blocking", i);
        }
        return 0;
}

static void *conn_thread(void *p) {
        conn_arg a = *(conn_arg *)p;
        free(p);
        egress_conn_run(a.ctx, a.fd, a.https);
        atomic_fetch_sub(&active_conns, 1);
        return NULL;
}

static void accept_one(const egress_ctx *ctx, int lfd, bool https) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return;
        if (atomic_load(&active_conns) >= MAX_CONNS) {
                close(fd);
                return;
        }
        conn_arg *a = malloc(sizeof(*a));
        pthread_attr_t attr;
        pthread_t t;
        if (!a) {
                close(fd);
                return;
        }
        *a = (conn_arg){ .ctx = ctx, .fd = fd, .https = https };
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, THREAD_STACK);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        atomic_fetch_add(&active_conns, 1);
        if (pthread_create(&t, &attr, conn_thread, a) != 0) {
                atomic_fetch_sub(&active_conns, 1);
                close(fd);
                free(a);
        }
        pthread_attr_destroy(&attr);
}

/* Until fd 3 hangs up. */
static void serve(const egress_ctx *ctx, const int lfds[2]) {
        struct pollfd p[3] = {
                { .fd = SUP_FD, .events = POLLIN },
                { .fd = lfds[0], .events = POLLIN },
                { .fd = lfds[1], .events = POLLIN },
        };
        idle_release(IDLE_RELEASE_HEAP | IDLE_RELEASE_FILE);
        bool served = false; /* since the last trim */
        for (;;) {
                int n = poll(p, 3, 10 * 1000);
                if (egress_pool_prune() > 0)
                        served = true;
                /* 10 s without a new connection, none open: heap and library pages go back */
                if (n == 0 && served && atomic_load(&active_conns) == 0) {
                        idle_release(IDLE_RELEASE_HEAP | IDLE_RELEASE_FILE);
                        served = false;
                }
                if (n == 0 || (n < 0 && errno == EINTR))
                        continue;
                served = true;
                if (n < 0 || (p[0].revents & (POLLIN | POLLHUP | POLLERR)))
                        return;
                if (p[1].revents & POLLIN)
                        accept_one(ctx, lfds[0], false);
                if (p[2].revents & POLLIN)
                        accept_one(ctx, lfds[1], true);
        }
}

static int setup(egress_config **cfg, egress_tls **tls, int lfds[2], nook_error *err) {
        int audit_fd = -1;
        _cleanup_close_ int seed = -1, seed_out = -1;
        int r = recv_config(cfg, &audit_fd, &seed, err);
        if (r < 0)
                return r;
        /* the supervisor started us off its CPU and sent the config after that (supervisor/
         * egress.c:spawn_gateway): its whole mask back */
        proc_take_parent_cpus();
        egress_audit_init(audit_fd, (*cfg)->sandbox);
        r = egress_tls_new((*cfg)->sandbox, (*cfg)->extra_ca_pem, seed, tls, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *pem = NULL;
        r = egress_tls_ca_pem(*tls, &pem, err);
        /* a CA made here goes to the supervisor too, for a successor (egress_tls_seed_memfd) */
        if (r >= 0 && seed < 0)
                r = egress_tls_seed_memfd(*tls, &seed_out, err);
        if (r < 0)
                return r;
        r = send_json_fd(json_pack("{s:s}", "caCertPem", pem), seed_out);
        if (r < 0)
                return nook_err_set(
                        err, NOOK_E_IO, "cannot send the CA to the supervisor: %s", strerror(-r));
        r = recv_listeners(lfds, err);
        if (r < 0)
                return r;
        r = send_json(json_pack("{s:b}", "ready", 1));
        if (r < 0)
                return nook_err_set(err, NOOK_E_IO, "cannot send ready to the supervisor: %s", strerror(-r));
        return 0;
}

int main(int argc, char **argv) {
        egress_config *cfg = NULL;
        egress_tls *tls = NULL;
        int lfds[2] = { -1, -1 };
        nook_error err = {};

        /* No core dumps, no ptrace by the same user, no /proc/PID/mem: the secrets are here. */
        (void)prctl(PR_SET_DUMPABLE, 0);
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        (void)signal(SIGPIPE, SIG_IGN);
        /* One malloc arena for every thread: glibc gives each new thread an arena of its own (up
         * to 8 per core), and what a connection's thread left live there (OpenSSL's contexts,
         * the leaf cache) pins that arena's pages; after four concurrent downloads an idle
         * gateway kept 3.3 MiB instead of 2.0.  Nothing on the relay path is malloc-bound. */
        (void)mallopt(M_ARENA_MAX, 1);
        if (argc != 1) {
                fprintf(stderr,
                        "nook-egress: takes no arguments; the supervisor starts it with fd 3 (see docs/design/egress.md)\n");
                return 2;
        }
        int r = setup(&cfg, &tls, lfds, &err);
        if (r < 0) {
                (void)send_error(err.msg);
                egress_config_free(cfg);
                return 1;
        }
        egress_ctx ctx = { .cfg = cfg, .tls = tls };
        serve(&ctx, lfds);
        /* Threads may still be relaying: the values are wiped in place (not freed under them)
         * and the process ends at once. */
        egress_config_wipe(cfg);
        _exit(0);
}
