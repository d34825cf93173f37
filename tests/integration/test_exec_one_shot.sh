#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 17, the tail of `nook run`: a one-shot sandbox (NOOK_CREATE_ONE_SHOT, `nook run` without
# --keep or -d) forks no spare exec helper, while an ordinary sandbox and `run --keep` keep theirs;
# every exec in a one-shot sandbox goes through init, whose helper is forked on the spot and now
# gets the client's connection too: it tells the client "started" and "exited" itself and init
# forwards "told" (docs/design/runtime.md, Exec).  A raw client (python3, SOCK_SEQPACKET +
# SCM_RIGHTS) drives that path: the replies with and without "reportStarted", hostile values of
# it, a terminal (init keeps relaying "started" with the pty), a timeout, a client that vanishes
# right after its request, clients that hang up right after "exited" while the command's
# background child runs on, a reason cut inside a UTF-8 character.  No timing assertions:
# generous waits.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
command -v python3 >/dev/null || plan skip_all "python3 is needed for the raw protocol client"
plan 39

T=$(mktemp -d "$NOOK_HOME.oneshot.XXXXXX")
trap 'rc=$?; [[ -n ${RUN_PID:-} ]] && kill "$RUN_PID" 2>/dev/null; rm -rf "$T"; (exit $rc); _tap_finish' EXIT

# inside an exec: how many nook-init processes (init, the execs' helpers, a spare) there are
# once $1 or more are there, waiting up to 10 s for them (a spare is forked when init is idle)
INITS='for i in $(seq 100); do n=0; for d in /proc/[0-9]*; do [ "$(cat $d/comm 2>/dev/null)" = nook-init ] && n=$((n + 1)); done; [ $n -ge $1 ] && break; sleep 0.1; done; echo $n'

# ---- spares -----------------------------------------------------------------------------------
# a one-shot run: init and the command's helper, and still no third after the command ran a while
# (an ordinary sandbox forks its spare at "ready" and the next one once a command started)
run_nook run -- sh -c "sleep 1; $INITS" x 3
is "$status/$out" "0/2" "nook run: init and this command's helper only, no spare helper"
run_nook run --keep --name kept -- sh -c "$INITS" x 3
is "$status/$out" "0/3" "nook run --keep: init, this command's helper and the next spare"
run_nook rm kept
run_nook create sb
is "$status" 0 "create sb"
run_nook exec sb -- sh -c "$INITS" x 3
is "$status/$out" "0/3" "an ordinary sandbox: init, this exec's helper and the next spare"
run_nook rm -f sb

# ---- a one-shot sandbox, its execs through init ------------------------------------------------
# its run waits for /tmp/done; the execs below come from outside, through init
"$NOOK" run --name os -- sh -c 'while [ ! -e /tmp/done ]; do sleep 0.1; done; exit 7' \
        >"$T/run.out" 2>"$T/run.err" &
RUN_PID=$!
check "the one-shot sandbox serves execs" wait_for 60 eval '"$NOOK" exec os -- true 2>/dev/null'
S=$(sock_of os)
check "its control socket is found" test -S "$S"
run_nook exec os -- sh -c "sleep 1; $INITS" x 0
is "$status/$out" "0/3" "no spare beside the execs: init, the run's helper and this exec's"

exec_protocol_checks "$S" os
is "$(raw_exec "$S" wait '{"op":"exec","argv":["true"],"told":true,"reportStarted":false}')" "exited:0" \
        "a client's own \"told\" field means nothing: \"exited\" comes"
is "$(raw_exec "$S" wait '{"op":"exec","argv":["true"],"tty":true}')" "started+fd exited:0" \
        "a terminal: \"started\" with the pty's master (relayed by init), then \"exited\""
run_nook exec os -- sh -c 'echo to-stdout; echo to-stderr >&2; exit 4'
is "$status/$out" "4/to-stdout" "nook exec through init: the command's stdout and status"
like "$err" "to-stderr" "and its stderr"

# ---- the run ends: exit status, the sandbox removed ----------------------------------------------
run_nook exec os -- touch /tmp/done
wait "$RUN_PID"
is "$?" 7 "the run's own command's status (7) is nook run's"
RUN_PID=
expect_fail 1 "the one-shot sandbox is removed at the run's end" inspect os

# ---- a signal to nook run is forwarded, a killed nook run still removes ---------------------------
"$NOOK" run --name sig -- sh -c 'trap "exit 9" TERM; touch /tmp/up; while :; do sleep 0.1; done' &
RUN_PID=$!
wait_for 60 eval '"$NOOK" exec sig -- test -e /tmp/up 2>/dev/null'
kill -TERM "$RUN_PID"
wait "$RUN_PID"
is "$?" 9 "SIGTERM to nook run reaches the command (it exits 9)"
"$NOOK" run --name gone -- sleep 600 &
RUN_PID=$!
wait_for 60 eval '"$NOOK" exec gone -- true 2>/dev/null'
kill -KILL "$RUN_PID"
wait "$RUN_PID" 2>/dev/null
RUN_PID=
check "nook run killed by SIGKILL: its sandbox is removed" \
        wait_for 30 eval '! "$NOOK" inspect gone >/dev/null 2>&1'

# ---- "removeSandbox": the exec's end begins the removal's stop (nook run's tail) -----------------
field() { "$NOOK" inspect "$1" 2>/dev/null | jq -r "$2 // empty" 2>/dev/null; }
run_nook create rm1
S=$(sock_of rm1)
is "$(raw_exec "$S" remove '{"op":"exec","argv":["sh","-c","exit 5"],"removeSandbox":true}')" \
        "started exited:1280 stopped" "removeSandbox, then the removal's stop asked on the same connection: \"stopped\""
run_nook rm rm1
is "$status" 0 "rm of the sandbox stopped for its removal"
run_nook create rm1
S=$(sock_of rm1)
is "$(raw_exec "$S" stopped '{"op":"exec","argv":["true"],"removeSandbox":true}')" "started exited:0 stopped" \
        "removeSandbox from a client that never asks for the removal: stopped all the same"
# the client hears "stopped" just before the supervisor exits; the record says so once it is gone
# (under ASan that window is long enough for an inspect to land in it)
wait_for 10 eval '[[ $(field rm1 .state) == stopped ]]' || true
is "$(field rm1 .state)/$(field rm1 .stopReason)" "stopped/user" "and recorded as a stop (kept)"
run_nook rm rm1
for v in '"yes"' 1 null false; do
        run_nook create rm2
        S=$(sock_of rm2)
        out=$(raw_exec "$S" wait "{\"op\":\"exec\",\"argv\":[\"true\"],\"removeSandbox\":$v}")
        sleep 0.5
        [[ $out == "started exited:0" && $(field rm2 .state) == running ]] &&
                ok "removeSandbox $v: ignored, the sandbox runs on" ||
                not_ok "removeSandbox $v: ignored, the sandbox runs on" "$out" "$(field rm2 .state)"
        run_nook rm -f rm2
done
run_nook create rm3
S=$(sock_of rm3)
raw_exec "$S" wait '{"op":"exec","argv":["sh","-c","exit 0"],"detach":true,"removeSandbox":true}' >/dev/null
sleep 0.5
is "$(field rm3 .state)" running "removeSandbox with detach: ignored, the sandbox runs on"
raw_exec "$S" close '{"op":"exec","argv":["sleep","600"],"removeSandbox":true}'
sleep 1
is "$(field rm3 .state)" running "removeSandbox from a client that went while its command ran: no stop"
run_nook rm -f rm3
# a client that hangs up right after "exited": no removal follows, so a stop already begun is
# recorded as "client_gone" and the next list removes what is left (as for a tied sandbox whose
# creator died); a hang-up the supervisor read before the exec's end begins no stop.  Either
# way nothing stays stopped half-removed.
bad=""
for i in $(seq 5); do
        run_nook create rm4
        S=$(sock_of rm4)
        raw_exec "$S" wait '{"op":"exec","argv":["true"],"removeSandbox":true,"reportStarted":false}' >/dev/null
        wait_for 10 eval '[[ $(field rm4 .state) != running ]]'
        "$NOOK" ls >/dev/null 2>&1
        st=$(field rm4 .state)
        [[ -z $st || $st == running ]] || bad+=" $i:$st/$(field rm4 .stopReason)"
        "$NOOK" rm -f rm4 >/dev/null 2>&1
done
is "$bad" "" "removeSandbox from a client gone right after \"exited\": removed by the next list, or running"
