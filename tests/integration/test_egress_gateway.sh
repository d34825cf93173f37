#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nook-egress on its own (issue #14, docs/design/egress.md): egress_driver.py plays the
# supervisor's side of the fd-3 protocol; the gateway runs in a "gateway" netns wired to a
# "public" netns with HTTPS upstreams (a test CA made here); curl runs in a "guest" netns whose
# nftables nat output chain redirects ports 80/443 to the gateway's listeners, as the sandbox's
# does.  No packet leaves the namespaces this file creates.  KEEP=1 copies the audit log to
# /tmp/egress-audit.log for a look after a failure.
#
# The world (three netns, upstreams, certificates) is egress_world.sh's.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/egress_world.sh"

egress_world_require

D=$(mktemp -d /tmp/nook-egress.XXXXXX)
G=$EG_G P=$EG_P
trap '[[ -n ${KEEP:-} ]] && cp "$D/audit.log" /tmp/egress-audit.log; egress_world_down; _tap_finish' EXIT
plan 92
egress_world_up "$D" || bail_out "cannot build the egress test world"

# ---- the gateway: secrets, rules, the test CA as extraCaPem ----
SENTINEL="nook-sentinel-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
BODYSECRET="nook-bodysecret-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
PH="nook-ph-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
PHB="nook-ph-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
python3 - "$D/config.json" "$SENTINEL" "$PH" "$BODYSECRET" "$PHB" "$D/testca.crt" <<'PY'
import json, sys
out, sentinel, ph, bodysecret, phb, ca = sys.argv[1:7]
json.dump({"sandbox": "egtest", "mode": "public",
           "secrets": [{"name": "GH_TOKEN", "placeholder": ph, "value": sentinel, "hosts": ["up.test"], "body": False},
                       {"name": "BODY_TOKEN", "placeholder": phb, "value": bodysecret, "hosts": ["up.test"], "body": True}],
           "allowHttp": ["GET https://up.test/repos/*", "POST https://up.test/upload", "* https://other.test/*",
                         "* http://up.test/*", "GET https://bad.test/*", "GET https://rebind.test/*"],
           "extraCaPem": open(ca).read()}, open(out, "w"))
PY
chmod 600 "$D/config.json"
egress_gateway_up "$EGRESS" "$D/config.json" || bail_out "the gateway did not get ready"
GW_PID=$EG_GW_PID
ok "the gateway speaks the fd-3 protocol: CA sent, listeners taken, ready"
like "$(cat "$D/state/ca.pem")" "BEGIN CERTIFICATE" "the CA is PEM"
openssl x509 -in "$D/state/ca.pem" -noout -text >"$D/ca.txt" 2>&1
like "$(cat "$D/ca.txt")" "prime256v1" "the CA key is EC P-256"
like "$(cat "$D/ca.txt")" "CA:TRUE, pathlen:0" "the CA is a CA that signs only leaves"

# gc: curl in the guest, trusting the gateway's CA; --resolve plays the guest's DNS.  HTTP/1.1
# unless GC_HTTP=--http2 (curl would pick h2, which the gateway offers).
gc() {
        out=$(ip netns exec "$G" curl -sS -m "${GC_MAX:-10}" "${GC_HTTP:---http1.1}" --cacert "$D/state/ca.pem" \
                --resolve up.test:443:198.51.100.10 --resolve other.test:443:198.51.100.10 \
                --resolve up.test:80:198.51.100.10 --resolve bad.test:443:198.51.100.11 \
                --resolve rebind.test:443:10.99.0.10 -w '\n%{http_code}' "$@" 2>"$D/curl.err")
        status=$?
        err=$(cat "$D/curl.err")
}

# ---- secrets: substituted for a listed host, blocked elsewhere ----
gc -H "Authorization: Bearer $PH" "https://up.test/repos/x?token=$PH"
is "${out##*$'\n'}" 200 "GET to a listed host with the placeholder: 200 through the gateway"
like "$out" "upstream saw GET /repos/x" "the guest gets the upstream's body"
grep -q "Bearer $SENTINEL" "$D/up.log" && ok "the upstream received the real secret in the header" || not_ok "the upstream received the real secret in the header" "$(cat "$D/up.log")"
grep -q "token=$SENTINEL" "$D/up.log" && ok "and in the request line" || not_ok "and in the request line"
grep -q "$PH" "$D/up.log" && not_ok "no placeholder reaches the listed upstream" || ok "no placeholder reaches the listed upstream"
gc -i -H "Authorization: Bearer $PH" https://up.test/repos/echo
like "$out" "X-Echo-Authorization: Bearer \*\*\*\*" "a secret the upstream echoes in a header comes back masked"
like "$out" "Authorization: Bearer \*\*\*\*\*.*200" "and in the body, lengths kept (the response is complete)"
[[ $out == *"$SENTINEL"* ]] && not_ok "the guest never sees the real value" || ok "the guest never sees the real value"
gc --raw -i -H "Authorization: Bearer $PH" https://up.test/repos/trailerecho
like "$out" "ext=Bearer_\*\*\*\*" "a secret the upstream echoes in a chunk extension comes back masked"
like "$out" "X-Echo: Bearer \*\*\*\*" "and in a trailer"
[[ $out == *"$SENTINEL"* ]] && not_ok "the guest never sees the real value in a chunked answer's lines" "$out" ||
        ok "the guest never sees the real value in a chunked answer's lines"
leaf=$(ip netns exec "$G" sh -c "openssl s_client -connect 198.51.100.10:443 -servername up.test </dev/null 2>/dev/null | openssl x509 -noout -text")
like "$leaf" "DNS:up.test" "the leaf made for the SNI has SAN = the name"

: >"$D/up.log"
gc -H "X-Token: $PH" https://other.test/anything
is "${out##*$'\n'}" 403 "a placeholder to an unlisted host: 403"
like "$out" "blocked: the placeholder of secret GH_TOKEN goes only to its hosts" "the 403 body says why"
[[ -s $D/up.log ]] && not_ok "the unlisted upstream received nothing" || ok "the unlisted upstream received nothing"
gc -H "X-Token: $PH" http://up.test/plain
is "${out##*$'\n'}" 403 "a placeholder over plain HTTP, even to a listed host: 403"
gc -H "Host: other.test" https://up.test/repos/x
like "$out" "differs from the TLS server name" "SNI != Host is refused with a reason"
gc -H "X-Token: $PH" -H "Host: other.test" https://up.test/repos/x
is "${out##*$'\n'}" 403 "a placeholder with SNI != Host: 403"
[[ -s $D/up.log ]] && not_ok "nothing reached an upstream for the refused requests" "$(cat "$D/up.log")" || ok "nothing reached an upstream for the refused requests"

# ---- body substitution (body:true), a placeholder of a body:false secret stays as it is ----
gc --data-binary "a=$PHB&b=$PH" https://up.test/upload
is "${out##*$'\n'}" 200 "POST with placeholders in the body: 200"
grep -q "a=$BODYSECRET&b=$PH\"" "$D/up.log" && ok "the body:true secret is substituted in the body, the body:false one is not" || not_ok "body substitution" "$(cat "$D/up.log")"
head -c 100000 /dev/zero | tr '\0' 'y' >"$D/big.body"
printf '%s' "$PHB" >>"$D/big.body"
head -c 50001 /dev/zero | tr '\0' 'z' >>"$D/big.body"
gc -H "Transfer-Encoding: chunked" --data-binary @"$D/big.body" https://up.test/upload
python3 -c "
import json,sys
recs=[json.loads(l) for l in open('$D/up.log')]
b=recs[-1]['body']
sys.exit(0 if b=='y'*100000+'$BODYSECRET'+'z'*50001 else 1)" && ok "a placeholder across read boundaries of a chunked 150 KB body is substituted" || not_ok "streaming substitution"
# a 2 MB Content-Length body, bytes that never repeat, the placeholder over every 64 KiB boundary
python3 - "$D/big2.body" "$D/big2.want" "$PHB" "$BODYSECRET" <<'PY'
import hashlib, sys
out, want, ph, value = sys.argv[1], sys.argv[2], sys.argv[3].encode(), sys.argv[4].encode()
body = b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(65536))
parts = [body[i:i + 65536 - 20] for i in range(0, len(body), 65536)]
open(out, "wb").write(ph.join(parts))
open(want, "w").write(hashlib.sha256(value.join(parts)).hexdigest())
PY
gc --data-binary @"$D/big2.body" https://up.test/upload
is "$(python3 -c "import hashlib, json; print(hashlib.sha256(json.loads(open('$D/up.log').readlines()[-1])['body'].encode('latin-1')).hexdigest())")" \
        "$(cat "$D/big2.want")" "a 2 MB body with the placeholder over every 64 KiB arrives substituted, the rest exact"

# ---- --allow-http: by method and path, with the 403 body ----
gc -X POST https://up.test/repos/x
is "${out##*$'\n'}" 403 "POST where only GET is allowed: 403"
like "$out" "nook egress: denied POST https://up.test/repos/x .no --allow-http rule matches." "the 403 body names the request and why"
gc https://up.test/user
is "${out##*$'\n'}" 403 "GET outside the allowed path: 403"
gc "https://up.test/repos/../user" --path-as-is
is "${out##*$'\n'}" 403 "a dot-segment escape from the allowed path: 403"
gc https://up.test/repos/a/b/c
is "${out##*$'\n'}" 200 "GET under the allowed path (any depth): 200"

# ---- upstream trust, TLS, the original destination ----
gc https://bad.test/x
is "${out##*$'\n'}" 502 "an upstream with a certificate of an unknown CA: 502"
like "$out" "upstream TLS failed for bad.test: certificate verify failed" "the guest is told why"
gc http://up.test:443/
isnt "$status" 0 "plain HTTP to port 443 is refused (curl: $err)"
gc --resolve up.test:443:198.51.100.11 https://up.test/repos/x
like "$out" "'up.test' does not resolve to 198.51.100.11" "an original destination the host's resolution does not give: refused"
gc https://rebind.test/x
like "$out" "10.99.0.10 is not a public address" "a name resolving to a private address (rebinding): refused"

# ---- keep-alive: two requests on one guest connection ----
: >"$D/up.log"
gc https://up.test/repos/1 https://up.test/repos/2
is "$(grep -c '"line"' "$D/up.log")" 2 "two requests on one keep-alive connection both arrive"
: >"$D/up.log"
gc https://up.test/repos/pool1
gc https://up.test/repos/pool2
is "$(python3 -c "import json; print(len({json.loads(l)['peer'] for l in open('$D/up.log')}))")" 1 \
        "two guest connections in a row share one pooled upstream connection"
gc https://up.test/repos/chunked
like "$out" "hello chunked world" "a chunked response is relayed"

# ---- bulk bodies: read-ahead and several TLS records per write keep every byte in place ----
pattern_sha() { python3 "$HERE/egress_upstream.py" --pattern-sha256 "$@"; }
gc -o "$D/dl" https://up.test/repos/pattern/5000000
is "$(sha256sum <"$D/dl" | cut -d' ' -f1)" "$(pattern_sha 5000000)" "a 5 MB body (Content-Length) arrives byte for byte"
gc -o "$D/dl" https://up.test/repos/patternchunked/3000000
is "$(sha256sum <"$D/dl" | cut -d' ' -f1)" "$(pattern_sha 3000000)" "a 3 MB chunked body (70000-byte chunks) arrives byte for byte"
gc -o "$D/dl" -H "Authorization: Bearer $PH" https://up.test/repos/patternecho/1000000
is "$(sha256sum <"$D/dl" | cut -d' ' -f1)" "$(pattern_sha 1000000 "$SENTINEL")" \
        "the value an upstream writes across every 64 KiB of a 1 MB body comes back masked, the rest exact"
: >"$D/up.log"
gc https://up.test/repos/empty https://up.test/repos/empty https://up.test/repos/x
like "$(printf '%s' "$out" | tr '\n' ' ')" "^ 200 200upstream saw GET /repos/x  200$" \
        "empty bodies on a keep-alive connection: each answer arrives, the next request goes on"
is "$(python3 -c "import json; print(len({json.loads(l)['peer'] for l in open('$D/up.log')}))")" 1 \
        "and the three requests shared one upstream connection"
gc -I https://other.test/pattern/100 https://other.test/x
like "$out" "Content-Length: 100.*200.*Content-Length.*200" "HEAD then GET on a keep-alive connection: both answered"
# a streamed answer: its head reaches the guest before the body exists (the body waits for /release)
out=$(ip netns exec "$G" python3 - "$D/state/ca.pem" <<'PY' 2>&1
import socket, ssl, subprocess, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
s = ctx.wrap_socket(socket.create_connection(("198.51.100.10", 443), timeout=10), server_hostname="up.test")
s.sendall(b"GET /repos/headfirst HTTP/1.1\r\nHost: up.test\r\n\r\n")
got = b""
try:
    while b"\r\n\r\n" not in got:
        got += s.recv(4096)
    print("head before body:", got.split(b"\r\n")[0].decode())
except socket.timeout:
    print("no head within 10 s")
subprocess.run(["curl", "-sS", "-m", "10", "-o", "/dev/null", "--cacert", sys.argv[1],
                "--resolve", "up.test:443:198.51.100.10", "https://up.test/repos/release"])
while not got.endswith(b"body\n"):
    got += s.recv(4096)
print("then the body")
PY
)
like "$out" "head before body: HTTP/1.1 200 OK.then the body" "a head goes to the guest before the body exists (nothing waits in the gateway's buffer)"
# TCP_NODELAY on both of the gateway's sockets of a request (guest side, upstream side): without
# it a small answer written while an earlier small write (a session ticket) is unacknowledged
# waits for the guest's delayed ACK, 40 ms per request.  Read from the sockets themselves
# (pidfd_getfd, root) while a request is in flight (/headfirst's body waits for /release).
out=$(ip netns exec "$G" python3 - "$D/state/ca.pem" "$GW_PID" <<'PY' 2>&1
import ctypes, os, socket, ssl, subprocess, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
s = ctx.wrap_socket(socket.create_connection(("198.51.100.10", 443), timeout=10), server_hostname="up.test")
s.sendall(b"GET /repos/headfirst HTTP/1.1\r\nHost: up.test\r\n\r\n")
got = b""
while b"\r\n\r\n" not in got:
    got += s.recv(4096)
libc = ctypes.CDLL(None, use_errno=True)
pidfd = os.pidfd_open(int(sys.argv[2]))
conns = nodelay = 0
for name in os.listdir("/proc/%s/fd" % sys.argv[2]):
    if not os.readlink("/proc/%s/fd/%s" % (sys.argv[2], name)).startswith("socket:"):
        continue
    fd = libc.syscall(438, pidfd, int(name), 0)  # pidfd_getfd
    if fd < 0:
        print("pidfd_getfd failed: errno", ctypes.get_errno())
        continue
    t = socket.socket(fileno=fd)
    try:
        t.getpeername()
        connected = t.family in (socket.AF_INET, socket.AF_INET6) and t.type == socket.SOCK_STREAM
    except OSError:
        connected = False
    if connected:
        conns += 1
        nodelay += t.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    t.close()
print("connected TCP sockets %d, with TCP_NODELAY %d" % (conns, nodelay))
subprocess.run(["curl", "-sS", "-m", "10", "-o", "/dev/null", "--cacert", sys.argv[1],
                "--resolve", "up.test:443:198.51.100.10", "https://up.test/repos/release"])
while not got.endswith(b"body\n"):
    got += s.recv(4096)
PY
)
if [[ $out =~ connected\ TCP\ sockets\ ([0-9]+),\ with\ TCP_NODELAY\ ([0-9]+) ]] &&
        ((BASH_REMATCH[1] >= 2 && BASH_REMATCH[1] == BASH_REMATCH[2])); then
        ok "every connected TCP socket of the gateway has TCP_NODELAY (guest and upstream side: $out)"
else
        not_ok "TCP_NODELAY on the gateway's sockets" "$out"
fi

# ---- HTTP/2 from the guest (ALPN h2): the same checks per stream, HTTP/1.1 upstream ----
: >"$D/up.log"
GC_HTTP=--http2 gc -v -H "Authorization: Bearer $PH" https://up.test/repos/h2 https://up.test/repos/chunked
like "$err" "ALPN: server accepted h2" "the gateway offers h2 and the guest takes it"
like "$err" "SSL connection using TLSv1.3 / TLS_AES_128_GCM_SHA256" \
        "towards the guest the gateway's TLS 1.3 suite order wins: AES-128-GCM (curl's own order puts AES-256-GCM first)"
like "$out" "upstream saw GET /repos/h2.*200.*hello chunked world.*200" "two streams on one h2 connection, a chunked answer included"
grep -q "Bearer $SENTINEL" "$D/up.log" && ok "over h2 the listed upstream gets the real secret" || not_ok "h2 substitution" "$(cat "$D/up.log")"
GC_HTTP=--http2 gc -H "X-Token: $PH" https://other.test/x
is "${out##*$'\n'}" 403 "over h2 a placeholder to an unlisted host: 403"
GC_HTTP=--http2 gc -X POST https://up.test/repos/x
like "$out" "denied POST https://up.test/repos/x" "over h2 the rules deny with the 403 body"
GC_HTTP=--http2 gc --data-binary "a=$PHB" https://up.test/upload
grep -q "a=$BODYSECRET\"" "$D/up.log" && ok "over h2 a request body streams, substituted" || not_ok "h2 body" "$(tail -2 "$D/up.log")"
GC_HTTP=--http2 gc -o /dev/null -w '%{size_download}' https://up.test/repos/big/3000000
like "$out" "^3000000" "over h2 a 3 MB answer arrives whole (flow control)"
GC_HTTP=--http2 gc -H "Host: other.test" https://up.test/repos/x
like "$out" "differs from the TLS server name" "over h2 :authority != SNI is refused"
grep -q '"proto":"h2"' "$D/audit.log" && ok "h2 requests are audited with proto h2" || not_ok "h2 audit"
# bulk over h2 (h2.c: frames of one TLS record, the worker's answer taken by offsets, chunked
# decoded by http1_dechunk_feed, 1 MiB stream windows): every byte in place, both ways
GC_HTTP=--http2 gc -o "$D/dl" https://up.test/repos/pattern/5000000
is "$(sha256sum <"$D/dl" | cut -d' ' -f1)" "$(pattern_sha 5000000)" "over h2 a 5 MB body (Content-Length) arrives byte for byte"
GC_HTTP=--http2 gc -o "$D/dl" https://up.test/repos/patternchunked/3000000
is "$(sha256sum <"$D/dl" | cut -d' ' -f1)" "$(pattern_sha 3000000)" "over h2 a 3 MB chunked body (70000-byte chunks) arrives byte for byte"
GC_HTTP=--http2 gc -o "$D/dl" -H "Authorization: Bearer $PH" https://up.test/repos/patternecho/1000000
is "$(sha256sum <"$D/dl" | cut -d' ' -f1)" "$(pattern_sha 1000000 "$SENTINEL")" \
        "over h2 the value an upstream writes across every 64 KiB of a 1 MB body comes back masked"
GC_HTTP=--http2 gc --data-binary @"$D/big2.body" https://up.test/upload
is "$(python3 -c "import hashlib, json; print(hashlib.sha256(json.loads(open('$D/up.log').readlines()[-1])['body'].encode('latin-1')).hexdigest())")" \
        "$(cat "$D/big2.want")" "over h2 a 2 MB upload (past a 64 KiB window) arrives substituted, the rest exact"
GC_HTTP=--http2 gc -Z -o "$D/dl1" -o "$D/dl2" https://up.test/repos/pattern/3000000 https://up.test/repos/patternchunked/2000000
is "$(sha256sum <"$D/dl1" | cut -d' ' -f1) $(sha256sum <"$D/dl2" | cut -d' ' -f1)" "$(pattern_sha 3000000) $(pattern_sha 2000000)" \
        "over h2 two bulk streams at once on one connection both arrive byte for byte"
# a broken answer resets its stream (never a truncated body taken for a whole one); the gateway goes on
GC_HTTP=--http2 gc https://up.test/repos/badchunked
like "$status $err" "^[1-9][0-9]* .*(INTERNAL_ERROR|not closed cleanly)" "over h2 an answer with a bad chunk size: the stream is reset"
GC_HTTP=--http2 gc -o /dev/null https://up.test/repos/truncated/200000
like "$status $err" "^[1-9][0-9]* .*(INTERNAL_ERROR|not closed cleanly)" "over h2 an answer cut short of its Content-Length: the stream is reset"
GC_HTTP=--http2 gc https://up.test/repos/after-reset
like "$out" "upstream saw GET /repos/after-reset.*200" "over h2 the next request is served"

# ---- hostile HTTP from the guest: refused, never forwarded ----
raw() { ip netns exec "$G" python3 "$HERE/egress_rawclient.py" "$D/state/ca.pem" 198.51.100.10 up.test "$1" 2>&1; }
: >"$D/up.log"
like "$(raw 'POST /upload HTTP/1.1\r\nHost: up.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n')" \
        "400" "Content-Length with Transfer-Encoding (smuggling): 400"
like "$(raw 'GET /repos/x HTTP/1.1\nHost: up.test\n\n')" "400" "bare LF line ends: 400"
like "$(raw 'GET /repos/x HTTP/1.1\r\nHost: up.test\r\n folded\r\n\r\n')" "400" "an obs-fold header: 400"
like "$(raw "GET /repos/x HTTP/1.1\\r\\nHost: up.test\\r\\nX: $(head -c 70000 /dev/zero | tr '\0' a)\\r\\n\\r\\n")" "431" \
        "a 70 KB head: 431"
like "$(raw 'GET http://up.test/repos/x HTTP/1.1\r\nHost: up.test\r\n\r\n')" "400" "an absolute-form target: 400"
like "$(raw 'GET /repos/x HTTP/1.1\r\nHost: up.test\r\nHost: other.test\r\n\r\n')" "400" "two Host headers: 400"
[[ -s $D/up.log ]] && not_ok "none of them reached the upstream" "$(cat "$D/up.log")" || ok "none of them reached the upstream"

# ---- WebSocket: the upgrade is checked like any request, then bytes pass both ways ----
out=$(ip netns exec "$G" python3 "$HERE/egress_wsclient.py" "$D/state/ca.pem" 198.51.100.10 up.test /repos/ws 2>&1)
like "$out" "101" "a WebSocket upgrade to an allowed path: 101 from the upstream"
like "$out" "hello-ws" "bytes are relayed both ways after the upgrade"
out=$(ip netns exec "$G" python3 "$HERE/egress_wsclient.py" "$D/state/ca.pem" 198.51.100.10 up.test /ws 2>&1)
like "$out" "403" "a WebSocket upgrade outside the rules: 403"
out=$(ip netns exec "$G" python3 "$HERE/egress_wsclient.py" "$D/state/ca.pem" 198.51.100.10 up.test /repos/wsecho \
        "Authorization: Bearer $PH" 2>&1)
like "$out" "auth:Bearer \*\*\*\*.*hello-ws" "a secret the upstream echoes into a WebSocket stream comes back masked"
[[ $out == *"$SENTINEL"* ]] && not_ok "the guest never sees the real value in a WebSocket stream" "$out" ||
        ok "the guest never sees the real value in a WebSocket stream"

# ---- the audit log ----
sleep 0.2
python3 - "$D/audit.log" <<'PY' && ok "every audit line has the contract's fields" || not_ok "audit fields" "$(head -5 "$D/audit.log")"
import json, sys
keys = {"time", "sandbox", "method", "host", "path", "status", "decision", "rule", "reason", "bytesUp", "bytesDown", "proto"}
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) > 10, len(lines)
for l in lines:
    assert set(l) == keys, l
    assert l["sandbox"] == "egtest"
PY
grep -q '"decision":"block".*"host":"other.test"\|"host":"other.test".*"decision":"block"' "$D/audit.log" &&
        ok "the blocked placeholder is logged with decision block" || not_ok "block logged" "$(cat "$D/audit.log")"
grep -q '"rule":"GET https://up.test/repos/\*"' "$D/audit.log" && ok "allowed requests name their rule" || not_ok "rule logged"
grep -q '"proto":"ws"' "$D/audit.log" && ok "the WebSocket session is logged with proto ws" || not_ok "ws logged"
grep -q 'does not start with TLS' "$D/audit.log" && ok "the non-TLS connection is logged" || not_ok "non-TLS logged"
leaks_found=""
for f in "$D/audit.log" "$D/state/gateway.stderr" "/proc/$GW_PID/environ" "/proc/$GW_PID/cmdline"; do
        for s in "$SENTINEL" "$BODYSECRET" "$PH" "$PHB"; do
                grep -qa -- "$s" "$f" && leaks_found+=" $s in $f"
        done
done
is "$leaks_found" "" "no secret and no placeholder in the audit log, the gateway's stderr, environ or argv"
is "$(cat "/proc/$GW_PID/cmdline" | tr '\0' ' ')" "$EGRESS " "the gateway's argv is just its path"

# ---- a bad configuration: {"error": ...} naming the problem, and the gateway exits ----
bad_config() { # CONFIG-JSON: what the gateway answers, then its exit status
        python3 - "$EGRESS" "$1" <<'PY'
import os, socket, subprocess, sys
sup, gw = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
p = subprocess.Popen([sys.argv[1]], pass_fds=(gw.fileno(), 3), preexec_fn=lambda: os.dup2(gw.fileno(), 3),
                     stderr=subprocess.DEVNULL)
gw.close()
socket.send_fds(sup, [sys.argv[2].encode()], [os.open("/dev/null", os.O_WRONLY)])
print(sup.recv(65536).decode(), p.wait())
PY
}
out=$(bad_config '{"sandbox":"x","mode":"public","secrets":[{"name":"A","placeholder":"'"$PH"'","value":"a\r\nX: y","hosts":["a.test"]}]}')
like "$out" '"error":"secret .A.: the value holds a NUL, CR or LF byte.* 1$' "a secret value with CRLF is refused by name, exit 1"
out=$(bad_config '{"sandbox":"x","mode":"public","allowHttp":["get https://a.test/"]}')
like "$out" "Invalid HTTP rule 'get https://a.test/'.*upper case" "a bad rule is refused naming it"
out=$(bad_config '{"sandbox":"x","mode":"public","extraCaPem":"not a certificate"}')
like "$out" "'extraCaPem' holds no PEM certificate.* 1$" "a bad extraCaPem is refused at start (by the child that makes the CA), exit 1"

# ---- idle: 10 s after the last connection the gateway hands library pages back, and still works ----
rss_file() { awk '/^RssFile/ {print $2}' "/proc/$GW_PID/status"; }
# concurrent connections, each on its own thread: they all allocate from one malloc arena (a
# thread arena is an anonymous rw mapping at a 64 MiB boundary followed by its PROT_NONE rest,
# 64 MiB together; what a thread leaves live there pins its pages in an idle gateway)
pids=()
for i in 1 2 3; do
        ip netns exec "$G" curl -sS -m 20 --http1.1 -o /dev/null --cacert "$D/state/ca.pem" \
                --resolve up.test:443:198.51.100.10 "https://up.test/repos/pattern/$((i * 300000))" &
        pids+=("$!")
done
wait "${pids[@]}"
arenas=$(python3 - "$GW_PID" <<'PY'
import sys
maps = [l.split() for l in open("/proc/%s/maps" % sys.argv[1])]
span = lambda m: [int(x, 16) for x in m[0].split("-")]
n = 0
for m, nxt in zip(maps, maps[1:]):
    (lo, hi), (lo2, hi2) = span(m), span(nxt)
    if len(m) < 6 and len(nxt) < 6 and m[1].startswith("rw") and nxt[1].startswith("---") \
            and lo % (64 << 20) == 0 and lo2 == hi and hi2 - lo == 64 << 20:
        n += 1
print(n)
PY
)
is "$arenas" 0 "after concurrent connections the gateway has no per-thread malloc arena (M_ARENA_MAX 1)"
gc -o /dev/null https://up.test/repos/pattern/1000000
busy=$(rss_file)
wait_for 40 sh -c "[ \$(awk '/^RssFile/ {print \$2}' /proc/$GW_PID/status) -lt $((busy / 2)) ]" &&
        ok "idle, the gateway's mapped library pages shrink (RssFile below half of ${busy} KiB)" ||
        not_ok "idle page drop" "RssFile $(rss_file) KiB, after the traffic ${busy} KiB"
# (every page, the upstream pool and the leaf certificate come back at once: slow under ASan on
# a busy host, so this one request gets 30 s)
GC_MAX=30 gc https://up.test/repos/after-idle
like "$out" "upstream saw GET /repos/after-idle.*200" "after the idle drop a request is served (pages fault back in)" ||
        diag "curl exit $status: $err"

# ---- the gateway ends with its supervisor ----
egress_gateway_stop
wait_for 5 sh -c "! kill -0 $GW_PID 2>/dev/null" && ok "EOF on fd 3: the gateway exits" || not_ok "the gateway outlived fd 3"
