#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# podman with nook-oci as its runtime (`podman --runtime nook-oci run --rootfs DIR ...`): exit
# codes, -it, exec, stop, kill, pause/unpause, --memory, --cpus, --network none, --read-only, -v.
# podman gets a private --root/--runroot/--tmpdir under this test's NOOK_HOME.  This host needs
# --ulimit nofile/nproc (podman's defaults exceed what root may set here) and cgroupfs.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/oci_lib.sh"

require_bin "$NOOK_OCI"
reason=$(oci_stage_reason)
if [[ -n "$reason" ]]; then
        plan 1
        skip_expected "$reason"
        exit 0
fi
command -v podman >/dev/null || bail_out "needs podman (Debian package podman)"
command -v busybox >/dev/null && command -v jq >/dev/null && command -v script >/dev/null ||
        bail_out "needs busybox (busybox-static), jq and script (bsdutils)"
plan 28

P="$NOOK_HOME/podman"
R="$NOOK_HOME/rootfs"
mkdir -p "$P/tmp"
oci_rootfs "$R"
pod() {
        timeout --kill-after=5 60 podman --runtime "$NOOK_OCI" --root "$P/root" --runroot "$P/runroot" \
                --tmpdir "$P/tmp" --cgroup-manager cgroupfs --events-backend file "$@"
}
U=(--ulimit nofile=1024:1024 --ulimit nproc=4096:4096)
cleanup_podman() {
        pod rm -af -t 0 >/dev/null 2>&1
        awk -v d="$P" '{ mp = $5 } index(mp, d) == 1 { print mp }' /proc/self/mountinfo | sort -r |
                while IFS= read -r mp; do umount -l "$mp" 2>/dev/null; done
}
trap 'cleanup_podman; _tap_finish' EXIT

out=$(pod run --rm "${U[@]}" --network none --rootfs "$R" sh -c 'echo hello; exit 3' 2>&1)
is "$? $out" "3 hello" "run --rm: output and exit status 3"
out=$(pod run --rm "${U[@]}" --network none --rootfs "$R" true 2>&1)
is "$? $out" "0 " "run --rm true: status 0"
out=$(pod run --rm "${U[@]}" --network none --rootfs "$R" no-such-command 2>&1)
is "$?" 127 "a missing command: podman's 127 from nook-oci's 'executable file not found' ($out)"
out=$(pod run --rm "${U[@]}" --network none --rootfs "$R" false 2>&1)
is "$?" 1 "run --rm false: status 1"
out=$(pod run --rm "${U[@]}" --network none --rootfs "$R" /etc/passwd 2>&1)
is "$?" 126 "a file that is not a program: 126, as runc"
like "$out" 'exec: "/etc/passwd": permission denied' "with runc's message, no stale errno"
out=$(pod run --rm "${U[@]}" --network none --rootfs "$R" /tmp 2>&1)
is "$?" 126 "a directory as the command: 126"
# a user namespace of podman's (--uidmap): the bind sources (/etc/hosts, /etc/resolv.conf in the
# runroot, root's 0700 here as podman's own /run/containers/storage) are opened before the clone;
# from the namespace they were out of reach.  The root filesystem is one the mapped root can
# reach, as podman's storage gives it.
RU=$(mktemp -d /var/tmp/nook-oci-userns.XXXXXX)
chmod 0755 "$RU"
cp -a "$R" "$RU/rootfs"
out=$(pod run --rm "${U[@]}" --network none --uidmap 0:100000:65536 --gidmap 0:100000:65536 --rootfs "$RU/rootfs" \
        sh -c 'cat /proc/self/uid_map; test -s /etc/hosts && echo hosts' 2>&1)
like "$(tr -s ' \n' ' ' <<<"$out")" "^ ?0 100000 65536 hosts" "--uidmap: the container runs in podman's user namespace, /etc/hosts bound ($out)"
rm -rf "$RU"
# conmon ignores SIGPIPE: an ignored signal must not reach the container's program
out=$(pod run --rm "${U[@]}" --network none --rootfs "$R" grep SigIgn /proc/self/status 2>&1)
like "$out" "SigIgn:[[:space:]]+0+$" "no signal the engine ignored is ignored in the container ($out)"

out=$(sleep 3 | script -qec "$(printf '%q ' podman --runtime "$NOOK_OCI" --root "$P/root" --runroot "$P/runroot" \
        --tmpdir "$P/tmp" --cgroup-manager cgroupfs --events-backend file run --rm -it "${U[@]}" --network none \
        --rootfs "$R" sh -c 'tty; exit 4')" /dev/null 2>&1)
st=$?
like "$out" "/dev/pts/0" "-it: the container's stdio is a pty (--console-socket)"
is "$st" 4 "-it: exit status 4 through the pty"

out=$(pod run --rm "${U[@]}" --network none --memory 64m --cpus 0.5 --rootfs "$R" \
        sh -c 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null ||
               cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max' 2>&1)
like "$(tr '\n' ' ' <<<"$out")" "^67108864 50000" "--memory 64m and --cpus 0.5 reach the container's cgroup"
# the container may read its cgroup, never raise its own limits (the v1 binds were writable)
out=$(pod run --rm "${U[@]}" --network none --memory 64m --pids-limit 20 --rootfs "$R" sh -c '
        for f in memory/memory.limit_in_bytes pids/pids.max memory.max pids.max; do
                [ -e /sys/fs/cgroup/$f ] || continue
                echo max > /sys/fs/cgroup/$f 2>/dev/null && echo "wrote $f"
                cat /sys/fs/cgroup/$f
        done; mkdir /sys/fs/cgroup/pids/sub /sys/fs/cgroup/sub 2>/dev/null && echo "made a sub-cgroup"' 2>&1)
unlike "$out" "wrote|made a sub-cgroup" "the container cannot write its cgroup files nor make a sub-cgroup"
like "$(tr '\n' ' ' <<<"$out")" "67108864 .*20 " "and its limits stay as set"
out=$(pod run --rm "${U[@]}" --network none --rootfs "$R" ls /sys/class/net 2>&1)
is "$out" "lo" "--network none: only lo"
out=$(pod run --rm "${U[@]}" --network none --read-only --rootfs "$R" sh -c 'touch /x 2>&1; echo rc=$?' 2>&1)
like "$out" "Read-only file system.*rc=1" "--read-only: the root is read-only"
mkdir -p "$NOOK_HOME/vol"
echo from-host >"$NOOK_HOME/vol/f"
out=$(pod run --rm "${U[@]}" --network none -v "$NOOK_HOME/vol:/data" --rootfs "$R" sh -c 'cat /data/f; echo from-guest > /data/g' 2>&1)
is "$out $(cat "$NOOK_HOME/vol/g" 2>/dev/null)" "from-host from-guest" "-v: a host folder read and written"
out=$(pod run --rm "${U[@]}" --network none -v "$NOOK_HOME/vol:/data:ro" --rootfs "$R" sh -c 'touch /data/h 2>&1' 2>&1)
like "$out" "Read-only file system" "-v ...:ro is read-only"

pod run -d --name c1 "${U[@]}" --network none --rootfs "$R" sleep 1000 >/dev/null 2>&1
is "$(pod inspect c1 --format '{{.State.Status}}' 2>&1)" "running" "run -d: running"
out=$(pod exec c1 sh -c 'echo exec-ok $$; exit 5' 2>&1)
is "$? $out" "5 exec-ok 2" "exec: in the container's pid namespace, status 5"
out=$(sleep 3 | script -qec "$(printf '%q ' podman --runtime "$NOOK_OCI" --root "$P/root" --runroot "$P/runroot" \
        --tmpdir "$P/tmp" --cgroup-manager cgroupfs --events-backend file exec -it c1 tty)" /dev/null 2>&1)
like "$out" "/dev/pts/" "exec -it: a pty"
pod pause c1 >/dev/null 2>&1
is "$(pod inspect c1 --format '{{.State.Status}}' 2>&1)" "paused" "pause"
pod unpause c1 >/dev/null 2>&1
is "$(pod inspect c1 --format '{{.State.Status}}' 2>&1)" "running" "unpause"
pod kill -s KILL c1 >/dev/null 2>&1
wait_for 10 bash -c "[[ \$(podman --root '$P/root' --runroot '$P/runroot' --tmpdir '$P/tmp' --events-backend file inspect c1 --format '{{.State.Status}}') == exited ]]"
is "$(pod inspect c1 --format '{{.State.Status}} {{.State.ExitCode}}' 2>&1)" "exited 137" "kill -s KILL: exited 137"
pod rm c1 >/dev/null 2>&1

pod run -d --name c2 "${U[@]}" --network none --rootfs "$R" sh -c 'trap "exit 9" TERM; while :; do sleep 0.1; done' >/dev/null 2>&1
sleep 0.5
pod stop -t 5 c2 >/dev/null 2>&1
c2_id=$(pod inspect c2 --format '{{.Id}}' 2>/dev/null)
is "$(pod inspect c2 --format '{{.State.Status}} {{.State.ExitCode}}' 2>&1)" "exited 9" "stop: SIGTERM reaches the container's trap"
pod rm c2 >/dev/null 2>&1
# podman gives the runtime no --root: nook-oci's default, /run/nook-oci, holds the state
is "$(ls -d /run/nook-oci/"${c2_id:-none}" "$P"/runroot/nook-oci/"${c2_id:-none}" 2>/dev/null)" "" \
        "podman rm: nothing left of the container in nook-oci's --root ($c2_id)"
is "$(find /sys/fs/cgroup -maxdepth 3 -type d -path '*libpod_parent/libpod-*' 2>/dev/null | wc -l)" "0" "no libpod cgroup left"
out=$(pod ps -a --format '{{.Names}}' 2>&1)
is "$out" "" "no container left in podman"
