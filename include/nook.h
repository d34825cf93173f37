/* SPDX-License-Identifier: Apache-2.0 */
/* nook — a local, daemonless sandbox runtime.  This is the whole public C API: opaque handles,
 * one error type (nook_error), and functions that return >= 0 on success and -code on failure.
 * Only symbols declared here with NOOK_PUBLIC are exported from libnook.so. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NOOK_PUBLIC __attribute__((visibility("default")))
#else
#define NOOK_PUBLIC
#endif

/* ---- errors ----------------------------------------------------------------------------- */

typedef enum nook_errc {
        NOOK_E_OK = 0,
        NOOK_E_INVALID, /* bad input: a field, a path, a name */
        NOOK_E_REFUSED, /* a path outside the workspace, a forbidden request */
        NOOK_E_NOT_FOUND, /* no such sandbox, file, image */
        NOOK_E_EXISTS, /* already exists */
        NOOK_E_STATE, /* wrong state for the operation (e.g. not running) */
        NOOK_E_MISSING_FEATURE, /* the host lacks something the request needs */
        NOOK_E_TIMEOUT, /* a deadline passed */
        NOOK_E_IO, /* a system call failed */
        NOOK_E_NOMEM, /* out of memory */
        NOOK_E_BUSY, /* locked or in use */
        NOOK_E_INTERNAL, /* a bug in nook, or a protocol violation */
        NOOK_E_CONFLICT, /* a merge found paths changed on both sides (nook_merge) */
        _NOOK_E_MAX,
} nook_errc;

typedef struct nook_error {
        nook_errc code;
        int sys_errno; /* 0 if not from a syscall */
        char msg[512]; /* fixed size: errors are filled without malloc, even after clone() */
} nook_error;

/* "invalid", "refused", "not_found", ... — the codes the Node binding exposes as SandboxError.code */
NOOK_PUBLIC const char *nook_errc_to_string(nook_errc code);
NOOK_PUBLIC const char *nook_version(void);
/* Frees memory that libnook returned to the caller (strings, buffers, arrays). */
NOOK_PUBLIC void nook_free(void *p);

/* Docker-style durations ("500ms", "30s", "5m", "1h30m"; a plain number is seconds) and sizes
 * ("512m", "2g", "1048576k", "100b"), parsed once here for the CLI and the bindings. */
NOOK_PUBLIC int nook_parse_duration_ms(const char *s, uint64_t *ret_ms, nook_error *err);
NOOK_PUBLIC int nook_parse_size(const char *s, uint64_t *ret_bytes, nook_error *err);
/* A signal by name, with or without "SIG", in any case ("TERM", "sigkill", "RTMIN+2"), or by
 * number, as kill(1) and docker kill take them. */
NOOK_PUBLIC int nook_parse_signal(const char *s, int *ret_sig, nook_error *err);
/* Whether s is UTF-8 text, as every string in a spec or a command must be (they travel as JSON);
 * when it is not, *ret_off (if given) is the offset of the first byte that breaks it. */
NOOK_PUBLIC bool nook_text_is_utf8(const char *s, size_t *ret_off);

/* The host capability report of `nook doctor`, as a JSON object {"ok": bool, "checks": [...]};
 * returns 1 when nook can run sandboxes here, 0 when it cannot. */
NOOK_PUBLIC int nook_doctor(char **ret_json, nook_error *err);

/* ---- context: the state root --------------------------------------------------------------- */

/* One handle per state root.  home NULL: $NOOK_HOME, else /var/lib/nook for root, else
 * $XDG_DATA_HOME/nook (default ~/.local/share/nook).  Created with mode 0700. */
typedef struct nook nook;
NOOK_PUBLIC int nook_open(const char *home, nook **ret, nook_error *err);
NOOK_PUBLIC nook *nook_close(nook *n);
NOOK_PUBLIC const char *nook_home(const nook *n);
/* The state root nook_open(home) would use, without creating anything (shell completion must
 * not make a state folder appear). */
NOOK_PUBLIC int nook_home_resolve(const char *home, char **ret_path, nook_error *err);
/* Checks a sandbox name: 1-63 chars of [a-z0-9][a-z0-9_.-]*, no "..". */
NOOK_PUBLIC int nook_name_validate(const char *name, nook_error *err);

/* ---- workspace: a host directory bind-mounted at /workspace --------------------------------- */

/* Guest paths: "/src/x", "/workspace/src/x" and "src/x" are the same file.  A ".." segment is
 * refused before normalising, the result is checked for containment, and no symlink is followed
 * out of the workspace.  Refusal is NOOK_E_REFUSED, "Refusing a path outside the workspace". */
typedef enum nook_file_type {
        NOOK_FILE_REGULAR,
        NOOK_FILE_DIRECTORY,
        NOOK_FILE_SYMLINK,
        NOOK_FILE_OTHER,
} nook_file_type;

typedef struct nook_stat {
        nook_file_type type;
        uint64_t size;
        uint32_t mode; /* permission bits */
        int64_t mtime_ns;
} nook_stat;

typedef struct nook_dirent {
        char *name;
        nook_file_type type;
        uint64_t size;
} nook_dirent;

typedef struct nook_ws nook_ws;

/* The host path of a sandbox's workspace, even before the sandbox exists.  Creates nothing. */
NOOK_PUBLIC int nook_ws_dir(nook *n, const char *name, char **ret_path, nook_error *err);
/* Opens the workspace of sandbox name, creating its directory if needed (staging files before
 * the first create is allowed). */
NOOK_PUBLIC int nook_ws_open(nook *n, const char *name, nook_ws **ret, nook_error *err);
/* The same for a workspace that exists (a sandbox's, or one staged): creates nothing, and a name
 * with neither is NOOK_E_NOT_FOUND.  For reading, listing, removing and renaming. */
NOOK_PUBLIC int nook_ws_open_existing(nook *n, const char *name, nook_ws **ret, nook_error *err);
NOOK_PUBLIC nook_ws *nook_ws_close(nook_ws *w);
NOOK_PUBLIC const char *nook_ws_root(const nook_ws *w);
/* Absolute host path of a guest path, under the same rule (or an error). */
NOOK_PUBLIC int nook_ws_host_path(nook_ws *w, const char *path, char **ret, nook_error *err);
/* Atomic for readers, not durable (no fsync): a reader sees the old file or the new one, never
 * part of one.  A new name is linked to an unnamed O_TMPFILE file once its data is written; an
 * existing file is replaced by rename (a named temporary where the filesystem has no O_TMPFILE).
 * Creates parents; replaces a symlink, never writes through it.  A new file is 0644; a file
 * replaced keeps its permission bits (set-id bits never carry over).  Takes the name's lock shared
 * (against nook_sandbox_remove) for the call; the handle keeps that lock file open from its first
 * change on (one descriptor). */
NOOK_PUBLIC int nook_ws_write(nook_ws *w, const char *path, const void *data, size_t len, nook_error *err);
/* The same, with fd's content: a regular file brings its permission bits (not set-id ones);
 * a pipe brings none, as nook_ws_write. */
NOOK_PUBLIC int nook_ws_write_fd(nook_ws *w, const char *path, int fd, nook_error *err);
/* Flags for the _ex calls below. */
/* Writes into the file itself, as a host program's open(O_CREAT|O_TRUNC) + write: a new file is
 * created in place, an existing regular file is truncated and written, keeping its inode (hard
 * links, owner, extended attributes; a program holding it open sees the new bytes) and its
 * permission bits (set-id bits are dropped).  A symlink that stays inside is written through.
 * Not atomic: a reader may see part of the file, and a writer killed part way leaves part of it
 * (a new file whose write fails is removed).  Anything but a regular file is refused. */
#define NOOK_WS_WRITE_IN_PLACE (1u << 0)
/* nook_ws_write and nook_ws_write_fd with flags (0: the same as they). */
NOOK_PUBLIC int nook_ws_write_ex(
        nook_ws *w, const char *path, const void *data, size_t len, unsigned flags, nook_error *err);
NOOK_PUBLIC int nook_ws_write_fd_ex(nook_ws *w, const char *path, int fd, unsigned flags, nook_error *err);
/* Reads a regular file (max 0 = 1 GiB); *ret_data is NUL-terminated for convenience.  This and
 * nook_ws_open_read leave the file's access time as it was (O_NOATIME where the kernel allows it:
 * the caller owns the file or holds CAP_FOWNER): the workspace's times tell what the sandbox did. */
NOOK_PUBLIC int nook_ws_read(
        nook_ws *w, const char *path, size_t max, void **ret_data, size_t *ret_len, nook_error *err);
NOOK_PUBLIC int nook_ws_open_read(nook_ws *w, const char *path, int *ret_fd, nook_error *err);
/* 1 if it exists, 0 if not; never reads the file. */
NOOK_PUBLIC int nook_ws_exists(nook_ws *w, const char *path, nook_error *err);
NOOK_PUBLIC int nook_ws_stat(nook_ws *w, const char *path, nook_stat *ret, nook_error *err);
NOOK_PUBLIC int nook_ws_mkdir(nook_ws *w, const char *path, nook_error *err);
NOOK_PUBLIC int nook_ws_list(
        nook_ws *w, const char *path, nook_dirent **ret, size_t *ret_n, nook_error *err);
NOOK_PUBLIC void nook_dirents_free(nook_dirent *d, size_t n);
NOOK_PUBLIC int nook_ws_remove(nook_ws *w, const char *path, nook_error *err);
NOOK_PUBLIC int nook_ws_rename(nook_ws *w, const char *from, const char *to, nook_error *err);

/* nook cp: docker cp between the host and sandbox name (which must exist: NOOK_E_NOT_FOUND
 * otherwise; nook_ws_open stages files before a first create).  A guest path under /workspace
 * or relative is in the workspace; any other absolute path is in the sandbox's root filesystem,
 * reached through its running init (a stopped sticky sandbox is started for the copy and stopped
 * again; a stopped ephemeral one is NOOK_E_STATE), with the same rule:
 * ".." refused, no symlink followed out (absolute links resolve inside that root), and kernel
 * filesystems (/proc, /sys, ...) refused.  Directories nest into an existing directory, "dir/."
 * copies contents, a file onto a directory goes inside it; symlinks are copied as links;
 * FIFOs, devices and sockets are refused; what is copied in belongs to the sandbox's root.
 * Built in a temporary sibling and renamed into place: a failed copy leaves nothing.
 * host_src/host_dst NULL: a tar stream on fd instead (read: extracted into dst, which must be a
 * directory; written: src under its own name). */
NOOK_PUBLIC int nook_cp_in(
        nook *n, const char *name, const char *host_src, int fd, const char *dst, nook_error *err);
NOOK_PUBLIC int nook_cp_out(
        nook *n, const char *name, const char *src, const char *host_dst, int fd, nook_error *err);

/* ---- sandboxes ------------------------------------------------------------------------------ */

/* spec_json is a JSON object (NULL or "{}" for the defaults):
 *   image            "host" (default: the host's /usr read-only, a generated /etc), the path of
 *                    a root filesystem directory, or a registry reference ("alpine:3"), pulled at
 *                    create as pullPolicy says
 *   env              {"NAME": "value"} for every exec (never put secrets here: it is stored)
 *   labels           {"key": "value"}
 *   persistence      "ephemeral" (default: the writable root layer is discarded on stop) or
 *                    "sticky" (kept and reused by the next start/create of the same name)
 *   maxDurationSecs  retire (stop, keep the workspace) after this long; 0 = never
 *   idleTimeoutSecs  stop when no exec ran and no client was attached for this long; 0 = never
 *   security         "default" or "restricted"
 *   network          "off" (default: loopback only), "public" or "policy" (networkPolicy)
 *   workdir          default working directory of execs (default /workspace)
 *   user             default user of execs (default root of the sandbox)
 *   secrets          {"NAME": {"value": "...", "hosts": ["api.example.com", "*.example.com"],
 *                    "body": false}}: the guest's NAME is a placeholder that the egress gateway
 *                    replaces by value in HTTPS requests to hosts only.  The value is needed at
 *                    create and never stored (a later start has none: the placeholder is blocked)
 *   egress           {"allowHttp": ["METHOD URL-GLOB", ...], "caPem": "PEM", "audit": bool}
 *                    (secrets and egress need network "public" or "policy")
 * Unknown fields are an error naming them. */
#define NOOK_CREATE_REPLACE (1u << 0) /* stop a running sandbox of that name first */
/* The sandbox lives as long as this nook handle: when the handle is closed or the calling process
 * dies (even by SIGKILL), the supervisor sees the lifeline it was given close, kills the sandbox's
 * processes and removes its cgroup; nook_sandbox_list/inspect then remove what is left (record,
 * state, workspace).  Used by `nook run`.  The handle holds one descriptor per tied create
 * until nook_close.  A detached exec with stop_sandbox_when_done (`nook run -d`) takes the
 * sandbox over when the supervisor accepts it: from then on it lives as long as that command,
 * not as the handle, so a creator killed before that point leaves nothing running. */
#define NOOK_CREATE_TIED (1u << 1)
/* Takes no baselines (docs/design/diff-merge.md): nook_diff and nook_merge are refused for this
 * sandbox, saying so.  For a sandbox removed when its one command ends (`nook run` without
 * --keep or -d), which nobody merges: two files less made and deleted per create. */
#define NOOK_CREATE_NO_BASELINE (1u << 2)
/* The sandbox runs one command (`nook run` without --keep or -d): its init keeps no spare exec
 * helper forked ahead of time (docs/design/runtime.md, Exec), which such a sandbox would fork and
 * kill unused, twice (the one at the start and the next one after the command started).  Every
 * exec still works: its helper is forked when it comes. */
#define NOOK_CREATE_ONE_SHOT (1u << 3)
/* The name must be free: a sandbox of that name, running or stopped, is refused (NOOK_E_EXISTS)
 * and left as it is.  `nook run` passes it, as `docker run --name` refuses a name in use: without
 * it a run over a stopped sandbox took its workspace, and removed it when the command ended. */
#define NOOK_CREATE_EXCLUSIVE (1u << 4)

NOOK_PUBLIC int nook_sandbox_create(
        nook *n, const char *name, const char *spec_json, unsigned flags, nook_error *err);
/* Starts a stopped sandbox again from its stored spec. */
NOOK_PUBLIC int nook_sandbox_start(nook *n, const char *name, nook_error *err);
/* Stops: processes get SIGTERM, then SIGKILL after timeout_ms: 0 kills at once (docker stop -t 0),
 * NOOK_STOP_TIMEOUT_DEFAULT waits 10 s, more than an hour is NOOK_E_INVALID.  The workspace
 * stays.  Stopping a stopped sandbox succeeds. */
#define NOOK_STOP_TIMEOUT_DEFAULT UINT64_MAX
#define NOOK_STOP_TIMEOUT_MAX_MS 3600000u
NOOK_PUBLIC int nook_sandbox_stop(nook *n, const char *name, uint64_t timeout_ms, nook_error *err);
/* Sends signal sig (1-64) to every command running in the sandbox, as docker kill sends one to a
 * container's process: each exec's command gets it, as from nook_exec_signal.  The sandbox keeps
 * running unless a `run -d` command ends on it (the sandbox stops with that command).  SIGKILL
 * instead stops the sandbox at once, with every process in it (nook_sandbox_stop, timeout 0).
 * A sandbox that is not running, or is paused, is NOOK_E_STATE. */
NOOK_PUBLIC int nook_sandbox_kill(nook *n, const char *name, int sig, nook_error *err);
/* Deletes the sandbox, its writable layer, its workspace and its record: unconditionally. */
NOOK_PUBLIC int nook_sandbox_remove(nook *n, const char *name, nook_error *err);
/* Removes every stopped sandbox like nook_sandbox_remove (workspace included); sticky ones only
 * with include_sticky.  ret_json: the names removed.  Also removes this user's runtime folders
 * (sockets, logs, ephemeral layers, on a tmpfs) whose state folder was deleted by hand. */
NOOK_PUBLIC int nook_sandbox_prune(nook *n, bool include_sticky, char **ret_json, nook_error *err);
/* A JSON object describing the sandbox (state, why it stopped, spec, times, workspace). */
NOOK_PUBLIC int nook_sandbox_inspect(nook *n, const char *name, char **ret_json, nook_error *err);
/* Waits until sandbox name has stopped (docker wait): *ret_exit_code is then how the command of a
 * `run -d` ended, as a shell says it (128 + signal when it was killed), or -1 when the sandbox
 * had no such command.  timeout_ms 0: no deadline; past it NOOK_E_TIMEOUT.  A sandbox that is
 * removed meanwhile is NOOK_E_NOT_FOUND.  Watches its supervisor (pidfd): no polling while it
 * runs. */
NOOK_PUBLIC int nook_sandbox_wait(
        nook *n, const char *name, uint64_t timeout_ms, int *ret_exit_code, nook_error *err);
/* A JSON array of those objects; label_filters ("k=v" or "k") keep the matching ones. */
NOOK_PUBLIC int nook_sandbox_list(
        nook *n, const char *const *label_filters, char **ret_json, nook_error *err);

/* What the sandbox's detached commands (nook_exec with detach and no stdout/stderr fd, `exec -d`,
 * `run -d`) printed: stdout records to out_fd, stderr records to err_fd.  Kept per sandbox in
 * its state folder, at most 2 x 1 MiB (rotated by size), until the sandbox is removed. */
typedef struct nook_logs_opts {
        bool follow; /* then keep printing until the sandbox stops */
        bool timestamps; /* prefix each line with its RFC 3339 time (UTC, nanoseconds) */
        bool system; /* the supervisor's own diagnostics instead (no --since/--timestamps) */
        bool escape_terminals; /* on out_fd/err_fd that are terminals: control characters (but
                                * tab) as \xNN, so the guest's bytes never drive the terminal */
        const char *tail; /* NULL or "all": everything; "N": the last N lines */
        const char *since; /* NULL: all; a duration back from now ("10m", a unit is needed), an
                            * RFC 3339 time, or a Unix time ("1767366245.5"), as docker takes them */
} nook_logs_opts;
NOOK_PUBLIC int nook_sandbox_logs(
        nook *n, const char *name, const nook_logs_opts *o, int out_fd, int err_fd, nook_error *err);
/* Checks o's tail, since and their combination with system, as nook_sandbox_logs does first:
 * NOOK_E_INVALID naming the bad value (a caller's usage error). */
NOOK_PUBLIC int nook_logs_opts_check(const nook_logs_opts *o, nook_error *err);

/* ---- egress gateway (secrets by placeholder, HTTP rules, audit: spec "secrets" and "egress") ---- */

/* The gateway's audit log (<state>/egress.log): one JSON object per request or refused
 * connection — time, sandbox, method, host, path, status, decision (allow|deny|block|error),
 * rule, reason, bytesUp, bytesDown, proto — never a secret or a placeholder.  Kept until the
 * sandbox is removed. */
typedef struct nook_egress_log_opts {
        bool follow; /* keep printing until the sandbox stops */
        bool json; /* one JSON object a line (control characters \u-escaped) instead of text */
} nook_egress_log_opts;
/* Prints the log to out_fd: text lines "TIME DECISION STATUS METHOD HOSTPATH (RULE|REASON)" with
 * control characters as \xNN (the fields come from the guest), or JSON lines.  A sandbox whose
 * spec starts no gateway (no secrets, allowHttp or audit) is NOOK_E_INVALID, as `docker logs`
 * refuses a container without logging: with a network its traffic went unaudited. */
NOOK_PUBLIC int nook_egress_log(
        nook *n, const char *name, const nook_egress_log_opts *o, int out_fd, nook_error *err);
/* The entries so far as one JSON array ("[]" for a sandbox without a gateway). */
NOOK_PUBLIC int nook_egress_log_entries(nook *n, const char *name, char **ret_json, nook_error *err);

/* A running sandbox's cgroup statistics as JSON: cpuUsageNs, memoryBytes, memoryPeakBytes, pids,
 * oomKills, and the limits. */
NOOK_PUBLIC int nook_sandbox_stats(nook *n, const char *name, char **ret_json, nook_error *err);
/* Changes a running sandbox's limits: {"cpus": N, "memoryMib": M (or "memory": "1g"), "pidsMax": P}.
 * Above the spec's maxCpus / maxMemoryMib headroom: NOOK_E_REFUSED. */
NOOK_PUBLIC int nook_sandbox_update(nook *n, const char *name, const char *update_json, nook_error *err);

/* Named volumes (<home>/volumes/NAME): outlive sandboxes, can be shared; a spec mounts one with
 * {"type": "volume", "name": NAME, "target": "/path"} (made on first use). */
NOOK_PUBLIC int nook_volume_create(nook *n, const char *name, char **ret_path, nook_error *err);
NOOK_PUBLIC int nook_volume_list(nook *n, char **ret_json, nook_error *err);
/* Refused (NOOK_E_BUSY) while a running sandbox mounts it. */
NOOK_PUBLIC int nook_volume_remove(nook *n, const char *name, nook_error *err);

typedef struct nook_exec_opts {
        const char *const *argv; /* the command, or NULL when shell is set */
        const char *shell; /* a shell string, run as /bin/sh -lc SHELL */
        const char *const *env; /* "NAME=value", over the sandbox's env */
        const char *const *secret_env; /* "NAME=value", never stored, logged or put in an argv */
        const char *cwd; /* default: the sandbox's workdir, /workspace */
        const char *user; /* "name", "uid" or "uid:gid"; default root */
        /* passed to the command as is (-1: /dev/null), and the guest's for as long as any of its
         * processes keeps them: pass pipes or sockets, never a terminal (it could read what is
         * typed there later) or a file (it could truncate it); `nook` relays those itself */
        int stdin_fd, stdout_fd, stderr_fd;
        uint64_t timeout_ms; /* 0: none; on expiry the whole process tree is killed */
        bool detach; /* keep running when this client goes away */
        bool tty; /* a pseudo-terminal instead of the three fds */
        unsigned short rows, cols; /* its initial window size */
        /* The sandbox stops when this command ends (`nook run -d`, `nook run --keep`), and its
         * status is the exit record's commandExit (nook_sandbox_wait, "exitCode" in inspect).
         * With detach, in a NOOK_CREATE_TIED sandbox: its tie to the creating handle ends here. */
        bool stop_sandbox_when_done;
        /* Without detach: when this command ends while its client is connected, the supervisor
         * begins stopping the sandbox at once, before the removal's request (`nook run`).  Free
         * the exec, then call nook_sandbox_remove with the same handle: it asks on the exec's
         * connection (the handle keeps it) and waits there.  A client that dies before it asked
         * leaves a sandbox stopped as "client_gone", which the next nook_sandbox_list or inspect
         * removes, as for NOOK_CREATE_TIED; one that never asks (but lives on) a stopped one. */
        bool remove_sandbox_when_done;
} nook_exec_opts;

/* Zeroes o and sets the stdio fds to -1. */
NOOK_PUBLIC void nook_exec_opts_init(nook_exec_opts *o);

typedef struct nook_exec_result {
        int exit_code; /* 0-255, or -1 when killed by a signal */
        int signal; /* the terminating signal, 0 if none */
        char reason[16]; /* "exited", "timeout", "cancelled", "stopped" (the sandbox stopped while it
                          * ran: its SIGTERM, or init's end), "oom" */
} nook_exec_result;

typedef struct nook_exec nook_exec;
NOOK_PUBLIC int nook_exec_start(
        nook *n, const char *name, const nook_exec_opts *o, nook_exec **ret, nook_error *err);
/* nook_sandbox_create, then o's command started in the new sandbox as nook_exec_start would (*ret
 * the same), but without waiting for the create: the request goes with it and the sandbox's
 * supervisor runs the command as soon as the sandbox is ready.  What nook run does.  Not for a
 * detached command (NOOK_E_INVALID).  On error nothing was created and *ret is untouched. */
NOOK_PUBLIC int nook_sandbox_create_exec(nook *n, const char *name, const char *spec_json, unsigned flags,
        const nook_exec_opts *o, nook_exec **ret, nook_error *err);
/* The process id of the command's helper inside the sandbox (0 until known). */
NOOK_PUBLIC int nook_exec_pid(const nook_exec *e);
/* With opts.tty: the terminal's master side (read the command's output, write its input,
 * TIOCSWINSZ to resize).  Owned by the exec; -1 without a terminal. */
NOOK_PUBLIC int nook_exec_tty_fd(const nook_exec *e);
/* A descriptor that becomes readable when the exec has news; for event loops. */
NOOK_PUBLIC int nook_exec_fd(const nook_exec *e);
/* Waits until the sandbox reports the command started (its pid known) or ended; afterwards
 * nook_exec_fd() turns readable only when the command ends.  With detach and no stdout/stderr
 * fd, the command's output goes to the sandbox's log (nook_sandbox_logs). */
NOOK_PUBLIC int nook_exec_wait_started(nook_exec *e, nook_error *err);
/* For event loops: handles the messages that have arrived on nook_exec_fd() without blocking.
 * Call it whenever that descriptor is readable.  Returns 1 with *ret filled once the command has
 * ended (detached: once it started), 0 while it still runs, or <0 when the connection failed. */
NOOK_PUBLIC int nook_exec_process(nook_exec *e, nook_exec_result *ret, nook_error *err);
/* Waits for the command to end.  Detached: until it started, or ended because it could not start
 * (then nook_exec_start_error() says why). */
NOOK_PUBLIC int nook_exec_wait(nook_exec *e, nook_exec_result *ret, nook_error *err);
/* Why the command could not start ("cannot run 'x': No such file or directory"; the same line,
 * after "nook: ", is on its stderr), or NULL when it started or has not ended yet. */
NOOK_PUBLIC const char *nook_exec_start_error(const nook_exec *e);
/* Kills the command's whole process tree. */
NOOK_PUBLIC int nook_exec_cancel(nook_exec *e, nook_error *err);
NOOK_PUBLIC int nook_exec_signal(nook_exec *e, int sig, nook_error *err);
/* Closing a running, non-detached exec kills its process tree. */
NOOK_PUBLIC nook_exec *nook_exec_free(nook_exec *e);
/* start + wait. */
NOOK_PUBLIC int nook_exec_run(
        nook *n, const char *name, const nook_exec_opts *o, nook_exec_result *ret, nook_error *err);

/* ---- images ------------------------------------------------------------------------------- */

/* Registry images by reference: "alpine", "alpine:3.20", "docker.io/library/alpine:3",
 * "ghcr.io/o/r:tag", "localhost:5000/x@sha256:...".  Content-addressed blobs and unpacked layers
 * live under <home>/images; records in the state database.  Credentials come from the options,
 * else $REGISTRY_AUTH_FILE, else ~/.docker/config.json, and are never stored by nook.
 * $NOOK_INSECURE_REGISTRIES (comma-separated hosts, plain HTTP) and $NOOK_REGISTRY_CA_FILE
 * apply when the options leave them unset — also to pulls that `create` makes. */
typedef struct nook_pull_layer {
        const char *digest;
        uint64_t done, total; /* bytes */
        const char *state; /* "waiting", "downloading", "unpacking", "done", "cached" */
} nook_pull_layer;

/* Called on the pulling thread about every 100 ms and once at the end. */
typedef void (*nook_pull_progress_fn)(void *userdata, const nook_pull_layer *layers, size_t n);

typedef struct nook_pull_opts {
        const char *username, *password; /* explicit credentials, or NULL */
        const char *auth_file; /* a docker config.json, or NULL for the default */
        const char *ca_file; /* trusted besides the system CAs, or NULL */
        const char *const *insecure_registries; /* hosts reached over plain HTTP, or NULL */
        uint64_t stall_timeout_ms; /* a transfer with no byte for this long fails; 0: 30 s */
        unsigned jobs; /* parallel layer downloads; 0: 4 */
        nook_pull_progress_fn progress;
        void *userdata;
} nook_pull_opts;

NOOK_PUBLIC void nook_pull_opts_init(nook_pull_opts *o);
/* Pulls for this host's platform; *ret_json (may be NULL) is what nook_image_inspect gives. */
NOOK_PUBLIC int nook_image_pull(
        nook *n, const char *ref, const nook_pull_opts *o, char **ret_json, nook_error *err);
/* A JSON array of image objects, newest pull first. */
NOOK_PUBLIC int nook_image_list(nook *n, char **ret_json, nook_error *err);
/* {"digest", "names", "platform", "size", "pulledAt", "config": {"env", "entrypoint", "cmd",
 *  "workdir", "user"}, "defaultCommand": [...], "layers": [{"digest", "diffId", "size"}]}.
 * defaultCommand is Entrypoint + Cmd: what `nook run IMAGE` runs without a command. */
NOOK_PUBLIC int nook_image_inspect(nook *n, const char *ref, char **ret_json, nook_error *err);
/* Removes a name (the image goes with its last name) or, given a digest, the image.  Refused
 * (NOOK_E_BUSY) naming the sandbox when one uses it.  Files are freed by nook_image_prune. */
NOOK_PUBLIC int nook_image_remove(nook *n, const char *ref, nook_error *err);
/* Removes images without names that nothing uses, then blobs and layers no image uses. */
NOOK_PUBLIC int nook_image_prune(nook *n, uint64_t *ret_freed_bytes, nook_error *err);

/* Image files.  Import reads an OCI image layout directory, an oci-archive (a tar of one) or a
 * `docker save` tar, detected, or named as skopeo does: "oci:DIR[:NAME]",
 * "oci-archive:FILE[:NAME]", "docker-archive:FILE[:NAME]" (NAME picks one of several images).
 * Every blob goes through the checks, store and unpacking of a pull; a hostile or damaged input
 * is refused naming what is wrong, and leaves no record, blob or temporary file behind. */
typedef struct nook_image_import_opts {
        const char *name; /* NULL: the archive's own (annotation, RepoTags); none is an error */
        const char *format; /* "oci", "oci-archive", "docker-archive", or NULL to detect */
        unsigned jobs; /* parallel layers; 0: 4 */
        nook_pull_progress_fn progress; /* as for a pull; "downloading" is copying here */
        void *userdata;
} nook_image_import_opts;

typedef struct nook_image_export_opts {
        const char *format; /* "oci" (a directory), "oci-archive" (default), "docker-archive" */
        bool force; /* replace an existing path (a symlink there is replaced, never followed) */
} nook_image_export_opts;

NOOK_PUBLIC void nook_image_import_opts_init(nook_image_import_opts *o);
/* *ret_json (may be NULL) is what nook_image_inspect gives. */
NOOK_PUBLIC int nook_image_import(
        nook *n, const char *source, const nook_image_import_opts *o, char **ret_json, nook_error *err);
NOOK_PUBLIC void nook_image_export_opts_init(nook_image_export_opts *o);
/* Writes the stored manifest, config and layer blobs as pulled, so a later import gives the same
 * image digest.  Built beside path and renamed into place; an existing path is NOOK_E_EXISTS
 * unless o->force.  docker-archive holds the OCI layout and docker's manifest.json. */
NOOK_PUBLIC int nook_image_export(
        nook *n, const char *ref, const char *path, const nook_image_export_opts *o, nook_error *err);

/* ---- snapshots ------------------------------------------------------------------------------ */

/* A snapshot is the disk state of a stopped sticky sandbox: its writable root layer (files,
 * modes, ownership, user.* xattrs, deletions of image files) on top of the image it was booted
 * from, and with NOOK_SNAPSHOT_WITH_WORKSPACE its workspace too.  Never memory, processes,
 * sockets or devices.  Content-addressed ("sha256:..."), stored once, named; a sandbox boots from
 * one with the spec field "snapshot": NAME or digest (cold boot: its image is the snapshot's
 * base, its workspace restored from the snapshot when it has one and the workspace is empty).
 * Snapshot JSON: {"name", "digest", "base", "parent", "withWorkspace", "holds", "sourceSandbox",
 * "createdAt", "rootfsSize", "workspaceSize", "path"}; inspect adds "usedBy". */
#define NOOK_SNAPSHOT_WITH_WORKSPACE (1u << 0)

/* Progress of a long copy, called about every 100 ms and once at the end. */
typedef void (*nook_progress_fn)(void *userdata, uint64_t done, uint64_t total);

/* Refused with NOOK_E_STATE for a running sandbox (stop it first) and for an ephemeral one (its
 * layer is gone at stop: create it sticky).  name NULL: "<sandbox>-<epoch seconds>" (then "-2", "-3"... within one second).
 * Content is stored once, under one name: with name NULL, content that a snapshot holds already
 * is success, *ret_json being that snapshot with "alreadyPresent": true (as for an import); with
 * a name, a name that is taken or content held under another name is NOOK_E_EXISTS. */
NOOK_PUBLIC int nook_snapshot_create(
        nook *n, const char *sandbox, const char *name, unsigned flags, char **ret_json, nook_error *err);
/* A JSON array of snapshot objects, newest first. */
NOOK_PUBLIC int nook_snapshot_list(nook *n, char **ret_json, nook_error *err);
NOOK_PUBLIC int nook_snapshot_inspect(nook *n, const char *snap, char **ret_json, nook_error *err);
/* Refused (NOOK_E_BUSY) naming the sandbox whose spec boots from it, or the snapshot taken on it. */
NOOK_PUBLIC int nook_snapshot_remove(nook *n, const char *snap, nook_error *err);
/* One file: a zstd-compressed tar of snapshot.json and the layer tars.  Written beside path and
 * renamed into place; an existing path is NOOK_E_EXISTS unless flags has
 * NOOK_SNAPSHOT_EXPORT_FORCE (then a file or a symlink there is replaced, the link never followed;
 * a directory never is).  progress may be NULL. */
#define NOOK_SNAPSHOT_EXPORT_FORCE (1u << 0)
NOOK_PUBLIC int nook_snapshot_export(nook *n, const char *snap, const char *path, unsigned flags,
        nook_progress_fn progress, void *userdata, nook_error *err);
/* Verifies every digest and unpacks with the image layer rules; a corrupted, truncated or hostile
 * file is refused (NOOK_E_REFUSED) and leaves nothing behind.  name NULL: the name in the file. */
NOOK_PUBLIC int nook_snapshot_import(nook *n, const char *path, const char *name, nook_progress_fn progress,
        void *userdata, char **ret_json, nook_error *err);

/* ---- pause, resume, branch (docs/design/branch.md) ------------------------------------------ */

/* Freezes every process of a running sandbox (cgroup freezer, v1 or v2) / thaws it.  Pausing a
 * paused sandbox or resuming a running one is a no-op.  NOOK_E_STATE when it is not running;
 * NOOK_E_MISSING_FEATURE naming why when the host gives no writable freezer (nook doctor says it).
 * While paused: exec is NOOK_E_STATE naming `nook resume`; the idle timer stands still; the maximum
 * duration keeps counting; stop and remove work (thaw, then stop). */
NOOK_PUBLIC int nook_pause(nook *n, const char *name, nook_error *err);
NOOK_PUBLIC int nook_resume(nook *n, const char *name, nook_error *err);

/* Refuses with NOOK_E_MISSING_FEATURE: memory branches need CRIU checkpoint support. */
#define NOOK_BRANCH_MEMORY (1u << 0)
/* New sandboxes from src's current disk state: its writable root layer and its workspace, copied
 * copy-on-write where the filesystem reflinks (else copy_file_range, else read/write).  A running
 * src is paused for the copy only; a branch of a running src is started, of a stopped one stays
 * stopped.  count 0 makes one branch named name; count N (1..100) makes name-1 .. name-N, all or
 * none.  ret_json (may be NULL): a JSON array of the new names.  Each branch records its source
 * and branch point (inspect: "branchOf", "branchPoint"). */
NOOK_PUBLIC int nook_branch(nook *n, const char *src, const char *name, unsigned count, unsigned flags,
        char **ret_json, nook_error *err);
/* ---- diff and merge (docs/design/diff-merge.md) ----
 * A sandbox's baseline is its workspace (and writable root layer) as they were when it was first
 * created, or branched: a manifest of every path with its type, mode, owner, size, times and
 * content hash, kept in its state folder until `nook rm`. */
#define NOOK_DIFF_PATCH (1u << 0) /* add a unified diff ("patch") to each changed text file */
#define NOOK_DIFF_ROOT (1u << 1) /* the writable root layer's changes, not the workspace's */

/* The changes since the baseline, as JSON sorted by path:
 * {"sandbox", "scope": "workspace"|"root", "changes": [{"path", "kind": "added"|"deleted"|
 * "modified"|"type"|"mode", "type", "mode", "size"?, "target"?, "oldType"?, "oldMode"?,
 * "oldTarget"?, "patch"?, "pathEscaped"?, "targetEscaped"?, "whiteout"?, "opaque"?}],
 * "summary": {"added": N, ...}}.
 * A sandbox created before baselines existed: NOOK_E_NOT_FOUND. */
NOOK_PUBLIC int nook_diff(nook *n, const char *name, unsigned flags, char **ret_json, nook_error *err);

/* Applies branch's workspace changes since its baseline onto a target's workspace (which may be
 * running).  opts_json: {"into": TARGET, "strategy": "refuse"|"ours"|"theirs", "dryRun": bool},
 * all optional ("into" defaults to a branch's recorded source).
 * Result: {"branch", "into", "strategy", "dryRun", "merged", "applied": [{"path", "kind"}],
 * "conflicts": [{"path", "branch": KIND, "target": "added"|"deleted"|"modified"|"type"|"mode"|
 * "parent"|"entries", "resolution": "refused"|"ours"|"theirs"|"skipped"}]}.
 * With conflicts and strategy refuse nothing changes and the result is NOOK_E_CONFLICT; then, as
 * the one exception to the ret_ rule, *ret_json is set too (the conflicts list).  A merge that was
 * killed part way is undone (or finished, once committed) by the next nook_diff or nook_merge of
 * its target. */
NOOK_PUBLIC int nook_merge(
        nook *n, const char *branch, const char *opts_json, char **ret_json, nook_error *err);
/* ---- memory checkpoints (CRIU) --------------------------------------------------------------- */

/* Keep the sandbox running after its memory is written. */
#define NOOK_CHECKPOINT_LEAVE_RUNNING 1u
/* Checkpoints a running sandbox's processes with CRIU.  No host can today: after the request is
 * checked (name, flags: NOOK_E_INVALID; no such sandbox: NOOK_E_NOT_FOUND; not running:
 * NOOK_E_STATE) it is refused with NOOK_E_MISSING_FEATURE, and the message names the cause found
 * on this host, the same sentence `nook doctor` prints (docs/design/checkpoint.md). */
NOOK_PUBLIC int nook_checkpoint(nook *n, const char *name, unsigned flags, nook_error *err);

#ifdef __cplusplus
}
#endif
