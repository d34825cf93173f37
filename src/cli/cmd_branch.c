/* SPDX-License-Identifier: Apache-2.0 */
/* pause, resume, branch (docs/design/branch.md) */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "cli/cli.h"

static int op_pause(nook *n, const char *name, void *u, nook_error *err) {
        return nook_pause(n, name, err);
}

static int op_resume(nook *n, const char *name, void *u, nook_error *err) {
        return nook_resume(n, name, err);
}

int cmd_pause(int argc, char **argv) {
        return cli_names_command("pause", argc, argv,
                "Usage: nook pause NAME...\n\nFreeze every process of running sandboxes (cgroup freezer). While paused,\n"
                "exec is refused, the idle timer stands still and the maximum duration keeps\n"
                "counting; stop and rm work. Undo with 'nook resume'.\n",
                op_pause, "paused");
}

int cmd_resume(int argc, char **argv) {
        return cli_names_command("resume", argc, argv,
                "Usage: nook resume NAME...\n\nThaw paused sandboxes; their processes continue where they were.\n",
                op_resume, "running");
}

static void branch_help(void) {
        printf("Usage: nook branch SRC NEW [--count N]\n\n"
               "Make a new sandbox NEW from SRC's current disk state: its writable root layer\n"
               "and its workspace, copied copy-on-write where the filesystem reflinks (XFS,\n"
               "btrfs), else copied. A running SRC is paused only for the copy and keeps\n"
               "running; the branch is started when SRC runs, and stays stopped when SRC is\n"
               "stopped. 'nook inspect NEW' shows branchOf and branchPoint.\n\n"
               "  -n, --count N   make N branches NEW-1 .. NEW-N (1..100), all or none\n"
               "  --memory        branch the running processes too (needs CRIU; see 'nook doctor')\n");
}

int cmd_branch(int argc, char **argv) {
        static const struct option opts[] = { { "count", required_argument, NULL, 'n' },
                { "memory", no_argument, NULL, 'm' }, { "help", no_argument, NULL, 'h' }, {} };
        unsigned count = 0, flags = 0;
        int c;
        while ((c = getopt_long(argc, argv, "hn:", opts, NULL)) >= 0) {
                if (c == 'h') {
                        branch_help();
                        return 0;
                }
                if (c == 'm') {
                        flags |= NOOK_BRANCH_MEMORY;
                        continue;
                }
                if (c != 'n')
                        return cli_usage_error("branch", "unknown option");
                char *end = NULL;
                errno = 0;
                long v = strtol(optarg, &end, 10);
                if (errno || !end || *end || end == optarg || v < 1 || v > 100)
                        return cli_usage_error(
                                "branch", "--count '%s': expected a whole number from 1 to 100", optarg);
                count = (unsigned)v;
        }
        if (optind != argc - 2)
                return cli_usage_error("branch", "expected SRC and NEW");
        nook *n = NULL;
        nook_error err = { 0 };
        char *out = NULL;
        int r = cli_open(&n, &err);
        if (r >= 0)
                r = nook_branch(n, argv[optind], argv[optind + 1], count, flags, &out, &err);
        nook_close(n);
        if (r < 0)
                return cli_fail(&err);
        json_t *a = json_loads(out, 0, NULL);
        nook_free(out);
        if (arg_json) {
                char *t = json_dumps(a, JSON_COMPACT);
                if (t)
                        puts(t);
                free(t);
        } else {
                size_t i;
                json_t *v;
                json_array_foreach(a, i, v) puts(json_string_value(v));
        }
        json_decref(a);
        return 0;
}
