# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# A small TAP library for integration tests that drive the real `nook` binary.
# Source it first thing in a tests/integration/test_*.sh file:
#
#       . "$(dirname "$0")/lib.sh"
#       plan 3
#       run_nook --help
#       is "$status" 0 "nook --help exits 0"
#       like "$out" "run" "help mentions run"
#       expect_fail 2 "unknown command" frobnicate
#
# What it gives a test file:
#   - $NOOK, $NOOK_SUPERVISOR, $NOOK_PROBE: the binaries under $NOOK_BUILD_DIR (set by meson).
#   - A fresh NOOK_HOME (mktemp -d under /var/tmp, mode 0700), exported, removed on exit.
#   - NOOK_RUNTIME_DIR="$NOOK_HOME.run": the runtime folders' root of this file alone.
#   - NOOK_IDCLAIMS="$NOOK_HOME.idclaims": the id-range claims of this file alone.
#   - At exit, one more test: nothing leaked (mounts under NOOK_HOME, processes naming it,
#     new nook-* cgroups, runtime folders of removed sandboxes), then the TAP plan line. Exit status 0 only if every test passed.
#
# Skips: `skip "reason"` is a failure when NOOK_MUST_WORK=1 (CI sets it), as with bwrap's
# BWRAP_MUST_WORK. `skip_expected "reason"` is for a feature the current stage can never have
# (e.g. a cgroup limit inside `unshare -r`, where the cgroup tree belongs to the real root);
# it stays a skip in CI, so say precisely why. $NOOK_TEST_STAGE names the stage scripts/test
# is running (root, user, unshare, asan-root, asan-user; empty when run by hand).

set -uo pipefail

NOOK_BUILD_DIR=${NOOK_BUILD_DIR:-}
if [[ -z "$NOOK_BUILD_DIR" ]]; then
        # Run by hand: assume the default test build next to the sources.
        NOOK_BUILD_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build-test"
fi
NOOK="$NOOK_BUILD_DIR/src/cli/nook"
NOOK_SUPERVISOR="$NOOK_BUILD_DIR/src/supervisor/nook-supervisor"
NOOK_PROBE="$NOOK_BUILD_DIR/tests/helpers/nook-probe"
NOOK_TEST_TIMEOUT=${NOOK_TEST_TIMEOUT:-120}
export NOOK_BUILD_DIR NOOK NOOK_SUPERVISOR NOOK_PROBE

_tap_n=0          # tests run
_tap_failed=0     # tests failed
_tap_planned=""   # from plan
_tap_done=0

# Output of the last run_nook.
out=""
err=""
status=0

_tap_result() {
        # _tap_result ok|not_ok DESC [DIRECTIVE]
        local verdict=$1 desc=${2//$'\n'/ } directive=${3:-}
        _tap_n=$((_tap_n + 1))
        if [[ $verdict == ok ]]; then
                echo "ok $_tap_n - $desc${directive:+ # $directive}"
        else
                _tap_failed=$((_tap_failed + 1))
                echo "not ok $_tap_n - $desc${directive:+ # $directive}"
        fi
}

# diag MSG...: TAP comments, one line per line of each MSG.
diag() {
        local m line
        for m in "$@"; do
                while IFS= read -r line; do
                        echo "# $line"
                done <<<"$m"
        done
}

# plan N: the number of tests this file runs (not counting the leak check lib.sh adds).
# plan skip_all REASON: nothing here can run on this host.
plan() {
        if [[ $1 == skip_all ]]; then
                if [[ "${NOOK_MUST_WORK:-0}" == 1 ]]; then
                        _tap_result not_ok "skipped but NOOK_MUST_WORK=1: ${2:-no reason given}"
                        exit 1
                fi
                _tap_done=1
                echo "1..0 # SKIP ${2:-no reason given}"
                exit 0
        fi
        _tap_planned=$1
}

ok() { _tap_result ok "$1"; }
not_ok() {
        _tap_result not_ok "$1"
        [[ $# -gt 1 ]] && diag "${@:2}"
        return 0
}

# check DESC CMD...: ok if CMD succeeds.
check() {
        local desc=$1
        shift
        if "$@"; then ok "$desc"; else not_ok "$desc" "command failed: $*"; return 1; fi
}

# is GOT WANT DESC (is, isnt, like, unlike and check return 1 when the check failed, so that
# `is ... || diag "$err"` shows the cause and `is ... || bail_out ...` stops the file)
is() {
        if [[ "$1" == "$2" ]]; then
                ok "$3"
        else
                not_ok "$3" "got:  '$1'" "want: '$2'"
                return 1
        fi
}

# isnt GOT UNWANTED DESC
isnt() {
        if [[ "$1" != "$2" ]]; then ok "$3"; else not_ok "$3" "got the unwanted '$1'"; return 1; fi
}

# like GOT REGEX DESC (bash ERE)
like() {
        if [[ "$1" =~ $2 ]]; then
                ok "$3"
        else
                not_ok "$3" "got:  '$1'" "want a match for: $2"
                return 1
        fi
}

# unlike GOT REGEX DESC
unlike() {
        if [[ ! "$1" =~ $2 ]]; then ok "$3"; else not_ok "$3" "got:  '$1'" "want no match for: $2"; return 1; fi
}

# skip REASON: a skipped test; a failure under NOOK_MUST_WORK=1.
skip() {
        if [[ "${NOOK_MUST_WORK:-0}" == 1 ]]; then
                _tap_result not_ok "skipped but NOOK_MUST_WORK=1: $1"
        else
                _tap_result ok "$1" "SKIP $1"
        fi
}

# skip_expected REASON: a skip this stage can never avoid; stays a skip in CI.
skip_expected() { _tap_result ok "$1" "SKIP $1"; }

# bail_out REASON: stop the whole file.
bail_out() {
        echo "Bail out! $*"
        _tap_done=1
        _tap_bailed=1
        exit 1
}

_sanitizer_report() {
        [[ "$1" == *"ERROR: AddressSanitizer"* || "$1" == *"ERROR: LeakSanitizer"* ||
                "$1" == *"runtime error:"* ]]
}

# run_nook ARGS...: runs $NOOK with ARGS (stdin from /dev/null unless NOOK_STDIN names a
# file), under a timeout of $NOOK_TEST_TIMEOUT seconds. Sets $out, $err and $status (124 on a
# timeout). A sanitizer report on stderr is a failed test of its own.
run_nook() {
        local ofile efile
        ofile=$(mktemp "$NOOK_HOME.out.XXXXXX")
        efile=$(mktemp "$NOOK_HOME.err.XXXXXX")
        timeout --kill-after=5 "$NOOK_TEST_TIMEOUT" "$NOOK" "$@" \
                <"${NOOK_STDIN:-/dev/null}" >"$ofile" 2>"$efile"
        status=$?
        out=$(cat "$ofile")
        err=$(cat "$efile")
        rm -f "$ofile" "$efile"
        if _sanitizer_report "$err"; then
                not_ok "no sanitizer report from: nook $*" "$err"
        fi
        return 0
}

# expect_fail CODE DESC ARGS...: runs nook ARGS and checks the exit status is CODE and that
# it said something on stderr. $out/$err/$status stay set for further checks.
expect_fail() {
        local code=$1 desc=$2
        shift 2
        run_nook "$@"
        if [[ $status == "$code" && -n "$err" ]]; then
                ok "$desc: nook $* fails with status $code"
        else
                not_ok "$desc: nook $* fails with status $code" \
                        "status: $status" "stderr: $err" "stdout: $out"
        fi
}

# require_bin PATH...: bail out if a binary the file needs was not built.
require_bin() {
        local b
        for b in "$@"; do
                [[ -x "$b" ]] || bail_out "not built: $b (run: ninja -C $NOOK_BUILD_DIR)"
        done
}

# raw_exec SOCK MODE REQUEST-JSON: one exec on a sandbox's control socket by a raw protocol
# client (raw_exec_client.py says what it prints); sock_of NAME: that socket.
raw_exec() { timeout -k 5 150 python3 "$(dirname "${BASH_SOURCE[0]}")/raw_exec_client.py" "$@"; }
sock_of() { compgen -G "$NOOK_RUNTIME_DIR/nook-$(id -u)/*/$1/ctl.sock" | head -1; }

# exec_protocol_checks SOCK NAME: the exec protocol driven by raw_exec on sandbox NAME's socket
# SOCK, 13 tests: the replies with and without "reportStarted" and hostile values of it, a
# detached exec, a command that cannot start, a timeout, a client that vanishes right after its
# request (its command and that one's child are killed), ten clients that hang up right after
# "exited" (their commands' background children survive), a reason cut inside a UTF-8
# character.  Sleeps 630x name the commands it looks for.
exec_protocol_checks() {
        local S=$1 name=$2 bad i long
        # inside an exec: how many processes run the command line $1 exactly
        local count='n=0; for d in /proc/[0-9]*; do [ "$(tr "\\0" " " <$d/cmdline 2>/dev/null)" = "$1 " ] && n=$((n + 1)); done; echo $n'
        is "$(raw_exec "$S" wait '{"op":"exec","argv":["true"]}')" "started exited:0" \
                "a plain exec: \"started\", then \"exited\" with status 0"
        is "$(raw_exec "$S" wait '{"op":"exec","argv":["sh","-c","exit 3"],"reportStarted":false}')" \
                "exited:768" "reportStarted false: only \"exited\" (status 3)"
        is "$(raw_exec "$S" wait '{"op":"exec","argv":["true"],"reportStarted":"no"}')" "started exited:0" \
                "reportStarted as a string: ignored, \"started\" comes"
        is "$(raw_exec "$S" wait '{"op":"exec","argv":["true"],"reportStarted":null}')" "started exited:0" \
                "reportStarted null: ignored, \"started\" comes"
        out=$(raw_exec "$S" wait '{"op":"exec","argv":["sh","-c","exit 0"],"detach":true,"reportStarted":false}')
        like "$out" "^started" "a detached exec gets \"started\" whatever reportStarted says"
        is "$(raw_exec "$S" wait '{"op":"exec","argv":["/no/such/cmd"],"reportStarted":false}')" "exited:32512" \
                "a command that cannot start: \"exited\" with 127, from the helper"
        is "$(raw_exec "$S" wait '{"op":"exec","argv":["sleep","60"],"timeoutMs":500}')" "started exited:9" \
                "a timeout: SIGKILL, answered by the supervisor (it words the reason)"

        raw_exec "$S" close '{"op":"exec","argv":["sh","-c","sleep 6301 & exec sleep 6302"]}'
        check "the vanished client's command and its child are killed" wait_for 30 eval \
                '[[ "$("$NOOK" exec "$name" -- sh -c "$count" x "sleep 6301")$("$NOOK" exec "$name" -- sh -c "$count" x "sleep 6302")" == 00 ]]'

        bad=""
        for i in $(seq 10); do
                out=$(raw_exec "$S" wait '{"op":"exec","argv":["sh","-c","sleep 6303 & exit 0"],"reportStarted":false}')
                [[ $out == "exited:0" ]] || bad+=" $i:$out"
        done
        is "$bad" "" "10 execs whose command leaves a child behind: each one \"exited\" 0"
        sleep 1
        run_nook exec "$name" -- sh -c "$count" x "sleep 6303"
        is "$out" "10" "their clients hung up at once: all 10 background children still run"

        # "cannot run '<200 bytes>': No such file or directory" is cut at 199 bytes, inside an 'é'
        long=$(printf 'é%.0s' $(seq 100))
        run_nook exec "$name" -- "$long"
        is "$status" 127 "a 200-byte non-ASCII command that does not exist: 127, no hang"
        like "$err" "cannot run" "with the reason"
        out=$(raw_exec "$S" wait "{\"op\":\"exec\",\"argv\":[\"$long\"]}")
        is "$out" "exited:32512" "the raw client gets \"exited\" (its reason is valid JSON)"
}

# wait_for SECONDS CMD...: polls every 0.1 s until CMD succeeds; false when time runs out.
wait_for() {
        # Bounded by wall time as well as by tries: a check that itself takes long (a client
        # call to a stuck server) must not multiply the wait by the number of tries.
        local i n=$(($1 * 10)) deadline=$((SECONDS + $1))
        shift
        for ((i = 0; i < n; i++)); do
                "$@" && return 0
                ((SECONDS >= deadline)) && return 1
                sleep 0.1
        done
        return 1
}

# execs_in_a_row NAME N MOD: N execs of `sh -c 'echo $0; exit $(($0 % MOD))' I` in sandbox NAME,
# one after another; EXECS_BAD lists each I whose exit status or output was not its own.
execs_in_a_row() {
        local name=$1 n=$2 mod=$3 i
        EXECS_BAD=""
        for ((i = 1; i <= n; i++)); do
                # shellcheck disable=SC2016 # $0 and $1 expand in the sandbox's shell
                run_nook exec "$name" -- sh -c 'echo "$0"; exit $(($0 % $1))' "$i" "$mod"
                [[ "$status/$out" == "$((i % mod))/$i" ]] || EXECS_BAD+=" $i:$status/$out"
        done
}

# execs_at_once NAME N MOD DIR [PRE]: the same N execs all at once (PRE, e.g. 'sleep 0.2;', runs
# first in each), their output kept in DIR; EXECS_BAD as above, with each one's stderr.
execs_at_once() {
        local name=$1 n=$2 mod=$3 dir=$4 pre=${5:-} i
        for ((i = 1; i <= n; i++)); do
                (
                        # shellcheck disable=SC2016 # $0 and $1 expand in the sandbox's shell
                        timeout 120 "$NOOK" exec "$name" -- sh -c "$pre"' echo "$0"; exit $(($0 % $1))' "$i" "$mod" \
                                >"$dir/out.$i" 2>"$dir/err.$i" </dev/null
                        echo $? >"$dir/rc.$i"
                ) &
        done
        wait
        EXECS_BAD=""
        for ((i = 1; i <= n; i++)); do
                [[ "$(cat "$dir/rc.$i")/$(cat "$dir/out.$i")" == "$((i % mod))/$i" ]] ||
                        EXECS_BAD+=" $i:$(cat "$dir/rc.$i")/$(cat "$dir/out.$i")/$(cat "$dir/err.$i")"
        done
}

# --- leaks -----------------------------------------------------------------------------

_home_tag() {
        # The 8-hex-digit tag nook puts at the end of a cgroup's name: FNV-1a of NOOK_HOME
        # (src/isolate/cgroup.c:hash_home). Test homes are ASCII (mktemp).
        local s=$1 h=2166136261 i c
        for ((i = 0; i < ${#s}; i++)); do
                printf -v c '%d' "'${s:i:1}"
                h=$((((h ^ c) * 16777619) & 0xffffffff))
        done
        printf '%08x' "$h"
}

_nook_cgroups() {
        # Every cgroup directory of this test's NOOK_HOME (nook-NAME-TAG) in any mounted
        # hierarchy, one per line: test files running in parallel do not see each other's.
        find /sys/fs/cgroup -mindepth 1 -maxdepth 6 -type d -name "nook-*-$(_home_tag "$NOOK_HOME")" \
                2>/dev/null | sort
}

_sid_of() {
        # Session id, field 6 of /proc/PID/stat (after the parenthesised comm, which may hold
        # spaces).
        local stat rest
        stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
        rest=${stat##*) }
        read -r _ _ _ sid _ <<<"$rest"
        echo "$sid"
}

# leaks: prints what this file left behind (empty when nothing).
leaks() {
        local f pid sid my_sid
        # Mounts: the test's NOOK_HOME is unique, so any mount point under it is ours.
        awk -v home="$NOOK_HOME" '
                { mp = $5; gsub(/\\040/, " ", mp) }
                index(mp, home) == 1 { print "mount left: " mp }' /proc/self/mountinfo
        # Processes naming NOOK_HOME on their command line, or carrying it in the environment
        # while living in another session (a supervisor that daemonized). One grep over all of
        # /proc; the pattern comes from a file so that grep's own argv does not match.
        my_sid=$(_sid_of $$)
        while IFS= read -r f; do
                pid=${f#/proc/}
                pid=${pid%%/*}
                [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
                echo "process left: $pid $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")"
        done < <(grep -lsF -f <(printf '%s\n' "$NOOK_HOME") /proc/[0-9]*/cmdline)
        while IFS= read -r f; do
                pid=${f#/proc/}
                pid=${pid%%/*}
                sid=$(_sid_of "$pid") || continue # gone meanwhile
                [[ -z "$sid" || "$sid" == "$my_sid" ]] && continue
                grep -qsF -f <(printf '%s\n' "$NOOK_HOME") "/proc/$pid/cmdline" && continue
                echo "process left: $pid $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")"
        done < <(grep -lszxF -f <(printf 'NOOK_HOME=%s\n' "$NOOK_HOME") /proc/[0-9]*/environ)
        # The runtime folder: nothing of a sandbox whose state folder is gone, but the log a
        # failed create keeps for 'nook logs --system' (runtime.md, "The runtime folder").
        local d
        for d in "$NOOK_HOME"/run/*/; do
                [[ -d $d && ! -d $NOOK_HOME/sandboxes/$(basename "$d") ]] || continue
                [[ -z $(ls -A "$d" | grep -vx supervisor.log) ]] && continue
                echo "runtime folder left: $d $(ls -A "$d" | tr '\n' ' ')"
        done
        # ... and no runtime folder but the one $NOOK_HOME/run names (and other homes' a test made)
        if [[ -L $NOOK_HOME/run ]]; then
                find "$NOOK_RUNTIME_DIR" -mindepth 1 -maxdepth 1 ! -name "nook-*" 2>/dev/null |
                        sed 's/^/runtime root entry left: /'
        fi
        # cgroups: compare with what existed when the file started (other sandboxes on a
        # developer's machine are not ours).
        comm -13 <(printf '%s\n' "$_nook_cgroups_before") <(_nook_cgroups) |
                sed -n 's/^/cgroup left: /p' | grep -v '^cgroup left: $' || true
}

_tap_finish() {
        local rc=$? leftover
        if [[ $_tap_done == 1 ]]; then
                _tap_cleanup
                # a bail-out fails the file even when an EXIT trap ran a cleanup before us
                [[ ${_tap_bailed:-0} == 1 ]] && exit 1
                exit $rc
        fi
        _tap_done=1
        leftover=$(leaks)
        if [[ -z "$leftover" ]]; then
                ok "nothing leaked (mounts, processes, cgroups, runtime folders)"
        else
                not_ok "nothing leaked (mounts, processes, cgroups, runtime folders)" "$leftover"
        fi
        if [[ -n "$_tap_planned" && $((_tap_n - 1)) != "$_tap_planned" ]]; then
                not_ok "planned $_tap_planned tests, ran $((_tap_n - 1))"
        fi
        if [[ $rc != 0 && $_tap_failed == 0 ]]; then
                not_ok "test script exited with status $rc"
        fi
        echo "1..$_tap_n"
        _tap_cleanup
        [[ $_tap_failed == 0 ]] && exit 0
        exit 1
}

_tap_cleanup() {
        [[ -n "${NOOK_HOME:-}" && -d "$NOOK_HOME" ]] || return 0
        if [[ "${NOOK_TEST_KEEP:-0}" == 1 ]]; then
                echo "# NOOK_TEST_KEEP=1: kept $NOOK_HOME"
                return 0
        fi
        # A failed test may have left supervisors running (the leak check above reported them):
        # stop them so they cannot disturb the test files that run after this one.
        local pid
        for pid in $(pgrep -f -- "--state $NOOK_HOME/" 2>/dev/null); do
                kill -TERM "$pid" 2>/dev/null
        done
        sleep 0.2
        for pid in $(pgrep -f -- "--state $NOOK_HOME/" 2>/dev/null); do
                kill -KILL "$pid" 2>/dev/null
        done
        # Detach anything a failed test left mounted so rm cannot cross into it.
        awk -v home="$NOOK_HOME" '{ mp = $5; gsub(/\\040/, " ", mp) }
                index(mp, home) == 1 { print mp }' /proc/self/mountinfo | sort -r |
                while IFS= read -r mp; do umount -l "$mp" 2>/dev/null || true; done
        rm -rf --one-file-system "$NOOK_HOME" 2>/dev/null || {
                chmod -R u+rwX "$NOOK_HOME" 2>/dev/null
                rm -rf --one-file-system "$NOOK_HOME" 2>/dev/null
        } || echo "# could not remove $NOOK_HOME"
        # files a test made beside the home, named after it ("$NOOK_HOME.spec.json", ".ca", ...)
        local f
        for f in "$NOOK_HOME".*; do
                [[ -e $f || -L $f ]] && rm -rf --one-file-system -- "$f"
        done
        return 0
}

NOOK_HOME=$(mktemp -d /var/tmp/nook-test.XXXXXXXX) || bail_out "mktemp under /var/tmp failed"
chmod 0700 "$NOOK_HOME"
export NOOK_HOME
# The runtime folders' root (ctl.sock, supervisor.log, locks: src/sandbox/rundir.h): one of this
# file's own, so a test never touches /run/nook or /dev/shm/nook-UID.  nook makes nook-UID/KEY in
# it (1777 like /dev/shm: a test may run nook as another user) and links $NOOK_HOME/run there;
# it goes with the home ("$NOOK_HOME".* below).
NOOK_RUNTIME_DIR="$NOOK_HOME.run"
mkdir -m 1777 "$NOOK_RUNTIME_DIR" || bail_out "mkdir $NOOK_RUNTIME_DIR failed"
export NOOK_RUNTIME_DIR
# The host-wide claims on the id-range pool (src/sandbox/idclaim.h): this file's own too, so
# that tests running at once never see each other's state folders' claims.
NOOK_IDCLAIMS="$NOOK_HOME.idclaims"
export NOOK_IDCLAIMS
_nook_cgroups_before=$(_nook_cgroups)
trap _tap_finish EXIT
trap 'exit 130' INT TERM
diag "NOOK_HOME=$NOOK_HOME stage=${NOOK_TEST_STAGE:-manual} uid=$(id -u) must_work=${NOOK_MUST_WORK:-0}"

# can_become_nook_test: true when this test can run commands as the unprivileged user nook-test
# (real root only: inside `unshare -r` runuser cannot set groups).
can_become_nook_test() {
        [[ $(id -u) == 0 ]] && id nook-test >/dev/null 2>&1 && command -v runuser >/dev/null &&
                runuser -u nook-test -- true 2>/dev/null
}

# nook_rootful: true when nook takes its rootful path here (real host root: the identity uid
# map), false for a user and for root inside `unshare -r`.
nook_rootful() {
        [[ $(id -u) == 0 ]] && [[ $(awk 'NR==1{print $1, $2, $3}' /proc/self/uid_map) == "0 0 4294967295" ]]
}

# nook_idmapped: true when each sandbox here gets its own host id range and an idmapped workspace
# and volumes (real root, Linux >= 5.19, NOOK_HOME on ext4/xfs/btrfs/tmpfs): nook doctor's
# "sandbox identity" row for this NOOK_HOME (docs/design/security.md).
nook_idmapped() {
        nook_rootful && "$NOOK" doctor --json 2>/dev/null |
                jq -e '.checks[] | select(.name == "sandbox identity") | .ok' >/dev/null
}

# tree_dump DIR: one line per entry below DIR, sorted: its path, mode, link count and content (a
# file's bytes, a symlink's target), names and bytes as Python bytes literals, so that two trees
# compare byte for byte whatever their names hold (0xff, a newline).
tree_dump() {
        python3 - "$1" <<'PY'
import os, stat, sys
root = os.fsencode(sys.argv[1])
for p in sorted(os.path.join(dp, n) for dp, dns, fns in os.walk(root) for n in dns + fns):
    st = os.lstat(p)
    what = os.readlink(p) if stat.S_ISLNK(st.st_mode) else \
        open(p, "rb").read() if stat.S_ISREG(st.st_mode) else b"dir"
    print(repr(os.path.relpath(p, root)), oct(st.st_mode), st.st_nlink, repr(what))
PY
}
