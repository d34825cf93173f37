#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook-supervisor reading a bad config (supervisor/config.c:sup_config_from_fd, the JSON libnook
# hands it on --config-fd): each bad field is refused by name on the ready fd, the first bad one
# in the field order, and the
# supervisor exits before it makes anything (no process, namespace or cgroup: lib.sh's leak check).
# These are the values a bug in libnook could hand it.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK_SUPERVISOR"
command -v jq >/dev/null || plan skip_all "jq is needed to read the supervisor's JSON"
plan 29

# refused DESC PATTERN CONFIG: the supervisor exits 1 and its ready message is
# {"ok": false, "code": "invalid", "message": ~PATTERN}
refused() {
        local d msg st
        d=$(mktemp -d "$NOOK_HOME/cfg.XXXXXX")
        printf '%s' "$3" >"$d/config.json"
        timeout 30 "$NOOK_SUPERVISOR" --state "$d" --config-fd 6 --ready-fd 3 3>"$d/ready" 6<"$d/config.json"
        st=$?
        msg=$(jq -r 'select(.ok == false) | "\(.code): \(.message)"' "$d/ready" 2>/dev/null)
        is "$st" 1 "$1: the supervisor exits 1"
        like "$msg" "^invalid: Cannot read the sandbox config: .*$2" "$1: refused, naming it"
        rm -rf "$d"
}

ok_base='"name": "c", "lowers": [], "upper": null, "work": null'
refused "not JSON" "Cannot read the sandbox config \\(fd 6\\)" '{"name": '
refused "not an object" "Cannot read the sandbox config" '["name"]'
refused "no name" "config: 'name' is missing" '{"lowers": []}'
refused "a number for the name" "config: 'name' must be a string" '{"name": 7}'
refused "lowers not an array" "config: 'lowers' must be an array" '{"name": "c", "lowers": "/x"}'
refused "env holding a number" "config: 'env' must hold strings" "{$ok_base, \"env\": [\"A=1\", 2]}"
refused "user an object" "config: 'user' must be a string" "{$ok_base, \"user\": {}}"
refused "ports holding null" "config: 'ports' must hold strings" "{$ok_base, \"ports\": [null]}"
refused "an unknown profile" "config: unknown security profile 'bogus'" "{$ok_base, \"profile\": \"bogus\"}"
refused "a mount without a target" "config: 'target' is missing" "{$ok_base, \"mounts\": [{\"type\": \"bind\", \"source\": \"/x\"}]}"
refused "home a number" "config: 'home' must be a string" "{$ok_base, \"home\": 1}"
refused "egress a string" "config: 'egress' must be an object" "{$ok_base, \"egress\": \"x\"}"
# the fields are read in their order: name, lowers, ... ports; then mounts, then home
refused "two bad fields: the first is named" "config: 'workdir' must be a string" \
        "{$ok_base, \"netDomains\": 1, \"workdir\": 2}"

# --client-fd (nook run's connection with its exec queued: nook_sandbox_create_exec): a bad one
# is a usage error (exit 2) before anything is read or made
for bad in 2 99 x; do
        d=$(mktemp -d "$NOOK_HOME/cfg.XXXXXX")
        printf '{%s}' "$ok_base" >"$d/config.json"
        timeout 30 "$NOOK_SUPERVISOR" --state "$d" --config-fd 6 --ready-fd 3 --client-fd "$bad" \
                3>"$d/ready" 6<"$d/config.json" 2>"$d/err"
        st=$?
        is "$st/$(grep -c usage "$d/err")" "2/1" "--client-fd $bad: refused with the usage, exit 2"
        rm -rf "$d"
done
