#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 17, exec: init keeps a spare helper forked while execs that spares took still run
# (src/supervisor/init_loop.c; docs/design/runtime.md, Exec).  What a change to when the next
# spare is forked (tried in this round: after the running exec ends, bench/README.md) can break:
# no spare while a long or detached exec runs, execs in a row and at once beside it, a detached
# exec's accounting.  No timing assertions: generous waits.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
command -v jq >/dev/null || plan skip_all "jq is needed to read nook's JSON"
plan 9

field() { "$NOOK" inspect "$1" 2>/dev/null | jq -r "$2 // empty" 2>/dev/null; }
T=$(mktemp -d "$NOOK_HOME.beside.XXXXXX")
trap 'rc=$?; rm -rf "$T"; (exit $rc); _tap_finish' EXIT

# Inside an exec: waits (up to 30 s) until a spare helper exists beside the detached exec's
# helper, i.e. at least 2 nook-init processes that are neither PID 1 nor our own helper ($PPID).
SPARE_BESIDE='for i in $(seq 300); do n=0
        for d in /proc/[0-9]*; do p=${d#/proc/}
                [ "$p" != 1 ] && [ "$p" != "$PPID" ] &&
                        [ "$(cat "$d/comm" 2>/dev/null)" = nook-init ] && n=$((n + 1))
        done
        [ "$n" -ge 2 ] && echo spare && exit 0; sleep 0.1; done; echo "no spare ($n)"'

run_nook create sd
is "$status" 0 "create sd"

# A detached exec that runs until told: its helper stays a running "direct" helper of init.
run_nook exec -d sd -- sh -c 'while [ ! -e /tmp/go ]; do sleep 0.1; done'
is "$status" 0 "a detached exec starts"
is "$(field sd .state)" "running" "the running detached exec is counted (the sandbox is running)"

# While it (and this exec) run, init still forks the next spare.
run_nook exec sd -- sh -c "$SPARE_BESIDE"
is "$out" "spare" "with a detached exec and this exec running, init forks the next spare anyway"

execs_in_a_row sd 30 3
is "$EXECS_BAD" "" "30 execs in a row beside the detached one: each one's output and exit status"
execs_at_once sd 20 4 "$T"
is "$EXECS_BAD" "" "20 execs at once beside the detached one: each one's output and exit status"

run_nook exec sd -- touch /tmp/go
is "$status" 0 "tell the detached exec to end"
run_nook exec sd -- sh -c 'echo after; exit 7'
is "$status/$out" "7/after" "an exec after it: output and exit status"

run_nook rm -f sd
is "$status" 0 "rm -f sd"
