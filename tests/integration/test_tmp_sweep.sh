#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Temporaries a killed process leaves are swept once their owner is gone, never while it lives
# (owner locks, util/tmpdir.c): a `nook cp` killed while it extracts into a sandbox's root
# filesystem leaves a ".nook-cp-*" stage beside its target, removed by the next copy into the same
# folder (one into a workspace stages in the state folder's trash, swept by the next `nook ls`); a pull killed while it unpacks leaves
# images/layers/<mode>/.tmp-*, removed by the next reconcile (`nook ls`); a killed `ws write`
# leaves nothing at all.  A live owner's stage
# and anything not named like ours stay; a symlink named like ours is never followed.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 17

# hold_lock DIR: one process (this one, after exec) holds an flock on DIR, as an owner does.
hold_lock() {
        exec 9<"$1"
        flock 9
        exec sleep 60
}

run_nook create --sticky s1
is "$status" 0 "create s1"
ws=$("$NOOK" ws path s1)
run_nook ws mkdir s1 /in
run_nook exec s1 -- mkdir -p /opt/in
up=$NOOK_HOME/sandboxes/s1/upper/opt/in # the root filesystem's /opt/in, as the host sees it
fifo=$NOOK_HOME/cp.fifo
mkfifo "$fifo"

# A cp into the root filesystem killed in the middle of a tar stream: its stage stays behind.
"$NOOK" cp - s1:/opt/in <"$fifo" 2>/dev/null &
cp_pid=$!
exec 3>"$fifo"
tar -C "$NOOK_BUILD_DIR" -cf - src 2>/dev/null | head -c 300000 >&3
stage_exists() { compgen -G "$up/.nook-cp-*" >/dev/null; } # (quiet: stdout is TAP)
check "the killed cp's stage appears" wait_for 10 stage_exists
kill -9 "$cp_pid"
wait "$cp_pid" 2>/dev/null
exec 3>&-
stale=$(compgen -G "$up/.nook-cp-*")
check "the stage outlives the killed cp" test -d "$stale"

# A live owner's stage (held by flock) and a symlink named like a stage, pointing out.
# (held from inside: a lock taken on the overlay's upper folder is another inode's than the one
# a cp takes through the sandbox's root)
run_nook exec -d s1 -- sh -c 'mkdir /opt/in/.nook-cp-live && exec flock /opt/in/.nook-cp-live sleep 61'
locked() { "$NOOK" exec s1 -- sh -c 'flock -n /opt/in/.nook-cp-live true' >/dev/null 2>&1; }
check "a live owner holds its stage" wait_for 10 eval '! locked'

outside=$NOOK_HOME/outside
mkdir -p "$outside" && echo keep >"$outside/file"
ln -s "$outside" "$up/.nook-cp-link"

echo data >"$NOOK_HOME/f"
run_nook cp "$NOOK_HOME/f" s1:/opt/in/f
is "$status" 0 "the next cp into the folder works"
check "the dead cp's stage is swept" test ! -e "$stale"
check "a live cp's stage stays" test -d "$up/.nook-cp-live"
check "a symlink named like a stage is not followed" test -f "$outside/file" -a -L "$up/.nook-cp-link"
"$NOOK" exec s1 -- pkill -f 'sleep 61' >/dev/null 2>&1

# A cp into a workspace killed the same way: its stage is in the state folder's trash, never in
# the workspace (where diff listed it and merge carried it); the next reconcile sweeps it.
"$NOOK" cp - s1:/workspace/in <"$fifo" 2>/dev/null &
cp_pid=$!
exec 3>"$fifo"
tar -C "$NOOK_BUILD_DIR" -cf - src 2>/dev/null | head -c 300000 >&3
trash_stage() { compgen -G "$NOOK_HOME/trash/.nook-cp-*" >/dev/null; }
check "a cp into the workspace stages in the state folder's trash" wait_for 10 trash_stage
kill -9 "$cp_pid"
wait "$cp_pid" 2>/dev/null
exec 3>&-
is "$(cd "$ws/in" && ls -A | grep -c '^\.nook-cp-')" 0 "killed, it leaves nothing in the workspace"

# A ws write killed half-way leaves nothing: it writes an unnamed file (O_TMPFILE) and links it
# in only when complete.
wfifo=$NOOK_HOME/ws.fifo
mkfifo "$wfifo"
"$NOOK" ws write s1 /in/big <"$wfifo" 2>/dev/null &
w_pid=$!
exec 4>"$wfifo"
head -c 200000 /dev/zero >&4
sleep 0.5
kill -9 "$w_pid"
wait "$w_pid" 2>/dev/null
exec 4>&-
is "$(cd "$ws/in" && ls -A | grep -c -e '^big$' -e '^\.nook-tmp-')" 0 "a killed ws write leaves neither the file nor a temporary"
echo v1 | "$NOOK" ws write s1 /in/f && echo v2 | "$NOOK" ws write s1 /in/f
is "$(cat "$ws/in/f")|$(cd "$ws/in" && ls -A | grep -c '^\.nook-tmp-')" "v2|0" "a replacing ws write leaves no temporary"

# A pull killed while unpacking: layers/<mode>/.tmp-* (made owner-locked by image/pull.c).
if nook_rootful; then mode=rootful; else mode=rootless; fi
layers=$NOOK_HOME/images/layers/$mode
mkdir -p "$layers/.tmp-dead-000000/usr" "$layers/.tmp-live-000000" "$layers/0123abcd"
hold_lock "$layers/.tmp-dead-000000" &
dead=$!
hold_lock "$layers/.tmp-live-000000" &
live=$!
sleep 0.3
kill -9 "$dead" # the owner dies with its lock held: the kernel drops the lock
wait "$dead" 2>/dev/null
run_nook ls
is "$status" 0 "ls (a reconcile) runs"
check "a killed pull's unpack folder is swept" test ! -e "$layers/.tmp-dead-000000"
check "so is the killed cp's stage in the trash" eval '! trash_stage'
check "a live pull's unpack folder stays" test -d "$layers/.tmp-live-000000"
check "a layer (not named .tmp-) is never touched" test -d "$layers/0123abcd"
kill "$live" 2>/dev/null
wait "$live" 2>/dev/null
rm -rf "$layers/.tmp-live-000000" "$layers/0123abcd"

run_nook rm s1
