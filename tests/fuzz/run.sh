#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the libFuzzer harnesses (clang, ASan+UBSan, -Dfuzz=true) into build-fuzz and runs
# every fuzz_* executable for FUZZ_SECONDS (default 30) against a copy of its seed corpus,
# tests/fuzz/corpus/<name without fuzz_>/, so that new inputs libFuzzer finds do not land in
# git. A crash, leak, timeout or sanitizer report fails that harness; its reproducer is kept
# under build-fuzz/fuzz-artifacts/<name>/ (rerun: build-fuzz/tests/fuzz/<name> <file>).
#
# Knobs: FUZZ_SECONDS, FUZZ_JOBS (default: the number of cores), FUZZ_ONLY="fuzz_a fuzz_b", FUZZ_BUILD_DIR (default build-fuzz),
#        FUZZ_KEEP_CORPUS=1 (keep the grown corpus copy and print where it is).
# The last line is "N passed, N failed" over the harnesses.
set -uo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$src" || exit 1
seconds=${FUZZ_SECONDS:-30}
builddir=${FUZZ_BUILD_DIR:-build-fuzz}
passed=0
failed=0

setup_args=(-Dfuzz=true -Dtests=true -Dtest_hooks=true -Dwerror=true -Dbuildtype=debugoptimized -Db_sanitize=address,undefined
        -Db_lundef=false)
if [[ -f "$builddir/build.ninja" ]]; then
        CC=clang meson setup --reconfigure "$builddir" "${setup_args[@]}" >/dev/null
else
        rm -rf "$builddir"
        CC=clang meson setup "$builddir" "${setup_args[@]}" >/dev/null
fi || {
        echo "fuzz: meson setup $builddir failed"
        echo "0 passed, 1 failed"
        exit 1
}

# name<TAB>path (relative to the build dir, as ninja names targets) of every fuzz_* executable.
mapfile -t targets < <(meson introspect "$builddir" --targets | python3 -c '
import json, os, sys
root = os.path.realpath(sys.argv[1])
for t in json.load(sys.stdin):
    # targets are named fuzz-<parser>; the corpus folder is tests/fuzz/corpus/<parser with _>
    if t["type"] == "executable" and t["name"].startswith(("fuzz_", "fuzz-")):
        print(t["name"].replace("-", "_") + "\t" + os.path.relpath(os.path.realpath(t["filename"][0]), root))
' "$builddir" | sort)
if [[ -n "${FUZZ_ONLY:-}" ]]; then
        mapfile -t targets < <(printf '%s\n' "${targets[@]}" | grep -E "^($(tr ' ' '|' <<<"$FUZZ_ONLY"))"$'\t')
fi
if ((${#targets[@]} == 0)); then
        echo "fuzz: no fuzz_* harness in $builddir (tests/fuzz/meson.build registers none yet)"
        echo "0 passed, 0 failed"
        exit 0
fi

paths=()
for t in "${targets[@]}"; do paths+=("${t#*$'\t'}"); done
if ! ninja -C "$builddir" "${paths[@]}"; then
        echo "fuzz: building the harnesses failed"
        echo "0 passed, ${#targets[@]} failed"
        exit 1
fi

work=$(mktemp -d /tmp/nook-fuzz.XXXXXX)
trap '[[ "${FUZZ_KEEP_CORPUS:-0}" == 1 ]] && echo "fuzz: corpora kept in $work" || rm -rf "$work"' EXIT
# fuzz_one NAME EXE: runs one harness; its verdict goes to $work/NAME.verdict and its report to
# $work/NAME.report, printed in order once every harness has finished.
fuzz_one() {
        local name=$1 exe=$2 seeds corpus artifacts nseeds=0 rc
        seeds="tests/fuzz/corpus/${name#fuzz_}"
        corpus="$work/$name/corpus"
        artifacts="$builddir/fuzz-artifacts/$name"
        mkdir -p "$corpus" "$artifacts"
        if [[ -d "$seeds" ]]; then
                cp -a "$seeds/." "$corpus/"
                nseeds=$(find "$seeds" -type f | wc -l)
        fi
        {
                echo "fuzz: $name: ${seconds}s from $nseeds seeds ($seeds)"
                # -timeout: one input running this long is a hang; -rss_limit_mb: a blow-up, not a
                # parser bug of ours, at 2 GiB.
                "$exe" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
                        -artifact_prefix="$artifacts/" "$corpus" >"$work/$name.log" 2>&1
                rc=$?
                if [[ $rc == 0 ]]; then
                        echo ok >"$work/$name.verdict"
                        echo "fuzz: $name: ok, $(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$work/$name.log" |
                                grep -oE '[0-9]+$') runs, corpus $(find "$corpus" -type f | wc -l) files"
                else
                        echo failed >"$work/$name.verdict"
                        tail -n 40 "$work/$name.log"
                        echo "fuzz: $name: FAILED (status $rc); reproducer in $artifacts/:"
                        ls "$artifacts" | sed 's/^/  /'
                fi
        } >"$work/$name.report" 2>&1
}

# As many harnesses at once as there are cores (FUZZ_JOBS): each is single-threaded.
jobs_max=${FUZZ_JOBS:-$(nproc)}
for t in "${targets[@]}"; do
        while (($(jobs -rp | wc -l) >= jobs_max)); do
                wait -n
        done
        fuzz_one "${t%%$'\t'*}" "$builddir/${t#*$'\t'}" &
done
wait
for t in "${targets[@]}"; do
        name=${t%%$'\t'*}
        cat "$work/$name.report" 2>/dev/null
        if [[ "$(cat "$work/$name.verdict" 2>/dev/null)" == ok ]]; then
                passed=$((passed + 1))
        else
                failed=$((failed + 1))
        fi
done

echo "$passed passed, $failed failed"
((failed == 0))
