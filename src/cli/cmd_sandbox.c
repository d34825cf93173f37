/* SPDX-License-Identifier: Apache-2.0 */
/* create, start, stop, restart, kill, rm, update, prune (logs: cmd_exec.c; ls, ps, inspect, stats:
 * cmd_ps.c) */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/spec_opts.h"

int cmd_create(int argc, char **argv) {
        static const struct option opts[] = { SPEC_OPTS_LONG, { "replace", no_argument, NULL, 'r' },
                { "help", no_argument, NULL, 'h' }, {} };
        json_t *spec = json_object();
        unsigned flags = 0;
        int c, r;
        /* no "+": options may come before or after NAME (there is no command to protect) */
        while ((c = getopt_long(argc, argv, "h" SPEC_OPTS_SHORT "u:", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook create NAME [OPTIONS]\n\nCreate and start a sandbox. A stopped sandbox of the same name is\n"
                               "re-created over the same workspace.\n\n" SPEC_OPTS_HELP
                               "  --replace              stop a running sandbox of that name first\n");
                        json_decref(spec);
                        return 0;
                }
                if (c == 'r') {
                        flags |= NOOK_CREATE_REPLACE;
                        continue;
                }
                r = spec_opt_apply("create", spec, c, optarg);
                if (r <= 0) {
                        json_decref(spec);
                        return r < 0 ? CLI_EXIT_USAGE : cli_usage_error("create", "unknown option");
                }
        }
        if (optind != argc - 1) {
                json_decref(spec);
                return cli_usage_error("create", "expected exactly one sandbox NAME");
        }
        spec_opts_finish(spec);
        char *text = json_dumps(spec, JSON_COMPACT);
        json_decref(spec);
        nook *n = NULL;
        nook_error err = { 0 };
        r = cli_open(&n, &err);
        if (r >= 0)
                r = nook_sandbox_create(n, argv[optind], text, flags, &err);
        free(text);
        nook_close(n);
        if (r < 0)
                return cli_fail(&err);
        cli_print_done(argv[optind], "running");
        return 0;
}

/* For commands of the shape "nook VERB NAME...": op on each name from argv[optind] on, one nook
 * handle; the last failure's exit status.  done: the state each name is in after op, printed
 * (cli_print_done), or NULL to print nothing; missing_ok: a name that does not exist is said on
 * stderr but fails nothing (docker's rm -f). */
static int for_each_name_opt(const char *cmd, int argc, char **argv, cli_name_op op, void *userdata,
        const char *done, bool missing_ok) {
        nook *n = NULL;
        nook_error err = { 0 };
        int status = 0;
        if (optind >= argc)
                return cli_usage_error(cmd, "expected at least one sandbox NAME");
        if (cli_open(&n, &err) < 0)
                return cli_fail(&err);
        for (int i = optind; i < argc; i++) {
                if (op(n, argv[i], userdata, &err) < 0) {
                        int r = cli_fail(&err);
                        if (!(missing_ok && err.code == NOOK_E_NOT_FOUND))
                                status = r;
                } else if (done)
                        cli_print_done(argv[i], done);
        }
        nook_close(n);
        return status;
}

static int for_each_name(
        const char *cmd, int argc, char **argv, cli_name_op op, void *userdata, const char *done) {
        return for_each_name_opt(cmd, argc, argv, op, userdata, done, false);
}

static int op_start(nook *n, const char *name, void *u, nook_error *err) {
        return nook_sandbox_start(n, name, err);
}

/* "nook CMD NAME..." with no option but --help, anywhere among the names, as docker takes them
 * ("nook pause w1 --help"): getopt permutes them first, so nothing is done before a bad one is
 * refused.  1 when the help was printed, a usage error's exit status negated, 0 to go on. */
static int help_only(const char *cmd, int argc, char **argv, const char *help) {
        static const struct option opts[] = { { "help", no_argument, NULL, 'h' }, {} };
        int c;
        optind = 0; /* glibc: re-initialised, so that it permutes (main's own getopt did not) */
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                if (c != 'h')
                        return -cli_usage_error(cmd, "unknown option");
                fputs(help, stdout);
                return 1;
        }
        return 0;
}

int cli_names_command(
        const char *cmd, int argc, char **argv, const char *help, cli_name_op op, const char *done) {
        int r = help_only(cmd, argc, argv, help);
        if (r != 0)
                return r > 0 ? 0 : -r;
        return for_each_name(cmd, argc, argv, op, NULL, done);
}

int cmd_start(int argc, char **argv) {
        return cli_names_command("start", argc, argv,
                "Usage: nook start NAME...\n\nStart stopped sandboxes again from their stored spec.\n",
                op_start, "running");
}

static int op_stop(nook *n, const char *name, void *u, nook_error *err) {
        return nook_sandbox_stop(n, name, *(uint64_t *)u, err);
}

/* "nook CMD [--timeout DUR] NAME...": the options of stop and wait, anywhere among the names (as
 * docker's).  Returns 0 to go on, 1 when the help was printed, or a usage error's exit status
 * (negated). */
static int timeout_opts(const char *cmd, int argc, char **argv, const char *help, uint64_t *timeout_ms) {
        static const struct option opts[] = { { "timeout", required_argument, NULL, 't' },
                { "help", no_argument, NULL, 'h' }, {} };
        nook_error err = { 0 };
        int c;
        while ((c = getopt_long(argc, argv, "ht:", opts, NULL)) >= 0) {
                if (c == 'h') {
                        fputs(help, stdout);
                        return 1;
                }
                if (c != 't')
                        return -cli_usage_error(cmd, "unknown option");
                if (nook_parse_duration_ms(optarg, timeout_ms, &err) < 0)
                        return -cli_usage_error(cmd, "--timeout: %s", err.msg);
        }
        return 0;
}

int cmd_stop(int argc, char **argv) {
        uint64_t timeout_ms = 10000;
        int r = timeout_opts("stop", argc, argv,
                "Usage: nook stop [-t|--timeout DUR] NAME...\n\nStop sandboxes: SIGTERM, then SIGKILL after the timeout (default 10s).\n"
                "The workspace is kept; an ephemeral sandbox's writable layer is discarded.\n\n"
                "  -t, --timeout DUR  time between SIGTERM and SIGKILL (e.g. 1s; a plain number is seconds;\n"
                "                     0 kills at once, as docker stop -t 0; at most 1h)\n",
                &timeout_ms);
        if (r != 0)
                return r > 0 ? 0 : -r;
        return for_each_name("stop", argc, argv, op_stop, &timeout_ms, "stopped");
}

static int op_restart(nook *n, const char *name, void *u, nook_error *err) {
        int r = nook_sandbox_stop(n, name, *(uint64_t *)u, err);
        return r < 0 ? r : nook_sandbox_start(n, name, err);
}

int cmd_restart(int argc, char **argv) {
        uint64_t timeout_ms = 10000;
        int r = timeout_opts("restart", argc, argv,
                "Usage: nook restart [-t|--timeout DUR] NAME...\n\n"
                "Stop sandboxes as 'nook stop' does, then start them again from their stored spec, as\n"
                "'docker restart'. A stopped sandbox is started. The workspace is kept; an ephemeral\n"
                "sandbox's writable layer is new, a sticky one's kept. A 'run -d' command is not run again.\n\n"
                "  -t, --timeout DUR  time between SIGTERM and SIGKILL (default 10s; 0 kills at once)\n",
                &timeout_ms);
        if (r != 0)
                return r > 0 ? 0 : -r;
        return for_each_name("restart", argc, argv, op_restart, &timeout_ms, "running");
}

static int op_kill(nook *n, const char *name, void *u, nook_error *err) {
        return nook_sandbox_kill(n, name, *(int *)u, err);
}

int cmd_kill(int argc, char **argv) {
        static const struct option opts[] = { { "signal", required_argument, NULL, 's' },
                { "help", no_argument, NULL, 'h' }, {} };
        nook_error err = { 0 };
        int c, sig = SIGKILL;
        while ((c = getopt_long(argc, argv, "hs:", opts, NULL)) >= 0) {
                if (c == 'h') {
                        fputs("Usage: nook kill [-s|--signal SIG] NAME...\n\n"
                              "Send a signal to every command running in each sandbox, as 'docker kill'.\n"
                              "The default, KILL, stops the sandbox at once with all its processes\n"
                              "(as 'nook stop -t 0'). Any other signal goes to each command; the sandbox\n"
                              "runs on, unless its 'run -d' command ends on it (it stops with that command).\n"
                              "A paused sandbox is refused: resume it first.\n\n"
                              "  -s, --signal SIG  a name (TERM, SIGHUP, usr1, RTMIN+1) or a number\n",
                                stdout);
                        return 0;
                }
                if (c != 's')
                        return cli_usage_error("kill", "unknown option");
                if (nook_parse_signal(optarg, &sig, &err) < 0)
                        return cli_usage_error("kill", "--signal: %s", err.msg);
        }
        return for_each_name("kill", argc, argv, op_kill, &sig, sig == SIGKILL ? "stopped" : "running");
}

static int op_wait(nook *n, const char *name, void *u, nook_error *err) {
        int code = -1;
        int r = nook_sandbox_wait(n, name, *(uint64_t *)u, &code, err);
        if (r < 0)
                return r;
        if (arg_json)
                cli_print_json_line(json_pack("{s:s, s:o}", "name", name, "exitCode",
                        code >= 0 ? json_integer(code) : json_null()));
        else if (code >= 0)
                printf("%d\n", code);
        else
                puts("-");
        (void)fflush(stdout); /* each as it stops: a script may read them one by one */
        return 0;
}

int cmd_wait(int argc, char **argv) {
        uint64_t timeout_ms = 0;
        int r = timeout_opts("wait", argc, argv,
                "Usage: nook wait [-t|--timeout DUR] NAME...\n\n"
                "Wait until each sandbox has stopped (as 'docker wait'), and print, one line each,\n"
                "how the command of a 'nook run -d' or 'nook run --keep' ended: its exit status, or\n"
                "128 + the signal that killed it (137 when a stop's SIGKILL did); '-' for a sandbox\n"
                "without such a command (made by create, or started again).\n"
                "The same status is 'exitCode' in 'nook inspect'.\n\n"
                "  -t, --timeout DUR  give up after DUR (e.g. 30s), with an error (exit 1)\n",
                &timeout_ms);
        if (r != 0)
                return r > 0 ? 0 : -r;
        return for_each_name("wait", argc, argv, op_wait, &timeout_ms, NULL);
}

static int op_rm(nook *n, const char *name, void *u, nook_error *err) {
        return nook_sandbox_remove(n, name, err);
}

int cmd_rm(int argc, char **argv) {
        static const struct option opts[] = { { "force", no_argument, NULL, 'f' },
                { "help", no_argument, NULL, 'h' }, {} };
        int c;
        bool force = false;
        while ((c = getopt_long(argc, argv, "hf", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook rm [-f] NAME...\n\nRemove sandboxes, running or not: the supervisor, the writable layer,\n"
                               "the record and the workspace.\n\n"
                               "  -f, --force  a NAME that does not exist is said on stderr but is no error (exit 0),\n"
                               "               as docker rm -f; running sandboxes are removed with or without it\n");
                        return 0;
                }
                if (c != 'f')
                        return cli_usage_error("rm", "unknown option");
                force = true;
        }
        return for_each_name_opt("rm", argc, argv, op_rm, NULL, "removed", force);
}

int cmd_update(int argc, char **argv) {
        static const struct option opts[] = { { "cpus", required_argument, NULL, 1010 },
                { "memory", required_argument, NULL, 'm' }, { "pids-max", required_argument, NULL, 1011 },
                { "help", no_argument, NULL, 'h' }, {} };
        json_t *upd = json_object();
        int c;
        while ((c = getopt_long(argc, argv, "hm:", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook update [--cpus N] [-m|--memory SIZE] [--pids-max N] NAME\n\n"
                               "Change a running sandbox's limits, within the --max-cpus/--max-memory it was created with;\n"
                               "without those, within the limits given at create (none given: no ceiling).\n"
                               "With --json it prints {\"name\": NAME, \"update\": the limits set, as spec fields}.\n");
                        json_decref(upd);
                        return 0;
                }
                int r = spec_opt_apply("update", upd, c, optarg);
                if (r <= 0) {
                        json_decref(upd);
                        return r < 0 ? CLI_EXIT_USAGE : cli_usage_error("update", "unknown option");
                }
        }
        if (optind != argc - 1 || json_object_size(upd) == 0) {
                json_decref(upd);
                return cli_usage_error(
                        "update", "expected at least one of --cpus, --memory, --pids-max and one NAME");
        }
        char *text = json_dumps(upd, JSON_COMPACT);
        nook *n = NULL;
        nook_error err = { 0 };
        int r = text ? cli_open(&n, &err) : -1;
        if (r >= 0)
                r = nook_sandbox_update(n, argv[optind], text, &err);
        free(text);
        nook_close(n);
        if (r < 0) {
                json_decref(upd);
                return text ? cli_fail(&err) : cli_fail_oom();
        }
        if (arg_json)
                cli_print_json_line(json_pack("{s:s, s:o}", "name", argv[optind], "update", upd));
        else {
                json_decref(upd);
                puts(argv[optind]);
        }
        return 0;
}

int cmd_prune(int argc, char **argv) {
        bool all = false;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--all") == 0)
                        all = true;
                else if (strcmp(argv[i], "--json") == 0)
                        arg_json = true;
                else if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--force") == 0)
                        ; /* docker's "no prompt": nook never prompts */
                else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
                        printf("Usage: nook prune [--all] [-f] [--json]\n\nRemove every stopped sandbox with its workspace, as 'nook rm' does.\n"
                               "Sticky sandboxes are kept unless --all. There is no prompt: -f, --force are\n"
                               "accepted for docker's 'container prune -f'. --json prints the removed names as an array.\n"
                               "It also removes this user's runtime folders (sockets, logs, ephemeral layers) whose\n"
                               "state folder was deleted by hand.\n");
                        return 0;
                } else
                        return cli_usage_error("prune", "unknown argument '%s'", argv[i]);
        }
        nook *n = NULL;
        nook_error err = { 0 };
        char *text = NULL;
        if (cli_open(&n, &err) < 0 || nook_sandbox_prune(n, all, &text, &err) < 0) {
                nook_close(n);
                return cli_fail(&err);
        }
        nook_close(n);
        json_t *a = json_loads(text, 0, NULL), *v;
        size_t i;
        if (arg_json)
                puts(text);
        else
                json_array_foreach(a, i, v) puts(json_string_value(v));
        json_decref(a);
        nook_free(text);
        return 0;
}
