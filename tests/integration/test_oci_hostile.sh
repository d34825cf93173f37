#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook-oci on hostile input: bad config.json, escaping paths, bad ids and signals, huge values.
# Each is refused with an error naming the field, and leaves nothing in --root, the cgroup tree,
# the mount table or the process table.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/oci_lib.sh"

oci_require_stage
plan 57

B="$NOOK_HOME/b"
oci_bundle "$B" '.process.args = ["true"]' || bail_out "nook-oci spec failed"
cp "$B/config.json" "$NOOK_HOME/good.json"

# refused ID DESC REGEX JQ-FILTER: create with the filtered config fails, says REGEX, leaves nothing.
refused() {
        local id=$1 desc=$2 re=$3 f=$4
        jq "$f" "$NOOK_HOME/good.json" >"$B/config.json"
        oci create --bundle "$B" "$id"
        if [[ $status == 1 && "$err" =~ $re ]]; then ok "$desc"; else not_ok "$desc" "status $status" "stderr: $err"; fi
        is "$(oci_leftovers "$id")$(ls "$OCI_ROOT" 2>/dev/null)" "" "$desc: nothing left"
}

refused h1 "no root object" "no 'root' object" 'del(.root)'
refused h2 "root.path missing" "root.path '/nonexistent-nook' does not exist" '.root.path = "/nonexistent-nook"'
refused h3 "empty args" "process.args is empty" '.process.args = []'
refused h4 "relative cwd" "process.cwd 'tmp' is not an absolute path" '.process.cwd = "tmp"'
refused h5 "mount destination escaping with .." "mounts\\[0\\].destination '/../../etc' must be an absolute path" \
        '.mounts = [{"destination": "/../../etc", "type": "tmpfs", "source": "tmpfs"}] + .mounts'
refused h6 "unknown namespace" "unknown type 'bogus'" '.linux.namespaces += [{"type": "bogus"}]'
refused h7 "namespace path that does not exist" "path '/proc/999999999/ns/net'" \
        '.linux.namespaces = [{"type": "network", "path": "/proc/999999999/ns/net"}]'
refused h8 "cgroupsPath with .." "linux.cgroupsPath '/../../x' must not contain" '.linux.cgroupsPath = "/../../x"'
refused h9 "systemd cgroupsPath" "systemd slice path: nook-oci manages cgroupfs paths" '.linux.cgroupsPath = "system.slice:nook:x"'
refused h10 "unknown capability" "unknown capability 'CAP_NOPE'" '.process.capabilities.bounding += ["CAP_NOPE"]'
refused h11 "soft rlimit above hard" "soft limit 5000 is above the hard limit 10" \
        '.process.rlimits = [{"type": "RLIMIT_NOFILE", "soft": 5000, "hard": 10}]'
refused h12 "huge uid" "more than 4294967295" '.process.user.uid = 99999999999'
refused h13 "oomScoreAdj out of range" "oomScoreAdj 5000 is outside" '.process.oomScoreAdj = 5000'
refused h14 "memory limit too small" "memory.limit 1 bytes is too small" '.linux.resources.memory = {"limit": 1}'
refused h15 "seccomp action unknown" "action 'SCMP_ACT_FROB' is not supported" \
        '.linux.seccomp = {"defaultAction": "SCMP_ACT_FROB"}'
refused h16 "bad io.nook.network" "io.nook.network='everything'" '.annotations = {"io.nook.network": "everything"}'
refused h17 "bad io.nook.profile" "io.nook.profile='lax'" '.annotations = {"io.nook.profile": "lax"}'

echo '{"ociVersion": "1.0.2", "root": ' >"$B/config.json"
oci create --bundle "$B" h20
like "$status $err" "^1 .*Invalid JSON at line" "truncated config.json: the parse error with its position"
echo '[1, 2]' >"$B/config.json"
oci create --bundle "$B" h21
like "$status $err" "^1 .*Expected a JSON object" "a config.json that is not an object"
oci create --bundle "$NOOK_HOME/no-such-bundle" h22
like "$status $err" "^1 .*Bundle folder '.*no-such-bundle' does not exist" "a missing bundle folder"

# ids
cp "$NOOK_HOME/good.json" "$B/config.json"
oci create --bundle "$B" "a/b"
like "$status $err" "^1 .*Invalid container id 'a/b'" "an id with '/' is refused"
oci create --bundle "$B" ".."
like "$status $err" "^1 .*Container id '..' is not allowed" "the id '..' is refused"
oci create --bundle "$B" "$(printf 'x%.0s' {1..300})"
like "$status $err" "^1 .*1 to 256 bytes" "a 300-byte id is refused"
oci state "../../etc"
like "$status $err" "^1 .*Invalid container id" "state of '../../etc' is refused before any path is built"

# duplicate id: the first container is untouched
jq '.process.args = ["sleep", "1000"]' "$NOOK_HOME/good.json" >"$B/config.json"
oci create --bundle "$B" --pid-file "$NOOK_HOME/pid" d1
pid=$(cat "$NOOK_HOME/pid")
oci create --bundle "$B" d1
like "$status $err" "^1 .*container with id \"d1\" already exists" "a duplicate id is refused"
oci state d1
is "$(jq -r '.status + " " + (.pid|tostring)' <<<"$out")" "created $pid" "the first d1 is untouched"
oci delete --force d1
wait_for 5 bash -c "! kill -0 $pid 2>/dev/null"
is "$?$(oci_leftovers d1)" "0" "delete --force d1: process, state, cgroup gone"

# a symlink in the image pointing at the host's /etc: the mount lands inside the root
ln -sfn /etc "$B/rootfs/evil"
jq '.process.args = ["true"] | .mounts += [{"destination": "/evil/nook-oci-probe", "type": "tmpfs", "source": "tmpfs"}]' \
        "$NOOK_HOME/good.json" >"$B/config.json"
oci run --bundle "$B" s1
is "$status" 0 "a mount through an absolute symlink in the image works ($err)"
check "it landed inside the root filesystem, not on the host's /etc" test ! -e /etc/nook-oci-probe -a -d "$B/rootfs/etc/nook-oci-probe"
rm -f "$B/rootfs/evil"

# huge values: the kernel's refusal, named, and nothing left (jq would round these: python)
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["linux"]["resources"]={"pids":{"limit":99999999999999999}}; json.dump(c,open(sys.argv[2],"w"))' \
        "$NOOK_HOME/good.json" "$B/config.json"
oci create --bundle "$B" big1
like "$status $err" "^1 .*linux.resources: Cannot write '99999999999999999' to .*pids.max" "a huge pids limit: the cgroup's refusal, named"
is "$(oci_leftovers big1)$(ls "$OCI_ROOT")" "" "a huge pids limit: nothing left"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c["process"]["args"]=["x"*100]*20000; json.dump(c,open(sys.argv[2],"w"))' \
        "$NOOK_HOME/good.json" "$B/config.json"
oci create --bundle "$B" big2
like "$status $err" "^1 .*larger than the limit of 1048576 bytes" "a config.json over 1 MiB is refused"

# global options: --systemd-cgroup refused, --log-format json errors, unknown command
oci --systemd-cgroup list
like "$status $err" "^1 .*--systemd-cgroup is not supported: nook-oci manages cgroupfs paths" "--systemd-cgroup is refused, saying why"
timeout 10 "$NOOK_OCI" --root "$OCI_ROOT" --log "$NOOK_HOME/log.json" --log-format json state nosuch 2>/dev/null
is "$(jq -r '.level + " " + .msg' "$NOOK_HOME/log.json" 2>&1)" 'error container "nosuch" does not exist' \
        "--log-format json: the error as a JSON line with level and msg"
is "$(jq -r 'has("time")' "$NOOK_HOME/log.json" 2>&1)" "true" "--log-format json: with its time"
oci frobnicate
like "$status $err" "^1 .*unknown command 'frobnicate'" "an unknown command"
oci features
is "$(jq -r '[.ociVersionMax, (.linux.namespaces | index("user") != null), .linux.cgroup.systemd] | join(" ")' <<<"$out")" \
        "1.1.0 true false" "features: JSON with namespaces and cgroup support"

# a create killed before it wrote its state (ROOT/ID with exec.fifo only): delete --force clears it
cp "$NOOK_HOME/good.json" "$B/config.json"
mkdir -p "$OCI_ROOT/half1" && mkfifo "$OCI_ROOT/half1/exec.fifo"
oci create --bundle "$B" half1
like "$status $err" "^1 .*already exists" "a half-created container's id is taken"
oci delete --force half1
is "$status $(ls "$OCI_ROOT" | grep -c half1)" "0 0" "delete --force removes what a killed create left"
oci delete --force "../x"
like "$status $err" "^1 .*Invalid container id" "delete --force still refuses a bad id"
