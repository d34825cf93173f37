#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The egress gateway's inputs (issue #14) without the gateway: --secret, --allow-http,
# --egress-ca, --egress-audit and the spec's "secrets"/"egress" fields with bad and hostile
# values (a clear error naming the field, nothing created, the secret's value in no message),
# and `nook egress log` over a log a hostile gateway (or guest) could have shaped.  The gateway
# itself: test_egress.sh.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
plan 60

SENT="nook-sentinel-$$-s3cr3t"
export TOK=$SENT
specf="$NOOK_HOME.spec.json"

# refused DESC REGEX ARGS...: nook ARGS fails (1: invalid, 2: usage), says REGEX, never the
# value, and leaves no sandbox behind
refused() {
        local desc=$1 re=$2
        shift 2
        run_nook "$@"
        if [[ ($status == 1 || $status == 2) && $err =~ $re && $err != *"$SENT"* && $out != *"$SENT"* ]]; then
                ok "$desc"
        else
                not_ok "$desc" "status $status" "stderr: $err"
        fi
}
# spec_refused DESC REGEX JSON: the same through --spec
spec_refused() {
        printf '%s' "$3" >"$specf"
        refused "$1" "$2" create w --spec "$specf"
}

# ---- the CLI ---------------------------------------------------------------------------------
refused "--secret needs the network on" "network" create w --secret TOK@api.example.com
refused "--allow-http needs the network on" "network" create w --allow-http 'GET https://a.example/*'
refused "--egress-audit needs the network on" "network" create w --egress-audit
refused "--secret of an unset variable names it" "NOPE.*not set" create w --network public --secret NOPE@a.example
refused "--secret without hosts" "NAME@HOST" create w --network public --secret TOK@
refused "--secret without a name" "NAME@HOST" create w --network public --secret @a.example
refused "--secret with an unknown suffix" "only suffix is ':body'" create w --network public --secret TOK@a.example:xyz
refused "--secret with a host that is no name" "hosts\[0\].*not a domain name" create w --network public --secret 'TOK@a b'
refused "--secret with a host:port" "only suffix is ':body'" create w --network public --secret 'TOK@a.example:443'
refused "--secret with a host pattern in the middle" "not a domain name" create w --network public --secret 'TOK@a.*.example'
refused "--secret for every name under a top-level domain" "covers every name under a top-level domain" create w --network public --secret 'TOK@*.com'
refused "--secret for a top-level name" "single label" create w --network public --secret 'TOK@com'
refused "--secret for localhost (never a public host)" "single label" create w --network public --secret 'TOK@localhost'
refused "--secret for an address" "address" create w --network public --secret 'TOK@10.1.2.3'
refused "--secret given twice (the later one replaced the earlier)" "given twice" create w --network public --secret TOK@a.example --secret TOK@b.example
export SSL_CERT_FILE=x
refused "--secret may not take a name nook sets (SSL_CERT_FILE)" "variable nook sets" create w --network public --secret SSL_CERT_FILE@a.example
unset SSL_CERT_FILE
refused "--secret and -e of one name" "both in 'env' and in 'secrets'" create w --network public -e TOK=1 --secret TOK@a.example
refused "--allow-http without a URL" "allowHttp\[0\].*the method is missing" create w --network public --allow-http GET
refused "--allow-http with a lower-case method (the gateway's parser)" "upper case" create w --network public --allow-http 'get https://a.example/'
refused "--allow-http with a host glob in the middle (the gateway's parser)" "allowHttp\[0\]" create w --network public --allow-http 'GET https://a.*.example/'
refused "--allow-http with a control character" "control character" create w --network public --allow-http $'GET https://a.example/\x01'
refused "--allow-http over 2048 characters" "1 to 2048" create w --network public --allow-http "GET https://a.example/$(head -c 3000 /dev/zero | tr '\0' a)"
printf -- '-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n' >"$NOOK_HOME.ca"
refused "--egress-ca alone (no gateway to use it)" "runs only with a secret" create w --network public --egress-ca "$NOOK_HOME.ca"
refused "--egress-ca of a missing file" "cannot read" create w --network public --egress-audit --egress-ca /nonexistent/ca.pem
printf 'not a certificate\n' >"$NOOK_HOME.ca"
refused "--egress-ca that is not PEM" "no PEM certificate" create w --network public --egress-audit --egress-ca "$NOOK_HOME.ca"
printf -- '-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n' >"$NOOK_HOME.ca"
refused "--egress-ca holding a private key" "private key" create w --network public --egress-audit --egress-ca "$NOOK_HOME.ca"
TOK=$'line\nbreak' refused "a secret value with a line break (header injection)" "line break" create w --network public --secret TOK@a.example
TOK=$SENT

# ---- the spec --------------------------------------------------------------------------------
spec_refused "secrets must be an object" "'secrets' must be an object" '{"network":"public","secrets":[1]}'
spec_refused "a secret must be an object" "secret 'T' must be" '{"network":"public","secrets":{"T":"'$SENT'"}}'
spec_refused "a secret's value must be a string" "'value' must be a string" '{"network":"public","secrets":{"T":{"value":1,"hosts":["a.example"]}}}'
spec_refused "a secret needs hosts" "'hosts' must be an array of 1 to 32" '{"network":"public","secrets":{"T":{"value":"'$SENT'"}}}'
spec_refused "a secret's hosts may not be empty" "'hosts' must be an array of 1 to 32" '{"network":"public","secrets":{"T":{"value":"'$SENT'","hosts":[]}}}'
spec_refused "a secret's host must be a string" "hosts\[0\] must be a string" '{"network":"public","secrets":{"T":{"value":"'$SENT'","hosts":[7]}}}'
spec_refused "a secret's unknown field" "unknown field 'hots'" '{"network":"public","secrets":{"T":{"value":"'$SENT'","hots":["a.example"]}}}'
spec_refused "a secret's body must be a boolean" "'body' must be true or false" '{"network":"public","secrets":{"T":{"value":"'$SENT'","hosts":["a.example"],"body":"yes"}}}'
spec_refused "a secret name must be an env name" "must match" '{"network":"public","secrets":{"1T":{"value":"'$SENT'","hosts":["a.example"]}}}'
spec_refused "a secret name with '='" "must match" '{"network":"public","secrets":{"A=B":{"value":"'$SENT'","hosts":["a.example"]}}}'
spec_refused "a secret value with a NUL byte" "NUL" '{"network":"public","secrets":{"T":{"value":"a\u0000'$SENT'","hosts":["a.example"]}}}'
spec_refused "a secret value above 8 KiB" "1 to 8192 bytes" '{"network":"public","secrets":{"T":{"value":"'"$(head -c 9000 /dev/zero | tr '\0' a)"'","hosts":["a.example"]}}}'
spec_refused "a secret without a value at create" "has no value" '{"network":"public","secrets":{"T":{"hosts":["a.example"]}}}'
many=$(for i in $(seq 17); do printf '"S%d":{"value":"v","hosts":["a.example"]},' "$i"; done)
spec_refused "more than 16 secrets" "more than 16 secrets" '{"network":"public","secrets":{'"${many%,}"'}}'
spec_refused "egress must be an object" "'egress' must be an object" '{"network":"public","egress":true}'
spec_refused "egress: unknown field" "unknown field 'allowHTTP'" '{"network":"public","egress":{"allowHTTP":[]}}'
spec_refused "egress.allowHttp must be an array" "allowHttp must be an array" '{"network":"public","egress":{"allowHttp":"GET https://a.example/"}}'
spec_refused "egress.allowHttp[i] must be a string" "allowHttp\[0\] must be a string" '{"network":"public","egress":{"allowHttp":[1]}}'
spec_refused "egress.audit must be a boolean" "audit must be true or false" '{"network":"public","egress":{"audit":1}}'
spec_refused "egress.caPem must be a string" "caPem must be a string" '{"network":"public","egress":{"caPem":7}}'

run_nook ls --json
is "$out" "[]" "nothing was created by any of the refused requests"
check "no state folder or workspace was left" test ! -e "$NOOK_HOME/sandboxes/w" -a ! -e "$NOOK_HOME/workspaces/w"

# ---- nook egress log -------------------------------------------------------------------------
run_nook create w
sdir="$NOOK_HOME/sandboxes/w"
# a sandbox without a gateway has no state folder (nothing goes in it): the one a gateway's has
mkdir "$sdir"
# what a gateway wrote, plus a torn last line and bytes that must not reach a terminal raw
{
        printf '%s\n' '{"time":"2026-12-03T07:00:00.123Z","sandbox":"w","method":"GET","host":"api.example","path":"/repos/x","status":200,"decision":"allow","rule":"GET https://api.example/repos/*","reason":null,"bytesUp":10,"bytesDown":20,"proto":"http/1.1"}'
        printf '%s\n' '{"time":"2026-12-03T07:00:01.000Z","sandbox":"w","method":"POST","host":"evil\u001b[31m.example","path":"/\u0007x","status":403,"decision":"block","rule":null,"reason":"secret TOK to an unlisted host","bytesUp":0,"bytesDown":0,"proto":"http/1.1"}'
        printf 'not json at all\n'
        printf '{"time":"2026-12-03T07:00:02Z","decision":"allow"'
} >"$sdir/egress.log"
run_nook egress log w
lines=$(printf '%s\n' "$out" | wc -l)
if [[ $status == 0 && $lines == 2 && $out == *"2026-12-03T07:00:00.123Z allow 200 GET api.example/repos/x (GET https://api.example/repos/*)"* ]]; then
        ok "egress log: one text line per whole entry (junk and a torn last line skipped)"
else
        not_ok "egress log: one text line per whole entry" "status $status" "$out"
fi
if [[ $out == *'evil\x1b[31m.example/\x07x'* && $out != *$'\e'* ]]; then
        ok "egress log: control characters from the guest print as \\xNN"
else
        not_ok "egress log: control characters print as \\xNN" "$out"
fi
run_nook egress log --json w
n_ok=0
while IFS= read -r l; do
        jq -e . >/dev/null 2>&1 <<<"$l" && n_ok=$((n_ok + 1))
done <<<"$out"
if [[ $n_ok == 2 && $out != *$'\e'* && $out == *'\u001'[bB]* ]]; then
        ok "egress log --json: each line is JSON, control characters escaped"
else
        not_ok "egress log --json: each line is JSON" "$out"
fi
run_nook create nogw
expect_fail 1 "egress log of a sandbox without a gateway is an error, not an empty log" egress log nogw
like "$err" "Sandbox 'nogw' has no egress gateway, so no audit log: create it with --secret" \
        "that says so and how to have one (its traffic went unaudited)"
run_nook rm nogw
expect_fail 1 "egress log of an unknown sandbox" egress log nosuch
like "$err" "No sandbox 'nosuch'" "egress log: the error names the sandbox"
expect_fail 2 "egress log without a name" egress log
run_nook egress log '../w'
isnt "$status" 0 "egress log refuses a name with a path in it"
# -f: new entries as they come (the first newline ends the torn line above), until the sandbox stops
"$NOOK" egress log -f w >"$NOOK_HOME.follow" 2>&1 &
fpid=$!
sleep 0.3
printf '\n%s\n' '{"time":"2026-12-03T07:00:03Z","sandbox":"w","method":"PUT","host":"h.example","path":"/f","status":403,"decision":"deny","rule":null,"reason":"no --allow-http rule matches","bytesUp":0,"bytesDown":0,"proto":"h2"}' >>"$sdir/egress.log"
wait_for 5 grep -q "deny 403 PUT h.example/f (no --allow-http rule matches)" "$NOOK_HOME.follow"
is "$?" 0 "egress log -f prints an entry appended later"
run_nook stop w
gone() { ! kill -0 "$fpid" 2>/dev/null || [[ $(ps -o stat= -p "$fpid") == Z* ]]; }
wait_for 10 gone
is "$?" 0 "egress log -f ends when the sandbox stops"
wait "$fpid" 2>/dev/null
run_nook rm w
