/* SPDX-License-Identifier: Apache-2.0 */
/* The baseline manifest: capture (a walk that never follows a symlink), the text format, and
 * its parser.  Format (version 1), one line each, fields separated by one space:
 *
 *   nook-manifest 1
 *   <t> <mode> <uid> <gid> <size> <mtime_ns> <ctime_ns> <ino> <sha256|-> <path> <target|->
 *
 * t is f, d, l or o; mode is octal (07777 at most); the numbers are decimal; the hash is 64
 * lowercase hex digits or "-" (not a regular file, or unreadable at capture).  path and target
 * are escaped: '%', every byte below 0x21 and 0x7f are written as %XX (uppercase hex), so a name
 * with a space or a newline stays on its line.  Lines are sorted by path (strcmp of the
 * unescaped bytes), each path once. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "nook.h"
#include "tree/manifest.h"
#include "util/dynlib.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/str.h"

#define MF_MAGIC "nook-manifest 1\n"
#define MF_DEFAULT_MAX_ENTRIES ((size_t)10 * 1000 * 1000)

static const char type_chars[_MF_TYPE_MAX] = {
        [MF_TYPE_FILE] = 'f', [MF_TYPE_DIR] = 'd', [MF_TYPE_SYMLINK] = 'l', [MF_TYPE_OTHER] = 'o'
};
static const char *const type_names[_MF_TYPE_MAX] = { [MF_TYPE_FILE] = "file",
        [MF_TYPE_DIR] = "dir",
        [MF_TYPE_SYMLINK] = "symlink",
        [MF_TYPE_OTHER] = "other" };

const char *mf_type_to_string(mf_type t) {
        if ((int)t < 0 || t >= _MF_TYPE_MAX)
                return NULL;
        return type_names[t];
}

static void entry_done(mf_entry *e) {
        free(e->path);
        free(e->target);
}

void manifest_done(manifest *m) {
        for (size_t i = 0; i < m->n; i++)
                entry_done(&m->e[i]);
        free(m->e);
        free(m->unreadable);
        *m = (manifest){ 0 };
}

manifest *manifest_free(manifest *m) {
        if (!m)
                return NULL;
        manifest_done(m);
        free(m);
        return NULL;
}

static int manifest_push(manifest *m, mf_entry *e, nook_error *err) {
        if (m->n == m->cap) {
                size_t cap = m->cap ? m->cap * 2 : 64;
                mf_entry *ne = reallocarray(m->e, cap, sizeof(*ne));
                if (!ne)
                        return nook_err_oom(err);
                m->e = ne;
                m->cap = cap;
        }
        m->e[m->n++] = *e;
        *e = (mf_entry){ 0 };
        return 0;
}

static int entry_cmp(const void *a, const void *b) {
        return strcmp(((const mf_entry *)a)->path, ((const mf_entry *)b)->path);
}

const mf_entry *manifest_find(const manifest *m, const char *path) {
        mf_entry key = { .path = (char *)path };
        if (!m || m->n == 0)
                return NULL;
        return bsearch(&key, m->e, m->n, sizeof(key), entry_cmp);
}

bool mf_path_valid(const char *path, size_t len) {
        if (len == 0 || len > MF_MAX_PATH || path[0] == '/' || memchr(path, '\0', len))
                return false;
        const char *p = path, *end = path + len;
        while (p <= end) {
                const char *slash = memchr(p, '/', (size_t)(end - p));
                const char *seg_end = slash ? slash : end;
                size_t sl = (size_t)(seg_end - p);
                if (sl == 0 || (sl == 1 && p[0] == '.') || (sl == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                if (!slash)
                        break;
                p = slash + 1;
        }
        return true;
}

int mf_open_beneath(int dirfd, const char *path, int flags) {
        _cleanup_free_ char *copy = strdup(path);
        _cleanup_close_ int cur = -1;
        if (!copy)
                return -ENOMEM;
        if (!mf_path_valid(path, strlen(path)))
                return -EINVAL;
        int base = dirfd;
        char *save = NULL;
        char *seg = strtok_r(copy, "/", &save);
        while (seg) {
                char *next = strtok_r(NULL, "/", &save);
                int f = next ? (O_PATH | O_DIRECTORY) : flags;
                int fd = openat(base, seg, f | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0)
                        return -errno;
                safe_close(cur);
                cur = fd;
                base = cur;
                seg = next;
        }
        return TAKE_FD(cur);
}

int mf_open_parent(int dirfd, const char *path, const char **ret_name) {
        const char *slash = strrchr(path, '/');
        *ret_name = slash ? slash + 1 : path;
        if (!slash) {
                int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
                return fd < 0 ? -errno : fd;
        }
        _cleanup_free_ char *parent = strndup(path, (size_t)(slash - path));
        if (!parent)
                return -ENOMEM;
        return mf_open_beneath(dirfd, parent, O_PATH | O_DIRECTORY);
}

static int hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* SHA-256 through nettle (Debian's libnettle8: one small library, no dependencies, SHA-NI on
 * x86_64): a create hashes its baseline's files without loading the image module and the ~40
 * libraries libcrypto and libcurl bring, which was most of the CPU of a `nook run`.  nettle is
 * itself loaded on the first hash, not linked: Debian builds it with BIND_NOW, so every process
 * that maps libnook would otherwise resolve its ~450 symbol bindings at start, and only a create
 * with a baseline (not `nook run`), diff and merge hash (issue #17). */
static dynlib nettle_lib = { .soname = "libnettle.so.8", .package = "libnettle8", .handle = NULL };

static struct {
        void (*init)(struct sha256_ctx *ctx);
        void (*update)(struct sha256_ctx *ctx, size_t length, const uint8_t *data);
        void (*digest)(struct sha256_ctx *ctx, size_t length, uint8_t *digest);
} nettle;
static pthread_once_t nettle_once = PTHREAD_ONCE_INIT;

/* Once per process (a diff hashes every file: no dlsym per file). */
static void nettle_load(void) {
        *(void **)&nettle.init = dynlib_sym(&nettle_lib, "nettle_sha256_init");
        *(void **)&nettle.update = dynlib_sym(&nettle_lib, "nettle_sha256_update");
        *(void **)&nettle.digest = dynlib_sym(&nettle_lib, "nettle_sha256_digest");
}

/* Hashes [off, end) of fd (end < 0: to EOF) into c. */
static int hash_range(int fd, struct sha256_ctx *c, char *b, off_t off, off_t end, nook_error *err) {
        while (end < 0 || off < end) {
                size_t want = end < 0 || end - off > (1 << 16) ? (size_t)1 << 16 : (size_t)(end - off);
                ssize_t k = pread(fd, b, want, off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read a file to hash it");
                if (k == 0)
                        break;
                nettle.update(c, (size_t)k, (const uint8_t *)b);
                off += k;
        }
        return 0;
}

static void hash_u64(struct sha256_ctx *c, uint64_t v) {
        uint8_t b[8];
        for (int i = 0; i < 8; i++)
                b[i] = (uint8_t)(v >> (56 - 8 * i));
        nettle.update(c, sizeof(b), b);
}

/* A file without holes: SHA-256 of its bytes.  A sparse one (SEEK_HOLE finds a hole before its
 * end): SHA-256 of "nook-sparse-v1", then per data extent 'D', offset, length and its bytes, then
 * 'E' and the size; its holes are never read.  A guest's 15 TB sparse file hashes in what it
 * holds, not in hours of zeros (each diff, merge and baseline hashes new and changed files).
 * The same bytes stored densely hash differently (a "modified" at worst), and sizes are compared
 * before hashes, so the two forms never stand for each other. */
int mf_hash_fd(int fd, uint8_t ret[MF_HASH_LEN], nook_error *err) {
        _cleanup_free_ char *b = malloc(1 << 16);
        if (!b)
                return nook_err_oom(err);
        (void)pthread_once(&nettle_once, nettle_load);
        struct sha256_ctx c;
        nettle.init(&c);
        struct stat st;
        off_t hole = -1;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
                hole = lseek(fd, 0, SEEK_HOLE); /* COMPAT: -1 (EINVAL) where there is no SEEK_HOLE */
        int r;
        if (hole < 0 || hole >= st.st_size)
                r = hash_range(fd, &c, b, 0, -1, err);
        else {
                static const char tag[] = "nook-sparse-v1";
                nettle.update(&c, sizeof(tag) - 1, (const uint8_t *)tag);
                r = 0;
                off_t pos = 0, data = 0, h = 0;
                int more;
                while (r >= 0 && (more = fd_next_data(fd, pos, st.st_size, &data, &h)) != 0) {
                        if (more < 0) {
                                r = nook_err_errnum(
                                        err, NOOK_E_IO, more, "Cannot find the data of a sparse file");
                                break;
                        }
                        nettle.update(&c, 1, (const uint8_t *)"D");
                        hash_u64(&c, (uint64_t)data);
                        hash_u64(&c, (uint64_t)(h - data));
                        r = hash_range(fd, &c, b, data, h, err);
                        pos = h;
                }
                nettle.update(&c, 1, (const uint8_t *)"E");
                hash_u64(&c, (uint64_t)st.st_size);
        }
        if (r < 0)
                return r;
        nettle.digest(&c, MF_HASH_LEN, ret);
        return 0;
}

_Static_assert(MF_HASH_LEN == SHA256_DIGEST_SIZE, "a manifest's hash is a SHA-256");

static mf_type type_of(mode_t m) {
        if (S_ISREG(m))
                return MF_TYPE_FILE;
        if (S_ISDIR(m))
                return MF_TYPE_DIR;
        if (S_ISLNK(m))
                return MF_TYPE_SYMLINK;
        return MF_TYPE_OTHER;
}

/* Fills e from the entry name of directory dfd (lstat semantics). */
static int entry_stat(int dfd, const char *name, const char *rel, bool hash, mf_entry *e, nook_error *err) {
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot stat '%s'", rel);
        *e = (mf_entry){ .type = type_of(st.st_mode),
                .mode = st.st_mode & 07777,
                .uid = st.st_uid,
                .gid = st.st_gid,
                .size = (uint64_t)st.st_size,
                .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
                .ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec,
                .ino = st.st_ino };
        if (e->type == MF_TYPE_SYMLINK) {
                char tbuf[PATH_MAX + 1];
                ssize_t k = readlinkat(dfd, name, tbuf, PATH_MAX);
                if (k < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot read the symlink '%s'", rel);
                e->target = strndup(tbuf, (size_t)k);
                if (!e->target)
                        return nook_err_oom(err);
        }
        if (e->type == MF_TYPE_FILE && hash) {
                /* O_NONBLOCK: the entry may have become a FIFO since the stat; fstat checks it is the
                 * same inode.  An unreadable file (another uid's, mode 0600) gets no hash. */
                _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
                struct stat fst;
                if (fd >= 0 && fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode) && fst.st_ino == st.st_ino) {
                        int r = mf_hash_fd(fd, e->hash, err);
                        if (r < 0)
                                return nook_err_wrap(err, "hashing '%s'", rel);
                        e->has_hash = true;
                }
        }
        return 0;
}

/* Adds the entries of directory rel (opened as dfd) to m; subdirectories are found by the
 * caller's breadth-first loop from the entries added. */
static int capture_dir(int dfd, const char *rel, bool hash, size_t max, manifest *m, nook_error *err) {
        int dup = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        if (dup < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot duplicate a directory descriptor");
        DIR *d = fdopendir(dup);
        if (!d) {
                safe_close(dup);
                return nook_err_errno(err, NOOK_E_IO, "Cannot list '%s'", *rel ? rel : ".");
        }
        /* the duplicate shares dfd's offset: another walk of the same fd may have left it at the end */
        rewinddir(d);
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (m->n >= max) {
                        r = nook_err_set(err, NOOK_E_REFUSED,
                                "The tree holds more than %zu entries; nook does not track it", max);
                        break;
                }
                mf_entry e = { 0 };
                _cleanup_free_ char *p = *rel ? strprintf("%s/%s", rel, de->d_name) : strdup(de->d_name);
                if (!p) {
                        r = nook_err_oom(err);
                        break;
                }
                if (strlen(p) > MF_MAX_PATH) {
                        r = nook_err_set(err, NOOK_E_REFUSED, "A path in the tree is longer than %d bytes",
                                MF_MAX_PATH);
                        break;
                }
                r = entry_stat(dfd, de->d_name, p, hash, &e, err);
                if (r < 0) {
                        entry_done(&e);
                        break;
                }
                e.path = TAKE_PTR(p);
                r = manifest_push(m, &e, err);
                if (r < 0) {
                        entry_done(&e);
                        break;
                }
        }
        closedir(d);
        return r;
}

int manifest_capture(int dirfd, bool hash, size_t max_entries, manifest **ret, nook_error *err) {
        _cleanup_(manifest_freep) manifest *m = calloc(1, sizeof(*m));
        if (!m)
                return nook_err_oom(err);
        if (max_entries == 0)
                max_entries = MF_DEFAULT_MAX_ENTRIES;
        int r = capture_dir(dirfd, "", hash, max_entries, m, err);
        if (r < 0)
                return r;
        /* Breadth-first over the entries as they are appended: each directory is reopened from
         * the root without following symlinks, so no descriptor is held per level. */
        for (size_t i = 0; i < m->n; i++) {
                if (m->e[i].type != MF_TYPE_DIR)
                        continue;
                _cleanup_close_ int fd = mf_open_beneath(dirfd, m->e[i].path, O_RDONLY | O_DIRECTORY);
                if (fd == -EACCES) {
                        /* an unreadable directory: recorded, its content not; a diff refuses
                         * such a tree (diff.c), a baseline keeps it as it was */
                        if (!m->unreadable && !(m->unreadable = strdup(m->e[i].path)))
                                return nook_err_oom(err);
                        continue;
                }
                if (fd < 0)
                        return nook_err_errnum(
                                err, NOOK_E_IO, -fd, "Cannot open the directory '%s'", m->e[i].path);
                _cleanup_free_ char *rel = strdup(m->e[i].path);
                if (!rel)
                        return nook_err_oom(err);
                r = capture_dir(fd, rel, hash, max_entries, m, err);
                if (r < 0)
                        return r;
        }
        if (m->n > 0)
                qsort(m->e, m->n, sizeof(m->e[0]), entry_cmp);
        *ret = TAKE_PTR(m);
        return 0;
}

/* ---- text form ---- */

typedef struct buf {
        char *p;
        size_t n, cap;
} buf;

static int buf_add(buf *b, const char *s, size_t len) {
        if (b->n + len + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 4096;
                while (cap < b->n + len + 1)
                        cap *= 2;
                char *np = realloc(b->p, cap);
                if (!np)
                        return -ENOMEM;
                b->p = np;
                b->cap = cap;
        }
        memcpy(b->p + b->n, s, len);
        b->n += len;
        b->p[b->n] = '\0';
        return 0;
}

static bool needs_escape(unsigned char c) {
        return c < 0x21 || c == 0x7f || c == '%';
}

static int buf_add_escaped(buf *b, const char *s) {
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                char esc[4];
                int r;
                if (needs_escape(*p)) {
                        (void)snprintf(esc, sizeof(esc), "%%%02X", *p);
                        r = buf_add(b, esc, 3);
                } else
                        r = buf_add(b, (const char *)p, 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int format_entry(buf *b, const mf_entry *e) {
        char head[256], hex[2 * MF_HASH_LEN + 1] = "-";
        if (e->has_hash)
                for (size_t i = 0; i < MF_HASH_LEN; i++)
                        (void)snprintf(hex + 2 * i, 3, "%02x", e->hash[i]);
        int k = snprintf(head, sizeof(head),
                "%c %o %" PRIu32 " %" PRIu32 " %" PRIu64 " %" PRId64 " %" PRId64 " %" PRIu64 " %s ",
                type_chars[e->type], e->mode, e->uid, e->gid, e->size, e->mtime_ns, e->ctime_ns, e->ino,
                hex);
        if (k < 0 || (size_t)k >= sizeof(head))
                return -EINVAL;
        int r = buf_add(b, head, (size_t)k);
        if (r >= 0)
                r = buf_add_escaped(b, e->path);
        if (r >= 0)
                r = buf_add(b, " ", 1);
        if (r >= 0)
                r = e->target ? buf_add_escaped(b, e->target) : buf_add(b, "-", 1);
        if (r >= 0)
                r = buf_add(b, "\n", 1);
        return r;
}

int manifest_format(const manifest *m, char **ret, size_t *ret_len, nook_error *err) {
        buf b = { 0 };
        int r = buf_add(&b, MF_MAGIC, strlen(MF_MAGIC));
        for (size_t i = 0; r >= 0 && i < m->n; i++)
                r = format_entry(&b, &m->e[i]);
        if (r < 0) {
                free(b.p);
                return r == -ENOMEM ? nook_err_oom(err)
                                    : nook_err_set(err, NOOK_E_INTERNAL, "Cannot format a manifest entry");
        }
        *ret = b.p;
        *ret_len = b.n;
        return 0;
}

/* Unescapes s[0..len) into a new string; NULL on a bad escape, an unescaped byte that must be
 * escaped, or a NUL byte. */
static char *unescape(const char *s, size_t len) {
        _cleanup_free_ char *out = malloc(len + 1);
        size_t o = 0;
        if (!out)
                return NULL;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c == '%') {
                        if (i + 2 >= len)
                                return NULL;
                        int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
                        /* uppercase only: one spelling per name, as manifest_format writes it */
                        if (hi < 0 || lo < 0 || (s[i + 1] >= 'a' && s[i + 1] <= 'f') ||
                                (s[i + 2] >= 'a' && s[i + 2] <= 'f'))
                                return NULL;
                        c = (unsigned char)(hi * 16 + lo);
                        if (c == 0 || !needs_escape(c))
                                return NULL;
                        i += 2;
                } else if (needs_escape(c))
                        return NULL;
                out[o++] = (char)c;
        }
        out[o] = '\0';
        return TAKE_PTR(out);
}

char *mf_escape(const char *s) {
        buf b = { 0 };
        if (buf_add(&b, "", 0) < 0 || buf_add_escaped(&b, s) < 0) {
                free(b.p);
                return NULL;
        }
        return b.p;
}

char *mf_unescape(const char *s, size_t len) {
        return unescape(s, len);
}

static bool parse_u64(const char *s, size_t len, uint64_t max, uint64_t *ret) {
        uint64_t v = 0;
        if (len == 0 || len > 20 || (len > 1 && s[0] == '0'))
                return false;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                unsigned d = (unsigned)(s[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return false;
                v = v * 10 + d;
        }
        if (v > max)
                return false;
        *ret = v;
        return true;
}

static bool parse_i64(const char *s, size_t len, int64_t *ret) {
        uint64_t v;
        bool neg = len > 0 && s[0] == '-';
        if (!parse_u64(s + neg, len - neg, neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, &v))
                return false;
        if (neg && v == 0)
                return false;
        *ret = neg ? (int64_t)(0 - v) : (int64_t)v;
        return true;
}

static bool parse_mode(const char *s, size_t len, uint32_t *ret) {
        uint32_t v = 0;
        if (len == 0 || len > 4 || (len > 1 && s[0] == '0'))
                return false;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '7')
                        return false;
                v = v * 8 + (uint32_t)(s[i] - '0');
        }
        *ret = v;
        return true;
}

static bool parse_hash(const char *s, size_t len, mf_entry *e) {
        if (len == 1 && s[0] == '-')
                return true;
        if (len != 2 * MF_HASH_LEN)
                return false;
        for (size_t i = 0; i < MF_HASH_LEN; i++) {
                int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
                if (hi < 0 || lo < 0 || s[2 * i] > 'f' || (s[2 * i] >= 'A' && s[2 * i] <= 'F') ||
                        (s[2 * i + 1] >= 'A' && s[2 * i + 1] <= 'F'))
                        return false;
                e->hash[i] = (uint8_t)(hi * 16 + lo);
        }
        e->has_hash = true;
        return true;
}

#define MF_FIELDS 11

/* One line (without its '\n') into e.  false on any field that manifest_format would not write. */
static bool parse_line(const char *line, size_t len, mf_entry *e) {
        const char *f[MF_FIELDS];
        size_t fl[MF_FIELDS], nf = 0;
        const char *p = line, *end = line + len;
        while (nf < MF_FIELDS) {
                const char *sp = memchr(p, ' ', (size_t)(end - p));
                f[nf] = p;
                fl[nf] = (size_t)((sp ? sp : end) - p);
                nf++;
                if (!sp)
                        break;
                p = sp + 1;
        }
        if (nf != MF_FIELDS || f[MF_FIELDS - 1] + fl[MF_FIELDS - 1] != end)
                return false;
        if (fl[0] != 1)
                return false;
        const char *tc = memchr(type_chars, f[0][0], _MF_TYPE_MAX);
        if (!tc || f[0][0] == '\0')
                return false;
        e->type = (mf_type)(tc - type_chars);
        uint64_t uid, gid, ino;
        if (!parse_mode(f[1], fl[1], &e->mode) || !parse_u64(f[2], fl[2], UINT32_MAX, &uid) ||
                !parse_u64(f[3], fl[3], UINT32_MAX, &gid) || !parse_u64(f[4], fl[4], INT64_MAX, &e->size) ||
                !parse_i64(f[5], fl[5], &e->mtime_ns) || !parse_i64(f[6], fl[6], &e->ctime_ns) ||
                !parse_u64(f[7], fl[7], UINT64_MAX, &ino) || !parse_hash(f[8], fl[8], e))
                return false;
        e->uid = (uint32_t)uid;
        e->gid = (uint32_t)gid;
        e->ino = ino;
        if (e->has_hash && e->type != MF_TYPE_FILE)
                return false;
        e->path = unescape(f[9], fl[9]);
        if (!e->path || !mf_path_valid(e->path, strlen(e->path)))
                return false;
        bool dash = fl[10] == 1 && f[10][0] == '-';
        if (e->type == MF_TYPE_SYMLINK) {
                if (fl[10] == 0 || fl[10] > (size_t)3 * PATH_MAX)
                        return false;
                /* A symlink's target field is always its target: "-" is read literally. */
                e->target = unescape(f[10], fl[10]);
                if (!e->target || !*e->target)
                        return false;
        } else if (!dash)
                return false;
        return true;
}

int manifest_parse(const char *text, size_t len, manifest **ret, nook_error *err) {
        _cleanup_(manifest_freep) manifest *m = calloc(1, sizeof(*m));
        size_t ml = strlen(MF_MAGIC);
        if (!m)
                return nook_err_oom(err);
        if (len < ml || memcmp(text, MF_MAGIC, ml) != 0)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Not a nook manifest (version 1): the first line must be 'nook-manifest 1'");
        size_t line_no = 1;
        for (const char *p = text + ml, *end = text + len; p < end; line_no++) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                if (!nl)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "Manifest line %zu has no end of line", line_no + 1);
                mf_entry e = { 0 };
                if (!parse_line(p, (size_t)(nl - p), &e)) {
                        entry_done(&e);
                        return nook_err_set(
                                err, NOOK_E_INVALID, "Manifest line %zu is malformed", line_no + 1);
                }
                if (m->n > 0 && strcmp(m->e[m->n - 1].path, e.path) >= 0) {
                        entry_done(&e);
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Manifest line %zu is out of order or repeats a path", line_no + 1);
                }
                int r = manifest_push(m, &e, err);
                if (r < 0) {
                        entry_done(&e);
                        return r;
                }
                p = nl + 1;
        }
        *ret = TAKE_PTR(m);
        return 0;
}

int manifest_save(const manifest *m, int dirfd, const char *name, bool durable, nook_error *err) {
        _cleanup_free_ char *text = NULL, *tmp = strprintf(".%s.XXXXXX", name);
        size_t len = 0;
        if (!tmp)
                return nook_err_oom(err);
        int r = manifest_format(m, &text, &len, err);
        if (r < 0)
                return r;
        /* mkostemp works on paths: build the name here and create it relative to dirfd. */
        for (int tries = 0;; tries++) {
                _cleanup_close_ int fd = -1;
                char rnd[7];
                uint64_t v = ((uint64_t)random() << 16) ^ (uint64_t)getpid() ^ (uint64_t)tries;
                for (int i = 0; i < 6; i++)
                        rnd[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(v >> (5 * i)) % 36];
                rnd[6] = '\0';
                memcpy(tmp + strlen(tmp) - 6, rnd, 6);
                fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0 && errno == EEXIST && tries < 100)
                        continue;
                if (fd < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", tmp);
                bool sync = durable && m->n > 0;
                if (fd_write_all(fd, text, len) < 0 || (sync && fsync(fd) < 0)) {
                        r = nook_err_errno(err, NOOK_E_IO, "Cannot write '%s'", name);
                        (void)unlinkat(dirfd, tmp, 0);
                        return r;
                }
                break;
        }
        if (renameat(dirfd, tmp, dirfd, name) < 0) {
                r = nook_err_errno(err, NOOK_E_IO, "Cannot rename '%s' into place", name);
                (void)unlinkat(dirfd, tmp, 0);
                return r;
        }
        return 0;
}

int manifest_load(int dirfd, const char *name, manifest **ret, nook_error *err) {
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (fd < 0 && errno == ENOENT)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No baseline manifest '%s'", name);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", name);
        int r = fd_read_to_end(fd, (size_t)1 << 32, &text, &len, err);
        if (r < 0)
                return r;
        /* zero-length: an empty manifest saved without fsync, cut short by a power loss */
        r = len == 0 ? manifest_parse(MF_MAGIC, strlen(MF_MAGIC), ret, err)
                     : manifest_parse(text ? text : "", len, ret, err);
        if (r < 0)
                return nook_err_wrap(err, "reading '%s'", name);
        return 0;
}
