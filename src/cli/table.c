/* SPDX-License-Identifier: Apache-2.0 */
/* Lists: text through libsmartcols, --json and --format from the same JSON rows (table.h). */
#include <dlfcn.h>
#include <libsmartcols.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/table.h"
#include "cli/template.h"

const char *cli_escape(const char *s, char *buf, size_t len) {
        size_t o = 0;
        if (len == 0)
                return "";
        for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && o + 7 < len; p++) {
                if (*p < 0x20 || *p == 0x7f)
                        o += (size_t)snprintf(buf + o, len - o, "\\x%02x", *p);
                else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
                        o += (size_t)snprintf(buf + o, len - o, "\\u%04x", p[1]);
                        p++;
                } else
                        buf[o++] = (char)*p;
        }
        buf[o] = 0;
        return buf;
}

static int print_formatted(json_t *row) {
        nook_error err = { 0 };
        char *out = NULL;
        if (template_render(arg_format, row, &out, &err) < 0)
                return cli_fail_usage("--format", &err);
        fputs(out, stdout);
        fputc('\n', stdout);
        free(out);
        return 0;
}

static void print_json(json_t *v) {
        char *t = json_dumps(v, JSON_INDENT(2) | JSON_ENSURE_ASCII | JSON_ENCODE_ANY);
        if (t)
                puts(t);
        free(t);
}

/* libsmartcols is loaded when a table is printed, not linked: Debian builds it with BIND_NOW,
 * so every CLI call (`nook run`, `nook exec`, `nook --version`) would otherwise resolve its ~260
 * symbol bindings at start for the few commands that print a table (issue #17). */
#define SCOLS_FUNCS(X)                                                                                      \
        X(scols_new_table)                                                                                  \
        X(scols_unref_table)                                                                                \
        X(scols_table_set_column_separator)                                                                 \
        X(scols_table_set_termforce)                                                                        \
        X(scols_table_new_column)                                                                           \
        X(scols_table_new_line)                                                                             \
        X(scols_line_set_data)                                                                              \
        X(scols_print_table)
#define SCOLS_FIELD(f) __typeof__(f) *f;
static struct { SCOLS_FUNCS(SCOLS_FIELD) } sc;
#undef SCOLS_FIELD

static int scols_load(void) {
        static const char soname[] = "libsmartcols.so.1";
        if (sc.scols_print_table)
                return 0;
        void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                fprintf(stderr,
                        "nook: cannot load %s to print a table (%s); install the 'libsmartcols1' package, "
                        "or use --json\n",
                        soname, dlerror());
                return -1;
        }
#define SCOLS_SYM(f)                                                                                        \
        *(void **)&sc.f = dlsym(h, #f);                                                                     \
        if (!sc.f) {                                                                                        \
                fprintf(stderr, "nook: %s has no %s; install the 'libsmartcols1' package\n", soname, #f);   \
                return -1;                                                                                  \
        }
        SCOLS_FUNCS(SCOLS_SYM)
#undef SCOLS_SYM
        return 0;
}

static int print_text(const cli_column *cols, size_t n_cols, json_t *rows) {
        size_t i;
        json_t *row;
        if (json_array_size(rows) == 0) {
                /* libsmartcols prints nothing for a table without lines; docker prints the header */
                for (size_t c = 0; c < n_cols; c++)
                        printf(c + 1 < n_cols ? "%s  " : "%s\n", cols[c].header);
                return 0;
        }
        if (scols_load() < 0)
                return CLI_EXIT_ERROR;
        struct libscols_table *tb = sc.scols_new_table();
        if (!tb)
                return cli_fail_oom();
        (void)sc.scols_table_set_column_separator(tb, "  ");
        if (arg_no_trunc) /* full lines, as into a pipe: the terminal wraps them, not libsmartcols */
                (void)sc.scols_table_set_termforce(tb, SCOLS_TERMFORCE_NEVER);
        for (size_t c = 0; c < n_cols; c++) {
                int fl = 0;
                if ((cols[c].flags & CLI_COL_TRUNC) && !arg_no_trunc)
                        fl |= SCOLS_FL_TRUNC;
                if (cols[c].flags & CLI_COL_RIGHT)
                        fl |= SCOLS_FL_RIGHT;
                if (!sc.scols_table_new_column(tb, cols[c].header, cols[c].width_hint, fl)) {
                        sc.scols_unref_table(tb);
                        return cli_fail_oom();
                }
        }
        json_array_foreach(rows, i, row) {
                struct libscols_line *ln = sc.scols_table_new_line(tb, NULL);
                for (size_t c = 0; ln && c < n_cols; c++) {
                        char raw[512], esc[8192];
                        const char *v = cols[c].cell ? cols[c].cell(row, raw, sizeof(raw))
                                                     : json_string_value(json_object_get(row, cols[c].key));
                        (void)sc.scols_line_set_data(ln, c, cli_escape(v ? v : "-", esc, sizeof(esc)));
                }
        }
        (void)sc.scols_print_table(tb);
        sc.scols_unref_table(tb);
        return 0;
}

int cli_table_print(const cli_column *cols, size_t n_cols, json_t *rows) {
        if (arg_json) {
                print_json(rows);
                return 0;
        }
        if (arg_format)
                return cli_print_value(rows); /* one rendered template per row */
        return print_text(cols, n_cols, rows);
}

int cli_print_value(json_t *v) {
        if (!arg_format) {
                print_json(v);
                return 0;
        }
        if (!json_is_array(v))
                return print_formatted(v);
        size_t i;
        json_t *row;
        json_array_foreach(v, i, row) {
                int r = print_formatted(row);
                if (r != 0)
                        return r;
        }
        return 0;
}
