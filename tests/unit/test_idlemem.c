/* SPDX-License-Identifier: Apache-2.0 */
/* util/idlemem: an idle process's page release drops what it says (the read-only segments of the
 * program and its libraries leave the page tables, and still run) and loses nothing (a mapped
 * data file, its copied-on-write pages, heap and live stack data stay). */
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
        if (system(cmd) != 0)
                (void)fprintf(stderr, "test_idlemem: %s failed\n", cmd);
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

/* RssFile of /proc/self/status (KiB): every file page in our page tables. */
static long rss_file_kb(void) {
        char line[256];
        long kb = -1;
        FILE *f = fopen("/proc/self/status", "re");
        cr_assert_not_null(f);
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, "RssFile:", 8) == 0)
                        kb = strtol(line + 8, NULL, 10);
        fclose(f);
        return kb;
}

TestSuite(idlemem, .init = setup, .fini = teardown);

Test(idlemem, library_pages_leave_and_still_run) {
        static const char text[] = "constant bytes in .rodata";
        char buf[64];
        long before = rss_file_kb();
        cr_assert_gt(before, 0);
        idle_release(IDLE_RELEASE_FILE);
        long after = rss_file_kb();
        cr_expect_lt(after, before, "RssFile %ld KiB -> %ld KiB", before, after);
        /* code and constants fault back in */
        snprintf(buf, sizeof(buf), "%s %d", text, 42);
        cr_expect_str_eq(buf, "constant bytes in .rodata 42");
}

Test(idlemem, a_mapped_data_file_stays) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/f", dir);
        unsigned char *m = map_file(p, false);
        long rss = mapping_rss_kb(m);
        idle_release(IDLE_RELEASE_FILE | IDLE_RELEASE_HEAP | IDLE_RELEASE_STACK);
        cr_expect_eq(mapping_rss_kb(m), rss, "not a loaded object's segment: left alone");
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
