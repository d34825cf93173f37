/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox spec: parsed and validated once, before anything is created. */
#pragma once

#include <stdbool.h>
#include <jansson.h>
#include <stdint.h>

#include "nook.h"

/* The largest memory limit a spec takes: 16 TiB, above any machine, far below an overflow. */
#define SB_SPEC_MAX_MEMORY_MIB (16u * 1024 * 1024)

/* A secret bound to hosts (spec "secrets"): the guest sees a placeholder, the egress gateway puts
 * the value into requests to those hosts only.  value is NULL for a spec read back from the
 * store (a start): it is never stored. */
typedef struct sb_secret {
        char *name;
        char **hosts; /* "api.example.com" or "*.example.com", canonical lower case */
        bool body; /* also substituted in request bodies */
        char *value; /* wiped on free */
} sb_secret;

typedef struct sb_spec {
        char *image; /* "host" or an absolute rootfs directory (resolved at parse time) */
        char **env; /* "NAME=value" */
        char **labels; /* "key=value" */
        bool sticky;
        uint64_t max_duration_secs, idle_timeout_secs;
        char *security; /* "default" | "restricted" */
        char *workdir;
        char *user;
        char *network; /* "off" | "public" | "policy" */
        char **net_rules; /* policy: "allow|deny CIDR[:PORTS]" in order (isolate/net.h) */
        char **net_domains; /* policy: "example.com", "*.example.com" */
        char **ports; /* published, canonical "ADDR:HOSTPORT:PORT" */
        /* resources: 0 = unlimited; max_* are the headroom for `nook update` (0 = the limit) */
        unsigned cpus, max_cpus;
        uint64_t memory_mib, max_memory_mib;
        uint64_t pids_max; /* as given: 0 when the spec says nothing, SB_SPEC_PIDS_NONE for no limit */
        char *pull_policy; /* "always" | "if-missing" (default) | "never" */
        char *snapshot; /* a snapshot name or digest; its digest once sb_snapshot_fill_spec ran */
        json_t *volumes; /* checked against the host by sb_volumes_parse() at create */
        json_t *scripts; /* {"name": "content"}: read-only under /.nook/scripts, on PATH */
        json_t *setup_files; /* {"/abs/path": "text" | {"base64": "...", "mode": 420}} */
        /* egress (sandbox/spec_egress.h) */
        sb_secret *secrets;
        size_t n_secrets;
        char **allow_http; /* "METHOD URL-GLOB", in order */
        char *egress_ca_pem; /* an extra CA the gateway trusts upstream */
        bool egress_audit;
} sb_spec;

/* A sandbox's process limit when its spec gives none: a fork bomb stops there instead of taking
 * the host's pid space (kernel.pid_max is 32768 on many hosts).  podman's default (containers.conf
 * pids_limit); set where the host gives nook a cgroup, never an error where it does not. */
#define SB_SPEC_PIDS_DEFAULT 2048
/* pidsMax 0 or -1 in a spec: no limit (docker's --pids-limit 0 / -1). */
#define SB_SPEC_PIDS_NONE UINT64_MAX
/* The process limit to set for s: 0 = none. */
uint64_t sb_spec_pids_limit(const sb_spec *s);

void sb_spec_done(sb_spec *s);
/* Parses and checks spec_json (NULL = defaults).  Errors name the field. */
int sb_spec_parse(const char *spec_json, sb_spec *ret, nook_error *err);
/* A cpus limit at create or update (not at a start of a stored spec): no more than the CPUs this
 * host lets us use (docker refuses the same). */
int sb_spec_cpus_check_host(unsigned cpus, nook_error *err);
/* The canonical JSON form stored in the database. */
char *sb_spec_to_json(const sb_spec *s);
