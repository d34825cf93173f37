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
        NOOK_E_INVALID,         /* bad input: a field, a path, a name */
        NOOK_E_REFUSED,         /* a path outside the workspace, a forbidden request */
        NOOK_E_NOT_FOUND,       /* no such sandbox, file, image */
        NOOK_E_EXISTS,          /* already exists */
        NOOK_E_STATE,           /* wrong state for the operation (e.g. not running) */
        NOOK_E_MISSING_FEATURE, /* the host lacks something the request needs */
        NOOK_E_TIMEOUT,         /* a deadline passed */
        NOOK_E_IO,              /* a system call failed */
        NOOK_E_NOMEM,           /* out of memory */
        NOOK_E_BUSY,            /* locked or in use */
        NOOK_E_INTERNAL,        /* a bug in nook, or a protocol violation */
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

/* ---- context: the state root --------------------------------------------------------------- */

/* One handle per state root.  home NULL: $NOOK_HOME, else /var/lib/nook for root, else
 * $XDG_DATA_HOME/nook (default ~/.local/share/nook).  Created with mode 0700. */
typedef struct nook nook;
NOOK_PUBLIC int nook_open(const char *home, nook **ret, nook_error *err);
NOOK_PUBLIC nook *nook_close(nook *n);
NOOK_PUBLIC const char *nook_home(const nook *n);
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
NOOK_PUBLIC nook_ws *nook_ws_close(nook_ws *w);
NOOK_PUBLIC const char *nook_ws_root(const nook_ws *w);
/* Absolute host path of a guest path, under the same rule (or an error). */
NOOK_PUBLIC int nook_ws_host_path(nook_ws *w, const char *path, char **ret, nook_error *err);
/* Atomic write (temp file + rename); creates parents; replaces a symlink, never writes through it. */
NOOK_PUBLIC int nook_ws_write(nook_ws *w, const char *path, const void *data, size_t len, nook_error *err);
NOOK_PUBLIC int nook_ws_write_fd(nook_ws *w, const char *path, int fd, nook_error *err);
/* Reads a regular file (max 0 = 1 GiB); *ret_data is NUL-terminated for convenience. */
NOOK_PUBLIC int nook_ws_read(nook_ws *w, const char *path, size_t max, void **ret_data, size_t *ret_len,
        nook_error *err);
NOOK_PUBLIC int nook_ws_open_read(nook_ws *w, const char *path, int *ret_fd, nook_error *err);
/* 1 if it exists, 0 if not; never reads the file. */
NOOK_PUBLIC int nook_ws_exists(nook_ws *w, const char *path, nook_error *err);
NOOK_PUBLIC int nook_ws_stat(nook_ws *w, const char *path, nook_stat *ret, nook_error *err);
NOOK_PUBLIC int nook_ws_mkdir(nook_ws *w, const char *path, nook_error *err);
NOOK_PUBLIC int nook_ws_list(nook_ws *w, const char *path, nook_dirent **ret, size_t *ret_n, nook_error *err);
NOOK_PUBLIC void nook_dirents_free(nook_dirent *d, size_t n);
NOOK_PUBLIC int nook_ws_remove(nook_ws *w, const char *path, nook_error *err);
NOOK_PUBLIC int nook_ws_rename(nook_ws *w, const char *from, const char *to, nook_error *err);

/* @@SANDBOX-API@@ */

#ifdef __cplusplus
}
#endif
