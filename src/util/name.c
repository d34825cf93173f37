/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "nook.h"
#include "error.h"
#include "name.h"

#define NAME_RULE "1-63 characters of a-z, 0-9, '_', '.', '-', starting with a letter or digit, without '..'"

int name_validate(const char *what, const char *name, nook_error *err) {
        if (!name || !name[0])
                return nook_err_set(
                        err, NOOK_E_INVALID, "Invalid %s name '': a name must be " NAME_RULE, what);
        size_t n = strnlen(name, 64);
        if (n > 63)
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid %s name '%.63s…': longer than 63 characters; a name must be " NAME_RULE,
                        what, name);
        for (size_t i = 0; i < n; i++) {
                char c = name[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-')))
                        return nook_err_set(err, NOOK_E_INVALID,
                                "Invalid %s name '%s': character %zu is not allowed; a name must be " NAME_RULE,
                                what, name, i + 1);
        }
        if (strstr(name, ".."))
                return nook_err_set(err, NOOK_E_INVALID,
                        "Invalid %s name '%s': contains '..'; a name must be " NAME_RULE, what, name);
        return 0;
}

int nook_name_validate(const char *name, nook_error *err) {
        return name_validate("sandbox", name, err);
}
