/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/env_file.h"

int cli_env_arg(const char *cmd, const char *arg, cli_env_add add, void *userdata) {
        if (strchr(arg, '='))
                return add(cmd, arg, userdata);
        if (!*arg) {
                cli_usage_error(cmd, "--env expects NAME=VALUE or NAME, got an empty value");
                return -1;
        }
        const char *v = getenv(arg);
        if (!v)
                return 1; /* docker: a NAME unset here is not set in the command either */
        char *kv = NULL;
        if (asprintf(&kv, "%s=%s", arg, v) < 0)
                return -1;
        int r = add(cmd, kv, userdata);
        explicit_bzero(kv, strlen(kv));
        free(kv);
        return r;
}

int cli_env_file(const char *cmd, const char *path, cli_env_add add, void *userdata) {
        FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
        if (!f) {
                cli_usage_error(cmd, "--env-file '%s': %s", path, strerror(errno));
                return -1;
        }
        char *line = NULL;
        size_t cap = 0, lineno = 0, off = 0;
        ssize_t len;
        int r = 1;
        while (r > 0 && (len = getline(&line, &cap, f)) >= 0) {
                lineno++;
                if (len > 0 && line[len - 1] == '\n')
                        line[--len] = 0;
                if (len > 0 && line[len - 1] == '\r')
                        line[--len] = 0; /* a file written on Windows */
                char *s = line;
                if (lineno == 1 && strncmp(s, "\xef\xbb\xbf", 3) == 0)
                        s += 3; /* a byte order mark */
                s += strspn(s, " \t\v\f");
                if (!*s || *s == '#')
                        continue;
                if (strlen(s) != (size_t)len - (size_t)(s - line)) {
                        cli_usage_error(
                                cmd, "--env-file '%s', line %zu: the line holds a NUL byte", path, lineno);
                        r = -1;
                } else if (!nook_text_is_utf8(s, &off)) {
                        cli_usage_error(cmd, "--env-file '%s', line %zu: not UTF-8 text (byte 0x%02x)", path,
                                lineno, (unsigned char)s[off]);
                        r = -1;
                } else if (strcspn(s, "= \t\v\f") < strcspn(s, "=")) {
                        cli_usage_error(cmd, "--env-file '%s', line %zu: the name '%.*s' holds a blank",
                                path, lineno, (int)strcspn(s, "="), s);
                        r = -1;
                } else if (*s == '=') {
                        cli_usage_error(
                                cmd, "--env-file '%s', line %zu: an entry without a name", path, lineno);
                        r = -1;
                } else
                        r = cli_env_arg(cmd, s, add, userdata);
        }
        if (r > 0 && ferror(f)) {
                cli_usage_error(cmd, "--env-file '%s': %s", path, strerror(errno));
                r = -1;
        }
        if (line)
                explicit_bzero(line, cap);
        free(line);
        if (f != stdin)
                (void)fclose(f);
        return r;
}
