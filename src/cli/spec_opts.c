/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/env_file.h"
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

static int add_env(const char *cmd, const char *name_value, void *spec) {
        /* a line of an env file is checked as an argument is (check_text) */
        size_t off = 0;
        if (!nook_text_is_utf8(name_value, &off)) {
                cli_usage_error(cmd, "the --env value is not UTF-8 text (byte 0x%02x at offset %zu)",
                        (unsigned char)name_value[off], off);
                return -1;
        }
        return set_kv(cmd, spec, "env", name_value);
}

static int set_secs(const char *cmd, json_t *spec, const char *field, const char *opt, const char *arg) {
        uint64_t ms;
        nook_error err = { 0 };
        if (nook_parse_duration_ms(arg, &ms, &err) < 0) {
                cli_usage_error(cmd, "--%s: %s", opt, err.msg);
                return -1;
        }
        /* libnook decides what a fraction of a second means (it refuses one below a second) */
        json_object_set_new(spec, field,
                ms % 1000 ? json_real((double)ms / 1000.0) : json_integer((json_int_t)(ms / 1000)));
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

static json_t *spec_array(json_t *spec, const char *field) {
        json_t *a = json_object_get(spec, field);
        if (!json_is_array(a)) {
                a = json_array();
                json_object_set_new(spec, field, a);
        }
        return a;
}

/* -v SRC:DST[:ro|rw]: SRC with a '/' (or starting with '.') is a host path, else a volume name. */
static int add_volume(const char *cmd, json_t *spec, const char *arg) {
        char buf[4096];
        snprintf(buf, sizeof(buf), "%s", arg);
        char *dst = strchr(buf, ':');
        if (!dst || dst == buf) {
                cli_usage_error(cmd, "--volume expects SRC:DST[:ro|rw], got '%s'", arg);
                return -1;
        }
        *dst++ = 0;
        char *mode = strchr(dst, ':');
        if (mode)
                *mode++ = 0;
        if (mode && strcmp(mode, "ro") != 0 && strcmp(mode, "rw") != 0) {
                cli_usage_error(cmd, "--volume mode must be ro or rw, got '%s'", mode);
                return -1;
        }
        json_t *v = json_object();
        if (strchr(buf, '/') || buf[0] == '.') {
                char real[4096];
                json_object_set_new(v, "type", json_string("bind"));
                json_object_set_new(v, "source", json_string(realpath(buf, real) ? real : buf));
        } else {
                json_object_set_new(v, "type", json_string("volume"));
                json_object_set_new(v, "name", json_string(buf));
        }
        json_object_set_new(v, "target", json_string(dst));
        if (mode)
                json_object_set_new(v, "readonly", json_boolean(strcmp(mode, "ro") == 0));
        json_array_append_new(spec_array(spec, "volumes"), v);
        return 1;
}

static int add_tmpfs(const char *cmd, json_t *spec, const char *arg) {
        char buf[4096];
        snprintf(buf, sizeof(buf), "%s", arg);
        char *size = strchr(buf, ':');
        if (size)
                *size++ = 0;
        json_t *v = json_pack("{s:s, s:s}", "type", "tmpfs", "target", buf);
        if (size) {
                uint64_t bytes;
                nook_error err = { 0 };
                if (nook_parse_size(size, &bytes, &err) < 0) {
                        json_decref(v);
                        cli_usage_error(cmd, "--tmpfs: %s", err.msg);
                        return -1;
                }
                json_object_set_new(v, "sizeMib", json_integer((json_int_t)((bytes + 1048575) / 1048576)));
        }
        json_array_append_new(spec_array(spec, "volumes"), v);
        return 1;
}

/* --script NAME=FILE and --setup-file PATH=FILE: the file's content goes into the spec. */
static int add_file_map(const char *cmd, json_t *spec, const char *field, const char *opt, const char *arg) {
        const char *eq = strchr(arg, '=');
        if (!eq || eq == arg) {
                cli_usage_error(cmd, "--%s expects NAME=FILE, got '%s'", opt, arg);
                return -1;
        }
        FILE *f = fopen(eq + 1, "re");
        if (!f) {
                cli_usage_error(cmd, "--%s: cannot read '%s'", opt, eq + 1);
                return -1;
        }
        char *data = NULL;
        size_t len = 0, cap = 0;
        for (;;) {
                if (len == cap) {
                        cap = cap ? cap * 2 : 65536;
                        char *nd = realloc(data, cap + 1);
                        if (!nd)
                                break;
                        data = nd;
                }
                size_t k = fread(data + len, 1, cap - len, f);
                if (k == 0)
                        break;
                len += k;
        }
        fclose(f);
        if (!data)
                return -1;
        json_t *m = json_object_get(spec, field);
        if (!json_is_object(m)) {
                m = json_object();
                json_object_set_new(spec, field, m);
        }
        char key[4096];
        snprintf(key, sizeof(key), "%.*s", (int)(eq - arg), arg);
        json_object_set_new(m, key, json_stringn(data, len));
        free(data);
        return 1;
}

static void mark_sensitive(json_t *spec) {
        json_t *a = json_object_get(spec, "volumes"), *v;
        size_t i;
        json_array_foreach(a, i, v) json_object_set_new(v, "allowSensitive", json_true());
}

/* Appends item to spec[field] (or spec[field][sub]).  A policy flag implies --network policy
 * unless --network was given (libnook refuses a policy with another mode, saying so). */
static int push_item(json_t *spec, const char *field, const char *sub, json_t *item) {
        json_t *o = spec, *a;
        if (!item)
                return -1;
        if (sub) {
                o = json_object_get(spec, field);
                if (!json_is_object(o)) {
                        o = json_object();
                        json_object_set_new(spec, field, o);
                }
                if (!json_object_get(spec, "network"))
                        json_object_set_new(spec, "network", json_string("policy"));
        }
        a = json_object_get(o, sub ? sub : field);
        if (!json_is_array(a)) {
                a = json_array();
                json_object_set_new(o, sub ? sub : field, a);
        }
        return json_array_append_new(a, item) < 0 ? -1 : 1;
}

/* --insecure-registry HOST[:PORT] on create/run: not part of the stored spec (it is how this
 * pull reaches a registry, as 'image pull --insecure-registry'), so it goes to libnook the way
 * its environment setting does, appended to NOOK_INSECURE_REGISTRIES (comma-separated). */
static int add_insecure_registry(const char *cmd, const char *host) {
        if (!*host || strlen(host) > 255 ||
                host[strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]")]) {
                cli_usage_error(cmd, "--insecure-registry '%s': expected HOST or HOST:PORT", host);
                return -1;
        }
        const char *cur = getenv("NOOK_INSECURE_REGISTRIES");
        char *list = NULL;
        if (asprintf(&list, "%s%s%s", cur ? cur : "", cur && *cur ? "," : "", host) < 0)
                return -1;
        int r = setenv("NOOK_INSECURE_REGISTRIES", list, 1);
        free(list);
        return r < 0 ? -1 : 1;
}

static json_t *spec_object(json_t *spec, const char *field) {
        json_t *o = json_object_get(spec, field);
        if (!json_is_object(o)) {
                o = json_object();
                json_object_set_new(spec, field, o);
        }
        return o;
}

/* --secret NAME@HOST[,HOST...][:body]: the value comes from this process's environment variable
 * NAME (never from argv); libnook checks the name and the hosts. */
static int add_secret(const char *cmd, json_t *spec, const char *arg) {
        char buf[4096];
        snprintf(buf, sizeof(buf), "%s", arg);
        char *at = strchr(buf, '@');
        if (!at || at == buf || !at[1]) {
                cli_usage_error(cmd, "--secret expects NAME@HOST[,HOST...][:body], got '%s'", arg);
                return -1;
        }
        *at++ = 0;
        bool body = false;
        char *colon = strchr(at, ':');
        if (colon) {
                if (strcmp(colon, ":body") != 0) {
                        cli_usage_error(cmd, "--secret '%s': the only suffix is ':body'", arg);
                        return -1;
                }
                *colon = 0;
                body = true;
        }
        const char *value = getenv(buf);
        if (!value) {
                cli_usage_error(cmd,
                        "--secret %s: the environment variable '%s' is not set (the value comes from there, never from the command line)",
                        buf, buf);
                return -1;
        }
        if (json_object_get(json_object_get(spec, "secrets"), buf)) {
                /* the later one replaced the earlier, hosts and all, without a word */
                cli_usage_error(cmd,
                        "--secret %s is given twice; list every host in one: --secret %s@HOST,HOST", buf,
                        buf);
                return -1;
        }
        json_t *hosts = json_array();
        for (char *h = strtok(at, ","); h; h = strtok(NULL, ","))
                json_array_append_new(hosts, json_string(h));
        json_t *x = json_pack("{s:s, s:o, s:b}", "value", value, "hosts", hosts, "body", body);
        if (!x) {
                cli_usage_error(cmd, "--secret %s: its value or a host is not UTF-8 text", buf);
                return -1;
        }
        return json_object_set_new(spec_object(spec, "secrets"), buf, x) == 0 ? 1 : -1;
}

#define EGRESS_CA_MAX ((size_t)64 * 1024) /* libnook's limit, with a message naming the file */

static int set_egress_ca(const char *cmd, json_t *spec, const char *path) {
        FILE *f = fopen(path, "re");
        char data[EGRESS_CA_MAX + 2];
        size_t len = f ? fread(data, 1, sizeof(data) - 1, f) : 0;
        if (f)
                fclose(f);
        if (!f || len == 0 || len > EGRESS_CA_MAX) {
                cli_usage_error(cmd, "--egress-ca: cannot read '%s' (a PEM file of at most 64 KiB)", path);
                return -1;
        }
        data[len] = 0;
        json_t *s = json_stringn(data, len);
        if (!s) {
                cli_usage_error(cmd, "--egress-ca: '%s' is not PEM text", path);
                return -1;
        }
        return json_object_set_new(spec_object(spec, "egress"), "caPem", s) == 0 ? 1 : -1;
}

static int add_allow_http(const char *cmd, json_t *spec, const char *arg) {
        json_t *rule = json_string(arg);
        if (!rule) {
                cli_usage_error(cmd, "--allow-http: the rule is not UTF-8 text");
                return -1;
        }
        json_t *e = spec_object(spec, "egress");
        json_t *a = json_object_get(e, "allowHttp");
        if (!json_is_array(a)) {
                a = json_array();
                json_object_set_new(e, "allowHttp", a);
        }
        return json_array_append_new(a, rule) == 0 ? 1 : -1;
}

/* The spec is JSON text, which must be UTF-8: jansson refuses other bytes, and a value dropped
 * on the way would make a different sandbox (no env, no label) without a word.  The value is not
 * echoed (--secret, --env). */
static int check_text(const char *cmd, int opt, const char *arg) {
        static const struct option opts[] = { SPEC_OPTS_LONG };
        size_t off = 0;
        const char *name = NULL;
        for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
                if (opts[i].val == opt)
                        name = opts[i].name;
        /* not a spec option: the command's own (run's --sh), which checks its own */
        if (!name || !arg || nook_text_is_utf8(arg, &off))
                return 0;
        cli_usage_error(cmd,
                "the value of --%s is not UTF-8 text (byte 0x%02x at offset %zu); a sandbox's settings are stored as UTF-8",
                name, (unsigned char)arg[off], off);
        return -1;
}

int spec_opt_apply(const char *cmd, json_t *spec, int opt, const char *arg) {
        if (check_text(cmd, opt, arg) < 0)
                return -1;
        switch (opt) {
        case 1000:
                return json_object_set_new(spec, "image", json_string(arg)) < 0 ? -1 : 1;
        case 'e':
                return cli_env_arg(cmd, arg, add_env, spec);
        case SPEC_OPT_ENV_FILE:
                return cli_env_file(cmd, arg, add_env, spec);
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
        case 'p':
                return push_item(spec, "ports", NULL, json_string(arg));
        case 1020:
        case 1021:
                return push_item(spec, "networkPolicy", "rules",
                        json_pack("{s:s, s:s}", "action", opt == 1020 ? "allow" : "deny", "cidr", arg));
        case 1022:
                return push_item(spec, "networkPolicy", "domains", json_string(arg));
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
                if (*end || end == arg || v < -1) {
                        cli_usage_error(cmd,
                                "--pids-max expects a whole number >= 1, or 0 for no limit, got '%s'", arg);
                        return -1;
                }
                return json_object_set_new(spec, "pidsMax", json_integer(v)) < 0 ? -1 : 1;
        }
        case 1012:
                return json_object_set_new(spec, "maxCpus", json_string(arg)) < 0 ? -1 : 1;
        case 1013:
                return json_object_set_new(spec, "maxMemoryMib", json_string(arg)) < 0 ? -1 : 1;
        case 'v':
                return add_volume(cmd, spec, arg);
        case 1014:
                return add_tmpfs(cmd, spec, arg);
        case 1015:
                json_object_set_new(spec, "nookAllowSensitive", json_true());
                return 1;
        case 1016:
                return add_file_map(cmd, spec, "scripts", "script", arg);
        case 1017:
                return add_file_map(cmd, spec, "setupFiles", "setup-file", arg);
        case 1018:
                return json_object_set_new(spec, "snapshot", json_string(arg)) < 0 ? -1 : 1;
        case 1030:
                return add_insecure_registry(cmd, arg);
        case 1040:
                return add_secret(cmd, spec, arg);
        case 1041:
                return add_allow_http(cmd, spec, arg);
        case 1042:
                return set_egress_ca(cmd, spec, arg);
        case 1043:
                return json_object_set_new(spec_object(spec, "egress"), "audit", json_true()) == 0 ? 1 : -1;
        default:
                return 0;
        }
}

void spec_opts_finish(json_t *spec) {
        /* --allow-sensitive-volume applies to every -v of the command, wherever it came */
        if (json_is_true(json_object_get(spec, "nookAllowSensitive"))) {
                mark_sensitive(spec);
                json_object_del(spec, "nookAllowSensitive");
        }
}
