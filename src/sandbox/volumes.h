/* SPDX-License-Identifier: Apache-2.0 */
/* Volumes, scripts and setup files of a spec: parsed and checked in libnook before anything is
 * created. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "nook.h"

typedef enum sb_volume_type {
        SB_VOLUME_BIND,
        SB_VOLUME_TMPFS,
        SB_VOLUME_NAMED,
        _SB_VOLUME_TYPE_MAX,
        _SB_VOLUME_TYPE_INVALID = -1,
} sb_volume_type;

typedef struct sb_volume {
        sb_volume_type type;
        char *source; /* bind: the resolved host path; named: the volume name; tmpfs: NULL */
        char *target; /* normalised absolute guest path */
        bool readonly;
        uint64_t size_mib; /* tmpfs */
} sb_volume;

const char *sb_volume_type_to_string(sb_volume_type t);
void sb_volumes_free(sb_volume *v, size_t n);
/* Parses spec["volumes"]: [{"type":"bind","source":"/h","target":"/g","readonly":true}, ...]
 * ("hostPath"/"containerPath" accepted too).  Bind sources are resolved (realpath) and must not
 * be, contain or lie inside nook's state folder, "/", /proc, /sys, /dev, container runtime
 * sockets or credential folders, unless the volume says "allowSensitive": true. */
int sb_volumes_parse(json_t *spec, const char *home, sb_volume **ret, size_t *ret_n, nook_error *err);
json_t *sb_volumes_to_json(const sb_volume *v, size_t n);

/* Guest paths of setup files and volume targets: absolute, no "..", not "/", not under /proc,
 * /sys or /dev.  Returns a normalised copy. */
int sb_guest_path_check(const char *what, const char *path, char **ret, nook_error *err);
