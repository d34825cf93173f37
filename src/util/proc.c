/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
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

uint64_t proc_start_time(pid_t pid) {
        char path[64], buf[1024];
        (void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        safe_close(fd);
        if (n <= 0)
                return 0;
        buf[n] = 0;
        /* comm may hold spaces and parentheses: fields start after the last ')' */
        char *p = strrchr(buf, ')');
        if (!p)
                return 0;
        p++;
        /* field 3 (state) is the first after ')'; start time is field 22 */
        for (int field = 3; field < 22 && p; field++) {
                p = strchr(p + 1, ' ');
        }
        if (!p)
                return 0;
        unsigned long long v = 0;
        if (sscanf(p, " %llu", &v) != 1)
                return 0;
        return v;
}

bool proc_alive(pid_t pid, uint64_t start_time) {
        if (pid <= 0)
                return false;
        uint64_t st = proc_start_time(pid);
        if (st == 0)
                return false;
        if (start_time != 0 && st != start_time)
                return false;
        /* a zombie is not alive */
        char path[64], buf[512];
        (void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        safe_close(fd);
        if (n <= 0)
                return false;
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
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
