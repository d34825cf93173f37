#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Identity and ownership (issue 18): each rootful sandbox's root is its own host uid, from a pool
# in the store, released on rm and reused; the workspace and host volumes are idmapped, so what
# the guest's root writes is the host owner's and root-owned host folders are the guest root's
# (a :rw bind of a root 0755 folder is writable, a 0700 one readable); a setuid program a sandbox
# plants in its workspace gives no host user anything; a state folder other users can enter is
# refused unless --allow-shared-home.  docs/design/security.md, "Identity".
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_PROBE"
plan 51

IDM=0
nook_idmapped && IDM=1
diag "idmapped: $IDM"
D=$(mktemp -d /tmp/nook-test-id.XXXXXXXX) || bail_out "mktemp"
chmod 0755 "$D"
cleanup_extra() {
        local rc=$?
        rm -rf "$D"
        (exit $rc)
        _tap_finish
}
trap cleanup_extra EXIT

jfield() { jq -r "$2 // empty" <<<"$1" 2>/dev/null; }

# init_pid NAME: host pid of NAME's nook-init.
init_pid() {
        local sup
        sup=$("$NOOK" inspect "$1" 2>/dev/null | jq -r '.supervisorPid // empty')
        [[ -n "$sup" ]] || return 1
        ps -o pid=,comm= --ppid "$sup" | awk '$2 == "nook-init" { print $1; exit }'
}

# host_uid NAME: the effective uid, on the host, of NAME's init (/proc/PID/status "Uid:").
host_uid() {
        local p
        p=$(init_pid "$1") || return 1
        awk '/^Uid:/ { print $3 }' "/proc/$p/status"
}

# ---- one identity per sandbox ----------------------------------------------------------------
run_nook create ida
is "$status" 0 "create ida" || diag "$err"
run_nook create idb
is "$status" 0 "create idb" || diag "$err"
ua=$(host_uid ida)
ub=$(host_uid idb)
diag "host uids: ida=$ua idb=$ub"
if [[ $IDM == 1 ]]; then
        isnt "$ua" "$ub" "two sandboxes' roots are different host uids ($ua, $ub)"
        ok_pool=no
        ((ua >= 100065536 && (ua - 100065536) % 65536 == 0 && ub >= 100065536)) && ok_pool=yes
        is "$ok_pool" yes "both are range bases of the pool above the image layers' 100000000..100065535"
        run_nook exec ida -- sh -c 'cat /proc/self/uid_map'
        like "$out" "^ *0 +$ua +65536" "ida's uid_map sends its 0..65535 to its own range"
elif nook_rootful; then
        skip "rootful without idmapped mounts here: sandboxes share host uid 100000000 (see nook doctor)"
        skip "rootful without idmapped mounts: no pool"
        skip "rootful without idmapped mounts: no per-sandbox map"
else
        skip_expected "rootless: every sandbox's root is the caller's uid (one id mapped); a per-sandbox range needs root"
        skip_expected "rootless: no id range pool"
        skip_expected "rootless: no per-sandbox map"
fi

# ---- the per-user allowances of /proc/sys/user are the sandbox's own ------------------------------
# The kernel charges inotify instances, fanotify groups and namespaces made in a user namespace to
# its owner: owned by root, one guest took host root's 128 inotify instances from the host and
# every other sandbox.
# shellcheck disable=SC2016 # the programs are python's
inotify_take='import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while n < int(sys.argv[1]) and libc.inotify_init1(0) >= 0:
    n += 1
open(sys.argv[2], "w").write(str(n)) if len(sys.argv) > 2 else print(n)
time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 0)'
if nook_rootful; then
        pa=$(init_pid ida)
        owner=$(python3 -c 'import fcntl, os, struct, sys
fd = os.open("/proc/%s/ns/user" % sys.argv[1], os.O_RDONLY)
b = bytearray(4)
fcntl.ioctl(fd, 0xb704, b)  # NS_GET_OWNER_UID
print(struct.unpack("I", b)[0])' "$pa" 2>&1)
        is "$owner" "$ua" "ida's user namespace is owned by its own host root uid ($ua), not by root"
        "$NOOK" exec -d ida -- python3 -c "$inotify_take" 100000 /workspace/n 60 >/dev/null
        wait_for 10 test -s "$("$NOOK" ws path ida)/n"
        held=$(cat "$("$NOOK" ws path ida)/n" 2>/dev/null)
        diag "ida holds $held inotify instances (host max_inotify_instances: $(cat /proc/sys/user/max_inotify_instances))"
        is "$(python3 -c "$inotify_take" 1)" 1 "host root still gets an inotify instance while ida holds all it can"
        run_nook exec idb -- python3 -c "$inotify_take" 1
        if [[ $IDM == 1 ]]; then
                is "$status:$out" "0:1" "and so does idb, whose allowance is its own"
        else
                skip "rootful without idmapped mounts: sandboxes share host uid 100000000, and so its allowance"
        fi
        run_nook exec ida -- id -u
        is "$status:$out" "0:0" "ida's commands still run as its root"
else
        skip_expected "rootless: the caller owns its sandboxes' namespaces (its own allowance)"
        skip_expected "rootless: no host root allowance to take"
        skip_expected "rootless: no other owner"
        skip_expected "rootless: nothing changed for commands"
fi

# ---- the range goes with rm and is reused ----------------------------------------------------
run_nook rm ida
is "$status" 0 "rm ida"
run_nook create idc
is "$status" 0 "create idc" || diag "$err"
uc=$(host_uid idc)
if [[ $IDM == 1 ]]; then
        is "$uc" "$ua" "ida's range was released by rm and is the lowest free one: idc gets it ($uc)"
        run_nook stop idb
        run_nook create idb
        is "$(host_uid idb)" "$ub" "a sandbox keeps its range across stop and create of the same name"
else
        skip_expected "no per-sandbox ranges in this stage (rootless or no idmapped mounts)"
        skip_expected "no per-sandbox ranges in this stage (rootless or no idmapped mounts)"
fi

# ---- one identity across state folders: the pool's slots are claimed host-wide ------------------
# (NOOK_IDCLAIMS, lib.sh: this file's own claims file, shared by the homes below)
if [[ $IDM == 1 ]]; then
        H2=$(mktemp -d /var/tmp/nook-test-id2.XXXXXXXX)
        chmod 0700 "$H2"
        NOOK_HOME=$H2 run_nook create idx
        is "$status" 0 "create idx in a second state folder" || diag "$err"
        ux=$(NOOK_HOME=$H2 host_uid idx)
        diag "host uids: idb=$ub idc=$uc idx (other home)=$ux"
        if [[ -n $ux && $ux != "$ub" && $ux != "$uc" ]]; then ok "a sandbox of another state folder gets a range no sandbox here holds ($ux)"; else not_ok "another state folder's sandbox has its own range" "idx=$ux idb=$ub idc=$uc"; fi
        NOOK_HOME=$H2 run_nook rm idx
        run_nook rm idc
        NOOK_HOME=$H2 run_nook create idy
        is "$(NOOK_HOME=$H2 host_uid idy)" "$uc" "a range freed by rm in one state folder is taken by the other ($uc)"
        # a state folder deleted with its sandbox still recorded: its claim is stale, and taken over
        NOOK_HOME=$H2 "$NOOK" stop idy >/dev/null
        rm -rf "$H2"
        run_nook create idc
        is "$(host_uid idc)" "$uc" "the claim of a deleted state folder is taken over ($uc)"
        rm -rf "$H2"
else
        for i in 1 2 3 4; do skip_expected "no per-sandbox ranges in this stage (rootless or no idmapped mounts)"; done
fi

# ---- a sticky layer from before the pool moves to the sandbox's new range ----------------------
if [[ $IDM == 1 ]] && command -v sqlite3 >/dev/null; then
        run_nook create --sticky idk
        run_nook exec idk -- sh -c 'mkdir -p /kept && echo k >/kept/f && chmod 4755 /kept/f'
        run_nook stop idk
        uk=$(stat -c %u "$NOOK_HOME/sandboxes/idk/upper/kept/f")
        # what nook before migration 4 left: the layer in the shared range, no row in the pool
        sqlite3 "$NOOK_HOME/nook.db" "DELETE FROM id_ranges WHERE sandbox = 'idk'"
        find "$NOOK_HOME/sandboxes/idk/upper" -exec sh -c 'for f; do chown -h $(( $(stat -c %u "$f") - '"$uk"' + 100000000 )):$(( $(stat -c %g "$f") - '"$uk"' + 100000000 )) "$f"; done' sh {} +
        chmod 4755 "$NOOK_HOME/sandboxes/idk/upper/kept/f"
        run_nook create --sticky idk
        is "$status" 0 "re-create of a sticky sandbox whose layer is in the shared range" || diag "$err"
        run_nook exec idk -- stat -c %u:%g:%a /kept/f
        is "$out" "0:0:4755" "its kept files moved to the new range: root's inside, setuid bit kept"
        run_nook rm idk
else
        skip_expected "needs idmapped mounts (rootful) and the sqlite3 command to fake a layer from before the pool"
        skip_expected "needs idmapped mounts (rootful) and the sqlite3 command to fake a layer from before the pool"
fi

# ---- workspace ownership ---------------------------------------------------------------------
if [[ $IDM == 1 ]]; then
        want=$(stat -c %u "$NOOK_HOME")
elif nook_rootful; then
        want=100000000
else
        want=$(id -u)
fi
run_nook exec idc -- sh -c 'echo guest >/workspace/g && mkdir /workspace/gd'
is "$status" 0 "the guest's root writes its workspace"
is "$(stat -c %u "$NOOK_HOME/workspaces/idc/g")" "$want" "a file the guest's root wrote is owned on the host by uid $want"
is "$(stat -c %u "$NOOK_HOME/workspaces/idc/gd")" "$want" "so is a directory it made"
echo host >"$NOOK_HOME/workspaces/idc/h"
run_nook exec idc -- stat -c %u:%g /workspace/h
if [[ $IDM == 1 ]] || ! nook_rootful; then
        is "$out" "0:0" "a file the host owner wrote shows as the guest root's"
        run_nook exec idc -- sh -c 'echo more >>/workspace/h'
        is "$status" 0 "and the guest's root may write it"
else
        skip "rootful without idmapped mounts: host root's files show as nobody in the guest"
        skip "rootful without idmapped mounts: host root's files are not the guest root's"
fi

# ---- setuid files planted in the workspace ----------------------------------------------------
run_nook exec idc -- sh -c 'cp "$(command -v id)" /workspace/sid && chmod 4755 /workspace/sid && ls -ln /workspace/sid'
is "$status" 0 "the guest's root can make a setuid file in its workspace" || diag "$err"
like "$out" "^-rwsr-xr-x" "the guest sees the setuid bit"
is "$(stat -c %u "$NOOK_HOME/workspaces/idc/sid")" "$want" "on the host the setuid file is the workspace owner's, never another sandbox's identity"
is "$(stat -c %a "$NOOK_HOME")" "700" "the state folder is 0700: nobody else can reach the file"
if can_become_nook_test; then
        o=$(runuser -u nook-test -- "$NOOK_HOME/workspaces/idc/sid" 2>&1)
        like "$o" "Permission denied" "another host user cannot run the planted setuid file (no way through the state folder)"
        o=$(runuser -u nook-test -- cat "$NOOK_HOME/workspaces/idc/g" 2>&1)
        like "$o" "Permission denied" "nor read the sandbox's files"
else
        skip_expected "needs real root and the user nook-test to act as another host user"
        skip_expected "needs real root and the user nook-test to act as another host user"
fi
if nook_rootful; then
        run_nook exec idc --user 1000:1000 -- /workspace/sid -u
        is "$out" "1000" "inside, the setuid file gives a non-root user nothing (/workspace is nosuid, no_new_privs)"
else
        skip_expected "rootless: only the sandbox's root is mapped, there is no other user to switch to"
fi
run_nook exec idc -- sh -c 'grep " /workspace " /proc/self/mountinfo'
like "$out" "nosuid" "/workspace is mounted nosuid,nodev"
if [[ $IDM == 1 ]]; then
        like "$out" "idmapped" "/workspace is an idmapped mount"
else
        skip_expected "no idmapped mounts in this stage (rootless or unsupported): /workspace is a plain bind"
fi

# ---- host volumes -----------------------------------------------------------------------------
mkdir -p "$D/open" "$D/closed"
chmod 0755 "$D/open"
chmod 0700 "$D/closed"
echo secret >"$D/closed/s"
chmod 0600 "$D/closed/s"
run_nook create -v "$D/open:/data:rw" -v "$D/closed:/closed" idv
is "$status" 0 "create with a :rw bind of a 0755 folder and a bind of a 0700 folder" || diag "$err"
if [[ $IDM == 1 ]]; then
        run_nook exec idv -- sh -c 'echo w >/data/new && mkdir /data/d && stat -c %u /data'
        is "$status:$out" "0:0" "the guest's root writes a root-owned 0755 :rw folder, which it sees as its own"
        is "$(stat -c %u:%g "$D/open/new")" "0:0" "the file it wrote is owned by root on the host"
        is "$(stat -c %u "$D/open/d")" "0" "so is the directory"
        run_nook exec idv -- cat /closed/s
        is "$out" "secret" "a 0700 root folder and its 0600 file are readable by the guest's root"
        run_nook exec idv -- sh -c 'echo x >/closed/t'
        isnt "$status" 0 "a bind without :rw stays read-only"
elif nook_rootful; then
        skip "rootful without idmapped mounts: host volumes keep host ids (see nook doctor)"
        skip "rootful without idmapped mounts"
        skip "rootful without idmapped mounts"
        skip "rootful without idmapped mounts"
        skip "rootful without idmapped mounts"
else
        for i in 1 2 3 4 5; do
                skip_expected "rootless: a root-owned host folder cannot be written by an unprivileged user's sandbox, and idmapping a host filesystem needs real root"
        done
fi
run_nook rm idv

# ---- a state folder others can enter ------------------------------------------------------------
H2="$D/shared-home"
mkdir "$H2"
chmod 0755 "$H2"
run_nook --home "$H2" ls
isnt "$status" 0 "a 0755 state folder is refused"
like "$err" "can be entered by other users" "the refusal says the risk"
like "$err" "chmod 0700 $H2" "and the chmod that fixes it"
is "$(ls -A "$H2")" "" "the refused state folder got nothing (no database)"
chmod 0701 "$H2"
run_nook --home "$H2" ls
isnt "$status" 0 "0701 (o+x alone) is refused too"
chmod 0750 "$H2"
chgrp 65534 "$H2" 2>/dev/null || chgrp "$(id -g nobody 2>/dev/null || echo 65534)" "$H2" 2>/dev/null
if [[ $(stat -c %g "$H2") != "$(id -g)" ]]; then
        run_nook --home "$H2" ls
        isnt "$status" 0 "0750 with a group that is not the owner's own is refused"
else
        skip_expected "cannot give the folder another group in this stage (chgrp needs a group we are in)"
fi
chmod 0755 "$H2"
NOOK_ALLOW_SHARED_HOME=yes run_nook --home "$H2" ls
isnt "$status" 0 "NOOK_ALLOW_SHARED_HOME=yes is no consent: only 1 is"
run_nook --allow-shared-home --home "$H2" ls
is "$status" 0 "--allow-shared-home accepts it"
run_nook --allow-shared-home --home "$H2" run -- sh -c 'echo x >/workspace/f && echo ran'
is "$status:$out" "0:ran" "and sandboxes run there (with the shared range: no idmapped mounts)"
NOOK_ALLOW_SHARED_HOME=1 run_nook --home "$H2" ls
is "$status" 0 "so does NOOK_ALLOW_SHARED_HOME=1"
run_nook --home "$H2" doctor
like "$out" "other users can enter the state folder" "nook doctor reports the shared state folder"
chmod 0700 "$H2"
run_nook --home "$H2" ls
is "$status" 0 "after chmod 0700 the folder is accepted"

run_nook rm idb
run_nook rm idc
