#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the performance work changed keeps its guarantees (bench/README.md, "What the profile
# showed"):
#   - the root overlay of an ephemeral sandbox is mounted volatile (no sync of the upper layer,
#     whose unmount at stop synced the whole host filesystem under the state folder); a sticky
#     sandbox's is not, and keeps its files across a stop; an ephemeral sandbox starts again
#     after a stop (overlayfs refuses a volatile upper it finds again: the stop deletes it);
#   - on cgroup v1 the init joins its cgroup itself (tasks files the supervisor opened): from the
#     host, the init is in the sandbox's cpu, memory and pids cgroups and the supervisor is not.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
plan 11

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
# cgroup v1, rootful (rootless sandboxes have no v1 cgroup)
sup=$("$NOOK" inspect keep 2>/dev/null | sed -nE 's/.*"supervisorPid": *([0-9]+).*/\1/p' | head -1)
init=$(pgrep -P "${sup:-0}" | head -1)
if [[ -d /sys/fs/cgroup/cpu && ! -f /sys/fs/cgroup/cgroup.controllers ]] && nook_rootful; then
        is "$(grep -cE '^[0-9]+:(cpu|cpu,cpuacct|cpuacct,cpu|memory|pids):.*/nook-keep-' "/proc/$init/cgroup" 2>/dev/null)" 3 \
                "the init is in the sandbox's cpu, memory and pids cgroups"
        is "$(grep -cE 'nook-keep-' "/proc/$sup/cgroup" 2>/dev/null)" 0 "the supervisor is in none of them"
else
        skip_expected "cgroup v1 as root only: this host or stage has no v1 sandbox cgroup"
        skip_expected "cgroup v1 as root only: this host or stage has no v1 sandbox cgroup"
fi
run_nook rm eph keep
is "$status" 0 "both are removed"
