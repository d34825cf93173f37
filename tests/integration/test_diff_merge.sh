#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook diff and nook merge (docs/design/diff-merge.md) on real sandboxes and real directories:
# diff lists exactly what a guest changed since create (added, modified, deleted, chmod, symlink,
# type change, names with a space or a newline; an mtime forged back still counts), --json is
# stable, -p prints unified diffs, --root shows the writable layer (whiteouts); the baseline
# survives stop/start; merge of two sandboxes made from the same initial workspace applies the
# branch's changes onto a running target, a conflict changes nothing and lists it, ours/theirs
# resolve as named, and hostile trees (symlinks leading out in either tree) write nothing outside.
# Runs in every stage: the guest's files are the caller's (user, unshare) or root's (root).
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
command -v python3 >/dev/null || plan skip_all "python3 is needed to read the JSON"
plan 139

D=$(mktemp -d /var/tmp/nook-dm-test.XXXXXX)
chmod 0755 "$D"
trap 'rc=$?; rm -rf "$D"; (exit $rc); _tap_finish' EXIT

g() { "$NOOK" exec "$1" -- sh -c "$2" 2>&1; }
# kinds JSON: "kind path" lines from a diff's or merge's JSON (changes or applied)
kinds() { python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
for c in j.get("changes", j.get("applied", [])):
    print(c["kind"], c["path"].replace("\n", "\\n"))'; }
conflicts() { python3 -c '
import json, sys
for c in json.loads(sys.stdin.read())["conflicts"]:
    print(c["path"], c["branch"], c["target"], c["resolution"])'; }
tree_sum() { (cd "$1" && find . -printf '%y %m %p %l\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum); }
leftovers() { find "$1" -name '.nook-merge-*' 2>/dev/null | head -3; }

# ---- bad input -----------------------------------------------------------------------------------
expect_fail 1 "diff of an unknown sandbox" diff nosuch
like "$err" "nosuch" "the message names it"
expect_fail 2 "diff without a name" diff
expect_fail 2 "diff with an unknown option" diff --frob x

# ---- one sandbox: diff ---------------------------------------------------------------------------
seed="$D/seed"
mkdir -p "$seed/dir" "$seed/todir" "$seed/gone"
printf 'one\ntwo\nthree\n' >"$seed/text"
printf 'same\n' >"$seed/chmod-me"
printf 'forge\n' >"$seed/forged"
printf 'x\n' >"$seed/gone/f"
printf 'file\n' >"$seed/becomes-dir"
ln -s text "$seed/link"
printf 'keep\n' >"$seed/keep"
printf 'k\n' >"$seed/dir/k"
touch -d '2001-01-01 00:00:00' "$seed/forged"

run_nook ws path w
ws=$out
mkdir -p "$ws" && cp -a "$seed/." "$ws/" && chmod 0755 "$ws"
run_nook create w
is "$status" 0 "create w over a populated workspace" || bail_out "cannot create a sandbox: $err"

run_nook diff w
is "$status:$out" "0:" "a fresh sandbox has no changes"

g w 'cd /workspace && printf "one\ntwo\nTHREE\nfour\n" > text && chmod 0700 chmod-me && echo added > new &&
     rm -r gone && ln -sfn keep link && rm becomes-dir && mkdir becomes-dir && printf "n\n" > "sp ace" &&
     printf "l\n" > "$(printf "new\nline")" && printf "FORGE\n" > forged && touch -d "2001-01-01 00:00:00" forged &&
     rmdir todir && ln -s /etc todir' >/dev/null
run_nook diff --json w
is "$status" 0 "diff --json" || diag "$err"
j1=$out
expected='type becomes-dir
mode chmod-me
deleted dir/k
modified forged
deleted gone
deleted gone/f
modified link
added new
added new\nline
added sp ace
modified text
type todir'
got=$(printf '%s' "$j1" | kinds)
# dir/k must not be listed: it is unchanged.  Remove the line from the expectation above.
expected=$(printf '%s\n' "$expected" | grep -v '^deleted dir/k$')
is "$got" "$expected" "diff lists exactly the guest's changes, sorted by path"
run_nook diff --json w
is "$out" "$j1" "--json is the same on a second run"
like "$j1" '"summary":\{"added":3,"deleted":2,"modified":3,"type":2,"mode":1\}' "the summary counts each kind"
like "$j1" '"path":"chmod-me","kind":"mode","type":"file","mode":"0700","size":5,"oldMode":"0644"' "a mode change names old and new mode"
like "$j1" '"path":"link","kind":"modified","type":"symlink","mode":"0777","target":"keep","oldTarget":"text"' "a symlink's new and old target"
like "$j1" '"path":"todir","kind":"type","type":"symlink","mode":"0777","target":"/etc","oldType":"dir"\}' "a directory became a symlink"

run_nook diff w
like "$out" $'^T becomes-dir  \\(file -> dir\\)\nm chmod-me  \\(mode 0644 -> 0700\\)' "text: one letter per change"
like "$out" 'A new\\nline' "a newline in a name is escaped in text output"

run_nook diff -p w
is "$status" 0 "diff -p" || diag "$err"
like "$out" $'--- /dev/null\n\\+\\+\\+ b/new\n@@ -0,0 \\+1 @@\n\\+added' "-p: an added file as a unified diff"
like "$out" $'--- a/text\n\\+\\+\\+ b/text\n\\(old content unavailable' "-p: a modified file without a known old copy says so"
run_nook diff -p --json w
like "$out" '"patch":"--- /dev/null\\n\+\+\+ b/new\\n@@ -0,0 \+1 @@\\n\+added\\n"' "-p --json: the patch is a field"

# a guest's huge sparse file: hashed by what it holds (its holes are never read), and no patch
# (GNU diff would read 2 TB into memory); both took hours or the host's memory
WSW=$("$NOOK" ws path w)
truncate -s 2T "$WSW/huge-sparse"
printf 'text at the start\n' | dd of="$WSW/huge-sparse" conv=notrunc status=none
run_nook_t() { local t=$1; shift; out=$(timeout "$t" "$NOOK" "$@" 2>/tmp/nook-dm-err.$$); status=$?; err=$(cat /tmp/nook-dm-err.$$); rm -f /tmp/nook-dm-err.$$; }
run_nook_t 60 diff --json w
is "$status:$(jq -r '.changes[] | select(.path == "huge-sparse") | .kind' <<<"$out")" "0:added" "diff of a 2 TB sparse file ends, and lists it"
run_nook_t 60 diff -p --json w
is "$status:$(jq -r '.changes[] | select(.path == "huge-sparse") | .patch' <<<"$out")" \
        "0:(a side is larger than 16 MiB: no patch shown)" "diff -p gives no patch for it (diffutils would read it whole)"
rm -f "$WSW/huge-sparse"
# a guest's escape sequences in a patch reach a terminal as \xNN (they set the title, cleared the
# screen); into a pipe the patch stays exact
printf 'title \033]0;OWNED\007 clear \033[2J\n' >"$WSW/esc.txt"
tty_out=$(script -qec "$NOOK diff -p w" /dev/null </dev/null | tr -d '\r')
like "$tty_out" 'title \\x1b\]0;OWNED\\x07 clear \\x1b\[2J' "diff -p on a terminal shows a patch's control characters as \\xNN"
run_nook diff -p w
if [[ $out == *$'\033]0;OWNED\007'* ]]; then ok "into a pipe the patch is exact"; else not_ok "into a pipe the patch is exact"; fi
rm -f "$WSW/esc.txt"

# the writable root layer
g w 'rm -f /etc/hostname; echo z > /etc/nook-dm-new' >/dev/null
run_nook diff --root --json w
is "$status" 0 "diff --root" || diag "$err"
like "$out" '"path":"etc/hostname","kind":"deleted","type":"whiteout","whiteout":true' "--root: a deleted image file is a whiteout"
like "$out" '"path":"etc/nook-dm-new","kind":"added"' "--root: a new file in the layer"
unlike "$out" '"path":"etc/hosts"' "--root: what nook wrote at create is the baseline"
like "$out" '"scope":"root"' "--root: the scope says so"

run_nook stop w
run_nook start w
is "$status" 0 "stop and start w" || diag "$err"
run_nook diff --json w
is "$(printf '%s' "$out" | kinds)" "$expected" "the baseline survives stop and start"

# a damaged baseline is an error naming the file, not a wrong diff
cp "$NOOK_HOME/sandboxes/w/baseline.manifest" "$D/saved.manifest"
printf 'nook-manifest 1\nf 644 0 0 1 1 1 1 - ../escape -\n' >"$NOOK_HOME/sandboxes/w/baseline.manifest"
expect_fail 1 "a baseline with a path that climbs out" diff w
like "$err" "malformed" "the message says the manifest is malformed"
cp "$D/saved.manifest" "$NOOK_HOME/sandboxes/w/baseline.manifest"

# ---- empty baselines: bits of the record, no state folder ----------------------------------------
bits() { sqlite3 "$NOOK_HOME/nook.db" "SELECT empty_baselines FROM sandboxes WHERE name = '$1'" 2>&1; }
run_nook create e0
is "$status" 0 "create e0 over a new, empty workspace" || diag "$err"
check "its create made no state folder" test ! -e "$NOOK_HOME/sandboxes/e0"
is "$(bits e0)" 3 "its record says both baselines are empty (workspace 1, layer 2)"
run_nook diff e0
is "$status:$out" "0:" "a fresh sandbox has no changes against its empty baseline"
g e0 'echo a > /workspace/a && mkdir /workspace/d && echo z > /etc/nook-e0' >/dev/null
run_nook diff --json e0
is "$(printf '%s' "$out" | kinds)" $'added a\nadded d' "diff lists what the guest added to the empty workspace"
run_nook diff --root --json e0
like "$out" '"path":"etc/nook-e0","kind":"added"' "--root: the same against the empty layer"
run_nook stop e0
run_nook start e0
run_nook diff --json e0
is "$status/$(printf '%s' "$out" | kinds)" $'0/added a\nadded d' "the empty baseline survives stop and start"
# a baseline file outweighs the bit: a malformed one planted beside it is refused, not skipped
mkdir -p "$NOOK_HOME/sandboxes/e0"
printf 'nook-manifest 1\nf 644 0 0 1 1 1 1 - ../escape -\n' >"$NOOK_HOME/sandboxes/e0/baseline.manifest"
expect_fail 1 "a planted baseline file beside the bit" diff e0
like "$err" "malformed" "is read, and refused as malformed"
rm -f "$NOOK_HOME/sandboxes/e0/baseline.manifest"
printf 'the tree was too big\n' >"$NOOK_HOME/sandboxes/e0/baseline.manifest.error"
expect_fail 1 "a capture's error beside the bit" diff e0
like "$err" "no baseline to compare with: the tree was too big" "is said, not an empty baseline"
rm -f "$NOOK_HOME/sandboxes/e0/baseline.manifest.error"
# trees that are not empty at create: files, and no bit
run_nook ws path e1
mkdir -p "$out" && echo seed >"$out/seed" && chmod 0755 "$out"
printf 'x\n' >"$D/setup"
run_nook create --setup-file /etc/nook-setup="$D/setup" e1
is "$status" 0 "create e1 over a populated workspace, with a setup file in its layer" || diag "$err"
check "both baselines are files" test -s "$NOOK_HOME/sandboxes/e1/baseline.manifest" -a -s "$NOOK_HOME/sandboxes/e1/baseline-root.manifest"
is "$(bits e1)" 0 "and no bit says empty"
g e1 'rm /workspace/seed; rm /etc/nook-setup' >/dev/null
run_nook diff --json e1
is "$(printf '%s' "$out" | kinds)" "deleted seed" "diff: the seed file is gone"
run_nook diff --root --json e1
like "$out" '"path":"etc/nook-setup","kind":"deleted"' "--root: so is the setup file the create wrote"
run_nook rm e0 e1
is "$status/$(bits e0)$(bits e1)" "0/" "rm removes both, records and all"

# ---- two sandboxes from the same initial workspace: merge ----------------------------------------
base="$D/base"
mkdir -p "$base/d/sub" "$base/rmdir"
printf 'a\n' >"$base/a"
printf 'b\n' >"$base/b"
printf 'c\n' >"$base/c"
printf 's\n' >"$base/d/sub/s"
printf 'r\n' >"$base/rmdir/r"
printf 'm\n' >"$base/mode"
mkdir -p "$D/outside"
for s in t br; do
        run_nook ws path $s
        mkdir -p "$out" && cp -a "$base/." "$out/" && chmod 0755 "$out"
        run_nook create $s
        is "$status" 0 "create $s from the same initial workspace" || bail_out "$err"
done
run_nook ws path t
tws=$out
run_nook ws path br
bws=$out

g br 'cd /workspace && echo A2 > a && rm b && mkdir -p new/deep && echo n > new/deep/n && chmod 0600 mode &&
      rm -r rmdir && ln -s /etc/passwd evil-link && printf "nl\n" > "$(printf "x\ny")"' >/dev/null
g t 'echo t-only > /workspace/t-only' >/dev/null
before=$(tree_sum "$tws")

expect_fail 2 "merge without a name" merge
expect_fail 1 "merge without --into" merge br
like "$err" "--into" "the message says to pass --into"
expect_fail 1 "merge into itself" merge br --into br
expect_fail 1 "merge into an unknown sandbox" merge br --into nosuch
like "$err" "nosuch" "the message names the unknown target"
expect_fail 1 "a bad strategy" merge br --into t --strategy mine
like "$err" "refuse, ours or theirs" "the message lists the strategies"
is "$(tree_sum "$tws")" "$before" "bad merges change nothing"

run_nook merge --dry-run --json br --into t
is "$status" 0 "merge --dry-run" || diag "$err"
is "$(printf '%s' "$out" | kinds)" "modified a
deleted b
added evil-link
mode mode
added new
added new/deep
added new/deep/n
deleted rmdir
deleted rmdir/r
added x\\ny" "the dry run lists the branch's changes"
is "$(tree_sum "$tws")" "$before" "a dry run changes nothing"

run_nook merge br --into t
is "$status" 0 "merge br into the running t" || diag "$err"
like "$out" "Merged 10 change\\(s\\) from 'br' into 't'" "the summary line"
is "$(cat "$tws/a")" "A2" "a modified file has the branch's content"
check "a deleted file is gone" test ! -e "$tws/b"
check "a deleted directory is gone" test ! -e "$tws/rmdir"
is "$(cat "$tws/new/deep/n")" "n" "new directories and files arrive"
is "$(stat -c %a "$tws/mode")" "600" "a mode change arrives"
is "$(readlink "$tws/evil-link")" "/etc/passwd" "a symlink leading out is copied as a symlink, not followed"
is "$(cat "$tws/$(printf 'x\ny')")" "nl" "a name with a newline is merged"
is "$(cat "$tws/t-only")" "t-only" "the target's own change stays"
is "$(g t 'cat /workspace/a')" "A2" "the running target sees the merge"
is "$(g t 'stat -c %u:%g /workspace/a /workspace/new/deep/n')" $'0:0\n0:0' "merged files belong to the target's root, as its own"
is "$(leftovers "$tws")" "" "no staging leftovers"
run_nook merge br --into t --json
is "$(printf '%s' "$out" | kinds)" "" "merging again applies nothing (already the branch's)"

# ---- conflicts ---------------------------------------------------------------------------------
g br 'cd /workspace && echo from-branch > c && echo both > t-new' >/dev/null
g t 'cd /workspace && echo from-target > c && echo other > t-new' >/dev/null
before=$(tree_sum "$tws")
run_nook merge br --into t --json
is "$status" 1 "a conflict refuses the merge"
is "$(printf '%s' "$out" | conflicts)" "c modified modified refused
t-new added added refused" "the JSON report lists every conflict"
like "$err" '"code":"conflict"' "the error code is conflict"
is "$(tree_sum "$tws")" "$before" "a refused merge changes nothing"
run_nook merge br --into t
like "$err" "CONFLICT \\(branch: modified, target: modified, refused\\) c" "text lists the conflicts on stderr"
run_nook merge --strategy ours br --into t
is "$status:$(cat "$tws/c")" "0:from-target" "ours keeps the target's version"
run_nook merge --strategy theirs br --into t
is "$status:$(cat "$tws/c"):$(cat "$tws/t-new")" "0:from-branch:both" "theirs takes the branch's version"

# ---- a failure part way undoes every step ----------------------------------------------------
g br 'cd /workspace && echo r2 > a && mkdir -p roll/back && echo x > roll/back/x && echo m > mode && rm c' >/dev/null
# the steps: 1 a, 2 roll, 3 roll/back, 4 roll/back/x (placed in path order), 5 c (deletions last)
before=$(tree_sum "$tws")
for step in 1 2 4 5; do
        NOOK_TEST_MERGE_FAIL_AT=$step run_nook merge --strategy theirs br --into t
        if [[ $status == 1 && "$err" == *"step $step"* ]]; then
                is "$(tree_sum "$tws")" "$before" "a merge failing at step $step leaves the target as it was"
        else
                skip "NOOK_TEST_MERGE_FAIL_AT needs a build with test hooks (status $status: $err)"
        fi
        is "$(leftovers "$tws")" "" "no staging leftovers after the failure at step $step"
done

# ---- a merge killed part way: the next command undoes it, or finishes it once committed ---------
journal="$NOOK_HOME/sandboxes/t/merge.journal"
NOOK_TEST_MERGE_KILL_AT=3 run_nook merge --strategy theirs br --into t
if [[ $status == 137 ]]; then
        check "a killed merge leaves its journal" test -s "$journal"
        isnt "$(tree_sum "$tws")" "$before" "and a half-applied target"
        run_nook diff t
        is "$status" 0 "the next diff of the target recovers" || diag "$err"
        is "$(tree_sum "$tws")" "$before" "the killed merge was undone"
        check "the journal is gone" test ! -e "$journal"
        is "$(leftovers "$tws")" "" "no staging leftovers after the recovery"
        NOOK_TEST_MERGE_KILL_AT=commit run_nook merge --strategy theirs br --into t
        is "$status" 137 "a merge killed right after it committed"
        run_nook merge --json --strategy theirs br --into t
        is "$status:$(printf '%s' "$out" | kinds)" "0:" "the next merge finishes it, and finds nothing left to apply" || diag "$err"
        is "$(cat "$tws/roll/back/x")" "x" "the committed merge's changes are there"
        is "$(leftovers "$tws")" "" "no staging leftovers after finishing it"
        check "the journal is gone" test ! -e "$journal"
else
        for i in $(seq 11); do skip "NOOK_TEST_MERGE_KILL_AT needs a build with test hooks (status $status)"; done
fi

# ---- hostile: the target's directory replaced by a symlink leading out --------------------------
g br 'mkdir -p /workspace/d/sub && echo payload > /workspace/d/sub/planted' >/dev/null
rm -rf "$tws/d"
ln -s "$D/outside" "$tws/d"
run_nook merge --strategy theirs --json br --into t
is "$status" 0 "a merge into a tree whose directory became a symlink" || diag "$err"
like "$out" '"path":"d/sub/planted","branch":"added","target":"parent","resolution":"skipped"' "the path under the symlink is a conflict, skipped"
check "nothing was written outside the workspace" test -z "$(ls -A "$D/outside")"
is "$(leftovers "$tws")" "" "no staging leftovers after hostile merges"

# ---- a directory the branch replaces while the target added to it; a name that is not UTF-8 ------
mkdir -p "$D/base2/x"
printf 'x\n' >"$D/base2/x/f"
printf 'y\n' >"$D/base2/y"
ln -s x "$D/base2/sl"
for s in t2 br2; do
        run_nook ws path $s
        mkdir -p "$out" && cp -a "$D/base2/." "$out/" && chmod 0755 "$out"
        run_nook create $s
done
g br2 'rm -rf /workspace/x && echo file > /workspace/x' >/dev/null
g t2 'echo mine > /workspace/x/target-added' >/dev/null
run_nook merge --json --strategy theirs br2 --into t2
is "$status" 0 "merge --strategy theirs of a directory replaced by a file" || diag "$err"
like "$out" '"path":"x","branch":"type","target":"entries","resolution":"theirs"' "the conflict says the target holds other entries"
run_nook ws path t2
t2ws=$out
check "theirs: the branch's file replaced the directory" test -f "$t2ws/x"
# a file that becomes a directory with content; a new directory whose name the target took for a file
g br2 'cd /workspace && rm y sl && mkdir -p y/in nd sl && echo in > y/in/f && echo c > nd/child && echo s > sl/s' >/dev/null
g t2 'echo target-file > /workspace/nd' >/dev/null
run_nook merge --json --strategy ours br2 --into t2
is "$status" 0 "merge --strategy ours: file to directory, and a directory the target holds as a file" || diag "$err"
like "$out" '"path":"nd","branch":"added","target":"added","resolution":"ours"' "the directory is a conflict, kept as the target's file"
like "$out" '"path":"nd/child","branch":"added","target":"parent","resolution":"skipped"' "its content is skipped: no directory to put it in"
is "$(cat "$t2ws/y/in/f"):$(cat "$t2ws/nd")" "in:target-file" "the file became the branch's directory; the target's file stays"
check "a symlink that became a directory is a directory" test -d "$t2ws/sl" -a ! -L "$t2ws/sl" -a -f "$t2ws/sl/s"
check "and nothing went through the old symlink" test ! -e "$t2ws/x/s"
g br "printf 'latin1\n' > /workspace/\$(printf 'caf\\351')" >/dev/null
run_nook diff --json br
like "$out" '"path":"caf%E9","pathEscaped":true,"kind":"added"' "a name that is not UTF-8 is escaped in JSON, and says so"
run_nook merge --strategy ours br --into t
is "$status" 0 "merge --strategy ours with the name" || diag "$err"
is "$(cat "$tws/$(printf 'caf\351')")" "latin1" "a name that is not UTF-8 is merged byte for byte"

# ---- a workspace over the manifest's bounds: create works, diff says why it cannot ----------------
run_nook ws path deep
mkdir -p "$out"
(cd "$out" && for i in $(seq 45); do mkdir "$(printf 'd%.0s' $(seq 100))" && cd "d$(printf 'd%.0s' $(seq 99))" || exit 1; done && echo x > leaf)
run_nook create deep
is "$status" 0 "create over a workspace with a path longer than 4096 bytes" || diag "$err"
run_nook diff deep
is "$status" 1 "diff of it fails"
like "$err" "no baseline to compare with: .*longer than 4096 bytes" "the message says why there is no baseline"

# ---- a branch (nook branch) merges into its source by default; -p finds the old content there ------
run_nook ws path dsrc
dsrcws=$out
mkdir -p "$dsrcws" && printf 'line one\n' >"$dsrcws/f.txt"
run_nook create dsrc
run_nook stop dsrc
run_nook branch dsrc dbr
is "$status" 0 "branch of a stopped sandbox" || diag "$err"
run_nook ws path dbr
printf 'line two\n' >"$out/f.txt"
run_nook diff -p dbr
like "$out" '-line one' "diff -p of a branch takes the old content from its source"
like "$out" '\+line two' "and shows the new line"
run_nook merge t
is "$status" 1 "merge of a sandbox that is not a branch, without --into, fails"
like "$err" "'t' is not a branch .*--into" "and says to pass --into"
run_nook merge dbr
is "$status" 0 "merge of a branch without --into" || diag "$err"
is "$(cat "$dsrcws/f.txt")" "line two" "went into its source"

# a source removed and made again after the branch is not the source: a merge without --into
# would have changed an unrelated sandbox that took the name
"$NOOK" branch dsrc dbr2 >/dev/null
printf 'from the branch\n' >"$("$NOOK" ws path dbr2)/patch.txt"
sleep 1.1 # records count whole seconds
"$NOOK" stop dsrc >/dev/null
run_nook create dsrc
is "$status" 0 "the source made again over its own workspace (create of a stopped name)"
run_nook merge dbr2 --dry-run
is "$status" 0 "is still the branch's source: its record was kept" || diag "$err"
"$NOOK" rm dsrc >/dev/null
"$NOOK" create dsrc >/dev/null
run_nook merge dbr2
is "$status" 1 "a merge without --into into a new sandbox that took the source's name is refused"
like "$err" "Branch 'dbr2' was made from a sandbox 'dsrc' that is gone.*--into dsrc" "and says why, and how to merge anyway"
is "$(ls "$("$NOOK" ws path dsrc)")" "" "and the new sandbox's workspace is untouched"
run_nook merge dbr2 --into dsrc
is "$status:$(cat "$("$NOOK" ws path dsrc)/patch.txt")" "0:from the branch" "--into merges into it on purpose"
run_nook diff dbr2
is "$status" 0 "diff of the branch still works (against its baseline alone)" || diag "$err"

# a directory the guest makes unreadable: its content is seen (root reads it), or the diff says it
# cannot read it; never a changed file shown as deleted and an added one left out
"$NOOK" create unr >/dev/null
mkdir -p "$("$NOOK" ws path unr)/src"
echo one >"$("$NOOK" ws path unr)/src/main.c"
"$NOOK" stop unr >/dev/null
"$NOOK" create unr >/dev/null # a baseline with src/main.c in it
"$NOOK" exec unr -- sh -c 'echo two >> /workspace/src/main.c; echo x > /workspace/src/new.c; chmod 000 /workspace/src'
run_nook diff unr
if [[ $status == 0 ]]; then
        like "$out" "A src/new.c" "an unreadable directory read by root: the added file is listed"
        unlike "$out" "D src/main.c" "and the changed one is not shown as deleted"
else
        like "$err" "Cannot read the directory 'src'.*chmod" "an unreadable directory: the diff says it cannot read it, and what to do"
        unlike "$out" "D src/main.c" "and shows no deletion"
fi
"$NOOK" exec unr -- chmod 755 /workspace/src

run_nook rm w t br t2 br2 deep dsrc dbr dbr2 unr
is "$status" 0 "rm the sandboxes" || diag "$err"
