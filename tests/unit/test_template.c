/* SPDX-License-Identifier: Apache-2.0 */
/* --format templates (src/cli/template.c): docker-style field paths over JSON rows, and hostile
 * templates and values: every bad template is an error naming what is wrong, and no guest string
 * can put a control character on the terminal. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "cli/template.h"

static json_t *row(void) {
        json_t *r =
                json_loads("{\"name\":\"w1\",\"state\":\"running\",\"createdAt\":17,\"cpu\":1.5,"
                           "\"sticky\":true,\"none\":null,\"spec\":{\"image\":\"host\",\"env\":[\"A=1\"]},"
                           "\"labels\":{\"evil\":\"x\\ny\\u001b[31m\\u009b2J\",\"Team\":\"a\"}}",
                        0, NULL);
        cr_assert_not_null(r);
        return r;
}

static char *render_ok(const char *tmpl) {
        json_t *r = row();
        nook_error err = { 0 };
        char *out = NULL;
        int rc = template_render(tmpl, r, &out, &err);
        json_decref(r);
        cr_assert_eq(rc, 0, "template '%s' failed: %s", tmpl, err.msg);
        return out;
}

static void expect(const char *tmpl, const char *want) {
        char *out = render_ok(tmpl);
        cr_expect_str_eq(out, want, "template '%s'", tmpl);
        free(out);
}

static void expect_error(const char *tmpl, const char *msg_part) {
        json_t *r = row();
        nook_error err = { 0 };
        char *out = (char *)"untouched";
        int rc = template_render(tmpl, r, &out, &err);
        json_decref(r);
        cr_expect_eq(rc, -NOOK_E_INVALID, "template '%s' should fail", tmpl);
        cr_expect_eq(err.code, NOOK_E_INVALID);
        cr_expect(strstr(err.msg, msg_part) != NULL, "template '%s': message '%s' lacks '%s'", tmpl, err.msg,
                msg_part);
        cr_expect_str_eq(out, "untouched", "a failed render leaves *ret alone");
        cr_expect_eq(template_check(tmpl, &err), -NOOK_E_INVALID, "template_check refuses '%s' too", tmpl);
}

Test(template, fields_docker_style) {
        expect("{{.Name}}", "w1");
        expect("{{.name}}", "w1");
        expect("{{.NAME}}", "w1");
        expect("{{ .State }}", "running");
        expect("{{.Spec.Image}}", "host");
        expect("{{.CreatedAt}}", "17");
        expect("{{.Cpu}}", "1.5");
        expect("{{.Sticky}}", "true");
        expect("{{.None}}", "<nil>");
        expect("{{.Labels.Team}}", "a");
        expect("{{.Labels.team}}", "a");
}

Test(template, literal_text_and_escapes) {
        expect("name={{.Name}} state={{.State}}!", "name=w1 state=running!");
        expect("{{.Name}}\\t{{.State}}\\n", "w1\trunning\n");
        expect("no actions", "no actions");
        expect("", "");
        expect("a } b }} c {", "a } b }} c {");
}

Test(template, json_function) {
        expect("{{json .Spec}}", "{\"image\":\"host\",\"env\":[\"A=1\"]}");
        expect("{{json .Name}}", "\"w1\"");
        expect("{{json .Missing}}", "null");
        expect("{{json .Spec.Env}}", "[\"A=1\"]");
}

Test(template, missing_fields) {
        expect("{{.Missing}}", "<no value>");
        expect("{{.Name.Deeper}}", "<no value>");
        expect("{{.Spec.Env.X}}", "<no value>");
}

Test(template, guest_strings_are_escaped) {
        char *out = render_ok("{{.Labels.evil}}");
        cr_expect_str_eq(out, "x\\x0ay\\x1b[31m\\u009b2J");
        for (const char *p = out; *p; p++)
                cr_expect((unsigned char)*p >= 0x20 && (unsigned char)*p != 0x7f, "raw control byte 0x%02x",
                        *p);
        free(out);
        out = render_ok("{{json .Labels}}");
        cr_expect(strchr(out, '\n') == NULL && strchr(out, 0x1b) == NULL,
                "json output '%s' is one safe line", out);
        cr_expect(strcasestr(out, "\\u009b") != NULL, "C1 control escaped in JSON: %s", out);
        free(out);
}

Test(template, hostile_templates) {
        expect_error("{{.Name", "never closed");
        expect_error("{{", "never closed");
        expect_error("x {{.Name}} {{", "offset 12");
        expect_error("{{}}", "expected a field");
        /* docker's table directive: refused, not printed as text */
        expect_error("table {{.Name}}", "'table' directive");
        expect_error("table\t{{.Name}}", "'table' directive");
        expect_error("table", "'table' directive");
        expect("tablet {{.Name}}", "tablet w1"); /* a word that only starts so is text */
        expect_error("{{ }}", "expected a field");
        expect_error("{{Name}}", "unknown function 'Name'");
        expect_error("{{printf \"%s\" .Name}}", "unknown function 'printf'");
        expect_error("{{index .Labels \"a\"}}", "unknown function 'index'");
        expect_error("{{.Name | upper}}", "unexpected ' '");
        expect_error("{{..Name}}", "bad field name");
        expect_error("{{.Name.}}", "ends in '.'");
        expect_error("{{.Na$me}}", "unexpected '$'");
        expect_error("{{.1abc}}", "bad field name");
        expect_error("{{json}}", "unknown function 'json'");
        expect_error("{{json Name}}", "expected a field");
        expect_error("{{- .Name}}", "expected a field");
        expect_error("{{\"lit\"}}", "expected a field");
        expect_error("{{.Name\x1b}}", "unexpected '?'");
}

Test(template, limits) {
        char *deep = malloc(TEMPLATE_MAX_DEPTH * 2 + 16);
        strcpy(deep, "{{");
        for (int i = 0; i < TEMPLATE_MAX_DEPTH + 1; i++)
                strcat(deep, ".a");
        strcat(deep, "}}");
        expect_error(deep, "deeper than");
        free(deep);
        char *big = malloc(TEMPLATE_MAX_LEN + 2);
        memset(big, 'x', TEMPLATE_MAX_LEN + 1);
        big[TEMPLATE_MAX_LEN + 1] = 0;
        expect_error(big, "longer than");
        free(big);
        char key[400];
        memset(key, 'k', sizeof(key) - 1);
        key[sizeof(key) - 1] = 0;
        char tmpl[420];
        snprintf(tmpl, sizeof(tmpl), "{{.%s}}", key);
        expect(tmpl, "<no value>");
}

Test(template, non_object_rows) {
        nook_error err = { 0 };
        char *out = NULL;
        json_t *s = json_string("a\nb");
        cr_assert_eq(template_render("{{.}}|{{.X}}", s, &out, &err), 0);
        cr_expect_str_eq(out, "a\\x0ab|<no value>");
        free(out);
        json_decref(s);
}
