#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook-egress bench, gateway level, in the netns world of tests/integration/egress_world.sh
# (root; no packet leaves it).  The HTTPS upstream of up.test is bench-egress-upstream
# (bench/egress_upstream.c: answers from a prebuilt buffer, several TLS records per write), not
# the tests' Python server, which capped the direct leg with its own CPU (bench/README.md); both
# legs use the same client (curl, the same options) and the same upstream.  The TLS version and
# cipher of each leg are printed.  Printed, never asserted:
#   - a small HTTPS request (new connection each, curl time_total): through the gateway from the
#     guest netns vs direct from the gateway's netns; medians and ratio (issue budget <= 1.3x);
#   - a 100 MB HTTPS download: throughput through the gateway vs direct (budget >= 80 %), runs
#     alternating via, direct, and via with h2 towards the gateway, medians (NOOK_BENCH_BIG_RUNS,
#     default 5), and the gateway's CPU time per download;
#   - the gateway's memory idle (after start), after the traffic, and idle again (10 s after the
#     last connection it hands pages back): VmRSS, Pss, private (Private_Clean + Private_Dirty).
#     VmRSS counts library pages other processes map too; Pss and private are per-sandbox costs.
# NOOK_BENCH_LINK=RATE (tc's syntax: 1gbit, 10gbit) shapes the upstream's link (its veth, both
# legs cross it) with a token bucket, as a real remote server sits behind a link of some rate;
# NOOK_BENCH_CIPHERS sets the upstream's TLS 1.3 suites (default: AES-128-GCM first, as the gateway).
# Usage: bench/egress_bench.sh [BUILD_DIR]   (default build-bench, else build-test, else build)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-}
[[ -z $build ]] && for d in build-bench build-test build; do [[ -x $src/$d/src/egress/nook-egress ]] && build=$src/$d && break; done
EGRESS=$build/src/egress/nook-egress
UPSTREAM=$build/bench/bench-egress-upstream
[[ -x $EGRESS ]] || { echo "egress_bench: no nook-egress in '$build'" >&2; exit 1; }
[[ -x $UPSTREAM ]] || { echo "egress_bench: no bench/bench-egress-upstream in '$build' (ninja -C '$build')" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "egress_bench: needs root (ip netns)" >&2; exit 1; }
N=${NOOK_BENCH_N:-21}
BIG_RUNS=${NOOK_BENCH_BIG_RUNS:-5}
MB=${NOOK_BENCH_MB:-100}
. "$src/tests/integration/egress_world.sh"
D=$(mktemp -d /tmp/nook-egress-bench.XXXXXX)
trap egress_world_down EXIT
egress_world_up "$D" || { echo "egress_bench: cannot build the world" >&2; exit 1; }
# up.test:443 (198.51.100.10) is served by the bench's upstream instead of the Python one
kill "${EG_UP_PIDS[0]}"
for _ in $(seq 100); do # gone (or a zombie: it was disowned), so its port is free
        [[ $(awk '{print $3}' "/proc/${EG_UP_PIDS[0]}/stat" 2>/dev/null) =~ ^(Z|)$ ]] && break
        sleep 0.05
done
ip netns exec "$EG_P" "$UPSTREAM" 198.51.100.10 443 "$D/up.crt" "$D/up.key" ${NOOK_BENCH_CIPHERS:+"$NOOK_BENCH_CIPHERS"} 2>"$D/upstream.log" &
EG_UP_PIDS+=("$!")
disown # egress_world_down kills it (no "Killed" line at the end)
up_ready=0
for _ in $(seq 100); do
        ip netns exec "$EG_P" bash -c "exec 3<>/dev/tcp/198.51.100.10/443" 2>/dev/null && up_ready=1 && break
        sleep 0.1
done
((up_ready)) || { echo "egress_bench: bench-egress-upstream did not listen: $(cat "$D/upstream.log")" >&2; exit 1; }
if [[ -n ${NOOK_BENCH_LINK:-} ]]; then
        ip netns exec "$EG_P" tc qdisc add dev "${EG_P}b" root tbf rate "$NOOK_BENCH_LINK" burst 1mb latency 50ms ||
                { echo "egress_bench: cannot shape the upstream's link to '$NOOK_BENCH_LINK'" >&2; exit 1; }
        echo "the upstream's link (both legs) shaped to $NOOK_BENCH_LINK (tc tbf)"
fi
python3 - "$D/config.json" "$D/testca.crt" <<'PY'
import json, sys
json.dump({"sandbox": "bench", "mode": "public",
           "secrets": [{"name": "T", "placeholder": "nook-ph-" + "0" * 32, "value": "v", "hosts": ["up.test"]}],
           "extraCaPem": open(sys.argv[2]).read()}, open(sys.argv[1], "w"))
PY
egress_gateway_up "$EGRESS" "$D/config.json" || exit 1

mem() { # PID: "VmRSS KiB, Pss KiB, private KiB"
        awk '/^VmRSS/ {print "VmRSS " $2 " KiB,"}' "/proc/$1/status" | tr '\n' ' '
        awk '/^Pss:/ {pss = $2} /^Private_(Clean|Dirty):/ {priv += $2}
                END {print "Pss " pss " KiB, private " priv " KiB"}' "/proc/$1/smaps_rollup"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; } # the whole VM's, all CPUs
mem_idle=$(mem "$EG_GW_PID")

# HTTP/1.1 on both paths (the upstream speaks it); via_h2: the guest side in HTTP/2
via() { ip netns exec "$EG_G" curl -sS -o /dev/null --http1.1 --cacert "$D/state/ca.pem" --resolve up.test:443:198.51.100.10 "$@"; }
via_h2() { ip netns exec "$EG_G" curl -sS -o /dev/null --http2 --cacert "$D/state/ca.pem" --resolve up.test:443:198.51.100.10 "$@"; }
direct() { ip netns exec "$EG_X" curl -sS -o /dev/null --http1.1 --cacert "$D/testca.crt" --resolve up.test:443:198.51.100.10 "$@"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
small() { # via|direct
        local i
        for i in $(seq "$N"); do "$1" -w '%{time_total}\n' https://up.test/small; done | median
}
tls_of() { sed -n 's/^\* SSL connection using \(.*\)$/\1/p'; }
n0=$(grep -c '^cipher' "$D/upstream.log")
leg_guest=$(via -v https://up.test/warm 2>&1 | tls_of)
leg_up=$(grep '^cipher' "$D/upstream.log" | sed -n "$((n0 + 1))p" | cut -d' ' -f2- | sed 's| | / |')
leg_direct=$(direct -v https://up.test/warm 2>&1 | tls_of)
echo "TLS per leg: curl -> gateway $leg_guest; gateway -> upstream ${leg_up:-?}; direct curl -> upstream $leg_direct"
small_via=$(small via)
small_direct=$(small direct)
bytes=$((MB * 1024 * 1024))
big_via=() big_direct=() big_h2=()
gw_ticks=0 h2_ticks=0 vm_via=0 vm_direct=0
for _ in $(seq "$BIG_RUNS"); do # interleaved: via, direct, h2 towards the gateway
        t0=$(cpu_ticks "$EG_GW_PID") c0=$(busy_ticks)
        big_via+=("$(via -w '%{speed_download}' "https://up.test/big/$bytes")")
        gw_ticks=$((gw_ticks + $(cpu_ticks "$EG_GW_PID") - t0)) vm_via=$((vm_via + $(busy_ticks) - c0))
        c0=$(busy_ticks)
        big_direct+=("$(direct -w '%{speed_download}' "https://up.test/big/$bytes")")
        vm_direct=$((vm_direct + $(busy_ticks) - c0))
        t0=$(cpu_ticks "$EG_GW_PID")
        big_h2+=("$(via_h2 -w '%{speed_download}' "https://up.test/big/$bytes")")
        h2_ticks=$((h2_ticks + $(cpu_ticks "$EG_GW_PID") - t0))
done
mem_busy=$(mem "$EG_GW_PID")
load=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$small_via" "$small_direct" "$MB" "$(getconf CLK_TCK)" "$gw_ticks" "$h2_ticks" "$vm_via" "$vm_direct" "${big_via[*]}" "${big_direct[*]}" "${big_h2[*]}" <<'PY'
import statistics, sys
sv, sd, mb, hz, ticks, h2_ticks, vm_via, vm_direct = map(float, sys.argv[1:9])
bv, bd, bh = ([float(x) for x in a.split()] for a in sys.argv[9:12])
mv, md, mh = (statistics.median(x) for x in (bv, bd, bh))
print("small HTTPS request (median, new connection): via gateway %.2f ms, direct %.2f ms, ratio %.2fx (budget <= 1.3x)" % (sv * 1e3, sd * 1e3, sv / sd))
print("%d MB download, median of %d alternating runs: via gateway %.0f MB/s, direct %.0f MB/s, %.0f %% of direct (budget >= 80 %%)" % (mb, len(bv), mv / 1e6, md / 1e6, 100 * mv / md))
print("  runs via: %s; direct: %s MB/s" % (" ".join("%.0f" % (x / 1e6) for x in bv), " ".join("%.0f" % (x / 1e6) for x in bd)))
print("  gateway CPU (user+sys) per %d MB through it: %.2f s" % (mb, ticks / hz / len(bv)))
print("  the VM's CPU (all processes, others' work too) per download: via %.2f s, direct %.2f s" % (vm_via / hz / len(bv), vm_direct / hz / len(bd)))
print("%d MB download with h2 towards the gateway, median: %.0f MB/s, %.0f %% of direct (runs: %s MB/s; gateway CPU %.2f s per download)" % (mb, mh / 1e6, 100 * mh / md, " ".join("%.0f" % (x / 1e6) for x in bh), h2_ticks / hz / len(bh)))
PY
echo "load average after the downloads: $load"
echo "gateway memory idle after start: $mem_idle (budget <= 2 MiB per sandbox)"
echo "gateway memory right after the traffic: $mem_busy"
if [[ ${NOOK_BENCH_IDLE_WAIT:-12} != 0 ]]; then
        sleep "${NOOK_BENCH_IDLE_WAIT:-12}" # the gateway trims 10 s after its last connection
        echo "gateway memory idle again (${NOOK_BENCH_IDLE_WAIT:-12} s later): $(mem "$EG_GW_PID")"
fi
