/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "cli/cli.h"

bool arg_json;
const char *arg_home;

static const cli_command commands[] = {
        { "run", cmd_run, "Create a sandbox, run one command in it, remove it" },
        { "create", cmd_create, "Create and start a sandbox" },
        { "start", cmd_start, "Start a stopped sandbox again" },
        { "exec", cmd_exec, "Run a command in a running sandbox" },
        { "stop", cmd_stop, "Stop a sandbox (its workspace is kept)" },
        { "rm", cmd_rm, "Remove sandboxes: state, writable layer and workspace" },
        { "ls", cmd_ls, "List sandboxes" },
        { "prune", cmd_prune, "Remove stopped sandboxes (sticky ones with --all)" },
        { "inspect", cmd_inspect, "Show a sandbox's details, including why it stopped" },
        { "logs", cmd_logs, "Show a sandbox's supervisor log" },
        { "stats", cmd_stats, "Show a running sandbox's cpu, memory and process use" },
        { "update", cmd_update, "Change a running sandbox's resource limits" },
        { "cp", cmd_cp, "Copy files between the host and a workspace (NAME:PATH)" },
        { "cat", cmd_cat, "Print a workspace file (NAME:PATH)" },
        { "ws", cmd_ws, "Workspace files: path, write, cat, ls, rm, mkdir, mv" },
        { "volume", cmd_volume, "Named volumes: create, ls, rm" },
        { "image", cmd_image, "Images: pull, ls, inspect, rm, prune, import, export" },
        { "snapshot", cmd_snapshot, "Snapshots (disk state only): create, ls, inspect, rm, export, import" },
        { "doctor", cmd_doctor, "Check what this host offers nook" },
};
/* For the hidden __complete and __doc (cmd_complete.c). */
const cli_command *const cli_commands = commands;
const size_t cli_n_commands = sizeof(commands) / sizeof(commands[0]);

static void help(FILE *f) {
        fprintf(f,
                "Usage: nook [--home DIR] [--json] COMMAND [ARGS...]\n\n"
                "nook runs untrusted code in local sandboxes: isolated Linux containers with a\n"
                "workspace that is a host directory, mounted at /workspace.\n\nCommands:\n");
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
        fprintf(f,
                "\nOptions:\n"
                "  --home DIR   state folder (default $NOOK_HOME, /var/lib/nook as root,\n"
                "               ~/.local/share/nook otherwise)\n"
                "  --json       machine-readable output\n"
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

int cli_fail(const nook_error *err) {
        fputs("nook: ", stderr);
        cli_print_safe(stderr, err->msg);
        fputc('\n', stderr);
        return CLI_EXIT_ERROR;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        fprintf(stderr, "nook %s: ", cmd);
        cli_print_safe(stderr, buf);
        fprintf(stderr, "\nTry 'nook %s --help'.\n", cmd);
        return CLI_EXIT_USAGE;
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

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "home", required_argument, NULL, 'H' },
                { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {},
        };
        int c;
        /* "+": stop at the command name; each command parses its own options */
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) >= 0) {
                switch (c) {
                case 'H':
                        arg_home = optarg;
                        break;
                case 'j':
                        arg_json = true;
                        break;
                case 'h':
                        help(stdout);
                        return 0;
                case 'V':
                        printf("nook %s\n", nook_version());
                        return 0;
                default:
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
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (strcmp(commands[i].name, name) == 0) {
                        optind = 0; /* glibc: a full re-initialisation for the command's own getopt */
                        return commands[i].run(argc - first, argv + first);
                }
        fprintf(stderr, "nook: unknown command '");
        cli_print_safe(stderr, name);
        fprintf(stderr, "'. Run 'nook --help' for the list of commands.\n");
        return CLI_EXIT_USAGE;
}
