#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Network bench, side by side in one run (root: it builds the netns test world of
# tests/integration/net_topology.sh; no packet leaves it):
#   - TCP throughput (iperf3, 5 s) from a --network public sandbox to the fake public host,
#     against the same from the uplink namespace directly;
#   - the time --network public adds to create (median of N creates, off vs public).
# Usage: bench/net_bench.sh [BUILD_DIR]   (default build-bench, else build)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-}
[[ -z $build ]] && for d in build-bench build; do [[ -x $src/$d/src/cli/nook ]] && build=$src/$d && break; done
NOOK=$build/src/cli/nook
[[ -x $NOOK ]] || { echo "net_bench: no nook binary in '$build'" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "net_bench: needs root (ip netns)" >&2; exit 1; }
command -v iperf3 >/dev/null || { echo "net_bench: iperf3 is not installed" >&2; exit 1; }
N=${NOOK_BENCH_N:-7}
export NOOK_HOME
NOOK_HOME=$(mktemp -d /var/tmp/nook-netbench.XXXXXX)
. "$src/tests/integration/net_topology.sh"
cleanup() {
        ip netns exec "$NET_UP" "$NOOK" rm nb >/dev/null 2>&1
        net_topology_down
        rm -rf "$NOOK_HOME"
}
trap cleanup EXIT
net_topology_up || exit 1
_net_bg "$NET_W" "$NET_DIR/iperf.pid" iperf3 -s -B 198.51.100.10
sleep 0.3

mbps() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["end"]["sum_received"]["bits_per_second"]/1e6))'; }
direct=$(ip netns exec "$NET_UP" iperf3 -c 198.51.100.10 -t 5 -J | mbps)
ip netns exec "$NET_UP" "$NOOK" create --network public nb >/dev/null || exit 1
sandbox=$(ip netns exec "$NET_UP" "$NOOK" exec nb -- iperf3 -c 198.51.100.10 -t 5 -J | mbps)
ip netns exec "$NET_UP" "$NOOK" rm nb >/dev/null

median_create_ms() { # MODE
        local i t0 t1 times=()
        for i in $(seq "$N"); do
                t0=$(date +%s%N)
                ip netns exec "$NET_UP" "$NOOK" create --network "$1" nb >/dev/null || return 1
                t1=$(date +%s%N)
                ip netns exec "$NET_UP" "$NOOK" rm nb >/dev/null
                times+=($(((t1 - t0) / 1000)))
        done
        printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "%.1f", a[int((NR + 1) / 2)] / 1000 }'
}
off=$(median_create_ms off)
pub=$(median_create_ms public)

printf '%-44s %10s %10s %8s\n' "metric" "nook" "baseline" "ratio"
printf '%-44s %10s %10s %8s\n' "TCP to public host, Mbit/s (iperf3 5 s)" "$sandbox" "$direct" \
        "$(python3 -c "print(f'{$sandbox/$direct:.2f}')")"
printf '%-44s %10s %10s %8s\n' "create, ms (median of $N): public vs off" "$pub" "$off" \
        "$(python3 -c "print(f'{$pub/$off:.2f}')")"
printf '%-44s %10s\n' "time --network public adds to create, ms" "$(python3 -c "print(f'{$pub-$off:.1f}')")"
