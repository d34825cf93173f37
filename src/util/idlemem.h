/* SPDX-License-Identifier: Apache-2.0 */
/* What an idle process gives back: pages it touched once (setup, a burst of work) and does not
 * need while it waits (docs/design/runtime.md, "Idle memory").  Used by the supervisor, init and
 * the spare exec helper after IDLE_RELEASE_MS without an event, and by the egress gateway. */
#pragma once

/* How long a sandbox's processes wait without any event before they give pages back: long
 * enough that a burst of execs does not pay the page faults after each drop, short enough that
 * a sandbox left idle is small soon (bench/README.md measures the first exec after a drop). */
#define IDLE_RELEASE_MS 5000

enum {
        /* the read-only segments of the program and its libraries (code, constants) leave the
         * page tables; they fault back in from the page cache (minor faults) when used again */
        IDLE_RELEASE_FILE = 1 << 0,
        /* malloc_trim(0): free heap pages go back to the kernel */
        IDLE_RELEASE_HEAP = 1 << 1,
        /* the stack pages below the caller's frame (dead: setup's deep calls); only from the
         * main thread, whose stack has nothing else mapped within 8 MiB below it (not from a
         * thread, whose stack is one mapping among others) */
        IDLE_RELEASE_STACK = 1 << 2,
};

/* Gives back what `what` (IDLE_RELEASE_*) names; best effort, never fails (nothing is lost:
 * every page dropped is either a copy of the file or unused).  Reads no file: inside a
 * sandbox, /proc is the guest's to mount over. */
void idle_release(unsigned what);
