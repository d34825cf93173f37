/* SPDX-License-Identifier: Apache-2.0 */
/* Two hidden commands that feed the shell completions (completions/) and the man pages (man/):
 *
 *   nook __complete WORD... CURRENT   candidates for CURRENT, one a line ("word\tdescription"):
 *                                     commands, subcommands, flags, and sandbox, image,
 *                                     snapshot or volume names from the store
 *   nook __doc                        one line per command: name, summary, subcommands, and
 *                                     whether each subcommand has its own --help
 *
 * The same protocol as the `__complete` of cobra-based CLIs (podman, kubectl, gh): the shell
 * scripts stay a few lines each and every rule lives here.  Flags are not listed twice: they
 * are read from the command's own --help text (captured in-process), the one place they are
 * documented, which the man pages are generated from as well.  The table below adds only what
 * --help does not say in a machine-readable way: a group's subcommands and which arguments
 * name what. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nook.h"
#include "cli/cli.h"

typedef enum name_kind {
        KIND_NONE,
        KIND_SANDBOX,
        KIND_TARGET, /* NAME:PATH (cp, cat) */
        KIND_IMAGE,
        KIND_SNAPSHOT,
        KIND_VOLUME,
} name_kind;

typedef struct sub_doc {
        const char *name;
        const char *summary;
        name_kind args;
} sub_doc;

typedef struct group_doc {
        const char *command;
        name_kind args; /* what its positional arguments name (commands without subcommands) */
        bool subs_have_help; /* `nook GROUP SUB --help` prints the subcommand's own help */
        const sub_doc subs[9]; /* ends with { NULL } */
} group_doc;

static const group_doc groups[] = {
        { "start", KIND_SANDBOX, false, { { NULL } } },
        { "exec", KIND_SANDBOX, false, { { NULL } } },
        { "stop", KIND_SANDBOX, false, { { NULL } } },
        { "restart", KIND_SANDBOX, false, { { NULL } } },
        { "kill", KIND_SANDBOX, false, { { NULL } } },
        { "rm", KIND_SANDBOX, false, { { NULL } } },
        { "create", KIND_SANDBOX, false, { { NULL } } },
        { "inspect", KIND_SANDBOX, false, { { NULL } } },
        { "logs", KIND_SANDBOX, false, { { NULL } } },
        { "stats", KIND_SANDBOX, false, { { NULL } } },
        { "checkpoint", KIND_SANDBOX, false, { { NULL } } },
        { "update", KIND_SANDBOX, false, { { NULL } } },
        { "cp", KIND_TARGET, false, { { NULL } } },
        { "cat", KIND_TARGET, false, { { NULL } } },
        { "ws", KIND_NONE, false,
                { { "path", "print the host path of a workspace", KIND_SANDBOX },
                        { "write", "write a file atomically", KIND_SANDBOX },
                        { "cat", "print a file", KIND_SANDBOX }, { "ls", "list a directory", KIND_SANDBOX },
                        { "rm", "remove a file or a tree", KIND_SANDBOX },
                        { "mkdir", "create a directory and its parents", KIND_SANDBOX },
                        { "mv", "rename inside the workspace", KIND_SANDBOX }, { NULL } } },
        { "egress", KIND_NONE, true,
                { { "log", "show the egress gateway's audit log", KIND_SANDBOX }, { NULL } } },
        { "volume", KIND_NONE, false,
                { { "create", "create a named volume", KIND_NONE },
                        { "ls", "list named volumes", KIND_NONE },
                        { "rm", "remove named volumes", KIND_VOLUME }, { NULL } } },
        { "image", KIND_NONE, true,
                { { "pull", "download an image", KIND_NONE }, { "ls", "list local images", KIND_NONE },
                        { "inspect", "show an image (JSON)", KIND_IMAGE },
                        { "rm", "remove image names", KIND_IMAGE },
                        { "prune", "free blobs and layers no image uses", KIND_NONE },
                        { "import", "add an image from an OCI layout or archive", KIND_NONE },
                        { "export", "write an image as an archive or layout", KIND_IMAGE }, { NULL } } },
        { "snapshot", KIND_NONE, false,
                { { "create", "snapshot a stopped sticky sandbox", KIND_SANDBOX },
                        { "ls", "list snapshots", KIND_NONE },
                        { "inspect", "show a snapshot (JSON)", KIND_SNAPSHOT },
                        { "rm", "remove snapshots", KIND_SNAPSHOT },
                        { "export", "write a snapshot to one file", KIND_SNAPSHOT },
                        { "import", "read a snapshot file back", KIND_NONE }, { NULL } } },
};

static const char *const global_flags[] = { "--home", "--json", "--help", "--version" };

static const group_doc *group_find(const char *command) {
        for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
                if (strcmp(groups[i].command, command) == 0)
                        return &groups[i];
        return NULL;
}

static const sub_doc *sub_find(const group_doc *g, const char *name) {
        for (const sub_doc *s = g ? g->subs : NULL; s && s->name; s++)
                if (strcmp(s->name, name) == 0)
                        return s;
        return NULL;
}

static const cli_command *command_find(const char *name) {
        for (size_t i = 0; i < cli_n_commands; i++)
                if (strcmp(cli_commands[i].name, name) == 0)
                        return &cli_commands[i];
        return NULL;
}

static bool has_prefix(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* One candidate: the shells filter too, but filtering here keeps their scripts trivial.  Each
 * word is printed once (run's help lists --env twice: for the sandbox and for the command). */
static void candidate(const char *cur, const char *word, const char *desc) {
        static char seen[4096];
        static size_t used;
        if (!word || !has_prefix(word, cur))
                return;
        for (const char *p = seen; p < seen + used; p += strlen(p) + 1)
                if (strcmp(p, word) == 0)
                        return;
        if (used + strlen(word) + 1 <= sizeof(seen)) {
                memcpy(seen + used, word, strlen(word) + 1);
                used += strlen(word) + 1;
        }
        cli_print_safe(stdout, word);
        if (desc && *desc) {
                putchar('\t');
                cli_print_safe(stdout, desc);
        }
        putchar('\n');
}

/* ---- flags, read from the command's --help ---------------------------------------------- */

/* Runs the command's own help path with stdout captured.  Only `COMMAND --help` and, where the
 * table says so, `COMMAND SUB --help`: each returns before touching the store. */
static char *capture_help(const cli_command *c, const char *sub) {
        char *buf = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&buf, &len);
        if (!mem)
                return NULL;
        char *argv[4] = { (char *)c->name, (char *)(sub ? sub : "--help"), sub ? (char *)"--help" : NULL,
                NULL };
        FILE *saved = stdout;
        stdout = mem;
        optind = 0;
        int r = c->run(sub ? 3 : 2, argv);
        stdout = saved;
        fclose(mem);
        if (r != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

/* Prints each flag of one help line: "-x", "--long" at the start of a word (after a space, a
 * ',' or a '['), "--long=" excluded.  ret_takes_value: whether `flag` (when non-NULL) is
 * followed by a value ("--image IMAGE", "-e, --env NAME=VALUE"). */
static void flags_in_line(const char *line, const char *cur, const char *flag, bool *ret_takes_value) {
        bool pending_short_match = false;
        const char *end = strchr(line, '\n');
        if (!end)
                end = line + strlen(line);
        /* An option or subcommand line: its description starts after two spaces. */
        const char *start = line + strspn(line, " ");
        const char *gap = strstr(start, "  ");
        if (!has_prefix(start, "Usage:") && !has_prefix(start, "nook ") && gap && gap < end)
                end = gap;
        for (const char *p = line; p < end; p++) {
                if (*p != '-' || (p > line && !strchr(" ,[|", p[-1])))
                        continue;
                const char *e = p + 1;
                if (*e == '-')
                        e++;
                if (!((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z')))
                        continue;
                while ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') || (*e >= '0' && *e <= '9') ||
                        (*e == '-' && p[1] == '-'))
                        e++;
                if (p[1] != '-' && e - p != 2)
                        continue; /* "-xyz" is no short flag */
                char word[64];
                size_t n = (size_t)(e - p);
                if (n >= sizeof(word))
                        continue;
                memcpy(word, p, n);
                word[n] = 0;
                bool value = (e[0] == ' ' || e[0] == '=') && ((e[1] >= 'A' && e[1] <= 'Z') || e[1] == '[');
                bool alias = e[0] == ',' && e[1] == ' ' && e[2] == '-';
                if (flag && ret_takes_value && (strcmp(word, flag) == 0 || pending_short_match)) {
                        if (alias && !pending_short_match)
                                pending_short_match = true; /* "-e, --env NAME": -e's value is --env's */
                        else {
                                *ret_takes_value = *ret_takes_value || value;
                                pending_short_match = false;
                        }
                }
                if (!flag)
                        candidate(cur, word, NULL);
                p = e - 1;
        }
}

/* Lines of a help text that list flags: options ("  -x, --long ARG  ..."), usage lines, and
 * with sub, the group's line about that subcommand ("  create [--with-workspace] ..."). */
static bool flag_line(const char *line, const char *sub) {
        while (*line == ' ')
                line++;
        if (*line == '-' || has_prefix(line, "Usage:") || has_prefix(line, "nook "))
                return true;
        return sub && has_prefix(line, sub) && line[strlen(sub)] == ' ';
}

/* Lists the flags (flag NULL), or tells whether flag takes a value (returns 1 if so). */
static int scan_flags(
        const cli_command *c, const group_doc *g, const char *sub, const char *cur, const char *flag) {
        char *text = NULL;
        bool takes = false;
        if (sub && g && g->subs_have_help)
                text = capture_help(c, sub);
        if (!text)
                text = capture_help(c, NULL);
        if (!text)
                return 0;
        for (const char *line = text; line && *line;
                line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (flag_line(line, (g && g->subs_have_help) ? NULL : sub))
                        flags_in_line(line, cur, flag, &takes);
        free(text);
        if (!flag)
                candidate(cur, "--help", NULL);
        return takes ? 1 : 0;
}

/* ---- names from the store --------------------------------------------------------------- */

static int list_json(nook *n, name_kind kind, char **ret_json, nook_error *err) {
        switch (kind) {
        case KIND_SANDBOX:
        case KIND_TARGET:
                return nook_sandbox_list(n, NULL, ret_json, err);
        case KIND_IMAGE:
                return nook_image_list(n, ret_json, err);
        case KIND_SNAPSHOT:
                return nook_snapshot_list(n, ret_json, err);
        case KIND_VOLUME:
                return nook_volume_list(n, ret_json, err);
        case KIND_NONE:
        default:
                return -NOOK_E_INVALID;
        }
}

/* Names from the store, quietly: a completion prints no error. */
static void list_names(name_kind kind, const char *cur) {
        nook *n = NULL;
        char *text = NULL;
        nook_error err = {};

        if (kind == KIND_NONE || nook_home_resolve(arg_home, &text, &err) < 0)
                return;
        /* A TAB never creates the state folder (nook_open would). */
        bool exists = access(text, F_OK) == 0;
        free(text);
        text = NULL;
        if (!exists || cli_open(&n, &err) < 0)
                return;
        int r = list_json(n, kind, &text, &err);
        n = nook_close(n);
        if (r < 0)
                return;
        json_t *a = json_loads(text, 0, NULL);
        free(text);
        size_t i, k;
        json_t *o, *nm;
        json_array_foreach(a, i, o) {
                json_t *one = json_object_get(o, "name");
                if (json_is_string(one) && kind == KIND_TARGET) {
                        char *t = NULL;
                        if (asprintf(&t, "%s:", json_string_value(one)) >= 0)
                                candidate(cur, t, NULL);
                        free(t);
                } else if (json_is_string(one))
                        candidate(cur, json_string_value(one), NULL);
                json_array_foreach(json_object_get(o, "names"), k, nm)
                        candidate(cur, json_string_value(nm), NULL);
        }
        json_decref(a);
}

/* ---- nook __complete -------------------------------------------------------------------- */

static name_kind value_kind(const char *flag) {
        if (strcmp(flag, "--image") == 0)
                return KIND_IMAGE;
        if (strcmp(flag, "--snapshot") == 0)
                return KIND_SNAPSHOT;
        return KIND_NONE;
}

/* Completes the arguments of one command: words[0..n-1] follow the command (and subcommand),
 * cur is the word being completed. */
static void complete_args(
        const cli_command *c, const group_doc *g, const sub_doc *s, char **words, int n, const char *cur) {
        for (int i = 0; i < n; i++)
                if (strcmp(words[i], "--") == 0)
                        return; /* the sandbox's own argv: the shell completes files */
        if (n > 0 && words[n - 1][0] == '-' && !strchr(words[n - 1], '=') &&
                scan_flags(c, g, s ? s->name : NULL, cur, words[n - 1]) == 1) {
                list_names(value_kind(words[n - 1]), cur);
                return;
        }
        if (cur[0] == '-') {
                (void)scan_flags(c, g, s ? s->name : NULL, cur, NULL);
                return;
        }
        list_names(s ? s->args : g ? g->args : KIND_NONE, cur);
}

int cmd_complete(int argc, char **argv) {
        /* argv: "__complete" WORD... CURRENT */
        if (argc < 2)
                return 0;
        char **words = argv + 1;
        int n = argc - 2; /* complete words before the current one */
        const char *cur = argv[argc - 1];
        int i = 0;

        while (i < n && words[i][0] == '-') {
                if (strcmp(words[i], "--home") == 0 && i + 1 < n)
                        arg_home = words[++i];
                else if (has_prefix(words[i], "--home="))
                        arg_home = words[i] + strlen("--home=");
                i++;
        }
        if (i > 0 && strcmp(words[i - 1], "--home") == 0 && i == n)
                return 0; /* the state folder: the shell completes directories */
        if (i == n) {
                for (size_t k = 0; cur[0] == '-' && k < sizeof(global_flags) / sizeof(global_flags[0]); k++)
                        candidate(cur, global_flags[k], NULL);
                for (size_t k = 0; cur[0] != '-' && k < cli_n_commands; k++)
                        candidate(cur, cli_commands[k].name, cli_commands[k].summary);
                return 0;
        }
        const cli_command *c = command_find(words[i]);
        if (!c)
                return 0;
        const group_doc *g = group_find(c->name);
        i++;
        if (g && g->subs[0].name) {
                if (i == n) {
                        if (cur[0] == '-')
                                (void)scan_flags(c, g, NULL, cur, NULL);
                        for (const sub_doc *s = g->subs; cur[0] != '-' && s->name; s++)
                                candidate(cur, s->name, s->summary);
                        return 0;
                }
                const sub_doc *s = sub_find(g, words[i]);
                if (!s)
                        return 0;
                complete_args(c, g, s, words + i + 1, n - i - 1, cur);
                return 0;
        }
        complete_args(c, g, NULL, words + i, n - i, cur);
        return 0;
}

/* ---- nook __doc ------------------------------------------------------------------------- */

/* For man/gen_man.py: "COMMAND\tSUMMARY\tSUB SUB...\tHELP" per command, HELP 1 when each
 * subcommand answers --help on its own. Never opens the store. */
int cmd_doc(int argc, char **argv) {
        for (size_t k = 0; k < cli_n_commands; k++) {
                const group_doc *g = group_find(cli_commands[k].name);
                printf("%s\t%s\t", cli_commands[k].name, cli_commands[k].summary);
                for (const sub_doc *s = g ? g->subs : NULL; s && s->name; s++)
                        printf("%s%s", s == g->subs ? "" : " ", s->name);
                printf("\t%d\n", g && g->subs_have_help ? 1 : 0);
        }
        return 0;
}
