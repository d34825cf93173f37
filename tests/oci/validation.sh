#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The OCI runtime-tools validation suite against one OCI runtime (issue 16).
#
#   tests/oci/validation.sh [options] RUNTIME
#
# RUNTIME is a path or a command name (runc, build-test/src/oci/nook-oci). The suite is the
# upstream opencontainers/runtime-tools tree at 0105384 (the commit Debian 12's
# golang-github-opencontainers-runtime-tools-dev packages; Debian ships only its library folders,
# not validation/, cmd/runtimetest or the test rootfs, nor the tap-go module the tests import),
# from the tarball in NOOK_OCI_TOOLS_TARBALL (default: the shared copy, see find_tarball). It is
# built offline with Debian's golang-go (GOFLAGS=-mod=vendor GOPROXY=off) once, and cached
# under the build directory until the tarball or the Go version changes.
#
# Every validation program runs against RUNTIME with a per-program timeout, from the source root
# (the programs read ./rootfs-amd64.tar.gz and ./runtimetest), inside `unshare -m` (linux_ns_itype
# would leave mounts behind), with its own TMPDIR and its own runtime state directory: RUNTIME is
# called through a wrapper that adds `--root DIR`, so containers other people run with the same
# runtime are never seen, listed or deleted. Runs are serialized host-wide with flock, because
# the programs use fixed cgroup paths (/sys/fs/cgroup/*/cgrouptest).
#
# Output: one TAP-ish line per check, named "PROGRAM: DESCRIPTION" ("ok", "not ok", or
# "ok ... # TODO/SKIP" for what node-tap calls pending: the suite's SHOULD-level checks and the
# ones it skips), a line per program that crashed, timed out or was not run, then
#   N passed, N failed, N skipped
# where skipped = pending. The same lines go to --results FILE for tests/oci/compare.sh.
#
# Options:
#   --cache DIR     where the suite is built (default $NOOK_BUILD_DIR/oci-validation, or
#                   build-test/oci-validation next to the sources)
#   --timeout S     per-program timeout (default 60; runc needs < 10 s for any of them here)
#   --budget S      stop starting programs after S seconds in all (default 0: no limit); the
#                   ones left are reported "not ok PROGRAM (not run: time budget spent)"
#   --only REGEX    run only the programs whose name matches (bash ERE)
#   --results FILE  also write the per-check lines there
#   --build-only    build (or check the cache) and exit
#   --keep          keep the temporary directory (bundles, logs) and say where
#
# Exit status: 0 when every check passed (pending allowed), 1 when a check failed, 2 on a usage
# error, 3 when the suite could not be built or run at all.
set -uo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

usage() {
        sed -n '/^#   tests\/oci/,/^# Exit status/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 2
}

die() {
        echo "validation.sh: $*" >&2
        exit 3
}

cache=""
per_timeout=60
budget=0
only=""
results=""
build_only=0
keep=0
runtime=""
while (($#)); do
        case "$1" in
        --cache) cache=${2:?--cache needs a directory}; shift 2 ;;
        --timeout) per_timeout=${2:?--timeout needs seconds}; shift 2 ;;
        --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
        --only) only=${2:?--only needs a regular expression}; shift 2 ;;
        --results) results=${2:?--results needs a file}; shift 2 ;;
        --build-only) build_only=1; shift ;;
        --keep) keep=1; shift ;;
        -h | --help) usage ;;
        -*) echo "validation.sh: unknown option '$1'" >&2; usage ;;
        *)
                [[ -z "$runtime" ]] || { echo "validation.sh: one RUNTIME only (got '$runtime' and '$1')" >&2; usage; }
                runtime=$1
                shift
                ;;
        esac
done
[[ "$per_timeout" =~ ^[1-9][0-9]*$ ]] || { echo "validation.sh: --timeout '$per_timeout' is not a positive number of seconds" >&2; exit 2; }
[[ "$budget" =~ ^[0-9]+$ ]] || { echo "validation.sh: --budget '$budget' is not a number of seconds" >&2; exit 2; }
((build_only)) || [[ -n "$runtime" ]] || { echo "validation.sh: which RUNTIME? (e.g. runc)" >&2; usage; }

if [[ -z "$cache" ]]; then
        cache="${NOOK_BUILD_DIR:-$src/build-test}/oci-validation"
fi
mkdir -p "$cache" || die "cannot create the cache directory '$cache'"
cache=$(cd "$cache" && pwd)

# find_tarball: NOOK_OCI_TOOLS_TARBALL, else the shared copy beside the checkout (../shared) or
# at /work/shared, where this project's machines keep it.
find_tarball() {
        local c
        for c in "${NOOK_OCI_TOOLS_TARBALL:-}" \
                "$src/../shared/oci-runtime-tools/runtime-tools-0105384.tar.gz" \
                "$src/../../shared/oci-runtime-tools/runtime-tools-0105384.tar.gz" \
                /work/shared/oci-runtime-tools/runtime-tools-0105384.tar.gz; do
                [[ -n "$c" && -f "$c" ]] && { echo "$c"; return 0; }
        done
        return 1
}

# build_suite: unpacks and builds into $cache/src unless $cache/stamp says it is current.
build_suite() {
        local tarball key
        tarball=$(find_tarball) || die "no runtime-tools tarball: set NOOK_OCI_TOOLS_TARBALL to runtime-tools-0105384.tar.gz (see /work/shared/oci-runtime-tools/README.md)"
        command -v go >/dev/null || die "no Go compiler: apt-get install golang-go (scripts/deps.sh)"
        key="$(sha256sum "$tarball" | cut -d' ' -f1) $(go version)"
        if [[ -f "$cache/stamp" && "$(cat "$cache/stamp")" == "$key" && -x "$cache/src/runtimetest" ]]; then
                return 0
        fi
        echo "# building the runtime-tools validation suite in $cache (once; ~1 min on 2 cores)" >&2
        rm -rf "$cache/src" "$cache/stamp"
        mkdir -p "$cache/src" || die "cannot create '$cache/src'"
        tar -xzf "$tarball" -C "$cache/src" || die "cannot unpack '$tarball'"
        # Offline: the tree vendors every module it needs; no proxy, no network.
        if ! (cd "$cache/src" && env GOFLAGS=-mod=vendor GOPROXY=off GO111MODULE=on \
                GOCACHE="$cache/gocache" GOPATH="$cache/gopath" \
                make COMMIT=0105384 runtimetest validation-executables) >"$cache/build.log" 2>&1; then
                tail -n 30 "$cache/build.log" >&2
                die "building the suite failed (full log: $cache/build.log)"
        fi
        echo "$key" >"$cache/stamp"
}

exec 9>"$cache/.lock"
flock 9 || die "cannot lock '$cache/.lock'"
build_suite
flock -u 9
((build_only)) && { echo "# suite built in $cache/src"; exit 0; }

[[ $(id -u) == 0 ]] || die "the suite needs root (it creates containers with cgroups and namespaces)"
runtime_path=$(command -v "$runtime") || die "runtime '$runtime' not found (a path or a command in PATH)"
runtime_path=$(cd "$(dirname "$runtime_path")" && pwd)/$(basename "$runtime_path")
[[ -x "$runtime_path" ]] || die "runtime '$runtime_path' is not executable"

# Host-wide lock: the programs use fixed cgroup paths, two runs at once would collide.
lockfile=/run/lock/nook-oci-validation.lock
[[ -d /run/lock ]] || lockfile=/tmp/nook-oci-validation.lock
exec 8>"$lockfile"
if ! flock -w 600 8; then
        die "another validation run has held $lockfile for 10 minutes"
fi

work=$(mktemp -d /tmp/nook-oci-validation.XXXXXX) || die "cannot create a temporary directory"
# 0755: a container with a user namespace (linux_uid_mappings, linux_ns_nopath) must reach its
# bundle under TMPDIR as a mapped, unprivileged uid.
chmod 0755 "$work"
mkdir -p "$work/tmp" "$work/state" "$work/tap"
# The wrapper gives the runtime a state directory of its own (runc, crun, youki and nook-oci all
# take the global --root option).
cat >"$work/runtime" <<EOF
#!/bin/sh
exec '$runtime_path' --root '$work/state' "\$@"
EOF
chmod 0755 "$work/runtime"

# leftovers: containers this run left (delete --force through the same --root), the cgroups the
# programs name, bundles. Only what this run made: its state dir and TMPDIR are its own.
leftovers() {
        local d id
        for d in "$work/state"/*/; do
                [[ -d "$d" ]] || continue
                id=$(basename "$d")
                timeout 20 "$work/runtime" kill "$id" KILL >/dev/null 2>&1
                timeout 20 "$work/runtime" delete --force "$id" >/dev/null 2>&1
        done
        for d in /sys/fs/cgroup/*/cgrouptest /sys/fs/cgroup/cgrouptest; do
                [[ -d "$d" ]] && rmdir "$d" 2>/dev/null
        done
        rm -rf "${work:?}/tmp/"* 2>/dev/null
        return 0
}
cleanup() {
        leftovers
        if ((keep)); then
                echo "# kept $work" >&2
        else
                rm -rf "$work"
        fi
        return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# parse_tap PROGRAM FILE STATUS: prints this run's lines for one program and its counts on fd 3.
parse_tap() {
        awk -v prog="$1" -v rc="$3" -v tmo="$per_timeout" '
        # Names repeat (a program checks "memory kernel is set correctly" for six configs)
        # and their order varies between runs: tests/oci/compare.sh counts them per name.
        function name(desc) {
                gsub(/[[:space:]]+$/, "", desc)
                if (desc == "") desc = "(no description)"
                return prog ": " desc
        }
        /^(not )?ok [0-9]+/ {
                line = $0
                verdict = (line ~ /^ok/) ? "ok" : "not ok"
                sub(/^(not )?ok [0-9]+ */, "", line)
                if (line ~ /^# (TODO|SKIP)/) {
                        dir = (line ~ /^# TODO/) ? "TODO" : "SKIP"
                        sub(/^# (TODO|SKIP) */, "", line)
                        print verdict " - " name(line) " # " dir
                        pend++
                        next
                }
                sub(/^- */, "", line)
                print verdict " - " name(line)
                if (verdict == "ok") pass++; else fail++
                next
        }
        # Several programs print more than one TAP document: plans add up.
        /^1\.\.[0-9]+/ { plan += substr($0, 4) + 0; planned = 1 }
        # The lifecycle programs (hooks, poststart, ...) report their verdict only as a YAML
        # "error" with no check at all; node-tap reads that as "1..0", a skip. Here it is one
        # check named "PROGRAM: lifecycle", failed with the error text as diagnostic.
        /^    "error": / && !err { err = $0; sub(/^    "error": "/, "", err); sub(/\\n.*|",?$/, "", err) }
        END {
                ran = pass + fail + pend
                if (rc == 124 || rc == 137) {
                        print "not ok - " prog " (timed out after " tmo " s)"; fail++
                } else if (rc != 0) {
                        print "not ok - " prog " (exited " rc ")"; fail++
                } else if (planned && plan != ran) {
                        print "not ok - " prog " (planned " plan " checks, ran " ran ")"; fail++
                } else if (ran == 0 && err != "") {
                        print "not ok - " prog ": lifecycle"; print "#   error: " err; fail++
                } else if (ran == 0) {
                        # and the *_fail programs print nothing at all when the runtime refused
                        # the bad config as it must (exit 0), and exit 1 when it did not.
                        print "ok - " prog ": lifecycle"; pass++
                }
                printf "%d %d %d\n", pass, fail, pend > "/dev/fd/3"
        }' "$2"
}

passed=0
failed=0
pending=0
programs=0
t0=$SECONDS
: >"$work/results"
echo "# runtime-tools validation against $runtime_path ($(find "$cache/src/validation" -name "*.t" | wc -l) programs, ${per_timeout}s each)"
cd "$cache/src" || die "no '$cache/src'"
for t in validation/*/*.t; do
        prog=$(basename "$t" .t)
        [[ -n "$only" && ! "$prog" =~ $only ]] && continue
        programs=$((programs + 1))
        if ((budget > 0 && SECONDS - t0 >= budget)); then
                echo "not ok - $prog (not run: time budget of ${budget}s spent)" | tee -a "$work/results"
                failed=$((failed + 1))
                continue
        fi
        # setsid + timeout: a hung container process cannot hold the terminal or outlive the kill.
        RUNTIME="$work/runtime" TMPDIR="$work/tmp" timeout -k 5 "$per_timeout" \
                unshare -m --propagation private "./$t" >"$work/tap/$prog.tap" 2>"$work/tap/$prog.err" </dev/null
        rc=$?
        counts=$(parse_tap "$prog" "$work/tap/$prog.tap" "$rc" 3>&1 1>>"$work/results")
        read -r p f s <<<"$counts"
        passed=$((passed + p))
        failed=$((failed + f))
        pending=$((pending + s))
        # A program's failures, with the runtime's error text, for whoever reads the log.
        if ((f > 0)); then
                grep -E "^not ok - ${prog}[: ]" "$work/results" | tail -n "$f"
                if [[ -s "$work/tap/$prog.err" ]]; then
                        sed -n '1,5s/^/#   stderr: /p' "$work/tap/$prog.err"
                fi
        fi
        leftovers
done
# Everything, in order, after the failures shown as they came.
echo "# all checks:"
cat "$work/results"
[[ -n "$results" ]] && cp "$work/results" "$results"
echo "# $programs programs in $((SECONDS - t0)) s"
echo "$passed passed, $failed failed, $pending skipped"
((failed == 0))
