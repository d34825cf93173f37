// SPDX-License-Identifier: Apache-2.0
"use strict";

/**
 * Every failure of libnook reaches JS as a SandboxError: `code` is libnook's error code as a
 * string (nook_errc_to_string: "invalid", "refused", "not_found", "exists", "state",
 * "missing_feature", "timeout", "io", "nomem", "busy", "internal", "conflict") and `message` is
 * libnook's own message.  A merge refused for conflicts ("conflict") carries `conflicts`.  `errno` is set when the failure came from a system call.
 */
class SandboxError extends Error {
  constructor(message, code, options) {
    super(message, options);
    this.name = "SandboxError";
    this.code = typeof code === "string" ? code : "internal";
  }
}

module.exports = { SandboxError };
