#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook-oci next to runc on the same bundle, where a podman or containerd user sees the two
# differ: `update` with 0 and -1 (runc: 0 leaves a limit as it is, -1 lifts it); the fields of
# `state` and `list` (rootfs, owner); `ps` (runc's table from ps(1)); `features` (capabilities,
# seccomp archs).  Each check
# states runc 1.1.5's behaviour as the expected value; where runc is installed it runs the same
# steps and must give the same, so the expectation is runc's, not ours.  The cgroup files read
# are cgroup v1's (this hybrid host's cpu, memory and pids controllers).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/oci_lib.sh"

oci_require_stage
if [[ ! -f /sys/fs/cgroup/memory/memory.limit_in_bytes || ! -d /sys/fs/cgroup/pids ]]; then
        plan 1
        skip_expected "this file reads cgroup v1 memory and pids files; the host has none"
        exit 0
fi
plan 14

# NOOK_TEST_RUNC= (empty) runs without runc: the expected values alone
RUNC=${NOOK_TEST_RUNC-$(command -v runc || true)}
RUNC_ROOT="$NOOK_HOME/runc-root"
# every cgroup this file makes is under this one, removed at the end
CGP="/nook-oci-test-$$"
B="$NOOK_HOME/b"
oci_bundle "$B" '.process.args = ["sleep", "1000"]' || bail_out "nook-oci spec failed"

# bundle NAME JQ: a bundle sharing $B's root filesystem with its own cgroupsPath ($CGP/NAME)
bundle() { oci_bundle_beside "$B" "$1" "$CGP/$1" "${2:-.}"; }

# rt RUNTIME ARGS...: nook-oci or runc with this file's roots; sets $out, $err, $status.
rt() {
        local r=$1
        shift
        if [[ $r == nook ]]; then
                oci "$@"
        else
                # to files: the container's process inherits them (a pipe would stay open)
                timeout 60 "$RUNC" --root "$RUNC_ROOT" "$@" >"$NOOK_HOME/runc.out" 2>"$NOOK_HOME/runc.err" </dev/null
                status=$?
                out=$(cat "$NOOK_HOME/runc.out")
                err=$(cat "$NOOK_HOME/runc.err")
        fi
}

# limits NAME: the limits of cgroup $CGP/NAME, v1 files, "max" for unlimited.
limits() {
        local m=/sys/fs/cgroup/memory$CGP/$1 v
        v="pids=$(cat /sys/fs/cgroup/pids$CGP/$1/pids.max) mem=$(cat $m/memory.limit_in_bytes)"
        [[ -f $m/memory.memsw.limit_in_bytes ]] && v+=" memsw=$(cat $m/memory.memsw.limit_in_bytes)"
        v+=" quota=$(cat /sys/fs/cgroup/cpu$CGP/$1/cpu.cfs_quota_us)"
        sed -E 's/=(9223372036854771712|-1)\b/=max/g' <<<"$v"
}

# steps RUNTIME ID: one update per line (flags, or -r with JSON on stdin), each followed by its
# exit status and the limits then.
steps() {
        local r=$1 id=$2 s
        while IFS= read -r s; do
                [[ -z $s ]] && continue
                if [[ $s == "{"* ]]; then
                        if [[ $r == nook ]]; then
                                "$NOOK_OCI" --root "$OCI_ROOT" update -r - "$id" <<<"$s" >/dev/null 2>&1
                        else
                                "$RUNC" --root "$RUNC_ROOT" update -r - "$id" <<<"$s" >/dev/null 2>&1
                        fi
                        status=$?
                else
                        # shellcheck disable=SC2086 # the flags are words
                        rt "$r" update $s "$id"
                fi
                echo "$s: $status $(limits "$id")"
        done
}

# The expected transcripts: runc 1.1.5 on this host (hybrid, v1 controllers, swap accounted).
memsw_file=/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes
sw() { [[ -f $memsw_file ]] && echo " memsw=$1"; }
pids_steps='--pids-limit 50
--pids-limit 0
--pids-limit -1
{"pids": {"limit": 40}}
{"pids": {"limit": 0}}
{"pids": {"limit": -1}}'
pids_want="--pids-limit 50: 0 pids=50 mem=max$(sw max) quota=max
--pids-limit 0: 0 pids=50 mem=max$(sw max) quota=max
--pids-limit -1: 0 pids=max mem=max$(sw max) quota=max
{\"pids\": {\"limit\": 40}}: 0 pids=40 mem=max$(sw max) quota=max
{\"pids\": {\"limit\": 0}}: 0 pids=40 mem=max$(sw max) quota=max
{\"pids\": {\"limit\": -1}}: 0 pids=max mem=max$(sw max) quota=max"
if [[ -f $memsw_file ]]; then
        mem_steps='--memory 64m --memory-swap 128m
--memory 0
--memory-swap 0
--memory -1
{"memory": {"limit": 67108864, "swap": 134217728}}
{"memory": {"limit": 0}}
{"memory": {"limit": -1}}'
        mem_want="--memory 64m --memory-swap 128m: 0 pids=max mem=67108864 memsw=134217728 quota=max
--memory 0: 0 pids=max mem=67108864 memsw=134217728 quota=max
--memory-swap 0: 0 pids=max mem=67108864 memsw=134217728 quota=max
--memory -1: 0 pids=max mem=max memsw=max quota=max
{\"memory\": {\"limit\": 67108864, \"swap\": 134217728}}: 0 pids=max mem=67108864 memsw=134217728 quota=max
{\"memory\": {\"limit\": 0}}: 0 pids=max mem=67108864 memsw=134217728 quota=max
{\"memory\": {\"limit\": -1}}: 0 pids=max mem=max memsw=max quota=max"
else
        mem_steps='--memory 64m
--memory 0
--memory -1'
        mem_want="--memory 64m: 0 pids=max mem=67108864 quota=max
--memory 0: 0 pids=max mem=67108864 quota=max
--memory -1: 0 pids=max mem=max quota=max"
fi
cpu_steps='--cpu-quota 50000
--cpu-quota 0
{"cpu": {"quota": 0}}
--cpu-quota -1'
cpu_want="--cpu-quota 50000: 0 pids=max mem=max$(sw max) quota=50000
--cpu-quota 0: 0 pids=max mem=max$(sw max) quota=50000
{\"cpu\": {\"quota\": 0}}: 0 pids=max mem=max$(sw max) quota=50000
--cpu-quota -1: 0 pids=max mem=max$(sw max) quota=max"

# --- update: 0 leaves a limit as it is, -1 lifts it ---
# transcripts RUNTIME: the three groups of steps, each on a fresh container.
transcripts() {
        local r=$1 g id v
        for g in pids mem cpu; do
                id="$r-upd-$g"
                v="${g}_steps"
                bundle "$id"
                rt "$r" create --bundle "$NOOK_HOME/$id" "$id"
                [[ $status == 0 ]] || echo "create $id failed: $err" >"$NOOK_HOME/$r.$g"
                steps "$r" "$id" <<<"${!v}" >>"$NOOK_HOME/$r.$g"
                rt "$r" delete --force "$id"
        done
}
transcripts nook
is "$(cat "$NOOK_HOME/nook.pids")" "$pids_want" "update --pids-limit / pids.limit: 0 leaves pids.max, -1 writes max (runc)"
is "$(cat "$NOOK_HOME/nook.mem")" "$mem_want" "update --memory / memory.limit: 0 leaves it, -1 lifts memory and memory+swap (runc)"
is "$(cat "$NOOK_HOME/nook.cpu")" "$cpu_want" "update --cpu-quota / cpu.quota: 0 leaves it, -1 lifts it (runc)"
if [[ -n $RUNC ]]; then
        transcripts runc
        is "$(cat "$NOOK_HOME"/runc.{pids,mem,cpu})" "$pids_want"$'\n'"$mem_want"$'\n'"$cpu_want" \
                "runc ($("$RUNC" --version | head -1)) gives the same transcripts here"
else
        skip "runc is not installed: the expected values are runc 1.1.5's, not compared this run"
fi

# --- create: 0 in linux.resources is "unset" (runc writes nothing; memsw 0 was refused) ---
bundle zero '.linux.resources.memory = {"swap": 0} | .linux.resources.pids = {"limit": 0} | .linux.resources.cpu = {"quota": 0}'
oci create --bundle "$NOOK_HOME/zero" zero
is "$status $(limits zero)" "0 pids=max mem=max$(sw max) quota=max" "create with memory.swap, pids.limit, cpu.quota 0: unset, as runc ($err)"
oci delete --force zero

# --- state and list: runc's fields, rootfs and owner among them ---
# fields RUNTIME ID: the keys of `state ID` in order, its rootfs, owner and annotations
fields() {
        rt "$1" state "$2"
        jq -c '[keys_unsorted, .rootfs, .owner, .annotations]' <<<"$out" 2>&1
}
want_fields() {
        jq -nc --arg root "$B/rootfs" --argjson a "$1" \
                '[["ociVersion", "id", "pid", "status", "bundle", "rootfs", "created"] + (if $a then ["annotations"] else [] end) + ["owner"], $root, "", $a]'
}
got=""
for r in nook runc; do
        [[ $r == runc && -z $RUNC ]] && continue
        bundle "$r-st-a" '.annotations = {"a.b": "c"}'
        bundle "$r-st-n" 'del(.annotations)'
        for v in a n; do
                rt "$r" create --bundle "$NOOK_HOME/$r-st-$v" "$r-st-$v"
                got+="$r $v $(fields "$r" "$r-st-$v")"$'\n'
        done
done
want="nook a $(want_fields '{"a.b": "c"}')
nook n $(want_fields null)"
is "$(grep ^nook <<<"$got")" "$want" "state: runc's fields in runc's order, rootfs the root's path, owner \"\", annotations only when there are any"
if [[ -n $RUNC ]]; then
        is "$(grep ^runc <<<"$got" | sed 's/^runc/nook/')" "$want" "runc's state gives the same fields and values"
else
        skip "runc is not installed: its state is not compared"
fi
oci list --format json
is "$(jq -c '[.[] | select(.id == "nook-st-a") | .rootfs, .owner]' <<<"$out")" "$(jq -nc --arg r "$B/rootfs" --arg o "$(id -un)" '[$r, $o]')" \
        "list --format json: rootfs, and owner the user owning the container's state folder (as runc)"
for r in nook runc; do
        [[ $r == runc && -z $RUNC ]] && continue
        rt "$r" delete --force "$r-st-a"
        rt "$r" delete --force "$r-st-n"
done

# --- ps: --format json, and runc's table made by ps(1) with the options after the id ---
# ps_transcript RUNTIME ID: what ps prints for the running container ID, its pid written P
ps_transcript() {
        local r=$1 id=$2 p
        rt "$r" state "$id"
        p=$(jq -r .pid <<<"$out")
        rt "$r" ps --format json "$id"
        echo "json: $status $(sed "s/\b$p\b/P/g" <<<"$out")"
        rt "$r" ps "$id"
        echo "table: $status $(wc -l <<<"$out") lines, header $([[ $(head -1 <<<"$out") == "$(ps -ef | head -1)" ]] && echo "of ps -ef" || echo "'$(head -1 <<<"$out")'"), $(tail -n +2 <<<"$out" | awk -v p="$p" '{print ($2 == p ? "P" : $2), $8, $9}')"
        rt "$r" ps "$id" -o pid,comm
        echo "-o pid,comm: $status $(sed "s/^ *//; s/  */ /g; s/\b$p\b/P/g" <<<"$out" | tr '\n' '|')"
        rt "$r" ps "$id" -o comm
        echo "-o comm: $status $(grep -o "couldn't find PID field in ps output" <<<"$err")"
}
ps_want="json: 0 [P]
table: 0 2 lines, header of ps -ef, P sleep 1000
-o pid,comm: 0 PID COMMAND|P sleep|
-o comm: 1 couldn't find PID field in ps output"
for r in nook runc; do
        [[ $r == runc && -z $RUNC ]] && continue
        bundle "$r-ps"
        rt "$r" create --bundle "$NOOK_HOME/$r-ps" "$r-ps"
        rt "$r" start "$r-ps"
        ps_transcript "$r" "$r-ps" >"$NOOK_HOME/$r.ps"
done
is "$(cat "$NOOK_HOME/nook.ps")" "$ps_want" "ps: --format json the pids; the table from ps -ef or the ps options after the id, filtered to the container (runc)"
if [[ -n $RUNC ]]; then
        is "$(cat "$NOOK_HOME/runc.ps")" "$ps_want" "runc's ps gives the same"
        rt runc delete --force runc-ps
else
        skip "runc is not installed: its ps is not compared"
fi
oci ps nook-ps -- -o pid,comm
is "$status $(sed 's/^ *//; s/  */ /g' <<<"$out" | cut -d' ' -f2 | tr '\n' ' ')" "0 COMMAND sleep " \
        "ps ID -- OPTIONS: the -- is dropped (runc 1.1.5 passes it to ps, which refuses it)"
oci delete --force nook-ps

# --- features: what runc reports that nook-oci can say truly ---
oci features
nf=$out
if [[ -n $RUNC ]]; then
        rf=$("$RUNC" features 2>/dev/null)
        is "$(jq -c .linux.capabilities <<<"$nf")" "$(jq -c .linux.capabilities <<<"$rf")" \
                "features: linux.capabilities, the names this kernel has, the same list as runc's"
        is "$(jq -c --argjson r "$rf" '[($r.linux.seccomp.archs - .linux.seccomp.archs), .annotations["io.github.seccomp.libseccomp.version"] == $r.annotations["io.github.seccomp.libseccomp.version"]]' <<<"$nf")" \
                "[[],true]" "features: every seccomp arch runc lists, and the libseccomp version runc reports"
else
        is "$(jq '.linux.capabilities | length' <<<"$nf")" "$(($(cat /proc/sys/kernel/cap_last_cap) + 1))" \
                "features: linux.capabilities, one name per capability of this kernel"
        is "$(jq -c '[(.linux.seccomp.archs | index("SCMP_ARCH_X86_64") != null), (.annotations["io.github.seccomp.libseccomp.version"] | test("^[0-9]+\\.[0-9]+\\.[0-9]+$"))]' <<<"$nf")" \
                "[true,true]" "features: seccomp archs and the libseccomp version (runc not installed to compare)"
fi

is "$(find /sys/fs/cgroup/*/"${CGP#/}" -mindepth 1 -type d 2>/dev/null
        ls -A "$OCI_ROOT" 2>/dev/null | grep -vx .seccomp-cache
        ls -A "$RUNC_ROOT" 2>/dev/null)" "" "nothing left: every container deleted, their cgroups gone"
for d in /sys/fs/cgroup/*/"${CGP#/}"; do
        [[ -d $d ]] && rmdir "$d"
done
