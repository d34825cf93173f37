#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bad input gets a clear error naming the field and the reason, and changes nothing: hostile
# sandbox names for every command that takes one, bad specs (JSON and options), and bad exec
# requests. After each refusal: no record, no directory, no mount, no process.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
plan 76

RULE="a name must be 1-63"

# nothing_under_home: no sandbox state of any name (an empty nook.db and the state root's
# bare folders may exist; nothing per sandbox, no lock for a refused name).
per_sandbox_state() {
        find "$NOOK_HOME" -mindepth 2 \( -path "$NOOK_HOME/images" -prune -o -print \) 2>/dev/null |
                grep -v -e "^$NOOK_HOME/images" | sort
}

# ---- hostile names -------------------------------------------------------------------------
long=$(printf 'a%.0s' $(seq 64))
names=("../x" "A" ".x" "a/b" "$long" "" "x..y" $'a\nb' $'a\tb' $'a\x1bb' "a b" "é" "x/../y" "/abs")
labels=("../x" "A" ".x" "a/b" "64 chars" "empty" "x..y" "newline" "tab" "escape" "space" "é" "x/../y" "/abs")
printf 'data' >"$NOOK_HOME.f"
for i in "${!names[@]}"; do
        n=${names[$i]} l=${labels[$i]}
        # One test per name: every command refuses it with the name rule and exit 1 (exec: 125,
        # its documented 'nook failed' status).
        bad=""
        for cmd in create rm "ws path" "ws mkdir" inspect stop exec; do
                case $cmd in
                "ws mkdir") run_nook ws mkdir "$n" /d ;;
                exec) run_nook exec "$n" -- true ;;
                "ws path") run_nook ws path "$n" ;;
                *) run_nook "$cmd" "$n" ;;
                esac
                want=1
                [[ $cmd == exec ]] && want=125
                if [[ $status != "$want" || $err != *"$RULE"* ]]; then
                        bad+="[$cmd: status $status, err: ${err:0:80}] "
                fi
        done
        run_nook ws write "$n" /f "$NOOK_HOME.f"
        [[ $status == 1 && $err == *"$RULE"* ]] || bad+="[ws write: status $status, err: ${err:0:80}] "
        if [[ -z "$bad" ]]; then ok "name '$l': every command refuses it, stating the name rule"; else not_ok "name '$l': every command refuses it, stating the name rule" "$bad"; fi
done
run_nook create "$long"
like "$err" "63" "the 64-character name's error says the limit"
run_nook create "x..y"
like "$err" "'\.\.'" "the 'x..y' error names the '..' rule"
is "$(per_sandbox_state)" "" "refused names created nothing under NOOK_HOME (no record dir, workspace or lock)"
run_nook ls -q
is "$status:$out" "0:" "refused names left no record"
check "nothing named x escaped NOOK_HOME" test ! -e "$(dirname "$NOOK_HOME")/x" -a ! -e "$NOOK_HOME/../x"
# Names at the edge of the rule are accepted.
run_nook ws path "$(printf 'a%.0s' $(seq 63))"
is "$status" 0 "a 63-character name is accepted"
run_nook ws path "0a_b.c-d"
is "$status" 0 "'0a_b.c-d' is accepted"

# ---- bad specs (JSON) ----------------------------------------------------------------------
spec="$NOOK_HOME.spec.json"
# spec_fail JSON REGEX DESC: create --spec refuses it (status 1 or 2) with a matching message.
spec_fail() {
        printf '%s' "$1" >"$spec"
        run_nook create --spec "$spec" sp
        if [[ ($status == 1 || $status == 2) && $err =~ $2 ]]; then
                ok "spec $3 is refused: ${err%%$'\n'*}"
        else
                not_ok "spec $3 is refused with a message matching /$2/" "status $status" "err: $err" "out: $out"
        fi
}
spec_fail '[]' "object" "that is not an object ([])"
spec_fail '"x"' "spec" "that is a JSON string"
spec_fail '{' "spec" "that is truncated JSON"
spec_fail '' "spec" "that is empty"
spec_fail '{"bogus":1}' "unknown field 'bogus'" "with an unknown field"
spec_fail '{"maxDurationSecs":"10"}' "maxDurationSecs" "with maxDurationSecs a string"
spec_fail '{"maxDurationSecs":-5}' "maxDurationSecs" "with a negative maxDurationSecs"
spec_fail '{"maxDurationSecs":1.5e300}' "maxDurationSecs" "with a huge maxDurationSecs"
spec_fail '{"idleTimeoutSecs":-1}' "idleTimeoutSecs" "with a negative idleTimeoutSecs"
spec_fail '{"env":{"A":1}}' "env" "with a non-string env value"
spec_fail '{"env":["A=1"]}' "env" "with env an array"
spec_fail '{"labels":"x"}' "labels" "with labels a string"
spec_fail '{"image":"/nonexistent/rootfs"}' "/nonexistent/rootfs" "with an image path that does not exist"
spec_fail '{"image":"/"}' "'/'" "with image '/'"
spec_fail '{"image":42}' "image" "with image a number"
spec_fail '{"network":"off","ports":["8080:80"]}' "network" "publishing a port with the network off"
spec_fail '{"network":"bogus"}' "network" "with an unknown network mode"
spec_fail '{"persistence":"forever"}' "persistence" "with an unknown persistence"
spec_fail '{"security":"none"}' "security" "with an unknown security profile"
spec_fail '{"workdir":"rel"}' "workdir.*absolute" "with a relative workdir"
spec_fail '{"user":5}' "user" "with user a number"
spec_fail '{"env":{"A=B":"x"}}' "env" "with '=' in an env name"
rm -f "$spec"

# ---- bad options ---------------------------------------------------------------------------
# opt_fail DESC REGEX ARGS...: create ARGS sp is refused (1 or 2) with a matching message.
opt_fail() {
        local desc=$1 re=$2
        shift 2
        run_nook create "$@" sp
        if [[ ($status == 1 || $status == 2) && $err =~ $re ]]; then
                ok "create $desc is refused: ${err%%$'\n'*}"
        else
                not_ok "create $desc is refused with a message matching /$re/" "status $status" "err: $err"
        fi
}
opt_fail "--max-duration -5s" "max-duration" --max-duration -5s
opt_fail "--max-duration abc" "max-duration.*abc" --max-duration abc
opt_fail "--idle-timeout -1s" "idle-timeout" --idle-timeout -1s
opt_fail "--image /nonexistent" "/nonexistent" --image /nonexistent
opt_fail "--image /" "'/'" --image /
opt_fail "--image of a regular file" "not a directory" --image /etc/hostname
opt_fail "--network sometimes" "sometimes" --network sometimes
opt_fail "-e 1BAD=x" "1BAD" -e 1BAD=x
opt_fail "-l bad" "bad" -l bad
opt_fail "--security none" "none" --security none
opt_fail "--workdir rel" "absolute" --workdir rel
opt_fail "--spec /nonexistent.json" "/nonexistent.json" --spec /nonexistent.json

is "$(per_sandbox_state)" "" "bad specs and options created nothing per sandbox under NOOK_HOME"
run_nook ls -q
is "$status:$out" "0:" "bad specs and options left no record"
run_nook inspect sp
is "$status" 1 "inspect sp: no such sandbox"

# ---- bad exec requests ---------------------------------------------------------------------
run_nook create ok1
is "$status" 0 "create ok1 (for bad exec requests)"
run_nook exec ok1 -- /nonexistent/bin/tool
is "$status" 127 "exec of a missing binary: 127"
like "$err" "/nonexistent/bin/tool" "...the message names it"
run_nook exec ok1 -- /etc/hostname
is "$status" 126 "exec of a non-executable file: 126"
run_nook exec -w relative ok1 -- pwd
if [[ $status != 0 && $err == *relative* && $err == *absolute* ]]; then ok "exec -w relative is refused: ${err%%$'\n'*}"; else not_ok "exec -w relative is refused, naming the path and the rule" "status $status err $err"; fi
run_nook exec --timeout -1s ok1 -- true
is "$status" 2 "exec --timeout -1s is a usage error"
run_nook exec --timeout abc ok1 -- true
is "$status" 2 "exec --timeout abc is a usage error"
run_nook exec -e '' ok1 -- true
is "$status" 2 "exec -e with an empty value is a usage error (a bare NAME takes this environment's value, as docker's)"
run_nook exec ok1
is "$status" 2 "exec without a command is a usage error"
run_nook exec nosuchbox -- true
if [[ $status == 125 || $status == 1 ]] && [[ $err == *nosuchbox* ]]; then ok "exec in an unknown sandbox fails, naming it (status $status)"; else not_ok "exec in an unknown sandbox fails, naming it" "status $status err $err"; fi
run_nook stop ok1
run_nook exec ok1 -- true
if [[ $status != 0 && $err == *ok1* && $err =~ (stopped|not running) ]]; then ok "exec in a stopped sandbox fails, saying it is not running (status $status)"; else not_ok "exec in a stopped sandbox fails, saying it is not running" "status $status err $err"; fi

# ---- hostile workspace paths ---------------------------------------------------------------
for p in "/../etc/passwd" "../x" "/a/../../x" "/workspace/../etc/passwd"; do
        run_nook ws write ok1 "$p" "$NOOK_HOME.f"
        if [[ $status != 0 && $err == *"Refusing a path outside the workspace"* ]]; then ok "ws write to '$p' is refused"; else not_ok "ws write to '$p' is refused with 'Refusing a path outside the workspace'" "status $status err $err"; fi
done
ln -s / "$NOOK_HOME/workspaces/ok1/escape" 2>/dev/null
run_nook ws cat ok1 /escape/etc/hostname
if [[ $status != 0 && $out != "$(cat /etc/hostname)" ]]; then ok "ws cat through a symlink to / is refused"; else not_ok "ws cat through a symlink to / is refused" "status $status out $out"; fi
run_nook ws write ok1 /escape/tmp/nook-escape-$$ "$NOOK_HOME.f"
check "ws write through a symlink to / does not write outside" test ! -e "/tmp/nook-escape-$$"
rm -f "/tmp/nook-escape-$$" "$NOOK_HOME.f"

run_nook rm ok1
is "$status" 0 "rm ok1"
