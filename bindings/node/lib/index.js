// SPDX-License-Identifier: Apache-2.0
"use strict";
const addon = require("./binding.js");
const { Sandboxes } = require("./sandboxes.js");
const { Box, ExecProcess } = require("./box.js");
const { SandboxError } = require("./errors.js");

module.exports = {
  Sandboxes,
  Box,
  ExecProcess,
  SandboxError,
  /** libnook's Docker-style size parser: "512m" -> bytes. */
  parseSize: (s) => addon.parseSize(s),
  /** libnook's duration parser: "1h30m" -> milliseconds. */
  parseDuration: (s) => addon.parseDuration(s),
  version: () => addon.version(),
};
