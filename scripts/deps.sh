#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs everything nook needs to build and test on Debian 12. Idempotent: checks each
# package first and runs `apt-get update` (once) only when something is missing. Quiet unless
# something fails, then prints apt's log. Needs root (or sudo) only when it has to install.
#
# Knobs: NOOK_DEPS_VERBOSE=1 prints what is checked and installed.
set -euo pipefail

packages=(
        # build
        meson ninja-build pkg-config gcc clang
        # ASan/UBSan/libFuzzer runtimes for clang
        libclang-rt-14-dev
        # libraries (DESIGN.md "Dependencies")
        libseccomp-dev libjansson-dev libsqlite3-dev sqlite3 libcurl4-openssl-dev libarchive-dev
        libnftables-dev
        # SHA-256 of diff/merge baselines (src/tree/manifest.c) without loading libcrypto
        nettle-dev
        # tests
        libcriterion-dev
        # runtime helpers and peers (bench compares against bubblewrap)
        slirp4netns bubblewrap uidmap busybox-static iproute2 docker-registry skopeo umoci apache2-utils openssl
        # network: nft for debugging rules, dnsmasq (the binary only) and iperf3 for the network
        # tests and bench; curl is what the tests run inside sandboxes
        nftables dnsmasq-base iperf3 curl
        # lint
        clang-format clang-tidy cppcheck
        # scripts/test: useradd (passwd), unshare/setpriv/runuser/findmnt (util-linux),
        # pgrep/ps (procps), testlog.json parsing (python3)
        passwd util-linux procps python3
        # Node binding and quickstart
        nodejs npm
        # CLI tables (src/cli/table.c): ls, ps, stats, image ls, snapshot ls
        libsmartcols-dev
        # install (issue 12): the deb stage builds and installs the package (dpkg-buildpackage,
        # debhelper's meson support, man -w); zsh and fish to test their completion scripts
        dpkg-dev debhelper fakeroot man-db bash-completion zsh fish
        # branch (issue 15): bench/branch_bench.sh makes an XFS filesystem with reflink on a loop device
        xfsprogs
        # egress integration (issue 14): test_egress.sh's clients in the guest (Python requests;
        # jq reads the audit log)
        python3-requests jq
        # egress gateway (src/egress, issue 14): OpenSSL 3 for TLS, the CA and leaf certificates;
        # nghttp2 for its HTTP/2 front
        libssl-dev libnghttp2-dev
        # OCI engines (issue 16, tests/oci and test_oci_containerd/podman_conf): runc is the
        # reference runtime, containerd (ctr, runc v2 shim) and podman drive nook-oci; golang-go
        # builds the runtime-tools validation suite offline (its source: tests/oci/validation.sh)
        runc containerd podman golang-go
        # egress HTTP/2 upstreams (issue 14, egressh2): test_egress_h2up.sh's h2-only upstream
        python3-h2
        # memory checkpoints (issue 15): nook doctor and nook checkpoint probe the real criu, and
        # test_checkpoint confirms the cause it names with `criu check`
        criu
)

log() { [[ "${NOOK_DEPS_VERBOSE:-0}" == 1 ]] && echo "deps: $*" >&2 || true; }

is_installed() {
        local p="$1"
        case "$p" in
        nodejs | npm)
                # The machine image may ship NodeSource's nodejs, which bundles npm and
                # conflicts with Debian's npm package: the commands are what matters.
                local cmd=$p
                [[ $p == nodejs ]] && cmd=node
                command -v "$cmd" >/dev/null 2>&1 && return 0
                ;;
        esac
        [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null)" == "ii "* ]]
}

missing=()
for p in "${packages[@]}"; do
        if is_installed "$p"; then
                log "have $p"
        else
                missing+=("$p")
        fi
done

if ((${#missing[@]} == 0)); then
        log "all ${#packages[@]} packages present"
        exit 0
fi

sudo=()
if [[ $(id -u) != 0 ]]; then
        if command -v sudo >/dev/null 2>&1; then
                sudo=(sudo)
        else
                echo "deps: missing packages (${missing[*]}) and not root; run: sudo $0" >&2
                exit 1
        fi
fi

logfile=$(mktemp /tmp/nook-deps.XXXXXX.log)
trap 'rm -f "$logfile"' EXIT
apt_opts=(-y -q -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef
        -o Dpkg::Options::=--force-confold)

echo "deps: installing ${missing[*]}" >&2
if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 update \
        >"$logfile" 2>&1; then
        cat "$logfile" >&2
        echo "deps: apt-get update failed" >&2
        exit 1
fi
if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" \
        --no-install-recommends "${missing[@]}" >>"$logfile" 2>&1; then
        cat "$logfile" >&2
        echo "deps: apt-get install ${missing[*]} failed" >&2
        exit 1
fi

still=()
for p in "${missing[@]}"; do
        is_installed "$p" || still+=("$p")
done
if ((${#still[@]})); then
        echo "deps: still missing after install: ${still[*]}" >&2
        exit 1
fi
log "installed ${missing[*]}"
