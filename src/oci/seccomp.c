/* SPDX-License-Identifier: Apache-2.0 */
/* linux.seccomp of config.json compiled with libseccomp (the same library isolate/seccomp.c
 * builds nook's own profiles with).  Names this libseccomp does not know are skipped, as runc
 * and crun do: profiles list syscalls of newer kernels. */
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/seccomp.h"
#include "oci/seccomp.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/proc.h"
#include "util/str.h"

struct oci_seccomp {
        iso_seccomp_prog prog;
};

static void ctx_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

static int action_parse(
        const char *name, json_t *errno_ret, uint32_t default_errno, uint32_t *ret, nook_error *err) {
        uint32_t e = default_errno;
        if (json_is_integer(errno_ret))
                e = (uint32_t)json_integer_value(errno_ret);
        if (streq(name, "SCMP_ACT_ALLOW"))
                *ret = SCMP_ACT_ALLOW;
        else if (streq(name, "SCMP_ACT_ERRNO"))
                *ret = SCMP_ACT_ERRNO(e);
        else if (streq(name, "SCMP_ACT_KILL") || streq(name, "SCMP_ACT_KILL_THREAD"))
                *ret = SCMP_ACT_KILL_THREAD;
        else if (streq(name, "SCMP_ACT_KILL_PROCESS"))
                *ret = SCMP_ACT_KILL_PROCESS;
        else if (streq(name, "SCMP_ACT_TRAP"))
                *ret = SCMP_ACT_TRAP;
        else if (streq(name, "SCMP_ACT_TRACE"))
                *ret = SCMP_ACT_TRACE(e);
        else if (streq(name, "SCMP_ACT_LOG"))
                *ret = SCMP_ACT_LOG;
        else
                return nook_err_set(err, NOOK_E_INVALID,
                        "linux.seccomp: action '%s' is not supported (SCMP_ACT_NOTIFY needs a listener nook-oci does not have)",
                        name);
        return 0;
}

static int op_parse(const char *s, enum scmp_compare *ret) {
        static const struct {
                const char *name;
                enum scmp_compare op;
        } ops[] = {
                { "SCMP_CMP_NE", SCMP_CMP_NE },
                { "SCMP_CMP_LT", SCMP_CMP_LT },
                { "SCMP_CMP_LE", SCMP_CMP_LE },
                { "SCMP_CMP_EQ", SCMP_CMP_EQ },
                { "SCMP_CMP_GE", SCMP_CMP_GE },
                { "SCMP_CMP_GT", SCMP_CMP_GT },
                { "SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ },
        };
        for (size_t i = 0; i < ELEMENTSOF(ops); i++)
                if (streq(ops[i].name, s)) {
                        *ret = ops[i].op;
                        return 0;
                }
        return -1;
}

static int args_parse(json_t *args, struct scmp_arg_cmp *cmps, unsigned *ret_n, nook_error *err) {
        size_t i;
        json_t *a;
        unsigned n = 0;
        if (!args || json_is_null(args)) {
                *ret_n = 0;
                return 0;
        }
        if (!json_is_array(args) || json_array_size(args) > 6)
                return nook_err_set(
                        err, NOOK_E_INVALID, "linux.seccomp: 'args' must be an array of at most 6");
        json_array_foreach(args, i, a) {
                uint64_t idx = 0, v = 0, v2 = 0;
                const char *op = NULL;
                enum scmp_compare cmp;
                if (!json_is_object(a) || json_get_uint64(a, "index", true, &idx, err) < 0 ||
                        json_get_uint64(a, "value", true, &v, err) < 0 ||
                        json_get_uint64(a, "valueTwo", false, &v2, err) < 0 ||
                        json_get_string(a, "op", true, &op, err) < 0)
                        return nook_err_wrap(err, "linux.seccomp args[%zu]", i);
                if (idx > 5 || op_parse(op, &cmp) < 0)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.seccomp args[%zu]: bad index %llu or op '%s'", i,
                                (unsigned long long)idx, op);
                cmps[n++] = (struct scmp_arg_cmp){
                        .arg = (unsigned)idx, .op = cmp, .datum_a = v, .datum_b = v2
                };
        }
        *ret_n = n;
        return 0;
}

/* libseccomp refuses two conditions on one argument in a rule; runc then adds one rule per
 * condition, which matches when any of them does: do the same. */
static int add_rule(scmp_filter_ctx ctx, uint32_t act, int nr, const struct scmp_arg_cmp *c, unsigned n) {
        int r = seccomp_rule_add_array(ctx, act, nr, n, c);
        if (r != -EINVAL || n < 2)
                return r;
        for (unsigned i = 0; i < n; i++) {
                r = seccomp_rule_add_array(ctx, act, nr, 1, &c[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int add_syscalls(
        scmp_filter_ctx ctx, json_t *list, uint32_t def_act, uint32_t def_errno, nook_error *err) {
        size_t i, k;
        json_t *e, *name;
        if (!list || json_is_null(list))
                return 0;
        if (!json_is_array(list))
                return nook_err_set(err, NOOK_E_INVALID, "linux.seccomp.syscalls must be an array");
        json_array_foreach(list, i, e) {
                const char *action = NULL;
                uint32_t act;
                struct scmp_arg_cmp cmps[6];
                unsigned n = 0;
                json_t *names = json_is_object(e) ? json_object_get(e, "names") : NULL;
                if (!json_is_object(e) || json_get_string(e, "action", true, &action, err) < 0)
                        return nook_err_wrap(err, "linux.seccomp.syscalls[%zu]", i);
                if (action_parse(action, json_object_get(e, "errnoRet"), def_errno, &act, err) < 0 ||
                        args_parse(json_object_get(e, "args"), cmps, &n, err) < 0)
                        return nook_err_wrap(err, "linux.seccomp.syscalls[%zu]", i);
                if (!json_is_array(names))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.seccomp.syscalls[%zu].names must be an array", i);
                if (act == def_act)
                        continue; /* libseccomp refuses a rule equal to the default action */
                json_array_foreach(names, k, name) {
                        if (!json_is_string(name))
                                return nook_err_set(err, NOOK_E_INVALID,
                                        "linux.seccomp.syscalls[%zu].names[%zu] must be a string", i, k);
                        int nr = seccomp_syscall_resolve_name(json_string_value(name));
                        if (nr == __NR_SCMP_ERROR)
                                continue;
                        int r = add_rule(ctx, act, nr, cmps, n);
                        if (r < 0)
                                return nook_err_errnum(err, NOOK_E_INVALID, -r,
                                        "linux.seccomp: cannot add the rule for '%s'",
                                        json_string_value(name));
                }
        }
        return 0;
}

static int add_arches(scmp_filter_ctx ctx, json_t *arches, nook_error *err) {
        size_t i;
        json_t *a;
        if (!arches || !json_is_array(arches))
                return 0;
        json_array_foreach(arches, i, a) {
                if (!json_is_string(a) || !startswith(json_string_value(a), "SCMP_ARCH_"))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.seccomp.architectures[%zu] is not SCMP_ARCH_*", i);
                _cleanup_free_ char *lower = strdup(json_string_value(a) + strlen("SCMP_ARCH_"));
                if (!lower)
                        return nook_err_oom(err);
                for (char *c = lower; *c; c++)
                        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
                uint32_t arch = seccomp_arch_resolve_name(lower);
                if (arch == 0)
                        continue; /* an architecture this libseccomp does not know */
                int r = seccomp_arch_add(ctx, arch);
                if (r < 0 && r != -EEXIST)
                        return nook_err_errnum(err, NOOK_E_INVALID, -r,
                                "linux.seccomp: cannot add architecture '%s'", json_string_value(a));
        }
        return 0;
}

json_t *oci_seccomp_arch_names(void) {
        /* libseccomp's names (seccomp_arch_resolve_name), runtime-spec's SCMP_ARCH_ spelling */
        static const char *const names[] = { "aarch64", "arm", "loongarch64", "m68k", "mips", "mips64",
                "mips64n32", "mipsel", "mipsel64", "mipsel64n32", "parisc", "parisc64", "ppc", "ppc64",
                "ppc64le", "riscv64", "s390", "s390x", "sh", "sheb", "x32", "x86", "x86_64" };
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < ELEMENTSOF(names); i++) {
                char upper[32] = "SCMP_ARCH_";
                size_t n = strlen(upper);
                if (seccomp_arch_resolve_name(names[i]) == 0)
                        continue;
                for (const char *c = names[i]; *c && n + 1 < sizeof(upper); c++)
                        upper[n++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
                upper[n] = 0;
                if (json_array_append_new(arr, json_string(upper)) < 0)
                        arr = (json_decref(arr), NULL);
        }
        return arr;
}

void oci_seccomp_version(char *buf, size_t len) {
        const struct scmp_version *v = seccomp_version();
        (void)snprintf(buf, len, "%u.%u.%u", v->major, v->minor, v->micro);
}

static int compile(json_t *sc, iso_seccomp_prog *ret, nook_error *err) {
        _cleanup_(ctx_releasep) scmp_filter_ctx ctx = NULL;
        const char *def = NULL;
        uint64_t def_errno = EPERM;
        uint32_t def_act;
        int r;

        if (json_get_string(sc, "defaultAction", true, &def, err) < 0 ||
                json_get_uint64(sc, "defaultErrnoRet", false, &def_errno, err) < 0)
                return nook_err_wrap(err, "linux.seccomp");
        r = action_parse(def, NULL, (uint32_t)def_errno, &def_act, err);
        if (r < 0)
                return r;
        ctx = seccomp_init(def_act);
        if (!ctx)
                return nook_err_set(
                        err, NOOK_E_INVALID, "linux.seccomp: libseccomp refused the default action");
        /* no_new_privs stays the spec's decision (process.noNewPrivileges) */
        (void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        r = add_arches(ctx, json_object_get(sc, "architectures"), err);
        if (r < 0)
                return r;
        r = add_syscalls(ctx, json_object_get(sc, "syscalls"), def_act, (uint32_t)def_errno, err);
        if (r < 0)
                return r;
        return iso_seccomp_export_prog(ctx, "linux.seccomp", ret, err);
}

/* The cache key is the canonical JSON of linux.seccomp, kept beside the program and compared
 * in full on a hit (the hash only names the file), plus this binary and libseccomp's version:
 * compiling podman's default profile took ~25 ms of every create. */
static char *cache_path(const char *dir, const char *canon, const char *ext) {
        char id[128];
        const struct scmp_version *v = seccomp_version();
        if (proc_self_build_id(id, sizeof(id)) < 0)
                return NULL;
        return strprintf("%s/seccomp-oci-%016llx-%s-%u.%u.%u-api%u.%s", dir,
                (unsigned long long)str_fnv1a64(canon), id, v ? v->major : 0, v ? v->minor : 0,
                v ? v->micro : 0, seccomp_api_get(), ext);
}

static bool cache_key_matches(const char *path, const char *canon) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        nook_error ignore;
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
                fd_read_to_end(fd, (size_t)JSON_MAX_BYTES, &text, &len, &ignore) < 0)
                return false;
        return len == strlen(canon) && memcmp(text, canon, len) == 0;
}

static void cache_key_write(const char *path, const char *canon) {
        _cleanup_free_ char *tmp = strprintf("%s.tmp", path);
        if (!tmp)
                return;
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 || fd_write_all(fd, canon, strlen(canon)) < 0 || rename(tmp, path) < 0)
                (void)unlink(tmp);
}

int oci_seccomp_prepare(json_t *sc, const char *cache_dir, oci_seccomp **ret, nook_error *err) {
        _cleanup_free_ oci_seccomp *f = calloc(1, sizeof(*f));
        _cleanup_free_ char *canon = NULL, *key = NULL, *bpf = NULL;
        if (!f)
                return nook_err_oom(err);
        if (cache_dir) {
                canon = json_dumps(sc, JSON_COMPACT | JSON_SORT_KEYS);
                key = canon ? cache_path(cache_dir, canon, "json") : NULL;
                bpf = canon ? cache_path(cache_dir, canon, "bpf") : NULL;
                if (key && bpf && cache_key_matches(key, canon) && iso_seccomp_cache_read(bpf, &f->prog)) {
                        *ret = TAKE_PTR(f);
                        return 0;
                }
        }
        int r = compile(sc, &f->prog, err);
        if (r < 0)
                return r;
        if (key && bpf) {
                iso_seccomp_cache_write(cache_dir, bpf, &f->prog);
                cache_key_write(key, canon);
        }
        *ret = TAKE_PTR(f);
        return 0;
}

int oci_seccomp_load(oci_seccomp *f, nook_error *err) {
        return iso_seccomp_load_bpf(&f->prog, "linux.seccomp", err);
}

oci_seccomp *oci_seccomp_free(oci_seccomp *f) {
        if (!f)
                return NULL;
        iso_seccomp_prog_done(&f->prog);
        free(f);
        return NULL;
}
