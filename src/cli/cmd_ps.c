/* SPDX-License-Identifier: Apache-2.0 */
/* ls, ps, inspect, stats: the lists and descriptions a docker user reaches for, printed through
 * the one table helper (cli/table.h) so text, --json and --format come from the same rows. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/table.h"
#include "cli/template.h"

#define MAX_FILTERS 64

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

static const char *cell_created(json_t *row, char *buf, size_t len) {
        return age(json_integer_value(json_object_get(row, "createdAt")), buf, len);
}

static const cli_column list_columns[] = {
        { "NAME", "name", NULL, 0.2, 0 },
        { "STATE", "state", NULL, 0.1, 0 },
        { "PERSIST", "persistence", NULL, 0.1, 0 },
        { "CREATED", NULL, cell_created, 0.1, 0 },
        { "IMAGE", "image", NULL, 0.3, CLI_COL_TRUNC },
};

typedef struct list_args {
        const char *labels[MAX_FILTERS + 1];
        size_t n_labels;
        unsigned status; /* STATUS_* bits the status filters ask for; 0: any (-a) or the default */
        const char *name_parts[MAX_FILTERS + 1];
        size_t n_name_parts;
        bool all, quiet;
} list_args;

enum { STATUS_RUNNING = 1, STATUS_STOPPED = 2, STATUS_PAUSED = 4 };

static unsigned status_bit(const char *state) {
        if (!state)
                return 0;
        if (strcmp(state, "running") == 0)
                return STATUS_RUNNING;
        if (strcmp(state, "paused") == 0)
                return STATUS_PAUSED;
        return strcmp(state, "stopped") == 0 ? STATUS_STOPPED : 0;
}

/* --filter KEY=VALUE, docker's keys: label=K[=V], status=running|paused|stopped|exited,
 * name=PART.  As docker: filters of one key match if any of them does (status=running
 * --filter status=exited: both), labels must all match. */
static int apply_filter(const char *cmd, list_args *a, const char *f) {
        if (strncmp(f, "label=", 6) == 0 && f[6] && f[6] != '=') {
                if (a->n_labels >= MAX_FILTERS)
                        return cli_usage_error(cmd, "at most %d label filters", MAX_FILTERS);
                a->labels[a->n_labels++] = f + 6;
                return 0;
        }
        if (strncmp(f, "status=", 7) == 0) {
                const char *v = f + 7;
                /* docker's "exited" is nook's "stopped" */
                unsigned bit = status_bit(strcmp(v, "exited") == 0 ? "stopped" : v);
                if (!bit)
                        return cli_usage_error(
                                cmd, "--filter status='%s': expected running, paused, stopped or exited", v);
                a->status |= bit;
                return 0;
        }
        if (strncmp(f, "name=", 5) == 0 && f[5]) {
                if (a->n_name_parts >= MAX_FILTERS)
                        return cli_usage_error(cmd, "at most %d name filters", MAX_FILTERS);
                a->name_parts[a->n_name_parts++] = f + 5;
                return 0;
        }
        return cli_usage_error(cmd,
                "--filter '%s': expected label=KEY[=VALUE], status=running|paused|stopped|exited or name=PART",
                f);
}

static int parse_list_args(const char *cmd, int argc, char **argv, list_args *a) {
        static const struct option opts[] = { { "label", required_argument, NULL, 'l' },
                { "filter", required_argument, NULL, 'f' }, { "all", no_argument, NULL, 'a' },
                { "json", no_argument, NULL, 'j' }, { "quiet", no_argument, NULL, 'q' },
                { "format", required_argument, NULL, 'F' }, { "no-trunc", no_argument, NULL, 'T' },
                { "help", no_argument, NULL, 'h' }, {} };
        int c, r;
        while ((c = getopt_long(argc, argv, "+hl:f:aqj", opts, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        printf("Usage: nook %s [-a] [-q] [--filter KEY=VALUE]... [--label KEY[=VALUE]]...\n"
                               "               [--json | --format TEMPLATE] [--no-trunc]\n\n%s\n\n"
                               "  -a, --all              %s\n"
                               "  -q, --quiet            names only\n"
                               "  -f, --filter KEY=VALUE label=KEY[=VALUE], status=running|paused|stopped|exited,\n"
                               "                         name=PART; repeated: any status, any name, all labels\n"
                               "  -l, --label KEY[=VAL]  same as --filter label=KEY[=VAL]\n"
                               "  --json                 the rows as a JSON array\n"
                               "  --format TEMPLATE      one line per sandbox, e.g. '{{.Name}} {{.State}}' or\n"
                               "                         '{{json .Labels}}' (field names as in --json)\n"
                               "  --no-trunc             never cut a column to fit the terminal\n",
                                cmd,
                                strcmp(cmd, "ps") == 0
                                        ? "List running and paused sandboxes (as 'docker ps'); -a for all of them."
                                        : "List all sandboxes, running or stopped.",
                                strcmp(cmd, "ps") == 0 ? "stopped sandboxes too"
                                                       : "accepted (ls always lists all)");
                        return 1;
                case 'l':
                        if (a->n_labels >= MAX_FILTERS)
                                return cli_usage_error(cmd, "at most %d label filters", MAX_FILTERS);
                        a->labels[a->n_labels++] = optarg;
                        break;
                case 'f':
                        if ((r = apply_filter(cmd, a, optarg)) != 0)
                                return r;
                        break;
                case 'a':
                        a->all = true;
                        break;
                case 'q':
                        a->quiet = true;
                        break;
                case 'j':
                        arg_json = true;
                        break;
                case 'F':
                        arg_format = optarg;
                        break;
                case 'T':
                        arg_no_trunc = true;
                        break;
                default:
                        return cli_usage_error(cmd, "unknown option");
                }
        }
        if (optind < argc)
                return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
        return 0;
}

/* Checks --format before any work: a bad template is a usage error that changes nothing. */
static int check_format(const char *cmd) {
        nook_error err = { 0 };
        if (arg_format && arg_json)
                return cli_usage_error(cmd, "--json and --format exclude each other");
        if (arg_format && template_check(arg_format, &err) < 0)
                return cli_fail_usage(cmd, &err);
        return 0;
}

/* Keeps the rows a's status and name filters select (labels were applied by libnook). */
static void filter_rows(json_t *rows, const list_args *a) {
        for (size_t i = json_array_size(rows); i-- > 0;) {
                json_t *o = json_array_get(rows, i);
                const char *state = json_string_value(json_object_get(o, "state"));
                const char *name = json_string_value(json_object_get(o, "name"));
                /* as docker: a status filter looks at every sandbox; ps alone, at the running
                 * and the paused ones */
                unsigned want = a->status ? a->status : a->all ? ~0u : STATUS_RUNNING | STATUS_PAUSED;
                bool keep = (status_bit(state) & want) || (want == ~0u);
                bool name_hit = a->n_name_parts == 0;
                for (size_t k = 0; k < a->n_name_parts && !name_hit; k++)
                        name_hit = name && strstr(name, a->name_parts[k]);
                if (!keep || !name_hit)
                        (void)json_array_remove(rows, i);
        }
}

static int list_rows(const list_args *a, json_t **ret) {
        nook *n = NULL;
        nook_error err = { 0 };
        char *text = NULL;
        if (cli_open(&n, &err) < 0 || nook_sandbox_list(n, a->labels, &text, &err) < 0) {
                nook_close(n);
                return cli_fail(&err);
        }
        nook_close(n);
        json_t *rows = json_loads(text, 0, NULL);
        nook_free(text);
        if (!json_is_array(rows)) {
                json_decref(rows);
                return cli_fail_oom();
        }
        filter_rows(rows, a);
        *ret = rows;
        return 0;
}

static int list_main(const char *cmd, int argc, char **argv, bool all_default) {
        list_args a = { .all = all_default };
        json_t *rows = NULL;
        int r = parse_list_args(cmd, argc, argv, &a);
        if (r != 0)
                return r == 1 ? 0 : r;
        if ((r = check_format(cmd)) != 0)
                return r;
        if (a.quiet && !arg_json)
                arg_format = "{{.name}}";
        if ((r = list_rows(&a, &rows)) != 0)
                return r;
        r = cli_table_print(list_columns, ELEMENTSOF(list_columns), rows);
        json_decref(rows);
        return r;
}

int cmd_ls(int argc, char **argv) {
        return list_main("ls", argc, argv, /* all_default= */ true);
}

int cmd_ps(int argc, char **argv) {
        return list_main("ps", argc, argv, /* all_default= */ false);
}

/* ---- inspect ----------------------------------------------------------------------------------- */

/* "nook VERB [--json] [--format T] [--no-stream] NAME...": names into *ret_names (argv entries). */
static int names_args(const char *verb, int argc, char **argv, const char *help, bool *no_stream,
        const char ***ret_names, size_t *ret_n) {
        static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
                { "format", required_argument, NULL, 'F' }, { "no-trunc", no_argument, NULL, 'T' },
                { "no-stream", no_argument, NULL, 'S' }, { "help", no_argument, NULL, 'h' }, {} };
        int c;
        /* no "+": options may come after the names ("nook stats NAME --json") */
        while ((c = getopt_long(argc, argv, "hf:", opts, NULL)) >= 0) {
                if (c == 'h') {
                        fputs(help, stdout);
                        return 1;
                } else if (c == 'j')
                        arg_json = true;
                else if (c == 'F' || c == 'f')
                        arg_format = optarg;
                else if (c == 'T')
                        arg_no_trunc = true;
                else if (c == 'S' && no_stream)
                        *no_stream = true;
                else
                        return cli_usage_error(verb, "unknown option");
        }
        int r = check_format(verb);
        if (r != 0)
                return r;
        *ret_names = (const char **)argv + optind;
        *ret_n = (size_t)(argc - optind);
        return 0;
}

int cmd_inspect(int argc, char **argv) {
        const char **names = NULL;
        size_t n_names = 0;
        int r = names_args("inspect", argc, argv,
                "Usage: nook inspect [--json] [-f|--format TEMPLATE] NAME...\n\n"
                "Prints each sandbox as JSON: state, stopReason, spec, times, workspace, and for a running\n"
                "sandbox with an egress gateway (--secret, --allow-http, --egress-audit) its state as the\n"
                "supervisor tells it: egress.state running, restarting (it died: a new one starts) or failed\n"
                "(given up after 5 restarts within a minute: HTTP and HTTPS are refused; egress.reason).\n"
                "One NAME prints an object, several an array (in their order). --format renders TEMPLATE\n"
                "per sandbox, e.g. '{{.State}}', '{{.Egress.State}}', '{{json .Labels}}'.\n",
                NULL, &names, &n_names);
        if (r != 0)
                return r == 1 ? 0 : r;
        if (n_names == 0)
                return cli_usage_error("inspect", "expected at least one sandbox NAME");
        nook *n = NULL;
        nook_error err = { 0 };
        if (cli_open(&n, &err) < 0)
                return cli_fail(&err);
        json_t *all = json_array();
        int status = 0;
        for (size_t i = 0; all && i < n_names; i++) {
                char *text = NULL;
                if (nook_sandbox_inspect(n, names[i], &text, &err) < 0) {
                        status = cli_fail(&err);
                        continue;
                }
                (void)json_array_append_new(all, json_loads(text, 0, NULL));
                nook_free(text);
        }
        nook_close(n);
        if (!all)
                return cli_fail_oom();
        /* docker prints what it found and still fails for the names it did not */
        if (json_array_size(all) > 0) {
                r = cli_print_value(n_names == 1 ? json_array_get(all, 0) : all);
                if (r != 0)
                        status = r;
        }
        json_decref(all);
        return status;
}

/* ---- stats -------------------------------------------------------------------------------------- */

static const char *cell_cpu(json_t *row, char *buf, size_t len) {
        json_t *p = json_object_get(row, "cpuPercent");
        if (!json_is_number(p))
                return "-";
        snprintf(buf, len, "%.2f%%", json_number_value(p));
        return buf;
}

static const char *cell_mem(json_t *row, char *buf, size_t len) {
        if (!json_object_get(row, "memoryBytes"))
                return "-";
        double used = (double)json_integer_value(json_object_get(row, "memoryBytes")) / 1048576.0;
        json_t *lim = json_object_get(row, "memoryLimitBytes");
        if (json_is_integer(lim))
                snprintf(buf, len, "%.1fMiB / %.1fMiB", used, (double)json_integer_value(lim) / 1048576.0);
        else
                snprintf(buf, len, "%.1fMiB / no limit", used);
        return buf;
}

static const char *cell_mem_peak(json_t *row, char *buf, size_t len) {
        if (!json_object_get(row, "memoryPeakBytes"))
                return "-";
        snprintf(buf, len, "%.1fMiB",
                (double)json_integer_value(json_object_get(row, "memoryPeakBytes")) / 1048576.0);
        return buf;
}

static const char *cell_pids(json_t *row, char *buf, size_t len) {
        json_t *lim = json_object_get(row, "pidsLimit");
        long long p = (long long)json_integer_value(json_object_get(row, "pids"));
        if (!json_object_get(row, "pids"))
                return "-";
        if (json_is_integer(lim))
                snprintf(buf, len, "%lld / %lld", p, (long long)json_integer_value(lim));
        else
                snprintf(buf, len, "%lld", p);
        return buf;
}

static const char *cell_oom(json_t *row, char *buf, size_t len) {
        if (!json_object_get(row, "oomKills"))
                return "-";
        snprintf(buf, len, "%lld", (long long)json_integer_value(json_object_get(row, "oomKills")));
        return buf;
}

static const cli_column stats_columns[] = {
        { "NAME", "name", NULL, 0.2, 0 },
        { "CPU %", NULL, cell_cpu, 8, CLI_COL_RIGHT },
        { "MEM USAGE / LIMIT", NULL, cell_mem, 20, CLI_COL_RIGHT },
        { "MEM PEAK", NULL, cell_mem_peak, 10, CLI_COL_RIGHT },
        { "PIDS", NULL, cell_pids, 8, CLI_COL_RIGHT },
        { "OOM KILLS", NULL, cell_oom, 4, CLI_COL_RIGHT },
};

static double now_ns(void) {
        struct timespec ts;
        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* One sample of each named sandbox (all running ones when names is empty).  A sandbox that
 * stopped since the list was taken is left out when no names were given; a named one that is
 * not running is an error, as in docker: said on stderr and set in *status (status NULL: left
 * out without a word). */
static int sample(nook *n, const char **names, size_t n_names, json_t **ret, int *status) {
        json_t *rows = json_array(), *list = NULL;
        nook_error err = { 0 };
        char *text = NULL;
        if (!rows)
                return cli_fail_oom();
        if (n_names == 0) {
                const char *none[] = { NULL };
                if (nook_sandbox_list(n, none, &text, &err) < 0) {
                        json_decref(rows);
                        return cli_fail(&err);
                }
                list = json_loads(text, 0, NULL);
                nook_free(text);
        }
        size_t count = list ? json_array_size(list) : n_names;
        for (size_t i = 0; i < count; i++) {
                const char *name = list ? json_string_value(json_object_get(json_array_get(list, i), "name"))
                                        : names[i];
                /* running and paused ones, as docker stats lists paused containers */
                const char *state =
                        list ? json_string_value(json_object_get(json_array_get(list, i), "state")) : NULL;
                if (list && (!state || (strcmp(state, "running") != 0 && strcmp(state, "paused") != 0)))
                        continue;
                if (nook_sandbox_stats(n, name, &text, &err) < 0) {
                        if (!list) {
                                if (status)
                                        *status = cli_fail(&err);
                        } else
                                /* listed as running, but its numbers are out of reach (rootless
                                 * without a delegated cgroup has none): "-" rather than hidden */
                                (void)json_array_append_new(rows,
                                        json_pack("{s:s, s:f}", "name", name, "sampledAtNs", now_ns()));
                        continue;
                }
                json_t *o = json_loads(text, 0, NULL);
                nook_free(text);
                if (o)
                        (void)json_object_set_new(o, "sampledAtNs", json_real(now_ns()));
                (void)json_array_append_new(rows, o);
        }
        json_decref(list);
        *ret = rows;
        return 0;
}

/* cpuPercent of each row in cur, from the row of the same name in prev: CPU time used over wall
 * time passed, 100% = one CPU busy (as docker). */
static void add_cpu_percent(json_t *cur, json_t *prev) {
        size_t i, j;
        json_t *o, *p;
        json_array_foreach(cur, i, o) {
                const char *name = json_string_value(json_object_get(o, "name"));
                json_array_foreach(prev, j, p) {
                        if (!name ||
                                strcmp(name, json_string_value(json_object_get(p, "name")) ?: "") != 0 ||
                                !json_object_get(o, "cpuUsageNs") || !json_object_get(p, "cpuUsageNs"))
                                continue;
                        double dcpu = (double)(json_integer_value(json_object_get(o, "cpuUsageNs")) -
                                json_integer_value(json_object_get(p, "cpuUsageNs")));
                        double dt = json_real_value(json_object_get(o, "sampledAtNs")) -
                                json_real_value(json_object_get(p, "sampledAtNs"));
                        if (dt > 0 && dcpu >= 0)
                                (void)json_object_set_new(o, "cpuPercent", json_real(100.0 * dcpu / dt));
                }
        }
}

static int stats_print(json_t *rows, bool single) {
        size_t i;
        json_t *o;
        json_array_foreach(rows, i, o)(void) json_object_del(o, "sampledAtNs");
        if (single && json_array_size(rows) == 1 && (arg_json || arg_format))
                return cli_print_value(json_array_get(rows, 0));
        return cli_table_print(stats_columns, ELEMENTSOF(stats_columns), rows);
}

static volatile sig_atomic_t stats_stop;

static void on_stop_signal(int sig) {
        (void)sig;
        stats_stop = 1;
}

/* Samples every second and redraws until ^C (SIGINT/SIGTERM end it with status 0). */
static int stats_stream(nook *n, const char **names, size_t n_names, json_t *prev, int *status) {
        struct sigaction sa = { .sa_handler = on_stop_signal };
        (void)sigaction(SIGINT, &sa, NULL);
        (void)sigaction(SIGTERM, &sa, NULL);
        /* the first screen at once (CPU % needs a second sample: "-" until the next one) */
        json_t *first = json_deep_copy(prev);
        fputs("\033[H\033[2J", stdout);
        int r0 = first ? stats_print(first, n_names == 1) : cli_fail_oom();
        json_decref(first);
        (void)fflush(stdout);
        if (r0 != 0) {
                json_decref(prev);
                return r0;
        }
        while (!stats_stop) {
                json_t *cur = NULL;
                (void)usleep(1000 * 1000);
                if (stats_stop)
                        break;
                int r = sample(n, names, n_names, &cur, status);
                if (r != 0) {
                        json_decref(prev);
                        return r;
                }
                add_cpu_percent(cur, prev);
                json_decref(prev);
                prev = json_deep_copy(cur);
                fputs("\033[H\033[2J", stdout); /* home, clear: a refreshed screen, as docker stats */
                r = stats_print(cur, n_names == 1);
                json_decref(cur);
                (void)fflush(stdout);
                if (r != 0) {
                        json_decref(prev);
                        return r;
                }
        }
        json_decref(prev);
        return *status;
}

int cmd_stats(int argc, char **argv) {
        const char **names = NULL;
        size_t n_names = 0;
        bool no_stream = false;
        int r = names_args("stats", argc, argv,
                "Usage: nook stats [--no-stream] [--json | --format TEMPLATE] [--no-trunc] [NAME...]\n\n"
                "CPU, memory (current, limit and peak), processes and OOM kills of running and paused\n"
                "sandboxes: the named ones, or all of them. On a terminal the table is refreshed every second\n"
                "until ^C (as 'docker stats'); --no-stream, --json, --format or an output that is not a\n"
                "terminal print one sample. CPU % is measured over half a second (100% = one CPU).\n"
                "One NAME with --json prints an object, otherwise an array.\n",
                &no_stream, &names, &n_names);
        if (r != 0)
                return r == 1 ? 0 : r;
        nook *n = NULL;
        nook_error err = { 0 };
        int status = 0;
        json_t *first = NULL, *second = NULL;
        if (cli_open(&n, &err) < 0)
                return cli_fail(&err);
        r = sample(n, names, n_names, &first, &status);
        if (r != 0) {
                nook_close(n);
                return r;
        }
        bool stream = !no_stream && !arg_json && !arg_format && isatty(STDOUT_FILENO);
        if (stream) {
                r = stats_stream(n, names, n_names, first, &status);
                nook_close(n);
                return r;
        }
        (void)usleep(500 * 1000);
        /* the first sample said what is wrong: the second does not say it again */
        r = sample(n, names, n_names, &second, NULL);
        nook_close(n);
        if (r == 0) {
                add_cpu_percent(second, first);
                if (json_array_size(second) > 0 || !status)
                        r = stats_print(second, n_names == 1);
        }
        json_decref(first);
        json_decref(second);
        return r != 0 ? r : status;
}
