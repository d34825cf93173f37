#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 17, an idle sandbox's memory: after 5 s without an event, the supervisor, init and the
# spare exec helper give back the pages they touched (read-only file pages out of their page
# tables, malloc_trim, the stack below the caller; docs/design/runtime.md, "Idle memory").
# What that can break: an exec right after the release (its code faults back in), the release
# again after the next quiet period, a spare killed after it released its pages, stop and rm of
# a sandbox that has been idle.  No timing assertions: generous waits.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
command -v jq >/dev/null || plan skip_all "jq is needed to read nook's JSON"
plan 16

field() { "$NOOK" inspect "$1" 2>/dev/null | jq -r "$2 // empty" 2>/dev/null; }
child_init() { ps -o pid=,comm= --ppid "$1" | awk '$2 == "nook-init" { print $1; exit }'; }
rss_file() { awk '/^RssFile:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
# both processes' file pages under 3/4 of what they held after the last exec
released() {
        local s i
        s=$(rss_file "$SUP") i=$(rss_file "$INIT")
        [[ -n "$s" && -n "$i" ]] && ((s * 4 < SUP_WARM * 3 && i * 4 < INIT_WARM * 3))
}
# the file pages held right after an exec (the release is at least 5 s away)
warm() {
        SUP_WARM=$(rss_file "$SUP") INIT_WARM=$(rss_file "$INIT")
        diag "after an exec: RssFile supervisor ${SUP_WARM} KiB, init ${INIT_WARM} KiB"
}

run_nook create idl
is "$status" 0 "create idl"
SUP=$(field idl .supervisorPid)
INIT=$(child_init "$SUP")
is_pid() { [[ "$1" =~ ^[0-9]+$ ]]; }
check "the supervisor ($SUP) and its init ($INIT)" eval 'is_pid "$SUP" && is_pid "$INIT"'

run_nook exec idl -- true
warm
check "idle for the quiet period: the supervisor and init give their file pages back" wait_for 60 released
diag "idle: RssFile supervisor $(rss_file "$SUP") KiB, init $(rss_file "$INIT") KiB"

# ---- execs right after the release ----------------------------------------------------------
run_nook exec idl -- sh -c 'echo "after-$0"; exit 3' release
is "$status/$out" "3/after-release" "the first exec after the release: its output and exit status"
out=$(printf 'line one\nline two\n' | "$NOOK" exec -i idl -- cat 2>&1)
is "$out" "$(printf 'line one\nline two')" "stdin reaches the command"
run_nook exec idl -- /no/such/command
is "$status" 127 "a missing command still exits 127"
like "$err" "cannot run '/no/such/command'" "with the reason"

# ---- the next quiet period releases again ----------------------------------------------------
warm
check "after more execs, the next quiet period releases again" wait_for 60 released
run_nook exec idl -- echo again
is "$status/$out" "0/again" "and the next exec runs"

# ---- the spare killed after its release is replaced ------------------------------------------
SPARE=$(child_init "$INIT")
check "init has a spare exec helper ($SPARE)" is_pid "$SPARE"
kill -9 "$SPARE" 2>/dev/null
new_spare() {
        local p
        p=$(child_init "$INIT")
        [[ -n "$p" && "$p" != "$SPARE" ]]
}
check "a killed spare is replaced by a new one" wait_for 30 new_spare
run_nook exec idl -- echo replaced
is "$status/$out" "0/replaced" "an exec after the spare was killed"

# ---- stop and rm of a sandbox idle past the quiet period -------------------------------------
warm
check "idle again" wait_for 60 released
run_nook stop idl
is "$status" 0 "stop of an idle sandbox"
is "$(field idl .state)" "stopped" "it is stopped"
run_nook rm idl
is "$status" 0 "rm of it"
