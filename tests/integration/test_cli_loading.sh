#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the CLI maps at start (issue #17): libsmartcols (text tables) and libnettle (SHA-256 of
# diff/merge and baselines) are loaded on first use, not linked, so `nook run`, `nook exec` and
# `nook --version` do not pay their symbol bindings.  The loader's own report (LD_DEBUG=files)
# says which objects a process loaded; the commands that need them still work.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 9

# loaded ARGS...: runs nook ARGS with the loader's report (LD_DEBUG=files, for nook alone); sets
# $out, $err, $status and $libs (the objects the loader opened, one a line).
loaded() {
        local efile
        efile=$(mktemp "$NOOK_HOME.err.XXXXXX")
        out=$(LD_DEBUG=files timeout --kill-after=5 "$NOOK_TEST_TIMEOUT" "$NOOK" "$@" </dev/null 2>"$efile")
        status=$?
        err=$(cat "$efile")
        rm -f "$efile"
        libs=$(grep -o 'file=[^ ]*' <<<"$err" | sed 's/^file=//' | sort -u)
}

loaded --version
is "$status" 0 "nook --version works"
like "$libs" "libsqlite3" "the loader's report names what nook links (libsqlite3)" || diag "$err"
unlike "$libs" "libsmartcols|libnettle" "nook --version loads neither libsmartcols nor libnettle"

loaded ls
like "$status|$out" "^0\|NAME +STATE" "nook ls without sandboxes prints the header"
unlike "$libs" "libsmartcols" "an empty table needs no libsmartcols"

run_nook create ld1
is "$status" 0 "create ld1" || diag "$err"
loaded ls
like "$status|$out|$libs" $'^0\\|NAME[^\n]*\nld1 .*\\|.*libsmartcols' "nook ls with a sandbox prints its row through libsmartcols"

run_nook exec ld1 -- sh -c 'echo hi > /workspace/x'
loaded diff ld1
like "$status|$out|$libs" "^0\|A x\|.*libnettle" "nook diff hashes through libnettle (loaded on first use)"

run_nook rm -f ld1
is "$status" 0 "rm ld1" || diag "$err"
