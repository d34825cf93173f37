#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs one Criterion unit-test binary (tests/meson.build): criterion_run.sh BINARY ARGS...
# Criterion's runner forks a worker per test from a process with threads of its own.  Under
# AddressSanitizer such a fork can deadlock in the sanitizer's allocator (a lock held by another
# thread at the fork), and then nothing ever happens: CI saw test_idrange, 5 tests of plain
# SQLite calls that take 0.1 s, sit silent for 900 s under ASan once in many runs, and never
# again in 20 reruns.  So: a run that makes no end within 120 s (every suite here takes seconds)
# is said so on stderr and run once more; its output is kept back until it ended, so the TAP
# stream meson reads is one run's.  So is one that died of a signal before it wrote a line
# (CI saw test_idlemem's runner abort so once under ASan, silent, and never again in 80 reruns):
# a crash that comes back is reported on the second run.  Any other result, a failed assertion
# or a crash once tests ran, is reported as it is, never retried.
set -u
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
for attempt in 1 2; do
        timeout -k 10 120 "$@" >"$out"
        rc=$?
        if [ "$rc" -gt 128 ] && [ "$rc" -ne 137 ] && [ ! -s "$out" ] && [ "$attempt" -eq 1 ]; then
                echo "criterion_run.sh: $1 died of signal $((rc - 128)) before its first line (attempt 1); once more" >&2
                continue
        fi
        if [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ]; then
                cat "$out"
                exit "$rc"
        fi
        echo "criterion_run.sh: $1 made no end within 120 s (attempt $attempt; a fork under the sanitizer can deadlock the runner)" >&2
done
cat "$out"
exit 1
