#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# podman with nook-oci as a configured runtime (issue 16), beyond the --runtime PATH --rootfs
# tests of test_oci_podman*: a containers.conf `[engine.runtimes]` entry used by name
# (`podman --runtime nook`), the same entry as the engine's default `runtime = "nook"`, and an
# image `podman load`ed from a docker-archive built here (umoci + skopeo, no network), run with
# run/exec/stop/rm. runc is run through the same checks first, as the reference. Podman gets a
# private store (--root/--runroot under NOOK_HOME, vfs driver) and CONTAINERS_CONF of its own.
# Each runtime is called through a wrapper that logs its arguments: the log proves which binary
# podman picked for the name.
#
# Rootful only (real root): rootless podman needs its own user namespace setup, and as a user
# or inside `unshare -r` every check is skip_expected.
. "$(dirname "$0")/lib.sh"

NOOK_OCI=$(realpath -m "$NOOK_BUILD_DIR/src/oci/nook-oci") # absolute: engines run it from elsewhere
per_runtime=9
total=$((1 + 2 * per_runtime))
plan "$total"

skip_all() {
        local i kind=$1
        for ((i = 0; i < total; i++)); do "$kind" "$2"; done
        exit 0
}
nook_rootful || skip_all skip_expected "rootful podman needs the host's real root; this stage is uid $(id -u) in $(awk 'NR==1{print $1, $2, $3}' /proc/self/uid_map)"
for b in podman conmon runc umoci skopeo; do
        command -v "$b" >/dev/null || skip_all skip "no '$b' (scripts/deps.sh installs podman, runc, umoci, skopeo)"
done
busybox=$(command -v busybox)
if [[ -z "$busybox" ]] || ! file -L "$busybox" 2>/dev/null | grep -q 'statically linked'; then
        skip_all skip "no static busybox for the test image (apt-get install busybox-static)"
fi

T="$NOOK_HOME/podman"
mkdir -p "$T/tmp" "$T/rootfs/bin"
cp "$busybox" "$T/rootfs/bin/busybox"
for c in sh echo sleep; do ln -s busybox "$T/rootfs/bin/$c"; done

# wrapper LABEL BINARY: a runtime that logs its arguments to $T/LABEL-calls, then execs BINARY.
wrapper() {
        # LeakSanitizer cannot stop the world once the process joined the container's pid namespace (its
        # tracer is born in that namespace): an ASan-built `nook-oci exec` hangs at exit with
        # detect_leaks=1 (asan stages). Leak checking stays on for every other command.
        cat >"$T/$1-runtime" <<EOF
#!/bin/sh
echo "\$*" >>'$T/$1-calls'
case " \$* " in *" exec "*) ASAN_OPTIONS="\${ASAN_OPTIONS:+\$ASAN_OPTIONS:}detect_leaks=0"; export ASAN_OPTIONS ;; esac
exec '$2' "\$@"
EOF
        chmod 0755 "$T/$1-runtime"
}
wrapper runc "$(command -v runc)"
[[ -x "$NOOK_OCI" ]] && wrapper nook "$NOOK_OCI"

# containers.conf: the two runtimes by name; the ulimits this host's podman needs (issue 16);
# no network (nothing here needs one); cgroupfs, not systemd; files under $T. exercise() adds
# one per runtime with `runtime = NAME`, the engine's default.
write_conf() {
        cat <<EOF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
netns = "none"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$T/events.log"
tmp_dir = "$T/tmp"
$1
[engine.runtimes]
runcref = ["$T/runc-runtime"]
nook = ["$T/nook-runtime"]
EOF
}
write_conf "" >"$T/containers.conf"
export CONTAINERS_CONF="$T/containers.conf"

pod() { timeout --kill-after=5 120 podman --root "$T/storage" --runroot "$T/runroot" --storage-driver vfs "$@"; }

pod_cleanup() {
        pod rm -a -f -t 0 >/dev/null 2>&1
        pod rmi -a -f >/dev/null 2>&1
        return 0
}
# shellcheck disable=SC2154 # _rc is assigned inside the trap string
trap '_rc=$?; pod_cleanup; (exit $_rc); _tap_finish' EXIT

image=docker.io/local/bb:1
if (
        set -e
        cd "$T"
        umoci init --layout oci
        umoci new --image oci:bb
        umoci unpack --image oci:bb bundle >/dev/null
        cp -a rootfs/bin bundle/rootfs/
        umoci repack --image oci:bb bundle
        umoci config --image oci:bb --config.cmd /bin/sh --config.env PATH=/bin
        skopeo copy oci:oci:bb docker-archive:bb.tar:local/bb:1
) >"$T/image.log" 2>&1 && pod load -q -i "$T/bb.tar" >>"$T/image.log" 2>&1 &&
        pod image exists "$image"; then
        ok "podman load of a docker-archive built here gives $image"
else
        not_ok "podman load of a docker-archive built here gives $image" "$(tail -n 20 "$T/image.log")"
fi

# exercise LABEL NAME BINARY: the checks for the runtime containers.conf calls NAME.
exercise() {
        local label=$1 name=$2 binary=$3 calls="$T/$1-calls" o rc id

        o=$(pod --runtime "$name" run --rm --rootfs "$T/rootfs" sh -c "echo rootfs $label; exit 3" 2>&1)
        rc=$?
        is "$rc:$o" "3:rootfs $label" "$label: podman --runtime $name run --rm --rootfs: output and exit code (3)"

        if grep -q '^create --bundle ' "$calls" 2>/dev/null && grep -q '^start ' "$calls" &&
                grep -q '^delete ' "$calls"; then
                ok "$label: containers.conf's [engine.runtimes] $name is the binary podman ran (create, start, delete)"
        else
                not_ok "$label: containers.conf's [engine.runtimes] $name is the binary podman ran (create, start, delete)" \
                        "calls: $(cat "$calls" 2>/dev/null)"
        fi

        o=$(pod --runtime "$name" info --format '{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Path}}' 2>&1)
        is "$o" "$name $T/$label-runtime" "$label: podman info reports the runtime $name and its path"

        o=$(pod --runtime "$name" run --rm "$image" sh -c "echo image $label; exit 4" 2>&1)
        rc=$?
        is "$rc:$o" "4:image $label" "$label: an image from podman load runs: output and exit code (4)"

        id="$label-ctr"
        pod --runtime "$name" run -d --name "$id" "$image" sleep 300 >/dev/null 2>&1
        o=$(pod inspect -f '{{.OCIRuntime}} {{.State.Status}}' "$id" 2>&1)
        is "$o" "$name running" "$label: podman run -d: the container runs under $name"

        # shellcheck disable=SC2016 # $0 expands in the container's shell
        o=$(pod exec "$id" sh -c 'echo exec $0; exit 5' "$label" 2>&1)
        rc=$?
        is "$rc:$o" "5:exec $label" "$label: podman exec uses the container's runtime: output and exit code (5)"

        # sleep as PID 1 ignores SIGTERM: stop waits 1 s, then kills.
        pod stop -t 1 "$id" >/dev/null 2>&1
        o=$(pod inspect -f '{{.State.Status}} {{.State.ExitCode}}' "$id" 2>&1)
        is "$o" "exited 137" "$label: podman stop -t 1 ends it with SIGKILL after the grace time (exit 137)"

        # podman passes no --root to a runtime named in containers.conf: the runtime's default
        # state directory holds the container until podman deletes it.
        local full
        full=$(pod inspect -f '{{.Id}}' "$id" 2>/dev/null)
        pod rm "$id" >/dev/null 2>&1
        rc=$?
        if [[ $rc == 0 && -n "$full" ]] && ! pod container exists "$id" && ! "$binary" state "$full" >/dev/null 2>&1; then
                ok "$label: podman rm removes the container, from podman and from the runtime's state"
        else
                not_ok "$label: podman rm removes the container, from podman and from the runtime's state" \
                        "rm status $rc" "state: $("$binary" state "$full" 2>&1)"
        fi

        write_conf "runtime = \"$name\"" >"$T/containers-$label.conf"
        local before after
        before=$(grep -c '^create ' "$calls")
        o=$(CONTAINERS_CONF="$T/containers-$label.conf" pod run --rm --rootfs "$T/rootfs" echo default 2>&1)
        after=$(grep -c '^create ' "$calls")
        is "$o:$((after - before))" "default:1" "$label: containers.conf runtime = \"$name\": podman run without --runtime uses it"
}

exercise runc runcref "$(command -v runc)"
if [[ -x "$NOOK_OCI" ]]; then
        exercise nook nook "$NOOK_OCI"
else
        for ((i = 0; i < per_runtime; i++)); do skip "nook-oci is not built ($NOOK_OCI)"; done
fi
