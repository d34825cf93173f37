#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook logs: what detached commands printed (stdout and stderr apart), --tail, --since,
# --timestamps, -f until the sandbox stops, rotation by size, byte-exact lines (long, partial,
# hostile), control characters escaped only on a terminal, --system for the supervisor's own
# log without slirp4netns chatter, and bad values of every flag.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
command -v jq >/dev/null || plan skip_all "jq is needed to read nook's JSON"
plan 63

# logs_has NAME LINE: nook logs NAME (stdout and stderr) holds LINE
# grep reads to the end (no -q): one that quits at the first match makes a nook still writing the
# lines after it fail with EPIPE, and pipefail then says the line is missing (a flake under load)
logs_has() { "$NOOK" logs "$1" 2>&1 | grep -xF -- "$2" >/dev/null; }
field() { "$NOOK" inspect "$1" 2>/dev/null | jq -r "$2 // empty" 2>/dev/null; }

run_nook create lg
is "$status" 0 "create lg"
run_nook logs lg
is "$status:$out:$err" "0::" "a sandbox that ran nothing detached has an empty log"

# (stdout and stderr are two pipes: the pauses give the lines an order across them)
run_nook exec -d lg -- sh -c 'echo out-1; sleep 0.3; echo err-1 >&2; sleep 0.3; echo out-2; sleep 0.3; echo err-2 >&2; sleep 0.3; echo out-3'
check "the detached command's lines arrive" wait_for 10 logs_has lg out-3
wait_for 5 logs_has lg err-2
run_nook logs lg
is "$out" $'out-1\nout-2\nout-3' "logs: the command's stdout on stdout"
is "$err" $'err-1\nerr-2' "logs: its stderr on stderr"

# ---- --tail --------------------------------------------------------------------------------
run_nook logs --tail 2 lg
is "$out" "out-3" "--tail 2: the last two lines only (out-3 on stdout...)"
is "$err" "err-2" "(... and err-2 on stderr)"
run_nook logs --tail 0 lg
is "$out$err" "" "--tail 0: nothing"
run_nook logs -n all lg
is "$(printf '%s\n%s\n' "$out" "$err" | grep -c .)" 5 "--tail all: every line"
expect_fail 2 "--tail -1 is a usage error" logs --tail -1 lg
like "$err" "Invalid tail '-1'" "the error names the bad value"
expect_fail 2 "--tail abc" logs --tail abc lg
expect_fail 2 "--tail past a billion" logs --tail 99999999999999999999 lg
expect_fail 2 "--tail 1x" logs --tail 1x lg

# ---- --timestamps, --since --------------------------------------------------------------------
run_nook logs --timestamps lg
like "$out" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z out-1' "--timestamps: RFC 3339 UTC with nanoseconds before each line"
first_ts=${out%% *}
run_nook logs --since 1h lg
is "$out" $'out-1\nout-2\nout-3' "--since 1h: everything from the last hour"
run_nook logs --since 2099-01-01T00:00:00Z lg
is "$status:$out$err" "0:" "--since a future time: nothing"
run_nook logs --since "$first_ts" lg
like "$out" "out-1" "--since the first line's own timestamp includes that line"
run_nook logs --since "$(($(date +%s) + 2))" lg
is "$out" "" "--since a Unix time (docker's plain number) in 2 s: nothing"
run_nook logs --since 946684800.5 lg
like "$out" "out-3" "--since a Unix time with a fraction"
run_nook logs --since 2000-01-01T02:00:00+02:00 lg
like "$out" "out-3" "--since with a UTC offset"
for bad in garbage "" "-5m" 42x 1.2.3 9999999999999 2026-13-45T00:00:00Z "2026-01-01T00:00:00" "1h junk" "2026-01-01T00:00:00Z;rm"; do
        run_nook logs --since "$bad" lg
        if [[ $status == 2 && $err == *"Invalid since"* ]]; then ok "--since '$bad' is a usage error that names it"; else not_ok "--since '$bad' is refused with a clear error" "status $status" "$err"; fi
done
expect_fail 2 "--system with --since" logs --system --since 1m lg
expect_fail 2 "logs without a name" logs
expect_fail 1 "logs of an unknown sandbox" logs nosuch
like "$err" "No sandbox 'nosuch'" "it names the sandbox"
expect_fail 1 "a hostile name" logs ../../etc

# ---- content: byte-exact to a pipe, escaped on a terminal --------------------------------------
run_nook exec -d lg -- sh -c 'printf "esc-\033]0;pwned\007-\033[2J-end\n"; printf "no-newline"'
wait_for 5 eval '"$NOOK" logs lg 2>/dev/null | grep -q no-newline'
"$NOOK" logs --tail 2 lg 2>/dev/null >"$NOOK_HOME.raw"
is "$(od -An -c "$NOOK_HOME.raw" | tr -s ' ' | tr -d '\n')" \
        " e s c - 033 ] 0 ; p w n e d \a - 033 [ 2 J - e n d \n n o - n e w l i n e \n" \
        "into a pipe: the guest's bytes as they were (a command's unfinished last line is closed when it ends)"
if command -v script >/dev/null; then
        o=$(script -qec "'$NOOK' logs --tail 2 lg" /dev/null </dev/null 2>&1)
        like "$o" 'esc-\\x1b\]0;pwned\\x07-\\x1b\[2J-end' "on a terminal: control characters escaped as \\xNN"
        # a long run of control characters: escaped across the writer's buffer boundaries
        run_nook exec -d lg -- sh -c 'head -c 3000 /dev/zero | tr "\0" "\001"; echo; echo ctl-done'
        wait_for 5 logs_has lg ctl-done
        o=$(script -qec "'$NOOK' logs --tail 2 lg" /dev/null </dev/null 2>&1)
        is "$(printf '%s' "$o" | grep -o '\\x01' | wc -l)" 3000 "3000 control characters in a row: each one escaped"
else
        skip "script(1) is needed for a terminal"
        skip "script(1) is needed for a terminal"
fi
# a line longer than the 16 KiB record size comes back whole
run_nook exec -d lg -- sh -c 'head -c 50000 /dev/zero | tr "\0" x; echo; echo after-long'
wait_for 5 logs_has lg after-long
"$NOOK" logs --tail 5 lg 2>/dev/null | grep -x 'x*' >"$NOOK_HOME.long"
is "$(wc -c <"$NOOK_HOME.long")" 50001 "a 50000-byte line comes back as one line"
rm -f "$NOOK_HOME.raw" "$NOOK_HOME.long"

# ---- -f follows until the sandbox stops --------------------------------------------------------
"$NOOK" logs -f --tail 0 lg >"$NOOK_HOME.follow" 2>&1 &
follower=$!
sleep 0.5
run_nook exec -d lg -- sh -c 'echo followed-line'
check "-f prints a line written after it started" wait_for 5 grep -qx followed-line "$NOOK_HOME.follow"
check "-f keeps running while the sandbox runs" kill -0 "$follower"
run_nook stop lg
check "-f ends once the sandbox stopped" wait_for 5 eval '! kill -0 '"$follower"' 2>/dev/null'
kill "$follower" 2>/dev/null
wait "$follower" 2>/dev/null
rm -f "$NOOK_HOME.follow"
run_nook logs --tail 1 lg
is "$status:$out" "0:followed-line" "the log outlives a stop"
run_nook logs -f --tail 1 lg
is "$status:$out" "0:followed-line" "-f on a stopped sandbox prints and returns"

# ---- rotation: at most 2 x 1 MiB --------------------------------------------------------------
run_nook start lg
# 3 MiB of 100-byte lines, numbered
run_nook exec -d lg -- sh -c 'i=0; while [ $i -lt 30000 ]; do printf "%099d\n" $i; i=$((i+1)); done; echo rotation-done'
check "3 MiB of output is taken in" wait_for 60 logs_has lg rotation-done
sz=$(cat "$NOOK_HOME/sandboxes/lg/output.log" "$NOOK_HOME/sandboxes/lg/output.log.1" 2>/dev/null | wc -c)
if ((sz <= 2 * 1048576)); then ok "the log is bounded: $sz bytes on disk for 3 MiB written"; else not_ok "the log is bounded" "$sz bytes"; fi
check "one rotated file is kept" test -f "$NOOK_HOME/sandboxes/lg/output.log.1"
run_nook logs lg
unlike "$out" "out-1" "the oldest lines were dropped"
like "$out" "$(printf '%099d' 29999)" "the newest lines are there"
numbered=$(printf '%s\n' "$out" | grep -c '^[0-9]*$') whole=$(printf '%s\n' "$out" | grep -cE '^[0-9]{99}$')
if ((numbered > 5000 && numbered == whole)); then ok "what is left is whole lines ($whole of them)"; else not_ok "what is left is whole lines" "$numbered numbered, $whole of 99 digits"; fi

# ---- a command whose output ends without a newline: its last line is closed at its end, so the
# next command's output starts a line of its own (it was glued on: "floo" + "after-the-limit")
"$NOOK" exec -d lg -- printf 'no-newline-at-end' >/dev/null 2>&1
wait_for 10 logs_has lg no-newline-at-end
"$NOOK" exec -d lg -- echo next-command-line >/dev/null 2>&1
if wait_for 10 logs_has lg next-command-line && logs_has lg no-newline-at-end; then
        ok "an unfinished last line ends with its command; the next command's line stands alone"
else
        not_ok "an unfinished last line ends with its command" "$("$NOOK" logs --tail 3 lg 2>&1)"
fi

# ---- a command that floods its output does not starve the supervisor ---------------------------
run_nook exec -d lg -- yes flood-line
sleep 1
t0=$(date +%s%3N)
run_nook exec lg -- true
t=$(($(date +%s%3N) - t0))
is "$status" 0 "an exec while a detached command floods the log"
if ((t < 2000)); then ok "answers in ${t} ms (< 2 s)"; else not_ok "answers in under 2 s during a flood" "${t} ms"; fi
"$NOOK" exec lg -- pkill -x yes >/dev/null 2>&1
sz=$(cat "$NOOK_HOME/sandboxes/lg/output.log" "$NOOK_HOME/sandboxes/lg/output.log.1" 2>/dev/null | wc -c)
if ((sz <= 2 * 1048576)); then ok "the flooded log stays within 2 MiB ($sz bytes)"; else not_ok "the flooded log stays within 2 MiB" "$sz bytes"; fi

# ---- at most 64 detached commands log at once: the 65th is refused, nothing half-started ------
for ((i = 0; i < 64; i++)); do "$NOOK" exec -d lg -- sleep 304 >/dev/null 2>&1 || break; done
is "$i" 64 "64 detached commands start"
expect_fail 125 "a 65th detached command while 64 hold the log" exec -d lg -- sleep 305
like "$err" "Too many detached commands" "it says why and what to do"
check "the refused one did not start" test -z "$(pgrep -f '^sleep 305$')"
"$NOOK" exec lg -- pkill -f '^sleep 304$' >/dev/null 2>&1
# (the supervisor frees a slot when it reads the end of the command's pipes: retry briefly)
wait_for 15 "$NOOK" exec -d lg -- echo after-the-limit 2>"$NOOK_HOME.limit"
if wait_for 15 logs_has lg after-the-limit; then
        ok "once they ended, detached commands log again"
else
        not_ok "once they ended, detached commands log again" "exec -d said: $(cat "$NOOK_HOME.limit")" \
                "sleeps left: $("$NOOK" exec lg -- pgrep -c sleep 2>&1)" "log tail: $("$NOOK" logs --tail 3 lg 2>&1)"
fi
rm -f "$NOOK_HOME.limit"

# ---- --system: the supervisor's diagnostics, not slirp4netns chatter --------------------------
run_nook logs --system lg
like "$out" "sandbox 'lg' running" "--system shows the supervisor's lifecycle lines"
unlike "$(cat "$NOOK_HOME/sandboxes/lg/output.log")" "sandbox 'lg' running" "and they are not in the commands' log"
run_nook rm lg
if command -v slirp4netns >/dev/null && [[ -r /dev/net/tun && -w /dev/net/tun ]]; then
        run_nook create --network public net
        if [[ $status == 0 ]]; then
                run_nook logs --system net
                unlike "$out" "WARNING|tapfd|Support for seccomp" "--system holds nothing of slirp4netns's warnings and progress"
                run_nook rm net
        else
                skip "create --network public failed here: $err"
        fi
else
        skip_expected "slirp4netns or /dev/net/tun is not available to this stage"
fi
