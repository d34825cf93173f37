#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Create with the egress gateway on vs off (issue #14: "create with the gateway on within 1.2x of
# create without it"), and the gateway's memory per idle sandbox (budget 2 MiB RSS).  Both
# sandboxes have --network public; "on" adds --egress-audit (the gateway, no secret).  Prints, never
# asserts.  Traffic through the gateway (latency, throughput): bench/egress_bench.sh.
#   bench/egress_create_bench.sh [BUILD_DIR] [ROUNDS]
set -eu
build=${1:-build-bench}
rounds=${2:-10}
nook="$build/src/cli/nook"
if [ ! -x "$build/src/egress/nook-egress" ]; then
        echo "egress_create_bench: no nook-egress in $build: skipped"
        exit 0
fi
if [ ! -w /dev/net/tun ]; then
        echo "egress_create_bench: no access to /dev/net/tun (the network needs it): skipped"
        exit 0
fi
NOOK_HOME=$(mktemp -d /tmp/nook-egress-bench.XXXXXX)
chmod 700 "$NOOK_HOME"
export NOOK_HOME
trap 'rm -rf "$NOOK_HOME"' EXIT

run_rounds() { # EXTRA-ARGS...: total ms of rounds x (create + exec true + rm)
        t0=$(date +%s%N)
        i=0
        while [ $i -lt "$rounds" ]; do
                "$nook" create "b$i" --network public "$@" >/dev/null
                "$nook" exec "b$i" -- true
                "$nook" rm "b$i" >/dev/null
                i=$((i + 1))
        done
        echo $((($(date +%s%N) - t0) / 1000000))
}

run_rounds >/dev/null # warm-up: the host image, caches
off=$(run_rounds)
on=$(run_rounds --egress-audit)
echo "create + exec true + rm, --network public, $rounds rounds:"
awk -v off="$off" -v on="$on" -v n="$rounds" 'BEGIN {
        printf "  gateway off  %7.1f ms/round\n  gateway on   %7.1f ms/round   ratio %.2fx (budget 1.2x)\n",
                off / n, on / n, on / off }'

"$nook" create idle --network public --egress-audit >/dev/null
sup=$("$nook" inspect --format '{{.supervisorPid}}' idle)
gw=$(pgrep -P "$sup" -x nook-egress || true)
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
if [ -n "$gw" ]; then
        # Pss and private are the per-sandbox cost; VmRSS also counts pages other processes share
        share=$(awk '/^Pss:/ {pss = $2} /^Private_(Clean|Dirty):/ {priv += $2}
                END {print "Pss " pss " KiB, private " priv " KiB"}' "/proc/$gw/smaps_rollup")
        echo "idle sandbox: gateway RSS $(rss "$gw") KiB, $share (budget 2048), supervisor RSS $(rss "$sup") KiB"
fi
"$nook" rm idle >/dev/null
