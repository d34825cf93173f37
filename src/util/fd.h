/* SPDX-License-Identifier: Apache-2.0 */
/* File descriptor helpers: full reads and writes, CLOEXEC duplication, fd passing. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "nook.h"

/* Writes all of buf, retrying on EINTR and short writes.  Returns 0 or -errno. */
int fd_write_all(int fd, const void *buf, size_t len);
/* Copies the file in (from offset 0) into out, a new empty regular file, keeping its holes: only
 * the data SEEK_DATA/SEEK_HOLE find is written (copy_file_range, else pread/pwrite), and out is
 * then truncated to in's size.  A guest's 8 GiB sparse file costs what it holds, not 8 GiB of
 * zeros.  *cfr (may be NULL): whether copy_file_range may be tried, cleared where the filesystem
 * refuses it.  A file that changes meanwhile is copied as it is seen.  0 or -errno. */
int fd_copy_sparse(int in, int out, bool *cfr);
/* The next data extent of fd at or after pos and below end (SEEK_DATA/SEEK_HOLE): 1 with it in
 * [*ret_data, *ret_end), 0 when only a hole is left, -errno.  COMPAT: where the filesystem has
 * no SEEK_DATA, all of [pos, end) is data. */
int fd_next_data(int fd, off_t pos, off_t end, off_t *ret_data, off_t *ret_end);
/* Reads until len bytes or EOF.  Returns the number of bytes read or -errno. */
ssize_t fd_read_all(int fd, void *buf, size_t len);
/* Reads a whole fd into a NUL-terminated malloc'd buffer, refusing more than max bytes. */
int fd_read_to_end(int fd, size_t max, char **ret_data, size_t *ret_len, nook_error *err);
/* fcntl(F_DUPFD_CLOEXEC, 3): never dup() (STYLE.md R11).  Returns the new fd or -errno. */
int fd_dup_cloexec(int fd);
int fd_set_nonblock(int fd, bool on);
int fd_set_cloexec(int fd, bool on);
/* Moves fd to exactly target (dup2 without CLOEXEC), for a child about to exec. */
int fd_move_to(int fd, int target);
/* Closes every fd >= lowest except those listed (close_range where available). */
int fd_close_all_except(int lowest, const int *keep, size_t n_keep);

/* Sends one datagram/record with up to 8 fds attached (SCM_RIGHTS).  Returns 0 or -errno. */
int fd_send_with_fds(int sock, const void *buf, size_t len, const int *fds, size_t n_fds);
/* Receives one record; fds received are CLOEXEC and stored in ret_fds (the rest -1).
 * Returns the byte count (0 = peer closed) or -errno.  Extra fds beyond max_fds are closed. */
ssize_t fd_recv_with_fds(int sock, void *buf, size_t len, int *ret_fds, size_t max_fds, size_t *ret_n_fds);
