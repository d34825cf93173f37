#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Node binding's tests: npm deps (npm ci from the committed lock), then node --test against
# the real addon and real sandboxes, then Smithers' provider contract suite under Bun.
#   tests/node/run.sh [PATH/TO/nook_node.node]        (meson test --suite node passes it)
# NOOK_NODE_ADDON may be set instead; otherwise the package looks in build-node/ and build/.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pkg="$root/bindings/node"

if [ $# -ge 1 ]; then
        NOOK_NODE_ADDON=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
        export NOOK_NODE_ADDON
fi
# the supervisor beside the addon's libnook (a build tree): found by libnook itself

if [ ! -d "$pkg/node_modules/@smithers-orchestrator/sandbox" ] || [ "$pkg/package-lock.json" -nt "$pkg/node_modules/.package-lock.json" ]; then
        (cd "$pkg" && npm ci --no-audit --no-fund --loglevel=error)
fi

rc=0
node --test "$here"/*.test.js || rc=1
"$pkg/node_modules/.bin/bun" test "$here/bun/contract.test.js" || rc=1
exit $rc
