/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "nook.h"
#include "supervisor/exitfile.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/str.h"

int exit_record_write(const char *state_dir, const exit_record *r, nook_error *err) {
        _cleanup_free_ char *path = strprintf("%s/exit.json", state_dir);
        _cleanup_free_ char *tmp = strprintf("%s/exit.json.tmp", state_dir);
        if (!path || !tmp)
                return nook_err_oom(err);
        json_t *o = json_pack("{s:s, s:I, s:i}", "reason", r->reason, "stoppedAt", (json_int_t)r->stopped_at,
                "initStatus", r->init_status);
        if (o && r->command_exit >= 0 &&
                json_object_set_new(o, "commandExit", json_integer(r->command_exit)) < 0)
                o = (json_decref(o), NULL);
        if (!o)
                return nook_err_oom(err);
        int k = json_dump_file(o, tmp, JSON_COMPACT);
        /* A one-shot run's state folder is made only when needed (docs/design/runtime.md, "The
         * state folder"): a run stopped without its removal (its client killed) makes it here. */
        if (k < 0 && errno == ENOENT && mkdir(state_dir, 0700) == 0)
                k = json_dump_file(o, tmp, JSON_COMPACT);
        json_decref(o);
        if (k < 0 || rename(tmp, path) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot write the exit record '%s'", path);
        return 0;
}

int exit_record_read(const char *state_dir, exit_record *ret, nook_error *err) {
        _cleanup_free_ char *path = strprintf("%s/exit.json", state_dir);
        json_error_t jerr;
        if (!path)
                return nook_err_oom(err);
        json_t *o = json_load_file(path, 0, &jerr);
        if (!o)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No exit record at '%s'", path);
        exit_record r = { .init_status = -1, .command_exit = -1 };
        const char *reason = json_string_value(json_object_get(o, "reason"));
        (void)snprintf(r.reason, sizeof(r.reason), "%s", reason ? reason : "unknown");
        r.stopped_at = json_integer_value(json_object_get(o, "stoppedAt"));
        json_t *st = json_object_get(o, "initStatus");
        if (json_is_integer(st))
                r.init_status = (int)json_integer_value(st);
        json_t *ce = json_object_get(o, "commandExit");
        if (json_is_integer(ce) && json_integer_value(ce) >= 0 && json_integer_value(ce) <= 255)
                r.command_exit = (int)json_integer_value(ce);
        json_decref(o);
        *ret = r;
        return 0;
}
