/* SPDX-License-Identifier: Apache-2.0 */
/* The descriptor watcher behind exec: one epoll thread per JS environment waits for every
 * watched descriptor and posts "fd N is ready" to the JS thread through a thread-safe function;
 * the work (read, write, libnook's nook_exec_process) then runs on the JS thread.  However many
 * commands run, they hold one thread between them and none of libuv's pool.
 *
 * Why not uv_poll on napi_get_uv_event_loop()?  Bun exports uv_poll_init/start/stop only as
 * stubs that abort the process ("unsupported uv function"; checked on Bun 1.3.3), and the same
 * code must run under Node and Bun.  A thread-safe function is N-API proper in both.
 *
 * Rules that keep it safe:
 *  - The epoll thread never dereferences a watch.  Each watch has a 64-bit id, which is what
 *    epoll carries and what is posted; the JS thread looks it up among the live watches, so an
 *    event for a watch removed meanwhile (its fd closed, even reused) finds nothing and is dropped.
 *  - EPOLLONESHOT: a watch fires once, then waits to be armed again by its owner (after reading,
 *    or when JS asks for more data: that is the back-pressure).
 *  - The thread-safe function is referenced (keeps the process alive) only while a watch exists,
 *    as a running child process would. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "addon.h"
#include "watch.h"

#define ID_SHIFT 8 /* posted as id << 8 | events: every EPOLL* bit used here is below 0x100 */
#define STOP_ID 0

typedef struct watch_loop {
        napi_env env;
        int epfd, stopfd;
        pthread_t thread;
        bool thread_started;
        napi_threadsafe_function tsfn;
        bool referenced;
        bool dead; /* its environment's cleanup ran: calls still queued on the tsfn are dropped */
        watch **live; /* JS thread only */
        size_t n_live, cap_live;
        uint64_t next_id;
} watch_loop;

struct watch {
        watch_loop *loop;
        uint64_t id;
        int fd;
        uint32_t events;
        watch_fn fn;
        void *userdata;
};

static void *watch_thread(void *data) {
        watch_loop *l = data;
        struct epoll_event ev[64];
        for (;;) {
                int n = epoll_wait(l->epfd, ev, 64, -1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        break;
                for (int i = 0; i < n; i++) {
                        uint64_t id = ev[i].data.u64;
                        if (id == STOP_ID)
                                return NULL;
                        uintptr_t msg = (uintptr_t)(id << ID_SHIFT) | (ev[i].events & 0xff);
                        /* a number, never dereferenced: see "Rules" above */
                        void *post = (void *)msg; // NOLINT(performance-no-int-to-ptr)
                        if (napi_call_threadsafe_function(l->tsfn, post, napi_tsfn_nonblocking) ==
                                napi_closing)
                                return NULL;
                }
        }
        return NULL;
}

static watch *find_live(watch_loop *l, uint64_t id, size_t *ret_index) {
        for (size_t i = 0; i < l->n_live; i++)
                if (l->live[i]->id == id) {
                        if (ret_index)
                                *ret_index = i;
                        return l->live[i];
                }
        return NULL;
}

static void watch_call_js(napi_env env, napi_value js_cb, void *context, void *data) {
        watch_loop *l = context;
        uintptr_t msg = (uintptr_t)data;
        if (!env || l->dead)
                return; /* the environment is going away */
        watch *w = find_live(l, (uint64_t)msg >> ID_SHIFT, NULL);
        if (w)
                w->fn(env, w->userdata, (uint32_t)(msg & 0xff));
}

static void set_referenced(watch_loop *l) {
        bool want = l->n_live > 0;
        if (want == l->referenced)
                return;
        if (want)
                (void)napi_ref_threadsafe_function(l->env, l->tsfn);
        else
                (void)napi_unref_threadsafe_function(l->env, l->tsfn);
        l->referenced = want;
}

static void watch_loop_free(watch_loop *l) {
        free(l->live);
        free(l);
}

/* The thread-safe function's finalizer: no call of watch_call_js can come after it, so the loop,
 * its context, goes now. */
static void watch_tsfn_finalize(napi_env env, void *data, void *hint) {
        watch_loop_free(data);
}

/* At the environment's end: the thread stops and is joined, the watches go, and the thread-safe
 * function is released (abort: what the thread queued is dropped, watch_call_js sees `dead`).
 * The loop itself is freed by the tsfn's finalizer, after the last queued call: the thread may
 * have posted events (a worker's pipes closing) that the runtime still delivers. */
static void watch_loop_cleanup(void *data) {
        watch_loop *l = data;
        if (l->thread_started) {
                uint64_t one = 1;
                (void)!write(l->stopfd, &one, sizeof(one));
                (void)pthread_join(l->thread, NULL);
        }
        if (l->epfd >= 0)
                (void)close(l->epfd);
        if (l->stopfd >= 0)
                (void)close(l->stopfd);
        l->epfd = l->stopfd = -1;
        for (size_t i = 0; i < l->n_live; i++)
                free(l->live[i]);
        l->n_live = 0;
        l->dead = true;
        if (l->tsfn)
                (void)napi_release_threadsafe_function(l->tsfn, napi_tsfn_abort);
        else
                watch_loop_free(l);
}

static int start_thread(watch_loop *l) {
        sigset_t all, old;
        /* the thread takes no signals: they stay with the runtime's own threads */
        (void)sigfillset(&all);
        (void)pthread_sigmask(SIG_SETMASK, &all, &old);
        int r = pthread_create(&l->thread, NULL, watch_thread, l);
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0)
                return -r;
        l->thread_started = true;
        return 0;
}

static int watch_loop_new(napi_env env, watch_loop **ret) {
        napi_value name;
        watch_loop *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->env = env;
        l->next_id = 1;
        l->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = { .events = EPOLLIN, .data.u64 = STOP_ID };
        int r = 0;
        if (l->stopfd < 0 || l->epfd < 0 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->stopfd, &ev) < 0)
                r = -errno;
        if (r == 0 &&
                (napi_create_string_utf8(env, "nook.watch", NAPI_AUTO_LENGTH, &name) != napi_ok ||
                        napi_create_threadsafe_function(env, NULL, NULL, name, 0, 1, l, watch_tsfn_finalize,
                                l, watch_call_js, &l->tsfn) != napi_ok))
                r = -ENOMEM;
        if (r == 0 && napi_unref_threadsafe_function(env, l->tsfn) != napi_ok)
                r = -EINVAL;
        if (r == 0)
                r = start_thread(l);
        if (r == 0 && napi_add_env_cleanup_hook(env, watch_loop_cleanup, l) != napi_ok)
                r = -EINVAL;
        if (r < 0) {
                watch_loop_cleanup(l); /* releases the tsfn, if made (its finalizer frees l) */
                return r;
        }
        *ret = l;
        return 0;
}

static int watch_loop_get(napi_env env, watch_loop **ret) {
        addon_env *e = addon_env_get(env);
        if (!e)
                return -EINVAL;
        if (e->loop) {
                *ret = e->loop;
                return 0;
        }
        watch_loop *l = NULL;
        int r = watch_loop_new(env, &l);
        if (r < 0)
                return r;
        /* the cleanup hook releases it (its tsfn's finalizer frees it); addon_env only points */
        e->loop = l;
        *ret = l;
        return 0;
}

int watch_add(napi_env env, int fd, uint32_t events, watch_fn fn, void *userdata, watch **ret) {
        watch_loop *l = NULL;
        int r = watch_loop_get(env, &l);
        if (r < 0)
                return r;
        if (l->n_live == l->cap_live) {
                size_t cap = l->cap_live ? l->cap_live * 2 : 16;
                watch **live =
                        reallocarray(l->live, cap, sizeof(watch *)); // NOLINT(bugprone-sizeof-expression)
                if (!live)
                        return -ENOMEM;
                l->live = live;
                l->cap_live = cap;
        }
        watch *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (watch){
                .loop = l, .id = l->next_id++, .fd = fd, .events = events, .fn = fn, .userdata = userdata
        };
        struct epoll_event ev = { .events = events | EPOLLONESHOT, .data.u64 = w->id };
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
                r = -errno;
                free(w);
                return r;
        }
        l->live[l->n_live++] = w;
        set_referenced(l);
        *ret = w;
        return 0;
}

int watch_arm(watch *w) {
        struct epoll_event ev = { .events = w->events | EPOLLONESHOT, .data.u64 = w->id };
        if (epoll_ctl(w->loop->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
                return -errno;
        return 0;
}

watch *watch_remove(watch *w) {
        size_t i = 0;
        if (!w)
                return NULL;
        watch_loop *l = w->loop;
        (void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
        if (find_live(l, w->id, &i) == w)
                l->live[i] = l->live[--l->n_live];
        set_referenced(l);
        free(w);
        return NULL;
}
