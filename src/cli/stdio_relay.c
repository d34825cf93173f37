/* SPDX-License-Identifier: Apache-2.0 */
/* The relays of stdio_relay.h: one per stdio descriptor the guest may not hold, each a 64 KiB
 * buffer between our descriptor and our end of its pipe.  Our ends are non-blocking; our own
 * descriptors keep their mode (their file description is shared with the shell that started us)
 * and are read or written only once poll said they are ready. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cli/stdio_relay.h"
#include "util/macro.h"

#define RELAY_BUF 65536
/* What stdio_relay_finish relays after the command's end: what it wrote is in the pipe already
 * (a pipe holds 64 KiB by default); a background process writing on gets no more than this. */
#define RELAY_FINISH_MAX ((size_t)4 << 20)

typedef struct relay {
        int from, to; /* read from, write to: our descriptor and our end of the pipe */
        int ours; /* our end of the pipe (from for an output, to for the input) */
        int guest_end; /* the end the command gets, until the request took it */
        bool input; /* our descriptor -> the command */
        bool eof; /* nothing more comes from `from` (or `to` is gone) */
        int slot; /* its index in the last stdio_relay_pollfds, or -1 */
        size_t len, off; /* buf[off, len): read, not yet written */
        char buf[RELAY_BUF];
} relay;

static relay relays[STDIO_RELAY_MAX];
static size_t n_relays;

/* A pipe, a socket or /dev/null: nothing more to do with it than the command's own I/O. */
static bool guest_may_hold(int fd) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return false;
        if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
                return true;
        return S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
}

int stdio_guest_fd(int fd, bool to_guest) {
        if (fd < 0 || guest_may_hold(fd))
                return fd;
        int p[2];
        if (n_relays == STDIO_RELAY_MAX || pipe2(p, O_CLOEXEC) < 0)
                return -1;
        int ours = to_guest ? p[1] : p[0], theirs = to_guest ? p[0] : p[1];
        (void)fcntl(ours, F_SETFL, O_NONBLOCK); /* a pipe's new file description: nobody else's */
        if (to_guest)
                (void)signal(SIGPIPE, SIG_IGN); /* a command that closes its stdin: EPIPE, not death */
        relay *r = &relays[n_relays++];
        *r = (relay){ .from = to_guest ? fd : ours,
                .to = to_guest ? ours : fd,
                .ours = ours,
                .guest_end = theirs,
                .input = to_guest,
                .slot = -1 };
        return theirs;
}

void stdio_relay_sent(void) {
        for (size_t i = 0; i < n_relays; i++)
                relays[i].guest_end = safe_close(relays[i].guest_end);
}

/* No more for r: the command's input ends (it reads EOF), or its output's writers get EPIPE. */
static void relay_close(relay *r) {
        r->eof = true;
        r->len = r->off = 0;
        r->ours = safe_close(r->ours);
}

size_t stdio_relay_pollfds(struct pollfd *p) {
        size_t n = 0;
        for (size_t i = 0; i < n_relays; i++) {
                relay *r = &relays[i];
                r->slot = -1;
                if (r->ours < 0 || (r->eof && r->len == 0))
                        continue;
                r->slot = (int)n;
                p[n++] = r->len > 0 ? (struct pollfd){ .fd = r->to, .events = POLLOUT }
                                    : (struct pollfd){ .fd = r->from, .events = POLLIN };
        }
        return n;
}

/* Writes what r holds to `to`: as far as it takes it now, or (wait) all of it, however long a
 * terminal takes.  false when `to` is gone. */
static bool relay_write(relay *r, bool wait) {
        while (r->off < r->len) {
                ssize_t m = write(r->to, r->buf + r->off, r->len - r->off);
                if (m < 0 && errno == EINTR)
                        continue;
                if (m < 0 && errno == EAGAIN && wait) {
                        struct pollfd p = { .fd = r->to, .events = POLLOUT };
                        (void)poll(&p, 1, -1);
                        continue;
                }
                if (m < 0)
                        return errno == EAGAIN;
                r->off += (size_t)m;
        }
        r->len = r->off = 0;
        return true;
}

/* Reads once from `from` into r's empty buffer: 1 data, 0 nothing now, -1 the end. */
static int relay_read(relay *r) {
        ssize_t k = read(r->from, r->buf, sizeof(r->buf));
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (k <= 0)
                return -1;
        r->len = (size_t)k;
        r->off = 0;
        return 1;
}

static void relay_step(relay *r, short revents) {
        if (r->len == 0 && (revents & (POLLIN | POLLHUP | POLLERR))) {
                int k = relay_read(r);
                if (k < 0) {
                        r->eof = true;
                        if (r->input)
                                relay_close(r);
                        return;
                }
        }
        if (r->len > 0 && !relay_write(r, false))
                relay_close(r);
}

void stdio_relay_dispatch(const struct pollfd *p, size_t n) {
        for (size_t i = 0; i < n_relays; i++) {
                relay *r = &relays[i];
                if (r->slot >= 0 && (size_t)r->slot < n && p[r->slot].revents)
                        relay_step(r, p[r->slot].revents);
        }
}

void stdio_relay_finish(void) {
        for (size_t i = 0; i < n_relays; i++) {
                relay *r = &relays[i];
                if (!r->input && r->ours >= 0) {
                        /* our descriptor may block (a terminal): whole writes from here on */
                        size_t moved = 0;
                        for (bool more = true; more && moved < RELAY_FINISH_MAX;) {
                                moved += r->len - r->off;
                                if (!relay_write(r, true))
                                        break;
                                more = relay_read(r) > 0;
                        }
                }
                relay_close(r);
                r->guest_end = safe_close(r->guest_end);
        }
        n_relays = 0;
}
