#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Pull + unpack of one multi-layer image (busybox-static plus 4 layers of ~8 MiB of random
# files) from a loopback docker-registry: `nook image pull` (download, verify, unpack every
# layer) against `skopeo copy` to an OCI layout followed by `umoci unpack` (the same work done
# by two Debian tools).  Each round starts from empty stores; prints medians and the ratio.
# Usage: bench/image_pull.sh [BUILD_DIR] [ROUNDS]
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-test}
rounds=${2:-5}
NOOK="$build/src/cli/nook"
for b in "$NOOK" docker-registry skopeo umoci python3; do
        command -v "$b" >/dev/null || [[ -x $b ]] || { echo "bench: missing $b" >&2; exit 1; }
done
# reuse the test helpers (registry start, image build, push) without the TAP machinery
bail_out() { echo "bench: $*" >&2; exit 1; }
diag() { echo "# $*" >&2; }
_tap_finish() { :; }
# shellcheck source=../tests/integration/image_lib.sh
. "$src/tests/integration/image_lib.sh"
img_start_registry bench
bb=$(img_busybox_entries)
layers=$bb
for i in 1 2 3 4; do
        layers+=",$(python3 -c "
import json, os
print(json.dumps([{'name': 'data$i/f%d' % k, 'data': os.urandom(64 * 1024).hex()} for k in range(64)]))")"
done
printf '{"layers": [%s], "config": {"Cmd": ["/bin/sh"]}}' "$layers" | img_build "$IMG_WORK/img" b
img_push "$IMG_WORK/img" b "$REG_bench/bench/img:b" || bail_out "push failed"

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
now() { date +%s%N; }
nook_t=() peer_t=()
for r in $(seq 1 "$rounds"); do
        home="$IMG_WORK/home$r"
        mkdir -p "$home" && chmod 0700 "$home"
        t0=$(now)
        NOOK_HOME=$home NOOK_INSECURE_REGISTRIES=$REG_bench "$NOOK" image pull --quiet "$REG_bench/bench/img:b" >/dev/null ||
                bail_out "nook pull failed"
        t1=$(now)
        skopeo copy --quiet --src-tls-verify=false "docker://$REG_bench/bench/img:b" "oci:$IMG_WORK/oci$r:b" >/dev/null &&
                umoci unpack --rootless --image "$IMG_WORK/oci$r:b" "$IMG_WORK/bundle$r" >/dev/null 2>&1 ||
                bail_out "skopeo + umoci failed"
        t2=$(now)
        nook_t+=($(((t1 - t0) / 1000000)))
        peer_t+=($(((t2 - t1) / 1000000)))
        rm -rf "$home" "$IMG_WORK/oci$r" "$IMG_WORK/bundle$r"
done
n=$(printf '%s\n' "${nook_t[@]}" | median)
p=$(printf '%s\n' "${peer_t[@]}" | median)
echo "image pull + unpack (5 layers, ~$(du -sh "$IMG_WORK/img/blobs" | cut -f1) compressed), median of $rounds:"
echo "  nook image pull            ${n} ms"
echo "  skopeo copy + umoci unpack ${p} ms"
awk -v n="$n" -v p="$p" 'BEGIN { printf "  ratio nook / peers        %.2fx (target <= 1x)\n", n / p }'
