// SPDX-License-Identifier: Apache-2.0
"use strict";
const addon = require("./binding.js");
const { Sandboxes } = require("./sandboxes.js");
const { Box, ExecProcess } = require("./box.js");
const { SandboxError } = require("./errors.js");

/** libnook's Docker-style size parser: "512m" -> bytes. */
function parseSize(s) {
  return addon.parseSize(s);
}

/** libnook's duration parser: "1h30m" -> milliseconds. */
function parseDuration(s) {
  return addon.parseDuration(s);
}

/** The version of libnook. */
function version() {
  return addon.version();
}

// Every export a plain name: Node's ESM loader finds a CommonJS module's named exports by
// reading this object literal (cjs-module-lexer), and it sees only `name` and `name: name`
// entries, so `import { version } from "nook-sandbox"` needs these to be names, not arrows.
module.exports = { Sandboxes, Box, ExecProcess, SandboxError, parseSize, parseDuration, version };
