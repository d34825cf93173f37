#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook exec: exit statuses, argv and --sh, env merge, cwd, user, stdin, stdout/stderr, large
# output, --timeout and cancellation killing the whole process tree, --detach, and secrets that
# never reach the host's files, logs or process table.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR" "$NOOK_PROBE"
command -v jq >/dev/null || plan skip_all "jq is needed to read nook's JSON"
plan 58

field() { "$NOOK" inspect "$1" 2>/dev/null | jq -r "$2 // empty" 2>/dev/null; }

# tree_pids TAG: host pids of the sleep-tree run by /workspace/probe-TAG (a copy of the probe
# under a unique name, so that no other process on the host matches).
tree_pids() { pgrep -f "^/workspace/probe-$1 sleep-tree " | tr '\n' ' '; }

# probe_copy TAG: /workspace/probe-TAG, executable.
probe_copy() { cp -p "$ws/probe" "$ws/probe-$1" && chmod 0755 "$ws/probe-$1"; }

# wait_gone TAG SECONDS: wait until no process of that tree remains.
wait_gone() {
        local i
        for ((i = 0; i < $2 * 10; i++)); do
                [[ -z "$(tree_pids "$1")" ]] && return 0
                sleep 0.1
        done
        return 1
}

# kill_tree TAG: clean up a tree a failed test left behind (only our own, unique, pids).
kill_tree() {
        local p
        for p in $(tree_pids "$1"); do kill -9 "$p" 2>/dev/null; done
}

run_nook create -e A=sandbox -e B=sandbox ex
is "$status" 0 "create ex"
ws=$(field ex .workspace)

# The probe: cp, then check whether the executable bit survived.
run_nook cp "$NOOK_PROBE" ex:/workspace/probe
is "$status" 0 "nook cp of the probe into the workspace"
check "nook cp keeps the executable bit" test -x "$ws/probe"
"$NOOK" exec ex -- chmod 0755 /workspace/probe >/dev/null 2>&1

# ---- exit statuses -------------------------------------------------------------------------
run_nook exec ex -- grep SigIgn /proc/self/status
mask=${out##*[[:space:]]}
is "$(( 0x${mask:-0} & (1 << (13 - 1)) ))" 0 "SIGPIPE is not ignored in a command (the supervisor's SIG_IGN is not inherited)"
run_nook exec ex -- sh -c 'yes | head -1'
is "$status:$out:$err" "0:y:" "yes | head -1 ends quietly (SIGPIPE kills yes)"
# a shebang-less script with many arguments: execvp re-runs it with /bin/sh, copying argv onto
# the child's stack (sized from argc)
"$NOOK" ws write ex /noshebang - <<<'echo $#' && "$NOOK" exec ex -- chmod 0755 /workspace/noshebang ||
        bail_out "cannot write the test script"
run_nook exec ex -- /workspace/noshebang $(seq 1 20000)
is "$status:$out" "0:20000" "a shebang-less script with 20000 arguments runs"
run_nook exec ex -- sh -c 'exit 7'
is "$status" 7 "an exit status passes through (7)"
run_nook exec ex -- /workspace/probe exit 0
is "$status" 0 "exit 0 passes through"
run_nook exec ex -- sh -c 'kill -TERM $$'
is "$status" 143 "a command killed by SIGTERM gives 128+15"
run_nook exec ex -- sh -c 'kill -KILL $$'
is "$status" 137 "a command killed by SIGKILL gives 128+9"
run_nook exec ex -- nook-no-such-binary
is "$status" 127 "a missing binary gives 127"
like "$err" "nook-no-such-binary" "...and the message names it"

# ---- argv and --sh -------------------------------------------------------------------------
run_nook exec ex -- printf '[%s]\n' 'a b' '"q"' "it's" '' '$HOME' '*' $'tab\there'
is "$out" $'[a b]\n["q"]\n[it\'s]\n[]\n[$HOME]\n[*]\n[tab\there]' "argv with spaces, quotes, empty, \$, * and tab arrives intact"
run_nook exec ex --sh 'echo "$0" $((6 * 7)) | tr a-z A-Z'
is "$out" "/BIN/SH 42" "--sh runs the string with /bin/sh (expansions, pipes)"
run_nook exec ex -c 'exit 3'
is "$status" 3 "-c STRING: its exit status passes through"

# ---- env, cwd, user ------------------------------------------------------------------------
run_nook exec -e B=exec -e C=exec ex -- sh -c 'echo "$A/$B/$C"'
is "$out" "sandbox/exec/exec" "exec -e overrides and extends the sandbox's create -e env"
run_nook exec ex -- sh -c 'echo "$HOSTNAME:$HOME:${PATH:+path}"'
is "$out" "ex:/root:path" "HOSTNAME, HOME and PATH are set"
run_nook exec ex -- pwd
is "$out" "/workspace" "the default cwd is /workspace"
run_nook exec -w /tmp ex -- pwd
is "$out" "/tmp" "-w /tmp sets the cwd"
run_nook exec ex -w /etc -- pwd
is "$out" "/etc" "options may follow NAME (-w /etc)"
run_nook exec -w relative/dir ex -- pwd
if [[ $status != 0 && $err == *absolute* ]]; then ok "-w relative/dir is refused: must be absolute (status $status)"; else not_ok "-w relative/dir is refused: must be absolute" "status $status" "err: $err"; fi
run_nook exec -w /nonexistent-dir ex -- pwd
isnt "$status" 0 "-w to a missing directory fails"

run_nook exec -u 65534 ex -- id -u
if nook_rootful; then
        is "$status:$out" "0:65534" "rootful: -u 65534 runs as uid 65534"
        run_nook exec -u 65534 ex -- touch /etc/nook-x
        isnt "$status" 0 "rootful: uid 65534 cannot write /etc"
else
        if [[ $status != 0 && $err == *65534* ]]; then
                ok "rootless: -u 65534 fails with a message naming the user (status $status)"
        elif [[ $status == 0 && $out == 65534 ]]; then
                ok "rootless: -u 65534 runs as uid 65534 (a subuid range is mapped)"
        else
                not_ok "rootless: -u 65534 runs as 65534 or fails clearly" "status $status out '$out' err '$err'"
        fi
        ok "rootless: (the write check needs a mapped uid 65534)"
fi

# ---- stdio ---------------------------------------------------------------------------------
printf 'line1\nline2\n' >"$NOOK_HOME.stdin"
NOOK_STDIN="$NOOK_HOME.stdin" run_nook exec -i ex -- cat
is "$out" $'line1\nline2' "-i passes stdin to the command"
NOOK_STDIN="$NOOK_HOME.stdin" run_nook exec ex -- cat
is "$status:$out" "0:" "without -i, stdin is /dev/null"
rm -f "$NOOK_HOME.stdin"
run_nook exec ex -- sh -c 'echo to-out; echo to-err >&2; echo more-out'
is "$out" $'to-out\nmore-out' "stdout carries only stdout"
is "$err" "to-err" "stderr carries only stderr"

big=$("$NOOK" exec ex -- sh -c 'head -c 10485760 /dev/zero | tr "\0" x' 2>/dev/null | wc -c)
is "$big" 10485760 "10 MiB of output arrives in full"
sum_in=$("$NOOK" exec ex -- sh -c 'head -c 3000000 /dev/urandom > /workspace/rand; md5sum < /workspace/rand' 2>/dev/null | cut -d' ' -f1)
sum_out=$("$NOOK" exec ex -- cat /workspace/rand 2>/dev/null | md5sum | cut -d' ' -f1)
is "$sum_out" "$sum_in" "3 MB of binary output arrives byte for byte"

# Output streams as it is produced: the first line arrives before the command ends.
start=$(date +%s%N)
line="" t_first=99999
{
        IFS= read -r line
        t_first=$((($(date +%s%N) - start) / 1000000))
        cat >/dev/null
} < <("$NOOK" exec ex -- sh -c 'echo first; sleep 2; echo second' 2>/dev/null)
if [[ $line == first ]] && ((t_first < 1500)); then ok "stdout streams: the first line arrives after ${t_first} ms, before the command ends"; else not_ok "stdout streams: the first line arrives before the command ends" "got '$line' after ${t_first} ms"; fi

# ---- --timeout kills the whole tree --------------------------------------------------------
# The tree would sleep 8 s: a timeout that does not fire shows as a slow return.
tag=$$-$RANDOM
probe_copy "$tag"
start=$(date +%s%N)
NOOK_TEST_TIMEOUT=20 run_nook exec --timeout 1s ex -- "/workspace/probe-$tag" sleep-tree 8
ms=$((($(date +%s%N) - start) / 1000000))
is "$status" 124 "--timeout 1s: exit status 124"
if ((ms < 4000)); then ok "--timeout 1s: nook exec returned after ${ms} ms"; else not_ok "--timeout 1s: nook exec returns within 4 s" "took ${ms} ms"; fi
like "$err" "timed out" "--timeout: the message says it timed out"
if wait_gone "$tag" 3; then ok "--timeout: no process of the tree remains (host ps)"; else not_ok "--timeout: no process of the tree remains (host ps)" "left: $(tree_pids "$tag")"; kill_tree "$tag"; fi
run_nook exec ex -- ps -eo args
unlike "$out" "probe-$tag" "--timeout: a second exec sees no process of the tree (ps inside)"

# ---- a killed client cancels its command tree ----------------------------------------------
tag=$$-$RANDOM
probe_copy "$tag"
"$NOOK" exec ex -- "/workspace/probe-$tag" sleep-tree 20 >/dev/null 2>&1 &
client=$!
for _ in $(seq 30); do [[ $(tree_pids "$tag" | wc -w) -ge 3 ]] && break; sleep 0.1; done
is "$(tree_pids "$tag" | wc -w)" 3 "the probe's sleep-tree is running (3 processes)"
kill -9 "$client"
wait "$client" 2>/dev/null
if wait_gone "$tag" 3; then ok "kill -9 of the nook exec client kills its command's whole tree"; else not_ok "kill -9 of the nook exec client kills its command's whole tree" "still running after 3 s: $(tree_pids "$tag")"; kill_tree "$tag"; fi

# ---- --detach ------------------------------------------------------------------------------
start=$(date +%s%N)
run_nook exec -d ex -- sh -c 'sleep 1; echo detached-done > /workspace/det'
ms=$((($(date +%s%N) - start) / 1000000))
is "$status" 0 "--detach exits 0"
if ((ms < 900)); then ok "--detach returns at once (${ms} ms)"; else not_ok "--detach returns at once" "${ms} ms"; fi
for _ in $(seq 40); do [[ -s "$ws/det" ]] && break; sleep 0.1; done
is "$(cat "$ws/det" 2>/dev/null)" "detached-done" "the detached command kept running and finished"

# ---- secrets -------------------------------------------------------------------------------
sentinel="nook-secret-$$-$RANDOM-sentinel"
leak_check() {
        # Prints every place on the host, other than the client, holding the sentinel.
        local p
        grep -rlsF -- "$sentinel" "$NOOK_HOME" 2>/dev/null | sed 's/^/file: /'
        for p in $(pgrep -f -- "--state $NOOK_HOME/"); do
                grep -lsF -- "$sentinel" "/proc/$p/cmdline" "/proc/$p/environ" | sed 's/^/supervisor: /'
                # nook-init and the per-exec helpers below it (not the command itself)
                for c in $(pgrep -P "$p"); do
                        grep -lsF -- "$sentinel" "/proc/$c/cmdline" "/proc/$c/environ" | sed 's/^/init: /'
                        for h in $(pgrep -P "$c"); do
                                [[ $(cat "/proc/$h/comm" 2>/dev/null) == nook-init ]] || continue
                                grep -lsF -- "$sentinel" "/proc/$h/cmdline" "/proc/$h/environ" | sed 's/^/helper: /'
                        done
                done
        done
}
NOOK_SECRET_X="$sentinel" "$NOOK" exec --secret-env NOOK_SECRET_X ex -- sh -c 'echo "$NOOK_SECRET_X" > /tmp/seen; sleep 1.5' >/dev/null 2>&1 &
client=$!
sleep 0.7
during=$(leak_check)
wait "$client"
is "$?" 0 "exec --secret-env exits 0"
run_nook exec ex -- cat /tmp/seen
is "$out" "$sentinel" "the command sees the secret's value"
is "$during" "" "while it runs, the secret is in no host process of nook (supervisor, init, helper) argv or environ"
is "$(leak_check)" "" "afterwards, the secret is in no file under NOOK_HOME (db, logs, config)"
sentinel2="$sentinel-stdin"
printf '%s' "$sentinel2" >"$NOOK_HOME.sec"
NOOK_STDIN="$NOOK_HOME.sec" run_nook exec --secret-env NOOK_SECRET_Y=- ex -- sh -c 'printf %s "$NOOK_SECRET_Y"'
rm -f "$NOOK_HOME.sec"
is "$out" "$sentinel2" "--secret-env NAME=- reads the value from stdin"
is "$(grep -rlsF -- "$sentinel2" "$NOOK_HOME" 2>/dev/null)" "" "the stdin secret is in no file under NOOK_HOME"
run_nook exec --secret-env NOOK_TEST_UNSET_VAR ex -- true
if [[ $status != 0 && $err == *NOOK_TEST_UNSET_VAR* ]]; then ok "--secret-env of an unset variable fails, naming it"; else not_ok "--secret-env of an unset variable fails, naming it" "status $status err $err"; fi
# A secret in a failing exec does not end up in the error message.
NOOK_SECRET_X="$sentinel" run_nook exec --secret-env NOOK_SECRET_X -w relative ex -- true
unlike "$err$out" "$sentinel" "a failing exec's error message does not contain the secret"

# ---- the spare helper (init forks the next exec's helper ahead of time) ----------------------
# A process in the sandbox may kill it (guest root can): the next exec gets a new one. The spare
# is a nook-init that is neither PID 1 nor our own helper ($PPID); init forks one when idle.
run_nook exec ex -- sh -c 'for i in $(seq 100); do
        for d in /proc/[0-9]*; do p=${d#/proc/}
                [ "$p" != 1 ] && [ "$p" != "$PPID" ] && [ "$(cat "$d/comm" 2>/dev/null)" = nook-init ] &&
                        kill -9 "$p" && echo killed && exit 0
        done; sleep 0.1; done; echo "no spare"'
is "$out" "killed" "a spare helper (nook-init) waits in the sandbox and guest root can kill it"
run_nook exec ex -- echo after-spare-killed
is "$status/$out" "0/after-spare-killed" "an exec after its spare helper was killed runs"
run_nook exec ex -- sh -c 'exit 3'
is "$status" 3 "and so does the one after it (exit status 3 kept)"

# --workdir the image lacks: made at create, as docker makes a missing WORKDIR (root's, 0755);
# every exec failed with 126 before.  Where it cannot be made (read-only /usr), execs say so.
run_nook create --workdir /srv/app/deep wd1
run_nook exec wd1 -- sh -c 'pwd; stat -c "%U %a" .'
is "$status:$out" "0:/srv/app/deep"$'\n'"root 755" "a missing --workdir is made at create and is the execs' directory"
run_nook rm wd1
run_nook create --workdir /usr/no-such-dir wd2
run_nook exec wd2 -- true
is "$status" 126 "a --workdir that cannot be made (read-only /usr): the exec fails (126)"
like "$err" "cannot change to directory '/usr/no-such-dir'" "and says which directory"
run_nook rm wd2

# ---- a guest that SIGSTOPs nook's exec helpers (its root owns them) --------------------------
# A stopped helper never acted on the timeout's kill request: the client waited for good.  Now
# it is woken (SIGCONT), else SIGKILLed, else the exec is ended by the supervisor: --timeout holds.
if command -v pgrep >/dev/null; then
        run_nook create stopper
        "$NOOK" exec -d stopper -- sh -c 'while :; do for p in $(pgrep nook-init); do [ "$p" != 1 ] && [ "$p" != "$PPID" ] && kill -STOP "$p"; done; done' >/dev/null
        sleep 0.5
        hung=0 codes=""
        for i in 1 2 3 4 5 6; do
                timeout -s KILL 10 "$NOOK" exec --timeout 1s stopper -- echo alive >/dev/null 2>&1
                rc=$?
                [[ $rc == 137 ]] && hung=$((hung + 1))
                codes+="$rc "
        done
        is "$hung" 0 "exec --timeout 1s while the guest stops every helper: never hangs (exit codes: $codes)"
        run_nook rm stopper
        is "$status" 0 "rm of a sandbox whose helpers are stopped"
else
        skip "pgrep (procps) is missing"
        skip "pgrep (procps) is missing"
fi

run_nook rm ex
is "$status" 0 "rm ex"
