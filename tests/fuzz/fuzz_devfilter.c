/* SPDX-License-Identifier: Apache-2.0 */
/* The device rule parser (src/isolate/devfilter.c, linux.resources.devices on cgroup v2) on
 * arbitrary bytes, one rule a line: no crash; what parses builds a program that ends in exit and
 * whose every jump lands inside it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nook.h"
#include "isolate/devfilter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = strndup((const char *)data, size);
        iso_dev_rule rules[16];
        size_t n = 0;
        if (!s)
                return 0;
        char *save = NULL;
        for (char *line = strtok_r(s, "\n", &save); line && n < 16; line = strtok_r(NULL, "\n", &save)) {
                nook_error err = {};
                if (iso_dev_rule_parse(line, n % 2 == 0, &rules[n], &err) == 0) {
                        if (!rules[n].access || !strchr("abc", rules[n].type) ||
                                rules[n].major > INT32_MAX || rules[n].minor > INT32_MAX)
                                abort();
                        n++;
                }
        }
        struct bpf_insn *p = NULL;
        size_t np = 0;
        nook_error err = {};
        if (iso_devfilter_build(rules, n, &p, &np, &err) != 0)
                abort();
        if (np == 0 || p[np - 1].code != (BPF_JMP | BPF_EXIT))
                abort();
        for (size_t i = 0; i < np; i++)
                if (BPF_CLASS(p[i].code) == BPF_JMP && BPF_OP(p[i].code) != BPF_EXIT &&
                        (p[i].off < 0 || i + 1 + (size_t)p[i].off >= np))
                        abort();
        free(p);
        free(s);
        return 0;
}
