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
int iso_cgroup_read_stats(iso_cgroup *cg, iso_cgroup_stats *ret, nook_error *err);
/* The OOM kill count alone (one file read: the supervisor asks at every exec). 0 when unknown. */
uint64_t iso_cgroup_oom_kills(iso_cgroup *cg);
/* Kills whatever is left in it and removes it. */
void iso_cgroup_destroy(iso_cgroup *cg);
iso_cgroup *iso_cgroup_free(iso_cgroup *cg);

/* ---- cgroups named by path (the OCI runtime's linux.cgroupsPath) ----
 * path is absolute, relative to each hierarchy's root; on cgroup v1 every mounted controller of
 * cpu, cpuacct, memory, pids, freezer, devices and cpuset gets the same path. */
typedef struct iso_cgroup_values {
        bool has_memory, has_swap, has_cpu_quota, has_cpu_period, has_pids;
        int64_t memory, swap; /* bytes; -1 unlimited; swap is memory+swap (v1 memsw) */
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
/* The freezer: cgroup.freeze (v2) or freezer.state (v1), waiting until it took effect. */
int iso_cgroup_freeze(iso_cgroup *cg, bool freeze, nook_error *err);
bool iso_cgroup_frozen(iso_cgroup *cg);
/* The processes in it (cgroup.procs); *ret is malloc'd. */
int iso_cgroup_pids(iso_cgroup *cg, pid_t **ret, size_t *ret_n, nook_error *err);
/* The directory of one v1 controller ("memory"), or the v2 directory; NULL when absent. */
const char *iso_cgroup_dir(iso_cgroup *cg, const char *controller);
/* A v1 device cgroup rule ("c 1:3 rwm", "a"); a no-op on cgroup v2. */
int iso_cgroup_devices(iso_cgroup *cg, bool allow, const char *rule, nook_error *err);
