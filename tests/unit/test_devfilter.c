/* SPDX-License-Identifier: Apache-2.0 */
/* isolate/devfilter.c: the cgroup v2 device program.  Its instructions are run here by a small
 * interpreter of the opcodes it emits, for every request of a grid, and compared with the rule
 * list's meaning (devfilter.h); the kernel's verifier loads it (host root only); and on a cgroup2
 * hierarchy (the unified one of a hybrid host too) it is attached to a cgroup and a process in it
 * opens device nodes: what the rules deny fails with EPERM. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/devfilter.h"
#include "isolate/userns.h"
#include "util/macro.h"

/* ---- an interpreter of what devfilter.c emits ---- */

static int run_prog(
        const struct bpf_insn *p, size_t n, char type, unsigned major, unsigned minor, unsigned acc) {
        uint32_t ctx[3] = { (acc << 16) | (type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR), major,
                minor };
        uint64_t r[11] = { 0 };
        for (size_t pc = 0; pc < n; pc++) {
                const struct bpf_insn *i = &p[pc];
                switch (i->code) {
                case BPF_LDX | BPF_MEM | BPF_W:
                        cr_assert_eq(i->src_reg, 1, "loads only from the context");
                        cr_assert(
                                i->off >= 0 && i->off <= 8 && i->off % 4 == 0, "context offset %d", i->off);
                        r[i->dst_reg] = ctx[i->off / 4];
                        break;
                case BPF_ALU | BPF_AND | BPF_K:
                        r[i->dst_reg] = (uint32_t)r[i->dst_reg] & (uint32_t)i->imm;
                        break;
                case BPF_ALU | BPF_RSH | BPF_K:
                        r[i->dst_reg] = (uint32_t)r[i->dst_reg] >> i->imm;
                        break;
                case BPF_ALU64 | BPF_MOV | BPF_X:
                        r[i->dst_reg] = r[i->src_reg];
                        break;
                case BPF_ALU64 | BPF_MOV | BPF_K:
                        r[i->dst_reg] = (uint64_t)(int64_t)i->imm;
                        break;
                case BPF_JMP | BPF_JNE | BPF_K:
                        if (r[i->dst_reg] != (uint64_t)(int64_t)i->imm)
                                pc += (size_t)i->off;
                        break;
                case BPF_JMP | BPF_JEQ | BPF_K:
                        if (r[i->dst_reg] == (uint64_t)(int64_t)i->imm)
                                pc += (size_t)i->off;
                        break;
                case BPF_JMP | BPF_EXIT:
                        return (int)r[0];
                default:
                        cr_assert_fail("unexpected opcode 0x%x at %zu", i->code, pc);
                }
                cr_assert(pc < n, "a jump past the end");
        }
        cr_assert_fail("ran off the end without exit");
        return -1;
}

/* The rule list's meaning, written from devfilter.h's words: the last rule that decides wins. */
static int reference(
        const iso_dev_rule *rules, size_t n, char type, unsigned major, unsigned minor, unsigned acc) {
        int verdict = 0;
        for (size_t i = 0; i < n; i++) {
                const iso_dev_rule *r = &rules[i];
                bool match = (r->type == 'a' || r->type == type) && (r->major < 0 || r->major == major) &&
                        (r->minor < 0 || r->minor == minor);
                bool decides = r->allow ? (acc & ~r->access) == 0 : (acc & r->access) != 0;
                if (match && decides)
                        verdict = r->allow;
        }
        return verdict;
}

static size_t parse_rules(const char *const *texts, iso_dev_rule *rules) {
        size_t n = 0;
        for (; texts[n]; n++) {
                nook_error err = {};
                bool allow = texts[n][0] == '+';
                cr_assert_eq(iso_dev_rule_parse(texts[n] + 1, allow, &rules[n], &err), 0, "%s: %s", texts[n],
                        err.msg);
        }
        return n;
}

/* The rules of texts (up to 32) in rules, and the program built from them. */
static size_t build_prog(
        const char *const *texts, iso_dev_rule *rules, struct bpf_insn **ret_p, size_t *ret_np) {
        size_t n = parse_rules(texts, rules);
        nook_error err = {};
        cr_assert_eq(iso_devfilter_build(rules, n, ret_p, ret_np, &err), 0, "%s", err.msg);
        return n;
}

static void check_grid(const char *const *texts) {
        iso_dev_rule rules[32];
        _cleanup_free_ struct bpf_insn *p = NULL;
        size_t np = 0;
        size_t n = build_prog(texts, rules, &p, &np);
        static const unsigned majors[] = { 0, 1, 5, 8, 136, 4095, 2147483647u };
        static const unsigned minors[] = { 0, 1, 3, 5, 7, 1048575 };
        for (int t = 0; t < 2; t++)
                for (size_t a = 0; a < ELEMENTSOF(majors); a++)
                        for (size_t b = 0; b < ELEMENTSOF(minors); b++)
                                for (unsigned acc = 1; acc <= 7; acc++) {
                                        char type = t ? 'b' : 'c';
                                        int want = reference(rules, n, type, majors[a], minors[b], acc);
                                        int got = run_prog(p, np, type, majors[a], minors[b], acc);
                                        cr_assert_eq(got, want,
                                                "%c %u:%u access %u: program %d, rules %d (first rule '%s')",
                                                type, majors[a], minors[b], acc, got, want,
                                                texts[0] ? texts[0] : "");
                                }
}

static int verdict(const char *const *texts, char type, unsigned major, unsigned minor, unsigned acc) {
        iso_dev_rule rules[32];
        _cleanup_free_ struct bpf_insn *p = NULL;
        size_t np = 0;
        (void)build_prog(texts, rules, &p, &np);
        return run_prog(p, np, type, major, minor, acc);
}

#define R ISO_DEV_READ
#define W ISO_DEV_WRITE
#define M ISO_DEV_MKNOD

/* an engine's list: deny all, then runc's default nodes */
static const char *const engine[] = { "-a", "+c 1:3 rwm", "+c 1:5 rwm", "+c 1:8 r", "+c 136:* rwm",
        "+b 8:* m", NULL };

Test(devfilter, known_verdicts) {
        cr_expect_eq(verdict(engine, 'c', 1, 3, R | W), 1, "/dev/null rw");
        cr_expect_eq(verdict(engine, 'c', 1, 7, R), 0, "/dev/full: no rule");
        cr_expect_eq(verdict(engine, 'c', 1, 8, R), 1, "c 1:8 r allows a read");
        cr_expect_eq(verdict(engine, 'c', 1, 8, R | W), 0, "c 1:8 r does not cover a write");
        cr_expect_eq(verdict(engine, 'c', 136, 42, W), 1, "a pty by wildcard minor");
        cr_expect_eq(verdict(engine, 'b', 1, 3, R), 0, "the type counts");
        cr_expect_eq(verdict(engine, 'b', 8, 0, M), 1, "b 8:* m: mknod");
        cr_expect_eq(verdict(engine, 'b', 8, 0, R), 0, "b 8:* m: no read");
        static const char *const allow_all_but[] = { "+a", "-c 1:3 w", "-b *:* rwm", NULL };
        cr_expect_eq(verdict(allow_all_but, 'c', 1, 3, R), 1, "a deny of w leaves r");
        cr_expect_eq(verdict(allow_all_but, 'c', 1, 3, R | W), 0, "a deny of w denies rw");
        cr_expect_eq(verdict(allow_all_but, 'c', 10, 200, R | W | M), 1, "allowed by 'a'");
        cr_expect_eq(verdict(allow_all_but, 'b', 8, 0, R), 0, "every block device denied");
        static const char *const later_wins[] = { "-a", "+c 1:3 rwm", "-c 1:3 rwm", NULL };
        cr_expect_eq(verdict(later_wins, 'c', 1, 3, R), 0, "the last rule wins");
        static const char *const none[] = { NULL };
        cr_expect_eq(verdict(none, 'c', 1, 3, R), 0, "nothing decided: denied");
}

static const char *const l1[] = { "+a", "-c 1:3 w", "-b *:* rwm", "+b 8:0 r", NULL };
static const char *const l2[] = { "-a", "+c *:* m", "+b *:* m", "+c 5:* rw", "-c 5:1 w",
        "+c 2147483647:1048575 r", NULL };
static const char *const l3[] = { "+c 1:3 r", "+c 1:3 w", "-a", "+a", "-c *:7 rm", NULL };
static const char *const *const lists[] = { engine, l1, l2, l3 };

Test(devfilter, program_matches_rules_on_a_grid) {
        for (size_t i = 0; i < ELEMENTSOF(lists); i++)
                check_grid(lists[i]);
}

Test(devfilter, parse_refuses_bad_rules) {
        static const char *const bad[] = { "", "x", "c", "c 1:3", "c 1:3 ", "c 1:3 rwx", "c 1 rwm", "c :3 r",
                "c 1: r", "d 1:3 r", "c -1:3 r", "c 1:-3 r", "c 2147483648:0 r", "c 99999999999:0 r",
                "c 1:3 r ", "c 1:3  r", "c 0x1:3 r", "ab", "c 1:3:4 r" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                nook_error err = {};
                iso_dev_rule r;
                cr_expect_eq(iso_dev_rule_parse(bad[i], true, &r, &err), -NOOK_E_INVALID, "'%s' accepted",
                        bad[i]);
                cr_expect(strstr(err.msg, "Invalid device rule"), "'%s': %s", bad[i], err.msg);
        }
        nook_error err = {};
        iso_dev_rule r;
        cr_assert_eq(iso_dev_rule_parse("b *:7 mr", false, &r, &err), 0, "%s", err.msg);
        cr_expect(r.type == 'b' && r.major == -1 && r.minor == 7 && r.access == (M | R) && !r.allow);
        cr_assert_eq(iso_dev_rule_parse("a", true, &r, &err), 0, "%s", err.msg);
        cr_expect(r.type == 'a' && r.major == -1 && r.minor == -1 && r.access == (R | W | M) && r.allow);
        /* a hand-made bad rule is refused by build */
        iso_dev_rule bogus = { .allow = true, .type = 'x', .major = 1, .minor = 1, .access = R };
        struct bpf_insn *p = NULL;
        size_t np = 0;
        cr_expect_eq(iso_devfilter_build(&bogus, 1, &p, &np, &err), -NOOK_E_INVALID);
        cr_expect_null(p);
}

/* ---- the kernel: verifier, and a real attach ---- */

Test(devfilter, the_verifier_accepts_it) {
        if (!iso_rootful())
                cr_skip_test(
                        "loading a BPF program needs CAP_BPF/CAP_SYS_ADMIN of the host (run as host root)");
        static const char *const none[] = { NULL };
        for (size_t i = 0; i <= ELEMENTSOF(lists); i++) {
                iso_dev_rule rules[32];
                _cleanup_free_ struct bpf_insn *p = NULL;
                size_t np = 0;
                nook_error err = {};
                (void)build_prog(i < ELEMENTSOF(lists) ? lists[i] : none, rules, &p, &np);
                int fd = -1;
                cr_assert_eq(iso_devfilter_load(p, np, &fd, &err), 0, "list %zu: %s", i, err.msg);
                cr_expect_geq(fd, 0);
                close(fd);
        }
}

/* A cgroup2 mount: the unified hierarchy of a v2 host, or of a hybrid one. */
static const char *cgroup2_mount(void) {
        static const char *const where[] = { "/sys/fs/cgroup", "/sys/fs/cgroup/unified" };
        for (size_t i = 0; i < ELEMENTSOF(where); i++) {
                struct statfs sf;
                if (statfs(where[i], &sf) == 0 && sf.f_type == 0x63677270 /* CGROUP2_SUPER_MAGIC */)
                        return where[i];
        }
        return NULL;
}

/* In the child: join the cgroup, then open two nodes; exit 0 only when /dev/null opens and
 * /dev/zero fails with EPERM. */
_noreturn_ static void probe_child(const char *cg) {
        char procs[512];
        (void)snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
        int fd = open(procs, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1)
                _exit(10);
        close(fd);
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                _exit(11);
        close(fd);
        fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
                _exit(12);
        _exit(errno == EPERM ? 0 : 13);
}

Test(devfilter, attached_it_denies_what_the_rules_deny) {
        const char *mnt = cgroup2_mount();
        if (!iso_rootful())
                cr_skip_test("attaching a device program needs host root");
        if (!mnt)
                cr_skip_test("no cgroup2 hierarchy is mounted here");
        char cg[256];
        (void)snprintf(cg, sizeof(cg), "%s/nook-test-devfilter-%d", mnt, (int)getpid());
        cr_assert_eq(mkdir(cg, 0755), 0, "%s: %m", cg);
        static const char *const only_null[] = { "-a", "+c 1:3 rwm", NULL };
        iso_dev_rule rules[4];
        size_t n = parse_rules(only_null, rules);
        nook_error err = {};
        int r = iso_devfilter_apply(cg, rules, n, &err);
        pid_t pid = r == 0 ? fork() : -1;
        if (pid == 0)
                probe_child(cg);
        int status = -1;
        if (pid > 0)
                (void)waitpid(pid, &status, 0);
        (void)rmdir(cg); /* empty again: the child exited */
        cr_assert_eq(r, 0, "%s", err.msg);
        cr_assert(WIFEXITED(status), "the probe died: %d", status);
        cr_expect_eq(WEXITSTATUS(status), 0,
                "probe exit %d (10: cannot join the cgroup, 11: /dev/null refused, 12: /dev/zero opened, 13: not EPERM)",
                WEXITSTATUS(status));
}
