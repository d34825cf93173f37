/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "isolate/net.h"
#include "sandbox/spec_net.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/str.h"

void sb_spec_network_done(sb_spec *s) {
        free(s->network);
        strv_free(s->net_rules);
        strv_free(s->net_domains);
        strv_free(s->ports);
        s->network = NULL;
        s->net_rules = s->net_domains = s->ports = NULL;
}

static int parse_rule(json_t *v, size_t i, char ***rules, nook_error *err) {
        const char *action = json_string_value(json_object_get(v, "action"));
        json_t *cidr = json_object_get(v, "cidr"), *ports = json_object_get(v, "ports");
        const char *k;
        json_t *x;
        net_rule rule;
        char buf[128];
        int r;
        if (!json_is_object(v))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: networkPolicy.rules[%zu] must be {\"action\", \"cidr\", \"ports\"?}",
                        i);
        json_object_foreach(v, k, x) if (!streq(k, "action") && !streq(k, "cidr") &&
                !streq(k, "ports")) return nook_err_set(err, NOOK_E_INVALID,
                "Invalid spec: networkPolicy.rules[%zu]: unknown field '%s'", i, k);
        if (!action || (!streq(action, "allow") && !streq(action, "deny")))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: networkPolicy.rules[%zu].action must be 'allow' or 'deny'", i);
        if (!json_is_string(cidr) || (ports && !json_is_string(ports)))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: networkPolicy.rules[%zu]: 'cidr' and 'ports' must be strings", i);
        r = net_rule_parse(
                streq(action, "allow"), json_string_value(cidr), json_string_value(ports), &rule, err);
        if (r < 0)
                return nook_err_wrap(err, "Invalid spec: networkPolicy.rules[%zu]", i);
        if (net_rule_to_string(&rule, buf, sizeof(buf)) < 0 || strv_push(rules, buf) < 0)
                return nook_err_oom(err);
        return 0;
}

static int parse_policy(json_t *pol, sb_spec *s, nook_error *err) {
        json_t *rules = json_object_get(pol, "rules"), *domains = json_object_get(pol, "domains"), *v;
        const char *k;
        size_t i;
        int r;
        if (!json_is_object(pol))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: networkPolicy must be an object {\"rules\": [...], \"domains\": [...]}");
        json_object_foreach(pol, k, v) if (!streq(k, "rules") && !streq(k, "domains")) return nook_err_set(
                err, NOOK_E_INVALID, "Invalid spec: networkPolicy: unknown field '%s'", k);
        if ((rules && !json_is_array(rules)) || (domains && !json_is_array(domains)))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: networkPolicy.rules and .domains must be arrays");
        if (json_array_size(rules) > NET_MAX_RULES || json_array_size(domains) > NET_MAX_DOMAINS)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: networkPolicy holds more than %d rules or %d domains", NET_MAX_RULES,
                        NET_MAX_DOMAINS);
        json_array_foreach(rules, i, v) if ((r = parse_rule(v, i, &s->net_rules, err)) < 0) return r;
        json_array_foreach(domains, i, v) {
                _cleanup_free_ char *d = NULL;
                if (!json_is_string(v))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: networkPolicy.domains[%zu] must be a string", i);
                if ((r = net_domain_parse(json_string_value(v), &d, err)) < 0)
                        return nook_err_wrap(err, "Invalid spec: networkPolicy.domains[%zu]", i);
                if (strv_push(&s->net_domains, d) < 0)
                        return nook_err_oom(err);
        }
        return 0;
}

static int parse_ports(json_t *ports, sb_spec *s, nook_error *err) {
        json_t *v;
        size_t i;
        net_port seen[64];
        if (!json_is_array(ports))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: 'ports' must be an array of \"[ADDR:]HOSTPORT:PORT\" strings");
        if (json_array_size(ports) > ELEMENTSOF(seen))
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: more than %zu published ports",
                        ELEMENTSOF(seen));
        json_array_foreach(ports, i, v) {
                net_port p;
                char buf[96];
                int r = json_is_string(v) ? net_port_parse(json_string_value(v), &p, err)
                                          : nook_err_set(err, NOOK_E_INVALID, "must be a string");
                if (r < 0)
                        return nook_err_wrap(err, "Invalid spec: ports[%zu]", i);
                for (size_t j = 0; j < i; j++)
                        if (seen[j].host_port == p.host_port)
                                return nook_err_set(err, NOOK_E_INVALID,
                                        "Invalid spec: ports[%zu]: host port %u is published twice", i,
                                        p.host_port);
                seen[i] = p;
                (void)snprintf(buf, sizeof(buf), "%s:%u:%u", p.host_addr, p.host_port, p.guest_port);
                if (strv_push(&s->ports, buf) < 0)
                        return nook_err_oom(err);
        }
        return 0;
}

int sb_spec_parse_network(json_t *o, const char *network, sb_spec *s, nook_error *err) {
        json_t *pol = json_object_get(o, "networkPolicy"), *ports = json_object_get(o, "ports");
        net_mode m = net_mode_from_string(network);
        int r;
        if (m < 0)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: network must be 'off', 'public' or 'policy', got '%s'", network);
        if (json_is_null(pol))
                pol = NULL;
        if (json_is_null(ports))
                ports = NULL;
        if (pol && m == NET_MODE_OFF)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: networkPolicy needs network 'policy' or 'public' (network is '%s')",
                        network);
        if (ports && json_array_size(ports) > 0 && m == NET_MODE_OFF)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: ports need the network on (network 'public' or 'policy'); it is 'off'");
        s->network = strdup(network);
        if (!s->network)
                return nook_err_oom(err);
        if (pol && (r = parse_policy(pol, s, err)) < 0)
                return r;
        /* public: rules are exceptions to the public-only floor; every name resolves already */
        if (m == NET_MODE_PUBLIC && s->net_domains && s->net_domains[0])
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: networkPolicy.domains needs network 'policy' (with 'public' every name resolves); 'public' takes rules only");
        if (ports && (r = parse_ports(ports, s, err)) < 0)
                return r;
        return 0;
}

static json_t *strv_json(char **l) {
        json_t *a = json_array();
        STRV_FOREACH (x, l)
                json_array_append_new(a, json_string(*x));
        return a;
}

void sb_spec_network_to_json(const sb_spec *s, json_t *o) {
        json_object_set_new(o, "network", json_string(s->network ? s->network : "off"));
        bool with_rules =
                s->network && (streq(s->network, "policy") || (streq(s->network, "public") && s->net_rules));
        if (with_rules) {
                json_t *rules = json_array();
                STRV_FOREACH (x, s->net_rules) {
                        const char *sp = strchr(*x, ' ');
                        _cleanup_free_ char *action = sp ? strndup(*x, (size_t)(sp - *x)) : NULL;
                        if (action)
                                json_array_append_new(
                                        rules, json_pack("{s:s, s:s}", "action", action, "cidr", sp + 1));
                }
                json_object_set_new(o, "networkPolicy",
                        json_pack("{s:o, s:o}", "rules", rules, "domains", strv_json(s->net_domains)));
        }
        if (s->ports)
                json_object_set_new(o, "ports", strv_json(s->ports));
}
