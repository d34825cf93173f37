/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "image/ref.h"
#include "sandbox/spec.h"
#include "sandbox/spec_egress.h"
#include "sandbox/spec_net.h"
#include "sandbox/volumes.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/parse.h"
#include "util/str.h"

#define SPEC_MAX_BYTES (1024 * 1024)
#define MAX_SECS (10ull * 365 * 24 * 3600)

void sb_spec_done(sb_spec *s) {
        free(s->image);
        strv_free(s->env);
        strv_free(s->labels);
        free(s->security);
        free(s->workdir);
        free(s->user);
        sb_spec_network_done(s);
        sb_spec_egress_done(s);
        json_decref(s->volumes);
        json_decref(s->scripts);
        json_decref(s->setup_files);
        free(s->snapshot);
        free(s->pull_policy);
        memset(s, 0, sizeof(*s));
}

static const char *const known[] = { "snapshot", "pullPolicy", "networkPolicy", "ports", "volumes",
        "scripts", "setupFiles", "cpus", "maxCpus", "memoryMib", "maxMemoryMib", "memory", "pidsMax",
        "image", "env", "labels", "persistence", "maxDurationSecs", "idleTimeoutSecs", "security", "network",
        "workdir", "user", "secrets", "egress" };

static bool in_list(const char *k, const char *const *l, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (streq(k, l[i]))
                        return true;
        return false;
}

static int get_string(json_t *o, const char *k, const char *def, char **ret, nook_error *err) {
        json_t *v = json_object_get(o, k);
        if (!v || json_is_null(v)) {
                *ret = def ? strdup(def) : NULL;
                return (def && !*ret) ? nook_err_oom(err) : 0;
        }
        if (!json_is_string(v))
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: field '%s' must be a string", k);
        const char *s = json_string_value(v);
        if (strlen(s) != json_string_length(v))
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: field '%s' contains a NUL byte", k);
        *ret = strdup(s);
        return *ret ? 0 : nook_err_oom(err);
}

static int get_secs(json_t *o, const char *k, uint64_t *ret, nook_error *err) {
        json_t *v = json_object_get(o, k);
        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_number(v))
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid spec: field '%s' must be a number of seconds", k);
        double d = json_number_value(v);
        if (!(d >= 0) || d > (double)MAX_SECS)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: field '%s' must be between 0 and %llu seconds", k, MAX_SECS);
        /* The supervisor's timers count whole seconds: a value above one rounds up, but one
         * below a second cannot be kept and is refused (0.5 ms would otherwise become 1 s). */
        if (d > 0 && d < 1)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: field '%s' is %g s, below one second; give at least 1 s, or 0 for none",
                        k, d);
        *ret = (uint64_t)(d + 0.999999);
        return 0;
}

/* {"NAME": "value"} -> "NAME=value"; names checked with is_env rules or label rules. */
static int get_map(json_t *o, const char *k, bool env, char ***ret, nook_error *err) {
        json_t *m = json_object_get(o, k), *v;
        const char *key;
        char **l = calloc(1, sizeof(char *));
        if (!l)
                return nook_err_oom(err);
        *ret = l;
        if (!m || json_is_null(m))
                return 0;
        if (!json_is_object(m))
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid spec: field '%s' must be an object of strings", k);
        json_object_foreach(m, key, v) {
                if (!json_is_string(v))
                        return nook_err_set(
                                err, NOOK_E_INVALID, "Invalid spec: %s '%s' must be a string", k, key);
                const char *val = json_string_value(v);
                if (strlen(val) != json_string_length(v))
                        return nook_err_set(
                                err, NOOK_E_INVALID, "Invalid spec: %s '%s' contains a NUL byte", k, key);
                if (env && !env_name_is_valid(key, strlen(key)))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: env name '%s' must match [A-Za-z_][A-Za-z0-9_]*", key);
                if (!env &&
                        (strlen(key) == 0 || strlen(key) > 128 || strchr(key, '=') || strlen(val) > 1024))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: label '%s' must be 1-128 characters without '=' and its value at most 1024",
                                key);
                _cleanup_free_ char *a = strprintf("%s=%s", key, val);
                if (!a || strv_push(ret, a) < 0)
                        return nook_err_oom(err);
        }
        return 0;
}

static int resolve_image(sb_spec *s, nook_error *err) {
        if (streq(s->image, "host"))
                return 0;
        if (s->image[0] == '/' || s->image[0] == '.') {
                char real[PATH_MAX];
                struct stat st;
                if (!realpath(s->image, real) || stat(real, &st) < 0)
                        return nook_err_errno(err, NOOK_E_NOT_FOUND,
                                "Invalid spec: image '%s' is not a directory", s->image);
                if (!S_ISDIR(st.st_mode))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: image '%s' is not a directory", s->image);
                if (streq(real, "/"))
                        return nook_err_set(err, NOOK_E_REFUSED,
                                "Invalid spec: the host's '/' cannot be an image; use 'host'");
                char *c = strdup(real);
                if (!c)
                        return nook_err_oom(err);
                free(s->image);
                s->image = c;
                return 0;
        }
        /* a registry reference, stored in its canonical form ("docker.io/library/alpine:3") so
         * that records and `nook image rm` agree on names; pulled at create */
        _cleanup_(image_ref_done) image_ref ref = {};
        int r = image_ref_parse(s->image, &ref, err);
        if (r < 0)
                return nook_err_wrap(err, "Invalid spec: image");
        char *c = image_ref_to_string(&ref);
        if (!c)
                return nook_err_oom(err);
        free(s->image);
        s->image = c;
        return 0;
}

static int check_fields(json_t *o, nook_error *err) {
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) {
                if (!in_list(k, known, ELEMENTSOF(known)))
                        return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: unknown field '%s'", k);
        }
        return 0;
}

/* cpus: a whole number; fractions round up, as Smithers' cpuLimit does.  Number or string. */
static int get_cpus(json_t *o, const char *k, unsigned *ret, nook_error *err) {
        json_t *v = json_object_get(o, k);
        char buf[64];
        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        if (json_is_number(v))
                (void)snprintf(buf, sizeof(buf), "%.6f", json_number_value(v));
        else if (json_is_string(v))
                (void)snprintf(buf, sizeof(buf), "%s", json_string_value(v));
        else
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid spec: field '%s' must be a number of CPUs", k);
        int r = parse_cpus(buf, ret, err);
        return r < 0 ? nook_err_wrap(err, "Invalid spec: field '%s'", k) : 0;
}

/* spec.h.  The CPUs this process may run on (its affinity, as docker counts them). */
int sb_spec_cpus_check_host(unsigned cpus, nook_error *err) {
        cpu_set_t set;
        long host = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                                 : sysconf(_SC_NPROCESSORS_ONLN);
        if (cpus && host > 0 && cpus > (unsigned long)host)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: cpus (%u) is more than the %ld CPUs of this host: a limit above them "
                        "limits nothing; give 1 to %ld",
                        cpus, host, host);
        return 0;
}

/* memoryMib as a number of MiB, or a Docker-style string ("512m", "2g"). */
#define MAX_PIDS 4194304 /* the kernel's PID_MAX_LIMIT */

static int get_mib(json_t *o, const char *k, uint64_t *ret, nook_error *err) {
        json_t *v = json_object_get(o, k);
        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        if (json_is_integer(v) && json_integer_value(v) >= 0)
                *ret = (uint64_t)json_integer_value(v);
        else if (json_is_string(v)) {
                int r = parse_memory_mib(json_string_value(v), ret, err);
                if (r < 0)
                        return nook_err_wrap(err, "Invalid spec: field '%s'", k);
                /* "0" as a size is a limit of nothing, not "no limit": leave the field out for none */
                if (*ret == 0)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: field '%s' is a size of 0 ('%s'); leave it out for no limit",
                                k, json_string_value(v));
        } else
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: field '%s' must be a whole number of MiB or a size like '512m'", k);
        if (*ret > SB_SPEC_MAX_MEMORY_MIB)
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: field '%s' is above %u MiB (16 TiB)",
                        k, SB_SPEC_MAX_MEMORY_MIB);
        return 0;
}

static int parse_limits(json_t *o, sb_spec *s, nook_error *err) {
        uint64_t mem_str = 0;
        int r;
        r = get_cpus(o, "cpus", &s->cpus, err);
        if (r < 0)
                return r;
        r = get_cpus(o, "maxCpus", &s->max_cpus, err);
        if (r < 0)
                return r;
        r = get_mib(o, "memoryMib", &s->memory_mib, err);
        if (r < 0)
                return r;
        r = get_mib(o, "memory", &mem_str, err);
        if (r < 0)
                return r;
        r = get_mib(o, "maxMemoryMib", &s->max_memory_mib, err);
        if (r < 0)
                return r;
        if (mem_str && s->memory_mib)
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid spec: give 'memoryMib' or 'memory', not both");
        if (mem_str)
                s->memory_mib = mem_str;
        json_t *p = json_object_get(o, "pidsMax");
        if (p && !json_is_null(p)) {
                if (!json_is_integer(p) || json_integer_value(p) < -1 || json_integer_value(p) > MAX_PIDS)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: field 'pidsMax' must be a whole number from 1 to %d, or 0 for "
                                "no limit (without it: %d)",
                                MAX_PIDS, SB_SPEC_PIDS_DEFAULT);
                s->pids_max =
                        json_integer_value(p) < 1 ? SB_SPEC_PIDS_NONE : (uint64_t)json_integer_value(p);
        }
        if (s->memory_mib && s->memory_mib < 4)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: a memory limit below 4 MiB cannot run a sandbox");
        if (s->max_cpus && s->cpus > s->max_cpus)
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: cpus (%u) is above maxCpus (%u)",
                        s->cpus, s->max_cpus);
        if (s->max_memory_mib && s->memory_mib > s->max_memory_mib)
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: memoryMib is above maxMemoryMib");
        return 0;
}

#define MAX_SETUP_BYTES (16u * 1024 * 1024)

static bool script_name_ok(const char *k) {
        size_t n = strlen(k);
        if (n == 0 || n > 64 || k[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') ||
                            (k[i] >= '0' && k[i] <= '9') || k[i] == '_' || k[i] == '-' || k[i] == '.'))
                        return false;
        return true;
}

/* {"content" | "base64": ..., "mode": N}: exactly one of the two, N a whole number 0..0777,
 * base64 of the standard alphabet. */
static int check_setup_object(const char *k, json_t *v, nook_error *err) {
        const char *f;
        json_t *x;
        json_object_foreach(v, f, x) if (!streq(f, "content") && !streq(f, "base64") &&
                !streq(f, "mode")) return nook_err_set(err, NOOK_E_INVALID,
                "Invalid spec: setup file '%s' has an unknown field '%s'", k, f);
        json_t *c = json_object_get(v, "content"), *b = json_object_get(v, "base64"),
               *m = json_object_get(v, "mode");
        if ((c && b) || (c && !json_is_string(c)) || (b && !json_is_string(b)))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: setup file '%s' needs one string field, 'content' or 'base64'", k);
        if (m && (!json_is_integer(m) || json_integer_value(m) < 0 || json_integer_value(m) > 0777))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: setup file '%s': mode must be a whole number from 0 to 0777 (511)",
                        k);
        for (const char *p = b ? json_string_value(b) : ""; *p; p++)
                if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                            *p == '+' || *p == '/' || *p == '=' || *p == '\n' || *p == '\r'))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: setup file '%s': 'base64' has a character outside the base64 alphabet",
                                k);
        return 0;
}

/* Structure only here; volumes are checked against the host at create (sb_volumes_parse). */
static int parse_files(json_t *o, sb_spec *s, nook_error *err) {
        json_t *v;
        const char *k;
        size_t total = 0;
        s->volumes = json_incref(json_object_get(o, "volumes"));
        if (s->volumes && !json_is_array(s->volumes))
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: 'volumes' must be an array");
        s->scripts = json_incref(json_object_get(o, "scripts"));
        if (s->scripts && !json_is_object(s->scripts))
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid spec: 'scripts' must be an object of name: content");
        json_object_foreach(s->scripts, k, v) {
                if (!script_name_ok(k))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: script name '%s' must be 1-64 characters of A-Z a-z 0-9 . _ - not starting with '.'",
                                k);
                if (!json_is_string(v))
                        return nook_err_set(
                                err, NOOK_E_INVALID, "Invalid spec: script '%s' must be a string", k);
                total += json_string_length(v);
        }
        s->setup_files = json_incref(json_object_get(o, "setupFiles"));
        if (s->setup_files && !json_is_object(s->setup_files))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: 'setupFiles' must be an object of path: content");
        json_object_foreach(s->setup_files, k, v) {
                _cleanup_free_ char *norm = NULL;
                int r = sb_guest_path_check("setup file path", k, &norm, err);
                if (r < 0)
                        return r;
                if (json_is_string(v))
                        total += json_string_length(v);
                else if (json_is_object(v) &&
                        (json_is_string(json_object_get(v, "base64")) ||
                                json_is_string(json_object_get(v, "content"))))
                        total += json_string_length(json_object_get(v, "base64")) +
                                json_string_length(json_object_get(v, "content"));
                else
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: setup file '%s' must be a string or {\"content\"|\"base64\": ..., \"mode\": N}",
                                k);
                if (json_is_object(v)) {
                        r = check_setup_object(k, v, err);
                        if (r < 0)
                                return r;
                }
        }
        if (total > MAX_SETUP_BYTES)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: scripts and setup files exceed %u bytes", MAX_SETUP_BYTES);
        return 0;
}

static int parse_fields(json_t *o, sb_spec *s, nook_error *err) {
        _cleanup_free_ char *persistence = NULL, *network = NULL;
        int r;
        r = check_fields(o, err);
        if (r < 0)
                return r;
        r = get_string(o, "image", "host", &s->image, err);
        if (r < 0)
                return r;
        r = get_map(o, "env", true, &s->env, err);
        if (r < 0)
                return r;
        r = get_map(o, "labels", false, &s->labels, err);
        if (r < 0)
                return r;
        r = get_string(o, "persistence", "ephemeral", &persistence, err);
        if (r < 0)
                return r;
        r = get_secs(o, "maxDurationSecs", &s->max_duration_secs, err);
        if (r < 0)
                return r;
        r = get_secs(o, "idleTimeoutSecs", &s->idle_timeout_secs, err);
        if (r < 0)
                return r;
        r = get_string(o, "security", "default", &s->security, err);
        if (r < 0)
                return r;
        r = get_string(o, "network", "off", &network, err);
        if (r < 0)
                return r;
        r = get_string(o, "workdir", "/workspace", &s->workdir, err);
        if (r < 0)
                return r;
        r = get_string(o, "user", NULL, &s->user, err);
        if (r < 0)
                return r;
        if (streq(persistence, "sticky"))
                s->sticky = true;
        else if (!streq(persistence, "ephemeral"))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: persistence must be 'ephemeral' or 'sticky', got '%s'", persistence);
        if (!streq(s->security, "default") && !streq(s->security, "restricted"))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: security must be 'default' or 'restricted', got '%s'", s->security);
        if ((r = sb_spec_parse_network(o, network, s, err)) < 0)
                return r;
        if ((r = sb_spec_parse_egress(o, s, err)) < 0)
                return r;
        if (s->workdir[0] != '/' || strlen(s->workdir) >= PATH_MAX)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: workdir '%s' must be an absolute path", s->workdir);
        if (s->user && (strlen(s->user) == 0 || strlen(s->user) > 64 || strpbrk(s->user, "\n/")))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: user '%s' is not a user name or uid[:gid]", s->user);
        r = parse_limits(o, s, err);
        if (r < 0)
                return r;
        if ((r = get_string(o, "pullPolicy", "if-missing", &s->pull_policy, err)) < 0)
                return r;
        if (!streq(s->pull_policy, "always") && !streq(s->pull_policy, "if-missing") &&
                !streq(s->pull_policy, "never"))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: pullPolicy must be 'always', 'if-missing' or 'never', got '%s'",
                        s->pull_policy);
        r = parse_files(o, s, err);
        if (r < 0)
                return r;
        /* a name or a digest; which snapshot it is, is resolved at create (sb_snapshot_fill_spec) */
        if ((r = get_string(o, "snapshot", NULL, &s->snapshot, err)) < 0)
                return r;
        if (s->snapshot && (strlen(s->snapshot) == 0 || strlen(s->snapshot) > 80))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: snapshot '%.80s' is not a snapshot name or digest", s->snapshot);
        return resolve_image(s, err);
}

uint64_t sb_spec_pids_limit(const sb_spec *s) {
        if (s->pids_max == SB_SPEC_PIDS_NONE)
                return 0;
        return s->pids_max ? s->pids_max : SB_SPEC_PIDS_DEFAULT;
}

int sb_spec_parse(const char *spec_json, sb_spec *ret, nook_error *err) {
        sb_spec s = { 0 };
        json_error_t jerr;
        const char *text = isempty(spec_json) ? "{}" : spec_json;

        if (strlen(text) > SPEC_MAX_BYTES)
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid spec: larger than %d bytes", SPEC_MAX_BYTES);
        json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
        if (!o)
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: %s (line %d, column %d)", jerr.text,
                        jerr.line, jerr.column);
        if (!json_is_object(o)) {
                json_decref(o);
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: must be a JSON object");
        }
        int r = parse_fields(o, &s, err);
        json_decref(o);
        if (r < 0) {
                sb_spec_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

static json_t *strv_to_map(char **l) {
        json_t *m = json_object();
        STRV_FOREACH (a, l) {
                char *eq = strchr(*a, '=');
                if (!eq)
                        continue;
                _cleanup_free_ char *k = strndup(*a, (size_t)(eq - *a));
                if (k)
                        json_object_set_new(m, k, json_string(eq + 1));
        }
        return m;
}

char *sb_spec_to_json(const sb_spec *s) {
        json_t *o = json_pack("{s:s, s:o, s:o, s:s, s:I, s:I, s:s, s:s, s:s, s:s?}", "image", s->image,
                "env", strv_to_map(s->env), "labels", strv_to_map(s->labels), "persistence",
                s->sticky ? "sticky" : "ephemeral", "maxDurationSecs", (json_int_t)s->max_duration_secs,
                "idleTimeoutSecs", (json_int_t)s->idle_timeout_secs, "security", s->security, "network",
                "off", "workdir", s->workdir, "user", s->user);
        if (!o)
                return NULL;
        sb_spec_network_to_json(s, o);
        sb_spec_egress_to_json(s, o);
        if (s->cpus)
                json_object_set_new(o, "cpus", json_integer(s->cpus));
        if (s->max_cpus)
                json_object_set_new(o, "maxCpus", json_integer(s->max_cpus));
        if (s->memory_mib)
                json_object_set_new(o, "memoryMib", json_integer((json_int_t)s->memory_mib));
        if (s->max_memory_mib)
                json_object_set_new(o, "maxMemoryMib", json_integer((json_int_t)s->max_memory_mib));
        if (s->pids_max)
                json_object_set_new(o, "pidsMax",
                        json_integer(s->pids_max == SB_SPEC_PIDS_NONE ? 0 : (json_int_t)s->pids_max));
        if (s->pull_policy && !streq(s->pull_policy, "if-missing"))
                json_object_set_new(o, "pullPolicy", json_string(s->pull_policy));
        if (s->volumes)
                json_object_set(o, "volumes", s->volumes);
        if (s->scripts)
                json_object_set(o, "scripts", s->scripts);
        if (s->setup_files)
                json_object_set(o, "setupFiles", s->setup_files);
        if (s->snapshot)
                json_object_set_new(o, "snapshot", json_string(s->snapshot));
        char *t = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(o);
        return t;
}
