/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "egress/io.h"

int egress_io_init(egress_io *io, int fd, SSL *ssl, size_t cap) {
        *io = (egress_io){ .fd = fd, .ssl = ssl, .cap = cap };
        io->buf = malloc(cap);
        return io->buf ? 0 : -ENOMEM;
}

void egress_io_done(egress_io *io) {
        if (io->ssl) {
                (void)SSL_shutdown(io->ssl);
                SSL_free(io->ssl);
                io->ssl = NULL;
        }
        if (io->fd >= 0)
                close(io->fd);
        io->fd = -1;
        free(io->buf);
        io->buf = NULL;
        ERR_clear_error();
}

void egress_set_timeouts(int fd, int secs) {
        struct timeval tv = { .tv_sec = secs };
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void egress_set_nodelay(int fd) {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static ssize_t raw_read(egress_io *io, char *dst, size_t n) {
        if (io->ssl) {
                size_t got = 0;
                int r = SSL_read_ex(io->ssl, dst, n, &got);
                if (r == 1)
                        return (ssize_t)got;
                int e = SSL_get_error(io->ssl, r);
                ERR_clear_error();
                if (e == SSL_ERROR_ZERO_RETURN)
                        return 0;
                if (e == SSL_ERROR_SYSCALL && errno == 0)
                        return 0; /* EOF without close_notify: many servers do this */
                return -EIO;
        }
        ssize_t r;
        do
                r = read(io->fd, dst, n);
        while (r < 0 && errno == EINTR);
        return r < 0 ? -errno : r;
}

ssize_t egress_io_fill(egress_io *io) {
        if (io->start > 0 && io->start == io->end)
                io->start = io->end = 0;
        if (io->end == io->cap && io->start > 0) {
                memmove(io->buf, io->buf + io->start, io->end - io->start);
                io->end -= io->start;
                io->start = 0;
        }
        if (io->end == io->cap)
                return -ENOBUFS;
        ssize_t r = raw_read(io, io->buf + io->end, io->cap - io->end);
        if (r > 0)
                io->end += (size_t)r;
        else if (r == 0)
                io->eof = true;
        return r;
}

ssize_t egress_io_read(egress_io *io, char *dst, size_t n) {
        if (io->end > io->start) {
                size_t k = io->end - io->start < n ? io->end - io->start : n;
                memcpy(dst, io->buf + io->start, k);
                io->start += k;
                return (ssize_t)k;
        }
        return raw_read(io, dst, n);
}

void egress_io_consume(egress_io *io, size_t n) {
        io->start += n;
}

static int write_all(egress_io *io, const char *c, size_t n) {
        while (n > 0) {
                if (io->ssl) {
                        size_t put = 0;
                        if (SSL_write_ex(io->ssl, c, n, &put) != 1) {
                                ERR_clear_error();
                                return -EIO;
                        }
                        c += put;
                        n -= put;
                        continue;
                }
                ssize_t r = send(io->fd, c, n, MSG_NOSIGNAL);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return -EIO;
                c += r;
                n -= (size_t)r;
        }
        return 0;
}

int egress_io_put(egress_io *io, const void *p, size_t n) {
        return write_all(io, p, n);
}

int egress_io_flush(egress_io *io) {
        if (!io->bulk)
                return 0;
        if (BIO_flush(SSL_get_wbio(io->ssl)) != 1) {
                ERR_clear_error();
                return -EIO;
        }
        return 0;
}

int egress_io_write(egress_io *io, const void *p, size_t n) {
        int r = write_all(io, p, n);
        return r < 0 ? r : egress_io_flush(io);
}

/* Room for the TLS records of IO_BATCH bytes (each record adds at most a few dozen bytes). */
#define BULK_BIO_BUF (IO_BATCH + 4096)

int egress_io_bulk(egress_io *io) {
        if (!io->ssl || io->bulk)
                return 0;
        BIO *sock = SSL_get_wbio(io->ssl);
        BIO *buf = BIO_new(BIO_f_buffer());
        if (!sock || !buf || BIO_set_write_buffer_size(buf, BULK_BIO_BUF) != 1 || BIO_up_ref(sock) != 1) {
                BIO_free(buf);
                ERR_clear_error();
                return -ENOMEM;
        }
        /* the SSL holds sock twice (read and write side); the write side becomes buf -> sock */
        SSL_set0_wbio(io->ssl, BIO_push(buf, sock));
        SSL_set_read_ahead(io->ssl, 1);
        SSL_set_default_read_buffer_len(io->ssl, BULK_BIO_BUF);
        io->bulk = true;
        return 0;
}

bool egress_io_has_pending(const egress_io *io) {
        return io->end > io->start || (io->ssl && SSL_has_pending(io->ssl));
}

ssize_t egress_io_gather(egress_io *io, size_t max) {
        if (io->end == io->start) {
                ssize_t r = egress_io_fill(io);
                if (r <= 0)
                        return r;
        }
        /* a TLS read returns at most one record (IO_BUF): read on while that fits and the
         * bytes are already here (an error or EOF shows on the next call) */
        while (io->ssl && io->end - io->start + IO_BUF <= max && io->cap - io->end >= IO_BUF &&
                SSL_has_pending(io->ssl))
                if (egress_io_fill(io) <= 0)
                        break;
        return (ssize_t)(io->end - io->start);
}

int egress_io_read_line(egress_io *io, char *dst, size_t max) {
        for (;;) {
                char *nl = memchr(io->buf + io->start, '\n', io->end - io->start);
                if (nl) {
                        size_t n = (size_t)(nl - (io->buf + io->start));
                        if (n == 0 || nl[-1] != '\r' || n > max)
                                return -EBADMSG;
                        memcpy(dst, io->buf + io->start, n - 1);
                        dst[n - 1] = 0;
                        io->start += n + 1;
                        return (int)(n - 1);
                }
                if (io->end - io->start >= max)
                        return -EBADMSG;
                ssize_t r = egress_io_fill(io);
                if (r <= 0)
                        return r == 0 ? -ECONNRESET : (int)r;
        }
}
