#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Network off and public, and escape attempts, in a private test world (net_topology.sh): nook
# runs in the "uplink" namespace; the "world" namespace plays the internet, a private network
# and a cloud metadata endpoint.  No packet leaves the namespaces this file creates.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/net_topology.sh"

net_topology_require ip slirp4netns dnsmasq busybox curl
plan 26
trap 'net_topology_down; _tap_finish' EXIT
net_topology_up || bail_out "cannot build the test world"

# ---- off -------------------------------------------------------------------------------------
run_nook_ns create off1
is "$status" 0 "create with the network off (the default)"
nx off1 -- cat /sys/class/net/lo/operstate /proc/net/dev
unlike "$out" "tap0|eth0" "off: no interface but lo"
blocked off1 http://198.51.100.10/ "off: the public host is unreachable"

# ---- public ----------------------------------------------------------------------------------
run_nook_ns create --network public pub
is "$status" 0 "create --network public" || diag "$err"
nx pub -- cat /etc/resolv.conf
like "$out" "nameserver 10.0.2.3" "public: resolv.conf names slirp's DNS forwarder"
reaches pub http://public.test/ "public: reaches the public host by name"
reaches pub http://198.51.100.11/ "public: reaches a public address"
blocked pub http://10.99.0.10/ "public: 10.x (RFC 1918) is blocked"
blocked pub http://192.168.77.10/ "public: 192.168.x is blocked"
blocked pub http://169.254.169.254/ "public: cloud metadata is blocked"
blocked pub http://meta.test/ "public: cloud metadata is blocked by name"
blocked pub http://198.51.100.1:8081/ "public: the host's own address is blocked"
blocked pub http://10.0.2.2:8082/ "public: the host's loopback through the slirp gateway is blocked"
blocked pub http://rebind.test/ "public: DNS rebinding (a name resolving to 10.x) stays blocked"
blocked pub "http://[fd00:ec2::254]/" "public: IPv6 metadata is blocked"
blocked pub "http://[fe80::1%25tap0]/" "public: IPv6 link-local is blocked"

# ---- escapes ---------------------------------------------------------------------------------
nx pub -- nft flush ruleset
isnt "$status" 0 "escape: nft flush ruleset fails"
nx pub -- ip route add 10.99.0.0/24 via 10.0.2.2
isnt "$status" 0 "escape: adding a route fails"
nx pub -- ip addr add 10.0.2.50/24 dev tap0
isnt "$status" 0 "escape: adding an address fails"
nx pub -- python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)'
isnt "$status" 0 "escape: raw sockets are refused"
nx pub -- busybox nslookup public.test 198.51.100.11
unlike "$out" "198\.51\.100\.11" "escape: DNS to another resolver gets no answer"
reaches pub http://public.test/ "the firewall is intact after the attempts"

# ---- the host's mounts ------------------------------------------------------------------------
# slirp4netns --enable-sandbox detaches the root it left; as root that unmounted every shared
# mount's peers on the host (ip netns's /run/netns/*, all of a systemd host's tree).  Started from
# the host's own mount namespace here (run_nook_ns's 'ip netns exec' makes a slave copy, which
# hid it), with a shared mount that holds another.
if nook_rootful; then
        shared="$NOOK_HOME.shared"
        mkdir -p "$shared"
        mount -t tmpfs nook-test-shared "$shared" && mount --make-shared "$shared" &&
                mkdir "$shared/sub" && mount -t tmpfs nook-test-sub "$shared/sub"
        run_nook create --network public hostmnt
        is "$status" 0 "create --network public from the host's mount namespace" || diag "$err"
        if findmnt -rn "$shared/sub" >/dev/null; then ok "a shared host mount's sub-mount is still mounted"; else
                not_ok "a shared host mount's sub-mount is still mounted" "$(findmnt -rn | grep nook-test)"; fi
        "$NOOK" rm -f hostmnt >/dev/null
        umount "$shared/sub" 2>/dev/null
        umount "$shared"
        rmdir "$shared"
else
        skip_expected "the host's mounts are changed only by root (uid $(id -u) here)"
        skip_expected "the host's mounts are changed only by root: no shared mount to check"
fi

run_nook_ns rm pub
is "$status" 0 "rm pub"
run_nook_ns rm off1
if pgrep -f "slirp4netns.*$NOOK_HOME" >/dev/null; then not_ok "no slirp4netns left after rm"; else ok "no slirp4netns left after rm"; fi
