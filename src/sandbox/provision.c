/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "sandbox/ctx.h"
#include "sandbox/state.h"
#include "sandbox/provision.h"
#include "sandbox/volumes.h"
#include "store/store.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/name.h"
#include "util/path.h"
#include "util/str.h"
#include "workspace/ws.h"

#define SCRIPTS_GUEST "/.nook/scripts"

void sb_provision_done(sup_config *c) {
        for (size_t i = 0; i < c->n_mounts; i++) {
                free(c->mounts[i].type);
                free(c->mounts[i].source);
                free(c->mounts[i].target);
        }
        free(c->mounts);
        c->mounts = NULL;
        c->n_mounts = 0;
}

int sb_volume_dir(nook *n, const char *name, bool create, char **ret, nook_error *err) {
        int r = name_validate("volume", name, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *parent = strprintf("%s/volumes", n->home),
                            *dir = strprintf("%s/volumes/%s", n->home, name);
        if (!parent || !dir)
                return nook_err_oom(err);
        if (create) {
                if ((r = path_mkdir_p(parent, 0711, err)) < 0)
                        return r;
                if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot create the volume '%s'", dir);
                /* the sandbox's root owns what it writes there */
                if (lchown(dir, n->ws_uid, n->ws_gid) < 0 && errno != EPERM)
                        return nook_err_errno(
                                err, NOOK_E_IO, "Cannot give the volume '%s' to the sandbox's root", dir);
        } else if (access(dir, F_OK) < 0)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No volume '%s'", name);
        *ret = TAKE_PTR(dir);
        return 0;
}

static int add_mount(sup_config *c, const char *type, const char *source, const char *target, bool ro,
        uint64_t size, nook_error *err) {
        sup_mount *nm = realloc(c->mounts, sizeof(sup_mount) * (c->n_mounts + 1));
        if (!nm)
                return nook_err_oom(err);
        c->mounts = nm;
        sup_mount *m = &c->mounts[c->n_mounts];
        *m = (sup_mount){ .type = strdup(type),
                .source = source ? strdup(source) : NULL,
                .target = strdup(target),
                .readonly = ro,
                .size_mib = size };
        c->n_mounts++;
        if (!m->type || !m->target || (source && !m->source))
                return nook_err_oom(err);
        return 0;
}

static int provision_volumes(nook *n, const sb_spec *spec, sup_config *c, nook_error *err) {
        sb_volume *v = NULL;
        size_t nv = 0;
        json_t *holder = json_object();
        if (!holder)
                return nook_err_oom(err);
        if (spec->volumes)
                json_object_set(holder, "volumes", spec->volumes);
        int r = sb_volumes_parse(holder, n->home, &v, &nv, err);
        json_decref(holder);
        for (size_t i = 0; r >= 0 && i < nv; i++) {
                _cleanup_free_ char *dir = NULL;
                switch (v[i].type) {
                case SB_VOLUME_BIND:
                        r = add_mount(c, "bind", v[i].source, v[i].target, v[i].readonly, 0, err);
                        break;
                case SB_VOLUME_NAMED:
                        if ((r = sb_volume_dir(n, v[i].source, true, &dir, err)) >= 0)
                                r = add_mount(c, "bind", dir, v[i].target, v[i].readonly, 0, err);
                        break;
                case SB_VOLUME_TMPFS:
                        r = add_mount(c, "tmpfs", NULL, v[i].target, v[i].readonly, v[i].size_mib, err);
                        break;
                case _SB_VOLUME_TYPE_MAX:
                case _SB_VOLUME_TYPE_INVALID:
                default:
                        r = nook_err_set(err, NOOK_E_INTERNAL, "Unknown volume type");
                }
        }
        sb_volumes_free(v, nv);
        return r;
}

/* Scripts live in <state>/scripts, bound read-only at /.nook/scripts. */
static int provision_scripts(
        nook *n, const sb_spec *spec, const char *sdir, sup_config *c, char ***env, nook_error *err) {
        const char *k;
        json_t *v;
        int r;
        if (!spec->scripts || json_object_size(spec->scripts) == 0)
                return 0;
        _cleanup_free_ char *dir = strprintf("%s/scripts", sdir);
        if (!dir)
                return nook_err_oom(err);
        if ((r = path_rm_rf(dir, err)) < 0)
                return r;
        if (mkdir(dir, 0755) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s'", dir);
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", dir);
        json_object_foreach(spec->scripts, k, v) {
                _cleanup_close_ int fd =
                        openat(dfd, k, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0755);
                if (fd < 0)
                        return nook_err_errno(err, NOOK_E_IO, "Cannot write script '%s'", k);
                r = fd_write_all(fd, json_string_value(v), json_string_length(v));
                if (r < 0)
                        return nook_err_errnum(err, NOOK_E_IO, -r, "Cannot write script '%s'", k);
                (void)fchmod(fd, 0755);
        }
        (void)n;
        const char *path = NULL;
        int i = strv_env_find(*env, "PATH", 4);
        if (i >= 0)
                path = (*env)[i] + 5;
        _cleanup_free_ char *np = strprintf("PATH=" SCRIPTS_GUEST ":%s",
                path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        if (!np || strv_env_set(env, np) < 0)
                return nook_err_oom(err);
        return add_mount(c, "bind", dir, SCRIPTS_GUEST, true, 0, err);
}

/* A login shell (/bin/sh -lc) re-reads /etc/profile, which resets PATH in most images; the
 * profile.d snippet puts the scripts back in front. */
static const char scripts_profile[] = "case \":$PATH:\" in *:" SCRIPTS_GUEST
                                      ":*) ;; *) PATH=\"" SCRIPTS_GUEST ":$PATH\"; export PATH ;; esac\n";

static int decode_setup(json_t *v, char **ret, size_t *ret_len, mode_t *ret_mode, nook_error *err) {
        *ret_mode = 0644;
        if (json_is_string(v)) {
                *ret = strndup(json_string_value(v), json_string_length(v));
                *ret_len = json_string_length(v);
                return *ret ? 0 : nook_err_oom(err);
        }
        json_t *m = json_object_get(v, "mode");
        if (json_is_integer(m) && json_integer_value(m) >= 0 && json_integer_value(m) <= 07777)
                *ret_mode = (mode_t)json_integer_value(m) & 0777;
        json_t *content = json_object_get(v, "content");
        if (json_is_string(content)) {
                *ret = strndup(json_string_value(content), json_string_length(content));
                *ret_len = json_string_length(content);
                return *ret ? 0 : nook_err_oom(err);
        }
        /* base64: jansson has no decoder; a small one keeps bytes exact */
        const char *b = json_string_value(json_object_get(v, "base64"));
        size_t bl = b ? strlen(b) : 0;
        char *out = malloc(bl / 4 * 3 + 3);
        if (!out)
                return nook_err_oom(err);
        size_t o = 0;
        unsigned acc = 0;
        int bits = 0;
        for (size_t i = 0; i < bl; i++) {
                char ch = b[i];
                int val = ch >= 'A' && ch <= 'Z' ? ch - 'A'
                        : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
                        : ch >= '0' && ch <= '9' ? ch - '0' + 52
                        : ch == '+'              ? 62
                        : ch == '/'              ? 63
                                                 : -1;
                if (ch == '=' || ch == '\n' || ch == '\r')
                        continue;
                if (val < 0) {
                        free(out);
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid spec: a setup file's base64 has a bad character");
                }
                acc = (acc << 6) | (unsigned)val;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[o++] = (char)((acc >> bits) & 0xff);
                }
        }
        *ret = out;
        *ret_len = o;
        return 0;
}

/* Files under /workspace go into the workspace (a host write); the rest into the writable
 * layer before boot, so they are there before the first exec.  Both through the ws layer's
 * resolver: a sticky sandbox's upper layer is the sandbox's to plant symlinks in. */
static int provision_setup_files(nook *n, const sb_spec *spec, const char *wsdir, const char *upper,
        const sup_config *c, nook_error *err) {
        const char *k;
        json_t *v;
        int r = 0;
        bool scripts = spec->scripts && json_object_size(spec->scripts) > 0;
        if ((!spec->setup_files || json_object_size(spec->setup_files) == 0) && !scripts)
                return 0;
        _cleanup_(ws_freep) ws *wsw = NULL;
        _cleanup_(ws_freep) ws *up = NULL;
        r = ws_open(wsdir, true, n->ws_uid, n->ws_gid, &wsw, err);
        if (r < 0)
                return r;
        /* the writable layer is the sandbox root's: its own range, or the shared one */
        uid_t ruid = c->id_base ? c->id_base : n->img_uid;
        gid_t rgid = c->id_base ? c->id_base : n->img_gid;
        if (upper) {
                r = ws_open(upper, false, ruid, rgid, &up, err);
                if (r < 0)
                        return r;
        }
        if (up && scripts) {
                r = ws_write(up, "etc/profile.d/nook-scripts.sh", scripts_profile, strlen(scripts_profile),
                        0644, 0, err);
                if (r < 0)
                        return r;
        }
        json_object_foreach(spec->setup_files, k, v) {
                _cleanup_free_ char *norm = NULL, *data = NULL;
                size_t len = 0;
                mode_t mode;
                r = sb_guest_path_check("setup file path", k, &norm, err);
                if (r < 0)
                        return r;
                r = decode_setup(v, &data, &len, &mode, err);
                if (r < 0)
                        return r;
                bool in_ws = startswith(norm, "/workspace/");
                if (!in_ws && !up)
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Setup file '%s' is outside /workspace and the sandbox has no writable layer",
                                k);
                r = ws_write(in_ws ? wsw : up, in_ws ? norm : norm + 1, data, len, mode, 0, err);
                if (r < 0)
                        return nook_err_wrap(err, "writing setup file '%s'", k);
        }
        return 0;
}

int sb_provision(nook *n, const sb_spec *spec, const char *sdir, const char *wsdir, const char *upper,
        sup_config *c, char ***env, nook_error *err) {
        int r = provision_volumes(n, spec, c, err);
        if (r >= 0)
                r = provision_scripts(n, spec, sdir, c, env, err);
        if (r >= 0)
                r = provision_setup_files(n, spec, wsdir, upper, c, err);
        if (r < 0)
                sb_provision_done(c);
        return r;
}

/* ---- named volumes: nook volume create | ls | rm ---------------------------------------------- */

int nook_volume_create(nook *n, const char *name, char **ret_path, nook_error *err) {
        char *dir = NULL;
        int r = sb_volume_dir(n, name, true, &dir, err);
        if (r < 0)
                return r;
        if (ret_path)
                *ret_path = dir;
        else
                free(dir);
        return 0;
}

int nook_volume_list(nook *n, char **ret_json, nook_error *err) {
        _cleanup_free_ char *parent = strprintf("%s/volumes", n->home);
        if (!parent)
                return nook_err_oom(err);
        json_t *a = json_array();
        DIR *d = opendir(parent);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                nook_error ignore;
                if (de->d_name[0] == '.' || name_validate("volume", de->d_name, &ignore) < 0)
                        continue;
                _cleanup_free_ char *p = strprintf("%s/%s", parent, de->d_name);
                json_array_append_new(a, json_pack("{s:s, s:s?}", "name", de->d_name, "path", p));
        }
        if (d)
                closedir(d);
        char *t = json_dumps(a, JSON_COMPACT);
        json_decref(a);
        if (!t)
                return nook_err_oom(err);
        *ret_json = t;
        return 0;
}

/* Which running sandbox mounts volume name, if any (its name is copied into who). */
static bool volume_in_use(nook *n, const char *name, char *who, size_t len) {
        store *st;
        sandbox_rec *recs = NULL;
        size_t nrec = 0;
        nook_error ignore;
        bool used = false;
        if (ctx_store(n, &st, &ignore) < 0 || store_sandbox_list(st, NULL, &recs, &nrec, &ignore) < 0)
                return false;
        for (size_t i = 0; i < nrec && !used; i++) {
                if (sb_reconcile_unlocked(n, &recs[i], &ignore) < 0 || !streq(recs[i].state, "running"))
                        continue;
                json_t *spec = json_loads(recs[i].spec_json ? recs[i].spec_json : "{}", 0, NULL), *v;
                size_t j;
                json_array_foreach(json_object_get(spec, "volumes"), j, v) {
                        const char *vn = json_string_value(json_object_get(v, "name"));
                        if (vn && streq(vn, name)) {
                                (void)snprintf(who, len, "%s", recs[i].name);
                                used = true;
                        }
                }
                json_decref(spec);
        }
        sandbox_rec_array_free(recs, nrec);
        return used;
}

int nook_volume_remove(nook *n, const char *name, nook_error *err) {
        _cleanup_free_ char *dir = NULL;
        char who[64];
        int r = sb_volume_dir(n, name, false, &dir, err);
        if (r < 0)
                return r;
        if (volume_in_use(n, name, who, sizeof(who)))
                return nook_err_set(err, NOOK_E_BUSY,
                        "Volume '%s' is in use by running sandbox '%s'; stop it first", name, who);
        return path_rm_rf(dir, err);
}
