#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/oci/compare.sh, which decides the oci stage of scripts/test, and validation.sh's command
# line: regressions found, known failures (names and patterns) forgiven, stale entries reported,
# programs the reference failed as a whole not compared, bad files and options refused with a
# message. Plain text processing: runs in every stage.
. "$(dirname "$0")/lib.sh"

here=$(cd "$(dirname "$0")/../oci" && pwd)
compare="$here/compare.sh"
validation="$here/validation.sh"
plan 14

D="$NOOK_HOME/cmp"
mkdir -p "$D"
cat >"$D/ref.txt" <<'EOF'
ok - kill: kill MUST send the signal
ok - mounts: mount /proc has expected type
ok - mounts: mount /proc has expected type
ok - state: state MUST return the state
not ok - hugetlb: get hugetlb cgroup data
ok - pcf: expected bounding capability CAP_KILL set
not ok - pcf (exited 1)
ok - hooks: lifecycle
ok - process: has expected hostname # TODO
EOF
cat >"$D/nook.txt" <<'EOF'
ok - kill: kill MUST send the signal
ok - mounts: mount /proc has expected type
not ok - mounts: mount /proc has expected type
not ok - state: state MUST return the state
ok - hugetlb: get hugetlb cgroup data
ok - pcf: lifecycle
not ok - hooks: lifecycle
#   error: Hooks MUST be called in the listed order
not ok - process: has expected hostname # TODO
EOF

# cmp_run ARGS...: runs compare.sh, sets $out and $status.
cmp_run() {
        out=$("$compare" "$@" 2>&1)
        status=$?
}

: >"$D/none.txt"
cmp_run "$D/ref.txt" "$D/nook.txt" "$D/none.txt"
is "$status" 1 "a check the reference passes and nook-oci fails, unlisted, is a regression (status 1)"
like "$out" "regression: mounts: mount /proc has expected type \(runc passed it 2x, nook-oci 1x\)" \
        "checks are counted per name: one of two equal names lost is a regression"
like "$out" "regression: hooks: lifecycle" "a failed lifecycle check the reference passed is a regression"
unlike "$out" "regression: (pcf|hugetlb|process)" \
        "not compared: checks the reference failed, TODO checks, programs it failed as a whole"
like "$out" $'\n0 passed, 3 failed$' "the last line counts the regressions"

printf '%s\n' '# comment' '' 'mounts: mount /proc has expected type — flaky here' \
        'state: * -- pattern, ascii separator' 'hooks: lifecycle — known' 'gone: test — fixed long ago' >"$D/known.txt"
cmp_run "$D/ref.txt" "$D/nook.txt" "$D/known.txt"
is "$status:${out##*$'\n'}" "0:1 passed, 0 failed" "every regression listed (exact names and a pattern): passes"
like "$out" "stale known failure .*: gone: test" "an entry that matches nothing is reported as stale"

printf 'state: state MUST return the state\n' >"$D/bad.txt"
cmp_run "$D/ref.txt" "$D/nook.txt" "$D/bad.txt"
like "$status:$out" "^2:.*bad.txt:1: want 'NAME — REASON'" "a known-failures line without a reason is refused, naming file and line"

printf 'random text\nnot a result\n' >"$D/junk.txt"
cmp_run "$D/junk.txt" "$D/nook.txt" "$D/none.txt"
like "$status:$out" "^2:.*junk.txt' has no check lines" "a file that is not a results file is refused"

cmp_run "$D/missing.txt" "$D/nook.txt"
like "$status:$out" "^2:.*cannot read results file '.*missing.txt'" "a missing results file is refused"

cmp_run --skeleton "$D/ref.txt" "$D/nook.txt"
like "$status:$out" "^0:.*mounts: mount /proc has expected type — REASON\?" "--skeleton lists the regressions to fill in"

out=$("$validation" --timeout abc runc 2>&1)
like "$?:$out" "^2:.*--timeout 'abc' is not a positive number of seconds" "validation.sh: a bad --timeout is a usage error"
out=$("$validation" --frobnicate runc 2>&1)
like "$?:$out" "^2:.*unknown option '--frobnicate'" "validation.sh: an unknown option is a usage error"
out=$("$validation" runc crun 2>&1)
like "$?:$out" "^2:.*one RUNTIME only" "validation.sh: two runtimes are a usage error"
