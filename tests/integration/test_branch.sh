#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Pause, resume and branch (issue 15, docs/design/branch.md).
# Pause: a busy loop uses no CPU while paused (the cgroup's usage stands still over a second) and
# goes on after resume; exec is refused naming 'nook resume'; ls/inspect say paused; stop and rm of
# a paused sandbox work.  Branch: the branch sees SRC's files in both layers (added, changed,
# deleted: whiteouts, an opaque folder; hardlinks, symlinks, setuid modes, times, owners: a file the
# guest chowned to 1000 is 1000 in the branch); writes on either side stay there; a guest renaming
# files atomically in a loop never gives a torn file; --count; a stopped SRC gives stopped branches;
# branches of branches; rm SRC keeps branches; hostile input changes nothing; on an XFS filesystem
# with reflink (made here on a loop device, as root) a branch shares its source's blocks.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
command -v jq >/dev/null || plan skip_all "jq is needed to read nook's JSON"
command -v busybox >/dev/null || plan skip_all "busybox is needed for the test root filesystem"
plan 90

ROOT=0
nook_rootful && ROOT=1
D=$(mktemp -d /var/tmp/nook-test-branch.XXXXXXXX) || bail_out "mktemp"
chmod 0755 "$D"
cleanup_extra() {
        local rc=$? s
        for s in $("$NOOK" ls -q 2>/dev/null); do "$NOOK" rm "$s" >/dev/null 2>&1; done
        if mountpoint -q "$D/xfs" 2>/dev/null; then
                for s in $(NOOK_HOME=$D/xfs/home "$NOOK" ls -q 2>/dev/null); do
                        NOOK_HOME=$D/xfs/home "$NOOK" rm "$s" >/dev/null 2>&1
                done
                umount -l "$D/xfs"
        fi
        chmod -R u+rwX "$D" 2>/dev/null
        rm -rf "$D"
        (exit $rc)
        _tap_finish
}
trap cleanup_extra EXIT

R="$D/rootfs"
mkdir -p "$R/bin" "$R/etc" "$R/data/sub" "$R/tmp" "$R/gone"
cp "$(command -v busybox)" "$R/bin/busybox"
for a in sh ls cat echo rm mkdir chmod chown stat touch ln test grep mv sleep yes wc head tail uniq cp true; do
        ln -s busybox "$R/bin/$a"
done
echo original >"$R/etc/issue"
echo a >"$R/data/sub/a"
echo g >"$R/gone/g"
[[ $ROOT == 1 ]] && chown -R 100000000:100000000 "$R"

sx() { run_nook exec "$1" --sh "$2"; }
state_of() { "$NOOK" inspect "$1" 2>/dev/null | jq -r .state; }
state_is() { [[ $(state_of "$1") == "$2" ]]; }

# The host cgroup file holding the sandbox's CPU usage, and its value in ns.
cpu_file() {
        local d
        for d in $(_nook_cgroups); do
                [[ $d == */nook-"$1"-* && -f $d/cpuacct.usage ]] && { echo "$d/cpuacct.usage"; return; }
        done
        for d in $(_nook_cgroups); do
                [[ $d == */nook-"$1"-* && -f $d/cgroup.freeze ]] && { echo "$d/cpu.stat"; return; }
        done
}
cpu_ns() {
        case $1 in
        *cpuacct.usage) cat "$1" ;;
        *cpu.stat) awk '$1 == "usage_usec" { print $2 * 1000 }' "$1" ;;
        esac
}

CAN_PAUSE=0
"$NOOK" doctor --json 2>/dev/null | jq -e '.checks[] | select(.name == "pause (cgroup freezer)") | .ok' \
        >/dev/null && CAN_PAUSE=1
WHY_NO_PAUSE=$("$NOOK" doctor --json 2>/dev/null | jq -r '.checks[] | select(.name == "pause (cgroup freezer)") | .detail')

# ---- pause and resume --------------------------------------------------------------------------
run_nook create p --image "$R"
is "$status" 0 "create a sandbox to pause"
run_nook exec -d p --sh 'while :; do :; done'
is "$status" 0 "start a busy loop in it"
if [[ $CAN_PAUSE == 1 ]]; then
        F=$(cpu_file p)
        check "the sandbox has a CPU usage file ($F)" test -n "$F"
        sleep 0.3
        run_nook pause p
        is "$status" 0 "pause a running sandbox"
        a=$(cpu_ns "$F")
        sleep 1
        b=$(cpu_ns "$F")
        is "$b" "$a" "paused: CPU usage unchanged over a second while a busy loop 'runs' ($a ns)"
        is "$(state_of p)" paused "inspect shows paused"
        run_nook ls
        like "$out" "p +paused" "ls shows paused"
        run_nook pause p
        is "$status" 0 "pausing a paused sandbox is a no-op"
        expect_fail 125 "exec into a paused sandbox" exec p -- true
        like "$err" "paused; resume it .'nook resume p'; resume.. in the API." "the exec error names 'nook resume' and resume()"
        echo hello >"$D/hello"
        check "the workspace is a host folder: writing it works while paused" "$NOOK" ws write p /w.txt "$D/hello"
        run_nook resume p
        is "$status" 0 "resume"
        sleep 0.5
        c=$(cpu_ns "$F")
        check "after resume the loop runs again (usage $b -> $c)" test "$c" -gt "$b"
        is "$(state_of p)" running "inspect shows running after resume"
        sx p 'cat /workspace/w.txt'
        is "$out" hello "exec works after resume"
        # a pause held for a branch's copy ("hold", as branch.c takes it): an exec waits for the
        # copy to end, and runs; it failed as if the user had paused the sandbox
        held="$NOOK_HOME.held"
        python3 - "$(sock_of p)" "$held" <<'PY' &
import json, os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.send(json.dumps({"op": "pause", "hold": True}).encode())
print(s.recv(4096).decode(), file=open(sys.argv[2], "w"), flush=True)
time.sleep(1.5)
s.close()
PY
        holder=$!
        wait_for 5 grep -q paused "$held"
        is "$(state_of p)" paused "a branch's copy holds p paused"
        t0=$(date +%s%N)
        run_nook exec p -- echo alive
        t1=$(date +%s%N)
        is "$status:$out" "0:alive" "an exec while a branch's copy holds the pause waits for it, and runs"
        check "it waited for the hold's end (took $(((t1 - t0) / 1000000)) ms)" test $(((t1 - t0) / 1000000)) -ge 500
        wait "$holder"
        is "$(state_of p)" running "the holder's end thawed p"
        rm -f "$held"
        run_nook create q --image "$R" --idle-timeout 2s
        run_nook pause q
        sleep 3
        is "$(state_of q)" paused "the idle timer stands still while paused (3 s > a 2 s idle timeout)"
        sup=$("$NOOK" inspect q | jq -r .supervisorPid)
        kill -9 "$sup"
        wait_for 5 test ! -d "/proc/$sup"
        is "$(state_of q)" stopped "a paused sandbox whose supervisor was killed is reconciled to stopped"
        run_nook rm q
        is "$status" 0 "and removed (its frozen init thawed and killed: the leak check below)"
        run_nook pause p
        run_nook stop p
        is "$status" 0 "stop a paused sandbox (thawed, then stopped)"
        is "$(state_of p)" stopped "it is stopped"
        run_nook start p
        run_nook exec -d p --sh 'sleep 1000'
        run_nook pause p
        run_nook rm p
        is "$status" 0 "rm a paused sandbox"
        check "nothing left of it" test ! -e "$NOOK_HOME/sandboxes/p"
else
        expect_fail 1 "pause without a writable freezer" pause p
        like "$err" "Cannot pause: .*(not writable|freezer|cgroup)" "the error says why: $WHY_NO_PAUSE"
        for i in $(seq 22); do skip_expected "no writable cgroup freezer in this stage: $WHY_NO_PAUSE"; done
        run_nook rm p
fi
expect_fail 1 "pause of a missing sandbox" pause nope
like "$err" "No sandbox 'nope'" "it names the sandbox"
expect_fail 1 "pause of a bad name" pause '../x'

# ---- branch: the source ------------------------------------------------------------------------
make_src() {
        run_nook create src --sticky --image "$R"
        sx src 'echo changed > /etc/issue; echo new > /etc/added; rm /gone/g; rm -rf /data; mkdir /data; echo fresh > /data/only;
        echo ws > /workspace/f; mkdir -p /workspace/d/e; echo deep > /workspace/d/e/x;
        echo h > /workspace/h1; ln /workspace/h1 /workspace/h2; ln -s f /workspace/link;
        touch /workspace/own /etc/own; chown 1000:1000 /workspace/own /etc/own;
        echo s > /etc/suid; chmod 4755 /etc/suid; touch -d "2001-02-03 04:05:06" /workspace/old'
}
make_src
is "$status" 0 "the source changes its root layer and workspace"
# Rootless with one id mapped the guest cannot chown to 1000: the branch must match its source.
O=$("$NOOK" exec src --sh 'stat -c "%u:%g" /workspace/own')
[[ $ROOT == 1 ]] && O=1000:1000

# ---- branch of a running sandbox -----------------------------------------------------------------
if [[ $CAN_PAUSE == 1 ]]; then
        run_nook branch src b
        is "$status" 0 "branch a running sandbox"
        is "$out" b "it prints the new name"
        is "$(state_of b)" running "the branch runs (its source did)"
        is "$(state_of src)" running "the source still runs (thawed after the copy)"
        run_nook inspect b
        is "$(jq -r .branchOf <<<"$out")" src "inspect: branchOf"
        like "$(jq -r .branchPoint <<<"$out")" '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z$' "inspect: branchPoint, RFC 3339 ms"
        sx b 'cat /etc/issue /etc/added /data/only /workspace/f /workspace/d/e/x; test -e /gone/g || echo gone-deleted; test -e /data/sub || echo opaque'
        is "$out" "$(printf 'changed\nnew\nfresh\nws\ndeep\ngone-deleted\nopaque')" "the branch sees both layers: changed, added, deleted (whiteout), opaque folder"
        sx b 'stat -c "%u:%g" /workspace/own /etc/own; stat -c %a /etc/suid; stat -c %Y /workspace/old; stat -c %i /workspace/h1 /workspace/h2 | uniq | wc -l; cat /workspace/link'
        is "$out" "$(printf '%s\n%s\n4755\n981173106\n1\nws' "$O" "$O")" "owners ($O in both layers, as in the source), setuid mode, mtime, hardlink, symlink kept"
        check "the branch's workspace is a plain host folder" test -f "$NOOK_HOME/workspaces/b/f"
        sx b 'echo from-branch > /workspace/f; echo from-branch > /etc/issue; touch /workspace/bonly'
        sx src 'cat /workspace/f /etc/issue; test -e /workspace/bonly || echo absent'
        is "$out" "$(printf 'ws\nchanged\nabsent')" "the branch's writes stay in the branch"
        sx src 'echo from-src > /etc/added; touch /workspace/sonly'
        sx b 'cat /etc/added; test -e /workspace/sonly || echo absent'
        is "$out" "$(printf 'new\nabsent')" "the source's writes stay in the source"

        # A guest renaming whole files into place in a loop: each branch holds an old or a new one.
        run_nook exec -d src --sh 'i=0; while :; do i=$((i+1)); yes "$i" | head -n 20000 > /workspace/t.tmp; mv /workspace/t.tmp /workspace/t; yes "$i" | head -n 20000 > /etc/t.tmp; mv /etc/t.tmp /etc/t; done'
        wait_for 10 test -f "$NOOK_HOME/workspaces/src/t"
        torn=""
        for k in 1 2 3 4 5; do
                run_nook branch src "t$k"
                [[ $status == 0 ]] || torn+=" t$k:failed($err)"
                f="$NOOK_HOME/workspaces/t$k/t"
                n=$(wc -l <"$f"); u=$(uniq "$f" | wc -l)
                [[ $n == 20000 && $u == 1 ]] || torn+=" t$k:ws($n lines, $u values)"
                sx "t$k" 'wc -l < /etc/t; uniq /etc/t | wc -l'
                [[ $out == "$(printf '20000\n1')" ]] || torn+=" t$k:root($out)"
                "$NOOK" rm "t$k" >/dev/null 2>&1
        done
        is "$torn" "" "5 branches of a sandbox writing continuously: no torn file in either layer"

        # A branching process killed mid-copy: the supervisor thaws SRC (the pause is held on
        # the killed process's connection), and what it left is removed by nook rm.
        python3 -c 'import os, sys
d = sys.argv[1]
for i in range(20000):
    sub = os.path.join(d, "d%03d" % (i // 500)); os.makedirs(sub, exist_ok=True)
    open(os.path.join(sub, "f%05d" % i), "w").write("x")' "$NOOK_HOME/workspaces/src/big"
        "$NOOK" branch src k >/dev/null 2>&1 &
        kpid=$!
        wait_for 10 state_is src paused
        is "$(state_of src)" paused "the source is paused during the copy"
        kill -9 $kpid
        wait $kpid 2>/dev/null
        wait_for 5 state_is src running
        is "$(state_of src)" running "branching process killed by SIGKILL mid-copy: the source is thawed"
        run_nook rm k
        check "nook rm removes what the killed branch left" test ! -e "$NOOK_HOME/workspaces/k" -a ! -e "$NOOK_HOME/sandboxes/k"
        rm -rf "$NOOK_HOME/workspaces/src/big"

        run_nook branch b bb
        is "$status" 0 "branch of a branch"
        sx bb 'cat /workspace/f /etc/issue'
        is "$out" "$(printf 'from-branch\nfrom-branch')" "the branch of a branch has its source's state"
        is "$("$NOOK" inspect bb | jq -r .branchOf)" b "it names its own source"

        run_nook branch src c --count 3
        is "$status" 0 "--count 3"
        is "$out" "$(printf 'c-1\nc-2\nc-3')" "names NEW-1..NEW-3"
        ok_all=1
        for k in 1 2 3; do sx "c-$k" 'cat /workspace/f'; [[ $out == ws ]] || ok_all=0; done
        is "$ok_all" 1 "each of them has the source's files"
        run_nook rm src
        is "$status" 0 "rm the source"
        sx c-1 'cat /workspace/f /etc/issue'
        is "$out" "$(printf 'ws\nchanged')" "its branches keep working with their files"
        make_src
else
        expect_fail 1 "branch of a running sandbox without a freezer" branch src b
        like "$err" "stop 'src' first.*Cannot pause: " "the error says why and what to do"
        check "nothing made" test ! -e "$NOOK_HOME/workspaces/b"
        for i in $(seq 20); do skip_expected "no writable cgroup freezer in this stage (a running source is frozen for the copy): $WHY_NO_PAUSE"; done
fi

# ---- branch of a stopped sandbox ----------------------------------------------------------------
run_nook stop src
# a sparse file (1 GiB, 4 KiB of data in its middle): the copy keeps its holes, so a guest's
# `truncate -s 15T` cannot make a branch fill the host's disk with zeros
SPARSE="$("$NOOK" ws path src)/sparse.img"
truncate -s 1G "$SPARSE"
printf 'middle' | dd of="$SPARSE" bs=1 seek=$((512 * 1024 * 1024)) conv=notrunc status=none
run_nook branch src s
is "$status" 0 "branch a stopped sandbox"
SCOPY="$("$NOOK" ws path s)/sparse.img"
is "$(stat -c %s "$SCOPY"):$(dd if="$SCOPY" bs=1 skip=$((512 * 1024 * 1024)) count=6 status=none)" \
        "1073741824:middle" "the branch's copy of a sparse file has its size and its data"
blocks=$(stat -c %b "$SCOPY")
if ((blocks * 512 <= 8 * 1024 * 1024)); then ok "and its holes: $((blocks / 2)) KiB on disk, not 1 GiB"; else not_ok "the copy keeps the holes" "$((blocks / 2)) KiB on disk"; fi
rm -f "$SPARSE"
is "$(state_of s)" stopped "a branch of a stopped sandbox stays stopped"
run_nook start s
sx s 'cat /workspace/f /etc/issue; stat -c "%u:%g" /etc/own /workspace/own'
is "$out" "$(printf 'ws\nchanged\n%s\n%s' "$O" "$O")" "once started it has the source's files and owners ($O)"
run_nook branch src --memory m
is "$status" 1 "--memory is refused"
like "$err" "Cannot branch with memory: .*see 'nook doctor'" "naming the cause and nook doctor"
why=$("$NOOK" doctor --json 2>/dev/null | jq -r '.checks[] | select(.name == "memory checkpoints") | .detail')
like "$err" "$(printf '%s' "${why:0:40}" | sed 's/[][\\.*^$()+?{}|]/\\&/g')" "the same cause as nook doctor's memory checkpoints row"

# killed with its copies made and none in place yet: the name stays free (no record, no folder),
# the copies are in the trash and go at the next sweep, and the same branch works again
NOOK_TEST_BRANCH_KILL_AT=copied run_nook branch src kb --count 2
if [[ $status == 137 ]]; then
        check "a branch killed before its copies were in place leaves no folder under the names" \
                test ! -e "$NOOK_HOME/workspaces/kb-1" -a ! -e "$NOOK_HOME/sandboxes/kb-1" -a ! -e "$NOOK_HOME/workspaces/kb-2"
        run_nook ls -q
        is "$(grep -c '^kb' <<<"$out")/$(ls -A "$NOOK_HOME/trash" 2>/dev/null | grep -c branch)" "0/0" \
                "ls lists none of them and sweeps the staged copies from the trash"
        run_nook branch src kb --count 2
        is "$status" 0 "the same branch then works ($err)"
        run_nook rm kb-1 kb-2
else
        for i in 1 2 3; do skip "NOOK_TEST_BRANCH_KILL_AT needs a build with test hooks (status $status)"; done
fi

# ---- hostile input --------------------------------------------------------------------------------
before=$("$NOOK" ls -q | sort | tr '\n' ' ')
for c in 0 101 -1 abc 1x ''; do
        expect_fail 2 "--count '$c'" branch src n --count "$c"
done
for nm in '../x' 'a b' '' '-x' "$(printf 'a%.0s' {1..300})"; do
        run_nook branch src "$nm"
        check "bad new name '${nm:0:20}' is refused" test "$status" != 0
done
long=$(printf 'l%.0s' {1..61})
run_nook branch src "$long" --count 10
check "a name valid alone but too long as NAME-10 is refused" test "$status" != 0
like "$err" "Invalid sandbox name '$long-1.*longer than 63" "the error names the generated name and why"
expect_fail 1 "missing source" branch nope n
like "$err" "No sandbox 'nope'" "it names the source"
expect_fail 1 "new name taken" branch src s
like "$err" "'s' already exists" "it names the taken name"
expect_fail 1 "new name = source" branch src src
run_nook create n-2 --image "$R"
expect_fail 1 "--count where NEW-2 exists" branch src n --count 3
check "all or nothing: n-1 was not made" test ! -e "$NOOK_HOME/workspaces/n-1" -a ! -e "$NOOK_HOME/sandboxes/n-1"
run_nook rm n-2
expect_fail 2 "branch without NEW" branch src
after=$("$NOOK" ls -q | sort | tr '\n' ' ')
is "$after" "$before" "hostile input made and removed nothing"

# a branch while the source is being created waits for it, or finds no source: never half a branch
"$NOOK" create late --image "$R" >/dev/null 2>&1 &
cpid=$!
run_nook branch late lb
wait $cpid
if [[ $status == 0 ]]; then
        check "branch of a sandbox being created: made once it exists" test -d "$NOOK_HOME/workspaces/lb"
else
        like "$err" "No sandbox 'late'|Cannot pause" "branch of a sandbox being created: a clear error ($err)"
fi

# ---- copy-on-write where the filesystem reflinks ---------------------------------------------------
# An XFS filesystem with reflink on a loop device, a home on it: a branch of 64 MiB of workspace
# and root layer uses (almost) no new blocks, and its files share extents with the source's.
if nook_rootful && command -v mkfs.xfs >/dev/null && command -v filefrag >/dev/null; then
        truncate -s 600M "$D/xfs.img"
        mkfs.xfs -q -m reflink=1 "$D/xfs.img" && mkdir -p "$D/xfs" && mount -o loop "$D/xfs.img" "$D/xfs"
        if mountpoint -q "$D/xfs"; then
                H=$D/xfs/home
                mkdir -m 0700 "$H"
                xn() { NOOK_HOME=$H "$NOOK" "$@"; }
                xn create x --sticky --image "$R" >/dev/null
                xn exec x --sh 'head -c 33554432 /dev/urandom > /workspace/big; head -c 33554432 /dev/urandom > /etc/big' >/dev/null
                xn stop x >/dev/null
                sync
                used0=$(df -k --output=used "$D/xfs" | tail -1)
                xn branch x xb >/dev/null
                sync
                used1=$(df -k --output=used "$D/xfs" | tail -1)
                check "XFS reflink: a branch of 64 MiB takes under 4 MiB of new blocks ($((used1 - used0)) KiB)" \
                        test $((used1 - used0)) -lt 4096
                like "$(filefrag -v "$H/workspaces/xb/big" 2>&1)" "shared" "the branch's workspace file shares extents (filefrag: shared)"
                like "$(filefrag -v "$H/sandboxes/xb/upper/etc/big" 2>&1)" "shared" "so does its root layer's"
                for s in $(xn ls -q); do xn rm "$s" >/dev/null 2>&1; done
                umount "$D/xfs"
        else
                for i in 1 2 3; do skip "could not mount an XFS loop filesystem here"; done
        fi
else
        for i in 1 2 3; do skip_expected "needs real root, mkfs.xfs and filefrag to make a reflink filesystem on a loop device"; done
fi
