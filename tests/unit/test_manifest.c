/* SPDX-License-Identifier: Apache-2.0 */
/* The baseline manifest (src/tree/manifest.c): capture of a real tree, the text format's round
 * trip, and the parser's refusals of every malformed field; then diff and merge of real trees
 * (src/tree/diff.c, merge.c) below the sandbox layer. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "tree/diff.h"
#include "tree/manifest.h"
#include "tree/merge.h"
#include "util/path.h"

static const char *H = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

static int parse(const char *text, manifest **m, nook_error *err) {
        return manifest_parse(text, strlen(text), m, err);
}

Test(manifest, parses_what_it_formats) {
        char text[1024];
        snprintf(text, sizeof(text),
                "nook-manifest 1\n"
                "d 755 0 0 4096 1 2 3 - a -\n"
                "f 644 1000 1000 5 -5 7 8 %s a/b%%20c%%0Ad -\n"
                "l 777 0 0 1 1 1 1 - a/l -\n"
                "o 0 0 0 0 0 0 0 - z%%25 -\n",
                H);
        manifest *m = NULL;
        nook_error err = { 0 };
        cr_assert_eq(parse(text, &m, &err), 0, "%s", err.msg);
        cr_assert_eq(m->n, 4);
        cr_assert_str_eq(m->e[1].path, "a/b c\nd");
        cr_assert(m->e[1].has_hash);
        cr_assert_eq(m->e[1].mtime_ns, -5);
        cr_assert_str_eq(m->e[2].target, "-", "a symlink's target is read literally");
        cr_assert_str_eq(m->e[3].path, "z%");
        cr_assert_not_null(manifest_find(m, "a/b c\nd"));
        cr_assert_null(manifest_find(m, "a/b"));
        char *out = NULL;
        size_t len = 0;
        cr_assert_eq(manifest_format(m, &out, &len, &err), 0);
        cr_assert_str_eq(out, text, "the round trip is exact");
        free(out);
        manifest_free(m);
}

Test(manifest, refuses_malformed) {
        static const char *const bad[] = {
                "", "nook-manifest 2\n", "nook-manifest 1\nd 755 0 0 0 0 0 0 - a -", /* no end of line */
                "nook-manifest 1\nx 755 0 0 0 0 0 0 - a -\n", /* type */
                "nook-manifest 1\nd 17755 0 0 0 0 0 0 - a -\n", /* mode above 07777 */
                "nook-manifest 1\nd 758 0 0 0 0 0 0 - a -\n", /* not octal */
                "nook-manifest 1\nd 755 4294967296 0 0 0 0 0 - a -\n", /* uid */
                "nook-manifest 1\nd 755 0 0 01 0 0 0 - a -\n", /* leading zero */
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - ../a -\n",
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - a/../b -\n",
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - /a -\n",
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - a//b -\n",
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - . -\n",
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - a%00b -\n", /* NUL */
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - a%41 -\n", /* needless escape */
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - a%4 -\n", /* short escape */
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - a x\n", /* a target on a directory */
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - a - extra\n",
                "nook-manifest 1\nd 755 0 0 0 0 0 0 -  a -\n", /* two spaces */
                "nook-manifest 1\nd 755 0 0 0 0 0 0 0123 a -\n", /* hash */
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - b -\nd 755 0 0 0 0 0 0 - a -\n", /* order */
                "nook-manifest 1\nd 755 0 0 0 0 0 0 - a -\nd 755 0 0 0 0 0 0 - a -\n", /* repeat */
                "nook-manifest 1\nl 777 0 0 0 0 0 0 - a %0A\n", /* an escaped newline is fine ... */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]) - 1; i++) {
                manifest *m = NULL;
                nook_error err = { 0 };
                cr_assert_eq(parse(bad[i], &m, &err), -NOOK_E_INVALID, "accepted: %s", bad[i]);
                cr_assert_null(m);
                cr_assert_neq(err.msg[0], '\0');
        }
        manifest *m = NULL;
        nook_error err = { 0 };
        cr_assert_eq(parse(bad[sizeof(bad) / sizeof(bad[0]) - 1], &m, &err), 0, "%s", err.msg);
        manifest_free(m);
        char hash_on_dir[256];
        snprintf(hash_on_dir, sizeof(hash_on_dir), "nook-manifest 1\nd 755 0 0 0 0 0 0 %s a -\n", H);
        cr_assert_eq(parse(hash_on_dir, &m, &err), -NOOK_E_INVALID, "a hash on a directory");
}

Test(manifest, path_rule) {
        cr_assert(mf_path_valid("a/b", 3));
        cr_assert(mf_path_valid("...", 3));
        cr_assert_not(mf_path_valid("", 0));
        cr_assert_not(mf_path_valid("a/", 2));
        cr_assert_not(mf_path_valid("a/..", 4));
        cr_assert_not(mf_path_valid("a\0b", 3));
}

/* A real tree: capture, save, load, diff after changes, and a merge with a conflict. */
static char *mktree(void) {
        char tmpl[] = "/tmp/nook-mf-XXXXXX";
        char *d = mkdtemp(tmpl);
        cr_assert_not_null(d);
        return strdup(d);
}

static void put(const char *dir, const char *rel, const char *content) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        FILE *f = fopen(p, "w");
        cr_assert_not_null(f, "%s", p);
        fputs(content, f);
        fclose(f);
}

Test(manifest, capture_diff_merge) {
        _cleanup_free_ char *a = mktree(), *b = mktree(), *state = mktree();
        nook_error err = { 0 };
        char p[512];
        int r;
        put(a, "f", "one\n");
        put(a, "g", "two\n");
        snprintf(p, sizeof(p), "%s/dir", a);
        cr_assert_eq(mkdir(p, 0755), 0);
        put(a, "dir/x", "x\n");
        snprintf(p, sizeof(p), "%s/link", a);
        cr_assert_eq(symlink("/etc/passwd", p), 0);
        char cmd[1200];
        snprintf(cmd, sizeof(cmd), "cp -a %s/. %s/", a, b);
        cr_assert_eq(system(cmd), 0);

        int afd = open(a, O_RDONLY | O_DIRECTORY | O_CLOEXEC),
            bfd = open(b, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int sfd = open(state, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        manifest *m = NULL;
        cr_assert_eq(manifest_capture(bfd, true, 0, &m, &err), 0, "%s", err.msg);
        cr_assert_eq(m->n, 5);
        cr_assert_str_eq(m->e[0].path, "dir");
        cr_assert_str_eq(m->e[1].path, "dir/x");
        cr_assert_str_eq(m->e[4].target, "/etc/passwd");
        cr_assert_eq(manifest_save(m, sfd, MF_FILE_NAME, /* durable= */ true, &err), 0, "%s", err.msg);
        manifest_free(m);
        r = manifest_capture(bfd, true, 3, &m, &err);
        cr_assert_eq(r, -NOOK_E_REFUSED, "a bound on the entries: %d %s", r, err.msg);

        /* the branch b: modify f, delete g, add h; the target a: modify f too */
        put(b, "f", "branch\n");
        snprintf(p, sizeof(p), "%s/g", b);
        cr_assert_eq(unlink(p), 0);
        put(b, "h", "new\n");
        put(a, "f", "target\n");

        diff_result *d = NULL;
        cr_assert_eq(manifest_load(sfd, MF_FILE_NAME, &m, &err), 0, "%s", err.msg);
        cr_assert_eq(diff_compute(bfd, m, &d, &err), 0, "%s", err.msg);
        cr_assert_eq(d->n, 3);
        cr_assert_eq(d->c[0].kind, DIFF_MODIFIED);
        cr_assert_eq(d->c[1].kind, DIFF_DELETED);
        cr_assert_eq(d->c[2].kind, DIFF_ADDED);
        diff_result_free(d);

        char *report = NULL;
        cr_assert_eq(manifest_load(sfd, MF_FILE_NAME, &m, &err), 0);
        cr_assert_eq(merge_trees(bfd, m, afd, -1, MERGE_REFUSE, false, &report, &err), -NOOK_E_CONFLICT);
        cr_assert(strstr(report, "\"path\":\"f\",\"branch\":\"modified\",\"target\":\"modified\""), "%s",
                report);
        free(report);
        snprintf(p, sizeof(p), "%s/h", a);
        cr_assert_neq(access(p, F_OK), 0, "a refused merge adds nothing");

        cr_assert_eq(manifest_load(sfd, MF_FILE_NAME, &m, &err), 0);
        cr_assert_eq(merge_trees(bfd, m, afd, -1, MERGE_OURS, false, &report, &err), 0, "%s", err.msg);
        free(report);
        cr_assert_eq(access(p, F_OK), 0, "ours applies the other changes");
        snprintf(p, sizeof(p), "%s/g", a);
        cr_assert_neq(access(p, F_OK), 0, "ours applies the deletion");
        cr_assert_eq(merge_strategy_from_string("mine"), _MERGE_STRATEGY_INVALID);

        close(afd);
        close(bfd);
        close(sfd);
        (void)path_rm_rf(a, &err);
        (void)path_rm_rf(b, &err);
        (void)path_rm_rf(state, &err);
}

Test(manifest, merge_journal_refusals) {
        _cleanup_free_ char *t = mktree();
        nook_error err = { 0 };
        int fd = open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        put(t, "victim", "keep\n");
        static const char *const bad[] = {
                "bogus\n",
                "aside 0 0 victim victim\n", /* a name that is not a staging name */
                "aside 0 0 ../x .nook-merge-1-1\n",
                "tmp 0 0 a .nook-merge-1-1/x\n",
                "tmp 0 0 a%4 .nook-merge-1-1\n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                cr_assert_eq(merge_recover(fd, bad[i], strlen(bad[i]), &err), -NOOK_E_INVALID,
                        "accepted: %s", bad[i]);
        /* a last line cut by the kill is a step not taken */
        const char *cut = "placed 1 0 victim .nook-merge-1-1";
        cr_assert_eq(merge_recover(fd, cut, strlen(cut), &err), 0, "%s", err.msg);
        /* "placed" undoes only the inode it placed */
        const char *other = "placed 1 0 victim .nook-merge-1-1\n";
        cr_assert_eq(merge_recover(fd, other, strlen(other), &err), 0, "%s", err.msg);
        char p[512];
        snprintf(p, sizeof(p), "%s/victim", t);
        cr_assert_eq(access(p, F_OK), 0, "a file of another inode is left alone");
        close(fd);
        (void)path_rm_rf(t, &err);
}

/* An empty manifest is saved without fsync; a power loss may leave it zero-length, and that
 * loads as the empty manifest.  A file with anything else than a manifest stays refused. */
Test(manifest, empty_file_is_the_empty_manifest) {
        char dir[] = "/tmp/nook-mf-empty.XXXXXX";
        cr_assert_not_null(mkdtemp(dir));
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(dfd, 0);
        manifest *m = NULL;
        nook_error err = { 0 };
        cr_assert_eq(parse("nook-manifest 1\n", &m, &err), 0, "%s", err.msg);
        cr_assert_eq(manifest_save(m, dfd, "empty", /* durable= */ true, &err), 0, "%s", err.msg);
        manifest_free(m);
        m = NULL;
        cr_assert_eq(manifest_load(dfd, "empty", &m, &err), 0, "%s", err.msg);
        cr_assert_eq(m->n, 0);
        manifest_free(m);
        m = NULL;
        int fd = openat(dfd, "cut", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        close(fd);
        cr_assert_eq(manifest_load(dfd, "cut", &m, &err), 0, "%s", err.msg);
        cr_assert_eq(m->n, 0);
        manifest_free(m);
        m = NULL;
        fd = openat(dfd, "junk", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, "x", 1), 1);
        close(fd);
        cr_assert_eq(manifest_load(dfd, "junk", &m, &err), -NOOK_E_INVALID);
        cr_assert_null(m);
        close(dfd);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        cr_assert_eq(system(cmd), 0);
}

/* mf_hash_fd is SHA-256 of the whole file, read in 64 KiB pieces: FIPS 180-4's known answers
 * for "abc" and for a million 'a' (read across many pieces). */
Test(manifest, hash_small_and_large_files) {
        static const char *const want_abc =
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        char dir[] = "/tmp/nook-mf-hash.XXXXXX", p[64], hex[2 * MF_HASH_LEN + 1];
        uint8_t h[MF_HASH_LEN];
        nook_error err = { 0 };
        cr_assert_not_null(mkdtemp(dir));
        snprintf(p, sizeof(p), "%s/small", dir);
        int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, "abc", 3), 3);
        cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
        cr_assert_eq(mf_hash_fd(fd, h, &err), 0, "%s", err.msg);
        close(fd);
        for (size_t i = 0; i < MF_HASH_LEN; i++)
                snprintf(hex + 2 * i, 3, "%02x", h[i]);
        cr_expect_str_eq(hex, want_abc);

        size_t big = 1000000;
        char *buf = malloc(big);
        cr_assert_not_null(buf);
        memset(buf, 'a', big);
        snprintf(p, sizeof(p), "%s/large", dir);
        fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, buf, big), (ssize_t)big);
        cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
        cr_assert_eq(mf_hash_fd(fd, h, &err), 0, "%s", err.msg);
        close(fd);
        for (size_t i = 0; i < MF_HASH_LEN; i++)
                snprintf(hex + 2 * i, 3, "%02x", h[i]);
        cr_expect_str_eq(
                hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", "a million 'a'");
        free(buf);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        cr_assert_eq(system(cmd), 0);
}
