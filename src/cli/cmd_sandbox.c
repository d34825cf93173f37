/* SPDX-License-Identifier: Apache-2.0 */
/* create, start, stop, rm, ls, inspect (logs: cmd_exec.c) */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/spec_opts.h"

static void print_json_string(const char *s) {
        json_t *o = json_loads(s, 0, NULL);
        char *t = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
        puts(t ? t : s);
        free(t);
        json_decref(o);
}

/* "nook VERB [--json] NAME [--json]": returns the NAME argument, or NULL after printing usage
 * (help: *ret_status 0). */
static const char *single_name(const char *verb, int argc, char **argv, const char *help, int *ret_status) {
        const char *name = NULL;
        bool dashdash = false;
        for (int i = 1; i < argc; i++) {
                if (!dashdash && strcmp(argv[i], "--") == 0)
                        dashdash = true;
                else if (!dashdash && strcmp(argv[i], "--json") == 0)
                        arg_json = true;
                else if (!dashdash && (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)) {
                        fputs(help, stdout);
                        *ret_status = 0;
                        return NULL;
                } else if (!dashdash && argv[i][0] == '-') {
                        *ret_status = cli_usage_error(verb, "unknown option '%s'", argv[i]);
                        return NULL;
                } else if (name) {
                        *ret_status = cli_usage_error(verb, "expected exactly one sandbox NAME");
                        return NULL;
                } else
                        name = argv[i];
        }
        if (!name)
                *ret_status = cli_usage_error(verb, "expected exactly one sandbox NAME");
        return name;
}

/* Opens the state root and asks libnook for a JSON description of sandbox name; 0 or the
 * exit status of the failure (already printed). */
static int name_json(const char *name, int (*fn)(nook *, const char *, char **, nook_error *), char **ret) {
        nook *n = NULL;
        nook_error err = { 0 };
        if (cli_open(&n, &err) < 0 || fn(n, name, ret, &err) < 0) {
                nook_close(n);
                return cli_fail(&err);
        }
        nook_close(n);
        return 0;
}

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
        if (arg_json)
                printf("{\"name\":\"%s\",\"state\":\"running\"}\n", argv[optind]);
        else
                puts(argv[optind]);
        return 0;
}

/* For commands of the shape "nook VERB NAME..." */
typedef int (*name_op)(nook *n, const char *name, void *userdata, nook_error *err);

static int for_each_name(const char *cmd, int argc, char **argv, name_op op, void *userdata, bool print) {
        nook *n = NULL;
        nook_error err = { 0 };
        int status = 0;
        if (optind >= argc)
                return cli_usage_error(cmd, "expected at least one sandbox NAME");
        if (cli_open(&n, &err) < 0)
                return cli_fail(&err);
        for (int i = optind; i < argc; i++) {
                if (op(n, argv[i], userdata, &err) < 0)
                        status = cli_fail(&err);
                else if (print)
                        puts(argv[i]);
        }
        nook_close(n);
        return status;
}

static int op_start(nook *n, const char *name, void *u, nook_error *err) {
        return nook_sandbox_start(n, name, err);
}

int cmd_start(int argc, char **argv) {
        if (argc > 1 && ((strcmp(argv[1], "-h") == 0) || (strcmp(argv[1], "--help") == 0))) {
                printf("Usage: nook start NAME...\n\nStart stopped sandboxes again from their stored spec.\n");
                return 0;
        }
        optind = 1;
        return for_each_name("start", argc, argv, op_start, NULL, true);
}

static int op_stop(nook *n, const char *name, void *u, nook_error *err) {
        return nook_sandbox_stop(n, name, *(uint64_t *)u, err);
}

int cmd_stop(int argc, char **argv) {
        static const struct option opts[] = { { "timeout", required_argument, NULL, 't' },
                { "help", no_argument, NULL, 'h' }, {} };
        uint64_t timeout_ms = 10000;
        nook_error err = { 0 };
        int c;
        while ((c = getopt_long(argc, argv, "+ht:", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook stop [--timeout DUR] NAME...\n\nStop sandboxes: SIGTERM, then SIGKILL after the timeout (default 10s).\n"
                               "The workspace is kept; an ephemeral sandbox's writable layer is discarded.\n");
                        return 0;
                }
                if (c != 't')
                        return cli_usage_error("stop", "unknown option");
                if (nook_parse_duration_ms(optarg, &timeout_ms, &err) < 0)
                        return cli_usage_error("stop", "--timeout: %s", err.msg);
        }
        return for_each_name("stop", argc, argv, op_stop, &timeout_ms, true);
}

static int op_rm(nook *n, const char *name, void *u, nook_error *err) {
        return nook_sandbox_remove(n, name, err);
}

int cmd_rm(int argc, char **argv) {
        static const struct option opts[] = { { "force", no_argument, NULL, 'f' },
                { "help", no_argument, NULL, 'h' }, {} };
        int c;
        while ((c = getopt_long(argc, argv, "+hf", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook rm [-f] NAME...\n\nRemove sandboxes, running or not: the supervisor, the writable layer,\n"
                               "the record and the workspace. -f is accepted for docker compatibility.\n");
                        return 0;
                }
                if (c != 'f')
                        return cli_usage_error("rm", "unknown option");
        }
        return for_each_name("rm", argc, argv, op_rm, NULL, true);
}

static const char *age(json_int_t t, char *buf, size_t len) {
        if (t <= 0)
                return "-";
        long d = (long)(time(NULL) - t);
        if (d < 60)
                snprintf(buf, len, "%lds ago", d);
        else if (d < 3600)
                snprintf(buf, len, "%ldm ago", d / 60);
        else if (d < 86400)
                snprintf(buf, len, "%ldh ago", d / 3600);
        else
                snprintf(buf, len, "%ldd ago", d / 86400);
        return buf;
}

int cmd_ls(int argc, char **argv) {
        static const struct option opts[] = { { "label", required_argument, NULL, 'l' },
                { "json", no_argument, NULL, 'j' }, { "quiet", no_argument, NULL, 'q' },
                { "help", no_argument, NULL, 'h' }, {} };
        const char *filters[65] = { 0 };
        size_t nf = 0;
        bool quiet = false;
        int c;
        while ((c = getopt_long(argc, argv, "+hl:qj", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook ls [--label KEY[=VALUE]]... [--json] [-q]\n");
                        return 0;
                } else if (c == 'l' && nf < 64)
                        filters[nf++] = optarg;
                else if (c == 'j')
                        arg_json = true;
                else if (c == 'q')
                        quiet = true;
                else
                        return cli_usage_error("ls", "unknown option");
        }
        nook *n = NULL;
        nook_error err = { 0 };
        char *text = NULL;
        if (cli_open(&n, &err) < 0 || nook_sandbox_list(n, filters, &text, &err) < 0) {
                nook_close(n);
                return cli_fail(&err);
        }
        nook_close(n);
        if (arg_json) {
                print_json_string(text);
                nook_free(text);
                return 0;
        }
        json_t *a = json_loads(text, 0, NULL);
        nook_free(text);
        size_t i;
        json_t *o;
        if (!quiet)
                printf("%-24s %-9s %-10s %-12s %s\n", "NAME", "STATE", "PERSIST", "CREATED", "IMAGE");
        json_array_foreach(a, i, o) {
                const char *name = json_string_value(json_object_get(o, "name"));
                if (quiet) {
                        puts(name);
                        continue;
                }
                char buf[32];
                printf("%-24s %-9s %-10s %-12s %s\n", name, json_string_value(json_object_get(o, "state")),
                        json_string_value(json_object_get(o, "persistence")),
                        age(json_integer_value(json_object_get(o, "createdAt")), buf, sizeof(buf)),
                        json_string_value(json_object_get(o, "image")));
        }
        json_decref(a);
        return 0;
}

int cmd_inspect(int argc, char **argv) {
        int status = 0;
        const char *name = single_name("inspect", argc, argv,
                "Usage: nook inspect [--json] NAME\n\nPrints the sandbox as JSON: state, stopReason, spec, times, workspace.\n",
                &status);
        if (!name)
                return status;
        char *text = NULL;
        if ((status = name_json(name, nook_sandbox_inspect, &text)) != 0)
                return status;
        print_json_string(text);
        nook_free(text);
        return 0;
}

int cmd_stats(int argc, char **argv) {
        int status = 0;
        const char *name = single_name("stats", argc, argv,
                "Usage: nook stats [--json] NAME\n\nCPU time, memory (current and peak), processes and OOM kills of a running sandbox.\n",
                &status);
        if (!name)
                return status;
        char *text = NULL;
        if ((status = name_json(name, nook_sandbox_stats, &text)) != 0)
                return status;
        if (arg_json) {
                print_json_string(text);
        } else {
                json_t *o = json_loads(text, 0, NULL);
                json_t *ml = json_object_get(o, "memoryLimitBytes"), *cl = json_object_get(o, "cpusLimit");
                json_t *pl = json_object_get(o, "pidsLimit");
                char lim[64];
                printf("cpu       %.3f s used",
                        (double)json_integer_value(json_object_get(o, "cpuUsageNs")) / 1e9);
                printf(json_is_integer(cl) ? ", limit %lld cpus\n" : ", no limit\n",
                        (long long)json_integer_value(cl));
                if (json_is_integer(ml))
                        snprintf(lim, sizeof(lim), "limit %.1f MiB",
                                (double)json_integer_value(ml) / 1048576.0);
                else
                        snprintf(lim, sizeof(lim), "no limit");
                printf("memory    %.1f MiB, peak %.1f MiB, %s\n",
                        (double)json_integer_value(json_object_get(o, "memoryBytes")) / 1048576.0,
                        (double)json_integer_value(json_object_get(o, "memoryPeakBytes")) / 1048576.0, lim);
                printf(json_is_integer(pl) ? "pids      %lld, limit %lld\n" : "pids      %lld, no limit\n",
                        (long long)json_integer_value(json_object_get(o, "pids")),
                        (long long)json_integer_value(pl));
                printf("oom kills %lld\n", (long long)json_integer_value(json_object_get(o, "oomKills")));
                json_decref(o);
        }
        nook_free(text);
        return 0;
}

int cmd_update(int argc, char **argv) {
        static const struct option opts[] = { { "cpus", required_argument, NULL, 1010 },
                { "memory", required_argument, NULL, 'm' }, { "pids-max", required_argument, NULL, 1011 },
                { "help", no_argument, NULL, 'h' }, {} };
        json_t *upd = json_object();
        int c;
        while ((c = getopt_long(argc, argv, "+hm:", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook update [--cpus N] [--memory SIZE] [--pids-max N] NAME\n\n"
                               "Change a running sandbox's limits, within the --max-cpus/--max-memory it was created with.\n");
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
        json_decref(upd);
        nook *n = NULL;
        nook_error err = { 0 };
        int r = cli_open(&n, &err);
        if (r >= 0)
                r = nook_sandbox_update(n, argv[optind], text, &err);
        free(text);
        nook_close(n);
        if (r < 0)
                return cli_fail(&err);
        puts(argv[optind]);
        return 0;
}

int cmd_prune(int argc, char **argv) {
        bool all = false;
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--all") == 0)
                        all = true;
                else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
                        printf("Usage: nook prune [--all]\n\nRemove every stopped sandbox with its workspace, as 'nook rm' does.\n"
                               "Sticky sandboxes are kept unless --all.\n");
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
