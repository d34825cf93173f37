/* SPDX-License-Identifier: Apache-2.0 */
/* util: errors (make, wrap, truncate), strings, names, paths (tree removal never follows a
 * symlink out). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/path.h"
#include "util/proc.h"
#include "util/str.h"
#include "util/tmpdir.h"

/* ---- error.c ------------------------------------------------------------------------------ */

Test(util, err_set_fills_and_returns_negative_code) {
        nook_error err = {};
        cr_expect_eq(nook_err_set(&err, NOOK_E_NOT_FOUND, "No sandbox named '%s'", "w"), -NOOK_E_NOT_FOUND);
        cr_expect_eq(err.code, NOOK_E_NOT_FOUND);
        cr_expect_eq(err.sys_errno, 0);
        cr_expect_str_eq(err.msg, "No sandbox named 'w'");
        /* A code outside the table is a bug: it becomes "internal". */
        cr_expect_eq(nook_err_set(&err, (nook_errc)999, "x"), -NOOK_E_INTERNAL);
        cr_expect_eq(nook_err_set(&err, NOOK_E_OK, "x"), -NOOK_E_INTERNAL);
        /* No error object: still the code. */
        cr_expect_eq(nook_err_set(NULL, NOOK_E_IO, "x"), -NOOK_E_IO);
        cr_expect_eq(nook_err_oom(&err), -NOOK_E_NOMEM);
}

Test(util, err_errno_appends_strerror_and_keeps_errno) {
        nook_error err = {};
        errno = ENOENT;
        cr_expect_eq(nook_err_errno(&err, NOOK_E_IO, "Cannot open '%s'", "/x"), -NOOK_E_IO);
        cr_expect_eq(errno, ENOENT);
        cr_expect_eq(err.sys_errno, ENOENT);
        cr_expect_str_eq(err.msg, "Cannot open '/x': No such file or directory");
        cr_expect_eq(nook_err_errnum(&err, NOOK_E_IO, -EACCES, "op"), -NOOK_E_IO);
        cr_expect_eq(err.sys_errno, EACCES);
        cr_expect_str_eq(err.msg, "op: Permission denied");
        errno = 0; /* a caller that forgot errno still gets a cause */
        nook_err_errno(&err, NOOK_E_IO, "op");
        cr_expect_eq(err.sys_errno, EIO);
}

Test(util, err_wrap_prefixes_and_keeps_code) {
        nook_error err = {};
        nook_err_set(&err, NOOK_E_REFUSED, "Refusing a path outside the workspace");
        cr_expect_eq(nook_err_wrap(&err, "writing '%s'", "/x"), -NOOK_E_REFUSED);
        cr_expect_str_eq(err.msg, "writing '/x': Refusing a path outside the workspace");
        cr_expect_eq(err.code, NOOK_E_REFUSED);
        cr_expect_eq(nook_err_wrap(NULL, "x"), -NOOK_E_INTERNAL);
}

Test(util, err_messages_truncate_safely) {
        nook_error err = {};
        char big[2000];
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;

        nook_err_set(&err, NOOK_E_INVALID, "%s", big);
        cr_expect_eq(strlen(err.msg), sizeof(err.msg) - 1);
        /* errno text on a full message is dropped, never written past the end */
        errno = EPERM;
        nook_err_errno(&err, NOOK_E_IO, "%s", big);
        cr_expect_eq(strlen(err.msg), sizeof(err.msg) - 1);

        /* long old message: prefix kept whole, old cut */
        nook_err_set(&err, NOOK_E_INVALID, "%s", big);
        nook_err_wrap(&err, "ctx");
        cr_expect(strncmp(err.msg, "ctx: aaa", 8) == 0, "%.20s", err.msg);
        cr_expect_lt(strlen(err.msg), sizeof(err.msg));
        cr_expect_eq(err.code, NOOK_E_INVALID);

        /* long prefix: cut to fit, message still terminated */
        nook_err_set(&err, NOOK_E_IO, "old");
        nook_err_wrap(&err, "%s", big);
        cr_expect_lt(strlen(err.msg), sizeof(err.msg));
        cr_expect_eq(err.msg[0], 'a');

        /* wrapping many times never overflows */
        nook_err_set(&err, NOOK_E_IO, "root cause");
        for (int i = 0; i < 100; i++)
                nook_err_wrap(&err, "level %d", i);
        cr_expect_lt(strlen(err.msg), sizeof(err.msg));
        cr_expect(strncmp(err.msg, "level 99: level 98: ", 20) == 0, "%.40s", err.msg);
}

Test(util, errc_strings_round_trip) {
        for (int c = NOOK_E_OK; c < _NOOK_E_MAX; c++)
                cr_expect_eq(nook_errc_from_string(nook_errc_to_string((nook_errc)c)), (nook_errc)c);
        cr_expect_str_eq(nook_errc_to_string(NOOK_E_REFUSED), "refused");
        cr_expect_str_eq(nook_errc_to_string((nook_errc)-1), "internal");
        cr_expect_str_eq(nook_errc_to_string(_NOOK_E_MAX), "internal");
        cr_expect_eq(nook_errc_from_string("nonsense"), NOOK_E_INTERNAL);
        cr_expect_eq(nook_errc_from_string(NULL), NOOK_E_INTERNAL);
        cr_expect_eq(nook_errc_from_errno(ENOENT), NOOK_E_NOT_FOUND);
        cr_expect_eq(nook_errc_from_errno(-EEXIST), NOOK_E_EXISTS);
        cr_expect_eq(nook_errc_from_errno(ELOOP), NOOK_E_REFUSED);
        cr_expect_eq(nook_errc_from_errno(ENOSYS), NOOK_E_MISSING_FEATURE);
        cr_expect_eq(nook_errc_from_errno(EIO), NOOK_E_IO);
}

/* ---- str.c -------------------------------------------------------------------------------- */

Test(util, str_basics) {
        _cleanup_free_ char *s = strprintf("%s-%d", "a", 7);
        cr_expect_str_eq(s, "a-7");
        cr_expect(startswith("abc", "ab"));
        cr_expect(startswith("abc", ""));
        cr_expect(!startswith("a", "ab"));
        cr_expect(endswith("abc", "bc"));
        cr_expect(!endswith("c", "bc"));
        cr_expect(endswith("", ""));
}

Test(util, strv_push_copy_length) {
        _cleanup_strv_free_ char **l = NULL;
        cr_expect_eq(strv_length(l), 0);
        cr_expect_eq(strv_push(&l, "a"), 0);
        cr_expect_eq(strv_push(&l, "b"), 0);
        cr_expect_eq(strv_length(l), 2);
        cr_expect_null(l[2]);
        _cleanup_strv_free_ char **c = strv_copy((const char *const *)l);
        cr_expect_eq(strv_length(c), 2);
        cr_expect_str_eq(c[1], "b");
        cr_expect_neq(c[1], l[1]);
        _cleanup_strv_free_ char **e = strv_copy(NULL);
        cr_expect_not_null(e);
        cr_expect_null(e[0]);
        size_t n = 0;
        STRV_FOREACH (i, l)
                n++;
        cr_expect_eq(n, 2);
}

Test(util, strv_env) {
        _cleanup_strv_free_ char **l = NULL;
        cr_expect_eq(strv_env_set(&l, "A=1"), 0);
        cr_expect_eq(strv_env_set(&l, "AB=2"), 0);
        cr_expect_eq(strv_env_set(&l, "A=3"), 0);
        cr_expect_eq(strv_length(l), 2);
        cr_expect_str_eq(l[0], "A=3");
        cr_expect_eq(strv_env_find(l, "AB", 2), 1);
        cr_expect_eq(strv_env_find(l, "B", 1), -1);
        cr_expect_eq(strv_env_set(&l, "NOEQUALS"), -EINVAL);
        cr_expect(env_name_is_valid("PATH", 4));
        cr_expect(env_name_is_valid("_x9", 3));
        cr_expect(!env_name_is_valid("9x", 2));
        cr_expect(!env_name_is_valid("", 0));
        cr_expect(!env_name_is_valid("A-B", 3));
        cr_expect(!env_name_is_valid("A=B", 3));
}

/* ---- name.c ------------------------------------------------------------------------------- */

Test(util, names_valid) {
        static const char *const good[] = { "a", "0", "w", "my-box", "a_b.c-d", "9lives", "a.", "a-",
                "a.b.c", "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0" /* 63 */ };
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                nook_error err = {};
                cr_expect_eq(name_validate("sandbox", good[i], &err), 0, "'%s': %s", good[i], err.msg);
                cr_expect_eq(nook_name_validate(good[i], &err), 0, "'%s'", good[i]);
        }
}

Test(util, names_hostile_refused) {
        static const char *const bad[] = {
                "",
                ".",
                "..",
                ".a",
                ".hidden",
                "-a",
                "_a",
                "a..b",
                "a..",
                "A",
                "Abc",
                "a/b",
                "/a",
                "a/",
                "../x",
                "a b",
                " a",
                "a\t",
                "a\n",
                "a\r",
                "a\x01",
                "a\x1b[31m",
                "a\x7f",
                "a:b",
                "a@b",
                "a\\b",
                "a;rm",
                "a$b",
                "a*",
                "a?",
                "a'b",
                "a\"b",
                "a%s",
                "a=b",
                "a,b",
                "a+b",
                "a~",
                "\xc3\xa9", /* é */
                "caf\xc3\xa9", /* café */
                "\xd0\xb0", /* Cyrillic а, looks like a */
                "a\xe2\x80\x8b\x62", /* zero-width space */
                "a\xc0\xaf\x62", /* overlong '/' */
                "a\xef\xbc\x8f\x62", /* full-width solidus */
                "\xff",
                "a\xe2\x80\xae\x62", /* right-to-left override */
                "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01" /* 64 */,
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                nook_error err = {};
                cr_expect_eq(
                        name_validate("sandbox", bad[i], &err), -NOOK_E_INVALID, "accepted name #%zu", i);
                cr_expect_eq(err.code, NOOK_E_INVALID);
                cr_expect(strstr(err.msg, "Invalid sandbox name"), "%s", err.msg);
        }
        nook_error err = {};
        cr_expect_eq(name_validate("snapshot", NULL, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "snapshot"), "%s", err.msg);
        /* An over-long name is reported without reading past a bounded prefix. */
        char huge[4096];
        memset(huge, 'a', sizeof(huge) - 1);
        huge[sizeof(huge) - 1] = 0;
        cr_expect_eq(name_validate("sandbox", huge, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "longer than 63"), "%s", err.msg);
}

/* ---- path.c ------------------------------------------------------------------------------- */

static char tmp[64];

static void tmp_setup(void) {
        (void)snprintf(tmp, sizeof(tmp), "/tmp/nook-test-util-XXXXXX");
        cr_assert_not_null(mkdtemp(tmp));
}

static void tmp_teardown(void) {
        nook_error err = {};
        (void)path_rm_rf(tmp, &err);
}

static void touch(const char *p) {
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0, "%s: %m", p);
        cr_assert_eq(write(fd, "x", 1), 1);
        close(fd);
}

static bool exists(const char *p) {
        struct stat sb;
        return lstat(p, &sb) == 0;
}

Test(util, rm_rf_removes_tree_but_not_symlink_targets, .init = tmp_setup, .fini = tmp_teardown) {
        _cleanup_free_ char *outside = strprintf("%s/outside", tmp);
        _cleanup_free_ char *outside_file = strprintf("%s/outside/keep", tmp);
        _cleanup_free_ char *tree = strprintf("%s/tree", tmp);
        _cleanup_free_ char *deep = strprintf("%s/tree/a/b/c", tmp);
        _cleanup_free_ char *f = strprintf("%s/tree/a/b/c/file", tmp);
        _cleanup_free_ char *ro = strprintf("%s/tree/ro", tmp);
        _cleanup_free_ char *ro_file = strprintf("%s/tree/ro/f", tmp);
        _cleanup_free_ char *link_dir = strprintf("%s/tree/a/to-outside", tmp);
        _cleanup_free_ char *link_file = strprintf("%s/tree/a/to-file", tmp);
        _cleanup_free_ char *link_dangling = strprintf("%s/tree/dangling", tmp);
        nook_error err = {};

        cr_assert_eq(path_mkdir_p(outside, 0700, &err), 0, "%s", err.msg);
        touch(outside_file);
        cr_assert_eq(path_mkdir_p(deep, 0700, &err), 0, "%s", err.msg);
        touch(f);
        cr_assert_eq(path_mkdir_p(ro, 0700, &err), 0, "%s", err.msg);
        touch(ro_file);
        cr_assert_eq(chmod(ro, 0500), 0);
        cr_assert_eq(symlink(outside, link_dir), 0);
        cr_assert_eq(symlink(outside_file, link_file), 0);
        cr_assert_eq(symlink("/nonexistent/x", link_dangling), 0);

        cr_assert_eq(path_rm_rf(tree, &err), 0, "%s", err.msg);
        cr_expect(!exists(tree));
        cr_expect(exists(outside_file), "a symlink's target outside the tree survives");
        cr_expect(exists(outside));

        /* Missing is success; a symlink itself as the target is removed, not followed. */
        cr_expect_eq(path_rm_rf(tree, &err), 0);
        _cleanup_free_ char *top_link = strprintf("%s/top-link", tmp);
        cr_assert_eq(symlink(outside, top_link), 0);
        cr_expect_eq(path_rm_rf(top_link, &err), 0, "%s", err.msg);
        cr_expect(!exists(top_link));
        cr_expect(exists(outside_file));
}

Test(util, rm_rf_refuses_root_and_relative) {
        nook_error err = {};
        cr_expect_eq(path_rm_rf("/", &err), -NOOK_E_INVALID);
        cr_expect_eq(path_rm_rf("relative/dir", &err), -NOOK_E_INVALID);
        cr_expect_eq(path_rm_rf("", &err), -NOOK_E_INVALID);
        cr_expect_eq(path_rm_rf(NULL, &err), -NOOK_E_INVALID);
}

Test(util, rm_rf_at_removes_a_file, .init = tmp_setup, .fini = tmp_teardown) {
        _cleanup_free_ char *f = strprintf("%s/file", tmp);
        nook_error err = {};
        touch(f);
        int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(dfd, 0);
        cr_expect_eq(path_rm_rf_at(dfd, "file", &err), 0, "%s", err.msg);
        cr_expect_eq(path_rm_rf_at(dfd, "file", &err), 0);
        close(dfd);
        cr_expect(!exists(f));
}

/* An overlay's work/work is left at mode 0 and a guest may leave folders 0555 or 0000: all go,
 * whatever the listing's order; a folder of more names than one getdents read holds too. */
Test(util, rm_rf_removes_unreadable_folders_and_wide_folders, .init = tmp_setup, .fini = tmp_teardown) {
        _cleanup_free_ char *tree = strprintf("%s/tree", tmp);
        _cleanup_free_ char *work = strprintf("%s/tree/work/work", tmp);
        _cleanup_free_ char *locked = strprintf("%s/tree/locked", tmp);
        _cleanup_free_ char *wide = strprintf("%s/tree/wide", tmp);
        nook_error err = {};
        cr_assert_eq(path_mkdir_p(work, 0700, &err), 0, "%s", err.msg);
        cr_assert_eq(path_mkdir_p(locked, 0700, &err), 0, "%s", err.msg);
        _cleanup_free_ char *inner = strprintf("%s/inner", locked);
        cr_assert_eq(mkdir(inner, 0700), 0);
        _cleanup_free_ char *inner_file = strprintf("%s/inner/f", locked);
        touch(inner_file);
        cr_assert_eq(chmod(inner, 0), 0);
        cr_assert_eq(chmod(locked, 0500), 0);
        cr_assert_eq(chmod(work, 0), 0);
        cr_assert_eq(mkdir(wide, 0700), 0);
        for (int i = 0; i < 600; i++) { /* ~24 KiB of names: several reads of the folder */
                _cleanup_free_ char *f = strprintf("%s/a-rather-long-file-name-%04d", wide, i);
                if (i % 50 == 0)
                        cr_assert_eq(mkdir(f, 0500), 0);
                else
                        touch(f);
        }
        cr_assert_eq(path_rm_rf(tree, &err), 0, "%s", err.msg);
        cr_expect(!exists(tree));
}

/* A guest makes a tree as deep as it likes (mkdirat + openat in a loop: no PATH_MAX in the way):
 * removing it takes neither a descriptor per level (here at most 128 may be open) nor a stack
 * frame per level, and leaves nothing. */
Test(util, rm_rf_removes_a_tree_deeper_than_the_descriptors_allow, .init = tmp_setup, .fini = tmp_teardown) {
        _cleanup_free_ char *tree = strprintf("%s/deep", tmp);
        nook_error err = {};
        cr_assert_eq(mkdir(tree, 0700), 0);
        int fd = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        for (int i = 0; i < 5000; i++) {
                cr_assert_eq(mkdirat(fd, "d", 0700), 0, "level %d: %m", i);
                if (i % 1000 == 0) { /* a file and a read-only folder on the way */
                        int f = openat(fd, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                        cr_assert_geq(f, 0);
                        close(f);
                        cr_assert_eq(mkdirat(fd, "ro", 0500), 0);
                }
                int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                cr_assert_geq(next, 0, "level %d: %m", i);
                close(fd);
                fd = next;
        }
        close(fd);
        struct rlimit lim = { .rlim_cur = 128, .rlim_max = 128 };
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &lim), 0, "%m");
        cr_expect_eq(path_rm_rf(tree, &err), 0, "%s", err.msg);
        cr_expect(!exists(tree));
}

/* Never into a mount below the tree: another filesystem (tmpfs) or a bind mount of this one
 * (the same device: only the mount-root attribute tells it).  Both refused, naming the folder;
 * what is mounted there keeps its content.  In a mount namespace of the test's own. */
static void rm_rf_refuses_mount(bool bind) {
        if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 ||
                mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                tmp_teardown(); /* a skipped test's .fini does not run */
                cr_skip_test("mounting needs host root (uid %u)", (unsigned)geteuid());
        }
        _cleanup_free_ char *tree = strprintf("%s/tree", tmp);
        _cleanup_free_ char *mnt = strprintf("%s/tree/sub/mnt", tmp);
        _cleanup_free_ char *src = strprintf("%s/src", tmp);
        _cleanup_free_ char *kept = strprintf("%s/tree/sub/mnt/kept", tmp);
        nook_error err = {};
        cr_assert_eq(path_mkdir_p(mnt, 0700, &err), 0, "%s", err.msg);
        cr_assert_eq(mkdir(src, 0700), 0);
        if (bind)
                cr_assert_eq(mount(src, mnt, NULL, MS_BIND, NULL), 0, "bind: %m");
        else
                cr_assert_eq(mount("tmpfs", mnt, "tmpfs", 0, "size=1m"), 0, "tmpfs: %m");
        touch(kept);
        cr_expect_eq(path_rm_rf(tree, &err), -NOOK_E_BUSY, "%s", err.msg);
        cr_expect(strstr(err.msg, "'mnt'") && strstr(err.msg, "mount point"), "%s", err.msg);
        cr_expect(exists(kept), "what is mounted there keeps its content");
        /* the top itself a mount point: refused too */
        cr_expect_eq(path_rm_rf(mnt, &err), -NOOK_E_BUSY, "%s", err.msg);
        cr_expect(exists(kept));
        cr_assert_eq(umount2(mnt, MNT_DETACH), 0);
        cr_expect_eq(path_rm_rf(tree, &err), 0, "%s", err.msg);
        cr_expect(!exists(tree));
}

Test(util, rm_rf_refuses_to_enter_another_filesystem, .init = tmp_setup, .fini = tmp_teardown) {
        rm_rf_refuses_mount(false);
}

Test(util, rm_rf_refuses_to_enter_a_bind_mount_of_the_same_filesystem, .init = tmp_setup,
        .fini = tmp_teardown) {
        rm_rf_refuses_mount(true);
}

/* path_open_in_root: tmp/root is the root, tmp/outside a folder beside it that no walk may
 * reach.  fd_is checks the returned fd is the file at path (same device and inode). */
static void fd_is(int fd, const char *path, mode_t type) {
        struct stat a, b;
        cr_assert_eq(fstat(fd, &a), 0);
        cr_assert_eq(lstat(path, &b), 0, "%s: %m", path);
        cr_expect(a.st_dev == b.st_dev && a.st_ino == b.st_ino, "the fd is not '%s'", path);
        cr_expect_eq(a.st_mode & S_IFMT, type, "%s: type %o", path, a.st_mode & S_IFMT);
}

static int walk(const char *rel, bool last_dir, int *ret_fd, nook_error *err) {
        _cleanup_free_ char *root = strprintf("%s/root", tmp);
        _cleanup_close_ int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(rfd, 0, "%s: %m", root);
        return path_open_in_root(rfd, rel, last_dir, ret_fd, err);
}

static void walker_setup(void) {
        tmp_setup();
        _cleanup_free_ char *root = strprintf("%s/root", tmp);
        _cleanup_free_ char *outside = strprintf("%s/outside", tmp);
        _cleanup_free_ char *abs_link = strprintf("%s/root/abs", tmp);
        _cleanup_free_ char *slash_link = strprintf("%s/root/slash", tmp);
        _cleanup_free_ char *up_link = strprintf("%s/root/up", tmp);
        _cleanup_free_ char *dangling = strprintf("%s/root/dangling", tmp);
        _cleanup_free_ char *file = strprintf("%s/root/file", tmp);
        cr_assert_eq(mkdir(root, 0755), 0);
        cr_assert_eq(mkdir(outside, 0755), 0);
        cr_assert_eq(symlink(outside, abs_link), 0); /* absolute, to a real folder outside */
        cr_assert_eq(symlink("/", slash_link), 0);
        cr_assert_eq(symlink("../../../../outside", up_link), 0);
        cr_assert_eq(symlink("/nonexistent-walker/x", dangling), 0);
        touch(file);
        /* where the symlinks lead when resolved inside the root */
        _cleanup_free_ char *twin = strprintf("%s/root%s", tmp, outside);
        _cleanup_free_ char *twin_up = strprintf("%s/root/outside", tmp);
        nook_error err = {};
        cr_assert_eq(path_mkdir_p(twin, 0755, &err), 0, "%s", err.msg);
        cr_assert_eq(mkdir(twin_up, 0755), 0);
}

Test(util, open_in_root_creates_dirs_and_file, .init = walker_setup, .fini = tmp_teardown) {
        _cleanup_free_ char *d = strprintf("%s/root/a/b/c", tmp);
        _cleanup_free_ char *f = strprintf("%s/root/a/b/f", tmp);
        _cleanup_free_ char *root = strprintf("%s/root", tmp);
        _cleanup_free_ char *file = strprintf("%s/root/file", tmp);
        nook_error err = {};
        int fd = -1;
        cr_assert_eq(walk("/a/b/c", true, &fd, &err), 0, "%s", err.msg);
        fd_is(fd, d, S_IFDIR);
        close(fd);
        cr_assert_eq(walk("a/b/f", false, &fd, &err), 0, "%s", err.msg);
        fd_is(fd, f, S_IFREG);
        close(fd);
        /* empty and "." components are skipped; "" and "/" are the root itself */
        cr_assert_eq(walk("//a///./b//c/", true, &fd, &err), 0, "%s", err.msg);
        fd_is(fd, d, S_IFDIR);
        close(fd);
        cr_assert_eq(walk("", true, &fd, &err), 0, "%s", err.msg);
        fd_is(fd, root, S_IFDIR);
        close(fd);
        cr_assert_eq(walk("/", true, &fd, &err), 0, "%s", err.msg);
        fd_is(fd, root, S_IFDIR);
        close(fd);
        /* an existing file is opened as it is (not truncated) */
        cr_assert_eq(walk("/file", false, &fd, &err), 0, "%s", err.msg);
        fd_is(fd, file, S_IFREG);
        close(fd);
        struct stat st;
        cr_expect(stat(file, &st) == 0 && st.st_size == 1);
}

Test(util, open_in_root_stays_in_root, .init = walker_setup, .fini = tmp_teardown) {
        _cleanup_free_ char *outside = strprintf("%s/outside", tmp);
        _cleanup_free_ char *base = strdup(strrchr(tmp, '/') + 1);
        nook_error err = {};
        int fd = -1;
        /* ".." above the root stays at the root */
        cr_assert_eq(walk("/../../../dotdot", true, &fd, &err), 0, "%s", err.msg);
        _cleanup_free_ char *in1 = strprintf("%s/root/dotdot", tmp);
        fd_is(fd, in1, S_IFDIR);
        close(fd);
        _cleanup_free_ char *out1 = strprintf("%s/dotdot", tmp);
        cr_expect(!exists(out1), "'..' created '%s' above the root", out1);
        /* an absolute symlink to a real folder outside: followed inside the root */
        cr_assert_eq(walk("/abs/x", true, &fd, &err), 0, "%s", err.msg);
        _cleanup_free_ char *in2 = strprintf("%s/root%s/x", tmp, outside);
        fd_is(fd, in2, S_IFDIR);
        close(fd);
        _cleanup_free_ char *out2 = strprintf("%s/x", outside);
        cr_expect(!exists(out2), "an absolute symlink led to '%s'", out2);
        /* a symlink to "/" is the root */
        _cleanup_free_ char *name = strprintf("/slash/walker-%s", base);
        cr_assert_eq(walk(name, false, &fd, &err), 0, "%s", err.msg);
        _cleanup_free_ char *in3 = strprintf("%s/root/walker-%s", tmp, base);
        fd_is(fd, in3, S_IFREG);
        close(fd);
        cr_expect(!exists(name + strlen("/slash")), "a symlink to / created '%s' on the host", name + 6);
        /* a relative symlink climbing out: clamped at the root */
        cr_assert_eq(walk("/up/y", true, &fd, &err), 0, "%s", err.msg);
        _cleanup_free_ char *in4 = strprintf("%s/root/outside/y", tmp);
        fd_is(fd, in4, S_IFDIR);
        close(fd);
        _cleanup_free_ char *out4 = strprintf("%s/y", outside);
        cr_expect(!exists(out4), "a relative symlink led to '%s'", out4);
}

/* Every component there already: path_open_in_root takes one lookup of the whole path (issue
 * #17), which must resolve symlinks inside the root as the walk does: a file of that name exists
 * both outside and at the twin inside, and the twin is what comes back. */
Test(util, open_in_root_existing_path_stays_in_root, .init = walker_setup, .fini = tmp_teardown) {
        _cleanup_free_ char *outside = strprintf("%s/outside", tmp);
        _cleanup_free_ char *out_file = strprintf("%s/outside/e", tmp);
        _cleanup_free_ char *in_file = strprintf("%s/root%s/e", tmp, outside);
        _cleanup_free_ char *up_out = strprintf("%s/outside/u", tmp);
        _cleanup_free_ char *up_in = strprintf("%s/root/outside/u", tmp);
        nook_error err = {};
        int fd = -1;
        touch(out_file);
        touch(in_file);
        touch(up_out);
        touch(up_in);
        cr_assert_eq(walk("/abs/e", false, &fd, &err), 0, "%s", err.msg);
        fd_is(fd, in_file, S_IFREG);
        close(fd);
        cr_assert_eq(walk("/up/u", false, &fd, &err), 0, "%s", err.msg);
        fd_is(fd, up_in, S_IFREG);
        close(fd);
        cr_assert_eq(walk("/slash/abs/e", false, &fd, &err), 0, "%s", err.msg);
        fd_is(fd, in_file, S_IFREG);
        close(fd);
        /* ".." above the root of an existing path: the root's own entry */
        cr_assert_eq(walk("/../../file", false, &fd, &err), 0, "%s", err.msg);
        _cleanup_free_ char *file = strprintf("%s/root/file", tmp);
        fd_is(fd, file, S_IFREG);
        close(fd);
}

Test(util, open_in_root_refuses_bad_paths, .init = walker_setup, .fini = tmp_teardown) {
        _cleanup_free_ char *outside = strprintf("%s/outside", tmp);
        nook_error err = {};
        int fd = -1;
        /* a dangling symlink: an error, nothing made where it points (inside or out) */
        cr_expect_eq(walk("/dangling", true, &fd, &err), -NOOK_E_IO);
        cr_expect_eq(err.sys_errno, ENOENT);
        cr_expect(strstr(err.msg, "'dangling'"), "%s", err.msg);
        cr_expect(!exists("/nonexistent-walker"));
        /* through a file */
        cr_expect_eq(walk("/file/sub", true, &fd, &err), -NOOK_E_IO);
        cr_expect_eq(err.sys_errno, ENOTDIR);
        /* a component longer than NAME_MAX: refused (the parent made before it stays) */
        char long_name[NAME_MAX + 32];
        memset(long_name, 'n', sizeof(long_name) - 1);
        long_name[sizeof(long_name) - 1] = 0;
        _cleanup_free_ char *p = strprintf("/ln/%s/z", long_name);
        cr_expect_eq(walk(p, true, &fd, &err), -NOOK_E_IO);
        cr_expect_eq(err.sys_errno, ENAMETOOLONG);
        /* a path of PATH_MAX bytes: INVALID before anything is made */
        char huge[PATH_MAX + 1];
        memset(huge, 'h', sizeof(huge) - 1);
        huge[0] = '/';
        huge[sizeof(huge) - 1] = 0;
        cr_expect_eq(walk(huge, true, &fd, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "too long"), "%s", err.msg);
        /* nothing was made outside */
        DIR *d = opendir(outside);
        cr_assert_not_null(d);
        struct dirent *e;
        size_t n = 0;
        while ((e = readdir(d)))
                n += !streq(e->d_name, ".") && !streq(e->d_name, "..");
        closedir(d);
        cr_expect_eq(n, 0, "something was made in '%s'", outside);
        cr_expect_eq(fd, -1, "no fd on failure");
}

Test(util, mkdir_p_modes_and_conflicts, .init = tmp_setup, .fini = tmp_teardown) {
        _cleanup_free_ char *d = strprintf("%s/x/y/z", tmp);
        _cleanup_free_ char *f = strprintf("%s/file", tmp);
        _cleanup_free_ char *under = strprintf("%s/file/sub", tmp);
        nook_error err = {};
        struct stat sb;

        mode_t old = umask(0);
        cr_expect_eq(path_mkdir_p(d, 0700, &err), 0, "%s", err.msg);
        umask(old);
        cr_expect_eq(stat(d, &sb), 0);
        cr_expect_eq(sb.st_mode & 0777, 0700);
        cr_expect_eq(path_mkdir_p(d, 0700, &err), 0, "existing is fine");
        touch(f);
        cr_expect_eq(path_mkdir_p(f, 0700, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "not a directory"), "%s", err.msg);
        cr_expect_lt(path_mkdir_p(under, 0700, &err), 0);
        cr_expect(strstr(err.msg, under) || strstr(err.msg, f), "%s", err.msg);
}

Test(util, home_default_honours_nook_home) {
        nook_error err = {};
        _cleanup_free_ char *h = NULL;
        cr_assert_eq(setenv("NOOK_HOME", "/srv/nook//", 1), 0);
        cr_expect_eq(path_home_default(&h, &err), 0, "%s", err.msg);
        cr_expect_str_eq(h, "/srv/nook");
        cr_assert_eq(setenv("NOOK_HOME", "relative", 1), 0);
        char *h2 = NULL;
        cr_expect_eq(path_home_default(&h2, &err), -NOOK_E_INVALID);
        cr_expect_null(h2);
        cr_expect(strstr(err.msg, "'relative'"), "%s", err.msg);
        unsetenv("NOOK_HOME");
}

/* ---- tmpdir.c ------------------------------------------------------------------------------ */

static int rm_entry(int dirfd, const char *name, nook_error *err) {
        char p[PATH_MAX];
        (void)snprintf(p, sizeof(p), "/proc/self/fd/%d/%s", dirfd, name);
        return path_rm_rf(p, err);
}

Test(util, tmp_sweep_removes_only_what_no_live_owner_holds) {
        char root[] = "/tmp/nook-unit-tmp.XXXXXX";
        cr_assert_not_null(mkdtemp(root));
        char a[PATH_MAX], b[PATH_MAX], f[PATH_MAX], old[PATH_MAX];
        (void)snprintf(a, sizeof(a), "%s/a-XXXXXX", root);
        (void)snprintf(b, sizeof(b), "%s/b-XXXXXX", root);
        (void)snprintf(f, sizeof(f), "%s/f-XXXXXX", root);
        (void)snprintf(old, sizeof(old), "%s/unlocked", root);
        nook_error err = {};
        int la = -1, lb = -1, lf = -1;
        cr_assert_eq(tmpdir_owned_new(a, &la, &err), 0, "%s", err.msg);
        cr_assert_eq(tmpdir_owned_new(b, &lb, &err), 0, "%s", err.msg);
        cr_assert_eq(tmpfile_owned_new(f, &lf, &err), 0, "%s", err.msg);
        cr_assert_eq(mkdir(old, 0700), 0); /* left by a killed process: no lock */
        /* a: its owner is alive; b and f: their owners are gone (lock closed) */
        safe_close(lb);
        safe_close(lf);
        cr_expect_eq(tmp_sweep(root, rm_entry), 3);
        cr_expect_eq(access(a, F_OK), 0, "a live owner's directory stays");
        cr_expect_neq(access(b, F_OK), 0);
        cr_expect_neq(access(f, F_OK), 0);
        cr_expect_neq(access(old, F_OK), 0);
        safe_close(la);
        cr_expect_eq(tmp_sweep(root, rm_entry), 1);
        cr_expect_eq(tmp_sweep("/nonexistent/nook", rm_entry), 0, "a missing folder is no error");
        cr_expect_eq(rmdir(root), 0);
}

Test(util, fnv1a64_known_values) {
        /* the runtime folder's key and nook-oci's seccomp cache name: the published FNV-1a
         * vectors, so a rewrite cannot rename every existing home's runtime folder */
        cr_expect_eq(str_fnv1a64(""), 0xcbf29ce484222325ull);
        cr_expect_eq(str_fnv1a64("a"), 0xaf63dc4c8601ec8cull);
        cr_expect_eq(str_fnv1a64("foobar"), 0x85944171f73967e8ull);
}

Test(util, utf8_check) {
        size_t off = 99;
        cr_expect(str_is_utf8("", NULL));
        cr_expect(str_is_utf8("plain ascii", NULL));
        cr_expect(str_is_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf", &off));
        cr_expect_eq(off, 99, "a valid string leaves the offset alone");
        /* each: the offset of the first byte that breaks it */
        static const struct {
                const char *s;
                size_t off;
        } bad[] = {
                { "\xff", 0 }, /* never in UTF-8 */
                { "ab\xfe", 2 },
                { "caf\xe9", 4 }, /* Latin-1 e-acute: the lead wants a continuation; the NUL */
                { "caf\xe9x", 4 }, /* ... and gets 'x' */
                { "\x80", 0 }, /* a continuation byte first */
                { "\xc0\xaf", 0 }, /* overlong '/' */
                { "\xc1\xbf", 0 },
                { "\xe0\x80\xaf", 1 }, /* overlong, three bytes */
                { "\xf0\x80\x80\xaf", 1 }, /* overlong, four bytes */
                { "\xed\xa0\x80", 1 }, /* U+D800, a surrogate */
                { "\xf4\x90\x80\x80", 1 }, /* U+110000 */
                { "\xf5\x80\x80\x80", 0 },
                { "\xe2\x82", 2 }, /* cut short */
                { "\xf0\x9f\x98x", 3 },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                off = 99;
                cr_expect(!str_is_utf8(bad[i].s, &off), "bad[%zu] is refused", i);
                cr_expect_eq(off, bad[i].off, "bad[%zu]: offset %zu, expected %zu", i, off, bad[i].off);
        }
}

Test(util, proc_status_code) {
        /* real children: an exit status passes through, a signal is 128 + it, as a shell says */
        int st;
        pid_t p = fork();
        if (p == 0)
                _exit(7);
        cr_assert_eq(waitpid(p, &st, 0), p);
        cr_expect_eq(proc_status_code(st), 7);
        p = fork();
        if (p == 0) {
                (void)raise(SIGTERM);
                _exit(0);
        }
        cr_assert_eq(waitpid(p, &st, 0), p);
        cr_expect_eq(proc_status_code(st), 128 + SIGTERM);
}

/* path_same: by device and inode, so a folder named through a symlink (merged /usr's /lib) is
 * the same folder; another folder, or one that is not there, is not. */
Test(util, path_same_compares_identity_not_spelling) {
        char dir[] = "/tmp/nook-unit-same-XXXXXX", link[PATH_MAX], other[PATH_MAX], gone[PATH_MAX];
        cr_assert_not_null(mkdtemp(dir));
        snprintf(link, sizeof(link), "%s/link", dir);
        snprintf(other, sizeof(other), "%s/other", dir);
        snprintf(gone, sizeof(gone), "%s/gone", dir);
        cr_assert_eq(symlink(dir, link), 0);
        cr_assert_eq(mkdir(other, 0700), 0);
        cr_assert(path_same(dir, dir));
        cr_assert(path_same(link, dir), "a symlink to the folder is the folder");
        cr_assert_not(path_same(other, dir));
        cr_assert_not(path_same(gone, dir), "a path that is not there is never the same");
        unlink(link);
        rmdir(other);
        rmdir(dir);
}
