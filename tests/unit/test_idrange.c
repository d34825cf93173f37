/* SPDX-License-Identifier: Apache-2.0 */
/* The id-range pool (store/idrange.c, migration 004) against a real SQLite file: lowest free
 * slot first, one range per sandbox, released with the sandbox record (cascade), a full pool
 * refused, a range never given to two sandboxes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "store/idrange.h"
#include "store/store.h"
#include "util/path.h"

static char home[64];
static store *st;
static const idrange_pool pool = { .first = 1000000, .size = 100, .count = 3 };

static void setup(void) {
        nook_error err = {};
        (void)snprintf(home, sizeof(home), "/tmp/nook-test-idrange-XXXXXX");
        cr_assert_not_null(mkdtemp(home));
        cr_assert_eq(store_open(home, &st, &err), 0, "%s", err.msg);
}

static void teardown(void) {
        nook_error err = {};
        st = store_free(st);
        (void)path_rm_rf(home, &err);
}

TestSuite(idrange, .init = setup, .fini = teardown);

static void add_sandbox(const char *name) {
        nook_error err = {};
        sandbox_rec r = { .name = (char *)name, .state = (char *)"creating", .image = (char *)"host" };
        cr_assert_eq(store_sandbox_insert(st, &r, &err), 0, "%s", err.msg);
}

static uint32_t acquire(const char *name) {
        nook_error err = {};
        uint32_t b = 0;
        cr_assert_eq(store_idrange_acquire(st, name, &pool, NULL, NULL, &b, &err), 0, "%s", err.msg);
        return b;
}

Test(idrange, lowest_free_slot_and_one_per_sandbox) {
        add_sandbox("a");
        add_sandbox("b");
        cr_assert_eq(acquire("a"), 1000000);
        cr_assert_eq(acquire("b"), 1000100);
        cr_assert_eq(acquire("a"), 1000000, "a sandbox keeps the range it holds");
        int64_t n = 0;
        nook_error err = {};
        cr_assert_eq(store_idrange_count(st, &n, &err), 0);
        cr_assert_eq(n, 2);
}

Test(idrange, released_with_the_record_and_reused) {
        nook_error err = {};
        uint32_t b = 0;
        add_sandbox("a");
        add_sandbox("b");
        add_sandbox("c");
        cr_assert_eq(acquire("a"), 1000000);
        cr_assert_eq(acquire("b"), 1000100);
        cr_assert_eq(store_sandbox_delete(st, "a", &err), 0, "%s", err.msg);
        cr_assert_eq(store_idrange_get(st, "a", &b, &err), -NOOK_E_NOT_FOUND, "rm frees the range");
        cr_assert_eq(acquire("c"), 1000000, "the freed slot is the lowest free one");
        cr_assert_eq(store_idrange_get(st, "b", &b, &err), 0);
        cr_assert_eq(b, 1000100);
}

Test(idrange, full_pool_is_refused) {
        nook_error err = {};
        uint32_t b = 0;
        const char *names[] = { "a", "b", "c", "d" };
        for (size_t i = 0; i < 4; i++)
                add_sandbox(names[i]);
        for (size_t i = 0; i < 3; i++)
                (void)acquire(names[i]);
        cr_assert_eq(store_idrange_acquire(st, "d", &pool, NULL, NULL, &b, &err), -NOOK_E_BUSY);
        cr_assert(strstr(err.msg, "nook rm") != NULL, "the message says what to do: %s", err.msg);
        cr_assert_eq(store_idrange_get(st, "d", &b, &err), -NOOK_E_NOT_FOUND, "nothing recorded");
}

Test(idrange, needs_a_sandbox_record) {
        nook_error err = {};
        uint32_t b = 0;
        cr_assert_lt(store_idrange_acquire(st, "ghost", &pool, NULL, NULL, &b, &err), 0,
                "a range for a name without a record is refused (foreign key)");
        int64_t n = -1;
        cr_assert_eq(store_idrange_count(st, &n, &err), 0);
        cr_assert_eq(n, 0);
}

Test(idrange, rows_below_the_pool_are_ignored) {
        /* a row holding the slot above a gap: the gap is found */
        add_sandbox("a");
        add_sandbox("b");
        add_sandbox("c");
        cr_assert_eq(acquire("a"), 1000000);
        cr_assert_eq(acquire("b"), 1000100);
        nook_error err = {};
        cr_assert_eq(store_sandbox_delete(st, "a", &err), 0);
        cr_assert_eq(acquire("c"), 1000000);
}

/* The host-wide claims' callback (sandbox/idclaim.c) passes over slots another state folder
 * holds, and is told of a range a sandbox already holds. */
typedef struct usable_log {
        uint32_t refuse; /* a base the callback refuses */
        uint32_t seen_taken; /* the last base it was told is held already */
        int calls;
} usable_log;

static bool usable_cb(uint32_t base, bool taken, void *userdata) {
        usable_log *l = userdata;
        l->calls++;
        if (taken)
                l->seen_taken = base;
        return taken || base != l->refuse;
}

Test(idrange, a_slot_claimed_elsewhere_is_passed_over) {
        nook_error err = {};
        uint32_t b = 0;
        usable_log l = { .refuse = 1000000 };
        add_sandbox("a");
        add_sandbox("b");
        cr_assert_eq(store_idrange_acquire(st, "a", &pool, usable_cb, &l, &b, &err), 0, "%s", err.msg);
        cr_assert_eq(b, 1000100, "the lowest slot the callback accepts, not the lowest free one");
        cr_assert_eq(store_idrange_acquire(st, "a", &pool, usable_cb, &l, &b, &err), 0, "%s", err.msg);
        cr_assert_eq(l.seen_taken, 1000100, "a held range is reported as taken, to be claimed");
        l.refuse = 0;
        cr_assert_eq(store_idrange_acquire(st, "b", &pool, usable_cb, &l, &b, &err), 0, "%s", err.msg);
        cr_assert_eq(b, 1000000, "once accepted, the lowest free slot again");
}
