#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The root overlay of an ephemeral sandbox is mounted volatile (no sync of the upper layer, whose
# unmount at stop otherwise synced the whole host filesystem under the state folder); a sticky
# sandbox's is not, and keeps its files across a stop.  An ephemeral sandbox starts again after
# a stop (overlayfs refuses a volatile upper it finds again: the stop deletes it).
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
plan 9

root_opts() { "$NOOK" exec "$1" -- sh -c 'grep " / / " /proc/self/mountinfo' 2>/dev/null; }

run_nook create eph
is "$status" 0 "an ephemeral sandbox is created"
like "$(root_opts eph)" "overlay .*volatile" "its root overlay is volatile"
run_nook exec eph -- sh -c 'echo x > /marker'
run_nook stop eph
run_nook start eph
is "$status" 0 "it starts again after a stop (the volatile upper was deleted)"
run_nook exec eph -- sh -c 'test -e /marker && echo kept || echo fresh'
is "$out" "fresh" "with a fresh writable layer"
like "$(root_opts eph)" "overlay .*volatile" "and a volatile root again"

run_nook create --sticky keep
is "$status" 0 "a sticky sandbox is created"
unlike "$(root_opts keep)" "volatile" "its root overlay is not volatile"
run_nook exec keep -- sh -c 'echo x > /marker'
run_nook stop keep
run_nook start keep
run_nook exec keep -- sh -c 'test -e /marker && echo kept || echo fresh'
is "$out" "kept" "its files survive a stop"
run_nook rm eph keep
is "$status" 0 "both are removed"
