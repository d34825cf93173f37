/* SPDX-License-Identifier: Apache-2.0 */
/* nook diff and nook merge: parse, call nook_diff / nook_merge, print.  Rules live in
 * src/branch (docs/design/diff-merge.md). */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static char kind_letter(const char *kind) {
        if (!kind)
                return '?';
        if (!strcmp(kind, "added"))
                return 'A';
        if (!strcmp(kind, "deleted"))
                return 'D';
        if (!strcmp(kind, "modified"))
                return 'M';
        if (!strcmp(kind, "type"))
                return 'T';
        if (!strcmp(kind, "mode"))
                return 'm';
        return '?';
}

/* A path on one line: a newline or tab in a name is written \\n or \\t (cli_print_safe
 * keeps those, which suits messages but not one-path-per-line output). */
static void print_path(FILE *f, const char *path) {
        for (const char *p = path ? path : ""; *p; p++) {
                if (*p == '\n')
                        fputs("\\n", f);
                else if (*p == '\t')
                        fputs("\\t", f);
                else if (*p == '\\')
                        fputs("\\\\", f);
                else {
                        char one[2] = { *p, 0 };
                        cli_print_safe(f, one);
                }
        }
}

static void print_change(json_t *c, bool patch) {
        const char *path = json_string_value(json_object_get(c, "path"));
        const char *kind = json_string_value(json_object_get(c, "kind"));
        const char *mode = json_string_value(json_object_get(c, "mode"));
        const char *old_mode = json_string_value(json_object_get(c, "oldMode"));
        const char *type = json_string_value(json_object_get(c, "type"));
        const char *old_type = json_string_value(json_object_get(c, "oldType"));
        printf("%c ", kind_letter(kind));
        print_path(stdout, path);
        if (old_type)
                printf("  (%s -> %s)", old_type, type ? type : "?");
        if (old_mode)
                printf("  (mode %s -> %s)", old_mode, mode ? mode : "?");
        if (json_is_true(json_object_get(c, "whiteout")))
                printf("  (whiteout)");
        if (json_is_true(json_object_get(c, "opaque")))
                printf("  (opaque)");
        putchar('\n');
        const char *p = json_string_value(json_object_get(c, "patch"));
        /* The guest wrote it (names in the headers, the lines): on a terminal its control
         * characters are shown as \xNN, so a file cannot set the title or clear the screen;
         * into a pipe the patch goes exact, for patch(1) or git apply. */
        if (patch && p && *p && isatty(STDOUT_FILENO))
                cli_print_safe(stdout, p);
        else if (patch && p && *p)
                fputs(p, stdout);
}

int cmd_diff(int argc, char **argv) {
        static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
                { "patch", no_argument, NULL, 'p' }, { "root", no_argument, NULL, 1001 },
                { "help", no_argument, NULL, 'h' }, {} };
        unsigned flags = 0;
        nook *n = NULL;
        nook_error err = { 0 };
        char *out = NULL;
        int c;
        while ((c = getopt_long(argc, argv, "hjp", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook diff [--json] [-p|--patch] [--root] NAME\n\n"
                               "Show a sandbox's workspace changes since its baseline: the workspace as it was when the\n"
                               "sandbox was first created, or branched (a 'nook run' without --keep or -d takes none:\n"
                               "its diff and merge are refused). One line per path, sorted:\n"
                               "A added, D deleted, M modified (content or symlink target), T type changed, m mode only.\n\n"
                               "Options:\n"
                               "  -p, --patch   a unified diff for each changed text file (a modified file's old\n"
                               "                content is shown when a copy of it is known, else \"old content\n"
                               "                unavailable\")\n"
                               "  --root        the writable root layer's changes instead (the overlay upper layer:\n"
                               "                whiteouts are deletions, opaque directories are marked)\n"
                               "  --json        one JSON object: {\"sandbox\", \"scope\", \"changes\": [...], \"summary\"}\n");
                        return 0;
                }
                if (c == 'j')
                        arg_json = true;
                else if (c == 'p')
                        flags |= NOOK_DIFF_PATCH;
                else if (c == 1001)
                        flags |= NOOK_DIFF_ROOT;
                else
                        return cli_usage_error("diff", "unknown option");
        }
        if (optind != argc - 1)
                return cli_usage_error("diff", "expected one sandbox NAME");
        if (cli_open(&n, &err) < 0)
                return cli_fail(&err);
        int r = nook_diff(n, argv[optind], flags, &out, &err);
        nook_close(n);
        if (r < 0)
                return cli_fail(&err);
        if (arg_json) {
                puts(out);
                nook_free(out);
                return 0;
        }
        json_t *j = json_loads(out, 0, NULL);
        nook_free(out);
        if (!j)
                return cli_fail_oom();
        json_t *ch;
        size_t i;
        json_array_foreach(json_object_get(j, "changes"), i, ch) print_change(ch, flags & NOOK_DIFF_PATCH);
        json_decref(j);
        return 0;
}

static void print_merge(json_t *j) {
        json_t *e;
        size_t i;
        bool dry = json_is_true(json_object_get(j, "dryRun")),
             merged = json_is_true(json_object_get(j, "merged"));
        json_array_foreach(json_object_get(j, "conflicts"), i, e) {
                const char *res = json_string_value(json_object_get(e, "resolution"));
                fprintf(merged || dry ? stdout : stderr, "CONFLICT (branch: %s, target: %s%s%s) ",
                        json_string_value(json_object_get(e, "branch")),
                        json_string_value(json_object_get(e, "target")), res ? ", " : "", res ? res : "");
                print_path(merged || dry ? stdout : stderr, json_string_value(json_object_get(e, "path")));
                fputc('\n', merged || dry ? stdout : stderr);
        }
        if (!merged && !dry)
                return;
        json_array_foreach(json_object_get(j, "applied"), i, e) {
                printf("%c ", kind_letter(json_string_value(json_object_get(e, "kind"))));
                print_path(stdout, json_string_value(json_object_get(e, "path")));
                putchar('\n');
        }
        printf("%s %zu change(s) from '%s' into '%s'\n", dry ? "Would merge" : "Merged",
                json_array_size(json_object_get(j, "applied")),
                json_string_value(json_object_get(j, "branch")),
                json_string_value(json_object_get(j, "into")));
}

int cmd_merge(int argc, char **argv) {
        static const struct option opts[] = { { "into", required_argument, NULL, 'i' },
                { "strategy", required_argument, NULL, 's' }, { "dry-run", no_argument, NULL, 'n' },
                { "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, {} };
        json_t *o = json_object();
        nook *n = NULL;
        nook_error err = { 0 };
        char *out = NULL, *in = NULL;
        int c;
        if (!o)
                return cli_fail_oom();
        while ((c = getopt_long(argc, argv, "hjns:", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook merge [--into TARGET] [-s|--strategy refuse|ours|theirs] [--dry-run] [--json] BRANCH\n\n"
                               "Apply BRANCH's workspace changes since its baseline (its branch point) onto TARGET's\n"
                               "workspace, running or not. A path changed on both sides is a conflict:\n"
                               "  refuse (default)  change nothing, list every conflict, exit 1 (error code \"conflict\")\n"
                               "  ours              keep TARGET's version of conflicting paths\n"
                               "  theirs            take BRANCH's version of conflicting paths\n\n"
                               "Nothing is half-applied: new content is staged beside its target and renamed into place,\n"
                               "deletions come last, and a failure undoes every step; a merge killed part way is undone\n"
                               "(or finished) by the next diff or merge of TARGET.\n\n"
                               "Options:\n"
                               "  --into TARGET     the sandbox to merge into (default: a branch's source)\n"
                               "  -s, --strategy S  refuse, ours or theirs\n"
                               "  -n, --dry-run     list what would change and the conflicts; change nothing\n"
                               "  --json            the report as JSON: {\"branch\", \"into\", \"strategy\", \"dryRun\",\n"
                               "                    \"merged\", \"applied\", \"conflicts\"}\n");
                        json_decref(o);
                        return 0;
                }
                int r = 0;
                if (c == 'i')
                        r = json_object_set_new(o, "into", json_string(optarg));
                else if (c == 's')
                        r = json_object_set_new(o, "strategy", json_string(optarg));
                else if (c == 'n')
                        r = json_object_set_new(o, "dryRun", json_true());
                else if (c == 'j')
                        arg_json = true;
                else {
                        json_decref(o);
                        return cli_usage_error("merge", "unknown option");
                }
                if (r < 0) {
                        json_decref(o);
                        return cli_usage_error("merge", "bad value for an option (not UTF-8?)");
                }
        }
        if (optind != argc - 1) {
                json_decref(o);
                return cli_usage_error("merge", "expected one BRANCH sandbox name");
        }
        in = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!in)
                return cli_fail_oom();
        if (cli_open(&n, &err) < 0) {
                free(in);
                return cli_fail(&err);
        }
        int r = nook_merge(n, argv[optind], in, &out, &err);
        nook_close(n);
        free(in);
        if (out && arg_json)
                puts(out);
        else if (out) {
                json_t *j = json_loads(out, 0, NULL);
                if (j)
                        print_merge(j);
                json_decref(j);
        }
        nook_free(out);
        return r < 0 ? cli_fail(&err) : 0;
}
