#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 17, exec: the spare helper answers the client itself.  The supervisor passes the client's
# connection to the spare with the request; the helper sends "started"/"exited" there first, then
# its record to the supervisor, which only answers what it words itself (docs/design/runtime.md,
# Exec).  A raw client (python3, SOCK_SEQPACKET + SCM_RIGHTS) drives the protocol: the replies
# with and without "reportStarted", hostile values of it, a client that vanishes right after its
# request, one that hangs up right after "exited" while the command's background child runs
# (it must survive), and a reason that a truncation would have cut inside a UTF-8 character (the
# client hung for ever before).  No timing assertions: generous waits.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
command -v python3 >/dev/null || plan skip_all "python3 is needed for the raw protocol client"
plan 17

T=$(mktemp -d "$NOOK_HOME.cdirect.XXXXXX")
trap 'rc=$?; rm -rf "$T"; (exit $rc); _tap_finish' EXIT

# raw_exec SOCK MODE REQUEST-JSON: sends the request with /dev/null as stdin, stdout and stderr,
# prints the replies' ops ("started", "exited:STATUS", "error:CODE", "EOF") up to "exited";
# MODE close: hangs up right after the request and prints nothing.
cat >"$T/client.py" <<'EOF'
import json, os, socket, sys
path, mode, req = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
nul = os.open("/dev/null", os.O_RDWR)
socket.send_fds(s, [req.encode()], [nul, nul, nul])
if mode == "close":
    sys.exit(0)
s.settimeout(120)
ops = []
while True:
    m = s.recv(262144)
    if not m:
        ops.append("EOF")
        break
    j = json.loads(m)
    op = j.get("op")
    if op == "exited":
        op += ":%d" % j.get("status", -1)
    elif op == "error":
        op += ":%s" % j.get("code")
    ops.append(op)
    if op.startswith("exited") or op.startswith("error"):
        break
print(" ".join(ops))
EOF
raw_exec() { timeout -k 5 150 python3 "$T/client.py" "$@"; }
sock_of() { compgen -G "$NOOK_RUNTIME_DIR/nook-$(id -u)/*/$1/ctl.sock" | head -1; }
# inside an exec: how many processes run the command line $1 exactly
COUNT='n=0; for d in /proc/[0-9]*; do [ "$(tr "\\0" " " <$d/cmdline 2>/dev/null)" = "$1 " ] && n=$((n + 1)); done; echo $n'

run_nook create cd
is "$status" 0 "create cd"
S=$(sock_of cd)
check "its control socket is found" test -S "$S"

# ---- the replies -----------------------------------------------------------------------------
is "$(raw_exec "$S" wait '{"op":"exec","argv":["true"]}')" "started exited:0" \
        "a plain exec: \"started\", then \"exited\" with status 0"
is "$(raw_exec "$S" wait '{"op":"exec","argv":["sh","-c","exit 3"],"reportStarted":false}')" "exited:768" \
        "reportStarted false: only \"exited\" (status 3)"
is "$(raw_exec "$S" wait '{"op":"exec","argv":["true"],"reportStarted":"no"}')" "started exited:0" \
        "reportStarted as a string: ignored, \"started\" comes"
is "$(raw_exec "$S" wait '{"op":"exec","argv":["true"],"reportStarted":null}')" "started exited:0" \
        "reportStarted null: ignored, \"started\" comes"
out=$(raw_exec "$S" wait '{"op":"exec","argv":["sh","-c","exit 0"],"detach":true,"reportStarted":false}')
like "$out" "^started" "a detached exec gets \"started\" whatever reportStarted says"
is "$(raw_exec "$S" wait '{"op":"exec","argv":["/no/such/cmd"],"reportStarted":false}')" "exited:32512" \
        "a command that cannot start: \"exited\" with 127, from the helper"
out=$(raw_exec "$S" wait '{"op":"exec","argv":["sleep","60"],"timeoutMs":500}')
is "$out" "started exited:9" "a timeout: SIGKILL, answered by the supervisor (it words the reason)"

# ---- a client that vanishes right after its request ----------------------------------------
raw_exec "$S" close '{"op":"exec","argv":["sh","-c","sleep 6301 & exec sleep 6302"]}'
check "the vanished client's command and its child are killed" \
        wait_for 30 eval '[[ "$("$NOOK" exec cd -- sh -c "$COUNT" x "sleep 6301")$("$NOOK" exec cd -- sh -c "$COUNT" x "sleep 6302")" == 00 ]]'

# ---- clients that hang up right after "exited": the background child survives ---------------
bad=""
for i in $(seq 10); do
        out=$(raw_exec "$S" wait '{"op":"exec","argv":["sh","-c","sleep 6303 & exit 0"],"reportStarted":false}')
        [[ $out == "exited:0" ]] || bad+=" $i:$out"
done
is "$bad" "" "10 execs whose command leaves a child behind: each one \"exited\" 0"
sleep 1
run_nook exec cd -- sh -c "$COUNT" x "sleep 6303"
is "$out" "10" "their clients hung up at once: all 10 background children still run"

# ---- a reason cut inside a UTF-8 character ----------------------------------------------------
# "cannot run '<200 bytes>': No such file or directory" is cut at 199 bytes, inside an 'é'
long=$(printf 'é%.0s' $(seq 100))
run_nook exec cd -- "$long"
is "$status" 127 "a 200-byte non-ASCII command that does not exist: 127, no hang"
like "$err" "cannot run" "with the reason"
out=$(raw_exec "$S" wait "{\"op\":\"exec\",\"argv\":[\"$long\"]}")
is "$out" "exited:32512" "the raw client gets \"exited\" (its reason is valid JSON)"

run_nook exec cd -- echo still-fine
is "$status/$out" "0/still-fine" "the sandbox serves the next exec"
run_nook rm -f cd
is "$status" 0 "rm -f cd (the background children go with it)"
