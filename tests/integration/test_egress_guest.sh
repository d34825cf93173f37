#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The guest's side of the egress gateway (issue #14) in every stage, root and rootless, without a
# test world: the placeholder in the guest's env and the value nowhere (guest env, disk and /proc;
# argv and environ of every host process; NOOK_HOME), the CA bundle and the four variables, the
# redirect and the QUIC reject loaded in the sandbox's own network namespace before create
# returns, the audit log, a restart without the value, the gateway in the sandbox's cgroup, and a
# killed gateway started again (nook inspect says so) or, killed too often, given up.  The traffic
# through a restarted gateway: test_egress.sh (root, netns world).
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
if [[ ! -x $NOOK_BUILD_DIR/src/egress/nook-egress ]]; then
        plan 1
        skip_expected "nook-egress not built in this tree"
        exit 0
fi
for t in slirp4netns nsenter nft jq; do
        command -v $t >/dev/null || plan skip_all "$t is not installed (scripts/deps.sh installs it)"
done
[[ -r /dev/net/tun && -w /dev/net/tun ]] || { plan 1; skip_expected "no access to /dev/net/tun here (the network needs it)"; exit 0; }
plan 37

SENT="nook-sentinel-$$-$RANDOM-guest"
TOK=$SENT run_nook create --network public --sticky --secret TOK@api.example.test,'*.example.test' --egress-audit g
is "$status" 0 "create --network public --secret TOK@... (rootful or rootless)" || diag "$err"

# the sandbox's netns, straight after create: the redirect is there before any exec
run_nook inspect g
sup=$(jq -r .supervisorPid <<<"$out")
init=""
for p in $(pgrep -P "$sup"); do
        [[ $(readlink /proc/$p/ns/net) != "$(readlink /proc/$sup/ns/net)" ]] && init=$p
done
if [[ $(id -u) == 0 && -z ${NOOK_TEST_STAGE:-} || ${NOOK_TEST_STAGE:-} == root || ${NOOK_TEST_STAGE:-} == asan-root ]]; then
        rules=$(nsenter -t "$init" -n nft list table inet nook 2>&1)
else
        rules=$(nsenter -t "$init" -U -n --preserve-credentials nft list table inet nook 2>&1)
fi
like "$rules" "tcp dport 80 redirect to :[0-9]+" "the sandbox's netns redirects port 80 to the gateway" || diag "$rules"
like "$rules" "tcp dport 443 redirect to :[0-9]+" "... and port 443"
like "$rules" "udp dport 443 reject" "... and rejects UDP 443 (QUIC)"
egress_pid=$(pgrep -P "$sup" -x nook-egress)
check "the gateway runs beside the supervisor, outside the sandbox's network namespace" \
        test -n "$egress_pid" -a "$(readlink /proc/$egress_pid/ns/net)" = "$(readlink /proc/$sup/ns/net)"
# the supervisor starts it off its own CPU (supervisor/egress.c:spawn_gateway); it takes the
# whole mask back, which is the creator's
cpus() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null; }
is "$(cpus "${egress_pid:-0}")" "$(cpus $$)" "the gateway runs on every CPU its creator may"
# its memory, CPU and threads are the sandbox's (supervisor/egress.h): the same cgroups as init,
# where the sandbox has its own (not rootless without delegation)
cgroups_of() { grep -E ':(memory|pids|cpu[,:]|cpu,cpuacct|freezer):|^0::' "/proc/$1/cgroup" 2>/dev/null | sort; }
if grep -q "nook-g-" "/proc/$init/cgroup" 2>/dev/null; then
        is "$(cgroups_of "${egress_pid:-0}")" "$(cgroups_of "$init")" "the gateway is in the sandbox's cgroups"
else
        skip_expected "the gateway is in the sandbox's cgroups: the sandbox has no cgroup of its own here (stage ${NOOK_TEST_STAGE:-manual})"
fi
run_nook inspect g
is "$(jq -c '.egress | [.state, .restarts, .pid]' <<<"$out")" "[\"running\",0,${egress_pid:-0}]" \
        "inspect: egress running, no restart, the gateway's pid"

run_nook exec g -- sh -c 'printf %s "$TOK"'
like "$out" '^nook-ph-[0-9a-f]{32}$' "the guest's TOK is a placeholder"
ph=$out
run_nook exec g -- sh -c 'printf "%s\n" "$SSL_CERT_FILE" "$NODE_EXTRA_CA_CERTS" "$REQUESTS_CA_BUNDLE" "$CURL_CA_BUNDLE" | sort -u'
is "$out" "/etc/ssl/nook-ca-certificates.crt" "the four CA variables name one bundle"
run_nook exec g -- sh -c 'grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE"; tail -n 40 "$SSL_CERT_FILE" | openssl x509 -noout -subject 2>/dev/null || tail -c 200 "$SSL_CERT_FILE"'
base=$(grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt 2>/dev/null || echo 0)
is "$(head -1 <<<"$out")" "$((base + 1))" "the bundle is the system's plus the sandbox's own CA"
run_nook exec g -- sh -c 'test -r /etc/ssl/certs/ca-certificates.crt && ! grep -q "$TOK" /etc/ssl/nook-ca-certificates.crt'
is "$status" 0 "the host's bundle is untouched and readable"

# the pattern reaches grep on stdin in two halves: no argv in the guest holds it whole
run_nook exec g -- sh -c 'echo "$TOK" > /root/tok; p() { printf "%s%s\n" "'"${SENT:0:12}"'" "'"${SENT:12}"'"; }
p | grep -lsF -f - /proc/[0-9]*/environ /proc/[0-9]*/cmdline; p | grep -rlsF -f - /etc /root /tmp /workspace /var; true'
is "$out" "" "the guest's /proc and disk never hold the value"
hits=$(grep -lsF -f <(printf '%s\n' "$SENT") /proc/[0-9]*/environ /proc/[0-9]*/cmdline)
is "$hits" "" "no host process (supervisor, gateway, slirp4netns) holds the value in argv or environ"
run_nook egress log --json g
is "$status" 0 "nook egress log reads the gateway's audit log"
run_nook stop g
run_nook snapshot create g gsnap
hits=$(grep -rlsF -f <(printf '%s\n' "$SENT") "$NOOK_HOME")
is "$hits" "" "NOOK_HOME (database, config, logs, audit log, snapshot) never holds the value"
check "the supervisor's config is not a file in the state folder (a memfd: placeholders only, gone with it)" \
        test ! -e "$NOOK_HOME/sandboxes/g/config.json"

# a start without the value: new placeholders, and the sandbox still starts
run_nook start g
is "$status" 0 "a sticky sandbox starts again without the value (its placeholder is blocked)" || diag "$err"
run_nook exec g -- sh -c 'printf %s "$TOK"'
if [[ $out =~ ^nook-ph-[0-9a-f]{32}$ && $out != "$ph" ]]; then ok "... with a new placeholder"; else not_ok "... with a new placeholder" "$out"; fi

# the gateway dies: logged, and started again with the same CA, listeners and cgroup
run_nook inspect g
sup=$(jq -r .supervisorPid <<<"$out")
init=""
for p in $(pgrep -P "$sup"); do
        [[ $(readlink /proc/$p/ns/net) != "$(readlink /proc/$sup/ns/net)" ]] && init=$p
done
gw=$(pgrep -P "$sup" -x nook-egress)
kill -9 "$gw"
wait_for 5 grep -q "egress gateway.*killed by signal 9" "$NOOK_HOME/run/g/supervisor.log"
is "$?" 0 "the supervisor logs the gateway's death"
# egress_state: the "egress" object nook inspect shows, as [state, restarts, lastExit]
egress_state() { run_nook inspect g && jq -c '.egress | [.state, .restarts, .lastExit]' <<<"$out"; }
egress_is() { [[ $(egress_state) == "$1" ]]; }
wait_for 10 egress_is '["running",1,"killed by signal 9"]'
is "$(egress_state)" '["running",1,"killed by signal 9"]' "inspect: the gateway is running again after one restart, and how the last one ended"
run_nook inspect g
gw2=$(jq -r .egress.pid <<<"$out")
if [[ $gw2 =~ ^[0-9]+$ && $gw2 != "$gw" && $(ps -o ppid= -p "$gw2" | tr -d ' ') == "$sup" && $(cat /proc/$gw2/comm) == nook-egress ]]; then
        ok "the new gateway is another process, the supervisor's child"
else
        not_ok "the new gateway is another process, the supervisor's child" "old $gw new $gw2"
fi
if grep -q "nook-g-" "/proc/$init/cgroup" 2>/dev/null; then
        is "$(cgroups_of "$gw2")" "$(cgroups_of "$init")" "... in the sandbox's cgroups too"
else
        skip_expected "... in the sandbox's cgroups too: the sandbox has no cgroup of its own here (stage ${NOOK_TEST_STAGE:-manual})"
fi
run_nook exec g -- sh -c 'grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE"'
is "$out" "$((base + 1))" "... and the guest's bundle is as it was: the new gateway has the same CA"
run_nook logs --system g
like "$out$err" "the egress gateway is running again" "nook logs --system says it was started again"
# killed again and again: after 5 restarts within a minute the supervisor gives up, and says so
for i in 2 3 4 5 6; do
        wait_for 10 egress_is "[\"running\",$((i - 1)),\"killed by signal 9\"]"
        run_nook inspect g
        kill -9 "$(jq -r .egress.pid <<<"$out")"
done
wait_for 10 egress_is '["failed",5,"killed by signal 9"]'
is "$(egress_state)" '["failed",5,"killed by signal 9"]' "killed after 5 restarts within a minute: inspect says the gateway failed"
run_nook inspect g
like "$(jq -r .egress.reason <<<"$out")" "restarted 5 times within 60 s and ended again .* HTTP and HTTPS are refused" "... and why, and what it means"
is "$(jq -r .state <<<"$out")" running "... while the sandbox itself runs on"
check "no gateway runs any more" test -z "$(pgrep -P "$sup" -x nook-egress)"
run_nook logs --system g
like "$out$err" "giving up: the egress gateway was restarted 5 times" "nook logs --system says it gave up"
run_nook rm g
run_nook snapshot rm gsnap

# `nook run`: a tied sandbox (a lifeline and the secrets socket both passed to the supervisor)
TOK=$SENT run_nook run --network public --secret TOK@api.example.test -- sh -c 'printf %s "$TOK"'
like "$out" '^nook-ph-[0-9a-f]{32}$' "nook run --secret: the command sees a placeholder" || diag "$err"

# ---- images: the bundle in the image's place, through its symlinks but never out of it ----------
D=$(mktemp -d "$NOOK_HOME.img.XXXXXX")
cert=$(awk '/BEGIN CERT/ { p = 1 } p { print } /END CERT/ { exit }' /etc/ssl/certs/ca-certificates.crt)
mkroot() {
        mkdir -p "$1/bin" "$1/etc" "$1/tmp"
        cp "$(command -v busybox)" "$1/bin/busybox"
        ln -s busybox "$1/bin/sh"
}
mkroot "$D/plain"
mkdir -p "$D/plain/etc/ssl/certs"
printf '%s\n' "$cert" >"$D/plain/etc/ssl/certs/ca-certificates.crt"
mkroot "$D/linked" # /etc/ssl/certs -> ../pki/certs, as RHEL-like images have it
mkdir -p "$D/linked/etc/pki/certs" "$D/linked/etc/ssl"
printf '%s\n' "$cert" >"$D/linked/etc/pki/certs/ca-certificates.crt"
ln -s ../pki/certs "$D/linked/etc/ssl/certs"
mkroot "$D/hostile" # the bundle is a link to the host's /etc/shadow
mkdir -p "$D/hostile/etc/ssl/certs"
ln -s /etc/shadow "$D/hostile/etc/ssl/certs/ca-certificates.crt"
chmod -R a+rX "$D"
for img in plain linked hostile; do
        run_nook create --image "$D/$img" --network public --egress-audit "i$img"
        is "$status" 0 "create --egress-audit from the '$img' image" || diag "$err"
done
run_nook exec iplain -- /bin/sh -c 'echo "$SSL_CERT_FILE $(grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt)"'
is "$out" "/etc/ssl/certs/ca-certificates.crt 2" "an image's own bundle gets the sandbox's CA, in its place"
run_nook exec ilinked -- /bin/sh -c 'echo "$SSL_CERT_FILE $(grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE") $(readlink /etc/ssl/certs)"'
is "$out" "/etc/ssl/nook-ca-certificates.crt 2 ../pki/certs" "an image whose /etc/ssl/certs is a link keeps it; the bundle goes beside"
run_nook exec ihostile -- /bin/sh -c 'grep -c "BEGIN CERTIFICATE" "$SSL_CERT_FILE"; grep -c "^root:" "$SSL_CERT_FILE"'
is "$out" "$(printf '1\n0')" "an image's link to the host's /etc/shadow copies nothing of the host"
for img in plain linked hostile; do run_nook rm "i$img"; done
