/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nook.h"
#include "isolate/cgroup.h"
#include "oci/state.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/json.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/proc.h"
#include "util/str.h"

#define OCI_VERSION "1.0.2"

static const char *const status_names[_OCI_STATUS_MAX] = { "creating", "created", "running", "stopped",
        "paused" };

const char *oci_status_to_string(oci_status s) {
        return s >= 0 && s < _OCI_STATUS_MAX ? status_names[s] : NULL;
}

int oci_id_check(const char *id, nook_error *err) {
        size_t n = strlen(id);
        if (n == 0 || n > OCI_ID_MAX)
                return nook_err_set(
                        err, NOOK_E_INVALID, "Container id must be 1 to %d bytes long", OCI_ID_MAX);
        if (streq(id, ".") || streq(id, ".."))
                return nook_err_set(err, NOOK_E_INVALID, "Container id '%s' is not allowed", id);
        for (const char *c = id; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                            strchr("_.+-", *c)))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid container id '%s': use letters, digits and _ . + - only", id);
        return 0;
}

int oci_root_default(char **ret, nook_error *err) {
        const char *xdg = secure_getenv("XDG_RUNTIME_DIR");
        char *p;
        if (geteuid() == 0)
                p = strdup("/run/nook-oci");
        else if (!isempty(xdg))
                p = strprintf("%s/nook-oci", xdg);
        else
                return nook_err_set(err, NOOK_E_INVALID,
                        "No --root given and XDG_RUNTIME_DIR is not set: pass --root DIR");
        if (!p)
                return nook_err_oom(err);
        *ret = p;
        return 0;
}

static int dup_field(json_t *j, const char *field, char **ret, nook_error *err) {
        const char *v = NULL;
        int r = json_get_string(j, field, false, &v, err);
        if (r <= 0)
                return r;
        *ret = strdup(v);
        return *ret ? 0 : nook_err_oom(err);
}

/* Reads DIR/NAME, a JSON object: the twin of save_json.  NOOK_E_NOT_FOUND when it is not there. */
static int load_json(const char *dir, const char *name, json_t **ret, nook_error *err) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        char path[PATH_MAX];
        (void)snprintf(path, sizeof(path), "%s/%s", dir, name);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "No '%s'", path);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s'", path);
        int r = fd_read_to_end(fd, (size_t)JSON_MAX_BYTES, &text, &len, err);
        return r < 0 ? r : json_parse_object(text, len, ret, err);
}

int oci_state_load(const char *root, const char *id, oci_state **ret, nook_error *err) {
        _cleanup_(oci_state_freep) oci_state *st = calloc(1, sizeof(*st));
        uint64_t pid = 0;
        int r = oci_id_check(id, err);
        if (r < 0)
                return r;
        if (!st)
                return nook_err_oom(err);
        st->id = strdup(id);
        st->dir = strprintf("%s/%s", root, id);
        if (!st->id || !st->dir)
                return nook_err_oom(err);
        r = load_json(st->dir, "state.json", &st->json, err);
        if (r == -NOOK_E_NOT_FOUND)
                return nook_err_set(err, NOOK_E_NOT_FOUND, "container \"%s\" does not exist", id);
        if (r < 0)
                return nook_err_wrap(err, "state of container '%s'", id);
        if (json_get_uint64(st->json, "pid", true, &pid, err) < 0 ||
                json_get_uint64(st->json, "start_time", false, &st->start_time, err) < 0 ||
                dup_field(st->json, "bundle", &st->bundle, err) < 0 ||
                dup_field(st->json, "rootfs", &st->rootfs, err) < 0 ||
                dup_field(st->json, "cgroup_path", &st->cgroup_path, err) < 0 ||
                dup_field(st->json, "created", &st->created, err) < 0)
                return nook_err_wrap(err, "state of container '%s'", id);
        st->pid = (pid_t)pid;
        (void)json_get_bool(st->json, "no_process", false, &st->no_process, err);
        json_t *a = json_object_get(st->json, "annotations");
        st->annotations = json_is_object(a) ? json_incref(a) : NULL;
        *ret = TAKE_PTR(st);
        return 0;
}

/* Writes j (consumed) to DIR/NAME atomically: a temporary file renamed over it. */
static int save_json(const char *dir, const char *name, json_t *j, nook_error *err) {
        char tmp[PATH_MAX], path[PATH_MAX];
        if (!j)
                return nook_err_oom(err);
        (void)snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
        (void)snprintf(path, sizeof(path), "%s/%s", dir, name);
        int r = json_dump_file(j, tmp, JSON_COMPACT);
        json_decref(j);
        if (r < 0 || rename(tmp, path) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot write '%s'", path);
        return 0;
}

int oci_state_save(const oci_state *st, nook_error *err) {
        json_t *j = json_pack("{s:s, s:I, s:I, s:s, s:s?, s:s?, s:s, s:O?, s:b}", "id", st->id, "pid",
                (json_int_t)st->pid, "start_time", (json_int_t)st->start_time, "bundle",
                st->bundle ? st->bundle : "", "rootfs", st->rootfs, "cgroup_path", st->cgroup_path,
                "created", st->created ? st->created : "", "annotations", st->annotations, "no_process",
                st->no_process);
        return save_json(st->dir, "state.json", j, err);
}

int oci_create_note_save(const char *dir, const char *cgroup_path, nook_error *err) {
        pid_t self = getpid();
        json_t *j = json_pack("{s:I, s:I, s:s}", "pid", (json_int_t)self, "start_time",
                (json_int_t)proc_start_time(self), "cgroup_path", cgroup_path);
        return save_json(dir, "create.json", j, err);
}

int oci_create_note_load(const char *dir, oci_create_note *ret, nook_error *err) {
        _cleanup_(json_decrefp) json_t *j = NULL;
        uint64_t pid = 0, start = 0;
        int r = load_json(dir, "create.json", &j, err);
        if (r == -NOOK_E_NOT_FOUND)
                return r;
        if (r >= 0 &&
                (json_get_uint64(j, "pid", true, &pid, err) < 0 ||
                        json_get_uint64(j, "start_time", true, &start, err) < 0))
                r = -NOOK_E_INVALID;
        oci_create_note n = { .pid = (pid_t)pid, .start_time = start };
        if (r >= 0)
                r = dup_field(j, "cgroup_path", &n.cgroup_path, err);
        if (r >= 0 && !n.cgroup_path)
                r = nook_err_set(err, NOOK_E_INVALID, "field 'cgroup_path' is missing");
        if (r < 0)
                return nook_err_wrap(err, "reading '%s/create.json'", dir);
        *ret = n;
        return 0;
}

void oci_create_note_remove(const char *dir) {
        char path[PATH_MAX];
        (void)snprintf(path, sizeof(path), "%s/create.json", dir);
        (void)unlink(path);
}

void oci_create_note_done(oci_create_note *n) {
        free(n->cgroup_path);
        n->cgroup_path = NULL;
}

oci_state *oci_state_free(oci_state *st) {
        if (!st)
                return NULL;
        free(st->id);
        free(st->dir);
        free(st->bundle);
        free(st->rootfs);
        free(st->cgroup_path);
        free(st->created);
        json_decref(st->annotations);
        json_decref(st->json);
        free(st);
        return NULL;
}

oci_status oci_state_status(const oci_state *st) {
        char fifo[PATH_MAX];
        if (st->pid <= 0)
                return OCI_STATUS_CREATING;
        if (!proc_alive(st->pid, st->start_time))
                return OCI_STATUS_STOPPED;
        (void)snprintf(fifo, sizeof(fifo), "%s/exec.fifo", st->dir);
        if (access(fifo, F_OK) == 0)
                return OCI_STATUS_CREATED;
        if (st->cgroup_path) {
                iso_cgroup *cg = NULL;
                nook_error ignore;
                if (iso_cgroup_open_path(st->cgroup_path, &cg, &ignore) == 0) {
                        bool frozen = iso_cgroup_frozen(cg) == 1; /* FROZEN, not FREEZING */
                        iso_cgroup_free(cg);
                        if (frozen)
                                return OCI_STATUS_PAUSED;
                }
        }
        return OCI_STATUS_RUNNING;
}

json_t *oci_state_to_json(const oci_state *st) {
        oci_status s = oci_state_status(st);
        json_t *a = json_is_object(st->annotations) ? json_incref(st->annotations) : json_object();
        return json_pack("{s:s, s:s, s:s, s:I, s:s, s:o, s:s?}", "ociVersion", OCI_VERSION, "id", st->id,
                "status", oci_status_to_string(s), "pid",
                (json_int_t)(s == OCI_STATUS_STOPPED ? 0 : st->pid), "bundle", st->bundle ? st->bundle : "",
                "annotations", a, "created", st->created);
}

static json_t *json_decref_null(json_t *j) {
        json_decref(j);
        return NULL;
}

json_t *oci_state_to_runc_json(const oci_state *st, const char *owner) {
        oci_status s = oci_state_status(st);
        json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "ociVersion", OCI_VERSION, "id", st->id,
                "pid", (json_int_t)(s == OCI_STATUS_STOPPED ? 0 : st->pid), "status",
                oci_status_to_string(s), "bundle", st->bundle ? st->bundle : "", "rootfs",
                st->rootfs ? st->rootfs : "", "created", st->created ? st->created : "");
        if (j && json_object_size(st->annotations) > 0 &&
                json_object_set(j, "annotations", st->annotations) < 0)
                j = json_decref_null(j);
        if (j && json_object_set_new(j, "owner", json_string(owner ? owner : "")) < 0)
                j = json_decref_null(j);
        return j;
}

int oci_state_remove(const char *dir, nook_error *err) {
        int r = path_rm_rf(dir, err);
        if (r < 0 && r != -NOOK_E_NOT_FOUND)
                return r;
        return 0;
}

int oci_pid_file_write(const char *path, pid_t pid, nook_error *err) {
        char tmp[PATH_MAX], v[32];
        (void)snprintf(tmp, sizeof(tmp), "%s.nook-tmp", path);
        (void)snprintf(v, sizeof(v), "%d", (int)pid);
        _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || fd_write_all(fd, v, strlen(v)) < 0 || rename(tmp, path) < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot write --pid-file '%s'", path);
        return 0;
}
