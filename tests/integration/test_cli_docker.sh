#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Docker reflexes (issue 13, docs/cli.md): every row the table marks "same" is checked here
# against the real nook: ps and its filters, ls -a, inspect of several names, --format
# templates, stats of all running sandboxes (streaming on a terminal), help and version, "did
# you mean", tables that escape guest-chosen strings, --json errors, the plain-HTTP registry
# hint, --insecure-registry on create, and snapshot import of content already present. Hostile
# values: bad templates, bad filters, unknown names and options.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
command -v jq >/dev/null || plan skip_all "jq is needed to read nook's JSON"
plan 201

# ---- help, version, did you mean ---------------------------------------------------------------
run_nook help
is "$status" 0 "nook help exits 0"
like "$out" "Commands:" "nook help prints the command list"
run_nook help ps
is "$status" 0 "nook help ps exits 0"
like "$out" "Usage: nook ps" "nook help ps prints ps's usage"
expect_fail 2 "nook help of an unknown command" help frobnicate
run_nook version
is "$status" 0 "nook version exits 0"
like "$out" "^nook [0-9]+\.[0-9]+\.[0-9]+ \(libnook [0-9]+\.[0-9]+\.[0-9]+\)" "nook version names nook and libnook"
run_nook version --format '{{.Client}}'
like "$out" "^[0-9]+\.[0-9]+\.[0-9]+$" "nook version --format '{{.Client}}'"

expect_fail 2 "a mistyped command" exce w -- true
like "$err" "Did you mean 'exec'\?" "nook exce suggests exec"
# docker's names for what nook calls otherwise; never a destructive command for a typo
run_nook unpause w
like "$status:$err" "^2:.*Did you mean 'resume'\?" "nook unpause points at resume, not pause"
run_nook rmi img
like "$status:$err" "^2:.*Did you mean 'image rm'\?" "nook rmi points at image rm, not rm"
run_nook top w
like "$err" "Did you mean 'exec NAME ps'\?" "nook top points at exec NAME ps, not stop"
run_nook rn w
unlike "$err" "Did you mean 'rm'" "a typo is never offered rm"
expect_fail 2 "a mistyped long option" ps --filtr status=running
like "$err" "unknown option '--filtr'; did you mean '--filter'\?" "ps --filtr suggests --filter"
is "$(grep -c . <<<"$err")" "2" "one error line and one hint, not getopt's message as well"
expect_fail 2 "an unknown option with no near name" ps --zzzzzzzz
unlike "$err" "did you mean" "no suggestion when nothing is close"
expect_fail 2 "an option without its value" ps --format
like "$err" "option '--format' needs a value" "the missing value is named"

# ---- ls -a: accepted, one error for what is unknown ---------------------------------------------
run_nook ls -a
is "$status" 0 "nook ls -a is accepted (ls lists all sandboxes)"
expect_fail 2 "ls with an unknown short option" ls -x
is "$(grep -c "unknown option '-x'" <<<"$err")" "1" "an unknown short option is reported once, by name"

# ---- sandboxes to list --------------------------------------------------------------------------
evil=$'x\ny\e[31mred'
run_nook create dk1 --label team=a --label "evil=$evil"
is "$status" 0 "create dk1 (status $status: ${err:0:200})"
run_nook create dk2 --label team=b
is "$status" 0 "create dk2"
run_nook create dk3
is "$status" 0 "create dk3"
run_nook stop dk3
is "$status" 0 "stop dk3"

# ---- ps -------------------------------------------------------------------------------------------
run_nook ps
is "$status" 0 "nook ps exits 0"
like "$out" "^NAME +STATE" "ps prints a header"
like "$out" "dk1 +running" "ps lists a running sandbox"
unlike "$out" "dk3" "ps leaves out a stopped sandbox"
run_nook ps -a
like "$out" "dk3 +stopped" "ps -a lists the stopped one too"
run_nook ps -q
is "$out" $'dk1\ndk2' "ps -q prints the running names only"
run_nook ps -a -q
is "$out" $'dk1\ndk2\ndk3' "ps -a -q prints every name"
run_nook ps -q --filter label=team=a
is "$out" "dk1" "ps --filter label=K=V"
run_nook ps -q --filter label=team
is "$out" $'dk1\ndk2' "ps --filter label=K (any value)"
run_nook ps -q --filter status=exited
is "$out" "dk3" "ps --filter status=exited shows stopped ones (no -a needed, as docker)"
run_nook ps -q --filter status=running
is "$out" $'dk1\ndk2' "ps --filter status=running"
run_nook ps -q --filter name=k2
is "$out" "dk2" "ps --filter name=PART"
run_nook ps --json
is "$(jq -r 'map(.name) | join(",")' <<<"$out")" "dk1,dk2" "ps --json: the running rows as an array"
# As docker, filters of one key OR: two names, two statuses (one name filter used to win).
run_nook ps -q -a --filter name=k1 --filter name=k3
is "$out" $'dk1\ndk3' "ps --filter name=A --filter name=B: either"
run_nook ps -q --filter status=running --filter status=exited
is "$out" $'dk1\ndk2\ndk3' "ps --filter status=running --filter status=exited: either"
run_nook ps -q --filter label=team --filter name=k2
is "$out" "dk2" "filters of different keys AND"
# A paused sandbox is in ps (docker lists paused containers), and status=paused selects it.
# Pausing needs a writable freezer (docs/design/branch.md): never rootless on cgroup v1.
if "$NOOK" doctor --json 2>/dev/null |
        jq -e '.checks[] | select(.name == "pause (cgroup freezer)") | .ok' >/dev/null; then
        run_nook pause dk2
        run_nook ps -q
        is "$out" $'dk1\ndk2' "ps lists a paused sandbox"
        run_nook ps -q --filter status=paused
        is "$out" "dk2" "ps --filter status=paused"
        run_nook resume dk2
else
        for t in 1 2; do skip_expected "no writable cgroup freezer here (nook doctor), so no pause"; done
fi
for f in "status=created" "status=" "label=" "foo=bar" "label==x" "name=" ""; do
        expect_fail 2 "ps --filter '$f' is a usage error" ps --filter "$f"
done
like "$err" "expected label=KEY" "a bad filter names the keys that exist"

# ---- tables escape guest-chosen strings ---------------------------------------------------------
run_nook ps --format '{{.Name}}|{{.Labels.evil}}' --filter name=dk1
is "$out" 'dk1|x\x0ay\x1b[31mred' "--format escapes a label's newline and escape sequence"
run_nook ps -a
if [[ $out != *$'\e'* && $(grep -c . <<<"$out") == 4 ]]; then
        ok "the table has no raw escape and one line per sandbox"
else
        not_ok "the table has no raw escape and one line per sandbox" "$out"
fi
run_nook ls --json
is "$(jq -r '.[] | select(.name == "dk1") | .labels.evil' <<<"$out")" "$evil" "--json keeps the label exactly"
if [[ $out != *$'\e'* ]]; then ok "--json output holds no raw escape byte"; else not_ok "--json output holds no raw escape byte"; fi

# ---- --format ---------------------------------------------------------------------------------------
run_nook ls --format '{{.Name}} {{.State}} {{.Spec.Image}}'
is "$out" $'dk1 running host\ndk2 running host\ndk3 stopped host' "ls --format with a nested field"
run_nook ps --format 'name={{.Name}}\t{{json .Labels}}' --filter name=dk2
is "$out" $'name=dk2\t{"team":"b"}' "--format: literal text, \\t and {{json}}"
run_nook ps --format '{{json .}}' --filter name=dk2
is "$(jq -r .name <<<"$out")" "dk2" "--format '{{json .}}' prints each row as JSON"
expect_fail 2 "a mistyped image subcommand" image lss
like "$err" "did you mean 'ls'" "image lss suggests ls"
run_nook inspect dk1 --format '{{.State}}'
is "$out" "running" "inspect --format '{{.State}}'"
run_nook inspect -f '{{json .Spec.Labels}}' dk2
is "$status" 0 "inspect -f (docker's short flag)"
for t in 'table {{.Name}}' '{{.Name' '{{printf "%s" .Name}}' '{{.Name | upper}}' '{{..}}' '{{}}' '{{json}}'; do
        expect_fail 2 "ls --format '$t' is refused" ls --format "$t"
done
like "$err" "--format: unknown function 'json'|expected a field" "the error names the problem"
expect_fail 2 "--json and --format together" ls --json --format '{{.Name}}'

# ---- inspect of several names -----------------------------------------------------------------------
run_nook inspect dk1 dk2
is "$status" 0 "inspect A B exits 0"
is "$(jq -r 'map(.name) | join(",")' <<<"$out")" "dk1,dk2" "inspect A B prints a JSON array in order"
run_nook inspect dk1
is "$(jq -r '.name' <<<"$out")" "dk1" "inspect of one name prints the object"
run_nook inspect dk1 nope-x dk2
is "$status" 1 "inspect with an unknown name fails (rc 1), as docker"
like "$err" "No sandbox 'nope-x'" "the unknown name is named"
is "$(jq -r 'map(.name) | join(",")' <<<"$out")" "dk1,dk2" "the known names are still printed"
expect_fail 1 "inspect of a hostile name" inspect '../etc'
expect_fail 2 "inspect with no name" inspect

# ---- --json errors ----------------------------------------------------------------------------------
run_nook --json inspect nope-y
is "$status" 1 "--json: same exit status for an unknown name"
is "$(jq -r '.error.code' <<<"$err")" "not_found" "--json: the error is JSON with its code"
like "$(jq -r '.error.message' <<<"$err")" "No sandbox 'nope-y'" "--json: and its message"
run_nook --json ps --bogus
is "$status" 2 "--json: a usage error keeps exit status 2"
is "$(jq -r '.error.code' <<<"$err")" "usage" "--json: a usage error is JSON too"
run_nook --json inspect $'bad\xffname'
is "$(jq -r '.error.code' <<<"$err")" "invalid" "--json: a name that is not UTF-8 gets a JSON error naming it"
run_nook --json frobnicate
is "$(jq -r '.error.code' <<<"$err")" "usage" "--json: an unknown command is JSON too"

# ---- stats --------------------------------------------------------------------------------------------
run_nook stats --no-stream dk1
if [[ $status != 0 && $err == *"no cgroup"* ]]; then
        # rootless without a delegated cgroup: the numbers are out of reach, the sandboxes are not
        run_nook stats --no-stream
        like "$out" $'dk1 +- .*\ndk2 +-' "bare stats lists running sandboxes without a cgroup, with '-'"
        for i in 1 2 3 4 5 6; do skip_expected "stats needs the sandbox's cgroup, which this stage has not: ${err:0:120}"; done
else
        run_nook stats --no-stream
        is "$status" 0 "stats --no-stream exits 0"
        like "$out" "^NAME +CPU %" "stats prints a table"
        if [[ $out == *dk1* && $out == *dk2* && $out != *dk3* ]]; then
                ok "bare stats covers every running sandbox and no stopped one"
        else
                not_ok "bare stats covers every running sandbox and no stopped one" "$out"
        fi
        run_nook stats --json
        is "$(jq -r 'map(.name) | join(",")' <<<"$out")" "dk1,dk2" "stats --json: an array of the running ones"
        run_nook stats dk1 --format '{{.Name}} {{.Pids}}'
        like "$out" "^dk1 [0-9]+$" "stats NAME --format"
        # a paused sandbox is listed too, as docker stats lists paused containers
        if "$NOOK" doctor --json 2>/dev/null | jq -e '.checks[] | select(.name == "pause (cgroup freezer)") | .ok' >/dev/null; then
                "$NOOK" pause dk2 >/dev/null
                run_nook stats --no-stream --format '{{.Name}}'
                is "$(sort <<<"$out" | tr '\n' ' ')" "dk1 dk2 " "bare stats lists a paused sandbox too"
                "$NOOK" resume dk2 >/dev/null
        else
                skip_expected "no writable cgroup freezer here (nook doctor), so no pause"
        fi
        # On a terminal stats refreshes until ^C, as docker stats: two screens in 3 s, then SIGINT.
        start=$SECONDS
        # The SIGINT goes to stats itself inside the pty (script's own SIGINT handling adds a 2 s
        # grace of its own); SIGKILL at 13 s if it ignored it.
        script -qec "timeout --preserve-status -s INT -k 10 3 $NOOK stats; echo \"stats-rc=\$?\"" /dev/null \
                >"$NOOK_HOME/stream.txt" 2>&1 </dev/null
        screens=$(grep -o $'\e\[H\e\[2J' "$NOOK_HOME/stream.txt" | wc -l)
        rc=$(grep -ao 'stats-rc=[0-9]*' "$NOOK_HOME/stream.txt" | tail -n1)
        if ((screens >= 1 && SECONDS - start < 10)) && [[ $rc == stats-rc=0 ]]; then
                ok "stats on a terminal refreshes ($screens screens) and ends on SIGINT with status 0"
        else
                not_ok "stats on a terminal refreshes and ends on SIGINT with status 0" \
                        "screens $screens, $((SECONDS - start)) s, ${rc:-no status}"
        fi
fi
expect_fail 1 "stats of a stopped sandbox" stats --no-stream dk3
expect_fail 1 "stats of an unknown sandbox" stats --no-stream nope-z
is "$(grep -cE "No sandbox (named )?'nope-z'" <<<"$err")" 1 "stats says so once (it took two samples and said it twice)"

# ---- rm -f, as docker -----------------------------------------------------------------------------------
run_nook rm -f dk1 dk2 dk3
is "$status" 0 "rm -f removes running and stopped sandboxes"
# 'host' is the built-in image: inspect/rm/export say so (they said "pull it first")
expect_fail 1 "image inspect host" image inspect host
like "$err" "'host' is nook's built-in image.*nothing to inspect" "the error says host is built in"
run_nook prune -f
is "$status" 0 "prune -f (docker's 'no prompt') is accepted"
# docker rm -f of a name that does not exist: said on stderr, exit 0 (a cleanup line under set -e)
run_nook rm -f nope-rm
is "$status:$out" "0:" "rm -f of an unknown name exits 0 and prints no name"
like "$err" "No sandbox 'nope-rm'" "and says on stderr that there was none"
expect_fail 1 "rm without -f of an unknown name is an error" rm nope-rm

# ---- columns fit the terminal; --no-trunc keeps them whole ------------------------------------------------
R=$NOOK_HOME/a-very-long-directory-name-for-a-root-filesystem-image/rootfs
mkdir -p "$R/bin" && cp "$(command -v busybox)" "$R/bin/busybox"
run_nook create lt --image "$R"
is "$status" 0 "create a sandbox whose image is a long rootfs path (${err:0:160})"
narrow=$(script -qec "stty cols 60; $NOOK ls" /dev/null </dev/null | tr -d '\r')
wide=$(script -qec "stty cols 60; $NOOK ls --no-trunc" /dev/null </dev/null | tr -d '\r')
if [[ $narrow != *"$R"* && $(awk '{ if (length($0) > 60) n++ } END { print n + 0 }' <<<"$narrow") == 0 ]]; then
        ok "on a 60-column terminal the table fits (the image column is cut)"
else
        not_ok "on a 60-column terminal the table fits (the image column is cut)" "$narrow"
fi
like "$wide" "lt +running +ephemeral +[0-9]+s ago +$R" "--no-trunc prints the whole image path on one line"
"$NOOK" rm lt >/dev/null

# ---- image ls ---------------------------------------------------------------------------------------------
run_nook image ls
like "$out" "^NAME +DIGEST" "image ls prints a header even when empty"
expect_fail 2 "image ls --format with a bad template" image ls --format '{{.Name'

# ---- messages: plain-HTTP registry, --insecure-registry on create -----------------------------------------
PY=$(command -v python3)
port=$((20000 + RANDOM % 20000))
"$PY" -m http.server "$port" --bind 127.0.0.1 --directory "$NOOK_HOME" >/dev/null 2>&1 &
http_pid=$!
for _ in $(seq 50); do (: >/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
run_nook image pull "127.0.0.1:$port/x/y:1"
is "$status" 1 "pulling from a plain-HTTP registry fails"
like "$err" "speaks plain HTTP.*--insecure-registry 127\.0\.0\.1:$port.*NOOK_INSECURE_REGISTRIES" \
        "the error says what to do"
run_nook create hx --image "127.0.0.1:$port/x/y:1"
like "$err" "speaks plain HTTP" "create says the same"
run_nook create hx --image "127.0.0.1:$port/x/y:1" --insecure-registry "127.0.0.1:$port"
like "$err" "has no manifest" "create --insecure-registry reaches the registry over HTTP"
for h in "" "a b" "a,b" "x/y"; do
        expect_fail 2 "create --insecure-registry '$h' is refused" create hx --insecure-registry "$h"
done
kill "$http_pid" 2>/dev/null
wait "$http_pid" 2>/dev/null
run_nook ls -q
is "$out" "" "nothing was created by the refused creates"

# ---- a home another user owns: permission, not "No sandbox" ---------------------------------------------------
if [[ $(id -u) == 0 ]] && setpriv --reuid 65534 --regid 65534 --clear-groups true 2>/dev/null; then
        H2=$(mktemp -d /var/tmp/nook-test-perm.XXXXXX)
        chmod 755 "$H2"
        # 0755: other users may enter it only with the shared-home risk accepted (test_identity.sh
        # checks the refusal); then a sandbox's own 0700 folder is what stops them
        export NOOK_ALLOW_SHARED_HOME=1
        NOOK_HOME=$H2 "$NOOK" create pw >/dev/null 2>&1
        perm_err=$(setpriv --reuid 65534 --regid 65534 --clear-groups env NOOK_HOME="$H2" "$NOOK" exec pw -- true 2>&1)
        like "$perm_err" "permission denied.*another user" "exec on a root-owned home says permission, not 'No sandbox'"
        unlike "$perm_err" "No sandbox" "and does not claim the sandbox is missing"
        NOOK_HOME=$H2 "$NOOK" rm pw >/dev/null 2>&1
        unset NOOK_ALLOW_SHARED_HOME
        rm -rf "$H2"
else
        skip_expected "needs real root (and uid 65534 mapped) to make a home another user cannot read"
        skip_expected "needs real root (and uid 65534 mapped) to make a home another user cannot read"
fi

# ---- snapshot import of content already present (the README example) --------------------------------------
run_nook create base --sticky
is "$status" 0 "create a sticky sandbox"
"$NOOK" stop base >/dev/null
run_nook snapshot create base base
is "$status" 0 "snapshot create base base"
run_nook snapshot export base "$NOOK_HOME/base.nsnap"
is "$status" 0 "snapshot export base base.nsnap"
run_nook snapshot import "$NOOK_HOME/base.nsnap"
is "$status" 0 "snapshot import of the same content succeeds"
like "$out" "already present" "and says the content is already there"
run_nook snapshot ls -q
is "$out" "base" "no second snapshot was made"
run_nook snapshot ls --format '{{.Name}} {{.WithWorkspace}}'
is "$out" "base false" "snapshot ls --format"
"$NOOK" snapshot rm base >/dev/null
"$NOOK" rm base >/dev/null

# ---- --json on the commands that act on names: one JSON object a line, the state each is in ----------
run_nook --json create jn1
is "$out" '{"name":"jn1","state":"running"}' "--json create: the sandbox and its state"
if "$NOOK" doctor --json 2>/dev/null | jq -e '.checks[] | select(.name == "pause (cgroup freezer)") | .ok' >/dev/null; then
        run_nook --json pause jn1
        is "$out" '{"name":"jn1","state":"paused"}' "--json pause"
        run_nook --json resume jn1
        is "$out" '{"name":"jn1","state":"running"}' "--json resume"
else
        skip_expected "no writable cgroup freezer in this stage (pause)"
        skip_expected "no writable cgroup freezer in this stage (resume)"
fi
"$NOOK" create jn2 >/dev/null
run_nook --json stop jn1 nope-jn jn2
is "$status:$(jq -sc 'map(.name + "=" + .state)' <<<"$out")" '1:["jn1=stopped","jn2=stopped"]' \
        "--json stop: a line per stopped sandbox (the missing one an error on stderr)"
run_nook --json start jn1
is "$out" '{"name":"jn1","state":"running"}' "--json start"
run_nook --json wait --timeout 1ms jn2
is "$status:$out" '0:{"name":"jn2","exitCode":null}' "--json wait: exitCode null without a run -d command"
run_nook --json rm -f jn1 jn2 nope-jn
is "$status:$(jq -sc 'map(.name + "=" + .state)' <<<"$out")" '0:["jn1=removed","jn2=removed"]' "--json rm"
run_nook --json run -d --name jn3 -- sh -c 'exit 3'
is "$out" '{"name":"jn3","state":"running"}' "--json run -d: the sandbox, as create says it"
run_nook --json wait jn3
is "$out" '{"name":"jn3","exitCode":3}' "--json wait: the run -d command's exit status"
"$NOOK" rm jn3 >/dev/null

# ---- options after the names, as docker takes them; a bad one refused before anything is done -------
"$NOOK" create oa1 >/dev/null
run_nook stop oa1 -t 1
is "$status:$out" "0:oa1" "stop NAME -t 1: the option after the name is the stop's"
run_nook wait oa1 --timeout 1s
is "$status:$out" "0:-" "wait NAME --timeout 1s"
run_nook start oa1 --bogus
is "$status" 2 "start NAME --bogus: a usage error"
is "$("$NOOK" inspect -f '{{.State}}' oa1)" "stopped" "and nothing was started before it"
run_nook start oa1
run_nook pause oa1 --help
like "$status:$out" "^0:Usage: nook pause" "pause NAME --help prints the help"
is "$("$NOOK" inspect -f '{{.State}}' oa1)" "running" "and pauses nothing"
run_nook update oa1 --memory 12x
like "$status:$err" "^1:.*memory.*12x" "update NAME --memory 12x: the option after the name is parsed as update's"
"$NOOK" run -d --name oa2 -- sh -c 'echo one; echo two' >/dev/null
"$NOOK" wait oa2 >/dev/null
run_nook logs oa2 --tail 1
is "$status:$out" "0:two" "logs NAME --tail 1"
run_nook rm oa1 oa2 nope-oa -f
is "$status:$out" "0:oa1"$'\n'"oa2" "rm NAMES -f: the -f applies to every name"
# --json among a command's options, as ls and inspect take it (it was "unknown option" on these)
run_nook create oa3 --json
is "$status:$out" '0:{"name":"oa3","state":"running"}' "create NAME --json"
run_nook stop oa3 --json
is "$status:$out" '0:{"name":"oa3","state":"stopped"}' "stop NAME --json"
run_nook rm oa3 --json
is "$status:$out" '0:{"name":"oa3","state":"removed"}' "rm NAME --json"
run_nook run --rm -- sh -c 'echo "$@"' - x --json
is "$status:$out" "0:x --json" "but a --json after run's command is the command's"
# ... and on the commands that read their arguments by hand (they took it for an operand)
"$NOOK" create oa4 >/dev/null
echo hi | "$NOOK" ws write oa4 /a.txt
echo odd | "$NOOK" ws write oa4 -- --json
run_nook ws ls oa4 --json
is "$status:$(jq -r '[.[].name] | sort | join(",")' <<<"$out")" "0:--json,a.txt" "ws ls NAME --json: JSON; '-- --json' named a file"
run_nook cat oa4:/a.txt --json
is "$status:$out" "0:hi" "cat NAME:PATH --json"
run_nook ws rm oa4 -- --json
is "$status:$("$NOOK" ws ls oa4 | wc -l)" "0:1" "ws rm NAME -- --json removes the file named --json"
if nook_rootful; then
        run_nook update oa4 --pids-max 100 --json
        is "$status:$out" '0:{"name":"oa4","update":{"pidsMax":100}}' "update NAME --json: the limits set"
else
        skip_expected "update sets limits, which need root or a delegated cgroup (uid $(id -u) here)"
fi
run_nook volume create oav --json
is "$status:$(jq -r .name <<<"$out")" "0:oav" "volume create NAME --json"
run_nook volume ls --json
is "$status:$(jq -r '.[].name' <<<"$out")" "0:oav" "volume ls --json"
run_nook volume rm oav --json
is "$status:$out" '0:{"name":"oav","state":"removed"}' "volume rm NAME --json (it also tried to remove a volume '--json')"
# stop -t 0 kills at once, as docker's (it waited the default 10 s); more than an hour is refused
"$NOOK" run -d --name oa5 -- sh -c 'trap "" TERM; while :; do sleep 1; done' >/dev/null
t0=$SECONDS
run_nook stop -t 0 oa5
is "$status:$((SECONDS - t0 < 6))" "0:1" "stop -t 0 of a command that ignores SIGTERM does not wait the 10 s default"
run_nook stop -t 2h oa4
like "$status:$err" "^1:.*more than an hour" "stop -t 2h is refused (it became 10 s)"
is "$("$NOOK" inspect -f '{{.State}}' oa4)" "running" "and stops nothing"
"$NOOK" rm oa5 >/dev/null
"$NOOK" stop oa4 >/dev/null
run_nook prune --json
is "$status:$out" '0:["oa4"]' "prune --json"

# ---- kill and restart, as docker's --------------------------------------------------------------
"$NOOK" run -d --name dkk1 -- sh -c 'trap "echo got HUP; exit 3" HUP; while :; do sleep 0.1; done' >/dev/null
sleep 0.5
run_nook kill -s HUP dkk1
is "$status:$out" "0:dkk1" "kill -s HUP NAME: the run -d command gets SIGHUP"
run_nook wait dkk1
is "$status:$out" "0:3" "the command's trap ran: it exited 3, and the sandbox stopped with it"
like "$("$NOOK" logs dkk1)" "got HUP" "its output says it got SIGHUP"
"$NOOK" create dkk2 >/dev/null
"$NOOK" exec -d dkk2 -- sh -c 'trap "echo usr2 > /workspace/got; exit 0" USR2; while :; do sleep 0.1; done' >/dev/null
sleep 0.5
run_nook kill --signal sigusr2 dkk2
is "$status" 0 "kill --signal sigusr2 (any case, with or without SIG)"
wait_for 5 test -e "$("$NOOK" ws path dkk2)/got"
is "$?" 0 "the exec -d command's USR2 trap ran (it wrote its file)"
is "$("$NOOK" inspect -f '{{.State}}' dkk2)" "running" "a sandbox made by create runs on after a signal"
# a signal the helper between the supervisor and the command does not handle itself (SIGALRM
# used to end that helper, not the command): the attached exec reports 128 + 14
"$NOOK" exec dkk2 -- sleep 100 >/dev/null 2>&1 &
exec_pid=$!
sleep 0.5
run_nook kill -s ALRM dkk2
wait "$exec_pid"
is "$status:$?" "0:142" "kill -s ALRM: the running exec's command ends on SIGALRM (128 + 14)"
run_nook exec dkk2 -- true
is "$status" 0 "the sandbox still runs commands"
expect_fail 2 "a signal that does not exist" kill -s NOSUCH dkk2
like "$err" "'NOSUCH' is not a signal" "the bad signal is named"
expect_fail 2 "signal 0 (no such signal)" kill -s 0 dkk2
expect_fail 2 "a signal past the last one" kill -s 65 dkk2
expect_fail 2 "kill without a name" kill
run_nook pause dkk2
if [[ $status == 0 ]]; then
        expect_fail 1 "signalling a paused sandbox" kill -s HUP dkk2
        like "$err" "paused.*resume it first" "the error says to resume it first"
        "$NOOK" resume dkk2 >/dev/null
else
        skip_expected "pause needs a writable freezer (uid $(id -u) here: ${err:0:120})"
        skip_expected "pause needs a writable freezer: no paused sandbox to signal"
fi
"$NOOK" exec -d dkk2 -- sh -c 'trap "" TERM; while :; do sleep 1; done' >/dev/null
t0=$SECONDS
run_nook kill dkk2
is "$status:$out:$((SECONDS - t0 < 6))" "0:dkk2:1" "kill NAME (KILL): stops at once, a command ignoring SIGTERM too"
is "$("$NOOK" inspect -f '{{.State}}' dkk2)" "stopped" "the sandbox is stopped"
expect_fail 1 "a signal to a stopped sandbox" kill -s HUP dkk2
like "$err" "not running" "the error says it is not running"
expect_fail 1 "kill of a sandbox that does not exist" kill -s HUP dkk-nosuch
like "$err" "No sandbox 'dkk-nosuch'" "the missing name is said"
run_nook restart dkk2
is "$status:$out:$("$NOOK" inspect -f '{{.State}}' dkk2)" "0:dkk2:running" "restart of a stopped sandbox starts it"
"$NOOK" exec dkk2 -- sh -c 'echo kept > /workspace/k; echo gone > /tmp/g'
run_nook restart -t 0 dkk2
is "$status:$out" "0:dkk2" "restart -t 0 of a running sandbox"
is "$("$NOOK" exec dkk2 -- sh -c 'cat /workspace/k; cat /tmp/g 2>/dev/null || echo no-tmp')" $'kept\nno-tmp' \
        "after restart the workspace is kept and the sandbox's /tmp is new"
expect_fail 2 "restart with a bad timeout" restart -t soon dkk2
expect_fail 1 "restart of a sandbox that does not exist" restart dkk-nosuch
"$NOOK" rm -f dkk1 dkk2 >/dev/null

# ---- -e NAME and --env-file, as docker's -------------------------------------------------------
envf="$NOOK_HOME.env"
printf '\xef\xbb\xbfC=3\r\n# a comment\n\n  A=1\nB="two words"  \nHOSTV\nUNSETV\n' >"$envf"
out=$(HOSTV=fromhost HOSTV2=x "$NOOK" run --env-file "$envf" -e HOSTV2 -e UNSETV2 -- \
        sh -c 'env | grep -E "^(A|B|C|HOSTV|HOSTV2|UNSETV|UNSETV2)=" | LC_ALL=C sort')
is "$out" $'A=1\nB="two words"  \nC=3\nHOSTV2=x\nHOSTV=fromhost' \
        "run --env-file: comments and blank lines skipped, values as written, bare names from this environment, unset ones left out"
HOSTV=h "$NOOK" create dke --env-file "$envf" >/dev/null
is "$("$NOOK" inspect -f '{{json .Spec.env}}' dke)" '{"A":"1","B":"\"two words\"  ","C":"3","HOSTV":"h"}' \
        "create --env-file stores the entries in the spec"
is "$(echo 'Z=9' | "$NOOK" exec --env-file - dke -- sh -c 'echo "$Z|$A"')" "9|1" "exec --env-file - reads stdin, on top of the spec's"
printf 'OK=1\nBAD NAME=1\n' >"$envf"
expect_fail 2 "an env file with a blank in a name" run --env-file "$envf" -- true
like "$err" "line 2: the name 'BAD NAME' holds a blank" "the file, the line and the name are said"
printf 'A=\xff\n' >"$envf"
expect_fail 2 "an env file that is not UTF-8" exec --env-file "$envf" dke -- true
like "$err" "line 1: not UTF-8 text" "the line is said"
printf '=x\n' >"$envf"
expect_fail 2 "an env file entry without a name" create dke2 --env-file "$envf"
expect_fail 2 "an env file that does not exist" run --env-file "$NOOK_HOME.nosuch" -- true
like "$err" "No such file or directory" "the error says why"
expect_fail 2 "-e with nothing" run -e '' -- true
printf '1BAD=x\n' >"$envf"
run_nook create dke3 --env-file "$envf"
like "$status:$err" "^1:.*'1BAD' must match" "a bad name from a file is refused by libnook's rule, named"
is "$("$NOOK" ls --format '{{.Name}}' | grep -c '^dke[23]$')" "0" "and no sandbox is made by a refused env file"
rm -f "$envf"
"$NOOK" rm -f dke >/dev/null
