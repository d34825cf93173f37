/* SPDX-License-Identifier: Apache-2.0 */
/* Host-wide claims on the id-range pool (idclaim.h).  The file is sparse: slot i's record is at
 * i * RECORD_SIZE, all zeros when free:
 *   "NKC1", u16 length of the state folder's path, u16 length of the sandbox's name, the path,
 *   the name (both without NUL).
 * A path and name that do not fit a record are not claimed (the state folder's own rule then). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/idmap.h"
#include "isolate/userns.h"
#include "sandbox/idclaim.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/str.h"

#define DEFAULT_PATH "/var/lib/nook-idclaims"
#define RECORD_SIZE 1024
#define MAGIC "NKC1"

/* NOOK_IDCLAIMS names another file only in a test build (each test file claims its own ranges,
 * so that they run side by side): in what users install one file serves the host, or two state
 * folders would hand out the same host uids again. */
static const char *claims_path(void) {
#ifdef NOOK_TEST_HOOKS
        const char *p = secure_getenv("NOOK_IDCLAIMS");
        if (p && p[0] == '/')
                return p;
#endif
        return DEFAULT_PATH;
}

/* The file, opened (made when missing) and locked; -1 when it cannot be: not root, or not a
 * plain file of root's that only root can write. */
static int claims_lock(bool create) {
        if (geteuid() != 0)
                return -1;
        int fd = open(claims_path(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
        struct stat st;
        if (fd < 0)
                return -1;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 0022) ||
                flock(fd, LOCK_EX) < 0)
                return safe_close(fd);
        return fd;
}

typedef struct record {
        char home[RECORD_SIZE];
        char name[RECORD_SIZE];
} record;

/* 1: a claim, read into r; 0: free; -1: unreadable (treated as held). */
static int record_read(int fd, uint32_t slot, record *r) {
        unsigned char b[RECORD_SIZE];
        ssize_t k = pread(fd, b, sizeof(b), (off_t)slot * RECORD_SIZE);
        if (k < 0)
                return -1;
        if (k < 8 || memcmp(b, MAGIC, 4) != 0)
                return 0;
        size_t hl = (size_t)b[4] << 8 | b[5], nl = (size_t)b[6] << 8 | b[7];
        if (8 + hl + nl > (size_t)k)
                return -1;
        memcpy(r->home, b + 8, hl);
        r->home[hl] = 0;
        memcpy(r->name, b + 8 + hl, nl);
        r->name[nl] = 0;
        return 1;
}

static bool record_fits(const char *home, const char *sandbox) {
        return 8 + strlen(home) + strlen(sandbox) <= RECORD_SIZE;
}

static int record_write(int fd, uint32_t slot, const char *home, const char *sandbox) {
        unsigned char b[RECORD_SIZE] = { 0 };
        if (home) {
                /* a binary record: lengths, then the bytes, no NUL (record_read adds them) */
                size_t hl = strlen(home), nl = strlen(sandbox);
                memcpy(b, MAGIC, 4); // NOLINT(bugprone-not-null-terminated-result)
                b[4] = (unsigned char)(hl >> 8), b[5] = (unsigned char)hl;
                b[6] = (unsigned char)(nl >> 8), b[7] = (unsigned char)nl;
                memcpy(b + 8, home, hl); // NOLINT(bugprone-not-null-terminated-result)
                memcpy(b + 8 + hl, sandbox, nl); // NOLINT(bugprone-not-null-terminated-result)
        }
        ssize_t k = pwrite(fd, b, sizeof(b), (off_t)slot * RECORD_SIZE);
        return k == (ssize_t)sizeof(b) ? 0 : -1;
}

/* The pool's slot (ISO_IDPOOL_*) that base starts; false for a base that starts none. */
static bool slot_of(uint32_t base, uint32_t *ret) {
        if (base < ISO_IDPOOL_FIRST || (base - ISO_IDPOOL_FIRST) % ISO_ID_RANGE)
                return false;
        *ret = (base - ISO_IDPOOL_FIRST) / ISO_ID_RANGE;
        return true;
}

static bool exists(const char *dir, const char *sub, const char *name) {
        struct stat st;
        _cleanup_free_ char *p = name ? strprintf("%s/%s/%s", dir, sub, name) : strprintf("%s/%s", dir, sub);
        return !p || lstat(p, &st) == 0 || errno != ENOENT; /* in doubt: it exists */
}

/* A claim whose state folder is gone, or holds nothing of that name any more (no record
 * directory, no workspace): its owner cannot be using the slot. */
static bool record_stale(const record *r) {
        if (!exists(r->home, "nook.db", NULL)) /* also when the state folder itself is gone */
                return true;
        return !exists(r->home, "sandboxes", r->name) && !exists(r->home, "workspaces", r->name);
}

void idclaims_open(idclaims *c, const char *home, const char *sandbox) {
        c->fd = record_fits(home, sandbox) ? claims_lock(true) : -1;
        c->home = home;
        c->sandbox = sandbox;
        c->taken_new = -1;
}

void idclaims_close(idclaims *c) {
        c->fd = safe_close(c->fd); /* and with it the lock */
}

bool idclaims_usable(uint32_t base, bool taken, void *userdata) {
        idclaims *c = userdata;
        uint32_t slot;
        if (c->fd < 0 || !slot_of(base, &slot))
                return true;
        record r;
        int k = record_read(c->fd, slot, &r);
        bool ours = k > 0 && streq(r.home, c->home) && streq(r.name, c->sandbox);
        if (ours)
                return true;
        /* a range the sandbox holds already: claimed where nobody (live) has (a range from before
         * these claims); one another live state folder holds stays shared, as it was */
        if (k < 0 || (k > 0 && !record_stale(&r)))
                return taken;
        if (record_write(c->fd, slot, c->home, c->sandbox) < 0)
                return taken;
        if (!taken)
                c->taken_new = slot;
        return true;
}

void idclaims_undo(idclaims *c) {
        if (c->fd >= 0 && c->taken_new >= 0)
                (void)record_write(c->fd, (uint32_t)c->taken_new, NULL, NULL);
        c->taken_new = -1;
}

void idclaims_release(const char *home, const char *sandbox, uint32_t base) {
        uint32_t slot;
        if (!slot_of(base, &slot))
                return;
        _cleanup_close_ int fd = claims_lock(false);
        record r;
        if (fd >= 0 && record_read(fd, slot, &r) > 0 && streq(r.home, home) && streq(r.name, sandbox))
                (void)record_write(fd, slot, NULL, NULL);
}
