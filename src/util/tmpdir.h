/* SPDX-License-Identifier: Apache-2.0 */
/* Temporary directories and files with an owner: the process that made one holds an flock on it
 * for as long as it works there, so a sweeper tells a live owner's temporary from one a killed
 * process left behind (a lock dies with its last holder) without guessing from its age. */
#pragma once

#include <stdbool.h>

#include "nook.h"

/* mkdtemp(template) and an exclusive flock on the new directory; *ret_lock holds it until closed
 * (keep it open while working there; closing it after a rename or removal is fine).  A sweeper
 * that took the lock first and removed the directory is noticed and a new one is made. */
int tmpdir_owned_new(char *template, int *ret_lock, nook_error *err);
/* mkostemp(template) and an exclusive flock on the file: the returned fd is the lock. */
int tmpfile_owned_new(char *template, int *ret_fd, nook_error *err);

/* Removes one entry of a temporary folder; dirfd is the folder, name the entry. */
typedef int (*tmp_remove_fn)(int dirfd, const char *name, nook_error *err);
/* Removes every entry of folder dir (a missing folder is fine) that no live owner holds: each
 * is locked without waiting and, once held, removed with rm.  Entries with a live owner stay.
 * Returns the number removed; failures are ignored (a sweep never fails its caller). */
int tmp_sweep(const char *dir, tmp_remove_fn rm);
/* The same for the entries whose name starts with prefix (a folder that also holds other things). */
int tmp_sweep_prefix(const char *dir, const char *prefix, tmp_remove_fn rm);
/* The same in the folder dirfd (prefix NULL: every entry). */
int tmp_sweep_at(int dirfd, const char *prefix, tmp_remove_fn rm);
