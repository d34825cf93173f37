/* SPDX-License-Identifier: Apache-2.0 */
/* "-" as an import's or an export's FILE (stdio_file.c). */
#pragma once

#include <limits.h>
#include <stdbool.h>

#include "cli/cli.h"

typedef struct cli_stdio_file {
        char dir[PATH_MAX - 16]; /* empty: it stands for nothing */
        char path[PATH_MAX]; /* what libnook reads or writes */
        bool out; /* its content goes to stdout (an export), else it came from stdin */
} cli_stdio_file;

/* *file "-": f stands in for it, and *file becomes f->path: for_stdout, a path to write whose
 * content cli_stdio_file_finish copies to stdout; else stdin copied into it.  A terminal there is
 * refused.  Any other *file stays as it is (f then stands for nothing).  0, or an exit status
 * after a message. */
int cli_stdio_file_take(cli_stdio_file *f, const char **file, bool for_stdout, const char *what);
/* Copies f's content to stdout when it stands in for an export's "-", then removes it (safe on
 * any f).  0, or an exit status after a message. */
int cli_stdio_file_finish(cli_stdio_file *f, const char *what);
/* Copies from to EOF into to (EINTR retried): 0, or -errno of the read or write that failed. */
int cli_copy_fd(int from, int to);
/* Removes the file and its folder (safe to call twice, and on an f that stands for nothing). */
void cli_stdio_file_done(cli_stdio_file *f);
