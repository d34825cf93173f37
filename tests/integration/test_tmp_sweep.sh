#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Temporaries a killed process leaves are swept once their owner is gone, never while it lives
# (owner locks, util/tmpdir.c): a `nook cp` killed while it extracts leaves a ".nook-cp-*" stage,
# removed by the next copy into the same folder; a pull killed while it unpacks leaves
# images/layers/<mode>/.tmp-*, removed by the next reconcile (`nook ls`); a killed `ws write`
# leaves nothing at all.  A live owner's stage
# and anything not named like ours stay; a symlink named like ours is never followed.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 13

# hold_lock DIR: one process (this one, after exec) holds an flock on DIR, as an owner does.
hold_lock() {
        exec 9<"$1"
        flock 9
        exec sleep 60
}

run_nook create s1
is "$status" 0 "create s1"
ws=$("$NOOK" ws path s1)
run_nook ws mkdir s1 /in
fifo=$NOOK_HOME/cp.fifo
mkfifo "$fifo"

# A cp killed in the middle of a tar stream: its stage stays behind.
"$NOOK" cp - s1:/workspace/in <"$fifo" 2>/dev/null &
cp_pid=$!
exec 3>"$fifo"
tar -C "$NOOK_BUILD_DIR" -cf - src 2>/dev/null | head -c 300000 >&3
stage_exists() { compgen -G "$ws/in/.nook-cp-*" >/dev/null; } # (quiet: stdout is TAP)
check "the killed cp's stage appears" wait_for 10 stage_exists
kill -9 "$cp_pid"
wait "$cp_pid" 2>/dev/null
exec 3>&-
stale=$(compgen -G "$ws/in/.nook-cp-*")
check "the stage outlives the killed cp" test -d "$stale"

# A live owner's stage (held by flock) and a symlink named like a stage, pointing out.
mkdir "$ws/in/.nook-cp-live"
hold_lock "$ws/in/.nook-cp-live" &
holder=$!
sleep 0.3
outside=$NOOK_HOME/outside
mkdir -p "$outside" && echo keep >"$outside/file"
ln -s "$outside" "$ws/in/.nook-cp-link"

echo data >"$NOOK_HOME/f"
run_nook cp "$NOOK_HOME/f" s1:/workspace/in/f
is "$status" 0 "the next cp into the folder works"
check "the dead cp's stage is swept" test ! -e "$stale"
check "a live cp's stage stays" test -d "$ws/in/.nook-cp-live"
check "a symlink named like a stage is not followed" test -f "$outside/file" -a -L "$ws/in/.nook-cp-link"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null

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
check "a live pull's unpack folder stays" test -d "$layers/.tmp-live-000000"
check "a layer (not named .tmp-) is never touched" test -d "$layers/0123abcd"
kill "$live" 2>/dev/null
wait "$live" 2>/dev/null
rm -rf "$layers/.tmp-live-000000" "$layers/0123abcd"

run_nook rm s1
