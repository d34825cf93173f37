#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Hostile images and registries: bad layer shapes pushed to a real docker-registry, and a
# fault-injecting stub for what a real registry never does (500 then 200, a stall, a blob that
# does not match its digest, a truncated blob, an unknown media type, an index without our
# platform, 401).  Each must fail clearly (or, for the 500, succeed after a retry) and leave
# nothing outside the layer directory and no blob that failed verification.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/image_lib.sh"

require_bin "$NOOK" "$NOOK_SUPERVISOR"
img_require
plan 23

img_start_registry plain
export NOOK_INSECURE_REGISTRIES="$REG_plain"
canary="$IMG_WORK/outside"
mkdir -p "$canary"

hostile() { # NAME ENTRIES-JSON
        local name=$1
        printf '{"layers": [%s]}' "$2" | img_build "$IMG_WORK/$name" t
        img_push "$IMG_WORK/$name" t "$REG_plain/hostile/$name:t" || bail_out "push of $name failed"
        expect_fail 1 "layer '$name' is refused" image pull --quiet "$REG_plain/hostile/$name:t"
        like "$err" "Refusing layer entry" "the '$name' refusal names the entry"
}
hostile absolute "[{\"name\":\"$canary/abs\",\"data\":\"x\"}]"
hostile dotdot '[{"name":"a/../../../../../../../../tmp/nook-dotdot","data":"x"}]'
hostile symlink-write "[{\"name\":\"link\",\"type\":\"symlink\",\"target\":\"$canary\"},{\"name\":\"link/planted\",\"data\":\"x\"}]"
hostile hardlink-out '[{"name":"h","type":"hardlink","target":"../../../../../etc/passwd"}]'
is "$(ls -A "$canary")" "" "nothing was written outside a layer directory"
ok_nothing=$(find "$NOOK_HOME/images/layers" -mindepth 2 -maxdepth 2 ! -name '.tmp-*' | wc -l)
is "$ok_nothing" "0" "no refused layer was kept"
[[ ! -e /tmp/nook-dotdot ]] && ok "no '..' entry escaped" || not_ok "no '..' entry escaped"

stub() { # MODE EXPECTED-STATUS DESC [nook args]
        local mode=$1
        img_stub "$mode"
        # a fresh store each time: the stub serves the same layer, which would be cached
        rm -rf "$NOOK_HOME/images" "$NOOK_HOME"/nook.db*
        NOOK_INSECURE_REGISTRIES="$STUB_ADDR" run_nook image pull --quiet --timeout 2s "$STUB_ADDR/stub/img"
}
stub flaky500
is "$status" 0 "a registry that answers 500 then 200 is retried"
stub stall
is "$status" 1 "a stalled registry fails"
like "$err" "stalled" "the stall is reported as such"
stub badblob
is "$status" 1 "a blob that does not match its digest fails the pull"
like "$err" "Digest mismatch for blob sha256:" "the mismatch names the digest"
is "$(find "$NOOK_HOME/images/tmp" -type f | wc -l)" "0" "the mismatching download was deleted"
stub truncated
is "$status" 1 "a truncated blob fails the pull"
stub unknowntype
like "$err" "Unsupported layer media type 'application/x-nook-unknown'" "an unknown layer media type is named"
stub noplatform
like "$err" "no manifest for linux/amd64 \(it offers: linux/s390x\)" "an index without our platform says what it offers"
stub auth401
like "$err" "Registry '$STUB_ADDR' refused access" "a 401 without credentials names the registry"
expect_fail 1 "a malformed reference" image pull 'UPPER/Case::x'
like "$err" "Invalid image reference 'UPPER/Case::x'" "the reference error quotes it"
