/* SPDX-License-Identifier: Apache-2.0 */
/* The policy resolver's DNS parser on arbitrary packets (queries come from the workload,
 * answers from the network): no crash, names bounded, answers bounded, REFUSED stays in place. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "supervisor/dns.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char name[DNS_NAME_MAX];
        uint16_t qtype;
        dns_addrs addrs;

        if (dns_parse_query(data, size, name, &qtype) == 0) {
                if (strnlen(name, DNS_NAME_MAX) >= DNS_NAME_MAX)
                        abort();
                uint8_t *copy = malloc(size ? size : 1);
                if (!copy)
                        return 0;
                memcpy(copy, data, size);
                if (dns_make_refused(copy, size) > size)
                        abort();
                free(copy);
        }
        if (dns_parse_answer(data, size, &addrs) == 0 && addrs.n > DNS_MAX_ADDRS)
                abort();
        return 0;
}
