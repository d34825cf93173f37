#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook-oci driven directly on a bundle, as an engine does: create/start/state/kill/delete, exec,
# pause/resume, update, ps, run, hooks, io.nook.* annotations.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/oci_lib.sh"

oci_require_stage
plan 61

B="$NOOK_HOME/b"
oci_bundle "$B" '.process.args = ["sleep", "1000"] | .hostname = "ocihost" | .annotations = {"a.b": "c"}' ||
        bail_out "nook-oci spec failed"

# --- create: the process exists, waits, pid file holds its host pid ---
oci create --bundle "$B" --pid-file "$NOOK_HOME/pid" c1
is "$status" 0 "create exits 0 ($err)"
pid=$(cat "$NOOK_HOME/pid" 2>/dev/null)
check "--pid-file holds a live host pid" kill -0 "$pid"
oci state c1
is "$(jq -r .status <<<"$out")" "created" "state after create: created"
is "$(jq -r '[.ociVersion, .id, (.pid|tostring), .bundle, .annotations["a.b"]] | join(" ")' <<<"$out")" \
        "1.0.2 c1 $pid $B c" "state JSON: ociVersion, id, pid, bundle, annotations"
is "$(cut -d' ' -f4 /proc/"$pid"/stat)" "1" "create's process was reparented (create's parent exited)"

# --- start, exec ---
oci start c1
is "$status" 0 "start exits 0"
oci state c1
is "$(jq -r .status <<<"$out")" "running" "state after start: running"
wait_for 5 bash -c "[[ \$(readlink /proc/$pid/exe) == /bin/busybox ]]"
is "$?" 0 "after start the pid is the user's process itself (no nook supervisor in between)"
oci start c1
like "$status $err" "^1 .*cannot start a container that is running" "start twice is refused"
oci exec c1 sh -c 'echo $(hostname) $$; exit 7'
is "$status $out" "7 ocihost 2" "exec runs in the container (its uts and pid namespaces), exit status passed"
oci exec --env FOO=bar --cwd /tmp c1 sh -c 'echo $FOO $(pwd)'
is "$out" "bar /tmp" "exec --env and --cwd"
echo '{"args": ["sh", "-c", "echo from-process-json; id -u"], "cwd": "/", "user": {"uid": 1000, "gid": 1000}, "env": ["PATH=/bin"]}' >"$NOOK_HOME/p.json"
oci exec --process "$NOOK_HOME/p.json" c1
is "$out" $'from-process-json\n1000' "exec --process JSON, user switched"
oci exec --detach --pid-file "$NOOK_HOME/xpid" c1 sleep 1000
xpid=$(cat "$NOOK_HOME/xpid" 2>/dev/null)
check "exec --detach writes the exec'd process' pid" kill -0 "$xpid"
oci exec c1 nonexistent-cmd
like "$status $err" "executable file not found in" "exec of a missing command: runc's message (engines map it to 127)"
oci ps --format json c1
is "$(jq -c 'sort' <<<"$out")" "$(jq -nc --argjson a "$pid" --argjson b "$xpid" '[$a,$b]|sort')" "ps --format json: the host pids"
# A pid file that cannot be written: the exec fails and its process is killed, as runc does (the
# engine would never learn about it). The marker is in sh's argv: sh does not exec a non-last command.
mark="nook-pidfile-$$-$RANDOM"
oci exec --detach --pid-file "$NOOK_HOME/no-such-dir/xpid" c1 sh -c "sleep 1000; : $mark"
like "$status $err" "^1 .*no-such-dir" "exec --pid-file in a missing folder fails, naming the file"
mark_gone() { ! pgrep -f -- "$mark" >/dev/null; }
if wait_for 10 mark_gone; then ok "and its process does not run on"; else not_ok "and its process does not run on" "$(pgrep -af -- "$mark")"; kill -9 $(pgrep -f -- "$mark") 2>/dev/null; fi

# --- pause, resume, update ---
oci pause c1
oci state c1
is "$(jq -r .status <<<"$out")" "paused" "pause: state paused"
is "$(cat /sys/fs/cgroup/freezer/nook-oci/c1/freezer.state 2>/dev/null || cat /sys/fs/cgroup/nook-oci/c1/cgroup.freeze)" \
        "$([[ -d /sys/fs/cgroup/freezer ]] && echo FROZEN || echo 1)" "pause froze the cgroup"
oci resume c1
oci state c1
is "$(jq -r .status <<<"$out")" "running" "resume: running again"
oci update --memory 67108864 --pids-limit 50 c1
is "$status" 0 "update --memory --pids-limit ($err)"
is "$(cat /sys/fs/cgroup/memory/nook-oci/c1/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/nook-oci/c1/memory.max)" \
        "67108864" "update wrote the memory limit"
echo '{"pids": {"limit": 70}}' | timeout 10 "$NOOK_OCI" --root "$OCI_ROOT" update -r - c1
is "$(cat /sys/fs/cgroup/pids/nook-oci/c1/pids.max 2>/dev/null || cat /sys/fs/cgroup/nook-oci/c1/pids.max)" "70" \
        "update -r - (resources JSON on stdin)"

# --- kill, delete ---
oci delete c1
like "$status $err" "^1 .*not stopped" "delete of a running container is refused without --force"
oci kill c1 NOSUCHSIG
like "$status $err" "^1 .*'NOSUCHSIG' is not a signal" "kill with a bad signal is refused"
oci kill --all c1 KILL
is "$status" 0 "kill --all KILL"
wait_for 5 bash -c "! kill -0 $pid 2>/dev/null && ! kill -0 $xpid 2>/dev/null"
is "$?" 0 "the init and the exec'd process are gone"
oci state c1
is "$(jq -r '.status + " " + (.pid|tostring)' <<<"$out")" "stopped 0" "state after kill: stopped"
oci kill c1 TERM
like "$status $err" "^1 .*container not running" "kill of a stopped container says 'container not running'"
oci delete c1
is "$status" 0 "delete of a stopped container"
is "$(oci_leftovers c1)" "" "delete left nothing in --root, the cgroups or the mounts"
oci state c1
like "$status $err" "^1 .*container \"c1\" does not exist" "state after delete: does not exist"
oci delete --force c1
is "$status" 0 "delete --force of a missing container succeeds (engines retry deletes)"

# --- delete --force of a created container, run, hooks ---
oci create --bundle "$B" c2
oci delete --force c2
is "$status $(oci_leftovers c2)" "0 " "delete --force of a created container kills it, leaves nothing"
# SIGKILL to a paused container: a frozen process dies only once thawed (an engine waited for it)
oci create --bundle "$B" c3
oci start c3
oci state c3
p3=$(jq -r .pid <<<"$out")
oci pause c3
oci kill c3 KILL
is "$status" 0 "kill KILL of a paused container"
wait_for 5 bash -c "! kill -0 $p3 2>/dev/null"
is "$?" 0 "it dies: the kill thawed it"
oci delete c3
is "$status $(oci_leftovers c3)" "0 " "and it is deleted, leaving nothing"
# a --root whose parents do not exist yet (containerd's shim names /run/containerd/runc/NS)
saved_root=$OCI_ROOT
OCI_ROOT="$NOOK_HOME/nested/runc/ns"
oci create --bundle "$B" c4
is "$status" 0 "create with a --root whose parents are missing makes them, as runc ($err)"
oci delete --force c4
is "$status $(oci_leftovers c4)" "0 " "and delete --force there leaves nothing"
OCI_ROOT=$saved_root

oci_bundle "$NOOK_HOME/r" '.process.args = ["sh", "-c", "exit 3"]
        | .hooks = {"prestart": [{"path": "/bin/sh", "args": ["sh", "-c", "cat > '"$NOOK_HOME"'/hook.json"]}],
                    "poststop": [{"path": "/bin/sh", "args": ["sh", "-c", "echo done > '"$NOOK_HOME"'/poststop"]}]}'
oci run --bundle "$NOOK_HOME/r" r1
is "$status" 3 "run: create + start + wait, the container's exit status"
is "$(jq -r '.id + " " + .status' "$NOOK_HOME/hook.json" 2>/dev/null)" "r1 created" "prestart hook got the state JSON on stdin"
is "$(cat "$NOOK_HOME/poststop" 2>/dev/null)" "done" "poststop hook ran at delete"
is "$(oci_leftovers r1)" "" "run left nothing behind"
oci_bundle "$NOOK_HOME/cw" '.process.cwd = "/nonexist/deeper" | .process.args = ["sh", "-c", "pwd"]'
oci run --bundle "$NOOK_HOME/cw" cw1
is "$status:$out" "0:/nonexist/deeper" "a process.cwd the image lacks is made, as runc does ($err)"
is "$(oci_leftovers cw1)" "" "and that run left nothing behind"
# run in the foreground passes SIGTERM on to the container (it was ignored: kill -9 was needed)
oci_bundle "$NOOK_HOME/tr" '.process.args = ["sh", "-c", "trap \"exit 9\" TERM; echo up; while :; do sleep 0.1; done"]'
timeout 30 "$NOOK_OCI" --root "$OCI_ROOT" run --bundle "$NOOK_HOME/tr" tr1 >"$NOOK_HOME/tr.out" 2>&1 &
runpid=$!
wait_for 10 grep -q up "$NOOK_HOME/tr.out"
kill -TERM "$runpid"
wait "$runpid"
is "$?" 9 "nook-oci run forwards SIGTERM: the container's trap exits 9"
is "$(oci_leftovers tr1)" "" "and that run left nothing behind"

# --- io.nook.profile ---
oci_bundle "$NOOK_HOME/p" '.process.args = ["sh", "-c", "grep CapBnd /proc/self/status"]
        | .process.capabilities.bounding += ["CAP_SYS_ADMIN", "CAP_MKNOD"]
        | .annotations = {"io.nook.profile": "restricted"}'
oci run --bundle "$NOOK_HOME/p" p1
is "$out" "CapBnd:	0000000000000420" "io.nook.profile=restricted narrows the spec's capabilities (SYS_ADMIN, MKNOD, AUDIT_WRITE dropped)"

# --- user namespace with mappings, seccomp from the spec, sysctl ---
# The container's root (host uid 200000) must reach the bundle: not under the 0700 NOOK_HOME.
UB=$(mktemp -d /var/tmp/nook-oci-userns.XXXXXX)
chmod 0755 "$UB"
oci_bundle "$UB/u" '.process.args = ["sh", "-c", "id -u; cat /proc/self/uid_map; mkdir /tmp/x 2>&1; cat /proc/sys/kernel/shmmni"]
        | .root.readonly = false
        | .linux.namespaces += [{"type": "user"}]
        | .linux.uidMappings = [{"containerID": 0, "hostID": 200000, "size": 65536}]
        | .linux.gidMappings = [{"containerID": 0, "hostID": 200000, "size": 65536}]
        | .linux.sysctl = {"kernel.shmmni": "1234"}
        | .linux.seccomp = {"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
                            "syscalls": [{"names": ["mkdir", "mkdirat", "no_such_syscall"], "action": "SCMP_ACT_ERRNO"}]}'
oci run --bundle "$UB/u" u1
rm -rf "$UB"
is "$(head -2 <<<"$out" | tr -s ' ' | tr '\n' '|')" "0| 0 200000 65536|" "linux.uidMappings: root in the container is host uid 200000"
like "$out" "can't create directory '/tmp/x': Operation not permitted" "linux.seccomp from the spec: mkdir answers EPERM"
is "$(tail -1 <<<"$out")" "1234" "linux.sysctl set in the container's ipc namespace"

# --- io.nook.network: nftables in the container's network namespace ---
if command -v nft >/dev/null && command -v nsenter >/dev/null; then
        oci_bundle "$NOOK_HOME/n" '.process.args = ["sleep", "1000"]
                | .annotations = {"io.nook.network": "policy", "io.nook.allow": "10.1.2.3:443"}'
        oci create --bundle "$NOOK_HOME/n" --pid-file "$NOOK_HOME/npid" n1
        rules=$(nsenter -t "$(cat "$NOOK_HOME/npid")" -n nft list table inet nook 2>&1)
        like "$rules" "ip daddr 10.1.2.3 .*dport.* 443 .*accept" "io.nook.network=policy: the allow rule is in the container's netns"
        is "$(nft list table inet nook 2>&1 | grep -c 10.1.2.3)" "0" "and not in the host's"
        oci delete --force n1
else
        skip "nft and nsenter are needed to look at the container's ruleset"
        skip "nft and nsenter are needed to look at the container's ruleset"
fi
oci_bundle "$NOOK_HOME/n2" '.linux.namespaces |= map(select(.type != "network")) | .annotations = {"io.nook.network": "public"}'
oci create --bundle "$NOOK_HOME/n2" n2
like "$status $err" "^1 .*io.nook.network needs a network namespace" "io.nook.network without a network namespace is refused (it would firewall the host)"

# --- no mount namespace: the caller's mounts are left alone (nothing pivoted or masked; chroot) ---
mounts_before=$(wc -l </proc/self/mountinfo)
oci_bundle "$NOOK_HOME/nm" '.process.args = ["/bin/cat", "/etc/passwd"] | .linux.namespaces |= map(select(.type != "mount"))'
oci run --bundle "$NOOK_HOME/nm" nm1
is "$status $out" "0 root:x:0:0:root:/:/bin/sh" "a container without a mount namespace runs in its root (chroot) ($err)"
is "$(wc -l </proc/self/mountinfo) $(test -d /proc/acpi && stat -f -c %T /proc/acpi)" \
        "$mounts_before $(test -d /proc/acpi && echo proc)" "and leaves the caller's mount table as it was"

# --- the compiled linux.seccomp is cached under --root; a damaged cache file is compiled again ---
oci_bundle "$NOOK_HOME/sc" '.process.args = ["sh", "-c", "mkdir /tmp/y 2>&1"] | .root.readonly = false
        | .linux.seccomp = {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO"}]}'
n_before=$(ls "$OCI_ROOT"/.seccomp-cache/seccomp-oci-*.bpf 2>/dev/null | wc -l)
oci run --bundle "$NOOK_HOME/sc" sc1
is "$(ls "$OCI_ROOT"/.seccomp-cache/seccomp-oci-*.bpf 2>/dev/null | wc -l)" "$((n_before + 1))" "the compiled filter is cached under --root"
for f in "$OCI_ROOT"/.seccomp-cache/seccomp-oci-*.bpf; do printf 'garbage' >"$f"; done
oci run --bundle "$NOOK_HOME/sc" sc2
like "$out" "Operation not permitted" "a damaged cache file: the filter is compiled again and enforced"

# --- a config.json without "process": create works (runtime-spec), start says so, stopped ---
oci_bundle "$NOOK_HOME/np" 'del(.process)'
oci create --bundle "$NOOK_HOME/np" np1
is "$status" 0 "create without a process ($err)"
oci start np1
like "$status $err" "^1 .*has no 'process' in its config.json: nothing was started" "start without a process is an error"
oci state np1
is "$(jq -r .status <<<"$out")" "stopped" "and the container is stopped"
oci delete np1
