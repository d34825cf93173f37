/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "util/error.h"
#include "util/str.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/tmpdir.h"

/* Whether the object fd names is still linked where it was made (a sweeper may have removed it
 * between its creation and our lock: it locks, finds no owner, removes, unlocks). */
static bool still_linked(int fd) {
        struct stat st;
        return fstat(fd, &st) == 0 && st.st_nlink > 0;
}

static int lock_fd(int fd) {
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

/* Makes the directory (is_dir) or file named by template (mkdtemp/mkostemp XXXXXX), opens and
 * locks it, and retries when a sweeper removed it before the lock was ours. */
static int owned_new(char *template, bool is_dir, int *ret_fd, nook_error *err) {
        const char *what = is_dir ? "directory" : "file";
        size_t len = strlen(template);
        _cleanup_free_ char *orig = strdup(template);
        if (!orig)
                return nook_err_oom(err);
        for (int tries = 0; tries < 16; tries++) {
                memcpy(template, orig, len + 1);
                _cleanup_close_ int fd = -1;
                if (is_dir) {
                        if (!mkdtemp(template))
                                return nook_err_errno(
                                        err, NOOK_E_IO, "Cannot create the temporary directory '%s'", orig);
                        fd = open(template, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                        if (fd < 0)
                                continue; /* swept before we could open it */
                } else {
                        fd = mkostemp(template, O_CLOEXEC);
                        if (fd < 0)
                                return nook_err_errno(
                                        err, NOOK_E_IO, "Cannot create the temporary file '%s'", orig);
                }
                int r = lock_fd(fd);
                if (r < 0)
                        return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot lock '%s'", template);
                if (!still_linked(fd))
                        continue;
                *ret_fd = TAKE_FD(fd);
                return 0;
        }
        return nook_err_set(
                err, NOOK_E_IO, "Cannot keep a temporary %s '%s': removed as soon as made", what, orig);
}

int tmpdir_owned_new(char *template, int *ret_lock, nook_error *err) {
        return owned_new(template, /* is_dir= */ true, ret_lock, err);
}

int tmpfile_owned_new(char *template, int *ret_fd, nook_error *err) {
        return owned_new(template, /* is_dir= */ false, ret_fd, err);
}

int tmp_sweep(const char *dir, tmp_remove_fn rm) {
        return tmp_sweep_prefix(dir, NULL, rm);
}

int tmp_sweep_prefix(const char *dir, const char *prefix, tmp_remove_fn rm) {
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dfd < 0)
                return 0;
        return tmp_sweep_at(dfd, prefix, rm);
}

int tmp_sweep_at(int dirfd, const char *prefix, tmp_remove_fn rm) {
        /* dirfd may be O_PATH (no getdents): reopen it for reading */
        _cleanup_close_ int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return 0;
        int lfd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
        if (!d) {
                safe_close(lfd);
                return 0;
        }
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, "..") ||
                        (prefix && !startswith(de->d_name, prefix)))
                        continue;
                _cleanup_close_ int fd =
                        openat(dfd, de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
                if (fd < 0)
                        continue;
                /* Held by a live owner: not ours to touch.  Held by us now: its owner is gone (a lock
                 * dies with the last fd of its holder), and we keep it while removing. */
                if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                        continue;
                nook_error ignore;
                if (rm(dfd, de->d_name, &ignore) >= 0)
                        n++;
        }
        closedir(d);
        return n;
}
