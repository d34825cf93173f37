/* SPDX-License-Identifier: Apache-2.0 */
/* "-" as an import's or an export's FILE (stdio_file.c). */
#pragma once

#include <limits.h>

#include "cli/cli.h"

typedef struct cli_stdio_file {
        char dir[PATH_MAX - 16];
        char path[PATH_MAX]; /* what libnook reads or writes */
} cli_stdio_file;

/* Copies stdin into f->path (refused when stdin is a terminal).  0, or an exit status after a
 * message. */
int cli_stdio_file_from_stdin(cli_stdio_file *f, const char *what);
/* A path for an export whose result goes to stdout (refused when stdout is a terminal). */
int cli_stdio_file_for_stdout(cli_stdio_file *f, const char *what);
/* Then copies it there.  0, or an exit status after a message. */
int cli_stdio_file_to_stdout(cli_stdio_file *f, const char *what);
/* Copies from to EOF into to (EINTR retried): 0, or -errno of the read or write that failed. */
int cli_copy_fd(int from, int to);
/* Removes the file and its folder (safe to call twice). */
void cli_stdio_file_done(cli_stdio_file *f);
