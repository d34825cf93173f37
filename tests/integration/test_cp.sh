#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook cp with docker cp semantics: the workspace and the sandbox's root filesystem, both
# directions, nesting, "dir/.", a file onto a directory, tar streams on stdin/stdout, names that
# are not UTF-8 byte for byte, symlinks copied as links, FIFOs refused, '..' and symlinks leading
# out refused, kernel filesystems refused, an unknown sandbox refused without an orphan workspace,
# and nothing partial left by a refused copy.  Runs in every stage (root: the sandbox's root maps to a subordinate uid; user
# and unshare: to the caller).
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
command -v python3 >/dev/null || plan skip_all "python3 is needed to build hostile tar archives"
plan 120

D=$(mktemp -d /var/tmp/nook-cp-test.XXXXXX)
chmod 0755 "$D"
trap 'rc=$?; rm -rf "$D"; (exit $rc); _tap_finish' EXIT

# staging leftovers anywhere under a directory
leftovers() { find "$1" -name '.nook-cp-*' 2>/dev/null | head -3; }
# in_guest CMD...: run a shell command in sandbox w, print its stdout
in_guest() { "$NOOK" exec w -- sh -c "$1" 2>/dev/null; }

# ---- the host tree -----------------------------------------------------------------------------
mkdir -p "$D/src/sub" "$D/outside"
printf 'alpha\n' >"$D/src/a"
chmod 0750 "$D/src/a"
touch -d '2001-02-03 04:05:06' "$D/src/a"
printf 'bravo\n' >"$D/src/sub/b"
ln -s /etc/passwd "$D/src/link"
ln -s a "$D/src/rel"
mkdir -p "$D/withfifo/sub"
printf 'x\n' >"$D/withfifo/first"
mkfifo "$D/withfifo/sub/pipe"

# ---- an unknown sandbox ------------------------------------------------------------------------
run_nook cp "$D/src/a" nosuch:/workspace/a
isnt "$status" 0 "cp into an unknown sandbox fails"
like "$err" "nosuch" "the message names the unknown sandbox"
like "$err" "nook ws" "the message says nook ws stages files before the first create"
check "no orphan workspace is created for it" test ! -e "$NOOK_HOME/workspaces/nosuch"
run_nook cp nosuch:/workspace/a "$D/x"
isnt "$status" 0 "cp out of an unknown sandbox fails"
check "no orphan workspace after a cp out of it" test ! -e "$NOOK_HOME/workspaces/nosuch"

run_nook create w
is "$status" 0 "create w" || bail_out "cannot create a sandbox: $err"
run_nook ws path w
ws=$out

# ---- into the workspace ------------------------------------------------------------------------
run_nook cp "$D/src/a" w:a
is "$status" 0 "cp FILE w:RELATIVE" || diag "$err"
is "$(cat "$ws/a" 2>&1)" "alpha" "a relative path lands in the workspace"
is "$(stat -c %a "$ws/a" 2>&1)" "750" "the file's mode is kept"
is "$(stat -c %Y "$ws/a" 2>&1)" "$(stat -c %Y "$D/src/a")" "the file's mtime is kept"
is "$(in_guest 'stat -c %u:%g /workspace/a')" "0:0" "the copied file belongs to the sandbox's root"

mkdir "$ws/ex"
run_nook cp "$D/src" w:/workspace/ex
is "$status" 0 "cp DIR w:/workspace/EXISTING" || diag "$err"
check "a directory copied onto an existing directory nests inside it" test -f "$ws/ex/src/sub/b"
run_nook cp "$D/src" w:/workspace/ex
is "$status" 0 "copying the same directory again merges into the nested copy" || diag "$err"

mkdir "$ws/ex2"
run_nook cp "$D/src/." w:ex2
is "$status" 0 "cp DIR/. w:EXISTING" || diag "$err"
check "DIR/. copies the contents" test -f "$ws/ex2/sub/b"
check "DIR/. does not nest" test ! -e "$ws/ex2/src"

run_nook cp "$D/src/a" w:ex2/sub
is "$status" 0 "cp FILE w:EXISTING_DIR" || diag "$err"
is "$(cat "$ws/ex2/sub/a" 2>&1)" "alpha" "a file copied onto a directory goes inside it"

run_nook cp "$D/src" w:newp
is "$status" 0 "cp DIR w:NEWPATH" || diag "$err"
is "$(cat "$ws/newp/sub/b" 2>&1)" "bravo" "a directory copied to a new path is created there"
is "$(readlink "$ws/newp/link")" "/etc/passwd" "a symlink pointing out is copied as a link, not its target"
is "$(readlink "$ws/newp/rel")" "a" "a relative symlink is copied as a link"

cp "$D/src/a" "$D/suid"
chmod 4755 "$D/suid"
run_nook cp "$D/suid" w:suid
is "$(stat -c %a "$ws/suid" 2>&1)" "755" "setuid is dropped, the other mode bits are kept"

run_nook cp "$D/src" w:a
isnt "$status" 0 "a directory onto an existing file is refused"
is "$(cat "$ws/a")" "alpha" "the file is untouched"
run_nook cp "$D/src/a" w:nope/x
isnt "$status" 0 "a missing destination parent is an error"
like "$err" "does not exist" "the message says the destination directory does not exist"
check "nothing is created for a missing parent" test ! -e "$ws/nope"
run_nook cp "$D/missing" w:m
isnt "$status" 0 "a missing source is an error"
like "$err" "missing" "the message names the missing source"

# ---- refused: specials, '..', symlinks leading out, names too long -----------------------------
run_nook cp "$D/withfifo" w:wf
isnt "$status" 0 "a tree holding a FIFO is refused"
like "$err" "pipe.*FIFO" "the message names the FIFO"
check "nothing partial is left after the refusal" test ! -e "$ws/wf"
is "$(leftovers "$ws")" "" "no staging directory is left in the workspace"

run_nook cp "$D/src/a" w:../x
isnt "$status" 0 "w:../x is refused"
like "$err" "Refusing" "the refusal says so"
run_nook cp "$D/src/a" w:/etc/../x
isnt "$status" 0 "w:/etc/../x is refused"
mark="cpmark-$$"
cp "$D/src/a" "$D/$mark"
ln -s "$D/outside" "$ws/out"
run_nook cp "$D/$mark" w:out/
isnt "$status" 0 "a workspace symlink leading out is not followed"
check "nothing was written through it" test ! -e "$D/outside/$mark"
mkdir "$ws/m"
ln -s "$D/outside" "$ws/m/sub"
run_nook cp "$D/src/." w:m
isnt "$status" 0 "a merge into a directory through a symlink planted there is refused"
check "nothing was written through the planted symlink" test ! -e "$D/outside/b"
check "nothing partial after the refused merge" test ! -e "$ws/m/a"
long=$(printf 'n%.0s' {1..300})
run_nook cp "$D/src/a" "w:$long"
isnt "$status" 0 "a 300-byte name is refused"
like "$err" "longer than" "the message says the name is too long"
run_nook cp "$D/src/a" "w:$(printf 'd/%.0s' {1..2100})x"
isnt "$status" 0 "a path longer than PATH_MAX is refused"

# ---- out of the workspace ----------------------------------------------------------------------
run_nook cp w:newp "$D/out1"
is "$status" 0 "cp w:DIR NEWPATH" || diag "$err"
is "$(cat "$D/out1/sub/b" 2>&1)" "bravo" "the directory is copied out"
is "$(readlink "$D/out1/link")" "/etc/passwd" "a symlink is copied out as a link"
mkdir "$D/outdir"
run_nook cp w:newp "$D/outdir"
check "a directory copied out onto an existing directory nests" test -f "$D/outdir/newp/sub/b"
run_nook cp w:newp/. "$D/outdir"
check "w:DIR/. copied out onto an existing directory copies the contents" test -f "$D/outdir/sub/b"
run_nook cp w:newp/. "$D/out2"
check "w:DIR/. copied out to a new path creates it with the contents" test -f "$D/out2/sub/b"
check "w:DIR/. to a new path puts nothing beside it" test ! -e "$D/sub"
run_nook cp "$D/src/." w:new2
check "DIR/. copied in to a new path creates it with the contents" test -f "$ws/new2/sub/b"
mkdir -p "$ws/pdir"
printf 'y\n' >"$ws/pdir/first"
mkfifo "$ws/pdir/zpipe"
run_nook cp w:pdir "$D/pout"
isnt "$status" 0 "copying out a tree with a FIFO is refused"
like "$err" "zpipe" "the message names the FIFO"
check "nothing partial on the host" test ! -e "$D/pout"
is "$(leftovers "$D")" "" "no staging directory is left on the host"

# ---- tar streams -------------------------------------------------------------------------------
names=$("$NOOK" cp w:newp - 2>/dev/null | tar -tf - 2>/dev/null | sort | tr '\n' ' ')
is "$names" "newp/ newp/a newp/link newp/rel newp/sub/ newp/sub/b " "cp w:DIR - writes a tar of the directory"
mkdir "$ws/tin"
tar -C "$D/src" -cf "$D/src.tar" .
NOOK_STDIN="$D/src.tar" run_nook cp - w:tin
is "$status" 0 "cp - w:DIR extracts a tar" || diag "$err"
is "$(cat "$ws/tin/sub/b" 2>&1)" "bravo" "the tar's files are there"
is "$(readlink "$ws/tin/link")" "/etc/passwd" "the tar's symlink is a link"
mkdir "$ws/tgz"
tar -C "$D/src" -czf "$D/src.tgz" .
NOOK_STDIN="$D/src.tgz" run_nook cp - w:tgz
is "$(cat "$ws/tgz/sub/b" 2>&1)" "bravo" "cp - extracts a gzip-compressed tar too"
NOOK_STDIN="$D/src/a" run_nook cp - w:tgz
isnt "$status" 0 "input that is not a tar is an error"
NOOK_STDIN="$D/src.tar" run_nook cp - w:notthere
isnt "$status" 0 "extracting a tar into a missing directory is an error"

python3 - "$D" <<'PY'
import io, sys, tarfile
d = sys.argv[1]
def mk(name, entries):
    with tarfile.open(f"{d}/{name}.tar", "w") as t:
        for path, kind, arg in entries:
            ti = tarfile.TarInfo(path)
            if kind == "f":
                ti.size = len(arg)
                t.addfile(ti, io.BytesIO(arg.encode()))
                continue
            ti.type = {"l": tarfile.SYMTYPE, "h": tarfile.LNKTYPE, "c": tarfile.CHRTYPE,
                       "p": tarfile.FIFOTYPE}[kind]
            ti.linkname = arg
            t.addfile(ti)
ok = ("okfile", "f", "1")
mk("dotdot", [ok, ("../evil", "f", "x")])
mk("abs", [ok, ("/evil", "f", "x")])
mk("symesc", [ok, ("esc", "l", d + "/outside"), ("esc/evil", "f", "x")])
mk("dev", [ok, ("null", "c", "")])
mk("fifo", [ok, ("p", "p", "")])
mk("hardesc", [ok, ("h", "h", "../../etc/passwd")])
mk("longname", [ok, ("n" * 300, "f", "x")])
PY
mkdir "$ws/hostile"
for t in dotdot abs symesc dev fifo hardesc longname; do
        NOOK_STDIN="$D/$t.tar" run_nook cp - w:hostile
        isnt "$status" 0 "a tar with a hostile entry ($t) is refused"
done
is "$(ls -A "$ws/hostile")" "" "nothing from the refused tars was extracted, not even their good files"
check "the symlink-escape tar wrote nothing outside" test ! -e "$D/outside/evil"

# ---- names that are not UTF-8 ------------------------------------------------------------------
# Bytes 0xff/0x80 (no UTF-8, and nothing the C locale nook runs in converts) and a newline in
# names and a symlink target, through tar streams both ways and tree copies, byte for byte.
# (libarchive's pax writer refused them: "Can't translate pathname".)
ff=$(printf '\377\200')
mkdir -p "$ws/bytes/d$ff" && echo x >"$ws/bytes/a${ff}b" && echo y >"$ws/bytes/nl
name" && echo z >"$ws/bytes/d$ff/in" && ln -s "a${ff}b" "$ws/bytes/sym"
bytes_tree=$(tree_dump "$ws/bytes")
# tar_names TAR: each entry's name (and link target) as a Python bytes literal
tar_names() {
        python3 - "$1" <<'PY'
import os, sys, tarfile
for m in tarfile.open(sys.argv[1], errors="surrogateescape"):
    print(repr(os.fsencode(m.name)), repr(os.fsencode(m.linkname)) if m.issym() else "")
PY
}
want_names="b'bytes' 
b'bytes/a\xff\x80b' 
b'bytes/d\xff\x80' 
b'bytes/d\xff\x80/in' 
b'bytes/nl\nname' 
b'bytes/sym' b'a\xff\x80b'"
"$NOOK" cp w:bytes - >"$D/bytes.tar" 2>"$D/bytes.err"
is "$?" 0 "cp w:DIR - writes a tar of names that are not UTF-8 ($(cat "$D/bytes.err"))"
is "$(tar_names "$D/bytes.tar" 2>&1 | sort)" "$want_names" "the tar holds the names and the link target byte for byte"
mkdir "$ws/bytes-in"
NOOK_STDIN="$D/bytes.tar" run_nook cp - w:bytes-in
is "$status:$(tree_dump "$ws/bytes-in/bytes")" "0:$bytes_tree" "cp - w:DIR extracts that tar byte for byte ($err)"
(cd "$ws" && tar --format=pax -cf "$D/bytes-gnu.tar" bytes)
mkdir "$ws/bytes-gnu"
NOOK_STDIN="$D/bytes-gnu.tar" run_nook cp - w:bytes-gnu
is "$status:$(tree_dump "$ws/bytes-gnu/bytes")" "0:$bytes_tree" "and GNU tar's pax tar of them (raw bytes, no hdrcharset) too ($err)"
run_nook cp w:bytes "$D/bytes-out"
is "$status:$(tree_dump "$D/bytes-out")" "0:$bytes_tree" "cp w:DIR HOST copies them out byte for byte ($err)"
run_nook cp "$D/bytes-out" w:/opt/bytes
"$NOOK" cp w:/opt/bytes - >"$D/bytes-root.tar" 2>"$D/bytes.err"
is "$?:$(tar_names "$D/bytes-root.tar" 2>&1 | sort)" "0:$want_names" \
        "copied into the root filesystem and out as a tar, byte for byte ($(cat "$D/bytes.err"))"
rm -rf "$ws/bytes" "$ws/bytes-in" "$ws/bytes-gnu"

# ---- the sandbox's root filesystem -------------------------------------------------------------
run_nook cp "$D/src/a" w:/etc/
is "$status" 0 "cp FILE w:/etc/ (the root filesystem)" || diag "$err"
is "$(in_guest 'cat /etc/a')" "alpha" "the file is in the sandbox's /etc, not the workspace"
check "it did not land in the workspace" test ! -e "$ws/etc/a"
is "$(in_guest 'stat -c %u:%g:%a /etc/a')" "0:0:750" "it belongs to the sandbox's root, mode kept"
run_nook cp "$D/src" w:/etc/cpdir
is "$status" 0 "cp DIR w:/etc/NEWDIR" || diag "$err"
is "$(in_guest 'cat /etc/cpdir/sub/b; readlink /etc/cpdir/link')" "bravo
/etc/passwd" "the directory and its symlink are in the root filesystem"
run_nook cp w:/etc/cpdir/sub/b "$D/fromroot"
is "$(cat "$D/fromroot" 2>&1)" "bravo" "cp w:/etc/... HOST copies out of the root filesystem"
names=$("$NOOK" cp w:/etc/cpdir - 2>/dev/null | tar -tf - 2>/dev/null | sort | tr '\n' ' ')
is "$names" "cpdir/ cpdir/a cpdir/link cpdir/rel cpdir/sub/ cpdir/sub/b " "cp w:/etc/DIR - writes a tar"
in_guest 'mkdir -p /opt/tin'
NOOK_STDIN="$D/src.tar" run_nook cp - w:/opt/tin
is "$(in_guest 'cat /opt/tin/sub/b')" "bravo" "cp - w:/ROOTDIR extracts a tar into the root filesystem"
NOOK_STDIN="$D/symesc.tar" run_nook cp - w:/opt/tin
isnt "$status" 0 "a hostile tar is refused on the root filesystem too"
check "it wrote nothing on the host" test ! -e "$D/outside/evil"
is "$(in_guest 'find / -xdev -name ".nook-cp-*" 2>/dev/null')" "" "no staging directory is left in the root filesystem"

# a guest symlink to an absolute path resolves inside the sandbox's root, never on the host
# (twice: with openat2, and with the component walk used where the kernel lacks it)
in_guest "mkdir -p /opt/inside && ln -s /opt/inside /etc/lnk && ln -s ../../opt/inside /etc/lnk3 &&
        ln -s $D/outside /etc/lnk2 && ln -s ../../../../../../$D/outside /etc/lnk4"
for walk in 0 1; do
        export NOOK_TEST_NO_OPENAT2=$walk
        run_nook cp "$D/$mark" "w:/etc/lnk/m$walk"
        is "$status" 0 "a guest symlink to an absolute path is followed inside the root (walk=$walk)" || diag "$err"
        run_nook cp "$D/$mark" "w:/etc/lnk3/r$walk"
        is "$status" 0 "a guest symlink with '..' is followed inside the root (walk=$walk)" || diag "$err"
        is "$(in_guest "cat /opt/inside/m$walk /opt/inside/r$walk")" "alpha
alpha" "both files landed at the links' target in the sandbox (walk=$walk)"
        run_nook cp "$D/$mark" "w:/etc/lnk2/h$walk"
        run_nook cp "$D/$mark" "w:/etc/lnk4/h$walk"
        check "a guest symlink to a host path never reaches the host (walk=$walk)" test ! -e "$D/outside/h$walk"
done
unset NOOK_TEST_NO_OPENAT2
run_nook cp "$D/src/a" w:/proc/
isnt "$status" 0 "writing into /proc is refused"
like "$err" "kernel filesystem" "the message names the kernel filesystem"
run_nook cp w:/proc/1/status "$D/st"
isnt "$status" 0 "reading from /proc is refused"
check "nothing was copied out of /proc" test ! -e "$D/st"

# ---- usage errors, and a stopped sandbox -------------------------------------------------------
run_nook cp -a "$D/src/a" w:/etc/
isnt "$status" 0 "-a is refused with a message (ownership is decided by the side)"
run_nook cp w:/etc/a w:/etc/b
isnt "$status" 0 "copying between two sandboxes is refused"
run_nook stop w
run_nook cp "$D/src/a" w:/etc/b
isnt "$status" 0 "a root filesystem path of a stopped sandbox is an error"
like "$err" "not running" "the message says it is not running"
run_nook cp "$D/src/a" w:/workspace/stopped
is "$status" 0 "the workspace of a stopped sandbox still takes files" || diag "$err"
# ---- "d/." while the guest swaps d for a symlink: the destination is never made a symlink ------
"$NOOK" start w >/dev/null
"$NOOK" exec w -- sh -c 'mkdir -p /workspace/swap/d && echo in >/workspace/swap/d/f && ln -s /etc /workspace/swap/l' >/dev/null
# renameat2(RENAME_EXCHANGE) in a loop: "d" is always there, a directory or a symlink to /etc
"$NOOK" exec -d w -- python3 -c 'import ctypes, os
libc = ctypes.CDLL(None)
os.chdir("/workspace/swap")
while True:
    libc.renameat2(-100, b"d", -100, b"l", 2)' >/dev/null
links=0 copies=0
for i in $(seq 300); do
        "$NOOK" cp "w:/workspace/swap/d/." "$D/swapout$i" >/dev/null 2>&1 && copies=$((copies + 1))
        [[ -L "$D/swapout$i" ]] && links=$((links + 1))
        rm -rf "$D/swapout$i"
done
is "$links" 0 "300 copies of 'd/.' raced by a guest swapping d for a symlink: no destination became a symlink ($copies copied)"
if ((copies > 0)); then ok "and some copied (the race ran: $copies of 300)"; else not_ok "some copies went through" "0 of 300: the guest's swap loop did not run?"; fi
# a copy into the workspace killed part way (its tar stream stalls mid-file): its staging folder is
# in the state folder's trash, never in the workspace (a diff listed it, a merge carried it), and
# the next ls sweeps it
head -c 3000000 /dev/urandom >"$D/big3m"
mkdir -p "$ws/stalled"
(tar -C "$D" -cf - big3m | head -c 1000000; sleep 30) | "$NOOK" cp - w:/workspace/stalled &
for ((i = 0; i < 100; i++)); do
        cpid=$(pgrep -f -- "cp - w:/workspace/stalled" | head -1)
        [[ -n $cpid && -n $(ls -A "$NOOK_HOME/trash" 2>/dev/null | grep '^\.nook-cp-') ]] && break
        sleep 0.05
done
kill -9 "$cpid" 2>/dev/null
wait $! 2>/dev/null
is "$(find "$ws" -name '.nook-cp-*' | wc -l)/$(ls -A "$NOOK_HOME/trash" 2>/dev/null | grep -c '^\.nook-cp-')" "0/1" \
        "a cp into the workspace killed mid-stream leaves its stage in the trash, not in the workspace"
run_nook ls -q
is "$(ls -A "$NOOK_HOME/trash" 2>/dev/null | grep -c '^\.nook-cp-')" "0" "the next ls sweeps it"
run_nook rm w

# ---- a stopped sticky sandbox: its kept root layer, reached by starting it for the copy --------
run_nook create --sticky k
is "$status" 0 "create --sticky k" || diag "$err"
run_nook stop k
run_nook cp "$D/src" k:/etc/stk
is "$status" 0 "cp into the root filesystem of a stopped sticky sandbox" || diag "$err"
is "$("$NOOK" inspect k 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" \
        "stopped" "the sandbox is stopped again after the copy"
run_nook cp k:/etc/stk/sub/b "$D/fromsticky"
is "$(cat "$D/fromsticky" 2>&1)" "bravo" "cp out of the root filesystem of a stopped sticky sandbox"
# a copier killed part way (here blocked on a full pipe) leaves the sandbox stopped, as it was:
# its start was tied to the copy
head -c 4194304 /dev/urandom >"$D/big4m"
run_nook cp "$D/big4m" k:/big4m
("$NOOK" cp k:/big4m - | sleep 30) &
spid=$!
for ((i = 0; i < 200; i++)); do
        cpid=$(pgrep -P "$spid" -f -- "cp k:/big4m -" | head -1)
        [[ -n $cpid && $("$NOOK" inspect k 2>/dev/null | jq -r .state) == running ]] && break
        sleep 0.05
done
sleep 0.3
kill -9 "$cpid" 2>/dev/null
for ((i = 0; i < 300; i++)); do
        [[ $("$NOOK" inspect k 2>/dev/null | jq -r .state) == stopped ]] && break
        sleep 0.05
done
is "$("$NOOK" inspect k 2>/dev/null | jq -r '.state + " " + .stopReason')" "stopped starter_gone" \
        "a cp killed mid-copy leaves the stopped sticky sandbox stopped again (not running)"
pkill -P "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
run_nook start k
is "$("$NOOK" exec k -- cat /etc/stk/a 2>&1)" "alpha" "the copy is in the sticky sandbox's kept root layer"
run_nook rm k
