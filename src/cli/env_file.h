/* SPDX-License-Identifier: Apache-2.0 */
/* Environment variables as docker's -e and --env-file give them (env_file.c). */
#pragma once

/* What takes each NAME=VALUE: 1 when taken, <0 after printing a usage error. */
typedef int (*cli_env_add)(const char *cmd, const char *name_value, void *userdata);

/* "-e ARG": ARG with '=' is taken as it is; a bare NAME takes its value from this process's
 * environment, and is left out when unset there (as docker does).  1, or <0 after a message. */
int cli_env_arg(const char *cmd, const char *arg, cli_env_add add, void *userdata);
/* "--env-file FILE" ("-": stdin): one entry a line, as docker reads it: leading blanks are
 * skipped, as are empty lines and lines starting with '#'; NAME=VALUE keeps VALUE as written
 * (quotes and trailing blanks included); a bare NAME is cli_env_arg's.  A name with a blank,
 * text that is not UTF-8, or an unreadable file is a usage error naming the file and line.
 * 1, or <0 after a message. */
int cli_env_file(const char *cmd, const char *path, cli_env_add add, void *userdata);
