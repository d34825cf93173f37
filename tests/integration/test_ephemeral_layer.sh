#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The ephemeral layer (src/sandbox/rundir.h, docs/design/runtime.md "The ephemeral layer"): an
# ephemeral sandbox's writable layer (upper, work) lives in its runtime folder, not in its state
# folder on NOOK_HOME's disk; the guest's writes land there; diff and branch find them there; a
# stop, a killed supervisor (reconcile) and rm remove them; a sticky sandbox keeps its layer in
# its state folder; a runtime folder with too little room gets no layer (the state folder
# instead).
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 15

rt() { readlink -f "$NOOK_HOME/run"; }
sup_pid() { "$NOOK" inspect "$1" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("supervisorPid") or "")'; }
gone() {
        local i
        for ((i = 0; i < 500; i++)); do
                [[ -d /proc/$1 ]] || return 0
                [[ $(sed -n 's/.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null) == Z ]] && return 0
                sleep 0.01
        done
        return 1
}

# ---- an ephemeral sandbox's layer is in its runtime folder ------------------------------------------
run_nook create e
is "$status" 0 "create e (ephemeral)" || diag "$err"
R=$(rt)
check "its upper and work folders are in its runtime folder" test -d "$R/e/upper" -a -d "$R/e/work"
check "and not in its state folder" test ! -e "$NOOK_HOME/sandboxes/e/upper" -a ! -e "$NOOK_HOME/sandboxes/e/work"
run_nook exec e -- sh -c 'echo layer-data >/etc/nook-layer-test && cat /etc/nook-layer-test'
is "$status/$out" "0/layer-data" "the guest writes to its root" || diag "$err"
is "$(cat "$R/e/upper/etc/nook-layer-test" 2>&1)" "layer-data" "the write is in the runtime folder's upper"
run_nook diff --root e
like "$out" "A etc/nook-layer-test" "diff --root finds the layer there" || diag "$err"
run_nook stop e
check "stop removes the layer, keeps the workspace" \
        test ! -e "$R/e/upper" -a ! -e "$R/e/work" -a -d "$NOOK_HOME/workspaces/e"
run_nook start e
run_nook exec e -- sh -c 'test ! -e /etc/nook-layer-test && echo fresh'
is "$status/$out" "0/fresh" "start gives a fresh layer" || diag "$err"

# ---- a killed supervisor: the next command's reconcile removes the layer ----------------------------
pid=$(sup_pid e)
kill -9 "$pid"
gone "$pid" || diag "supervisor $pid still there"
run_nook ls
is "$("$NOOK" inspect e | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" "stopped" \
        "a sandbox whose supervisor was killed reconciles to stopped"
check "and its layer in the runtime folder is gone" test ! -e "$R/e/upper" -a ! -e "$R/e/work"
run_nook rm e
is "$status" 0 "rm e" || diag "$err"
check "rm leaves no runtime folder" test ! -e "$R/e"

# ---- a sticky sandbox keeps its layer on disk, in its state folder ------------------------------------
run_nook create s --sticky
is "$status" 0 "create s --sticky" || diag "$err"
check "a sticky sandbox's layer is in its state folder, not its runtime folder" \
        test -d "$NOOK_HOME/sandboxes/s/upper" -a ! -e "$R/s/upper"
run_nook rm s

# ---- a runtime folder with too little room: the layer goes to the state folder ------------------------
if nook_rootful && [[ $(id -u) == 0 ]] && unshare -m true 2>/dev/null; then
        small="$NOOK_HOME.small"
        mkdir -p "$small"
        # A 64 MiB tmpfs as the runtime root of a second home, in a mount namespace of this test's
        # own: under the 256 MiB the ephemeral layer needs free (SB_LAYER_MIN_FREE).
        out=$(unshare -m sh -c '
                mount --make-rprivate / && mount -t tmpfs -o size=64m,mode=1777 tmpfs "$1" || exit 9
                export NOOK_HOME="$2" NOOK_RUNTIME_DIR="$1"
                mkdir -m 0700 "$2"
                "$3" create f >/dev/null || exit 8
                test -d "$2/sandboxes/f/upper" && echo on-disk
                "$3" exec f -- sh -c "echo x >/y && cat /y"
                "$3" rm f >/dev/null || exit 7
                rm -rf "$2"' sh "$small" "$NOOK_HOME.h2" "$NOOK" 2>&1)
        is "$out" $'on-disk\nx' "a runtime folder under 256 MiB free: the layer in the state folder, and it works"
        rmdir "$small" 2>/dev/null
else
        skip_expected "needs real root to mount a small tmpfs as the runtime folder"
fi
