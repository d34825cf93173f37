/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's output log: what detached commands (exec -d, run -d) print on stdout and stderr,
 * read from pipes by the supervisor and kept in <state>/output.log, one record per line in the
 * CRI container log format (as kubelet writes it):
 *
 *     2026-12-03T03:39:44.123456789Z stdout F the line, without its newline
 *
 * "F" ends a line, "P" is a piece of a longer one (over OUTLOG_MAX_LINE bytes, or the last bytes
 * before the stream ended without a newline).  Bounded: past OUTLOG_MAX_BYTES the file becomes
 * output.log.1 (the previous .1 is dropped), so a sandbox keeps at most twice that.  The content
 * is the guest's, byte for byte except the newlines that end records: readers treat it as
 * hostile (src/sandbox/logs.c). */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#define OUTLOG_MAX_BYTES ((size_t)1024 * 1024)
#define OUTLOG_MAX_LINE 16384
#define OUTLOG_MAX_STREAMS 128

typedef struct outlog_stream {
        int fd; /* read end of the pipe; -1: free slot */
        bool is_err;
        size_t len;
        char buf[OUTLOG_MAX_LINE];
} outlog_stream;

typedef struct outlog {
        char *dir; /* the state folder */
        int fd; /* output.log, opened on first record */
        size_t size;
        outlog_stream *streams[OUTLOG_MAX_STREAMS];
        char stamp[40]; /* the time of the read being recorded */
        size_t wlen;
        char wbuf[OUTLOG_MAX_LINE * 4]; /* records batched into one write */
} outlog;

void outlog_init(outlog *l, const char *state_dir);
/* Makes two pipes for one command: *ret_out and *ret_err are the write ends to give it (the
 * caller closes them once passed on).  Returns 0 or -errno (-EMFILE: too many streams). */
int outlog_open_pipes(outlog *l, int *ret_out, int *ret_err);
/* Adds the streams' read ends to pfd; returns how many. */
size_t outlog_pollfds(outlog *l, struct pollfd *pfd);
/* Reads what is ready on the streams whose pollfds (from outlog_pollfds) have events. */
void outlog_dispatch(outlog *l, const struct pollfd *pfd, size_t n);
/* Reads every stream to its end (the sandbox is gone) and closes everything. */
void outlog_done(outlog *l);
