/* SPDX-License-Identifier: Apache-2.0 */
/* The functions libnook calls in libcurl, libarchive and libcrypto, each forwarding to the real
 * one, which util/dynlib.c loads on the first call (why: see dynlib.h).  libnook is linked
 * without these libraries, so a function used elsewhere and missing here is a link error, never
 * a silent eager load.  The definitions are checked against the libraries' own headers, and
 * stay hidden (nook.sym exports nook_* only): a host program's copy of a library is untouched.
 *
 * Forwarding a variadic call: curl_easy_setopt's one argument has the type its option number
 * encodes (CURLOPTTYPE_*), curl_easy_getinfo's is always a pointer, and archive_set_error's
 * message is formatted here and passed as "%s". */
#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>

#include "util/dynlib.h"

static dynlib lib_curl = { .soname = NOOK_SONAME_CURL, .package = "libcurl4" };
static dynlib lib_archive = { .soname = NOOK_SONAME_ARCHIVE, .package = "libarchive13" };
static dynlib lib_crypto = { .soname = NOOK_SONAME_CRYPTO, .package = "libssl3" };

#define CURL_FN(name) DYNLIB_FN(lib_curl, name)
#define AR_FN(name) DYNLIB_FN(lib_archive, name)
#define SSL_FN(name) DYNLIB_FN(lib_crypto, name)

/* ---- libcurl ------------------------------------------------------------------------------- */

CURLcode curl_global_init(long flags) {
        return CURL_FN(curl_global_init)(flags);
}
CURL *curl_easy_init(void) {
        return CURL_FN(curl_easy_init)();
}
void curl_easy_cleanup(CURL *c) {
        CURL_FN(curl_easy_cleanup)(c);
}
CURLcode curl_easy_perform(CURL *c) {
        return CURL_FN(curl_easy_perform)(c);
}
const char *curl_easy_strerror(CURLcode code) {
        return CURL_FN(curl_easy_strerror)(code);
}
char *curl_easy_escape(CURL *c, const char *s, int len) {
        return CURL_FN(curl_easy_escape)(c, s, len);
}
void curl_free(void *p) {
        CURL_FN(curl_free)(p);
}
struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s) {
        return CURL_FN(curl_slist_append)(l, s);
}
void curl_slist_free_all(struct curl_slist *l) {
        CURL_FN(curl_slist_free_all)(l);
}

/* curl.h makes curl_easy_setopt/getinfo type-checking macros under GCC: name the functions. */
#undef curl_easy_setopt
#undef curl_easy_getinfo

CURLcode curl_easy_setopt(CURL *c, CURLoption opt, ...) {
        __typeof__(curl_easy_setopt) *f = CURL_FN(curl_easy_setopt);
        CURLcode r;
        va_list ap;
        va_start(ap, opt);
        /* The branches differ only in va_arg's type, which clang-tidy's clone check ignores. */
        // NOLINTBEGIN(bugprone-branch-clone)
        if (opt < CURLOPTTYPE_OBJECTPOINT)
                r = f(c, opt, va_arg(ap, long));
        else if (opt >= CURLOPTTYPE_FUNCTIONPOINT && opt < CURLOPTTYPE_OFF_T)
                r = f(c, opt, va_arg(ap, void (*)(void)));
        else if (opt >= CURLOPTTYPE_OFF_T && opt < CURLOPTTYPE_BLOB)
                r = f(c, opt, va_arg(ap, curl_off_t));
        else /* object pointers and blobs */
                r = f(c, opt, va_arg(ap, void *));
        // NOLINTEND(bugprone-branch-clone)
        va_end(ap);
        return r;
}

CURLcode curl_easy_getinfo(CURL *c, CURLINFO info, ...) {
        va_list ap;
        va_start(ap, info);
        void *p = va_arg(ap, void *);
        va_end(ap);
        return CURL_FN(curl_easy_getinfo)(c, info, p);
}

/* ---- libarchive: reading ------------------------------------------------------------------- */

struct archive *archive_read_new(void) {
        return AR_FN(archive_read_new)();
}
int archive_read_free(struct archive *a) {
        return AR_FN(archive_read_free)(a);
}
int archive_read_support_filter_all(struct archive *a) {
        return AR_FN(archive_read_support_filter_all)(a);
}
int archive_read_support_filter_gzip(struct archive *a) {
        return AR_FN(archive_read_support_filter_gzip)(a);
}
int archive_read_support_filter_zstd(struct archive *a) {
        return AR_FN(archive_read_support_filter_zstd)(a);
}
int archive_read_support_format_raw(struct archive *a) {
        return AR_FN(archive_read_support_format_raw)(a);
}
int archive_read_support_format_tar(struct archive *a) {
        return AR_FN(archive_read_support_format_tar)(a);
}
int archive_read_open(struct archive *a, void *data, archive_open_callback *o, archive_read_callback *r,
        archive_close_callback *c) {
        return AR_FN(archive_read_open)(a, data, o, r, c);
}
int archive_read_open_fd(struct archive *a, int fd, size_t block) {
        return AR_FN(archive_read_open_fd)(a, fd, block);
}
int archive_read_open_memory(struct archive *a, const void *buf, size_t size) {
        return AR_FN(archive_read_open_memory)(a, buf, size);
}
int archive_read_next_header(struct archive *a, struct archive_entry **e) {
        return AR_FN(archive_read_next_header)(a, e);
}
la_ssize_t archive_read_data(struct archive *a, void *buf, size_t size) {
        return AR_FN(archive_read_data)(a, buf, size);
}
int archive_read_data_block(struct archive *a, const void **buf, size_t *size, la_int64_t *offset) {
        return AR_FN(archive_read_data_block)(a, buf, size, offset);
}
int archive_filter_code(struct archive *a, int n) {
        return AR_FN(archive_filter_code)(a, n);
}

/* ---- libarchive: writing ------------------------------------------------------------------- */

struct archive *archive_write_new(void) {
        return AR_FN(archive_write_new)();
}
int archive_write_free(struct archive *a) {
        return AR_FN(archive_write_free)(a);
}
int archive_write_close(struct archive *a) {
        return AR_FN(archive_write_close)(a);
}
int archive_write_set_format_pax_restricted(struct archive *a) {
        return AR_FN(archive_write_set_format_pax_restricted)(a);
}
int archive_write_add_filter_zstd(struct archive *a) {
        return AR_FN(archive_write_add_filter_zstd)(a);
}
int archive_write_open_fd(struct archive *a, int fd) {
        return AR_FN(archive_write_open_fd)(a, fd);
}
int archive_write_open2(struct archive *a, void *data, archive_open_callback *o, archive_write_callback *w,
        archive_close_callback *c, archive_free_callback *f) {
        return AR_FN(archive_write_open2)(a, data, o, w, c, f);
}
int archive_write_header(struct archive *a, struct archive_entry *e) {
        return AR_FN(archive_write_header)(a, e);
}
la_ssize_t archive_write_data(struct archive *a, const void *buf, size_t size) {
        return AR_FN(archive_write_data)(a, buf, size);
}

/* ---- libarchive: errors -------------------------------------------------------------------- */

int archive_errno(struct archive *a) {
        return AR_FN(archive_errno)(a);
}
const char *archive_error_string(struct archive *a) {
        return AR_FN(archive_error_string)(a);
}
void archive_set_error(struct archive *a, int code, const char *fmt, ...) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        AR_FN(archive_set_error)(a, code, "%s", msg);
}

/* ---- libarchive: entries ------------------------------------------------------------------- */

struct archive_entry *archive_entry_new(void) {
        return AR_FN(archive_entry_new)();
}
void archive_entry_free(struct archive_entry *e) {
        AR_FN(archive_entry_free)(e);
}
#define AR_GET(type, name)                                                                                  \
        type name(struct archive_entry *e) {                                                                \
                return AR_FN(name)(e);                                                                      \
        }
#define AR_SET(type, name)                                                                                  \
        void name(struct archive_entry *e, type v) {                                                        \
                AR_FN(name)(e, v);                                                                          \
        }
AR_GET(__LA_MODE_T, archive_entry_filetype)
AR_GET(__LA_MODE_T, archive_entry_perm)
AR_GET(la_int64_t, archive_entry_gid)
AR_GET(la_int64_t, archive_entry_uid)
AR_GET(la_int64_t, archive_entry_size)
AR_GET(int, archive_entry_size_is_set)
AR_GET(time_t, archive_entry_mtime)
AR_GET(long, archive_entry_mtime_nsec)
AR_GET(dev_t, archive_entry_rdev)
AR_GET(const char *, archive_entry_pathname)
AR_GET(const char *, archive_entry_hardlink)
AR_GET(const char *, archive_entry_symlink)
AR_GET(int, archive_entry_xattr_count)
AR_GET(int, archive_entry_xattr_reset)
AR_GET(int, archive_entry_sparse_count)
AR_SET(unsigned int, archive_entry_set_filetype)
AR_SET(__LA_MODE_T, archive_entry_set_mode)
AR_SET(__LA_MODE_T, archive_entry_set_perm)
AR_SET(la_int64_t, archive_entry_set_gid)
AR_SET(la_int64_t, archive_entry_set_uid)
AR_SET(la_int64_t, archive_entry_set_size)
AR_SET(dev_t, archive_entry_set_rdev)
AR_SET(const char *, archive_entry_set_pathname)
AR_SET(const char *, archive_entry_set_hardlink)
AR_SET(const char *, archive_entry_set_symlink)
void archive_entry_set_mtime(struct archive_entry *e, time_t t, long ns) {
        AR_FN(archive_entry_set_mtime)(e, t, ns);
}
int archive_entry_xattr_next(struct archive_entry *e, const char **name, const void **value, size_t *size) {
        return AR_FN(archive_entry_xattr_next)(e, name, value, size);
}
void archive_entry_xattr_add_entry(
        struct archive_entry *e, const char *name, const void *value, size_t size) {
        AR_FN(archive_entry_xattr_add_entry)(e, name, value, size);
}

/* ---- libcrypto ----------------------------------------------------------------------------- */

const EVP_MD *EVP_sha256(void) {
        return SSL_FN(EVP_sha256)();
}
EVP_MD_CTX *EVP_MD_CTX_new(void) {
        return SSL_FN(EVP_MD_CTX_new)();
}
void EVP_MD_CTX_free(EVP_MD_CTX *ctx) {
        SSL_FN(EVP_MD_CTX_free)(ctx);
}
int EVP_DigestInit_ex(EVP_MD_CTX *ctx, const EVP_MD *type, ENGINE *impl) {
        return SSL_FN(EVP_DigestInit_ex)(ctx, type, impl);
}
int EVP_DigestUpdate(EVP_MD_CTX *ctx, const void *d, size_t cnt) {
        return SSL_FN(EVP_DigestUpdate)(ctx, d, cnt);
}
int EVP_DigestFinal_ex(EVP_MD_CTX *ctx, unsigned char *md, unsigned int *s) {
        return SSL_FN(EVP_DigestFinal_ex)(ctx, md, s);
}
int EVP_EncodeBlock(unsigned char *t, const unsigned char *f, int n) {
        return SSL_FN(EVP_EncodeBlock)(t, f, n);
}
int EVP_DecodeBlock(unsigned char *t, const unsigned char *f, int n) {
        return SSL_FN(EVP_DecodeBlock)(t, f, n);
}
