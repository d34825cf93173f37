/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "sandbox/rundir.h"
#include "sandbox/volumes.h"
#include "util/error.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/str.h"

#define MAX_VOLUMES 64

static const char *const type_names[_SB_VOLUME_TYPE_MAX] = {
        [SB_VOLUME_BIND] = "bind",
        [SB_VOLUME_TMPFS] = "tmpfs",
        [SB_VOLUME_NAMED] = "volume",
};

const char *sb_volume_type_to_string(sb_volume_type t) {
        return t >= 0 && t < _SB_VOLUME_TYPE_MAX ? type_names[t] : NULL;
}

static sb_volume_type type_from_string(const char *s) {
        for (int i = 0; i < _SB_VOLUME_TYPE_MAX; i++)
                if (s && streq(s, type_names[i]))
                        return (sb_volume_type)i;
        return _SB_VOLUME_TYPE_INVALID;
}

void sb_volumes_free(sb_volume *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(v[i].source);
                free(v[i].target);
        }
        free(v);
}

/* a == b, or b lies below a */
static bool path_within(const char *b, const char *a) {
        size_t n = strlen(a);
        if (streq(a, "/"))
                return true;
        return strncmp(a, b, n) == 0 && (b[n] == 0 || b[n] == '/');
}

int sb_guest_path_check(const char *what, const char *path, char **ret, nook_error *err) {
        static const char *const forbidden[] = { "/proc", "/sys", "/dev" };
        if (!path || path[0] != '/')
                return nook_err_set(err, NOOK_E_INVALID, "Invalid %s '%s': must be an absolute path", what,
                        path ? path : "");
        if (strlen(path) >= PATH_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid %s: longer than %d bytes", what, PATH_MAX - 1);
        _cleanup_free_ char *norm = malloc(strlen(path) + 2);
        if (!norm)
                return nook_err_oom(err);
        size_t n = 0;
        for (const char *p = path; *p;) {
                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                size_t len = strcspn(p, "/");
                if ((len == 2 && p[0] == '.' && p[1] == '.'))
                        return nook_err_set(
                                err, NOOK_E_REFUSED, "Invalid %s '%s': '..' is not allowed", what, path);
                if (!(len == 1 && p[0] == '.')) {
                        norm[n++] = '/';
                        memcpy(norm + n, p, len);
                        n += len;
                }
                p += len;
        }
        norm[n] = 0;
        if (n == 0)
                return nook_err_set(err, NOOK_E_INVALID, "Invalid %s '%s': cannot be '/'", what, path);
        for (size_t i = 0; i < ELEMENTSOF(forbidden); i++)
                if (path_within(norm, forbidden[i]))
                        return nook_err_set(err, NOOK_E_REFUSED, "Invalid %s '%s': not allowed under %s",
                                what, path, forbidden[i]);
        *ret = TAKE_PTR(norm);
        return 0;
}

/* Host paths a sandbox must not see: the runtime's own state, the kernel's interfaces, container
 * runtime sockets, and the usual credential folders. */
static int check_bind_source(const char *real, const char *home, bool allow_sensitive, nook_error *err) {
        static const char *const system_paths[] = { "/proc", "/sys", "/dev", "/var/run/docker.sock",
                "/run/docker.sock", "/run/containerd", "/var/run/containerd", "/run/podman",
                "/var/lib/docker", "/var/lib/containerd", "/etc/shadow", "/etc/gshadow", "/etc/sudoers",
                "/etc/ssh" };
        static const char *const home_dirs[] = { ".ssh", ".aws", ".docker", ".kube", ".gnupg",
                ".config/gcloud", ".azure", ".netrc", ".git-credentials" };
        char realhome[PATH_MAX];
        const char *h = realpath(home, realhome) ? realhome : home;

        if (streq(real, "/"))
                return nook_err_set(err, NOOK_E_REFUSED, "Refusing to mount the host's '/' into a sandbox");
        /* nook's own state: never, not even with the override */
        if (path_within(real, h) || path_within(h, real))
                return nook_err_set(err, NOOK_E_REFUSED,
                        "Refusing to mount '%s': it is or holds nook's state folder '%s'", real, h);
        /* nor its runtime folder (sandbox/rundir.h), the control sockets of its sandboxes, nor a
         * sibling in the folder above (<root>/<key>: the sandboxes of the user's other homes) */
        char realrun[PATH_MAX], rroot[PATH_MAX];
        if (sb_run_root_peek(home, realrun, sizeof(realrun))) {
                memcpy(rroot, realrun, sizeof(rroot));
                char *slash = strrchr(rroot, '/');
                if (slash)
                        *slash = 0; /* "" when realrun is "/x": no sibling check then */
                const char *hit = NULL;
                if (path_within(real, realrun) || path_within(realrun, real))
                        hit = realrun;
                else if (rroot[0] && path_within(real, rroot))
                        hit = rroot;
                if (hit)
                        return nook_err_set(err, NOOK_E_REFUSED,
                                "Refusing to mount '%s': it is or holds nook's runtime folder '%s' (the sandboxes' control sockets)",
                                real, hit);
        }
        if (allow_sensitive)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(system_paths); i++)
                if (path_within(real, system_paths[i]) || path_within(system_paths[i], real))
                        return nook_err_set(err, NOOK_E_REFUSED,
                                "Refusing to mount '%s': it is or holds '%s'; set allowSensitive (--allow-sensitive-volume) if you mean it",
                                real, system_paths[i]);
        const char *user_home = secure_getenv("HOME");
        const char *homes[] = { user_home, "/root", "/home" };
        for (size_t j = 0; j < ELEMENTSOF(homes); j++) {
                if (isempty(homes[j]))
                        continue;
                for (size_t i = 0; i < ELEMENTSOF(home_dirs); i++) {
                        _cleanup_free_ char *p = NULL;
                        if (streq(homes[j], "/home")) {
                                /* any user's credentials under /home/<user>/ */
                                const char *rest = real + 5;
                                if (!path_within(real, "/home") && !path_within("/home", real))
                                        continue;
                                if (streq(real, "/home") || !strchr(rest + 1, '/'))
                                        return nook_err_set(err, NOOK_E_REFUSED,
                                                "Refusing to mount '%s': it holds home folders with credentials; set allowSensitive (--allow-sensitive-volume) if you mean it",
                                                real);
                                const char *slash = strchr(rest + 1, '/');
                                p = strprintf("%.*s/%s", (int)(slash - real), real, home_dirs[i]);
                        } else
                                p = strprintf("%s/%s", homes[j], home_dirs[i]);
                        if (!p)
                                return nook_err_oom(err);
                        if (path_within(real, p) || path_within(p, real))
                                return nook_err_set(err, NOOK_E_REFUSED,
                                        "Refusing to mount '%s': it is or holds the credential folder '%s'; set allowSensitive (--allow-sensitive-volume) if you mean it",
                                        real, p);
                }
        }
        return 0;
}

static const char *get_str2(json_t *o, const char *a, const char *b) {
        const char *s = json_string_value(json_object_get(o, a));
        return s ? s : json_string_value(json_object_get(o, b));
}

static int parse_one(json_t *o, size_t i, const char *home, sb_volume *v, nook_error *err) {
        static const char *const fields[] = { "type", "source", "hostPath", "name", "target",
                "containerPath", "path", "readonly", "readOnly", "sizeMib", "allowSensitive" };
        const char *k;
        json_t *val;
        if (!json_is_object(o))
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: volumes[%zu] must be an object", i);
        json_object_foreach(o, k, val) {
                bool ok = false;
                for (size_t j = 0; j < ELEMENTSOF(fields); j++)
                        ok = ok || streq(k, fields[j]);
                if (!ok)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: volumes[%zu] has an unknown field '%s'", i, k);
        }
        const char *source = get_str2(o, "source", "hostPath");
        const char *name = json_string_value(json_object_get(o, "name"));
        const char *type = json_string_value(json_object_get(o, "type"));
        const char *target = get_str2(o, "target", "containerPath");
        if (!target)
                target = json_string_value(json_object_get(o, "path"));
        v->type = type ? type_from_string(type) : name ? SB_VOLUME_NAMED : SB_VOLUME_BIND;
        if (v->type < 0)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid spec: volumes[%zu].type must be bind, tmpfs or volume, got '%s'", i, type);
        json_t *ro = json_object_get(o, "readonly");
        if (!ro)
                ro = json_object_get(o, "readOnly");
        if (ro && !json_is_boolean(ro))
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid spec: volumes[%zu].readonly must be true or false", i);
        /* read-only unless the user says otherwise: a bind exposes the host */
        v->readonly = ro ? json_is_true(ro) : v->type == SB_VOLUME_BIND;
        int r = sb_guest_path_check("volume target", target, &v->target, err);
        if (r < 0)
                return nook_err_wrap(err, "volumes[%zu]", i);
        if (streq(v->target, "/workspace"))
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid spec: volumes[%zu] cannot replace /workspace", i);
        switch (v->type) {
        case SB_VOLUME_BIND: {
                char real[PATH_MAX];
                struct stat st;
                if (!source || source[0] != '/')
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: volumes[%zu].source must be an absolute host path", i);
                if (!realpath(source, real) || stat(real, &st) < 0)
                        return nook_err_errno(err, NOOK_E_NOT_FOUND,
                                "Invalid spec: volumes[%zu].source '%s' does not exist", i, source);
                r = check_bind_source(real, home, json_is_true(json_object_get(o, "allowSensitive")), err);
                if (r < 0)
                        return r;
                v->source = strdup(real);
                break;
        }
        case SB_VOLUME_NAMED:
                if ((r = name_validate("volume", name ? name : source, err)) < 0)
                        return r;
                v->source = strdup(name ? name : source);
                break;
        case SB_VOLUME_TMPFS: {
                json_t *sz = json_object_get(o, "sizeMib");
                if (sz &&
                        (!json_is_integer(sz) || json_integer_value(sz) < 1 ||
                                json_integer_value(sz) > 1048576))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: volumes[%zu].sizeMib must be 1..1048576", i);
                v->size_mib = sz ? (uint64_t)json_integer_value(sz) : 64;
                return 0;
        }
        case _SB_VOLUME_TYPE_MAX:
        case _SB_VOLUME_TYPE_INVALID:
        default:
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: volumes[%zu]", i);
        }
        return v->source ? 0 : nook_err_oom(err);
}

int sb_volumes_parse(json_t *spec, const char *home, sb_volume **ret, size_t *ret_n, nook_error *err) {
        json_t *a = json_object_get(spec, "volumes"), *o;
        size_t i;
        *ret = NULL;
        *ret_n = 0;
        if (!a || json_is_null(a))
                return 0;
        if (!json_is_array(a))
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: 'volumes' must be an array");
        if (json_array_size(a) > MAX_VOLUMES)
                return nook_err_set(err, NOOK_E_INVALID, "Invalid spec: at most %d volumes", MAX_VOLUMES);
        sb_volume *v = calloc(json_array_size(a) + 1, sizeof(sb_volume));
        if (!v)
                return nook_err_oom(err);
        json_array_foreach(a, i, o) {
                int r = parse_one(o, i, home, &v[i], err);
                for (size_t j = 0; r >= 0 && j < i; j++)
                        if (streq(v[j].target, v[i].target))
                                r = nook_err_set(err, NOOK_E_INVALID, "Invalid spec: two volumes on '%s'",
                                        v[i].target);
                if (r < 0) {
                        sb_volumes_free(v, i + 1);
                        return r;
                }
        }
        *ret = v;
        *ret_n = json_array_size(a);
        return 0;
}

json_t *sb_volumes_to_json(const sb_volume *v, size_t n) {
        json_t *a = json_array();
        for (size_t i = 0; i < n && a; i++) {
                json_t *o = json_pack("{s:s, s:s, s:b}", "type", sb_volume_type_to_string(v[i].type),
                        "target", v[i].target, "readonly", v[i].readonly);
                if (v[i].type == SB_VOLUME_BIND)
                        json_object_set_new(o, "source", json_string(v[i].source));
                else if (v[i].type == SB_VOLUME_NAMED)
                        json_object_set_new(o, "name", json_string(v[i].source));
                else
                        json_object_set_new(o, "sizeMib", json_integer((json_int_t)v[i].size_mib));
                json_array_append_new(a, o);
        }
        return a;
}
