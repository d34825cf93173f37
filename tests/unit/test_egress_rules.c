/* SPDX-License-Identifier: Apache-2.0 */
/* The --allow-http rule language (src/egress/rules.c): accepted rules, hostile ones refused with
 * a message naming the problem, and the matcher (methods, hosts, ports, globs, queries, paths
 * the upstream could read differently). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "egress/rules.h"
#include "util/macro.h"

static egress_rule *parse_ok(const char *text) {
        egress_rule *r = NULL;
        nook_error err = {};
        cr_assert_eq(egress_rule_parse(text, &r, &err), 0, "'%s': %s", text, err.msg);
        cr_assert_not_null(r);
        return r;
}

static void expect_invalid(const char *text, const char *needle) {
        egress_rule *r = (egress_rule *)0x1;
        nook_error err = {};
        cr_expect_eq(
                egress_rule_parse(text, &r, &err), -NOOK_E_INVALID, "'%s' accepted", text ? text : "(null)");
        cr_expect_eq(r, (egress_rule *)0x1, "ret untouched on failure");
        cr_expect_eq(err.code, NOOK_E_INVALID);
        cr_expect(strstr(err.msg, needle), "'%.80s': message '%s' lacks '%s'", text ? text : "(null)",
                err.msg, needle);
}

Test(egress_rules, parses_the_contract_examples) {
        egress_rule *r = parse_ok("GET https://api.github.com/repos/*");
        cr_expect_str_eq(r->text, "GET https://api.github.com/repos/*");
        cr_expect_str_eq(r->method, "GET");
        cr_expect(r->https);
        cr_expect_not(r->host_wildcard);
        cr_expect_str_eq(r->host, "api.github.com");
        cr_expect_eq(r->port, 443);
        cr_expect_str_eq(r->path_glob, "/repos/*");
        cr_expect_not(r->match_query);
        egress_rule_free(r);

        r = parse_ok("* http://example.com/*");
        cr_expect_null(r->method);
        cr_expect_not(r->https);
        cr_expect_eq(r->port, 80);
        egress_rule_free(r);

        r = parse_ok("PROPFIND HTTPS://*.Example.COM:80/a/***/b?x=*");
        cr_expect_str_eq(r->method, "PROPFIND");
        cr_expect(r->host_wildcard);
        cr_expect_str_eq(r->host, "example.com");
        cr_expect_eq(r->port, 80, "plain HTTP's port, for TLS: the gateway sees 80 and 443 both ways");
        cr_expect_str_eq(r->path_glob, "/a/*/b?x=*", "runs of '*' collapse");
        cr_expect(r->match_query);
        egress_rule_free(r);
        egress_rule_free(NULL);
}

Test(egress_rules, refuses_hostile_rules_naming_the_problem) {
        expect_invalid(NULL, "missing");
        expect_invalid("", "empty");
        expect_invalid("https://api.github.com/", "method is missing");
        expect_invalid(" https://api.github.com/", "method is missing");
        expect_invalid("GET  https://api.github.com/", "more than one space");
        expect_invalid("GET https://api.github.com/a b", "more than one space");
        expect_invalid("GET https://api.github.com/ ", "more than one space");
        expect_invalid("GET\thttps://api.github.com/", "control character");
        expect_invalid("GET https://api.github.com/\n", "control character");
        expect_invalid("GET https://api.github.com/\r", "control character");
        expect_invalid("GET https://api.github.com/\x7f", "non-ASCII");
        expect_invalid("GET https://api.github.com/\xc3\xa9", "non-ASCII");
        expect_invalid("get https://api.github.com/", "upper case");
        expect_invalid("G*T https://api.github.com/", "'*' alone");
        expect_invalid("** https://api.github.com/", "'*' alone");
        expect_invalid("GE(T https://api.github.com/", "not an HTTP token");
        expect_invalid("GETGETGETGETGETGETGETGETGETGETGETGET https://a.b/", "longer than 32");
        expect_invalid("GET ftp://api.github.com/", "'https://' or 'http://'");
        expect_invalid("GET file:///etc/passwd", "'https://' or 'http://'");
        expect_invalid("GET api.github.com/", "'https://' or 'http://'");
        expect_invalid("GET https://", "host name is empty");
        expect_invalid("GET https:///x", "host name is empty");
        expect_invalid("GET https://api.github.com", "no path");
        expect_invalid("GET https://*/x", "'*.'");
        expect_invalid("GET https://*", "'*.'");
        expect_invalid("GET https://*example.com/", "'*.'");
        expect_invalid("GET https://api.*.com/", "only a leading '*.'");
        expect_invalid("GET https://*.*.com/", "only a leading '*.'");
        expect_invalid("GET https://*./", "empty");
        expect_invalid("GET https://a..b/", "empty label");
        expect_invalid("GET https://.a/", "empty label");
        expect_invalid("GET https://a.b./", "ends with '.'");
        expect_invalid("GET https://user@a.b/", "user information");
        expect_invalid("GET https://[::1]/", "IPv6");
        expect_invalid("GET https://a.b:0/", "port '0'");
        expect_invalid("GET https://a.b:65536/", "port '65536'");
        expect_invalid("GET https://a.b:/", "port ''");
        expect_invalid("GET https://a.b:-1/", "port '-1'");
        expect_invalid("GET https://a.b:443x/", "port '443x'");
        expect_invalid("GET https://a.b:8443/", "port 8443 is never judged");
        expect_invalid("GET http://a.b:8080/", "port 8080 is never judged");
        expect_invalid("GET https://a.b/x#frag", "fragment");
        expect_invalid("GET https://NOOK-PH-0123456789abcdef.test/", "never holds a placeholder");
        expect_invalid("GET https://a%2eb/", "not a letter");
}

Test(egress_rules, refuses_huge_input) {
        char *big = malloc(EGRESS_RULE_MAX + 64);
        cr_assert_not_null(big);
        strcpy(big, "GET https://a.b/");
        memset(big + 16, '*', EGRESS_RULE_MAX);
        big[EGRESS_RULE_MAX + 16] = 0;
        expect_invalid(big, "longer than 4096");
        /* a long host */
        strcpy(big, "GET https://");
        memset(big + 12, 'a', 300);
        strcpy(big + 312, ".com/");
        expect_invalid(big, "longer than");
        /* a long label */
        strcpy(big, "GET https://");
        memset(big + 12, 'a', 64);
        strcpy(big + 76, ".com/");
        expect_invalid(big, "longer than 63");
        /* the message quotes at most 100 bytes of the rule */
        strcpy(big, "GET https://a.b/x#");
        memset(big + 18, 'y', 2000);
        big[2018] = 0;
        nook_error err = {};
        egress_rule *r = NULL;
        cr_expect_lt(egress_rule_parse(big, &r, &err), 0);
        cr_expect_lt(strlen(err.msg), 400);
        free(big);
}

Test(egress_rules, star_abuse_stays_linear) {
        /* 2000 stars collapse to one; a glob of many '*a' against a long non-match returns. */
        char *rule = malloc(4096);
        cr_assert_not_null(rule);
        strcpy(rule, "GET https://a.b/");
        size_t o = strlen(rule);
        for (int i = 0; i < 1000; i++) {
                rule[o++] = '*';
                rule[o++] = 'a';
        }
        rule[o++] = 'b';
        rule[o] = 0;
        egress_rule *r = parse_ok(rule);
        char *target = malloc(70000);
        cr_assert_not_null(target);
        target[0] = '/';
        memset(target + 1, 'a', 65000);
        target[65001] = 0;
        cr_expect_not(egress_rule_match(r, "GET", true, "a.b", 443, target));
        egress_rule_free(r);
        free(target);
        free(rule);
}

Test(egress_rules, matches_method_scheme_host_port) {
        egress_rule *r = parse_ok("GET https://api.github.com/repos/*");
        cr_expect(egress_rule_match(r, "GET", true, "api.github.com", 443, "/repos/x/y"));
        cr_expect(egress_rule_match(r, "GET", true, "API.GitHub.com.", 443, "/repos/x/y"));
        cr_expect(egress_rule_match(r, "GET", true, "api.github.com", 443, "/repos/x?per_page=1"),
                "query ignored without '?' in the glob");
        cr_expect_not(egress_rule_match(r, "POST", true, "api.github.com", 443, "/repos/x"));
        cr_expect_not(egress_rule_match(r, "get", true, "api.github.com", 443, "/repos/x"));
        cr_expect_not(egress_rule_match(r, "GET", false, "api.github.com", 80, "/repos/x"));
        cr_expect_not(egress_rule_match(r, "GET", true, "api.github.com", 8443, "/repos/x"));
        cr_expect_not(egress_rule_match(r, "GET", true, "evil.api.github.com", 443, "/repos/x"));
        cr_expect_not(egress_rule_match(r, "GET", true, "api.github.com.evil", 443, "/repos/x"));
        cr_expect_not(egress_rule_match(r, "GET", true, "api.github.com", 443, "/user"));
        cr_expect_not(egress_rule_match(r, "GET", true, "api.github.com", 443, "/repos"));
        egress_rule_free(r);

        r = parse_ok("* https://*.example.com/*");
        cr_expect(egress_rule_match(r, "DELETE", true, "a.example.com", 443, "/"));
        cr_expect(egress_rule_match(r, "GET", true, "a.b.example.com", 443, "/x"));
        cr_expect_not(
                egress_rule_match(r, "GET", true, "example.com", 443, "/x"), "'*.' is sub-domains only");
        cr_expect_not(egress_rule_match(r, "GET", true, "badexample.com", 443, "/x"));
        egress_rule_free(r);

        r = parse_ok("GET https://a.b/search?q=*");
        cr_expect(egress_rule_match(r, "GET", true, "a.b", 443, "/search?q=x"));
        cr_expect_not(egress_rule_match(r, "GET", true, "a.b", 443, "/search"));
        cr_expect_not(egress_rule_match(r, "GET", true, "a.b", 443, "/search?x=1"));
        egress_rule_free(r);
}

Test(egress_rules, targets_the_upstream_could_read_differently_never_match) {
        egress_rule *r = parse_ok("GET https://api.github.com/repos/*");
        static const char *const bad[] = {
                "/repos/../user",
                "/repos/./x",
                "/repos/..",
                "/repos/%2e%2e/user",
                "/repos/%2E%2E/user",
                "/repos/..;/admin",
                "/repos/..;x=1/admin",
                "/repos/.;/x",
                "/repos/x%2fy",
                "/repos/x%5C..",
                "/repos\\..\\user",
                "/repos/x#y",
                "/repos/a b",
                "repos/x",
                "",
                "/repos/\x01",
                "/repos/\xff",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                cr_expect_not(egress_target_is_normal(bad[i]), "'%s' normal", bad[i]);
                cr_expect_not(egress_rule_match(r, "GET", true, "api.github.com", 443, bad[i]),
                        "'%s' matched", bad[i]);
        }
        cr_expect(egress_target_is_normal("/repos/x..y/.z?a=../b"),
                "dots inside names and in the query are fine");
        cr_expect(egress_target_is_normal("/repos/%41?q=%2e"));
        cr_expect(egress_target_is_normal("/repos/a;b/c;..;d"), "';' after a name is a name's");
        egress_rule_free(r);
}

Test(egress_rules, host_patterns) {
        nook_error err = {};
        cr_expect_eq(egress_host_pattern_check("api.github.com", &err), 0);
        cr_expect_eq(egress_host_pattern_check("*.example.com", &err), 0);
        cr_expect_eq(egress_host_pattern_check("localhost", &err), 0);
        cr_expect_lt(egress_host_pattern_check("", &err), 0);
        cr_expect_lt(egress_host_pattern_check(NULL, &err), 0);
        cr_expect_lt(egress_host_pattern_check("*", &err), 0);
        cr_expect_lt(egress_host_pattern_check("a b", &err), 0);
        cr_expect_lt(egress_host_pattern_check("a/b", &err), 0);
        cr_expect_lt(egress_host_pattern_check("a:443", &err), 0);
        cr_expect(egress_host_match("api.github.com", "API.GITHUB.COM"));
        cr_expect_not(egress_host_match("api.github.com", "api.github.co"));
        cr_expect_not(egress_host_match("api.github.com", ""));
        cr_expect_not(egress_host_match("api.github.com", "."));
        cr_expect_not(egress_host_match("*.b.c", ".b.c"));
        cr_expect(egress_host_match("*.b.c", "a.b.c"));
}

Test(egress_rules, glob) {
        cr_expect(egress_glob_match("*", ""));
        cr_expect(egress_glob_match("/a*", "/a/b/c"));
        cr_expect(egress_glob_match("/a*c", "/a/b/c"));
        cr_expect(egress_glob_match("/*/x/*", "/a/x/b/x/c"));
        cr_expect_not(egress_glob_match("/a*c", "/a/b/cd"));
        cr_expect_not(egress_glob_match("/a", "/ab"));
        cr_expect_not(egress_glob_match("/ab", "/a"));
}

Test(egress_rules, secret_hosts_below_a_top_level_name) {
        static const char *const good[] = { "api.example.com", "*.example.com", "a.b", "x-1.example.test" };
        static const struct {
                const char *host, *why;
        } bad[] = {
                { "com", "single label" },
                { "localhost", "single label" },
                { "*.com", "top-level domain" },
                { "10.1.2.3", "address" },
                { "1.2", "address" },
                { "*.1.2", "address" },
                { "", "empty" },
        };
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                nook_error err = { 0 };
                cr_expect_eq(egress_secret_host_check(good[i], &err), 0, "'%s': %s", good[i], err.msg);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                nook_error err = { 0 };
                cr_expect_eq(egress_secret_host_check(bad[i].host, &err), -NOOK_E_INVALID, "'%s' accepted",
                        bad[i].host);
                cr_expect(strstr(err.msg, bad[i].why) != NULL, "'%s': %s", bad[i].host, err.msg);
        }
}
