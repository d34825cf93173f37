#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Cancelling an exec kills its whole tree, and only its tree (supervisor/init_exec.c:
# kill_descendants): an orphan that left its session (re-parented to the exec's helper), a chain
# of nested shells deeper than the walk's memo (64), and a loop that keeps forking while the
# kill runs all go; a process of another exec stays.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
plan 10

tag=$$$RANDOM
# in_sandbox PATTERN: the sandbox's process lines (ps -eo args) holding PATTERN.
in_sandbox() { "$NOOK" exec tk -- ps -eo args 2>/dev/null | grep -F -- "$1" | grep -v -F 'ps -eo'; }
gone() { [[ -z "$(in_sandbox "$1")" ]]; }
ready() { "$NOOK" exec tk -- test -e "/workspace/$1" 2>/dev/null; }

run_nook create tk
is "$status" 0 "create tk"

# deep.sh N: N nested shells (the call is not the script's last command, so no shell execs it
# away), the innermost sleeps.
"$NOOK" ws write tk /deep.sh - <<EOF || bail_out "cannot write the test script"
if [ "\$1" -gt 0 ]; then sh /workspace/deep.sh \$((\$1 - 1)); : ; else touch /workspace/deep-ready; sleep 1000.1$tag; fi
EOF
"$NOOK" ws write tk /tree.sh - <<EOF || bail_out "cannot write the test script"
setsid sh -c 'sleep 1000.2$tag & touch /workspace/orphan-ready' &
sh /workspace/deep.sh 80 &
(while :; do sleep 1000.3$tag & touch /workspace/forker-ready; sleep 0.05; done) &
wait
EOF

# A bystander: another exec's process, which the cancel must leave alone.
run_nook exec -d tk -- sleep 1000.4$tag
is "$status" 0 "a detached bystander exec starts"

"$NOOK" exec tk -- sh /workspace/tree.sh >/dev/null 2>&1 &
client=$!
if wait_for 60 ready deep-ready && wait_for 30 ready orphan-ready && wait_for 30 ready forker-ready; then
        ok "the tree is up: orphan, 80 nested shells, forking loop"
else
        not_ok "the tree is up: orphan, 80 nested shells, forking loop" "$(in_sandbox "$tag")"
fi
is "$(in_sandbox "1000.1$tag" | wc -l)" 1 "the innermost of the nested shells sleeps"
isnt "$(in_sandbox "1000.2$tag")" "" "the orphan that left the session runs"

kill -9 "$client"
wait "$client" 2>/dev/null
if wait_for 30 gone "1000.1$tag"; then ok "cancel: the 80-deep chain is gone"; else not_ok "cancel: the 80-deep chain is gone" "$(in_sandbox "$tag")"; fi
if wait_for 30 gone "1000.2$tag"; then ok "cancel: the orphan is gone"; else not_ok "cancel: the orphan is gone" "$(in_sandbox "$tag")"; fi
if wait_for 30 gone "1000.3$tag"; then ok "cancel: the forking loop and its children are gone"; else not_ok "cancel: the forking loop and its children are gone" "$(in_sandbox "$tag")"; fi
is "$(in_sandbox "1000.4$tag" | wc -l)" 1 "the other exec's process still runs"

run_nook rm tk
is "$status" 0 "rm tk"
