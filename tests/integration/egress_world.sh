# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# The test world of nook-egress (tests/integration/test_egress_gateway.sh, bench/egress_bench.sh);
# no packet leaves it:
#
#   guest  ($EG_G)  a veth default route; nat output: tcp 80/443 -> the gateway's two listeners
#   gw     ($EG_X)  198.51.100.1, 10.99.0.1; /etc/hosts: up.test, other.test -> .10,
#                   bad.test -> .11, rebind.test -> 10.99.0.10; nook-egress runs here
#   public ($EG_P)  198.51.100.10 (up.test/other.test, HTTPS :443, HTTP :80),
#                   198.51.100.11 (bad.test: a certificate of an unknown CA, :443), 10.99.0.10
#
# egress_world_up DIR sets it up (certificates in DIR: testca.crt, ...); egress_gateway_up
# GATEWAY CONFIG starts the gateway through egress_driver.py (state in DIR/state, audit in
# DIR/audit.log) and installs the redirect; egress_world_down removes everything.
EG_G=nkg$$ EG_X=nkx$$ EG_P=nkp$$
EG_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EG_D=""
EG_DRIVER_PID=""
EG_GW_PID=""

# egress_world_require TOOL...: the whole file is skipped unless the world can be built here: host
# root (inside `unshare -r` uid 0 is mapped: the uid_map is not the full identity map, and
# /run/netns cannot be mounted), nook-egress built, and ip, nft, curl, openssl, python3 and every
# TOOL.  Sets EGRESS (the gateway) and HERE (this folder).
egress_world_require() {
        local t
        EGRESS="$NOOK_BUILD_DIR/src/egress/nook-egress"
        HERE=$EG_HERE
        require_bin "$EGRESS"
        if ! nook_rootful; then
                # The test world is made of named network namespaces and nftables rules.
                plan 1
                skip_expected "the egress test world needs ip netns and nftables as host root (stage ${NOOK_TEST_STAGE:-manual})"
                exit 0
        fi
        for t in ip nft curl openssl python3 "$@"; do
                command -v "$t" >/dev/null || plan skip_all "$t is not installed (scripts/deps.sh installs it)"
        done
}

egress_world_down() {
        if [[ -n $EG_DRIVER_PID ]]; then
                kill "$EG_DRIVER_PID" 2>/dev/null
                wait "$EG_DRIVER_PID" 2>/dev/null
        fi
        # by pid too: a process outlives its network namespace's name, and ip netns pids needs it
        ((${#EG_UP_PIDS[@]})) && kill -9 "${EG_UP_PIDS[@]}" 2>/dev/null
        for ns in "$EG_G" "$EG_X" "$EG_P"; do
                ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
                ip netns del "$ns" 2>/dev/null
        done
        rm -rf "/etc/netns/$EG_X"
        [[ -n $EG_D ]] && rm -rf "$EG_D"
}

_eg_mkcert() { # NAME CA SANS...
        local name=$1 ca=$2 san
        shift 2
        san=$(printf 'DNS:%s,' "$@")
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$name" \
                -keyout "$EG_D/$name.key" -out "$EG_D/$name.crt" -CA "$EG_D/$ca.crt" -CAkey "$EG_D/$ca.key" \
                -addext "subjectAltName=${san%,}" 2>/dev/null
}

EG_UP_PIDS=()
_eg_upstream() { # LOG ADDR PORT [CERT KEY]: an upstream in the public netns (disowned; killed by egress_world_down)
        ip netns exec "$EG_P" python3 "$EG_HERE/egress_upstream.py" "$@" >/dev/null 2>>"$EG_D/upstream.err" &
        EG_UP_PIDS+=("$!")
        disown
}

egress_world_up() { # DIR
        EG_D=$1
        local ca ns a i
        for ca in testca unknownca; do
                openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$ca" \
                        -keyout "$EG_D/$ca.key" -out "$EG_D/$ca.crt" 2>/dev/null || return 1
        done
        _eg_mkcert up testca up.test other.test rebind.test && _eg_mkcert bad unknownca bad.test || return 1
        ip netns add "$EG_G" && ip netns add "$EG_X" && ip netns add "$EG_P" || return 1
        ip link add "${EG_X}a" type veth peer name "${EG_P}b" || return 1
        ip link set "${EG_X}a" netns "$EG_X" && ip link set "${EG_P}b" netns "$EG_P" || return 1
        for a in 198.51.100.1/24 10.99.0.1/24; do ip -n "$EG_X" addr add $a dev "${EG_X}a"; done
        for a in 198.51.100.10/24 198.51.100.11/24 10.99.0.10/24; do ip -n "$EG_P" addr add $a dev "${EG_P}b"; done
        # by pid too: a process outlives its network namespace's name, and ip netns pids needs it
        ((${#EG_UP_PIDS[@]})) && kill -9 "${EG_UP_PIDS[@]}" 2>/dev/null
        for ns in "$EG_G" "$EG_X" "$EG_P"; do ip -n "$ns" link set lo up; done
        ip -n "$EG_X" link set "${EG_X}a" up && ip -n "$EG_P" link set "${EG_P}b" up
        # the guest's default route: a veth pair inside it; nothing is behind it, the redirect takes all
        ip -n "$EG_G" link add g0 type veth peer name g1 && ip -n "$EG_G" addr add 10.0.2.100/24 dev g0 || return 1
        ip -n "$EG_G" link set g0 up && ip -n "$EG_G" link set g1 up && ip -n "$EG_G" route add default dev g0
        mkdir -p "/etc/netns/$EG_X"
        printf '198.51.100.10 up.test other.test\n198.51.100.11 bad.test\n10.99.0.10 rebind.test\n' \
                >"/etc/netns/$EG_X/hosts"
        _eg_upstream "$EG_D/up.log" 198.51.100.10 443 "$EG_D/up.crt" "$EG_D/up.key"
        _eg_upstream "$EG_D/up.log" 198.51.100.10 80
        _eg_upstream "$EG_D/bad.log" 198.51.100.11 443 "$EG_D/bad.crt" "$EG_D/bad.key"
        _eg_upstream "$EG_D/up.log" 10.99.0.10 443 "$EG_D/up.crt" "$EG_D/up.key"
        for i in $(seq 50); do
                ip netns exec "$EG_P" bash -c "exec 3<>/dev/tcp/198.51.100.10/443" 2>/dev/null && return 0
                sleep 0.1
        done
        return 1
}

egress_gateway_up() { # GATEWAY CONFIG: sets EG_GW_PID
        mkdir -p "$EG_D/state"
        python3 "$EG_HERE/egress_driver.py" "$1" "$EG_X" "$EG_G" "$2" "$EG_D/audit.log" "$EG_D/state" &
        EG_DRIVER_PID=$!
        local i p80 p443
        for i in $(seq 100); do
                [[ -e $EG_D/state/ready ]] && break
                sleep 0.1
        done
        if [[ ! -e $EG_D/state/ready ]]; then
                cat "$EG_D/state/error" "$EG_D/state/gateway.stderr" >&2 2>/dev/null
                return 1
        fi
        EG_GW_PID=$(cat "$EG_D/state/pid")
        read -r p80 p443 <"$EG_D/state/ports"
        ip netns exec "$EG_G" nft -f - <<EOF
table ip nat {
        chain output {
                type nat hook output priority -100;
                ip daddr != 127.0.0.0/8 tcp dport 80 redirect to :$p80
                ip daddr != 127.0.0.0/8 tcp dport 443 redirect to :$p443
        }
}
EOF
}

# Closes fd 3 (the driver's SIGTERM) and waits for the driver.
egress_gateway_stop() {
        kill "$EG_DRIVER_PID" 2>/dev/null
        wait "$EG_DRIVER_PID" 2>/dev/null
        EG_DRIVER_PID=""
}
