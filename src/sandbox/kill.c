/* SPDX-License-Identifier: Apache-2.0 */
/* nook kill: a signal to every command running in a sandbox (nook.h, nook_sandbox_kill).  The
 * supervisor refuses a paused sandbox (its commands would take the signal only once thawed). */
#include <jansson.h>
#include <signal.h>

#include "nook.h"
#include "sandbox/state.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/name.h"

#define KILL_REPLY_MS 10000

int nook_sandbox_kill(nook *n, const char *name, int sig, nook_error *err) {
        _cleanup_close_ int lock = -1, sock = -1;
        int r = name_validate("sandbox", name, err);
        if (r >= 0 && (sig < 1 || sig > 64))
                r = nook_err_set(err, NOOK_E_INVALID, "Invalid signal number %d: a signal is 1 to 64", sig);
        if (r >= 0 && sig == SIGKILL)
                /* as docker kill: the sandbox goes down with its commands, at once */
                return nook_sandbox_stop(n, name, 0, err);
        if (r >= 0)
                r = sb_lock_running(n, name, "it runs no command to signal", &lock, err);
        if (r >= 0)
                r = sb_connect(n, name, &sock, err);
        if (r >= 0)
                r = sb_request(sock, name, json_pack("{s:s, s:i}", "op", "kill", "signal", sig), "kill",
                        KILL_REPLY_MS, err);
        if (r < 0)
                return nook_err_wrap(err, "signalling sandbox '%s'", name);
        return 0;
}
