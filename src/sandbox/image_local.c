/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in "host" image: the host's /usr (and /bin, /sbin, /lib* where they are real
 * directories) bound read-only, over a small generated skeleton with its own /etc: passwd and
 * group with root and nobody, hosts, nsswitch.conf, an empty resolv.conf (the network is off),
 * a profile.  From the host's /etc only what programs need to load and verify TLS is bound:
 * the dynamic linker cache, alternatives and the CA certificates — never shadow, ssh keys or
 * home directories. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "sandbox/image_local.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"

/* Bumped whenever the skeleton changes: a new version is generated beside the old one. */
#define HOST_IMAGE_VERSION "v3"

static const char *const top_dirs[] = { "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32" };
static const char *const etc_entries[] = { "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf",
        "/etc/ld.so.conf.d", "/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates.conf",
        "/etc/localtime", "/etc/os-release", "/etc/mime.types", "/etc/protocols", "/etc/services",
        "/etc/debian_version" };

static const struct {
        const char *path;
        const char *content;
} etc_files[] = {
        { "etc/passwd",
                "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" },
        { "etc/group", "root:x:0:\nnogroup:x:65534:\n" },
        { "etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" },
        { "etc/nsswitch.conf",
                "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n" },
        { "etc/resolv.conf", "# nook: the network is off for this sandbox\n" },
        { "etc/hostname", "nook\n" },
        { "etc/profile",
                "[ -n \"$PATH\" ] || PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
                "export PATH\n"
                "if [ \"$(id -u)\" -eq 0 ]; then PS1='# '; else PS1='$ '; fi\n"
                "for f in /etc/profile.d/*.sh; do [ -r \"$f\" ] && . \"$f\"; done\n"
                "unset f\n" },
};

static const struct {
        const char *path;
        mode_t mode;
} skel_dirs[] = {
        { "etc", 0755 },
        { "etc/ssl", 0755 },
        { "usr", 0755 },
        { "proc", 0555 },
        { "sys", 0555 },
        { "dev", 0755 },
        { "tmp", 01777 },
        { "workspace", 0755 },
        { "root", 0700 },
        { "home", 0755 },
        { "var", 0755 },
        { "var/tmp", 01777 },
        { "run", 0755 },
        { "mnt", 0755 },
        { "opt", 0755 },
        { "srv", 0755 },
};

static int write_file_at(
        int dfd, const char *rel, const char *content, uid_t uid, gid_t gid, nook_error *err) {
        _cleanup_close_ int fd =
                openat(dfd, rel, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s' in the host image", rel);
        int r = fd_write_all(fd, content, strlen(content));
        if (r < 0)
                return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot write '%s' in the host image", rel);
        (void)!fchown(fd, uid, gid);
        return 0;
}

/* Mirrors a host path into the skeleton: a symlink is copied as a symlink (merged /usr hosts
 * have /bin -> usr/bin), a real directory or file becomes a read-only bind. */
static int mirror_entry(
        int dfd, const char *host_path, uid_t uid, gid_t gid, char ***binds, nook_error *err) {
        struct stat st;
        const char *rel = host_path + 1;
        if (lstat(host_path, &st) < 0)
                return 0;
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlink(host_path, target, sizeof(target) - 1);
                if (n <= 0)
                        return 0;
                target[n] = 0;
                if (symlinkat(target, dfd, rel) < 0 && errno != EEXIST)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s' in the host image", rel);
                return 0;
        }
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                return 0;
        /* The bind's mount point, made once here: otherwise every create would make it in the
         * sandbox's writable layer (and every stop delete it). */
        if (S_ISDIR(st.st_mode) ? mkdirat(dfd, rel, 0755) < 0 && errno != EEXIST
                                : mknodat(dfd, rel, S_IFREG | 0644, 0) < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s' in the host image", rel);
        (void)!fchownat(dfd, rel, uid, gid, AT_SYMLINK_NOFOLLOW);
        if (strv_push(binds, host_path) < 0)
                return nook_err_oom(err);
        return 0;
}

static int build_skeleton(const char *dir, uid_t uid, gid_t gid, nook_error *err) {
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_strv_free_ char **ignored = NULL;
        int r;
        if (dfd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", dir);
        for (size_t i = 0; i < ELEMENTSOF(skel_dirs); i++) {
                if (mkdirat(dfd, skel_dirs[i].path, skel_dirs[i].mode) < 0 && errno != EEXIST)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot create '%s' in the host image", skel_dirs[i].path);
                (void)!fchmodat(dfd, skel_dirs[i].path, skel_dirs[i].mode, 0);
                (void)!fchownat(dfd, skel_dirs[i].path, uid, gid, AT_SYMLINK_NOFOLLOW);
        }
        (void)!fchown(dfd, uid, gid);
        for (size_t i = 0; i < ELEMENTSOF(etc_files); i++) {
                r = write_file_at(dfd, etc_files[i].path, etc_files[i].content, uid, gid, err);
                if (r < 0)
                        return r;
        }
        if (symlinkat("../proc/self/mounts", dfd, "etc/mtab") < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create etc/mtab in the host image");
        /* Symlinked top-level dirs and /etc entries are materialised now; binds are listed at
         * each create (the host may have changed). */
        for (size_t i = 0; i < ELEMENTSOF(top_dirs); i++)
                if ((r = mirror_entry(dfd, top_dirs[i], uid, gid, &ignored, err)) < 0)
                        return r;
        for (size_t i = 0; i < ELEMENTSOF(etc_entries); i++)
                if ((r = mirror_entry(dfd, etc_entries[i], uid, gid, &ignored, err)) < 0)
                        return r;
        return 0;
}

static int host_image(
        const char *home, uid_t uid, gid_t gid, char ***lowers, char ***binds, nook_error *err) {
        _cleanup_free_ char *dir = strprintf("%s/images/host/" HOST_IMAGE_VERSION, home);
        _cleanup_free_ char *tmp = NULL;
        int r;

        if (!dir)
                return nook_err_oom(err);
        if (access(dir, F_OK) < 0) {
                /* Build beside and rename: concurrent creates never see half a skeleton. */
                r = path_mkdir_p(home, 0700, err);
                if (r < 0)
                        return r;
                _cleanup_free_ char *parent = strprintf("%s/images/host", home);
                tmp = strprintf("%s/images/host/.tmp-%d", home, (int)getpid());
                if (!parent || !tmp)
                        return nook_err_oom(err);
                if ((r = path_mkdir_p(parent, 0700, err)) < 0)
                        return r;
                (void)path_rm_rf(tmp, err);
                if (mkdir(tmp, 0755) < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", tmp);
                r = build_skeleton(tmp, uid, gid, err);
                if (r < 0) {
                        nook_error ignore;
                        (void)path_rm_rf(tmp, &ignore);
                        return nook_err_wrap(err, "preparing the built-in host image");
                }
                if (rename(tmp, dir) < 0) {
                        nook_error ignore;
                        (void)path_rm_rf(tmp, &ignore); /* another process won the race: fine */
                }
        }
        if (strv_push(lowers, dir) < 0 || strv_push(binds, "/usr") < 0)
                return nook_err_oom(err);
        for (size_t i = 0; i < ELEMENTSOF(top_dirs); i++) {
                struct stat st;
                if (lstat(top_dirs[i], &st) == 0 && S_ISDIR(st.st_mode) && strv_push(binds, top_dirs[i]) < 0)
                        return nook_err_oom(err);
        }
        for (size_t i = 0; i < ELEMENTSOF(etc_entries); i++) {
                struct stat st;
                if (lstat(etc_entries[i], &st) == 0 && (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) &&
                        strv_push(binds, etc_entries[i]) < 0)
                        return nook_err_oom(err);
        }
        return 0;
}

int sb_image_local(const char *home, const char *image, uid_t owner_uid, gid_t owner_gid, char ***ret_lowers,
        char ***ret_ro_binds, nook_error *err) {
        _cleanup_strv_free_ char **lowers = calloc(1, sizeof(char *));
        _cleanup_strv_free_ char **binds = calloc(1, sizeof(char *));
        int r;

        if (!lowers || !binds)
                return nook_err_oom(err);
        if (streq(image, "host"))
                r = host_image(home, owner_uid, owner_gid, &lowers, &binds, err);
        else if (image[0] == '/')
                r = strv_push(&lowers, image) < 0 ? nook_err_oom(err) : 0;
        else
                r = nook_err_set(err, NOOK_E_INVALID, "Unknown local image '%s'", image);
        if (r < 0)
                return r;
        *ret_lowers = TAKE_PTR(lowers);
        *ret_ro_binds = TAKE_PTR(binds);
        return 0;
}
