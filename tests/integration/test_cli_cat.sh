#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `nook cat NAME:PATH` reads the workspace only (docs/cli.md, `nook cat --help`): '/x', 'x' and
# '/workspace/x' are the same file; a root filesystem path is not reached, and says so; it works
# on a stopped sandbox; hostile paths are refused.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 23

run_nook create c1 --sticky
is "$status" 0 "create c1"
echo hello | "$NOOK" ws write c1 /dist/a.txt
run_nook cat c1:/dist/a.txt
a=$out
run_nook cat c1:dist/a.txt
b=$out
run_nook cat c1:/workspace/dist/a.txt
is "$a|$b|$out" "hello|hello|hello" "/dist/a.txt, dist/a.txt and /workspace/dist/a.txt are the same workspace file"
run_nook cat c1:/etc/os-release
like "$status|$err" "^1\|.*in the workspace: '/etc/os-release'" "a root filesystem path is not reached: the error says 'in the workspace'"
run_nook cat --help
like "$out" "nook cp NAME:/etc/x -" "--help points to nook cp for root filesystem files"
expect_fail 2 "an unknown option" cat --bogus
like "$err" "unknown option '--bogus'" "the usage error names the option"
run_nook cat c1:/../../etc/passwd
is "$status" 1 "a path with .. is refused"
like "$err" "outside the workspace" "the refusal says why"
# --in-place writes into the file itself: the guest's hard link sees it, the inode stays; the
# default write puts a new file in place (atomic), which the hard link does not see.
"$NOOK" exec c1 -- ln /workspace/dist/a.txt /workspace/dist/b.txt
ino=$("$NOOK" exec c1 -- stat -c %i /workspace/dist/a.txt)
echo in-place | "$NOOK" ws write --in-place c1 /dist/a.txt
run_nook exec c1 -- sh -c 'stat -c %i /workspace/dist/a.txt; cat /workspace/dist/b.txt'
is "$out" "$ino"$'\n'"in-place" "ws write --in-place keeps the inode; the guest's hard link sees the new bytes"
echo hello | "$NOOK" ws write c1 /dist/a.txt
run_nook exec c1 -- sh -c 'stat -c %i /workspace/dist/a.txt; cat /workspace/dist/b.txt'
if [[ $out != "$ino"* && $out == *in-place ]]; then ok "the default write replaces the file: a new inode"; else not_ok "the default write replaces the file: a new inode" "$out (inode was $ino)"; fi
run_nook ws write --in-place c1 /dist </dev/null
like "$status|$err" "^1\|.*Cannot write '/dist' in place: it is a directory" "--in-place refuses a directory, naming it"
run_nook stop c1
run_nook cat c1:/dist/a.txt
is "$status|$out" "0|hello" "cat works on a stopped sandbox"
run_nook rm c1
is "$status" 0 "rm c1"

# A name with no sandbox and nothing staged: reading, listing, removing and renaming say so and
# make nothing (each used to create workspaces/NAME, which no 'ls' showed and 'prune' never took).
for args in "cat typo:/f" "ws cat typo /f" "ws ls typo" "ws rm typo /f" "ws mv typo /a /b"; do
        # shellcheck disable=SC2086 # the words of args are the arguments
        run_nook $args
        if [[ $status == 1 && $err == *"No sandbox 'typo' and no workspace staged"* ]]; then
                ok "nook $args: no sandbox, said so"
        else
                not_ok "nook $args: no sandbox, said so" "status $status" "stderr: $err"
        fi
done
is "$(ls "$NOOK_HOME/workspaces" 2>/dev/null | grep -cx typo)" 0 "and no workspace folder was made"
# Staging still works: write (and mkdir) before the first create, then read it back.
echo staged-data >"$NOOK_HOME/../staged-$$.txt"
run_nook ws write staged /s.txt "$NOOK_HOME/../staged-$$.txt"
rm -f "$NOOK_HOME/../staged-$$.txt"
run_nook cat staged:/s.txt
is "$status|$out" "0|staged-data" "a staged workspace is read back before the create"
run_nook rm staged
# A folder as the source of ws write: refused naming the source (it named the destination), and
# nothing staged for a name without a sandbox.
run_nook ws write nodir /x.txt "$NOOK_HOME/workspaces"
is "$status" 1 "ws write with a folder as its source fails"
like "$err" "The source '.*workspaces' is a directory" "the error names the source"
is "$(ls "$NOOK_HOME/workspaces" 2>/dev/null | grep -cx nodir)" 0 "and stages nothing"

