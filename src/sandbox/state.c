/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox layer's shared state, a leaf the API files use and never the reverse: the name
 * locks, the supervisors this process started, the control socket, reconcile (making a record
 * agree with the processes) and the image store of a handle. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "image/unpack.h"
#include "image/module.h"
#include "isolate/cgroup.h"
#include "isolate/userns.h"
#include "sandbox/ctx.h"
#include "sandbox/rundir.h"
#include "sandbox/state.h"
#include "store/store.h"
#include "supervisor/exitfile.h"
#include "supervisor/proto.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/proc.h"
#include "util/str.h"
#include "util/tmpdir.h"

/* ---- locks ----------------------------------------------------------------------------------- */

/* The name locks live in the runtime folder (sandbox/rundir.h), <runtime folder>/.locks: a lock
 * needs no durability (it dies with its holder), and a file made and deleted on NOOK_HOME's disk
 * per create cost an inode there (issue #17).  No sandbox name starts with a dot. */
static char *lock_path_in(const char *root, const char *name) {
        return strprintf("%s/.locks/%s.lock", root, name);
}

static int lock_in(const char *root, const char *name, int how, int *ret_fd, nook_error *err) {
        _cleanup_free_ char *dir = strprintf("%s/.locks", root);
        _cleanup_free_ char *p = lock_path_in(root, name);
        if (!dir || !p)
                return nook_err_oom(err);
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", dir);
        for (;;) {
                struct stat held, now;
                int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot open the lock '%s'", p);
                while (flock(fd, how) < 0) {
                        if (errno == EWOULDBLOCK) {
                                safe_close(fd);
                                return nook_err_set(err, NOOK_E_BUSY, "Sandbox '%s' is busy", name);
                        }
                        if (errno != EINTR) {
                                safe_close(fd);
                                return nook_err_errno(err, NOOK_E_IO, "Cannot lock '%s'", p);
                        }
                }
                /* rm deletes the lock file while holding it (sb_lock_drop): a lock taken on the
                 * deleted file guards nothing, so take the one the path names now. */
                if (fstat(fd, &held) == 0 && fstatat(AT_FDCWD, p, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
                        held.st_ino == now.st_ino && held.st_dev == now.st_dev) {
                        *ret_fd = fd;
                        return 0;
                }
                safe_close(fd);
        }
}

int sb_lock_how(nook *n, const char *name, int how, int *ret_fd, nook_error *err) {
        const char *root;
        int r = sb_run_root(n, &root, err);
        if (r < 0)
                return r;
        return lock_in(root, name, how, ret_fd, err);
}

int sb_lock_home(const char *home, const char *name, int how, int *ret_fd, nook_error *err) {
        _cleanup_free_ char *root = NULL;
        int r = sb_run_root_home(home, &root, err);
        if (r < 0)
                return r;
        return lock_in(root, name, how, ret_fd, err);
}

int sb_lock(nook *n, const char *name, int *ret_fd, nook_error *err) {
        return sb_lock_how(n, name, LOCK_EX, ret_fd, err);
}

/* Deletes the name's lock file; only while holding it (see sb_lock). */
void sb_lock_drop(nook *n, const char *name) {
        const char *root;
        nook_error ignore;
        if (sb_run_root(n, &root, &ignore) < 0)
                return;
        _cleanup_free_ char *p = lock_path_in(root, name);
        if (p)
                (void)unlink(p);
}

/* ---- the supervisors this process started ---------------------------------------------------- */

/* They are our children (nook-supervisor does not fork to detach, see its main.c): each is
 * reaped as soon as a nook call sees it gone, so none stays a zombie past the next call.  By
 * pidfd, not pid: if the embedding program reaps one itself (a waitpid(-1) loop), its pid may
 * be reused by another child of the program, which a waitpid(pid) here would then steal. */
typedef struct child {
        pid_t pid;
        int pidfd;
} child;

static pthread_mutex_t children_lock = PTHREAD_MUTEX_INITIALIZER;
static child *children;
static size_t n_children, max_children;

void sb_children_add(pid_t pid) {
        int fd = pidfd_open_(pid);
        if (fd < 0)
                return; /* too old a kernel for nook anyway; it is reparented at our exit */
        (void)pthread_mutex_lock(&children_lock);
        if (n_children == max_children) {
                size_t m = max_children ? 2 * max_children : 16;
                child *c = reallocarray(children, m, sizeof(child));
                if (c) {
                        children = c;
                        max_children = m;
                }
        }
        if (n_children < max_children)
                children[n_children++] = (child){ .pid = pid, .pidfd = fd };
        else
                safe_close(fd);
        (void)pthread_mutex_unlock(&children_lock);
}

void sb_children_reap(void) {
        (void)pthread_mutex_lock(&children_lock);
        for (size_t i = 0; i < n_children;) {
                siginfo_t si = { 0 };
                int r = waitid(P_PIDFD, (id_t)children[i].pidfd, &si, WEXITED | WNOHANG);
                if ((r == 0 && si.si_pid != 0) || (r < 0 && errno == ECHILD)) { /* reaped, by us or not */
                        safe_close(children[i].pidfd);
                        children[i] = children[--n_children];
                } else
                        i++;
        }
        (void)pthread_mutex_unlock(&children_lock);
}

/* The folder of name's control socket: its runtime folder, or the state folder of a sandbox an
 * older nook started (its socket lived there). */
static int ctl_dir_open(nook *n, const char *name, nook_error *err) {
        _cleanup_free_ char *rdir = NULL, *sdir = NULL;
        int r = sb_run_dir(n, name, &rdir, err);
        if (r < 0)
                return r;
        int dfd = open(rdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0 || errno != ENOENT)
                return dfd < 0 ? -errno : dfd;
        r = ctx_sandbox_dir(n, name, &sdir, err);
        if (r < 0)
                return r;
        dfd = open(sdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        return dfd < 0 ? -errno : dfd;
}

int sb_connect(nook *n, const char *name, int *ret_fd, nook_error *err) {
        nook_error e2 = { 0 };
        _cleanup_close_ int dfd = ctl_dir_open(n, name, &e2);
        if (dfd < 0 && e2.code) {
                *err = e2;
                return dfd;
        }
        if (dfd < 0)
                errno = -dfd;
        if (dfd < 0 && (errno == EACCES || errno == EPERM))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Cannot open sandbox '%s' in '%s': permission denied (the state belongs to another "
                        "user: run nook as that user, or use a home of your own with --home or NOOK_HOME)",
                        name, nook_home(n));
        if (dfd < 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox '%s'", name);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        (void)snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/ctl.sock", dfd);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create a socket");
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = errno;
                safe_close(fd);
                if (e == ENOENT || e == ECONNREFUSED)
                        return nook_err_set(err, NOOK_E_STATE,
                                "Sandbox '%s' is not running; start it ('nook start %s'; start() in the API)",
                                name, name);
                return nook_err_errnum(err, NOOK_E_IO, e, "Cannot reach sandbox '%s'", name);
        }
        *ret_fd = fd;
        return 0;
}

int sb_lock_running(nook *n, const char *name, const char *why, int *ret_lock, nook_error *err) {
        _cleanup_close_ int lock = -1;
        sandbox_rec rec = { 0 };
        store *st;
        int r = sb_lock(n, name, &lock, err);
        if (r >= 0)
                r = ctx_store(n, &st, err);
        if (r >= 0 && store_sandbox_get(st, name, &rec, err) < 0)
                r = nook_err_set(err, NOOK_E_NOT_FOUND, "No sandbox '%s'", name);
        if (r >= 0)
                r = sb_reconcile(n, &rec, err);
        if (r >= 0 && !streq(rec.state, "running"))
                r = nook_err_set(
                        err, NOOK_E_STATE, "Sandbox '%s' is %s, not running; %s", name, rec.state, why);
        sandbox_rec_done(&rec);
        if (r >= 0)
                *ret_lock = TAKE_FD(lock);
        return r;
}

int sb_request_reply(int sock, const char *name, json_t *msg, const char *what, int timeout_ms, json_t **ret,
        nook_error *err) {
        json_t *reply = NULL;
        int r = msg ? proto_send(sock, msg, NULL, 0) : -ENOMEM;
        json_decref(msg);
        struct pollfd p = { .fd = sock, .events = POLLIN };
        if (r >= 0 && poll(&p, 1, timeout_ms) == 0)
                return nook_err_set(
                        err, NOOK_E_TIMEOUT, "Sandbox '%s' did not answer the %s request", name, what);
        if (r >= 0)
                r = proto_recv(sock, &reply, NULL, NULL);
        if (r <= 0)
                return nook_err_errnum(
                        err, NOOK_E_IO, r < 0 ? -r : EPIPE, "Cannot reach sandbox '%s'", name);
        if (streq(proto_op(reply), "error")) {
                r = proto_error_from_msg(reply, err);
                json_decref(reply);
                return r;
        }
        *ret = reply;
        return 0;
}

int sb_request(int sock, const char *name, json_t *msg, const char *what, int timeout_ms, nook_error *err) {
        json_t *reply = NULL;
        int r = sb_request_reply(sock, name, msg, what, timeout_ms, &reply, err);
        json_decref(reply);
        return r;
}

bool sb_wait_gone(pid_t pid, uint64_t start, uint64_t timeout_ms) {
        uint64_t deadline = now_ms() + timeout_ms;
        /* A pidfd wakes us the moment it exits.  It names whatever holds the pid when opened, so
         * it is used only once proc_alive() has confirmed that is still our process. */
        int pfd = pidfd_open_(pid);
        if (pfd >= 0 && proc_alive(pid, start)) {
                struct pollfd p = { .fd = pfd, .events = POLLIN };
                uint64_t now;
                while ((now = now_ms()) < deadline && poll(&p, 1, (int)(deadline - now)) < 0 &&
                        errno == EINTR)
                        ;
        }
        if (pfd >= 0)
                safe_close(pfd);
        sb_children_reap();
        while (proc_alive(pid, start)) {
                if (now_ms() >= deadline)
                        return false;
                usleep(2000);
        }
        return true;
}

int sb_rec_set_state(sandbox_rec *rec, const char *state, nook_error *err) {
        char *s = strdup(state);
        if (!s)
                return nook_err_oom(err);
        free(rec->state);
        rec->state = s;
        return 0;
}

/* ---- reconcile ------------------------------------------------------------------------------------ */

/* The pid of a live nook-supervisor of state folder sdir (its argv holds "--state" sdir), or 0.
 * A supervisor whose creator was killed before recording it is found this way.  Not skip: the
 * supervisor this handle's create started and has not handed its config yet (nook->spawning),
 * which a reconcile inside that create (the name's old record) must neither adopt nor kill. */
static pid_t find_supervisor_of(const char *sdir, pid_t skip) {
        _cleanup_close_ int pfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = pfd >= 0 ? fdopendir(fcntl(pfd, F_DUPFD_CLOEXEC, 3)) : NULL;
        size_t sl = strlen(sdir);
        pid_t found = 0;
        struct dirent *de;
        if (!d)
                return 0;
        while (!found && (de = readdir(d))) {
                char p[300], buf[4096];
                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                (void)snprintf(p, sizeof(p), "%s/cmdline", de->d_name);
                _cleanup_close_ int fd = openat(pfd, p, O_RDONLY | O_CLOEXEC);
                ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
                if (k <= 0)
                        continue;
                buf[k] = 0;
                /* argv: BIN, "--state", sdir, ...: NUL-separated */
                size_t l0 = strnlen(buf, (size_t)k);
                const char *a1 = buf + l0 + 1;
                if ((ssize_t)(l0 + 1 + 8 + sl) >= k || memcmp(a1, "--state", 8) != 0 ||
                        memcmp(a1 + 8, sdir, sl + 1) != 0)
                        continue;
                found = (pid_t)strtol(
                        de->d_name, NULL, 10); /* a /proc entry starting with a digit is a pid */
                if (found == skip)
                        found = 0;
        }
        closedir(d);
        return found;
}

pid_t sb_supervisor_find(nook *n, const char *name) {
        _cleanup_free_ char *sdir = NULL;
        nook_error ignore;
        if (ctx_sandbox_dir(n, name, &sdir, &ignore) < 0)
                return 0;
        return find_supervisor_of(sdir, n->spawning);
}

/* The pid at the other end of the control socket of sdir, or 0 when none answers. */
static pid_t ctl_peer(nook *n, const char *name) {
        nook_error ignore;
        int fd = -1;
        if (sb_connect(n, name, &fd, &ignore) < 0)
                return 0;
        struct ucred uc = { 0 };
        socklen_t len = sizeof(uc);
        pid_t pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0 ? uc.pid : 0;
        safe_close(fd);
        return pid;
}

void sb_cgroup_remove(nook *n, const char *name) {
        iso_cgroup *cg = NULL;
        nook_error ignore;
        if (iso_cgroup_open(n->home, name, &cg, &ignore) < 0)
                return;
        (void)iso_cgroup_destroy(cg); /* kills what is left in it: nothing, once its supervisor is gone */
        iso_cgroup_free(cg);
}

/* A supervisor of this sandbox is alive but the record does not say so (its create was
 * interrupted after the spawn): it is adopted when it serves its control socket (setup done),
 * else killed.  Returns 1 when adopted. */
static int adopt_or_kill(nook *n, sandbox_rec *rec, const char *sdir, store *st, nook_error *err) {
        pid_t pid = find_supervisor_of(sdir, n->spawning);
        if (pid <= 0)
                return 0;
        uint64_t start = proc_start_time(pid);
        if (ctl_peer(n, rec->name) == pid) {
                int r = sb_rec_set_state(rec, "running", err);
                if (r < 0)
                        return r;
                rec->supervisor_pid = pid;
                rec->supervisor_start = start;
                rec->started_at = now_epoch();
                rec->stopped_at = 0;
                free(rec->stop_reason);
                rec->stop_reason = NULL;
                r = store_sandbox_update_state(st, rec, err);
                return r < 0 ? r : 1;
        }
        (void)kill(pid, SIGKILL);
        (void)sb_wait_gone(pid, start, 5000);
        return 0;
}

/* The rules (docs/design/runtime.md, "Reconcile"), under the name's lock:
 *   stopped                          nothing to do
 *   running, its supervisor alive    nothing to do
 *   creating (its creator is gone: we hold the lock), or running with the supervisor gone:
 *     a live supervisor of this state folder serving its socket is adopted (running), one
 *     still in setup is killed; then what a supervisor cleans on exit is cleaned here (socket,
 *     cgroups, an ephemeral writable layer) and the record says stopped, with the reason from
 *     its exit record, "supervisor_died", or "create_interrupted". */
int sb_reconcile(nook *n, sandbox_rec *rec, nook_error *err) {
        store *st;
        int r;
        if (streq(rec->state, "stopped"))
                return 0;
        if (rec->supervisor_pid > 0 && proc_alive(rec->supervisor_pid, rec->supervisor_start))
                return 0;
        sb_children_reap(); /* it may have been ours */
        _cleanup_free_ char *sdir = NULL;
        r = ctx_sandbox_dir(n, rec->name, &sdir, err);
        if (r < 0)
                return r;
        r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        bool interrupted = streq(rec->state, "creating");
        r = adopt_or_kill(n, rec, sdir, st, err);
        if (r != 0)
                return r < 0 ? r : 0;
        exit_record ex;
        nook_error ignore;
        const char *reason = interrupted ? "create_interrupted" : "supervisor_died";
        if (!interrupted && exit_record_read(sdir, &ex, &ignore) >= 0 && ex.stopped_at >= rec->started_at)
                reason = ex.reason;
        _cleanup_free_ char *rdir = NULL;
        if (sb_run_dir(n, rec->name, &rdir, &ignore) >= 0)
                sb_run_dir_clean(rdir, /* keep_log= */ true); /* its sockets; gone anyway after a reboot */
        _cleanup_free_ char *sock = strprintf("%s/ctl.sock", sdir); /* an older nook's */
        if (sock)
                (void)unlink(sock);
        sb_cgroup_remove(n, rec->name);
        if (!rec->sticky || interrupted) {
                _cleanup_free_ char *upper = strprintf("%s/upper", sdir), *work = strprintf("%s/work", sdir);
                if (upper && work) {
                        if (!rec->sticky)
                                (void)path_rm_rf(upper, &ignore);
                        (void)path_rm_rf(work, &ignore);
                }
        }
        char *rs = strdup(reason);
        if (!rs)
                return nook_err_oom(err);
        free(rec->stop_reason);
        rec->stop_reason = rs;
        if ((r = sb_rec_set_state(rec, "stopped", err)) < 0)
                return r;
        rec->stopped_at = now_epoch();
        rec->supervisor_pid = 0;
        rec->supervisor_start = 0;
        return store_sandbox_update_state(st, rec, err);
}

int sb_reconcile_unlocked(nook *n, sandbox_rec *rec, nook_error *err) {
        if (streq(rec->state, "stopped"))
                return 0;
        if (streq(rec->state, "running") && rec->supervisor_pid > 0 &&
                proc_alive(rec->supervisor_pid, rec->supervisor_start))
                return 0;
        _cleanup_close_ int lock = -1;
        nook_error e2;
        if (sb_lock_how(n, rec->name, LOCK_EX | LOCK_NB, &lock, &e2) < 0)
                return 0; /* an operation on it is under way: it makes the record true */
        store *st;
        sandbox_rec now = { 0 };
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        r = store_sandbox_get(st, rec->name, &now, err);
        if (r == -NOOK_E_NOT_FOUND) {
                /* removed meanwhile: say so without writing anything */
                return sb_rec_set_state(rec, "removed", err);
        }
        if (r < 0)
                return r;
        sandbox_rec_done(rec);
        *rec = now;
        return sb_reconcile(n, rec, err);
}

/* A name's lock file held by nobody: taken and deleted (sb_lock takes the file the path names
 * after locking, so deleting one that is free is always safe).  rm drops its own; this gets the
 * ones a killed rm left, and those of names that never got further than a lock. */
static int lock_remove(int dirfd, const char *name, nook_error *err) {
        if (!endswith(name, ".lock"))
                return 0;
        if (unlinkat(dirfd, name, 0) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot remove the lock '%s'", name);
        return 0;
}

void sb_sweep_tmp(nook *n) {
        const char *root = NULL;
        nook_error ignore;
        _cleanup_free_ char *locks = NULL;
        if (sb_run_root(n, &root, &ignore) >= 0)
                locks = strprintf("%s/.locks", root);
        _cleanup_free_ char *old_locks = strprintf("%s/locks", n->home); /* an older nook's */
        _cleanup_free_ char *trash = strprintf("%s/trash", n->home);
        if (locks)
                (void)tmp_sweep(locks, lock_remove);
        if (old_locks)
                (void)tmp_sweep(old_locks, lock_remove);
        if (trash)
                (void)tmp_sweep(trash, path_rm_rf_at);
        _cleanup_free_ char *snap = strprintf("%s/snapshots/.tmp", n->home);
        _cleanup_free_ char *img = strprintf("%s/images/tmp", n->home);
        if (snap)
                (void)tmp_sweep(snap, path_rm_rf_at);
        if (img)
                (void)tmp_sweep(img, path_rm_rf_at);
        /* layers a killed pull was unpacking, in this process's mode (the other is not ours) */
        _cleanup_free_ char *layers =
                strprintf("%s/images/layers/%s", n->home, iso_rootful() ? "rootful" : "rootless");
        if (layers)
                (void)tmp_sweep_prefix(layers, IMAGE_LAYER_TMP_PREFIX, path_rm_rf_at);
}

int sb_home_dir(nook *n, const char *sub, char **ret, nook_error *err) {
        _cleanup_free_ char *p = strprintf("%s/%s", n->home, sub);
        if (!p)
                return nook_err_oom(err);
        int r = path_mkdir_p(p, 0700, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

int sb_trash_dir(nook *n, char **ret, nook_error *err) {
        return sb_home_dir(n, "trash", ret, err);
}

int sb_trash_new(nook *n, const char *kind, char **ret, int *ret_lock, nook_error *err) {
        _cleanup_free_ char *trash = NULL;
        int r = sb_trash_dir(n, &trash, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *t = strprintf("%s/%s-XXXXXX", trash, kind);
        if (!t)
                return nook_err_oom(err);
        r = tmpdir_owned_new(t, ret_lock, err);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(t);
        return 0;
}

/* ---- images ------------------------------------------------------------------------------------ */

int sb_image_store(nook *n, image_store *ret, nook_error *err) {
        store *st;
        int r = ctx_store(n, &st, err);
        if (r < 0)
                return r;
        /* Rootful: files are owned by the canonical id range on the host (n->img_uid), which
         * idmapped mounts show to each sandbox as its own range's.  Rootless (also root inside
         * `unshare -r`): by us, one id mapped. */
        unpack_opts u = { .rootless = !iso_rootful(), .id_base = n->img_uid };
        return IMG(image_store_init)(ret, n->home, st, &u, err);
}
