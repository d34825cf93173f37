#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Node binding's tests: npm deps (npm ci from the committed locks), then node --test against
# the real addon and real sandboxes, then the typed test (tests/node/types, tsc --strict), then Smithers' provider contract suite under Bun, then a
# real Smithers workflow (smithers CLI under Bun) whose <Sandbox> runs a child workflow in nook.
#   tests/node/run.sh [PATH/TO/nook_node.node]        (meson test --suite node passes it)
# NOOK_JS_RUNTIME=PATH (a node or bun binary; tests/node/runtimes.sh installs Node 22 and Bun):
# runs only the *.test.js files, under that runtime (`node --test`, or `bun test`); the contract
# and workflow tests drive Bun themselves whatever the runtime, so they run in the default pass.
# The addon: the argument, else $NOOK_NODE_ADDON, else $NOOK_BUILD_DIR/bindings/node/nook_node.node
# (meson sets NOOK_BUILD_DIR), else the package looks in build-node/ and build/ itself.
#
# The workflow test's dependencies (smithers-orchestrator, ~1 GiB) are installed once and cached:
# under $NOOK_BUILD_DIR/node-workflow when NOOK_BUILD_DIR is set, else in tests/node/workflow;
# reinstalled only when tests/node/workflow/package-lock.json changes.  A failing *install*
# (registry trouble) is reported and the workflow test skipped; NOOK_REQUIRE_WORKFLOW=1 makes it
# a failure.  Once installed, the test must pass.  NOOK_SKIP_WORKFLOW=1 skips it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pkg="$root/bindings/node"

if [ $# -ge 1 ]; then
        NOOK_NODE_ADDON=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
        export NOOK_NODE_ADDON
elif [ -z "${NOOK_NODE_ADDON:-}" ] && [ -n "${NOOK_BUILD_DIR:-}" ] &&
        [ -f "$NOOK_BUILD_DIR/bindings/node/nook_node.node" ]; then
        NOOK_NODE_ADDON=$(cd "$NOOK_BUILD_DIR" && pwd)/bindings/node/nook_node.node
        export NOOK_NODE_ADDON
fi
if [ -n "${NOOK_NODE_ADDON:-}" ] && [ ! -f "$NOOK_NODE_ADDON" ]; then
        echo "run.sh: no addon at $NOOK_NODE_ADDON (build it: ninja -C BUILD)" >&2
        exit 1
fi
# the supervisor beside the addon's libnook (a build tree): found by libnook itself
# The runtime folders' root (docs/design/runtime.md, "The runtime folder"): one of this run's own,
# as lib.sh gives each integration test, so the tests never touch /run/nook or /dev/shm/nook-UID.
if [ -z "${NOOK_RUNTIME_DIR:-}" ]; then
        NOOK_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/nook-node-run.XXXXXX")
        chmod 1777 "$NOOK_RUNTIME_DIR"
        export NOOK_RUNTIME_DIR
        trap 'rm -rf "$NOOK_RUNTIME_DIR"' EXIT
fi

# lock_sha FILE: a stamp of the lock file an install came from
lock_sha() {
        sha256sum "$1" | cut -d' ' -f1
}

# npm_ci DIR: npm ci unless DIR/node_modules was installed from this very lock (stamp)
npm_ci() {
        stamp="$1/node_modules/.nook-lock-sha256"
        want=$(lock_sha "$1/package-lock.json")
        if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
                return 0
        fi
        echo "run.sh: npm ci in $1" >&2
        (cd "$1" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error) || return 1
        echo "$want" > "$stamp"
}

npm_ci "$pkg"

rc=0
if [ -n "${NOOK_JS_RUNTIME:-}" ]; then
        rt=$NOOK_JS_RUNTIME
        if "$rt" -e 'process.exit(process.versions.bun ? 0 : 1)' 2> /dev/null; then
                echo "run.sh: *.test.js under bun $("$rt" --version)" >&2
                # bun test's default per-test timeout (5 s) is shorter than node's (none)
                (cd "$here" && "$rt" test --timeout 120000 "$here"/*.test.js) || rc=1
        else
                echo "run.sh: *.test.js under node $("$rt" --version)" >&2
                "$rt" --test "$here"/*.test.js || rc=1
        fi
        exit $rc
fi
node --test "$here"/*.test.js || rc=1
# the package's .d.ts against its runtime: tsc --strict, then the compiled test runs (types/)
if command -v tsc > /dev/null 2>&1; then
        tsout=$(mktemp -d "${TMPDIR:-/tmp}/nook-node-types.XXXXXX")
        mkdir "$tsout/node_modules"
        ln -s "$pkg" "$tsout/node_modules/nook-sandbox"
        if tsc -p "$here/types" --noEmit && tsc -p "$here/types" --outDir "$tsout"; then
                node --test "$tsout/types.test.js" || rc=1
        else
                echo "run.sh: tsc --strict rejected tests/node/types (the .d.ts and the test disagree)" >&2
                rc=1
        fi
        rm -rf "$tsout"
else
        echo "run.sh: tsc not installed (Debian: node-typescript): the typed test is skipped" >&2
fi
"$pkg/node_modules/.bin/bun" test "$here/bun/contract.test.js" || rc=1

# ---- the Smithers workflow ------------------------------------------------------------------
src="$here/workflow"
if [ "${NOOK_SKIP_WORKFLOW:-0}" = 1 ]; then
        echo "run.sh: Smithers workflow test skipped (NOOK_SKIP_WORKFLOW=1)" >&2
        exit $rc
fi
if [ -n "${NOOK_BUILD_DIR:-}" ]; then
        wf="$(cd "$NOOK_BUILD_DIR" && pwd)/node-workflow"
        mkdir -p "$wf"
        # the sources go beside the cached node_modules (parent.tsx bind-mounts its own directory)
        for f in package.json package-lock.json parent.tsx child.tsx runner.ts; do
                cmp -s "$src/$f" "$wf/$f" || cp "$src/$f" "$wf/$f"
        done
else
        wf="$src"
fi
log=$(mktemp "${TMPDIR:-/tmp}/nook-node-workflow-npm.XXXXXX")
if ! npm_ci "$wf" > "$log" 2>&1; then
        echo "" >&2
        echo "run.sh: *** the Smithers workflow test's npm ci FAILED in $wf (registry trouble, or a lock out of sync); full log: $log" >&2
        grep -m 12 'npm error' "$log" >&2 || tail -n 20 "$log" >&2
        if [ "${NOOK_REQUIRE_WORKFLOW:-0}" = 1 ]; then
                echo "run.sh: NOOK_REQUIRE_WORKFLOW=1: counted as a failure" >&2
                exit 1
        fi
        echo "run.sh: *** workflow test SKIPPED (set NOOK_REQUIRE_WORKFLOW=1 to fail instead)" >&2
        exit $rc
fi
rm -f "$log"
NOOK_WORKFLOW_DIR="$wf" node --test "$src/workflow.test.cjs" || rc=1
exit $rc
