/* SPDX-License-Identifier: Apache-2.0 */
/* One table helper for every list the CLI prints: the rows are JSON objects (what libnook
 * returns), and the same rows are rendered as
 *   --json       the array, indented, ASCII-only
 *   --format T   T rendered once per row (cli/template.h)
 *   otherwise    a libsmartcols table that fits the terminal (--no-trunc: no column is cut)
 * Every cell is escaped (control characters as \xHH): a label or name chosen inside a sandbox
 * can neither forge a line nor send a terminal escape. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define CLI_COL_TRUNC (1 << 0) /* may be cut to fit the terminal (unless --no-trunc) */
#define CLI_COL_RIGHT (1 << 1) /* numbers */

typedef struct cli_column {
        const char *header;
        /* The cell's text: the string field key of the row, or cell() when set. */
        const char *key;
        const char *(*cell)(json_t *row, char *buf, size_t len);
        double width_hint; /* libsmartcols whint: <1 a fraction of the terminal, else columns */
        int flags;
} cli_column;

/* Prints rows (a JSON array of objects) as the options say.  0, or an exit status after
 * printing the error (a bad --format). */
int cli_table_print(const cli_column *cols, size_t n_cols, json_t *rows);
/* Prints one value (inspect's object or array) as --json/--format/text would: --format renders
 * each element of an array, or the object itself.  0 or an exit status. */
int cli_print_value(json_t *v);
/* Copies s into buf with control characters (C0, DEL, C1) escaped; returns buf. */
const char *cli_escape(const char *s, char *buf, size_t len);
