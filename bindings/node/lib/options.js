// SPDX-License-Identifier: Apache-2.0
"use strict";
// One rule for every options object of the API: an option it does not know is refused, and one
// it knows must have its type.  A typo (`dryrun`, `timeout`, `withworkspace`) must never mean
// "that option is off": a dry run that merges is worse than an error.
const { SandboxError } = require("./errors.js");

// what users of other sandbox APIs, or of a near spelling, write instead
const HINTS = {
  timeout: "timeoutMs",
  timeoutMS: "timeoutMs",
  dry_run: "dryRun",
  target: "into",
  envs: "env",
  workdir: "cwd",
  input: "stdin",
  maxBuffer: "maxOutputBytes",
};

const TYPES = {
  boolean: (v) => typeof v === "boolean",
  string: (v) => typeof v === "string",
  // a count of milliseconds or bytes
  "non-negative number": (v) => typeof v === "number" && v >= 0 && Number.isFinite(v),
  "positive integer": (v) => Number.isInteger(v) && v > 0,
};

function describe(v) {
  if (typeof v === "bigint") return `${v}n`;
  if (typeof v === "function" || typeof v === "symbol") return `a ${typeof v}`;
  return JSON.stringify(v) ?? typeof v;
}

/**
 * Checks options (undefined: none) against spec, { name: type } with a type of TYPES (or null:
 * any value, checked by the caller).  Returns the options object ({} for undefined).
 */
function checkOptions(options, spec, what) {
  if (options === undefined) return {};
  if (options === null || typeof options !== "object" || Array.isArray(options))
    throw new SandboxError(`${what}: the options must be an object, not ${options === null ? "null" : Array.isArray(options) ? "an array" : typeof options}`, "invalid");
  const known = Object.keys(spec);
  for (const [key, value] of Object.entries(options)) {
    if (!Object.hasOwn(spec, key)) {
      const hint = HINTS[key] ?? known.find((k) => k.toLowerCase() === key.toLowerCase());
      throw new SandboxError(
        `${what}: unknown option '${key}'${hint && known.includes(hint) ? `; did you mean '${hint}'?` : known.length ? ` (known: ${known.join(", ")})` : " (it takes none)"}`,
        "invalid",
      );
    }
    const type = spec[key];
    if (value === undefined || type === null) continue;
    if (!TYPES[type](value))
      throw new SandboxError(`${what}: option '${key}' must be a ${type}, not ${describe(value)}`, "invalid");
  }
  return options;
}

/** A name argument (a sandbox's, a snapshot's) must be a string: say which call and which one. */
function checkName(value, what, which = "name") {
  if (typeof value !== "string")
    throw new SandboxError(`${what}: the ${which} must be a string, not ${describe(value)}`, "invalid");
  return value;
}

module.exports = { checkOptions, checkName };
