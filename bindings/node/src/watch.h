/* SPDX-License-Identifier: Apache-2.0 */
/* A descriptor watcher for the JS thread: "call fn on the JS thread when fd is readable (or
 * writable)".  See watch.c for why it is not uv_poll. */
#pragma once

#include <node_api.h>
#include <stdint.h>

typedef struct watch watch;
/* Runs on the JS thread, with a handle scope open.  The watch is disarmed: call watch_arm() to
 * hear about the fd again, or watch_remove(). */
typedef void (*watch_fn)(napi_env env, void *userdata, uint32_t events);

/* Starts watching fd for events (EPOLLIN or EPOLLOUT), armed.  fd stays the caller's; remove the
 * watch before closing it.  Returns 0, or -errno. */
int watch_add(napi_env env, int fd, uint32_t events, watch_fn fn, void *userdata, watch **ret);
/* Asks for one more call of fn when fd is ready. */
int watch_arm(watch *w);
/* Stops watching and frees w (NULL is fine); an event already on its way is dropped. */
watch *watch_remove(watch *w);
