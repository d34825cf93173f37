#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook checkpoint (issue 15, item 5): no host can checkpoint a nook sandbox's memory today
# (docs/design/checkpoint.md), so the command is refused with missing_feature naming the cause
# found on this host, computed here independently of nook: no CRIU; a CRIU before 4.1 on a kernel
# that maps [vvar_vclock] (confirmed by running the real `criu check`); rootless; otherwise nook's
# own limit.  `nook doctor` prints the same cause.  Fake criu binaries (NOOK_CRIU) walk every
# cause in every stage.  Bad input is refused before the probe, and the sandbox keeps running.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 42

# The criu nook would use (isolate/checkpoint.c:iso_criu_find), or nothing.
host_criu() {
        local d
        if [[ -n "${NOOK_CRIU:-}" ]]; then
                [[ -x $NOOK_CRIU ]] && echo "$NOOK_CRIU"
                return 0
        fi
        for d in /usr/local/sbin /usr/sbin /sbin /usr/local/bin /usr/bin; do
                [[ -x $d/criu ]] && echo "$d/criu" && return 0
        done
        return 0
}

# expected_cause CRIU: the start of the sentence nook must give on this host with that CRIU
# (with the real one: "not installed" where there is none; NOOK_CRIU cases are tested apart).
expected_cause() {
        local criu=$1 ver major minor
        [[ -z $criu ]] && echo "CRIU is not installed" && return
        ver=$("$criu" --version 2>&1 | sed -n 's/^Version: \([0-9]*\.[0-9]*\).*/\1/p' | head -1)
        [[ -z $ver ]] && echo "'$criu --version' did not report a version" && return
        major=${ver%%.*} minor=${ver#*.}
        if grep -q '\[vvar_vclock\]' /proc/self/maps && ((major < 4 || (major == 4 && minor < 1))); then
                echo "CRIU $major.$minor cannot run on this kernel"
        elif ! nook_rootful; then
                echo "rootless: CRIU needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE"
        else
                echo "CRIU $major.$minor cannot dump a nook sandbox"
        fi
}

# refused_with DESC WANT [ARGS...]: nook --json checkpoint ARGS fails with missing_feature and a
# message holding WANT.  3 tests.
refused_with() {
        local desc=$1 want=$2 code msg
        shift 2
        run_nook --json checkpoint "$@"
        is "$status" 1 "$desc: exit status 1"
        code=$(jq -r .error.code <<<"$err" 2>/dev/null)
        msg=$(jq -r .error.message <<<"$err" 2>/dev/null)
        is "$code" missing_feature "$desc: code missing_feature"
        like "$msg" "$want" "$desc: the message names the cause ($want)"
}

fake=$NOOK_HOME/fake-criu # removed with NOOK_HOME
mkdir -p "$fake"
# fake_criu NAME VERSION-LINE: a criu that answers --version and logs every call.
fake_criu() {
        printf '#!/bin/sh\necho "$*" >>%s/%s.calls\necho "%s"\n' "$fake" "$1" "$2" >"$fake/$1"
        chmod 0755 "$fake/$1"
        echo "$fake/$1"
}

run_nook create c1
is "$status" 0 "create c1"

criu=$(host_criu)
want=$(expected_cause "$criu")
diag "criu: ${criu:-none}; expected cause: $want"
refused_with "checkpoint of a running sandbox" "$want" c1
like "$err" "fix: " "the refusal says what would fix it"
refused_with "checkpoint --leave-running" "$want" --leave-running c1

run_nook exec c1 -- true
is "$status" 0 "the sandbox still runs after the refusal"

# The doctor line: same cause, not required, with a fix; the text form prints it.
run_nook doctor --json
row=$(jq -c '.checks[] | select(.name == "memory checkpoints")' <<<"$out" 2>/dev/null)
is "$(jq -r '"\(.ok) \(.required) \(.fix != null)"' <<<"$row" 2>/dev/null)" "false false true" \
        "doctor --json: 'memory checkpoints' is not ok, not required, and has a fix"
like "$(jq -r .detail <<<"$row" 2>/dev/null)" "$want" "doctor names the same cause"
run_nook doctor
like "$out" "memory checkpoints +$want" "doctor's text has the 'memory checkpoints' line"

# The cause is real: the installed CRIU itself fails where nook says it cannot run.
if [[ $want == *"cannot run on this kernel"* ]]; then
        check_out=$("$criu" check 2>&1)
        like "$check_out" "Unexpected rt vDSO area bounds" "the real 'criu check' fails on the vDSO probe"
else
        skip_expected "criu check: the cause here ('$want') is not the vDSO probe"
fi

# Every cause, through fake criu binaries.
NOOK_CRIU=$fake/none refused_with "NOOK_CRIU names nothing" \
        "NOOK_CRIU names '$fake/none', which is not an executable file" c1
NOOK_CRIU=$fake refused_with "NOOK_CRIU names a directory" "which is not an executable file" c1
printf '#!/bin/sh\nexec 1>&- 2>&-\nexec sleep 31.7\n' >"$fake/hang" && chmod 0755 "$fake/hang"
start=$(date +%s)
NOOK_CRIU=$fake/hang refused_with "a criu that never answers" "did not report a version" c1
is "$(($(date +%s) - start <= 8))|$(pgrep -fc 'sleep 31.7')" "1|0" "it is given up on after 5 s, and killed"
NOOK_CRIU=$(fake_criu garbage "criu, some version") refused_with "criu without a version" \
        "did not report a version" c1
f42=$(fake_criu v42 "Version: 4.2")
NOOK_CRIU=$f42 refused_with "CRIU 4.2" "$(NOOK_CRIU=$f42 expected_cause "$f42")" c1
f317=$(fake_criu v317 "Version: 3.17.1")
NOOK_CRIU=$f317 refused_with "CRIU 3.17" "$(NOOK_CRIU=$f317 expected_cause "$f317")" c1

# doctor stays cheap: one `criu --version`, never `criu check`.
rm -f "$fake/v42.calls"
NOOK_CRIU=$f42 run_nook doctor
is "$(cat "$fake/v42.calls" 2>/dev/null)" "--version" "doctor runs criu once, for --version only"

# Bad input is refused before the probe, and changes nothing.
run_nook --json checkpoint 'Bad/../name'
is "$(jq -r .error.code <<<"$err" 2>/dev/null)/$status" "invalid/1" "a bad name is invalid"
run_nook --json checkpoint $'evil\e[31m'
is "$(jq -r .error.code <<<"$err" 2>/dev/null)/$status" "invalid/1" "a name with control characters is invalid"
run_nook --json checkpoint nosuch
is "$(jq -r .error.code <<<"$err" 2>/dev/null)/$status" "not_found/1" "no such sandbox: not_found"
expect_fail 2 "no NAME" checkpoint
expect_fail 2 "two NAMEs" checkpoint c1 c2
expect_fail 2 "an unknown option" checkpoint --tcp-established c1
run_nook ls --json
is "$(jq -r '[.[].name] | join(",")' <<<"$out" 2>/dev/null)" "c1" "nothing was created by the refused requests"

run_nook stop c1
run_nook --json checkpoint c1
is "$(jq -r .error.code <<<"$err" 2>/dev/null)/$status" "state/1" "a stopped sandbox: state (not running)"
run_nook rm c1
is "$status" 0 "rm c1"
