/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "oci/spec.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/str.h"

#define CONFIG_MAX_BYTES ((size_t)JSON_MAX_BYTES)

static const struct {
        const char *name;
        int flag;
} ns_names[] = {
        { "pid", CLONE_NEWPID },
        { "network", CLONE_NEWNET },
        { "mount", CLONE_NEWNS },
        { "ipc", CLONE_NEWIPC },
        { "uts", CLONE_NEWUTS },
        { "user", CLONE_NEWUSER },
        { "cgroup", CLONE_NEWCGROUP },
        { "time", 0x00000080 /* CLONE_NEWTIME */ },
};

int oci_ns_flag(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(ns_names); i++)
                if (streq(ns_names[i].name, name))
                        return ns_names[i].flag;
        return 0;
}

const oci_ns *oci_spec_ns(const oci_spec *s, int flag) {
        for (size_t i = 0; i < s->n_ns; i++)
                if (s->ns[i].type == flag)
                        return &s->ns[i];
        return NULL;
}

static const char *const cap_names[] = {
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_DAC_READ_SEARCH",
        "CAP_FOWNER",
        "CAP_FSETID",
        "CAP_KILL",
        "CAP_SETGID",
        "CAP_SETUID",
        "CAP_SETPCAP",
        "CAP_LINUX_IMMUTABLE",
        "CAP_NET_BIND_SERVICE",
        "CAP_NET_BROADCAST",
        "CAP_NET_ADMIN",
        "CAP_NET_RAW",
        "CAP_IPC_LOCK",
        "CAP_IPC_OWNER",
        "CAP_SYS_MODULE",
        "CAP_SYS_RAWIO",
        "CAP_SYS_CHROOT",
        "CAP_SYS_PTRACE",
        "CAP_SYS_PACCT",
        "CAP_SYS_ADMIN",
        "CAP_SYS_BOOT",
        "CAP_SYS_NICE",
        "CAP_SYS_RESOURCE",
        "CAP_SYS_TIME",
        "CAP_SYS_TTY_CONFIG",
        "CAP_MKNOD",
        "CAP_LEASE",
        "CAP_AUDIT_WRITE",
        "CAP_AUDIT_CONTROL",
        "CAP_SETFCAP",
        "CAP_MAC_OVERRIDE",
        "CAP_MAC_ADMIN",
        "CAP_SYSLOG",
        "CAP_WAKE_ALARM",
        "CAP_BLOCK_SUSPEND",
        "CAP_AUDIT_READ",
        "CAP_PERFMON",
        "CAP_BPF",
        "CAP_CHECKPOINT_RESTORE",
};

int oci_cap_from_name(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(cap_names); i++)
                if (streq(cap_names[i], name))
                        return (int)i;
        return -1;
}

const char *oci_cap_name(int cap) {
        return cap >= 0 && (size_t)cap < ELEMENTSOF(cap_names) ? cap_names[cap] : NULL;
}

static int get_int64(json_t *obj, const char *field, bool *ret_has, int64_t *ret, nook_error *err) {
        json_t *v = json_object_get(obj, field);
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v))
                return nook_err_set(err, NOOK_E_INVALID, "field '%s' must be an integer, got %s", field,
                        json_type_name(v));
        *ret = (int64_t)json_integer_value(v);
        *ret_has = true;
        return 1;
}

static int get_u32(json_t *obj, const char *field, bool required, uint32_t *ret, nook_error *err) {
        uint64_t v = 0;
        int r = json_get_uint64(obj, field, required, &v, err);
        if (r <= 0)
                return r;
        if (v > UINT32_MAX)
                return nook_err_set(err, NOOK_E_INVALID, "field '%s' is %llu, more than 4294967295", field,
                        (unsigned long long)v);
        *ret = (uint32_t)v;
        return 1;
}

static int parse_caps(json_t *caps, oci_process *p, nook_error *err) {
        static const char *const sets[_OCI_CAP_MAX] = { "bounding", "effective", "inheritable", "permitted",
                "ambient" };
        for (size_t i = 0; i < _OCI_CAP_MAX; i++) {
                _cleanup_strv_free_ char **l = NULL;
                int r = json_get_string_array(caps, sets[i], false, &l, err);
                if (r < 0)
                        return nook_err_wrap(err, "process.capabilities");
                STRV_FOREACH (c, l) {
                        int n = oci_cap_from_name(*c);
                        if (n < 0)
                                return nook_err_set(err, NOOK_E_INVALID,
                                        "process.capabilities.%s: unknown capability '%s' (names look like CAP_CHOWN)",
                                        sets[i], *c);
                        p->caps[i] |= 1ull << n;
                }
        }
        p->has_caps = true;
        return 0;
}

static const struct {
        const char *name;
        int res;
} rlimit_names[] = {
        { "RLIMIT_AS", RLIMIT_AS },
        { "RLIMIT_CORE", RLIMIT_CORE },
        { "RLIMIT_CPU", RLIMIT_CPU },
        { "RLIMIT_DATA", RLIMIT_DATA },
        { "RLIMIT_FSIZE", RLIMIT_FSIZE },
        { "RLIMIT_LOCKS", RLIMIT_LOCKS },
        { "RLIMIT_MEMLOCK", RLIMIT_MEMLOCK },
        { "RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE },
        { "RLIMIT_NICE", RLIMIT_NICE },
        { "RLIMIT_NOFILE", RLIMIT_NOFILE },
        { "RLIMIT_NPROC", RLIMIT_NPROC },
        { "RLIMIT_RSS", RLIMIT_RSS },
        { "RLIMIT_RTPRIO", RLIMIT_RTPRIO },
        { "RLIMIT_RTTIME", RLIMIT_RTTIME },
        { "RLIMIT_SIGPENDING", RLIMIT_SIGPENDING },
        { "RLIMIT_STACK", RLIMIT_STACK },
};

static int parse_rlimits(json_t *arr, oci_process *p, nook_error *err) {
        size_t i;
        json_t *e;
        if (!json_is_array(arr))
                return nook_err_set(err, NOOK_E_INVALID, "process.rlimits must be an array");
        json_array_foreach(arr, i, e) {
                const char *type = NULL;
                oci_rlimit rl = { .resource = -1 };
                if (p->n_rlimits >= OCI_MAX_RLIMITS)
                        return nook_err_set(err, NOOK_E_INVALID, "process.rlimits has more than %d entries",
                                OCI_MAX_RLIMITS);
                if (!json_is_object(e) || json_get_string(e, "type", true, &type, err) < 0 ||
                        json_get_uint64(e, "soft", true, &rl.soft, err) < 0 ||
                        json_get_uint64(e, "hard", true, &rl.hard, err) < 0)
                        return json_is_object(e) ? nook_err_wrap(err, "process.rlimits[%zu]", i)
                                                 : nook_err_set(err, NOOK_E_INVALID,
                                                           "process.rlimits[%zu] must be an object", i);
                for (size_t k = 0; k < ELEMENTSOF(rlimit_names); k++)
                        if (streq(rlimit_names[k].name, type))
                                rl.resource = rlimit_names[k].res;
                if (rl.resource < 0)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "process.rlimits[%zu]: unknown type '%s'", i, type);
                if (rl.soft > rl.hard)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "process.rlimits[%zu] (%s): soft limit %llu is above the hard limit %llu", i,
                                type, (unsigned long long)rl.soft, (unsigned long long)rl.hard);
                p->rlimits[p->n_rlimits++] = rl;
        }
        return 0;
}

static int parse_user(json_t *user, oci_process *p, nook_error *err) {
        uint32_t v = 0;
        json_t *gids;
        size_t i;
        json_t *e;
        if (!json_is_object(user))
                return nook_err_set(err, NOOK_E_INVALID, "process.user must be an object");
        if (get_u32(user, "uid", false, &v, err) < 0)
                return nook_err_wrap(err, "process.user");
        p->uid = v;
        v = 0;
        if (get_u32(user, "gid", false, &v, err) < 0)
                return nook_err_wrap(err, "process.user");
        p->gid = v;
        gids = json_object_get(user, "additionalGids");
        if (!gids || json_is_null(gids))
                return 0;
        if (!json_is_array(gids))
                return nook_err_set(err, NOOK_E_INVALID, "process.user.additionalGids must be an array");
        json_array_foreach(gids, i, e) {
                if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > UINT32_MAX)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "process.user.additionalGids[%zu] must be a group id", i);
                if (p->n_gids >= OCI_MAX_GIDS)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "process.user.additionalGids has more than %d entries", OCI_MAX_GIDS);
                p->gids[p->n_gids++] = (gid_t)json_integer_value(e);
        }
        return 0;
}

void oci_process_done(oci_process *p) {
        p->args = strv_free(p->args);
        p->env = strv_free(p->env);
}

int oci_process_parse(json_t *j, oci_process *ret, nook_error *err) {
        oci_process p = { .cwd = "/" };
        json_t *v;
        bool has = false;
        int64_t oom = 0;
        int r;

        if (!json_is_object(j))
                return nook_err_set(err, NOOK_E_INVALID, "'process' must be an object");
        if (json_get_bool(j, "terminal", false, &p.terminal, err) < 0 ||
                json_get_bool(j, "noNewPrivileges", false, &p.no_new_privs, err) < 0 ||
                json_get_string(j, "cwd", false, &p.cwd, err) < 0 ||
                json_get_string_array(j, "env", false, &p.env, err) < 0 ||
                json_get_string_array(j, "args", false, &p.args, err) < 0)
                goto fail;
        if (!p.args || !p.args[0]) {
                r = nook_err_set(err, NOOK_E_INVALID,
                        "process.args is empty: give the command to run, e.g. \"args\": [\"sh\"]");
                goto fail_r;
        }
        if (p.cwd[0] != '/') {
                r = nook_err_set(err, NOOK_E_INVALID, "process.cwd '%s' is not an absolute path", p.cwd);
                goto fail_r;
        }
        if ((v = json_object_get(j, "user")) && parse_user(v, &p, err) < 0)
                goto fail;
        if ((v = json_object_get(j, "capabilities")) && !json_is_null(v) &&
                (!json_is_object(v) || parse_caps(v, &p, err) < 0)) {
                if (!json_is_object(v))
                        (void)nook_err_set(err, NOOK_E_INVALID, "process.capabilities must be an object");
                goto fail;
        }
        if ((v = json_object_get(j, "rlimits")) && !json_is_null(v) && parse_rlimits(v, &p, err) < 0)
                goto fail;
        if (get_int64(j, "oomScoreAdj", &has, &oom, err) < 0)
                goto fail;
        if (has && (oom < -1000 || oom > 1000)) {
                r = nook_err_set(err, NOOK_E_INVALID, "process.oomScoreAdj %lld is outside -1000..1000",
                        (long long)oom);
                goto fail_r;
        }
        p.has_oom_score_adj = has;
        p.oom_score_adj = (int)oom;
        *ret = p;
        return 0;
fail:
        r = nook_err_wrap(err, "process");
fail_r:
        oci_process_done(&p);
        return r;
}

static const struct {
        const char *name;
        bool clear;
        unsigned long flag;
} mount_flags[] = {
        { "ro", false, MS_RDONLY },
        { "rw", true, MS_RDONLY },
        { "nosuid", false, MS_NOSUID },
        { "suid", true, MS_NOSUID },
        { "nodev", false, MS_NODEV },
        { "dev", true, MS_NODEV },
        { "noexec", false, MS_NOEXEC },
        { "exec", true, MS_NOEXEC },
        { "sync", false, MS_SYNCHRONOUS },
        { "async", true, MS_SYNCHRONOUS },
        { "dirsync", false, MS_DIRSYNC },
        { "remount", false, MS_REMOUNT },
        { "mand", false, MS_MANDLOCK },
        { "nomand", true, MS_MANDLOCK },
        { "atime", true, MS_NOATIME },
        { "noatime", false, MS_NOATIME },
        { "diratime", true, MS_NODIRATIME },
        { "nodiratime", false, MS_NODIRATIME },
        { "relatime", false, MS_RELATIME },
        { "norelatime", true, MS_RELATIME },
        { "strictatime", false, MS_STRICTATIME },
        { "nostrictatime", true, MS_STRICTATIME },
        { "bind", false, MS_BIND },
        { "rbind", false, MS_BIND | MS_REC },
};

static const struct {
        const char *name;
        unsigned long flag;
} prop_flags[] = {
        { "private", MS_PRIVATE },
        { "rprivate", MS_PRIVATE | MS_REC },
        { "shared", MS_SHARED },
        { "rshared", MS_SHARED | MS_REC },
        { "slave", MS_SLAVE },
        { "rslave", MS_SLAVE | MS_REC },
        { "unbindable", MS_UNBINDABLE },
        { "runbindable", MS_UNBINDABLE | MS_REC },
};

static unsigned long propagation_from(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(prop_flags); i++)
                if (streq(prop_flags[i].name, s))
                        return prop_flags[i].flag;
        return 0;
}

static int option_apply(const char *o, oci_mount *m, char **data) {
        for (size_t i = 0; i < ELEMENTSOF(mount_flags); i++)
                if (streq(mount_flags[i].name, o)) {
                        if (mount_flags[i].clear) {
                                m->flags &= ~mount_flags[i].flag;
                                m->clear |= mount_flags[i].flag;
                        } else
                                m->flags |= mount_flags[i].flag;
                        if (mount_flags[i].flag & MS_BIND)
                                m->bind = true;
                        return 0;
                }
        unsigned long p = propagation_from(o);
        if (p) {
                m->propagation = p;
                return 0;
        }
        /* crun's and podman's extensions that mean nothing to us */
        if (streq(o, "tmpcopyup") || streq(o, "notmpcopyup") || startswith(o, "idmap") ||
                streq(o, "copy-symlink"))
                return 0;
        char *n = *data ? strprintf("%s,%s", *data, o) : strdup(o);
        if (!n)
                return -ENOMEM;
        free(*data);
        *data = n;
        return 0;
}

int oci_mount_options(json_t *opts, oci_mount *m, nook_error *err) {
        _cleanup_free_ char *data = NULL;
        size_t i;
        json_t *e;
        if (!opts || json_is_null(opts))
                return 0;
        if (!json_is_array(opts))
                return nook_err_set(err, NOOK_E_INVALID, "'options' must be an array of strings");
        json_array_foreach(opts, i, e) {
                if (!json_is_string(e))
                        return nook_err_set(err, NOOK_E_INVALID, "options[%zu] must be a string", i);
                if (strlen(json_string_value(e)) > 4096)
                        return nook_err_set(
                                err, NOOK_E_INVALID, "options[%zu] is longer than 4096 bytes", i);
                if (option_apply(json_string_value(e), m, &data) < 0)
                        return nook_err_oom(err);
        }
        m->data = TAKE_PTR(data);
        return 0;
}

/* A path in config.json: no ".." segment, ever (a symlink-free lexical check first; the mount
 * code then resolves every target inside the root with RESOLVE_IN_ROOT). */
static bool path_has_dotdot(const char *p) {
        for (const char *s = p; (s = strstr(s, "..")); s += 2)
                if ((s == p || s[-1] == '/') && (s[2] == 0 || s[2] == '/'))
                        return true;
        return false;
}

static int parse_mount(json_t *e, size_t i, const char *bundle, oci_mount *m, nook_error *err) {
        const char *src = NULL;
        if (!json_is_object(e))
                return nook_err_set(err, NOOK_E_INVALID, "mounts[%zu] must be an object", i);
        if (json_get_string(e, "destination", true, &m->destination, err) < 0 ||
                json_get_string(e, "type", false, &m->type, err) < 0 ||
                json_get_string(e, "source", false, &src, err) < 0 ||
                oci_mount_options(json_object_get(e, "options"), m, err) < 0)
                return nook_err_wrap(err, "mounts[%zu]", i);
        if (m->destination[0] != '/' || path_has_dotdot(m->destination) ||
                strlen(m->destination) >= PATH_MAX / 2)
                return nook_err_set(err, NOOK_E_INVALID,
                        "mounts[%zu].destination '%s' must be an absolute path inside the container, without '..'",
                        i, m->destination);
        if (m->type && streq(m->type, "bind"))
                m->bind = true;
        if (!m->type && !m->bind)
                return nook_err_set(err, NOOK_E_INVALID,
                        "mounts[%zu] ('%s') has neither a type nor a bind option", i, m->destination);
        if (!src)
                src = m->type ? m->type : "none";
        if (m->bind && src[0] != '/')
                m->source = strprintf("%s/%s", bundle, src);
        else
                m->source = strdup(src);
        if (!m->source)
                return nook_err_oom(err);
        if (m->bind && access(m->source, F_OK) < 0)
                return nook_err_errno(
                        err, NOOK_E_NOT_FOUND, "mounts[%zu]: bind source '%s' does not exist", i, m->source);
        return 0;
}

static int parse_mounts(oci_spec *s, nook_error *err) {
        json_t *arr = json_object_get(s->json, "mounts"), *e;
        size_t i;
        if (!arr || json_is_null(arr))
                return 0;
        if (!json_is_array(arr))
                return nook_err_set(err, NOOK_E_INVALID, "'mounts' must be an array");
        if (json_array_size(arr) > 1024)
                return nook_err_set(err, NOOK_E_INVALID, "'mounts' has %zu entries, more than 1024",
                        json_array_size(arr));
        s->mounts = calloc(json_array_size(arr) + 1, sizeof(oci_mount));
        if (!s->mounts)
                return nook_err_oom(err);
        json_array_foreach(arr, i, e) {
                int r = parse_mount(e, i, s->bundle, &s->mounts[i], err);
                s->n_mounts = i + 1;
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_namespaces(oci_spec *s, json_t *linux_, nook_error *err) {
        json_t *arr = json_object_get(linux_, "namespaces"), *e;
        size_t i;
        if (!arr || json_is_null(arr))
                return 0;
        if (!json_is_array(arr))
                return nook_err_set(err, NOOK_E_INVALID, "linux.namespaces must be an array");
        json_array_foreach(arr, i, e) {
                const char *type = NULL, *path = NULL;
                if (!json_is_object(e) || json_get_string(e, "type", true, &type, err) < 0 ||
                        json_get_string(e, "path", false, &path, err) < 0)
                        return json_is_object(e) ? nook_err_wrap(err, "linux.namespaces[%zu]", i)
                                                 : nook_err_set(err, NOOK_E_INVALID,
                                                           "linux.namespaces[%zu] must be an object", i);
                int flag = oci_ns_flag(type);
                if (!flag)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.namespaces[%zu]: unknown type '%s' (pid, network, mount, ipc, uts, user, cgroup, time)",
                                i, type);
                if (oci_spec_ns(s, flag))
                        return nook_err_set(
                                err, NOOK_E_INVALID, "linux.namespaces: '%s' is given twice", type);
                if (path && (path[0] != '/' || access(path, F_OK) < 0))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.namespaces[%zu]: path '%s' of the %s namespace to join does not exist",
                                i, path, type);
                if (isempty(path))
                        path = NULL;
                s->ns[s->n_ns++] = (oci_ns){ .type = flag, .path = path };
        }
        return 0;
}

static int parse_idmaps(json_t *linux_, const char *field, oci_idmap *maps, size_t *n, nook_error *err) {
        json_t *arr = json_object_get(linux_, field), *e;
        size_t i;
        if (!arr || json_is_null(arr))
                return 0;
        if (!json_is_array(arr) || json_array_size(arr) > OCI_MAX_IDMAPS)
                return nook_err_set(err, NOOK_E_INVALID, "linux.%s must be an array of at most %d maps",
                        field, OCI_MAX_IDMAPS);
        json_array_foreach(arr, i, e) {
                oci_idmap m = { 0 };
                if (!json_is_object(e) || get_u32(e, "containerID", true, &m.container, err) < 0 ||
                        get_u32(e, "hostID", true, &m.host, err) < 0 ||
                        get_u32(e, "size", true, &m.size, err) < 0)
                        return nook_err_wrap(err, "linux.%s[%zu]", field, i);
                if (m.size == 0 || (uint64_t)m.container + m.size > UINT32_MAX ||
                        (uint64_t)m.host + m.size > UINT32_MAX)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.%s[%zu]: size %u is zero or runs past the last id", field, i, m.size);
                maps[(*n)++] = m;
        }
        return 0;
}

static int parse_resources(oci_spec *s, json_t *res, nook_error *err) {
        json_t *mem, *cpu, *pids;
        oci_resources *r = &s->resources;
        bool has = false;
        if (!res || json_is_null(res))
                return 0;
        if (!json_is_object(res))
                return nook_err_set(err, NOOK_E_INVALID, "linux.resources must be an object");
        if ((mem = json_object_get(res, "memory")) && json_is_object(mem)) {
                int64_t sw = 0;
                if (get_int64(mem, "limit", &r->has_memory, &r->memory, err) < 0 ||
                        get_int64(mem, "swap", &r->has_swap, &r->swap, err) < 0 ||
                        get_int64(mem, "reservation", &r->has_reservation, &r->reservation, err) < 0 ||
                        get_int64(mem, "swappiness", &r->has_swappiness, &sw, err) < 0 ||
                        json_get_bool(mem, "disableOOMKiller", false, &r->disable_oom_killer, err) < 0)
                        return nook_err_wrap(err, "linux.resources.memory");
                if (r->has_swappiness && (sw < 0 || sw > 100))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.resources.memory.swappiness %lld is outside 0..100", (long long)sw);
                r->swappiness = (uint64_t)sw;
                /* 0 leaves a limit unset, as runc does (libcontainer/cgroups/fs) */
                if (r->has_memory && r->memory == 0)
                        r->has_memory = false;
                if (r->has_swap && r->swap == 0)
                        r->has_swap = false;
                if (r->has_memory && r->memory > 0 && r->memory < 65536)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.resources.memory.limit %lld bytes is too small (64 KiB at least)",
                                (long long)r->memory);
        }
        if ((cpu = json_object_get(res, "cpu")) && json_is_object(cpu)) {
                if (get_int64(cpu, "quota", &r->has_cpu_quota, &r->cpu_quota, err) < 0 ||
                        json_get_uint64(cpu, "period", false, &r->cpu_period, err) < 0 ||
                        json_get_uint64(cpu, "shares", false, &r->cpu_shares, err) < 0 ||
                        json_get_string(cpu, "cpus", false, &r->cpuset_cpus, err) < 0 ||
                        json_get_string(cpu, "mems", false, &r->cpuset_mems, err) < 0)
                        return nook_err_wrap(err, "linux.resources.cpu");
                r->has_cpu_quota = r->has_cpu_quota && r->cpu_quota != 0;
                r->has_cpu_period = r->cpu_period != 0;
                r->has_cpu_shares = r->cpu_shares != 0;
                r->has_cpus = !isempty(r->cpuset_cpus);
                if (r->has_cpu_period && (r->cpu_period < 1000 || r->cpu_period > 1000000))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.resources.cpu.period %llu is outside 1000..1000000 microseconds",
                                (unsigned long long)r->cpu_period);
                if (r->has_cpu_quota && r->cpu_quota > 0 && r->cpu_quota < 1000)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.resources.cpu.quota %lld is below 1000 microseconds",
                                (long long)r->cpu_quota);
        }
        if ((pids = json_object_get(res, "pids")) && json_is_object(pids) &&
                get_int64(pids, "limit", &has, &r->pids, err) < 0)
                return nook_err_wrap(err, "linux.resources.pids");
        r->has_pids = has && r->pids != 0;
        s->device_rules = json_object_get(res, "devices");
        return 0;
}

static int parse_devices(oci_spec *s, json_t *linux_, nook_error *err) {
        json_t *arr = json_object_get(linux_, "devices"), *e;
        size_t i;
        if (!arr || json_is_null(arr))
                return 0;
        if (!json_is_array(arr) || json_array_size(arr) > 1024)
                return nook_err_set(
                        err, NOOK_E_INVALID, "linux.devices must be an array of at most 1024 devices");
        s->devices = calloc(json_array_size(arr) + 1, sizeof(oci_device));
        if (!s->devices)
                return nook_err_oom(err);
        json_array_foreach(arr, i, e) {
                oci_device *d = &s->devices[s->n_devices];
                const char *type = NULL;
                bool hm = false;
                int64_t mode = 0666, uid = 0, gid = 0;
                if (!json_is_object(e) || json_get_string(e, "path", true, &d->path, err) < 0 ||
                        json_get_string(e, "type", true, &type, err) < 0 ||
                        get_int64(e, "major", &hm, &d->major, err) < 0 ||
                        get_int64(e, "minor", &hm, &d->minor, err) < 0 ||
                        get_int64(e, "fileMode", &hm, &mode, err) < 0 ||
                        get_int64(e, "uid", &d->has_uid, &uid, err) < 0 ||
                        get_int64(e, "gid", &d->has_gid, &gid, err) < 0)
                        return nook_err_wrap(err, "linux.devices[%zu]", i);
                if (d->path[0] != '/' || path_has_dotdot(d->path) || !startswith(d->path, "/dev/"))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.devices[%zu]: path '%s' must be an absolute path under /dev without '..'",
                                i, d->path);
                if (strlen(type) != 1 || !strchr("cbup", type[0]))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.devices[%zu]: type '%s' is not c, b, u or p", i, type);
                d->type = type[0];
                d->mode = (mode_t)(mode & 07777);
                d->uid = (uid_t)uid;
                d->gid = (gid_t)gid;
                s->n_devices++;
        }
        return 0;
}

static int parse_linux(oci_spec *s, nook_error *err) {
        json_t *linux_ = json_object_get(s->json, "linux");
        const char *prop = NULL;
        int r;
        if (!linux_ || json_is_null(linux_))
                return 0;
        if (!json_is_object(linux_))
                return nook_err_set(err, NOOK_E_INVALID, "'linux' must be an object");
        r = parse_namespaces(s, linux_, err);
        if (r < 0)
                return r;
        r = parse_idmaps(linux_, "uidMappings", s->uid_maps, &s->n_uid_maps, err);
        if (r < 0)
                return r;
        r = parse_idmaps(linux_, "gidMappings", s->gid_maps, &s->n_gid_maps, err);
        if (r < 0)
                return r;
        if (json_get_string(linux_, "cgroupsPath", false, &s->cgroups_path, err) < 0 ||
                json_get_string_array(linux_, "maskedPaths", false, &s->masked_paths, err) < 0 ||
                json_get_string_array(linux_, "readonlyPaths", false, &s->readonly_paths, err) < 0 ||
                json_get_string_map(linux_, "sysctl", false, &s->sysctl, err) < 0 ||
                json_get_string(linux_, "rootfsPropagation", false, &prop, err) < 0)
                return nook_err_wrap(err, "linux");
        if (s->cgroups_path && (path_has_dotdot(s->cgroups_path) || strlen(s->cgroups_path) > 1024))
                return nook_err_set(err, NOOK_E_INVALID,
                        "linux.cgroupsPath '%s' must not contain '..' segments (and at most 1024 bytes)",
                        s->cgroups_path);
        if (prop && !(s->rootfs_propagation = propagation_from(prop)))
                return nook_err_set(
                        err, NOOK_E_INVALID, "linux.rootfsPropagation '%s' is not a propagation mode", prop);
        STRV_FOREACH (p, s->masked_paths)
                if ((*p)[0] != '/' || path_has_dotdot(*p))
                        return nook_err_set(
                                err, NOOK_E_INVALID, "linux.maskedPaths: '%s' is not an absolute path", *p);
        STRV_FOREACH (p, s->readonly_paths)
                if ((*p)[0] != '/' || path_has_dotdot(*p))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "linux.readonlyPaths: '%s' is not an absolute path", *p);
        STRV_FOREACH (p, s->sysctl)
                if (strstr(*p, "..") || strchr(*p, '/') > strchr(*p, '='))
                        return nook_err_set(err, NOOK_E_INVALID, "linux.sysctl: bad key in '%s'", *p);
        s->seccomp = json_object_get(linux_, "seccomp");
        if (json_is_null(s->seccomp))
                s->seccomp = NULL;
        if (s->seccomp && !json_is_object(s->seccomp))
                return nook_err_set(err, NOOK_E_INVALID, "linux.seccomp must be an object");
        r = parse_resources(s, json_object_get(linux_, "resources"), err);
        if (r < 0)
                return r;
        return parse_devices(s, linux_, err);
}

static int parse_root(oci_spec *s, nook_error *err) {
        json_t *root = json_object_get(s->json, "root");
        const char *path = NULL;
        struct stat st;
        if (!root || !json_is_object(root))
                return nook_err_set(err, NOOK_E_INVALID,
                        "config.json has no 'root' object: give \"root\": {\"path\": \"rootfs\"}");
        if (json_get_string(root, "path", true, &path, err) < 0 ||
                json_get_bool(root, "readonly", false, &s->root_readonly, err) < 0)
                return nook_err_wrap(err, "root");
        s->root = path[0] == '/' ? strdup(path) : strprintf("%s/%s", s->bundle, path);
        if (!s->root)
                return nook_err_oom(err);
        if (stat(s->root, &st) < 0)
                return nook_err_errno(err, NOOK_E_NOT_FOUND, "root.path '%s' does not exist", path);
        if (!S_ISDIR(st.st_mode))
                return nook_err_set(err, NOOK_E_INVALID, "root.path '%s' is not a directory", path);
        return 0;
}

static int read_config(const char *bundle, json_t **ret, nook_error *err) {
        char path[PATH_MAX];
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        (void)snprintf(path, sizeof(path), "%s/config.json", bundle);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return nook_err_errno(
                        err, NOOK_E_NOT_FOUND, "Cannot open '%s' (is --bundle the right folder?)", path);
        int r = fd_read_to_end(fd, CONFIG_MAX_BYTES, &text, &len, err);
        if (r < 0)
                return nook_err_wrap(err, "reading '%s'", path);
        r = json_parse_object(text, len, ret, err);
        if (r < 0)
                return nook_err_wrap(err, "parsing '%s'", path);
        return 0;
}

int oci_spec_from_json(json_t *j, const char *bundle, oci_spec **ret, nook_error *err) {
        _cleanup_(oci_spec_freep) oci_spec *s = calloc(1, sizeof(*s));
        const char *ver = NULL;
        json_t *proc;
        int r;
        if (!s) {
                json_decref(j);
                return nook_err_oom(err);
        }
        s->json = j;
        s->bundle = strdup(bundle);
        if (!s->bundle)
                return nook_err_oom(err);
        if (json_get_string(s->json, "ociVersion", true, &ver, err) < 0)
                return nook_err_wrap(err, "config.json");
        if (!startswith(ver, "1."))
                return nook_err_set(err, NOOK_E_INVALID, "config.json: ociVersion '%s' is not 1.x", ver);
        r = parse_root(s, err);
        if (r < 0)
                return r;
        if (json_get_string(s->json, "hostname", false, &s->hostname, err) < 0)
                return nook_err_wrap(err, "config.json");
        if (s->hostname && strlen(s->hostname) > 64)
                return nook_err_set(err, NOOK_E_INVALID, "hostname is longer than 64 bytes");
        /* "process" may be left out at create (runtime-spec); start then refuses */
        proc = json_object_get(s->json, "process");
        s->has_process = proc && !json_is_null(proc);
        r = s->has_process ? oci_process_parse(proc, &s->process, err) : 0;
        if (r < 0)
                return r;
        r = parse_mounts(s, err);
        if (r < 0)
                return r;
        r = parse_linux(s, err);
        if (r < 0)
                return r;
        s->hooks = json_object_get(s->json, "hooks");
        if (s->hooks && !json_is_object(s->hooks))
                return nook_err_set(err, NOOK_E_INVALID, "'hooks' must be an object");
        s->annotations = json_object_get(s->json, "annotations");
        if (s->annotations && !json_is_object(s->annotations))
                return nook_err_set(err, NOOK_E_INVALID, "'annotations' must be an object of strings");
        *ret = TAKE_PTR(s);
        return 0;
}

int oci_spec_load(const char *bundle, oci_spec **ret, nook_error *err) {
        _cleanup_free_ char *abs = realpath(bundle, NULL);
        json_t *j = NULL;
        if (!abs)
                return nook_err_errno(err, NOOK_E_NOT_FOUND, "Bundle folder '%s' does not exist", bundle);
        int r = read_config(abs, &j, err);
        if (r < 0)
                return r;
        return oci_spec_from_json(j, abs, ret, err);
}

const char *oci_spec_annotation(const oci_spec *s, const char *key) {
        json_t *v = s->annotations ? json_object_get(s->annotations, key) : NULL;
        return json_is_string(v) ? json_string_value(v) : NULL;
}

oci_spec *oci_spec_free(oci_spec *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_mounts; i++) {
                free(s->mounts[i].source);
                free(s->mounts[i].data);
        }
        free(s->mounts);
        free(s->devices);
        oci_process_done(&s->process);
        strv_free(s->masked_paths);
        strv_free(s->readonly_paths);
        strv_free(s->sysctl);
        free(s->root);
        free(s->bundle);
        json_decref(s->json);
        free(s);
        return NULL;
}
