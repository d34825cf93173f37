/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox spec (sandbox/spec.c) and its volumes (sandbox/volumes.c): good specs parse to the
 * right values; hostile ones (unknown fields, wrong types, NUL bytes, huge values, headroom
 * violations, bad script names, malformed setup files, hostile guest paths and bind sources)
 * are refused with an error that names the field.  Bind-source checks run against a private
 * NOOK_HOME and HOME under a mkdtemp directory, removed by the suite's fini. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "sandbox/egress.h"
#include "sandbox/spec.h"
#include "sandbox/spec_egress.h"
#include "sandbox/spec_net.h"
#include "sandbox/volumes.h"
#include "util/macro.h"
#include "util/path.h"

/* ---- helpers ----------------------------------------------------------------------------------- */

/* Parses text and expects success; the caller owns *s. */
static void parse_ok(const char *text, sb_spec *s) {
        nook_error err = { 0 };
        int r = sb_spec_parse(text, s, &err);
        cr_assert_geq(r, 0, "spec %s: want success, got %d: %s", text, r, err.msg);
}

/* Parses text and expects failure with code and a message containing each of the NULL-terminated
 * needles. */
static void parse_fails_v(const char *text, nook_errc code, const char *const *needles) {
        nook_error err = { 0 };
        sb_spec s = { 0 };
        int r = sb_spec_parse(text, &s, &err);
        if (r >= 0) {
                sb_spec_done(&s);
                cr_expect_lt(r, 0, "spec %s: want a refusal, it parsed", text);
                return;
        }
        cr_expect_eq(err.code, code, "spec %s: want code %d, got %d (%s)", text, code, err.code, err.msg);
        for (const char *const *n = needles; *n; n++)
                cr_expect_not_null(
                        strstr(err.msg, *n), "spec %s: the error '%s' should name '%s'", text, err.msg, *n);
}
#define parse_fails(text, code, ...) parse_fails_v(text, code, (const char *const[]){ __VA_ARGS__, NULL })

static char base[64], home[128], fakehome[128], hostdir[128];

static void mkdir_p(const char *p) {
        cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %m", p);
}

static void suite_init(void) {
        strcpy(base, "/tmp/nook-test-spec-XXXXXX");
        cr_assert_not_null(mkdtemp(base));
        (void)snprintf(home, sizeof(home), "%s/state", base);
        (void)snprintf(fakehome, sizeof(fakehome), "%s/home", base);
        (void)snprintf(hostdir, sizeof(hostdir), "%s/data", base);
        mkdir_p(home);
        mkdir_p(fakehome);
        mkdir_p(hostdir);
        /* a runtime folder (sandbox/rundir.h) goes with base, never to /dev/shm or /run */
        cr_assert_eq(setenv("NOOK_RUNTIME_DIR", base, 1), 0);
}

static void suite_fini(void) {
        nook_error err = { 0 };
        if (base[0])
                (void)path_rm_rf(base, &err);
}

TestSuite(spec, .init = suite_init, .fini = suite_fini);
TestSuite(guest_path, .init = suite_init, .fini = suite_fini);
TestSuite(volumes, .init = suite_init, .fini = suite_fini);

/* ---- sb_spec_parse: good specs ------------------------------------------------------------------ */

Test(spec, defaults) {
        const char *texts[] = { NULL, "", "{}" };
        for (size_t i = 0; i < ELEMENTSOF(texts); i++) {
                sb_spec s = { 0 };
                parse_ok(texts[i], &s);
                cr_expect_str_eq(s.image, "host");
                cr_expect_str_eq(s.security, "default");
                cr_expect_str_eq(s.workdir, "/workspace");
                cr_expect_eq(s.cpus, 0);
                cr_expect_eq(s.memory_mib, 0);
                cr_expect_eq(s.pids_max, 0);
                cr_expect_not(s.sticky);
                sb_spec_done(&s);
        }
}

Test(spec, limits_and_headroom) {
        sb_spec s = { 0 };
        parse_ok("{\"cpus\": 2, \"maxCpus\": 4, \"memoryMib\": 512, \"maxMemoryMib\": 1024, \"pidsMax\": 64,"
                 " \"security\": \"restricted\", \"labels\": {\"team\": \"a\"}}",
                &s);
        cr_expect_eq(s.cpus, 2);
        cr_expect_eq(s.max_cpus, 4);
        cr_expect_eq(s.memory_mib, 512);
        cr_expect_eq(s.max_memory_mib, 1024);
        cr_expect_eq(s.pids_max, 64);
        cr_expect_str_eq(s.security, "restricted");
        cr_assert_not_null(s.labels);
        cr_expect_str_eq(s.labels[0], "team=a");
        /* the canonical form keeps the limits */
        char *t = sb_spec_to_json(&s);
        cr_assert_not_null(t);
        json_t *o = json_loads(t, 0, NULL);
        cr_assert_not_null(o, "canonical JSON does not parse: %s", t);
        cr_expect_eq(json_integer_value(json_object_get(o, "cpus")), 2);
        cr_expect_eq(json_integer_value(json_object_get(o, "maxCpus")), 4);
        cr_expect_eq(json_integer_value(json_object_get(o, "memoryMib")), 512);
        cr_expect_eq(json_integer_value(json_object_get(o, "maxMemoryMib")), 1024);
        cr_expect_eq(json_integer_value(json_object_get(o, "pidsMax")), 64);
        /* and parses back to the same values */
        sb_spec s2 = { 0 };
        parse_ok(t, &s2);
        cr_expect_eq(s2.cpus, 2);
        cr_expect_eq(s2.memory_mib, 512);
        cr_expect_eq(s2.pids_max, 64);
        sb_spec_done(&s2);
        json_decref(o);
        free(t);
        sb_spec_done(&s);
}

Test(spec, cpus_fractions_round_up) {
        static const struct {
                const char *text;
                unsigned want;
        } cases[] = {
                { "{\"cpus\": \"1.2\"}", 2 },
                { "{\"cpus\": 1.2}", 2 },
                { "{\"cpus\": 0.5}", 1 },
                { "{\"cpus\": \"0.001\"}", 1 },
                { "{\"cpus\": 2}", 2 },
                { "{\"cpus\": \"2\"}", 2 },
                { "{\"cpus\": 2.0}", 2 },
                { "{\"cpus\": 8192}", 8192 },
                { "{\"maxCpus\": \"3.01\"}", 4 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                sb_spec s = { 0 };
                parse_ok(cases[i].text, &s);
                unsigned got = s.cpus ? s.cpus : s.max_cpus;
                cr_expect_eq(got, cases[i].want, "%s: want %u, got %u", cases[i].text, cases[i].want, got);
                sb_spec_done(&s);
        }
}

Test(spec, memory_strings) {
        static const struct {
                const char *text;
                uint64_t want;
        } cases[] = {
                { "{\"memory\": \"512m\"}", 512 }, { "{\"memory\": \"2g\"}", 2048 },
                { "{\"memory\": \"1048576k\"}", 1024 }, { "{\"memory\": \"67108864b\"}", 64 },
                { "{\"memory\": \"67108865\"}", 65 }, /* bytes round up to whole MiB */
                { "{\"memoryMib\": \"64m\"}", 64 }, { "{\"memoryMib\": 64}", 64 },
                { "{\"memory\": \"1.5g\"}", 1536 },
                { "{\"maxMemoryMib\": \"1g\"}", 0 }, /* checked through max_memory_mib below */
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                sb_spec s = { 0 };
                parse_ok(cases[i].text, &s);
                if (strstr(cases[i].text, "maxMemoryMib"))
                        cr_expect_eq(s.max_memory_mib, 1024, "%s: got %llu", cases[i].text,
                                (unsigned long long)s.max_memory_mib);
                else
                        cr_expect_eq(s.memory_mib, cases[i].want, "%s: want %llu, got %llu", cases[i].text,
                                (unsigned long long)cases[i].want, (unsigned long long)s.memory_mib);
                sb_spec_done(&s);
        }
}

Test(spec, scripts_and_setup_files_good) {
        sb_spec s = { 0 };
        parse_ok("{\"scripts\": {\"build.sh\": \"echo hi\", \"a-b_C9\": \"\"},"
                 " \"setupFiles\": {\"/etc/app.conf\": \"x=1\","
                 " \"/workspace/a/b.txt\": {\"content\": \"hello\", \"mode\": 384},"
                 " \"/opt/bin/tool\": {\"base64\": \"aGVsbG8=\", \"mode\": 493}}}",
                &s);
        cr_expect_eq(json_object_size(s.scripts), 2);
        cr_expect_eq(json_object_size(s.setup_files), 3);
        sb_spec_done(&s);
}

/* ---- sb_spec_parse: hostile specs --------------------------------------------------------------- */

Test(spec, not_json_or_not_an_object) {
        parse_fails("{", NOOK_E_INVALID, "Invalid spec");
        parse_fails("[]", NOOK_E_INVALID, "object");
        parse_fails("\"host\"", NOOK_E_INVALID, "Invalid spec");
        parse_fails("null", NOOK_E_INVALID, "Invalid spec");
        parse_fails("{\"cpus\": 1, \"cpus\": 2}", NOOK_E_INVALID, "cpus"); /* duplicate keys */
}

Test(spec, unknown_and_not_yet_fields) {
        parse_fails("{\"cpu\": 1}", NOOK_E_INVALID, "unknown field", "'cpu'");
        parse_fails("{\"memoryMB\": 1}", NOOK_E_INVALID, "'memoryMB'");
        parse_fails("{\"snapshot\": 1}", NOOK_E_INVALID, "snapshot");
        parse_fails("{\"snapshot\": \"\"}", NOOK_E_INVALID, "snapshot");
}

Test(spec, wrong_types_name_the_field) {
        parse_fails("{\"cpus\": true}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"cpus\": [1]}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"maxCpus\": {}}", NOOK_E_INVALID, "maxCpus");
        parse_fails("{\"memoryMib\": []}", NOOK_E_INVALID, "memoryMib");
        parse_fails("{\"memoryMib\": 64.5}", NOOK_E_INVALID, "memoryMib");
        parse_fails("{\"memoryMib\": -64}", NOOK_E_INVALID, "memoryMib");
        parse_fails("{\"memory\": true}", NOOK_E_INVALID, "memory");
        parse_fails("{\"maxMemoryMib\": \"lots\"}", NOOK_E_INVALID, "maxMemoryMib");
        parse_fails("{\"pidsMax\": \"100\"}", NOOK_E_INVALID, "pidsMax");
        parse_fails("{\"pidsMax\": -2}", NOOK_E_INVALID, "pidsMax");
        parse_fails("{\"pidsMax\": 4194305}", NOOK_E_INVALID, "pidsMax");
        parse_fails("{\"pidsMax\": 1.5}", NOOK_E_INVALID, "pidsMax");
        parse_fails("{\"security\": 1}", NOOK_E_INVALID, "security");
        parse_fails("{\"security\": \"none\"}", NOOK_E_INVALID, "security", "none");
        parse_fails("{\"env\": [\"A=1\"]}", NOOK_E_INVALID, "env");
        parse_fails("{\"labels\": {\"k\": 1}}", NOOK_E_INVALID, "labels", "k");
        parse_fails("{\"labels\": {\"\": \"v\"}}", NOOK_E_INVALID, "label");
        parse_fails("{\"volumes\": {}}", NOOK_E_INVALID, "volumes");
        parse_fails("{\"scripts\": [\"a\"]}", NOOK_E_INVALID, "scripts");
        parse_fails("{\"setupFiles\": [\"/etc/x\"]}", NOOK_E_INVALID, "setupFiles");
}

Test(spec, nul_bytes_are_refused) {
        parse_fails("{\"image\": \"ho\\u0000st\"}", NOOK_E_INVALID, "Invalid spec");
        parse_fails("{\"labels\": {\"k\": \"a\\u0000b\"}}", NOOK_E_INVALID, "Invalid spec");
        parse_fails("{\"scripts\": {\"s\": \"echo\\u0000rm\"}}", NOOK_E_INVALID, "Invalid spec");
        parse_fails("{\"setupFiles\": {\"/etc/a\\u0000b\": \"x\"}}", NOOK_E_INVALID, "Invalid spec");
        parse_fails("{\"cpus\": \"1\\u00002\"}", NOOK_E_INVALID, "Invalid spec");
        parse_fails("{\"memory\": \"64m\\u00001g\"}", NOOK_E_INVALID, "Invalid spec");
}

Test(spec, bad_cpus) {
        parse_fails("{\"cpus\": 0}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"cpus\": \"0\"}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"cpus\": -1}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"cpus\": \"-0.5\"}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"cpus\": \"two\"}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"cpus\": \"1,5\"}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"cpus\": \"\"}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"cpus\": 8193}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"cpus\": 1e300}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"cpus\": \"99999999999999999999999999\"}", NOOK_E_INVALID, "cpus");
        parse_fails("{\"maxCpus\": 0}", NOOK_E_INVALID, "maxCpus");
}

Test(spec, bad_memory) {
        parse_fails("{\"memory\": \"12x\"}", NOOK_E_INVALID, "memory");
        parse_fails("{\"memory\": \"-5m\"}", NOOK_E_INVALID, "memory");
        parse_fails("{\"memory\": \"\"}", NOOK_E_INVALID, "memory");
        parse_fails("{\"memory\": \"1m\"}", NOOK_E_INVALID, "4 MiB");
        parse_fails("{\"memoryMib\": 3}", NOOK_E_INVALID, "4 MiB");
        parse_fails("{\"memory\": \"99999999999p\"}", NOOK_E_INVALID, "memory");
        parse_fails("{\"memory\": \"64m\", \"memoryMib\": 64}", NOOK_E_INVALID, "memoryMib", "memory");
}

/* A memoryMib so large that MiB -> bytes (x 2^20) wraps a uint64 must be refused, not turned into
 * an unlimited (0) or a tiny limit.  2^44 MiB = 2^64 bytes. */
Test(spec, huge_memory_is_refused_not_wrapped) {
        parse_fails("{\"memoryMib\": 17592186044416}", NOOK_E_INVALID, "memoryMib");
        parse_fails("{\"memoryMib\": 17592186044417}", NOOK_E_INVALID, "memoryMib");
        parse_fails("{\"memoryMib\": 9223372036854775807}", NOOK_E_INVALID, "memoryMib");
        parse_fails("{\"maxMemoryMib\": 9223372036854775807}", NOOK_E_INVALID, "maxMemoryMib");
        parse_fails("{\"memory\": \"16777216t\"}", NOOK_E_INVALID, "memory"); /* 2^64 bytes */
}

Test(spec, huge_pids_and_durations) {
        /* the kernel's pids.max takes at most PID_MAX_LIMIT (4194304): a bigger value must be a
         * spec error naming the field, not an I/O error from the cgroup write at create */
        parse_fails("{\"pidsMax\": 9223372036854775807}", NOOK_E_INVALID, "pidsMax");
        parse_fails("{\"maxDurationSecs\": 1e30}", NOOK_E_INVALID, "maxDurationSecs");
        parse_fails("{\"idleTimeoutSecs\": -1}", NOOK_E_INVALID, "idleTimeoutSecs");
        parse_fails("{\"pidsMax\": 18446744073709551616}", NOOK_E_INVALID, "Invalid spec");
}

Test(spec, headroom_violations) {
        parse_fails("{\"cpus\": 4, \"maxCpus\": 2}", NOOK_E_INVALID, "maxCpus");
        parse_fails("{\"cpus\": 2.5, \"maxCpus\": 2}", NOOK_E_INVALID, "maxCpus"); /* 2.5 -> 3 > 2 */
        parse_fails("{\"memoryMib\": 256, \"maxMemoryMib\": 128}", NOOK_E_INVALID, "maxMemoryMib");
        parse_fails("{\"memory\": \"129m\", \"maxMemoryMib\": \"128m\"}", NOOK_E_INVALID, "maxMemoryMib");
        /* at the headroom exactly: fine */
        sb_spec s = { 0 };
        parse_ok("{\"cpus\": 2, \"maxCpus\": 2, \"memory\": \"128m\", \"maxMemoryMib\": 128}", &s);
        cr_expect_eq(s.memory_mib, 128);
        sb_spec_done(&s);
}

Test(spec, script_names) {
        parse_fails("{\"scripts\": {\"\": \"x\"}}", NOOK_E_INVALID, "script name");
        parse_fails("{\"scripts\": {\".hidden\": \"x\"}}", NOOK_E_INVALID, "script name", ".hidden");
        parse_fails("{\"scripts\": {\"a/b\": \"x\"}}", NOOK_E_INVALID, "script name", "a/b");
        parse_fails("{\"scripts\": {\"..\": \"x\"}}", NOOK_E_INVALID, "script name");
        parse_fails("{\"scripts\": {\"a b\": \"x\"}}", NOOK_E_INVALID, "script name");
        parse_fails("{\"scripts\": {\"a\\nb\": \"x\"}}", NOOK_E_INVALID, "script name");
        parse_fails("{\"scripts\": {\"x\": 1}}", NOOK_E_INVALID, "script 'x'");
        parse_fails("{\"scripts\": {\"x\": null}}", NOOK_E_INVALID, "script 'x'");
        char name[80];
        memset(name, 'a', 65);
        name[65] = 0;
        char text[160];
        (void)snprintf(text, sizeof(text), "{\"scripts\": {\"%s\": \"x\"}}", name);
        parse_fails(text, NOOK_E_INVALID, "script name");
        name[64] = 0;
        (void)snprintf(text, sizeof(text), "{\"scripts\": {\"%s\": \"x\"}}", name);
        sb_spec s = { 0 };
        parse_ok(text, &s); /* 64 is the longest */
        sb_spec_done(&s);
}

Test(spec, setup_file_shapes) {
        parse_fails("{\"setupFiles\": {\"/etc/x\": 1}}", NOOK_E_INVALID, "/etc/x");
        parse_fails("{\"setupFiles\": {\"/etc/x\": null}}", NOOK_E_INVALID, "/etc/x");
        parse_fails("{\"setupFiles\": {\"/etc/x\": [\"a\"]}}", NOOK_E_INVALID, "/etc/x");
        parse_fails("{\"setupFiles\": {\"/etc/x\": {\"mode\": 420}}}", NOOK_E_INVALID, "/etc/x");
        parse_fails("{\"setupFiles\": {\"/etc/x\": {\"content\": 5}}}", NOOK_E_INVALID, "/etc/x");
}

/* The mode and the base64 of a setup file are part of its shape: a bad one is refused when the
 * spec is parsed (before anything is created), not silently replaced by 0644 or found later. */
Test(spec, setup_file_bad_mode_or_base64) {
        parse_fails("{\"setupFiles\": {\"/etc/x\": {\"content\": \"a\", \"mode\": \"0755\"}}}",
                NOOK_E_INVALID, "mode");
        parse_fails("{\"setupFiles\": {\"/etc/x\": {\"content\": \"a\", \"mode\": -1}}}", NOOK_E_INVALID,
                "mode");
        parse_fails("{\"setupFiles\": {\"/etc/x\": {\"content\": \"a\", \"mode\": 99999}}}", NOOK_E_INVALID,
                "mode");
        parse_fails(
                "{\"setupFiles\": {\"/etc/x\": {\"base64\": \"!!!not base64\"}}}", NOOK_E_INVALID, "base64");
}

Test(spec, setup_file_hostile_paths) {
        parse_fails("{\"setupFiles\": {\"etc/x\": \"a\"}}", NOOK_E_INVALID, "setup file path", "absolute");
        parse_fails("{\"setupFiles\": {\"\": \"a\"}}", NOOK_E_INVALID, "setup file path");
        parse_fails("{\"setupFiles\": {\"/\": \"a\"}}", NOOK_E_INVALID, "setup file path");
        parse_fails(
                "{\"setupFiles\": {\"/../etc/passwd\": \"a\"}}", NOOK_E_REFUSED, "setup file path", "..");
        parse_fails("{\"setupFiles\": {\"/workspace/../../etc/x\": \"a\"}}", NOOK_E_REFUSED, "..");
        parse_fails("{\"setupFiles\": {\"/proc/self/mem\": \"a\"}}", NOOK_E_REFUSED, "/proc");
        parse_fails("{\"setupFiles\": {\"/sys/kernel/x\": \"a\"}}", NOOK_E_REFUSED, "/sys");
        parse_fails("{\"setupFiles\": {\"//dev/./sda\": \"a\"}}", NOOK_E_REFUSED, "/dev");
}

Test(spec, oversize) {
        size_t n = 1024 * 1024 + 64;
        char *big = malloc(n + 32);
        cr_assert_not_null(big);
        int off = snprintf(big, 32, "{\"labels\": {\"k\": \"");
        memset(big + off, 'a', n);
        strcpy(big + off + n, "\"}}");
        parse_fails(big, NOOK_E_INVALID, "larger than");
        free(big);
}

/* ---- sb_guest_path_check ------------------------------------------------------------------------ */

static void guest_ok(const char *in, const char *want) {
        nook_error err = { 0 };
        char *out = NULL;
        int r = sb_guest_path_check("volume target", in, &out, &err);
        cr_assert_geq(r, 0, "'%s': want success, got %s", in, err.msg);
        cr_expect_str_eq(out, want, "'%s': want '%s', got '%s'", in, want, out);
        free(out);
}

static void guest_bad(const char *in, nook_errc code, const char *needle) {
        nook_error err = { 0 };
        char *out = NULL;
        int r = sb_guest_path_check("WHAT-FIELD", in, &out, &err);
        free(out);
        cr_assert_lt(r, 0, "'%s': want a refusal", in ? in : "(null)");
        cr_expect_eq(
                err.code, code, "'%s': code %d, want %d (%s)", in ? in : "(null)", err.code, code, err.msg);
        cr_expect_not_null(strstr(err.msg, "WHAT-FIELD"), "'%s': the error '%s' names the field",
                in ? in : "", err.msg);
        if (needle)
                cr_expect_not_null(strstr(err.msg, needle), "'%s': the error '%s' should say '%s'",
                        in ? in : "", err.msg, needle);
}

Test(guest_path, normalises) {
        guest_ok("/data", "/data");
        guest_ok("/data/", "/data");
        guest_ok("//a///b/./c/.", "/a/b/c");
        guest_ok("/a/.../b", "/a/.../b"); /* three dots is a name */
        guest_ok("/procfs", "/procfs");
        guest_ok("/dev2/x", "/dev2/x");
        guest_ok("/system", "/system");
        guest_ok("/workspace/sub", "/workspace/sub");
}

Test(guest_path, refuses) {
        guest_bad(NULL, NOOK_E_INVALID, "absolute");
        guest_bad("", NOOK_E_INVALID, "absolute");
        guest_bad("data", NOOK_E_INVALID, "absolute");
        guest_bad("./data", NOOK_E_INVALID, "absolute");
        guest_bad("/", NOOK_E_INVALID, "'/'");
        guest_bad("//", NOOK_E_INVALID, "'/'");
        guest_bad("/./.", NOOK_E_INVALID, "'/'");
        guest_bad("/..", NOOK_E_REFUSED, "..");
        guest_bad("/a/../b", NOOK_E_REFUSED, "..");
        guest_bad("/a/..", NOOK_E_REFUSED, "..");
        guest_bad("/proc", NOOK_E_REFUSED, "/proc");
        guest_bad("/proc/sys/kernel", NOOK_E_REFUSED, "/proc");
        guest_bad("//sys//fs", NOOK_E_REFUSED, "/sys");
        guest_bad("/./dev/shm", NOOK_E_REFUSED, "/dev");
        guest_bad("/dev/", NOOK_E_REFUSED, "/dev");
        char *longp = malloc(PATH_MAX + 8);
        cr_assert_not_null(longp);
        longp[0] = '/';
        memset(longp + 1, 'a', PATH_MAX + 2);
        longp[PATH_MAX + 3] = 0;
        guest_bad(longp, NOOK_E_INVALID, "longer");
        free(longp);
}

/* ---- sb_volumes_parse --------------------------------------------------------------------------- */

static int vparse(const char *text, sb_volume **v, size_t *n, nook_error *err) {
        json_error_t jerr;
        json_t *o = json_loads(text, 0, &jerr);
        cr_assert_not_null(o, "test JSON %s: %s", text, jerr.text);
        int r = sb_volumes_parse(o, home, v, n, err);
        json_decref(o);
        return r;
}

static void vol_bad_v(const char *text, nook_errc code, const char *const *needles) {
        sb_volume *v = NULL;
        size_t n = 0;
        nook_error err = { 0 };
        int r = vparse(text, &v, &n, &err);
        if (r >= 0) {
                sb_volumes_free(v, n);
                cr_expect_lt(r, 0, "volumes %s: want a refusal, it parsed", text);
                return;
        }
        cr_expect_eq(err.code, code, "volumes %s: want code %d, got %d (%s)", text, code, err.code, err.msg);
        for (const char *const *p = needles; *p; p++)
                cr_expect_not_null(strstr(err.msg, *p), "volumes %s: the error '%s' should name '%s'", text,
                        err.msg, *p);
}
#define vol_bad(text, code, ...) vol_bad_v(text, code, (const char *const[]){ __VA_ARGS__, NULL })

/* text (malloc'ed; freed here) parses. */
static void vol_ok(char *text) {
        sb_volume *v = NULL;
        size_t n = 0;
        nook_error err = { 0 };
        int r = vparse(text, &v, &n, &err);
        cr_assert_geq(r, 0, "volumes %s: %s", text, err.msg);
        free(text);
        sb_volumes_free(v, n);
}

/* "{\"volumes\": [{\"source\": \"<src>\", \"target\": \"/mnt/x\"<extra>}]}" */
static char *bind_json(const char *src, const char *extra) {
        char *t = NULL;
        cr_assert(asprintf(&t, "{\"volumes\": [{\"source\": \"%s\", \"target\": \"/mnt/x\"%s}]}", src,
                          extra) > 0);
        return t;
}

Test(volumes, good) {
        char *text = NULL;
        cr_assert(asprintf(&text,
                          "{\"volumes\": [{\"source\": \"%s/./\", \"target\": \"/mnt/ro/\"},"
                          " {\"hostPath\": \"%s\", \"containerPath\": \"/mnt/rw\", \"readonly\": false},"
                          " {\"type\": \"tmpfs\", \"target\": \"/scratch\", \"sizeMib\": 16},"
                          " {\"type\": \"tmpfs\", \"target\": \"/t2\"},"
                          " {\"type\": \"volume\", \"name\": \"cache\", \"target\": \"/cache\"},"
                          " {\"name\": \"cache2\", \"target\": \"/cache2\", \"readOnly\": true}]}",
                          hostdir, hostdir) > 0);
        sb_volume *v = NULL;
        size_t n = 0;
        nook_error err = { 0 };
        int r = vparse(text, &v, &n, &err);
        free(text);
        cr_assert_geq(r, 0, "%s", err.msg);
        cr_assert_eq(n, 6);
        cr_expect_eq(v[0].type, SB_VOLUME_BIND);
        cr_expect_str_eq(v[0].source, hostdir);
        cr_expect_str_eq(v[0].target, "/mnt/ro");
        cr_expect(v[0].readonly, "a bind is read-only unless readonly: false");
        cr_expect_eq(v[1].type, SB_VOLUME_BIND);
        cr_expect_not(v[1].readonly);
        cr_expect_eq(v[2].type, SB_VOLUME_TMPFS);
        cr_expect_eq(v[2].size_mib, 16);
        cr_expect_not(v[2].readonly);
        cr_expect_eq(v[3].size_mib, 64, "tmpfs default size");
        cr_expect_eq(v[4].type, SB_VOLUME_NAMED);
        cr_expect_str_eq(v[4].source, "cache");
        cr_expect_not(v[4].readonly, "a named volume is writable by default");
        cr_expect_eq(v[5].type, SB_VOLUME_NAMED);
        cr_expect(v[5].readonly);
        json_t *j = sb_volumes_to_json(v, n);
        cr_expect_eq(json_array_size(j), 6);
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(j, 4), "name")), "cache");
        json_decref(j);
        sb_volumes_free(v, n);
}

Test(volumes, no_volumes) {
        sb_volume *v = (sb_volume *)1;
        size_t n = 9;
        nook_error err = { 0 };
        cr_assert_geq(vparse("{}", &v, &n, &err), 0);
        cr_expect_eq(n, 0);
        sb_volumes_free(v, n);
        cr_assert_geq(vparse("{\"volumes\": null}", &v, &n, &err), 0);
        cr_expect_eq(n, 0);
        sb_volumes_free(v, n);
}

Test(volumes, structure_errors_name_the_field) {
        vol_bad("{\"volumes\": {}}", NOOK_E_INVALID, "volumes");
        vol_bad("{\"volumes\": [1]}", NOOK_E_INVALID, "volumes[0]");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/t\", \"size\": 1}]}", NOOK_E_INVALID,
                "volumes[0]", "'size'");
        vol_bad("{\"volumes\": [{\"type\": \"nfs\", \"target\": \"/t\"}]}", NOOK_E_INVALID,
                "volumes[0].type", "nfs");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\"}]}", NOOK_E_INVALID, "volume target");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": 5}]}", NOOK_E_INVALID, "volume target");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/t\", \"readonly\": \"yes\"}]}",
                NOOK_E_INVALID, "readonly");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/t\", \"sizeMib\": 0}]}", NOOK_E_INVALID,
                "sizeMib");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/t\", \"sizeMib\": 1048577}]}",
                NOOK_E_INVALID, "sizeMib");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/t\", \"sizeMib\": \"16m\"}]}",
                NOOK_E_INVALID, "sizeMib");
        vol_bad("{\"volumes\": [{\"type\": \"volume\", \"name\": \"../x\", \"target\": \"/t\"}]}",
                NOOK_E_INVALID, "volume");
        vol_bad("{\"volumes\": [{\"type\": \"volume\", \"name\": \"A\", \"target\": \"/t\"}]}",
                NOOK_E_INVALID, "volume");
        vol_bad("{\"volumes\": [{\"type\": \"volume\", \"target\": \"/t\"}]}", NOOK_E_INVALID, "volume");
        vol_bad("{\"volumes\": [{\"type\": \"bind\", \"target\": \"/t\"}]}", NOOK_E_INVALID,
                "volumes[0].source");
        vol_bad("{\"volumes\": [{\"type\": \"bind\", \"source\": \"relative/dir\", \"target\": \"/t\"}]}",
                NOOK_E_INVALID, "volumes[0].source");
        vol_bad("{\"volumes\": [{\"type\": \"bind\", \"source\": \"/nonexistent/nook-x\", \"target\": \"/t\"}]}",
                NOOK_E_NOT_FOUND, "volumes[0].source", "/nonexistent/nook-x");
}

Test(volumes, hostile_targets) {
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/\"}]}", NOOK_E_INVALID,
                "volume target");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"rel\"}]}", NOOK_E_INVALID,
                "volume target");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/proc/sys\"}]}", NOOK_E_REFUSED,
                "/proc");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/sys\"}]}", NOOK_E_REFUSED, "/sys");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/dev/shm\"}]}", NOOK_E_REFUSED, "/dev");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/a/../proc\"}]}", NOOK_E_REFUSED, "..");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/workspace\"}]}", NOOK_E_INVALID,
                "/workspace");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"//workspace/./\"}]}", NOOK_E_INVALID,
                "/workspace");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/d\"}, {\"type\": \"tmpfs\", \"target\": "
                "\"/d\"}]}",
                NOOK_E_INVALID, "two volumes", "/d");
        vol_bad("{\"volumes\": [{\"type\": \"tmpfs\", \"target\": \"/d\"}, {\"type\": \"tmpfs\", \"target\": "
                "\"//d/./\"}]}",
                NOOK_E_INVALID, "two volumes", "/d");
}

Test(volumes, too_many) {
        json_t *o = json_object(), *a = json_array();
        for (int i = 0; i < 65; i++) {
                char t[32];
                (void)snprintf(t, sizeof(t), "/t%d", i);
                json_array_append_new(a, json_pack("{s:s, s:s}", "type", "tmpfs", "target", t));
        }
        json_object_set_new(o, "volumes", a);
        sb_volume *v = NULL;
        size_t n = 0;
        nook_error err = { 0 };
        int r = sb_volumes_parse(o, home, &v, &n, &err);
        json_decref(o);
        if (r >= 0)
                sb_volumes_free(v, n);
        cr_assert_lt(r, 0);
        cr_expect_not_null(strstr(err.msg, "64"), "%s", err.msg);
}

Test(volumes, refused_sources) {
        const char *srcs[] = { "/", "/proc", "/proc/self", "/sys", "/sys/fs/cgroup", "/dev", "/dev/shm",
                "/etc/shadow" };
        for (size_t i = 0; i < ELEMENTSOF(srcs); i++) {
                if (access(srcs[i], F_OK) < 0)
                        continue;
                char *t = bind_json(srcs[i], "");
                char top[16];
                (void)snprintf(top, sizeof(top), "%.*s", (int)strcspn(srcs[i] + 1, "/") + 1, srcs[i]);
                vol_bad(t, NOOK_E_REFUSED, "Refusing", top);
                free(t);
        }
        /* nook's state folder, something inside it, and something holding it */
        char *p = NULL;
        cr_assert(asprintf(&p, "%s/sub", home) > 0);
        mkdir_p(p);
        const char *state[] = { home, p, base };
        for (size_t i = 0; i < ELEMENTSOF(state); i++) {
                char *t = bind_json(state[i], "");
                vol_bad(t, NOOK_E_REFUSED, "state folder");
                free(t);
                /* never, not even with the override */
                t = bind_json(state[i], ", \"allowSensitive\": true");
                vol_bad(t, NOOK_E_REFUSED, "state folder");
                free(t);
        }
        free(p);
        char *t = bind_json("/", ", \"allowSensitive\": true");
        vol_bad(t, NOOK_E_REFUSED, "'/'");
        free(t);
}

/* The runtime folder (the sandboxes' control sockets) is never a volume; checking for it makes
 * none (CI found one empty /dev/shm/nook-0/<key> left per test here). */
Test(volumes, runtime_folder_refused_and_never_made) {
        char link[200], rt[240], sub[260], mine[200];
        (void)snprintf(link, sizeof(link), "%s/run", home);
        (void)snprintf(mine, sizeof(mine), "%s/nook-%u", base, (unsigned)geteuid());
        vol_ok(bind_json(hostdir, ""));
        struct stat st;
        cr_expect_neq(lstat(link, &st), 0, "a volume check made the link %s", link);
        cr_expect_neq(lstat(mine, &st), 0, "a volume check made the runtime root %s", mine);

        /* <root>/<key> as rundir.c makes it, and another home's <root>/<key2> beside it */
        char rroot[200], other[240];
        (void)snprintf(rroot, sizeof(rroot), "%s/rt", base);
        (void)snprintf(rt, sizeof(rt), "%s/0123456789abcdef", rroot);
        (void)snprintf(sub, sizeof(sub), "%s/sock", rt);
        (void)snprintf(other, sizeof(other), "%s/fedcba9876543210", rroot);
        mkdir_p(rroot);
        cr_assert_eq(mkdir(rt, 0700), 0, "mkdir %s: %m", rt);
        mkdir_p(sub);
        mkdir_p(other);
        cr_assert_eq(symlink(rt, link), 0, "symlink %s: %m", link);
        const char *srcs[] = { rt, sub, other, rroot, base };
        for (size_t i = 0; i < ELEMENTSOF(srcs); i++) {
                char *t = bind_json(srcs[i], ", \"allowSensitive\": true");
                vol_bad(t, NOOK_E_REFUSED, srcs[i] == base ? "state folder" : "runtime folder");
                free(t);
        }
}

Test(volumes, symlinks_are_resolved_before_the_check) {
        char l1[200], l2[200];
        (void)snprintf(l1, sizeof(l1), "%s/to-shadow", base);
        (void)snprintf(l2, sizeof(l2), "%s/to-state", base);
        cr_assert_eq(symlink("/etc/shadow", l1), 0);
        cr_assert_eq(symlink(home, l2), 0);
        char *t = bind_json(l1, "");
        vol_bad(t, NOOK_E_REFUSED, "/etc/shadow");
        free(t);
        t = bind_json(l2, "");
        vol_bad(t, NOOK_E_REFUSED, "state folder");
        free(t);
}

Test(volumes, override_allows_system_paths) {
        char *t = bind_json("/proc", ", \"allowSensitive\": true");
        sb_volume *v = NULL;
        size_t n = 0;
        nook_error err = { 0 };
        int r = vparse(t, &v, &n, &err);
        free(t);
        cr_assert_geq(r, 0, "%s", err.msg);
        cr_expect_str_eq(v[0].source, "/proc");
        cr_expect(v[0].readonly);
        sb_volumes_free(v, n);
}

Test(volumes, credential_folders_under_home) {
        const char *dirs[] = { ".ssh", ".aws", ".docker", ".kube", ".gnupg", ".config", ".config/gcloud" };
        char *old = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
        cr_assert_eq(setenv("HOME", fakehome, 1), 0);
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                char d[256];
                (void)snprintf(d, sizeof(d), "%s/%s", fakehome, dirs[i]);
                mkdir_p(d);
        }
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                char d[256];
                (void)snprintf(d, sizeof(d), "%s/%s", fakehome, dirs[i]);
                char *t = bind_json(d, "");
                vol_bad(t, NOOK_E_REFUSED, "Refusing", "credential");
                free(t);
        }
        /* the home itself holds them */
        char *t = bind_json(fakehome, "");
        vol_bad(t, NOOK_E_REFUSED, "credential");
        free(t);
        /* a project folder next to them is fine; the override lets .ssh through */
        char proj[256];
        (void)snprintf(proj, sizeof(proj), "%s/project", fakehome);
        mkdir_p(proj);
        const char *ok_srcs[] = { proj };
        for (size_t i = 0; i < ELEMENTSOF(ok_srcs); i++) {
                t = bind_json(ok_srcs[i], "");
                sb_volume *v = NULL;
                size_t n = 0;
                nook_error err = { 0 };
                int r = vparse(t, &v, &n, &err);
                free(t);
                cr_expect_geq(r, 0, "%s: %s", ok_srcs[i], err.msg);
                if (r >= 0)
                        sb_volumes_free(v, n);
        }
        char ssh[256];
        (void)snprintf(ssh, sizeof(ssh), "%s/.ssh", fakehome);
        t = bind_json(ssh, ", \"allowSensitive\": true");
        sb_volume *v = NULL;
        size_t n = 0;
        nook_error err = { 0 };
        int r = vparse(t, &v, &n, &err);
        free(t);
        cr_expect_geq(r, 0, "allowSensitive lets ~/.ssh through: %s", err.msg);
        if (r >= 0)
                sb_volumes_free(v, n);
        if (old) {
                setenv("HOME", old, 1);
                free(old);
        } else
                unsetenv("HOME");
}

Test(volumes, root_credentials) {
        const char *srcs[] = { "/root", "/root/.ssh", "/root/.aws", "/home" };
        for (size_t i = 0; i < ELEMENTSOF(srcs); i++) {
                if (access(srcs[i], F_OK) < 0)
                        continue;
                char *t = bind_json(srcs[i], "");
                vol_bad(t, NOOK_E_REFUSED, "Refusing");
                free(t);
        }
}

/* network "public" takes networkPolicy rules as exceptions to its public-only floor (an egress
 * proxy at a private host:port); domains stay policy-only, and "off" takes no policy at all. */
Test(spec, public_network_rules) {
        sb_spec s = { 0 };
        parse_ok(
                "{\"network\":\"public\",\"networkPolicy\":{\"rules\":[{\"action\":\"allow\",\"cidr\":\"10.99.0.10/32\",\"ports\":\"3128\"}]}}",
                &s);
        cr_assert_str_eq(s.network, "public");
        cr_assert_not_null(s.net_rules);
        cr_assert_not_null(s.net_rules[0]);
        cr_assert_null(s.net_rules[1]);
        json_t *o = json_object();
        sb_spec_network_to_json(&s, o);
        cr_assert_not_null(json_object_get(o, "networkPolicy"), "the rules are kept in the stored spec");
        json_decref(o);
        sb_spec_done(&s);
        parse_fails("{\"network\":\"public\",\"networkPolicy\":{\"domains\":[\"example.com\"]}}",
                NOOK_E_INVALID, "domains needs network 'policy'");
        parse_fails(
                "{\"network\":\"off\",\"networkPolicy\":{\"rules\":[{\"action\":\"allow\",\"cidr\":\"10.0.0.1/32\"}]}}",
                NOOK_E_INVALID, "networkPolicy needs network 'policy' or 'public'");
        parse_fails(
                "{\"network\":\"public\",\"networkPolicy\":{\"rules\":[{\"action\":\"allow\",\"cidr\":\"10.0.0.1/8\"}]}}",
                NOOK_E_INVALID, "bits set beyond");
}

/* secrets and egress: the canonical (stored) form never holds a value; a spec read back from it
 * parses (a start) but has no value, which create refuses and start accepts. */
Test(spec, secrets_never_stored) {
        sb_spec s = { 0 };
        nook_error e = { 0 };
        parse_ok("{\"network\": \"public\", \"secrets\": {\"GH\": {\"value\": \"s3cr3t-value\", \"hosts\": "
                 "[\"API.Example.com\", \"*.example.org\"], \"body\": true}}, \"egress\": {\"allowHttp\": "
                 "[\"GET https://api.example.com/*\"], \"audit\": true}}",
                &s);
        cr_assert_eq(s.n_secrets, 1);
        cr_expect_str_eq(s.secrets[0].hosts[0], "api.example.com", "hosts are canonical lower case");
        cr_expect(s.secrets[0].body);
        cr_expect(sb_spec_wants_egress(&s));
        cr_expect_geq(sb_spec_check_secret_values(&s, &e), 0);
        char *values = sb_egress_values_json(&s);
        cr_expect(values && strstr(values, "s3cr3t-value"), "the values travel to the supervisor");
        free(values);
        char *t = sb_spec_to_json(&s);
        cr_assert_not_null(t);
        cr_expect_null(strstr(t, "s3cr3t-value"), "the stored spec holds the value: %s", t);
        cr_expect(strstr(t, "\"hosts\":[\"api.example.com\",\"*.example.org\"]"), "%s", t);
        cr_expect(strstr(t, "\"allowHttp\":[\"GET https://api.example.com/*\"]"), "%s", t);
        sb_spec s2 = { 0 };
        parse_ok(t, &s2);
        cr_expect_null(s2.secrets[0].value);
        cr_expect_lt(sb_spec_check_secret_values(&s2, &e), 0, "create needs the value");
        cr_expect(strstr(e.msg, "'GH' has no value"), "%s", e.msg);
        cr_expect_null(sb_egress_values_json(&s2));
        sb_spec_done(&s2);
        free(t);
        sb_spec_done(&s);
        /* without secrets, rules or audit: no gateway, and nothing added to the canonical form */
        parse_ok("{\"network\": \"public\"}", &s);
        cr_expect_not(sb_spec_wants_egress(&s));
        t = sb_spec_to_json(&s);
        cr_expect_null(strstr(t, "secrets"));
        cr_expect_null(strstr(t, "egress"));
        free(t);
        sb_spec_done(&s);
}

/* pidsMax: absent is the default (SB_SPEC_PIDS_DEFAULT), 0 and -1 are "no limit" (docker's
 * --pids-limit), which survives the round trip through the stored spec as 0. */
Test(spec, pids_default_and_none) {
        sb_spec s = {}, s2 = {};
        nook_error err = {};
        cr_assert_eq(sb_spec_parse("{}", &s, &err), 0, "%s", err.msg);
        cr_expect_eq(sb_spec_pids_limit(&s), SB_SPEC_PIDS_DEFAULT);
        sb_spec_done(&s);
        for (int v = -1; v <= 0; v++) {
                char j[64];
                snprintf(j, sizeof(j), "{\"pidsMax\": %d}", v);
                s = (sb_spec){};
                cr_assert_eq(sb_spec_parse(j, &s, &err), 0, "%s", err.msg);
                cr_expect_eq(sb_spec_pids_limit(&s), 0, "%s: no limit", j);
                char *t = sb_spec_to_json(&s);
                cr_assert_not_null(t);
                cr_expect(strstr(t, "\"pidsMax\":0") || strstr(t, "\"pidsMax\": 0"), "%s", t);
                s2 = (sb_spec){};
                cr_assert_eq(sb_spec_parse(t, &s2, &err), 0, "%s", err.msg);
                cr_expect_eq(sb_spec_pids_limit(&s2), 0, "stored as %s, still no limit", t);
                free(t);
                sb_spec_done(&s);
                sb_spec_done(&s2);
        }
}
