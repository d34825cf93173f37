#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The `oci` stage of scripts/test (issue 16): the OCI runtime-tools validation suite against the
# reference runtime (runc) and against nook-oci, then tests/oci/compare.sh against
# tests/oci/known-failures.txt. It fails only when nook-oci fails a check runc passes that the
# known-failures file does not list; runc's own failures (this host has no SELinux, AppArmor,
# hugetlb or net_cls cgroups, ...) never fail it.
#
#   tests/oci/ci.sh [BUILD_DIR]      (default build-test; nook-oci is BUILD_DIR/src/oci/nook-oci)
#
# Bounded for CI: each validation program gets NOOK_OCI_TIMEOUT seconds (default 30; runc needs
# under 10), each runtime's run NOOK_OCI_BUDGET seconds (default 170; runc takes 80-125 on two
# busy cores); the programs not started in time count as failed. With the suite's one-time build
# (~40-70 s, cached in BUILD_DIR/oci-validation) the stage stays under 8 minutes; scripts/test
# also wraps it in `timeout 480`.
#
# Knobs: NOOK_OCI_REFERENCE (default runc), NOOK_OCI_RUNTIME (default BUILD_DIR's nook-oci),
# NOOK_OCI_TOOLS_TARBALL (see validation.sh), NOOK_MUST_WORK=1 (a missing runtime or suite is a
# failure instead of a skip).
#
# Last line: "N passed, N failed[, N skipped]": one entry per runtime run (it ran to the end)
# and one for the comparison, or one failure per regression.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
build=${1:-build-test}
[[ "$build" == /* ]] || build="$src/$build"
reference=${NOOK_OCI_REFERENCE:-runc}
nook_oci=${NOOK_OCI_RUNTIME:-$build/src/oci/nook-oci}
timeout_s=${NOOK_OCI_TIMEOUT:-30}
budget=${NOOK_OCI_BUDGET:-170}
cache="$build/oci-validation"

out=$(mktemp -d /tmp/nook-oci-ci.XXXXXX) || exit 1
trap 'rm -rf "$out"' EXIT

# cannot REASON: the stage cannot run here; a skip, or a failure under NOOK_MUST_WORK=1.
cannot() {
        echo "oci: $1"
        if [[ "${NOOK_MUST_WORK:-0}" == 1 ]]; then
                echo "0 passed, 1 failed"
                exit 1
        fi
        echo "0 passed, 0 failed, 1 skipped"
        exit 0
}

[[ $(id -u) == 0 ]] || cannot "the validation suite needs root"
command -v "$reference" >/dev/null || cannot "no reference runtime '$reference' (apt-get install runc)"
[[ -x "$nook_oci" ]] || cannot "nook-oci is not built: no $nook_oci"

echo "== building the suite (cached in $cache)"
"$here/validation.sh" --cache "$cache" --build-only || cannot "the validation suite could not be built (above)"

passed=0
failed=0
for who in reference nook; do
        if [[ $who == reference ]]; then rt=$reference; else rt=$nook_oci; fi
        echo "== validation against $rt"
        "$here/validation.sh" --cache "$cache" --timeout "$timeout_s" --budget "$budget" \
                --results "$out/$who.txt" "$rt" >"$out/$who.out" 2>&1
        rc=$?
        # The failures as they came, and the count; the full list stays out of the CI log.
        sed -n '/^# all checks:/q;p' "$out/$who.out"
        tail -n 1 "$out/$who.out"
        if [[ $rc -gt 1 || ! -s "$out/$who.txt" ]]; then
                echo "oci: the validation run against $rt did not complete (status $rc)"
                failed=$((failed + 1))
        else
                passed=$((passed + 1))
        fi
done

if [[ -s "$out/reference.txt" && -s "$out/nook.txt" ]]; then
        echo "== nook-oci against $reference and tests/oci/known-failures.txt"
        "$here/compare.sh" "$out/reference.txt" "$out/nook.txt" "$here/known-failures.txt" >"$out/compare.out" 2>&1
        rc=$?
        cat "$out/compare.out"
        line=$(tail -n 1 "$out/compare.out")
        if [[ $rc == 0 ]]; then
                passed=$((passed + 1))
        elif [[ "$line" =~ ^0\ passed,\ ([0-9]+)\ failed$ ]]; then
                failed=$((failed + BASH_REMATCH[1]))
        else
                failed=$((failed + 1))
        fi
fi
echo "$passed passed, $failed failed"
((failed == 0))
