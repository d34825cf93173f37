#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook-egress towards an upstream that speaks HTTP/2 (issue #14 item 4, docs/design/egress.md
# "HTTP/2 to upstreams"), and a secret whose value was not kept ("value": null).  The world is
# egress_world.sh's, plus h2.test / h2b.test at 198.51.100.12: egress_h2_upstream.py, an h2-only
# HTTPS server (python3-h2) that logs what it received.  up.test stays HTTP/1.1-only (no ALPN):
# the fallback.  No packet leaves the namespaces this file creates.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/egress_world.sh"

egress_world_require
# python3-h2 is Debian's: /usr/bin/python3 has it where a python3 earlier in PATH (pyenv) may not
H2PY=""
for py in python3 /usr/bin/python3; do
        "$py" -c 'import h2' 2>/dev/null && H2PY=$py && break
done
[[ -n $H2PY ]] || plan skip_all "python3-h2 is not installed (scripts/deps.sh installs it)"

D=$(mktemp -d /tmp/nook-egress-h2.XXXXXX)
G=$EG_G
trap '[[ -n ${KEEP:-} ]] && cp "$D/audit.log" /tmp/egress-h2-audit.log; egress_world_down; _tap_finish' EXIT
plan 51
egress_world_up "$D" || bail_out "cannot build the egress test world"

# ---- the h2 upstream: h2.test and h2b.test at 198.51.100.12 ----
_eg_mkcert h2 testca h2.test h2b.test || bail_out "cannot make the h2 upstream's certificate"
ip -n "$EG_P" addr add 198.51.100.12/24 dev "${EG_P}b" || bail_out "cannot add 198.51.100.12"
echo "198.51.100.12 h2.test h2b.test" >>"/etc/netns/$EG_X/hosts"
ip netns exec "$EG_P" "$H2PY" "$HERE/egress_h2_upstream.py" "$D/h2.log" 198.51.100.12 443 "$D/h2.crt" "$D/h2.key" \
        >/dev/null 2>>"$D/upstream.err" &
EG_UP_PIDS+=("$!")
disown
wait_for 5 ip netns exec "$EG_P" bash -c "exec 3<>/dev/tcp/198.51.100.12/443" 2>/dev/null ||
        bail_out "the h2 upstream did not start: $(cat "$D/upstream.err")"

SENTINEL="nook-sentinel-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
BODYSECRET="nook-bodysecret-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
PH="nook-ph-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
PHB="nook-ph-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
PHN="nook-ph-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
python3 - "$D/config.json" "$SENTINEL" "$PH" "$BODYSECRET" "$PHB" "$PHN" "$D/testca.crt" <<'PY'
import json, sys
out, sentinel, ph, bodysecret, phb, phn, ca = sys.argv[1:8]
json.dump({"sandbox": "egh2", "mode": "public",
           "secrets": [{"name": "GH_TOKEN", "placeholder": ph, "value": sentinel, "hosts": ["h2.test", "up.test"]},
                       {"name": "BODY_TOKEN", "placeholder": phb, "value": bodysecret, "hosts": ["h2.test"], "body": True},
                       {"name": "OLD_TOKEN", "placeholder": phn, "value": None, "hosts": ["h2.test"]}],
           "allowHttp": ["GET https://h2.test/*", "HEAD https://h2.test/*", "POST https://h2.test/upload",
                         "* https://h2b.test/*", "* https://up.test/*"],
           "extraCaPem": open(ca).read()}, open(out, "w"))
PY
chmod 600 "$D/config.json"
egress_gateway_up "$EGRESS" "$D/config.json" || bail_out "the gateway did not get ready (a null value refused?)"
GW_PID=$EG_GW_PID
ok "the gateway takes a config with a secret whose value is null"

# gc: curl in the guest (HTTP/1.1 to the gateway unless GC_HTTP=--http2)
gc() {
        out=$(ip netns exec "$G" curl -sS -m 20 "${GC_HTTP:---http1.1}" --cacert "$D/state/ca.pem" \
                --resolve h2.test:443:198.51.100.12 --resolve h2b.test:443:198.51.100.12 \
                --resolve up.test:443:198.51.100.10 -w '\n%{http_code}' "$@" 2>"$D/curl.err")
        status=$?
        err=$(cat "$D/curl.err")
}
# the last record of the h2 upstream's log, one field
h2last() { python3 -c "import json,sys; r=[json.loads(l) for l in open('$D/h2.log')][-1]; print(eval(sys.argv[1]))" "$1" 2>/dev/null; }

# ---- an HTTP/1.1 guest request goes upstream over h2, the secret substituted ----
: >"$D/h2.log"
gc -H "Authorization: Bearer $PH" -H "X-Mixed-Case: v" "https://h2.test/repos/x?t=$PH"
is "${out##*$'\n'}" 200 "HTTP/1.1 guest, h2 upstream: 200"
like "$out" "h2 upstream saw GET /repos/x" "the guest gets the h2 upstream's body"
is "$(h2last 'r["proto"]')" h2 "the upstream saw HTTP/2"
is "$(h2last 'r["authority"]')" h2.test "Host became :authority"
is "$(h2last 'dict(r["headers"]).get("authorization")')" "Bearer $SENTINEL" "the upstream received the real secret in a header"
is "$(h2last 'r["path"]')" "/repos/x?t=$SENTINEL" "and in :path"
grep -q "$PH" "$D/h2.log" && not_ok "no placeholder reaches the h2 upstream" || ok "no placeholder reaches the h2 upstream"
is "$(h2last '",".join(sorted(k for k, v in r["headers"] if k in ("host", "connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection") or k != k.lower()))')" "" \
        "no Host, connection-specific or upper-case field went upstream over h2"
is "$(h2last 'dict(r["headers"]).get("x-mixed-case")')" v "other fields pass, names lower-cased"
gc -i -H "Authorization: Bearer $PH" https://h2.test/echo
like "$out" "x-echo-authorization: Bearer \*\*\*\*" "a secret an h2 upstream echoes comes back masked"
[[ $out == *"$SENTINEL"* ]] && not_ok "the guest never sees the real value" || ok "the guest never sees the real value"
gc -I https://h2.test/repos/head
like "$out" "content-length: 33" "HEAD over h2: the length passes, no body"
is "${out##*$'\n'}" 200 "HEAD over h2: 200"

# ---- rules and placeholders still apply ----
: >"$D/h2.log"
gc -X POST https://h2.test/repos/x
is "${out##*$'\n'}" 403 "a POST no rule allows: 403 before anything goes over h2"
like "$out" "denied POST https://h2.test/repos/x .no --allow-http rule matches." "the 403 body names the rule check"
gc -H "X-Token: $PH" https://h2b.test/x
is "${out##*$'\n'}" 403 "a placeholder to a host its secret does not list: 403"
[[ -s $D/h2.log ]] && not_ok "nothing reached the h2 upstream for refused requests" "$(cat "$D/h2.log")" || ok "nothing reached the h2 upstream for refused requests"

# ---- "value": null: never substituted, a 403 that says why ----
gc -H "Authorization: Bearer $PHN" https://h2.test/repos/x
is "${out##*$'\n'}" 403 "the placeholder of a secret whose value was not kept: 403"
like "$out" "the value of secret OLD_TOKEN was not kept across the restart" "the 403 body says the value was not kept"
like "$out" "create the sandbox again with OLD_TOKEN in the environment" "and what to do"
grep -q '"decision":"block".*OLD_TOKEN was not kept' "$D/audit.log" && ok "the audit line: block, with the reason" || not_ok "null-value audit" "$(tail -3 "$D/audit.log")"
[[ -s $D/h2.log ]] && not_ok "the null-value request reached no upstream" || ok "the null-value request reached no upstream"

# ---- bodies stream both ways ----
python3 -c "
import sys
sys.stdout.buffer.write(b'y' * 3000000 + b'$PHB' + b'z' * 2000001)" >"$D/big.body"
expect=$(python3 -c "
import hashlib
print(hashlib.sha256(b'y' * 3000000 + b'$BODYSECRET' + b'z' * 2000001).hexdigest())")
gc -H "Transfer-Encoding: chunked" --data-binary @"$D/big.body" https://h2.test/upload
like "$out" "\"sha256\": \"$expect\"" "a 5 MB chunked upload arrives whole over h2, the body secret substituted"
head -c 5000041 /dev/urandom >"$D/rand.body"
expect=$(sha256sum <"$D/rand.body" | cut -d' ' -f1)
gc --data-binary @"$D/rand.body" https://h2b.test/upload
like "$out" "\"len\": 5000041, \"sha256\": \"$expect\"" "a 5 MB Content-Length upload arrives whole over h2"
gc -o /dev/null -w '%{size_download}' https://h2.test/big/20000000
like "$out" "^20000000" "a 20 MB answer with content-length arrives whole"
gc -o /dev/null -w '%{size_download}' https://h2.test/nolen/3000001
like "$out" "^3000001" "a 3 MB answer without content-length arrives whole (chunked to the guest)"
grep -q '"path":"/big/20000000".*"status":200.*"bytesDown":200000[0-9][0-9]' "$D/audit.log" &&
        ok "the audit counts the answer's bytes down" || not_ok "audit bytes" "$(grep big "$D/audit.log")"

# an upstream that answers before it has read the body (h2: RST_STREAM NO_ERROR after the answer)
gc --data-binary @"$D/rand.body" https://h2b.test/early
is "${out##*$'\n'}" 413 "an early answer before the body was read reaches the guest"
like "$out" "too large" "with its body"
gc https://h2b.test/repos/after-early
is "${out##*$'\n'}" 200 "and the next request on that h2 connection works (the rest of the body was dropped)"

# ---- one h2 upstream connection carries a guest connection's requests as streams ----
: >"$D/h2.log"
gc -H "Authorization: Bearer $PH" https://h2.test/repos/a https://h2.test/repos/b https://h2.test/repos/c
like "$out" "saw GET /repos/a.*200.*saw GET /repos/b.*200.*saw GET /repos/c.*200" "three keep-alive requests answered"
is "$(python3 -c "import json; r=[json.loads(l) for l in open('$D/h2.log')]; print(len({x['conn'] for x in r}), len(r))")" "1 3" \
        "they went as three streams of one upstream h2 connection"

# ---- HTTP/2 on both sides ----
GC_HTTP=--http2 gc -H "Authorization: Bearer $PH" https://h2.test/repos/a https://h2.test/repos/b
like "$out" "saw GET /repos/a.*200.*saw GET /repos/b.*200" "h2 guest, h2 upstream: two streams answered"
GC_HTTP=--http2 gc -o /dev/null -w '%{size_download}' https://h2.test/big/3000000
like "$out" "^3000000" "h2 both sides: a 3 MB answer arrives whole"
GC_HTTP=--http2 gc --data-binary @"$D/rand.body" https://h2b.test/upload
like "$out" "\"len\": 5000041, \"sha256\": \"$expect\"" "h2 both sides: a 5 MB upload arrives whole"

# ---- the upstream resets or goes away: a clear 502, no hang ----
gc https://h2.test/rst
is "${out##*$'\n'}" 502 "RST_STREAM before the answer: 502"
like "$out" "reset the HTTP/2 stream before answering .INTERNAL_ERROR." "the 502 body says the upstream reset the stream"
gc https://h2.test/goaway
is "${out##*$'\n'}" 502 "GOAWAY before the answer: 502"
like "$out" "ended the HTTP/2 connection before answering .GOAWAY, ENHANCE_YOUR_CALM." "the 502 body names the GOAWAY"
GC_HTTP=--http2 gc https://h2.test/rst
is "${out##*$'\n'}" 502 "an h2 guest gets the 502 too"
# 100 KB: the guest's upload fits in the socket buffers on the way, so the guest always gets to
# read the answer (with 5 MB, the gateway would have to close on an upload still going)
head -c 100000 "$D/rand.body" >"$D/small.body"
gc --data-binary @"$D/small.body" https://h2b.test/rstbody
is "${out##*$'\n'}" 502 "RST_STREAM as soon as the request head arrives, body on its way: 502"
like "$out" "reset the HTTP/2 stream before answering .REFUSED_STREAM." "with the reason"
gc -o /dev/null https://h2.test/rstmid
isnt "$status" 0 "a reset in the middle of the answer fails the guest's transfer (curl: $err)"
grep -q '"path":"/rstmid".*"decision":"error".*in the middle of the answer' "$D/audit.log" &&
        ok "the audit line says the stream was reset mid-answer" || not_ok "rstmid audit" "$(grep rstmid "$D/audit.log")"
gc https://h2.test/repos/after
is "${out##*$'\n'}" 200 "after resets and a GOAWAY the next request gets a fresh h2 connection"

# ---- an HTTP/1.1-only upstream (no ALPN) still works: the fallback ----
: >"$D/up.log"
gc -H "Authorization: Bearer $PH" https://up.test/repos/fallback
is "${out##*$'\n'}" 200 "an upstream that does not pick h2: HTTP/1.1 as before"
grep -q '"line": "GET /repos/fallback HTTP/1.1"' "$D/up.log" && ok "the HTTP/1.1 upstream saw HTTP/1.1" || not_ok "fallback" "$(cat "$D/up.log")"
grep -q "Bearer $SENTINEL" "$D/up.log" && ok "and the real secret" || not_ok "fallback secret"

# ---- nothing secret in the audit log or the gateway's stderr ----
leaks_found=""
for f in "$D/audit.log" "$D/state/gateway.stderr"; do
        for s in "$SENTINEL" "$BODYSECRET" "$PH" "$PHB" "$PHN"; do
                grep -qa -- "$s" "$f" && leaks_found+=" $s in $f"
        done
done
is "$leaks_found" "" "no secret and no placeholder in the audit log or the gateway's stderr"

egress_gateway_stop
wait_for 5 sh -c "! kill -0 $GW_PID 2>/dev/null" && ok "EOF on fd 3: the gateway exits" || not_ok "the gateway outlived fd 3"
