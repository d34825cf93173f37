/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/table.h"
#include "cli/template.h"

bool arg_json;
bool arg_no_trunc;
const char *arg_format;
const char *arg_home;

/* The problem getopt found last ("unknown option '--foo'; did you mean '--force'?"), used by
 * cli_usage_error in place of a command's generic "unknown option". */
static char opt_problem[400];

static const cli_command commands[] = {
        { "run", cmd_run, "Create a sandbox, run one command in it, remove it" },
        { "create", cmd_create, "Create and start a sandbox" },
        { "start", cmd_start, "Start a stopped sandbox again" },
        { "exec", cmd_exec, "Run a command in a running sandbox" },
        { "stop", cmd_stop, "Stop a sandbox (its workspace is kept)" },
        { "restart", cmd_restart, "Stop a sandbox and start it again" },
        { "kill", cmd_kill, "Send a signal to a sandbox's commands (KILL: stop it at once)" },
        { "rm", cmd_rm, "Remove sandboxes: state, writable layer and workspace" },
        { "ls", cmd_ls, "List all sandboxes, running or stopped (--format, --json)" },
        { "ps", cmd_ps, "List running and paused sandboxes (-a: all, -q, --filter), as 'docker ps'" },
        { "prune", cmd_prune, "Remove stopped sandboxes (sticky ones with --all)" },
        { "inspect", cmd_inspect, "Show sandboxes' details (JSON, --format), including why they stopped" },
        { "logs", cmd_logs,
                "Show what a sandbox's detached commands printed (--system: its supervisor log)" },
        { "stats", cmd_stats, "Show running and paused sandboxes' cpu, memory and process use, live" },
        { "update", cmd_update, "Change a running sandbox's resource limits" },
        { "wait", cmd_wait, "Wait until sandboxes stop; print their run -d command's exit status" },
        { "cp", cmd_cp, "Copy files between the host and a sandbox (NAME:PATH), as docker cp does" },
        { "cat", cmd_cat, "Print a workspace file (NAME:PATH)" },
        { "ws", cmd_ws, "Workspace files: path, write, cat, ls, rm, mkdir, mv" },
        { "volume", cmd_volume, "Named volumes: create, ls, rm" },
        { "image", cmd_image, "Images: pull, ls, inspect, rm, prune, import, export" },
        { "snapshot", cmd_snapshot, "Snapshots (disk state only): create, ls, inspect, rm, export, import" },
        { "pause", cmd_pause, "Freeze a running sandbox's processes (cgroup freezer)" },
        { "resume", cmd_resume, "Thaw a paused sandbox" },
        { "branch", cmd_branch, "New sandboxes from a sandbox's disk state and workspace (copy-on-write)" },
        { "diff", cmd_diff, "Show a sandbox's workspace changes since create or its branch point" },
        { "merge", cmd_merge, "Apply a branch's workspace changes onto another sandbox's workspace" },
        { "checkpoint", cmd_checkpoint,
                "Checkpoint a running sandbox's memory (CRIU; refused, naming why)" },
        { "egress", cmd_egress, "The egress gateway's audit log ('nook egress log NAME')" },
        { "doctor", cmd_doctor, "Check what this host offers nook" },
        { "help", cmd_help, "Show this help, or a command's ('nook help COMMAND')" },
        { "version", cmd_version, "Print the versions of nook and libnook" },
};
/* For the hidden __complete and __doc (cmd_complete.c). */
const cli_command *const cli_commands = commands;
const size_t cli_n_commands = sizeof(commands) / sizeof(commands[0]);

static void help(FILE *f) {
        fprintf(f,
                "Usage: nook [--home DIR] [--json] COMMAND [ARGS...]\n\n"
                "nook runs untrusted code in local sandboxes: isolated Linux containers with a\n"
                "workspace that is a host directory, mounted at /workspace.\n\nCommands:\n");
        int width = 0;
        for (size_t i = 0; i < cli_n_commands; i++)
                if ((int)strlen(commands[i].name) > width)
                        width = (int)strlen(commands[i].name);
        for (size_t i = 0; i < cli_n_commands; i++)
                fprintf(f, "  %-*s %s\n", width, commands[i].name, commands[i].summary);
        fprintf(f,
                "\nOptions:\n"
                "  --home DIR   state folder (default $NOOK_HOME, /var/lib/nook as root,\n"
                "               ~/.local/share/nook otherwise)\n"
                "  --json       machine-readable output; errors too, as JSON on stderr (also\n"
                "               among a command's options: 'nook rm NAME --json')\n"
                "  --allow-shared-home  accept a state folder other users can enter\n"
                "               (NOOK_ALLOW_SHARED_HOME=1; sandboxes then share one host id range)\n"
                "  -h, --help   this help; 'nook COMMAND --help' for a command's\n"
                "  --version    print the version\n\n"
                "Images: 'host' (the default: the host's /usr read-only, no download), a root\n"
                "filesystem directory, or a registry reference (alpine:3, ghcr.io/o/r:tag).\n"
                "Network: off by default; --network public or policy for egress.\n"
                "Snapshots hold disk state only (never memory, processes, sockets or devices).\n\n"
                "Example:\n  nook run -- sh -c 'echo hello from $(hostname)'\n");
}

void cli_print_safe(FILE *f, const char *s) {
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p < 0x20 && *p != '\n' && *p != '\t')
                        fprintf(f, "\\x%02x", *p);
                else if (*p == 0x7f)
                        fputs("\\x7f", f);
                else
                        fputc(*p, f);
        }
}

void cli_print_json_line(json_t *o) {
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (text)
                puts(text);
        free(text);
        json_decref(o);
}

void cli_print_done(const char *name, const char *state) {
        if (arg_json)
                cli_print_json_line(json_pack("{s:s, s:s}", "name", name, "state", state));
        else
                puts(name);
}

/* stderr is unbuffered: a line printed in pieces reaches it as one write(2) per piece, one per
 * byte through cli_print_safe, and the lines of nook processes sharing a log interleave.  So the
 * line is put together in memory and written with one call (one write(2), which a pipe keeps
 * whole up to PIPE_BUF). */
void cli_error_line(const char *prefix, const char *msg, const char *suffix) {
        char *line = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&line, &len);
        if (m) {
                fputs(prefix, m);
                cli_print_safe(m, msg);
                fputs(suffix, m);
        }
        if (m && fclose(m) == 0)
                (void)fwrite(line, 1, len, stderr);
        else {
                /* No memory for the line: still say it, in pieces */
                fputs(prefix, stderr);
                cli_print_safe(stderr, msg);
                fputs(suffix, stderr);
        }
        free(line);
}

void cli_human_bytes(uint64_t b, char *out, size_t n) {
        const char *u[] = { "B", "KB", "MB", "GB", "TB" };
        double v = (double)b;
        size_t i = 0;
        while (v >= 1000 && i < 4) {
                v /= 1000;
                i++;
        }
        snprintf(out, n, i ? "%.1f%s" : "%.0f%s", v, u[i]);
}

/* --json anywhere before "--" makes errors JSON, even where parsing stopped before reaching it
 * (a bad option first, or after a "+" command's first argument): `nook ls --bogus --json`. */
static bool arg_json_errors;

static bool json_errors(void) {
        return arg_json || arg_json_errors;
}

static void scan_json_errors(int argc, char **argv) {
        for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
                if (strcmp(argv[i], "--json") == 0)
                        arg_json_errors = true;
}

/* --json: {"error": {"code": CODE, "message": MSG}} on one line of stderr.  A message quoting
 * bytes that are not UTF-8 (a hostile argument) has them as '?': JSON strings are UTF-8. */
static void print_json_error(const char *code, const char *msg) {
        char safe[1024];
        json_t *m = json_string(msg);
        if (!m) {
                snprintf(safe, sizeof(safe), "%s", msg);
                for (char *p = safe; *p; p++)
                        if ((unsigned char)*p >= 0x80)
                                *p = '?';
                m = json_string(safe);
        }
        json_t *o = json_pack("{s:{s:s, s:o}}", "error", "code", code, "message", m);
        char *t = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
        /* as the prefix: JSON_ENSURE_ASCII left nothing to escape */
        cli_error_line(t ? t : "{\"error\":{\"code\":\"nomem\",\"message\":\"out of memory\"}}", "", "\n");
        free(t);
        json_decref(o);
}

int cli_fail(const nook_error *err) {
        if (json_errors()) {
                print_json_error(nook_errc_to_string(err->code), err->msg);
                return CLI_EXIT_ERROR;
        }
        cli_error_line("nook: ", err->msg, "\n");
        return CLI_EXIT_ERROR;
}

int cli_fail_oom(void) {
        nook_error err = { .code = NOOK_E_NOMEM };
        snprintf(err.msg, sizeof(err.msg), "Out of memory");
        return cli_fail(&err);
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (strcmp(fmt, "unknown option") == 0 && opt_problem[0])
                snprintf(buf, sizeof(buf), "%s", opt_problem);
        if (json_errors()) {
                char full[600];
                snprintf(full, sizeof(full), "nook %s: %s", cmd, buf);
                print_json_error("usage", full);
                return CLI_EXIT_USAGE;
        }
        char prefix[64], suffix[96];
        snprintf(prefix, sizeof(prefix), "nook %s: ", cmd);
        snprintf(suffix, sizeof(suffix), "\nTry 'nook %s --help'.\n", cmd);
        cli_error_line(prefix, buf, suffix);
        return CLI_EXIT_USAGE;
}

int cli_fail_usage(const char *cmd, const nook_error *err) {
        return cli_usage_error(cmd, "%s", err->msg);
}

/* Optimal string alignment distance (Levenshtein plus adjacent swaps: "exce" is 1 from
 * "exec"), capped: strings longer than 64 bytes are never close. */
static size_t edit_distance(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        size_t d[66][66];
        if (la > 64 || lb > 64)
                return SIZE_MAX;
        for (size_t i = 0; i <= la; i++)
                d[i][0] = i;
        for (size_t j = 0; j <= lb; j++)
                d[0][j] = j;
        for (size_t i = 1; i <= la; i++)
                for (size_t j = 1; j <= lb; j++) {
                        size_t cost = a[i - 1] != b[j - 1];
                        size_t v = d[i - 1][j] + 1;
                        if (d[i][j - 1] + 1 < v)
                                v = d[i][j - 1] + 1;
                        if (d[i - 1][j - 1] + cost < v)
                                v = d[i - 1][j - 1] + cost;
                        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                                d[i - 2][j - 2] + 1 < v)
                                v = d[i - 2][j - 2] + 1;
                        d[i][j] = v;
                }
        return d[la][lb];
}

const char *cli_did_you_mean(const char *word, const char *const *candidates, size_t n) {
        const char *best = NULL;
        size_t best_d = SIZE_MAX;
        size_t len = strlen(word);
        for (size_t i = 0; i < n; i++) {
                size_t dist = edit_distance(word, candidates[i]);
                if (dist < best_d) {
                        best_d = dist;
                        best = candidates[i];
                }
        }
        /* close enough to be a typo: at most 2 edits, and fewer than half the word */
        if (best && best_d <= 2 && best_d * 2 < (len > 2 ? len : 3))
                return best;
        return NULL;
}

/* Records what getopt refused, naming the option, with a suggestion from the long options. */
static void note_bad_option(char *const *argv, const char *shortopts, const struct option *longopts) {
        const char *arg = optind > 0 ? argv[optind - 1] : "";
        bool missing = false;
        if (optopt != 0) {
                missing = optopt < 256 && strchr(shortopts, optopt) && optopt != ':';
                for (const struct option *o = longopts; o && o->name; o++)
                        if (o->val == optopt && o->has_arg == required_argument &&
                                strncmp(arg, "--", 2) == 0)
                                missing = true;
        }
        if (missing) {
                snprintf(opt_problem, sizeof(opt_problem), "option '%s' needs a value", arg);
                return;
        }
        if (optopt != 0 && strncmp(arg, "--", 2) != 0) {
                snprintf(opt_problem, sizeof(opt_problem), "unknown option '-%c'", optopt);
                return;
        }
        char word[128];
        const char *names[128];
        size_t n = 0;
        snprintf(word, sizeof(word), "%s", arg + (strncmp(arg, "--", 2) == 0 ? 2 : 0));
        word[strcspn(word, "=")] = 0;
        for (const struct option *o = longopts; o && o->name && n < 128; o++)
                names[n++] = o->name;
        const char *s = cli_did_you_mean(word, names, n);
        if (s)
                snprintf(opt_problem, sizeof(opt_problem), "unknown option '--%.100s'; did you mean '--%s'?",
                        word, s);
        else
                snprintf(opt_problem, sizeof(opt_problem), "unknown option '--%.100s'", word);
}

#undef getopt_long
/* --json is nook's own option, before the command (`nook --json rm x`) or among the command's
 * options (`nook rm x --json`, as `ls` and `inspect` take it): a command whose table lacks it
 * gets it here.  Never after a command's program (`nook exec x tool --json` is the tool's): those
 * commands stop at their first operand. */
int cli_getopt_long(
        int argc, char *const *argv, const char *shortopts, const struct option *longopts, int *longind) {
        opterr = 0; /* one message, ours (cli_usage_error), not getopt's and then ours */
        for (;;) {
                int c = getopt_long(argc, argv, shortopts, longopts, longind);
                if (c == '?' && optopt == 0 && optind > 0 && optind <= argc &&
                        strcmp(argv[optind - 1], "--json") == 0) {
                        arg_json = true;
                        continue;
                }
                if (c == '?' || c == ':')
                        note_bad_option(argv, shortopts, longopts);
                return c;
        }
}

int cli_take_json(int argc, char **argv, int from) {
        int out = from;
        for (int i = from; i < argc; i++) {
                if (strcmp(argv[i], "--") == 0) {
                        while (++i < argc)
                                argv[out++] = argv[i];
                        break;
                }
                if (strcmp(argv[i], "--json") == 0)
                        arg_json = true;
                else
                        argv[out++] = argv[i];
        }
        argv[out] = NULL;
        return out;
}

int cli_open(nook **ret, nook_error *err) {
        return nook_open(arg_home, ret, err);
}

bool cli_split_target(const char *arg, char **ret_name, const char **ret_path) {
        const char *colon = strchr(arg, ':');
        if (!colon || colon == arg)
                return false;
        *ret_name = strndup(arg, (size_t)(colon - arg));
        *ret_path = colon + 1;
        return *ret_name != NULL;
}

/* docker's commands nook has under another name (an edit distance would offer 'pause' for
 * unpause, 'stop' for top, 'rm' for rmi), or not at all (NULL). */
static const struct {
        const char *docker, *nook;
} docker_names[] = {
        { "unpause", "resume" }, { "rmi", "image rm" }, { "images", "image ls" }, { "pull", "image pull" },
        { "load", "image import" }, { "save", "image export" }, { "top", "exec NAME ps" },
        { "commit", "snapshot create" },
        { "rename", NULL }, /* none: a sandbox's name is what its state is kept under */
};

/* The commands an edit distance never offers: a typo must not be one step from removing. */
static bool destructive(const char *name) {
        return strcmp(name, "rm") == 0 || strcmp(name, "prune") == 0 || strcmp(name, "stop") == 0 ||
                strcmp(name, "kill") == 0 || strcmp(name, "restart") == 0;
}

static int unknown_command(const char *name) {
        const char *names[ELEMENTSOF(commands)];
        char msg[512];
        size_t n = 0;
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (!destructive(commands[i].name))
                        names[n++] = commands[i].name;
        const char *s = cli_did_you_mean(name, names, n);
        for (size_t i = 0; i < ELEMENTSOF(docker_names); i++)
                if (strcmp(name, docker_names[i].docker) == 0)
                        s = docker_names[i].nook;
        if (s)
                snprintf(msg, sizeof(msg), "unknown command '%.200s'. Did you mean '%s'?", name, s);
        else
                snprintf(msg, sizeof(msg), "unknown command '%.200s'", name);
        if (json_errors()) {
                print_json_error("usage", msg);
                return CLI_EXIT_USAGE;
        }
        cli_error_line("nook: ", msg,
                s ? " Run 'nook --help' for the list of commands.\n"
                  : ". Run 'nook --help' for the list of commands.\n");
        return CLI_EXIT_USAGE;
}

int cmd_help(int argc, char **argv) {
        if (argc < 2) {
                help(stdout);
                return 0;
        }
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                printf("Usage: nook help [COMMAND]\n\nThe list of commands, or a command's own help (as 'nook COMMAND --help').\n");
                return 0;
        }
        if (argc > 2)
                return cli_usage_error("help", "expected at most one COMMAND");
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(commands[i].name, argv[1]) == 0) {
                        char *sub[] = { argv[1], (char *)"--help", NULL };
                        optind = 0;
                        return commands[i].run(2, sub);
                }
        return unknown_command(argv[1]);
}

int cmd_version(int argc, char **argv) {
        static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
                { "format", required_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' }, {} };
        int c;
        while ((c = getopt_long(argc, argv, "+hjf:", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook version [--json | --format TEMPLATE]\n\nThe versions of the nook command and of the libnook it loaded.\n");
                        return 0;
                } else if (c == 'j')
                        arg_json = true;
                else if (c == 'f')
                        arg_format = optarg;
                else
                        return cli_usage_error("version", "unknown option");
        }
        if (optind < argc)
                return cli_usage_error("version", "unexpected argument '%s'", argv[optind]);
        json_t *v = json_pack("{s:s, s:s}", "client", NOOK_CLI_VERSION, "libnook", nook_version());
        if (!v)
                return cli_fail_oom();
        int r = 0;
        if (arg_json || arg_format)
                r = cli_print_value(v);
        else
                printf("nook %s (libnook %s)\n", NOOK_CLI_VERSION, nook_version());
        json_decref(v);
        return r;
}

/* A closed stdin, stdout or stderr becomes /dev/null: else the first descriptor we open takes
 * its number (the signal pipe, a sandbox's socket), and exec hands it to the command as its
 * stdio. */
static void stdio_fill(void) {
        for (int fd = 0; fd < 3; fd++)
                if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
                        (void)open("/dev/null", O_RDWR); /* the lowest free number: fd */
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "home", required_argument, NULL, 'H' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { "allow-shared-home", no_argument, NULL, 'S' },
                {},
        };
        int c;
        stdio_fill();
        opterr = 0;
        scan_json_errors(argc, argv);
        /* "+": stop at the command name; each command parses its own options */
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) >= 0) {
                switch (c) {
                case 'H':
                        arg_home = optarg;
                        break;
                case 'j':
                        arg_json = true;
                        break;
                case 'S':
                        /* libnook reads it in nook_open (sandbox/ctx.c) */
                        if (setenv("NOOK_ALLOW_SHARED_HOME", "1", 1) < 0)
                                return CLI_EXIT_USAGE;
                        break;
                case 'h':
                        help(stdout);
                        return 0;
                case 'V':
                        printf("nook %s\n", NOOK_CLI_VERSION);
                        return 0;
                default:
                        note_bad_option(argv, "+h", opts);
                        if (json_errors()) {
                                print_json_error("usage", opt_problem);
                                return CLI_EXIT_USAGE;
                        }
                        cli_error_line("nook: ", opt_problem, "\n");
                        help(stderr);
                        return CLI_EXIT_USAGE;
                }
        }
        if (optind >= argc) {
                help(stderr);
                return CLI_EXIT_USAGE;
        }
        int first = optind;
        const char *name = argv[first];
        /* Hidden: shell completions and the man page generator (cmd_complete.c). */
        if (strcmp(name, "__complete") == 0)
                return cmd_complete(argc - first, argv + first);
        if (strcmp(name, "__doc") == 0)
                return cmd_doc(argc - first, argv + first);
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(commands[i].name, name) == 0) {
                        optind = 0; /* glibc: a full re-initialisation for the command's own getopt */
                        opt_problem[0] = 0;
                        return commands[i].run(argc - first, argv + first);
                }
        return unknown_command(name);
}
