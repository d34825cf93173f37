#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook-egress bench, gateway level, in the netns world of tests/integration/egress_world.sh
# (root; no packet leaves it).  Printed, never asserted:
#   - a small HTTPS request (new connection each, curl time_total): through the gateway from the
#     guest netns vs direct from the gateway's netns; medians and ratio (issue budget <= 1.3x);
#   - a 100 MB HTTPS download: throughput through the gateway vs direct (budget >= 80 %);
#   - the gateway's memory idle (after start) and after the traffic: VmRSS, RssAnon, Pss.
# Usage: bench/egress_bench.sh [BUILD_DIR]   (default build-bench, else build-test, else build)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-}
[[ -z $build ]] && for d in build-bench build-test build; do [[ -x $src/$d/src/egress/nook-egress ]] && build=$src/$d && break; done
EGRESS=$build/src/egress/nook-egress
[[ -x $EGRESS ]] || { echo "egress_bench: no nook-egress in '$build'" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "egress_bench: needs root (ip netns)" >&2; exit 1; }
N=${NOOK_BENCH_N:-21}
MB=${NOOK_BENCH_MB:-100}
. "$src/tests/integration/egress_world.sh"
D=$(mktemp -d /tmp/nook-egress-bench.XXXXXX)
trap egress_world_down EXIT
egress_world_up "$D" || { echo "egress_bench: cannot build the world" >&2; exit 1; }
python3 - "$D/config.json" "$D/testca.crt" <<'PY'
import json, sys
json.dump({"sandbox": "bench", "mode": "public",
           "secrets": [{"name": "T", "placeholder": "nook-ph-" + "0" * 32, "value": "v", "hosts": ["up.test"]}],
           "extraCaPem": open(sys.argv[2]).read()}, open(sys.argv[1], "w"))
PY
egress_gateway_up "$EGRESS" "$D/config.json" || exit 1

mem() { # PID: "VmRSS RssAnon Pss" in KiB
        local rss anon pss
        rss=$(awk '/^VmRSS/ {print $2}' "/proc/$1/status")
        anon=$(awk '/^RssAnon/ {print $2}' "/proc/$1/status")
        pss=$(awk '/^Pss:/ {print $2}' "/proc/$1/smaps_rollup")
        echo "$rss $anon $pss"
}
read -r idle_rss idle_anon idle_pss < <(mem "$EG_GW_PID")

# HTTP/1.1 on both paths (the upstream speaks it); via_h2: the guest side in HTTP/2
via() { ip netns exec "$EG_G" curl -sS -o /dev/null --http1.1 --cacert "$D/state/ca.pem" --resolve up.test:443:198.51.100.10 "$@"; }
via_h2() { ip netns exec "$EG_G" curl -sS -o /dev/null --http2 --cacert "$D/state/ca.pem" --resolve up.test:443:198.51.100.10 "$@"; }
direct() { ip netns exec "$EG_X" curl -sS -o /dev/null --http1.1 --cacert "$D/testca.crt" --resolve up.test:443:198.51.100.10 "$@"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
small() { # via|direct
        local i
        for i in $(seq "$N"); do "$1" -w '%{time_total}\n' https://up.test/small; done | median
}
via https://up.test/warm >/dev/null
small_via=$(small via)
small_direct=$(small direct)
bytes=$((MB * 1024 * 1024))
big_via=$(via -w '%{speed_download}' "https://up.test/big/$bytes")
big_direct=$(direct -w '%{speed_download}' "https://up.test/big/$bytes")
big_h2=$(via_h2 -w '%{speed_download}' "https://up.test/big/$bytes")
read -r busy_rss busy_anon busy_pss < <(mem "$EG_GW_PID")

python3 - "$small_via" "$small_direct" "$big_via" "$big_direct" "$MB" "$big_h2" <<'PY'
import sys
sv, sd, bv, bd, mb, bh = map(float, sys.argv[1:7])
print("small HTTPS request (median, new connection): via gateway %.2f ms, direct %.2f ms, ratio %.2fx (budget <= 1.3x)" % (sv * 1e3, sd * 1e3, sv / sd))
print("%d MB download: via gateway %.0f MB/s, direct %.0f MB/s, %.0f %% of direct (budget >= 80 %%)" % (mb, bv / 1e6, bd / 1e6, 100 * bv / bd))
print("%d MB download with h2 towards the gateway: %.0f MB/s, %.0f %% of direct" % (mb, bh / 1e6, 100 * bh / bd))
PY
echo "gateway memory idle: VmRSS $((idle_rss / 1024)).$(((idle_rss % 1024) * 10 / 1024)) MiB, RssAnon ${idle_anon} KiB, Pss ${idle_pss} KiB (budget <= 2 MiB)"
echo "gateway memory after the traffic: VmRSS ${busy_rss} KiB, RssAnon ${busy_anon} KiB, Pss ${busy_pss} KiB"
