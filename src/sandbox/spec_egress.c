/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "egress/rules.h"
#include "isolate/net.h"
#include "sandbox/spec_egress.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/str.h"

/* Variables nook sets in the guest for the gateway's CA: a secret may not take their names. */
static const char *const reserved[] = { "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE", "PATH", "HOSTNAME", "TERM", "HOME" };

static void secret_done(sb_secret *x) {
        free(x->name);
        strv_free(x->hosts);
        if (x->value) {
                explicit_bzero(x->value, strlen(x->value));
                free(x->value);
        }
        memset(x, 0, sizeof(*x));
}

void sb_spec_egress_done(sb_spec *s) {
        for (size_t i = 0; i < s->n_secrets; i++)
                secret_done(&s->secrets[i]);
        free(s->secrets);
        s->secrets = NULL;
        s->n_secrets = 0;
        strv_free(s->allow_http);
        s->allow_http = NULL;
        free(s->egress_ca_pem);
        s->egress_ca_pem = NULL;
        s->egress_audit = false;
}

bool sb_spec_wants_egress(const sb_spec *s) {
        return s->n_secrets > 0 || (s->allow_http && s->allow_http[0]) || s->egress_audit;
}

int sb_spec_check_secret_values(const sb_spec *s, nook_error *err) {
        for (size_t i = 0; i < s->n_secrets; i++)
                if (!s->secrets[i].value)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: secret '%s' has no value; give it as secrets.%s.value (the CLI reads it from the environment variable %s)",
                                s->secrets[i].name, s->secrets[i].name, s->secrets[i].name);
        return 0;
}

static bool env_has(char **env, const char *name) {
        size_t n = strlen(name);
        STRV_FOREACH (e, env)
                if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
                        return true;
        return false;
}

static int check_value(const char *name, json_t *v, char **ret, nook_error *err) {
        if (!v || json_is_null(v)) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v))
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid spec: secret '%s': 'value' must be a string", name);
        const char *t = json_string_value(v);
        size_t len = json_string_length(v);
        /* no message may quote the value: these errors say what is wrong, never what it is */
        if (len == 0 || len > SB_SECRET_VALUE_MAX)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: secret '%s': the value must be 1 to %d bytes", name,
                        SB_SECRET_VALUE_MAX);
        if (strlen(t) != len || strpbrk(t, "\r\n"))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: secret '%s': the value holds a NUL byte or a line break (it goes into HTTP headers)",
                        name);
        *ret = strdup(t);
        return *ret ? 0 : nook_err_oom(err);
}

static int parse_hosts(const char *name, json_t *hosts, char ***ret, nook_error *err) {
        json_t *v;
        size_t i;
        if (!json_is_array(hosts) || json_array_size(hosts) == 0 ||
                json_array_size(hosts) > SB_SECRET_HOSTS_MAX)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: secret '%s': 'hosts' must be an array of 1 to %d host names", name,
                        SB_SECRET_HOSTS_MAX);
        json_array_foreach(hosts, i, v) {
                _cleanup_free_ char *d = NULL;
                if (!json_is_string(v))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: secret '%s': hosts[%zu] must be a string", name, i);
                int r = net_domain_parse(json_string_value(v), &d, err);
                if (r >= 0)
                        r = egress_secret_host_check(d, err);
                if (r < 0)
                        return nook_err_wrap(err, "Invalid spec: secret '%s': hosts[%zu]", name, i);
                if (strv_push(ret, d) < 0)
                        return nook_err_oom(err);
        }
        return 0;
}

static int parse_secret(const char *name, json_t *v, const sb_spec *s, sb_secret *x, nook_error *err) {
        const char *k;
        json_t *f;
        if (!env_name_is_valid(name, strlen(name)) || strlen(name) > 128)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: secret name '%.128s' must match [A-Za-z_][A-Za-z0-9_]* (at most 128)",
                        name);
        for (size_t i = 0; i < ELEMENTSOF(reserved); i++)
                if (streq(name, reserved[i]))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: secret name '%s' is a variable nook sets itself; choose another",
                                name);
        if (env_has(s->env, name))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: '%s' is both in 'env' and in 'secrets'; keep it in one", name);
        if (!json_is_object(v))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: secret '%s' must be {\"value\", \"hosts\": [...], \"body\"?}", name);
        json_object_foreach(v, k, f) if (!streq(k, "value") && !streq(k, "hosts") &&
                !streq(k, "body")) return nook_err_set(err, NOOK_E_INVALID,
                "Invalid spec: secret '%s': unknown field '%.64s'", name, k);
        json_t *body = json_object_get(v, "body");
        if (body && !json_is_boolean(body))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: secret '%s': 'body' must be true or false", name);
        x->body = json_is_true(body);
        x->name = strdup(name);
        if (!x->name)
                return nook_err_oom(err);
        int r = parse_hosts(name, json_object_get(v, "hosts"), &x->hosts, err);
        if (r < 0)
                return r;
        return check_value(name, json_object_get(v, "value"), &x->value, err);
}

static int parse_secrets(json_t *m, sb_spec *s, nook_error *err) {
        const char *k;
        json_t *v;
        if (!m || json_is_null(m))
                return 0;
        if (!json_is_object(m))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: 'secrets' must be an object {\"NAME\": {\"value\", \"hosts\": [...]}}");
        if (json_object_size(m) > SB_SECRETS_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid spec: more than %d secrets", SB_SECRETS_MAX);
        s->secrets = calloc(json_object_size(m) + 1, sizeof(sb_secret));
        if (!s->secrets)
                return nook_err_oom(err);
        json_object_foreach(m, k, v) {
                int r = parse_secret(k, v, s, &s->secrets[s->n_secrets++], err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* One printable line of bounded size, then the gateway's own parser (src/egress/rules.c, the
 * one place the rule language lives): what create accepts, the gateway enforces. */
static int check_rule(size_t i, const char *t, size_t len, nook_error *err) {
        if (len == 0 || len > SB_ALLOW_HTTP_LEN)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: egress.allowHttp[%zu] must be 1 to %d characters", i,
                        SB_ALLOW_HTTP_LEN);
        for (size_t j = 0; j < len; j++)
                if ((unsigned char)t[j] < 0x20 || t[j] == 0x7f)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: egress.allowHttp[%zu] holds a control character", i);
        egress_rule *rule = NULL;
        int r = egress_rule_parse(t, &rule, err);
        egress_rule_free(rule);
        return r < 0 ? nook_err_wrap(err, "Invalid spec: egress.allowHttp[%zu]", i) : 0;
}

static int check_ca(const char *pem, size_t len, nook_error *err) {
        if (len == 0 || len > SB_EGRESS_CA_MAX || strlen(pem) != len)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: egress.caPem must be PEM text of at most %zu bytes",
                        SB_EGRESS_CA_MAX);
        if (!strstr(pem, "-----BEGIN CERTIFICATE-----") || !strstr(pem, "-----END CERTIFICATE-----"))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: egress.caPem holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
        if (strstr(pem, "PRIVATE KEY"))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: egress.caPem holds a private key; give the CA's certificate only");
        return 0;
}

static int parse_egress_obj(json_t *e, sb_spec *s, nook_error *err) {
        const char *k;
        json_t *v;
        size_t i;
        if (!e || json_is_null(e))
                return 0;
        if (!json_is_object(e))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: 'egress' must be an object {\"allowHttp\": [...], \"caPem\"?, \"audit\"?}");
        json_object_foreach(e, k, v) if (!streq(k, "allowHttp") && !streq(k, "caPem") &&
                !streq(k, "audit")) return nook_err_set(err, NOOK_E_INVALID,
                "Invalid spec: egress: unknown field '%.64s'", k);
        json_t *rules = json_object_get(e, "allowHttp"), *ca = json_object_get(e, "caPem"),
               *audit = json_object_get(e, "audit");
        if (audit && !json_is_boolean(audit))
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: egress.audit must be true or false");
        s->egress_audit = json_is_true(audit);
        if (rules && (!json_is_array(rules) || json_array_size(rules) > SB_ALLOW_HTTP_MAX))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: egress.allowHttp must be an array of at most %d rules",
                        SB_ALLOW_HTTP_MAX);
        json_array_foreach(rules, i, v) {
                if (!json_is_string(v))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: egress.allowHttp[%zu] must be a string", i);
                int r = check_rule(i, json_string_value(v), json_string_length(v), err);
                if (r < 0)
                        return r;
                if (strv_push(&s->allow_http, json_string_value(v)) < 0)
                        return nook_err_oom(err);
        }
        if (ca && !json_is_null(ca)) {
                if (!json_is_string(ca))
                        return nook_err_set(
                                err, NOOK_E_INVALID, "Invalid spec: egress.caPem must be a string");
                int r = check_ca(json_string_value(ca), json_string_length(ca), err);
                if (r < 0)
                        return r;
                s->egress_ca_pem = strdup(json_string_value(ca));
                if (!s->egress_ca_pem)
                        return nook_err_oom(err);
        }
        return 0;
}

int sb_spec_parse_egress(json_t *o, sb_spec *s, nook_error *err) {
        int r = parse_secrets(json_object_get(o, "secrets"), s, err);
        if (r < 0)
                return r;
        if ((r = parse_egress_obj(json_object_get(o, "egress"), s, err)) < 0)
                return r;
        if (s->egress_ca_pem && !sb_spec_wants_egress(s))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: egress.caPem (--egress-ca) is for the egress gateway, which runs only with a secret, an HTTP rule or egress.audit (--secret, --allow-http, --egress-audit)");
        net_mode m = net_mode_from_string(s->network);
        if (sb_spec_wants_egress(s) && m != NET_MODE_PUBLIC && m != NET_MODE_POLICY)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: secrets, HTTP rules and the egress audit need the network on (network \"public\" or \"policy\"; --network on the command line), not '%s'",
                        s->network);
        return 0;
}

void sb_spec_egress_to_json(const sb_spec *s, json_t *o) {
        if (s->n_secrets) {
                json_t *m = json_object();
                for (size_t i = 0; i < s->n_secrets; i++) {
                        json_t *hosts = json_array();
                        STRV_FOREACH (h, s->secrets[i].hosts)
                                json_array_append_new(hosts, json_string(*h));
                        /* never the value: the stored spec is not a secret store */
                        json_object_set_new(m, s->secrets[i].name,
                                json_pack("{s:o, s:b}", "hosts", hosts, "body", s->secrets[i].body));
                }
                json_object_set_new(o, "secrets", m);
        }
        if ((s->allow_http && s->allow_http[0]) || s->egress_ca_pem || s->egress_audit) {
                json_t *rules = json_array();
                STRV_FOREACH (a, s->allow_http)
                        json_array_append_new(rules, json_string(*a));
                json_t *e = json_pack("{s:o, s:b}", "allowHttp", rules, "audit", s->egress_audit);
                if (s->egress_ca_pem)
                        json_object_set_new(e, "caPem", json_string(s->egress_ca_pem));
                json_object_set_new(o, "egress", e);
        }
}
