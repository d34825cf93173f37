/* SPDX-License-Identifier: Apache-2.0 */
/* nook-supervisor: started by libnook with exec (never a bare fork in a threaded caller),
 *   nook-supervisor --state DIR [--run RUNDIR] --config-fd C --ready-fd N [--lifeline-fd M | --stop-lifeline-fd M] [--secrets-fd S]
 *                   [--client-fd K]
 * in its own session (POSIX_SPAWN_SETSID).  It does not fork again to detach: it stays the
 * starting process's child, which reaps it once it is gone (libnook keeps a list), or is
 * re-parented when that process exits first (a CLI call).  The daemonizing fork cost ~2.5 ms
 * of a ~17 ms create on the 2-vCPU test machine (bench/README.md).  RUNDIR (default: DIR) holds
 * what needs no durability: ctl.sock, supervisor.log, slirp.sock (sandbox/rundir.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <jansson.h>

#include "nook.h"
#include "supervisor/config.h"
#include "supervisor/sup.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

#define SECRETS_MAX ((size_t)1024 * 1024)

/* A descriptor number given on our command line; -1 if it is not one. */
static int parse_fd(const char *s) {
        char *end = NULL;
        errno = 0;
        long v = strtol(s, &end, 10);
        return errno || end == s || *end || v < 0 || v > 65535 ? -1 : (int)v;
}

static int usage(void) {
        fprintf(stderr,
                "usage: nook-supervisor --state DIR [--run RUNDIR] --config-fd C --ready-fd N [--lifeline-fd M | --stop-lifeline-fd M] [--secrets-fd S] [--client-fd K]\n"
                "Started by nook; not meant to be run by hand.\n");
        return 2;
}

static void redirect_stdio(const char *run_dir) {
        _cleanup_free_ char *log = strprintf("%s/supervisor.log", run_dir);
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        int lfd = log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
        if (nul >= 0)
                (void)dup2(nul, 0);
        if (lfd >= 0) {
                (void)dup2(lfd, 1);
                (void)dup2(lfd, 2);
        } else if (nul >= 0) {
                (void)dup2(nul, 1);
                (void)dup2(nul, 2);
        }
        safe_close(nul);
        safe_close(lfd);
}

/* A config we refuse is libnook's bug: the reason goes to its log and to the caller. */
static int report_bad_config(int ready_fd, const nook_error *err) {
        fprintf(stderr, "nook-supervisor: %s\n", err->msg);
        _cleanup_free_ char *msg = strprintf("Cannot read the sandbox config: %s", err->msg);
        json_t *m = json_pack("{s:b, s:s, s:s}", "ok", 0, "code",
                nook_errc_to_string(err->code ? err->code : NOOK_E_NOMEM), "message",
                msg ? msg : "Cannot read the sandbox config");
        _cleanup_free_ char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
        json_decref(m);
        dprintf(ready_fd, "%s\n",
                text ? text
                     : "{\"ok\":false,\"code\":\"nomem\",\"message\":\"Cannot read the sandbox config\"}");
        return 1;
}

int main(int argc, char **argv) {
        const char *state_dir = NULL, *run_dir = NULL;
        int ready_fd = -1, lifeline_fd = -1, secrets_fd = -1, config_fd = -1, client_fd = -1;
        bool lifeline_stops = false;
        nook_error err = { 0 };

        for (int i = 1; i + 1 < argc; i += 2) {
                if (streq(argv[i], "--state"))
                        state_dir = argv[i + 1];
                else if (streq(argv[i], "--run"))
                        run_dir = argv[i + 1];
                else if (streq(argv[i], "--config-fd"))
                        config_fd = parse_fd(argv[i + 1]);
                else if (streq(argv[i], "--ready-fd"))
                        ready_fd = parse_fd(argv[i + 1]);
                else if (streq(argv[i], "--lifeline-fd") || streq(argv[i], "--stop-lifeline-fd")) {
                        lifeline_fd = parse_fd(argv[i + 1]);
                        lifeline_stops = streq(argv[i], "--stop-lifeline-fd");
                        if (lifeline_fd < 0)
                                return usage();
                } else if (streq(argv[i], "--client-fd")) {
                        client_fd = parse_fd(argv[i + 1]);
                        if (client_fd < 3 || fcntl(client_fd, F_GETFD) < 0)
                                return usage();
                } else if (streq(argv[i], "--secrets-fd")) {
                        secrets_fd = parse_fd(argv[i + 1]);
                        if (secrets_fd < 3 || fcntl(secrets_fd, F_GETFD) < 0)
                                return usage();
                } else
                        return usage();
        }
        if (!state_dir || state_dir[0] != '/' || ready_fd < 3 || fcntl(ready_fd, F_GETFD) < 0)
                return usage();
        if (!run_dir)
                run_dir = state_dir;
        if (run_dir[0] != '/')
                return usage();
        /* the config (a socket libnook sends it over: supervisor/config.h) */
        if (config_fd < 3 || config_fd == ready_fd || fcntl(config_fd, F_GETFD) < 0)
                return usage();
        (void)fd_set_cloexec(config_fd, true);
        (void)fd_set_cloexec(ready_fd, true);
        if (lifeline_fd >= 0 &&
                (lifeline_fd < 3 || lifeline_fd == ready_fd || lifeline_fd == config_fd ||
                        fcntl(lifeline_fd, F_GETFD) < 0))
                return usage();
        if (lifeline_fd >= 0)
                (void)fd_set_cloexec(lifeline_fd, true);

        /* libnook starts us before it has made the sandbox's folders, and sends the config once
         * they are ready (docs/design/runtime.md, "Processes"): our exec and loading run beside
         * its bookkeeping.  Until then nothing is ours to make or clean, so everything that
         * touches the sandbox (the log in RUNDIR included) comes after the config. */
        int keep[5] = { ready_fd, config_fd }, n_keep = 2;
        if (lifeline_fd >= 0)
                keep[n_keep++] = lifeline_fd;
        if (secrets_fd >= 0)
                keep[n_keep++] = secrets_fd;
        if (client_fd >= 0) {
                (void)fd_set_cloexec(client_fd, true);
                keep[n_keep++] = client_fd;
        }
        (void)fd_close_all_except(3, keep, (size_t)n_keep);
        sup_config cfg = { 0 };
        int cr = sup_config_from_fd(config_fd, &cfg, &err);
        config_fd = safe_close(config_fd);
        /* our creator started us off its CPU (lifecycle.c:supervisor_spawn) and sent the config
         * after that: its whole mask back */
        proc_take_parent_cpus();
        /* Nothing at all: the creator died or gave up before sending it.  We made nothing, and
         * our stdio is still its own: leave without a word. */
        if (cr == 0)
                return 1;

        /* The secrets' values (JSON), read whole next: libnook writes them once, after the
         * config, and closes.  They stay in this process's memory only, for the egress gateway. */
        _cleanup_free_ char *values = NULL;
        if (secrets_fd >= 0) {
                size_t len = 0;
                nook_error serr = { 0 };
                if (fd_read_to_end(secrets_fd, SECRETS_MAX, &values, &len, &serr) < 0)
                        values = NULL;
                safe_close(secrets_fd);
        }
        redirect_stdio(run_dir);
        (void)prctl(PR_SET_NAME, "nook-supervisor");
        if (cr < 0)
                return report_bad_config(ready_fd, &err);
        int r = sup_run(&cfg, state_dir, run_dir, ready_fd, lifeline_fd, lifeline_stops, client_fd, values);
        if (values)
                explicit_bzero(values, strlen(values));
        sup_config_done(&cfg);
        return r;
}
