/* SPDX-License-Identifier: Apache-2.0 */
/* Processes: kill-and-reap on scope exit, start times (pid reuse detection), pidfds. */
#pragma once

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* SIGKILL + waitpid of a half-started child unless TAKE_PID() moved it (STYLE.md R12). */
void pid_killp(pid_t *pid);
#define _cleanup_pid_kill_ _cleanup_(pid_killp)
/* waitpid retrying on EINTR; returns the raw status or -errno. */
int pid_wait(pid_t pid, int *ret_status);
/* Reads /proc/PID/stat into buf and returns its fields from field 3 (the state) on, past the
 * comm (which may hold spaces and parentheses); NULL when the process is gone or unreadable. */
const char *proc_stat_fields(pid_t pid, char *buf, size_t len);
/* The process start time in clock ticks since boot (field 22 of /proc/PID/stat), or 0. */
uint64_t proc_start_time(pid_t pid);
/* True when pid runs and started at start_time (0 matches any). */
bool proc_alive(pid_t pid, uint64_t start_time);
int pidfd_open_(pid_t pid);
/* An fd (O_RDONLY, close-on-exec) on namespace ns ("mnt", "net", "user", ...) of process pid,
 * or -1 with errno set. */
int proc_ns_open(pid_t pid, const char *ns);
int pidfd_send_signal_(int pidfd, int sig);
/* The GNU build id of the running program in hex (a key for caches of what it computed), or
 * -ENOENT when it was linked without one. */
int proc_self_build_id(char *out, size_t len);
/* Moves pid, a child we just started, off the CPU we run on, to the other CPUs of mask: the
 * kernel often queues a new child on its parent's CPU while another CPU is idle, or our own
 * wake-up preempts it there, and it then waits for us to block (bench/README.md, issue #17).
 * The child takes the whole mask back itself (proc_take_parent_cpus), at a point that comes
 * after this call.  mask NULL: our own.  Nothing when the mask has one CPU. */
void proc_start_off_our_cpu(pid_t pid, const cpu_set_t *mask);
/* The other side: our CPU mask becomes our parent's, which proc_start_off_our_cpu narrowed for
 * our start. */
void proc_take_parent_cpus(void);
/* A wait(2) status as a shell gives it: the exit status, or 128 + the signal that killed it. */
int proc_status_code(int wstatus);
/* Monotonic time in milliseconds. */
uint64_t now_ms(void);
/* Wall-clock time in seconds since the epoch. */
int64_t now_epoch(void);
