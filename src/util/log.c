/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

static log_sink current_sink;

void log_set_sink(log_sink sink) {
        current_sink = sink;
}

void log_debug(const char *fmt, ...) {
        if (!current_sink)
                return;
        char line[1024];
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        current_sink(line);
}
