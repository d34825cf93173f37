/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "egress/config.h"
#include "util/error.h"
#include "util/macro.h"

/* jansson keeps its own copies of every string it parsed, secret values included: this free
 * wipes them before they go back to the allocator. */
static void wiping_free(void *p) {
        if (!p)
                return;
        explicit_bzero(p, malloc_usable_size(p));
        free(p);
}

static void config_install_wiping_allocator(void) {
        json_set_alloc_funcs(malloc, wiping_free);
}

void egress_config_wipe(egress_config *c) {
        for (size_t i = 0; c && i < c->n_secrets; i++)
                if (c->secrets[i].value)
                        explicit_bzero(c->secrets[i].value, c->secrets[i].value_len);
}

egress_config *egress_config_free(egress_config *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_secrets; i++) {
                egress_secret *s = &c->secrets[i];
                if (s->value)
                        explicit_bzero(s->value, s->value_len);
                free(s->value);
                free(s->name);
                for (size_t j = 0; j < s->n_hosts; j++)
                        free(s->hosts[j]);
                free(s->hosts);
        }
        if (c->secrets)
                explicit_bzero(c->secrets, c->n_secrets * sizeof(*c->secrets));
        free(c->secrets);
        for (size_t i = 0; i < c->n_rules; i++)
                egress_rule_free(c->rules[i]);
        free(c->rules);
        free(c->sandbox);
        free(c->extra_ca_pem);
        free(c);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(egress_config *, egress_config_free);

bool egress_is_placeholder(const char *s, size_t n) {
        if (n < EGRESS_PH_LEN || memcmp(s, EGRESS_PH_PREFIX, strlen(EGRESS_PH_PREFIX)) != 0)
                return false;
        for (size_t i = strlen(EGRESS_PH_PREFIX); i < EGRESS_PH_LEN; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

bool egress_secret_allows_host(const egress_secret *s, const char *host) {
        for (size_t i = 0; i < s->n_hosts; i++)
                if (egress_host_match(s->hosts[i], host))
                        return true;
        return false;
}

static bool is_env_name(const char *s) {
        if (!s || !*s || strlen(s) > 128 || (*s >= '0' && *s <= '9'))
                return false;
        for (; *s; s++)
                if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
                            *s == '_'))
                        return false;
        return true;
}

static int secret_hosts(json_t *hosts, egress_secret *s, const char *name, nook_error *err) {
        if (!json_is_array(hosts) || json_array_size(hosts) == 0 || json_array_size(hosts) > 64)
                return nook_err_set(err, NOOK_E_INVALID,
                        "secret '%s': 'hosts' must be a list of 1 to 64 host names", name);
        s->hosts = calloc(json_array_size(hosts), sizeof(char *));
        if (!s->hosts)
                return nook_err_oom(err);
        size_t i;
        json_t *h;
        json_array_foreach(hosts, i, h) {
                const char *v = json_string_value(h);
                int r = egress_host_pattern_check(v, err);
                if (r < 0)
                        return nook_err_wrap(err, "secret '%s'", name);
                s->hosts[i] = strdup(v);
                if (!s->hosts[i])
                        return nook_err_oom(err);
                s->n_hosts = i + 1;
        }
        return 0;
}

/* "value": a string, or null for a value this start does not have (a sticky sandbox started
 * again: values are never stored); such a secret is never substituted, its placeholder always
 * blocked with a reason that says so (proxy.c). */
static int secret_value(json_t *val, egress_secret *s, const char *name, nook_error *err) {
        if (json_is_null(val))
                return 0;
        if (!json_is_string(val) || json_string_length(val) == 0 ||
                json_string_length(val) > EGRESS_SECRET_MAX)
                return nook_err_set(err, NOOK_E_INVALID,
                        "secret '%s': 'value' must be a string of 1 to %zu bytes, or null (value not kept)",
                        name, EGRESS_SECRET_MAX);
        const char *v = json_string_value(val);
        size_t vn = json_string_length(val);
        for (size_t i = 0; i < vn; i++)
                if (v[i] == 0 || v[i] == '\r' || v[i] == '\n')
                        return nook_err_set(err, NOOK_E_INVALID,
                                "secret '%s': the value holds a NUL, CR or LF byte, which cannot go into an HTTP header",
                                name);
        s->value = malloc(vn + 1);
        if (!s->value)
                return nook_err_oom(err);
        memcpy(s->value, v, vn + 1);
        s->value_len = vn;
        return 0;
}

static int parse_secret(json_t *o, egress_secret *s, nook_error *err) {
        const char *name = json_string_value(json_object_get(o, "name"));
        json_t *ph = json_object_get(o, "placeholder"), *val = json_object_get(o, "value");
        json_t *body = json_object_get(o, "body");
        if (!is_env_name(name))
                return nook_err_set(
                        err, NOOK_E_INVALID, "a secret's 'name' must be an environment variable name");
        s->name = strdup(name);
        if (!s->name)
                return nook_err_oom(err);
        if (!json_is_string(ph) || json_string_length(ph) != EGRESS_PH_LEN ||
                !egress_is_placeholder(json_string_value(ph), EGRESS_PH_LEN))
                return nook_err_set(err, NOOK_E_INVALID,
                        "secret '%s': 'placeholder' must be 'nook-ph-' and 32 hex digits", name);
        memcpy(s->placeholder, json_string_value(ph), EGRESS_PH_LEN + 1);
        int r = secret_value(val, s, name, err);
        if (r < 0)
                return r;
        if (body && !json_is_boolean(body))
                return nook_err_set(err, NOOK_E_INVALID, "secret '%s': 'body' must be true or false", name);
        s->body = json_is_true(body);
        return secret_hosts(json_object_get(o, "hosts"), s, name, err);
}

static int parse_secrets(json_t *a, egress_config *c, nook_error *err) {
        if (!a)
                return 0;
        if (!json_is_array(a) || json_array_size(a) > 256)
                return nook_err_set(err, NOOK_E_INVALID, "'secrets' must be a list of at most 256 secrets");
        c->secrets = calloc(json_array_size(a) + 1, sizeof(egress_secret));
        if (!c->secrets)
                return nook_err_oom(err);
        size_t i;
        json_t *o;
        json_array_foreach(a, i, o) {
                c->n_secrets = i + 1;
                int r = parse_secret(o, &c->secrets[i], err);
                if (r < 0)
                        return r;
                for (size_t j = 0; j < i; j++)
                        if (strcmp(c->secrets[j].placeholder, c->secrets[i].placeholder) == 0 ||
                                strcmp(c->secrets[j].name, c->secrets[i].name) == 0)
                                return nook_err_set(err, NOOK_E_INVALID,
                                        "secret '%s' is listed twice or shares a placeholder",
                                        c->secrets[i].name);
        }
        return 0;
}

static int parse_rules(json_t *a, egress_config *c, nook_error *err) {
        if (!a)
                return 0;
        if (!json_is_array(a) || json_array_size(a) > 1024)
                return nook_err_set(err, NOOK_E_INVALID, "'allowHttp' must be a list of at most 1024 rules");
        c->rules = calloc(json_array_size(a) + 1, sizeof(egress_rule *));
        if (!c->rules)
                return nook_err_oom(err);
        size_t i;
        json_t *o;
        json_array_foreach(a, i, o) {
                int r = egress_rule_parse(json_string_value(o), &c->rules[i], err);
                if (r < 0)
                        return r;
                c->n_rules = i + 1;
        }
        return 0;
}

static int parse_top(json_t *root, egress_config *c, nook_error *err) {
        const char *sandbox = json_string_value(json_object_get(root, "sandbox"));
        const char *mode = json_string_value(json_object_get(root, "mode"));
        json_t *ca = json_object_get(root, "extraCaPem");
        if (!sandbox || !*sandbox || strlen(sandbox) > 255)
                return nook_err_set(err, NOOK_E_INVALID, "'sandbox' must be the sandbox's name");
        c->sandbox = strdup(sandbox);
        if (!c->sandbox)
                return nook_err_oom(err);
        if (!mode || (strcmp(mode, "public") != 0 && strcmp(mode, "policy") != 0))
                return nook_err_set(err, NOOK_E_INVALID, "'mode' must be 'public' or 'policy'");
        c->policy = strcmp(mode, "policy") == 0;
        if (ca && !json_is_null(ca)) {
                if (!json_is_string(ca) || strlen(json_string_value(ca)) != json_string_length(ca))
                        return nook_err_set(err, NOOK_E_INVALID, "'extraCaPem' must be PEM text");
                c->extra_ca_pem = strdup(json_string_value(ca));
                if (!c->extra_ca_pem)
                        return nook_err_oom(err);
        }
        int r = parse_secrets(json_object_get(root, "secrets"), c, err);
        if (r < 0)
                return r;
        return parse_rules(json_object_get(root, "allowHttp"), c, err);
}

int egress_config_parse(const char *text, size_t n, egress_config **ret, nook_error *err) {
        json_error_t jerr;
        config_install_wiping_allocator();
        if (n > EGRESS_CONFIG_MAX)
                return nook_err_set(err, NOOK_E_INVALID, "the configuration is larger than 1 MiB");
        json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
        if (!root || !json_is_object(root)) {
                json_decref(root);
                return nook_err_set(err, NOOK_E_INVALID, "the configuration is not a JSON object (%s)",
                        root ? "" : jerr.text);
        }
        _cleanup_(egress_config_freep) egress_config *c = calloc(1, sizeof(*c));
        int r = c ? parse_top(root, c, err) : nook_err_oom(err);
        json_decref(root);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}
