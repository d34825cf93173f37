/* SPDX-License-Identifier: Apache-2.0 */
/* Workspace files from the host side: nook ws ..., nook cp, nook cat.  The path rule (with or
 * without /workspace, ".." refused, no symlink out) is libnook's; nothing is checked here. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/table.h"

static const char ws_help[] =
        "Usage: nook ws COMMAND NAME [ARGS]\n\n"
        "Workspace files of sandbox NAME (a host directory mounted at /workspace).\n"
        "Paths may be written with or without /workspace; '..' is refused.\n\n"
        "  path NAME [PATH]          print the host path (works before the sandbox exists)\n"
        "  write NAME PATH [FILE|-]  write a file atomically (default: stdin)\n"
        "  cat NAME PATH             print a file\n"
        "  ls NAME [PATH]            list a directory\n"
        "  rm NAME PATH              remove a file or a whole tree\n"
        "  mkdir NAME PATH           create a directory and its parents\n"
        "  mv NAME FROM TO           rename inside the workspace\n";

static int with_ws(const char *name, nook **ret_n, nook_ws **ret_w, nook_error *err) {
        int r = cli_open(ret_n, err);
        if (r < 0)
                return r;
        return nook_ws_open(*ret_n, name, ret_w, err);
}

static int stream_out(nook_ws *w, const char *path, int out, nook_error *err) {
        int fd = -1;
        int r = nook_ws_open_read(w, path, &fd, err);
        if (r < 0)
                return r;
        char buf[65536];
        ssize_t k;
        while ((k = read(fd, buf, sizeof(buf))) > 0) {
                for (ssize_t off = 0; off < k;) {
                        ssize_t m = write(out, buf + off, (size_t)(k - off));
                        if (m < 0 && errno == EINTR)
                                continue;
                        if (m < 0) {
                                close(fd);
                                err->code = NOOK_E_IO;
                                snprintf(err->msg, sizeof(err->msg), "Cannot write the output: %s",
                                        strerror(errno));
                                return -NOOK_E_IO;
                        }
                        off += m;
                }
        }
        close(fd);
        return 0;
}

static const char *type_name(nook_file_type t) {
        switch (t) {
        case NOOK_FILE_REGULAR:
                return "file";
        case NOOK_FILE_DIRECTORY:
                return "dir";
        case NOOK_FILE_SYMLINK:
                return "symlink";
        case NOOK_FILE_OTHER:
        default:
                return "other";
        }
}

/* A guest-made name on one listing line: every control character (newline and tab too: a name
 * must not forge a line or a column) and the backslash are escaped, so the line is unambiguous. */
static void print_name(const char *s) {
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if (*p < 0x20 || *p == 0x7f)
                        printf("\\x%02x", *p);
                else if (*p == '\\')
                        fputs("\\\\", stdout);
                else
                        putchar(*p);
        }
}

static int ws_ls(nook_ws *w, const char *path, nook_error *err) {
        nook_dirent *d = NULL;
        size_t n = 0;
        int r = nook_ws_list(w, path, &d, &n, err);
        if (r < 0)
                return r;
        if (arg_json) {
                json_t *a = json_array();
                for (size_t i = 0; i < n; i++)
                        json_array_append_new(a,
                                json_pack("{s:s, s:s, s:I}", "name", d[i].name, "type", type_name(d[i].type),
                                        "size", (json_int_t)d[i].size));
                char *t = json_dumps(a, JSON_INDENT(2));
                puts(t ? t : "[]");
                free(t);
                json_decref(a);
        } else
                for (size_t i = 0; i < n; i++) {
                        printf("%-8s %10llu  ", type_name(d[i].type), (unsigned long long)d[i].size);
                        print_name(d[i].name);
                        putchar('\n');
                }
        nook_dirents_free(d, n);
        return 0;
}

static int ws_write_from(nook_ws *w, const char *path, const char *src, nook_error *err) {
        int fd = 0;
        if (src && strcmp(src, "-") != 0) {
                fd = open(src, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        err->code = NOOK_E_NOT_FOUND;
                        snprintf(err->msg, sizeof(err->msg), "Cannot open '%s': %s", src, strerror(errno));
                        return -NOOK_E_NOT_FOUND;
                }
        }
        int r = nook_ws_write_fd(w, path, fd, err);
        if (fd > 0)
                close(fd);
        return r;
}

int cmd_ws(int argc, char **argv) {
        if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
                fputs(ws_help, argc < 2 ? stderr : stdout);
                return argc < 2 ? CLI_EXIT_USAGE : 0;
        }
        const char *sub = argv[1];
        if (argc < 3)
                return cli_usage_error("ws", "'%s' needs a sandbox NAME", sub);
        const char *name = argv[2];
        nook *n = NULL;
        nook_ws *w = NULL;
        nook_error err = { 0 };
        int r;
        if (strcmp(sub, "path") == 0) {
                if (argc > 4)
                        return cli_usage_error("ws", "path takes NAME [PATH]");
                char *p = NULL;
                if (argc == 3) {
                        r = cli_open(&n, &err);
                        if (r >= 0)
                                r = nook_ws_dir(n, name, &p, &err);
                } else {
                        r = with_ws(name, &n, &w, &err);
                        if (r >= 0)
                                r = nook_ws_host_path(w, argv[3], &p, &err);
                }
                if (r >= 0)
                        puts(p);
                nook_free(p);
        } else if (strcmp(sub, "write") == 0) {
                if (argc < 4 || argc > 5)
                        return cli_usage_error("ws", "write takes NAME PATH [FILE|-]");
                r = with_ws(name, &n, &w, &err);
                if (r >= 0)
                        r = ws_write_from(w, argv[3], argc == 5 ? argv[4] : NULL, &err);
        } else if (strcmp(sub, "cat") == 0) {
                if (argc != 4)
                        return cli_usage_error("ws", "cat takes NAME PATH");
                r = with_ws(name, &n, &w, &err);
                if (r >= 0)
                        r = stream_out(w, argv[3], 1, &err);
        } else if (strcmp(sub, "ls") == 0) {
                if (argc > 4)
                        return cli_usage_error("ws", "ls takes NAME [PATH]");
                r = with_ws(name, &n, &w, &err);
                if (r >= 0)
                        r = ws_ls(w, argc == 4 ? argv[3] : "/", &err);
        } else if (strcmp(sub, "rm") == 0 || strcmp(sub, "mkdir") == 0) {
                if (argc != 4)
                        return cli_usage_error("ws", "%s takes NAME PATH", sub);
                r = with_ws(name, &n, &w, &err);
                if (r >= 0)
                        r = sub[0] == 'r' ? nook_ws_remove(w, argv[3], &err)
                                          : nook_ws_mkdir(w, argv[3], &err);
        } else if (strcmp(sub, "mv") == 0) {
                if (argc != 5)
                        return cli_usage_error("ws", "mv takes NAME FROM TO");
                r = with_ws(name, &n, &w, &err);
                if (r >= 0)
                        r = nook_ws_rename(w, argv[3], argv[4], &err);
        } else
                return cli_usage_error("ws", "unknown subcommand '%s'", sub);
        nook_ws_close(w);
        nook_close(n);
        return r < 0 ? cli_fail(&err) : 0;
}

/* Host directory -> workspace, recursively.  Symlinks on the host are skipped: we copy data,
 * not links the sandbox could later aim elsewhere. */
static int cp_in(nook_ws *w, const char *src, const char *dst, int depth, nook_error *err) {
        struct stat st;
        if (depth > 256 || lstat(src, &st) < 0) {
                err->code = NOOK_E_NOT_FOUND;
                snprintf(err->msg, sizeof(err->msg), "Cannot read '%s': %s", src,
                        depth > 256 ? "too deep" : strerror(errno));
                return -NOOK_E_NOT_FOUND;
        }
        if (S_ISREG(st.st_mode))
                return ws_write_from(w, dst, src, err);
        if (!S_ISDIR(st.st_mode))
                return 0;
        int r = nook_ws_mkdir(w, dst, err);
        if (r < 0)
                return r;
        DIR *d = opendir(src);
        if (!d)
                return 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                char s2[PATH_MAX], d2[PATH_MAX];
                snprintf(s2, sizeof(s2), "%s/%s", src, de->d_name);
                snprintf(d2, sizeof(d2), "%s/%s", dst, de->d_name);
                r = cp_in(w, s2, d2, depth + 1, err);
                if (r < 0)
                        break;
        }
        closedir(d);
        return r;
}

/* Workspace -> host: files, and directories recursively. */
static int cp_out(nook_ws *w, const char *src, const char *dst, int depth, nook_error *err) {
        nook_stat st;
        int r = nook_ws_stat(w, src, &st, err);
        if (r < 0)
                return r;
        if (st.type == NOOK_FILE_REGULAR) {
                int fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
                if (fd < 0) {
                        err->code = NOOK_E_IO;
                        snprintf(err->msg, sizeof(err->msg), "Cannot create '%s': %s", dst, strerror(errno));
                        return -NOOK_E_IO;
                }
                r = stream_out(w, src, fd, err);
                close(fd);
                return r;
        }
        if (st.type != NOOK_FILE_DIRECTORY || depth > 256)
                return 0;
        if (mkdir(dst, 0755) < 0 && errno != EEXIST) {
                err->code = NOOK_E_IO;
                snprintf(err->msg, sizeof(err->msg), "Cannot create '%s': %s", dst, strerror(errno));
                return -NOOK_E_IO;
        }
        nook_dirent *d = NULL;
        size_t n = 0;
        if ((r = nook_ws_list(w, src, &d, &n, err)) < 0)
                return r;
        for (size_t i = 0; i < n && r >= 0; i++) {
                char s2[PATH_MAX], d2[PATH_MAX];
                snprintf(s2, sizeof(s2), "%s/%s", src, d[i].name);
                snprintf(d2, sizeof(d2), "%s/%s", dst, d[i].name);
                r = cp_out(w, s2, d2, depth + 1, err);
        }
        nook_dirents_free(d, n);
        return r;
}

int cmd_cp(int argc, char **argv) {
        if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
                printf("Usage: nook cp HOST_PATH NAME:PATH\n       nook cp NAME:PATH HOST_PATH\n\n"
                       "Copy files or directories between the host and a sandbox's workspace.\n");
                return 0;
        }
        if (argc != 3)
                return cli_usage_error("cp", "expected SOURCE and DESTINATION, one of them NAME:PATH");
        char *name = NULL;
        const char *path;
        bool in;
        if (argv[2][0] != '/' && argv[2][0] != '.' && cli_split_target(argv[2], &name, &path))
                in = true;
        else if (argv[1][0] != '/' && argv[1][0] != '.' && cli_split_target(argv[1], &name, &path))
                in = false;
        else
                return cli_usage_error("cp", "one side must be NAME:PATH");
        nook *n = NULL;
        nook_ws *w = NULL;
        nook_error err = { 0 };
        int r = with_ws(name, &n, &w, &err);
        if (r >= 0)
                r = in ? cp_in(w, argv[1], path, 0, &err) : cp_out(w, path, argv[2], 0, &err);
        free(name);
        nook_ws_close(w);
        nook_close(n);
        return r < 0 ? cli_fail(&err) : 0;
}

int cmd_cat(int argc, char **argv) {
        if (argc != 2 || argv[1][0] == '-') {
                if (argc == 2)
                        printf("Usage: nook cat NAME:PATH\n");
                return argc == 2 ? 0 : cli_usage_error("cat", "expected NAME:PATH");
        }
        char *name = NULL;
        const char *path;
        if (!cli_split_target(argv[1], &name, &path))
                return cli_usage_error("cat", "expected NAME:PATH, got '%s'", argv[1]);
        nook *n = NULL;
        nook_ws *w = NULL;
        nook_error err = { 0 };
        int r = with_ws(name, &n, &w, &err);
        if (r >= 0)
                r = stream_out(w, path, 1, &err);
        free(name);
        nook_ws_close(w);
        nook_close(n);
        return r < 0 ? cli_fail(&err) : 0;
}

int cmd_volume(int argc, char **argv) {
        if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
                fputs("Usage: nook volume create NAME | ls | rm NAME...\n\n"
                      "Named volumes live under the state folder, outlive sandboxes and can be shared:\n"
                      "  nook create w -v cache:/cache:rw\n",
                        argc < 2 ? stderr : stdout);
                return argc < 2 ? CLI_EXIT_USAGE : 0;
        }
        nook *n = NULL;
        nook_error err = { 0 };
        int status = 0;
        if (cli_open(&n, &err) < 0)
                return cli_fail(&err);
        for (int i = 2; i < argc; i++)
                if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
                        nook_close(n);
                        printf("Usage: nook volume create NAME | ls | rm NAME...\n");
                        return 0;
                }
        if (strcmp(argv[1], "create") == 0 && argc == 3) {
                char *p = NULL;
                if (nook_volume_create(n, argv[2], &p, &err) < 0)
                        status = cli_fail(&err);
                else
                        puts(argv[2]);
                nook_free(p);
        } else if (strcmp(argv[1], "ls") == 0 && argc == 2) {
                char *t = NULL;
                if (nook_volume_list(n, &t, &err) < 0)
                        status = cli_fail(&err);
                else if (arg_json)
                        puts(t);
                else {
                        static const cli_column cols[] = { { "NAME", "name", NULL, 0.3, 0 },
                                { "PATH", "path", NULL, 0.6, CLI_COL_TRUNC } };
                        json_t *a = json_loads(t, 0, NULL);
                        status = a ? cli_table_print(cols, ELEMENTSOF(cols), a) : cli_fail_oom();
                        json_decref(a);
                }
                nook_free(t);
        } else if (strcmp(argv[1], "rm") == 0 && argc >= 3) {
                for (int i = 2; i < argc; i++) {
                        if (nook_volume_remove(n, argv[i], &err) < 0)
                                status = cli_fail(&err);
                        else
                                puts(argv[i]);
                }
        } else
                status = cli_usage_error("volume", "expected: create NAME | ls | rm NAME...");
        nook_close(n);
        return status;
}
