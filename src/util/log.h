/* SPDX-License-Identifier: Apache-2.0 */
/* Debug logging only (STYLE.md R3): libnook never logs above debug.  The program sets the sink;
 * by default nothing is written.  NOOK_DEBUG=1 in the CLI and supervisor turns it on. */
#pragma once

#include "macro.h"

typedef void (*log_sink)(const char *line);
void log_set_sink(log_sink sink);
void log_debug(const char *fmt, ...) _printf_(1, 2);
