# SPDX-License-Identifier: Apache-2.0
# bash completion for nook: installed as /usr/share/bash-completion/completions/nook.
# Every rule lives in `nook __complete WORD... CURRENT` (src/cli/cmd_complete.c), which prints
# one candidate a line, "word<TAB>description": commands, subcommands, flags (read from the
# command's --help) and sandbox, image, snapshot or volume names from the store.
_nook() {
        local cur=${COMP_WORDS[COMP_CWORD]} line word
        local -a out=()
        COMPREPLY=()
        while IFS= read -r line; do
                word=${line%%$'\t'*}
                [[ -n $word ]] && out+=("$word")
        done < <("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" "$cur" 2>/dev/null)
        if ((${#out[@]} == 0)); then
                # a value nook has no list for (a path, a duration) or the command after '--'
                compopt -o default 2>/dev/null
                return 0
        fi
        COMPREPLY=("${out[@]}")
        # "NAME:" (cp, cat): the path follows without a space
        [[ ${#out[@]} == 1 && ${out[0]} == *: ]] && compopt -o nospace 2>/dev/null
        return 0
}
complete -F _nook nook
