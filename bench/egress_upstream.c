/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTPS upstream of bench/egress_bench.sh: a server that is not the benchmark's bottleneck,
 * as a real remote server is not.  The Python upstream of the tests (egress_upstream.py) writes
 * one 16 KiB TLS record per syscall and took 0.25 s of CPU per 100 MB sent straight to curl,
 * which capped the "direct" leg at ~420 MB/s on its one thread.  This one answers from a buffer
 * made once, and writes TLS records through a 512 KiB buffer (several records per `write`).
 *
 *   bench-egress-upstream ADDR PORT CERT KEY [CIPHERSUITES]
 *
 * GET /big/N: N bytes (Content-Length); any other request: a short text body.  Keep-alive; one
 * process per connection (fork), so the gateway's pooled connection blocks nobody.  Each
 * connection's negotiated protocol and cipher go to stderr ("cipher TLSv1.3
 * TLS_AES_128_GCM_SHA256").  Its TLS 1.3 suites, in its order (server preference), are
 * CIPHERSUITES (OpenSSL's syntax), by default nook-egress's order (AES-128-GCM first), so the
 * direct leg and both legs through the gateway use the same cipher.  A bench tool: it trusts its
 * caller.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHUNK (256 * 1024)
#define WBUF (512 * 1024)
#define DEFAULT_SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

static char body[CHUNK];

static int listen_on(const char *addr, int port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        int one = 1;
        if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
                return -1;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

/* Reads one request head (up to the blank line) into buf; returns its length, 0 at EOF. */
static size_t read_head(SSL *ssl, char *buf, size_t cap) {
        size_t n = 0;
        while (n + 1 < cap) {
                size_t got = 0;
                if (SSL_read_ex(ssl, buf + n, cap - 1 - n, &got) != 1)
                        return 0;
                n += got;
                buf[n] = '\0';
                if (strstr(buf, "\r\n\r\n"))
                        return n;
        }
        return 0;
}

static int send_all(SSL *ssl, const char *p, size_t n) {
        size_t done = 0;
        return SSL_write_ex(ssl, p, n, &done) == 1 && done == n ? 0 : -1;
}

static int answer(SSL *ssl, BIO *wbio, const char *head) {
        char hdr[256], path[128] = "";
        unsigned long long n = 0;
        if (sscanf(head, "%*s %127s", path) != 1)
                return -1;
        const char *big = strstr(path, "/big/");
        if (big) {
                n = strtoull(big + 5, NULL, 10);
                int k = snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\n\r\n", n);
                if (send_all(ssl, hdr, (size_t)k) < 0)
                        return -1;
                while (n > 0) {
                        size_t m = n < CHUNK ? (size_t)n : CHUNK;
                        if (send_all(ssl, body, m) < 0 || BIO_flush(wbio) != 1)
                                return -1;
                        n -= m;
                }
                return 0;
        }
        char text[200];
        int t = snprintf(text, sizeof(text), "upstream saw %s\n", path);
        int k = snprintf(hdr, sizeof(hdr),
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", t);
        if (send_all(ssl, hdr, (size_t)k) < 0 || send_all(ssl, text, (size_t)t) < 0)
                return -1;
        return BIO_flush(wbio) == 1 ? 0 : -1;
}

static int alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
        unsigned int inlen, void *arg) {
        (void)ssl;
        (void)arg;
        static const unsigned char h1[] = "\x08http/1.1";
        unsigned char *sel = NULL;
        if (SSL_select_next_proto(&sel, outlen, h1, sizeof(h1) - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
                return SSL_TLSEXT_ERR_NOACK;
        *out = sel;
        return SSL_TLSEXT_ERR_OK;
}

static void serve(SSL_CTX *ctx, int fd) {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        SSL *ssl = SSL_new(ctx);
        BIO *sock = BIO_new_socket(fd, BIO_CLOSE);
        BIO *wbio = BIO_new(BIO_f_buffer());
        if (!ssl || !sock || !wbio || BIO_set_write_buffer_size(wbio, WBUF) != 1)
                _exit(1);
        BIO_push(wbio, sock);
        BIO_up_ref(sock);
        SSL_set_bio(ssl, sock, wbio); /* reads straight from the socket, writes through the buffer */
        if (SSL_accept(ssl) != 1)
                _exit(1);
        fprintf(stderr, "cipher %s %s\n", SSL_get_version(ssl), SSL_get_cipher_name(ssl));
        char head[8192];
        while (read_head(ssl, head, sizeof(head)) > 0)
                if (answer(ssl, wbio, head) < 0)
                        break;
        (void)SSL_shutdown(ssl);
        (void)BIO_flush(wbio);
        _exit(0);
}

int main(int argc, char **argv) {
        if (argc < 5 || argc > 6) {
                fprintf(stderr, "usage: %s ADDR PORT CERT KEY [CIPHERSUITES]\n", argv[0]);
                return 2;
        }
        memset(body, 'x', sizeof(body));
        signal(SIGCHLD, SIG_IGN); /* children reaped by the kernel */
        signal(SIGPIPE, SIG_IGN);
        SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
        if (!ctx || SSL_CTX_use_certificate_chain_file(ctx, argv[3]) != 1 ||
                SSL_CTX_use_PrivateKey_file(ctx, argv[4], SSL_FILETYPE_PEM) != 1 ||
                SSL_CTX_set_ciphersuites(ctx, argc == 6 ? argv[5] : DEFAULT_SUITES) != 1) {
                ERR_print_errors_fp(stderr);
                return 1;
        }
        SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
        SSL_CTX_set_alpn_select_cb(ctx, alpn_cb, NULL);
        int lfd = listen_on(argv[1], atoi(argv[2]));
        if (lfd < 0) {
                perror("bench-egress-upstream: listen");
                return 1;
        }
        for (;;) {
                int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                pid_t pid = fork();
                if (pid == 0) {
                        close(lfd);
                        serve(ctx, fd);
                }
                close(fd);
        }
}
