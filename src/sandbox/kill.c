/* SPDX-License-Identifier: Apache-2.0 */
/* nook kill: a signal to every command running in a sandbox (nook.h, nook_sandbox_kill). */
#include <jansson.h>
#include <signal.h>
#include <string.h>

#include "nook.h"
#include "sandbox/ctx.h"
#include "sandbox/pause.h"
#include "sandbox/state.h"
#include "store/store.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/str.h"

#define KILL_REPLY_MS 10000

static int kill_locked(nook *n, const char *name, int sig, nook_error *err) {
        _cleanup_close_ int lock = -1;
        _cleanup_close_ int sock = -1;
        sandbox_rec rec = { 0 };
        store *st;
        int r = sb_lock(n, name, &lock, err);
        if (r < 0)
                return r;
        r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        if (store_sandbox_get(st, name, &rec, err) < 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox '%s'", name);
        r = sb_reconcile(n, &rec, err);
        if (r >= 0 && !streq(rec.state, "running"))
                r = nook_err_set(err, NOOK_E_STATE,
                        "Sandbox '%s' is %s, not running: it runs no command to signal", name, rec.state);
        if (r >= 0 && sb_is_paused(n, name))
                r = nook_err_set(err, NOOK_E_STATE,
                        "Sandbox '%s' is paused: its commands would take the signal only once resumed; resume it "
                        "first ('nook resume %s'), or stop it",
                        name, name);
        if (r >= 0)
                r = sb_connect(n, name, &sock, err);
        if (r >= 0)
                r = sb_request(sock, name, json_pack("{s:s, s:i}", "op", "kill", "signal", sig), "kill",
                        KILL_REPLY_MS, err);
        sandbox_rec_done(&rec);
        return r;
}

int nook_sandbox_kill(nook *n, const char *name, int sig, nook_error *err) {
        int r = name_validate("sandbox", name, err);
        if (r >= 0 && (sig < 1 || sig > 64))
                r = nook_err_set(err, NOOK_E_INVALID, "Invalid signal number %d: a signal is 1 to 64", sig);
        if (r >= 0 && sig == SIGKILL)
                /* as docker kill: the sandbox goes down with its commands, at once */
                return nook_sandbox_stop(n, name, 0, err);
        if (r >= 0)
                r = kill_locked(n, name, sig, err);
        if (r < 0)
                return nook_err_wrap(err, "signalling sandbox '%s'", name);
        return 0;
}
