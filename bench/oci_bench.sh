#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# nook-oci against runc under real engines (issue 16): the wall time of
#   podman --runtime RT run --rm --network none --rootfs DIR true
#   ctr run --rm --runtime io.containerd.runc.v2 --runc-binary RT IMAGE ID true
# median of N runs each, runtimes alternating run by run (so load drifts hit both alike), and
# the ratio nook-oci / runc (goal: <= 1). Numbers are printed, never asserted.
#
#   bench/oci_bench.sh [--runs N] [--only podman|ctr] [NOOK_OCI]
#
# NOOK_OCI defaults to $NOOK_BENCH_BUILD/src/oci/nook-oci (build-bench, as bench/run builds it).
# Needs root, podman, containerd/ctr, runc, umoci, skopeo and a static busybox. podman gets a
# private store and CONTAINERS_CONF, containerd a private --root/--state/--address, everything
# under one temporary directory removed at the end. `--network none` keeps podman's network
# setup (netavark) out of a number that is about the runtime.
set -uo pipefail

cd "$(dirname "$0")/.."
runs=10
only=""
nook_oci=""
while (($#)); do
        case "$1" in
        --runs) runs=${2:?--runs needs a number}; shift 2 ;;
        --only) only=${2:?--only needs podman or ctr}; shift 2 ;;
        -h | --help) sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "oci_bench.sh: unknown option '$1'" >&2; exit 2 ;;
        *) nook_oci=$1; shift ;;
        esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "oci_bench.sh: --runs '$runs' is not a positive number" >&2; exit 2; }
[[ -z "$only" || "$only" == podman || "$only" == ctr ]] || { echo "oci_bench.sh: --only '$only': podman or ctr" >&2; exit 2; }
nook_oci=${nook_oci:-${NOOK_BENCH_BUILD:-build-bench}/src/oci/nook-oci}
[[ -x "$nook_oci" ]] || { echo "oci_bench.sh: no nook-oci at '$nook_oci' (build it, or name it)" >&2; exit 1; }
nook_oci=$(cd "$(dirname "$nook_oci")" && pwd)/$(basename "$nook_oci")
[[ $(id -u) == 0 ]] || { echo "oci_bench.sh: needs root (podman and containerd create cgroups and mounts)" >&2; exit 1; }
runc=$(command -v runc) || { echo "oci_bench.sh: no runc (apt-get install runc)" >&2; exit 1; }
for b in umoci skopeo busybox; do
        command -v "$b" >/dev/null || { echo "oci_bench.sh: no '$b' (scripts/deps.sh)" >&2; exit 1; }
done

T=$(mktemp -d /tmp/nook-oci-bench.XXXXXX) || exit 1
ctrd_pid=""
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
        if [[ -n "$ctrd_pid" ]]; then
                kill -TERM "$ctrd_pid" 2>/dev/null
                wait "$ctrd_pid" 2>/dev/null
                # The shims leave the runtimes' (empty) --root of our namespace behind.
                rmdir "/run/containerd/runc/nookbench-$$" 2>/dev/null
                # and containerd the (empty) parent cgroup of the namespace in every hierarchy
                rmdir /sys/fs/cgroup/*/"nookbench-$$" /sys/fs/cgroup/"nookbench-$$" 2>/dev/null
        fi
        if command -v podman >/dev/null && [[ -d "$T/storage" ]]; then
                podman --root "$T/storage" --runroot "$T/runroot" --storage-driver vfs rm -af -t 0 >/dev/null 2>&1
        fi
        rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$T/rootfs/bin"
cp "$(command -v busybox)" "$T/rootfs/bin/busybox"
for c in sh true; do ln -s busybox "$T/rootfs/bin/$c"; done

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# median FILE: the median of the numbers in FILE, one per line.
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# measure ENGINE CMD_RUNC... -- CMD_NOOK...: alternates the two commands $runs times (plus one
# warm-up each) and prints "ENGINE runc_ms nook_ms ratio". Any failed run aborts the row.
measure() {
        local engine=$1 i who t0 t1
        shift
        local -a a=() b=()
        while [[ $1 != -- ]]; do a+=("$1"); shift; done
        shift
        b=("$@")
        : >"$T/$engine-runc.ms"
        : >"$T/$engine-nook.ms"
        for ((i = 0; i <= runs; i++)); do
                for who in runc nook; do
                        local -a cmd
                        if [[ $who == runc ]]; then cmd=("${a[@]//@N@/$i}"); else cmd=("${b[@]//@N@/$i}"); fi
                        t0=$(now_ms)
                        if ! "${cmd[@]}" >"$T/out" 2>&1; then
                                echo "oci_bench.sh: $engine with $who failed: ${cmd[*]}" >&2
                                cat "$T/out" >&2
                                printf '%-8s %9s %9s %7s\n' "$engine" - - -
                                return 1
                        fi
                        t1=$(now_ms)
                        ((i > 0)) && echo $((t1 - t0)) >>"$T/$engine-$who.ms"
                done
        done
        local r n
        r=$(median "$T/$engine-runc.ms")
        n=$(median "$T/$engine-nook.ms")
        printf '%-8s %9s %9s %7s\n' "$engine" "$r" "$n" "$(awk -v r="$r" -v n="$n" 'BEGIN { if (r > 0) printf "%.2fx", n / r; else print "-" }')"
}

bench_podman() {
        command -v podman >/dev/null || { echo "oci_bench.sh: no podman, row skipped" >&2; return 0; }
        cat >"$T/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$T/events.log"
tmp_dir = "$T/tmp"
EOF
        local p=(env CONTAINERS_CONF="$T/containers.conf" podman --root "$T/storage" --runroot "$T/runroot" --storage-driver vfs)
        measure podman "${p[@]}" --runtime "$runc" run --rm --network none --rootfs "$T/rootfs" true -- \
                "${p[@]}" --runtime "$nook_oci" run --rm --network none --rootfs "$T/rootfs" true
}

bench_ctr() {
        if ! command -v containerd >/dev/null || ! command -v ctr >/dev/null; then
                echo "oci_bench.sh: no containerd/ctr, row skipped" >&2
                return 0
        fi
        (
                set -e
                cd "$T"
                umoci init --layout oci
                umoci new --image oci:bb
                umoci unpack --image oci:bb bundle
                cp -a rootfs/bin bundle/rootfs/
                umoci repack --image oci:bb bundle
                umoci config --image oci:bb --config.cmd /bin/sh --config.env PATH=/bin
                skopeo copy oci:oci:bb docker-archive:bb.tar:local/bb:1
        ) >"$T/image.log" 2>&1 || { cat "$T/image.log" >&2; echo "oci_bench.sh: image build failed" >&2; return 1; }
        cat >"$T/containerd.toml" <<EOF
version = 2
root = "$T/ctrd-root"
state = "$T/ctrd-state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$T/c.sock"
[ttrpc]
  address = "$T/c.sock.ttrpc"
[debug]
  address = "$T/d.sock"
EOF
        containerd --config "$T/containerd.toml" >"$T/containerd.log" 2>&1 &
        ctrd_pid=$!
        local c=(ctr --address "$T/c.sock" --namespace "nookbench-$$") i
        for ((i = 0; i < 100; i++)); do "${c[@]}" version >/dev/null 2>&1 && break; sleep 0.1; done
        "${c[@]}" image import "$T/bb.tar" >/dev/null || { echo "oci_bench.sh: ctr image import failed" >&2; return 1; }
        local run=(run --rm --runtime io.containerd.runc.v2)
        measure ctr "${c[@]}" "${run[@]}" --runc-binary "$runc" docker.io/local/bb:1 r@N@ true -- \
                "${c[@]}" "${run[@]}" --runc-binary "$nook_oci" docker.io/local/bb:1 n@N@ true
}

echo "== oci: nook-oci vs runc, median of $runs runs (ms), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %9s %9s %7s\n' engine runc nook-oci ratio
rc=0
[[ -z "$only" || "$only" == podman ]] && { bench_podman || rc=1; }
[[ -z "$only" || "$only" == ctr ]] && { bench_ctr || rc=1; }
exit $rc
