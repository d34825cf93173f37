#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The npm package as a user gets it: `npm pack` in bindings/node, `npm install ./nook-sandbox-V.tgz`
# in an empty directory with a clean environment (env -i: no NOOK_* variable, an empty npm cache,
# --offline), then the workspace example of the docs prints 42 under Node, and under Node 22 and
# Bun when they are at hand.  Also: node_modules stays small (<= 10 MB), nook-sandbox/smithers
# without Smithers names what to install, and an install that cannot build fails naming the
# missing -dev packages and leaves nothing.
#   tests/package/npm.sh            (meson test --suite package npm)
# Node 22 and Bun: $NOOK_TEST_NODE22 / $NOOK_TEST_BUN (paths), else node@22 and bun@1.3.3 from
# the npm registry, installed once under $NOOK_BUILD_DIR/node-runtimes (or $TMPDIR).  A failing
# registry skips those two with a note; NOOK_REQUIRE_RUNTIMES=1 makes that a failure.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pkg="$root/bindings/node"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        echo "1..0 # SKIP node/npm not installed"
        exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nook-npm-test.XXXXXX")
chmod 0755 "$tmp"
# the examples' homes ($tmp/home-*) link runtime folders on a tmpfs (docs/design/runtime.md,
# "The runtime folder"): those go too, or each run would leave one per example in /dev/shm
rm_tmp() {
        for l in "$tmp"/home-*/run; do
                t=$(readlink "$l") && case "$t" in *..*) ;; /*/nook*/?*) rm -rf "$t" ;; esac
        done
        rm -rf "$tmp"
}
trap rm_tmp EXIT
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $*"; }
check() { # check DESCRIPTION COMMAND...
        d=$1; shift
        if "$@"; then ok "$d"; else not_ok "$d"; fi
}
# a clean environment: what a user's shell has, nothing of ours
clean() {
        env -i PATH="$PATH" HOME="$tmp/home" TMPDIR="$tmp" LANG=C.UTF-8 "$@"
}
mkdir -p "$tmp/home"

# ---- pack ------------------------------------------------------------------------------------
if [ ! -w "$pkg" ]; then
        # an unprivileged CI stage over root's checkout: pack from a copy (prepack writes native/)
        mkdir "$tmp/tree"
        (cd "$root" && tar cf - --exclude='./build*' --exclude=node_modules --exclude=.git --exclude='./tests' .) | (cd "$tmp/tree" && tar xf -)
        pkg="$tmp/tree/bindings/node"
fi
(cd "$pkg" && npm pack --pack-destination "$tmp" --loglevel=error > "$tmp/pack.log" 2>&1) || { cat "$tmp/pack.log"; echo "Bail out! npm pack failed"; exit 1; }
tgz=$(ls "$tmp"/nook-sandbox-*.tgz)
tar tzf "$tgz" > "$tmp/files"
check "the tarball holds libnook's sources, the supervisor's, the N-API headers and the install script" \
        sh -c "grep -qx package/native/src/supervisor/main.c '$tmp/files' && grep -qx package/native/include/nook.h '$tmp/files' &&
                grep -qx package/native/node-api/node_api.h '$tmp/files' && grep -qx package/scripts/install.js '$tmp/files' &&
                grep -qx package/native/meson.build '$tmp/files' && grep -qx package/src/addon.c '$tmp/files'"
check "npm pack leaves no staging directory in the tree" test ! -e "$pkg/native"
check "the tarball carries the license (Apache-2.0) at its root" \
        sh -c "grep -qx package/LICENSE '$tmp/files' && tar xzOf '$tgz' package/LICENSE | grep -q 'Apache License'"
check "and npm pack leaves no copy of it in the tree" test ! -e "$pkg/LICENSE"

# ---- install into an empty directory -----------------------------------------------------------
app="$tmp/app"
mkdir "$app"
if (cd "$app" && clean timeout 600 npm install --offline --no-audit --no-fund --foreground-scripts "$tgz") > "$tmp/install.log" 2>&1; then
        ok "npm install of the tarball builds the addon ($(grep -o 'linking the installed libnook[^)]*)\|building libnook[^.]*' "$tmp/install.log" | head -1))"
else
        not_ok "npm install of the tarball"
        sed 's/^/# /' "$tmp/install.log"
        echo "Bail out! cannot go on without the package"
        exit 1
fi
if grep -q "building libnook" "$tmp/install.log"; then
        check "the bundled build puts the image module beside libnook" \
                test -f "$app/node_modules/nook-sandbox/build/libnook-image.so"
        # secrets, allowHttp and audit need the egress gateway: without it such a create failed
        # naming /usr/local/libexec/nook-egress
        check "the bundled build puts the egress gateway nook-egress beside libnook" \
                test -x "$app/node_modules/nook-sandbox/build/nook-egress"
fi
size=$(du -sk "$app/node_modules" | cut -f1)
check "node_modules is at most 10 MB (${size} KiB)" test "$size" -le 10240

cat > "$app/example.mjs" <<'JS'
import { Sandboxes } from "nook-sandbox";
import { mkdtempSync } from "node:fs";
const sandboxes = new Sandboxes({ home: mkdtempSync(`${process.env.TMPDIR}/home-`) });
const box = await sandboxes.create("w");
await box.writeFile("/src/main.js", "console.log(41 + 1)");
const { stdout } = await box.exec("node src/main.js");   // "42\n"
process.stdout.write(stdout);
await sandboxes.remove("w");
JS
# run_example NAME RUNTIME: the example prints exactly 42
run_example() {
        out=$(cd "$app" && clean timeout 120 "$2" example.mjs 2> "$tmp/example.err") || true
        if [ "$out" = 42 ]; then
                ok "the workspace example prints 42 under $1 ($("$2" --version))"
        else
                not_ok "the workspace example prints 42 under $1: got '$out'"
                sed 's/^/# /' "$tmp/example.err"
        fi
}
run_example "node" "$(command -v node)"

# every documented export is an ESM named import too (Node reads a CommonJS module's names from
# its module.exports literal: `version: () => ...` was invisible there)
cat > "$app/named.mjs" <<'JS'
import { Sandboxes, Box, ExecProcess, SandboxError, parseSize, parseDuration, version } from "nook-sandbox";
console.log([typeof Sandboxes, typeof Box, typeof ExecProcess, typeof SandboxError, parseSize("1k"), parseDuration("1s"), typeof version()].join(" "));
JS
named=$(cd "$app" && clean node named.mjs 2>&1)
if [ "$named" = "function function function function 1024 1000 string" ]; then
        ok "every export is an ESM named import (version, parseSize, parseDuration too)"
else
        not_ok "every export is an ESM named import: got '$named'"
fi

cat > "$app/nosmithers.cjs" <<'JS'
try { require("nook-sandbox/smithers"); console.log("loaded"); }
catch (e) { console.log(`${e.name} ${e.code}: ${e.message}`); }
JS
msg=$(cd "$app" && clean node nosmithers.cjs)
case "$msg" in
*"SandboxError missing_feature"*"npm install @smithers-orchestrator/sandbox@"*) ok "nook-sandbox/smithers without Smithers says what to npm install" ;;
*) not_ok "nook-sandbox/smithers without Smithers: got '$msg'" ;;
esac

# ---- Node 22 and Bun -----------------------------------------------------------------------------
rt="${NOOK_BUILD_DIR:-$tmp}/node-runtimes"
node22=${NOOK_TEST_NODE22:-$rt/node_modules/.bin/node}
bun=${NOOK_TEST_BUN:-$rt/node_modules/.bin/bun}
if [ ! -x "$node22" ] || [ ! -x "$bun" ]; then
        mkdir -p "$rt"
        [ -f "$rt/package.json" ] || echo '{"private":true}' > "$rt/package.json"
        (cd "$rt" && timeout 300 npm install --no-audit --no-fund --loglevel=error node@22 bun@1.3.3) > "$tmp/rt.log" 2>&1 || true
fi
for r in "Node 22:$node22" "Bun:$bun"; do
        name=${r%%:*}
        path=${r#*:}
        if [ -x "$path" ]; then
                run_example "$name" "$path"
        elif [ "${NOOK_REQUIRE_RUNTIMES:-0}" = 1 ]; then
                not_ok "$name: not available at $path (npm install node@22 bun@1.3.3 failed)"
        else
                n=$((n + 1))
                echo "ok $n # SKIP $name: not available (npm registry unreachable?)"
        fi
done

# ---- an installed libnook (pkg-config nook) is linked, not rebuilt --------------------------------
# A stand-in for nook's Debian package or `meson install`: a nook.pc naming this build's libnook.
if [ -n "${NOOK_BUILD_DIR:-}" ] && [ -f "$NOOK_BUILD_DIR/libnook.so" ]; then
        bdir=$(cd "$NOOK_BUILD_DIR" && pwd)
        mkdir -p "$tmp/pc" "$tmp/app3"
        version=$(sed -n 's/^ *"version": "\(.*\)",$/\1/p' "$root/bindings/node/package.json" | head -1)
        cat > "$tmp/pc/nook.pc" <<PC
Name: nook
Description: libnook (this build tree)
Version: $version
Libs: -L$bdir -lnook -Wl,-rpath,$bdir
Cflags: -I$root/include
PC
        if (cd "$tmp/app3" && clean PKG_CONFIG_PATH="$tmp/pc" timeout 300 npm install --offline --no-audit --no-fund --foreground-scripts "$tgz") > "$tmp/pc.log" 2>&1 &&
                grep -q "linking the installed libnook" "$tmp/pc.log"; then
                ok "with pkg-config nook, the install links the installed libnook"
                check "and builds no libnook of its own" test ! -e "$tmp/app3/node_modules/nook-sandbox/build/libnook.so.0"
                cp "$app/example.mjs" "$tmp/app3/"
                out=$(cd "$tmp/app3" && clean timeout 120 node example.mjs 2> "$tmp/example.err") || true
                if [ "$out" = 42 ]; then ok "the example prints 42 over the installed libnook"; else not_ok "example over the installed libnook: got '$out'"; sed 's/^/# /' "$tmp/example.err"; fi
        else
                not_ok "with pkg-config nook, the install links the installed libnook"
                sed 's/^/# /' "$tmp/pc.log"
        fi
else
        n=$((n + 1))
        echo "ok $n # SKIP no build tree (NOOK_BUILD_DIR) to stand in for an installed libnook"
fi

# ---- a machine without the build dependencies ---------------------------------------------------
app2="$tmp/app2"
mkdir -p "$app2" "$tmp/no-pc"
if (cd "$app2" && clean PKG_CONFIG_LIBDIR="$tmp/no-pc" timeout 300 npm install --offline --no-audit --no-fund "$tgz") > "$tmp/fail.log" 2>&1; then
        not_ok "an install without the -dev packages fails"
else
        check "an install without the -dev packages fails naming them (libseccomp-dev, libjansson-dev, libsqlite3-dev)" \
                sh -c "grep -q 'apt-get install.*libsqlite3-dev.*libjansson-dev.*libseccomp-dev' '$tmp/fail.log'"
        check "a failed install leaves no package behind" test ! -e "$app2/node_modules/nook-sandbox/build/nook_node.node"
fi
check "no build directory left in TMPDIR" sh -c "! ls -d '$tmp'/nook-sandbox-build-* 2>/dev/null"

echo "1..$n"
[ "$fails" = 0 ]
