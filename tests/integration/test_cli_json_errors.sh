#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# --json anywhere on the command line (before "--") makes errors JSON, also where option parsing
# stopped before reaching it: a bad option first, an unknown command, a usage error after a
# command's first argument.  After "--" it belongs to the command and changes nothing.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 10

# json_error DESC CODE REGEX ARGS...: nook ARGS fails, stderr is one JSON error with CODE.
json_error() {
        local desc=$1 code=$2 re=$3 got
        shift 3
        run_nook "$@"
        got=$(jq -r '"\(.error.code)|\(.error.message)"' <<<"$err" 2>/dev/null)
        like "$status|$got" "^[12]\|$code\|.*$re" "$desc: JSON error ($code) on stderr"
}

json_error "a bad option before --json" usage "unknown option '--bogus'" ls --bogus --json
json_error "a bad global option before --json" usage "unknown option '--bogus'" --bogus --json ls
json_error "an unknown command" usage "unknown command 'frob'" frob --json
json_error "a usage error after the first argument" usage "expected one sandbox NAME" checkpoint c1 c2 --json
json_error "a missing sandbox, --json last" not_found "nosuch" inspect nosuch --json
json_error "a bad option that is not UTF-8" usage "unknown option" ls $'--b\xff\xfe' --json

run_nook ls --bogus
is "$status|${err%%$'\n'*}" "2|nook ls: unknown option '--bogus'" "without --json: plain text"
run_nook exec nosuch -- sh -c 'echo --json'
like "$status|$err" "^125\|nook: No sandbox 'nosuch'$" "--json after -- is the command's: plain text"
run_nook ls --json
is "$status|$out" "0|[]" "ls --json still lists as JSON"
# how an exec ended, when not by itself, is a JSON error too; the status stays the command's (124)
"$NOOK" create je1 >/dev/null
run_nook --json exec --timeout 300ms je1 -- sleep 5
is "$status|$(jq -r '"\(.error.code)|\(.error.message)"' <<<"$err" 2>/dev/null)" \
        "124|timeout|the command timed out and was killed with its process tree" "--json exec: a timeout as a JSON error, exit 124"
"$NOOK" rm je1 >/dev/null
