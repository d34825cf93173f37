/* SPDX-License-Identifier: Apache-2.0 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nook.h"
#include "config.h"
#include "sandbox/egress.h"
#include "sandbox/spec_egress.h"
#include "sandbox/state.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/macro.h"
#include "util/path.h"
#include "util/str.h"

#define BUNDLE_MAX ((size_t)8 * 1024 * 1024)
#define STATUS_REPLY_MS 3000
/* In an image the system bundle itself; the built-in host image binds the host's
 * /etc/ssl/certs read-only, and an image may have it as a symlink: there the copy sits beside. */
#define GUEST_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define GUEST_BUNDLE_REL "etc/ssl/certs/ca-certificates.crt" /* in a layer */
#define GUEST_BUNDLE_BESIDE "/etc/ssl/nook-ca-certificates.crt"

char *sb_libexec_find(const char *program, const char *build_dir, const char *env_var) {
        const char *e = secure_getenv(env_var);
        if (!isempty(e))
                return strdup(e);
        Dl_info info;
        if (dladdr((void *)sb_libexec_find, &info) && info.dli_fname) {
                _cleanup_free_ char *copy = strdup(info.dli_fname);
                if (!copy)
                        return NULL;
                const char *d = dirname(copy);
                if (path_same(d, NOOK_LIBDIR))
                        return strprintf("%s/%s", NOOK_LIBEXECDIR, program);
                _cleanup_free_ char *c1 = strprintf("src/%s/%s", build_dir, program),
                                    *c2 = strprintf("../%s/%s", build_dir, program),
                                    *c3 = strprintf("../libexec/%s", program);
                const char *cands[] = { program, c1, c2, c3 };
                for (size_t i = 0; i < ELEMENTSOF(cands); i++) {
                        char *p = cands[i] ? strprintf("%s/%s", d, cands[i]) : NULL;
                        if (p && access(p, X_OK) == 0)
                                return p;
                        free(p);
                }
        }
        return strprintf("%s/%s", NOOK_LIBEXECDIR, program);
}

static int placeholder_new(char ret[8 + 32 + 1], nook_error *err) {
        uint8_t rnd[16];
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                return nook_err_errno(err, NOOK_E_IO, "Cannot read random bytes for a secret's placeholder");
        int n = snprintf(ret, 9, "nook-ph-");
        for (size_t i = 0; i < sizeof(rnd); i++)
                n += snprintf(ret + n, 3, "%02x", rnd[i]);
        return 0;
}

/* The image's own bundle, resolved inside the layer (RESOLVE_IN_ROOT): an image's symlink
 * never makes us copy a host file into the guest.  The topmost layer holding it wins. */
static int read_image_bundle(
        const sb_image *img, bool host_image, char **ret, size_t *ret_len, nook_error *err) {
        *ret = NULL;
        *ret_len = 0;
        if (host_image) {
                _cleanup_close_ int fd = open(GUEST_BUNDLE, O_RDONLY | O_CLOEXEC);
                return fd < 0 ? 0 : fd_read_to_end(fd, BUNDLE_MAX, ret, ret_len, err);
        }
        STRV_FOREACH (l, img->lowers) {
                _cleanup_close_ int root = open(*l, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (root < 0)
                        continue;
                struct open_how how = { .flags = O_RDONLY | O_CLOEXEC,
                        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
                _cleanup_close_ int fd =
                        (int)syscall(SYS_openat2, root, GUEST_BUNDLE_REL, &how, sizeof(how));
                /* COMPAT(kernel < 5.6): no openat2; a symlinked bundle is then not followed */
                if (fd < 0 && errno == ENOSYS)
                        fd = openat(root, GUEST_BUNDLE_REL, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                struct stat st;
                if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                return fd_read_to_end(fd, BUNDLE_MAX, ret, ret_len, err);
        }
        return 0;
}

static int mkdir_at_owned(int dfd, const char *name, uid_t uid, gid_t gid, int *ret_fd, nook_error *err) {
        if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
                return nook_err_errno(err, NOOK_E_IO, "Cannot create '%s' in the writable layer", name);
        int fd = openat(dfd, name, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open '%s' in the writable layer", name);
        (void)!fchownat(fd, "", uid, gid, AT_EMPTY_PATH);
        *ret_fd = fd;
        return 0;
}

/* The type of rel in the topmost layer that has it (0: none has it).  An image whose
 * /etc/ssl/certs is a symlink (to /etc/pki/...) must keep it: a directory made in the writable
 * layer would hide the link and every other certificate behind it. */
static mode_t lower_type(const sb_image *img, const char *rel) {
        STRV_FOREACH (l, img->lowers) {
                struct stat st;
                if (fstatat(AT_FDCWD, *l, &st, 0) < 0)
                        continue;
                _cleanup_free_ char *p = strprintf("%s/%s", *l, rel);
                if (p && fstatat(AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW) == 0)
                        return st.st_mode & S_IFMT;
        }
        return 0;
}

/* Writes the base bundle at the guest path in upper; returns the host path (the supervisor
 * appends the gateway's CA there). */
static int write_bundle(const sb_image *img, bool host_image, bool beside, const char *upper, uid_t uid,
        gid_t gid, char **ret_path, nook_error *err) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_image_bundle(img, host_image, &data, &len, err);
        if (r < 0)
                return nook_err_wrap(err, "reading the image's CA bundle");
        _cleanup_close_ int up = open(upper, O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_close_ int etc = -1, ssl = -1, certs = -1;
        if (up < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot open the writable layer '%s'", upper);
        r = mkdir_at_owned(up, "etc", uid, gid, &etc, err);
        if (r < 0)
                return r;
        r = mkdir_at_owned(etc, "ssl", uid, gid, &ssl, err);
        if (r < 0)
                return r;
        if (!beside && (r = mkdir_at_owned(ssl, "certs", uid, gid, &certs, err)) < 0)
                return r;
        const char *base = beside ? "nook-ca-certificates.crt" : "ca-certificates.crt";
        int dir = beside ? ssl : certs;
        (void)unlinkat(dir, base, 0); /* a kept layer's copy, or a symlink: replaced, never followed */
        _cleanup_close_ int fd =
                openat(dir, base, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return nook_err_errno(err, NOOK_E_IO, "Cannot write the CA bundle in the writable layer");
        if (len && (r = fd_write_all(fd, data, len)) < 0)
                return nook_err_errnum(
                        err, NOOK_E_IO, -r, "Cannot write the CA bundle in the writable layer");
        if (len && data[len - 1] != '\n' && (r = fd_write_all(fd, "\n", 1)) < 0)
                return nook_err_errnum(
                        err, NOOK_E_IO, -r, "Cannot write the CA bundle in the writable layer");
        (void)!fchown(fd, uid, gid);
        *ret_path = strprintf("%s%s", upper, beside ? GUEST_BUNDLE_BESIDE : GUEST_BUNDLE);
        return *ret_path ? 0 : nook_err_oom(err);
}

static int set_env(char ***env, const char *name, const char *value, nook_error *err) {
        _cleanup_free_ char *a = strprintf("%s=%s", name, value);
        if (!a || strv_env_set(env, a) < 0)
                return nook_err_oom(err);
        return 0;
}

static int secrets_config(const sb_spec *spec, char ***env, json_t *cfg, nook_error *err) {
        json_t *list = json_array();
        if (!list || json_object_set_new(cfg, "secrets", list) < 0)
                return nook_err_oom(err);
        for (size_t i = 0; i < spec->n_secrets; i++) {
                const sb_secret *x = &spec->secrets[i];
                char ph[8 + 32 + 1];
                int r = placeholder_new(ph, err);
                if (r < 0)
                        return r;
                r = set_env(env, x->name, ph, err);
                if (r < 0)
                        return r;
                json_t *hosts = json_array();
                STRV_FOREACH (h, x->hosts)
                        json_array_append_new(hosts, json_string(*h));
                if (json_array_append_new(list,
                            json_pack("{s:s, s:s, s:o, s:b}", "name", x->name, "placeholder", ph, "hosts",
                                    hosts, "body", x->body)) < 0)
                        return nook_err_oom(err);
        }
        return 0;
}

int sb_egress_prepare(const sb_spec *spec, const sb_image *img, const char *upper, uid_t uid, gid_t gid,
        char ***env, json_t **ret_cfg, nook_error *err) {
        static const char *const ca_vars[] = { "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
                "CURL_CA_BUNDLE" };
        bool host_image = streq(spec->image, "host");
        *ret_cfg = NULL;
        if (!sb_spec_wants_egress(spec))
                return 0;
        if (!upper)
                return nook_err_set(err, NOOK_E_INVALID, "The egress gateway needs a writable root layer");
        _cleanup_free_ char *program = sb_libexec_find("nook-egress", "egress", "NOOK_EGRESS");
        _cleanup_free_ char *bundle = NULL;
        if (!program)
                return nook_err_oom(err);
        if (access(program, X_OK) < 0)
                return nook_err_errno(err, NOOK_E_MISSING_FEATURE,
                        "Cannot run the egress gateway '%s' (secrets, --allow-http and --egress-audit need it; install nook's nook-egress)",
                        program);
        mode_t ssl_type = lower_type(img, "etc/ssl"), certs_type = lower_type(img, "etc/ssl/certs");
        if (!host_image && ssl_type != 0 && ssl_type != S_IFDIR)
                return nook_err_set(err, NOOK_E_MISSING_FEATURE,
                        "The image's /etc/ssl is not a directory: the egress gateway's CA cannot be added to its trust");
        bool beside = host_image || (certs_type != 0 && certs_type != S_IFDIR);
        int r = write_bundle(img, host_image, beside, upper, uid, gid, &bundle, err);
        if (r < 0)
                return r;
        json_t *rules = json_array();
        STRV_FOREACH (a, spec->allow_http)
                json_array_append_new(rules, json_string(*a));
        json_t *cfg = json_pack("{s:s, s:o, s:s, s:s?}", "program", program, "allowHttp", rules, "caBundle",
                bundle, "extraCaPem", spec->egress_ca_pem);
        if (!cfg)
                return nook_err_oom(err);
        for (size_t i = 0; i < ELEMENTSOF(ca_vars) && r >= 0; i++)
                r = set_env(env, ca_vars[i], beside ? GUEST_BUNDLE_BESIDE : GUEST_BUNDLE, err);
        if (r >= 0)
                r = secrets_config(spec, env, cfg, err);
        if (r < 0) {
                json_decref(cfg);
                return r;
        }
        *ret_cfg = cfg;
        return 0;
}

char *sb_egress_values_json(const sb_spec *spec) {
        json_t *o = json_object();
        bool any = false;
        for (size_t i = 0; o && i < spec->n_secrets; i++)
                if (spec->secrets[i].value) {
                        json_object_set_new(o, spec->secrets[i].name, json_string(spec->secrets[i].value));
                        any = true;
                }
        char *t = any ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        return t;
}

json_t *sb_egress_inspect(nook *n, const sandbox_rec *rec) {
        if (!streq(rec->state, "running") || !rec->spec_json)
                return NULL;
        json_t *spec = json_loads(rec->spec_json, 0, NULL);
        bool has = json_object_get(spec, "secrets") || json_object_get(spec, "egress");
        json_decref(spec);
        if (!has)
                return NULL;
        nook_error err = { 0 };
        _cleanup_close_ int sock = -1;
        json_t *reply = NULL;
        int r = sb_connect(n, rec->name, &sock, &err);
        if (r >= 0)
                r = sb_request_reply(sock, rec->name, json_pack("{s:s}", "op", "status"), "status",
                        STATUS_REPLY_MS, &reply, &err);
        json_t *e = r >= 0 ? json_incref(json_object_get(reply, "egress")) : NULL;
        json_decref(reply);
        if (e)
                return e;
        return json_pack(
                "{s:s, s:s}", "state", "unknown", "reason", r < 0 ? err.msg : "the supervisor did not say");
}
