/* SPDX-License-Identifier: Apache-2.0 */
/* Size, memory, duration, number and CPU parsers: the accepted forms and the refused ones. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "nook.h"
#include "util/macro.h"
#include "util/parse.h"

typedef struct ok_case {
        const char *in;
        uint64_t want;
} ok_case;

#define KiB UINT64_C(1024)
#define MiB (KiB * 1024)
#define GiB (MiB * 1024)
#define TiB (GiB * 1024)

Test(parse, size_accepts_docker_forms) {
        static const ok_case cases[] = {
                { "100", 100 },
                { "0", 0 },
                { "100b", 100 },
                { "100B", 100 },
                { "1k", KiB },
                { "1048576k", GiB },
                { "512m", 512 * MiB },
                { "512M", 512 * MiB },
                { "512mb", 512 * MiB },
                { "512MiB", 512 * MiB },
                { "2g", 2 * GiB },
                { "2GB", 2 * GiB },
                { "2gib", 2 * GiB },
                { "1t", TiB },
                { "1p", TiB * 1024 },
                { "1.5g", GiB + GiB / 2 },
                { "0.5k", 512 },
                { "0.1k", 103 }, /* 102.4 rounds up */
                { "1.5", 2 },
                { "007m", 7 * MiB },
                { "18446744073709551615", UINT64_MAX },
                { "15.999999999999999999p", 16 * TiB * 1024 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                nook_error err = {};
                uint64_t v = 42;
                cr_expect_eq(parse_size(cases[i].in, &v, &err), 0, "'%s': %s", cases[i].in, err.msg);
                cr_expect_eq(v, cases[i].want, "'%s': got %lu", cases[i].in, (unsigned long)v);
        }
}

static void expect_invalid_size(const char *in, const char *needle) {
        nook_error err = {};
        uint64_t v = 42;
        cr_expect_eq(parse_size(in, &v, &err), -NOOK_E_INVALID, "'%s' accepted as %lu", in ? in : "(null)",
                (unsigned long)v);
        cr_expect_eq(v, 42, "ret untouched on failure");
        cr_expect_eq(err.code, NOOK_E_INVALID);
        cr_expect(strstr(err.msg, needle), "'%s': message '%s' lacks '%s'", in ? in : "(null)", err.msg,
                needle);
}

Test(parse, size_refuses_bad_input_naming_it) {
        expect_invalid_size("", "Invalid size ''");
        expect_invalid_size(NULL, "empty");
        expect_invalid_size("-1", "negative");
        expect_invalid_size("-1m", "'-1m'");
        expect_invalid_size("+1", "'+1'");
        expect_invalid_size(" 1", "' 1'");
        expect_invalid_size("1 ", "'1 '");
        expect_invalid_size("1 m", "'1 m'");
        expect_invalid_size("m", "'m'");
        expect_invalid_size("12x", "'12x'");
        expect_invalid_size("1bb", "'1bb'");
        expect_invalid_size("1kbb", "'1kbb'");
        expect_invalid_size("1ki", "'1ki'");
        expect_invalid_size("1mi", "'1mi'");
        expect_invalid_size("1e3", "'1e3'");
        expect_invalid_size("0x10", "'0x10'");
        expect_invalid_size("1.", "'1.'");
        expect_invalid_size(".5", "'.5'");
        expect_invalid_size("1..5", "'1..5'");
        expect_invalid_size("1.2.3", "'1.2.3'");
        expect_invalid_size("18446744073709551616", "too large");
        expect_invalid_size("16384p", "too large");
        expect_invalid_size("17179869184g", "too large");
        expect_invalid_size("1.0000000000000000001k", "'1.0000000000000000001k'");
        expect_invalid_size("1\n", "'1?'");
        expect_invalid_size("1\xc3\xa9",
                "'1?"
                "?'");
}

Test(parse, size_message_cuts_long_input) {
        char in[300];
        nook_error err = {};
        uint64_t v;
        memset(in, '9', sizeof(in) - 2);
        in[sizeof(in) - 2] = 'x';
        in[sizeof(in) - 1] = 0;
        cr_assert_eq(parse_size(in, &v, &err), -NOOK_E_INVALID);
        cr_assert(strstr(err.msg, "...'"), "%s", err.msg);
        cr_assert_lt(strlen(err.msg), 250);
}

Test(parse, memory_rounds_up_to_mib) {
        static const ok_case cases[] = {
                { "512m", 512 },
                { "2g", 2048 },
                { "100", 1 },
                { "0", 0 },
                { "1048576", 1 },
                { "1048577", 2 },
                { "1.5m", 2 },
                { "1m", 1 },
                { "1k", 1 },
                { "1t", 1024 * 1024 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                nook_error err = {};
                uint64_t v = 42;
                cr_expect_eq(parse_memory_mib(cases[i].in, &v, &err), 0, "'%s': %s", cases[i].in, err.msg);
                cr_expect_eq(v, cases[i].want, "'%s': got %lu", cases[i].in, (unsigned long)v);
        }
        nook_error err = {};
        uint64_t v = 42;
        cr_expect_eq(parse_memory_mib("lots", &v, &err), -NOOK_E_INVALID);
        cr_expect_eq(v, 42);
}

Test(parse, duration_accepts_units_and_plain_seconds) {
        static const ok_case cases[] = {
                { "500ms", 500 },
                { "30s", 30000 },
                { "5m", 300000 },
                { "2h", 7200000 },
                { "1d", 86400000 },
                { "1h30m", 5400000 },
                { "1h30m15s500ms", 5415500 },
                { "1d1ms", 86400001 },
                { "30", 30000 },
                { "0", 0 },
                { "0s", 0 },
                { "1.5h", 5400000 },
                { "0.5s", 500 },
                { "1.0001s", 1001 },
                { "0.1ms", 1 },
                { "2.5", 2500 },
                { "1m0s", 60000 },
                { "18446744073709551615ms", UINT64_MAX },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                nook_error err = {};
                uint64_t v = 42;
                cr_expect_eq(parse_duration_ms(cases[i].in, &v, &err), 0, "'%s': %s", cases[i].in, err.msg);
                cr_expect_eq(v, cases[i].want, "'%s': got %lu", cases[i].in, (unsigned long)v);
        }
}

Test(parse, duration_refuses_bad_input) {
        static const char *const bad[] = { "", "-1", "-1s", "s", "1x", "1S", "1H", "1h30", "30m1h", "1m1m",
                "1s500", "1 s", " 1s", "1s ", "1.s", ".5s", "1sec", "1mss", "1msm", "1us", "1ns",
                "18446744073709551616", "18446744073709551615s", "213503982334601d",
                "18446744073709551615ms1ms", "1h\x01", "\xff" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                nook_error err = {};
                uint64_t v = 42;
                cr_expect_eq(parse_duration_ms(bad[i], &v, &err), -NOOK_E_INVALID, "'%s' accepted as %lu",
                        bad[i], (unsigned long)v);
                cr_expect_eq(v, 42);
                cr_expect(strstr(err.msg, "Invalid duration '"), "%s", err.msg);
        }
        nook_error err = {};
        uint64_t v;
        cr_expect_eq(parse_duration_ms("30m1h", &v, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "largest first"), "%s", err.msg);
        cr_expect_eq(parse_duration_ms(NULL, &v, &err), -NOOK_E_INVALID);
}

Test(parse, uint64_strict_decimal) {
        nook_error err = {};
        uint64_t v = 42;
        cr_expect_eq(parse_uint64("0", &v, &err), 0);
        cr_expect_eq(v, 0);
        cr_expect_eq(parse_uint64("18446744073709551615", &v, &err), 0);
        cr_expect_eq(v, UINT64_MAX);
        cr_expect_eq(parse_uint64("0042", &v, &err), 0);
        cr_expect_eq(v, 42);
        static const char *const bad[] = { "", "-1", "+1", " 1", "1 ", "1.0", "0x1", "1e3",
                "18446744073709551616", "99999999999999999999999", "1\n", "\xe2\x80\x8b\x31" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                v = 7;
                cr_expect_eq(parse_uint64(bad[i], &v, &err), -NOOK_E_INVALID, "'%s' accepted", bad[i]);
                cr_expect_eq(v, 7);
                cr_expect(strstr(err.msg, "Invalid number '"), "%s", err.msg);
        }
        cr_expect_eq(parse_uint64(NULL, &v, &err), -NOOK_E_INVALID);
}

Test(parse, cpus_round_up_and_refuse_zero) {
        static const struct {
                const char *in;
                unsigned want;
        } cases[] = { { "1", 1 }, { "2", 2 }, { "0.5", 1 }, { "1.2", 2 }, { "1.0", 1 }, { "0.001", 1 },
                { "8192", 8192 }, { "8191.5", 8192 }, { "02", 2 } };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                nook_error err = {};
                unsigned v = 42;
                cr_expect_eq(parse_cpus(cases[i].in, &v, &err), 0, "'%s': %s", cases[i].in, err.msg);
                cr_expect_eq(v, cases[i].want, "'%s': got %u", cases[i].in, v);
        }
        static const char *const bad[] = { "", "0", "0.0", "-1", "-0.5", "8192.1", "8193", "1e2", "one",
                "2 ", "1.", "99999999999999999999999" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                nook_error err = {};
                unsigned v = 42;
                cr_expect_eq(
                        parse_cpus(bad[i], &v, &err), -NOOK_E_INVALID, "'%s' accepted as %u", bad[i], v);
                cr_expect_eq(v, 42);
                cr_expect(strstr(err.msg, "Invalid CPU count '"), "%s", err.msg);
        }
        nook_error err = {};
        unsigned v;
        cr_expect_eq(parse_cpus("0", &v, &err), -NOOK_E_INVALID);
        cr_expect(strstr(err.msg, "above 0"), "%s", err.msg);
}

Test(parse, preview_sanitises_and_cuts) {
        char buf[8];
        util_preview("abc", buf, sizeof(buf));
        cr_expect_str_eq(buf, "abc");
        util_preview("a\tb\x7f\xc3", buf, sizeof(buf));
        cr_expect_str_eq(buf,
                "a?b?"
                "?");
        util_preview("abcdefgh", buf, sizeof(buf));
        cr_expect_str_eq(buf, "abcd...");
        util_preview("abcdefg", buf, sizeof(buf));
        cr_expect_str_eq(buf, "abcdefg");
        util_preview(NULL, buf, sizeof(buf));
        cr_expect_str_eq(buf, "");
}

Test(parse, signal_names_and_numbers) {
        static const struct {
                const char *in;
                int want;
        } cases[] = {
                { "KILL", SIGKILL }, { "SIGKILL", SIGKILL }, { "sigterm", SIGTERM }, { "hup", SIGHUP },
                { "Usr1", SIGUSR1 }, { "9", 9 }, { "64", 64 },
                { "RTMIN+2", 0 }, /* SIGRTMIN is not constant: filled below */
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                nook_error err = { 0 };
                int sig = -1;
                int want = cases[i].want ? cases[i].want : SIGRTMIN + 2;
                cr_expect_eq(parse_signal(cases[i].in, &sig, &err), 0, "'%s': %s", cases[i].in, err.msg);
                cr_expect_eq(sig, want, "'%s' -> %d, want %d", cases[i].in, sig, want);
        }
}

Test(parse, signal_refuses_bad_input) {
        static const char *const bad[] = { "", "0", "65", "-9", "+9", "9x", " 9", "SIG", "NOSUCH", "RTMIN+",
                "RTMIN+x", "RTMIN+99", "RTMIN+-1", "99999999999999999999", "KILL ", "\x01\x02" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                nook_error err = { 0 };
                int sig = -1;
                cr_expect_eq(parse_signal(bad[i], &sig, &err), -NOOK_E_INVALID, "'%s' accepted as %d",
                        bad[i], sig);
                cr_expect_eq(sig, -1, "'%s' changed the result", bad[i]);
                cr_expect(strstr(err.msg, "is not a signal") != NULL, "'%s': %s", bad[i], err.msg);
        }
        nook_error err = { 0 };
        int sig = -1;
        cr_expect_eq(parse_signal(NULL, &sig, &err), -NOOK_E_INVALID);
}
