#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook branch of a running sandbox whose workspace holds FILES files / SIZE MiB (default 5,000 /
# 100), median of ROUNDS (default 5), against `cp -a` of the same tree on the same filesystem;
# then the same on an XFS filesystem with reflink that this script makes on a loop device
# (mkfs.xfs -m reflink=1, NOOK_HOME on it too), against `cp -a --reflink=always`; then pause and
# resume latency (CLI, median of 20) beside the CLI's floor (`nook inspect`).  Printed as ratios,
# never asserted.  Needs root (loop device, mount) for the XFS part; skips it otherwise.
#   bench/branch_bench.sh [FILES] [SIZE_MIB] [ROUNDS]   NOOK_BUILD_DIR picks the build (build-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
FILES=${1:-5000}
SIZE=${2:-100}
ROUNDS=${3:-5}
B=${NOOK_BUILD_DIR:-build-bench}
NOOK="$PWD/$B/src/cli/nook"
export NOOK_SUPERVISOR="$PWD/$B/src/supervisor/nook-supervisor"
[[ -x "$NOOK" ]] || { echo "branch_bench: build $B first (bench/run does)" >&2; exit 1; }
W=$(mktemp -d /var/tmp/nook-bench-branch.XXXXXX)
chmod 0700 "$W"
MNT="$W/xfs"
cleanup() {
        local h
        for h in "$W/home" "$MNT/home"; do
                [[ -d $h ]] || continue
                for s in $(NOOK_HOME=$h "$NOOK" ls -q 2>/dev/null); do NOOK_HOME=$h "$NOOK" rm "$s" >/dev/null 2>&1 || true; done
        done
        mountpoint -q "$MNT" 2>/dev/null && umount "$MNT"
        rm -rf "$W"
}
trap cleanup EXIT

ns() { date +%s%N; }
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
ms() { awk -v n="$1" 'BEGIN { printf "%.1f", n / 1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# fill DIR: FILES files of SIZE/FILES bytes each in 100-file folders (random bytes: no dedup).
fill() {
        python3 - "$1" "$FILES" "$SIZE" <<'PY'
import os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) * 1024 * 1024
each = size // n
blob = os.urandom(each + n)
for i in range(n):
    sub = os.path.join(d, "d%03d" % (i // 100))
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, "f%05d" % i), "wb") as f:
        f.write(blob[i % n:i % n + each])
PY
}

# bench_home HOME LABEL CP_ARGS...: a running sandbox with the tree, ROUNDS branches and copies
# interleaved; prints the medians.
bench_home() {
        local home=$1 label=$2 i t0 t1 b=() c=() e=()
        shift 2
        mkdir -p "$home"
        chmod 0700 "$home"
        export NOOK_HOME=$home
        "$NOOK" create src >/dev/null
        fill "$home/workspaces/src"
        "$NOOK" exec -d src --sh 'while :; do sleep 1; done'
        sync
        for ((i = 0; i < ROUNDS; i++)); do
                t0=$(ns); "$NOOK" branch src "b$i" >/dev/null; t1=$(ns); b+=($((t1 - t0)))
                t0=$(ns); cp "$@" "$home/workspaces/src" "$home/cp$i"; t1=$(ns); c+=($((t1 - t0)))
                t0=$(ns); "$NOOK" create "e$i" >/dev/null; t1=$(ns); e+=($((t1 - t0)))
        done
        for ((i = 0; i < ROUNDS; i++)); do
                "$NOOK" rm "b$i" "e$i" >/dev/null
                rm -rf "$home/cp$i"
        done
        local mb mc me
        mb=$(printf '%s\n' "${b[@]}" | median)
        mc=$(printf '%s\n' "${c[@]}" | median)
        me=$(printf '%s\n' "${e[@]}" | median)
        printf '%-58s %9s %7s\n' "[$label] cp $* of the workspace (reference)" "$(ms "$mc")" "1.00"
        printf '%-58s %9s %7s\n' "[$label] nook branch of the running sandbox" "$(ms "$mb")" "$(ratio "$mb" "$mc")"
        printf '%-58s %9s %7s\n' "[$label]   of which create of an empty sandbox, about" "$(ms "$me")" "$(ratio "$me" "$mc")"
}

printf '== branch: %s files / %s MiB workspace, median of %s, %s CPUs, %s\n' "$FILES" "$SIZE" "$ROUNDS" "$(nproc)" \
        "$(df -T /var/tmp | awk 'NR == 2 { print $2 }') /var/tmp"
printf '%-58s %9s %7s\n' "operation" "ms" "ratio"
bench_home "$W/home" "$(df -T /var/tmp | awk 'NR == 2 { print $2 }')" -a

if [[ $(id -u) == 0 ]] && command -v mkfs.xfs >/dev/null; then
        truncate -s $((SIZE * 6 + 1024))M "$W/xfs.img"
        mkfs.xfs -q -m reflink=1 "$W/xfs.img"
        mkdir -p "$MNT"
        mount -o loop "$W/xfs.img" "$MNT"
        bench_home "$MNT/home" "xfs reflink" -a --reflink=always
        export NOOK_HOME="$MNT/home"
else
        echo "[xfs reflink] skipped: needs root and mkfs.xfs (xfsprogs)"
        export NOOK_HOME="$W/home"
fi

"$NOOK" create pr >/dev/null
"$NOOK" exec -d pr --sh 'while :; do :; done'
p=() r=() f=()
for ((i = 0; i < 20; i++)); do
        t0=$(ns); "$NOOK" pause pr >/dev/null; t1=$(ns); p+=($((t1 - t0)))
        t0=$(ns); "$NOOK" resume pr >/dev/null; t1=$(ns); r+=($((t1 - t0)))
        t0=$(ns); "$NOOK" inspect pr >/dev/null; t1=$(ns); f+=($((t1 - t0)))
done
mp=$(printf '%s\n' "${p[@]}" | median)
mr=$(printf '%s\n' "${r[@]}" | median)
mf=$(printf '%s\n' "${f[@]}" | median)
printf '%-58s %9s %7s\n' "nook inspect (the CLI's floor, reference)" "$(ms "$mf")" "1.00"
printf '%-58s %9s %7s\n' "nook pause (a busy sandbox)" "$(ms "$mp")" "$(ratio "$mp" "$mf")"
printf '%-58s %9s %7s\n' "nook resume" "$(ms "$mr")" "$(ratio "$mr" "$mf")"
"$NOOK" rm pr >/dev/null
