#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# containerd drives nook-oci (issue 16): a private containerd (its own --root, --state and
# --address under this test's NOOK_HOME, the CRI plugin off, the host's v1/hybrid cgroups), a
# busybox image built here with umoci and imported with `ctr image import` (no network), and
# `ctr run --runtime io.containerd.runc.v2 --runc-binary RUNTIME` (the runtime options'
# BinaryName) for runc, the reference, then nook-oci: output, exit codes, a detached task with a
# memory limit, exec, kill, delete, a tty. Each runtime is called through a wrapper that logs its
# arguments, so the test proves which binary the shim ran.
#
# Real root only: containerd's shim writes /run/containerd and makes cgroups and mounts that
# only the host's root may; as a user or inside `unshare -r` every check is skip_expected.
. "$(dirname "$0")/lib.sh"

NOOK_OCI=$(realpath -m "$NOOK_BUILD_DIR/src/oci/nook-oci") # absolute: engines run it from elsewhere
per_runtime=10
plan $((3 + 2 * per_runtime))

skip_all_expected() {
        local i
        for ((i = 0; i < 3 + 2 * per_runtime; i++)); do skip_expected "$1"; done
        exit 0
}
skip_all_missing() {
        local i
        for ((i = 0; i < 3 + 2 * per_runtime; i++)); do skip "$1"; done
        exit 0
}

nook_rootful || skip_all_expected "containerd and its runc shim need the host's real root (cgroups, mounts, /run/containerd); this stage is uid $(id -u) in $(awk 'NR==1{print $1, $2, $3}' /proc/self/uid_map)"
for b in containerd ctr containerd-shim-runc-v2 runc umoci skopeo script; do
        command -v "$b" >/dev/null || skip_all_missing "no '$b' (scripts/deps.sh installs containerd, runc, umoci, skopeo)"
done
busybox=$(command -v busybox)
if [[ -z "$busybox" ]] || ! file -L "$busybox" 2>/dev/null | grep -q 'statically linked'; then
        skip_all_missing "no static busybox for the test image (apt-get install busybox-static)"
fi

T="$NOOK_HOME/ctrd"
# containerd namespace: unique per run (the random part of NOOK_HOME), so no cgroup or runtime state
# left by an earlier, killed run can be met again under a reused pid
ns="nooktest-${NOOK_HOME##*.}"
mkdir -p "$T"
# ctr_ ARGS: ctr against our containerd, 30 s at most. Once a call timed out containerd is taken as
# stuck: what it and the runtimes were doing goes to the log once, and later calls fail at once
# (a stuck containerd must cost one timeout, not one per remaining check).
ctr_() {
        [[ -e "$T/stuck" ]] && return 124
        timeout --kill-after=5 30 ctr --address "$T/c.sock" --namespace "$ns" "$@"
        local rc=$?
        if [[ $rc == 124 ]]; then # (137 is not a timeout here: a task killed by SIGKILL)
                {
                        echo "ctr $* timed out; processes:"
                        ps -eo pid,ppid,stat,wchan:24,args | grep -E '[n]ook-oci|[r]unc|[s]him|[c]ontainerd' | cut -c1-200
                } >"$T/stuck"
                diag "$(cat "$T/stuck")" >&2
        fi
        return $rc
}

# stop_pid PID: TERM, up to 10 s to go, then KILL; never waits unbounded (a containerd stuck on a
# shim must not hold the test until meson's timeout).
stop_pid() {
        local pid=$1 i
        kill -TERM "$pid" 2>/dev/null || return 0
        for ((i = 0; i < 100; i++)); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return 0
}

# ctrd_diag: what containerd and the runtimes said last, for a failed check.
ctrd_diag() {
        [[ -e "$T/stuck" ]] && cat "$T/stuck"
        echo "containerd.log: $(grep -E 'level=(error|warning)' "$T/containerd.log" 2>/dev/null | tail -n 6)"
        local f
        for f in "$T"/*-calls; do
                [[ -f "$f" ]] && echo "$(basename "$f"): $(tail -n 4 "$f" | tr '\n' '|')"
        done
}

# ctrd_cleanup: every task and container of our namespace, then containerd itself. Runs before
# lib.sh's leak check (which would see the shims and containerd: their arguments name NOOK_HOME).
ctrd_pid=""
ctrd_cleanup() {
        local id
        if [[ -n "$ctrd_pid" ]]; then
                rm -f "$T/stuck" # one more try each, for the cleanup
                for id in $(ctr_ containers list -q 2>/dev/null); do
                        ctr_ task kill -s SIGKILL "$id" >/dev/null 2>&1
                        ctr_ task delete --force "$id" >/dev/null 2>&1
                        ctr_ containers delete "$id" >/dev/null 2>&1
                done
                stop_pid "$ctrd_pid"
        fi
        # A shim whose task could not be deleted outlives containerd: ours name our socket.
        local pid d
        for pid in $(pgrep -f -- "-address $T/c.sock" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
        # And the runtime's state of such a task (the shim's --root is /run/containerd/runc/NS).
        for d in "/run/containerd/runc/$ns"/*/; do
                [[ -d "$d" ]] || continue
                for rt in "$NOOK_OCI" "$(command -v runc)"; do
                        [[ -x "$rt" ]] && timeout -k 5 20 "$rt" --root "/run/containerd/runc/$ns" delete --force "$(basename "$d")" >/dev/null 2>&1
                done
        done
        rmdir "/run/containerd/runc/$ns" 2>/dev/null
        # containerd's cgroup parent for our namespace, in every hierarchy (empty once the tasks went)
        for d in /sys/fs/cgroup/*/"$ns"; do
                [[ -d "$d" ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
        done
        return 0
}
# shellcheck disable=SC2154 # _rc is assigned inside the trap string
trap '_rc=$?; ctrd_cleanup; (exit $_rc); _tap_finish' EXIT

# --- the image: busybox on one layer, made with umoci, turned into a docker-archive by skopeo --
build_image() {
        (
                set -e
                cd "$T"
                umoci init --layout oci
                umoci new --image oci:bb
                umoci unpack --image oci:bb bundle >/dev/null
                mkdir -p bundle/rootfs/bin
                cp "$busybox" bundle/rootfs/bin/busybox
                for c in sh echo cat sleep tty; do ln -s busybox "bundle/rootfs/bin/$c"; done
                umoci repack --image oci:bb bundle
                umoci config --image oci:bb --config.cmd /bin/sh --config.env PATH=/bin
                skopeo copy oci:oci:bb docker-archive:bb.tar:local/bb:1
        ) >"$T/image.log" 2>&1
}

cat >"$T/config.toml" <<EOF
version = 2
root = "$T/root"
state = "$T/state"
# No CRI: this test talks to containerd with ctr only. The runc v2 shim reads the cgroup mode of
# the host (v1 controllers plus the unified mount here: hybrid) and uses the v1 controllers.
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$T/c.sock"
[ttrpc]
  address = "$T/c.sock.ttrpc"
[debug]
  address = "$T/debug.sock"
EOF
containerd --config "$T/config.toml" --root "$T/root" --state "$T/state" --address "$T/c.sock" \
        >"$T/containerd.log" 2>&1 &
ctrd_pid=$!
if wait_for 20 ctr_ version >/dev/null 2>&1; then
        ok "a private containerd answers on $T/c.sock"
else
        not_ok "a private containerd answers on $T/c.sock" "$(tail -n 20 "$T/containerd.log")"
        bail_out "containerd did not start"
fi

image=docker.io/local/bb:1
if build_image && ctr_ image import "$T/bb.tar" >>"$T/image.log" 2>&1 && ctr_ image ls -q | grep -qx "$image"; then
        ok "ctr image import of a busybox image built here"
else
        not_ok "ctr image import of a busybox image built here" "$(tail -n 20 "$T/image.log")"
        bail_out "no image"
fi

# task_status ID: RUNNING, STOPPED, ... from `ctr task ls`.
task_status() { ctr_ task ls 2>/dev/null | awk -v id="$1" '$1 == id { print $3 }'; }
task_pid() { ctr_ task ls 2>/dev/null | awk -v id="$1" '$1 == id { print $2 }'; }
is_stopped() { [[ "$(task_status "$1")" == STOPPED ]]; }

# memory_limit_of PID: memory.limit_in_bytes of the v1 memory cgroup PID is in (host view).
memory_limit_of() {
        local path
        path=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' "/proc/$1/cgroup")
        [[ -n "$path" ]] && cat "/sys/fs/cgroup/memory$path/memory.limit_in_bytes"
}

# exercise LABEL RUNTIME: the same $per_runtime checks for one runtime binary.
exercise() {
        local label=$1 runtime=$2 wrap="$T/$1-runtime" calls="$T/$1-calls" o rc id pid
        # LeakSanitizer cannot stop the world once the process joined the container's pid namespace (its
        # tracer is born in that namespace): an ASan-built `nook-oci exec` hangs at exit with
        # detect_leaks=1 (asan stages). Leak checking stays on for every other command.
        cat >"$wrap" <<EOF
#!/bin/sh
echo "\$*" >>'$calls'
case " \$* " in *" exec "*) ASAN_OPTIONS="\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}detect_leaks=0"; export ASAN_OPTIONS ;; esac
exec '$runtime' "\$@"
EOF
        chmod 0755 "$wrap"
        local run=(run --runtime io.containerd.runc.v2 --runc-binary "$wrap")

        o=$(ctr_ "${run[@]}" --rm "$image" "$label-echo" sh -c "echo hello from $label" 2>&1)
        rc=$?
        is "$rc:$o" "0:hello from $label" "$label: ctr run --rm prints the process's output and exits 0" || diag "$(ctrd_diag)"

        ctr_ "${run[@]}" --rm "$image" "$label-exit" sh -c 'exit 3' >/dev/null 2>&1
        is "$?" 3 "$label: ctr run returns the process's exit code (3)"

        if grep -q "create --bundle .*$label-echo" "$calls" 2>/dev/null &&
                grep -q "start $label-echo" "$calls" && grep -q "^--root /run/containerd/runc/$ns " "$calls"; then
                ok "$label: the shim ran the given binary (--root, create --bundle, start)"
        else
                not_ok "$label: the shim ran the given binary (--root, create --bundle, start)" "calls: $(cat "$calls" 2>/dev/null)"
        fi

        id="$label-task"
        ctr_ "${run[@]}" -d --memory-limit 67108864 "$image" "$id" sleep 300 >/dev/null 2>&1
        if wait_for 10 test "$(task_status "$id")" = RUNNING; then
                ok "$label: ctr run -d leaves a RUNNING task"
        else
                not_ok "$label: ctr run -d leaves a RUNNING task" "$(ctr_ task ls 2>&1)" "$(ctrd_diag)"
        fi

        pid=$(task_pid "$id")
        is "$( [[ -n "$pid" && "$pid" != 0 ]] && memory_limit_of "$pid")" 67108864 \
                "$label: --memory-limit is the task's v1 memory cgroup limit on the host"

        # shellcheck disable=SC2016 # $0 expands in the task's shell
        o=$(ctr_ task exec --exec-id e1 "$id" sh -c 'echo in $0; exit 5' "$label" 2>&1)
        rc=$?
        is "$rc:$o" "5:in $label" "$label: ctr task exec runs in the task, with its output and exit code (5)" || diag "$(ctrd_diag)"

        ctr_ task kill -s SIGKILL "$id" >/dev/null 2>&1
        if wait_for 10 is_stopped "$id"; then
                ok "$label: ctr task kill -s SIGKILL stops the task"
        else
                not_ok "$label: ctr task kill -s SIGKILL stops the task" "status: $(task_status "$id")" "$(ctrd_diag)"
        fi

        ctr_ task delete "$id" >/dev/null 2>&1
        rc=$?
        ctr_ containers delete "$id" >/dev/null 2>&1
        if [[ $rc == 0 ]] && ! "$runtime" --root "/run/containerd/runc/$ns" state "$id" >/dev/null 2>&1 &&
                ! ctr_ containers list -q | grep -qx "$id"; then
                ok "$label: ctr task delete removes the container from the runtime's state"
        else
                not_ok "$label: ctr task delete removes the container from the runtime's state" \
                        "delete status $rc" "state: $("$runtime" --root "/run/containerd/runc/$ns" state "$id" 2>&1)"
        fi

        # timeout must leave ctr in the terminal's foreground process group (--foreground): in a
        # background one, ctr's tcsetattr stops it with SIGTTOU. Whether script's $SHELL execs a
        # single command varies (dash does not), so neither may be left to chance.
        o=$(SHELL=/bin/sh script -qec "exec timeout --foreground -k 5 30 ctr --address '$T/c.sock' --namespace '$ns' ${run[*]} --rm -t $image $label-tty sh -c 'tty; exit 4'" /dev/null </dev/null 2>&1)
        rc=$?
        like "$rc:$o" "^4:.*/dev/pts/[0-9]+" "$label: ctr run -t gives the process a terminal (console socket) and its exit code (4)" || diag "$(ctrd_diag)"

        ctr_ "${run[@]}" --rm "$image" "$label-kill" sleep 300 >/dev/null 2>&1 &
        local ctr_run=$!
        wait_for 10 test "$(task_status "$label-kill")" = RUNNING
        ctr_ task kill -s SIGKILL "$label-kill" >/dev/null 2>&1
        wait "$ctr_run"
        is "$?" 137 "$label: a task killed with SIGKILL makes ctr run exit 137" || diag "$(ctrd_diag)"
}

exercise runc "$(command -v runc)"
if [[ -x "$NOOK_OCI" ]]; then
        exercise nook "$NOOK_OCI"
else
        for ((i = 0; i < per_runtime; i++)); do skip "nook-oci is not built ($NOOK_OCI)"; done
fi

# docs/kubernetes.md's handler table, as written there: containerd's CRI plugin must load it. (No
# kubelet or crictl here to send it a pod; this proves the TOML and its keys, not a pod.)
cri_config_loads() {
        local doc c="$T/cri" pid rc=1
        doc="$(cd "$(dirname "$0")/../.." && pwd)/docs/kubernetes.md"
        mkdir -p "$c"
        {
                echo 'version = 2'
                echo "root = \"$c/root\""
                echo "state = \"$c/state\""
                # The first toml block of the doc, without its version line.
                awk '/^```toml/ { inblock = 1; next } inblock && /^```/ { exit } inblock' "$doc" | grep -v '^version'
                cat <<EOF
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".cni]
  conf_dir = "$c/cni"
[grpc]
  address = "$c/c.sock"
[ttrpc]
  address = "$c/c.sock.ttrpc"
[debug]
  address = "$c/debug.sock"
EOF
        } >"$c/config.toml"
        containerd --config "$c/config.toml" >"$c/log" 2>&1 &
        pid=$!
        if wait_for 20 sh -c "ctr --address '$c/c.sock' plugins ls 2>/dev/null | grep -q ' cri .* ok'" &&
                grep -q 'nook:{Type:io.containerd.runc.v2 .*PodAnnotations:\[io.nook.\*\] ContainerAnnotations:\[io.nook.\*\] .*Options:map\[BinaryName:/usr/bin/nook-oci SystemdCgroup:false\]' "$c/log"; then
                rc=0
        fi
        stop_pid "$pid"
        return $rc
}
desc="containerd's CRI plugin loads the nook handler of docs/kubernetes.md (runc.v2 shim, BinaryName, io.nook.* annotations)"
if cri_config_loads; then
        ok "$desc"
else
        not_ok "$desc" "$(cat "$T/cri/config.toml")" "$(grep -E 'level=(error|warning)|cri plugin' "$T/cri/log" | tail -n 5)"
fi
