#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
"use strict";
// `npm pack` / `npm publish` (prepack): stages what the tarball needs to build the addon on the
// user's machine (scripts/install.js) under native/, which is not in git:
//   native/meson.build ... src/ include/ ...  libnook's own Meson project (the parts libnook.so
//                                            and nook-supervisor need), used when pkg-config
//                                            does not find an installed libnook;
//   native/node-api/                         the N-API and libuv headers of the Node that packs
//                                            (ABI-stable: any Node >= 20 or Bun loads the
//                                            result), so install needs no Node headers and no
//                                            download.
// scripts/postpack.js removes native/ again.
const fs = require("node:fs");
const path = require("node:path");

const pkg = path.resolve(__dirname, "..");
const repo = path.resolve(pkg, "..", "..");
const out = path.join(pkg, "native");

function die(msg) {
  console.error(`nook-sandbox prepack: ${msg}`);
  process.exit(1);
}

function copy(rel, dest = path.join(out, rel)) {
  fs.cpSync(path.join(repo, rel), dest, { recursive: true, dereference: true, filter: (src) => !/\.(o|so)$/.test(src) });
}

/** The directories the top meson.build enters unconditionally (not tests, not this package). */
function mesonSubdirs() {
  const text = fs.readFileSync(path.join(repo, "meson.build"), "utf8");
  const dirs = [];
  let depth = 0;
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (/^if\b/.test(t)) depth++;
    else if (/^endif\b/.test(t)) depth--;
    const m = /^subdir\('([^']+)'\)/.exec(t);
    if (m && depth === 0) dirs.push(m[1]);
  }
  return dirs;
}

function nodeHeaders() {
  const cands = [path.join(path.dirname(process.execPath), "..", "include", "node"), "/usr/include/node", "/usr/local/include/node"];
  for (const dir of cands) if (fs.existsSync(path.join(dir, "node_api.h"))) return dir;
  return die(`no Node headers (node_api.h) in ${cands.join(", ")}: install Debian's libnode-dev (or a Node with include/node)`);
}

if (!fs.existsSync(path.join(repo, "meson.build")) || !fs.existsSync(path.join(repo, "include", "nook.h")))
  die(`${repo} is not nook's source tree: pack from bindings/node of a nook checkout`);
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out);
for (const f of ["meson.build", "meson_options.txt", "nook.sym", "include", "scripts"]) copy(f);
for (const dir of mesonSubdirs()) {
  if (dir === "bindings/node") {
    // the addon is built by scripts/install.js, not by this Meson project
    fs.mkdirSync(path.join(out, dir), { recursive: true });
    fs.writeFileSync(path.join(out, dir, "meson.build"), "# the npm package builds its addon with scripts/install.js\n");
  } else copy(dir);
}
// the license, at the package's root where npm and its users look for it
fs.copyFileSync(path.join(repo, "LICENSE"), path.join(pkg, "LICENSE"));
const headers = nodeHeaders();
const napi = path.join(out, "node-api");
fs.mkdirSync(napi);
for (const f of ["node_api.h", "node_api_types.h", "js_native_api.h", "js_native_api_types.h", "uv.h", "uv", "node_version.h"])
  if (fs.existsSync(path.join(headers, f))) fs.cpSync(path.join(headers, f), path.join(napi, f), { recursive: true });
console.error(`nook-sandbox prepack: staged libnook's sources and ${headers}'s N-API headers in native/`);
