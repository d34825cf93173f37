# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# A private test world for the network tests and bench, made of network namespaces and one veth
# pair; no packet leaves them.
#
#   $NET_UP  "uplink": nook runs here (net_nook ...); 198.51.100.1, 10.99.0.1, 192.168.77.1,
#            169.254.0.1, 2001:db8::1; its resolv.conf names the world's dnsmasq; HTTP on
#            198.51.100.1:8081 and 127.0.0.1:8082 (the "host itself")
#   $NET_W   "world": a public host 198.51.100.10 and .11 and 2001:db8::10, a private host
#            10.99.0.10 and 192.168.77.10, cloud metadata 169.254.169.254; HTTP on :80 for all,
#            DNS on 198.51.100.10: public.test -> .10, other.test -> .11, rebind.test -> 10.99.0.10,
#            meta.test -> 169.254.169.254; a second resolver on 198.51.100.11 answers
#            public.test -> 198.51.100.11 (DNS to another resolver must not work)
#
# net_topology_up sets everything up and registers net_topology_down on EXIT (after lib.sh's).
NET_ID=${NET_ID:-$$}
NET_UP=nku$NET_ID
NET_W=nkw$NET_ID
NET_DIR=""

_net_bg() { # NS PIDFILE CMD...: a server in NS, its pid in PIDFILE
        local ns=$1 pf=$2
        shift 2
        ip netns exec "$ns" "$@" >/dev/null 2>&1 &
        echo $! >"$pf"
}

net_topology_down() {
        local pf
        for pf in "$NET_DIR"/*.pid; do
                [[ -f $pf ]] && kill "$(cat "$pf")" 2>/dev/null
        done
        # a process still in a namespace keeps it alive: kill what is left, by namespace
        for ns in "$NET_UP" "$NET_W"; do
                ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
                ip netns del "$ns" 2>/dev/null
        done
        rm -rf "/etc/netns/$NET_UP" "$NET_DIR"
}

# net_topology_require TOOL...: the whole file is skipped unless the world can be built here: host
# root and every TOOL.  Not a host gap otherwise: a user stage, or `unshare -r` (where ip netns
# cannot make /run/netns a shared mount), cannot make the world; the rootless path is the same
# code plus /dev/net/tun access (docs/design/network.md).
net_topology_require() {
        local t
        require_bin "$NOOK" "$NOOK_SUPERVISOR"
        if ! nook_rootful; then
                plan 1
                skip_expected "the netns test world needs root (stage ${NOOK_TEST_STAGE:-manual})"
                exit 0
        fi
        for t in "$@"; do
                command -v "$t" >/dev/null || plan skip_all "$t is not installed (scripts/deps.sh installs it)"
        done
}

# run_nook_ns ARGS...: run_nook in the uplink namespace, where nook runs; nx NAME CMD...: an exec
# in sandbox NAME there.  Both set $out/$err/$status.
run_nook_ns() {
        local NOOK_REAL=$NOOK
        NOOK="ip"
        run_nook netns exec "$NET_UP" "$NOOK_REAL" "$@"
        NOOK=$NOOK_REAL
}
nx() { run_nook_ns exec "$@"; }
# reaches NAME URL DESC / blocked NAME URL DESC: curl in sandbox NAME gets the world's answer from
# URL / fails.
reaches() {
        nx "$1" -- curl -sS -m 5 "$2"
        is "$out" world "$3"
}
blocked() {
        nx "$1" -- curl -sS -m 5 -o /dev/null "$2"
        if [[ $status != 0 ]]; then ok "$3"; else not_ok "$3" "curl $2 succeeded"; fi
}

net_topology_up() {
        NET_DIR=$(mktemp -d /tmp/nook-net.XXXXXX)
        ip netns add "$NET_UP" && ip netns add "$NET_W" || return 1
        ip link add "${NET_UP}a" type veth peer name "${NET_W}b" || return 1
        ip link set "${NET_UP}a" netns "$NET_UP" && ip link set "${NET_W}b" netns "$NET_W" || return 1
        local u="ip -n $NET_UP" w="ip -n $NET_W"
        $u link set lo up && $w link set lo up
        for a in 198.51.100.1/24 10.99.0.1/24 192.168.77.1/24 169.254.0.1/16; do $u addr add $a dev "${NET_UP}a"; done
        $u -6 addr add 2001:db8::1/64 dev "${NET_UP}a" nodad
        for a in 198.51.100.10/24 198.51.100.11/24 10.99.0.10/24 192.168.77.10/24 169.254.169.254/16; do
                $w addr add $a dev "${NET_W}b"
        done
        $w -6 addr add 2001:db8::10/64 dev "${NET_W}b" nodad
        $u link set "${NET_UP}a" up && $w link set "${NET_W}b" up
        $u route add default via 198.51.100.10
        mkdir -p "/etc/netns/$NET_UP" "$NET_DIR/www" "$NET_DIR/host"
        echo "nameserver 198.51.100.10" >"/etc/netns/$NET_UP/resolv.conf"
        echo world >"$NET_DIR/www/index.html"
        echo host >"$NET_DIR/host/index.html"
        _net_bg "$NET_W" "$NET_DIR/httpd.pid" busybox httpd -f -p 80 -h "$NET_DIR/www"
        _net_bg "$NET_UP" "$NET_DIR/hosthttpd.pid" busybox httpd -f -p 198.51.100.1:8081 -h "$NET_DIR/host"
        _net_bg "$NET_UP" "$NET_DIR/hostlo.pid" busybox httpd -f -p 127.0.0.1:8082 -h "$NET_DIR/host"
        local dm=(dnsmasq -k --conf-file=/dev/null --no-resolv --no-hosts --bind-interfaces --user=root
                --local-ttl=30)
        _net_bg "$NET_W" "$NET_DIR/dns.pid" "${dm[@]}" --listen-address=198.51.100.10 \
                --pid-file="$NET_DIR/dns1.pidf" --address=/public.test/198.51.100.10 \
                --address=/other.test/198.51.100.11 --address=/rebind.test/10.99.0.10 \
                --address=/meta.test/169.254.169.254
        _net_bg "$NET_W" "$NET_DIR/dns2.pid" "${dm[@]}" --listen-address=198.51.100.11 \
                --pid-file="$NET_DIR/dns2.pidf" --address=/public.test/198.51.100.11
        # wait until the servers answer
        local i
        for i in $(seq 50); do
                ip netns exec "$NET_UP" wget -q -T 1 -O /dev/null http://198.51.100.10/ 2>/dev/null &&
                        ip netns exec "$NET_UP" getent hosts public.test >/dev/null 2>&1 && return 0
                sleep 0.1
        done
        echo "# the test world did not come up" >&2
        return 1
}

# net_nook ARGS...: nook, run in the uplink namespace (its /etc/resolv.conf is the world's DNS).
net_nook() { ip netns exec "$NET_UP" "$NOOK" "$@"; }
