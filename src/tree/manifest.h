/* SPDX-License-Identifier: Apache-2.0 */
/* A workspace's baseline manifest: one entry per path below a directory (relative, sorted by
 * strcmp, never "." or ".." segments), with its type, mode, owner, size, mtime and ctime in ns,
 * inode, symlink target and the SHA-256 of a regular file's content.  Captured when a sandbox is
 * created (or branched: its workspace is then a copy, so the baseline is the branch point), kept
 * in the state folder as "baseline.manifest" (format in docs/design/diff-merge.md), and read back
 * by diff and merge.  The parser takes hostile input: a state folder is ours, but the file is
 * fuzzed (tests/fuzz/fuzz_manifest.c) and every field is checked. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nook.h"
#include "util/macro.h"

#define MF_FILE_NAME "baseline.manifest"
#define MF_ROOT_FILE_NAME "baseline-root.manifest"
#define MF_HASH_LEN ((size_t)32)
#define MF_MAX_PATH 4096

typedef enum mf_type {
        MF_TYPE_FILE, /* 'f' */
        MF_TYPE_DIR, /* 'd' */
        MF_TYPE_SYMLINK, /* 'l' */
        MF_TYPE_OTHER, /* 'o': fifo, socket, device; compared by type, mode and rdev-free stat only */
        _MF_TYPE_MAX,
        _MF_TYPE_INVALID = -EINVAL,
} mf_type;

const char *mf_type_to_string(mf_type t); /* "file", "dir", "symlink", "other" */

typedef struct mf_entry {
        char *path; /* relative, no leading '/', may hold any byte but NUL and '/'-empty segments */
        char *target; /* symlink target, else NULL */
        mf_type type;
        uint32_t mode; /* permission bits (07777) */
        uint32_t uid, gid;
        uint64_t size;
        int64_t mtime_ns, ctime_ns;
        uint64_t ino;
        bool has_hash; /* regular files we could read */
        uint8_t hash[MF_HASH_LEN];
} mf_entry;

typedef struct manifest {
        mf_entry *e;
        size_t n, cap;
        char *unreadable; /* the first directory the capture could not read (its content is not
                           * in e), or NULL */
} manifest;

void manifest_done(manifest *m);
manifest *manifest_free(manifest *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(manifest *, manifest_free);

/* Walks the directory dirfd (never following a symlink; not crossing into other filesystems is
 * not needed: a workspace holds no mounts on the host) and fills ret sorted by path.  hash: read
 * and hash every regular file (a file we cannot read gets no hash).  max_entries bounds a hostile
 * tree (0: 10 million). */
int manifest_capture(int dirfd, bool hash, size_t max_entries, manifest **ret, nook_error *err);
/* The entry for path, or NULL (binary search; m is sorted). */
const mf_entry *manifest_find(const manifest *m, const char *path);

/* SHA-256 of the regular file fd, its holes never read (a sparse file hashes its data extents:
 * manifest.c). */
int mf_hash_fd(int fd, uint8_t ret[MF_HASH_LEN], nook_error *err);
/* Opens path below dirfd without following any symlink on the way (every component is opened
 * O_NOFOLLOW; the meaning of RESOLVE_NO_SYMLINKS, on every kernel).  flags are for the last
 * component (O_CLOEXEC|O_NOFOLLOW added).  Returns the fd or -errno. */
int mf_open_beneath(int dirfd, const char *path, int flags);
/* The directory holding path (opened as above) and the last component's offset in path. */
int mf_open_parent(int dirfd, const char *path, const char **ret_name);

/* The text form (a versioned format) and back.  manifest_parse refuses anything else than what
 * manifest_format writes (NOOK_E_INVALID, naming the line). */
int manifest_format(const manifest *m, char **ret, size_t *ret_len, nook_error *err);
int manifest_parse(const char *text, size_t len, manifest **ret, nook_error *err);
/* Writes m to dirfd/name atomically for readers and kills (a temporary file, then a rename).
 * durable: fsync before the rename, so that a power loss too leaves the old file or the new one
 * whole.  An empty manifest is never synced (the fsync was most of a create's wall time): a
 * power loss can leave it zero-length, which manifest_load reads as the empty manifest it was. */
int manifest_save(const manifest *m, int dirfd, const char *name, bool durable, nook_error *err);
/* Reads dirfd/name (NOOK_E_NOT_FOUND when absent; an empty file is the empty manifest). */
int manifest_load(int dirfd, const char *name, manifest **ret, nook_error *err);

/* The format's escaping of one field (%XX for '%', bytes below 0x21 and 0x7f) and back; NULL on
 * a bad escape or no memory. */
char *mf_escape(const char *s);
char *mf_unescape(const char *s, size_t len);

/* True when a path from outside is one a manifest may hold: not empty, relative, no "", "." or
 * ".." segment, no NUL, at most MF_MAX_PATH bytes. */
bool mf_path_valid(const char *path, size_t len);
