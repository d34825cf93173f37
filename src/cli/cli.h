/* SPDX-License-Identifier: Apache-2.0 */
/* The nook command: parse, call libnook (public API only), print.  No rule lives here. */
#pragma once

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nook.h"

/* Exit statuses: 0 ok, 1 a nook error, 2 bad usage; exec and run pass the command's own status
 * through (128+N for a signal), 124 when it timed out, 125 when nook itself failed. */
#define CLI_EXIT_ERROR 1
#define CLI_EXIT_USAGE 2
#define CLI_EXIT_TIMEOUT 124
#define CLI_EXIT_EXEC_FAILED 125

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

extern bool arg_json;
extern bool arg_no_trunc; /* tables: never cut a column to fit the terminal */
extern const char *arg_format; /* --format TEMPLATE (cli/template.h), or NULL */
extern const char *arg_home;

/* Every command's getopt_long goes through this wrapper (the macro below): getopt's own
 * message is off, and what it refused is remembered with a "did you mean" from the command's
 * long options, so cli_usage_error(cmd, "unknown option") prints one line naming the option. */
int cli_getopt_long(
        int argc, char *const *argv, const char *shortopts, const struct option *longopts, int *longind);
#define getopt_long cli_getopt_long

typedef struct cli_command {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *summary;
} cli_command;

/* Prints "nook: <message>" (control characters escaped) and returns the exit status.  With
 * --json: {"error": {"code": "not_found", "message": "..."}} on stderr, same exit status. */
int cli_fail(const nook_error *err);
int cli_fail_oom(void);
/* A usage error (exit 2) whose message is err's, e.g. a bad --format. */
int cli_fail_usage(const char *cmd, const nook_error *err);
/* The candidate within 2 edits (swaps count 1) of word, or NULL. */
const char *cli_did_you_mean(const char *word, const char *const *candidates, size_t n);
/* Prints a usage error naming the command and returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Opens the state root (honours --home / NOOK_HOME). */
int cli_open(nook **ret, nook_error *err);
/* Bytes for people: "512B", "1.5MB" (powers of 1000, as progress displays use). */
void cli_human_bytes(uint64_t b, char *out, size_t n);
/* Prints a string with control characters escaped. */
void cli_print_safe(FILE *f, const char *s);
/* Writes prefix, msg (escaped as cli_print_safe does) and suffix to stderr in one write. */
void cli_error_line(const char *prefix, const char *msg, const char *suffix);
/* A sandbox a command acted on: its name on a line, or with --json one JSON object a line,
 * {"name": NAME, "state": STATE} ("running", "stopped", "paused", "removed"). */
void cli_print_done(const char *name, const char *state);

/* An action on one sandbox of "nook CMD NAME..." (cmd_sandbox.c runs it on each name). */
typedef int (*cli_name_op)(nook *n, const char *name, void *userdata, nook_error *err);
/* A whole "nook CMD NAME..." without options of its own but --help (anywhere among the names, as
 * docker takes them): op on each name, done the state each is in after it (cli_print_done).
 * Returns the last failure's exit status. */
int cli_names_command(
        const char *cmd, int argc, char **argv, const char *help, cli_name_op op, const char *done);
/* Prints o (consumed; NULL: nothing) as one line of compact JSON on stdout. */
void cli_print_json_line(json_t *o);
/* For the commands that read their arguments by hand (ws, cat, volume): takes each "--json" out of
 * argv[from..] and sets arg_json, as cli_getopt_long does for the others; a "--" ends that (and
 * goes too), so 'nook ws rm w -- --json' names a file.  Returns the new argc. */
int cli_take_json(int argc, char **argv, int from);
/* Splits "NAME:PATH"; returns false when there is no ':' or NAME is empty. */
bool cli_split_target(const char *arg, char **ret_name, const char **ret_path);

int cmd_create(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_start(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_restart(int argc, char **argv);
int cmd_kill(int argc, char **argv);
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_branch(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_ws(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_cat(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_update(int argc, char **argv);
int cmd_wait(int argc, char **argv);
int cmd_volume(int argc, char **argv);
int cmd_egress(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_help(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_checkpoint(int argc, char **argv);

/* The command table (main.c), and the hidden commands that describe it (cmd_complete.c). */
extern const cli_command *const cli_commands;
extern const size_t cli_n_commands;
int cmd_complete(int argc, char **argv);
int cmd_doc(int argc, char **argv);
