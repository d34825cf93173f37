/* SPDX-License-Identifier: Apache-2.0 */
/* exec and run.  The command's stdio are this process's own fds: output streams straight to our
 * terminal or pipe.  If we die, the supervisor sees the connection drop and kills the command's
 * whole process tree (unless --detach). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <termios.h>
#include <unistd.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/spec_opts.h"

#define EXEC_OPTS_HELP                                                                                      \
        "  -e, --env NAME=VALUE     environment for this command\n"                                         \
        "  --secret-env NAME        pass NAME from this environment as a secret (NAME=- reads the\n"        \
        "                           value from stdin); never stored, logged or put in an argv\n"            \
        "  -w, --workdir DIR        working directory (default /workspace)\n"                               \
        "  -u, --user USER          user name, uid or uid:gid\n"                                            \
        "  -i, --interactive        pass stdin to the command (default: /dev/null)\n"                       \
        "  --timeout DUR            kill the command's whole process tree after DUR\n"                      \
        "  -d, --detach             start it and return; it keeps running\n"                                \
        "  -c, --sh STRING          run STRING with /bin/sh -lc instead of an argv\n"                       \
        "  -t, --tty                give the command a terminal (implies -i)\n"

typedef struct exec_args {
        char **env, **secret_env;
        size_t n_env, n_secret;
        const char *cwd, *user, *shell;
        uint64_t timeout_ms;
        bool interactive, detach, tty;
} exec_args;

static void exec_args_done(exec_args *a) {
        for (size_t i = 0; i < a->n_env; i++)
                free(a->env[i]);
        for (size_t i = 0; i < a->n_secret; i++) {
                /* scrub secret values from our memory once used */
                explicit_bzero(a->secret_env[i], strlen(a->secret_env[i]));
                free(a->secret_env[i]);
        }
        free(a->env);
        free(a->secret_env);
}

static int push(char ***l, size_t *n, char *s) {
        char **nl = realloc(*l, sizeof(char *) * (*n + 2));
        if (!nl)
                return -ENOMEM;
        nl[(*n)++] = s;
        nl[*n] = NULL;
        *l = nl;
        return 0;
}

static char *read_secret_stdin(const char *name) {
        char buf[65536];
        size_t len = fread(buf, 1, sizeof(buf) - 1, stdin);
        buf[len] = 0;
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
                buf[--len] = 0;
        char *s = NULL;
        if (asprintf(&s, "%s=%s", name, buf) < 0)
                s = NULL;
        explicit_bzero(buf, sizeof(buf));
        return s;
}

/* Returns 1 if opt was an exec option, 0 if not, <0 after printing a usage error. */
static int exec_opt_apply(const char *cmd, exec_args *a, int opt, const char *arg) {
        nook_error err = { 0 };
        switch (opt) {
        case 'e':
                if (!strchr(arg, '=')) {
                        cli_usage_error(cmd, "--env expects NAME=VALUE, got '%s'", arg);
                        return -1;
                }
                return push(&a->env, &a->n_env, strdup(arg)) < 0 ? -1 : 1;
        case 2000: {
                char *v = NULL;
                size_t nl = strcspn(arg, "=");
                if (arg[nl] == '=' && strcmp(arg + nl, "=-") == 0) {
                        char name[256];
                        snprintf(name, sizeof(name), "%.*s", (int)nl, arg);
                        v = read_secret_stdin(name);
                } else if (arg[nl] == '=') {
                        cli_usage_error(cmd,
                                "--secret-env takes NAME (value from the environment) or NAME=- (from stdin), never a value on the command line");
                        return -1;
                } else {
                        const char *val = getenv(arg);
                        if (!val) {
                                cli_usage_error(
                                        cmd, "--secret-env %s: no such variable in this environment", arg);
                                return -1;
                        }
                        if (asprintf(&v, "%s=%s", arg, val) < 0)
                                v = NULL;
                }
                return v && push(&a->secret_env, &a->n_secret, v) == 0 ? 1 : -1;
        }
        case 'w':
                a->cwd = arg;
                return 1;
        case 'u':
                a->user = arg;
                return 1;
        case 'i':
                a->interactive = true;
                return 1;
        case 2001:
                if (nook_parse_duration_ms(arg, &a->timeout_ms, &err) < 0) {
                        cli_usage_error(cmd, "--timeout: %s", err.msg);
                        return -1;
                }
                return 1;
        case 'd':
                a->detach = true;
                return 1;
        case 'c':
                a->shell = arg;
                return 1;
        case 't':
                a->tty = true;
                return 1;
        default:
                return 0;
        }
}

#define EXEC_OPTS_LONG_RUN                                                                                  \
        { "secret-env", required_argument, NULL, 2000 }, { "cwd", required_argument, NULL, 'w' },           \
                { "interactive", no_argument, NULL, 'i' }, { "timeout", required_argument, NULL, 2001 },    \
                { "sh", required_argument, NULL, 'c' }, {                                                   \
                "tty", no_argument, NULL, 't'                                                               \
        }
#define EXEC_OPTS_LONG                                                                                      \
        { "env", required_argument, NULL, 'e' }, { "secret-env", required_argument, NULL, 2000 },           \
                { "workdir", required_argument, NULL, 'w' }, { "user", required_argument, NULL, 'u' },      \
                { "interactive", no_argument, NULL, 'i' }, { "timeout", required_argument, NULL, 2001 },    \
                { "detach", no_argument, NULL, 'd' }, { "sh", required_argument, NULL, 'c' }, {             \
                "tty", no_argument, NULL, 't'                                                               \
        }

static volatile sig_atomic_t winch;

static void on_winch(int sig) {
        winch = 1;
}

static void copy_some(int from, int to, bool *open_flag) {
        char buf[16384];
        ssize_t k = read(from, buf, sizeof(buf));
        if (k <= 0) {
                if (k == 0 || (errno != EAGAIN && errno != EINTR))
                        *open_flag = false;
                return;
        }
        for (ssize_t off = 0; off < k;) {
                ssize_t m = write(to, buf + off, (size_t)(k - off));
                if (m < 0 && errno == EINTR)
                        continue;
                if (m < 0)
                        return;
                off += m;
        }
}

/* Relays our terminal to the sandbox's pty until the command exits: raw mode, resize on
 * SIGWINCH, and the pty's remaining output drained at the end. */
static int tty_relay(nook_exec *e, nook_exec_result *res, nook_error *err) {
        int master = nook_exec_tty_fd(e);
        struct termios saved, raw;
        bool have_tty = tcgetattr(0, &saved) == 0;
        if (have_tty) {
                raw = saved;
                cfmakeraw(&raw);
                (void)tcsetattr(0, TCSANOW, &raw);
        }
        signal(SIGWINCH, on_winch);
        bool in_open = true, out_open = true;
        int r = 0;
        for (;;) {
                if (winch) {
                        struct winsize ws;
                        winch = 0;
                        if (ioctl(1, TIOCGWINSZ, &ws) == 0)
                                (void)ioctl(master, TIOCSWINSZ, &ws);
                }
                struct pollfd p[3] = { { .fd = in_open ? 0 : -1, .events = POLLIN },
                        { .fd = out_open ? master : -1, .events = POLLIN },
                        { .fd = nook_exec_fd(e), .events = POLLIN } };
                if (poll(p, 3, -1) < 0 && errno != EINTR)
                        break;
                if (p[0].revents)
                        copy_some(0, master, &in_open);
                if (p[1].revents)
                        copy_some(master, 1, &out_open);
                if (p[2].revents) {
                        r = nook_exec_wait(e, res, err);
                        break;
                }
        }
        (void)fcntl(master, F_SETFL, O_NONBLOCK);
        while (out_open)
                copy_some(master, 1, &out_open);
        if (have_tty)
                (void)tcsetattr(0, TCSANOW, &saved);
        return r;
}

static int run_exec(nook *n, const char *name, exec_args *a, char **argv) {
        nook_exec_opts o;
        nook_exec_result res;
        nook_error err = { 0 };
        nook_exec_opts_init(&o);
        o.argv = (const char *const *)argv;
        o.shell = a->shell;
        o.env = (const char *const *)a->env;
        o.secret_env = (const char *const *)a->secret_env;
        o.cwd = a->cwd;
        o.user = a->user;
        o.stdin_fd = a->interactive ? 0 : -1;
        o.stdout_fd = 1;
        o.stderr_fd = 2;
        o.timeout_ms = a->timeout_ms;
        o.detach = a->detach;
        if (a->tty && !a->detach) {
                struct winsize ws = { 0 };
                nook_exec *e = NULL;
                o.tty = true;
                if (ioctl(1, TIOCGWINSZ, &ws) == 0) {
                        o.rows = ws.ws_row;
                        o.cols = ws.ws_col;
                }
                int r = nook_exec_start(n, name, &o, &e, &err);
                if (r >= 0)
                        r = tty_relay(e, &res, &err);
                nook_exec_free(e);
                if (r < 0) {
                        cli_fail(&err);
                        return CLI_EXIT_EXEC_FAILED;
                }
                return res.signal ? 128 + res.signal : res.exit_code;
        }
        if (a->detach) {
                nook_exec *e = NULL;
                o.stdout_fd = o.stderr_fd = -1;
                if (nook_exec_start(n, name, &o, &e, &err) < 0 || nook_exec_wait(e, NULL, &err) < 0) {
                        nook_exec_free(e);
                        cli_fail(&err);
                        return CLI_EXIT_EXEC_FAILED;
                }
                printf("%d\n", nook_exec_pid(e));
                nook_exec_free(e);
                return 0;
        }
        if (nook_exec_run(n, name, &o, &res, &err) < 0) {
                cli_fail(&err);
                return CLI_EXIT_EXEC_FAILED;
        }
        if (strcmp(res.reason, "timeout") == 0) {
                fprintf(stderr, "nook: the command timed out and was killed with its process tree\n");
                return CLI_EXIT_TIMEOUT;
        }
        if (strcmp(res.reason, "oom") == 0)
                fprintf(stderr,
                        "nook: the command was killed by the OOM killer: the sandbox hit its memory limit\n");
        if (res.signal)
                return 128 + res.signal;
        return res.exit_code;
}

int cmd_exec(int argc, char **argv) {
        static const struct option opts[] = { EXEC_OPTS_LONG, { "help", no_argument, NULL, 'h' }, {} };
        exec_args a = { 0 };
        int c, r;
        while ((c = getopt_long(argc, argv, "+he:w:u:idc:t", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook exec [OPTIONS] NAME [--] COMMAND [ARG...]\n"
                               "       nook exec [OPTIONS] NAME --sh 'SHELL STRING'\n\n"
                               "Run a command in a running sandbox. Exit status: the command's (128+N if\n"
                               "killed by signal N), 124 on timeout, 125 if nook failed.\n\n" EXEC_OPTS_HELP);
                        exec_args_done(&a);
                        return 0;
                }
                r = exec_opt_apply("exec", &a, c, optarg);
                if (r <= 0) {
                        exec_args_done(&a);
                        return r < 0 ? CLI_EXIT_USAGE : cli_usage_error("exec", "unknown option");
                }
        }
        if (optind >= argc) {
                exec_args_done(&a);
                return cli_usage_error("exec", "expected a sandbox NAME");
        }
        const char *name = argv[optind++];
        /* Options may also follow NAME (nook exec NAME --sh '...'); parsing stops at "--" or at
         * the first word of the command. */
        while (optind < argc && argv[optind][0] == '-' && strcmp(argv[optind], "--") != 0 &&
                (c = getopt_long(argc, argv, "+he:w:u:idc:t", opts, NULL)) >= 0) {
                r = c == 'h' ? 0 : exec_opt_apply("exec", &a, c, optarg);
                if (r <= 0) {
                        exec_args_done(&a);
                        return r < 0 ? CLI_EXIT_USAGE : cli_usage_error("exec", "unknown option");
                }
        }
        if (optind < argc && strcmp(argv[optind], "--") == 0)
                optind++;
        if (!a.shell && optind >= argc) {
                exec_args_done(&a);
                return cli_usage_error("exec", "expected a COMMAND after the sandbox name (or --sh STRING)");
        }
        nook *n = NULL;
        nook_error err = { 0 };
        if (cli_open(&n, &err) < 0) {
                exec_args_done(&a);
                cli_fail(&err);
                return CLI_EXIT_EXEC_FAILED;
        }
        r = run_exec(n, name, &a, a.shell ? NULL : argv + optind);
        nook_close(n);
        exec_args_done(&a);
        return r;
}

int cmd_run(int argc, char **argv) {
        static const struct option opts[] = { SPEC_OPTS_LONG, EXEC_OPTS_LONG_RUN,
                { "name", required_argument, NULL, 3000 }, { "keep", no_argument, NULL, 3001 },
                { "help", no_argument, NULL, 'h' }, {} };
        json_t *spec = json_object();
        exec_args a = { 0 };
        const char *name = NULL;
        bool keep = false;
        int c, r;
        while ((c = getopt_long(argc, argv, "+he:l:m:p:v:w:u:ic:t", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook run [OPTIONS] [--] [COMMAND [ARG...]]\n\n"
                               "Create a sandbox, run one command in it (default: the image's Entrypoint and Cmd),\n"
                               "and remove it with its workspace.\n\n"
                               "  --name NAME            name the sandbox (default: run-<random>)\n"
                               "  --keep                 keep the sandbox (stopped) and its workspace\n" SPEC_OPTS_HELP
                                        EXEC_OPTS_HELP);
                        json_decref(spec);
                        return 0;
                }
                if (c == 3000) {
                        name = optarg;
                        continue;
                }
                if (c == 3001) {
                        keep = true;
                        continue;
                }
                if (c == 'e' || c == 'u') /* the command's env and user: not stored in the spec */
                        r = exec_opt_apply("run", &a, c, optarg);
                else {
                        r = spec_opt_apply("run", spec, c, optarg);
                        if (r == 0)
                                r = exec_opt_apply("run", &a, c, optarg);
                }
                if (r <= 0) {
                        json_decref(spec);
                        exec_args_done(&a);
                        return r < 0 ? CLI_EXIT_USAGE : cli_usage_error("run", "unknown option");
                }
        }
        if (optind < argc && strcmp(argv[optind], "--") == 0)
                optind++;
        /* no COMMAND: the image's default (Entrypoint + Cmd), looked up after create */
        bool use_default = !a.shell && optind >= argc;
        char image[4096] = "host";
        const char *img = json_string_value(json_object_get(spec, "image"));
        if (img)
                snprintf(image, sizeof(image), "%s", img);
        char gen[32];
        if (!name) {
                unsigned char rnd[6];
                if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                        memset(rnd, 0x5a, sizeof(rnd));
                snprintf(gen, sizeof(gen), "run-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3],
                        rnd[4], rnd[5]);
                name = gen;
        }
        spec_opts_finish(spec);
        char *text = json_dumps(spec, JSON_COMPACT);
        json_decref(spec);
        nook *n = NULL;
        nook_error err = { 0 };
        if (cli_open(&n, &err) < 0 || nook_sandbox_create(n, name, text, 0, &err) < 0) {
                free(text);
                nook_close(n);
                exec_args_done(&a);
                cli_fail(&err);
                return CLI_EXIT_EXEC_FAILED;
        }
        free(text);
        /* Ignore ^C here: it reaches the command (same terminal); we still clean up after it. */
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        char **cmd = a.shell ? NULL : argv + optind;
        json_t *dflt = NULL;
        if (use_default) {
                char *info = NULL;
                json_t *arr = NULL;
                if (nook_image_inspect(n, image, &info, &err) >= 0) {
                        dflt = json_loads(info, 0, NULL);
                        arr = json_object_get(dflt, "defaultCommand");
                }
                nook_free(info);
                size_t k = json_array_size(arr);
                cmd = k ? calloc(k + 1, sizeof(char *)) : NULL;
                for (size_t i = 0; cmd && i < k; i++)
                        cmd[i] = (char *)json_string_value(json_array_get(arr, i));
                if (!cmd || !cmd[0]) {
                        (void)nook_sandbox_remove(n, name, &err);
                        nook_close(n);
                        exec_args_done(&a);
                        free(cmd);
                        json_decref(dflt);
                        return cli_usage_error("run",
                                "expected a COMMAND (or --sh STRING): image '%s' has no default command",
                                image);
                }
        }
        r = run_exec(n, name, &a, cmd);
        if (use_default)
                free(cmd);
        json_decref(dflt);
        if (keep)
                r = nook_sandbox_stop(n, name, 10000, &err) < 0 ? cli_fail(&err) : r;
        else if (nook_sandbox_remove(n, name, &err) < 0)
                cli_fail(&err);
        nook_close(n);
        exec_args_done(&a);
        return r;
}
