#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Shell completion and man pages (issue 12): `nook __complete` (commands, subcommands, flags
# read from each command's --help, names from the store; nothing for a value or after '--'),
# hostile words and state folders (no output, no error, no state folder created), the bash,
# zsh and fish scripts in completions/ driven as their shells call them, and a man page
# generated for every command with the flags its --help lists.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
plan 24

src=$(cd "$(dirname "$0")/../.." && pwd)
comp=$src/completions

# complete WORD...: `nook __complete` for the last word; sets $out (candidates without their
# descriptions, one a line), $err, $status.
complete() {
        run_nook __complete "$@"
        out=$(cut -f1 <<<"$out")
}

run_nook __doc
docs=$out
missing=""
while IFS=$'\t' read -r cmd _; do
        [[ -s "$NOOK_BUILD_DIR/man/nook-$cmd.1" ]] || missing+=" nook-$cmd.1"
done <<<"$docs"
if [[ -n "$docs" && -z "$missing" && -s "$NOOK_BUILD_DIR/man/nook.1" ]]; then
        ok "a man page for nook and for every command nook __doc lists"
else
        not_ok "a man page for nook and for every command nook __doc lists" "missing:$missing (man/meson.build reads the commands from src/cli/main.c)"
fi
# A page is troff text: no control character (a "\f" that Python's string read as a form feed)
# and no placeholder gen_man.py left unfilled (LIBEXECDIR, LIBDIR).
bad=$(grep -lP '[\x00-\x08\x0b-\x1f\x7f]|\bLIB(EXEC)?DIR\b' "$NOOK_BUILD_DIR"/man/*.1 2>/dev/null)
is "$bad" "" "the man pages hold no control character and no unfilled LIBDIR/LIBEXECDIR"
run_nook run --help
help_flags=$(grep -oE -- '(^|[ ,])--[a-z][-a-z]*' <<<"$out" | sed 's/^[ ,]//' | sort -u)
man_text=$(sed 's/\\-/-/g' "$NOOK_BUILD_DIR/man/nook-run.1" 2>/dev/null)
missing=""
for f in $help_flags; do grep -q -- "$f" <<<"$man_text" || missing+=" $f"; done
if [[ -n "$help_flags" && -z "$missing" ]]; then ok "nook-run(1) has every flag of nook run --help"; else not_ok "nook-run(1) has every flag of nook run --help" "missing:$missing"; fi

complete ""
like "$out" $'(^|\n)run\n' "nook <TAB>: the commands"
unlike "$out" "__complete|__doc" "the hidden commands are not offered"
complete --j
is "$out" "--json" "nook --j<TAB>: a global flag"
complete image ""
like "$out" $'pull\n.*export' "nook image <TAB>: its subcommands"
complete run --ima
is "$out" "--image" "nook run --ima<TAB>: a flag from nook run --help"
complete exec -
like "$out" $'--timeout\n.*--tty' "nook exec -<TAB>: its flags"
complete image pull --cr
is "$out" "--creds" "nook image pull --cr<TAB>: a subcommand's flag from its own --help"
complete snapshot create --w
is "$out" "--with-workspace" "nook snapshot create --w<TAB>: a flag from the group's help line"
complete exec --timeout ""
is "$out|$status" "|0" "no candidate for a flag's value (a duration)"

run_nook create cmpl-box
run_nook volume create cmpl-vol
complete exec cmpl-
is "$out" "cmpl-box" "nook exec cmpl-<TAB>: a sandbox name from the store"
complete cp cmpl
is "$out" "cmpl-box:" "nook cp cmpl<TAB>: NAME: for a workspace path"
complete volume rm cmpl
is "$out" "cmpl-vol" "nook volume rm cmpl<TAB>: a volume name"
complete exec cmpl-box -- ""
is "$out|$status" "|0" "nothing after '--' (the sandbox's argv)"

# hostile words and state folders: quiet, status 0, nothing created
complete --home "$NOOK_HOME/none" exec ""
if [[ -z "$out" && -z "$err" && $status == 0 && ! -e "$NOOK_HOME/none" ]]; then
        ok "a state folder that does not exist: no candidate, and it is not created"
else
        not_ok "a state folder that does not exist: no candidate, and it is not created" "out: $out" "err: $err" "status: $status"
fi
complete --home relative/dir exec ""
is "$out|$err|$status" "||0" "a relative --home: no candidate, no error"
complete $'\e[31mrun' $'x\x01' ""
is "$out|$err|$status" "||0" "control characters in the words: nothing"
complete "$(head -c 100000 /dev/zero | tr '\0' a)" exec "$(head -c 100000 /dev/zero | tr '\0' -)"
is "$out|$status" "|0" "100 KB words: nothing, status 0"

# the shells, as they call the scripts
bash_out=$(bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _nook
        printf "%s\n" "${COMPREPLY[@]}"; complete -p nook' bash "$comp/nook.bash" "$NOOK" exec cmpl- 2>&1)
is "$bash_out" $'cmpl-box\ncomplete -F _nook nook' "bash: nook exec cmpl-<TAB>"
bash_out=$(bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _nook
        printf "%s\n" "${COMPREPLY[@]}"' bash "$comp/nook.bash" "$NOOK" "" 2>&1)
like "$bash_out" $'(^|\n)snapshot(\n|$)' "bash: nook <TAB> lists the commands"
if command -v zsh >/dev/null; then
        # _describe and _files stubbed: what the script hands to zsh's completion system
        zsh_out=$(zsh -f -c '_describe() { print -rl -- "${(@P)2}" }; _files() { print -r FILES }
                words=("$2" exec cmpl-); CURRENT=3; source "$1"' zsh "$comp/_nook" "$NOOK" 2>&1)
        is "$zsh_out" "cmpl-box" "zsh: nook exec cmpl-<TAB>"
else
        skip "zsh is not installed (scripts/deps.sh installs it)"
fi
if command -v fish >/dev/null; then
        fish_out=$(cd "$(dirname "$NOOK")" && PATH=.:$PATH fish --no-config -c \
                "source '$comp/nook.fish'; complete -C 'nook image pu'; complete -C 'nook exec cmpl-'" 2>&1)
        is "$fish_out" $'pull\tdownload an image\ncmpl-box' "fish: nook image pu<TAB>, nook exec cmpl-<TAB>"
else
        skip "fish is not installed (scripts/deps.sh installs it)"
fi

run_nook rm cmpl-box
run_nook volume rm cmpl-vol
