# SPDX-License-Identifier: Apache-2.0
# fish completion for nook: installed as /usr/share/fish/vendor_completions.d/nook.fish.
# Every rule lives in `nook __complete WORD... CURRENT` (src/cli/cmd_complete.c), which prints
# one candidate a line, "word<TAB>description" (fish's own format).
function __nook_complete
        set -l words (commandline -opc)
        set -l cur (commandline -ct)
        $words[1] __complete $words[2..-1] "$cur" 2>/dev/null
end
complete -c nook -f -a '(__nook_complete)'
