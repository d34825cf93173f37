/* SPDX-License-Identifier: Apache-2.0 */
/* host_caps: the probe against facts that are stable for a given kernel, and the doctor rows'
 * internal consistency. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/host_caps.h"
#include "isolate/userns.h"
#include "util/macro.h"

static host_caps probe(void) {
        host_caps c;
        nook_error err = {};
        cr_assert_eq(host_caps_probe(&c, &err), 0, "%s", err.msg);
        return c;
}

/* major * 1000 + minor of the running kernel */
static int kernel_version(void) {
        struct utsname u;
        int major = 0, minor = 0;
        cr_assert_eq(uname(&u), 0);
        cr_assert_eq(sscanf(u.release, "%d.%d", &major, &minor), 2);
        return major * 1000 + minor;
}

static long read_long(const char *path) {
        FILE *f = fopen(path, "re");
        long v = -1;
        if (f) {
                if (fscanf(f, "%ld", &v) != 1)
                        v = -1;
                fclose(f);
        }
        return v;
}

Test(host_caps, kernel_and_identity) {
        host_caps c = probe();
        struct utsname u;
        cr_assert_eq(uname(&u), 0);
        cr_assert_str_eq(c.kernel, u.release);
        /* rootful only for real host root: uid 0 inside `unshare -r` counts as rootless */
        cr_assert_eq(c.rootless, !iso_rootful());
        if (geteuid() != 0)
                cr_assert(c.rootless);
        cr_assert_eq(c.kvm, access("/dev/kvm", R_OK | W_OK) == 0);
}

/* Syscalls that every kernel since their release has; a seccomp policy around the test run (a
 * container runtime's clone3 -> ENOSYS) would make these false, which is the honest answer, so
 * NOOK_MUST_WORK is not consulted here. */
Test(host_caps, syscalls_on_this_kernel) {
        host_caps c = probe();
        int v = kernel_version();

        cr_assert(c.seccomp, "seccomp filters exist on every supported kernel");
        if (v >= 5006 && !getenv("NOOK_TEST_NO_OPENAT2"))
                cr_expect(c.openat2, "openat2 missing on %s", c.kernel);
        if (v >= 5003)
                cr_expect(c.clone3, "clone3 missing on %s", c.kernel);
        if (v >= 5012 && !c.rootless)
                cr_expect(c.idmapped_mounts, "mount_setattr missing on %s", c.kernel);
        if (c.rootless)
                cr_expect(!c.idmapped_mounts);
}

Test(host_caps, userns_and_overlay) {
        host_caps c = probe();
        if (read_long("/proc/sys/user/max_user_namespaces") == 0)
                cr_expect(!c.userns);
        if (!c.userns) {
                cr_expect(!c.overlay_in_userns, "overlay in a user namespace needs a user namespace");
                return;
        }
        if (geteuid() == 0)
                cr_expect(c.userns);
        if (kernel_version() >= 5011)
                cr_expect(c.overlay_in_userns, "overlayfs in user namespaces is in Linux >= 5.11 (%s)",
                        c.kernel);
}

Test(host_caps, cgroups_consistent) {
        host_caps c = probe();
        if (c.cgroup_v2)
                return;
        /* without v2 controllers, delegation is judged on the mounted v1 controllers */
        if (c.cgroup_delegated)
                cr_expect(c.cgroup_v1_cpu || c.cgroup_v1_memory || c.cgroup_v1_pids);
}

Test(host_caps, fast) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int i = 0; i < 5; i++)
                (void)probe();
        clock_gettime(CLOCK_MONOTONIC, &b);
        long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
        /* budget 20 ms per probe; generous for sanitizer builds */
        cr_expect_lt(ms, 5 * 100, "5 probes took %ld ms", ms);
}

static void check_rows(const host_caps *c) {
        host_cap_row rows[HOST_CAPS_ROWS_MAX];
        size_t n = host_caps_rows(c, rows, ELEMENTSOF(rows));
        bool all_required_ok = true;

        cr_assert_gt(n, 5);
        cr_assert_leq(n, HOST_CAPS_ROWS_MAX);
        for (size_t i = 0; i < n; i++) {
                cr_expect(!isempty(rows[i].name));
                cr_expect(!isempty(rows[i].detail), "%s: empty detail", rows[i].name);
                if (rows[i].ok)
                        cr_expect_null(rows[i].fix, "%s: ok but has a fix", rows[i].name);
                else
                        cr_expect(!isempty(rows[i].fix), "%s: not ok and no fix", rows[i].name);
                for (size_t j = 0; j < i; j++)
                        cr_expect_str_neq(rows[i].name, rows[j].name);
                if (rows[i].required && !rows[i].ok)
                        all_required_ok = false;
        }
        cr_expect_eq(host_caps_usable(c), all_required_ok);

        cr_expect_str_eq(rows[0].name, "kernel");
        cr_expect(strstr(rows[0].detail, c->kernel), "%s", rows[0].detail);

        size_t required = 0;
        for (size_t i = 0; i < n; i++)
                required += rows[i].required;
        cr_expect_eq(required, 3, "user namespaces, overlayfs in user namespaces, seccomp");

        /* truncation: never more than asked for */
        cr_expect_eq(host_caps_rows(c, rows, 2), 2);
        cr_expect_eq(host_caps_rows(c, rows, 0), 0);
}

Test(host_caps, rows_for_this_host) {
        host_caps c = probe();
        check_rows(&c);
        if (geteuid() == 0 && kernel_version() >= 5011 && c.userns)
                cr_expect(host_caps_usable(&c), "this machine runs sandboxes as root");
}

Test(host_caps, rows_for_a_bare_host) {
        host_caps none = { .rootless = true };
        (void)snprintf(none.kernel, sizeof(none.kernel), "4.19.0");
        check_rows(&none);
        cr_expect(!host_caps_usable(&none));

        host_cap_row rows[HOST_CAPS_ROWS_MAX];
        size_t n = host_caps_rows(&none, rows, ELEMENTSOF(rows));
        bool has_newuidmap = false;
        for (size_t i = 0; i < n; i++)
                has_newuidmap = has_newuidmap || streq(rows[i].name, "newuidmap");
        cr_expect(has_newuidmap, "rootless rows include newuidmap");

        host_caps all = { .rootless = false,
                .userns = true,
                .overlay_in_userns = true,
                .seccomp = true,
                .cgroup_v2 = true,
                .cgroup_delegated = true };
        check_rows(&all);
        cr_expect(host_caps_usable(&all));
}
