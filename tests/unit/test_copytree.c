/* SPDX-License-Identifier: Apache-2.0 */
/* src/branch/copytree.c: what a branch's copy keeps (docs/design/branch.md). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "branch/copytree.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"

static char tmp[] = "/var/tmp/nook-copytree.XXXXXX";
static char *src, *dst;

static void setup(void) {
        cr_assert_not_null(mkdtemp(tmp));
        src = strprintf("%s/src", tmp);
        dst = strprintf("%s/dst", tmp);
        cr_assert_eq(mkdir(src, 0755), 0);
}

static void teardown(void) {
        nook_error err;
        (void)path_rm_rf(tmp, &err);
        free(src);
        free(dst);
        src = dst = NULL;
}

/* cr_skip leaves the test without running its .fini: clean up first (the message is made before,
 * while errno is still the failure's; teardown runs twice at most, harmlessly). */
#define skip_clean(...)                                                                                     \
        do {                                                                                                \
                char why_[256];                                                                             \
                (void)snprintf(why_, sizeof(why_), __VA_ARGS__);                                            \
                teardown();                                                                                 \
                cr_skip("%s", why_);                                                                        \
        } while (0)

static void put(const char *rel, const char *content, mode_t mode) {
        _cleanup_free_ char *p = strprintf("%s/%s", src, rel);
        FILE *f = fopen(p, "w");
        cr_assert_not_null(f, "%s", p);
        fputs(content, f);
        fclose(f);
        cr_assert_eq(chmod(p, mode), 0);
}

static struct stat st_of(const char *root, const char *rel) {
        _cleanup_free_ char *p = strprintf("%s/%s", root, rel);
        struct stat st;
        cr_assert_eq(lstat(p, &st), 0, "%s: %s", p, strerror(errno));
        return st;
}

static char *read_all(const char *root, const char *rel) {
        _cleanup_free_ char *p = strprintf("%s/%s", root, rel);
        char buf[256] = "";
        FILE *f = fopen(p, "r");
        cr_assert_not_null(f, "%s", p);
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        return strdup(buf);
}

Test(copytree, files_folders_links_modes_times, .init = setup, .fini = teardown) {
        _cleanup_free_ char *d = strprintf("%s/sub/deeper", src), *h1 = strprintf("%s/h1", src),
                            *h2 = strprintf("%s/sub/h2", src), *ln = strprintf("%s/link", src);
        cr_assert_eq(path_mkdir_p(d, 0750, &(nook_error){}), 0);
        put("a", "alpha", 0640);
        put("sub/deeper/b", "beta", 04755);
        put("h1", "linked", 0600);
        cr_assert_eq(link(h1, h2), 0);
        cr_assert_eq(symlink("../outside/nowhere", ln), 0);
        struct timespec t[2] = { { .tv_sec = 981173106 }, { .tv_sec = 981173106, .tv_nsec = 5000 } };
        cr_assert_eq(utimensat(AT_FDCWD, d, t, 0), 0);
        nook_error err = {};
        copytree_stats s = {};
        cr_assert_eq(copytree(src, dst, &(copytree_opts){ 0 }, &s, &err), 0, "%s", err.msg);
        _cleanup_free_ char *a = read_all(dst, "a"), *b = read_all(dst, "sub/deeper/b");
        cr_assert_str_eq(a, "alpha");
        cr_assert_str_eq(b, "beta");
        cr_assert_eq(st_of(dst, "a").st_mode & 07777, 0640);
        cr_assert_eq(st_of(dst, "sub/deeper/b").st_mode & 07777, 04755, "setuid kept (set after chown)");
        cr_assert_eq(st_of(dst, "sub").st_mode & 07777, 0750);
        cr_assert_eq(st_of(dst, "h1").st_ino, st_of(dst, "sub/h2").st_ino, "a hardlink stays one");
        cr_assert_neq(st_of(dst, "h1").st_ino, st_of(src, "h1").st_ino, "a copy, not a link to the source");
        struct stat dl = st_of(dst, "sub/deeper");
        cr_assert_eq(dl.st_mtim.tv_sec, 981173106, "a folder's mtime survives its children's creation");
        cr_assert_eq(dl.st_mtim.tv_nsec, 5000);
        char target[64] = "";
        _cleanup_free_ char *dln = strprintf("%s/link", dst);
        cr_assert_gt(readlink(dln, target, sizeof(target) - 1), 0);
        cr_assert_str_eq(target, "../outside/nowhere", "a symlink is copied, never followed");
        cr_assert_eq(s.files, 3); /* a, b, h1 (h2 is a link) */
}

Test(copytree, xattrs_and_special_files, .init = setup, .fini = teardown) {
        put("x", "x", 0644);
        _cleanup_free_ char *x = strprintf("%s/x", src), *fifo = strprintf("%s/fifo", src);
        if (setxattr(x, "user.overlay.opaque", "y", 1, 0) < 0)
                skip_clean("no user xattrs on /var/tmp: %s", strerror(errno));
        cr_assert_eq(mkfifo(fifo, 0600), 0);
        if (geteuid() == 0) {
                _cleanup_free_ char *wh = strprintf("%s/whiteout", src);
                if (mknod(wh, S_IFCHR | 0, makedev(0, 0)) < 0)
                        skip_clean("mknod: %s", strerror(errno));
        }
        nook_error err = {};
        cr_assert_eq(copytree(src, dst, &(copytree_opts){ 0 }, NULL, &err), 0, "%s", err.msg);
        _cleanup_free_ char *dx = strprintf("%s/x", dst);
        char v[8] = "";
        cr_assert_eq(getxattr(dx, "user.overlay.opaque", v, sizeof(v)), 1);
        cr_assert_eq(v[0], 'y');
        cr_assert(S_ISFIFO(st_of(dst, "fifo").st_mode));
        if (geteuid() == 0) {
                struct stat w = st_of(dst, "whiteout");
                cr_assert(S_ISCHR(w.st_mode) && w.st_rdev == makedev(0, 0), "an overlay whiteout stays one");
        }
}

Test(copytree, ids_move_between_ranges, .init = setup, .fini = teardown) {
        if (geteuid() != 0)
                skip_clean("chown needs root");
        put("in", "i", 0644);
        put("out", "o", 0644);
        _cleanup_free_ char *in = strprintf("%s/in", src), *out = strprintf("%s/out", src);
        if (chown(in, 200000 + 1000, 200000 + 1000) < 0)
                skip_clean("chown: %s", strerror(errno));
        cr_assert_eq(chown(out, 5, 6), 0);
        cr_assert_eq(chown(src, 200000, 200000), 0);
        nook_error err = {};
        copytree_opts o = { .from = 200000, .to = 300000, .range = 65536 };
        cr_assert_eq(copytree(src, dst, &o, NULL, &err), 0, "%s", err.msg);
        cr_assert_eq(st_of(dst, "in").st_uid, 300000 + 1000,
                "uid 1000 of the source's range is 1000 of the new one");
        cr_assert_eq(st_of(dst, "in").st_gid, 300000 + 1000);
        cr_assert_eq(st_of(dst, "out").st_uid, 5, "ids outside the range stay");
        cr_assert_eq(st_of(dst, "out").st_gid, 6);
        cr_assert_eq(st_of(tmp, "dst").st_uid, 300000, "the root moves too");
}

Test(copytree, refuses_an_existing_destination, .init = setup, .fini = teardown) {
        cr_assert_eq(mkdir(dst, 0700), 0);
        nook_error err = {};
        cr_assert_lt(copytree(src, dst, &(copytree_opts){ 0 }, NULL, &err), 0);
        cr_assert(strstr(err.msg, dst), "%s", err.msg);
}
