/* SPDX-License-Identifier: Apache-2.0 */
/* nook snapshot create | ls | inspect | rm | export | import.  Public API only. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/stdio_file.h"
#include "cli/table.h"
#include "cli/template.h"

#define SNAPSHOT_USAGE                                                                                         \
        "Usage: nook snapshot COMMAND [ARGS...]\n\n"                                                           \
        "A snapshot is the disk state of a stopped sticky sandbox: its writable root layer (files,\n"          \
        "modes, owners, xattrs, deleted image files) over the image it was booted from, and with\n"            \
        "--with-workspace its workspace.  Disk state only: never memory, processes, sockets or\n"              \
        "devices; a sandbox made from one cold-boots.  Ephemeral sandboxes discard their layer at stop,\n"     \
        "so only sandboxes created with --sticky can be snapshotted.  Content is stored once, under one\n"     \
        "name: a create without NAME of content a snapshot holds already answers with that snapshot\n"         \
        "(\"already present\"); a NAME given for it, or one that is taken, is an error.\n\n"                   \
        "Commands:\n"                                                                                          \
        "  create [--with-workspace] SANDBOX [NAME]   snapshot a stopped sticky sandbox\n"                     \
        "  ls [-q] [--format T] [--no-trunc]          list snapshots ('{{.Name}} {{.Digest}}')\n"              \
        "  inspect SNAP                               details as JSON (what it holds, who uses it)\n"          \
        "  rm SNAP...                                 remove (refused while a sandbox boots from it)\n"        \
        "  export [-q] [--force] SNAP FILE            write one file (tar + zstd; '-': stdout); an\n"          \
        "                                             existing FILE only with --force\n"                       \
        "  import [-q] FILE [NAME]                    read it back ('-': stdin); every digest is verified\n\n" \
        "Boot from one: nook create NAME --snapshot SNAP\n"

static bool streq_help(const char *s) {
        return strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0;
}

typedef struct progress_state {
        const char *what;
} progress_state;

/* One line, redrawn in place, as `nook image pull` does per layer. */
static void on_progress(void *userdata, uint64_t done, uint64_t total) {
        const progress_state *ps = userdata;
        char d[16], t[16];
        cli_human_bytes(done, d, sizeof(d));
        cli_human_bytes(total, t, sizeof(t));
        fprintf(stderr, "\r\033[2K%s %8s / %-8s", ps->what, d, t);
        if (done >= total)
                fputc('\n', stderr);
}

static int print_result(char *json, int (*text)(json_t *)) {
        if (arg_json) {
                puts(json);
                nook_free(json);
                return 0;
        }
        json_t *j = json_loads(json, 0, NULL);
        nook_free(json);
        int r = j ? text(j) : 0;
        json_decref(j);
        return r;
}

/* NAME DIGEST, and for content a snapshot held already (create without a name, import), which one
 * answered and that nothing was added. */
static int print_stored(json_t *j, const char *nothing) {
        printf("%s %s", json_string_value(json_object_get(j, "name")),
                json_string_value(json_object_get(j, "digest")));
        if (json_is_true(json_object_get(j, "alreadyPresent")))
                printf(" (already present: this snapshot holds exactly that content; %s)", nothing);
        putchar('\n');
        return 0;
}

static int print_created(json_t *j) {
        return print_stored(j, "nothing new stored");
}

static int print_imported(json_t *j) {
        return print_stored(j, "nothing imported");
}

static int print_pretty(json_t *j) {
        char *t = json_dumps(j, JSON_INDENT(2));
        if (t)
                puts(t);
        free(t);
        return 0;
}

/* Common option loop: -h, --json, -q, for create --with-workspace, for export --force.  Returns
 * the index of the first operand, or -1 with *ret_status set. */
static int parse_opts(
        const char *sub, int argc, char **argv, bool *quiet, bool *with_ws, bool *force, int *ret_status) {
        static const struct option opts[] = { { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' }, { "quiet", no_argument, NULL, 'q' },
                { "format", required_argument, NULL, 'F' }, { "no-trunc", no_argument, NULL, 'T' },
                { "with-workspace", no_argument, NULL, 'w' }, { "force", no_argument, NULL, 'f' }, {} };
        int c;
        /* no "+": it permutes, so options may follow the operands */
        while ((c = getopt_long(argc, argv, "hjq", opts, NULL)) >= 0) {
                if (c == 'h') {
                        fputs(SNAPSHOT_USAGE, stdout);
                        *ret_status = 0;
                        return -1;
                } else if (c == 'j')
                        arg_json = true;
                else if (c == 'F' && quiet)
                        arg_format = optarg;
                else if (c == 'T' && quiet)
                        arg_no_trunc = true;
                else if (c == 'q' && quiet)
                        *quiet = true;
                else if (c == 'w' && with_ws)
                        *with_ws = true;
                else if (c == 'f' && force)
                        *force = true;
                else {
                        *ret_status = cli_usage_error(sub, "unknown option");
                        return -1;
                }
        }
        return optind;
}

static int parse(const char *sub, int argc, char **argv, bool *quiet, bool *with_ws, int *ret_status) {
        return parse_opts(sub, argc, argv, quiet, with_ws, NULL, ret_status);
}

static int open_or_fail(nook **n, nook_error *err) {
        return cli_open(n, err);
}

static int snap_create(int argc, char **argv) {
        bool with_ws = false;
        int status = 0, i = parse("snapshot create", argc, argv, NULL, &with_ws, &status);
        if (i < 0)
                return status;
        if (argc - i < 1 || argc - i > 2)
                return cli_usage_error("snapshot create", "expects SANDBOX [NAME]");
        nook *n = NULL;
        nook_error err = { 0 };
        char *json = NULL;
        if (open_or_fail(&n, &err) < 0 ||
                nook_snapshot_create(n, argv[i], argc - i == 2 ? argv[i + 1] : NULL,
                        with_ws ? NOOK_SNAPSHOT_WITH_WORKSPACE : 0, &json, &err) < 0) {
                nook_close(n);
                return cli_fail(&err);
        }
        nook_close(n);
        return print_result(json, print_created);
}

static void age(int64_t t, char *buf, size_t n) {
        int64_t d = (int64_t)time(NULL) - t;
        if (d < 120)
                snprintf(buf, n, "%llds ago", (long long)d);
        else if (d < 7200)
                snprintf(buf, n, "%lldm ago", (long long)(d / 60));
        else if (d < 172800)
                snprintf(buf, n, "%lldh ago", (long long)(d / 3600));
        else
                snprintf(buf, n, "%lldd ago", (long long)(d / 86400));
}

static bool arg_quiet_ls;

static const char *cell_digest(json_t *row, char *buf, size_t len) {
        const char *d = json_string_value(json_object_get(row, "digest"));
        snprintf(buf, len, "%.*s", arg_no_trunc ? (int)len : 19, d ? d : "-");
        return buf;
}

static const char *cell_size(json_t *row, char *buf, size_t len) {
        cli_human_bytes((uint64_t)(json_integer_value(json_object_get(row, "rootfsSize")) +
                                json_integer_value(json_object_get(row, "workspaceSize"))),
                buf, len);
        return buf;
}

static const char *cell_created(json_t *row, char *buf, size_t len) {
        age(json_integer_value(json_object_get(row, "createdAt")), buf, len);
        return buf;
}

static const char *cell_holds(json_t *row, char *buf, size_t len) {
        return json_is_true(json_object_get(row, "withWorkspace")) ? "rootfs+ws" : "rootfs";
}

static const cli_column snapshot_columns[] = {
        { "NAME", "name", NULL, 0.2, 0 },
        { "DIGEST", NULL, cell_digest, 19, 0 },
        { "SIZE", NULL, cell_size, 8, CLI_COL_RIGHT },
        { "CREATED", NULL, cell_created, 10, 0 },
        { "HOLDS", NULL, cell_holds, 9, 0 },
        { "BASE", "base", NULL, 0.2, CLI_COL_TRUNC },
};

static int print_list(json_t *a) {
        if (arg_quiet_ls && !arg_format)
                arg_format = "{{.Name}}";
        return cli_table_print(snapshot_columns, ELEMENTSOF(snapshot_columns), a);
}

static int snap_ls(int argc, char **argv) {
        int status = 0, i = parse("snapshot ls", argc, argv, &arg_quiet_ls, NULL, &status);
        if (i < 0)
                return status;
        if (i != argc)
                return cli_usage_error("snapshot ls", "takes no arguments");
        nook_error ferr = { 0 };
        if (arg_format && template_check(arg_format, &ferr) < 0)
                return cli_fail_usage("snapshot ls", &ferr);
        nook *n = NULL;
        nook_error err = { 0 };
        char *json = NULL;
        if (open_or_fail(&n, &err) < 0 || nook_snapshot_list(n, &json, &err) < 0) {
                nook_close(n);
                return cli_fail(&err);
        }
        nook_close(n);
        return print_result(json, print_list);
}

static int snap_inspect(int argc, char **argv) {
        int status = 0, i = parse("snapshot inspect", argc, argv, NULL, NULL, &status);
        if (i < 0)
                return status;
        if (argc - i != 1)
                return cli_usage_error("snapshot inspect", "expects SNAP");
        nook *n = NULL;
        nook_error err = { 0 };
        char *json = NULL;
        if (open_or_fail(&n, &err) < 0 || nook_snapshot_inspect(n, argv[i], &json, &err) < 0) {
                nook_close(n);
                return cli_fail(&err);
        }
        nook_close(n);
        return print_result(json, print_pretty);
}

static int snap_rm(int argc, char **argv) {
        int status = 0, i = parse("snapshot rm", argc, argv, NULL, NULL, &status);
        if (i < 0)
                return status;
        if (argc - i < 1)
                return cli_usage_error("snapshot rm", "expects SNAP...");
        nook *n = NULL;
        nook_error err = { 0 };
        if (open_or_fail(&n, &err) < 0) {
                nook_close(n);
                return cli_fail(&err);
        }
        int rc = 0;
        for (; i < argc; i++)
                if (nook_snapshot_remove(n, argv[i], &err) < 0)
                        rc = cli_fail(&err);
        nook_close(n);
        return rc;
}

static int snap_export(int argc, char **argv) {
        bool quiet = false, force = false;
        int status = 0, i = parse_opts("snapshot export", argc, argv, &quiet, NULL, &force, &status);
        if (i < 0)
                return status;
        if (argc - i != 2)
                return cli_usage_error("snapshot export", "expects SNAP FILE");
        nook *n = NULL;
        nook_error err = { 0 };
        progress_state ps = { .what = "exporting" };
        bool show = !quiet && !arg_json && isatty(STDERR_FILENO);
        const char *file = argv[i + 1];
        cli_stdio_file f; /* "-": the file on stdout */
        int r = cli_stdio_file_take(&f, &file, /* for_stdout= */ true, "snapshot export");
        if (r != 0)
                return r;
        if (open_or_fail(&n, &err) < 0 ||
                nook_snapshot_export(n, argv[i], file, force ? NOOK_SNAPSHOT_EXPORT_FORCE : 0,
                        show ? on_progress : NULL, &ps, &err) < 0) {
                nook_close(n);
                cli_stdio_file_done(&f);
                return cli_fail(&err);
        }
        nook_close(n);
        return cli_stdio_file_finish(&f, "snapshot export");
}

static int snap_import(int argc, char **argv) {
        bool quiet = false;
        int status = 0, i = parse("snapshot import", argc, argv, &quiet, NULL, &status);
        if (i < 0)
                return status;
        if (argc - i < 1 || argc - i > 2)
                return cli_usage_error("snapshot import", "expects FILE [NAME]");
        nook *n = NULL;
        nook_error err = { 0 };
        char *json = NULL;
        progress_state ps = { .what = "importing" };
        bool show = !quiet && !arg_json && isatty(STDERR_FILENO);
        const char *file = argv[i];
        cli_stdio_file f; /* "-": the file on stdin */
        int r = cli_stdio_file_take(&f, &file, /* for_stdout= */ false, "snapshot import");
        if (r != 0)
                return r;
        r = open_or_fail(&n, &err);
        if (r >= 0)
                r = nook_snapshot_import(n, file, argc - i == 2 ? argv[i + 1] : NULL,
                        show ? on_progress : NULL, &ps, &json, &err);
        nook_close(n);
        cli_stdio_file_done(&f);
        if (r < 0)
                return cli_fail(&err);
        return print_result(json, print_imported);
}

int cmd_snapshot(int argc, char **argv) {
        static const struct {
                const char *name;
                int (*run)(int, char **);
        } subs[] = { { "create", snap_create }, { "ls", snap_ls }, { "list", snap_ls },
                { "inspect", snap_inspect }, { "rm", snap_rm }, { "export", snap_export },
                { "import", snap_import } };
        if (argc < 2 || streq_help(argv[1])) {
                fputs(SNAPSHOT_USAGE, argc < 2 ? stderr : stdout);
                return argc < 2 ? CLI_EXIT_USAGE : 0;
        }
        for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
                if (strcmp(subs[i].name, argv[1]) == 0) {
                        optind = 0;
                        return subs[i].run(argc - 1, argv + 1);
                }
        const char *verbs[ELEMENTSOF(subs)];
        for (size_t i = 0; i < ELEMENTSOF(subs); i++)
                verbs[i] = subs[i].name;
        const char *near = cli_did_you_mean(argv[1], verbs, ELEMENTSOF(subs));
        if (near)
                return cli_usage_error(
                        "snapshot", "unknown command '%s'; did you mean '%s'?", argv[1], near);
        return cli_usage_error("snapshot", "unknown command '%s'", argv[1]);
}
