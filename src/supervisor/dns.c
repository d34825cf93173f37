/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "supervisor/dns.h"

#define DNS_TYPE_A 1
#define DNS_TYPE_AAAA 28
#define DNS_CLASS_IN 1
#define DNS_MAX_JUMPS 16

static uint16_t get16(const uint8_t *p) {
        return (uint16_t)(p[0] << 8 | p[1]);
}

/* Reads the name at *pos (following compression pointers, RFC 1035 4.1.4) into out when out is
 * not NULL, and moves *pos past it in the message. */
static int read_name(const uint8_t *msg, size_t len, size_t *pos, char *out) {
        size_t p = *pos, o = 0, end = 0;
        int jumps = 0;
        for (;;) {
                if (p >= len)
                        return -EINVAL;
                uint8_t l = msg[p];
                if ((l & 0xc0) == 0xc0) {
                        if (p + 1 >= len || ++jumps > DNS_MAX_JUMPS)
                                return -EINVAL;
                        if (!end)
                                end = p + 2;
                        p = (size_t)((l & 0x3f) << 8 | msg[p + 1]);
                        continue;
                }
                if (l & 0xc0)
                        return -EINVAL;
                if (l == 0) {
                        if (!end)
                                end = p + 1;
                        break;
                }
                if (p + 1 + l > len || o + l + 1 >= DNS_NAME_MAX)
                        return -EINVAL;
                if (out) {
                        if (o)
                                out[o++] = '.';
                        for (size_t i = 0; i < l; i++) {
                                char ch = (char)msg[p + 1 + i];
                                /* a dot or NUL inside a label would let "a.b" pass for "a\.b" */
                                if (ch == '.' || ch == 0)
                                        return -EINVAL;
                                out[o++] = (char)tolower((unsigned char)ch);
                        }
                } else
                        o += l + 1;
                p += 1 + l;
        }
        if (out)
                out[o] = 0;
        *pos = end;
        return 0;
}

int dns_parse_query(const uint8_t *msg, size_t len, char name[DNS_NAME_MAX], uint16_t *ret_qtype) {
        size_t pos = DNS_HEADER;
        if (len < DNS_HEADER || (msg[2] & 0x80) || (msg[2] & 0x78) != 0 || get16(msg + 4) != 1 ||
                get16(msg + 6) != 0 || get16(msg + 8) != 0)
                return -EINVAL; /* a response, not QUERY, or not exactly one question */
        if (read_name(msg, len, &pos, name) < 0 || pos + 4 > len || name[0] == 0)
                return -EINVAL;
        *ret_qtype = get16(msg + pos);
        return 0;
}

int dns_parse_answer(const uint8_t *msg, size_t len, dns_addrs *ret) {
        size_t pos = DNS_HEADER;
        dns_addrs a = { .n = 0 };
        if (len < DNS_HEADER || !(msg[2] & 0x80))
                return -EINVAL;
        unsigned qd = get16(msg + 4), an = get16(msg + 6);
        for (unsigned i = 0; i < qd; i++) {
                if (read_name(msg, len, &pos, NULL) < 0 || pos + 4 > len)
                        return -EINVAL;
                pos += 4;
        }
        for (unsigned i = 0; i < an; i++) {
                if (read_name(msg, len, &pos, NULL) < 0 || pos + 10 > len)
                        return -EINVAL;
                uint16_t type = get16(msg + pos), class = get16(msg + pos + 2);
                uint32_t ttl = (uint32_t)get16(msg + pos + 4) << 16 | get16(msg + pos + 6);
                uint16_t rdlen = get16(msg + pos + 8);
                pos += 10;
                if (pos + rdlen > len)
                        return -EINVAL;
                bool v4 = type == DNS_TYPE_A && rdlen == 4, v6 = type == DNS_TYPE_AAAA && rdlen == 16;
                if (class == DNS_CLASS_IN && (v4 || v6) && a.n < DNS_MAX_ADDRS) {
                        net_cidr *c = &a.addr[a.n];
                        *c = (net_cidr){ .family = v4 ? AF_INET : AF_INET6, .prefix = v4 ? 32 : 128 };
                        memcpy(c->addr, msg + pos, rdlen);
                        a.ttl[a.n++] =
                                ttl > 0x7fffffff ? 0 : ttl; /* RFC 2181 8: a TTL with the top bit set is 0 */
                }
                pos += rdlen;
        }
        *ret = a;
        return 0;
}

size_t dns_make_refused(uint8_t *msg, size_t len) {
        size_t pos = DNS_HEADER;
        char name[DNS_NAME_MAX];
        if (len < DNS_HEADER)
                return 0;
        /* keep the question when it parses, so the client can match the reply */
        bool q = get16(msg + 4) == 1 && read_name(msg, len, &pos, name) == 0 && pos + 4 <= len;
        msg[2] = (uint8_t)((msg[2] & 0x79) | 0x80); /* QR, keep opcode and RD */
        msg[3] = 5; /* REFUSED */
        msg[4] = 0;
        msg[5] = q ? 1 : 0;
        memset(msg + 6, 0, 6);
        return q ? pos + 4 : DNS_HEADER;
}
