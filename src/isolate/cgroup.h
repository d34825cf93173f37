/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's cgroup: limits (cpus, memory, pids), statistics, OOM counting.
 * Two backends behind one interface (crun's approach): cgroup v2 where the unified hierarchy
 * holds the controllers, else cgroup v1 (cpu, memory, pids hierarchies; hybrid hosts).
 *   v2: <mount>/nook/nook-<name>-<hash>, controllers enabled in <mount>/nook
 *   v1: <hierarchy>/<our own cgroup>/nook-<name>-<hash> for each of cpu, memory, pids
 * The hash is of the state folder, so two NOOK_HOMEs never share a cgroup. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"

typedef struct iso_limits {
        unsigned cpus; /* 0: unlimited */
        uint64_t memory_bytes; /* 0: unlimited */
        uint64_t pids_max; /* 0: unlimited */
        bool pids_optional; /* pids_max is a default, not a request: not set where the cgroup has no
                             * pids controller (a delegated subtree of cpu and memory only) */
} iso_limits;

typedef struct iso_cgroup_stats {
        uint64_t cpu_usage_ns;
        uint64_t memory_current, memory_peak;
        uint64_t pids_current;
        uint64_t oom_kills;
        uint64_t memory_limit, pids_limit;
        unsigned cpus_limit;
} iso_cgroup_stats;

typedef struct iso_cgroup iso_cgroup;

/* Whether this process can create and limit sandbox cgroups; a reason when not. */
bool iso_cgroup_available(char *reason, size_t len);
/* Creates the cgroup for (home, name) and applies limits.  Fails with MISSING_FEATURE when the
 * host cannot enforce a requested limit (never a silently unlimited sandbox). */
int iso_cgroup_create(
        const char *home, const char *name, const iso_limits *l, iso_cgroup **ret, nook_error *err);
/* Opens an existing sandbox cgroup (NOT_FOUND when there is none). */
int iso_cgroup_open(const char *home, const char *name, iso_cgroup **ret, nook_error *err);
int iso_cgroup_attach(iso_cgroup *cg, pid_t pid, nook_error *err);
int iso_cgroup_set_limits(iso_cgroup *cg, const iso_limits *l, nook_error *err);

/* Joining a v1 cgroup without the global lock.  Writing a pid to cgroup.procs write-locks
 * cgroup_threadgroup_rwsem, which waits for an RCU grace period: ~10 ms of every create on a
 * small VM.  A thread that writes "0" (itself) to a v1 `tasks` file skips that lock; the kernel
 * checks the permission of the opener, so the supervisor opens the files (as the host user that
 * owns the cgroup) and its single-threaded init, which inherits them, writes "0" before it
 * unshares its cgroup namespace.  v2 has no such file: there the supervisor attaches the init. */
#define ISO_CGROUP_JOIN_MAX 8 /* at least one per v1 controller nook uses (cgroup.c checks) */
typedef struct iso_cgroup_join {
        int fds[ISO_CGROUP_JOIN_MAX];
        size_t n; /* 0: nothing to join this way (v2, or no cgroup): iso_cgroup_attach instead */
} iso_cgroup_join;
#define ISO_CGROUP_JOIN_INIT                                                                                \
        { .n = 0 }
/* Opens each v1 controller's `tasks` file of cg; for a v2 cgroup leaves ret->n at 0. */
int iso_cgroup_join_open(iso_cgroup *cg, iso_cgroup_join *ret, nook_error *err);
/* Moves the calling thread (a single-threaded process: all of it) into the cgroup. */
int iso_cgroup_join_self(const iso_cgroup_join *j, nook_error *err);
void iso_cgroup_join_done(iso_cgroup_join *j);
int iso_cgroup_read_stats(iso_cgroup *cg, iso_cgroup_stats *ret, nook_error *err);
/* The OOM kill count alone (one file read: the supervisor asks at every exec). 0 when unknown. */
uint64_t iso_cgroup_oom_kills(iso_cgroup *cg);
/* The freezer (pause/resume): v2 cgroup.freeze, v1 the freezer hierarchy.  Whether this process
 * can freeze sandbox cgroups; a reason when not (nook doctor prints it). */
bool iso_cgroup_freezer_available(char *reason, size_t len);
/* Freezes (waiting until every task has stopped, at most 2 s, else thaws and fails with
 * NOOK_E_TIMEOUT) or thaws.  MISSING_FEATURE naming why when the cgroup has no freezer.  err may be
 * NULL (thawing on a cleanup path). */
int iso_cgroup_freeze(iso_cgroup *cg, bool freeze, nook_error *err);
/* 1 frozen, 2 freezing (v1, under way), 0 thawed or no freezer. */
int iso_cgroup_frozen(const iso_cgroup *cg);
/* Thaws, kills whatever is left in it and removes it.  True when every folder of it is gone (a
 * NULL cg has none). */
bool iso_cgroup_destroy(iso_cgroup *cg);
iso_cgroup *iso_cgroup_free(iso_cgroup *cg);

/* ---- cgroups named by path (the OCI runtime's linux.cgroupsPath) ----
 * path is absolute, relative to each hierarchy's root; on cgroup v1 every mounted controller of
 * cpu, cpuacct, memory, pids, freezer, devices and cpuset gets the same path. */
typedef struct iso_cgroup_values {
        bool has_memory, has_swap, has_cpu_quota, has_cpu_period, has_pids; /* false: unchanged */
        /* bytes; -1 unlimited; swap is memory+swap (v1 memsw).  memory -1 without has_swap lifts
         * the swap limit too (v1 refuses a memory limit above memsw; runc does the same). */
        int64_t memory, swap;
        int64_t cpu_quota; /* microseconds per period; <= 0 unlimited */
        uint64_t cpu_period; /* microseconds; 0: the default 100000 */
        uint64_t cpu_shares; /* 0: unchanged; v2 gets the matching cpu.weight */
        int64_t pids; /* <= 0: unlimited */
        const char *cpuset_cpus; /* NULL: unchanged */
        bool has_reservation, has_swappiness, disable_oom_killer;
        int64_t reservation; /* bytes: v1 memory.soft_limit_in_bytes, v2 memory.low */
        uint64_t swappiness; /* v1 only */
} iso_cgroup_values;

int iso_cgroup_create_path(const char *path, iso_cgroup **ret, nook_error *err);
/* Does not check that it exists (destroy and freeze of a half-made one must work). */
int iso_cgroup_open_path(const char *path, iso_cgroup **ret, nook_error *err);
/* Writes only the values that are set. */
int iso_cgroup_apply(iso_cgroup *cg, const iso_cgroup_values *v, nook_error *err);
/* Moves pid into every hierarchy of cg that exists. */
int iso_cgroup_attach_all(iso_cgroup *cg, pid_t pid, nook_error *err);
/* The freezer of a cgroup made by path: iso_cgroup_freeze / iso_cgroup_frozen above. */
/* The processes in it (cgroup.procs); *ret is malloc'd. */
int iso_cgroup_pids(iso_cgroup *cg, pid_t **ret, size_t *ret_n, nook_error *err);
/* The directory of one v1 controller ("memory"), or the v2 directory; NULL when absent. */
const char *iso_cgroup_dir(iso_cgroup *cg, const char *controller);
/* A device cgroup rule ("c 1:3 rwm", "a"): v1 writes it to devices.allow or devices.deny at
 * once; v2 keeps it for iso_cgroup_devices_commit (INVALID for a rule it cannot parse). */
int iso_cgroup_devices(iso_cgroup *cg, bool allow, const char *rule, nook_error *err);
/* v2: the rules given so far as one eBPF device program attached to the cgroup (isolate/
 * devfilter.h: the last rule that decides wins, nothing decided is denied); v1: nothing to do. */
int iso_cgroup_devices_commit(iso_cgroup *cg, nook_error *err);
