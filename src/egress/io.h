/* SPDX-License-Identifier: Apache-2.0 */
/* A blocking byte stream over a socket, optionally TLS, with a read buffer.  Each connection
 * thread owns its streams; timeouts come from SO_RCVTIMEO/SO_SNDTIMEO. */
#pragma once

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define IO_BUF 16384

typedef struct egress_io {
        int fd;
        SSL *ssl;
        char *buf; /* IO_BUF + head room for a whole head (HTTP1_HEAD_MAX) */
        size_t cap, start, end;
        bool eof;
} egress_io;

int egress_io_init(egress_io *io, int fd, SSL *ssl, size_t cap);
void egress_io_done(egress_io *io); /* closes fd, frees ssl (after a TLS close_notify) */
/* Reads more into the buffer: > 0 bytes, 0 at EOF, < 0 on error (-ENOBUFS when full). */
ssize_t egress_io_fill(egress_io *io);
/* Takes up to n buffered-or-read bytes: > 0, 0 at EOF, < 0 error. */
ssize_t egress_io_read(egress_io *io, char *dst, size_t n);
int egress_io_write(egress_io *io, const void *p, size_t n);
void egress_io_consume(egress_io *io, size_t n);
/* A CRLF-terminated line (CRLF not included, NUL-terminated) of at most max-1 bytes. */
int egress_io_read_line(egress_io *io, char *dst, size_t max);
void egress_set_timeouts(int fd, int secs);
