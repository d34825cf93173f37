/* SPDX-License-Identifier: Apache-2.0 */
/* User lookup for an exec's --user, in the sandbox's own /etc/passwd and /etc/group.  Runs in the
 * per-exec helper (init_exec.c), after pivot_root: the files are the guest's, and hostile. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "supervisor/init_internal.h"
#include "util/macro.h"

/* Looks name up in the sandbox's /etc/passwd or /etc/group (field 3 is the id).  We parse the
 * files ourselves: the image's libc and NSS modules are not ours to load. */
/* The guest owns /etc/passwd and /etc/group: only a regular file is read (a FIFO there would
 * block the helper, and with it the exec's "started"). */
static FILE *open_db(const char *file) {
        struct stat st;
        int fd = open(file, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        FILE *f = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? fdopen(fd, "r") : NULL;
        if (!f)
                safe_close(fd);
        return f;
}

static bool parse_uint(const char *s, unsigned *ret) {
        char *end;
        if (!s || !*s || *s < '0' || *s > '9')
                return false;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || *end || v > 0xFFFFFFFEul)
                return false;
        *ret = (unsigned)v;
        return true;
}

static int lookup_id(const char *file, const char *name, unsigned *ret_id, unsigned *ret_gid, char *home,
        size_t home_len) {
        FILE *f = open_db(file);
        char line[1024];
        if (!f)
                return -ENOENT;
        while (fgets(line, sizeof(line), f)) {
                char *fields[7] = { 0 };
                char *p = line;
                unsigned id, gid = 0;
                line[strcspn(line, "\n")] = 0;
                for (int i = 0; i < 7 && p; i++) {
                        fields[i] = p;
                        p = strchr(p, ':');
                        if (p)
                                *p++ = 0;
                }
                if (!fields[2] || !streq(fields[0], name))
                        continue;
                /* An id that is not a number would read as 0, and -1 is "unchanged" to
                 * setresuid(2): either would run the command as root.  Such an entry is invalid
                 * and skipped, as glibc's files backend skips it. */
                if (!parse_uint(fields[2], &id))
                        continue;
                if (ret_gid && fields[3] && !parse_uint(fields[3], &gid))
                        continue;
                *ret_id = id;
                if (ret_gid && fields[3])
                        *ret_gid = gid;
                if (home && fields[5])
                        (void)snprintf(home, home_len, "%s", fields[5]);
                fclose(f);
                return 0;
        }
        fclose(f);
        return -ENOENT;
}

/* user: "name", "uid", "uid:gid", "name:group". */
int init_resolve_user(const char *user, unsigned *uid, unsigned *gid, char *home, size_t home_len) {
        char u[256], *g;
        (void)snprintf(u, sizeof(u), "%s", user ? user : "0");
        g = strchr(u, ':');
        if (g)
                *g++ = 0;
        *gid = 0;
        (void)snprintf(home, home_len, "/");
        if (parse_uint(u, uid)) {
                char name[256];
                *gid = *uid;
                /* find the home of a numeric uid, best effort */
                FILE *f = open_db("/etc/passwd");
                if (f) {
                        char line[1024];
                        while (fgets(line, sizeof(line), f)) {
                                unsigned id, pg;
                                char h[256];
                                if (sscanf(line, "%255[^:]:%*[^:]:%u:%u:%*[^:]:%255[^:]", name, &id, &pg,
                                            h) == 4 &&
                                        id == *uid && pg != UINT_MAX) {
                                        *gid = pg;
                                        (void)snprintf(home, home_len, "%s", h);
                                        break;
                                }
                        }
                        fclose(f);
                }
        } else if (lookup_id("/etc/passwd", u, uid, gid, home, home_len) < 0)
                return -ESRCH;
        if (g && !parse_uint(g, gid) && lookup_id("/etc/group", g, gid, NULL, NULL, 0) < 0)
                return -ESRCH;
        return 0;
}
