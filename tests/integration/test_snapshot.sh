#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Snapshots (issue 7): files added, changed and deleted in the rootfs (whiteouts, an opaque
# directory), modes and ownership survive snapshot -> create --snapshot; the workspace comes
# back with --with-workspace; a secret given to an exec is in neither the snapshot nor its
# export; a running or ephemeral sandbox is refused; identical content is stored once; a snapshot
# survives its source and serves many sandboxes; rm of one in use is refused naming the sandbox;
# export/import on a fresh NOOK_HOME gives the same digest; corrupted, truncated and hostile
# files are refused with nothing left behind; two imports of one file at once both succeed and
# leave one whole snapshot; a snapshot without a name of content stored already answers with the
# snapshot that holds it; names that are not UTF-8 (0xff) or hold a newline come back byte for
# byte.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
command -v jq >/dev/null || plan skip_all "jq is needed to read nook's JSON"
command -v zstd >/dev/null || plan skip_all "zstd is needed to take export files apart"
command -v busybox >/dev/null || plan skip_all "busybox is needed for the test root filesystem"
plan 105

ROOT=0
nook_rootful && ROOT=1
D=$(mktemp -d /var/tmp/nook-test-snap.XXXXXXXX) || bail_out "mktemp"
chmod 0755 "$D"
H2=$(mktemp -d /var/tmp/nook-test-snap2.XXXXXXXX) || bail_out "mktemp"
chmod 0700 "$H2"
SECRET="nook-secret-sentinel-$RANDOM$RANDOM"
cleanup_extra() {
        local rc=$? s
        for s in $(NOOK_HOME=$H2 "$NOOK" ls -q 2>/dev/null); do NOOK_HOME=$H2 "$NOOK" rm "$s" >/dev/null 2>&1; done
        chmod -R u+rwX "$D" "$H2" 2>/dev/null
        rm -rf "$D" "$H2"
        (exit $rc)
        _tap_finish
}
trap cleanup_extra EXIT

# A busybox root filesystem owned by the sandbox's root (host uid 100000000 as root, us otherwise).
R="$D/rootfs"
mkdir -p "$R/bin" "$R/etc" "$R/data/sub" "$R/tmp"
cp "$(command -v busybox)" "$R/bin/busybox"
for a in sh ls cat echo rm mkdir chmod chown stat touch ln test grep; do ln -s busybox "$R/bin/$a"; done
echo original >"$R/etc/issue"
echo keep >"$R/etc/motd"
echo a >"$R/data/sub/a"
echo b >"$R/data/b"
[[ $ROOT == 1 ]] && chown -R 100000000:100000000 "$R"

sx() { run_nook exec "$1" --sh "$2"; }

# nothing_stored DESC: no snapshot record, nothing under <home>/snapshots.
nothing_stored() {
        local home=${2:-$NOOK_HOME} o
        o=$(NOOK_HOME=$home "$NOOK" snapshot ls -q 2>&1)
        o+=$(find "$home/snapshots" -mindepth 1 -maxdepth 1 2>/dev/null)
        is "$o" "" "$1: no snapshot record and nothing under snapshots/"
}

# ---- the source sandbox ---------------------------------------------------------------------------
run_nook create src --sticky --image "$R"
is "$status" 0 "create a sticky sandbox from a root filesystem directory"
run_nook ls
like "$out" "src +running +sticky" "ls shows the sandbox as sticky"
sx src 'echo added >/etc/added && echo changed >>/etc/motd && rm /etc/issue &&
        rm -rf /data && mkdir /data && echo fresh >/data/only &&
        mkdir -p /opt/d && echo x >/opt/d/f && chmod 0640 /opt/d/f && chmod 0750 /opt/d &&
        ln /opt/d/f /opt/d/hardlink && ln -s ../etc/added /opt/sym'
is "$status" 0 "add, change and delete files in the root filesystem"
if [[ $ROOT == 1 ]]; then
        sx src 'chown 1234:2345 /opt/d/f && chmod 4750 /opt/d/f'
        is "$status" 0 "give a file another owner and the setuid bit"
else
        skip_expected "rootless: one uid mapped, no other owner to give a file"
fi
SECRET_VALUE=$SECRET run_nook exec --secret-env SECRET_VALUE src --sh 'test -n "$SECRET_VALUE" && echo used'
is "$out" "used" "an exec saw the secret"
echo from-workspace >"$("$NOOK" ws path src)/w.txt"
run_nook ws write src /ws2.txt "$R/etc/motd"

expect_fail 1 "a running sandbox is refused" snapshot create src s-run
like "$err" "running; stop it first" "the refusal says to stop it first"
nothing_stored "after the refused running snapshot"

run_nook create eph --image "$R"
run_nook stop eph
expect_fail 1 "an ephemeral sandbox is refused" snapshot create eph s-eph
like "$err" "ephemeral.*--sticky" "the refusal says to create it with --sticky"
run_nook rm eph

run_nook stop src
run_nook snapshot create --with-workspace src snap1
is "$status" 0 "snapshot of the stopped sticky sandbox"
DIGEST=$(awk '{print $2}' <<<"$out")
like "$DIGEST" "^sha256:[0-9a-f]{64}$" "it has a content digest"
# a snapshot create killed part way leaves its folder in snapshots/.tmp (no live owner holds its
# lock): the next create removes it, not only a prune
mkdir -p "$NOOK_HOME/snapshots/.tmp/create-killed1/rootfs" && head -c 1048576 /dev/zero >"$NOOK_HOME/snapshots/.tmp/create-killed1/rootfs.tar"
run_nook snapshot create --with-workspace src snap-again
check "the next snapshot create removed a killed one's temporary folder" test ! -e "$NOOK_HOME/snapshots/.tmp/create-killed1"
is "$status" 1 "the same content under another name is refused"
like "$err" "snap1.*stored once" "the refusal names the snapshot that holds it"
# Without a name the same content is no error: the answer is the snapshot that holds it (as for an
# import of it), and nothing new is stored.  A name that is taken stays an error.
run_nook snapshot create --with-workspace src
is "$status:$(awk '{print $1, $2}' <<<"$out")" "0:snap1 $DIGEST" \
        "the same content again without a name answers with the snapshot that holds it, not 'exists' ($err)"
like "$out" "already present" "and says it is already present"
run_nook --json snapshot create --with-workspace src
is "$(jq -r '[.name, .alreadyPresent] | join(" ")' <<<"$out")" "snap1 true" "--json: that snapshot, alreadyPresent true"
is "$("$NOOK" snapshot ls -q | tr '\n' ' ')" "snap1 " "no snapshot was added"
expect_fail 1 "a name that is taken stays an error" snapshot create src snap1
like "$err" "named 'snap1' exists already" "the refusal says the name is taken"
# Two snapshots without a name, at once (the same second): the default names are picked under
# the sandbox's lock, so each gets its own ("src-EPOCH", "src-EPOCH-2"), neither "exists".
echo more >"$("$NOOK" ws path src)/w3.txt"
"$NOOK" snapshot create src >"$D/d1.out" 2>"$D/d1.err" &
p1=$!
"$NOOK" snapshot create --with-workspace src >"$D/d2.out" 2>"$D/d2.err" &
p2=$!
wait $p1
s1=$?
wait $p2
s2=$?
is "$s1 $s2" "0 0" "two default-named snapshots at once both succeed ($(cat "$D/d1.err" "$D/d2.err"))"
d1=$(awk '{print $1}' "$D/d1.out") d2=$(awk '{print $1}' "$D/d2.out")
like "$d1 $d2" "^src-[0-9]+(-[0-9]+)? src-[0-9]+(-[0-9]+)?$" "both have default names"
isnt "$d1" "$d2" "each its own"
# the user's case: an agent snapshots on every step without a name, changed or not
run_nook snapshot create src
is "$status:$(awk '{print $1}' <<<"$out")" "0:$d1" "a repeated snapshot without a name of unchanged content answers with the first ($err)"
run_nook snapshot rm "$d1" "$d2"
rm -f "$("$NOOK" ws path src)/w3.txt"
run_nook snapshot inspect snap1
is "$(jq -r '.withWorkspace, .holds, .sourceSandbox' <<<"$out" | tr '\n' ' ')" \
        "true root filesystem and workspace src " "inspect says what it holds"
like "$(jq -r .note <<<"$out")" "never memory" "inspect says disk state only"

SDIR="$NOOK_HOME/snapshots/${DIGEST#sha256:}"
check "the snapshot directory exists" test -d "$SDIR/rootfs"
if grep -rqa "$SECRET" "$SDIR" 2>/dev/null; then
        not_ok "the secret is not in the snapshot directory"
else
        ok "the secret is not in the snapshot directory"
fi

# ---- boot from it, after its source is gone ----------------------------------------------------------
run_nook rm src
is "$status" 0 "remove the source sandbox"
run_nook create b1 --snapshot snap1
is "$status" 0 "create a sandbox from the snapshot"
sx b1 'cat /etc/added /etc/motd /data/only'
is "$out" $'added\nkeep\nchanged\nfresh' "added and changed files are there"
sx b1 'test -e /etc/issue || echo gone; test -e /data/b || echo gone2; test -e /data/sub || echo gone3'
is "$out" $'gone\ngone2\ngone3' "deleted files and the replaced directory's old content stay deleted"
sx b1 'stat -c "%a %i" /opt/d/f /opt/d/hardlink | awk "{print \$1}"; stat -c %a /opt/d; readlink /opt/sym'
if [[ $ROOT == 1 ]]; then
        is "$out" $'4750\n4750\n750\n../etc/added' "modes (setuid too), hard link and symlink preserved"
else
        is "$out" $'640\n640\n750\n../etc/added' "modes, hard link and symlink preserved"
fi
sx b1 'stat -c "%i" /opt/d/f /opt/d/hardlink | sort -u | wc -l'
is "$out" "1" "the hard link is still one file"
if [[ $ROOT == 1 ]]; then
        sx b1 'stat -c "%u:%g" /opt/d/f'
        is "$out" "1234:2345" "ownership preserved"
else
        skip_expected "rootless: ownership other than root cannot exist"
fi
sx b1 'cat /workspace/w.txt /workspace/ws2.txt'
is "$out" $'from-workspace\nkeep' "the workspace is restored"
sx b1 'echo mine >/etc/added'
run_nook create b2 --snapshot "$DIGEST"
is "$status" 0 "a second sandbox from the same snapshot, by digest"
sx b2 'cat /etc/added'
is "$out" "added" "sandboxes from one snapshot do not share their writes"
run_nook create b3 --snapshot snap1 --image /nonexistent-base
is "$status" 1 "another image with a snapshot is refused"
# killed with the workspace unpacked but not yet in place: it stays empty (never half restored),
# and the start that follows restores it whole
NOOK_TEST_CREATE_KILL_AT=restored run_nook create b4 --snapshot snap1
if [[ $status == 137 ]]; then
        is "$(find "$("$NOOK" ws path b4)" -mindepth 1 | wc -l)" "0" "a create killed during the workspace's restore leaves it empty, not torn"
        run_nook start b4
        sx b4 'cat /workspace/w.txt /workspace/ws2.txt'
        is "$out" $'from-workspace\nkeep' "the start after it restores the whole workspace"
        run_nook rm b4
        check "and the killed restore's folder was swept from the trash" test -z "$(ls -A "$NOOK_HOME/trash" 2>/dev/null)"
else
        for i in 1 2 3; do skip "NOOK_TEST_CREATE_KILL_AT needs a build with test hooks (status $status)"; done
fi

expect_fail 1 "rm of a snapshot in use" snapshot rm snap1
like "$err" "in use by sandbox 'b[12]'" "the refusal names the sandbox"
run_nook snapshot inspect snap1
is "$(jq -r '[.usedBy[].sandbox] | sort | join(",")' <<<"$out")" "b1,b2" "inspect lists who uses it"
run_nook snapshot ls --json
is "$(jq -r '.[] | select(.name == "snap1") | [.usedBy[].sandbox] | sort | join(",")' <<<"$out")" "b1,b2" "so does ls --json (it said null)"

# ---- export / import ---------------------------------------------------------------------------------
X="$D/snap1.nsnap"
run_nook snapshot export snap1 "$X"
is "$status" 0 "export to one file"
like "$(zstd -dc "$X" | tar t | tr '\n' ' ')" "^snapshot.json rootfs.tar workspace.tar $" \
        "the export is a zstd tar of the description and the layers"
if zstd -dc "$X" | grep -qa "$SECRET"; then
        not_ok "the secret is not in the export"
else
        ok "the secret is not in the export"
fi
"$NOOK" snapshot export snap1 - >"$D/stdout.nsnap"
is "$?" 0 "export to '-' writes the file to stdout"
cmp -s "$X" "$D/stdout.nsnap"
is "$?" 0 "the same bytes as the export to a file"
# an existing FILE is kept unless --force (as nook image export); a directory never is replaced
echo keep >"$D/existing"
run_nook snapshot export snap1 "$D/existing"
is "$status:$(cat "$D/existing")" "1:keep" "export over an existing file is refused and leaves it"
like "$err" "exists: use --force to replace it" "the refusal says what to do"
mkdir "$D/adir"
run_nook snapshot export --force snap1 "$D/adir"
is "$status" 1 "export --force onto a directory is refused"
like "$err" "is a directory" "and says so"
ln -s "$D/linked-target" "$D/alink"
echo target >"$D/linked-target"
run_nook snapshot export snap1 --force "$D/alink"
is "$status:$(cat "$D/linked-target")" "0:target" "export --force replaces a symlink, never writes through it"
cmp -s "$X" "$D/alink"
is "$?" 0 "the link's name now holds the export"
run_nook snapshot export --force snap1 "$D/existing"
cmp -s "$X" "$D/existing"
is "$status:$?" "0:0" "export --force replaces an existing file"
run_nook snapshot export nosuch "$D/existing"
like "$err" "nosuch" "an unknown snapshot is named before the file's existence"
is "$(find "$D" -name '*.nook-tmp-*' | wc -l)" 0 "no temporary left beside the targets"
NOOK_HOME=$H2 run_nook snapshot import "$X"
is "$status" 0 "import on a fresh NOOK_HOME"
is "$(awk '{print $2}' <<<"$out")" "$DIGEST" "the round trip gives the same digest"
NOOK_HOME=$H2 run_nook create c1 --snapshot snap1
sx_h2() { NOOK_HOME=$H2 run_nook exec "$1" --sh "$2"; }
sx_h2 c1 'cat /etc/added /workspace/w.txt; test -e /etc/issue || echo gone'
is "$out" $'added\nfrom-workspace\ngone' "a sandbox boots from the imported snapshot"
NOOK_HOME=$H2 run_nook rm c1
# from stdin ('-'): the same snapshot again, once the first import is removed
NOOK_HOME=$H2 "$NOOK" snapshot rm snap1 >/dev/null
NOOK_HOME=$H2 "$NOOK" snapshot import -q - snap1 <"$D/stdout.nsnap" >"$D/stdin.out" 2>&1
is "$?:$(awk '{print $2}' "$D/stdin.out")" "0:$DIGEST" "import '-' reads the file from stdin: the same digest"

# Two imports of one file at once (or snapshots of two sandboxes with the same layer): a commit
# holds a lock on <home>/snapshots from its look for the content to its record, so the second
# waits and answers with the first's snapshot.  Without it the second took the first's directory
# for a crash's leftover, and one record was left without its files.  The first pauses between
# its rename and its record (a test hook; without hooks the two just race).
H4=$(mktemp -d /var/tmp/nook-test-snap4.XXXXXXXX)
chmod 0700 "$H4"
NOOK_HOME=$H4 NOOK_TEST_SNAPSHOT_PAUSE_AT=renamed "$NOOK" snapshot import "$X" >"$D/imp1.out" 2>&1 &
imp1=$!
sleep 1
NOOK_HOME=$H4 run_nook snapshot import "$X"
wait $imp1
is "$?:$status" "0:0" "two imports of one file at once both succeed ($(cat "$D/imp1.out") $err)"
like "$out" "already present" "the second answers with the first's snapshot"
check "the snapshot's files are there" test -d "$H4/snapshots/${DIGEST#sha256:}/rootfs"
rm -rf "$H4"

H3=$(mktemp -d /var/tmp/nook-test-snap3.XXXXXXXX)
chmod 0700 "$H3"
# corrupt FILE DESC: import is refused and leaves nothing behind.
refused_import() {
        NOOK_HOME=$H3 run_nook snapshot import "$1" victim
        if [[ $status == 1 && "$err" == *Refusing* ]]; then ok "$2 is refused"; else not_ok "$2 is refused" "status $status" "$err"; fi
        diag "$2: $err"
        nothing_stored "$2" "$H3"
}
size=$(stat -c %s "$X")
head -c $((size / 2)) "$X" >"$D/trunc.nsnap"
refused_import "$D/trunc.nsnap" "a truncated export"
# flip bits inside the decompressed layer, recompress: the digests catch it
mkdir "$D/t" && zstd -dc "$X" | tar x -C "$D/t"
python3 - "$D/t/rootfs.tar" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
i = b.find(b"added\n")
b[i] ^= 0x20
open(p, "wb").write(bytes(b))
EOF
(cd "$D/t" && tar --format=pax -c snapshot.json rootfs.tar workspace.tar | zstd -q -o "$D/corrupt.nsnap")
refused_import "$D/corrupt.nsnap" "a corrupted layer"
head -c 4096 /dev/urandom >"$D/random.nsnap"
refused_import "$D/random.nsnap" "random bytes"

# hostile: a layer with '../' and one writing through a symlink, with every digest consistent
make_hostile() {
        python3 - "$D/h" "$1" <<'EOF'
import hashlib, io, json, os, sys, tarfile
out, kind = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
    def add(name, data=b"", typ=tarfile.REGTYPE, link=""):
        i = tarfile.TarInfo(name); i.type = typ; i.linkname = link; i.size = len(data)
        t.addfile(i, io.BytesIO(data) if data else None)
    if kind == "dotdot":
        add("../../../../tmp/nook-snap-escape", b"x")
    else:
        add("esc", typ=tarfile.SYMTYPE, link="/tmp")
        add("esc/nook-snap-escape", b"x")
layer = buf.getvalue()
d = "sha256:" + hashlib.sha256(layer).hexdigest()
content = {"format": "nook.snapshot.v1", "base": "host", "parent": None, "rootfs": d, "workspace": None}
canon = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
meta = {"content": content, "digest": "sha256:" + hashlib.sha256(canon.encode()).hexdigest(), "name": "evil"}
open(os.path.join(out, "snapshot.json"), "w").write(json.dumps(meta))
open(os.path.join(out, "rootfs.tar"), "wb").write(layer)
EOF
        rm -f "$D/hostile.nsnap"
        (cd "$D/h" && tar --format=pax -c snapshot.json rootfs.tar | zstd -q -o "$D/hostile.nsnap")
}
make_hostile dotdot
refused_import "$D/hostile.nsnap" "a layer entry with '..'"
make_hostile symlink
refused_import "$D/hostile.nsnap" "a layer entry through a symlink"
check "nothing escaped to /tmp" test ! -e /tmp/nook-snap-escape
rm -rf "$H3"

# ---- sparse files: a snapshot costs what they hold ---------------------------------------------------
# The guest's `truncate -s` files and the workspace's are packed by their data extents (GNU sparse
# pax entries) and unpacked with their holes; a dense file of zeros is unpacked as a hole too.
# NOOK_TEST_PACK_MAX_EXTENTS=4 makes the fragmented file overflow the extent map: its smallest
# holes are packed as zeros, its largest stay holes, and its bytes are the same.
MIB=1048576
run_nook create sp --sticky --image "$R"
sx sp 'busybox truncate -s 512M /big && echo abc | busybox dd of=/big bs=1 seek=1000000 conv=notrunc 2>/dev/null &&
        busybox truncate -s 256M /hole && busybox dd if=/dev/zero of=/zeros bs=1M count=8 2>/dev/null && echo x >>/zeros'
is "$status" 0 "the guest makes a sparse file, an all-hole file and a file of zeros"
SPW=$("$NOOK" ws path sp)
python3 - "$SPW" <<'PY'
import os, sys
w = sys.argv[1]
with open(os.path.join(w, "wsbig"), "wb") as f:
    f.truncate(1 << 30)
    f.seek(700_000_000)
    f.write(b"hello")
# ten data extents; holes of 4 KiB, 1 MiB and 50+ MiB between them
with open(os.path.join(w, "frag"), "wb") as f:
    for i, off in enumerate([0, 8 << 10, 16 << 10, 1 << 20, (1 << 20) + (8 << 10), 200 << 20,
                             (200 << 20) + (4 << 10), 250 << 20, 300 << 20, (300 << 20) + (12 << 10)]):
        f.seek(off)
        f.write(bytes([65 + i]) * 4096)
    f.truncate(320 << 20)
PY
run_nook stop sp
NOOK_TEST_PACK_MAX_EXTENTS=4 run_nook snapshot create --with-workspace sp spsnap
is "$status" 0 "snapshot of the sandbox with sparse files ($err)"
SPD="$NOOK_HOME/snapshots/$("$NOOK" snapshot inspect spsnap | jq -r .digest | sed 's/^sha256://')"
rt=$(stat -c %s "$SPD/rootfs.tar") wt=$(stat -c %s "$SPD/workspace.tar")
check "the layer's tar holds the data, not the 768 MiB of holes ($rt bytes)" test "$rt" -lt $((16 * MIB))
check "the workspace's tar holds the data, not 1.3 GiB of holes ($wt bytes)" test "$wt" -lt $((8 * MIB))
is "$(tar -tvf "$SPD/rootfs.tar" 2>&1 | awk '$6 == "big" || $6 == "hole" {print $6, $3}' | tr '\n' ' ')" \
        "big 536870912 hole 268435456 " "GNU tar reads the sparse entries with their real sizes"
ub=$(du -sk "$SPD/rootfs" | cut -f1)
check "the snapshot's unpacked layer keeps the holes and leaves out the zeros (${ub} KiB)" test "$ub" -lt 1024
run_nook create sp2 --snapshot spsnap
is "$status" 0 "a sandbox from the snapshot with sparse files"
SPW2=$("$NOOK" ws path sp2)
for f in big hole zeros; do
        check "/$f is restored byte for byte" cmp -s "$NOOK_HOME/sandboxes/sp/upper/$f" "$SPD/rootfs/$f"
done
for f in wsbig frag; do
        check "workspace $f is restored byte for byte" cmp -s "$SPW/$f" "$SPW2/$f"
done
blocks=0
for f in "$SPD/rootfs/big" "$SPD/rootfs/hole" "$SPD/rootfs/zeros" "$SPW2/wsbig"; do
        blocks=$((blocks + $(stat -c %b "$f")))
done
check "the restored files are holes, not zeros ($blocks blocks)" test "$blocks" -lt 2048
fb=$(stat -c %b "$SPW2/frag")
check "the fragmented file is restored with holes ($fb blocks of 320 MiB)" test "$fb" -lt $((64 * 2048))
sx sp2 'busybox head -c 1000003 /big | busybox tail -c 3'
is "$out" "abc" "the guest reads its data back from the restored sparse file"
run_nook rm sp sp2
run_nook snapshot rm spsnap

# ---- names that are not UTF-8 ------------------------------------------------------------------------
# A Linux name is any bytes but '/' and NUL.  A guest's names with bytes 0xff/0x80 (no UTF-8, and
# no ASCII: the C locale nook runs in cannot convert them), a newline, a directory, a symlink
# target and a hard link of such names go through the layer and workspace tars byte for byte:
# snapshot, boot, export and import.  (libarchive's pax writer refused them: "Can't translate
# pathname".)
run_nook create nu --sticky --image "$R"
sx nu 'ff=$(printf "\377\200") && mkdir -p "/bytes/d$ff" && echo x >"/bytes/a${ff}b" &&
        echo y >"/bytes/nl
name" && echo z >"/bytes/d$ff/in" && ln -s "a${ff}b" /bytes/sym && ln -s "t$(printf "\376")" /bytes/sym2 &&
        ln "/bytes/a${ff}b" /bytes/hard'
is "$status" 0 "the guest makes names with bytes 0xff, 0x80 and a newline ($err)"
NUW=$("$NOOK" ws path nu)
mkdir "$NUW/w$(printf '\377')" && echo w >"$NUW/w$(printf '\377')/f
x"
run_nook stop nu
run_nook snapshot create --with-workspace nu nusnap
is "$status" 0 "a snapshot of them is taken ($err)"
NUD="$NOOK_HOME/snapshots/$("$NOOK" snapshot inspect nusnap 2>/dev/null | jq -r .digest | sed 's/^sha256://')"
layer=$(tree_dump "$NOOK_HOME/sandboxes/nu/upper/bytes")
like "$layer" "b'a\\\\xff\\\\x80b'.*b'd\\\\xff\\\\x80/in'.*b'nl\\\\nname'.*b't\\\\xfe'" "the guest's names are in its layer as made"
is "$(tree_dump "$NUD/rootfs/bytes")" "$layer" "the snapshot's layer holds them byte for byte (names, link targets, the hard link)"
run_nook create nu2 --snapshot nusnap
is "$status" 0 "a sandbox boots from the snapshot ($err)"
sx nu2 'ff=$(printf "\377\200"); cat "/bytes/a${ff}b" "/bytes/nl
name" "/bytes/d$ff/in" /bytes/sym /bytes/hard'
is "$out" $'x\ny\nz\nx\nx' "the guest reads each file back by its name"
is "$(tree_dump "$("$NOOK" ws path nu2)")" "$(tree_dump "$NUW")" "the workspace is restored byte for byte"
run_nook snapshot export nusnap "$D/nu.nsnap"
NOOK_HOME=$H2 run_nook snapshot import "$D/nu.nsnap"
is "$status" 0 "the export imports on another NOOK_HOME ($err)"
is "$(tree_dump "$H2/snapshots/${NUD##*/}/rootfs/bytes")" "$layer" "the imported layer holds the names byte for byte"
NOOK_HOME=$H2 run_nook snapshot rm nusnap
run_nook rm nu nu2
run_nook snapshot rm nusnap

# ---- removal -------------------------------------------------------------------------------------
run_nook rm b1 b2
run_nook snapshot rm snap1
is "$status" 0 "rm once no sandbox uses it"
nothing_stored "after rm"
