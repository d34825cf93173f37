/* SPDX-License-Identifier: Apache-2.0 */
/* An idle process's page release (idlemem.h).  No stdio and no malloc here: the point is to
 * touch as little as possible, and a FILE buffer would grow the heap we are trimming. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/idlemem.h"
#include "util/macro.h"

/* The read-only file mappings of /proc/self/smaps (bit 0 of lo: MADV_PAGEOUT, else
 * MADV_DONTNEED) and the main thread's stack. */
#define MAX_MAPPINGS 256

typedef struct maps_scan {
        uintptr_t m[MAX_MAPPINGS][2];
        size_t n;
        bool file_ro; /* the current mapping is a read-only file mapping, not yet recorded */
        uintptr_t cur_lo, cur_hi;
        uintptr_t stack_lo, stack_hi;
} maps_scan;

/* One /proc/self/smaps header line: "lo-hi perms offset dev inode [path]"; false for the
 * "Key: value" lines between them. */
static bool parse_maps_line(
        const char *line, uintptr_t *ret_lo, uintptr_t *ret_hi, bool *ret_file_ro, bool *ret_stack) {
        char *e;
        unsigned long lo = strtoul(line, &e, 16);
        if (*e != '-')
                return false;
        unsigned long hi = strtoul(e + 1, &e, 16);
        if (*e != ' ' || strlen(e) < 6)
                return false;
        bool writable = e[2] == 'w';
        /* skip perms, offset, dev: the inode is the fifth field */
        for (int field = 0; field < 3; field++) {
                e = strchr(e + 1, ' ');
                if (!e)
                        return false;
        }
        unsigned long ino = strtoul(e + 1, &e, 10);
        *ret_lo = lo;
        *ret_hi = hi;
        *ret_file_ro = ino != 0 && !writable;
        *ret_stack = strstr(e, " [stack]") != NULL;
        return true;
}

/* A read-only file mapping without an anonymous (copied-on-write) page is the file's bytes
 * exactly, so MADV_DONTNEED loses nothing there, whoever else maps the pages; one with copies
 * (relocated RELRO data: this process's own) only gets MADV_PAGEOUT, which leaves those alone
 * (no swap) and pages out what no other process maps.  Read-only mappings cannot gain copies
 * meanwhile. */
static void scan_line(maps_scan *s, const char *line) {
        bool file_ro = false, stack = false;
        if (parse_maps_line(line, &s->cur_lo, &s->cur_hi, &file_ro, &stack)) {
                s->file_ro = file_ro;
                if (stack) {
                        s->stack_lo = s->cur_lo;
                        s->stack_hi = s->cur_hi;
                }
                return;
        }
        if (!s->file_ro || strncmp(line, "Anonymous:", 10) != 0 || s->n >= MAX_MAPPINGS)
                return;
        bool copies = strtoul(line + 10, NULL, 10) != 0;
        s->m[s->n][0] = s->cur_lo | (copies ? 1 : 0);
        s->m[s->n][1] = s->cur_hi;
        s->n++;
        s->file_ro = false;
}

/* Reads /proc/self/smaps line by line into s; a line longer than the buffer keeps its start
 * (the header's fields come first; a long path is cut).  False when it cannot be read (no
 * /proc in a sandbox). */
static bool scan_smaps(maps_scan *s) {
        char buf[2048], line[512];
        size_t ll = 0;
        int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        for (;;) {
                ssize_t k = read(fd, buf, sizeof(buf));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                for (const char *p = buf, *end = buf + k; p < end;) {
                        const char *nl = memchr(p, '\n', (size_t)(end - p));
                        size_t len = (size_t)((nl ? nl : end) - p);
                        size_t take = len < sizeof(line) - 1 - ll ? len : sizeof(line) - 1 - ll;
                        memcpy(line + ll, p, take);
                        ll += take;
                        if (!nl)
                                break;
                        line[ll] = 0;
                        scan_line(s, line);
                        ll = 0;
                        p = nl + 1;
                }
        }
        safe_close(fd);
        return true;
}

/* The stack pages below our caller's frames: a page of margin under our own frame (the red
 * zone, madvise's own frame).  Not inlined, so that the scan's buffers (a frame now returned
 * from) are below us and go too. */
__attribute__((noinline)) static void drop_stack_below(uintptr_t lo, uintptr_t hi) {
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
        /* not the main thread's stack (a thread, a sanitizer's fake frame): leave it */
        if (sp < lo || sp >= hi)
                return;
        uintptr_t top = (sp & ~(page - 1)) - 2 * page;
        if (top > lo)
                // NOLINTNEXTLINE(performance-no-int-to-ptr): an address from /proc/self/smaps
                (void)madvise((void *)lo, top - lo, MADV_DONTNEED);
}

__attribute__((noinline)) static void scan_and_drop(unsigned what, uintptr_t *ret_lo, uintptr_t *ret_hi) {
        maps_scan s = { .n = 0 };
        if (!scan_smaps(&s))
                return;
        /* after the reading: pages touched while reading (fault-around) go too */
        for (size_t i = 0; (what & IDLE_RELEASE_FILE) && i < s.n; i++) {
                uintptr_t lo = s.m[i][0] & ~(uintptr_t)1;
                int advice = (s.m[i][0] & 1) ? MADV_PAGEOUT : MADV_DONTNEED;
                // NOLINTNEXTLINE(performance-no-int-to-ptr): an address from /proc/self/smaps
                (void)madvise((void *)lo, s.m[i][1] - lo, advice);
        }
        *ret_lo = s.stack_lo;
        *ret_hi = s.stack_hi;
}

void idle_release(unsigned what) {
        uintptr_t stack_lo = 0, stack_hi = 0;
        if (what & IDLE_RELEASE_HEAP)
                (void)malloc_trim(0);
        if (what & (IDLE_RELEASE_FILE | IDLE_RELEASE_STACK))
                scan_and_drop(what, &stack_lo, &stack_hi);
        if ((what & IDLE_RELEASE_STACK) && stack_hi > stack_lo)
                drop_stack_below(stack_lo, stack_hi);
}
