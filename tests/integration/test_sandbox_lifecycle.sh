#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sandbox lifetimes: create / ls / inspect / stop / start / rm, workspace reuse, --replace,
# crash reconciliation (kill -9 of the supervisor or of init), max-duration and idle-timeout
# enforced by the detached supervisor, and many concurrent commands on one NOOK_HOME.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
command -v jq >/dev/null || plan skip_all "jq is needed to read nook's JSON"
plan 74

# field NAME FILTER: a value from `nook inspect NAME` ('' on error).
field() { "$NOOK" inspect "$1" 2>/dev/null | jq -r "$2 // empty" 2>/dev/null; }

# wait_state NAME STATE SECONDS: poll inspect until .state is STATE.
wait_state() {
        local i
        for ((i = 0; i < $3 * 10; i++)); do
                [[ "$(field "$1" .state)" == "$2" ]] && return 0
                sleep 0.1
        done
        return 1
}

# alive PID: the process exists and is not a zombie.
alive() {
        local s
        s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
        [[ -n "$s" && $s != Z* ]]
}

# init_of SUPERVISOR_PID: host pid of its nook-init child.
init_of() { ps -o pid=,comm= --ppid "$1" | awk '$2 == "nook-init" { print $1; exit }'; }

# ---- create / ls / inspect -----------------------------------------------------------------
run_nook create -l team=qa -e FOO=bar life
is "$status" 0 "create life exits 0"
is "$out" "life" "create prints the name"
is "$(field life .state)" "running" "inspect: state running"
is "$(field life .persistence)" "ephemeral" "inspect: persistence ephemeral by default"
is "$(field life .spec.env.FOO)" "bar" "inspect: the spec keeps the -e env"
is "$(field life .labels.team)" "qa" "inspect: the label is recorded"
ws=$(field life .workspace)
is "$ws" "$NOOK_HOME/workspaces/life" "inspect: the workspace is under NOOK_HOME/workspaces"
check "the workspace directory exists" test -d "$ws"
sup=$(field life .supervisorPid)
check "the supervisor pid is a live process" alive "${sup:-0}"
# DESIGN says mode 0600; what matters is that only the owner may connect (no group/other bits).
like "$(stat -c %F:%a "$NOOK_HOME/run/life/ctl.sock" 2>/dev/null)" "^socket:[67]00$" "the control socket exists, owner-only"
# The supervisor reads its config from a socket (--config-fd) and closes it: no config.json in
# the state folder, and no memfd of it either (an older way).
check "no config.json in the state folder (the config goes over a socket)" \
        test ! -e "$NOOK_HOME/sandboxes/life/config.json"
supfds=$(ls -l "/proc/${sup:-0}/fd" 2>/dev/null)
like "$supfds" "ctl.sock|socket:" "the supervisor's descriptors are readable"
unlike "$supfds" "memfd:nook-config" "the supervisor holds no memfd of the config"
# It holds init's mount namespace, so that unmounting the sandbox's tree at the stop is its own
# close after its replies, not in init's exit before the cgroups may go (runtime.md, nook run's
# tail).  Its fd and the namespace a command in the sandbox sees name the same one (asked from
# inside: init is not dumpable, so a rootless host user cannot read its /proc/PID/ns).
mntns=$("$NOOK" exec life readlink /proc/self/ns/mnt 2>/dev/null)
held=$(for f in "/proc/${sup:-0}/fd/"*; do readlink "$f"; done 2>/dev/null | grep -cxF "${mntns:-none}")
is "${mntns:+found}/$held" "found/1" "the supervisor holds init's mount namespace ($mntns)"
# The creator starts its supervisor off its own CPU (lifecycle.c:supervisor_spawn), and the
# supervisor takes the creator's whole mask back: nothing of the sandbox stays narrowed, with the
# creator's mask or with a one-CPU one (taskset).
cpus() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null; }
cpus_in() { "$NOOK" exec "$1" sh -c 'sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status' 2>/dev/null; }
mine=$(cpus $$)
is "$(cpus "${sup:-0}")/$(cpus_in life)" "$mine/$mine" "the supervisor and a command run on every CPU the creator may ($mine)"
first=${mine%%[,-]*}
taskset -c "$first" "$NOOK" create onecpu >/dev/null 2>&1
is "$(cpus "$(field onecpu .supervisorPid)")/$(cpus_in onecpu)" "$first/$first" "a creator pinned to CPU $first gives its sandbox that CPU alone"
run_nook rm onecpu

run_nook ls
like "$out" $'(^|\n)life +running +ephemeral' "ls lists life as running, ephemeral"
run_nook ls -q
is "$out" "life" "ls -q prints only the name"
run_nook ls --json
is "$(jq -r '.[] | select(.name == "life") | .state' <<<"$out" 2>/dev/null)" "running" "ls --json has life running"
run_nook create other
run_nook ls -q --label team=qa
is "$out" "life" "ls --label team=qa selects only life"
run_nook rm other

# Options after NAME, as the usage line 'nook create NAME [OPTIONS]' shows.
run_nook create optsafter --idle-timeout 30s
is "$status" 0 "create NAME --idle-timeout 30s (options after the name) works"
run_nook rm optsafter

# ---- running name: refused, then --replace ------------------------------------------------
echo keep >"$ws/keep.txt"
expect_fail 1 "create of a running name is refused" create life
like "$err" "already running" "...the message says it is already running"
like "$err" "replace" "...and points at --replace"
is "$(field life .supervisorPid)" "$sup" "the refused create left the running supervisor alone"
run_nook create --replace life
is "$status" 0 "create --replace of a running name works"
newsup=$(field life .supervisorPid)
if [[ -n "$newsup" && $newsup != "$sup" ]] && alive "$newsup" && ! alive "$sup"; then
        ok "--replace stopped the old supervisor and started a new one"
else
        not_ok "--replace stopped the old supervisor and started a new one" "old $sup new $newsup"
fi
is "$(cat "$ws/keep.txt" 2>/dev/null)" "keep" "--replace kept the workspace"

# ---- stop / start / create over a stopped name ---------------------------------------------
run_nook stop life
is "$status" 0 "stop exits 0"
is "$(field life .state)/$(field life .stopReason)" "stopped/user" "inspect: stopped, stopReason user"
check "stop stopped the supervisor" test -z "$(alive "$newsup" && echo alive)"
is "$(cat "$ws/keep.txt" 2>/dev/null)" "keep" "stop keeps the workspace"
check "stop removed the control socket and the upper layer (ephemeral)" \
        test ! -e "$NOOK_HOME/run/life/ctl.sock" -a ! -e "$NOOK_HOME/sandboxes/life/upper"
run_nook stop life
is "$status" 0 "stop of a stopped sandbox is a no-op that succeeds"
run_nook start life
is "$status" 0 "start of a stopped sandbox works"
run_nook exec life -- cat /workspace/keep.txt
is "$out" "keep" "after start, exec sees the workspace"
run_nook stop --timeout 1s life
is "$status" 0 "stop --timeout 1s works"
run_nook create life
is "$status" 0 "create of a stopped name works"
run_nook exec life -- cat /workspace/keep.txt
is "$out" "keep" "create of a stopped name reuses the workspace"
run_nook logs --system life
like "$out" "running" "nook logs --system shows the supervisor log"

# ---- rm ------------------------------------------------------------------------------------
run_nook rm life
is "$status" 0 "rm of a running sandbox works"
check "rm removed the workspace" test ! -e "$ws"
check "rm removed the state directory" test ! -e "$NOOK_HOME/sandboxes/life"
check "rm removed the name's lock file" test ! -e "$NOOK_HOME/run/.locks/life.lock" -a ! -e "$NOOK_HOME/locks"
check "rm stopped the supervisor" test -z "$(alive "${newsup:-0}" && echo alive)"
expect_fail 1 "inspect after rm fails" inspect life
like "$err" "life" "...naming the sandbox"
expect_fail 1 "rm of an unknown sandbox fails" rm nosuch
like "$err" "nosuch" "...naming the sandbox"
check "rm of an unknown name created no workspace or state dir" \
        test ! -e "$NOOK_HOME/workspaces/nosuch" -a ! -e "$NOOK_HOME/sandboxes/nosuch"

# ---- crash: kill -9 of the supervisor ------------------------------------------------------
run_nook create crash
sup=$(field crash .supervisorPid)
init=$(init_of "${sup:-0}")
kill -9 "${sup:-0}" 2>/dev/null
for _ in $(seq 50); do alive "${init:-0}" || break; sleep 0.1; done
check "kill -9 of the supervisor takes nook-init down with it" test -n "$init" -a -z "$(alive "${init:-0}" && echo alive)"
run_nook ls
like "$out" $'(^|\n)crash +stopped' "ls shows the sandbox stopped after its supervisor was killed"
is "$(field crash .state)/$(field crash .stopReason)" "stopped/supervisor_died" "inspect: stopReason supervisor_died"
check "no ctl.sock or upper left after reconciliation" \
        test ! -e "$NOOK_HOME/run/crash/ctl.sock" -a ! -e "$NOOK_HOME/sandboxes/crash/upper"
run_nook start crash
is "$status" 0 "a sandbox whose supervisor died can be started again"
run_nook rm crash

# ---- crash: kill -9 of nook-init -----------------------------------------------------------
run_nook create initdie
sup=$(field initdie .supervisorPid)
init=$(init_of "${sup:-0}")
kill -9 "${init:-0}" 2>/dev/null
wait_state initdie stopped 5
is "$(field initdie .state)/$(field initdie .stopReason)" "stopped/init_died" "kill -9 of nook-init: stopReason init_died"
check "the supervisor exits when init dies" test -z "$(sleep 0.2; alive "${sup:-0}" && echo alive)"
run_nook rm initdie

# ---- max-duration, with the creating process SIGKILLed -------------------------------------
# The creator runs in its own process group; once the sandbox is up, the whole group gets
# SIGKILL. The supervisor is detached, so the 2 s lifetime is still enforced.
# (Started from a subshell, so that this shell has no job to report as "Killed".)
creator=$(setsid bash -c "\"\$NOOK\" create --max-duration 2s maxd >/dev/null 2>&1; exec sleep 60" \
        </dev/null >/dev/null 2>&1 & echo $!)
wait_state maxd running 10
t0=$(date +%s%N)
check "the creating process group was alive and got SIGKILL" kill -9 -- -"$creator"
msup=$(field maxd .supervisorPid)
is "$(field maxd .state)" "running" "max-duration 2s: running right after its creator was SIGKILLed"
echo data >"$NOOK_HOME/workspaces/maxd/data" 2>/dev/null
wait_state maxd stopped 6
t1=$(date +%s%N)
is "$(field maxd .state)/$(field maxd .stopReason)" "stopped/max_duration" "max-duration 2s: stopped with stopReason max_duration"
ms=$(((t1 - t0) / 1000000))
if ((ms <= 4000)); then ok "max-duration retired the sandbox in time (${ms} ms after the kill)"; else not_ok "max-duration retired the sandbox in time" "${ms} ms"; fi
is "$(cat "$NOOK_HOME/workspaces/maxd/data" 2>/dev/null)" "data" "max-duration kept the workspace"
check "the supervisor is gone after retirement" test -z "$(sleep 0.2; alive "${msup:-0}" && echo alive)"
run_nook rm maxd

# ---- idle-timeout --------------------------------------------------------------------------
run_nook create --idle-timeout 2s idle
sleep 1.2
run_nook exec idle -- true
sleep 1.2
is "$(field idle .state)" "running" "idle-timeout 2s: an exec resets the idle clock"
wait_state idle stopped 5
is "$(field idle .state)/$(field idle .stopReason)" "stopped/idle" "idle-timeout 2s: stopped with stopReason idle"
run_nook rm idle

# A running exec is not idleness.
run_nook create --idle-timeout 1s busy
run_nook exec busy -- sleep 2.5
is "$status" 0 "idle-timeout 1s: a 2.5 s exec runs to completion"
run_nook rm busy

# ---- concurrency ---------------------------------------------------------------------------
# 20 `nook run` and 20 create+exec+rm, each from its own process, all on one NOOK_HOME.
conc=$(mktemp -d "$NOOK_HOME.conc.XXXXXX")
for i in $(seq 1 20); do
        ("$NOOK" run -- true >"$conc/run$i.out" 2>"$conc/run$i.err"; echo $? >"$conc/run$i.rc") &
        ("$NOOK" create "cc$i" >/dev/null 2>"$conc/cc$i.err" &&
                "$NOOK" exec "cc$i" -- echo "hi$i" >"$conc/cc$i.out" 2>>"$conc/cc$i.err" &&
                "$NOOK" rm "cc$i" >/dev/null 2>>"$conc/cc$i.err"
                echo $? >"$conc/cc$i.rc") &
done
wait
nfail=0 unclear=""
for f in "$conc"/*.rc; do
        b=${f%.rc}
        if [[ $(cat "$f") != 0 ]]; then
                nfail=$((nfail + 1))
                [[ -s "$b.err" ]] || unclear+="$(basename "$b") "
        fi
done
if [[ $nfail == 0 ]]; then
        ok "40 concurrent run / create+exec+rm all succeeded"
elif [[ -z "$unclear" ]]; then
        ok "40 concurrent run / create+exec+rm: $nfail failed, each with a message" 
        diag "$(cat "$conc"/*.err | sort | uniq -c)"
else
        not_ok "40 concurrent run / create+exec+rm: every failure has a message" "silent failures: $unclear"
fi
bad_out=""
for i in $(seq 1 20); do
        [[ $(cat "$conc/cc$i.rc") != 0 || $(cat "$conc/cc$i.out") == "hi$i" ]] || bad_out+="cc$i "
done
is "$bad_out" "" "every successful concurrent exec printed its own output"
is "$(sqlite3 "$NOOK_HOME/nook.db" 'pragma integrity_check' 2>&1)" "ok" "nook.db passes integrity_check"
run_nook ls -q
is "$out" "" "no sandbox record left after the concurrent runs"
is "$(ls -A "$NOOK_HOME/sandboxes" "$NOOK_HOME/workspaces" 2>/dev/null | grep -v -e ':$' -e '^$')" "" \
        "no sandbox or workspace directory left"
is "$(pgrep -f -- "--state $NOOK_HOME/" | tr '\n' ' ')" "" "no supervisor left"
is "$(ls -A "$NOOK_HOME/run/.locks" | grep -E '^(run-|cc)' | tr '\n' ' ')" "" \
        "no lock file left by the 40 runs and removes (one per name would pile up)"
rm -rf "$conc"

# ---- rm waits for the supervisor: it exits while rm deletes the folders and the record, and rm
# returns only once it is gone (lifecycle.c, nook_sandbox_remove).  A child subreaper runs create
# and rm, so each supervisor is its child: a zombie or no process when rm returns, never alive.
# With test hooks each supervisor sleeps 300 ms after its replies before it exits.
out=$(python3 - "$NOOK" <<'PY'
import ctypes, json, os, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
nook, alive, fails = sys.argv[1], [], 0
for i in range(5):
    name = f"rmw{i}"
    env = dict(os.environ, NOOK_TEST_SUPERVISOR_EXIT_DELAY_MS="300")
    fails += subprocess.run([nook, "create", name], capture_output=True, env=env).returncode != 0
    info = subprocess.run([nook, "inspect", name], capture_output=True, text=True).stdout
    pid = json.loads(info or "{}").get("supervisorPid") or 0
    fails += subprocess.run([nook, "rm", name], capture_output=True).returncode != 0
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "gone"
    if not pid or state not in ("Z", "X", "gone"):
        alive.append(f"{name}:{pid}:{state}")
    try:
        while True:
            os.waitpid(-1, 0)
    except ChildProcessError:
        pass
print(fails, " ".join(alive) or "none")
PY
)
is "$out" "0 none" "five creates and rms: when rm returns, the sandbox's supervisor is no longer alive"
