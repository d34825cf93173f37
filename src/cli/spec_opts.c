/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/spec_opts.h"

static int set_kv(const char *cmd, json_t *spec, const char *field, const char *arg) {
        const char *eq = strchr(arg, '=');
        if (!eq || eq == arg) {
                cli_usage_error(cmd, "--%s expects KEY=VALUE, got '%s'",
                        strcmp(field, "env") == 0 ? "env" : "label", arg);
                return -1;
        }
        json_t *m = json_object_get(spec, field);
        if (!json_is_object(m)) {
                m = json_object();
                json_object_set_new(spec, field, m);
        }
        char key[256];
        size_t kl = (size_t)(eq - arg);
        if (kl >= sizeof(key)) {
                cli_usage_error(cmd, "the name in '%.40s…' is too long", arg);
                return -1;
        }
        memcpy(key, arg, kl);
        key[kl] = 0;
        json_object_set_new(m, key, json_string(eq + 1));
        return 1;
}

static int set_secs(const char *cmd, json_t *spec, const char *field, const char *opt, const char *arg) {
        uint64_t ms;
        nook_error err = { 0 };
        if (nook_parse_duration_ms(arg, &ms, &err) < 0) {
                cli_usage_error(cmd, "--%s: %s", opt, err.msg);
                return -1;
        }
        json_object_set_new(spec, field, json_integer((json_int_t)((ms + 999) / 1000)));
        return 1;
}

static int load_spec_file(const char *cmd, json_t *spec, const char *path) {
        json_error_t jerr;
        json_t *o = strcmp(path, "-") == 0 ? json_loadf(stdin, 0, &jerr) : json_load_file(path, 0, &jerr);
        if (!o || !json_is_object(o)) {
                cli_usage_error(cmd, "--spec '%s': %s", path, o ? "must be a JSON object" : jerr.text);
                json_decref(o);
                return -1;
        }
        json_object_update(spec, o);
        json_decref(o);
        return 1;
}

int spec_opt_apply(const char *cmd, json_t *spec, int opt, const char *arg) {
        switch (opt) {
        case 1000:
                return json_object_set_new(spec, "image", json_string(arg)) < 0 ? -1 : 1;
        case 'e':
                return set_kv(cmd, spec, "env", arg);
        case 'l':
                return set_kv(cmd, spec, "labels", arg);
        case 1001:
                return json_object_set_new(spec, "persistence", json_string("sticky")) < 0 ? -1 : 1;
        case 1002:
                return set_secs(cmd, spec, "maxDurationSecs", "max-duration", arg);
        case 1003:
                return set_secs(cmd, spec, "idleTimeoutSecs", "idle-timeout", arg);
        case 1004:
                return json_object_set_new(spec, "security", json_string(arg)) < 0 ? -1 : 1;
        case 1005:
                return json_object_set_new(spec, "network", json_string(arg)) < 0 ? -1 : 1;
        case 1006:
                return json_object_set_new(spec, "workdir", json_string(arg)) < 0 ? -1 : 1;
        case 1007:
                return load_spec_file(cmd, spec, arg);
        case 1008:
                return json_object_set_new(spec, "persistence", json_string(arg)) < 0 ? -1 : 1;
        case 'u':
                return json_object_set_new(spec, "user", json_string(arg)) < 0 ? -1 : 1;
        case 1010:
                return json_object_set_new(spec, "cpus", json_string(arg)) < 0 ? -1 : 1;
        case 'm':
                return json_object_set_new(spec, "memory", json_string(arg)) < 0 ? -1 : 1;
        case 1011: {
                char *end;
                long long v = strtoll(arg, &end, 10);
                if (*end || v < 1) {
                        cli_usage_error(cmd, "--pids-max expects a whole number >= 1, got '%s'", arg);
                        return -1;
                }
                return json_object_set_new(spec, "pidsMax", json_integer(v)) < 0 ? -1 : 1;
        }
        case 1012:
                return json_object_set_new(spec, "maxCpus", json_string(arg)) < 0 ? -1 : 1;
        case 1013:
                return json_object_set_new(spec, "maxMemoryMib", json_string(arg)) < 0 ? -1 : 1;
        default:
                return 0;
        }
}
