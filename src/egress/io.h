/* SPDX-License-Identifier: Apache-2.0 */
/* A blocking byte stream over a socket, optionally TLS, with a read buffer.  Each connection
 * thread owns its streams; timeouts come from SO_RCVTIMEO/SO_SNDTIMEO. */
#pragma once

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define IO_BUF 16384
/* What one relay write gathers at most: four full TLS records, sent by one syscall. */
#define IO_BATCH ((size_t)4 * IO_BUF)

typedef struct egress_io {
        int fd;
        SSL *ssl;
        char *buf; /* IO_BUF + head room for a whole head (HTTP1_HEAD_MAX) */
        size_t cap, start, end;
        bool eof;
        bool bulk; /* egress_io_bulk: TLS read-ahead, records written through a buffer */
} egress_io;

int egress_io_init(egress_io *io, int fd, SSL *ssl, size_t cap);
void egress_io_done(egress_io *io); /* closes fd, frees ssl (after a TLS close_notify) */
/* Reads more into the buffer: > 0 bytes, 0 at EOF, < 0 on error (-ENOBUFS when full). */
ssize_t egress_io_fill(egress_io *io);
/* Takes up to n buffered-or-read bytes: > 0, 0 at EOF, < 0 error. */
ssize_t egress_io_read(egress_io *io, char *dst, size_t n);
/* Writes all of p, then sends what egress_io_put buffered with it. */
int egress_io_write(egress_io *io, const void *p, size_t n);
/* Like egress_io_write, but a bulk stream keeps the bytes until the next egress_io_write or
 * egress_io_flush (or until its buffer is full): small pieces ride with the next big one. */
int egress_io_put(egress_io *io, const void *p, size_t n);
int egress_io_flush(egress_io *io);
/* A TLS stream that relays bodies (the HTTP/1.1 path, after the handshake): read-ahead, so one
 * read syscall takes in several records, and records are gathered in a buffer so that one
 * write syscall sends several (IO_BATCH).  No-op for a plain stream.  Only for streams read and
 * written through egress_io alone: a caller polling the fd itself must ask
 * egress_io_has_pending first. */
int egress_io_bulk(egress_io *io);
/* Bytes already received and not yet taken: in io's buffer, or inside TLS (processed or not). */
bool egress_io_has_pending(const egress_io *io);
/* At least one byte in io's buffer (reading, blocking, only when it is empty), then more while
 * more has already arrived, up to max bytes: > 0 bytes buffered, 0 at EOF, < 0 on error. */
ssize_t egress_io_gather(egress_io *io, size_t max);
void egress_io_consume(egress_io *io, size_t n);
/* A CRLF-terminated line (CRLF not included, NUL-terminated) of at most max-1 bytes. */
int egress_io_read_line(egress_io *io, char *dst, size_t max);
void egress_set_timeouts(int fd, int secs);
/* TCP_NODELAY on a TCP socket of the gateway (either side): every write is already a batch
 * (egress_io_flush), so Nagle's algorithm could only hold a small answer back until the peer's
 * delayed ACK (40 ms); a failure is ignored (the socket still works, only slower). */
void egress_set_nodelay(int fd);
