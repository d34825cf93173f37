/* SPDX-License-Identifier: Apache-2.0 */
/* The supervisor's configuration: everything it needs to create one sandbox, sent by libnook
 * over a socket the supervisor inherits (--config-fd, never a file: no inode in NOOK_HOME) and
 * reads to its end before anything else: libnook starts the supervisor first and sends the
 * config once the sandbox's folders are ready (docs/design/runtime.md, "Processes").  It never
 * holds a secret value. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "nook.h"
#include "isolate/seccomp.h"

typedef struct sup_mount {
        char *type; /* "bind" | "tmpfs" */
        char *source;
        char *target;
        bool readonly;
        uint64_t size_mib;
} sup_mount;

typedef struct sup_config {
        char *name;
        char **lowers; /* image layers, topmost first */
        char *upper; /* NULL: read-only root */
        char *work;
        char **ro_binds; /* host paths bound read-only (built-in host image) */
        char *workspace;
        char **env; /* sandbox env, "KEY=VALUE" */
        char *workdir; /* default cwd of execs */
        char *user; /* default user of execs */
        char *profile; /* "default" | "restricted" */
        iso_profile sec_profile; /* profile, parsed once when the config is read */
        char *network; /* "off" | "public" | "policy"; NULL = off */
        char **net_rules; /* policy: "allow|deny CIDR[:PORTS]", in order (net_rule_from_string) */
        char **net_domains; /* policy: "example.com", "*.example.com" */
        char **ports; /* published host ports, "[ADDR:]HOSTPORT:PORT" */
        uint64_t max_duration_ms, idle_timeout_ms;
        char *home; /* the state root: names the sandbox's cgroup */
        unsigned cpus; /* resource limits, 0 = unlimited */
        uint64_t memory_bytes;
        uint64_t pids_max; /* 0: none */
        bool pids_default; /* pids_max is nook's default, not asked for: set only where it can be */
        bool ephemeral;
        bool one_shot; /* NOOK_CREATE_ONE_SHOT: init forks no spare exec helper */
        /* Rootful per-sandbox identity (isolate/idmap.h): the sandbox's host id range starts at
         * id_base; 0 = the shared ISO_ROOTFUL_ID_BASE and no idmapped mounts.  ws_uid/ws_gid own
         * the workspace on the host: guest root's files there are theirs. */
        uint32_t id_base;
        uint32_t ws_uid, ws_gid;
        sup_mount *mounts; /* volumes, and the scripts folder at /.nook/scripts */
        size_t n_mounts;
        /* The egress gateway (supervisor/egress.h), NULL = none: {"program", "caBundle",
         * "secrets": [{"name", "placeholder", "hosts", "body"}], "allowHttp", "extraCaPem"?}.
         * Never a secret's value: those come over the secrets socket. */
        json_t *egress;
} sup_config;

void sup_config_done(sup_config *c);
/* *ret_text: c as compact JSON (free() it). */
int sup_config_to_json(const sup_config *c, char **ret_text, nook_error *err);
/* The largest config the supervisor reads (env, mounts, rules and egress hosts are bounded by
 * the spec's own limits far below this). */
#define SUP_CONFIG_MAX ((size_t)32 * 1024 * 1024)
/* Reads the config from fd (from its current offset to its end).  Returns 1 with *ret set, or 0
 * when fd ends before its first byte (the creator gave up: it died or failed before sending). */
int sup_config_from_fd(int fd, sup_config *ret, nook_error *err);
