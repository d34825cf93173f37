#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Snapshot create and create-from-snapshot for a writable layer of SIZE MiB (default 100: half
# random bytes, half text-like, in 1 MiB files), against `tar --zstd` of the same directory in
# the same run.  Printed, never asserted.
#   bench/snapshot_bench.sh [SIZE_MIB]     NOOK_BUILD_DIR picks the build (default build-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${1:-100}
B=${NOOK_BUILD_DIR:-build-bench}
NOOK="$PWD/$B/src/cli/nook"
[[ -x "$NOOK" ]] || { echo "snapshot_bench: build $B first (bench/run does)" >&2; exit 1; }
export NOOK_HOME
NOOK_HOME=$(mktemp -d /var/tmp/nook-bench-snap.XXXXXX)
trap '"$NOOK" rm bs bf >/dev/null 2>&1 || true; rm -rf "$NOOK_HOME"' EXIT

ms() { date +%s%N | cut -b1-13; }
"$NOOK" create bs --sticky >/dev/null
"$NOOK" exec bs --sh "mkdir -p /opt/data && cd /opt/data &&
        i=0; while [ \$i -lt $((SIZE / 2)) ]; do head -c 1048576 /dev/urandom >r\$i; i=\$((i+1)); done;
        i=0; while [ \$i -lt $((SIZE - SIZE / 2)) ]; do seq 1 200000 2>/dev/null | head -c 1048576 >t\$i; i=\$((i+1)); done"
"$NOOK" stop bs >/dev/null
sync
UPPER="$NOOK_HOME/sandboxes/bs/upper"

t0=$(ms); "$NOOK" snapshot create bs snap >/dev/null; t1=$(ms)
"$NOOK" create bf --snapshot snap >/dev/null; "$NOOK" exec bf -- true; t2=$(ms)
"$NOOK" snapshot export -q snap "$NOOK_HOME/snap.nsnap"; t3=$(ms)
tar --zstd -C "$UPPER" -cf "$NOOK_HOME/ref.tar.zst" .; t4=$(ms)
tar -C "$UPPER" -cf "$NOOK_HOME/ref.tar" .; t5=$(ms)

create=$((t1 - t0)) boot=$((t2 - t1)) export=$((t3 - t2)) tarz=$((t4 - t3)) tarp=$((t5 - t4))
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
printf '== snapshot, %s MiB writable layer, %s CPUs\n' "$SIZE" "$(nproc)"
printf '%-42s %8s %8s\n' "operation" "ms" "ratio"
printf '%-42s %8d %8s\n' "tar --zstd of the upper dir (reference)" "$tarz" "1.00"
printf '%-42s %8d %8s\n' "tar (uncompressed) of the upper dir" "$tarp" "$(ratio "$tarp" "$tarz")"
printf '%-42s %8d %8s\n' "nook snapshot create" "$create" "$(ratio "$create" "$tarz")"
printf '%-42s %8d %8s\n' "nook create --snapshot + exec true" "$boot" "$(ratio "$boot" "$tarz")"
printf '%-42s %8d %8s\n' "nook snapshot export (zstd)" "$export" "$(ratio "$export" "$tarz")"
printf '%-42s %8s %8s\n' "export file / tar.zst size (bytes)" "$(stat -c %s "$NOOK_HOME/snap.nsnap")" \
        "$(stat -c %s "$NOOK_HOME/ref.tar.zst")"
