/* SPDX-License-Identifier: Apache-2.0 */
/* nook pause / nook resume (pause.h). */
#include <jansson.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "sandbox/ctx.h"
#include "sandbox/pause.h"
#include "sandbox/state.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/name.h"

#define PAUSE_REPLY_MS 10000 /* the supervisor waits at most 2 s for the freezer */

/* One pause or resume request on a connected control socket, and its answer. */
static int pause_request(int sock, const char *name, bool pause, bool hold, nook_error *err) {
        return sb_request(sock, name,
                json_pack("{s:s, s:b}", "op", pause ? "pause" : "resume", "hold", hold),
                pause ? "pause" : "resume", PAUSE_REPLY_MS, err);
}

int sb_pause_locked(nook *n, const char *name, bool pause, nook_error *err) {
        _cleanup_close_ int sock = -1;
        int r = sb_connect(n, name, &sock, err);
        if (r < 0)
                return r;
        return pause_request(sock, name, pause, /* hold= */ false, err);
}

int sb_pause_hold(nook *n, const char *name, int *ret_sock, nook_error *err) {
        _cleanup_close_ int sock = -1;
        int r = sb_connect(n, name, &sock, err);
        if (r < 0)
                return r;
        r = pause_request(sock, name, /* pause= */ true, /* hold= */ true, err);
        if (r < 0)
                return r;
        *ret_sock = TAKE_FD(sock);
        return 0;
}

int sb_pause_release(int sock, const char *name, nook_error *err) {
        return pause_request(sock, name, /* pause= */ false, /* hold= */ false, err);
}

bool sb_is_paused(nook *n, const char *name) {
        iso_cgroup *cg = NULL;
        nook_error ignore;
        if (iso_cgroup_open(n->home, name, &cg, &ignore) < 0)
                return false;
        bool frozen = iso_cgroup_frozen(cg) != 0;
        iso_cgroup_free(cg);
        return frozen;
}

static int pause_or_resume(nook *n, const char *name, bool pause, nook_error *err) {
        _cleanup_close_ int lock = -1;
        int r = name_validate("sandbox", name, err);
        if (r >= 0)
                r = sb_lock_running(n, name,
                        pause ? "only a running sandbox can be paused" : "there is nothing to resume", &lock,
                        err);
        if (r >= 0)
                r = sb_pause_locked(n, name, pause, err);
        return r;
}

int nook_pause(nook *n, const char *name, nook_error *err) {
        int r = pause_or_resume(n, name, true, err);
        if (r < 0)
                return nook_err_wrap(err, "pausing sandbox '%s'", name);
        return 0;
}

int nook_resume(nook *n, const char *name, nook_error *err) {
        int r = pause_or_resume(n, name, false, err);
        if (r < 0)
                return nook_err_wrap(err, "resuming sandbox '%s'", name);
        return 0;
}
