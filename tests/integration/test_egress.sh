#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The egress gateway end to end (issue #14), in the private test world of net_topology.sh: a real
# HTTPS upstream (egress_e2e_upstream.py, a certificate of a test CA) on the world's public hosts,
# clients in the guest (curl, Node fetch, Python urllib and requests).  The upstream receives the
# secret; the guest's env, disk and /proc, every host process's argv and environ, NOOK_HOME (logs,
# the audit log, the database, snapshots) never hold it (a sentinel grep).  A placeholder sent
# elsewhere is blocked, --allow-http allows and denies with the 403 body, an upstream the gateway
# cannot verify fails in the guest, DNS rebinding stays blocked, a restarted sticky sandbox has no
# value, a killed gateway is started again with the same CA, values and listeners (a request made
# meanwhile waits for it), and one killed too often is given up and fails closed.  No packet
# leaves the namespaces this file creates.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/net_topology.sh"

EGRESS_BIN="$NOOK_BUILD_DIR/src/egress/nook-egress"
if [[ ! -x $EGRESS_BIN ]]; then
        plan 1
        skip_expected "nook-egress not built in this tree"
        exit 0
fi
# the rootless path is the same code (test_egress_guest.sh)
net_topology_require ip slirp4netns dnsmasq busybox curl openssl nsenter nft node jq
/usr/bin/python3 -c 'import requests' 2>/dev/null || plan skip_all "python3-requests is not installed"
plan 55
trap 'net_topology_down; _tap_finish' EXIT
net_topology_up || bail_out "cannot build the test world"

SENT="nook-sentinel-$$-$RANDOM-s3cr3t"
pki="$NET_DIR/pki"
up_log="$NET_DIR/upstream.log"
mkdir -p "$pki"
(
        cd "$pki" || exit 1
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=nook test CA" \
                -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
        openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj "/CN=public.test"
        printf 'subjectAltName=DNS:public.test,DNS:other.test,DNS:rebind.test\nextendedKeyUsage=serverAuth\n' >ext
        openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile ext
) >/dev/null 2>&1 || bail_out "cannot make the test PKI"
: >"$up_log"
printf '%s\n' "$SENT" >"$pki/sentinel"
_net_bg "$NET_W" "$NET_DIR/https.pid" /usr/bin/python3 "$(dirname "$0")/egress_e2e_upstream.py" \
        "$pki/srv.pem" "$pki/srv.key" "$up_log" "$pki/sentinel"
wait_for 10 ip netns exec "$NET_UP" curl -sf --cacert "$pki/ca.pem" --resolve public.test:443:198.51.100.10 \
        -o /dev/null https://public.test/health || bail_out "the HTTPS upstream did not come up"

# the secret's value is in the environment of `nook create` only, never of this shell
create_with_secret() { TOK=$SENT run_nook_ns create "$@"; }
# gx NAME SHELL: a shell line in the guest, with the placeholder in $TOK
gx() { nx "$1" -- sh -c "$2"; }
up_lines() { wc -l <"$up_log"; }

# ---- a sandbox with a secret bound to public.test --------------------------------------------
create_with_secret --network public --secret TOK@public.test --egress-ca "$pki/ca.pem" eg
is "$status" 0 "create --secret TOK@public.test --egress-ca" || diag "$err"
gx eg 'printf %s "$TOK"'
ph=$out
like "$ph" '^nook-ph-[0-9a-f]{32}$' "the guest's TOK is a placeholder"
gx eg 'printf "%s\n" "$SSL_CERT_FILE" "$NODE_EXTRA_CA_CERTS" "$REQUESTS_CA_BUNDLE" "$CURL_CA_BUNDLE" | sort -u'
is "$out" "/etc/ssl/nook-ca-certificates.crt" "the four CA variables name the bundle in the writable layer"
gx eg 'grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE"'
base=$(grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt)
is "$out" "$((base + 1))" "the bundle is the system's plus the sandbox's CA"

gx eg 'curl -sS -m 10 -H "Authorization: Bearer $TOK" https://public.test/curl'
is "$out" "upstream GET /curl auth=real" "curl: the upstream receives the real value" || diag "$err"
grep -qF "Bearer $SENT" "$up_log"
is "$?" 0 "the upstream's own log holds the value (it did arrive)"
gx eg 'node -e "fetch(\"https://public.test/node\", {headers: {authorization: \"Bearer \" + process.env.TOK}}).then(r => r.text()).then(t => process.stdout.write(t))"'
is "$out" "upstream GET /node auth=real" "Node fetch: real value upstream" || diag "$err"
gx eg '/usr/bin/python3 -c "import os, urllib.request as u; r = u.Request(\"https://public.test/urllib\", headers={\"Authorization\": \"Bearer \" + os.environ[\"TOK\"]}); print(u.urlopen(r, timeout=10).read().decode(), end=\"\")"'
is "$out" "upstream GET /urllib auth=real" "Python urllib: real value upstream" || diag "$err"
gx eg '/usr/bin/python3 -c "import os, requests; print(requests.post(\"https://public.test/requests\", headers={\"Authorization\": \"Bearer \" + os.environ[\"TOK\"]}, data=b\"x\", timeout=10).text, end=\"\")"'
is "$out" "upstream POST /requests auth=real" "Python requests: real value upstream" || diag "$err"

gx eg 'curl -sS -m 10 --http2 -w "%{http_version}" -H "Authorization: Bearer $TOK" https://public.test/h2'
is "$out" "upstream GET /h2 auth=real
2" "curl --http2: HTTP/2 to the gateway, the real value upstream" || diag "$err"
n=$(up_lines)
gx eg 'curl -sS -m 10 -w "\n%{http_code}" -H "Authorization: Bearer $TOK" https://other.test/steal'
like "$out" '403$' "a placeholder to an unlisted host gets 403"
is "$(up_lines)" "$n" "... and never reaches that host"
gx eg 'curl -sS -m 10 -w "\n%{http_code}" -H "Authorization: Bearer $TOK" http://public.test/plain'
like "$out" '403$' "a placeholder over plain HTTP (port 80) is blocked"
gx eg 'curl -sS -m 10 -w "\n%{http_code}" -H "Host: public.test" -H "Authorization: Bearer $TOK" --resolve other.test:443:198.51.100.10 https://other.test/sni'
like "$out" '(400|403)$|^$' "a placeholder with SNI other.test and Host public.test is refused"
is "$(up_lines)" "$n" "... none of them reached an upstream"
gx eg 'curl -sS -m 10 https://public.test/noauth'
is "$out" "upstream GET /noauth auth=none" "a request without the placeholder passes (no --allow-http rule)"
gx eg 'curl -sS -m 5 -o /dev/null https://rebind.test/'
isnt "$status" 0 "DNS rebinding (rebind.test -> 10.99.0.10) stays blocked"
gx eg 'curl -sS -m 5 -o /dev/null http://10.99.0.10/'
isnt "$status" 0 "a private address on port 80 stays blocked"
gx eg '/usr/bin/python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); s.connect((\"198.51.100.10\", 443)); s.send(b\"q\"); s.recv(1)"'
isnt "$status" 0 "UDP to 443 (QUIC) is rejected"

# the sandbox's ruleset, read from its network namespace
run_nook_ns inspect eg
sup=$(jq -r '[.. | .supervisorPid? // empty][0]' <<<"$out")
init=""
for p in $(pgrep -P "$sup"); do
        [[ $(readlink /proc/$p/ns/net) != "$(readlink /proc/$sup/ns/net)" ]] && init=$p
done
rules=$(nsenter -t "$init" -n nft list table inet nook 2>&1)
like "$rules" "tcp dport 443 redirect to :[0-9]+" "the sandbox's netns redirects 443 to the gateway"
like "$rules" "udp dport 443 reject" "... and rejects UDP 443"
egress_pid=$(pgrep -P "$sup" -x nook-egress)
check "the gateway is the supervisor's child, outside the sandbox's netns" \
        test -n "$egress_pid" -a "$(readlink /proc/$egress_pid/ns/net)" = "$(readlink /proc/$sup/ns/net)"

# ---- the audit log -------------------------------------------------------------------------------
run_nook_ns egress log eg
like "$out" "allow 200 GET public.test/curl" "egress log: the allowed request"
like "$out" "block 403 [A-Z]+ other.test/steal" "egress log: the blocked placeholder"
run_nook_ns egress log --json eg
like "$out" '"path":"/h2"[^}]*"proto":"h2"' "egress log: the HTTP/2 request, proto h2"
run_nook_ns egress log --json eg
json_lines() { jq -e . >/dev/null <<<"$1"; }
check "egress log --json: every line is JSON" json_lines "$out"
unlike "$out" "nook-ph-|$SENT" "the audit log holds neither a placeholder nor the value"

# ---- HTTP rules ---------------------------------------------------------------------------------
run_nook_ns create --network public --egress-ca "$pki/ca.pem" --allow-http 'GET https://public.test/ok/*' rules
is "$status" 0 "create --allow-http" || diag "$err"
gx rules 'curl -sS -m 10 https://public.test/ok/a/b'
is "$out" "upstream GET /ok/a/b auth=none" "--allow-http: a matching GET passes (* spans /)"
gx rules 'curl -sS -m 10 -w "\n%{http_code}" -X POST https://public.test/ok/a'
like "$out" "nook egress: denied POST https://public.test/ok/a" "--allow-http: POST gets the 403 body naming the request"
like "$out" '403$' "... with status 403"
gx rules 'curl -sS -m 10 -w "\n%{http_code}" https://public.test/other'
like "$out" '403$' "--allow-http: another path is denied"
run_nook_ns egress log rules
like "$out" "deny 403 POST public.test/ok/a" "egress log: the denied request"

# ---- an upstream the gateway cannot verify ---------------------------------------------------
run_nook_ns create --network public --egress-audit noca
is "$status" 0 "create --egress-audit (no --egress-ca: the test CA is unknown)" || diag "$err"
gx noca 'curl -sS -m 10 -w "\n%{http_code}" https://public.test/x'
if [[ $status != 0 || $out =~ (502|503)$ ]]; then ok "an upstream with an untrusted certificate fails in the guest"; else not_ok "an upstream with an untrusted certificate fails in the guest" "$out"; fi
run_nook_ns egress log noca
like "$out" "error|certificate|verify" "egress log: the upstream's certificate error"

# ---- no secret anywhere ---------------------------------------------------------------------------
create_with_secret --network public --sticky --secret TOK@public.test --egress-ca "$pki/ca.pem" sticky
gx sticky 'echo "$TOK" > /root/tok; true'
run_nook_ns stop sticky
run_nook_ns snapshot create sticky snap
is "$status" 0 "snapshot of a sticky sandbox with a secret" || diag "$err"
# the pattern reaches grep on stdin in two halves: no argv in the guest holds it whole
gx eg 'p() { printf "%s%s\n" "'"${SENT:0:12}"'" "'"${SENT:12}"'"; }
p | grep -lsF -f - /proc/[0-9]*/environ /proc/[0-9]*/cmdline; p | grep -rlsF -f - /etc /root /tmp /workspace /var 2>/dev/null; true'
is "$out" "" "the guest's /proc and disk never hold the value"
hits=$(grep -lsF -f <(printf '%s\n' "$SENT") /proc/[0-9]*/environ /proc/[0-9]*/cmdline)
is "$hits" "" "no host process's argv or environ holds the value"
hits=$(grep -rlsF -f <(printf '%s\n' "$SENT") "$NOOK_HOME")
is "$hits" "" "NOOK_HOME (database, config, logs, audit log, snapshots) never holds the value"

# ---- a restart has no value -----------------------------------------------------------------------
run_nook_ns start sticky
is "$status" 0 "start the stopped sticky sandbox again"
gx sticky 'curl -sS -m 10 -w "\n%{http_code}" -H "Authorization: Bearer $TOK" https://public.test/after-restart'
like "$out" '403$' "after a restart the placeholder is blocked (the value was never stored)"
like "$out" "was not kept across the restart" "... and the 403 body says why"
like "$out" "create the sandbox again with TOK in the environment" "... and what to do"
run_nook_ns egress log sticky
like "$out" "value of secret TOK was not kept" "... and the audit log says why"

# ---- the gateway dies: started again; killed too often: given up, HTTP(S) fails closed ----------
kill -9 "$egress_pid"
# at once: the connection waits in the listener's backlog (the supervisor keeps the listener) and
# the new gateway serves it, with the CA the guest trusts and the secret's value
gx eg 'curl -sS -m 10 -H "Authorization: Bearer $TOK" https://public.test/after-death'
is "$out" "upstream GET /after-death auth=real" "a request right after the gateway was killed is served by a new one: same CA, the real value upstream" || diag "$err"
run_nook_ns inspect eg
is "$(jq -c '.egress | [.state, .restarts, .lastExit]' <<<"$out")" '["running",1,"killed by signal 9"]' \
        "inspect: the gateway is running again after one restart, and how the last one ended"
gw=$(jq -r .egress.pid <<<"$out")
gx eg 'curl -sS -m 10 --http2 -w "%{http_version}" -H "Authorization: Bearer $TOK" https://public.test/h2-again'
is "$out" "upstream GET /h2-again auth=real
2" "... HTTP/2 through it too" || diag "$err"
run_nook_ns logs --system eg
like "$out$err" "egress gateway \(pid $egress_pid\) ended: killed by signal 9" "the supervisor log says how the gateway ended"
for i in 2 3 4 5 6; do
        kill -9 "$gw"
        for _ in $(seq 50); do
                run_nook_ns inspect eg
                [[ $(jq -r '.egress | "\(.state) \(.restarts)"' <<<"$out") == "running $i" || $i == 6 ]] && break
                sleep 0.1
        done
        gw=$(jq -r .egress.pid <<<"$out")
done
wait_for 10 test "$(run_nook_ns inspect eg && jq -r .egress.state <<<"$out")" = failed
run_nook_ns inspect eg
is "$(jq -c '.egress | [.state, .restarts]' <<<"$out")" '["failed",5]' "killed after 5 restarts within a minute: inspect says the gateway failed"
like "$(jq -r .egress.reason <<<"$out")" "HTTP and HTTPS are refused" "... and what that means"
n=$(up_lines)
gx eg 'curl -sS -m 5 -o /dev/null https://public.test/after-failure'
isnt "$status" 0 "with the gateway given up, HTTPS fails in the guest"
like "$err" "refused|Failed to connect" "... at once: nothing listens behind the redirect any more"
is "$(up_lines)" "$n" "... and nothing went direct"
run_nook_ns logs --system eg
like "$out$err" "giving up" "the supervisor log says it gave up"

for s in eg rules noca sticky; do run_nook_ns rm "$s"; done
run_nook_ns snapshot rm snap
