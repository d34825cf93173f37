#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `nook doctor` (issue 6): exits 0 where sandboxes can run, `--json` parses with ok=true and the
# named checks, each failed check says how to fix it, the text and JSON forms agree, and the
# report matches what this host really offers (cgroup version, delegation, rootless). As root it
# also runs as the unprivileged user nook-test.
. "$(dirname "$0")/lib.sh"

require_bin "$NOOK"
plan 22

PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

# check_json TEXT WANT_ROOTLESS WHO: 10 tests on a doctor --json report.
check_json() {
        local j=$1 want_rootless=$2 who=$3 r
        r=$($PY - "$want_rootless" <<PYEOF 2>&1
import json, sys
d = json.loads('''$j''')
want_rootless = sys.argv[1] == "true"
names = [c["name"] for c in d["checks"]]
need = ["user namespaces", "overlayfs in user namespaces", "seccomp", "cgroup v2",
        "cgroup v1 controllers", "cgroup delegation", "openat2", "slirp4netns", "nftables", "kvm"]
if want_rootless:  # only rootless sandboxes use newuidmap and /etc/subuid ranges
    need += ["newuidmap", "subuid range"]
print("ok" if d["ok"] is True else "ok-not-true")
print("rootless" if d["rootless"] is want_rootless else "rootless-wrong:%r" % d["rootless"])
print("missing:" + ",".join(n for n in need if n not in names))
print("shape:" + ",".join(c.get("name", "?") for c in d["checks"]
      if not (isinstance(c.get("name"), str) and isinstance(c.get("ok"), bool)
              and isinstance(c.get("required"), bool) and isinstance(c.get("detail"), str) and c["detail"])))
print("nofix:" + ",".join(c["name"] for c in d["checks"] if not c["ok"] and not c.get("fix")))
print("reqfail:" + ",".join(c["name"] for c in d["checks"] if c["required"] and not c["ok"]))
print("dupes:" + ",".join(sorted(set(n for n in names if names.count(n) > 1))))
ck = {c["name"]: c for c in d["checks"]}
print("v2:%s" % str(ck["cgroup v2"]["ok"]).lower())
print("deleg:%s" % str(ck["cgroup delegation"]["ok"]).lower())
print("slirp:%s" % str(ck["slirp4netns"]["ok"]).lower())
PYEOF
        )
        local lines
        mapfile -t lines <<<"$r"
        is "${lines[0]:-$r}" "ok" "$who: --json parses and ok is true"
        is "${lines[1]:-}" "rootless" "$who: rootless is $want_rootless"
        is "${lines[2]:-}" "missing:" "$who: every expected check is named"
        is "${lines[3]:-}" "shape:" "$who: every check has name, ok, required and a detail"
        is "${lines[4]:-}" "nofix:" "$who: every failed check says how to fix it"
        is "${lines[5]:-}" "reqfail:" "$who: no required check failed (ok=true is consistent)"
        is "${lines[6]:-}" "dupes:" "$who: no check is listed twice"
        # the report matches the host: cgroup v2 holds the controllers only if the unified tree does
        local v2=false ctrl=/sys/fs/cgroup/cgroup.controllers
        [[ -r $ctrl ]] || ctrl=/sys/fs/cgroup/unified/cgroup.controllers
        if [[ -r $ctrl ]] && grep -qw memory "$ctrl" && grep -qw pids "$ctrl"; then v2=true; fi
        is "${lines[7]:-}" "v2:$v2" "$who: the cgroup v2 check matches $ctrl"
        # cgroup delegation: root can always write its own cgroup; this user only if delegated
        local mine deleg=false
        mine=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
        if [[ $v2 == true ]]; then
                mine=$(awk -F: '$1 == 0 { print $3 }' /proc/self/cgroup)
                [[ -w /sys/fs/cgroup$mine/cgroup.procs || -w /sys/fs/cgroup/unified$mine/cgroup.procs ]] && deleg=true
        else
                [[ -w /sys/fs/cgroup/memory$mine ]] && deleg=true
        fi
        nook_rootful && deleg=true
        is "${lines[8]:-}" "deleg:$deleg" "$who: the delegation check matches what this uid can write"
        # networking: slirp4netns opens /dev/net/tun as us, so the check needs both (mode 0600 here
        # for an unprivileged user said "ok", and every --network public create then failed)
        local slirp=false
        command -v slirp4netns >/dev/null && [[ -r /dev/net/tun && -w /dev/net/tun ]] && slirp=true
        is "${lines[9]:-}" "slirp:$slirp" "$who: the slirp4netns check says whether this uid can use /dev/net/tun"
}

run_nook doctor
is "$status" 0 "nook doctor exits 0 on this host"
like "$out" "nook can run sandboxes here" "the text report says sandboxes can run"
text=$out
run_nook doctor --json
is "$status" 0 "nook doctor --json exits 0"
json=$out
want_rootless=false
nook_rootful || want_rootless=true
check_json "$json" "$want_rootless" "uid $(id -u)"
run_nook --json doctor
is "$out" "$json" "nook --json doctor is the same report as doctor --json"
# every check named in the JSON appears in the text table
missing=""
while IFS= read -r name; do
        [[ $text == *"$name"* ]] || missing+="$name;"
done < <($PY -c 'import json,sys; [print(c["name"]) for c in json.load(sys.stdin)["checks"]]' <<<"$json")
is "$missing" "" "the text table lists every check of the JSON"
check "the text table marks each check (ok/--/FAIL)" grep -Eq '^(FAIL|ok|--) +cgroup delegation ' <<<"$text"
# the egress gateway row: the build tree's nook-egress is found; a missing one is named, with a fix
r=$($PY -c 'import json,os,sys; ck={c["name"]:c for c in json.load(sys.stdin)["checks"]}; e=ck["egress gateway"]; print(e["ok"], os.path.realpath(e["detail"].split(":")[0]))' <<<"$json")
is "$r" "True $(realpath "$NOOK_BUILD_DIR/src/egress/nook-egress")" "the egress gateway row finds this build's nook-egress"
r=$(NOOK_EGRESS=/nonexistent/nook-egress "$NOOK" doctor --json 2>/dev/null |
        $PY -c 'import json,sys; ck={c["name"]:c for c in json.load(sys.stdin)["checks"]}; e=ck["egress gateway"]; print(e["ok"], e["detail"], bool(e.get("fix")))')
is "$r" "False no nook-egress at /nonexistent/nook-egress: --secret, --allow-http and --egress-audit are refused True" \
        "a missing nook-egress is named in the row, with a fix"
expect_fail 2 "an unknown argument" doctor --bogus
run_nook doctor --help
is "$status" 0 "doctor --help exits 0"

if can_become_nook_test; then
        uhome=$(runuser -u nook-test -- mktemp -d /var/tmp/nook-test-doc.XXXXXXXX)
        uout=$(runuser -u nook-test -- env NOOK_HOME="$uhome" "$NOOK" doctor --json 2>&1)
        ustatus=$?
        rm -rf "$uhome"
        is "$ustatus" 0 "as nook-test: nook doctor --json exits 0"
        # the delegation expectation for nook-test: computed as that user
        uw=false
        umine=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
        runuser -u nook-test -- test -w "/sys/fs/cgroup/memory$umine" && uw=true
        r=$($PY -c 'import json,sys; d=json.load(sys.stdin); ck={c["name"]:c for c in d["checks"]}; print(d["ok"], d["rootless"], ck["cgroup delegation"]["ok"], ",".join(c["name"] for c in d["checks"] if not c["ok"] and not c.get("fix")))' <<<"$uout" 2>&1)
        is "$r" "True True $([[ $uw == true ]] && echo True || echo False) " \
                "as nook-test: ok, rootless, delegation matches what nook-test can write, every failure has a fix"
else
        skip_expected "the nook-test run needs root and the user nook-test"
        skip_expected "the nook-test run needs root and the user nook-test"
fi
