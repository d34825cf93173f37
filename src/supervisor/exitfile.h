/* SPDX-License-Identifier: Apache-2.0 */
/* The exit record: written by the supervisor as its last act (conmon's exit file), read by the
 * next nook command to learn why a sandbox stopped, even after the supervisor is gone. */
#pragma once

#include <stdint.h>

#include "nook.h"

typedef struct exit_record {
        char reason[32]; /* "user", "max_duration", "idle", "init_died", "signal", "setup_failed" */
        int64_t stopped_at;
        int init_status; /* raw wait status of init, -1 unknown */
        int command_exit; /* run -d: how its command ended, as a shell says it (128 + signal
                           * when killed); -1: no such command, or it had not ended */
} exit_record;

int exit_record_write(const char *state_dir, const exit_record *r, nook_error *err);
/* NOOK_E_NOT_FOUND when there is none. */
int exit_record_read(const char *state_dir, exit_record *ret, nook_error *err);
