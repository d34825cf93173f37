/* SPDX-License-Identifier: Apache-2.0 */
/* nook egress log NAME [-f] [--json]: the egress gateway's audit log (libnook: nook_egress_log). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "nook.h"
#include "cli/cli.h"

#define EGRESS_USAGE "Usage: nook egress log [-f] [--json] NAME\n"

static int cmd_egress_log(int argc, char **argv) {
        static const struct option opts[] = { { "follow", no_argument, NULL, 'f' },
                { "json", no_argument, NULL, 4100 }, { "help", no_argument, NULL, 'h' }, {} };
        nook_egress_log_opts o = { .json = arg_json };
        int c;
        optind = 0; /* glibc: re-initialised, so that it permutes (egress log NAME --json) */
        while ((c = getopt_long(argc, argv, "hf", opts, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        printf(EGRESS_USAGE
                                "\n"
                                "Prints the audit log of the sandbox's egress gateway (started by --secret,\n"
                                "--allow-http or --egress-audit): one line per HTTP(S) request or refused\n"
                                "connection, TIME DECISION STATUS METHOD HOSTPATH (RULE or REASON).  DECISION is\n"
                                "allow, deny (no --allow-http rule matched: the guest got 403), block (a secret's\n"
                                "placeholder sent where it may not go, or whose value was not kept when the sandbox\n"
                                "was started again) or error.  Never a secret or a placeholder.\n"
                                "Kept until 'nook rm'.  Fields come from the guest: control characters show as \\xNN.\n"
                                "A sandbox without a gateway has no log: that is an error, not an empty log.\n\n"
                                "  -f, --follow           keep printing new entries until the sandbox stops (or ^C)\n"
                                "  --json                 one JSON object per line: time, sandbox, method, host, path,\n"
                                "                         status, decision, rule, reason, bytesUp, bytesDown, proto\n");
                        return 0;
                case 'f':
                        o.follow = true;
                        break;
                case 4100:
                        o.json = true;
                        break;
                default:
                        return cli_usage_error("egress log", "unknown option");
                }
        }
        if (optind + 1 != argc)
                return cli_usage_error("egress log",
                        optind >= argc ? "expected a sandbox NAME" : "expected one sandbox NAME");
        nook *n = NULL;
        nook_error err = { 0 };
        int r = cli_open(&n, &err);
        if (r >= 0) {
                (void)fflush(stdout);
                r = nook_egress_log(n, argv[optind], &o, 1, &err);
        }
        nook_close(n);
        return r < 0 ? cli_fail(&err) : 0;
}

int cmd_egress(int argc, char **argv) {
        if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
                fputs(EGRESS_USAGE "\n"
                                   "The egress gateway of a sandbox created with --secret, --allow-http or\n"
                                   "--egress-audit: 'nook egress log NAME' prints its audit log.\n",
                        argc < 2 ? stderr : stdout);
                return argc < 2 ? CLI_EXIT_USAGE : 0;
        }
        if (strcmp(argv[1], "log") == 0)
                return cmd_egress_log(argc - 1, argv + 1);
        return cli_usage_error("egress", "unknown subcommand '%s'; expected: log", argv[1]);
}
