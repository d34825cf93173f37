/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>

#include "nook.h"
#include "supervisor/proto.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"

int proto_send(int sock, json_t *msg, const int *fds, size_t n_fds) {
        _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        size_t len = strlen(text);
        if (len > PROTO_MAX_MSG)
                return -EMSGSIZE;
        return fd_send_with_fds(sock, text, len, fds, n_fds);
}

int proto_recv(int sock, json_t **ret, int *ret_fds, size_t *ret_n_fds) {
        _cleanup_free_ char *buf = malloc(PROTO_MAX_MSG + 1);
        int fds[PROTO_MAX_FDS];
        size_t n_fds = 0;

        if (!buf)
                return -ENOMEM;
        ssize_t n = fd_recv_with_fds(sock, buf, PROTO_MAX_MSG, fds, PROTO_MAX_FDS, &n_fds);
        if (n < 0)
                return (int)n;
        if (n == 0 && n_fds == 0)
                return 0;
        buf[n] = 0;
        json_error_t jerr;
        json_t *msg = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
        if (!msg || !json_is_object(msg)) {
                json_decref(msg);
                proto_close_fds(fds, n_fds);
                return -EBADMSG;
        }
        if (ret_fds) {
                memcpy(ret_fds, fds, sizeof(int) * n_fds);
                for (size_t i = n_fds; i < PROTO_MAX_FDS; i++)
                        ret_fds[i] = -1;
        } else
                proto_close_fds(fds, n_fds);
        if (ret_n_fds)
                *ret_n_fds = ret_fds ? n_fds : 0;
        *ret = msg;
        return 1;
}

json_t *proto_error_msg(const nook_error *e) {
        return json_pack("{s:s, s:s, s:s, s:i}", "op", "error", "code", nook_errc_to_string(e->code),
                "message", e->msg, "errno", e->sys_errno);
}

bool proto_end_maybe_oom(int status) {
        return (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL);
}

const char *proto_end_reason(bool stopping, int status) {
        return stopping && WIFSIGNALED(status) ? "stopped" : "exited";
}

json_t *proto_exited_msg(uint64_t id, json_int_t status, const char *reason, const char *error) {
        json_t *m = json_pack("{s:s, s:I, s:I, s:s, s:s?}", "op", "exited", "id", (json_int_t)id, "status",
                status, "reason", reason, "error", error);
        if (!m && error)
                m = json_pack("{s:s, s:I, s:I, s:s, s:s}", "op", "exited", "id", (json_int_t)id, "status",
                        status, "reason", reason, "error",
                        "the command could not start (the sandbox gave no readable reason)");
        return m;
}

int proto_error_from_msg(json_t *msg, nook_error *err) {
        const char *code = json_string_value(json_object_get(msg, "code"));
        const char *text = json_string_value(json_object_get(msg, "message"));
        nook_errc c = nook_errc_from_string(code);
        if (c == NOOK_E_OK)
                c = NOOK_E_INTERNAL;
        json_int_t e = json_integer_value(json_object_get(msg, "errno"));
        int r = nook_err_set(err, c, "%s", text ? text : "unknown error");
        if (err && e > 0 && e < 4096)
                err->sys_errno = (int)e;
        return r;
}

const char *proto_op(json_t *msg) {
        const char *op = json_string_value(json_object_get(msg, "op"));
        return op ? op : "";
}

void proto_close_fds(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                fds[i] = safe_close(fds[i]);
}
