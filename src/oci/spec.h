/* SPDX-License-Identifier: Apache-2.0 */
/* The bundle's config.json (OCI runtime-spec 1.0/1.1), parsed and validated in full before
 * anything is created, so a bad config changes nothing.  Only the fields nook-oci acts on are
 * kept; the JSON itself stays alive (seccomp, hooks and annotations point into it). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"
#include "util/macro.h"

#define OCI_MAX_NS 8
#define OCI_MAX_IDMAPS 8
#define OCI_MAX_RLIMITS 16
#define OCI_MAX_GIDS 64

enum {
        OCI_CAP_BOUNDING,
        OCI_CAP_EFFECTIVE,
        OCI_CAP_INHERITABLE,
        OCI_CAP_PERMITTED,
        OCI_CAP_AMBIENT,
        _OCI_CAP_MAX
};

typedef struct oci_rlimit {
        int resource;
        uint64_t soft, hard;
} oci_rlimit;

typedef struct oci_process {
        bool terminal;
        char **args;
        char **env;
        const char *cwd;
        uid_t uid;
        gid_t gid;
        gid_t gids[OCI_MAX_GIDS];
        size_t n_gids;
        bool has_caps;
        uint64_t caps[_OCI_CAP_MAX];
        oci_rlimit rlimits[OCI_MAX_RLIMITS];
        size_t n_rlimits;
        bool no_new_privs;
        bool has_oom_score_adj;
        int oom_score_adj;
} oci_process;

typedef struct oci_mount {
        const char *destination;
        const char *type;
        char *source; /* absolute: a relative bind source is made relative to the bundle */
        unsigned long flags; /* MS_* set by options */
        unsigned long clear; /* MS_* cleared by options (rw, suid, dev, exec) */
        unsigned long propagation; /* MS_PRIVATE, MS_SHARED, ... with MS_REC, or 0 */
        char *data; /* the options mount(2) takes as data ("mode=755,size=65536k") */
        bool bind;
} oci_mount;

typedef struct oci_ns {
        int type; /* CLONE_NEW* */
        const char *path; /* join this one; NULL: a new namespace */
} oci_ns;

typedef struct oci_idmap {
        uint32_t container, host, size;
} oci_idmap;

typedef struct oci_resources {
        bool has_memory, has_swap, has_cpu_quota, has_cpu_period, has_cpu_shares, has_pids, has_cpus;
        int64_t memory, swap; /* -1: unlimited */
        int64_t cpu_quota; /* -1: unlimited */
        uint64_t cpu_period, cpu_shares;
        int64_t pids; /* < 0: unlimited; 0 is unset (has_pids false), as runc reads it */
        const char *cpuset_cpus, *cpuset_mems;
        bool has_reservation, has_swappiness, disable_oom_killer;
        int64_t reservation;
        uint64_t swappiness;
} oci_resources;

typedef struct oci_device {
        const char *path;
        int64_t major, minor;
        mode_t mode;
        uid_t uid;
        gid_t gid;
        char type; /* c, b, u, p */
        bool has_uid, has_gid;
} oci_device;

typedef struct oci_spec {
        json_t *json;
        char *bundle; /* absolute */
        char *root; /* absolute path of the root filesystem */
        bool root_readonly;
        const char *hostname;
        bool has_process; /* false: no "process" (create works, start refuses) */
        oci_process process;
        oci_mount *mounts;
        size_t n_mounts;
        oci_ns ns[OCI_MAX_NS];
        size_t n_ns;
        oci_idmap uid_maps[OCI_MAX_IDMAPS], gid_maps[OCI_MAX_IDMAPS];
        size_t n_uid_maps, n_gid_maps;
        const char *cgroups_path;
        oci_resources resources;
        json_t *device_rules; /* linux.resources.devices (v1 device cgroup), or NULL */
        oci_device *devices;
        size_t n_devices;
        char **masked_paths, **readonly_paths;
        char **sysctl; /* "key=value" */
        json_t *seccomp; /* linux.seccomp or NULL */
        json_t *hooks; /* hooks or NULL */
        json_t *annotations; /* annotations or NULL */
        unsigned long rootfs_propagation;
} oci_spec;

/* Reads and validates BUNDLE/config.json.  Every error names the field. */
int oci_spec_load(const char *bundle, oci_spec **ret, nook_error *err);
/* The same on a parsed document (takes j, even on failure); bundle is absolute.  Fuzzed. */
int oci_spec_from_json(json_t *j, const char *bundle, oci_spec **ret, nook_error *err);
oci_spec *oci_spec_free(oci_spec *s);
/* A process object ("process" of config.json, or exec --process).  cwd must be absolute. */
int oci_process_parse(json_t *j, oci_process *ret, nook_error *err);
void oci_process_done(oci_process *p);
/* The CLONE_NEW* flag of a namespace type name ("pid", "network", ...), 0 if unknown. */
int oci_ns_flag(const char *name);
/* The namespace of type flag in the spec, or NULL. */
const oci_ns *oci_spec_ns(const oci_spec *s, int flag);
/* The mount options of one "options" array, as flags and data. */
int oci_mount_options(json_t *opts, oci_mount *m, nook_error *err);
/* A capability name ("CAP_SYS_ADMIN") as its number, -1 if unknown. */
int oci_cap_from_name(const char *name);
/* "CAP_CHOWN" for 0, ...; NULL past the last capability nook-oci knows. */
const char *oci_cap_name(int cap);
/* The annotation value, or NULL. */
const char *oci_spec_annotation(const oci_spec *s, const char *key);

DEFINE_TRIVIAL_CLEANUP_FUNC(oci_spec *, oci_spec_free);
