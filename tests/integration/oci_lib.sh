# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Helpers for the nook-oci tests (test_oci_*.sh): a busybox root filesystem, bundles made with
# `nook-oci spec` and edited with jq, and what a container may leave behind.
NOOK_OCI="$NOOK_BUILD_DIR/src/oci/nook-oci"
OCI_ROOT="$NOOK_HOME/oci-root"

# oci_stage_check: nook-oci makes cgroups under the host's hierarchies, device nodes and mounts
# as host root (as runc does when not rootless).  Prints why not when this stage cannot.
oci_stage_reason() {
        if [[ $(id -u) != 0 ]]; then
                echo "nook-oci runs as host root here (podman/containerd/kubelet start it as root); rootless nook-oci is not implemented"
        elif [[ $(awk 'NR==1{print $1, $2, $3}' /proc/self/uid_map) != "0 0 4294967295" ]]; then
                echo "inside 'unshare -r' the cgroup tree and mknod belong to the real root; nook-oci needs host root"
        fi
}

# oci_require_stage: the top of a nook-oci test.  Where this stage cannot run nook-oci the whole
# file is one expected skip (plan 1) and ends; without busybox-static or jq it bails out.
oci_require_stage() {
        require_bin "$NOOK_OCI"
        local reason
        reason=$(oci_stage_reason)
        if [[ -n "$reason" ]]; then
                plan 1
                skip_expected "$reason"
                exit 0
        fi
        if ! command -v busybox >/dev/null || ! command -v jq >/dev/null; then
                bail_out "needs busybox (busybox-static) and jq"
        fi
}

# oci_bundle_beside BASE NAME CGROUP [JQ]: the bundle $NOOK_HOME/NAME, sharing bundle BASE's root
# filesystem, with linux.cgroupsPath CGROUP and then the jq filter JQ applied to BASE's config.
oci_bundle_beside() {
        mkdir -p "$NOOK_HOME/$2"
        jq --arg cg "$3" --arg root "$1/rootfs" ".root.path = \$root | .linux.cgroupsPath = \$cg | ${4:-.}" \
                "$1/config.json" >"$NOOK_HOME/$2/config.json"
}

# oci_rootfs DIR: a busybox-static root filesystem.
oci_rootfs() {
        local d=$1 c
        mkdir -p "$d/bin" "$d/proc" "$d/dev" "$d/sys" "$d/tmp" "$d/etc" "$d/run"
        cp "$(command -v busybox)" "$d/bin/busybox"
        for c in sh echo cat ls sleep id true false ps mount hostname grep touch kill wc head stat tty; do
                ln -sf busybox "$d/bin/$c"
        done
        echo "root:x:0:0:root:/:/bin/sh" >"$d/etc/passwd"
}

# oci_bundle DIR [JQ-FILTER]: DIR/rootfs (busybox) and DIR/config.json from `nook-oci spec`,
# terminal off, edited with the jq filter.
oci_bundle() {
        local d=$1 f=${2:-.}
        mkdir -p "$d"
        [[ -d "$d/rootfs" ]] || oci_rootfs "$d/rootfs"
        rm -f "$d/config.json"
        "$NOOK_OCI" spec --bundle "$d" || return 1
        jq ".process.terminal = false | $f" "$d/config.json" >"$d/config.json.new" && mv "$d/config.json.new" "$d/config.json"
}

# oci ARGS...: nook-oci with this test's --root; sets $out, $err, $status.
oci() {
        local ofile efile
        ofile=$(mktemp "$NOOK_HOME.out.XXXXXX")
        efile=$(mktemp "$NOOK_HOME.err.XXXXXX")
        timeout --kill-after=5 "${NOOK_TEST_TIMEOUT:-120}" "$NOOK_OCI" --root "$OCI_ROOT" "$@" \
                </dev/null >"$ofile" 2>"$efile"
        status=$?
        out=$(cat "$ofile")
        err=$(cat "$efile")
        rm -f "$ofile" "$efile"
        if _sanitizer_report "$err"; then
                not_ok "no sanitizer report from: nook-oci $*" "$err"
        fi
        return 0
}

# oci_leftovers ID: what container ID left in --root, in the cgroup tree, and as mounts.
oci_leftovers() {
        local id=$1
        [[ -e "$OCI_ROOT/$id" ]] && echo "state left: $OCI_ROOT/$id"
        find /sys/fs/cgroup -mindepth 2 -maxdepth 4 -type d -path "*/nook-oci/$id" 2>/dev/null | sed 's/^/cgroup left: /'
        grep -F " $NOOK_HOME/" /proc/self/mountinfo | sed 's/^/mount left: /'
        return 0
}
