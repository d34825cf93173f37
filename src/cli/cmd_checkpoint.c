/* SPDX-License-Identifier: Apache-2.0 */
/* nook checkpoint NAME [--leave-running]: libnook decides (and today refuses, naming why). */
#include <stdio.h>

#include "nook.h"
#include "cli/cli.h"

int cmd_checkpoint(int argc, char **argv) {
        static const struct option opts[] = { { "leave-running", no_argument, NULL, 'l' },
                { "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, {} };
        unsigned flags = 0;
        int c;
        while ((c = getopt_long(argc, argv, "+h", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook checkpoint [--leave-running] [--json] NAME\n\n"
                               "Checkpoint a running sandbox's processes and memory with CRIU.\n"
                               "No host can do this yet: the command fails with missing_feature and names\n"
                               "the cause on this host ('nook doctor' shows it too; docs/design/checkpoint.md).\n");
                        return 0;
                }
                if (c == 'j')
                        arg_json = true;
                else if (c == 'l')
                        flags |= NOOK_CHECKPOINT_LEAVE_RUNNING;
                else
                        return cli_usage_error("checkpoint", "unknown option");
        }
        if (optind != argc - 1)
                return cli_usage_error("checkpoint", "expected one sandbox NAME");
        nook *n = NULL;
        nook_error err = { 0 };
        if (cli_open(&n, &err) < 0)
                return cli_fail(&err);
        int r = nook_checkpoint(n, argv[optind], flags, &err);
        nook_close(n);
        if (r < 0)
                return cli_fail(&err);
        puts(argv[optind]);
        return 0;
}
