/* SPDX-License-Identifier: Apache-2.0 */
/* util/idlemem: an idle process's page release loses nothing (file bytes, copied-on-write pages
 * of a read-only mapping, heap and live stack data stay), and drops what it says it drops (a
 * read-only file mapping's pages leave the page tables), also for a mapping whose path is
 * longer than the scan's line buffer. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/idlemem.h"

#define FILE_SIZE (64 * 1024)

static char dir[64];

static void setup(void) {
        snprintf(dir, sizeof(dir), "/tmp/nook-idlemem.XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        (void)system(cmd);
}

/* A FILE_SIZE file of a known pattern at path; mapped read-only (writable and private when
 * cow), every page read (or written once, then made read-only). */
static unsigned char *map_file(const char *path, bool cow) {
        unsigned char buf[FILE_SIZE];
        for (size_t i = 0; i < sizeof(buf); i++)
                buf[i] = (unsigned char)(i * 7 + 3);
        int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0, "create %s", path);
        cr_assert_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
        unsigned char *m =
                mmap(NULL, FILE_SIZE, cow ? PROT_READ | PROT_WRITE : PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        cr_assert_neq(m, MAP_FAILED);
        volatile unsigned sum = 0;
        for (size_t i = 0; i < FILE_SIZE; i += 4096)
                sum += m[i];
        (void)sum;
        if (cow) {
                m[4096] = 0xAB; /* one page becomes this process's own copy */
                cr_assert_eq(mprotect(m, FILE_SIZE, PROT_READ), 0);
        }
        return m;
}

static void expect_pattern(const unsigned char *m, size_t skip) {
        for (size_t i = 0; i < FILE_SIZE; i++)
                if (i != skip && m[i] != (unsigned char)(i * 7 + 3))
                        cr_assert_fail("byte %zu changed: %u", i, m[i]);
}

/* The Rss (KiB) of the mapping that starts at m, from /proc/self/smaps; -1 if not found. */
static long mapping_rss_kb(const void *m) {
        char key[32], line[4096];
        long rss = -1;
        bool in = false;
        snprintf(key, sizeof(key), "%lx-", (unsigned long)(uintptr_t)m);
        FILE *f = fopen("/proc/self/smaps", "re");
        cr_assert_not_null(f);
        while (fgets(line, sizeof(line), f)) {
                if (strncmp(line, key, strlen(key)) == 0)
                        in = true;
                else if (in && strncmp(line, "Rss:", 4) == 0) {
                        rss = strtol(line + 4, NULL, 10);
                        break;
                }
        }
        fclose(f);
        return rss;
}

TestSuite(idlemem, .init = setup, .fini = teardown);

Test(idlemem, file_pages_leave_and_come_back) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/f", dir);
        unsigned char *m = map_file(p, false);
        cr_expect_gt(mapping_rss_kb(m), 0, "read: resident");
        idle_release(IDLE_RELEASE_FILE);
        cr_expect_eq(mapping_rss_kb(m), 0, "released: out of our page tables");
        expect_pattern(m, SIZE_MAX);
        munmap(m, FILE_SIZE);
}

Test(idlemem, copied_pages_of_a_read_only_mapping_stay) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/c", dir);
        unsigned char *m = map_file(p, true);
        idle_release(IDLE_RELEASE_FILE | IDLE_RELEASE_HEAP | IDLE_RELEASE_STACK);
        cr_expect_eq(m[4096], 0xAB, "our copy of the page was kept");
        expect_pattern(m, 4096);
        munmap(m, FILE_SIZE);
}

/* A path longer than the scan's 512-byte line buffer: the header's fields come first. */
Test(idlemem, long_mapping_path) {
        char p[PATH_MAX];
        size_t n = (size_t)snprintf(p, sizeof(p), "%s", dir);
        for (int i = 0; i < 6; i++) {
                n += (size_t)snprintf(p + n, sizeof(p) - n, "/%0120d", i);
                cr_assert_eq(mkdir(p, 0700), 0);
        }
        snprintf(p + n, sizeof(p) - n, "/%0200d", 7);
        cr_assert_gt(strlen(p), 900);
        unsigned char *m = map_file(p, false);
        idle_release(IDLE_RELEASE_FILE);
        cr_expect_eq(mapping_rss_kb(m), 0, "released despite its long path");
        expect_pattern(m, SIZE_MAX);
        munmap(m, FILE_SIZE);
}

/* Touches ~depth KiB of stack below the caller. */
__attribute__((noinline)) static unsigned deep(int depth) {
        volatile unsigned char pad[1024];
        memset((void *)pad, depth, sizeof(pad));
        return depth > 0 ? deep(depth - 1) + pad[17] : pad[3];
}

__attribute__((noinline)) static void release_all(void) {
        idle_release(IDLE_RELEASE_FILE | IDLE_RELEASE_HEAP | IDLE_RELEASE_STACK);
}

Test(idlemem, heap_and_live_stack_stay) {
        volatile unsigned char live[8192];
        for (size_t i = 0; i < sizeof(live); i++)
                live[i] = (unsigned char)(i ^ 0x5A);
        size_t n = 256 * 1024;
        unsigned char *heap = malloc(n);
        cr_assert_not_null(heap);
        for (size_t i = 0; i < n; i++)
                heap[i] = (unsigned char)(i * 13);
        free(malloc(512 * 1024)); /* something for the trim */
        cr_expect_gt(deep(200), 0);
        release_all();
        for (size_t i = 0; i < sizeof(live); i++)
                if (live[i] != (unsigned char)(i ^ 0x5A))
                        cr_assert_fail("live stack byte %zu changed", i);
        for (size_t i = 0; i < n; i++)
                if (heap[i] != (unsigned char)(i * 13))
                        cr_assert_fail("heap byte %zu changed", i);
        free(heap);
        cr_expect_gt(deep(200), 0, "the released stack is usable again");
}
