// SPDX-License-Identifier: Apache-2.0
"use strict";
// Shared setup for the node tests: a temp NOOK_HOME per process, the package from the tree.
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { removeHomeFolders } = require("./home.js");

const PKG = path.resolve(__dirname, "..", "..", "bindings", "node");
if (!process.env.NOOK_HOME_KEEP) {
  process.env.NOOK_HOME = fs.mkdtempSync(path.join(os.tmpdir(), "nook-node-test-"));
}
const HOME = process.env.NOOK_HOME;

const nook = require(PKG);

let seq = 0;
function uniqueName(prefix = "t") {
  return `${prefix}-${process.pid}-${seq++}`;
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function removeHome() {
  const s = new nook.Sandboxes({ home: HOME });
  for (const sb of await s.list().catch(() => [])) await s.remove(sb.name).catch(() => undefined);
  if (process.env.NOOK_HOME_KEEP) return;
  removeHomeFolders(HOME);
}

module.exports = { PKG, HOME, nook, uniqueName, sleep, removeHome };
