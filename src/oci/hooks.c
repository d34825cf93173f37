/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "oci/hooks.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/proc.h"

static int wait_timeout(pid_t pid, int64_t timeout_s, int *ret_status) {
        uint64_t deadline = timeout_s > 0 ? now_ms() + (uint64_t)timeout_s * 1000 : 0;
        for (;;) {
                pid_t w = waitpid(pid, ret_status, WNOHANG);
                if (w == pid)
                        return 0;
                if (w < 0 && errno != EINTR)
                        return -errno;
                if (deadline && now_ms() > deadline) {
                        (void)kill(pid, SIGKILL);
                        (void)waitpid(pid, ret_status, 0);
                        return -ETIMEDOUT;
                }
                usleep(2000);
        }
}

static int run_one(json_t *h, const char *name, size_t i, const char *state, nook_error *err) {
        const char *path = NULL;
        _cleanup_strv_free_ char **args = NULL, **env = NULL;
        uint64_t timeout = 0;
        int pfd[2], status = 0;
        if (!json_is_object(h) || json_get_string(h, "path", true, &path, err) < 0 ||
                json_get_string_array(h, "args", false, &args, err) < 0 ||
                json_get_string_array(h, "env", false, &env, err) < 0 ||
                json_get_uint64(h, "timeout", false, &timeout, err) < 0)
                return nook_err_wrap(err, "hooks.%s[%zu]", name, i);
        if (path[0] != '/')
                return nook_err_set(
                        err, NOOK_E_INVALID, "hooks.%s[%zu]: path '%s' is not absolute", name, i, path);
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create a pipe for hook '%s'", path);
        pid_t pid = fork();
        if (pid < 0) {
                safe_close(pfd[0]);
                safe_close(pfd[1]);
                return nook_err_errno(err, NOOK_E_IO, "Cannot fork hook '%s'", path);
        }
        if (pid == 0) {
                static char *const empty[] = { NULL };
                char *const argv1[] = { (char *)path, NULL };
                (void)dup2(pfd[0], 0);
                (void)execve(path, args && args[0] ? args : argv1, env ? env : empty);
                _exit(127);
        }
        safe_close(pfd[0]);
        (void)signal(SIGPIPE, SIG_IGN);
        (void)fd_write_all(pfd[1], state, strlen(state));
        safe_close(pfd[1]);
        int r = wait_timeout(pid, (int64_t)timeout, &status);
        if (r == -ETIMEDOUT)
                return nook_err_set(err, NOOK_E_TIMEOUT, "hooks.%s[%zu] '%s' did not finish within %llu s",
                        name, i, path, (unsigned long long)timeout);
        if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return nook_err_set(err, NOOK_E_IO, "hooks.%s[%zu] '%s' failed (%s %d)", name, i, path,
                        WIFEXITED(status) ? "exit status" : "signal",
                        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return 0;
}

int oci_hooks_run(json_t *hooks, const char *name, const char *state, nook_error *err) {
        json_t *list = hooks ? json_object_get(hooks, name) : NULL, *h;
        size_t i;
        if (!list || json_is_null(list))
                return 0;
        if (!json_is_array(list))
                return nook_err_set(err, NOOK_E_INVALID, "hooks.%s must be an array", name);
        json_array_foreach(list, i, h) {
                int r = run_one(h, name, i, state, err);
                if (r < 0)
                        return r;
        }
        return 0;
}
