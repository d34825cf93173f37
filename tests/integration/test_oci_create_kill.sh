#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A `nook-oci create` killed (SIGKILL: an engine's timeout, the OOM killer) before it wrote
# state.json, with a linux.cgroupsPath of its own: `state` says the container does not exist and
# `delete --force` exits 0, as with runc, and nothing is left: not the state folder and, unlike
# runc (which leaves it), not the cgroup.  create writes ROOT/ID/create.json before it makes the
# cgroup (src/oci/state.h).  The kill points are test hooks (NOOK_TEST_OCI_CREATE_KILL_AT):
#   cgroup   the cgroup made and limited, no process yet
#   spawned  the init cloned and moved into the cgroup, waiting for GO
#   ready    the init set up (its root, mounts), state.json not yet written
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/oci_lib.sh"

oci_require_stage
plan 14

CGP="/nook-oci-test-$$"
B="$NOOK_HOME/b"
oci_bundle "$B" '.process.args = ["sleep", "1000"]' || bail_out "nook-oci spec failed"

# bundle NAME: $B with cgroupsPath $CGP/NAME
bundle() { oci_bundle_beside "$B" "$1" "$CGP/$1"; }
# cgroups NAME: the folders of cgroup $CGP/NAME, in any hierarchy
cgroups() { find /sys/fs/cgroup -mindepth 2 -maxdepth 3 -type d -path "*$CGP/$1" 2>/dev/null; }
# left NAME: what container NAME left: its state folder, its cgroups
left() {
        [[ -e $OCI_ROOT/$1 ]] && echo "state left: $(ls -A "$OCI_ROOT/$1" | tr '\n' ' ')"
        cgroups "$1" | sed 's/^/cgroup left: /'
        return 0
}

# --- killed at each point, then delete --force ---
for pt in cgroup spawned ready; do
        bundle "k-$pt"
        NOOK_TEST_OCI_CREATE_KILL_AT=$pt oci create --bundle "$NOOK_HOME/k-$pt" "k-$pt"
        if [[ $status != 137 ]]; then
                skip "NOOK_TEST_OCI_CREATE_KILL_AT needs a build with -Dtest_hooks=true (create exited $status: $err)"
                skip "NOOK_TEST_OCI_CREATE_KILL_AT needs a build with test hooks"
                skip "NOOK_TEST_OCI_CREATE_KILL_AT needs a build with test hooks"
                oci delete --force "k-$pt"
                continue
        fi
        n=$(cgroups "k-$pt" | wc -l)
        oci state "k-$pt"
        like "$n $status $err" "^[1-9][0-9]* 1 .*container \"k-$pt\" does not exist" \
                "killed at '$pt': its cgroup exists ($n folders) and state says the container does not exist (runc's answer)"
        oci create --bundle "$NOOK_HOME/k-$pt" "k-$pt"
        like "$status $err" "^1 .*already exists .*'nook-oci delete --force k-$pt' removes what it left" \
                "killed at '$pt': create of the same id is refused, naming the cleanup"
        oci delete --force "k-$pt"
        is "$status $(left "k-$pt")" "0 " "killed at '$pt': delete --force exits 0 (as runc) and leaves no folder, no cgroup"
done

# --- delete without --force: removes what is left and says "does not exist", as runc does ---
bundle k-plain
NOOK_TEST_OCI_CREATE_KILL_AT=spawned oci create --bundle "$NOOK_HOME/k-plain" k-plain
oci delete k-plain
like "$status $err|$(left k-plain)" "^1 .*container \"k-plain\" does not exist\|$" \
        "delete without --force: 'does not exist' (status 1, as runc), the folder and the cgroup removed"

# --- a create still at work (a live process named in create.json): only --force stops it ---
sleep 1000 &
creator=$!
mkdir -p "$OCI_ROOT/k-live"
jq -n --argjson pid "$creator" --argjson st "$(awk '{print $22}' "/proc/$creator/stat")" --arg cg "$CGP/k-live" \
        '{pid: $pid, start_time: $st, cgroup_path: $cg}' >"$OCI_ROOT/k-live/create.json"
mkdir -p "/sys/fs/cgroup/pids$CGP/k-live"
oci delete k-live
like "$status $err" "^1 .*container \"k-live\" is being created \\(nook-oci pid $creator\\): use --force" \
        "delete of a container whose create is alive: refused, naming that process"
oci delete --force k-live
pstate=$(awk '{print $3}' "/proc/$creator/stat" 2>/dev/null)
[[ -z $pstate || $pstate == Z ]] && pstate=dead # gone, or a zombie of this shell
kill -KILL "$creator" 2>/dev/null
wait "$creator" 2>/dev/null
is "$status $pstate $(left k-live)" "0 dead " "delete --force: the create is killed, its folder and cgroup removed"

if command -v runc >/dev/null; then
        mkdir -p "$NOOK_HOME/runc-root/half"
        runc --root "$NOOK_HOME/runc-root" delete --force half 2>/dev/null
        is "$? $(ls -A "$NOOK_HOME/runc-root")" "0 " "runc on the same leftovers (a folder without state.json): delete --force exits 0, folder gone"
else
        skip "runc is not installed: its delete --force is not compared"
fi

for d in /sys/fs/cgroup/*/"${CGP#/}"; do
        [[ -d $d ]] && rmdir "$d"
done
is "$(find /sys/fs/cgroup -maxdepth 2 -name "${CGP#/}")" "" "this file's cgroups are all gone"
