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
#include "cli/stdio_file.h"
#include "cli/table.h"

static const char ws_help[] =
        "Usage: nook ws COMMAND NAME [ARGS]\n\n"
        "Workspace files of sandbox NAME (a host directory mounted at /workspace).\n"
        "Paths may be written with or without /workspace; '..' is refused.\n\n"
        "  path NAME [PATH]          print the host path (works before the sandbox exists)\n"
        "  write [--in-place] NAME PATH [FILE|-]\n"
        "                            write a file (default: stdin): atomically, a reader sees the\n"
        "                            old file or the new one; --in-place writes into the file\n"
        "                            itself, keeping its inode and hard links (not atomic)\n"
        "  cat NAME PATH             print a file\n"
        "  ls NAME [PATH]            list a directory\n"
        "  rm NAME PATH              remove a file or a whole tree\n"
        "  mkdir NAME PATH           create a directory and its parents\n"
        "  mv NAME FROM TO           rename inside the workspace\n\n"
        "write, mkdir and path work before the sandbox exists (they stage its workspace);\n"
        "cat, ls, rm and mv need a sandbox, or a workspace staged so, and make nothing.\n";

/* stage: a write or mkdir may make the workspace of a sandbox not created yet; every other
 * command needs one that exists, and makes nothing */
static int with_ws_opt(const char *name, bool stage, nook **ret_n, nook_ws **ret_w, nook_error *err) {
        int r = cli_open(ret_n, err);
        if (r < 0)
                return r;
        return stage ? nook_ws_open(*ret_n, name, ret_w, err)
                     : nook_ws_open_existing(*ret_n, name, ret_w, err);
}

static int with_ws(const char *name, nook **ret_n, nook_ws **ret_w, nook_error *err) {
        return with_ws_opt(name, false, ret_n, ret_w, err);
}

static int stream_out(nook_ws *w, const char *path, int out, nook_error *err) {
        int fd = -1;
        int r = nook_ws_open_read(w, path, &fd, err);
        if (r < 0)
                return r;
        r = cli_copy_fd(fd, out);
        close(fd);
        if (r < 0) {
                err->code = NOOK_E_IO;
                snprintf(err->msg, sizeof(err->msg), "Cannot copy '%s' to the output: %s", path,
                        strerror(-r));
                return -NOOK_E_IO;
        }
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

/* The source of a write: stdin (NULL or "-") or a file, checked before the workspace is opened
 * (a write may stage one): a folder is refused naming the source, not the destination. */
static int ws_write_source(const char *src, int *ret_fd, nook_error *err) {
        struct stat st;
        *ret_fd = 0;
        if (!src || strcmp(src, "-") == 0)
                return 0;
        int fd = open(src, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                err->code = NOOK_E_NOT_FOUND;
                snprintf(err->msg, sizeof(err->msg), "Cannot open '%s': %s", src, strerror(errno));
                return -NOOK_E_NOT_FOUND;
        }
        if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
                close(fd);
                err->code = NOOK_E_INVALID;
                snprintf(err->msg, sizeof(err->msg),
                        "The source '%s' is a directory; 'ws write' copies one file ('nook cp %s NAME:/PATH' copies a tree)",
                        src, src);
                return -NOOK_E_INVALID;
        }
        *ret_fd = fd;
        return 0;
}

int cmd_ws(int argc, char **argv) {
        argc = cli_take_json(argc, argv, 1);
        if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
                fputs(ws_help, argc < 2 ? stderr : stdout);
                return argc < 2 ? CLI_EXIT_USAGE : 0;
        }
        const char *sub = argv[1];
        unsigned write_flags = 0;
        if (strcmp(sub, "write") == 0)
                for (int i = 2; i < argc; i++)
                        if (strcmp(argv[i], "--in-place") == 0) {
                                write_flags |= NOOK_WS_WRITE_IN_PLACE;
                                memmove(&argv[i], &argv[i + 1], (size_t)(argc - i) * sizeof(*argv));
                                argc--;
                                i--;
                        }
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
                        /* works before the sandbox exists, as without PATH */
                        r = with_ws_opt(name, true, &n, &w, &err);
                        if (r >= 0)
                                r = nook_ws_host_path(w, argv[3], &p, &err);
                }
                if (r >= 0)
                        puts(p);
                nook_free(p);
        } else if (strcmp(sub, "write") == 0) {
                if (argc < 4 || argc > 5)
                        return cli_usage_error("ws", "write takes [--in-place] NAME PATH [FILE|-]");
                int fd = 0;
                r = ws_write_source(argc == 5 ? argv[4] : NULL, &fd, &err);
                if (r >= 0)
                        r = with_ws_opt(name, true, &n, &w, &err);
                if (r >= 0)
                        r = nook_ws_write_fd_ex(w, argv[3], fd, write_flags, &err);
                if (fd > 0)
                        close(fd);
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
                r = with_ws_opt(name, sub[0] == 'm', &n, &w, &err);
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

static const char cp_help[] =
        "Usage: nook cp [OPTIONS] SRC NAME:DEST\n"
        "       nook cp [OPTIONS] NAME:SRC DEST\n\n"
        "Copy files between the host and sandbox NAME, as 'docker cp' does.\n"
        "  NAME:/workspace/PATH or NAME:PATH (relative)  in the workspace (a host directory)\n"
        "  NAME:/other/PATH      in the sandbox's root filesystem (running, or a stopped sticky\n"
        "                        sandbox, which is started for the copy and stopped again)\n"
        "  -                     a tar stream: 'nook cp - w:/dir' extracts stdin into /dir,\n"
        "                        'nook cp w:/path -' writes a tar of path to stdout\n\n"
        "A directory copied onto an existing directory goes inside it (DIR/. copies its\n"
        "contents); a file copied onto a directory goes inside it; a new DEST is created.\n"
        "Symlinks are copied as symlinks; FIFOs, devices and sockets are refused.  Modes\n"
        "(less setuid/setgid) and mtimes are kept; files copied in belong to the sandbox's\n"
        "root, files copied out to you.  '..' and symlinks leading out are refused, and a\n"
        "refused copy leaves nothing behind.  NAME must exist ('nook ws write' stages files\n"
        "before a sandbox's first create).\n";

static bool cp_streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

static bool cp_isempty(const char *s) {
        return !s || !s[0];
}

/* NAME:PATH, as docker reads it: a local path with a ':' is written with a leading './' or '/'. */
static bool cp_target(const char *arg, char **ret_name, const char **ret_path) {
        if (arg[0] == '/' || arg[0] == '.' || cp_streq(arg, "-"))
                return false;
        return cli_split_target(arg, ret_name, ret_path);
}

int cmd_cp(int argc, char **argv) {
        int i = 1;
        for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
                if (cp_streq(argv[i], "-h") || cp_streq(argv[i], "--help")) {
                        fputs(cp_help, stdout);
                        return 0;
                }
                if (cp_streq(argv[i], "--")) {
                        i++;
                        break;
                }
                if (cp_streq(argv[i], "-a") || cp_streq(argv[i], "--archive"))
                        return cli_usage_error("cp",
                                "'%s' is not supported: files copied in always belong to the "
                                "sandbox's root, files copied out to you",
                                argv[i]);
                return cli_usage_error("cp", "unknown option '%s'", argv[i]);
        }
        if (argc - i != 2)
                return cli_usage_error("cp", "expected SRC and DEST, one of them NAME:PATH");
        const char *a = argv[i], *b = argv[i + 1];
        int r0;
        char *name = NULL, *other = NULL;
        const char *path = NULL, *opath = NULL;
        bool in = cp_target(b, &name, &path);
        bool out = cp_target(a, in ? &other : &name, in ? &opath : &path);
        free(other);
        if (in && out) {
                free(name);
                return cli_usage_error(
                        "cp", "copying between two sandboxes is not supported; copy through the host");
        }
        if (!in && !out)
                return cli_usage_error("cp",
                        "one of SRC and DEST must be NAME:PATH (a host path with ':' needs "
                        "a leading './')");
        if (cp_isempty(path)) {
                r0 = cli_usage_error("cp", "'%s' names no path in sandbox '%s'", in ? b : a, name);
                free(name);
                return r0;
        }
        nook *n = NULL;
        nook_error err = { 0 };
        int r = cli_open(&n, &err);
        if (r >= 0 && in)
                r = nook_cp_in(n, name, cp_streq(a, "-") ? NULL : a, cp_streq(a, "-") ? 0 : -1, path, &err);
        else if (r >= 0)
                r = nook_cp_out(n, name, path, cp_streq(b, "-") ? NULL : b, cp_streq(b, "-") ? 1 : -1, &err);
        nook_close(n);
        free(name);
        return r < 0 ? cli_fail(&err) : 0;
}

int cmd_cat(int argc, char **argv) {
        argc = cli_take_json(argc, argv, 1);
        bool help = argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0);
        if (argc == 2 && !help && argv[1][0] == '-')
                return cli_usage_error("cat", "unknown option '%s'", argv[1]);
        if (argc != 2 || help) {
                if (help)
                        printf("Usage: nook cat NAME:PATH\n\n"
                               "Print a file of NAME's workspace. PATH is a workspace path: '/src/x', 'src/x' and\n"
                               "'/workspace/src/x' are the same file, and the sandbox need not run. Unlike 'nook cp',\n"
                               "no path reaches the sandbox's root filesystem ('/etc/x' is '/workspace/etc/x'): use\n"
                               "'nook cp NAME:/etc/x -' (a tar) or 'nook exec NAME -- cat /etc/x' for those.\n");
                return help ? 0 : cli_usage_error("cat", "expected NAME:PATH");
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
        argc = cli_take_json(argc, argv, 1);
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
                else if (arg_json)
                        cli_print_json_line(json_pack("{s:s, s:s}", "name", argv[2], "path", p));
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
                                cli_print_done(argv[i], "removed");
                }
        } else
                status = cli_usage_error("volume", "expected: create NAME | ls | rm NAME...");
        nook_close(n);
        return status;
}
