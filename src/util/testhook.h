/* SPDX-License-Identifier: Apache-2.0 */
/* Kill and pause points for tests: compiled in only with -Dtest_hooks=true (NOOK_TEST_HOOKS),
 * never into what users install. */
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* With var=point in the environment the process SIGKILLs itself here, so a test sees what a kill
 * at exactly that point leaves and what the next command makes of it. */
static inline void test_kill_at(const char *var, const char *point) {
#ifdef NOOK_TEST_HOOKS
        const char *k = secure_getenv(var);
        if (k && strcmp(k, point) == 0)
                (void)raise(SIGKILL);
#else
        (void)var;
        (void)point;
#endif
}

/* With var=point in the environment the process sleeps 3 s here, so that a test can run another
 * command inside a window that is otherwise microseconds wide (two commits at once). */
static inline void test_pause_at(const char *var, const char *point) {
#ifdef NOOK_TEST_HOOKS
        const char *k = secure_getenv(var);
        if (k && strcmp(k, point) == 0)
                (void)sleep(3);
#else
        (void)var;
        (void)point;
#endif
}
