/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nook.h"
#include "error.h"
#include "fd.h"
#include "macro.h"

int fd_write_all(int fd, const void *buf, size_t len) {
        const char *p = buf;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

static off_t off_min(off_t a, off_t b) {
        return a < b ? a : b;
}

/* [off, off + len) of in to the same offset of out. */
static int copy_range(int in, int out, off_t off, off_t len, bool *cfr) {
        off_t oin = off, oout = off;
        while (len > 0 && *cfr) {
                ssize_t k = copy_file_range(in, &oin, out, &oout, (size_t)off_min(len, (off_t)1 << 30), 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && (errno == ENOSYS || errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP)) {
                        *cfr = false; /* COMPAT: a filesystem without it; pread/pwrite from here */
                        break;
                }
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return 0; /* it shrank under us */
                len -= k;
        }
        /* out's own offset is ours (copy_file_range above moved only oin/oout) */
        if (len > 0 && lseek(out, oout, SEEK_SET) < 0)
                return -errno;
        char buf[65536];
        while (len > 0) {
                ssize_t k = pread(in, buf, (size_t)off_min(len, (off_t)sizeof(buf)), oin);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return 0;
                int r = fd_write_all(out, buf, (size_t)k);
                if (r < 0)
                        return r;
                oin += k;
                len -= k;
        }
        return 0;
}

int fd_next_data(int fd, off_t pos, off_t end, off_t *ret_data, off_t *ret_end) {
        if (pos >= end)
                return 0;
        off_t data = lseek(fd, pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
                return 0; /* a hole to the end */
        if (data < 0 && (errno == EINVAL || errno == EOPNOTSUPP)) {
                *ret_data = pos;
                *ret_end = end;
                return 1;
        }
        if (data < 0)
                return -errno;
        if (data >= end)
                return 0;
        off_t hole = lseek(fd, data, SEEK_HOLE);
        if (hole < 0)
                return -errno;
        *ret_data = data;
        *ret_end = off_min(hole, end); /* it grew: up to the size we started from */
        return 1;
}

int fd_copy_sparse(int in, int out, bool *cfr) {
        bool cfr_local = true;
        if (!cfr)
                cfr = &cfr_local;
        struct stat st;
        if (fstat(in, &st) < 0)
                return -errno;
        off_t pos = 0, end = st.st_size, data = 0, data_end = 0;
        int r;
        while ((r = fd_next_data(in, pos, end, &data, &data_end)) > 0) {
                if ((r = copy_range(in, out, data, data_end - data, cfr)) < 0)
                        return r;
                pos = data_end;
        }
        if (r < 0)
                return r;
        /* the size as it is now: holes at the end stay holes, a file that grew is cut where we
         * read it (what we copied is what there was) */
        if (fstat(in, &st) < 0)
                return -errno;
        return ftruncate(out, off_min(st.st_size, end)) < 0 ? -errno : 0;
}

ssize_t fd_read_all(int fd, void *buf, size_t len) {
        char *p = buf;
        size_t done = 0;
        while (done < len) {
                ssize_t n = read(fd, p + done, len - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                done += (size_t)n;
        }
        return (ssize_t)done;
}

int fd_read_to_end(int fd, size_t max, char **ret_data, size_t *ret_len, nook_error *err) {
        size_t cap = 4096, len = 0;
        _cleanup_free_ char *buf = malloc(cap + 1);
        if (!buf)
                return nook_err_oom(err);
        for (;;) {
                if (len == cap) {
                        if (cap > max)
                                return nook_err_set(err, NOOK_E_INVALID,
                                        "File is larger than the limit of %zu bytes", max);
                        size_t ncap = cap * 2;
                        char *nb = realloc(buf, ncap + 1);
                        if (!nb)
                                return nook_err_oom(err);
                        buf = nb;
                        cap = ncap;
                }
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read");
                }
                if (n == 0)
                        break;
                len += (size_t)n;
                if (len > max)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "File is larger than the limit of %zu bytes", max);
        }
        buf[len] = 0;
        *ret_data = TAKE_PTR(buf);
        if (ret_len)
                *ret_len = len;
        return 0;
}

int fd_dup_cloexec(int fd) {
        int r = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        return r < 0 ? -errno : r;
}

int fd_set_nonblock(int fd, bool on) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0)
                return -errno;
        int nfl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
        if (nfl != fl && fcntl(fd, F_SETFL, nfl) < 0)
                return -errno;
        return 0;
}

int fd_set_cloexec(int fd, bool on) {
        int fl = fcntl(fd, F_GETFD);
        if (fl < 0)
                return -errno;
        int nfl = on ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC);
        if (nfl != fl && fcntl(fd, F_SETFD, nfl) < 0)
                return -errno;
        return 0;
}

int fd_move_to(int fd, int target) {
        if (fd == target)
                return fd_set_cloexec(fd, false);
        if (dup2(fd, target) < 0)
                return -errno;
        return 0;
}

static int cmp_int(const void *a, const void *b) {
        int x = *(const int *)a, y = *(const int *)b;
        return (x > y) - (x < y);
}

int fd_close_all_except(int lowest, const int *keep, size_t n_keep) {
        int sorted[16];
        size_t n = 0;
        for (size_t i = 0; i < n_keep && n < ELEMENTSOF(sorted); i++)
                if (keep[i] >= lowest)
                        sorted[n++] = keep[i];
        qsort(sorted, n, sizeof(int), cmp_int);
        unsigned int from = (unsigned int)lowest;
        for (size_t i = 0; i <= n; i++) {
                unsigned int to = i < n ? (unsigned int)sorted[i] - 1 : UINT_MAX;
                if (i < n && (unsigned int)sorted[i] < from) /* duplicate */
                        continue;
                if (to >= from && syscall(SYS_close_range, from, to, 0) < 0) {
                        /* COMPAT(kernel < 5.9): close_range missing, close one by one */
                        for (unsigned int fd = from; fd <= to && fd < 65536; fd++)
                                (void)close((int)fd);
                }
                if (i < n)
                        from = (unsigned int)sorted[i] + 1;
        }
        return 0;
}

int fd_send_with_fds(int sock, const void *buf, size_t len, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * 8)];
        } control;
        struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > 8)
                return -E2BIG;
        memset(&control, 0, sizeof(control));
        if (n_fds > 0) {
                msg.msg_control = &control;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        for (;;) {
                ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if ((size_t)n != len)
                        return -EMSGSIZE;
                return 0;
        }
}

ssize_t fd_recv_with_fds(int sock, void *buf, size_t len, int *ret_fds, size_t max_fds, size_t *ret_n_fds) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * 8)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = len };
        struct msghdr msg = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control)
        };
        ssize_t n;
        size_t got = 0;

        for (size_t i = 0; i < max_fds; i++)
                ret_fds[i] = -1;
        do
                n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int fds[8];
                memcpy(fds, CMSG_DATA(c), sizeof(int) * (k > 8 ? 8 : k));
                for (size_t i = 0; i < k && i < 8; i++) {
                        if (got < max_fds)
                                ret_fds[got++] = fds[i];
                        else
                                (void)close(fds[i]);
                }
        }
        if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
                for (size_t i = 0; i < got; i++)
                        ret_fds[i] = safe_close(ret_fds[i]);
                return -EMSGSIZE;
        }
        if (ret_n_fds)
                *ret_n_fds = got;
        return n;
}
