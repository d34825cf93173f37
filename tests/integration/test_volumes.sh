#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Volumes, scripts, setup files and labels (issue 6): refused bind sources and hostile targets
# leave nothing behind; binds are read-only unless :rw; a :rw write shows on the host; tmpfs
# sizes hold; a named volume is shared and outlives its sandboxes; `volume rm` is refused while
# in use; a symlink in the image cannot redirect a mount target to the host; scripts are on PATH
# for argv and --sh; setup files land in the workspace or the writable layer with their mode.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_PROBE"
plan 111

ROOT=0
nook_rootful && ROOT=1
D=$(mktemp -d /tmp/nook-test-vol.XXXXXXXX) || bail_out "mktemp"
chmod 0755 "$D"
made=() # host paths this file created outside $D (root only), removed at exit
cleanup_extra() {
        local rc=$? p
        for p in "${made[@]}"; do rm -rf "$p"; done
        rm -rf "$D"
        (exit $rc)
        _tap_finish
}
trap cleanup_extra EXIT

# nothing_left DESC: no sandbox record, no sandbox or workspace folder.
nothing_left() {
        local o
        o=$("$NOOK" ls -q 2>&1)
        o+=$(find "$NOOK_HOME/sandboxes" "$NOOK_HOME/workspaces" -mindepth 1 -maxdepth 1 2>/dev/null)
        is "$o" "" "$1: no record, no sandbox or workspace folder left"
}

mkdir -p "$D/ro" "$D/rw" "$D/home/.ssh" "$D/home/.aws" "$D/home/project"
echo hi >"$D/ro/f"
printf '#!/bin/sh\necho script-ran "$@"\n' >"$D/hello.sh"
printf 'setup-content\n' >"$D/setup.txt"
ln -s /etc/shadow "$D/to-shadow"
ln -s "$NOOK_HOME" "$D/to-state"
if nook_idmapped; then
        # idmapped volumes: the guest's root writes a root-owned 0755 directory as host root
        want_owner=0
elif [[ $ROOT == 1 ]]; then
        # the sandbox's root is host uid 100000000: let it write the :rw directory
        chown 100000000:100000000 "$D/rw"
        want_owner=100000000
else
        want_owner=$(id -u)
fi

# ---- refused bind sources ----------------------------------------------------------------------
refuse_src() {
        # refuse_src SOURCE REASON-REGEX [EXTRA-ARGS...]
        local src=$1 why=$2
        shift 2
        expect_fail 1 "bind source $src is refused" create "$@" -v "$src:/mnt/x" vbad
        like "$err" "$why" "the refusal of $src says why"
}
refuse_src / "host's '/'"
refuse_src "$NOOK_HOME" "state folder"
refuse_src "$(dirname "$NOOK_HOME")" "state folder"
refuse_src "$NOOK_HOME" "state folder" --allow-sensitive-volume
refuse_src "$D/to-state" "state folder"
refuse_src /proc "Refusing.*/proc"
refuse_src /sys/fs/cgroup "Refusing.*/sys"
refuse_src /dev "Refusing.*/dev"
refuse_src /etc/shadow "Refusing.*/etc/shadow"
refuse_src "$D/to-shadow" "Refusing.*/etc/shadow"
refuse_src /home "Refusing.*(home|credential)"
HOME="$D/home" refuse_src "$D/home/.ssh" "credential folder"
HOME="$D/home" refuse_src "$D/home/.aws" "credential folder"
HOME="$D/home" refuse_src "$D/home" "credential folder"
if [[ $ROOT == 1 ]]; then
        refuse_src /root "Refusing.*/root"
        [[ -e /root/.ssh ]] || { mkdir -m 700 /root/.ssh && made+=(/root/.ssh); }
        refuse_src /root/.ssh "credential folder"
        # container runtime sockets and dirs: make them (briefly) when this host has none
        [[ -e /run/containerd ]] || { mkdir /run/containerd && made+=(/run/containerd); }
        refuse_src /run/containerd "Refusing.*containerd"
        if [[ ! -e /run/docker.sock ]]; then
                /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/run/docker.sock")' &&
                        made+=(/run/docker.sock)
        fi
        refuse_src /var/run/docker.sock "Refusing.*docker.sock"
else
        for i in 1 2 3 4 5 6 7 8; do skip_expected "root-owned sources (/root, runtime sockets) need root to set up"; done
fi
nothing_left "after the refused sources"
# allowSensitive lets a credential folder through (and is all it takes)
HOME="$D/home" run_nook create --allow-sensitive-volume -v "$D/home/.ssh:/mnt/ssh" vsens
is "$status" 0 "--allow-sensitive-volume lets ~/.ssh through" || diag "$err"
run_nook rm vsens

# ---- hostile guest targets ---------------------------------------------------------------------
for t in /proc/x /sys /dev/shm / relative /a/../etc /workspace //workspace/; do
        run_nook create -v "$D/ro:$t" vbad
        if [[ $status != 0 && -n $err ]]; then ok "target '$t' is refused"; else not_ok "target '$t' is refused" "status $status" "$out"; fi
done
expect_fail 1 "two volumes on one target" create -v "$D/ro:/mnt/m" --tmpfs /mnt/m/ vbad
like "$err" "two volumes" "the duplicate-target refusal says so"
expect_fail 1 "a missing bind source" create -v "$D/nope:/mnt/m" vbad
like "$err" "does not exist" "the missing-source refusal says so"
nothing_left "after the hostile targets"

# ---- a sandbox with every kind -------------------------------------------------------------------
run_nook create -l team=a -v "$D/ro:/mnt/ro" -v "$D/ro:/mnt/ro2:ro" -v "$D/rw:/mnt/rw:rw" \
        --tmpfs /mnt/t:16m -v shared:/data:rw --script hello="$D/hello.sh" \
        --setup-file /workspace/cfg/a.txt="$D/setup.txt" --setup-file /etc/nook-setup.conf="$D/setup.txt" v1
is "$status" 0 "create v1 with binds, tmpfs, a named volume, a script and setup files" || diag "$err"
[[ $status == 0 ]] || bail_out "cannot create v1: $err"
run_nook cp "$NOOK_PROBE" v1:/workspace/probe
run_nook exec v1 -- chmod 0755 /workspace/probe
P=/workspace/probe

run_nook exec v1 -- $P read /mnt/ro/f
like "$out" '"content":"hi\\u000a"' "a bind source's file is readable"
run_nook exec v1 -- $P write /mnt/ro/g x
like "$out" '"error":"EROFS"' "a write to a default (read-only) bind fails with EROFS"
run_nook exec v1 -- $P write /mnt/ro2/g x
like "$out" '"error":"EROFS"' "a write to a :ro bind fails with EROFS"
is "$(ls "$D/ro")" "f" "the read-only source is unchanged on the host"
run_nook exec v1 -- $P write /mnt/rw/w from-sandbox
is "$status" 0 "a write to a :rw bind succeeds"
is "$(cat "$D/rw/w" 2>&1)" "from-sandbox" "the :rw write is visible on the host"
is "$(stat -c %u "$D/rw/w" 2>&1)" "$want_owner" "the host file belongs to uid $want_owner"
run_nook exec v1 -- $P mounts
like "$out" '"target":"/mnt/ro","fstype":"[^"]*","source":"[^"]*","options":"ro[,"]' "mountinfo: /mnt/ro is ro"
like "$out" '"target":"/mnt/rw","fstype":"[^"]*","source":"[^"]*","options":"rw[,"]' "mountinfo: /mnt/rw is rw"
like "$out" '"target":"/mnt/t","fstype":"tmpfs"' "mountinfo: /mnt/t is a tmpfs"

# tmpfs size
run_nook exec v1 --sh 'df -k /mnt/t | tail -n 1'
read -r _ size _ <<<"$out"
is "$size" 16384 "the tmpfs is 16 MiB (df)"
run_nook exec v1 --sh 'head -c 20971520 /dev/zero > /mnt/t/big'
isnt "$status" 0 "writing 20 MiB into the 16 MiB tmpfs fails"
like "$err" "No space" "with ENOSPC"

# ---- scripts -----------------------------------------------------------------------------------
run_nook exec v1 -- hello a b
is "$out" "script-ran a b" "a script runs by name from argv"
run_nook exec v1 --sh 'hello x y'
is "$out" "script-ran x y" "a script runs by name from --sh (login shell)"
run_nook exec v1 --sh 'command -v hello'
is "$out" "/.nook/scripts/hello" "the script lives at /.nook/scripts/hello"
run_nook exec v1 -- $P write /.nook/scripts/hello pwned
like "$out" '"error":"E(ROFS|ACCES|PERM)"' "the script cannot be overwritten"
run_nook exec v1 -- hello
is "$out" "script-ran" "and still runs as written"

# ---- setup files -------------------------------------------------------------------------------
ws=$("$NOOK" ws path v1)
is "$(cat "$ws/cfg/a.txt" 2>&1)" "setup-content" "a /workspace setup file is in the host workspace"
run_nook exec v1 -- cat /etc/nook-setup.conf
is "$out" "setup-content" "an /etc setup file is in the writable layer before the first exec"
[[ -e /etc/nook-setup.conf ]] && not_ok "the host's /etc is untouched" || ok "the host's /etc is untouched"

# ---- labels ------------------------------------------------------------------------------------
cat >"$D/spec.json" <<EOF
{"labels": {"team": "b"},
 "volumes": [{"type": "volume", "name": "shared", "target": "/shared"}],
 "scripts": {"greet": "#!/bin/sh\necho greetings\n"},
 "setupFiles": {"/etc/app/mode.conf": {"content": "m\n", "mode": 384},
                "/workspace/bin/run": {"base64": "IyEvYmluL3NoCmVjaG8gYmFzZWQK", "mode": 493},
                "/opt/plain.txt": "plain"}}
EOF
run_nook create --spec "$D/spec.json" v2
is "$status" 0 "create v2 from a spec with volumes, scripts, setupFiles" || diag "$err"
run_nook exec v2 --sh 'stat -c %a /etc/app/mode.conf; cat /etc/app/mode.conf'
is "$out" $'600\nm' "setupFiles content+mode: /etc/app/mode.conf is 0600 with its content"
run_nook exec v2 -- /workspace/bin/run
is "$out" "based" "setupFiles base64+mode: /workspace/bin/run is executable and decoded"
run_nook exec v2 -- cat /opt/plain.txt
is "$out" "plain" "setupFiles string form"
run_nook exec v2 -- greet
is "$out" "greetings" "a spec script is on PATH"
run_nook ls -q --label team=a
is "$out" "v1" "ls --label team=a lists only v1"
run_nook ls -q --label team=b
is "$out" "v2" "ls --label team=b lists only v2"
run_nook ls -q --label team=c
is "$out" "" "ls --label team=c lists nothing"

# ---- named volume: shared, in use, outlives its sandboxes ---------------------------------------
run_nook exec v1 -- $P write /data/v from-v1
run_nook exec v2 -- cat /shared/v
is "$out" "from-v1" "a named volume is shared between two sandboxes"
run_nook volume ls
like "$out" "shared" "volume ls lists the named volume"
expect_fail 1 "volume rm while a running sandbox mounts it" volume rm shared
like "$err" "in use" "the refusal says it is in use"
run_nook rm v1 v2
is "$status" 0 "rm both sandboxes"
is "$(cat "$NOOK_HOME/volumes/shared/v" 2>&1)" "from-v1" "the named volume's data outlives both sandboxes"
run_nook create -v shared:/again v3
run_nook exec v3 -- cat /again/v
is "$out" "from-v1" "a new sandbox sees the volume's data"
run_nook rm v3
run_nook volume rm shared
is "$status" 0 "volume rm once unused"
[[ -e $NOOK_HOME/volumes/shared ]] && not_ok "volume rm removed its folder" || ok "volume rm removed its folder"
run_nook volume create made1
is "$status" 0 "volume create"
expect_fail 1 "volume create of a bad name" volume create ../x
run_nook volume rm made1

# ---- hostile setup files and scripts ------------------------------------------------------------
for p in ../x /proc/x /sys/x /dev/x rel/x / /a/../etc/x; do
        run_nook create --setup-file "$p=$D/setup.txt" vbad
        if [[ $status != 0 && -n $err ]]; then ok "setup file path '$p' is refused"; else not_ok "setup file path '$p' is refused" "status $status" "$out"; fi
done
for s in .hidden a/b "a b"; do
        run_nook create --script "$s=$D/hello.sh" vbad
        if [[ $status != 0 && -n $err ]]; then ok "script name '$s' is refused"; else not_ok "script name '$s' is refused" "status $status"; fi
done
printf '{"setupFiles": {"/etc/x": {"base64": "!!not base64!!"}}}' >"$D/bad.json"
run_nook create --spec "$D/bad.json" vbad
isnt "$status" 0 "a setup file with bad base64 is refused"
like "$err" "base64" "the refusal names base64"
nothing_left "after the hostile setup files, scripts and base64"

# ---- a symlink in the image cannot redirect a mount target ----------------------------------------
R="$D/rootfs"
S="$D/src"
mkdir -p "$R/etc" "$R/tmp" "$S"
cp "$NOOK_PROBE" "$R/probe"
ln -s /etc "$R/data"
ln -s ../../../../etc "$R/up"
echo marker >"$S/m"
chmod -R a+rX "$D"
run_nook create --image "$R" -v "$S:/data/inner" -v "$S:/up/inner2" vsym
is "$status" 0 "create from a rootfs dir with volume targets under symlinks (data -> /etc, up -> ../../../../etc)" || diag "$err"
run_nook exec vsym -- /probe read /data/inner/m
like "$out" '"content":"marker\\u000a"' "the volume is visible through the image's symlink"
[[ -e /etc/inner || -e /etc/inner2 ]] && not_ok "the host's /etc got no inner/inner2" "$(ls -ld /etc/inner /etc/inner2 2>&1)" ||
        ok "the host's /etc got no inner/inner2"
[[ -e $R/etc/inner || -e $R/etc/inner2 ]] && not_ok "the image directory was not written" || ok "the image directory was not written"
run_nook exec vsym -- /probe mounts
like "$out" '"target":"/etc/inner"' "the mount sits at the sandbox's own /etc/inner"
run_nook rm vsym
is "$status" 0 "rm vsym"
if [[ -d /etc/inner ]]; then rmdir /etc/inner 2>/dev/null; fi
