/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/outlog.h"
#include "util/fd.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/str.h"

void outlog_init(outlog *l, const char *state_dir) {
        /* not the 64 KiB write buffer (wlen 0 says it is empty): touched, it would stay resident
         * in the supervisor and init for the sandbox's life (docs/design/runtime.md, "Idle memory") */
        memset(l, 0, offsetof(outlog, wbuf));
        l->dir = strdup(state_dir);
        l->fd = -1;
}

static int log_open(outlog *l) {
        _cleanup_free_ char *p = strprintf("%s/output.log", l->dir);
        if (!p)
                return -ENOMEM;
        l->fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        /* a one-shot run's state folder is made when first needed (exitfile.c says why) */
        if (l->fd < 0 && errno == ENOENT && mkdir(l->dir, 0700) == 0)
                l->fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (l->fd < 0)
                return -errno;
        struct stat st;
        l->size = fstat(l->fd, &st) == 0 ? (size_t)st.st_size : 0;
        return 0;
}

/* output.log -> output.log.1 (the old .1 goes), and a fresh output.log. */
static void log_rotate(outlog *l) {
        _cleanup_free_ char *p = strprintf("%s/output.log", l->dir),
                            *p1 = strprintf("%s/output.log.1", l->dir);
        l->fd = safe_close(l->fd);
        if (p && p1 && rename(p, p1) < 0)
                log_debug("rotating the output log: %s, ignoring", strerror(errno));
        (void)log_open(l);
}

/* Writes the batched records: whole records only, so a reader never sees half of one.  A file
 * that would pass OUTLOG_MAX_BYTES is rotated first. */
static void log_flush(outlog *l) {
        if (l->wlen == 0)
                return;
        if (l->fd < 0)
                (void)log_open(l);
        if (l->fd >= 0 && l->size > 0 && l->size + l->wlen > OUTLOG_MAX_BYTES)
                log_rotate(l);
        if (l->fd >= 0 && fd_write_all(l->fd, l->wbuf, l->wlen) >= 0)
                l->size += l->wlen;
        l->wlen = 0;
}

/* The time of what one read() brought: every record of it carries this one. */
static void log_stamp(outlog *l) {
        struct timespec ts;
        struct tm tm;
        (void)clock_gettime(CLOCK_REALTIME, &ts);
        (void)gmtime_r(&ts.tv_sec, &tm);
        size_t h = strftime(l->stamp, sizeof(l->stamp), "%Y-%m-%dT%H:%M:%S", &tm);
        (void)snprintf(l->stamp + h, sizeof(l->stamp) - h, ".%09ldZ", ts.tv_nsec);
}

static void log_record(outlog *l, bool is_err, bool full, const char *data, size_t len) {
        char head[64];
        int hl = snprintf(
                head, sizeof(head), "%s %s %c ", l->stamp, is_err ? "stderr" : "stdout", full ? 'F' : 'P');
        if (hl < 0 || (size_t)hl >= sizeof(head))
                return;
        size_t need = (size_t)hl + len + 1; /* <= OUTLOG_WBUF: len is at most OUTLOG_MAX_LINE */
        if (l->wlen + need > sizeof(l->wbuf))
                log_flush(l);
        memcpy(l->wbuf + l->wlen, head, (size_t)hl);
        memcpy(l->wbuf + l->wlen + hl, data, len);
        l->wbuf[l->wlen + need - 1] = '\n';
        l->wlen += need;
}

int outlog_open_pipes(outlog *l, int *ret_out, int *ret_err) {
        size_t slot[2], k = 0;
        for (size_t i = 0; i < OUTLOG_MAX_STREAMS && k < 2; i++)
                if (!l->streams[i])
                        slot[k++] = i;
        if (k < 2)
                return -EMFILE;
        _cleanup_free_ outlog_stream *so = calloc(1, sizeof(outlog_stream));
        _cleanup_free_ outlog_stream *se = calloc(1, sizeof(outlog_stream));
        if (!so || !se)
                return -ENOMEM;
        int po[2], pe[2];
        if (pipe2(po, O_CLOEXEC) < 0)
                return -errno;
        if (pipe2(pe, O_CLOEXEC) < 0) {
                int e = errno;
                safe_close(po[0]);
                safe_close(po[1]);
                return -e;
        }
        (void)fcntl(po[0], F_SETFL, O_NONBLOCK);
        (void)fcntl(pe[0], F_SETFL, O_NONBLOCK);
        so->fd = po[0];
        se->fd = pe[0];
        se->is_err = true;
        l->streams[slot[0]] = TAKE_PTR(so);
        l->streams[slot[1]] = TAKE_PTR(se);
        *ret_out = po[1];
        *ret_err = pe[1];
        return 0;
}

size_t outlog_pollfds(outlog *l, struct pollfd *pfd) {
        size_t n = 0;
        for (size_t i = 0; i < OUTLOG_MAX_STREAMS; i++)
                if (l->streams[i])
                        pfd[n++] = (struct pollfd){ .fd = l->streams[i]->fd, .events = POLLIN };
        return n;
}

/* Splits what a stream holds into records; at_end also writes the unfinished rest. */
static void stream_flush(outlog *l, outlog_stream *s, bool at_end) {
        size_t start = 0;
        for (size_t i = 0; i < s->len; i++)
                if (s->buf[i] == '\n') {
                        log_record(l, s->is_err, true, s->buf + start, i - start);
                        start = i + 1;
                }
        if (start < s->len && (at_end || (start == 0 && s->len == sizeof(s->buf)))) {
                /* a stream that ended closes its last line ('F'): another command's records
                 * that follow never continue it */
                log_record(l, s->is_err, at_end, s->buf + start, s->len - start);
                start = s->len;
        }
        memmove(s->buf, s->buf + start, s->len - start);
        s->len -= start;
}

/* Returns false once the stream has ended (its slot is freed).  Reads at most 4 buffers per
 * call, so a command that writes without pause cannot keep the supervisor from its other work
 * (the control socket, deadlines): the rest waits in the pipe for the next turn of the loop. */
static bool stream_read_some(outlog *l, size_t slot) {
        outlog_stream *s = l->streams[slot];
        for (int turns = 0; turns < 4; turns++) {
                ssize_t k = read(s->fd, s->buf + s->len, sizeof(s->buf) - s->len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno == EAGAIN)
                        return true;
                if (k <= 0) {
                        log_stamp(l);
                        stream_flush(l, s, true);
                        safe_close(s->fd);
                        free(s);
                        l->streams[slot] = NULL;
                        return false;
                }
                log_stamp(l);
                s->len += (size_t)k;
                stream_flush(l, s, false);
        }
        return true;
}

static bool stream_read(outlog *l, size_t slot) {
        bool open = stream_read_some(l, slot);
        log_flush(l);
        return open;
}

void outlog_dispatch(outlog *l, const struct pollfd *pfd, size_t n) {
        /* by fd: streams may have come and gone since the poll (a stale event on a reused fd
         * only reads EAGAIN) */
        for (size_t j = 0; j < n; j++) {
                if (!(pfd[j].revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;
                for (size_t i = 0; i < OUTLOG_MAX_STREAMS; i++)
                        if (l->streams[i] && l->streams[i]->fd == pfd[j].fd) {
                                (void)stream_read(l, i);
                                break;
                        }
        }
}

void outlog_done(outlog *l) {
        for (size_t i = 0; i < OUTLOG_MAX_STREAMS; i++)
                if (l->streams[i]) {
                        /* the sandbox is gone: what is in the pipe is all there will be */
                        (void)fcntl(l->streams[i]->fd, F_SETFL, O_NONBLOCK);
                        if (stream_read(l, i)) {
                                log_stamp(l);
                                stream_flush(l, l->streams[i], true);
                                log_flush(l);
                                safe_close(l->streams[i]->fd);
                                free(l->streams[i]);
                                l->streams[i] = NULL;
                        }
                }
        l->fd = safe_close(l->fd);
        free(l->dir);
        l->dir = NULL;
}
