/* SPDX-License-Identifier: Apache-2.0 */
/* nook image pull | ls | inspect | rm | prune | import | export.  Public API only. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nook.h"
#include "cli/cli.h"
#include "cli/stdio_file.h"
#include "cli/table.h"
#include "cli/template.h"

#define MAX_INSECURE 16

typedef struct progress_state {
        size_t lines; /* lines printed last time, to redraw over */
} progress_state;

/* Per layer: short digest, state, bytes; then the total.  Redrawn in place on the terminal. */
static void on_progress(void *userdata, const nook_pull_layer *l, size_t n) {
        progress_state *ps = userdata;
        uint64_t done = 0, total = 0;
        if (ps->lines)
                fprintf(stderr, "\033[%zuA", ps->lines);
        for (size_t i = 0; i < n; i++) {
                char d[16], t[16];
                cli_human_bytes(l[i].done, d, sizeof(d));
                cli_human_bytes(l[i].total, t, sizeof(t));
                fprintf(stderr, "\033[2K%.19s  %-11s %8s / %-8s\n", l[i].digest, l[i].state, d, t);
                done += strcmp(l[i].state, "cached") == 0 ? l[i].total : l[i].done;
                total += l[i].total;
        }
        char d[16], t[16];
        cli_human_bytes(done, d, sizeof(d));
        cli_human_bytes(total, t, sizeof(t));
        fprintf(stderr, "\033[2Ktotal %s / %s\n", d, t);
        ps->lines = n + 1;
}

static int print_json_or(const char *json, void (*text)(json_t *)) {
        if (arg_json) {
                puts(json);
                return 0;
        }
        json_t *j = json_loads(json, 0, NULL);
        if (j)
                text(j);
        json_decref(j);
        return 0;
}

static void print_pulled(json_t *j) {
        printf("%s\n", json_string_value(json_object_get(j, "digest")));
}

static bool show_progress(bool quiet) {
        return !quiet && !arg_json && isatty(STDERR_FILENO);
}

/* After a pull or an import: the image's digest (or its JSON), or the error. */
static int print_added(int r, nook_error *err, char *json) {
        if (r < 0)
                return cli_fail(err);
        print_json_or(json, print_pulled);
        nook_free(json);
        return 0;
}

/* A pull or an import (exactly one set): open the store, add the image, print it. */
typedef struct add_call {
        const nook_pull_opts *pull;
        const nook_image_import_opts *import;
} add_call;

static int add_image(const char *what, const add_call *c) {
        nook *n = NULL;
        nook_error err = {};
        char *json = NULL;
        int r = cli_open(&n, &err);
        if (r >= 0)
                r = c->pull ? nook_image_pull(n, what, c->pull, &json, &err)
                            : nook_image_import(n, what, c->import, &json, &err);
        nook_close(n);
        return print_added(r, &err, json);
}

static int image_pull(int argc, char **argv) {
        static const struct option opts[] = { { "quiet", no_argument, NULL, 'q' },
                { "creds", required_argument, NULL, 'c' }, { "authfile", required_argument, NULL, 'a' },
                { "ca-file", required_argument, NULL, 'C' },
                { "insecure-registry", required_argument, NULL, 'i' },
                { "timeout", required_argument, NULL, 't' }, { "json", no_argument, NULL, 'j' },
                { "help", no_argument, NULL, 'h' }, {} };
        const char *insecure[MAX_INSECURE + 1] = {};
        size_t n_insecure = 0;
        bool quiet = false;
        char *creds = NULL;
        nook_pull_opts o;
        int c;
        nook_pull_opts_init(&o);
        while ((c = getopt_long(argc, argv, "+hqj", opts, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        printf("Usage: nook image pull [OPTIONS] REFERENCE\n\n"
                               "  -q, --quiet                  no progress display\n"
                               "  --creds USER[:PASSWORD]      credentials (else $REGISTRY_AUTH_FILE or ~/.docker/config.json)\n"
                               "  --authfile PATH              a docker config.json with credentials\n"
                               "  --ca-file PATH               trust this CA besides the system store\n"
                               "  --insecure-registry HOST     use plain HTTP for HOST (repeatable)\n"
                               "  --timeout DURATION           fail a transfer stalled this long (default 30s)\n");
                        return 0;
                case 'q':
                        quiet = true;
                        break;
                case 'j':
                        arg_json = true;
                        break;
                case 'c':
                        free(creds);
                        creds = strdup(optarg);
                        break;
                case 'a':
                        o.auth_file = optarg;
                        break;
                case 'C':
                        o.ca_file = optarg;
                        break;
                case 'i':
                        if (n_insecure >= MAX_INSECURE)
                                return cli_usage_error(
                                        "image pull", "at most %d --insecure-registry", MAX_INSECURE);
                        insecure[n_insecure++] = optarg;
                        break;
                case 't': {
                        nook_error e = {};
                        if (nook_parse_duration_ms(optarg, &o.stall_timeout_ms, &e) < 0)
                                return cli_usage_error("image pull", "--timeout: %s", e.msg);
                        break;
                }
                default:
                        return cli_usage_error("image pull", "unknown option");
                }
        }
        if (optind + 1 != argc) {
                free(creds);
                return cli_usage_error("image pull", "expected one REFERENCE");
        }
        if (creds) {
                char *colon = strchr(creds, ':');
                if (colon)
                        *colon = 0;
                o.username = creds;
                o.password = colon ? colon + 1 : "";
        }
        if (n_insecure)
                o.insecure_registries = insecure;
        progress_state ps = {};
        o.progress = show_progress(quiet) ? on_progress : NULL;
        o.userdata = &ps;
        add_call call = { .pull = &o };
        int r = add_image(argv[optind], &call);
        if (creds) {
                explicit_bzero(creds, strlen(creds));
                free(creds);
        }
        return r;
}

static int image_import(int argc, char **argv) {
        static const struct option opts[] = { { "name", required_argument, NULL, 'n' },
                { "format", required_argument, NULL, 'f' }, { "quiet", no_argument, NULL, 'q' },
                { "json", no_argument, NULL, 'j' }, { "help", no_argument, NULL, 'h' }, {} };
        nook_image_import_opts o;
        bool quiet = false;
        int c;
        nook_image_import_opts_init(&o);
        while ((c = getopt_long(argc, argv, "hqjn:f:", opts, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        printf("Usage: nook image import [OPTIONS] SOURCE\n\n"
                               "SOURCE is an OCI image layout directory, an oci-archive tar or a `docker save` tar\n"
                               "('-': that tar on stdin),\n"
                               "or as skopeo names them: oci:DIR[:NAME], oci-archive:FILE[:NAME], docker-archive:FILE[:NAME]\n"
                               "(NAME picks one of several images).\n\n"
                               "  -n, --name NAME       name the image (default: the archive's annotation or RepoTag)\n"
                               "  -f, --format FORMAT   oci, oci-archive or docker-archive (default: detected)\n"
                               "  -q, --quiet           no progress display\n");
                        return 0;
                case 'n':
                        o.name = optarg;
                        break;
                case 'f':
                        o.format = optarg;
                        break;
                case 'q':
                        quiet = true;
                        break;
                case 'j':
                        arg_json = true;
                        break;
                default:
                        return cli_usage_error("image import", "unknown option");
                }
        }
        if (optind + 1 != argc)
                return cli_usage_error("image import", "expected one SOURCE");
        progress_state ps = {};
        o.progress = show_progress(quiet) ? on_progress : NULL;
        o.userdata = &ps;
        add_call call = { .import = &o };
        const char *source = argv[optind];
        cli_stdio_file f; /* "-": the archive on stdin (docker load) */
        int r = cli_stdio_file_take(&f, &source, /* for_stdout= */ false, "image import");
        if (r == 0)
                r = add_image(source, &call);
        cli_stdio_file_done(&f);
        return r;
}

static int image_export(int argc, char **argv) {
        static const struct option opts[] = { { "output", required_argument, NULL, 'o' },
                { "format", required_argument, NULL, 'f' }, { "force", no_argument, NULL, 'F' },
                { "help", no_argument, NULL, 'h' }, {} };
        nook_image_export_opts o;
        const char *out = NULL;
        int c;
        nook_image_export_opts_init(&o);
        while ((c = getopt_long(argc, argv, "ho:f:", opts, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        printf("Usage: nook image export [OPTIONS] REFERENCE -o PATH\n\n"
                               "  -o, --output PATH     where to write (refused if it exists, unless --force);\n"
                               "                        '-': the tar on stdout (docker save)\n"
                               "  -f, --format FORMAT   oci (a directory), oci-archive (a tar, the default) or\n"
                               "                        docker-archive (a tar `docker load` and skopeo read)\n"
                               "  --force               replace PATH\n");
                        return 0;
                case 'o':
                        out = optarg;
                        break;
                case 'f':
                        o.format = optarg;
                        break;
                case 'F':
                        o.force = true;
                        break;
                default:
                        return cli_usage_error("image export", "unknown option");
                }
        }
        if (optind + 1 != argc || !out)
                return cli_usage_error("image export", "expected one REFERENCE and -o PATH");
        bool to_stdout = strcmp(out, "-") == 0;
        if (to_stdout && o.format && strcmp(o.format, "oci") == 0)
                return cli_usage_error(
                        "image export", "--format oci is a directory: '-' takes a tar format");
        cli_stdio_file f; /* "-": the archive on stdout (docker save) */
        int r = cli_stdio_file_take(&f, &out, /* for_stdout= */ true, "image export");
        if (r != 0)
                return r;
        nook *n = NULL;
        nook_error err = {};
        r = cli_open(&n, &err);
        if (r >= 0)
                r = nook_image_export(n, argv[optind], out, &o, &err);
        nook_close(n);
        if (r < 0) {
                cli_stdio_file_done(&f);
                return cli_fail(&err);
        }
        if (to_stdout)
                return cli_stdio_file_finish(&f, "image export");
        if (!arg_json)
                printf("exported %s to %s\n", argv[optind], out);
        return 0;
}

static const char *cell_digest(json_t *row, char *buf, size_t len) {
        const char *d = json_string_value(json_object_get(row, "digest"));
        snprintf(buf, len, "%.*s", arg_no_trunc ? (int)len : 19, d ? d : "-");
        return buf;
}

static const char *cell_size(json_t *row, char *buf, size_t len) {
        cli_human_bytes((uint64_t)json_integer_value(json_object_get(row, "size")), buf, len);
        return buf;
}

static const cli_column image_columns[] = {
        { "NAME", "name", NULL, 0.4, CLI_COL_TRUNC },
        { "DIGEST", NULL, cell_digest, 19, 0 },
        { "PLATFORM", "platform", NULL, 0.1, 0 },
        { "SIZE", NULL, cell_size, 8, CLI_COL_RIGHT },
};

/* One row per name of each image ("<none>" for an image without one), as docker images. */
static int print_list(json_t *a) {
        json_t *rows = json_array(), *img;
        size_t i;
        if (!rows)
                return cli_fail_oom();
        json_array_foreach(a, i, img) {
                json_t *names = json_object_get(img, "names");
                size_t k, count = json_array_size(names);
                for (k = 0; k < (count ? count : 1); k++) {
                        json_t *row = json_deep_copy(img);
                        if (!row)
                                continue;
                        (void)json_object_set(
                                row, "name", count ? json_array_get(names, k) : json_string("<none>"));
                        (void)json_array_append_new(rows, row);
                }
        }
        int r = cli_table_print(image_columns, ELEMENTSOF(image_columns), rows);
        json_decref(rows);
        return r;
}

static int image_ls(int argc, char **argv) {
        static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
                { "format", required_argument, NULL, 'F' }, { "no-trunc", no_argument, NULL, 'T' },
                { "quiet", no_argument, NULL, 'q' }, { "help", no_argument, NULL, 'h' }, {} };
        nook_error err = {};
        int c;
        while ((c = getopt_long(argc, argv, "+hq", opts, NULL)) >= 0) {
                if (c == 'h') {
                        printf("Usage: nook image ls [-q] [--json | --format TEMPLATE] [--no-trunc]\n\n"
                               "List local images, one line per name. --format renders TEMPLATE per line, e.g.\n"
                               "'{{.Name}} {{.Digest}}' (fields as in --json, plus Name).\n");
                        return 0;
                } else if (c == 'j')
                        arg_json = true;
                else if (c == 'F')
                        arg_format = optarg;
                else if (c == 'T')
                        arg_no_trunc = true;
                else if (c == 'q')
                        arg_format = "{{.Name}}";
                else
                        return cli_usage_error("image ls", "unknown option");
        }
        if (optind < argc)
                return cli_usage_error("image ls", "takes no argument ('%s')", argv[optind]);
        if (arg_format && arg_json)
                return cli_usage_error("image ls", "--json and --format exclude each other");
        if (arg_format && template_check(arg_format, &err) < 0)
                return cli_fail_usage("image ls", &err);
        nook *n = NULL;
        char *json = NULL;
        int r = cli_open(&n, &err);
        if (r >= 0)
                r = nook_image_list(n, &json, &err);
        nook_close(n);
        if (r < 0)
                return cli_fail(&err);
        if (arg_json) {
                puts(json);
                nook_free(json);
                return 0;
        }
        json_t *a = json_loads(json, 0, NULL);
        nook_free(json);
        r = a ? print_list(a) : cli_fail_oom();
        json_decref(a);
        return r;
}

static void print_pretty(json_t *j) {
        char *t = json_dumps(j, JSON_INDENT(2));
        if (t)
                puts(t);
        free(t);
}

/* ls, inspect, rm, prune: simple shapes over one call each. */
static int image_simple(const char *verb, int argc, char **argv) {
        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--json") == 0)
                        arg_json = true;
                else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
                        printf("Usage: nook image %s%s\n", verb,
                                strcmp(verb, "prune") == 0 ? "" : " REFERENCE...");
                        return 0;
                } else if (argv[i][0] == '-')
                        return cli_usage_error("image", "unknown option '%s'", argv[i]);
        }
        int nargs = 0;
        for (int i = 1; i < argc; i++)
                nargs += argv[i][0] != '-';
        bool wants_args = strcmp(verb, "inspect") == 0 || strcmp(verb, "rm") == 0;
        if (wants_args != (nargs > 0))
                return cli_usage_error(
                        "image", "%s %s", verb, wants_args ? "expects a REFERENCE" : "takes no argument");
        nook *n = NULL;
        nook_error err = {};
        char *json = NULL;
        int r = cli_open(&n, &err);
        if (r >= 0 && strcmp(verb, "prune") == 0) {
                uint64_t freed = 0;
                r = nook_image_prune(n, &freed, &err);
                char f[16];
                cli_human_bytes(freed, f, sizeof(f));
                if (r >= 0)
                        arg_json ? printf("{\"freedBytes\":%llu}\n", (unsigned long long)freed)
                                 : printf("freed %s\n", f);
        } else {
                for (int i = 1; r >= 0 && i < argc; i++) {
                        if (argv[i][0] == '-')
                                continue;
                        if (strcmp(verb, "inspect") == 0) {
                                r = nook_image_inspect(n, argv[i], &json, &err);
                                if (r >= 0)
                                        print_json_or(json, print_pretty);
                                nook_free(json);
                                json = NULL;
                        } else if ((r = nook_image_remove(n, argv[i], &err)) >= 0 && !arg_json)
                                printf("removed %s\n", argv[i]);
                }
        }
        nook_free(json);
        nook_close(n);
        return r < 0 ? cli_fail(&err) : 0;
}

int cmd_image(int argc, char **argv) {
        if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
                FILE *f = argc < 2 ? stderr : stdout;
                fprintf(f,
                        "Usage: nook image COMMAND\n\n"
                        "  pull REFERENCE     download an image (alpine, ghcr.io/o/r:tag, host:5000/x@sha256:...)\n"
                        "  ls                 list local images\n"
                        "  inspect REFERENCE  show an image (JSON), with its default command\n"
                        "  rm REFERENCE...    remove names (an image goes with its last name)\n"
                        "  prune              free blobs and layers no image uses\n"
                        "  import SOURCE      add an image from an OCI layout, oci-archive or docker save tar\n"
                        "                     (--name NAME, --format oci|oci-archive|docker-archive)\n"
                        "  export REF -o PATH write an image as oci-archive (default), oci or docker-archive\n");
                return argc < 2 ? CLI_EXIT_USAGE : 0;
        }
        const char *verb = argv[1];
        optind = 0;
        if (strcmp(verb, "pull") == 0)
                return image_pull(argc - 1, argv + 1);
        if (strcmp(verb, "import") == 0)
                return image_import(argc - 1, argv + 1);
        if (strcmp(verb, "export") == 0)
                return image_export(argc - 1, argv + 1);
        if (strcmp(verb, "ls") == 0 || strcmp(verb, "list") == 0)
                return image_ls(argc - 1, argv + 1);
        if (strcmp(verb, "inspect") == 0 || strcmp(verb, "rm") == 0 || strcmp(verb, "prune") == 0)
                return image_simple(verb, argc - 1, argv + 1);
        static const char *const verbs[] = { "pull", "import", "export", "ls", "list", "inspect", "rm",
                "prune" };
        const char *near = cli_did_you_mean(verb, verbs, ELEMENTSOF(verbs));
        if (near)
                return cli_usage_error("image", "unknown command '%s'; did you mean '%s'?", verb, near);
        return cli_usage_error("image", "unknown command '%s'", verb);
}
