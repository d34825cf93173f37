#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The runtime folder (src/sandbox/rundir.h, docs/design/runtime.md "The runtime folder"): a
# sandbox's control socket and supervisor log live on a tmpfs folder that $NOOK_HOME/run links
# to, not in its state folder; every caller follows the link whatever its environment; a reboot
# (the folder emptied) leaves records that reconcile to stopped sandboxes which start again;
# hostile links and NOOK_RUNTIME_DIR values are refused with a clear error, changing nothing.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 60

field() { "$NOOK" inspect "$1" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get(sys.argv[1]) or "")' "$2"; }
gone() {
        local i st
        for ((i = 0; i < 500; i++)); do
                st=$(sed -n 's/.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null)
                [[ -z $st || $st == Z || $st == X ]] && return 0
                sleep 0.01
        done
        return 1
}

uid=$(id -u)
root="$NOOK_RUNTIME_DIR/nook-$uid"

# ---- where the per-run state lives --------------------------------------------------------------
run_nook create a
is "$status" 0 "create a" || diag "$err"
check "\$NOOK_HOME/run is a link" test -L "$NOOK_HOME/run"
rt=$(readlink "$NOOK_HOME/run")
like "$rt" "^$root/[0-9a-f]{16}\$" "to nook-UID/KEY in NOOK_RUNTIME_DIR"
is "$(stat -c %a "$root")/$(stat -c %a "$rt")/$(stat -c %a "$rt/a")" "700/700/700" "the runtime folders are private (0700)"
check "the control socket is in the sandbox's runtime folder" test -S "$rt/a/ctl.sock"
like "$(cat "$rt/a/supervisor.log")" "running" "and so is the supervisor's log"
check "neither is in the state folder, nor an etc folder in the writable layer" \
        test ! -e "$NOOK_HOME/sandboxes/a/ctl.sock" -a ! -e "$NOOK_HOME/sandboxes/a/supervisor.log" \
        -a ! -e "$NOOK_HOME/sandboxes/a/upper/etc"
run_nook exec a -- sh -c 'cat /etc/hostname; grep -c "127.0.1.1.a$" /etc/hosts'
is "$out" $'a\n1' "the sandbox's /etc/hostname and /etc/hosts name it"
run_nook exec a -- sh -c 'echo 10.9.9.9 extra >>/etc/hosts && rm /etc/hostname && grep -c extra /etc/hosts && test ! -e /etc/hostname'
is "$status/$out" "0/1" "the guest changes and deletes them like any file of its root"
# Another caller with another environment: the link decides, not its variables.
out=$(env NOOK_RUNTIME_DIR=relative/ignored XDG_RUNTIME_DIR=/nonexistent "$NOOK" exec a -- echo reached 2>&1)
is "$out" "reached" "a caller with other NOOK_RUNTIME_DIR and XDG_RUNTIME_DIR reaches the same sandbox"
run_nook stop a
check "stop removes the socket" test ! -e "$rt/a/ctl.sock"
run_nook logs --system a
like "$out" "running" "the supervisor log stays readable after stop"
run_nook start a
is "$status" 0 "start a again" || diag "$err"

# The runtime folder holds every sandbox's control socket: never a volume, not even with the override.
run_nook create v -v "$rt:/x" --allow-sensitive-volume
like "$status/$err" "^1/.*Refusing to mount '$rt': it is or holds nook's runtime folder" \
        "the runtime folder as a volume is refused, even with --allow-sensitive-volume"
run_nook create v -v "$NOOK_RUNTIME_DIR:/x" --allow-sensitive-volume
like "$status/$err" "^1/.*holds nook's runtime folder" "so is a folder above it"
is "$("$NOOK" ls -q | tr '\n' ' ')" "a " "neither made a sandbox"

# ---- a reboot empties the tmpfs --------------------------------------------------------------------
sup=$(field a supervisorPid)
check "a runs (supervisor ${sup:-none})" test -n "$sup"
kill -9 "$sup"
gone "$sup"
# (a's ephemeral layer is in its runtime folder: overlayfs made its work/work mode 0, which only
# root's rm could enter; a reboot needs no permission)
chmod -R u+rwx "${NOOK_RUNTIME_DIR:?}"/
rm -rf "${NOOK_RUNTIME_DIR:?}"/*
check "the link dangles, as after a reboot" test -L "$NOOK_HOME/run" -a ! -e "$NOOK_HOME/run"
is "$(field a state)/$(field a stopReason)" "stopped/supervisor_died" "the record reconciles to a stopped sandbox"
run_nook logs --system a
isnt "$status" 0 "logs --system of a sandbox whose log went with the tmpfs fails"
like "$err" "no supervisor log.*emptied.*nook start a" "saying where the log was, why it is gone and what to do"
run_nook exec a -- true
like "$err" "not running" "exec says it is not running"
run_nook start a
is "$status" 0 "it starts again" || diag "$err"
is "$(readlink "$NOOK_HOME/run")" "$rt" "with its runtime folder made again at the same place"
run_nook exec a -- cat /etc/hostname
is "$out" "a" "and answers exec"

# ---- a link whose folder cannot be made again (/run/user/UID gone after a logout) -------------
sup=$(field a supervisorPid)
kill -9 "$sup"
gone "$sup"
ln -sfn "$NOOK_HOME.gone/nook/0123456789abcdef" "$NOOK_HOME/run"
run_nook start a
is "$status" 0 "a link into a folder that is gone for good: start works" || diag "$err"
like "$(readlink "$NOOK_HOME/run")" "^$root/[0-9a-f]{16}\$" "on a new link into NOOK_RUNTIME_DIR"
check "nothing was made at the old place" test ! -e "$NOOK_HOME.gone"
run_nook run -- true
is "$status/$(ls -A "$rt" | grep -v -e '^a$' -e '^.locks$' -e '^.home$' | tr '\n' ' ')/$(ls -A "$rt/.locks")" "0//a.lock" \
        "nook run leaves nothing in the runtime folder (the name locks are there: a's, which is not removed yet)"

# ---- hostile links: refused, nothing changed -----------------------------------------------------
hostile_link() {
        local target=$1 what=$2 msg=$3
        ln -sfn "$target" "$NOOK_HOME/run"
        run_nook create hl
        isnt "$status" 0 "$what: create is refused"
        like "$err" "$msg" "$what: the error names the link and says to remove it"
}
hostile_link /etc "a link to /etc" "points to '/etc', which is not a folder of uid .* remove the link"
check "nothing was made in /etc" test ! -e /etc/a -a ! -e /etc/hl
hostile_link relative/dir "a relative link" "not a runtime folder nook made"
hostile_link "$rt/../x" "a link with '..'" "not a runtime folder nook made"
rm -f "$NOOK_HOME/run"
: >"$NOOK_HOME/run"
run_nook exec a -- true
like "$err" "is not a folder of uid" "a file at \$NOOK_HOME/run is refused"
rm -f "$NOOK_HOME/run"
mkdir -m 0755 "$NOOK_HOME/run"
run_nook exec a -- true
like "$err" "is not a folder of uid" "a plain folder others can enter is refused"
chmod 0700 "$NOOK_HOME/run"
run_nook exec a -- true
like "$err" "not running" "a private plain folder is the runtime folder (no tmpfs): a's socket is elsewhere"
rmdir "$NOOK_HOME/run"
ln -s "$rt" "$NOOK_HOME/run"
run_nook exec a -- cat /etc/hostname
is "$out" "a" "the link back: a answers again"

# ---- root following another user's dangling link makes nothing where it points -----------------
if nook_rootful; then
        h3="$NOOK_HOME.h3"
        mkdir -m 0700 "$h3"
        ln -s "$NOOK_HOME.h3gone/nook-1/0123456789abcdef" "$h3/run"
        chown -h 65534:65534 "$h3" "$h3/run"
        out=$(NOOK_HOME=$h3 "$NOOK" exec a -- true 2>&1)
        like "$out" "is gone .*run nook once as the state folder's owner \(uid 65534\)" \
                "root on another user's home whose runtime folder is gone: refused, saying who can make it"
        check "nothing was made where the link points" test ! -e "$NOOK_HOME.h3gone"
        # ... and on another user's home with no link yet makes none (root's folder there would
        # fail the owner check of every later caller, root's own included)
        h4="$NOOK_HOME.h4"
        mkdir -m 0700 "$h4"
        chown 65534:65534 "$h4"
        before=$(ls -A "$root" | tr '\n' ' ')
        out=$(NOOK_HOME=$h4 "$NOOK" exec a -- true 2>&1)
        like "$out" "'$h4' \(uid 65534's\) has no runtime folder yet; run nook once as its owner" \
                "root on another user's home without a link: refused, saying who can make it"
        is "$(ls -A "$h4" | tr '\n' ' ')|$(ls -A "$root" | tr '\n' ' ')" "|$before" \
                "no link in that home, no folder of root's for it"
else
        for i in 1 2 3 4; do skip_expected "needs real root to act on a state folder another user owns"; done
fi

# ---- NOOK_RUNTIME_DIR decides for a home without a link; bad values -------------------------------
h2="$NOOK_HOME.h2"
bad_env() {
        local value=$1 what=$2 msg=$3
        out=$(NOOK_HOME=$h2 NOOK_RUNTIME_DIR=$value "$NOOK" create x 2>&1)
        local st=$?
        isnt "$st" 0 "NOOK_RUNTIME_DIR $what: create is refused"
        like "$out" "$msg" "NOOK_RUNTIME_DIR $what: the error says what is wrong"
}
bad_env relative/dir "relative" "NOOK_RUNTIME_DIR must be an absolute path, got 'relative/dir'"
: >"$NOOK_HOME.file"
bad_env "$NOOK_HOME.file" "a file" "NOOK_RUNTIME_DIR '$NOOK_HOME.file' is not a folder"
mkdir -p "$NOOK_HOME.rt2"
ln -s /etc "$NOOK_HOME.rt2/nook-$uid"
bad_env "$NOOK_HOME.rt2" "whose nook-UID is a symlink" "is not a folder of uid $uid that only it can enter"
rm "$NOOK_HOME.rt2/nook-$uid"
mkdir -m 0777 "$NOOK_HOME.rt2/nook-$uid"
chmod 0777 "$NOOK_HOME.rt2/nook-$uid"
bad_env "$NOOK_HOME.rt2" "whose nook-UID others can write" "is not a folder of uid $uid that only it can enter"
is "$(ls -A "$h2/sandboxes" "$h2/workspaces" 2>/dev/null)" "" "none of them made a sandbox"
rmdir "$NOOK_HOME.rt2/nook-$uid"
rt2="$NOOK_HOME.rt2"
out=$(NOOK_HOME=$h2 NOOK_RUNTIME_DIR=$rt2 "$NOOK" run -- cat /etc/hostname 2>&1)
like "$out" "^run-" "a good NOOK_RUNTIME_DIR: nook run works"
like "$(readlink "$h2/run")" "^$rt2/nook-$uid/[0-9a-f]{16}\$" "its home links there"

# a runtime folder nook cannot write in: the error names the folder and what to check
if [[ $(id -u) != 0 ]]; then
        chmod 0500 "$rt"
        run_nook create y
        chmod 0700 "$rt"
        like "$status/$err" "^1/.*Cannot create the sandbox's runtime folder '$rt/y' \(the folder above it must be writable.*readlink NOOK_HOME/run.*Permission denied" \
                "an unwritable runtime folder: create fails naming it and what to check"
        is "$("$NOOK" ls -q | tr '\n' ' ')" "a " "and makes no sandbox"
else
        skip_expected "root (also in a user namespace) writes in a 0500 folder of its own"
        skip_expected "root (also in a user namespace) writes in a 0500 folder of its own"
fi
run_nook rm a
is "$status/$(ls -A "$rt" | tr '\n' ' ')/$(ls -A "$rt/.locks")" "0/.home .locks /" \
        "rm removes the sandbox's runtime folder and its lock"

# a state folder deleted by hand leaves its runtime folder (on a tmpfs): the next prune of
# another state folder of this user removes it, and leaves live ones and unmarked ones alone
gone="$NOOK_HOME.deleted"
mkdir -m 0700 "$gone"
NOOK_HOME=$gone "$NOOK" run -- true >/dev/null 2>&1
gone_rt=$(readlink "$gone/run")
is "$(cat "$gone_rt/.home" 2>&1)" "$gone" "a runtime folder says which state folder it serves"
mkdir -m 0700 "$root/0123456789abcdef" # an older nook's: no mark
rm -rf "$gone"
run_nook prune
is "$status/$([[ -e $gone_rt ]] && echo left)/$([[ -d $rt ]] && echo ours)/$([[ -d $root/0123456789abcdef ]] && echo unmarked)" \
        "0//ours/unmarked" "prune removes the runtime folder of a deleted state folder, not ours, not an unmarked one"
rmdir "$root/0123456789abcdef"
