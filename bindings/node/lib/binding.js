// SPDX-License-Identifier: Apache-2.0
"use strict";
// Finds and loads the N-API addon (nook_node.node), in this order:
//   1. $NOOK_NODE_ADDON, the path of the .node file (development: a Meson build's addon);
//   2. <package>/build/nook_node.node, built by scripts/install.js when the package is installed;
//   3. the Meson build directories of the source tree: <repo>/build-node, <repo>/build
//      (bindings/node/nook_node.node inside them), as made by `meson setup build-node`; only
//      when the package is that tree's bindings/node (<repo>/include/nook.h is there), never
//      for an installed package, whose "<repo>" would be the project that installed it.
const fs = require("node:fs");
const path = require("node:path");
const { SandboxError } = require("./errors.js");

function candidates() {
  const pkg = path.resolve(__dirname, "..");
  const repo = path.resolve(pkg, "..", "..");
  const out = [];
  if (process.env.NOOK_NODE_ADDON) out.push(path.resolve(process.env.NOOK_NODE_ADDON));
  out.push(path.join(pkg, "build", "nook_node.node"));
  if (fs.existsSync(path.join(repo, "include", "nook.h")) && fs.existsSync(path.join(repo, "bindings", "node", "lib", "binding.js")))
    for (const dir of ["build-node", "build"]) out.push(path.join(repo, dir, "bindings", "node", "nook_node.node"));
  return out;
}

function load() {
  const tried = candidates();
  for (const file of tried) {
    if (!fs.existsSync(file)) continue;
    let addon;
    try {
      addon = require(file);
    } catch (e) {
      // found but not loadable: most often the libnook it was linked against went away (the nook
      // Debian package removed after this package was installed against it)
      throw new SandboxError(
        `Cannot load nook-sandbox's native addon ${file}: ${e.message}. If the nook package (libnook) it was built against was removed or changed, rebuild it with 'npm rebuild nook-sandbox' (it then builds libnook from the sources it carries).`,
        "missing_feature",
      );
    }
    addon.setErrorClass(SandboxError);
    return addon;
  }
  throw new SandboxError(
    `Cannot find nook-sandbox's native addon (nook_node.node): its install script did not build it. Rebuild it with 'npm rebuild nook-sandbox' (it prints why it fails, e.g. missing -dev packages); in a nook source checkout, 'meson setup build-node && ninja -C build-node'. Looked in: ${tried.join(", ")}`,
    "missing_feature",
  );
}

module.exports = load();
