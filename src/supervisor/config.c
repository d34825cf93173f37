/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "supervisor/config.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/str.h"

void sup_config_done(sup_config *c) {
        free(c->name);
        strv_free(c->lowers);
        free(c->upper);
        free(c->work);
        strv_free(c->ro_binds);
        free(c->workspace);
        strv_free(c->env);
        free(c->workdir);
        free(c->user);
        free(c->profile);
        free(c->network);
        strv_free(c->net_rules);
        strv_free(c->net_domains);
        strv_free(c->ports);
        free(c->home);
        for (size_t i = 0; i < c->n_mounts; i++) {
                free(c->mounts[i].type);
                free(c->mounts[i].source);
                free(c->mounts[i].target);
        }
        free(c->mounts);
        json_decref(c->egress);
        memset(c, 0, sizeof(*c));
}

static json_t *strv_to_json(char **l) {
        json_t *a = json_array();
        STRV_FOREACH (s, l)
                json_array_append_new(a, json_string(*s));
        return a;
}

int sup_config_to_json(const sup_config *c, char **ret_text, nook_error *err) {
        json_t *o = json_pack("{s:s, s:o, s:s?, s:s?, s:o, s:s?, s:o, s:s?, s:s?, s:s?, s:I, s:I, s:b}",
                "name", c->name, "lowers", strv_to_json(c->lowers), "upper", c->upper, "work", c->work,
                "roBinds", strv_to_json(c->ro_binds), "workspace", c->workspace, "env", strv_to_json(c->env),
                "workdir", c->workdir, "user", c->user, "profile", c->profile, "maxDurationMs",
                (json_int_t)c->max_duration_ms, "idleTimeoutMs", (json_int_t)c->idle_timeout_ms, "ephemeral",
                c->ephemeral);
        if (!o)
                return nook_err_oom(err);
        json_object_set_new(o, "home", c->home ? json_string(c->home) : json_null());
        json_object_set_new(o, "oneShot", json_boolean(c->one_shot));
        json_object_set_new(o, "cpus", json_integer(c->cpus));
        json_object_set_new(o, "memoryBytes", json_integer((json_int_t)c->memory_bytes));
        json_object_set_new(o, "pidsMax", json_integer((json_int_t)c->pids_max));
        json_object_set_new(o, "pidsDefault", json_boolean(c->pids_default));
        json_object_set_new(o, "idBase", json_integer((json_int_t)c->id_base));
        json_object_set_new(o, "wsUid", json_integer((json_int_t)c->ws_uid));
        json_object_set_new(o, "wsGid", json_integer((json_int_t)c->ws_gid));
        json_object_set_new(o, "network", c->network ? json_string(c->network) : json_null());
        json_object_set_new(o, "netRules", strv_to_json(c->net_rules));
        json_object_set_new(o, "netDomains", strv_to_json(c->net_domains));
        json_object_set_new(o, "ports", strv_to_json(c->ports));
        json_t *ms = json_array();
        for (size_t i = 0; i < c->n_mounts; i++)
                json_array_append_new(ms,
                        json_pack("{s:s, s:s?, s:s, s:b, s:I}", "type", c->mounts[i].type, "source",
                                c->mounts[i].source, "target", c->mounts[i].target, "readonly",
                                c->mounts[i].readonly, "sizeMib", (json_int_t)c->mounts[i].size_mib));
        json_object_set_new(o, "mounts", ms);
        if (c->egress)
                json_object_set(o, "egress", c->egress);
        /* One string, sent in one write (json_dumpfd writes each token by itself). */
        char *text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!text)
                return nook_err_oom(err);
        *ret_text = text;
        return 0;
}

static int get_strv(json_t *o, const char *key, char ***ret, nook_error *err) {
        json_t *a = json_object_get(o, key);
        size_t i;
        json_t *v;
        char **l = calloc(1, sizeof(char *));
        if (!l)
                return nook_err_oom(err);
        if (a && !json_is_array(a)) {
                strv_free(l);
                return nook_err_set(err, NOOK_E_INVALID, "config: '%s' must be an array", key);
        }
        json_array_foreach(a, i, v) {
                if (!json_is_string(v) || strv_push(&l, json_string_value(v)) < 0) {
                        strv_free(l);
                        return nook_err_set(err, NOOK_E_INVALID, "config: '%s' must hold strings", key);
                }
        }
        *ret = l;
        return 0;
}

static int get_str(json_t *o, const char *key, bool required, char **ret, nook_error *err) {
        json_t *v = json_object_get(o, key);
        if (!v || json_is_null(v)) {
                if (required)
                        return nook_err_set(err, NOOK_E_INVALID, "config: '%s' is missing", key);
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v))
                return nook_err_set(err, NOOK_E_INVALID, "config: '%s' must be a string", key);
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : nook_err_oom(err);
}

/* The config's string and string-list fields, read in this order (the first bad one is reported). */
typedef struct config_field {
        const char *key;
        bool is_strv;
        bool required; /* strings only: a missing list reads as empty */
        size_t offset; /* of the char * or char ** in sup_config */
} config_field;

static const config_field config_fields[] = {
        { "name", false, true, offsetof(sup_config, name) },
        { "lowers", true, false, offsetof(sup_config, lowers) },
        { "upper", false, false, offsetof(sup_config, upper) },
        { "work", false, false, offsetof(sup_config, work) },
        { "roBinds", true, false, offsetof(sup_config, ro_binds) },
        { "workspace", false, false, offsetof(sup_config, workspace) },
        { "env", true, false, offsetof(sup_config, env) },
        { "workdir", false, false, offsetof(sup_config, workdir) },
        { "user", false, false, offsetof(sup_config, user) },
        { "profile", false, false, offsetof(sup_config, profile) },
        { "network", false, false, offsetof(sup_config, network) },
        { "netRules", true, false, offsetof(sup_config, net_rules) },
        { "netDomains", true, false, offsetof(sup_config, net_domains) },
        { "ports", true, false, offsetof(sup_config, ports) },
};

static int get_field(json_t *o, const config_field *f, sup_config *c, nook_error *err) {
        void *slot = (char *)c + f->offset;

        if (f->is_strv)
                return get_strv(o, f->key, (char ***)slot, err);
        return get_str(o, f->key, f->required, (char **)slot, err);
}

static int get_mount(json_t *m, sup_mount *sm, nook_error *err) {
        int r;

        r = get_str(m, "type", /* required= */ true, &sm->type, err);
        if (r < 0)
                return r;
        r = get_str(m, "source", /* required= */ false, &sm->source, err);
        if (r < 0)
                return r;
        return get_str(m, "target", /* required= */ true, &sm->target, err);
}

int sup_config_from_fd(int fd, sup_config *ret, nook_error *err) {
        json_error_t jerr = { .text = "" };
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        /* read whole, then parsed (json_loadfd reads a byte per read(2)) */
        int r = fd_read_to_end(fd, SUP_CONFIG_MAX, &text, &len, err);
        if (r < 0)
                return nook_err_wrap(err, "reading the sandbox config (fd %d)", fd);
        if (len == 0)
                return 0; /* the creator gave up before sending it */
        json_t *o = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES, &jerr);
        sup_config c = { 0 };

        if (!o || !json_is_object(o)) {
                json_decref(o);
                return nook_err_set(
                        err, NOOK_E_INVALID, "Cannot read the sandbox config (fd %d): %s", fd, jerr.text);
        }
        for (size_t k = 0; k < ELEMENTSOF(config_fields); k++) {
                r = get_field(o, &config_fields[k], &c, err);
                if (r < 0) {
                        json_decref(o);
                        sup_config_done(&c);
                        return r;
                }
        }
        /* Parsed here, once: the supervisor prepares its seccomp program and init drops
         * capabilities and loads that program with this value. */
        c.sec_profile = iso_profile_from_string(c.profile ? c.profile : "default");
        if (c.sec_profile < 0) {
                r = nook_err_set(
                        err, NOOK_E_INVALID, "config: unknown security profile '%.100s'", c.profile);
                json_decref(o);
                sup_config_done(&c);
                return r;
        }
        c.max_duration_ms = (uint64_t)json_integer_value(json_object_get(o, "maxDurationMs"));
        c.idle_timeout_ms = (uint64_t)json_integer_value(json_object_get(o, "idleTimeoutMs"));
        c.ephemeral = json_is_true(json_object_get(o, "ephemeral"));
        c.one_shot = json_is_true(json_object_get(o, "oneShot"));
        c.cpus = (unsigned)json_integer_value(json_object_get(o, "cpus"));
        c.memory_bytes = (uint64_t)json_integer_value(json_object_get(o, "memoryBytes"));
        c.pids_max = (uint64_t)json_integer_value(json_object_get(o, "pidsMax"));
        c.pids_default = json_is_true(json_object_get(o, "pidsDefault"));
        c.id_base = (uint32_t)json_integer_value(json_object_get(o, "idBase"));
        c.ws_uid = (uint32_t)json_integer_value(json_object_get(o, "wsUid"));
        c.ws_gid = (uint32_t)json_integer_value(json_object_get(o, "wsGid"));
        json_t *ms = json_object_get(o, "mounts"), *m;
        size_t i;
        if (json_is_array(ms) && json_array_size(ms) > 0) {
                c.mounts = calloc(json_array_size(ms), sizeof(sup_mount));
                if (!c.mounts) {
                        json_decref(o);
                        sup_config_done(&c);
                        return nook_err_oom(err);
                }
                json_array_foreach(ms, i, m) {
                        sup_mount *sm = &c.mounts[c.n_mounts++];
                        r = get_mount(m, sm, err);
                        if (r < 0) {
                                json_decref(o);
                                sup_config_done(&c);
                                return r;
                        }
                        sm->readonly = json_is_true(json_object_get(m, "readonly"));
                        sm->size_mib = (uint64_t)json_integer_value(json_object_get(m, "sizeMib"));
                }
        }
        r = get_str(o, "home", false, &c.home, err);
        if (r < 0) {
                json_decref(o);
                sup_config_done(&c);
                return r;
        }
        json_t *eg = json_object_get(o, "egress");
        if (eg && !json_is_object(eg)) {
                json_decref(o);
                sup_config_done(&c);
                return nook_err_set(err, NOOK_E_INVALID, "config: 'egress' must be an object");
        }
        c.egress = json_incref(eg);
        json_decref(o);
        *ret = c;
        return 1;
}
