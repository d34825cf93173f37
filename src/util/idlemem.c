/* SPDX-License-Identifier: Apache-2.0 */
/* An idle process's page release (idlemem.h).  Nothing here reads /proc: init and the spare
 * exec helper run inside the sandbox, whose /proc a guest with CAP_SYS_ADMIN in its namespaces
 * can mount over, so what to drop comes from the loader's own list of loaded objects
 * (dl_iterate_phdr) and the stack pointer.  No stdio and no malloc either: the point is to touch
 * as little as possible. */
#include <elf.h>
#include <link.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/idlemem.h"

#define MAX_RANGES 128
/* How far below the stack pointer the stack is released: the kernel keeps at least 128 MiB
 * between the main stack's top and the mmap area (mmap_base), so nothing but the stack (and its
 * guard gap, unmapped: madvise skips holes) lies in this window. */
#define STACK_WINDOW ((uintptr_t)8 << 20)

typedef struct ranges {
        uintptr_t r[MAX_RANGES][2];
        size_t n;
        uintptr_t page, vdso;
} ranges;

/* True when the object was relocated inside its text (DT_TEXTREL): its read-only segments then
 * hold this process's own copies, which MADV_DONTNEED would throw away. */
static bool has_textrel(const struct dl_phdr_info *info) {
        for (size_t i = 0; i < info->dlpi_phnum; i++) {
                if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
                        continue;
                // NOLINTNEXTLINE(performance-no-int-to-ptr): the loader's address of the segment
                const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
                for (; d->d_tag != DT_NULL; d++)
                        if (d->d_tag == DT_TEXTREL || (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_TEXTREL)))
                                return true;
        }
        return false;
}

/* Each loaded object's segments without PF_W: program and library code and constants, the
 * file's bytes exactly (a writable segment's RELRO part, relocated, is not among them). */
static int collect(struct dl_phdr_info *info, size_t size, void *data) {
        ranges *rs = data;
        (void)size;
        if (has_textrel(info))
                return 0;
        for (size_t i = 0; i < info->dlpi_phnum && rs->n < MAX_RANGES; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) || ph->p_memsz == 0)
                        continue;
                uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~(rs->page - 1);
                uintptr_t hi =
                        (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + rs->page - 1) & ~(rs->page - 1);
                if (rs->vdso >= lo && rs->vdso < hi)
                        return 0; /* the vDSO: the kernel's, not a file */
                rs->r[rs->n][0] = lo;
                rs->r[rs->n][1] = hi;
                rs->n++;
        }
        return 0;
}

/* Read-only file pages leave our page tables: MADV_DONTNEED loses nothing there, whoever else
 * maps the pages, and they fault back in from the page cache (minor faults) when used.  After
 * the walk: pages it touched go too. */
__attribute__((noinline)) static void drop_file_pages(uintptr_t page) {
        ranges rs = { .n = 0, .page = page, .vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR) };
        (void)dl_iterate_phdr(collect, &rs);
        for (size_t i = 0; i < rs.n; i++)
                // NOLINTNEXTLINE(performance-no-int-to-ptr): a segment the loader mapped
                (void)madvise((void *)rs.r[i][0], rs.r[i][1] - rs.r[i][0], MADV_DONTNEED);
}

/* The stack pages below our caller's frames, two pages of margin under our own frame (the red
 * zone, madvise's own frame).  Not inlined, so that the frames of the calls before (returned
 * from) are below us and go too.  Only the main thread's stack has nothing else mapped within
 * STACK_WINDOW below it: idlemem.h says so to callers. */
__attribute__((noinline)) static void drop_stack_below(uintptr_t page) {
        uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
        uintptr_t top = (sp & ~(page - 1)) - 2 * page;
        if (top <= STACK_WINDOW)
                return;
        /* holes (below the stack's lowest page) are skipped by the kernel, which then says
         * ENOMEM after applying the advice to what is mapped */
        // NOLINTNEXTLINE(performance-no-int-to-ptr): below our own stack pointer
        (void)madvise((void *)(top - STACK_WINDOW), STACK_WINDOW, MADV_DONTNEED);
}

void idle_release(unsigned what) {
        uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
        if (what & IDLE_RELEASE_HEAP)
                (void)malloc_trim(0);
        if (what & IDLE_RELEASE_FILE)
                drop_file_pages(page);
        if (what & IDLE_RELEASE_STACK)
                drop_stack_below(page);
}
