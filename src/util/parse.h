/* SPDX-License-Identifier: Apache-2.0 */
/* Parsers for the strings users type: sizes, memory, durations, counts, CPUs.  All are strict:
 * no sign, no spaces, no trailing junk, overflow is an error.  Failures are NOOK_E_INVALID with
 * the input quoted (non-printable bytes shown as '?', long input cut), so a caller wraps them
 * with the field name: nook_err_wrap(err, "Invalid value for --memory"). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "nook.h"

/* "<number>[unit]": the number is whole or has a decimal fraction ("1.5g"); the unit is one of
 * b, k, m, g, t, p, each optionally followed by "b" or "ib" ("kb", "mib"), in any case.  Every
 * unit is a power of 1024, as in Docker's --memory: "kb" is 1024 bytes, not 1000.  No unit means
 * bytes.  A fraction rounds up to the next whole byte. */
int parse_size(const char *s, uint64_t *ret_bytes, nook_error *err);
/* parse_size rounded up to whole MiB; a plain number is bytes, as in Docker ("100" -> 1). */
int parse_memory_mib(const char *s, uint64_t *ret_mib, nook_error *err);
/* Components "<number><unit>" with units d, h, m, s, ms (lower case), each at most once and
 * largest first: "500ms", "30s", "1h30m", "1.5h".  A plain number is seconds ("30" -> 30000).
 * Fractions round up to the next whole millisecond. */
int parse_duration_ms(const char *s, uint64_t *ret_ms, nook_error *err);
/* Decimal digits only, 0 to UINT64_MAX. */
int parse_uint64(const char *s, uint64_t *ret, nook_error *err);
/* A CPU count: a whole or decimal number above 0, rounded up ("0.5" -> 1, "1.2" -> 2), at most
 * PARSE_CPUS_MAX. */
#define PARSE_CPUS_MAX 8192u
int parse_cpus(const char *s, unsigned *ret, nook_error *err);

/* Copies s into buf for a message: bytes outside printable ASCII become '?', and input longer
 * than the buffer is cut and ends in "...".  buf is always NUL-terminated (size >= 4). */
void util_preview(const char *s, char *buf, size_t size);
/* A signal by name, with or without "SIG", in any case ("TERM", "sigkill", "RTMIN+2"), or by
 * number (1 to SIGRTMAX), as kill(1) and docker kill take them. */
int parse_signal(const char *s, int *ret, nook_error *err);
