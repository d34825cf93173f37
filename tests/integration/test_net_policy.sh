#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Network policy (CIDR rules, domain allowlist through nook's resolver) and published ports, in
# the private test world of net_topology.sh.  No packet leaves the namespaces this file creates.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/net_topology.sh"

net_topology_require ip slirp4netns dnsmasq busybox curl
plan 30
trap 'net_topology_down; _tap_finish' EXIT
net_topology_up || bail_out "cannot build the test world"

# ---- bad input changes nothing ---------------------------------------------------------------
run_nook_ns create -p 8080:80 bad1
is "$status" 1 "ports with the network off: refused"
like "$err" "ports need the network on" "the error says why"
run_nook_ns create --network public --allow-domain public.test bad2
like "$err" "domains needs network 'policy'" "a domain list with --network public: refused"
run_nook_ns create --network off --allow 1.2.3.0/24 bad2b
like "$err" "networkPolicy needs network 'policy' or 'public'" "rules with --network off: refused"
run_nook_ns create --allow 10.0.0.1/8 bad3
like "$err" "bits set beyond the /8" "a CIDR with host bits: refused, naming it"
run_nook_ns create --allow-domain 'exa mple.com' bad4
like "$err" "not a domain name" "a bad domain: refused"
run_nook_ns ls --json
is "$out" "[]" "nothing was created by bad input"

# ---- policy ----------------------------------------------------------------------------------
run_nook_ns create --deny 198.51.100.11:8080 --allow 198.51.100.11:80 --allow-domain public.test \
        --allow-domain '*.rebind.test' --allow-domain rebind.test -p 8080:80 -p 198.51.100.1:8090:80 pol
is "$status" 0 "create a policy sandbox with rules, domains and ports" || diag "$err"
nx pol -- cat /etc/resolv.conf
like "$out" "nameserver 127.0.0.53" "policy: resolv.conf names nook's resolver"
reaches pol http://public.test/ "policy: an allowed domain is reachable by name"
reaches pol http://198.51.100.11/ "policy: an allowed CIDR:port is reachable"
blocked pol http://198.51.100.11:8080/ "policy: a denied port of that host is not"
nx pol -- getent hosts other.test
isnt "$status" 0 "policy: a name not on the list does not resolve"
nx pol -- sh -c 'curl -sS -m 5 -o /dev/null http://other.test/ || curl -sS -m 5 -o /dev/null --resolve other.test:80:198.51.100.11 http://other.test:81/'
isnt "$status" 0 "policy: hosts not allowed stay unreachable"
blocked pol http://rebind.test/ "policy: an allowed name resolving to 10.x stays blocked (rebinding)"
blocked pol http://10.99.0.10/ "policy: private addresses are blocked"
blocked pol http://169.254.169.254/ "policy: cloud metadata is blocked"
nx pol -- busybox nslookup public.test 198.51.100.10
unlike "$out" "Address.*198\.51\.100\.10" "policy: DNS to another resolver gets no answer"
nx pol -- nft flush ruleset
isnt "$status" 0 "policy: nft flush ruleset fails"

# ---- published ports -------------------------------------------------------------------------
nx pol --detach -- sh -c 'mkdir -p /tmp/www && echo inside >/tmp/www/index.html && exec busybox httpd -f -p 80 -h /tmp/www'
for i in $(seq 30); do
        out=$(ip netns exec "$NET_UP" curl -sS -m 2 http://127.0.0.1:8080/ 2>/dev/null) && break
        sleep 0.1
done
is "$out" inside "ports: 127.0.0.1:8080 answers from the host side"
is "$(ip netns exec "$NET_UP" curl -sS -m 2 http://198.51.100.1:8090/ 2>&1)" inside "ports: ADDR:8090 answers from the host side"
run_nook_ns create --network public -p 8080:80 busy
like "$err" "Cannot publish 127.0.0.1:8080.*in use" "ports: a host port in use is a clear error"
run_nook_ns inspect busy
isnt "$status" 0 "ports: nothing is left of the failed create"

run_nook_ns rm pol
is "$status" 0 "rm pol"

# ---- public with an exception: an egress proxy at a private host:port --------------------------
# (what the Smithers provider asks for when a request's egress proxy has a private address)
# a second listener on the private host, so "another port is blocked" is the firewall's doing
_net_bg "$NET_W" "$NET_DIR/priv8081.pid" busybox httpd -f -p 10.99.0.10:8081 -h "$NET_DIR/www"
sleep 0.2
is "$(ip netns exec "$NET_W" curl -sS -m 2 http://10.99.0.10:8081/ 2>&1)" world "the private host answers on 8081 too"
run_nook_ns create --network public --allow 10.99.0.10:80 pubx
is "$status" 0 "create a public sandbox with one private host:port allowed" || diag "$err"
reaches pubx http://10.99.0.10/ "public+exception: the named private host:port is reachable"
blocked pubx http://10.99.0.10:8081/ "public+exception: another port of that host is not"
blocked pubx http://192.168.77.10/ "public+exception: other private hosts stay blocked"
reaches pubx http://198.51.100.10/ "public+exception: public hosts stay reachable"
run_nook_ns rm pubx
