/* SPDX-License-Identifier: Apache-2.0 */
/* The workspace module: the path rule (hostile corpus in hostile_paths.txt), the resolver with
 * openat2 and with the forced O_NOFOLLOW walk (NOOK_TEST_NO_OPENAT2=1), and the file operations
 * against planted symlinks, hard links, FIFOs and devices.  Every test works in its own mkdtemp
 * directory under /tmp, removed by the suite's fini even when an assertion fails. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "util/macro.h"
#include "util/path.h"
#include "isolate/userns.h"
#include "workspace/ws.h"
#include "workspace/ws_internal.h"

static char base[64];

static void suite_init(void) {
        strcpy(base, "/tmp/nook-test-ws-XXXXXX");
        cr_assert_not_null(mkdtemp(base));
        /* the homes' runtime folders (sandbox/rundir.h) go with base, not to /dev/shm or /run */
        cr_assert_eq(setenv("NOOK_RUNTIME_DIR", base, 1), 0);
}

/* The canary a broken resolver would create in /etc (absolute_symlinks_out). */
#define ETC_CANARY "/etc/nook-should-not-exist"

static void suite_fini(void) {
        nook_error err = {};
        if (base[0])
                (void)path_rm_rf(base, &err);
        /* Only ever there when a test has failed: never leave it behind on the host. */
        (void)unlink(ETC_CANARY);
        (void)rmdir(ETC_CANARY);
}

TestSuite(workspace, .init = suite_init, .fini = suite_fini);

/* One mode's playground: <base>/m<mode>/{ws,outside}, outside holding a file "secret". */
typedef struct fx {
        bool fallback;
        char dir[256];
        char root[300];
        char outside[300];
        char secret[320];
        ws *w;
} fx;

static void write_file(const char *path, const char *s) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0, "open %s: %m", path);
        cr_assert_eq(write(fd, s, strlen(s)), (ssize_t)strlen(s));
        close(fd);
}

static char *slurp(const char *path) {
        static char buf[4096];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        buf[n < 0 ? 0 : n] = 0;
        return buf;
}

static void ws_open_mode(fx *f, const char *root, uid_t uid, gid_t gid, ws **ret) {
        nook_error err = {};
        if (f->fallback)
                setenv("NOOK_TEST_NO_OPENAT2", "1", 1);
        else
                unsetenv("NOOK_TEST_NO_OPENAT2");
        int r = ws_open(root, /* create= */ true, uid, gid, ret, &err);
        cr_assert_eq(r, 0, "ws_open: %s", err.msg);
        cr_assert_eq(ws_uses_openat2(*ret), !f->fallback);
}

static void fx_setup(fx *f, int mode, const char *name) {
        memset(f, 0, sizeof(*f));
        f->fallback = mode == 1;
        snprintf(f->dir, sizeof(f->dir), "%s/%s-m%d", base, name, mode);
        snprintf(f->root, sizeof(f->root), "%s/ws", f->dir);
        snprintf(f->outside, sizeof(f->outside), "%s/outside", f->dir);
        snprintf(f->secret, sizeof(f->secret), "%s/secret", f->outside);
        cr_assert_eq(mkdir(f->dir, 0755), 0, "mkdir %s: %m", f->dir);
        cr_assert_eq(mkdir(f->outside, 0755), 0);
        write_file(f->secret, "outside secret");
        ws_open_mode(f, f->root, geteuid(), getegid(), &f->w);
}

static void fx_teardown(fx *f) {
        nook_error err = {};
        f->w = ws_free(f->w);
        cr_assert_eq(path_rm_rf(f->dir, &err), 0, "%s", err.msg);
}

#define BOTH_MODES(name, body)                                                                              \
        for (int mode_ = 0; mode_ < 2; mode_++) {                                                           \
                fx f_;                                                                                      \
                fx_setup(&f_, mode_, name);                                                                 \
                body(&f_);                                                                                  \
                fx_teardown(&f_);                                                                           \
        }

static void host_path_of(const fx *f, const char *rel, char *buf) {
        snprintf(buf, PATH_MAX, "%s/%s", f->root, rel);
}

#define EXPECT_CODE(call, want)                                                                             \
        do {                                                                                                \
                nook_error e_ = {};                                                                         \
                int r_ = (call);                                                                            \
                cr_expect_eq(r_, -(int)(want), "%s -> %d (%s), want -%d [%s]", #call, r_, e_.msg, (want),   \
                        f->fallback ? "fallback" : "openat2");                                              \
        } while (0)
#define E (&e_)

/* ---- the corpus ------------------------------------------------------------------------------- */

/* Expands %XX and ${N*c}.  Returns the length; out has room for PATH_MAX * 2. */
static size_t unescape(const char *in, char *out) {
        size_t o = 0;
        for (const char *p = in; *p;) {
                if (p[0] == '%' && p[1] && p[2]) {
                        char hex[3] = { p[1], p[2], 0 };
                        out[o++] = (char)strtoul(hex, NULL, 16);
                        p += 3;
                } else if (p[0] == '$' && p[1] == '{' && p[2] >= '0' && p[2] <= '9') {
                        char *star;
                        unsigned long n = strtoul(p + 2, &star, 10);
                        cr_assert(*star == '*' && star[1] && star[2] == '}', "bad repeat in '%s'", in);
                        for (unsigned long i = 0; i < n; i++)
                                out[o++] = star[1];
                        p = star + 3;
                } else
                        out[o++] = *p++;
        }
        out[o] = 0;
        return o;
}

typedef struct hcase {
        int line;
        nook_errc want; /* NOOK_E_OK: allowed */
        char input[PATH_MAX * 2];
        size_t input_len;
        char norm[PATH_MAX * 2];
} hcase;

static size_t corpus_load(hcase **ret) {
        const char *src = getenv("NOOK_SOURCE_DIR");
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/tests/unit/hostile_paths.txt", src ? src : ".");
        FILE *fp = fopen(path, "re");
        cr_assert_not_null(fp, "cannot open %s", path);

        size_t n = 0, cap = 128;
        hcase *v = calloc(cap, sizeof(*v));
        char *line = NULL;
        size_t lcap = 0;
        int lineno = 0;
        while (getline(&line, &lcap, fp) > 0) {
                lineno++;
                line[strcspn(line, "\n")] = 0;
                if (line[0] == '#' || !line[0])
                        continue;
                char *rest = line;
                char *outcome = strsep(&rest, "\t"), *input = strsep(&rest, "\t"),
                     *norm = strsep(&rest, "\t");
                cr_assert(outcome && input && norm && !rest, "line %d: want 3 fields", lineno);
                cr_assert_lt(n, cap);
                hcase *c = &v[n++];
                c->line = lineno;
                c->want = streq(outcome, "allowed") ? NOOK_E_OK
                        : streq(outcome, "refused") ? NOOK_E_REFUSED
                        : streq(outcome, "invalid") ? NOOK_E_INVALID
                                                    : _NOOK_E_MAX;
                cr_assert_neq(c->want, _NOOK_E_MAX, "line %d: bad outcome '%s'", lineno, outcome);
                c->input_len = unescape(input, c->input);
                unescape(streq(norm, ".") ? "" : norm, c->norm);
        }
        free(line);
        fclose(fp);
        *ret = v;
        return n;
}

static bool dir_is_empty(const char *path) {
        DIR *d = opendir(path);
        cr_assert_not_null(d, "opendir %s: %m", path);
        struct dirent *de;
        int n = 0;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(d);
        return n == 0;
}

static void corpus_case_fs_denied(fx *f, const hcase *c) {
        const char *p = c->input;
        void *data = NULL;
        size_t len;
        char *s = NULL;
        nook_stat st;
        nook_dirent *de = NULL;
        size_t nde;

        EXPECT_CODE(ws_write(f->w, p, "x", 1, 0644, 0, E), c->want);
        EXPECT_CODE(ws_read(f->w, p, 0, &data, &len, E), c->want);
        EXPECT_CODE(ws_exists(f->w, p, E), c->want);
        EXPECT_CODE(ws_stat(f->w, p, &st, E), c->want);
        EXPECT_CODE(ws_mkdir_p(f->w, p, 0755, E), c->want);
        EXPECT_CODE(ws_list(f->w, p, &de, &nde, E), c->want);
        EXPECT_CODE(ws_remove(f->w, p, E), c->want);
        EXPECT_CODE(ws_rename(f->w, p, "dst", E), c->want);
        EXPECT_CODE(ws_rename(f->w, "dst", p, E), c->want);
        EXPECT_CODE(ws_host_path(f->w, p, &s, E), c->want);
        cr_expect(dir_is_empty(f->root), "line %d left something in the workspace", c->line);
        cr_expect_str_eq(slurp(f->secret), "outside secret");
}

static void corpus_case_fs_allowed(fx *f, const hcase *c) {
        nook_error err = {};
        char host[PATH_MAX * 2];
        char *hp = NULL;
        void *data = NULL;
        size_t len = 0;

        snprintf(host, sizeof(host), "%s%s%s", f->root, c->norm[0] ? "/" : "", c->norm);
        if (!c->norm[0]) {
                /* The root itself: it exists, is a directory, and is not a file to write. */
                cr_expect_eq(ws_exists(f->w, c->input, &err), 1, "line %d: %s", c->line, err.msg);
                EXPECT_CODE(ws_write(f->w, c->input, "x", 1, 0644, 0, E), NOOK_E_INVALID);
                EXPECT_CODE(ws_remove(f->w, c->input, E), NOOK_E_INVALID);
        } else if (c->input[c->input_len - 1] == '/') {
                /* Ends in '/': names a directory, never a file to write or read, and nothing is
                 * made by the refused write; mkdir makes it. */
                cr_expect_eq(ws_exists(f->w, c->input, &err), 0, "line %d", c->line);
                cr_expect_eq(ws_write(f->w, c->input, "x", 1, 0644, 0, &err), -NOOK_E_INVALID, "line %d",
                        c->line);
                cr_expect(strstr(err.msg, "ends in '/' names a directory"), "line %d: %s", c->line, err.msg);
                cr_expect(dir_is_empty(f->root), "line %d: a refused write left something", c->line);
                cr_assert_eq(ws_mkdir_p(f->w, c->input, 0755, &err), 0, "line %d: %s", c->line, err.msg);
                struct stat st;
                cr_expect_eq(fstatat(ws_root_fd(f->w), c->norm, &st, 0), 0, "line %d: %s missing", c->line,
                        c->norm);
                cr_expect(S_ISDIR(st.st_mode));
                EXPECT_CODE(ws_read(f->w, c->input, 0, &data, &len, E), NOOK_E_INVALID);
        } else {
                cr_expect_eq(ws_exists(f->w, c->input, &err), 0, "line %d", c->line);
                cr_assert_eq(ws_write(f->w, c->input, c->input, c->input_len, 0644, 0, &err), 0,
                        "line %d: %s", c->line, err.msg);
                /* Checked with plain calls relative to the root, not through the module. */
                struct stat st;
                cr_expect_eq(fstatat(ws_root_fd(f->w), c->norm, &st, 0), 0, "line %d: %s missing", c->line,
                        c->norm);
                cr_expect(S_ISREG(st.st_mode));
                cr_assert_eq(
                        ws_read(f->w, c->input, 0, &data, &len, &err), 0, "line %d: %s", c->line, err.msg);
                cr_expect_eq(len, c->input_len);
                cr_expect_eq(memcmp(data, c->input, len), 0);
                free(data);
                cr_expect_eq(ws_exists(f->w, c->input, &err), 1, "line %d: %s", c->line, err.msg);
        }
        if (strlen(host) < PATH_MAX) {
                cr_assert_eq(ws_host_path(f->w, c->input, &hp, &err), 0, "line %d: %s", c->line, err.msg);
                cr_expect_str_eq(hp, host, "line %d", c->line);
                free(hp);
        } else
                EXPECT_CODE(ws_host_path(f->w, c->input, &hp, E), NOOK_E_INVALID);
        if (c->norm[0]) {
                /* Remove the first component so the next case starts from an empty root. */
                char first[NAME_MAX + 1];
                snprintf(first, sizeof(first), "%.*s", (int)strcspn(c->norm, "/"), c->norm);
                cr_assert_eq(ws_remove(f->w, first, &err), 0, "line %d: %s", c->line, err.msg);
        }
        cr_expect(dir_is_empty(f->root), "line %d left something in the workspace", c->line);
}

static void corpus_run(fx *f) {
        hcase *cases;
        size_t n = corpus_load(&cases);
        size_t n_allowed = 0, n_refused = 0, n_invalid = 0;

        cr_assert_geq(n, 60, "the corpus must hold at least 60 cases, has %zu", n);
        for (size_t i = 0; i < n; i++) {
                const hcase *c = &cases[i];
                nook_error err = {};
                char *rel = NULL;

                int r = ws_path_normalize_len(c->input, c->input_len, &rel, &err);
                cr_expect_eq(r, -(int)c->want, "line %d: normalize -> %d (%s), want -%d", c->line, r,
                        err.msg, c->want);
                if (r == 0) {
                        cr_expect_str_eq(rel, c->norm, "line %d", c->line);
                        free(rel);
                }
                if (c->want == NOOK_E_REFUSED)
                        cr_expect(strstr(err.msg, "Refusing a path outside the workspace: '") == err.msg,
                                "line %d: message '%s'", c->line, err.msg);
                n_allowed += c->want == NOOK_E_OK;
                n_refused += c->want == NOOK_E_REFUSED;
                n_invalid += c->want == NOOK_E_INVALID;
                if (memchr(c->input, 0, c->input_len))
                        continue; /* the C-string calls would see a shorter path */
                if (c->want == NOOK_E_OK)
                        corpus_case_fs_allowed(f, c);
                else
                        corpus_case_fs_denied(f, c);
        }
        cr_expect(n_allowed > 20 && n_refused > 20 && n_invalid > 5);
        free(cases);
}

Test(workspace, hostile_corpus_both_resolvers) {
        BOTH_MODES("corpus", corpus_run);
}

/* ---- the path rule, directly ------------------------------------------------------------------- */

Test(workspace, normalize_messages_and_null) {
        nook_error err = {};
        char *rel = NULL;

        cr_assert_eq(ws_path_normalize("/workspace/../x", &rel, &err), -NOOK_E_REFUSED);
        cr_expect_str_eq(err.msg, "Refusing a path outside the workspace: '/workspace/../x'");
        cr_expect_eq(err.code, NOOK_E_REFUSED);
        cr_assert_eq(ws_path_normalize(NULL, &rel, &err), -NOOK_E_INVALID);
        cr_assert_eq(ws_path_normalize("", &rel, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "empty"));
        cr_assert_eq(ws_path_normalize_len("a\0b", 3, &rel, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "NUL"));
        /* success leaves err untouched */
        memset(&err, 0x5a, sizeof(err));
        cr_assert_eq(ws_path_normalize("/workspace/a//b/", &rel, &err), 0);
        cr_expect_str_eq(rel, "a/b");
        cr_expect_eq(err.msg[0], 0x5a);
        free(rel);
}

/* ---- filesystem cases, each under both resolvers ------------------------------------------------ */

static void abs_symlinks_out(fx *f) {
        char p[PATH_MAX];
        void *data;
        size_t len;
        char *s;
        nook_dirent *de;
        size_t n;

        host_path_of(f, "etc", p);
        cr_assert_eq(symlink("/etc", p), 0);
        host_path_of(f, "secret_link", p);
        cr_assert_eq(symlink(f->secret, p), 0);
        host_path_of(f, "outdir", p);
        cr_assert_eq(symlink(f->outside, p), 0);

        EXPECT_CODE(ws_read(f->w, "/etc/passwd", 0, &data, &len, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_exists(f->w, "/etc/passwd", E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_host_path(f->w, "/workspace/etc/passwd", &s, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_list(f->w, "etc", &de, &n, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_write(f->w, ETC_CANARY, "x", 1, 0644, 0, E), NOOK_E_REFUSED);
        cr_expect_eq(access(ETC_CANARY, F_OK), -1);
        EXPECT_CODE(ws_mkdir_p(f->w, ETC_CANARY "/d", 0755, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_read(f->w, "secret_link", 0, &data, &len, E), NOOK_E_REFUSED);
        {
                /* the refusal says why the path, itself inside, left the workspace */
                nook_error why = {};
                cr_expect_eq(ws_read(f->w, "secret_link", 0, &data, &len, &why), -NOOK_E_REFUSED);
                cr_expect(
                        strstr(why.msg, "outside the workspace: 'secret_link' (a symbolic link on its way"),
                        "%s [%s]", why.msg, f->fallback ? "fallback" : "openat2");
        }
        EXPECT_CODE(ws_stat(f->w, "secret_link", &(nook_stat){}, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_host_path(f->w, "secret_link", &s, E), NOOK_E_REFUSED);
        /* a symlinked parent pointing out */
        EXPECT_CODE(ws_write(f->w, "outdir/new", "x", 1, 0644, 0, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_read(f->w, "outdir/secret", 0, &data, &len, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_rename(f->w, "outdir/secret", "stolen", E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_remove(f->w, "outdir/secret", E), NOOK_E_REFUSED);
        cr_expect(dir_is_empty(f->outside) == false);
        cr_expect_eq(access(f->secret, F_OK), 0);
        char nf[PATH_MAX];
        snprintf(nf, sizeof(nf), "%s/new", f->outside);
        cr_expect_eq(access(nf, F_OK), -1);
        /* an absolute symlink is refused even when it names a place inside (documented in ws.h) */
        nook_error err = {};
        cr_assert_eq(ws_mkdir_p(f->w, "real", 0755, &err), 0, "%s", err.msg);
        host_path_of(f, "real", p);
        char l[PATH_MAX];
        host_path_of(f, "abs_in", l);
        cr_assert_eq(symlink(p, l), 0);
        EXPECT_CODE(ws_write(f->w, "abs_in/f", "x", 1, 0644, 0, E), NOOK_E_REFUSED);
        /* removing the links removes the links, never what they point to */
        cr_assert_eq(ws_remove(f->w, "secret_link", &err), 0, "%s", err.msg);
        cr_assert_eq(ws_remove(f->w, "outdir", &err), 0, "%s", err.msg);
        cr_expect_str_eq(slurp(f->secret), "outside secret");
}

Test(workspace, absolute_symlinks_out) {
        BOTH_MODES("abs", abs_symlinks_out);
}

static void relative_symlinks(fx *f) {
        nook_error err = {};
        char p[PATH_MAX];
        void *data = NULL;
        size_t len;

        cr_assert_eq(ws_write(f->w, "a/b/target.txt", "T", 1, 0644, 0, &err), 0, "%s", err.msg);
        cr_assert_eq(ws_write(f->w, "top.txt", "TOP", 3, 0644, 0, &err), 0, "%s", err.msg);
        host_path_of(f, "up", p);
        cr_assert_eq(symlink("../outside", p), 0);
        host_path_of(f, "a/b/deep_up", p);
        cr_assert_eq(symlink("../../../outside/secret", p), 0);
        host_path_of(f, "a/b/far", p);
        cr_assert_eq(symlink("../../../../../../../../etc/passwd", p), 0);
        host_path_of(f, "a/b/in_up", p);
        cr_assert_eq(symlink("../../top.txt", p), 0); /* climbs, but stays inside */
        host_path_of(f, "a/dot", p);
        cr_assert_eq(symlink(".", p), 0);
        host_path_of(f, "a/bdir", p);
        cr_assert_eq(symlink("b/", p), 0);

        EXPECT_CODE(ws_read(f->w, "up/secret", 0, &data, &len, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_write(f->w, "up/new", "x", 1, 0644, 0, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_read(f->w, "a/b/deep_up", 0, &data, &len, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_read(f->w, "a/b/far", 0, &data, &len, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_exists(f->w, "a/b/far", E), NOOK_E_REFUSED);

        cr_assert_eq(ws_read(f->w, "a/b/in_up", 0, &data, &len, &err), 0, "%s", err.msg);
        cr_expect_str_eq(data, "TOP");
        free(data);
        cr_assert_eq(ws_read(f->w, "a/dot/dot/bdir/target.txt", 0, &data, &len, &err), 0, "%s", err.msg);
        cr_expect_str_eq(data, "T");
        free(data);
        /* a symlinked parent pointing inside is followed (both resolvers) */
        cr_assert_eq(ws_write(f->w, "a/bdir/via_link", "V", 1, 0644, 0, &err), 0, "%s", err.msg);
        cr_assert_eq(ws_read(f->w, "a/b/via_link", 0, &data, &len, &err), 0, "%s", err.msg);
        cr_expect_str_eq(data, "V");
        free(data);
        cr_assert_eq(ws_mkdir_p(f->w, "a/bdir/x/y", 0755, &err), 0, "%s", err.msg);
        cr_expect_eq(ws_exists(f->w, "a/b/x/y", &err), 1);
        nook_stat st;
        cr_assert_eq(ws_stat(f->w, "a/bdir", &st, &err), 0, "%s", err.msg);
        cr_expect_eq(st.type, NOOK_FILE_DIRECTORY); /* stat follows an inside link */
        char *hp = NULL;
        cr_assert_eq(ws_host_path(f->w, "a/b/in_up", &hp, &err), 0, "%s", err.msg);
        free(hp);
        /* a dangling link that stays inside is fine for host_path: a host writer creates inside */
        host_path_of(f, "dangling_in", p);
        cr_assert_eq(symlink("a/not-yet", p), 0);
        cr_assert_eq(ws_host_path(f->w, "dangling_in", &hp, &err), 0, "%s", err.msg);
        free(hp);
        cr_expect_eq(ws_exists(f->w, "dangling_in", &err), 0);
        host_path_of(f, "dangling_out", p);
        cr_assert_eq(symlink("../outside/not-yet", p), 0);
        EXPECT_CODE(ws_host_path(f->w, "dangling_out", &hp, E), NOOK_E_REFUSED);
        cr_expect_str_eq(slurp(f->secret), "outside secret");
}

Test(workspace, relative_symlinks) {
        BOTH_MODES("rel", relative_symlinks);
}

static void symlink_loops(fx *f) {
        char p[PATH_MAX];
        void *data;
        size_t len;
        nook_error err = {};

        host_path_of(f, "loop1", p);
        cr_assert_eq(symlink("loop2", p), 0);
        host_path_of(f, "loop2", p);
        cr_assert_eq(symlink("loop1", p), 0);
        host_path_of(f, "self", p);
        cr_assert_eq(symlink("self/x", p), 0);
        EXPECT_CODE(ws_read(f->w, "loop1", 0, &data, &len, E), NOOK_E_INVALID);
        EXPECT_CODE(ws_read(f->w, "self", 0, &data, &len, E), NOOK_E_INVALID);
        EXPECT_CODE(ws_write(f->w, "loop1/x", "x", 1, 0644, 0, E), NOOK_E_INVALID);
        EXPECT_CODE(ws_exists(f->w, "loop2", E), NOOK_E_INVALID);
        /* A chain of 40 links resolves (the kernel's limit), 41 does not: same in both resolvers. */
        cr_assert_eq(ws_write(f->w, "c/end", "E", 1, 0644, 0, &err), 0, "%s", err.msg);
        for (int i = 0; i < 41; i++) {
                char l[PATH_MAX], t[64];
                snprintf(l, sizeof(l), "%s/c/l%d", f->root, i);
                if (i == 0)
                        snprintf(t, sizeof(t), "end");
                else
                        snprintf(t, sizeof(t), "l%d", i - 1);
                cr_assert_eq(symlink(t, l), 0);
        }
        cr_assert_eq(ws_read(f->w, "c/l39", 0, &data, &len, &err), 0, "%s", err.msg);
        free(data);
        EXPECT_CODE(ws_read(f->w, "c/l40", 0, &data, &len, E), NOOK_E_INVALID);
        /* writing the loop's name replaces the link */
        cr_assert_eq(ws_write(f->w, "loop1", "now a file", 10, 0644, 0, &err), 0, "%s", err.msg);
        struct stat st;
        cr_assert_eq(fstatat(ws_root_fd(f->w), "loop1", &st, AT_SYMLINK_NOFOLLOW), 0);
        cr_expect(S_ISREG(st.st_mode));
}

Test(workspace, symlink_loops) {
        BOTH_MODES("loop", symlink_loops);
}

static void write_replaces_links(fx *f) {
        nook_error err = {};
        char p[PATH_MAX];
        struct stat st;
        void *data;
        size_t len;

        host_path_of(f, "out_link", p);
        cr_assert_eq(symlink(f->secret, p), 0);
        cr_assert_eq(ws_write(f->w, "out_link", "mine", 4, 0644, 0, &err), 0, "%s", err.msg);
        cr_expect_str_eq(slurp(f->secret), "outside secret");
        cr_assert_eq(lstat(p, &st), 0);
        cr_expect(S_ISREG(st.st_mode), "the link must be replaced by a file");
        cr_assert_eq(ws_read(f->w, "out_link", 0, &data, &len, &err), 0, "%s", err.msg);
        cr_expect_str_eq(data, "mine");
        free(data);

        cr_assert_eq(ws_write(f->w, "t.txt", "target", 6, 0644, 0, &err), 0, "%s", err.msg);
        host_path_of(f, "in_link", p);
        cr_assert_eq(symlink("t.txt", p), 0);
        cr_assert_eq(ws_write(f->w, "in_link", "new", 3, 0644, 0, &err), 0, "%s", err.msg);
        cr_assert_eq(lstat(p, &st), 0);
        cr_expect(S_ISREG(st.st_mode));
        host_path_of(f, "t.txt", p);
        cr_expect_str_eq(slurp(p), "target");
}

Test(workspace, write_through_symlink_replaces_the_link) {
        BOTH_MODES("wlink", write_replaces_links);
}

/* A file replaced keeps its permission bits (mode 0 asks for that), set-id bits excepted; a new
 * file is 0644; an explicit mode wins. */
static void write_keeps_mode(fx *f) {
        nook_error err = {};
        char p[PATH_MAX];
        struct stat st;

        host_path_of(f, "script.sh", p);
        cr_assert_eq(ws_write(f->w, "script.sh", "echo 1", 6, 0, 0, &err), 0, "%s", err.msg);
        cr_assert_eq(stat(p, &st), 0);
        cr_expect_eq(st.st_mode & 07777, 0644, "a new file: 0644, got %o", st.st_mode & 07777);
        cr_assert_eq(chmod(p, 0750), 0);
        cr_assert_eq(ws_write(f->w, "script.sh", "echo 2", 6, 0, 0, &err), 0, "%s", err.msg);
        cr_assert_eq(stat(p, &st), 0);
        cr_expect_eq(st.st_mode & 07777, 0750, "a replaced file keeps 0750, got %o", st.st_mode & 07777);
        cr_expect_str_eq(slurp(p), "echo 2");
        cr_assert_eq(chmod(p, 04755), 0);
        cr_assert_eq(ws_write(f->w, "script.sh", "echo 3", 6, 0, 0, &err), 0, "%s", err.msg);
        cr_assert_eq(stat(p, &st), 0);
        cr_expect_eq(st.st_mode & 07777, 0755, "set-id bits never carry over, got %o", st.st_mode & 07777);
        cr_assert_eq(ws_write(f->w, "script.sh", "echo 4", 6, 0600, 0, &err), 0, "%s", err.msg);
        cr_assert_eq(stat(p, &st), 0);
        cr_expect_eq(st.st_mode & 07777, 0600, "an explicit mode wins, got %o", st.st_mode & 07777);
}

Test(workspace, write_keeps_a_replaced_files_mode) {
        BOTH_MODES("wmode", write_keeps_mode);
}

/* A hard link to an outside file is just a file: the kernel gives no way to tell it from one
 * made inside, and RESOLVE_BENEATH is about names, not inodes.  Reading it is allowed (whoever
 * made the link could already read the file); writing replaces the name, so the outside inode
 * is never modified through it.  fs.protected_hardlinks keeps a sandbox from linking files it
 * does not own. */
static void hard_link(fx *f) {
        nook_error err = {};
        char p[PATH_MAX];
        void *data;
        size_t len;

        host_path_of(f, "hl", p);
        cr_assert_eq(link(f->secret, p), 0, "link: %m");
        cr_assert_eq(ws_read(f->w, "hl", 0, &data, &len, &err), 0, "%s", err.msg);
        cr_expect_str_eq(data, "outside secret");
        free(data);
        cr_assert_eq(ws_write(f->w, "hl", "overwritten", 11, 0644, 0, &err), 0, "%s", err.msg);
        cr_expect_str_eq(slurp(f->secret), "outside secret");
        cr_assert_eq(ws_remove(f->w, "hl", &err), 0, "%s", err.msg);
        cr_expect_eq(access(f->secret, F_OK), 0);
}

Test(workspace, hard_link_is_just_a_file) {
        BOTH_MODES("hl", hard_link);
}

/* In place: the file itself is written (its inode, hard links and mode kept), never anything
 * outside, never anything but a regular file; a new file is 0644 and its parents are made. */
static void in_place(fx *f) {
        nook_error err = {};
        char p[PATH_MAX], q[PATH_MAX];
        struct stat st, st2;
        void *data;
        size_t len;

        /* new, with parents */
        cr_assert_eq(
                ws_write(f->w, "deep/er/new.txt", "fresh", 5, 0, WS_WRITE_IN_PLACE, &err), 0, "%s", err.msg);
        host_path_of(f, "deep/er/new.txt", p);
        cr_assert_eq(stat(p, &st), 0);
        cr_expect_eq(st.st_mode & 07777, 0644, "a new file: 0644, got %o", st.st_mode & 07777);
        cr_expect_str_eq(slurp(p), "fresh");

        /* existing: same inode, truncated, mode kept, set-id dropped, a hard link sees it */
        host_path_of(f, "twin", q);
        cr_assert_eq(link(p, q), 0, "link: %m");
        cr_assert_eq(chmod(p, 04750), 0);
        cr_assert_eq(
                ws_write(f->w, "deep/er/new.txt", "v2", 2, 0, WS_WRITE_IN_PLACE, &err), 0, "%s", err.msg);
        cr_assert_eq(stat(p, &st2), 0);
        cr_expect_eq(st2.st_ino, st.st_ino, "the inode is kept");
        cr_expect_eq(
                st2.st_mode & 07777, 0750, "mode kept without set-id bits, got %o", st2.st_mode & 07777);
        cr_expect_str_eq(slurp(p), "v2");
        cr_expect_str_eq(slurp(q), "v2", "the other name of the file sees the write");
        cr_assert_eq(ws_write(f->w, "twin", "v3", 2, 0600, WS_WRITE_IN_PLACE, &err), 0, "%s", err.msg);
        cr_assert_eq(stat(p, &st2), 0);
        cr_expect_eq(st2.st_mode & 07777, 0600, "an explicit mode wins, got %o", st2.st_mode & 07777);
        cr_expect_str_eq(slurp(p), "v3");

        /* a symlink that stays inside is written through; one that leads out is refused */
        host_path_of(f, "in_link", q);
        cr_assert_eq(symlink("deep/er/new.txt", q), 0);
        cr_assert_eq(ws_write(f->w, "in_link", "via link", 8, 0, WS_WRITE_IN_PLACE, &err), 0, "%s", err.msg);
        cr_assert_eq(lstat(q, &st2), 0);
        cr_expect(S_ISLNK(st2.st_mode), "the link stays a link");
        cr_expect_str_eq(slurp(p), "via link");
        host_path_of(f, "out_link", q);
        cr_assert_eq(symlink(f->secret, q), 0);
        EXPECT_CODE(ws_write(f->w, "out_link", "mine", 4, 0, WS_WRITE_IN_PLACE, E), NOOK_E_REFUSED);
        cr_expect_str_eq(slurp(f->secret), "outside secret");
        host_path_of(f, "up_link", q);
        cr_assert_eq(symlink("../outside/secret", q), 0);
        EXPECT_CODE(ws_write(f->w, "up_link", "mine", 4, 0, WS_WRITE_IN_PLACE, E), NOOK_E_REFUSED);
        cr_expect_str_eq(slurp(f->secret), "outside secret");
        host_path_of(f, "dangling", q);
        cr_assert_eq(symlink("nowhere", q), 0);
        cr_expect_eq(ws_write(f->w, "dangling", "x", 1, 0, WS_WRITE_IN_PLACE, &err), -NOOK_E_BUSY);
        cr_expect(strstr(err.msg, "does not exist"), "%s", err.msg);
        host_path_of(f, "nowhere", q);
        cr_expect_neq(access(q, F_OK), 0, "nothing made through a dangling link");

        /* not a regular file: refused, without blocking on a FIFO */
        host_path_of(f, "fifo", q);
        cr_assert_eq(mkfifo(q, 0644), 0);
        alarm(20);
        cr_expect_eq(ws_write(f->w, "fifo", "x", 1, 0, WS_WRITE_IN_PLACE, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "FIFO"), "%s", err.msg);
        alarm(0);
        cr_expect_eq(ws_write(f->w, "deep", "x", 1, 0, WS_WRITE_IN_PLACE, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "a directory"), "%s", err.msg);
        EXPECT_CODE(ws_write(f->w, "deep/", "x", 1, 0, WS_WRITE_IN_PLACE, E), NOOK_E_INVALID);
        EXPECT_CODE(ws_write(f->w, "/workspace", "x", 1, 0, WS_WRITE_IN_PLACE, E), NOOK_E_INVALID);
        EXPECT_CODE(ws_write(f->w, "../x", "x", 1, 0, WS_WRITE_IN_PLACE, E), NOOK_E_REFUSED);
        EXPECT_CODE(ws_write(f->w, "deep/er/new.txt/x", "x", 1, 0, WS_WRITE_IN_PLACE, E), NOOK_E_INVALID);

        /* a new file whose write fails goes again (its source is a directory: read says EISDIR) */
        int dfd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(dfd, 0);
        cr_expect_eq(ws_write_fd(f->w, "half", dfd, 0, WS_WRITE_IN_PLACE, &err), -NOOK_E_IO);
        close(dfd);
        cr_expect_eq(ws_exists(f->w, "half", &err), 0, "a failed new file is removed");
        cr_assert_eq(ws_read(f->w, "twin", 0, &data, &len, &err), 0, "%s", err.msg);
        cr_expect_str_eq(data, "via link");
        free(data);
}

Test(workspace, write_in_place) {
        BOTH_MODES("inplace", in_place);
}

static void special_files(fx *f) {
        nook_error err = {};
        char p[PATH_MAX];
        void *data;
        size_t len;
        int fd;
        nook_stat st;

        host_path_of(f, "fifo", p);
        cr_assert_eq(mkfifo(p, 0644), 0);
        alarm(20); /* a hang is a failure, not a stuck suite */
        EXPECT_CODE(ws_read(f->w, "fifo", 0, &data, &len, E), NOOK_E_INVALID);
        EXPECT_CODE(ws_open_read(f->w, "/workspace/fifo", &fd, E), NOOK_E_INVALID);
        cr_expect_eq(ws_read(f->w, "fifo", 0, &data, &len, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "FIFO"), "%s", err.msg);
        cr_expect_eq(ws_exists(f->w, "fifo", &err), 1);
        cr_assert_eq(ws_stat(f->w, "fifo", &st, &err), 0, "%s", err.msg);
        cr_expect_eq(st.type, NOOK_FILE_OTHER);
        alarm(0);

        host_path_of(f, "null", p);
        if (mknod(p, S_IFCHR | 0666, makedev(1, 3)) == 0) {
                EXPECT_CODE(ws_read(f->w, "null", 0, &data, &len, E), NOOK_E_INVALID);
                cr_expect_eq(ws_read(f->w, "null", 0, &data, &len, &err), -NOOK_E_INVALID);
                cr_expect(strstr(err.msg, "device"), "%s", err.msg);
        }

        cr_assert_eq(ws_mkdir_p(f->w, "d/sub", 0755, &err), 0, "%s", err.msg);
        cr_expect_eq(ws_read(f->w, "d", 0, &data, &len, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "is a directory"), "%s", err.msg);
        cr_expect_eq(ws_write(f->w, "d", "x", 1, 0644, 0, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "is a directory"), "%s", err.msg);
        nook_dirent *de = NULL;
        size_t n = 0;
        cr_assert_eq(ws_list(f->w, "d", &de, &n, &err), 0, "%s", err.msg);
        cr_expect_eq(n, 1, "the temp file must not be left behind");
        ws_dirents_free(de, n);
        /* a file where a directory is expected */
        cr_assert_eq(ws_write(f->w, "file", "x", 1, 0644, 0, &err), 0, "%s", err.msg);
        EXPECT_CODE(ws_write(f->w, "file/child", "x", 1, 0644, 0, E), NOOK_E_INVALID);
        EXPECT_CODE(ws_mkdir_p(f->w, "file/sub", 0755, E), NOOK_E_INVALID);
        EXPECT_CODE(ws_list(f->w, "file", &de, &n, E), NOOK_E_INVALID);
        cr_expect_eq(ws_exists(f->w, "file/child", &err), 0);
}

Test(workspace, fifo_device_and_directory) {
        BOTH_MODES("special", special_files);
}

/* ---- the operations ------------------------------------------------------------------------------ */

static void basic_ops(fx *f) {
        nook_error err = {};
        void *data = NULL;
        size_t len = 0;
        nook_stat st;
        nook_dirent *de = NULL;
        size_t n = 0;
        char *hp = NULL;

        cr_assert_eq(ws_write(f->w, "/src/main.js", "console.log(42)", 15, 0600, 0, &err), 0, "%s", err.msg);
        cr_assert_eq(ws_read(f->w, "/workspace/src/main.js", 0, &data, &len, &err), 0, "%s", err.msg);
        cr_expect_eq(len, 15);
        cr_expect_str_eq(data, "console.log(42)"); /* NUL-terminated */
        free(data);
        EXPECT_CODE(ws_read(f->w, "src/main.js", 10, &data, &len, E), NOOK_E_INVALID); /* over max */
        cr_assert_eq(ws_stat(f->w, "src/main.js", &st, &err), 0, "%s", err.msg);
        cr_expect_eq(st.type, NOOK_FILE_REGULAR);
        cr_expect_eq(st.size, 15);
        cr_expect_eq(st.mode, 0600);
        cr_expect_gt(st.mtime_ns, 0);
        cr_expect_eq(ws_exists(f->w, "src", &err), 1);
        cr_expect_eq(ws_exists(f->w, "nope", &err), 0);
        EXPECT_CODE(ws_read(f->w, "nope", 0, &data, &len, E), NOOK_E_NOT_FOUND);
        EXPECT_CODE(ws_stat(f->w, "nope", &st, E), NOOK_E_NOT_FOUND);
        EXPECT_CODE(ws_remove(f->w, "nope", E), NOOK_E_NOT_FOUND);
        EXPECT_CODE(ws_remove(f->w, "nope/deeper", E), NOOK_E_NOT_FOUND);
        EXPECT_CODE(ws_rename(f->w, "nope", "x", E), NOOK_E_NOT_FOUND);
        cr_expect_eq(ws_exists(f->w, "x", &err), 0, "a failed rename creates nothing");

        /* empty file, overwrite, write_fd, open_read */
        cr_assert_eq(ws_write(f->w, "empty", NULL, 0, 0644, 0, &err), 0, "%s", err.msg);
        cr_assert_eq(ws_read(f->w, "empty", 0, &data, &len, &err), 0, "%s", err.msg);
        cr_expect_eq(len, 0);
        free(data);
        cr_assert_eq(ws_write(f->w, "src/main.js", "v2", 2, 0644, 0, &err), 0, "%s", err.msg);
        int pfd[2];
        cr_assert_eq(pipe(pfd), 0);
        cr_assert_eq(write(pfd[1], "from a pipe", 11), 11);
        close(pfd[1]);
        cr_assert_eq(ws_write_fd(f->w, "deep/er/piped", pfd[0], 0644, 0, &err), 0, "%s", err.msg);
        close(pfd[0]);
        int fd = -1;
        cr_assert_eq(ws_open_read(f->w, "deep/er/piped", &fd, &err), 0, "%s", err.msg);
        char buf[32] = {};
        cr_expect_eq(read(fd, buf, sizeof(buf)), 11);
        cr_expect_str_eq(buf, "from a pipe");
        cr_expect_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
        cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);

        /* list: sorted, typed, links not followed */
        char lp[PATH_MAX];
        host_path_of(f, "src/link", lp);
        cr_assert_eq(symlink("main.js", lp), 0);
        cr_assert_eq(ws_mkdir_p(f->w, "src/sub", 0755, &err), 0, "%s", err.msg);
        cr_assert_eq(ws_list(f->w, "/workspace/src/", &de, &n, &err), 0, "%s", err.msg);
        cr_assert_eq(n, 3);
        cr_expect_str_eq(de[0].name, "link");
        cr_expect_eq(de[0].type, NOOK_FILE_SYMLINK);
        cr_expect_str_eq(de[1].name, "main.js");
        cr_expect_eq(de[1].type, NOOK_FILE_REGULAR);
        cr_expect_eq(de[1].size, 2);
        cr_expect_str_eq(de[2].name, "sub");
        cr_expect_eq(de[2].type, NOOK_FILE_DIRECTORY);
        ws_dirents_free(de, n);
        cr_assert_eq(ws_list(f->w, "/", &de, &n, &err), 0, "%s", err.msg);
        cr_expect_eq(n, 3); /* deep, empty, src */
        ws_dirents_free(de, n);

        /* rename (creates the destination's parents), remove (file, link, tree) */
        cr_assert_eq(ws_rename(f->w, "src/main.js", "/workspace/dist/out.js", &err), 0, "%s", err.msg);
        cr_expect_eq(ws_exists(f->w, "dist/out.js", &err), 1);
        cr_expect_eq(ws_exists(f->w, "src/main.js", &err), 0);
        EXPECT_CODE(ws_rename(f->w, "dist", "dist/inner", E), NOOK_E_INVALID);
        cr_assert_eq(ws_remove(f->w, "src/link", &err), 0, "%s", err.msg);
        cr_assert_eq(ws_remove(f->w, "/workspace/deep", &err), 0, "%s", err.msg);
        cr_expect_eq(ws_exists(f->w, "deep", &err), 0);
        EXPECT_CODE(ws_remove(f->w, "/workspace", E), NOOK_E_INVALID);
        EXPECT_CODE(ws_rename(f->w, "/", "x", E), NOOK_E_INVALID);

        /* host_path */
        cr_assert_eq(ws_host_path(f->w, "/dist/out.js", &hp, &err), 0, "%s", err.msg);
        host_path_of(f, "dist/out.js", lp);
        cr_expect_str_eq(hp, lp);
        free(hp);
        cr_assert_eq(ws_host_path(f->w, "not-yet", &hp, &err), 0, "%s", err.msg);
        free(hp);
        cr_assert_eq(ws_host_path(f->w, "/workspace", &hp, &err), 0, "%s", err.msg);
        cr_expect_str_eq(hp, f->root);
        free(hp);
        EXPECT_CODE(ws_host_path(f->w, "missing-dir/x", &hp, E), NOOK_E_NOT_FOUND);
}

Test(workspace, operations) {
        BOTH_MODES("ops", basic_ops);
}

static void mkdir_cases(fx *f) {
        nook_error err = {};
        nook_stat st;

        cr_assert_eq(ws_mkdir_p(f->w, "/a/b/c/", 0700, &err), 0, "%s", err.msg);
        cr_assert_eq(ws_mkdir_p(f->w, "a/b/c", 0700, &err), 0, "%s", err.msg); /* idempotent */
        cr_assert_eq(ws_mkdir_p(f->w, "/workspace", 0755, &err), 0, "%s", err.msg);
        cr_assert_eq(ws_stat(f->w, "a/b/c", &st, &err), 0, "%s", err.msg);
        cr_expect_eq(st.type, NOOK_FILE_DIRECTORY);
        cr_expect_eq(st.mode & 0700, 0700);
        cr_expect_eq(ws_stat(f->w, "/", &st, &err), 0);
        cr_expect_eq(st.type, NOOK_FILE_DIRECTORY);
}

Test(workspace, mkdir_p) {
        BOTH_MODES("mkdir", mkdir_cases);
}

/* Rootful sandboxes: what we create belongs to the sandbox's root on the host. */
static void ownership(fx *f) {
        nook_error err = {};
        char p[PATH_MAX];
        struct stat st;
        ws *w = NULL;

        snprintf(p, sizeof(p), "%s/owned", f->dir);
        ws_open_mode(f, p, 12345, 23456, &w);
        cr_assert_eq(stat(p, &st), 0);
        cr_expect(st.st_uid == 12345 && st.st_gid == 23456, "the new workspace root is handed over");
        cr_assert_eq(ws_write(w, "x/y/z.txt", "z", 1, 0644, 0, &err), 0, "%s", err.msg);
        cr_assert_eq(ws_mkdir_p(w, "m/n", 0755, &err), 0, "%s", err.msg);
        const char *names[] = { "x", "x/y", "x/y/z.txt", "m", "m/n" };
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                cr_assert_eq(fstatat(ws_root_fd(w), names[i], &st, AT_SYMLINK_NOFOLLOW), 0);
                cr_expect(st.st_uid == 12345 && st.st_gid == 23456, "%s is %u:%u", names[i], st.st_uid,
                        st.st_gid);
        }
        ws_free(w);
}

Test(workspace, new_files_belong_to_the_owner) {
        /* A skipped test runs no fini: remove the suite's temp dir first. */
        if (!iso_rootful()) {
                suite_fini();
                cr_skip_test("needs real root (not root in a user namespace) to chown to another uid");
        }
        BOTH_MODES("own", ownership);
}

/* Readers never see half a file, and concurrent writers never collide on a temp name. */
typedef struct race {
        ws *w;
        int id;
        volatile int *stop;
        int bad;
} race;

static void *race_writer(void *arg) {
        race *r = arg;
        char buf[8192];
        nook_error err = {};
        memset(buf, 'a' + r->id, sizeof(buf));
        for (int i = 0; i < 300; i++)
                if (ws_write(r->w, "shared/file", buf, sizeof(buf), 0644, 0, &err) < 0)
                        r->bad++;
        return NULL;
}

static void *race_reader(void *arg) {
        race *r = arg;
        nook_error err = {};
        while (!*r->stop) {
                void *data;
                size_t len;
                if (ws_read(r->w, "shared/file", 0, &data, &len, &err) < 0)
                        continue; /* not written yet */
                const char *d = data;
                if (len != 8192)
                        r->bad++;
                for (size_t i = 1; i < len; i++)
                        if (d[i] != d[0]) {
                                r->bad++;
                                break;
                        }
                free(data);
        }
        return NULL;
}

static void atomic_writes(fx *f) {
        volatile int stop = 0;
        pthread_t t[5];
        race r[5];
        for (int i = 0; i < 5; i++) {
                r[i] = (race){ .w = f->w, .id = i, .stop = &stop };
                cr_assert_eq(pthread_create(&t[i], NULL, i < 4 ? race_writer : race_reader, &r[i]), 0);
        }
        for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        stop = 1;
        pthread_join(t[4], NULL);
        for (int i = 0; i < 5; i++)
                cr_expect_eq(r[i].bad, 0, "thread %d saw %d failures or torn reads", i, r[i].bad);
        nook_dirent *de = NULL;
        size_t n = 0;
        nook_error err = {};
        cr_assert_eq(ws_list(f->w, "shared", &de, &n, &err), 0, "%s", err.msg);
        cr_expect_eq(n, 1, "no temp file left behind");
        ws_dirents_free(de, n);
}

/* nook's reads leave a file's access time as it was (ws_open_regular's decision).  The times set
 * here are older than the file's mtime, so relatime (and strictatime) would stamp a plain read. */
static void atime_kept(fx *f) {
        nook_error err = {};
        char hp[PATH_MAX];
        struct stat st;
        void *data = NULL;
        size_t len = 0;
        int fd = -1;
        const struct timespec old[2] = { { .tv_sec = 1000000000 }, { .tv_nsec = UTIME_OMIT } };

        cr_assert_eq(ws_write(f->w, "d/read.txt", "abc", 3, 0644, 0, &err), 0, "%s", err.msg);
        host_path_of(f, "d/read.txt", hp);
        cr_assert_eq(utimensat(AT_FDCWD, hp, old, 0), 0, "%m");
        cr_assert_eq(ws_read(f->w, "d/read.txt", 0, &data, &len, &err), 0, "%s", err.msg);
        cr_expect_eq(len, 3);
        free(data);
        cr_assert_eq(ws_open_read(f->w, "/workspace/d/read.txt", &fd, &err), 0, "%s", err.msg);
        char buf[8];
        cr_expect_eq(read(fd, buf, sizeof(buf)), 3);
        close(fd);
        cr_assert_eq(stat(hp, &st), 0);
        cr_expect_eq(st.st_atim.tv_sec, 1000000000, "atime moved to %lld [%s]", (long long)st.st_atim.tv_sec,
                f->fallback ? "fallback" : "openat2");
        /* the control: a plain read of the same file does stamp it here */
        int pfd = open(hp, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(pfd, 0);
        cr_expect_eq(read(pfd, buf, sizeof(buf)), 3);
        close(pfd);
        cr_assert_eq(stat(hp, &st), 0);
        cr_expect_neq(st.st_atim.tv_sec, 1000000000, "the filesystem updates atime on a plain read");

        /* A file someone else owns: O_NOATIME is refused (EPERM) to a caller that is neither its
         * owner nor holds CAP_FOWNER, and the read goes on without it.  Needs root to make such a
         * file and to become another user (in a child: the suite's fini stays root). */
        if (!iso_rootful())
                return;
        cr_assert_eq(ws_write(f->w, "d/theirs.txt", "theirs", 6, 0644, 0, &err), 0, "%s", err.msg);
        host_path_of(f, "d/theirs.txt", hp);
        cr_assert_eq(chown(hp, 4242, 4242), 0, "%m");
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                nook_error cerr = {};
                void *cdata = NULL;
                size_t clen = 0;
                if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(10);
                if (ws_read(f->w, "d/theirs.txt", 0, &cdata, &clen, &cerr) < 0)
                        _exit(11);
                _exit(clen == 6 && memcmp(cdata, "theirs", 6) == 0 ? 0 : 12);
        }
        int status = 0;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "another user's read of a file it does not own: status %#x (10 setuid, 11 read failed, 12 "
                "wrong data) [%s]",
                status, f->fallback ? "fallback" : "openat2");
}

Test(workspace, reads_leave_atime) {
        BOTH_MODES("atime", atime_kept);
}

Test(workspace, atomic_writes_under_concurrency) {
        BOTH_MODES("race", atomic_writes);
}

Test(workspace, open_errors) {
        nook_error err = {};
        ws *w = NULL;
        char p[PATH_MAX];

        cr_expect_eq(ws_open("relative", true, 0, 0, &w, &err), -NOOK_E_INVALID);
        snprintf(p, sizeof(p), "%s/does-not-exist", base);
        cr_expect_eq(ws_open(p, false, geteuid(), getegid(), &w, &err), -NOOK_E_NOT_FOUND);
        cr_expect_eq(access(p, F_OK), -1, "create=false creates nothing");
        snprintf(p, sizeof(p), "%s/nested/parents/ws/", base);
        cr_assert_eq(ws_open(p, true, geteuid(), getegid(), &w, &err), 0, "%s", err.msg);
        p[strlen(p) - 1] = 0;
        cr_expect_str_eq(ws_root(w), p);
        cr_expect_geq(ws_root_fd(w), 0);
        w = ws_free(w);
        cr_expect_null(ws_free(NULL));
}

/* The public wrappers: nook_ws_dir creates nothing, nook_ws_open creates the directory. */
Test(workspace, public_api) {
        nook_error err = {};
        nook *n = NULL;
        nook_ws *w = NULL;
        char home[PATH_MAX / 2], expect[PATH_MAX];
        char *dir = NULL;
        void *data = NULL;
        size_t len = 0;

        snprintf(home, sizeof(home), "%s/home", base);
        cr_assert_eq(nook_open(home, &n, &err), 0, "%s", err.msg);
        cr_assert_eq(nook_ws_dir(n, "w1", &dir, &err), 0, "%s", err.msg);
        snprintf(expect, sizeof(expect), "%s/workspaces/w1", home);
        cr_expect_str_eq(dir, expect);
        cr_expect_eq(access(dir, F_OK), -1, "nook_ws_dir creates nothing");
        cr_expect_eq(nook_ws_dir(n, "../x", &dir, &err), -NOOK_E_INVALID);
        cr_expect_eq(nook_ws_open(n, "Bad/Name", &w, &err), -NOOK_E_INVALID);

        cr_assert_eq(nook_ws_open(n, "w1", &w, &err), 0, "%s", err.msg);
        cr_expect_str_eq(nook_ws_root(w), expect);
        cr_assert_eq(nook_ws_write(w, "/src/main.js", "console.log(41 + 1)", 19, &err), 0, "%s", err.msg);
        cr_assert_eq(nook_ws_read(w, "/workspace/src/main.js", 0, &data, &len, &err), 0, "%s", err.msg);
        cr_expect_str_eq(data, "console.log(41 + 1)");
        nook_free(data);
        cr_expect_eq(nook_ws_exists(w, "src/main.js", &err), 1);
        /* through the public API too (it passed 0644 itself, so a rewritten script lost its x bit) */
        char script[PATH_MAX + 16];
        struct stat st;
        snprintf(script, sizeof(script), "%s/src/main.js", expect);
        cr_assert_eq(stat(script, &st), 0);
        cr_expect_eq(st.st_mode & 07777, 0644, "a new file: 0644, got %o", st.st_mode & 07777);
        cr_assert_eq(chmod(script, 0755), 0);
        cr_assert_eq(nook_ws_write(w, "/src/main.js", "console.log(42)", 15, &err), 0, "%s", err.msg);
        cr_assert_eq(stat(script, &st), 0);
        cr_expect_eq(st.st_mode & 07777, 0755, "nook_ws_write keeps a replaced file's mode, got %o",
                st.st_mode & 07777);
        int pfd[2];
        cr_assert_eq(pipe(pfd), 0);
        cr_assert_eq(write(pfd[1], "piped", 5), 5);
        close(pfd[1]);
        cr_assert_eq(nook_ws_write_fd(w, "/src/main.js", pfd[0], &err), 0, "%s", err.msg);
        close(pfd[0]);
        cr_assert_eq(stat(script, &st), 0);
        cr_expect_eq(st.st_mode & 07777, 0755, "so does nook_ws_write_fd from a pipe, got %o",
                st.st_mode & 07777);
        cr_expect_eq(nook_ws_write(w, "/workspace/../../etc/x", "x", 1, &err), -NOOK_E_REFUSED);
        cr_expect_str_eq(err.msg, "Refusing a path outside the workspace: '/workspace/../../etc/x'");
        nook_dirent *de = NULL;
        size_t nde = 0;
        cr_assert_eq(nook_ws_list(w, "/", &de, &nde, &err), 0, "%s", err.msg);
        cr_expect_eq(nde, 1);
        nook_dirents_free(de, nde);
        w = nook_ws_close(w);
        n = nook_close(n);
        free(dir);
}

/* A workspace handle whose sandbox was removed ('nook rm') changes nothing: every change fails
 * with NOOK_E_NOT_FOUND and recreates no folder; a handle opened after rm stages a new one.
 * Between changes the handle holds no lock: rm (exclusive) never waits for an idle handle. */
Test(workspace, public_api_after_rm) {
        nook_error err = {};
        nook *n = NULL;
        nook_ws *w = NULL, *w2 = NULL;
        char home[PATH_MAX / 2], wsdir[PATH_MAX], lockp[PATH_MAX];

        snprintf(home, sizeof(home), "%s/home-rm", base);
        cr_assert_eq(nook_open(home, &n, &err), 0, "%s", err.msg);
        /* The state database first: a folder of workspaces beside an empty one is refused. */
        cr_assert_eq(nook_sandbox_remove(n, "none", &err), -NOOK_E_NOT_FOUND, "%s", err.msg);
        cr_assert_eq(nook_ws_open(n, "gone", &w, &err), 0, "%s", err.msg);
        snprintf(wsdir, sizeof(wsdir), "%s", nook_ws_root(w));
        for (int i = 0; i < 3; i++)
                cr_assert_eq(nook_ws_write(w, "/a/b.txt", "x", 1, &err), 0, "%s", err.msg);

        snprintf(lockp, sizeof(lockp), "%s/run/.locks/gone.lock", home);
        int lfd = open(lockp, O_RDWR | O_CLOEXEC);
        cr_assert_geq(lfd, 0, "open %s: %m", lockp);
        cr_expect_eq(flock(lfd, LOCK_EX | LOCK_NB), 0, "an idle handle holds no lock: %m");
        close(lfd);

        cr_assert_eq(nook_sandbox_remove(n, "gone", &err), 0, "%s", err.msg);
        cr_expect_eq(access(wsdir, F_OK), -1, "rm removed the workspace");
        cr_expect_eq(nook_ws_write(w, "/c.txt", "x", 1, &err), -NOOK_E_NOT_FOUND);
        cr_expect(strstr(err.msg, "was removed") != NULL, "%s", err.msg);
        cr_expect_eq(nook_ws_mkdir(w, "/d", &err), -NOOK_E_NOT_FOUND);
        cr_expect_eq(nook_ws_remove(w, "/a", &err), -NOOK_E_NOT_FOUND);
        cr_expect_eq(nook_ws_rename(w, "/a", "/e", &err), -NOOK_E_NOT_FOUND);
        cr_expect_eq(access(wsdir, F_OK), -1, "a change through the old handle recreates nothing");

        cr_assert_eq(nook_ws_open(n, "gone", &w2, &err), 0, "%s", err.msg);
        cr_expect_eq(nook_ws_write(w2, "/new.txt", "y", 1, &err), 0, "%s", err.msg);
        cr_expect_eq(nook_ws_write(w, "/c.txt", "x", 1, &err), -NOOK_E_NOT_FOUND,
                "the old handle stays refused after a new workspace was staged");
        w2 = nook_ws_close(w2);
        w = nook_ws_close(w);
        n = nook_close(n);
}

/* Writers on one handle from several threads while rm runs: each write lands before rm (and goes
 * with the workspace) or fails with NOOK_E_NOT_FOUND; rm succeeds; nothing is left. */
typedef struct rm_race {
        nook_ws *w;
        int id, ok, gone, other;
} rm_race;

static void *rm_race_writer(void *arg) {
        rm_race *r = arg;
        nook_error err = {};
        char p[64];
        for (int i = 0; i < 200; i++) {
                snprintf(p, sizeof(p), "/t%d/f%d", r->id, i);
                int rc = nook_ws_write(r->w, p, "data", 4, &err);
                if (rc == 0 && r->gone == 0)
                        r->ok++;
                else if (rc == -NOOK_E_NOT_FOUND)
                        r->gone++;
                else
                        r->other++; /* a failure other than NOT_FOUND, or a success after one */
        }
        return NULL;
}

Test(workspace, public_api_writers_racing_rm) {
        nook_error err = {};
        nook *n = NULL;
        nook_ws *w = NULL;
        char home[PATH_MAX / 2], wsdir[PATH_MAX];
        pthread_t t[4];
        rm_race r[4];

        snprintf(home, sizeof(home), "%s/home-race", base);
        cr_assert_eq(nook_open(home, &n, &err), 0, "%s", err.msg);
        /* The state database first: a folder of workspaces beside an empty one is refused. */
        cr_assert_eq(nook_sandbox_remove(n, "none", &err), -NOOK_E_NOT_FOUND, "%s", err.msg);
        cr_assert_eq(nook_ws_open(n, "race", &w, &err), 0, "%s", err.msg);
        snprintf(wsdir, sizeof(wsdir), "%s", nook_ws_root(w));
        for (int i = 0; i < 4; i++) {
                r[i] = (rm_race){ .w = w, .id = i };
                cr_assert_eq(pthread_create(&t[i], NULL, rm_race_writer, &r[i]), 0);
        }
        int rm = nook_sandbox_remove(n, "race", &err);
        for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        cr_expect_eq(rm, 0, "rm racing writes: %s", err.msg);
        for (int i = 0; i < 4; i++) {
                cr_expect_eq(r[i].other, 0, "writer %d: %d writes neither landed nor saw the removal", i,
                        r[i].other);
                cr_expect_eq(r[i].ok + r[i].gone, 200);
        }
        cr_expect_eq(access(wsdir, F_OK), -1, "nothing is left of the workspace");
        w = nook_ws_close(w);
        n = nook_close(n);
}
