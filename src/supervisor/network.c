/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "supervisor/dns.h"
#include "supervisor/network.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

#define MAX_HOST_ADDRS 128
#define DNS_UPSTREAM_MS 5000
#define DNS_TTL_MIN 10
#define DNS_TTL_MAX 86400

/* ---- the helper in the sandbox's namespaces -------------------------------------------------- */

typedef int (*netns_fn)(const void *arg, int *ret_fd, nook_error *err);

/* Forks a child that joins the sandbox's user namespace, then its network namespace, and runs fn
 * there.  Joining the user namespace first matters both ways: rootless, it is what grants
 * CAP_NET_ADMIN over the sandbox's network namespace (we own that user namespace); rootful, it
 * drops host root for the sandbox's unprivileged root before touching anything.  The result (a
 * nook_error, and an fd fn made) comes back over a socketpair. */
static int in_netns(const sup_net *n, netns_fn fn, const void *arg, int *ret_fd, nook_error *err) {
        _cleanup_close_pair_ int sp[2] = { -1, -1 };
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create a socket pair");
        pid_t pid = fork();
        if (pid < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot fork the network helper");
        if (pid == 0) {
                nook_error e = { 0 };
                int fd = -1, r;
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (setns(n->userns_fd, CLONE_NEWUSER) < 0)
                        r = nook_err_errno(&e, NOOK_E_IO, "Cannot join the sandbox's user namespace");
                else if (setns(n->netns_fd, CLONE_NEWNET) < 0)
                        r = nook_err_errno(&e, NOOK_E_IO, "Cannot join the sandbox's network namespace");
                else
                        r = fn(arg, &fd, &e);
                (void)fd_send_with_fds(sp[1], &e, sizeof(e), fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
                _exit(r < 0 ? 1 : 0);
        }
        sp[1] = safe_close(sp[1]);
        nook_error e = { 0 };
        int fd = -1;
        size_t n_fds = 0;
        ssize_t k = fd_recv_with_fds(sp[0], &e, sizeof(e), &fd, 1, &n_fds);
        int st = 0;
        (void)pid_wait(pid, &st);
        if (k != (ssize_t)sizeof(e) || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                if (n_fds)
                        safe_close(fd);
                if (k == (ssize_t)sizeof(e) && e.code != NOOK_E_OK) {
                        e.msg[sizeof(e.msg) - 1] = 0;
                        *err = e;
                        return -e.code;
                }
                return nook_err_set(err, NOOK_E_INTERNAL, "The network helper died");
        }
        if (ret_fd)
                *ret_fd = n_fds ? fd : -1;
        else if (n_fds)
                safe_close(fd);
        return 0;
}

static int run_nft(const void *arg, int *ret_fd, nook_error *err) {
        return net_nft_run(arg, err);
}

/* The resolver's socket: 127.0.0.53:53 on the sandbox's loopback. */
static int make_dns_socket(const void *arg, int *ret_fd, nook_error *err) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53) };
        (void)inet_pton(AF_INET, NET_RESOLVER, &sa.sin_addr);
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the resolver's socket");
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                safe_close(fd);
                return nook_err_errno(err, NOOK_E_IO, "Cannot bind the resolver to %s:53", NET_RESOLVER);
        }
        *ret_fd = fd;
        return 0;
}

/* A listener for the egress gateway: 127.0.0.1, a port the kernel picks, inside the sandbox. */
static int make_egress_listener(const void *arg, int *ret_fd, nook_error *err) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create the egress gateway's listener");
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 512) < 0) {
                safe_close(fd);
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot bind the egress gateway's listener to 127.0.0.1");
        }
        *ret_fd = fd;
        return 0;
}

static int egress_listeners(sup_net *n, int fds[2], uint16_t ports[2], nook_error *err) {
        for (size_t i = 0; i < 2; i++) {
                struct sockaddr_in sa;
                socklen_t sl = sizeof(sa);
                fds[i] = -1;
                int r = in_netns(n, make_egress_listener, NULL, &fds[i], err);
                if (r < 0)
                        return r;
                if (fds[i] < 0 || getsockname(fds[i], (struct sockaddr *)&sa, &sl) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read the egress listener's port");
                ports[i] = ntohs(sa.sin_port);
        }
        return 0;
}

/* ---- setup ----------------------------------------------------------------------------------- */

/* Every address of the host (our network namespace): never reachable from the sandbox, even
 * when public. */
static size_t host_addrs(net_cidr *out, size_t max) {
        struct ifaddrs *ifa = NULL;
        size_t n = 0;
        if (getifaddrs(&ifa) < 0)
                return 0;
        for (struct ifaddrs *i = ifa; i && n < max; i = i->ifa_next) {
                if (!i->ifa_addr)
                        continue;
                if (i->ifa_addr->sa_family == AF_INET) {
                        out[n] = (net_cidr){ .family = AF_INET, .prefix = 32 };
                        memcpy(out[n++].addr, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
                } else if (i->ifa_addr->sa_family == AF_INET6) {
                        out[n] = (net_cidr){ .family = AF_INET6, .prefix = 128 };
                        memcpy(out[n++].addr, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
                }
        }
        freeifaddrs(ifa);
        return n;
}

static int install_firewall(sup_net *n, const sup_config *c, const uint16_t redirect[2], nook_error *err) {
        _cleanup_free_ net_rule *rules = calloc(strv_length(c->net_rules) + 1, sizeof(net_rule));
        net_cidr host[MAX_HOST_ADDRS];
        size_t n_rules = 0;
        int r;
        if (!rules)
                return nook_err_oom(err);
        STRV_FOREACH (s, c->net_rules)
                if ((r = net_rule_from_string(*s, &rules[n_rules++], err)) < 0)
                        return r;
        net_policy p = { .mode = n->mode,
                .rules = rules,
                .n_rules = n_rules,
                .domains = n->mode == NET_MODE_POLICY,
                .host_addrs = host,
                .n_host_addrs = host_addrs(host, ELEMENTSOF(host)),
                .redirect_http = redirect ? redirect[0] : 0,
                .redirect_https = redirect ? redirect[1] : 0 };
        _cleanup_free_ char *text = NULL;
        if ((r = net_ruleset_build(&p, &text, err)) < 0)
                return r;
        return in_netns(n, run_nft, text, NULL, err);
}

/* The host's resolver: the first nameserver of our /etc/resolv.conf. */
static int open_upstream(sup_net *n, nook_error *err) {
        char line[512];
        struct sockaddr_storage ss = { 0 };
        socklen_t sl = 0;
        FILE *f = fopen("/etc/resolv.conf", "re");
        while (f && !sl && fgets(line, sizeof(line), f)) {
                char addr[128];
                struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
                if (sscanf(line, " nameserver %127s", addr) != 1)
                        continue;
                if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
                        s4->sin_family = AF_INET;
                        s4->sin_port = htons(53);
                        sl = sizeof(*s4);
                } else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
                        s6->sin6_family = AF_INET6;
                        s6->sin6_port = htons(53);
                        sl = sizeof(*s6);
                }
        }
        if (f)
                fclose(f);
        if (!sl)
                return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                        "The domain allowlist needs a nameserver in the host's /etc/resolv.conf");
        n->upstream_fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (n->upstream_fd < 0 || connect(n->upstream_fd, (struct sockaddr *)&ss, sl) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot reach the host's resolver");
        return 0;
}

void sup_net_open_ns(sup_net *n, const sup_config *c, pid_t init_pid) {
        if (n->have_ns || net_mode_from_string(c->network ? c->network : "off") <= NET_MODE_OFF)
                return;
        n->userns_fd = proc_ns_open(init_pid, "user");
        n->netns_fd = proc_ns_open(init_pid, "net");
        n->have_ns = true;
}

int sup_net_start(sup_net *n, const sup_config *c, pid_t init_pid, const char *run_dir, int *egress_fds,
        nook_error *err) {
        uint16_t ports[2] = { 0, 0 };
        int r;
        sup_net_open_ns(n, c, init_pid);
        *n = (sup_net){ .mode = net_mode_from_string(c->network ? c->network : "off"),
                .have_ns = n->have_ns,
                .userns_fd = n->have_ns ? n->userns_fd : -1,
                .netns_fd = n->have_ns ? n->netns_fd : -1,
                .slirp = { .exit_fd = -1, .err_fd = -1 },
                .dns_fd = -1,
                .upstream_fd = -1 };
        if (n->mode < 0)
                return nook_err_set(err, NOOK_E_INVALID, "config: unknown network mode '%s'", c->network);
        if (n->mode == NET_MODE_OFF)
                return 0;
        n->started = true;
        if (n->userns_fd < 0 || n->netns_fd < 0)
                return nook_err_set(err, NOOK_E_IO, "Cannot open the sandbox's namespaces");
        /* the gateway's listeners first: the redirect names their ports */
        if (egress_fds) {
                r = egress_listeners(n, egress_fds, ports, err);
                if (r < 0)
                        return r;
        }
        r = install_firewall(n, c, egress_fds ? ports : NULL, err);
        if (r < 0)
                return r;
        if (n->mode == NET_MODE_POLICY) {
                n->domains = strv_copy((const char *const *)c->net_domains);
                if (!n->domains)
                        return nook_err_oom(err);
                r = in_netns(n, make_dns_socket, NULL, &n->dns_fd, err);
                if (r < 0)
                        return r;
                /* with no domain allowed, every query is refused: no upstream needed */
                if (n->domains[0]) {
                        r = open_upstream(n, err);
                        if (r < 0)
                                return r;
                }
        }
        _cleanup_free_ char *api = strprintf("%s/slirp.sock", run_dir);
        if (!api)
                return nook_err_oom(err);
        r = slirp_start(init_pid, api, &n->slirp, err);
        if (r < 0)
                return r;
        STRV_FOREACH (s, c->ports) {
                net_port port;
                r = net_port_parse(*s, &port, err);
                if (r < 0)
                        return r;
                r = slirp_add_hostfwd(&n->slirp, &port, err);
                if (r < 0)
                        return r;
        }
        log_debug("network '%s' up (slirp4netns pid %d)", net_mode_to_string(n->mode), (int)n->slirp.pid);
        return 0;
}

/* ---- the policy resolver --------------------------------------------------------------------- */

static void reply_refused(sup_net *n, uint8_t *msg, size_t len, const struct sockaddr *to, socklen_t tl) {
        size_t k = dns_make_refused(msg, len);
        if (k)
                (void)sendto(n->dns_fd, msg, k, MSG_DONTWAIT, to, tl);
}

static void handle_query(sup_net *n) {
        uint8_t msg[4096];
        char name[DNS_NAME_MAX];
        uint16_t qtype;
        struct sockaddr_storage from;
        socklen_t fl = sizeof(from);
        ssize_t k = recvfrom(n->dns_fd, msg, sizeof(msg), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (k < DNS_HEADER)
                return;
        if (dns_parse_query(msg, (size_t)k, name, &qtype) < 0 || n->upstream_fd < 0 ||
                !net_domain_allowed(n->domains, name)) {
                log_debug("resolver: refused '%s'", name);
                reply_refused(n, msg, (size_t)k, (struct sockaddr *)&from, fl);
                return;
        }
        dns_pending *slot = NULL;
        uint64_t now = now_ms();
        for (size_t i = 0; i < SUP_NET_PENDING && !slot; i++)
                if (n->pending[i].upstream_id == 0 || n->pending[i].deadline < now)
                        slot = &n->pending[i];
        uint16_t id = 0;
        while (id == 0)
                if (getrandom(&id, sizeof(id), 0) != sizeof(id))
                        return;
        if (!slot) {
                reply_refused(n, msg, (size_t)k, (struct sockaddr *)&from, fl);
                return;
        }
        *slot = (dns_pending){ .upstream_id = id,
                .client_id = (uint16_t)(msg[0] << 8 | msg[1]),
                .client = from,
                .client_len = fl,
                .deadline = now + DNS_UPSTREAM_MS };
        /* a random id per forwarded query: the upstream's answer is matched to it */
        msg[0] = (uint8_t)(id >> 8);
        msg[1] = (uint8_t)id;
        if (send(n->upstream_fd, msg, (size_t)k, MSG_DONTWAIT) < 0)
                slot->upstream_id = 0;
}

typedef struct allow_batch {
        const dns_addrs *a;
} allow_batch;

static int run_allow(const void *arg, int *ret_fd, nook_error *err) {
        const dns_addrs *a = ((const allow_batch *)arg)->a;
        _cleanup_free_ char *all = strdup("");
        if (!all)
                return nook_err_oom(err);
        for (size_t i = 0; i < a->n; i++) {
                uint32_t ttl = a->ttl[i] < DNS_TTL_MIN ? DNS_TTL_MIN
                        : a->ttl[i] > DNS_TTL_MAX      ? DNS_TTL_MAX
                                                       : a->ttl[i];
                _cleanup_free_ char *cmd = NULL;
                int r = net_ruleset_allow_addr(&a->addr[i], ttl, &cmd, err);
                if (r < 0)
                        return r;
                char *next = strprintf("%s%s", all, cmd);
                if (!next)
                        return nook_err_oom(err);
                free(all);
                all = next;
        }
        return net_nft_run(all, err);
}

/* An upstream answer: open the firewall for its addresses first, then pass it on, so the
 * workload's connect never races the rule. */
static void handle_answer(sup_net *n) {
        uint8_t msg[4096];
        dns_addrs a;
        nook_error err = { 0 };
        ssize_t k = recv(n->upstream_fd, msg, sizeof(msg), MSG_DONTWAIT);
        if (k < DNS_HEADER)
                return;
        uint16_t id = (uint16_t)(msg[0] << 8 | msg[1]);
        dns_pending *slot = NULL;
        for (size_t i = 0; i < SUP_NET_PENDING && !slot; i++)
                if (n->pending[i].upstream_id == id)
                        slot = &n->pending[i];
        if (!slot)
                return; /* late, duplicate or forged */
        slot->upstream_id = 0;
        msg[0] = (uint8_t)(slot->client_id >> 8);
        msg[1] = (uint8_t)slot->client_id;
        if (dns_parse_answer(msg, (size_t)k, &a) < 0) {
                reply_refused(n, msg, (size_t)k, (struct sockaddr *)&slot->client, slot->client_len);
                return;
        }
        if (a.n > 0 && in_netns(n, run_allow, &(allow_batch){ .a = &a }, NULL, &err) < 0) {
                log_debug("resolver: cannot open the firewall: %s", err.msg);
                reply_refused(n, msg, (size_t)k, (struct sockaddr *)&slot->client, slot->client_len);
                return;
        }
        (void)sendto(
                n->dns_fd, msg, (size_t)k, MSG_DONTWAIT, (struct sockaddr *)&slot->client, slot->client_len);
}

size_t sup_net_pollfds(const sup_net *n, struct pollfd *pfd) {
        size_t k = 0;
        if (!n->started)
                return 0;
        if (n->dns_fd >= 0)
                pfd[k++] = (struct pollfd){ .fd = n->dns_fd, .events = POLLIN };
        if (n->upstream_fd >= 0)
                pfd[k++] = (struct pollfd){ .fd = n->upstream_fd, .events = POLLIN };
        if (n->slirp.err_fd >= 0)
                pfd[k++] = (struct pollfd){ .fd = n->slirp.err_fd, .events = POLLIN };
        return k;
}

void sup_net_dispatch(sup_net *n, const struct pollfd *pfd, size_t n_pfd) {
        for (size_t i = 0; i < n_pfd; i++) {
                if (pfd[i].fd == n->slirp.err_fd && pfd[i].fd >= 0 && pfd[i].revents) {
                        slirp_drain_stderr(&n->slirp);
                        continue;
                }
                if (!(pfd[i].revents & POLLIN))
                        continue;
                if (pfd[i].fd == n->dns_fd)
                        handle_query(n);
                else if (pfd[i].fd == n->upstream_fd)
                        handle_answer(n);
        }
}

void sup_net_stop(sup_net *n) {
        if (n->have_ns && !n->started) {
                n->userns_fd = safe_close(n->userns_fd);
                n->netns_fd = safe_close(n->netns_fd);
                n->have_ns = false;
        }
        if (!n->started)
                return;
        slirp_stop(&n->slirp);
        n->userns_fd = safe_close(n->userns_fd);
        n->netns_fd = safe_close(n->netns_fd);
        n->dns_fd = safe_close(n->dns_fd);
        n->upstream_fd = safe_close(n->upstream_fd);
        strv_free(n->domains);
        n->domains = NULL;
        n->started = false;
}
