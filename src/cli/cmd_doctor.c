/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "cli/cli.h"

int cmd_doctor(int argc, char **argv) {
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--json") == 0)
                        arg_json = true;
                else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
                        printf("Usage: nook doctor [--json]\n\nReports what this host offers nook; exits 1 when nook cannot run sandboxes here.\n");
                        return 0;
                } else
                        return cli_usage_error("doctor", "unknown argument '%s'", argv[i]);
        }
        nook_error err = { 0 };
        char *text = NULL;
        /* nook_doctor reports on the state folder NOOK_HOME names */
        if (arg_home)
                (void)setenv("NOOK_HOME", arg_home, 1);
        int r = nook_doctor(&text, &err);
        if (r < 0)
                return cli_fail(&err);
        json_t *o = json_loads(text, 0, NULL);
        if (arg_json) {
                char *t = json_dumps(o, JSON_INDENT(2));
                puts(t ? t : text);
                free(t);
        } else {
                size_t i;
                json_t *c;
                printf("kernel %s, %s\n\n", json_string_value(json_object_get(o, "kernel")),
                        json_is_true(json_object_get(o, "rootless")) ? "rootless" : "root");
                json_array_foreach(json_object_get(o, "checks"), i, c) {
                        bool ok = json_is_true(json_object_get(c, "ok"));
                        bool req = json_is_true(json_object_get(c, "required"));
                        printf("%-4s %-20s %s\n",
                                ok            ? "ok"
                                        : req ? "FAIL"
                                              : "--",
                                json_string_value(json_object_get(c, "name")),
                                json_string_value(json_object_get(c, "detail")));
                        const char *fix = json_string_value(json_object_get(c, "fix"));
                        if (!ok && fix)
                                printf("     %-20s fix: %s\n", "", fix);
                }
                printf("\n%s\n",
                        r == 1 ? "nook can run sandboxes here."
                               : "nook cannot run sandboxes here: see FAIL above.");
        }
        json_decref(o);
        nook_free(text);
        return r == 1 ? 0 : CLI_EXIT_ERROR;
}
