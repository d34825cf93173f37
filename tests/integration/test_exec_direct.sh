#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 17, exec with init off its path: init hands its spare helper to the supervisor, which
# sends the exec straight to it and reads "started"/"exited" back (docs/design/runtime.md, Exec).
# What that can break: a spare killed from inside before it is used, a helper killed while its
# command runs, init killed while an exec runs, a stop while execs run, detached execs that
# outlive their client, many execs in a row and at once.  No timing assertions: generous waits.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
command -v jq >/dev/null || plan skip_all "jq is needed to read nook's JSON"
plan 40

field() { "$NOOK" inspect "$1" 2>/dev/null | jq -r "$2 // empty" 2>/dev/null; }
wait_state() { wait_for "$3" eval '[[ "$(field "$1" .state)" == "$2" ]]'; }
init_of() { ps -o pid=,comm= --ppid "$1" | awk '$2 == "nook-init" { print $1; exit }'; }
T=$(mktemp -d "$NOOK_HOME.direct.XXXXXX")
trap 'rc=$?; rm -rf "$T"; (exit $rc); _tap_finish' EXIT

# A shell line that kills the spare helper: a nook-init that is neither PID 1 nor our own
# helper ($PPID); init forks one whenever it is idle and has none.
KILL_SPARE='for i in $(seq 100); do
        for d in /proc/[0-9]*; do p=${d#/proc/}
                [ "$p" != 1 ] && [ "$p" != "$PPID" ] && [ "$(cat "$d/comm" 2>/dev/null)" = nook-init ] &&
                        kill -9 "$p" && echo killed && exit 0
        done; sleep 0.1; done; echo "no spare"'

run_nook create dx
is "$status" 0 "create dx"

# ---- 50 execs in a row, 20 at once ------------------------------------------------------------
execs_in_a_row dx 50 5
is "$EXECS_BAD" "" "50 execs in a row: each one's output and exit status"
execs_at_once dx 20 4 "$T" 'sleep 0.2;'
is "$EXECS_BAD" "" "20 execs at once: each one's output and exit status"
run_nook exec dx -- true
is "$status" 0 "an exec after them runs"

# ---- the spare killed from inside before it is used ------------------------------------------
for round in 1 2 3; do
        run_nook exec dx -- sh -c "$KILL_SPARE"
        is "$out" "killed" "round $round: guest root kills the waiting spare helper"
        run_nook exec dx -- sh -c 'echo "$0"; exit 3' "after-$round"
        is "$status/$out" "3/after-$round" "round $round: the next exec runs (output, exit status 3)"
done
# killed, then at once an exec and a missing command: the error still comes back
run_nook exec dx -- sh -c "$KILL_SPARE"
run_nook exec dx -- /no/such/command
is "$status" 127 "after a killed spare, a missing command exits 127"
like "$err" "cannot run '/no/such/command'" "with the reason"

# ---- the helper killed while its command runs -------------------------------------------------
# $PPID of the command is its helper: guest root can kill it.  The client hears SIGKILL.
run_nook exec dx -- sh -c 'kill -9 $PPID; sleep 5'
is "$status" 137 "the exec's helper killed from inside: the client gets SIGKILL (137), not a hang"
run_nook exec dx -- echo still-fine
is "$status/$out" "0/still-fine" "the sandbox serves the next exec"

# ---- timeout and signals reach a direct exec's tree ---------------------------------------------
run_nook exec --timeout 1s dx -- sh -c 'sleep 60 & sleep 61; echo not-killed'
is "$status" 124 "--timeout kills a direct exec (124)"
unlike "$out" "not-killed" "before its command finished"
"$NOOK" exec dx -- sh -c 'echo $$ >/tmp/shpid; sleep 60 & sleep 61' >/dev/null 2>&1 </dev/null &
cpid=$!
wait_for 30 "$NOOK" exec dx -- test -s /tmp/shpid
kill -KILL "$cpid" 2>/dev/null
wait "$cpid" 2>/dev/null
wait_for 30 eval '[[ "$("$NOOK" exec dx -- sh -c "kill -0 \$(cat /tmp/shpid) 2>/dev/null && echo alive || echo gone")" == gone ]]'
run_nook exec dx -- sh -c 'kill -0 "$(cat /tmp/shpid)" 2>/dev/null && echo alive || echo gone; for d in /proc/[0-9]*; do [ "$(tr "\\0" " " <$d/cmdline 2>/dev/null)" = "sleep 60 " ] && echo sleep-left; done; echo end'
is "$out" $'gone\nend' "a vanished client (SIGKILL) takes its command's whole tree along"

# ---- detached execs outlive their client ------------------------------------------------------
run_nook create --idle-timeout 1s dd
is "$status" 0 "create dd with --idle-timeout 1s"
run_nook exec -d dd -- sh -c 'while [ ! -e /tmp/go ]; do sleep 0.1; done; echo done >/tmp/finished'
is "$status" 0 "a detached exec starts"
sleep 2.5
is "$(field dd .state)" "running" "a running detached exec keeps the sandbox from its idle timeout"
# a foreground exec whose client is killed ends too: that end is not the detached one's
"$NOOK" exec dd -- sleep 60 >/dev/null 2>&1 </dev/null &
cpid=$!
SLEEP60='for d in /proc/[0-9]*; do [ "$(tr "\\0" " " <$d/cmdline 2>/dev/null)" = "sleep 60 " ] && exit 0; done; exit 1'
wait_for 30 "$NOOK" exec dd -- sh -c "$SLEEP60"
kill -KILL "$cpid" 2>/dev/null
wait "$cpid" 2>/dev/null
wait_for 30 eval '! "$NOOK" exec dd -- sh -c "$SLEEP60"'
sleep 2.5
is "$(field dd .state)/$(field dd .stopReason)" "running/" "a killed client's exec ending does not count as the detached exec's end"
run_nook exec dd -- touch /tmp/go
wait_state dd stopped 30
is "$(field dd .state)/$(field dd .stopReason)" "stopped/idle" \
        "once it ended (its exit reached the supervisor), the idle timeout stops the sandbox"

# ---- nook stop while execs run ----------------------------------------------------------------
run_nook create ds
for i in 1 2 3; do
        (
                timeout 120 "$NOOK" exec ds -- sh -c 'echo up; exec sleep 6174' >"$T/sout.$i" 2>"$T/serr.$i" </dev/null
                echo $? >"$T/src.$i"
        ) &
done
wait_for 30 eval '[[ "$(cat "$T"/sout.* 2>/dev/null | grep -c up)" == 3 ]]'
run_nook stop ds
is "$status" 0 "nook stop while three execs run"
wait
bad=""
for i in 1 2 3; do
        rc=$(cat "$T/src.$i")
        [[ $rc == 143 || $rc == 137 ]] || bad+=" $i:$rc/$(cat "$T/serr.$i")"
done
is "$bad" "" "each exec's client ends with its command killed (143 or 137)"
check "no command of theirs is left" wait_for 10 eval '[[ -z "$(pgrep -f "sleep 6174")" ]]'
is "$(field ds .state)" "stopped" "the sandbox is stopped"

# kill_mid_exec NAME SECS PREFIX PID: `nook exec NAME -- sleep SECS` runs, PID is SIGKILLed once
# the command is up; the client's exit code, stdout and stderr land in PREFIX{rc,out,err}
kill_mid_exec() {
        (
                timeout 120 "$NOOK" exec "$1" -- sh -c "echo up; exec sleep $2" >"$3out" 2>"$3err" </dev/null
                echo $? >"$3rc"
        ) &
        wait_for 30 grep -q up "$3out"
        kill -9 "$4" 2>/dev/null
        wait
}

# ---- init killed while an exec runs ----------------------------------------------------------
run_nook create di
sup=$(field di .supervisorPid)
init=$(init_of "${sup:-0}")
kill_mid_exec di 6175 "$T/i" "${init:-0}"
is "$(cat "$T/irc")" 137 "init killed while an exec runs: the client ends (137)"
like "$(cat "$T/ierr")" "the sandbox stopped .or was removed. while the command ran" "with a clear error on stderr"
wait_state di stopped 10
is "$(field di .state)/$(field di .stopReason)" "stopped/init_died" "the sandbox is stopped, init_died"
check "no command of its is left" wait_for 10 eval '[[ -z "$(pgrep -f "sleep 6175")" ]]'

# ---- the supervisor killed while an exec runs -------------------------------------------------
run_nook create dk
sup=$(field dk .supervisorPid)
kill_mid_exec dk 6176 "$T/k" "${sup:-0}"
isnt "$(cat "$T/krc")" 0 "the supervisor killed while an exec runs: the client fails"
like "$(cat "$T/kerr")" "stopped while the command ran" "with a clear error"
check "the command went with the sandbox" wait_for 10 eval '[[ -z "$(pgrep -f "sleep 6176")" ]]'

# ---- nook stop while an exec runs: the command ends by the stop's SIGTERM, reason "stopped" -----
# (before, the helper's own report said "exited" with SIGTERM, and the client could not tell a
# stop from a signal of its own; a signal the client forwards stays a plain exit, below)
run_nook create dst
(
        timeout 120 "$NOOK" exec dst -- sh -c "echo up; exec sleep 6177" >"$T/sout" 2>"$T/serr" </dev/null
        echo $? >"$T/src"
) &
wait_for 30 grep -q up "$T/sout"
run_nook stop dst
wait
is "$(cat "$T/src")" 143 "a stop while an exec runs: the command ends by its SIGTERM (143)"
like "$(cat "$T/serr")" "the sandbox stopped .or was removed. while the command ran" "and the client says the sandbox stopped"
run_nook start dst
(
        timeout 120 "$NOOK" exec dst -- sh -c "echo up; exec sleep 6178" >"$T/fout" 2>"$T/ferr" </dev/null
        echo $? >"$T/frc"
) &
ex=$!
wait_for 30 grep -q up "$T/fout"
pkill -TERM -f "^$NOOK exec dst -- sh -c echo up; exec sleep 6178" || true
wait "$ex"
is "$(cat "$T/frc")" 143 "a SIGTERM the client forwards: 143"
unlike "$(cat "$T/ferr")" "stopped .or was removed. while the command ran" "is the command's own end, not a stop"

# an exec through init (a terminal's always is): init's stop reaps its helper as always and
# forwards the command's status, so the client gets 143 from the SIGTERM, not the 137 that the
# supervisor words for an exec whose report never came (init left without reading its helper)
if command -v script >/dev/null; then
        script -qc "$NOOK exec -t dst -- sh -c 'echo up; exec sleep 6179'; echo rc=\$?" /dev/null \
                < <(sleep 5) >"$T/tout" 2>&1 &
        tx=$!
        wait_for 30 grep -q up "$T/tout"
        run_nook stop dst
        wait "$tx" 2>/dev/null
        tout=$(tr -d '\r' <"$T/tout")
        like "$tout" "rc=143" "a stop while an exec through init runs: its status is the SIGTERM's (143, not 137)"
        like "$tout" "the sandbox stopped .or was removed. while the command ran" "and the client says the sandbox stopped"
else
        skip "script (bsdutils) is not installed" 2
fi

for s in dx dd ds di dk dst; do "$NOOK" rm -f "$s" >/dev/null 2>&1; done
run_nook ls -q
is "$out" "" "every sandbox removed"
