/* SPDX-License-Identifier: Apache-2.0 */
/* The command's stdin, stdout and stderr as the guest may hold them.  exec and run hand the
 * command our own descriptors (SCM_RIGHTS): output goes straight to our pipe, with no copy.  A
 * terminal or a file is never handed over: a guest holding our terminal reads what the user
 * types after we returned and changes its modes (stty), and one holding a file we append to can
 * truncate it or write anywhere in it, later too.  Those are relayed through a pipe of ours while
 * the command runs: what it wrote is all relayed, and a background process writing after its end
 * gets EPIPE.  Pipes, sockets and /dev/null are handed over as they are (docker hands a container
 * pipes as well). */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#define STDIO_RELAY_MAX 3

/* The descriptor to give the command for our fd (0, 1 or 2; to_guest: its input): fd itself when
 * the guest may hold it, else its end of a new pipe that the relay serves.  -1 (errno set) when
 * no pipe could be made. */
int stdio_guest_fd(int fd, bool to_guest);
/* The request went (the guest's ends travelled with it): our copies of them are closed. */
void stdio_relay_sent(void);
/* Appends a pollfd per relay that waits for something (at most STDIO_RELAY_MAX); the count. */
size_t stdio_relay_pollfds(struct pollfd *p);
/* Moves data for the relays whose pollfds (as stdio_relay_pollfds gave them) are ready. */
void stdio_relay_dispatch(const struct pollfd *p, size_t n);
/* The command ended: relays what it wrote (all of it is in the pipes by now), then closes ours. */
void stdio_relay_finish(void);
