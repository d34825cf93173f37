/* SPDX-License-Identifier: Apache-2.0 */
/* "-" as a FILE: stdin for an import, stdout for an export (as docker save / load and nook cp).
 * libnook reads and writes named files (an archive is read twice, written beside its target and
 * renamed into place), so the CLI goes through a private temporary file: stdin is copied into
 * one before the import; the export writes one, which is then copied to stdout.  The file lives
 * in a fresh 0700 folder under $TMPDIR (else /var/tmp) and is removed in every case. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nook.h"
#include "cli/stdio_file.h"

int cli_copy_fd(int from, int to) {
        char buf[64 * 1024];
        for (;;) {
                ssize_t n = read(from, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                for (ssize_t off = 0; off < n;) {
                        ssize_t w = write(to, buf + off, (size_t)(n - off));
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w < 0)
                                return -errno;
                        off += w;
                }
        }
}

static int make_dir(cli_stdio_file *f) {
        const char *tmp = getenv("TMPDIR");
        (void)snprintf(f->dir, sizeof(f->dir), "%s/nook-stdio.XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
        if (!mkdtemp(f->dir)) {
                int e = errno;
                f->dir[0] = 0;
                return -e;
        }
        (void)snprintf(f->path, sizeof(f->path), "%s/archive", f->dir);
        return 0;
}

static int from_stdin(cli_stdio_file *f, const char *what) {
        if (isatty(STDIN_FILENO))
                return cli_usage_error(
                        what, "'-' reads the archive from stdin, which is a terminal: pipe it in");
        int r = make_dir(f);
        int fd = r < 0 ? -1 : open(f->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
                r = cli_copy_fd(STDIN_FILENO, fd);
                if (close(fd) < 0 && r == 0)
                        r = -errno;
        } else if (r == 0)
                r = -errno;
        if (r < 0) {
                fprintf(stderr, "nook: %s: cannot copy stdin to a temporary file in '%s': %s\n", what,
                        f->dir[0] ? f->dir : "$TMPDIR", strerror(-r));
                cli_stdio_file_done(f);
                return 1;
        }
        return 0;
}

static int for_stdout(cli_stdio_file *f, const char *what) {
        if (isatty(STDOUT_FILENO))
                return cli_usage_error(what,
                        "'-' writes the archive to stdout, which is a terminal: redirect it, or give a FILE");
        int r = make_dir(f);
        if (r < 0) {
                fprintf(stderr, "nook: %s: cannot make a temporary folder in $TMPDIR or /var/tmp: %s\n",
                        what, strerror(-r));
                return 1;
        }
        return 0;
}

int cli_stdio_file_take(cli_stdio_file *f, const char **file, bool out, const char *what) {
        *f = (cli_stdio_file){ .out = out };
        if (strcmp(*file, "-") != 0)
                return 0;
        int r = out ? for_stdout(f, what) : from_stdin(f, what);
        if (r == 0)
                *file = f->path;
        return r;
}

int cli_stdio_file_finish(cli_stdio_file *f, const char *what) {
        int r = 0;
        if (f->dir[0] && f->out) {
                int fd = open(f->path, O_RDONLY | O_CLOEXEC);
                r = fd < 0 ? -errno : cli_copy_fd(fd, STDOUT_FILENO);
                if (fd >= 0)
                        (void)close(fd);
                if (r < 0)
                        fprintf(stderr, "nook: %s: cannot write the archive to stdout: %s\n", what,
                                strerror(-r));
        }
        cli_stdio_file_done(f);
        return r < 0 ? 1 : 0;
}

void cli_stdio_file_done(cli_stdio_file *f) {
        if (!f->dir[0])
                return;
        (void)unlink(f->path);
        (void)rmdir(f->dir);
        f->dir[0] = 0;
}
