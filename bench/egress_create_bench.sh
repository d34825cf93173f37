#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Create with the egress gateway on vs off (issue #14: "create with the gateway on within 1.2x of
# create without it"), and the gateway's memory per idle sandbox (budget 2 MiB RSS).  Both
# sandboxes have --network public; "on" adds --egress-audit (the gateway, no secret).  Prints, never
# asserts.  Traffic through the gateway (latency, throughput): bench/egress_bench.sh.
#   bench/egress_create_bench.sh [BUILD_DIR] [ROUNDS]
set -eu
build=${1:-build-bench}
rounds=${2:-40}
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

one_round() { # NAME EXTRA-ARGS...: ms of one create + exec true + rm
        name=$1
        shift
        t0=$(date +%s%N)
        "$nook" create "$name" --network public "$@" >/dev/null
        "$nook" exec "$name" -- true
        "$nook" rm "$name" >/dev/null
        echo $((($(date +%s%N) - t0) / 1000))
}

# Rounds interleaved, the order alternating, so that the VM's drift (its speed moves by half
# within an hour) hits both sides alike; the verdict comes from the median of the per-round
# ratios, as in bench-sandbox and cli-bench (bench/README.md, "Same-round ratios").
one_round warm >/dev/null # warm-up: the host image, caches
one_round warm --egress-audit >/dev/null
samples=$(mktemp)
i=0
while [ $i -lt "$rounds" ]; do
        if [ $((i % 2)) -eq 0 ]; then
                off=$(one_round "f$i")
                on=$(one_round "n$i" --egress-audit)
        else
                on=$(one_round "n$i" --egress-audit)
                off=$(one_round "f$i")
        fi
        echo "$off $on" >>"$samples"
        i=$((i + 1))
done
echo "create + exec true + rm, --network public, $rounds rounds interleaved:"
python3 - "$samples" <<'PY'
import random, statistics, sys
pairs = [tuple(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
off = [a / 1000 for a, _ in pairs]
on = [b / 1000 for _, b in pairs]
ratios = [b / a for a, b in pairs]
rng = random.Random(1)
boot = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
lo, hi = boot[int(0.05 * len(boot))], boot[int(0.95 * len(boot)) - 1]
m = statistics.median(ratios)
verdict = "within budget" if hi <= 1.2 else "OVER budget" if lo > 1.2 else "at the line (the interval spans it)"
print(f"  gateway off  {statistics.median(off):7.1f} ms/round (median)")
print(f"  gateway on   {statistics.median(on):7.1f} ms/round (median)   ratio of medians {statistics.median(on) / statistics.median(off):.2f}x")
print(f"  same-round ratio {m:.2f}x (90% interval {lo:.2f}-{hi:.2f}x, {len(ratios)} pairs)   budget <= 1.2x {verdict}")
PY
rm -f "$samples"

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
