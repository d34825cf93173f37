/* SPDX-License-Identifier: Apache-2.0 */
/* isolate/idmap.c: the id-mapping user namespaces of a rootful create (iso_idmap_userns), checked
 * by what they are for: an idmapped clone of a real directory shows each file's owner through
 * the namespace's map.  Also: no child, zombie or descriptor is left behind, over many rounds.
 * Rootful only (host root with idmapped mounts on /var/tmp's filesystem): as a user or inside
 * `unshare -r` there is nothing to test, and the tests say so. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/idmap.h"
#include "isolate/userns.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"

#define BASE (ISO_IDPOOL_FIRST + 7 * ISO_ID_RANGE) /* a pool slot no test sandbox needs */
#define OWNER 4242u /* a workspace owner other than root */

static char dir[] = "/var/tmp/nook-unit-idmap.XXXXXX";
static bool made; /* dir was created by setup (mkdtemp's name may itself hold an 'X') */

/* NULL when this host can idmap on /var/tmp, else why not. */
static const char *no_idmap(void) {
        const char *why = NULL;
        if (!iso_rootful())
                return "not host root (a user, or root inside a user namespace): no idmapped mounts";
        if (!iso_idmap_supported("/var/tmp", &why))
                return why;
        return NULL;
}

static void need_idmap(void) {
        const char *why = no_idmap();
        if (why)
                cr_skip_test("no idmapped mounts on /var/tmp here: %s", why);
}

static void touch_owned(const char *name, uid_t uid, gid_t gid) {
        _cleanup_free_ char *p = strprintf("%s/%s", dir, name);
        cr_assert_not_null(p);
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0, "create %s: %s", p, strerror(errno));
        cr_assert_eq(fchown(fd, uid, gid), 0, "chown %s: %s", p, strerror(errno));
}

static void setup(void) {
        if (no_idmap())
                return; /* the test skips, saying why */
        cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
        made = true;
        /* searchable by all: through a map that leaves its owner (root) out, root's capabilities
         * do not apply to it */
        cr_assert_eq(chmod(dir, 0755), 0);
        touch_owned("root", 0, 0);
        touch_owned("layer5", ISO_ROOTFUL_ID_BASE + 5, ISO_ROOTFUL_ID_BASE + 5);
        touch_owned("owner", OWNER, OWNER);
}

static void teardown(void) {
        nook_error err;
        if (made)
                (void)path_rm_rf(dir, &err);
}

static size_t count_fds(void) {
        size_t n = 0;
        DIR *d = opendir("/proc/self/fd");
        cr_assert_not_null(d);
        for (struct dirent *de; (de = readdir(d));)
                n += de->d_name[0] != '.';
        closedir(d);
        return n;
}

/* The owner of dir/name as an idmapped clone of dir through userns fd ns shows it. */
static void expect_owner(int ns, const char *name, uid_t uid, gid_t gid) {
        _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(dfd, 0);
        _cleanup_close_ int tree = -1;
        nook_error err = { 0 };
        cr_assert_eq(iso_idmap_clone(dfd, ns, /* readonly= */ true, /* recursive= */ false, &tree, &err), 0,
                "%s", err.msg);
        struct stat st;
        cr_assert_eq(fstatat(tree, name, &st, AT_SYMLINK_NOFOLLOW), 0, "stat %s: %s", name, strerror(errno));
        cr_expect_eq(st.st_uid, uid, "%s: uid %u through the idmap, expected %u", name, (unsigned)st.st_uid,
                (unsigned)uid);
        cr_expect_eq(st.st_gid, gid, "%s: gid %u through the idmap, expected %u", name, (unsigned)st.st_gid,
                (unsigned)gid);
}

static const iso_idmap_spec specs[3] = {
        { ISO_ROOTFUL_ID_BASE, ISO_ROOTFUL_ID_BASE, BASE, ISO_ID_RANGE }, /* layers */
        { 0, 0, BASE, ISO_ID_RANGE }, /* workspace, volumes */
        { OWNER, OWNER, BASE, 1 }, /* a workspace owner */
};

Test(idmap, maps_show_through_idmapped_mounts, .init = setup, .fini = teardown) {
        need_idmap();
        int ns[3] = { -1, -1, -1 };
        nook_error err = { 0 };
        cr_assert_eq(iso_idmap_userns(specs, 3, ns, &err), 0, "%s", err.msg);
        for (size_t i = 0; i < 3; i++)
                cr_expect_eq(ioctl(ns[i], NS_GET_NSTYPE), CLONE_NEWUSER, "fd %zu is a user namespace", i);
        const uid_t overflow = 65534;
        /* layers: canonical id c + x shows as BASE + x, the rest is unmapped */
        expect_owner(ns[0], "layer5", BASE + 5, BASE + 5);
        expect_owner(ns[0], "root", overflow, overflow);
        /* workspace: host id x shows as BASE + x */
        expect_owner(ns[1], "root", BASE, BASE);
        expect_owner(ns[1], "owner", BASE + OWNER, BASE + OWNER);
        /* a workspace owner alone: its files are the guest root's */
        expect_owner(ns[2], "owner", BASE, BASE);
        expect_owner(ns[2], "root", overflow, overflow);
        for (size_t i = 0; i < 3; i++)
                safe_close(ns[i]);
}

Test(idmap, nothing_left_behind, .init = setup, .fini = teardown) {
        need_idmap();
        size_t fds_before = count_fds();
        for (int round = 0; round < 100; round++) {
                int ns[3] = { -1, -1, -1 };
                nook_error err = { 0 };
                size_t n = 2 + (size_t)(round % 2);
                cr_assert_eq(iso_idmap_userns(specs, n, ns, &err), 0, "round %d: %s", round, err.msg);
                if (n == 2)
                        cr_assert_eq(ns[2], -1, "only n descriptors are written");
                for (size_t i = 0; i < n; i++)
                        safe_close(ns[i]);
        }
        /* every child was reaped: none left, not even a zombie */
        cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1, "a child of iso_idmap_userns is left");
        cr_expect_eq(errno, ECHILD);
        cr_expect_eq(count_fds(), fds_before, "descriptors leaked: %zu before, %zu after", fds_before,
                count_fds());
}

/* A map the kernel refuses (a range past the top of the id space) fails with a clear error and
 * leaves nothing: no descriptor, no child. */
Test(idmap, refused_map_leaves_nothing, .init = setup, .fini = teardown) {
        need_idmap();
        static const iso_idmap_spec bad[2] = {
                { 0, 0, BASE, ISO_ID_RANGE },
                { 0, 0, 4294967295u - 10, ISO_ID_RANGE },
        };
        size_t fds_before = count_fds();
        int ns[2] = { -1, -1 };
        nook_error err = { 0 };
        int r = iso_idmap_userns(bad, 2, ns, &err);
        cr_expect_lt(r, 0, "a map past the id space is refused");
        cr_expect(strstr(err.msg, "uid_map") != NULL, "the error names the map: %s", err.msg);
        cr_expect_eq(ns[0], -1, "no descriptor handed out on failure");
        cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1, "a child of iso_idmap_userns is left");
        cr_expect_eq(count_fds(), fds_before, "descriptors leaked on failure");
}
