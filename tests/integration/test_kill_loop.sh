#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Issue 18, crash safety: SIGKILL at random points.  Each round starts one operation (create,
# exec, stop, rm, snapshot create/export/import, image import), kills either the CLI or the
# sandbox's supervisor after a random delay of 0-250 ms, and then, after the next command's
# reconcile (`nook ls`), checks that
#   - nook.db passes `pragma integrity_check`
#   - `ls` agrees with the processes: running <=> a live supervisor of that name, whose pid the
#     record holds; no record says "creating"; no supervisor without a running record
#   - nothing leaked: no mount under NOOK_HOME, no cgroup but those of running sandboxes, no lock
#     file, nothing in snapshots/.tmp or images/tmp
# At least 200 rounds in the plain stages (fewer under ASan, which is slower), bounded in time.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

require_bin "$NOOK" "$NOOK_PROBE"
command -v sqlite3 >/dev/null || bail_out "missing sqlite3 (scripts/deps.sh installs it)"
plan 10

# at least MIN of ROUNDS must run: 200 as root, fewer where each
# round is slower (rootless setup; ASan, about 3x)
ROUNDS=${NOOK_KILL_ROUNDS:-200}
case ${NOOK_TEST_STAGE:-} in
asan-*) MIN=60 ;;
user | unshare) MIN=120 ;;
*) MIN=200 ;;
esac
((MIN > ROUNDS)) && MIN=$ROUNDS
# The loop runs MIN rounds however slow the machine is (a count, not a timing), then more up to
# ROUNDS while under SOFT seconds; HARD only stops a runaway (meson's timeout is 600 s).
SOFT=150
HARD=420
W=$IMG_WORK

# --- fixtures ----------------------------------------------------------------------------------
# A small image (a few MB of layer, so that an import takes long enough to be killed midway).
head -c 20000000 /dev/urandom >"$W/blob.bin"
cat >"$W/img.json" <<JSON
{"compression": "none", "layers": [[{"name": "big.bin", "src": "$W/blob.bin"}, {"name": "hi", "data": "hi\n"}]]}
JSON
img_build "$W/oci" v1 <"$W/img.json"
tar -C "$W/oci" -cf "$W/oci.tar" .
# A stopped sticky sandbox with a few MB in its writable layer, a snapshot of it and its export.
"$NOOK" create --sticky st >/dev/null 2>&1 &&
        "$NOOK" exec st -- /bin/sh -c 'head -c 3000000 /dev/urandom >/big' &&
        "$NOOK" stop st >/dev/null 2>&1 &&
        "$NOOK" snapshot create st snap0 >/dev/null 2>&1 &&
        "$NOOK" snapshot export snap0 "$W/snap0.tar" >/dev/null 2>&1
check "fixtures: a sticky sandbox, its snapshot and the snapshot's export" test -s "$W/snap0.tar"

# sup_of NAME: the pid of NAME's live supervisor(s), one per line.
sup_of() { pgrep -f -- "--state $NOOK_HOME/sandboxes/$1( |\$)" 2>/dev/null; }

# --- the invariants ---------------------------------------------------------------------------
fail_db=0 fail_ls=0 fail_mount=0 fail_cg=0 fail_proc=0 fail_lock=0 fail_tmp=0 fail_run=0
first_fail=""
problems=()
bad() { problems+=("$1 $2"); }

# check_once: runs `nook ls` (the reconcile) and compares; fills problems (category, detail).
check_once() {
        local json recs name state pid sups running=() r c
        problems=()
        json=$("$NOOK" ls --json 2>&1) || { bad ls "ls failed: $json"; return; }
        [[ $(sqlite3 "$NOOK_HOME/nook.db" 'pragma integrity_check' 2>&1) == ok ]] || bad db "integrity_check"
        recs=$(python3 -c 'import json,sys
for r in json.loads(sys.argv[1]): print(r["name"], r["state"], r.get("supervisorPid") or 0)' "$json")
        while read -r name state pid; do
                [[ -z $name ]] && continue
                sups=$(sup_of "$name" | tr '\n' ' ')
                sups=${sups% }
                case $state in
                running)
                        running+=("$name")
                        [[ $sups == "$pid" ]] || bad ls "$name running pid $pid, supervisors '$sups'" ;;
                stopped) [[ -z $sups ]] || bad ls "$name stopped, supervisors '$sups'" ;;
                *) bad ls "$name is '$state' after reconcile" ;;
                esac
        done <<<"$recs"
        for pid in $(pgrep -f -- "--state $NOOK_HOME/sandboxes/" 2>/dev/null); do
                name=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n 3p)
                name=${name##*/}
                [[ -z $name || " ${running[*]} " == *" $name "* ]] ||
                        bad proc "supervisor $pid of '$name' has no running record"
        done
        awk -v h="$NOOK_HOME" 'index($5, h) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo &&
                bad mount "a mount under NOOK_HOME"
        for c in $(_nook_cgroups); do
                c=${c##*/nook-}
                c=${c%-*}
                [[ " ${running[*]} " == *" $c "* ]] || { bad cg "cgroup of '$c' left"; break; }
        done
        r=$(ls -A "$NOOK_HOME/run/.locks" 2>/dev/null)
        [[ -z $r ]] || bad lock "lock files left: $r"
        # The runtime folder (src/sandbox/rundir.h): a folder per listed name, or a failed
        # create's lone supervisor.log; a control socket only while its sandbox runs.
        local all d n
        all=" $(awk '{print $1}' <<<"$recs" | tr '\n' ' ') "
        for d in "$NOOK_HOME"/run/*; do
                [[ -e $d ]] || continue
                n=${d##*/}
                if [[ $all != *" $n "* ]]; then
                        r=$(ls -A "$d" | grep -vx supervisor.log | tr '\n' ' ')
                        [[ -z $r ]] || bad run "the runtime folder of '$n' (no record) holds: $r"
                elif [[ -S $d/ctl.sock && " ${running[*]} " != *" $n "* ]]; then
                        bad run "a control socket of '$n', which is not running"
                fi
        done
        r=$(ls -A "$NOOK_HOME/snapshots/.tmp" "$NOOK_HOME/images/tmp" "$NOOK_HOME/trash" 2>/dev/null |
                grep -v -e '^$' -e ':$')
        [[ -z $r ]] || bad tmp "temporaries left: $r"
}

# verify: a killed CLI may have left its supervisor finishing what it was asked (a stop, an
# exec): `ls` and the process table are read one after the other, so a mismatch is checked
# again a second later, and only one that stays is counted.
verify() {
        local p cat
        check_once
        ((${#problems[@]} == 0)) && return
        sleep 1
        check_once
        for p in "${problems[@]}"; do
                cat=${p%% *}
                eval "fail_$cat=\$((fail_$cat + 1))"
                [[ -z $first_fail ]] && first_fail="round $round ($op, killed $who after ${delay}ms): ${p#* }"
        done
}

# gone PID: waits (up to 2 s) until a SIGKILLed process has finished dying (a zombie counts as
# gone): until then it still looks alive to anyone, nook included.
gone() {
        local i st
        for ((i = 0; i < 200; i++)); do
                st=$(sed -n 's/.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null)
                [[ -z $st || $st == Z || $st == X ]] && return 0
                sleep 0.01
        done
}

# --- the loop ---------------------------------------------------------------------------------
ops=(create create exec stop rm snapcreate snapexport snapimport imgimport)
start=$SECONDS
round=0
while ((round < ROUNDS && (round < MIN || SECONDS - start < SOFT) && SECONDS - start < HARD)); do
        round=$((round + 1))
        op=${ops[RANDOM % ${#ops[@]}]}
        # what the operation needs first, done without killing
        case $op in
        exec | stop) [[ -n $(sup_of k1) ]] || "$NOOK" create --replace k1 >/dev/null 2>&1 ;;
        rm) "$NOOK" ls -q 2>/dev/null | grep -qx k1 || "$NOOK" create k1 >/dev/null 2>&1 ;;
        esac
        case $op in
        create) "$NOOK" create --replace k1 >/dev/null 2>&1 & ;;
        exec) "$NOOK" exec k1 -- /bin/sh -c 'sleep 0.2' >/dev/null 2>&1 & ;;
        stop) "$NOOK" stop --timeout 1s k1 >/dev/null 2>&1 & ;;
        rm) "$NOOK" rm k1 >/dev/null 2>&1 & ;;
        snapcreate) "$NOOK" snapshot create st "s$round" >/dev/null 2>&1 & ;;
        snapexport) "$NOOK" snapshot export --force snap0 "$W/exp.tar" >/dev/null 2>&1 & ;;
        snapimport) "$NOOK" snapshot import "$W/snap0.tar" "i$round" >/dev/null 2>&1 & ;;
        imgimport) "$NOOK" image import --quiet --name "localhost/kl/i:$round" "$W/oci.tar" >/dev/null 2>&1 & ;;
        esac
        cli=$!
        delay=$((RANDOM % 250))
        sleep "$(printf '0.%03d' "$delay")"
        who=cli
        target=$cli
        if [[ $op == create || $op == exec || $op == stop || $op == rm ]] && ((RANDOM % 2)); then
                s=$(sup_of k1 | head -1)
                [[ -n $s ]] && { who=supervisor; target=$s; }
        fi
        kill -KILL "$target" 2>/dev/null
        wait "$cli" 2>/dev/null
        gone "$target"
        verify
        # keep the state small: snapshots and images made by the rounds go (not killed)
        if ((round % 20 == 0)); then
                for s in $("$NOOK" snapshot ls -q 2>/dev/null); do
                        [[ $s == snap0 ]] || "$NOOK" snapshot rm "$s" >/dev/null 2>&1
                done
                "$NOOK" image prune >/dev/null 2>&1
        fi
        rm -f "$W"/exp.tar*
done
diag "$round kill points in $((SECONDS - start)) s"
if ((round >= MIN)); then
        ok "at least $MIN kill points ran ($round, stage ${NOOK_TEST_STAGE:-manual})"
else
        not_ok "only $round kill points ran in ${HARD}s, $MIN wanted (stage ${NOOK_TEST_STAGE:-manual})"
fi
[[ -n $first_fail ]] && diag "first failure: $first_fail"
is "$fail_db" 0 "nook.db passed integrity_check after every kill"
is "$fail_ls" 0 "ls agreed with the processes after every kill"
is "$fail_proc" 0 "no supervisor without a running record"
is "$fail_mount" 0 "no mount left under NOOK_HOME"
is "$fail_cg" 0 "no cgroup left but those of running sandboxes"
is "$fail_lock" 0 "no lock file left after ls"
is "$fail_tmp" 0 "no temporary left in snapshots/.tmp, images/tmp or trash after ls"
is "$fail_run" 0 "no runtime folder of a removed sandbox, no control socket of a stopped one, after ls"
"$NOOK" rm k1 >/dev/null 2>&1
"$NOOK" rm st >/dev/null 2>&1
