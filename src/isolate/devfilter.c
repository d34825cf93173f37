/* SPDX-License-Identifier: Apache-2.0 */
/* The cgroup v2 device program (devfilter.h has the rules' semantics).
 *
 * The program sees struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32 minor; }, with
 * access_type = (access << 16) | type (include/uapi/linux/bpf.h), and returns 1 to allow, 0 to
 * deny.  Its shape:
 *     r2 = type, r3 = access, r4 = major, r5 = minor        (prologue, from the context in r1)
 *     one block per rule, the last rule first: each test that fails jumps to the next block;
 *     a block whose tests all pass returns its verdict
 *     return 0                                              (nothing decided: deny) */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/devfilter.h"
#include "util/error.h"
#include "util/macro.h"

#define R0 0
#define R1 1
#define R2 2
#define R3 3
#define R4 4
#define R5 5
#define ACC_ALL (ISO_DEV_MKNOD | ISO_DEV_READ | ISO_DEV_WRITE)
#define MAX_RULES 4096 /* 9 instructions each at most: far below the verifier's 1M */

static int parse_num(const char *s, const char *end, int64_t *ret) {
        if (end - s == 1 && *s == '*') {
                *ret = -1;
                return 0;
        }
        int64_t v = 0;
        if (s == end || end - s > 10)
                return -EINVAL;
        for (const char *c = s; c < end; c++) {
                if (*c < '0' || *c > '9')
                        return -EINVAL;
                v = v * 10 + (*c - '0');
        }
        if (v > INT32_MAX)
                return -ERANGE; /* the program compares 32-bit immediates, sign-extended */
        *ret = v;
        return 0;
}

static bool parse_rule(const char *text, iso_dev_rule *r) {
        const char *colon, *space;
        if (streq(text, "a"))
                return true;
        if (strlen(text) < 7 || !strchr("abc", text[0]) || text[1] != ' ')
                return false;
        colon = strchr(text + 2, ':');
        space = colon ? strchr(colon, ' ') : NULL;
        if (!space)
                return false;
        r->type = text[0];
        if (parse_num(text + 2, colon, &r->major) < 0 || parse_num(colon + 1, space, &r->minor) < 0)
                return false;
        r->access = 0;
        for (const char *c = space + 1; *c; c++) {
                unsigned bit = *c == 'r' ? ISO_DEV_READ
                        : *c == 'w'      ? ISO_DEV_WRITE
                        : *c == 'm'      ? ISO_DEV_MKNOD
                                         : 0;
                if (!bit)
                        return false;
                r->access |= bit;
        }
        return r->access != 0;
}

int iso_dev_rule_parse(const char *text, bool allow, iso_dev_rule *ret, nook_error *err) {
        iso_dev_rule r = { .allow = allow, .type = 'a', .major = -1, .minor = -1, .access = ACC_ALL };
        if (!text || !parse_rule(text, &r))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid device rule '%s': use 'a', or TYPE MAJOR:MINOR ACCESS with TYPE a, c or b, "
                        "MAJOR and MINOR numbers up to 2147483647 or '*', ACCESS of r, w, m",
                        text ? text : "(null)");
        *ret = r;
        return 0;
}

typedef struct prog {
        struct bpf_insn *insns;
        size_t n, cap;
} prog;

static int emit(prog *p, uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
        if (p->n == p->cap) {
                size_t cap = p->cap ? p->cap * 2 : 64;
                struct bpf_insn *n = reallocarray(p->insns, cap, sizeof(*n));
                if (!n)
                        return -ENOMEM;
                p->insns = n;
                p->cap = cap;
        }
        p->insns[p->n++] =
                (struct bpf_insn){ .code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm };
        return 0;
}

/* A test that jumps to the next block when it fails; its offset is patched once the block's
 * length is known (off = -1 marks it). */
static int emit_jump_out(prog *p, uint8_t op, uint8_t reg, int32_t imm) {
        return emit(p, BPF_JMP | op | BPF_K, reg, 0, -1, imm);
}

static int emit_rule(prog *p, const iso_dev_rule *r) {
        size_t start = p->n;
        int k = 0;
        if (r->type != 'a')
                k = emit_jump_out(p, BPF_JNE, R2, r->type == 'b' ? BPF_DEVCG_DEV_BLOCK : BPF_DEVCG_DEV_CHAR);
        if (k >= 0 && (r->access & ACC_ALL) != ACC_ALL) {
                /* allow: the request has no bit outside the rule's; deny: it shares one with it */
                k = emit(p, BPF_ALU64 | BPF_MOV | BPF_X, R1, R3, 0, 0);
                if (k >= 0)
                        k = emit(p, BPF_ALU | BPF_AND | BPF_K, R1, 0, 0,
                                (int32_t)(r->allow ? ~r->access & ACC_ALL : r->access));
                if (k >= 0)
                        k = emit_jump_out(p, r->allow ? BPF_JNE : BPF_JEQ, R1, 0);
        }
        if (k >= 0 && r->major >= 0)
                k = emit_jump_out(p, BPF_JNE, R4, (int32_t)r->major);
        if (k >= 0 && r->minor >= 0)
                k = emit_jump_out(p, BPF_JNE, R5, (int32_t)r->minor);
        if (k >= 0)
                k = emit(p, BPF_ALU64 | BPF_MOV | BPF_K, R0, 0, 0, r->allow ? 1 : 0);
        if (k >= 0)
                k = emit(p, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
        if (k < 0)
                return k;
        for (size_t i = start; i < p->n; i++)
                if (BPF_CLASS(p->insns[i].code) == BPF_JMP && BPF_OP(p->insns[i].code) != BPF_EXIT &&
                        p->insns[i].off == -1)
                        p->insns[i].off = (int16_t)(p->n - i - 1);
        return 0;
}

static int emit_prologue(prog *p) {
        int k = emit(p, BPF_LDX | BPF_MEM | BPF_W, R2, R1, 0, 0);
        if (k >= 0)
                k = emit(p, BPF_ALU | BPF_AND | BPF_K, R2, 0, 0, 0xffff);
        if (k >= 0)
                k = emit(p, BPF_LDX | BPF_MEM | BPF_W, R3, R1, 0, 0);
        if (k >= 0)
                k = emit(p, BPF_ALU | BPF_RSH | BPF_K, R3, 0, 0, 16);
        if (k >= 0)
                k = emit(p, BPF_LDX | BPF_MEM | BPF_W, R4, R1, 4, 0);
        if (k >= 0)
                k = emit(p, BPF_LDX | BPF_MEM | BPF_W, R5, R1, 8, 0);
        return k;
}

int iso_devfilter_build(
        const iso_dev_rule *rules, size_t n, struct bpf_insn **ret, size_t *ret_n, nook_error *err) {
        prog p = { 0 };
        if (n > MAX_RULES)
                return nook_err_set(err, NOOK_E_INVALID, "%zu device rules: at most %d", n, MAX_RULES);
        for (size_t i = 0; i < n; i++)
                if (!strchr("abc", rules[i].type) || rules[i].type == 0 || !(rules[i].access & ACC_ALL) ||
                        rules[i].major > INT32_MAX || rules[i].minor > INT32_MAX)
                        return nook_err_set(err, NOOK_E_INVALID, "device rule %zu is not valid", i);
        int k = emit_prologue(&p);
        bool decided = false;
        /* A rule without a test (any device, every access) decides every request: the rules
         * before it and the default are unreachable, which the verifier refuses. */
        for (size_t i = n; k >= 0 && i > 0 && !decided; i--) {
                const iso_dev_rule *r = &rules[i - 1];
                k = emit_rule(&p, r);
                decided = r->type == 'a' && r->major < 0 && r->minor < 0 && (r->access & ACC_ALL) == ACC_ALL;
        }
        if (k >= 0 && !decided)
                k = emit(&p, BPF_ALU64 | BPF_MOV | BPF_K, R0, 0, 0, 0);
        if (k >= 0 && !decided)
                k = emit(&p, BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
        if (k < 0) {
                free(p.insns);
                return nook_err_oom(err);
        }
        *ret = p.insns;
        *ret_n = p.n;
        return 0;
}

static long sys_bpf(int cmd, union bpf_attr *attr) {
        return syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

int iso_devfilter_load(const struct bpf_insn *insns, size_t n, int *ret_fd, nook_error *err) {
        union bpf_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
        attr.insns = (uint64_t)(uintptr_t)insns;
        attr.insn_cnt = (uint32_t)n;
        attr.license = (uint64_t)(uintptr_t) "Apache-2.0"; /* no GPL-only helper is called */
        int fd = (int)sys_bpf(BPF_PROG_LOAD, &attr);
        if (fd < 0 && (errno == EPERM || errno == EACCES))
                return nook_err_errno(err, NOOK_E_MISSING_FEATURE,
                        "Cannot load the cgroup v2 device program (linux.resources.devices): it needs CAP_BPF or CAP_SYS_ADMIN on the host");
        if (fd < 0) {
                /* again with the verifier's log, whose last line says why */
                int e = errno;
                char log[8192] = "";
                attr.log_buf = (uint64_t)(uintptr_t)log;
                attr.log_size = sizeof(log);
                attr.log_level = 1;
                (void)sys_bpf(BPF_PROG_LOAD, &attr);
                log[sizeof(log) - 1] = 0;
                /* the reason is the line before the closing "processed N insns ..." */
                char *end = strstr(log, "\nprocessed ");
                if (end)
                        *end = 0;
                const char *last = strrchr(log, '\n');
                errno = e;
                return nook_err_errno(err, NOOK_E_IO,
                        "The kernel refused the cgroup v2 device program (verifier: '%s')",
                        last ? last + 1 : log);
        }
        *ret_fd = fd;
        return 0;
}

int iso_devfilter_apply(const char *cgroup_dir, const iso_dev_rule *rules, size_t n, nook_error *err) {
        _cleanup_free_ struct bpf_insn *insns = NULL;
        _cleanup_close_ int prog_fd = -1;
        size_t ni = 0;
        int r = iso_devfilter_build(rules, n, &insns, &ni, err);
        if (r < 0)
                return r;
        r = iso_devfilter_load(insns, ni, &prog_fd, err);
        if (r < 0)
                return r;
        _cleanup_close_ int cg = open(cgroup_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the cgroup '%s'", cgroup_dir);
        union bpf_attr attr;
        memset(&attr, 0, sizeof(attr));
        attr.target_fd = (uint32_t)cg;
        attr.attach_bpf_fd = (uint32_t)prog_fd;
        attr.attach_type = BPF_CGROUP_DEVICE;
        attr.attach_flags = BPF_F_ALLOW_MULTI;
        if (sys_bpf(BPF_PROG_ATTACH, &attr) < 0)
                return nook_err_errno(
                        err, NOOK_E_IO, "Cannot attach the device program to the cgroup '%s'", cgroup_dir);
        return 0;
}
