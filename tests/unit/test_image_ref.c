/* SPDX-License-Identifier: Apache-2.0 */
/* Image references: docker's defaults and the refused forms; manifest, index and config
 * parsing; platform selection. */
#include <criterion/criterion.h>
#include <string.h>

#include "nook.h"
#include "image/manifest.h"
#include "image/ref.h"
#include "util/macro.h"

typedef struct ref_case {
        const char *in, *canonical;
} ref_case;

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

Test(image_ref, defaults_like_docker) {
        static const ref_case cases[] = {
                { "alpine", "docker.io/library/alpine:latest" },
                { "alpine:3.20", "docker.io/library/alpine:3.20" },
                { "library/alpine", "docker.io/library/alpine:latest" },
                { "docker.io/library/alpine:3", "docker.io/library/alpine:3" },
                { "oven/bun:1", "docker.io/oven/bun:1" },
                { "ghcr.io/o/r:tag", "ghcr.io/o/r:tag" },
                { "localhost:5000/x@sha256:" D64, "localhost:5000/x@sha256:" D64 },
                { "localhost/x", "localhost/x:latest" },
                { "127.0.0.1:5000/a/b/c:v1.2-rc_3", "127.0.0.1:5000/a/b/c:v1.2-rc_3" },
                { "reg.example.com/a__b/c-d.e:x", "reg.example.com/a__b/c-d.e:x" },
                { "alpine:3@sha256:" D64, "docker.io/library/alpine:3@sha256:" D64 },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                image_ref r = {};
                nook_error err = {};
                cr_assert_eq(image_ref_parse(cases[i].in, &r, &err), 0, "%s: %s", cases[i].in, err.msg);
                char *s = image_ref_to_string(&r);
                cr_assert_str_eq(s, cases[i].canonical);
                free(s);
                image_ref_done(&r);
        }
}

Test(image_ref, refused_forms_are_invalid_and_quoted) {
        static const char *const bad[] = { "", "Alpine", "alpine:", ":tag", "alpine:-x", "a//b", "a/", "/a",
                "alpine@sha256:abc", "alpine@md5:" D64, "a b", "a..b", "a--", "-a", "host:99999999/x",
                "alpine:"
                "01234567890123456789012345678901234567890123456789012345678901234567890123456789"
                "012345678901234567890123456789012345678901234567890" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                image_ref r = {};
                nook_error err = {};
                cr_assert_eq(
                        image_ref_parse(bad[i], &r, &err), -NOOK_E_INVALID, "'%s' was accepted", bad[i]);
                cr_assert_eq(err.code, NOOK_E_INVALID);
                cr_assert(strstr(err.msg, "Invalid image reference"), "%s", err.msg);
        }
}

Test(image_manifest, index_selects_host_platform) {
        const char *idx =
                "{\"schemaVersion\":2,\"manifests\":["
                "{\"digest\":\"sha256:" D64
                "\",\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":\"s390x\"}},"
                "{\"digest\":\"sha256:" D64
                "\",\"size\":2,\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}},"
                "{\"digest\":\"sha256:" D64
                "\",\"size\":3,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\",\"variant\":\"v8\"}}]}";
        image_index x = {};
        nook_error err = {};
        image_doc_kind k;
        cr_assert_eq(image_doc_kind_detect(NULL, idx, strlen(idx), &k, &err), 0);
        cr_assert_eq(k, IMAGE_DOC_INDEX);
        cr_assert_eq(image_index_parse(idx, strlen(idx), &x, &err), 0, "%s", err.msg);
        const image_desc *d;
        image_platform p = { .os = "linux", .arch = "arm64", .variant = "v8" };
        cr_assert_eq(image_index_select(&x, &p, &d, &err), 0);
        cr_assert_eq(d->size, 3);
        p = (image_platform){ .os = "linux", .arch = "riscv64" };
        cr_assert_eq(image_index_select(&x, &p, &d, &err), -NOOK_E_NOT_FOUND);
        cr_assert(strstr(err.msg, "linux/s390x, linux/amd64, linux/arm64/v8"), "%s", err.msg);
        image_index_done(&x);
}

Test(image_manifest, unknown_media_types_and_bad_digests_refused) {
        const char *m1 =
                "{\"config\":{\"mediaType\":\"" MT_OCI_CONFIG "\",\"digest\":\"sha256:" D64 "\",\"size\":1},"
                "\"layers\":[{\"mediaType\":\"application/x-evil\",\"digest\":\"sha256:" D64
                "\",\"size\":1}]}";
        const char *m2 = "{\"config\":{\"digest\":\"sha256:../../etc\",\"size\":1},\"layers\":[]}";
        image_manifest m = {};
        nook_error err = {};
        cr_assert_eq(image_manifest_parse(m1, strlen(m1), &m, &err), -NOOK_E_INVALID);
        cr_assert(strstr(err.msg, "application/x-evil"), "%s", err.msg);
        cr_assert_eq(image_manifest_parse(m2, strlen(m2), &m, &err), -NOOK_E_INVALID);
        image_doc_kind k;
        cr_assert_eq(image_doc_kind_detect("application/vnd.evil+json", "{}", 2, &k, &err), -NOOK_E_INVALID);
}

Test(image_manifest, config_fields) {
        const char *c =
                "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"A=1\"],"
                "\"Entrypoint\":[\"/bin/sh\"],\"Cmd\":[\"-c\",\"x\"],\"WorkingDir\":\"/w\",\"User\":\"1:2\"},"
                "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:" D64 "\"]}}";
        image_config cfg = {};
        nook_error err = {};
        cr_assert_eq(image_config_parse(c, strlen(c), &cfg, &err), 0, "%s", err.msg);
        cr_assert_str_eq(cfg.env[0], "A=1");
        cr_assert_str_eq(cfg.entrypoint[0], "/bin/sh");
        cr_assert_str_eq(cfg.cmd[1], "x");
        cr_assert_str_eq(cfg.workdir, "/w");
        cr_assert_str_eq(cfg.user, "1:2");
        cr_assert_eq(cfg.n_diff_ids, 1);
        image_config_done(&cfg);
        const char *bad = "{\"config\":{\"Env\":[\"NOEQUALS\"]},\"rootfs\":{\"diff_ids\":[]}}";
        cr_assert_eq(image_config_parse(bad, strlen(bad), &cfg, &err), -NOOK_E_INVALID);
}
