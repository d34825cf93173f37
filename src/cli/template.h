/* SPDX-License-Identifier: Apache-2.0 */
/* --format: a small subset of Go's text/template, rendered over one JSON row (jansson).
 *
 * Grammar (anything else between {{ and }} is an error naming its offset):
 *   literal text, with \t and \n read as a tab and a newline (as docker's --format does)
 *   {{.}}            the whole row
 *   {{.A.B.C}}       a field path; A matches key "A", else "a" (docker's {{.Name}} over our
 *                    "name"), else the first key equal to A ignoring case
 *   {{json .A.B}}    the value as compact JSON (ASCII only)
 *   {{ .A }}         spaces inside the braces are allowed
 * A missing field renders as "<no value>", as Go renders a missing map key.  Strings are printed
 * with control characters (C0, DEL, C1) escaped as \xHH / \u00HH, so a guest-chosen label or
 * name can neither start a new line nor send a terminal escape. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "nook.h"

#define TEMPLATE_MAX_LEN 4096
#define TEMPLATE_MAX_DEPTH 32

/* Renders tmpl over row into *ret (malloc'd, NUL-terminated).  0, or -NOOK_E_INVALID with err
 * naming the problem and its offset; -NOOK_E_NOMEM. */
int template_render(const char *tmpl, json_t *row, char **ret, nook_error *err);
/* Checks tmpl's syntax (renders it over an empty object). */
int template_check(const char *tmpl, nook_error *err);
