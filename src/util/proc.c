/* SPDX-License-Identifier: Apache-2.0 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "proc.h"

void pid_killp(pid_t *pid) {
        if (*pid <= 0)
                return;
        (void)kill(*pid, SIGKILL);
        (void)pid_wait(*pid, NULL);
        *pid = 0;
}

int pid_wait(pid_t pid, int *ret_status) {
        int st;
        for (;;) {
                pid_t r = waitpid(pid, &st, __WALL);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (ret_status)
                        *ret_status = st;
                return 0;
        }
}

const char *proc_stat_fields(pid_t pid, char *buf, size_t len) {
        char path[64];
        (void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        ssize_t n = read(fd, buf, len - 1);
        safe_close(fd);
        if (n <= 0)
                return NULL;
        buf[n] = 0;
        /* comm may hold spaces and parentheses: fields start after the last ')', as ") S PPID " */
        const char *p = strrchr(buf, ')');
        if (!p || p[1] != ' ' || !p[2])
                return NULL;
        return p + 2;
}

/* Field 22 of a stat line whose field 3 is at f, or 0. */
static uint64_t stat_start_time(const char *f) {
        /* field 3 (state) is at f; start time is field 22 */
        for (int field = 3; field < 22 && f; field++)
                f = strchr(f + 1, ' ');
        unsigned long long v = 0;
        if (!f || sscanf(f, " %llu", &v) != 1)
                return 0;
        return v;
}

uint64_t proc_start_time(pid_t pid) {
        char buf[1024];
        const char *f = proc_stat_fields(pid, buf, sizeof(buf));
        return f ? stat_start_time(f) : 0;
}

bool proc_alive(pid_t pid, uint64_t start_time) {
        if (pid <= 0)
                return false;
        char buf[1024];
        const char *f = proc_stat_fields(pid, buf, sizeof(buf));
        if (!f)
                return false;
        uint64_t st = stat_start_time(f);
        if (st == 0)
                return false;
        if (start_time != 0 && st != start_time)
                return false;
        /* a zombie is not alive */
        return *f != 'Z' && *f != 'X';
}

int pidfd_open_(pid_t pid) {
        long r = syscall(SYS_pidfd_open, pid, 0);
        return r < 0 ? -errno : (int)r;
}

int pidfd_send_signal_(int pidfd, int sig) {
        long r = syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
        return r < 0 ? -errno : 0;
}

uint64_t now_ms(void) {
        struct timespec ts;
        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int64_t now_epoch(void) {
        return (int64_t)time(NULL);
}

/* dl_iterate_phdr visits the main program first: its PT_NOTE segments hold the build id. */
typedef struct build_id_search {
        char hex[2 * 64 + 1]; /* 20 bytes (SHA-1) in practice; at most 64 taken */
        bool found;
} build_id_search;

static int build_id_cb(struct dl_phdr_info *info, size_t size, void *data) {
        build_id_search *s = data;
        (void)size;
        for (int i = 0; i < info->dlpi_phnum && !s->found; i++) {
                const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
                if (ph->p_type != PT_NOTE)
                        continue;
                /* NOLINTNEXTLINE(performance-no-int-to-ptr): the segment's address, by the ELF ABI */
                const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
                while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
                        const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
                        size_t left = (size_t)(end - p) - sizeof(*n);
                        size_t namesz = ((size_t)n->n_namesz + 3) & ~(size_t)3;
                        size_t descsz = ((size_t)n->n_descsz + 3) & ~(size_t)3;
                        if (namesz > left || descsz > left - namesz)
                                break; /* a note that does not fit: stop, never read past */
                        const char *name = p + sizeof(*n);
                        const unsigned char *desc = (const unsigned char *)name + namesz;
                        if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
                                memcmp(name, "GNU", 4) == 0 && n->n_descsz > 0 &&
                                2 * (size_t)n->n_descsz < sizeof(s->hex)) {
                                for (size_t k = 0; k < n->n_descsz; k++)
                                        (void)snprintf(s->hex + 2 * k, 3, "%02x", desc[k]);
                                s->found = true;
                                break;
                        }
                        p = (const char *)desc + descsz;
                }
        }
        return 1; /* the main program only */
}

int proc_ns_open(pid_t pid, const char *ns) {
        char p[64];
        (void)snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)pid, ns);
        return open(p, O_RDONLY | O_CLOEXEC);
}

int proc_self_build_id(char *out, size_t len) {
        build_id_search s = { .found = false };
        (void)dl_iterate_phdr(build_id_cb, &s);
        if (!s.found)
                return -ENOENT;
        if (strlen(s.hex) >= len)
                return -ENOBUFS;
        memcpy(out, s.hex, strlen(s.hex) + 1);
        return 0;
}

void proc_start_off_our_cpu(pid_t pid, const cpu_set_t *mask) {
        cpu_set_t own;
        if (!mask) {
                if (sched_getaffinity(0, sizeof(own), &own) < 0)
                        return;
                mask = &own;
        }
        int cpu = sched_getcpu();
        if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, mask) || CPU_COUNT(mask) < 2)
                return;
        cpu_set_t others = *mask;
        CPU_CLR(cpu, &others);
        (void)sched_setaffinity(pid, sizeof(others), &others);
}

int proc_status_code(int wstatus) {
        return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}

void proc_take_parent_cpus(void) {
        cpu_set_t cpus;
        if (sched_getaffinity(getppid(), sizeof(cpus), &cpus) == 0)
                (void)sched_setaffinity(0, sizeof(cpus), &cpus);
}
