/* SPDX-License-Identifier: Apache-2.0 */
/* exec, run and logs.  The command's stdio are this process's own fds when they are pipes: output
 * streams straight into our pipe; a terminal or a file is relayed (stdio_relay.h).  SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to the command (docker's
 * --sig-proxy); a second SIGINT within a second kills its whole process tree.  If we die, the
 * supervisor sees the connection drop and kills the command's whole process tree (unless
 * --detach); run's sandbox is tied to us (NOOK_CREATE_TIED) and goes too. */
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
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/env_file.h"
#include "cli/spec_opts.h"
#include "cli/stdio_relay.h"

/* exec's options; run names -w --cwd (--workdir is the spec's stored default there) */
#define EXEC_HELP_ENV                                                                                       \
        "  -e, --env NAME=VALUE     environment for this command; a bare NAME takes its value from\n"       \
        "                           this environment (left out when unset)\n"                               \
        "  --env-file FILE          NAME=VALUE lines, as docker reads them ('#' comments; '-': stdin)\n"    \
        "  --secret-env NAME        pass NAME from this environment as a secret (NAME=- reads the\n"        \
        "                           value from stdin); never stored, logged or put in an argv\n"
#define EXEC_HELP_REST                                                                                      \
        "  -i, --interactive        pass stdin to the command (default: /dev/null)\n"                       \
        "  --timeout DUR            kill the command's whole process tree after DUR\n"                      \
        "  -c, --sh STRING          run STRING with /bin/sh -lc instead of an argv\n"                       \
        "  -t, --tty                give the command a terminal (implies -i; stdin must be one)\n"          \
        "\nSignals: SIGINT, SIGTERM and SIGHUP are passed on to the command; a second ^C within\n"          \
        "a second kills it with its whole process tree.\n"
#define EXEC_HELP_W                                                                                         \
        "  -w, --workdir DIR        working directory (default: the sandbox's --workdir, else /workspace)\n"
#define EXEC_HELP_U "  -u, --user USER          user name, uid or uid:gid\n"
#define EXEC_HELP_W_RUN                                                                                     \
        "  -w, --cwd DIR            this command's working directory (default: --workdir's)\n"
#define EXEC_HELP_U_RUN "  -u, --user USER          this command's user: name, uid or uid:gid\n"
#define EXEC_OPTS_HELP EXEC_HELP_ENV EXEC_HELP_W EXEC_HELP_U EXEC_HELP_REST
#define EXEC_OPTS_HELP_RUN EXEC_HELP_ENV EXEC_HELP_W_RUN EXEC_HELP_U_RUN EXEC_HELP_REST
#define EXEC_DETACH_HELP                                                                                    \
        "  -d, --detach             start it and return, printing nothing; it keeps running and\n"          \
        "                           its output goes to 'nook logs NAME'\n"

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

static int exec_env_add(const char *cmd, const char *name_value, void *userdata) {
        exec_args *a = userdata;
        char *s = strdup(name_value);
        (void)cmd;
        if (s && push(&a->env, &a->n_env, s) == 0)
                return 1;
        free(s);
        return -1;
}

/* Returns 1 if opt was an exec option, 0 if not, <0 after printing a usage error. */
static int exec_opt_apply(const char *cmd, exec_args *a, int opt, const char *arg) {
        nook_error err = { 0 };
        switch (opt) {
        case 'e':
                return cli_env_arg(cmd, arg, exec_env_add, a);
        case SPEC_OPT_ENV_FILE:
                return cli_env_file(cmd, arg, exec_env_add, a);
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
        { "env", required_argument, NULL, 'e' },                                                            \
                { "env-file", required_argument, NULL, SPEC_OPT_ENV_FILE },                                 \
                { "secret-env", required_argument, NULL, 2000 },                                            \
                { "workdir", required_argument, NULL, 'w' }, { "user", required_argument, NULL, 'u' },      \
                { "interactive", no_argument, NULL, 'i' }, { "timeout", required_argument, NULL, 2001 },    \
                { "detach", no_argument, NULL, 'd' }, { "sh", required_argument, NULL, 'c' }, {             \
                "tty", no_argument, NULL, 't'                                                               \
        }

/* ---- signals: forwarded to the command ---------------------------------------------------- */

static int sig_pipe[2] = { -1, -1 };
static volatile sig_atomic_t command_started, early_signals;

static void on_forwarded_signal(int sig) {
        static const char msg[] =
                "nook: interrupted: the sandbox is removed as soon as it is created (interrupt again to quit now)\n";
        int saved = errno;
        unsigned char b = (unsigned char)sig;
        if (!command_started && early_signals++ > 0) {
                /* a second one while run is still creating: quit now (the tied sandbox's
                 * supervisor, if there is one yet, removes it) */
                (void)signal(sig, SIG_DFL);
                (void)raise(sig);
        }
        if (!command_started && write(2, msg, sizeof(msg) - 1) < 0) {
                /* nowhere to say it */
        }
        if (write(sig_pipe[1], &b, 1) < 0) {
                /* full: enough signals are pending already */
        }
        errno = saved;
}

/* From here on SIGINT, SIGTERM and SIGHUP no longer end this process: they queue up in
 * sig_pipe for forward_signals() (a signal that came before the command started is passed on
 * once it has). */
static int forward_signals_install(void) {
        if (sig_pipe[0] >= 0)
                return 0;
        if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        struct sigaction sa = { .sa_handler = on_forwarded_signal, .sa_flags = SA_RESTART };
        sigemptyset(&sa.sa_mask);
        /* docker's sig-proxy passes on every signal it can catch; these are the ones people send to
         * a foreground program (SIGQUIT for a dump, SIGUSR1/2 to reopen logs or reload): not
         * forwarded, their default action killed us, and with us the command */
        static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
        for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
                (void)sigaction(forwarded[i], &sa, NULL);
        return 0;
}

static uint64_t mono_ms(void) {
        struct timespec ts;
        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Passes the queued signals on to the command; a second SIGINT within a second kills it. */
static void forward_signals(nook_exec *e) {
        static uint64_t last_int;
        unsigned char b[32];
        ssize_t k;
        nook_error err = { 0 };
        while ((k = read(sig_pipe[0], b, sizeof(b))) > 0)
                for (ssize_t i = 0; i < k; i++) {
                        uint64_t now = mono_ms();
                        if (b[i] == SIGINT && last_int && now - last_int < 1000) {
                                fprintf(stderr,
                                        "nook: second interrupt: killing the command and its process tree\n");
                                (void)nook_exec_cancel(e, &err);
                                continue;
                        }
                        if (b[i] == SIGINT)
                                last_int = now;
                        (void)nook_exec_signal(e, b[i], &err);
                }
}

/* The first signal queued and not yet forwarded (0: none): for a run stopped before its
 * command started. */
static int pending_signal(void) {
        unsigned char b;
        return sig_pipe[0] >= 0 && read(sig_pipe[0], &b, 1) == 1 ? b : 0;
}

/* Waits for the command's end, forwarding signals and relaying the stdio the guest may not hold
 * (stdio_relay.h) meanwhile. */
static int wait_forwarding(nook_exec *e, nook_exec_result *res, nook_error *err) {
        int r = nook_exec_wait_started(e, err);
        while (r >= 0) {
                /* ended already (a command that could not start ends without starting) */
                r = nook_exec_process(e, res, err);
                if (r != 0)
                        break;
                struct pollfd p[2 + STDIO_RELAY_MAX] = { { .fd = nook_exec_fd(e), .events = POLLIN },
                        { .fd = sig_pipe[0], .events = POLLIN } };
                size_t n_relay = stdio_relay_pollfds(p + 2);
                forward_signals(e);
                int k = poll(p, 2 + n_relay, -1);
                if (k > 0)
                        stdio_relay_dispatch(p + 2, n_relay);
                if ((k < 0 && errno != EINTR) || (k > 0 && p[0].revents)) { /* a failed poll: just wait */
                        r = nook_exec_wait(e, res, err);
                        break;
                }
        }
        stdio_relay_finish();
        return r < 0 ? r : 0;
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
        if (master < 0) /* it could not start: no terminal came, the result did */
                return nook_exec_wait(e, res, err);
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
                struct pollfd p[4] = { { .fd = in_open ? 0 : -1, .events = POLLIN },
                        { .fd = out_open ? master : -1, .events = POLLIN },
                        { .fd = nook_exec_fd(e), .events = POLLIN },
                        { .fd = sig_pipe[0], .events = POLLIN } };
                if (poll(p, 4, -1) < 0 && errno != EINTR)
                        break;
                if (p[3].revents)
                        forward_signals(e);
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

static int exec_opts_fill(nook_exec_opts *o, exec_args *a, char **argv) {
        nook_exec_opts_init(o);
        o->argv = (const char *const *)argv;
        o->shell = a->shell;
        o->env = (const char *const *)a->env;
        o->secret_env = (const char *const *)a->secret_env;
        o->cwd = a->cwd;
        o->user = a->user;
        o->stdin_fd = a->interactive ? 0 : -1;
        o->stdout_fd = 1;
        o->stderr_fd = 2;
        o->timeout_ms = a->timeout_ms;
        o->detach = a->detach;
        return 0;
}

/* How the command ended, said on stderr (as JSON with --json: cli_fail) when it was not by
 * itself; the exit status is the command's either way. */
static void exec_note(nook_errc code, const char *msg) {
        nook_error e = { .code = code };
        (void)snprintf(e.msg, sizeof(e.msg), "%s", msg);
        (void)cli_fail(&e);
}

static int exec_status(const nook_exec_result *res) {
        if (strcmp(res->reason, "timeout") == 0) {
                exec_note(NOOK_E_TIMEOUT, "the command timed out and was killed with its process tree");
                return CLI_EXIT_TIMEOUT;
        }
        if (strcmp(res->reason, "oom") == 0)
                exec_note(NOOK_E_STATE,
                        "the command was killed by the OOM killer: the sandbox hit its memory limit");
        if (strcmp(res->reason, "stopped") == 0)
                exec_note(NOOK_E_STATE,
                        "the sandbox stopped (or was removed) while the command ran; 'nook inspect' shows why, while it exists");
        return res->signal ? 128 + res->signal : res->exit_code;
}

/* Detached: started, nothing printed (as docker exec -d); its output goes to the sandbox's log.
 * A command that cannot start fails as in the foreground (127 for a missing binary).
 * With stop_sandbox (run -d) the sandbox stops when the command ends. */
static int run_detached(nook *n, const char *name, nook_exec_opts *o, bool stop_sandbox) {
        nook_exec *e = NULL;
        nook_error err = { 0 };
        o->stdout_fd = o->stderr_fd = -1;
        o->stop_sandbox_when_done = stop_sandbox;
        nook_exec_result res = { 0 };
        if (nook_exec_start(n, name, o, &e, &err) < 0 || nook_exec_wait(e, &res, &err) < 0) {
                nook_exec_free(e);
                cli_fail(&err);
                return CLI_EXIT_EXEC_FAILED;
        }
        /* It could not start: the same message and status as in the foreground (there it is
         * the command's own stderr; detached, that is the sandbox's log) */
        const char *why = nook_exec_start_error(e);
        int status = why ? exec_status(&res) : 0;
        if (why) {
                cli_error_line("nook: ", why, "\n");
        }
        nook_exec_free(e);
        return status;
}

/* remove: `nook run`'s command, whose end begins the sandbox's removal (nook_sandbox_remove
 * follows) */
/* nook run's sandbox, made with its command (nook_sandbox_create_exec) by run_exec. */
typedef struct run_create {
        const char *spec_json;
        unsigned flags;
        bool created; /* out */
} run_create;

/* run --keep, its command over: the supervisor stops the sandbox itself (stop_sandbox_when_done,
 * reason "command_exited", the command's status recorded); wait for that rather than race it
 * with a stop of our own.  A command that never started (status 125) or a stop that does not
 * come is stopped here.  Returns status, or the failure's exit status. */
static int keep_stopped(nook *n, const char *name, int status) {
        nook_error err = { 0 };
        int code;
        if (status != CLI_EXIT_EXEC_FAILED && nook_sandbox_wait(n, name, 15000, &code, &err) >= 0)
                return status;
        return nook_sandbox_stop(n, name, 10000, &err) < 0 ? cli_fail(&err) : status;
}

/* What ends `nook run`'s sandbox when its command ends: nothing (exec), its removal (run), its
 * stop with the command's status recorded (run --keep: `nook wait` prints it). */
typedef enum { RUN_END_NONE, RUN_END_REMOVE, RUN_END_STOP } run_end;

/* Starts the command in sandbox name and waits for it; with rc, creates the sandbox first, the
 * command's request going with the create (rc->created says whether there is one to remove). */
static int run_exec(nook *n, const char *name, exec_args *a, char **argv, run_end end, run_create *rc) {
        nook_exec_opts o;
        nook_exec_result res = { 0 };
        nook_exec *e = NULL;
        nook_error err = { 0 };
        exec_opts_fill(&o, a, argv);
        o.remove_sandbox_when_done = end == RUN_END_REMOVE;
        o.stop_sandbox_when_done = end == RUN_END_STOP;
        if (a->detach)
                return run_detached(n, name, &o, false);
        if (forward_signals_install() < 0) {
                fprintf(stderr, "nook: cannot set up signal forwarding: %s\n", strerror(errno));
                return CLI_EXIT_EXEC_FAILED;
        }
        if (a->tty) {
                struct winsize ws = { 0 };
                o.tty = true;
                if (ioctl(1, TIOCGWINSZ, &ws) == 0) {
                        o.rows = ws.ws_row;
                        o.cols = ws.ws_col;
                }
        }
        if (!a->tty && ((o.stdin_fd = stdio_guest_fd(o.stdin_fd, true)) < 0 && a->interactive)) {
                fprintf(stderr, "nook: cannot make a pipe for the command's input: %s\n", strerror(errno));
                return CLI_EXIT_EXEC_FAILED;
        }
        if (!a->tty &&
                ((o.stdout_fd = stdio_guest_fd(1, false)) < 0 ||
                        (o.stderr_fd = stdio_guest_fd(2, false)) < 0)) {
                fprintf(stderr, "nook: cannot make a pipe for the command's output: %s\n", strerror(errno));
                stdio_relay_finish();
                return CLI_EXIT_EXEC_FAILED;
        }
        int r;
        if (rc) {
                r = nook_sandbox_create_exec(n, name, rc->spec_json, rc->flags, &o, &e, &err);
                stdio_relay_sent();
                rc->created = r >= 0;
                int sig = r >= 0 ? pending_signal() : 0;
                if (sig) {
                        /* one that came while the sandbox was made ends the run (cmd_run) */
                        (void)nook_exec_cancel(e, &err);
                        nook_exec_free(e);
                        fprintf(stderr, "nook: interrupted before the command started (signal %d)\n", sig);
                        return 128 + sig;
                }
                command_started = 1; /* from here on, every signal is the command's */
        } else {
                command_started = 1;
                r = nook_exec_start(n, name, &o, &e, &err);
                stdio_relay_sent();
        }
        if (r >= 0)
                r = a->tty ? tty_relay(e, &res, &err) : wait_forwarding(e, &res, &err);
        else
                stdio_relay_finish();
        /* With a terminal the reason went to the pty, which never reached us: say it here */
        const char *why = r >= 0 && a->tty ? nook_exec_start_error(e) : NULL;
        if (why) {
                cli_error_line("nook: ", why, "\n");
        }
        nook_exec_free(e);
        if (r < 0) {
                cli_fail(&err);
                return CLI_EXIT_EXEC_FAILED;
        }
        return exec_status(&res);
}

/* -t needs a terminal on stdin (as docker says); -t with -d has none to relay. */
/* --sh STRING is the command: one given after it too was dropped without a word.  first: the
 * first argument after the options (and "--"), or NULL. */
static int check_sh(const char *cmd, const exec_args *a, const char *first) {
        if (a->shell && first)
                return cli_usage_error(
                        cmd, "give either --sh STRING or a COMMAND, not both ('%s' follows --sh)", first);
        return 0;
}

static int check_tty(const char *cmd, const exec_args *a) {
        if (a->tty && a->detach)
                return cli_usage_error(cmd,
                        "--tty and --detach do not go together: a detached command's output goes to 'nook logs'");
        if (a->tty && !isatty(0)) {
                fprintf(stderr,
                        "nook: the input device is not a TTY: -t needs a terminal on stdin; drop -t (use -i to pass a pipe)\n");
                return CLI_EXIT_ERROR;
        }
        return 0;
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
                               "killed by signal N), 124 on timeout, 125 if nook failed.  If this nook process dies\n"
                               "(even by kill -9), the command is killed with its whole process tree (not with -d).\n\n" EXEC_DETACH_HELP
                                        EXEC_OPTS_HELP);
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
        if ((r = check_sh("exec", &a, optind < argc ? argv[optind] : NULL)) != 0) {
                exec_args_done(&a);
                return r;
        }
        if ((r = check_tty("exec", &a)) != 0) {
                exec_args_done(&a);
                return r;
        }
        nook *n = NULL;
        nook_error err = { 0 };
        if (cli_open(&n, &err) < 0) {
                exec_args_done(&a);
                cli_fail(&err);
                return CLI_EXIT_EXEC_FAILED;
        }
        r = run_exec(n, name, &a, a.shell ? NULL : argv + optind, RUN_END_NONE, NULL);
        nook_close(n);
        exec_args_done(&a);
        return r;
}

typedef struct run_args {
        const char *name;
        bool keep, rm;
        char gen[32];
} run_args;

/* Parses run's options into spec, a and ra.  Returns 0, 1 after --help, or an exit status < 0
 * negated. */
static int run_parse(int argc, char **argv, json_t *spec, exec_args *a, run_args *ra) {
        static const struct option opts[] = { SPEC_OPTS_LONG, EXEC_OPTS_LONG_RUN,
                { "name", required_argument, NULL, 3000 }, { "keep", no_argument, NULL, 3001 },
                { "rm", no_argument, NULL, 3002 }, { "detach", no_argument, NULL, 'd' },
                { "help", no_argument, NULL, 'h' }, {} };
        int c, r;
        while ((c = getopt_long(argc, argv, "+he:l:m:p:v:w:u:ic:td", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook run [OPTIONS] [--] [COMMAND [ARG...]]\n\n"
                               "Create a sandbox, run one command in it (default: the image's Entrypoint and Cmd),\n"
                               "and remove it with its workspace, whatever way the command or nook ends (even\n"
                               "when nook is killed: the sandbox lives as long as this process).\n\n"
                               "  --name NAME            name the sandbox (default: run-<random>); a name in use is\n"
                               "                         refused, running or stopped\n"
                               "  --rm                   remove the sandbox afterwards (the default; as docker)\n"
                               "  --keep                 keep the sandbox (stopped) and its workspace, with the\n"
                               "                         baselines 'nook diff' compares with (a run without --keep\n"
                               "                         or -d takes none: nobody diffs what goes at its end)\n"
                               "  -d, --detach           start the command detached, print the sandbox's name and\n"
                               "                         return; the sandbox stops when the command ends and is\n"
                               "                         kept (its output: 'nook logs NAME'; remove: 'nook rm NAME')\n" SPEC_OPTS_HELP_RUN
                               "\nThe command (as docker run: -e, -u and -w are its own, not stored):\n" EXEC_OPTS_HELP_RUN);
                        return 1;
                }
                if (c == 3000 || c == 3001 || c == 3002) {
                        ra->name = c == 3000 ? optarg : ra->name;
                        ra->keep |= c == 3001;
                        ra->rm |= c == 3002;
                        continue;
                }
                /* the command's environment and user: not stored in the spec */
                if (c == 'e' || c == SPEC_OPT_ENV_FILE || c == 'u')
                        r = exec_opt_apply("run", a, c, optarg);
                else {
                        r = spec_opt_apply("run", spec, c, optarg);
                        if (r == 0)
                                r = exec_opt_apply("run", a, c, optarg);
                }
                if (r <= 0)
                        return -(r < 0 ? CLI_EXIT_USAGE : cli_usage_error("run", "unknown option"));
        }
        if (ra->rm && ra->keep)
                return -cli_usage_error("run", "--rm and --keep contradict each other");
        if (ra->rm && a->detach)
                return -cli_usage_error("run",
                        "--rm with --detach is not supported: a detached run keeps its stopped sandbox for 'nook logs'; remove it with 'nook rm NAME'");
        if ((r = check_tty("run", a)) != 0)
                return -r;
        if (!ra->name) {
                unsigned char rnd[6];
                if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                        memset(rnd, 0x5a, sizeof(rnd));
                snprintf(ra->gen, sizeof(ra->gen), "run-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
                        rnd[3], rnd[4], rnd[5]);
                ra->name = ra->gen;
        }
        return 0;
}

/* The image's default command (Entrypoint + Cmd); *ret_dflt owns the strings.  NULL if none. */
static char **default_command(nook *n, const char *image, json_t **ret_dflt) {
        nook_error err = { 0 };
        char *info = NULL;
        json_t *arr = NULL;
        if (nook_image_inspect(n, image, &info, &err) >= 0) {
                *ret_dflt = json_loads(info, 0, NULL);
                arr = json_object_get(*ret_dflt, "defaultCommand");
        }
        nook_free(info);
        size_t k = json_array_size(arr);
        char **cmd = k ? calloc(k + 1, sizeof(char *)) : NULL;
        for (size_t i = 0; cmd && i < k; i++)
                cmd[i] = (char *)json_string_value(json_array_get(arr, i));
        if (cmd && !cmd[0]) {
                free(cmd);
                cmd = NULL;
        }
        return cmd;
}

int cmd_run(int argc, char **argv) {
        json_t *spec = json_object();
        exec_args a = { 0 };
        run_args ra = { 0 };
        int r = run_parse(argc, argv, spec, &a, &ra);
        if (r != 0) {
                json_decref(spec);
                exec_args_done(&a);
                return r > 0 ? 0 : -r;
        }
        const char *name = ra.name;
        if (optind < argc && strcmp(argv[optind], "--") == 0)
                optind++;
        if ((r = check_sh("run", &a, optind < argc ? argv[optind] : NULL)) != 0) {
                json_decref(spec);
                exec_args_done(&a);
                return r;
        }
        /* no COMMAND: the image's default (Entrypoint + Cmd), looked up after create */
        bool use_default = !a.shell && optind >= argc;
        char image[4096] = "host";
        const char *img = json_string_value(json_object_get(spec, "image"));
        if (img)
                snprintf(image, sizeof(image), "%s", img);
        spec_opts_finish(spec);
        char *text = json_dumps(spec, JSON_COMPACT);
        json_decref(spec);
        nook *n = NULL;
        nook_error err = { 0 };
        /* Signals from here on are forwarded to the command; one that comes during create ends
         * the run once the sandbox is there (and it is removed). */
        if (!a.detach && forward_signals_install() < 0) {
                free(text);
                exec_args_done(&a);
                fprintf(stderr, "nook: cannot set up signal forwarding: %s\n", strerror(errno));
                return CLI_EXIT_EXEC_FAILED;
        }
        /* Tied: if this process dies, even by SIGKILL, the supervisor removes the sandbox; with
         * -d only until its command is accepted (NOOK_CREATE_TIED), so a run -d killed before
         * that leaves no sandbox running without a command. */
        /* A name in use is refused, as docker run does: a run over a stopped sandbox took its
         * workspace, and removed it with the sandbox at the end. */
        unsigned flags = NOOK_CREATE_EXCLUSIVE | NOOK_CREATE_TIED;
        /* removed when the command ends: nobody diffs or merges it (two files less per run), and
         * no spare exec helper waits for a second command */
        if (!a.detach && !ra.keep)
                flags |= NOOK_CREATE_NO_BASELINE | NOOK_CREATE_ONE_SHOT;
        /* With its COMMAND known, an attached run sends it with the create: the supervisor starts
         * it as soon as the sandbox is ready (nook_sandbox_create_exec). */
        bool with_create = !a.detach && !use_default;
        if (cli_open(&n, &err) < 0 ||
                (!with_create && nook_sandbox_create(n, name, text, flags, &err) < 0)) {
                free(text);
                nook_close(n);
                exec_args_done(&a);
                cli_fail(&err);
                return CLI_EXIT_EXEC_FAILED;
        }
        if (with_create) {
                run_create rc = { .spec_json = text, .flags = flags };
                r = run_exec(n, name, &a, a.shell ? NULL : argv + optind,
                        ra.keep ? RUN_END_STOP : RUN_END_REMOVE, &rc);
                free(text);
                if (rc.created && ra.keep)
                        r = keep_stopped(n, name, r);
                else if (rc.created && nook_sandbox_remove(n, name, &err) < 0)
                        cli_fail(&err);
                nook_close(n);
                exec_args_done(&a);
                return r;
        }
        free(text);
        json_t *dflt = NULL;
        char **cmd = use_default ? default_command(n, image, &dflt) : a.shell ? NULL : argv + optind;
        if (use_default && !cmd) {
                r = cli_usage_error("run",
                        "expected a COMMAND (or --sh STRING): image '%s' has no default command", image);
        } else if ((r = pending_signal()) != 0) {
                fprintf(stderr, "nook: interrupted before the command started (signal %d)\n", r);
                r = 128 + r;
        } else if (a.detach) {
                nook_exec_opts o;
                exec_opts_fill(&o, &a, cmd);
                r = run_detached(n, name, &o, true);
                if (r == 0)
                        cli_print_done(name, "running");
        } else
                r = run_exec(n, name, &a, cmd, ra.keep ? RUN_END_STOP : RUN_END_REMOVE, NULL);
        if (use_default)
                free(cmd);
        json_decref(dflt);
        if (a.detach && r == 0)
                ; /* it runs on; the sandbox stops when the command ends */
        else if (ra.keep)
                r = keep_stopped(n, name, r);
        else if (nook_sandbox_remove(n, name, &err) < 0)
                cli_fail(&err);
        nook_close(n);
        exec_args_done(&a);
        return r;
}

/* ---- logs ------------------------------------------------------------------------------------ */

int cmd_logs(int argc, char **argv) {
        static const struct option opts[] = { { "follow", no_argument, NULL, 'f' },
                { "tail", required_argument, NULL, 'n' }, { "since", required_argument, NULL, 4000 },
                { "timestamps", no_argument, NULL, 't' }, { "system", no_argument, NULL, 4001 },
                { "help", no_argument, NULL, 'h' }, {} };
        nook_logs_opts o = { 0 };
        int c;
        while ((c = getopt_long(argc, argv, "hfn:t", opts, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        printf("Usage: nook logs [OPTIONS] NAME\n\n"
                               "Prints what the sandbox's detached commands (exec -d, run -d) wrote: their stdout on\n"
                               "stdout, their stderr on stderr.  Kept per sandbox, at most 2 x 1 MiB (the oldest\n"
                               "lines go first), until 'nook rm'.  On a terminal, control characters are shown as\n"
                               "\\xNN (the guest's bytes never drive your terminal); into a pipe or file, raw.\n\n"
                               "  -f, --follow           keep printing new lines until the sandbox stops (or ^C)\n"
                               "  -n, --tail N           only the last N lines ('all': every line)\n"
                               "  --since WHEN           lines since a duration ago (10m, 1h30m), an RFC 3339 time\n"
                               "                         (2026-01-02T15:04:05Z) or a Unix time (1767366245)\n"
                               "  -t, --timestamps       prefix each line with its time (RFC 3339, UTC)\n"
                               "  --system               the supervisor's own diagnostics instead (setup, lifecycle,\n"
                               "                         network helper errors)\n");
                        return 0;
                case 'f':
                        o.follow = true;
                        break;
                case 'n':
                        o.tail = optarg;
                        break;
                case 4000:
                        o.since = optarg;
                        break;
                case 't':
                        o.timestamps = true;
                        break;
                case 4001:
                        o.system = true;
                        break;
                default:
                        return cli_usage_error("logs", "unknown option");
                }
        }
        if (optind + 1 != argc)
                return cli_usage_error(
                        "logs", optind >= argc ? "expected a sandbox NAME" : "expected one sandbox NAME");
        o.escape_terminals = true;
        nook *n = NULL;
        nook_error err = { 0 };
        if (nook_logs_opts_check(&o, &err) < 0)
                return cli_fail_usage("logs", &err);
        int r = cli_open(&n, &err);
        if (r >= 0)
                r = nook_sandbox_logs(n, argv[optind], &o, 1, 2, &err);
        nook_close(n);
        return r < 0 ? cli_fail(&err) : 0;
}
