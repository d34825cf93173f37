# SPDX-License-Identifier: Apache-2.0
# fish completion for nook: installed as /usr/share/fish/vendor_completions.d/nook.fish.
# Every rule lives in `nook __complete WORD... CURRENT` (src/cli/cmd_complete.c), which prints
# one candidate a line, "word<TAB>description" (fish's own format).  No candidate: a value
# nook has no list for (a path, a duration) or the command after '--': paths.
function __nook_complete
        set -l words (commandline -opc)
        set -l cur (commandline -ct)
        set -l out ($words[1] __complete $words[2..-1] "$cur" 2>/dev/null)
        if test (count $out) -eq 0
                __fish_complete_path "$cur"
        else
                printf '%s\n' $out
        end
end
complete -c nook -f -a '(__nook_complete)'
