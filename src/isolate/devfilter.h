/* SPDX-License-Identifier: Apache-2.0 */
/* cgroup v2 device rules: an eBPF program of type BPF_PROG_TYPE_CGROUP_DEVICE attached to the
 * container's cgroup (v2 has no devices.allow/deny files; runc and crun do the same).
 *
 * Semantics (v1's list, as runtime-spec describes linux.resources.devices): the rules are read
 * in order and the last one that decides a request wins.  An allow rule decides when its type,
 * major and minor match and its access covers the whole request; a deny rule when they match and
 * its access shares any bit with the request.  A request no rule decides is denied (engines begin
 * the list with a deny-all rule; v1 would inherit the parent's list instead). */
#pragma once

#include <linux/bpf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nook.h"

/* access bits, the kernel's BPF_DEVCG_ACC_* */
#define ISO_DEV_MKNOD 1u
#define ISO_DEV_READ 2u
#define ISO_DEV_WRITE 4u

typedef struct iso_dev_rule {
        bool allow;
        char type; /* 'a' (any), 'c' or 'b' */
        int64_t major, minor; /* -1: any */
        unsigned access; /* ISO_DEV_* bits, never 0 */
} iso_dev_rule;

/* Parses a rule in v1's text ("c 1:3 rwm", "b 8:* r", "a"): type, major:minor ('*' for any, a
 * number up to 2^31-1) and access (of r, w, m; "a" is every device and access).  INVALID naming
 * the rule otherwise. */
int iso_dev_rule_parse(const char *text, bool allow, iso_dev_rule *ret, nook_error *err);

/* The program's instructions for rules (in order); *ret is malloc'd. */
int iso_devfilter_build(
        const iso_dev_rule *rules, size_t n, struct bpf_insn **ret, size_t *ret_n, nook_error *err);
/* bpf(BPF_PROG_LOAD): the verifier's check.  Needs CAP_BPF or CAP_SYS_ADMIN on the host
 * (MISSING_FEATURE naming that on EPERM). */
int iso_devfilter_load(const struct bpf_insn *insns, size_t n, int *ret_fd, nook_error *err);
/* Builds, loads and attaches the program to the cgroup v2 directory cgroup_dir
 * (BPF_F_ALLOW_MULTI: a parent's device program, systemd's say, still applies too).  The
 * attachment lives as long as the cgroup. */
int iso_devfilter_apply(const char *cgroup_dir, const iso_dev_rule *rules, size_t n, nook_error *err);
