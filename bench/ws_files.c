/* SPDX-License-Identifier: Apache-2.0 */
/* Workspace file API against plain host calls, side by side in one run (DESIGN.md budget:
 * "place 200 × 1 KiB files / read them back ≤ 1.1× / ≤ 1.05× plain host writes/reads").
 *
 *   plain: open(O_CREAT|O_TRUNC) + write + close; open + read to EOF + close
 *   ws:    ws_write (resolve the parent beneath the root, O_TMPFILE, linkat; in place: one
 *          openat2(O_CREAT|O_EXCL) of the file); ws_read
 *   api:   nook_ws_write / nook_ws_read, the public calls the CLI and the Node binding make (a
 *          write also takes the sandbox name's lock shared), in a NOOK_HOME of its own
 *
 * Each round writes into fresh, empty directories (the "src" subdirectory exists, as it would in
 * a project), then reads the same files back.  The sides alternate file by file, and which one
 * starts alternates per round, so neither the page cache, the journal nor other load favours
 * one of them.  Per-round totals are summed from per-file timings; medians over the rounds are
 * reported.
 *
 * The two folders also trade sides every other round (the plain side writes where the workspace
 * side wrote two rounds before; which folder is emptied first follows who starts): on a disk
 * filesystem the inode allocator's state in a folder's block group (ext4 without a journal skips
 * recently freed inodes) can cost more than everything nook adds, and must not stay with one side
 * for a whole run.
 *
 * NOOK_BENCH_AA=1 makes the workspace side do the plain side's calls too (an A/A control): the
 * ratios it prints are this bench's own noise on this filesystem at this load, the yardstick for
 * a verdict within a few percent.
 *
 * NOOK_BENCH_IN_PLACE=1 makes the workspace side write in place (WS_WRITE_IN_PLACE,
 * nook_ws_write_ex(NOOK_WS_WRITE_IN_PLACE): into the file itself, as a plain host write does, not
 * atomic).  That is the budget's like-for-like case: plain writes against plain writes.
 *
 * NOOK_BENCH_PLAIN_ATOMIC=1 makes the plain side write as a host program does when it keeps the
 * workspace write's promise (readers and a kill never see half a file): a temporary beside the
 * file, renamed over it.  What the workspace write costs over plain writes is that promise; this
 * shows what it costs over the host's own way of keeping it.
 *
 * usage: bench-ws-files [rounds] [dir]   (defaults: 21, a mkdtemp under /tmp) */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nook.h"
#include "util/macro.h"
#include "util/path.h"
#include "workspace/ws.h"

#define N_FILES 200
#define FILE_SIZE 1024
#define ROOTFUL_UID 100000000u

static char payload[FILE_SIZE];

static double now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what) {
        fprintf(stderr, "bench-ws-files: %s: %s\n", what, strerror(errno));
        exit(1);
}

/* Empties dir/src (every file of a round lives there); dir itself stays, so a workspace handle
 * opened on it stays valid. */
static void fresh_dir(const char *dir) {
        nook_error err = {};
        char sub[PATH_MAX];

        snprintf(sub, sizeof(sub), "%s/src", dir);
        if (path_rm_rf(sub, &err) < 0) {
                fprintf(stderr, "bench-ws-files: %s\n", err.msg);
                exit(1);
        }
        if (path_mkdir_p(sub, 0755, &err) < 0) {
                fprintf(stderr, "bench-ws-files: %s\n", err.msg);
                exit(1);
        }
}

/* One file each way, timed separately.  The two sides are interleaved file by file (order
 * alternating) so that load from other processes on this 2-core machine hits both equally. */
static bool plain_atomic; /* NOOK_BENCH_PLAIN_ATOMIC=1 */
static bool in_place; /* NOOK_BENCH_IN_PLACE=1 */

static double plain_write_one(const char *dir, int i) {
        char p[PATH_MAX], t[PATH_MAX];
        snprintf(p, sizeof(p), "%s/src/f%03d.txt", dir, i);
        if (plain_atomic) {
                /* what a host program does for the same promise (write-file-atomic, Python's
                 * atomicwrites): a temporary beside the file, renamed over it once written */
                snprintf(t, sizeof(t), "%s/src/.f%03d.txt.tmp", dir, i);
                double t0 = now_us();
                int fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (fd < 0 || write(fd, payload, FILE_SIZE) != FILE_SIZE || close(fd) < 0 ||
                        rename(t, p) < 0)
                        die("plain atomic write");
                return now_us() - t0;
        }
        double t0 = now_us();
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, payload, FILE_SIZE) != FILE_SIZE || close(fd) < 0)
                die("plain write");
        return now_us() - t0;
}

static double plain_read_one(const char *dir, int i) {
        static char buf[FILE_SIZE * 4];
        char p[PATH_MAX];
        size_t len = 0;
        ssize_t n;

        snprintf(p, sizeof(p), "%s/src/f%03d.txt", dir, i);
        double t0 = now_us();
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                die("plain open");
        while ((n = read(fd, buf + len, sizeof(buf) - len)) > 0)
                len += (size_t)n;
        if (n < 0 || len != FILE_SIZE)
                die("plain read");
        close(fd);
        return now_us() - t0;
}

/* The workspace side: the internal call (ws, what the sandbox layer uses), or the public one
 * (api: nook_ws_write/nook_ws_read, which the CLI and the Node binding call; a write there also
 * takes the sandbox name's lock shared, against a concurrent `nook rm`). */
typedef struct ws_side {
        ws *w;
        nook_ws *api;
        const char *aa_dir; /* NOOK_BENCH_AA: plain calls in the workspace side's folder */
} ws_side;

static double ws_write_one(const ws_side *w, int i) {
        nook_error err = {};
        char p[64];

        if (w->aa_dir)
                return plain_write_one(w->aa_dir, i);
        snprintf(p, sizeof(p), "/workspace/src/f%03d.txt", i);
        double t0 = now_us();
        int r = w->api ? nook_ws_write_ex(
                                 w->api, p, payload, FILE_SIZE, in_place ? NOOK_WS_WRITE_IN_PLACE : 0, &err)
                       : ws_write(w->w, p, payload, FILE_SIZE, 0644, in_place ? WS_WRITE_IN_PLACE : 0, &err);
        if (r < 0) {
                fprintf(stderr, "bench-ws-files: %s\n", err.msg);
                exit(1);
        }
        return now_us() - t0;
}

static double ws_read_one(const ws_side *w, int i) {
        nook_error err = {};
        char p[64];
        void *data;
        size_t len;

        if (w->aa_dir)
                return plain_read_one(w->aa_dir, i);
        snprintf(p, sizeof(p), "/workspace/src/f%03d.txt", i);
        double t0 = now_us();
        int r = w->api ? nook_ws_read(w->api, p, 0, &data, &len, &err)
                       : ws_read(w->w, p, 0, &data, &len, &err);
        if (r < 0 || len != FILE_SIZE) {
                fprintf(stderr, "bench-ws-files: %s\n", err.msg);
                exit(1);
        }
        free(data);
        return now_us() - t0;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *)a, y = *(const double *)b;
        return (x > y) - (x < y);
}

static double median(double *v, int n) {
        qsort(v, (size_t)n, sizeof(*v), cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct sample {
        double pw, pr, ww, wr;
} sample;

/* The setup of one side for a run: a directory and how the workspace side reaches it. */
typedef struct ws_setup {
        const char *label;
        uid_t uid;
        gid_t gid;
        nook_ws *api[2]; /* NULL: ws_open on the round's folder; else the handle on dirs[i] */
        char dirs[2][PATH_MAX / 2]; /* the two folders, which trade sides every round */
} ws_setup;

static void round_once(const ws_setup *st, int r, sample *s) {
        nook_error err = {};
        bool ws_first = r % 2 == 1;
        int d = r / 2 % 2; /* the folders trade sides every other round, who starts every round */
        const char *ws_dir = st->dirs[d], *plain_dir = st->dirs[1 - d];
        ws_side side = { .api = st->api[d], .aa_dir = getenv("NOOK_BENCH_AA") ? ws_dir : NULL };
        ws *w = NULL;

        fresh_dir(ws_first ? ws_dir : plain_dir);
        fresh_dir(ws_first ? plain_dir : ws_dir);
        if (!side.api && ws_open(ws_dir, false, st->uid, st->gid, &w, &err) < 0) {
                fprintf(stderr, "bench-ws-files: %s\n", err.msg);
                exit(1);
        }
        side.w = w;
        *s = (sample){};
        for (int i = 0; i < N_FILES; i++) {
                if ((i + ws_first) % 2) {
                        s->ww += ws_write_one(&side, i);
                        s->pw += plain_write_one(plain_dir, i);
                } else {
                        s->pw += plain_write_one(plain_dir, i);
                        s->ww += ws_write_one(&side, i);
                }
        }
        for (int i = 0; i < N_FILES; i++) {
                if ((i + ws_first) % 2) {
                        s->wr += ws_read_one(&side, i);
                        s->pr += plain_read_one(plain_dir, i);
                } else {
                        s->pr += plain_read_one(plain_dir, i);
                        s->wr += ws_read_one(&side, i);
                }
        }
        ws_free(w);
}

static void run(const ws_setup *st, int rounds) {
        double *pw = calloc((size_t)rounds, sizeof(double)), *pr = calloc((size_t)rounds, sizeof(double));
        double *ww = calloc((size_t)rounds, sizeof(double)), *wr = calloc((size_t)rounds, sizeof(double));
        if (!pw || !pr || !ww || !wr)
                die("calloc");

        sample warm;
        round_once(st, 0, &warm); /* warm-up of both folders, not counted */
        round_once(st, 2, &warm);
        for (int r = 0; r < rounds; r++) {
                sample s;
                round_once(st, r, &s);
                pw[r] = s.pw, pr[r] = s.pr, ww[r] = s.ww, wr[r] = s.wr;
        }
        double mpw = median(pw, rounds), mpr = median(pr, rounds);
        double mww = median(ww, rounds), mwr = median(wr, rounds);
        /* after median() sorted them: [0] is the best round, the least disturbed by other load */
        double bw = ww[0] / pw[0], br = wr[0] / pr[0];
        printf("%s%s%s%s: %d files x %d B, %d rounds, medians\n",
                getenv("NOOK_BENCH_AA") ? "A/A control, " : "", in_place ? "in place, " : "",
                plain_atomic ? "against plain atomic writes (temp + rename), " : "", st->label, N_FILES,
                FILE_SIZE, rounds);
        printf("  write: plain %8.0f us  ws %8.0f us  (%.1f vs %.1f us/file)\n", mpw, mww, mpw / N_FILES,
                mww / N_FILES);
        printf("  read:  plain %8.0f us  ws %8.0f us  (%.1f vs %.1f us/file)\n", mpr, mwr, mpr / N_FILES,
                mwr / N_FILES);
        if (plain_atomic)
                printf("  write ratio %.2fx against the host's own atomic write (target <= 1.1x, like for like)\n",
                        mww / mpw);
        else if (in_place)
                printf("  write ratio %.2fx (target <= 1.1x: plain writes against plain writes)\n",
                        mww / mpw);
        else
                printf("  write ratio %.2fx atomic against plain writes (no target: the promise's price)\n",
                        mww / mpw);
        printf("  read ratio  %.2fx (target <= 1.05x)\n", mwr / mpr);
        printf("  best rounds: write %.2fx, read %.2fx\n", bw, br);
        free(pw);
        free(pr);
        free(ww);
        free(wr);
}

/* The public API in a state folder of its own (NOOK_HOME=<base>/home), as `nook ws write`, the
 * Node binding's writeFile/readFile use it; who owns new files is the handle's choice. */
/* The public API in a state folder of its own (NOOK_HOME=<base>/home), as `nook ws write`, the
 * Node binding's writeFile/readFile use it; who owns new files is the handle's choice.  Two
 * sandbox names, so that the folders can trade sides like the others'. */
static void api_run(const char *base, int rounds) {
        static ws_setup api = {
                .label = "public API (nook_ws_write/nook_ws_read: the CLI, the Node binding)"
        };
        char home[PATH_MAX / 2 + 8];
        nook_error err = {};
        nook *n = NULL;

        snprintf(home, sizeof(home), "%s/home", base);
        if (nook_open(home, &n, &err) < 0 || nook_ws_open(n, "bench", &api.api[0], &err) < 0 ||
                nook_ws_open(n, "bench2", &api.api[1], &err) < 0) {
                fprintf(stderr, "bench-ws-files: %s\n", err.msg);
                exit(1);
        }
        for (int i = 0; i < 2; i++)
                snprintf(api.dirs[i], sizeof(api.dirs[i]), "%s", nook_ws_root(api.api[i]));
        run(&api, rounds);
        nook_ws_close(api.api[0]);
        nook_ws_close(api.api[1]);
        nook_close(n);
        (void)path_rm_rf(home, &err);
}

static void local_run(ws_setup *st, const char *base, int rounds) {
        snprintf(st->dirs[0], sizeof(st->dirs[0]), "%.*s/plain", PATH_MAX / 2 - 16, base);
        snprintf(st->dirs[1], sizeof(st->dirs[1]), "%.*s/ws", PATH_MAX / 2 - 16, base);
        run(st, rounds);
}

int main(int argc, char **argv) {
        int rounds = argc > 1 ? atoi(argv[1]) : 21;
        char base[PATH_MAX / 4]; /* room for the subdirectories below it */
        nook_error err = {};
        bool own_base = argc <= 2;

        if (rounds < 1)
                rounds = 1;
        if (own_base) {
                snprintf(base, sizeof(base), "/tmp/nook-bench-ws-XXXXXX");
                if (!mkdtemp(base))
                        die("mkdtemp");
        } else
                snprintf(base, sizeof(base), "%s", argv[2]);
        memset(payload, 'x', sizeof(payload));
        plain_atomic =
                getenv("NOOK_BENCH_PLAIN_ATOMIC") && strcmp(getenv("NOOK_BENCH_PLAIN_ATOMIC"), "1") == 0;
        in_place = getenv("NOOK_BENCH_IN_PLACE") && strcmp(getenv("NOOK_BENCH_IN_PLACE"), "1") == 0;
        if (in_place && plain_atomic) {
                fputs("bench-ws-files: NOOK_BENCH_IN_PLACE and NOOK_BENCH_PLAIN_ATOMIC compare different things; "
                      "set one\n",
                        stderr);
                return 2;
        }

        static ws_setup rootless = { .label = "rootless (files stay ours)" };
        rootless.uid = geteuid();
        rootless.gid = getegid();
        local_run(&rootless, base, rounds);
        if (geteuid() == 0) {
                /* Rootful: each new file is also fchown'ed to the sandbox's root on the host. */
                static ws_setup rootful = { .label = "rootful (fchown to the sandbox root)",
                        .uid = ROOTFUL_UID,
                        .gid = ROOTFUL_UID };
                local_run(&rootful, base, rounds);
        }
        api_run(base, rounds);

        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/plain", base);
        (void)path_rm_rf(p, &err);
        snprintf(p, sizeof(p), "%s/ws", base);
        (void)path_rm_rf(p, &err);
        if (own_base)
                (void)rmdir(base);
        return 0;
}
