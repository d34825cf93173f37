// SPDX-License-Identifier: Apache-2.0
"use strict";
// Removes a test's NOOK_HOME and the runtime folder on a tmpfs that HOME/run links to
// (docs/design/runtime.md, "The runtime folder"): the node tests (helpers.js) and Bun's
// contract test (bun/contract.test.js) each make a home of their own.
const fs = require("node:fs");
const path = require("node:path");

function removeHomeFolders(home) {
  let rt = null;
  try {
    rt = fs.readlinkSync(path.join(home, "run"));
  } catch {
    rt = null;
  }
  if (rt && path.isAbsolute(rt)) fs.rmSync(rt, { recursive: true, force: true });
  fs.rmSync(home, { recursive: true, force: true });
}

module.exports = { removeHomeFolders };
